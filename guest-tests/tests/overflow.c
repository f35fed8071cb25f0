/* SPDX-License-Identifier: MIT */
/*
 * Counter overflow and the PMI, on every model:
 *  - GLOBAL_STATUS overflow bits (GP i -> bit i, fixed i -> bit 32 + i)
 *    and the value a counter wraps to (the events past the overflow,
 *    masked to the CPUID.0AH width);
 *  - a PMI only with the counter's INT / fixed PMI bit, the status bit in
 *    either case;
 *  - the LVT performance counter entry: delivery as a fixed vector or an
 *    NMI, in x2APIC and xAPIC mode, the mask bit set by the delivery, no
 *    PMI through a masked entry;
 *  - the eventing point: from -N the PMI comes right after instruction N;
 *  - a second PMI while the first waits in the IRR merges into it;
 *  - GLOBAL_STATUS_RESET clears exactly the bits written, GLOBAL_STATUS_SET
 *    (v4+) sets them without a PMI;
 *  - freeze on PMI: streamlined (v4+, CTR_Frz) or legacy (v2-3, GLOBAL_CTRL
 *    cleared), counters frozen to the exact value.
 *
 * Counting convention of the counted region (exact on the emulator):
 *   #1 the WRMSR of GLOBAL_CTRL that enables counting (it retires with
 *   counting on), #2 mov, then n x (dec, jnz), then xor, xor, mov and the
 *   WRMSR that disables counting (it retires with counting off): 2n + 5.
 */
#include "guest.h"

#define MSR_CORE_PERF_GLOBAL_STATUS_SET 0x391
#define GLOBAL_STATUS_LBRS_FROZEN	(1ull << 58)
#define GLOBAL_STATUS_CTR_FRZ		(1ull << 59)
#define GLOBAL_STATUS_COND_CHG		(1ull << 63)
#define PERF_CAP_FW_WRITE		(1ull << 13)
#define EV_INST				0x00c0 /* INST_RETIRED.ANY_P, architectural event 1 */
#define EV_CYCLES			0x003c /* CPU_CLK_UNHALTED.THREAD_P, architectural event 0 */
#define PMI_VECTOR			0xf0
#define REGION_EXTRA			5 /* instructions of the region besides the 2n of the loop */
#define FIXED(i)			(32 + (i))

static unsigned int version, nr_gp, nr_fixed;
static uint64_t gp_mask, fixed_mask, perf_cap;

/* What a PMI handler saw; snapshots of GP0, GP1, FIXED0, FIXED1 before and after a busy loop. */
static volatile struct {
	int count;
	uint64_t vector, rip, rcx, status, ctrl, lvt, debugctl, watched;
	uint64_t ctr[2][4];
} seen;
static volatile unsigned int watch; /* the counter the handler reads first (seen.watched) */
static volatile bool handler_stops; /* the handler stops and clears what it saw */

extern char region_loop[], region_jnz[];

static uint64_t ctr_read(unsigned int c)
{
	return c >= 32 ? rdmsr(MSR_CORE_PERF_FIXED_CTR0 + c - 32) : rdmsr(MSR_IA32_PMC0 + c);
}

static void ctr_write(unsigned int c, uint64_t v)
{
	if (c >= 32)
		wrmsr(MSR_CORE_PERF_FIXED_CTR0 + c - 32, v);
	else if (perf_cap & PERF_CAP_FW_WRITE)
		wrmsr(MSR_IA32_PMC0_FULL + c, v);
	else /* legacy write: bit 31 is sign-extended to the width */
		wrmsr(MSR_IA32_PMC0 + c, v);
}

static uint64_t ctr_mask(unsigned int c)
{
	return c >= 32 ? fixed_mask : gp_mask;
}

/* Program counter c: GP with event ev (+ INT), fixed with OS|USR (+ PMI). */
static void ctr_setup(unsigned int c, uint16_t ev, bool intr)
{
	if (c >= 32) {
		unsigned int i = c - 32;
		uint64_t ctrl = rdmsr(MSR_CORE_PERF_FIXED_CTR_CTRL) & ~(0xfull << 4 * i);

		/* SDM Vol. 3B Fig. 21-2: per counter, bit 0 OS, 1 USR, 3 PMI */
		wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, ctrl | (uint64_t) (intr ? 0xb : 0x3) << 4 * i);
	} else {
		wrmsr(MSR_IA32_PERFEVTSEL0 + c,
		      ev | EVTSEL_USR | EVTSEL_OS | EVTSEL_EN | (intr ? EVTSEL_INT : 0));
	}
}

static void spin(unsigned int n)
{
	__asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(n));
}

static void snap(volatile uint64_t *v)
{
	v[0] = rdmsr(MSR_IA32_PMC0);
	v[1] = nr_gp > 1 ? rdmsr(MSR_IA32_PMC0 + 1) : 0;
	v[2] = rdmsr(MSR_CORE_PERF_FIXED_CTR0);
	v[3] = nr_fixed > 1 ? rdmsr(MSR_CORE_PERF_FIXED_CTR0 + 1) : 0;
}

static void on_pmi(struct frame *f)
{
	seen.watched = ctr_read(watch);
	seen.count++;
	seen.vector = f->vector;
	seen.rip = f->rip;
	seen.rcx = f->rcx;
	seen.status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	seen.ctrl = rdmsr(MSR_CORE_PERF_GLOBAL_CTRL);
	seen.debugctl = rdmsr(MSR_IA32_DEBUGCTL);
	seen.lvt = apic_read(APIC_LVTPC);
	snap(seen.ctr[0]);
	spin(100); /* 200 instructions the counters see unless frozen */
	snap(seen.ctr[1]);
	if (handler_stops) {
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, seen.status);
	}
	if (f->vector != 2)
		apic_eoi();
}

/*
 * The counted region: GLOBAL_CTRL = en, n x (dec, jnz), GLOBAL_CTRL = 0.
 * 2n + 5 instructions counted (header comment). Not inlined: the labels
 * must exist once.
 */
static void __attribute__((noinline)) region(uint64_t en, uint32_t n)
{
	uint32_t a = (uint32_t) en, d = (uint32_t) (en >> 32), c = MSR_CORE_PERF_GLOBAL_CTRL;

	/* clang-format off */
	__asm__ volatile(
		"wrmsr\n\t"
		"mov %[n], %%ecx\n"
		".globl region_loop\n"
		"region_loop:\n\t"
		"dec %%ecx\n"
		".globl region_jnz\n"
		"region_jnz:\n\t"
		"jnz region_loop\n\t"
		"xor %%eax, %%eax\n\t"
		"xor %%edx, %%edx\n\t"
		"mov $0x38f, %%ecx\n\t"
		"wrmsr\n\t"
		: "+a"(a), "+d"(d), "+c"(c)
		: [n] "r"(n)
		: "memory");
	/* clang-format on */
}

/* Everything off and zero, status clear, LVT set to lvt. */
static void reset(uint32_t lvt)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_IA32_DEBUGCTL, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0);
	for (unsigned int i = 0; i < nr_gp; i++) {
		wrmsr(MSR_IA32_PERFEVTSEL0 + i, 0);
		ctr_write(i, 0);
	}
	for (unsigned int i = 0; i < nr_fixed; i++)
		ctr_write(FIXED(i), 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
	apic_write(APIC_LVTPC, lvt);
	seen.count = 0;
	handler_stops = true;
}

static uint64_t bit(unsigned int c)
{
	return 1ull << c;
}

static const char *ctr_name(unsigned int c)
{
	static const char *names[] = { "GP0", "GP1", "GP2", "GP3", "GP4", "GP5", "GP6", "GP7" };
	static const char *fixed[] = { "FIXED0", "FIXED1", "FIXED2", "FIXED3" };

	return c >= 32 ? fixed[(c - 32) & 3] : names[c & 7];
}

/*
 * How many events counter c counts in region(n) from 0: instructions are
 * exact by construction; cycles per the emulator's model, measured once.
 */
static uint64_t baseline(unsigned int c, uint16_t ev, uint32_t n)
{
	reset(APIC_LVT_MASKED | PMI_VECTOR);
	ctr_setup(c, ev, false);
	region(bit(c), n);
	return ctr_read(c);
}

/*
 * Overflow without INT (SDM Vol. 3B 21.2.2, fig. 21-3 GLOBAL_STATUS): the
 * counter wraps to the events counted past the overflow, masked to its
 * width, its status bit (GP i: bit i, fixed i: bit 32 + i) and nothing else
 * is set, and no PMI comes although the LVT is unmasked.
 */
static void test_overflow_bits(void)
{
	const uint32_t n = 300;

	for (unsigned int k = 0; k < nr_gp + nr_fixed; k++) {
		unsigned int c = k < nr_gp ? k : FIXED(k - nr_gp);
		uint16_t ev = k & 1 ? EV_CYCLES : EV_INST;
		uint64_t total = baseline(c, ev, n), before = 100, v, status;
		uint32_t lvt;

		if (total < before) {
			/* fixed counter 3 is TOPDOWN.SLOTS, which the exact backend leaves unbacked
			 */
			report_skip("%s counted %lu events in the region (%s): too few to overflow",
				    ctr_name(c), total,
				    c == FIXED(3) ? "TOPDOWN.SLOTS, not counted by this backend"
						  : "?");
			continue;
		}
		reset(PMI_VECTOR);
		ctr_setup(c, ev, false);
		ctr_write(c, ctr_mask(c) + 1 - before);
		sti();
		region(bit(c), n);
		v = ctr_read(c);
		status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
		lvt = apic_read(APIC_LVTPC);
		cli();
		printf("%s (%s): %lu events in the region, preset -%lu: counter %lu, "
		       "GLOBAL_STATUS %lx\n",
		       ctr_name(c),
		       c >= 32	       ? "fixed"
		       : ev == EV_INST ? "instructions"
				       : "cycles",
		       total, before, v, status);
		if (c == 0)
			report(total == 2 * n + REGION_EXTRA,
			       "GP0 counts the region's %u instructions", 2 * n + REGION_EXTRA);
		if (c == FIXED(0))
			report(total == 2 * n + REGION_EXTRA,
			       "FIXED0 counts the region's %u instructions", 2 * n + REGION_EXTRA);
		report(v == total - before, "%s wraps to the %lu events past the overflow",
		       ctr_name(c), total - before);
		report(status == bit(c), "%s overflow sets GLOBAL_STATUS bit %u alone", ctr_name(c),
		       c);
		report(seen.count == 0 && lvt == PMI_VECTOR, "%s without %s: no PMI, LVT untouched",
		       ctr_name(c), c >= 32 ? "PMI" : "INT");
	}
}

/*
 * Legacy (32-bit) counter writes sign-extend bit 31 to the counter width
 * (SDM 21.2.6); overflow then wraps at the width, not at 2^32.
 */
static void test_legacy_write_wrap(void)
{
	const uint32_t n = 100;
	uint64_t v, status;

	reset(APIC_LVT_MASKED | PMI_VECTOR);
	ctr_setup(0, EV_INST, false);
	wrmsr(MSR_IA32_PMC0, (uint32_t) -50);
	v = rdmsr(MSR_IA32_PMC0);
	report(v == gp_mask - 49, "legacy write of -50 reads %lx (sign-extended to the width)", v);
	region(bit(0), n);
	v = rdmsr(MSR_IA32_PMC0);
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	report(v == 2 * n + REGION_EXTRA - 50 && status == 1,
	       "from -50: %lu past the overflow, GLOBAL_STATUS %lx", v, status);
}

/*
 * A PMI through the LVT (c: counter with INT / fixed PMI, lvt: the entry).
 * From -1000 the 1000th instruction of the region overflows it: #1 wrmsr,
 * #2 mov, then (dec, jnz) pairs, so #1000 is a taken jnz with ECX = n - 499
 * and the PMI frame's RIP is the loop head. With streamlined/legacy freeze
 * the handler reads the counter at 0, the events past the overflow.
 */
static void test_pmi(unsigned int c, uint32_t lvt, const char *apic)
{
	const uint32_t n = 2000;
	bool nmi = (lvt & 0x700) == APIC_DM_NMI;
	const char *how = nmi ? "NMI" : "fixed vector";
	uint64_t counted;

	reset(lvt);
	wrmsr(MSR_IA32_DEBUGCTL, DEBUGCTL_FREEZE_PERFMON_ON_PMI);
	ctr_setup(c, EV_INST, true);
	ctr_write(c, ctr_mask(c) + 1 - 1000);
	watch = c;
	sti();
	region(bit(c), n);
	cli();
	counted = 2 + 2 * (n - seen.rcx);
	printf("%s %s %s: %d PMI(s), vector %lu, RIP %lx, ECX %lu -> %lu instructions, counter "
	       "%lu, "
	       "GLOBAL_STATUS %lx, LVT %lx\n",
	       apic, how, ctr_name(c), seen.count, seen.vector, seen.rip, seen.rcx, counted,
	       seen.watched, seen.status, seen.lvt);
	report(seen.count == 1 && seen.vector == (nmi ? 2 : PMI_VECTOR),
	       "%s %s %s: one PMI, vector %u", apic, how, ctr_name(c), nmi ? 2 : PMI_VECTOR);
	report(counted == 1000 && seen.rip == (uint64_t) region_loop,
	       "%s %s %s: PMI right after instruction 1000 (the jnz at %p)", apic, how, ctr_name(c),
	       (void *) region_jnz);
	report(seen.watched == 0, "%s %s %s: counter frozen at 0 in the handler", apic, how,
	       ctr_name(c));
	report(seen.status == (bit(c) | (version >= 4 ? GLOBAL_STATUS_CTR_FRZ : 0)),
	       "%s %s %s: GLOBAL_STATUS bit %u%s", apic, how, ctr_name(c), c,
	       version >= 4 ? " and CTR_Frz" : "");
	/* the APIC sets the mask bit when it delivers (SDM Vol. 3A 11.5.1) */
	report(seen.lvt == (lvt | APIC_LVT_MASKED) &&
		       apic_read(APIC_LVTPC) == (lvt | APIC_LVT_MASKED),
	       "%s %s %s: LVT %x masked by the delivery (read %lx)", apic, how, ctr_name(c), lvt,
	       seen.lvt);
}

/* INT set, LVT masked: no PMI, the status bit still set, the counter wraps and counts on. */
static void test_masked_lvt(const char *apic)
{
	const uint32_t n = 300;
	uint64_t v, status;

	reset(APIC_LVT_MASKED | PMI_VECTOR);
	ctr_setup(0, EV_INST, true);
	ctr_write(0, gp_mask + 1 - 100);
	sti();
	region(bit(0), n);
	spin(10);
	cli();
	v = rdmsr(MSR_IA32_PMC0);
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	report(seen.count == 0, "%s masked LVT: no PMI", apic);
	report(status == 1 && v == 2 * n + REGION_EXTRA - 100,
	       "%s masked LVT: GLOBAL_STATUS %lx, counter %lu past the overflow", apic, status, v);
	report(apic_read(APIC_LVTPC) == (APIC_LVT_MASKED | PMI_VECTOR), "%s masked LVT unchanged",
	       apic);
}

/*
 * A PMI that comes while the first one is still pending in the IRR
 * (interrupts off) is taken in by it: the local APIC holds one request per
 * vector (SDM Vol. 3A 11.8.4, 11.8.5), so two overflows, each delivered
 * through an unmasked LVT, make one interrupt whose handler sees both
 * status bits.
 */
static void test_pmi_merged(const char *apic)
{
	const uint32_t n = 300;

	reset(PMI_VECTOR);
	ctr_setup(0, EV_INST, true);
	ctr_setup(1, EV_INST, true);
	ctr_write(0, gp_mask + 1 - 100);
	ctr_write(1, gp_mask + 1 - 100);
	region(bit(0), n); /* interrupts off: the PMI waits in the IRR, the LVT masked */
	apic_write(APIC_LVTPC, PMI_VECTOR);
	region(bit(1), n); /* a second PMI, same vector, the first still pending */
	sti();
	spin(10);
	cli();
	report(seen.count == 1 && seen.vector == PMI_VECTOR,
	       "%s two PMIs while the first waits in the IRR: one interrupt (%d)", apic,
	       seen.count);
	report(seen.status == 3, "%s that one handler sees both overflows (GLOBAL_STATUS %lx)",
	       apic, seen.status);
}

/*
 * GLOBAL_STATUS_RESET (0x390, GLOBAL_OVF_CTRL before v4) clears exactly
 * the bits written as 1 (Table 20-3: "Processor clears GLOBAL_STATUS").
 */
static void test_status_reset(void)
{
	unsigned int c2 = nr_gp > 1 ? 1 : FIXED(0);
	uint64_t all, after, expect;

	reset(APIC_LVT_MASKED | PMI_VECTOR);
	ctr_setup(0, EV_INST, false);
	ctr_setup(c2, EV_INST, false);
	ctr_setup(FIXED(0), EV_INST, false);
	ctr_write(0, gp_mask);
	ctr_write(c2, ctr_mask(c2));
	ctr_write(FIXED(0), fixed_mask);
	region(bit(0) | bit(c2) | bit(FIXED(0)), 10);
	all = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	expect = bit(0) | bit(c2) | bit(FIXED(0));
	report(all == expect, "three overflows: GLOBAL_STATUS %lx", all);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, bit(c2));
	after = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	report(after == (expect & ~bit(c2)), "STATUS_RESET of bit %u leaves %lx", c2, after);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, 0);
	report(rdmsr(MSR_CORE_PERF_GLOBAL_STATUS) == after, "STATUS_RESET of 0 clears nothing");
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, bit(0) | bit(FIXED(0)));
	after = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	report(after == 0, "STATUS_RESET of the rest leaves %lx", after);
	/* bits above the counters (GP: below 32) are reserved in STATUS_RESET */
	if (nr_gp < 32)
		report(wrmsr_safe(MSR_CORE_PERF_GLOBAL_OVF_CTRL, bit(nr_gp)) == 13,
		       "STATUS_RESET bit %u (no such counter): #GP", nr_gp);
}

/*
 * GLOBAL_STATUS_SET (0x391, perfmon v4+, SDM Vol. 4 Table 2-2) sets the
 * bits written as 1. It exists so that a VMM can restore a guest's
 * GLOBAL_STATUS (SDM Vol. 3B 21.2.4.2): it reports no overflow, so no PMI
 * is requested even with INT set and the LVT open. CTR_Frz set through it
 * freezes the counters like a freeze on PMI.
 */
static void test_status_set(void)
{
	const uint32_t n = 100;
	uint64_t s, v;

	if (version < 4) {
		report(wrmsr_safe(MSR_CORE_PERF_GLOBAL_STATUS_SET, 1) == 13,
		       "perfmon v%u: GLOBAL_STATUS_SET #GP", version);
		report_skip("GLOBAL_STATUS_SET is perfmon v4+; this model is v%u", version);
		return;
	}
	reset(PMI_VECTOR);
	ctr_setup(0, EV_INST, true);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
	sti();
	for (unsigned int k = 0; k < nr_gp + nr_fixed; k++) {
		unsigned int c = k < nr_gp ? k : FIXED(k - nr_gp);

		wrmsr(MSR_CORE_PERF_GLOBAL_STATUS_SET, bit(c));
		s = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
		report(s == bit(c), "STATUS_SET of %s: GLOBAL_STATUS %lx", ctr_name(c), s);
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, bit(c));
	}
	wrmsr(MSR_CORE_PERF_GLOBAL_STATUS_SET, bit(0) | bit(FIXED(0)) | GLOBAL_STATUS_BUFFER_OVF);
	wrmsr(MSR_CORE_PERF_GLOBAL_STATUS_SET, 0);
	s = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	spin(10);
	cli();
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	report(s == (bit(0) | bit(FIXED(0)) | GLOBAL_STATUS_BUFFER_OVF),
	       "STATUS_SET of PMC0, FIXED0, OvfBuf: GLOBAL_STATUS %lx", s);
	report(seen.count == 0 && apic_read(APIC_LVTPC) == PMI_VECTOR,
	       "STATUS_SET raises no PMI (GP0 has INT, LVT unmasked)");
	report(rdmsr(MSR_CORE_PERF_GLOBAL_STATUS_SET) == 0, "STATUS_SET reads 0");
	if (nr_gp < 32)
		report(wrmsr_safe(MSR_CORE_PERF_GLOBAL_STATUS_SET, bit(nr_gp)) == 13,
		       "STATUS_SET bit %u (no such counter): #GP", nr_gp);

	/* CTR_Frz through STATUS_SET stops counting; STATUS_RESET of it resumes */
	reset(APIC_LVT_MASKED | PMI_VECTOR);
	ctr_setup(0, EV_INST, false);
	ctr_setup(FIXED(0), EV_INST, false);
	wrmsr(MSR_CORE_PERF_GLOBAL_STATUS_SET, GLOBAL_STATUS_CTR_FRZ);
	region(bit(0) | bit(FIXED(0)), n);
	v = rdmsr(MSR_IA32_PMC0);
	report(v == 0 && rdmsr(MSR_CORE_PERF_FIXED_CTR0) == 0,
	       "CTR_Frz set by STATUS_SET: GP0 %lu, FIXED0 %lu after the region", v,
	       rdmsr(MSR_CORE_PERF_FIXED_CTR0));
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, GLOBAL_STATUS_CTR_FRZ);
	region(bit(0) | bit(FIXED(0)), n);
	v = rdmsr(MSR_IA32_PMC0);
	report(v == 2 * n + REGION_EXTRA && rdmsr(MSR_CORE_PERF_FIXED_CTR0) == v,
	       "CTR_Frz cleared: GP0 %lu, FIXED0 %lu", v, rdmsr(MSR_CORE_PERF_FIXED_CTR0));
}

/*
 * Freeze on PMI, SDM Vol. 3B 20.4.7 / Table 20-3. Streamlined
 * (v4+): the PMI request sets GLOBAL_STATUS.CTR_Frz (bit 59), GLOBAL_CTRL
 * is unchanged, every counter stops; STATUS_RESET of CTR_Frz resumes.
 * Legacy (v2-3): GLOBAL_CTRL is cleared. Freezing happens only for an
 * overflow "programmed to signal a PMI".
 * GP0 (INT) overflows from -1000; GP1 / FIXED0 count instructions from 0
 * and FIXED1 cycles, so each must read its count at instruction 1000.
 */
static void test_freeze(void)
{
	const uint32_t n = 2000, m = 100;
	bool streamlined = version >= 4;
	uint64_t en, v, status;
	unsigned int c2 = nr_gp > 1 ? 1 : FIXED(0);

	reset(PMI_VECTOR);
	handler_stops = false;
	wrmsr(MSR_IA32_DEBUGCTL, DEBUGCTL_FREEZE_PERFMON_ON_PMI);
	ctr_setup(0, EV_INST, true);
	ctr_write(0, gp_mask + 1 - 1000);
	ctr_setup(FIXED(0), EV_INST, false);
	en = bit(0) | bit(FIXED(0));
	if (nr_gp > 1) {
		ctr_setup(1, EV_INST, false);
		en |= bit(1);
	}
	if (nr_fixed > 1) {
		ctr_setup(FIXED(1), EV_INST, false);
		en |= bit(FIXED(1));
	}
	sti();
	region(en, n);
	cli();
	printf("freeze: PMI %d, GLOBAL_STATUS %lx, GLOBAL_CTRL %lx, GP0 %lu/%lu GP1 %lu/%lu "
	       "FIXED0 %lu/%lu FIXED1 %lu/%lu (before/after 200 handler instructions)\n",
	       seen.count, seen.status, seen.ctrl, seen.ctr[0][0], seen.ctr[1][0], seen.ctr[0][1],
	       seen.ctr[1][1], seen.ctr[0][2], seen.ctr[1][2], seen.ctr[0][3], seen.ctr[1][3]);
	report(seen.count == 1, "freeze: one PMI");
	if (streamlined) {
		report(seen.status == (bit(0) | GLOBAL_STATUS_CTR_FRZ),
		       "streamlined freeze: GLOBAL_STATUS = PMC0 | CTR_Frz (%lx)", seen.status);
		report(seen.ctrl == en, "streamlined freeze: GLOBAL_CTRL unchanged (%lx)",
		       seen.ctrl);
		report_skip(
			"legacy freeze (GLOBAL_CTRL cleared) is perfmon v2-3; this model is v%u",
			version);
	} else {
		report(seen.status == bit(0), "legacy freeze: GLOBAL_STATUS = PMC0 (%lx)",
		       seen.status);
		report(seen.ctrl == 0, "legacy freeze: GLOBAL_CTRL cleared (%lx)", seen.ctrl);
	}
	report(seen.ctr[0][0] == 0 && seen.ctr[1][0] == 0,
	       "freeze: GP0 stays at 0 past its overflow");
	report(seen.ctr[0][2] == 1000 && seen.ctr[1][2] == 1000,
	       "freeze: FIXED0 (no PMI) frozen at instruction 1000 too");
	if (nr_gp > 1)
		report(seen.ctr[0][1] == 1000 && seen.ctr[1][1] == 1000,
		       "freeze: GP1 (no INT) frozen at instruction 1000 too");
	if (nr_fixed > 1)
		report(seen.ctr[0][3] == seen.ctr[1][3] && seen.ctr[0][3] != 0,
		       "freeze: FIXED1 (cycles) frozen at %lu", seen.ctr[0][3]);
	/* the rest of the region ran frozen too */
	v = ctr_read(FIXED(0));
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	report(v == 1000 && rdmsr(MSR_IA32_PMC0) == 0,
	       "freeze: still frozen after the region (FIXED0 %lu, STATUS %lx)", v, status);
	if (streamlined) {
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, GLOBAL_STATUS_CTR_FRZ | bit(0));
		report(rdmsr(MSR_CORE_PERF_GLOBAL_STATUS) == 0, "STATUS_RESET clears CTR_Frz");
	}
	/* resumed: counts on from the frozen values */
	wrmsr(MSR_IA32_PERFEVTSEL0, 0);
	region(en & ~bit(0), m);
	v = ctr_read(FIXED(0));
	report(v == 1000 + 2 * m + REGION_EXTRA, "unfrozen: FIXED0 counts on to %lu", v);
	if (nr_gp > 1)
		report(ctr_read(1) == v, "unfrozen: GP1 counts on to %lu", ctr_read(1));

	/* overflow without INT: no PMI request, so no freeze */
	reset(PMI_VECTOR);
	wrmsr(MSR_IA32_DEBUGCTL, DEBUGCTL_FREEZE_PERFMON_ON_PMI);
	ctr_setup(0, EV_INST, false);
	ctr_setup(c2, EV_INST, false);
	ctr_write(0, gp_mask + 1 - 100);
	sti();
	region(bit(0) | bit(c2), m);
	cli();
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	v = ctr_read(0);
	report(seen.count == 0 && status == 1 && rdmsr(MSR_CORE_PERF_GLOBAL_CTRL) == 0,
	       "freeze on, overflow without INT: no PMI, GLOBAL_STATUS %lx (no CTR_Frz)", status);
	report(v == 2 * m + REGION_EXTRA - 100 && ctr_read(c2) == 2 * m + REGION_EXTRA,
	       "freeze on, overflow without INT: GP0 counts on to %lu, %s to %lu", v, ctr_name(c2),
	       ctr_read(c2));

	/*
	 * INT set, LVT masked: the counter still requests the PMI, so the
	 * freeze applies (SDM Vol. 3B 20.4.7: "programmed to signal a PMI"),
	 * though the APIC delivers nothing.
	 */
	reset(APIC_LVT_MASKED | PMI_VECTOR);
	wrmsr(MSR_IA32_DEBUGCTL, DEBUGCTL_FREEZE_PERFMON_ON_PMI);
	ctr_setup(0, EV_INST, true);
	ctr_setup(c2, EV_INST, false);
	ctr_write(0, gp_mask + 1 - 100);
	sti();
	region(bit(0) | bit(c2), m);
	cli();
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	report(seen.count == 0 && ctr_read(0) == 0 && ctr_read(c2) == 100,
	       "freeze on, LVT masked: no PMI, frozen at the overflow (%s %lu)", ctr_name(c2),
	       ctr_read(c2));
	report(status == (streamlined ? (1 | GLOBAL_STATUS_CTR_FRZ) : 1),
	       "freeze on, LVT masked: GLOBAL_STATUS %lx", status);
}

static void pmi_suite(const char *apic)
{
	test_pmi(0, PMI_VECTOR, apic);
	test_pmi(0, APIC_DM_NMI, apic);
	test_pmi(FIXED(0), PMI_VECTOR, apic);
	test_pmi(FIXED(0), APIC_DM_NMI, apic);
	if (nr_gp > 1) {
		test_pmi(nr_gp - 1, PMI_VECTOR, apic);
		test_pmi_merged(apic);
	}
	test_masked_lvt(apic);
}

int main(uint64_t arg)
{
	struct cpuid_regs a = cpuid_regs(0xa, 0);

	report_prefix("overflow: ");
	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	set_handler(2, on_pmi);
	version = a.a & 0xff;
	nr_gp = (a.a >> 8) & 0xff;
	gp_mask = (1ull << ((a.a >> 16) & 0xff)) - 1;
	nr_fixed = a.d & 0x1f;
	fixed_mask = (1ull << ((a.d >> 5) & 0xff)) - 1;
	if (nr_fixed > 4)
		nr_fixed = 4;
	printf("perfmon v%u: %u GP counters (mask %lx), %u fixed (mask %lx)\n", version, nr_gp,
	       gp_mask, nr_fixed, fixed_mask);
	report(version >= 2 && nr_gp >= 1 && nr_fixed >= 1,
	       "perfmon v2+ with GP and fixed counters");
	if (version < 2 || !nr_gp || !nr_fixed)
		return report_summary();
	perf_cap = rdmsr(MSR_IA32_PERF_CAPABILITIES);

	x2apic_enable();
	test_overflow_bits();
	test_legacy_write_wrap();
	pmi_suite("x2APIC");
	test_status_reset();
	test_status_set();
	test_freeze();

	xapic_enable();
	report(!apic_x2apic_mode() && (rdmsr(MSR_IA32_APIC_BASE) & 0xc00) == 0x800, "xAPIC mode");
	pmi_suite("xAPIC");
	test_freeze();
	reset(APIC_LVT_MASKED);
	return report_summary();
}
