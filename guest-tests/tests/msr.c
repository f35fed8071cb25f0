/* SPDX-License-Identifier: MIT */
/*
 * PMU MSR semantics, on every model, from what CPUID enumerates (counts,
 * widths, bitmaps, PERF_CAPABILITIES), never from a model number:
 *  - values at RESET: PERFEVTSELx, PMCx, FIXED_CTRx, FIXED_CTR_CTRL,
 *    GLOBAL_STATUS, GLOBAL_INUSE, PEBS_ENABLE, DS_AREA, DEBUGCTL all 0;
 *    GLOBAL_CTRL with the enable bits of the GP counters set, nothing else;
 *  - round trips of every writable field: PERFEVTSELx (with Adaptive_Record,
 *    EQ, UMASK2 where enumerated), FIXED_CTR_CTRL (OS, USR, PMI, adaptive),
 *    GLOBAL_CTRL, GLOBAL_STATUS_SET/RESET, PEBS_ENABLE, DS_AREA, DEBUGCTL;
 *  - #GP, with the register left unchanged, for each reserved bit class:
 *    PERFEVTSELx 63:32 (less the enumerated extensions) and AnyThread where
 *    it is deprecated, FIXED_CTR_CTRL nibbles of counters that do not exist
 *    and 63:32, GLOBAL_CTRL past the counters, GLOBAL_STATUS_RESET/SET
 *    past the counters, PEBS_ENABLE past the counters, DEBUGCTL 5:3 and
 *    63:16, a non-canonical DS_AREA, writes to the read-only GLOBAL_STATUS,
 *    GLOBAL_INUSE and PERF_CAPABILITIES, and every MSR of counter n (one
 *    past the last);
 *  - counter writes: legacy IA32_PMCx writes bits 31:0 and sign-extends
 *    bit 31 to the width (EDX ignored), IA32_A_PMCx writes the full width
 *    and #GPs above it, fixed counters write the full width and #GP above
 *    it; every read is masked to the width;
 *  - RDPMC: ECX = i reads GP i, ECX = 1 << 30 | i fixed i, each exactly
 *    what RDMSR reads; the fast-read bit 31 and indexes past the last
 *    counter #GP.
 *
 * Sources: the SDM sections cited (Vol. 3B chapters 20-22, Vol. 2 for
 * CPUID, RDPMC and WRMSR, Vol. 4 for MSR reset values).
 */
#include "guest.h"

#define MSR_CORE_PERF_GLOBAL_STATUS_SET 0x391
#define MSR_CORE_PERF_GLOBAL_INUSE	0x392
#define MSR_IA32_MISC_ENABLE		0x1a0

#define BIT(n)	      ((uint64_t) 1 << (n))
#define GENMASK(h, l) ((~(uint64_t) 0 >> (63 - (h))) & (~(uint64_t) 0 << (l)))

/* IA32_PERFEVTSELx: SDM Vol. 3B 22.6.8.1; 21, 32, 33, 36, 47:40 per Vol. 3B 21.2 */
#define EVTSEL_ANY     BIT(21)
#define EVTSEL_IN_TX   BIT(32)
#define EVTSEL_IN_TXCP BIT(33)
#define EVTSEL_EQ      BIT(36)
#define EVTSEL_UMASK2  GENMASK(47, 40)

/* IA32_FIXED_CTR_CTRL nibble (SDM Vol. 3B 22.6.2.1, Figure 22-45); adaptive at 32 + 4i as Linux has
 * it */
#define FIXED_OS(i)	  BIT(4 * (i))
#define FIXED_USR(i)	  BIT(4 * (i) + 1)
#define FIXED_ANY(i)	  BIT(4 * (i) + 2)
#define FIXED_PMI(i)	  BIT(4 * (i) + 3)
#define FIXED_ADAPTIVE(i) BIT(32 + 4 * (i))

#define GLOBAL_EN_PERF_METRICS BIT(48) /* SDM Vol. 3B §21.3.9.3 */

/* IA32_DEBUGCTL, SDM Vol. 3B 20.4.1, Figure 20-3 */
#define DEBUGCTL_LBR		  BIT(0)
#define DEBUGCTL_BTF		  BIT(1)
#define DEBUGCTL_BLD		  BIT(2)
#define DEBUGCTL_FREEZE_LBRS	  BIT(11)
#define DEBUGCTL_FREEZE_WHILE_SMM BIT(14)
#define DEBUGCTL_RTM		  BIT(15)

/* IA32_PERF_CAPABILITIES, SDM Vol. 3B 22.8, Figure 22-67 */
#define PERF_CAP_LBR_FMT	0x3ful
#define PERF_CAP_SMM_FREEZE	BIT(12)
#define PERF_CAP_FW_WRITE	BIT(13)
#define PERF_CAP_PEBS_BASELINE	BIT(14)
#define PERF_CAP_PERF_METRICS	BIT(15)
#define PERF_CAP_PEBS_OUTPUT_PT BIT(16)

#define RDPMC_FIXED (1u << 30)
#define RDPMC_FAST  (1u << 31)

#define GP_VEC 13

static unsigned int version, nr_gp, gp_width, fixed_width, pebs_fmt, la_bits;
static uint32_t fixed_map; /* fixed counters that exist: EDX[4:0] contiguous | ECX bitmap (v5) */
static unsigned int fixed_absent; /* the first fixed counter index that does not exist */
static uint64_t gp_en, gp_mask, fixed_mask, perf_cap;
static bool has_ds, has_tsx, has_rtm, has_bld, any_deprecated, has_eq, has_umask2;
static bool legacy_pebs, adaptive, metrics;

static uint64_t lowmask(unsigned int n)
{
	return n >= 64 ? ~0ull : BIT(n) - 1;
}

/* GLOBAL_CTRL/STATUS layout: GP i at bit i, fixed i at bit 32 + i (SDM Vol. 3B 22.6.2.2) */
static uint64_t counters_bits(void)
{
	return gp_en | (uint64_t) fixed_map << 32;
}

/*
 * Write base | b for each bit b of `bits` alone; return the bits whose
 * write did not #GP or did not leave `watch` reading `watch_val` (a
 * faulting WRMSR changes nothing).
 */
static uint64_t not_gp(uint32_t msr, uint64_t base, uint64_t bits, uint32_t watch,
		       uint64_t watch_val)
{
	uint64_t bad = 0;

	wrmsr(msr, base);
	for (unsigned int b = 0; b < 64; b++) {
		if (!(bits & BIT(b)))
			continue;
		if (wrmsr_safe(msr, base | BIT(b)) != GP_VEC || rdmsr(watch) != watch_val) {
			bad |= BIT(b);
			wrmsr(msr, base);
		}
	}
	return bad;
}

/* Same, for a register that reads back what was written. */
static uint64_t reserved_not_gp(uint32_t msr, uint64_t base, uint64_t bits)
{
	return not_gp(msr, base, bits, msr, base);
}

/* WRMSR v: true when it did not fault and v reads back; *got is what was read. */
static bool round_trips(uint32_t msr, uint64_t v, uint64_t *got)
{
	if (wrmsr_safe(msr, v)) {
		*got = ~0ull;
		return false;
	}
	*got = rdmsr(msr);
	return *got == v;
}

/* Both RDMSR and WRMSR of a nonexistent MSR #GP. */
static bool absent(uint32_t msr)
{
	uint64_t v;

	return rdmsr_safe(msr, &v) == GP_VEC && wrmsr_safe(msr, 0) == GP_VEC;
}

static void enumerate(void)
{
	struct cpuid_regs a = cpuid_regs(0xa, 0), one = cpuid_regs(1, 0), seven = { 0 };
	uint32_t max = cpuid_regs(0, 0).a;

	/* CPUID.0AH layout, SDM Vol. 2A CPUID */
	version = a.a & 0xff;
	nr_gp = a.a >> 8 & 0xff;
	gp_width = a.a >> 16 & 0xff;
	fixed_width = a.d >> 5 & 0xff;
	fixed_map = (uint32_t) lowmask(a.d & 0x1f) | (version >= 5 ? a.c : 0);
	while (fixed_absent < 32 && (fixed_map & BIT(fixed_absent)))
		fixed_absent++;
	gp_en = lowmask(nr_gp);
	gp_mask = lowmask(gp_width);
	fixed_mask = lowmask(fixed_width);
	any_deprecated = version >= 5 && (a.d & BIT(15));
	/* PDCM: PERF_CAPABILITIES exists (SDM Vol. 3B 22.8.1) */
	perf_cap = (one.c & BIT(15)) ? rdmsr(MSR_IA32_PERF_CAPABILITIES) : 0;
	pebs_fmt = PERF_CAP_PEBS_FORMAT(perf_cap);
	metrics = perf_cap & PERF_CAP_PERF_METRICS;
	has_ds = one.d & BIT(21);
	if (max >= 7)
		seven = cpuid_regs(7, 0);
	/* CPUID.07H: EBX[4] HLE, EBX[11] RTM, ECX[24] BUS_LOCK_DETECT (SDM Vol. 2A CPUID) */
	has_tsx = seven.b & (BIT(4) | BIT(11));
	has_rtm = seven.b & BIT(11);
	has_bld = seven.c & BIT(24);
	if (max >= 0x23) {
		struct cpuid_regs p = cpuid_regs(0x23, 0);

		has_umask2 = p.b & BIT(0);
		has_eq = p.b & BIT(1);
	}
	la_bits = 48;
	if (cpuid_regs(0x80000000, 0).a >= 0x80000008)
		la_bits = cpuid_regs(0x80000008, 0).a >> 8 & 0xff;
	/* Legacy PEBS: DS, MISC_ENABLE.PEBS_UNAVAILABLE = 0, PEBS_FMT not 0xF (Table 22-89, 22.8)
	 */
	legacy_pebs = has_ds && !(rdmsr(MSR_IA32_MISC_ENABLE) & BIT(12)) && pebs_fmt != 0xf;
	/* Adaptive PEBS: rely on it only with BASELINE and PEBS_FMT >= 4 (SDM Vol. 3B 22.8) */
	adaptive = legacy_pebs && (perf_cap & PERF_CAP_PEBS_BASELINE) && pebs_fmt >= 4;
}

/* Before anything is written: the RESET values. */
static void check_reset(void)
{
	uint64_t bad = 0, v;

	report_prefix("msr: reset: ");
	/* IA32_PERFEVTSELx: reset 0 (SDM Vol. 3B 22.6.8.1, Figure 22-70) */
	for (unsigned int i = 0; i < nr_gp; i++)
		if (rdmsr(MSR_IA32_PERFEVTSEL0 + i))
			bad |= BIT(i);
	report(!bad, "PERFEVTSEL0..%u read 0 (not: %lx)", nr_gp - 1, bad);
	/*
	 * Counters are undefined after RESET (SDM Vol. 3B 22.6.2, note):
	 * a vPMU picks the deterministic 0, and nothing counts at RESET
	 * (every event select and FIXED_CTR_CTRL is 0).
	 */
	bad = 0;
	for (unsigned int i = 0; i < nr_gp; i++)
		if (rdmsr(MSR_IA32_PMC0 + i))
			bad |= BIT(i);
	for (unsigned int i = 0; i < 32; i++)
		if ((fixed_map & BIT(i)) && rdmsr(MSR_CORE_PERF_FIXED_CTR0 + i))
			bad |= BIT(32 + i);
	report(!bad, "PMCx and FIXED_CTRx read 0 (not, in GLOBAL_CTRL layout: %lx)", bad);
	/* IA32_FIXED_CTR_CTRL: reset 0 (SDM Vol. 3B 22.6.2.1) */
	v = rdmsr(MSR_CORE_PERF_FIXED_CTR_CTRL);
	report(v == 0, "FIXED_CTR_CTRL reads %lx, want 0", v);
	/*
	 * GLOBAL_CTRL: SDM Vol. 3B §21.2.2 sets
	 * the GP counters' enable bits at RESET, so that v1 software, which
	 * knows only PERFEVTSELx.EN, counts; fixed enables and the rest are 0.
	 * (KVM does the same since 6.10.)
	 */
	v = rdmsr(MSR_CORE_PERF_GLOBAL_CTRL);
	report(v == gp_en, "GLOBAL_CTRL reads %lx, want %lx (the %u GP enables)", v, gp_en, nr_gp);
	/* GLOBAL_STATUS: nothing overflowed, nothing changed */
	v = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	report(v == 0, "GLOBAL_STATUS reads %lx, want 0", v);
	if (version >= 4) {
		/* GLOBAL_INUSE (SDM Vol. 3B §21.2.4.3): no event select, no fixed ring bits, no PMI
		 * bit */
		v = rdmsr(MSR_CORE_PERF_GLOBAL_INUSE);
		report(v == 0, "GLOBAL_INUSE reads %lx, want 0", v);
	}
	/* IA32_PEBS_ENABLE: RESET value 0 (SDM Vol. 3B Figures 22-44, 22-68) */
	if (legacy_pebs) {
		v = rdmsr(MSR_IA32_PEBS_ENABLE);
		report(v == 0, "PEBS_ENABLE reads %lx, want 0", v);
	}
	/*
	 * IA32_DS_AREA exists with CPUID.01H:EDX[21] and DS is disabled at
	 * RESET (SDM Vol. 3B 20.4.9); its reset value 0 is SDM Vol. 4 Table 2-2.
	 */
	if (has_ds) {
		v = rdmsr(MSR_IA32_DS_AREA);
		report(v == 0, "DS_AREA reads %lx, want 0", v);
	} else {
		report(absent(MSR_IA32_DS_AREA), "no DS (CPUID.01H:EDX[21] = 0): DS_AREA #GPs");
	}
	/* IA32_DEBUGCTL: reset 0 (SDM Vol. 4 Table 2-2; Vol. 3B 20.4.1) */
	v = rdmsr(MSR_IA32_DEBUGCTL);
	report(v == 0, "DEBUGCTL reads %lx, want 0", v);
}

static void check_evtsel(void)
{
	uint64_t valid = GENMASK(31, 0) & ~EVTSEL_ANY, reserved, v, got = 0;
	uint64_t base = 0xc0 | EVTSEL_USR | EVTSEL_OS; /* no EN: nothing counts */
	uint64_t bad_rt = 0, bad_res = 0;

	report_prefix("msr: evtsel: ");
	/*
	 * Bits 31:0 per SDM Vol. 3B 22.6.8.1 less AnyThread (21);
	 * Adaptive_Record (34) with adaptive PEBS (22.9.2.1);
	 * IN_TX/IN_TXCP (32, 33) only with TSX (21.2), EQ (36) and
	 * UMASK2 (47:40) only where CPUID.23H.0:EBX[1]/[0] enumerate them.
	 */
	if (has_tsx)
		valid |= EVTSEL_IN_TX | EVTSEL_IN_TXCP;
	if (adaptive)
		valid |= EVTSEL_ADAPTIVE;
	if (has_eq)
		valid |= EVTSEL_EQ;
	if (has_umask2)
		valid |= EVTSEL_UMASK2;
	reserved = GENMASK(63, 32) & ~valid;
	/*
	 * AnyThread deprecation (CPUID.0AH:EDX[15], v5+): the bit no longer
	 * exists, so it is reserved (SDM Vol. 3B §21.2.5.1, as KVM and Linux
	 * read it).
	 */
	if (any_deprecated)
		reserved |= EVTSEL_ANY;

	for (unsigned int i = 0; i < nr_gp; i++) {
		uint32_t msr = MSR_IA32_PERFEVTSEL0 + i;

		if (!round_trips(msr, valid, &got) ||
		    !round_trips(msr, valid & 0x5a5aa55a5a5aa55aul, &v))
			bad_rt |= BIT(i);
		bad_res |= reserved_not_gp(msr, base, reserved);
		wrmsr(msr, 0);
	}
	report(!bad_rt,
	       "PERFEVTSEL0..%u: writable bits %lx round-trip (failing counters %lx, read %lx)",
	       nr_gp - 1, valid, bad_rt, got);
	report(!bad_res, "PERFEVTSEL0..%u: each reserved bit of %lx #GPs, value kept (wrong: %lx)",
	       nr_gp - 1, reserved, bad_res);
	/* The named bits alone, on the last counter, so that a failure says which */
	if (adaptive) {
		bool ok =
			round_trips(MSR_IA32_PERFEVTSEL0 + nr_gp - 1, base | EVTSEL_ADAPTIVE, &got);

		report(ok, "Adaptive_Record (34) writable: adaptive PEBS (read %lx)", got);
	} else {
		report(wrmsr_safe(MSR_IA32_PERFEVTSEL0 + nr_gp - 1, base | EVTSEL_ADAPTIVE) ==
			       GP_VEC,
		       "Adaptive_Record (34) #GPs: no adaptive PEBS");
	}
	if (any_deprecated) {
		report(wrmsr_safe(MSR_IA32_PERFEVTSEL0 + nr_gp - 1, base | EVTSEL_ANY) == GP_VEC,
		       "AnyThread (21) deprecated (CPUID.0AH:EDX[15]): #GP");
	} else {
		int vec = wrmsr_safe(MSR_IA32_PERFEVTSEL0, base | EVTSEL_ANY);

		/*
		 * Writable per the SDM here (v3+, not deprecated), but it counts
		 * the sibling thread, which vpmu and KVM refuse (DESIGN: event
		 * filter): which of the two a vPMU does is policy, not checked.
		 */
		report_skip("AnyThread (21) not deprecated (v%u): WRMSR gave vector %d; policy, "
			    "not checked",
			    version, vec);
	}
	wrmsr(MSR_IA32_PERFEVTSEL0, 0);
	wrmsr(MSR_IA32_PERFEVTSEL0 + nr_gp - 1, 0);
}

static void check_fixed_ctrl(void)
{
	uint64_t valid = 0, any = 0, reserved, bad, got;
	bool ok;

	report_prefix("msr: fixed_ctr_ctrl: ");
	/* Per counter i, nibble 4i: 0 OS, 1 USR, 3 PMI (SDM Vol. 3B 22.6.2.1, Figure 22-45) */
	for (unsigned int i = 0; i < 8; i++) {
		if (!(fixed_map & BIT(i)))
			continue;
		valid |= FIXED_OS(i) | FIXED_USR(i) | FIXED_PMI(i);
		any |= FIXED_ANY(i);
		/* FCx_Adaptive_Record (SDM Vol. 3B 22.9.2.1; at 32 + 4i as Linux has it) */
		if (adaptive)
			valid |= FIXED_ADAPTIVE(i);
	}
	/*
	 * Everything else is reserved: the nibbles of counters that do not
	 * exist, 63:32 but the adaptive bits, and the AnyThread bits (2 + 4i)
	 * where AnyThread is deprecated or (before v3) does not exist.
	 */
	reserved = ~valid;
	if (version >= 3 && !any_deprecated)
		reserved &= ~any;
	ok = round_trips(MSR_CORE_PERF_FIXED_CTR_CTRL, valid, &got);
	report(ok, "writable bits %lx round-trip (read %lx)", valid, got);
	ok = round_trips(MSR_CORE_PERF_FIXED_CTR_CTRL, valid & 0xa5a5a5a53a3a3a3aul, &got);
	report(ok, "pattern %lx round-trips (read %lx)", valid & 0xa5a5a5a53a3a3a3aul, got);
	bad = reserved_not_gp(MSR_CORE_PERF_FIXED_CTR_CTRL, FIXED_OS(0), reserved);
	report(!bad, "each reserved bit of %lx #GPs, value kept (wrong: %lx)", reserved, bad);
	if (fixed_absent < 8) {
		uint64_t nib = GENMASK(4 * fixed_absent + 3, 4 * fixed_absent);

		report(!(bad & nib), "nibble of FIXED_CTR%u (absent) #GPs", fixed_absent);
	}
	/* AnyThread of FIXED_CTR0 alone; not deprecated it is policy, as for PERFEVTSELx.AnyThread
	 */
	if (any_deprecated)
		report(wrmsr_safe(MSR_CORE_PERF_FIXED_CTR_CTRL, FIXED_OS(0) | FIXED_ANY(0)) ==
			       GP_VEC,
		       "AnyThread of FIXED_CTR0 (bit 2) deprecated: #GP");
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0);
}

/* GLOBAL_STATUS_RESET/SET bits that no status bit stands behind. */
static uint64_t status_reserved(void)
{
	/*
	 * Counter bits past the last counter, 47:32 past the fixed ones,
	 * 54:49 and 57:56 (SDM Vol. 3B 22.6.2.2, Figures 22-47/48; 48
	 * PERF_METRICS, 55 ToPA, 58-61 per Vol. 3B 21.2, left out here but 48
	 * without PERF_METRICS).
	 */
	uint64_t r = (GENMASK(31, 0) & ~gp_en) | (GENMASK(47, 32) & ~((uint64_t) fixed_map << 32)) |
		     GENMASK(54, 49) | GENMASK(57, 56);

	return metrics ? r : r | BIT(48);
}

static void check_global(void)
{
	uint64_t valid = counters_bits() | (metrics ? GLOBAL_EN_PERF_METRICS : 0);
	uint64_t res = status_reserved(), got, bad;
	bool ok;

	report_prefix("msr: global: ");
	/* GLOBAL_CTRL: GP i at bit i, fixed i at 32 + i (SDM Vol. 3B 22.6.2.2, Figure 22-46) */
	ok = round_trips(MSR_CORE_PERF_GLOBAL_CTRL, valid, &got);
	report(ok, "GLOBAL_CTRL: writable bits %lx round-trip (read %lx)", valid, got);
	ok = round_trips(MSR_CORE_PERF_GLOBAL_CTRL, 0, &got);
	report(ok, "GLOBAL_CTRL: 0 round-trips (read %lx)", got);
	bad = reserved_not_gp(MSR_CORE_PERF_GLOBAL_CTRL, 0, ~valid);
	report(!bad, "GLOBAL_CTRL: each bit past the counters (%lx) #GPs (wrong: %lx)", ~valid,
	       bad);

	/* GLOBAL_STATUS is read-only (SDM Vol. 3B 22.6.2.2) */
	report(wrmsr_safe(MSR_CORE_PERF_GLOBAL_STATUS, 0) == GP_VEC &&
		       wrmsr_safe(MSR_CORE_PERF_GLOBAL_STATUS, 1) == GP_VEC &&
		       rdmsr(MSR_CORE_PERF_GLOBAL_STATUS) == 0,
	       "GLOBAL_STATUS: WRMSR #GPs");
	/* GLOBAL_OVF_CTRL / STATUS_RESET (390H): one clear bit per status bit (Vol. 3B 22.6.2.2) */
	report(wrmsr_safe(MSR_CORE_PERF_GLOBAL_OVF_CTRL, counters_bits()) == 0,
	       "STATUS_RESET: the counter bits %lx write", counters_bits());
	bad = not_gp(MSR_CORE_PERF_GLOBAL_OVF_CTRL, 0, res, MSR_CORE_PERF_GLOBAL_STATUS, 0);
	report(!bad, "STATUS_RESET: each reserved bit of %lx #GPs (wrong: %lx)", res, bad);
	if (version >= 4) {
		/* GLOBAL_STATUS_SET (391H, SDM Vol. 3B §21.2.4): v4+, STATUS's layout */
		bad = not_gp(MSR_CORE_PERF_GLOBAL_STATUS_SET, 0, res, MSR_CORE_PERF_GLOBAL_STATUS,
			     0);
		report(!bad, "STATUS_SET: each reserved bit of %lx #GPs (wrong: %lx)", res, bad);
		wrmsr(MSR_CORE_PERF_GLOBAL_STATUS_SET, counters_bits());
		got = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
		report(got == counters_bits(), "STATUS_SET of %lx: GLOBAL_STATUS reads %lx",
		       counters_bits(), got);
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, counters_bits());
		got = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
		report(got == 0, "STATUS_RESET of the same: GLOBAL_STATUS reads %lx", got);
		/* GLOBAL_INUSE is read-only (SDM Vol. 3B §21.2.4.3) */
		report(wrmsr_safe(MSR_CORE_PERF_GLOBAL_INUSE, 0) == GP_VEC,
		       "GLOBAL_INUSE: WRMSR #GPs");
	}
	/* PERF_CAPABILITIES: all fields read-only (SDM Vol. 3B 22.8) */
	if (perf_cap)
		report(wrmsr_safe(MSR_IA32_PERF_CAPABILITIES, perf_cap) == GP_VEC &&
			       rdmsr(MSR_IA32_PERF_CAPABILITIES) == perf_cap,
		       "PERF_CAPABILITIES: WRMSR #GPs");
}

static void check_counters(void)
{
	bool fw = perf_cap & PERF_CAP_FW_WRITE;
	/* bit 31 set and bits above 31 that a sign extension would not give */
	uint64_t full = 0x0000123487654321ul;
	uint64_t bad_legacy = 0, bad_ext = 0, bad_edx = 0, bad_fw = 0, bad_over = 0, bad_fix = 0;

	report_prefix("msr: counters: ");
	for (unsigned int i = 0; i < nr_gp; i++) {
		uint32_t pmc = MSR_IA32_PMC0 + i, apmc = MSR_IA32_PMC0_FULL + i;

		/*
		 * Legacy IA32_PMCx: bits 31:0 written, bit 31 sign-extended to the
		 * width (SDM Vol. 3B 22.6.8.2); EDX plays no part.
		 */
		wrmsr(pmc, 0x1234);
		if (rdmsr(pmc) != 0x1234 || (fw && rdmsr(apmc) != 0x1234))
			bad_legacy |= BIT(i);
		wrmsr(pmc, 0x80000000u);
		if (rdmsr(pmc) != (gp_mask & ~0x7ffffffful))
			bad_ext |= BIT(i);
		wrmsr(pmc, 0xffffffffu);
		if (rdmsr(pmc) != gp_mask)
			bad_ext |= BIT(i);
		if (wrmsr_safe(pmc, 0xdeadbeef7ffffff0ul) || rdmsr(pmc) != 0x7ffffff0)
			bad_edx |= BIT(i);
		if (!fw)
			continue;
		/*
		 * IA32_A_PMCx: the full width (SDM Vol. 3B 22.8, FULL_WRITE[13]);
		 * bits above it are reserved (Vol. 3B 22.2.8; as for the fixed
		 * counters, 22.6.2.1): #GP.
		 */
		if (!round_trips(apmc, full & gp_mask, &(uint64_t){ 0 }) ||
		    rdmsr(pmc) != (full & gp_mask))
			bad_fw |= BIT(i);
		if (!round_trips(apmc, gp_mask, &(uint64_t){ 0 }) || rdmsr(pmc) != gp_mask)
			bad_fw |= BIT(i);
		wrmsr(apmc, 0x55);
		if (not_gp(apmc, 0x55, BIT(gp_width) | BIT(63), pmc, 0x55))
			bad_over |= BIT(i);
		wrmsr(apmc, 0);
	}
	report(!bad_legacy, "legacy write 1234 reads back 1234 (failing counters %lx)", bad_legacy);
	report(!bad_ext,
	       "legacy writes of 80000000 / ffffffff read %lx / %lx: bit 31 sign-extended "
	       "to %u bits (failing counters %lx)",
	       gp_mask & ~0x7ffffffful, gp_mask, gp_width, bad_ext);
	report(!bad_edx,
	       "legacy write of deadbeef7ffffff0: no #GP, reads 7ffffff0 (failing counters %lx)",
	       bad_edx);
	if (fw) {
		report(!bad_fw,
		       "full-width writes of %lx and %lx read back, via PMCx too (failing %lx)",
		       full & gp_mask, gp_mask, bad_fw);
		report(!bad_over,
		       "full-width write of bit %u (the width) or 63 #GPs, value kept "
		       "(failing counters %lx)",
		       gp_width, bad_over);
		report(absent(MSR_IA32_PMC0_FULL + nr_gp),
		       "A_PMC%u (counter %u does not exist) #GPs", nr_gp, nr_gp);
	} else {
		report(absent(MSR_IA32_PMC0_FULL), "no FULL_WRITE: A_PMC0 #GPs");
	}
	report(absent(MSR_IA32_PMC0 + nr_gp), "PMC%u (counter %u does not exist) #GPs", nr_gp,
	       nr_gp);
	report(absent(MSR_IA32_PERFEVTSEL0 + nr_gp), "PERFEVTSEL%u #GPs", nr_gp);

	/* Fixed counters: full width written, bits above it reserved (SDM Vol. 3B 22.6.2.1) */
	for (unsigned int i = 0; i < 32; i++) {
		uint32_t msr = MSR_CORE_PERF_FIXED_CTR0 + i;

		if (!(fixed_map & BIT(i)))
			continue;
		if (!round_trips(msr, full & fixed_mask, &(uint64_t){ 0 }) ||
		    !round_trips(msr, fixed_mask, &(uint64_t){ 0 }) ||
		    reserved_not_gp(msr, 0x66, BIT(fixed_width) | BIT(63)))
			bad_fix |= BIT(i);
		wrmsr(msr, 0);
	}
	report(!bad_fix, "FIXED_CTRx: %lx and %lx round-trip, bit %u and 63 #GP (failing %x)",
	       full & fixed_mask, fixed_mask, fixed_width, (uint32_t) bad_fix);
	report(absent(MSR_CORE_PERF_FIXED_CTR0 + fixed_absent), "FIXED_CTR%u (does not exist) #GPs",
	       fixed_absent);
}

static void check_rdpmc(void)
{
	uint64_t bad = 0, v;
	int vec;

	report_prefix("msr: rdpmc: ");
	/*
	 * ECX[30] selects the fixed counters, ECX[15:0] the index (SDM Vol.
	 * 2B RDPMC); it reads what RDMSR reads, the counter's
	 * width and no more.
	 */
	for (unsigned int i = 0; i < nr_gp; i++) {
		wrmsr(MSR_IA32_PMC0 + i, 0x1000u * (i + 1) + i);
		if (rdpmc_safe(i, &v) || v != 0x1000u * (i + 1) + i)
			bad |= BIT(i);
	}
	for (unsigned int i = 0; i < 32; i++) {
		if (!(fixed_map & BIT(i)))
			continue;
		wrmsr(MSR_CORE_PERF_FIXED_CTR0 + i, 0x2000u * (i + 1) + i);
		if (rdpmc_safe(RDPMC_FIXED | i, &v) || v != 0x2000u * (i + 1) + i)
			bad |= BIT(32 + i);
	}
	report(!bad, "ECX = i and 1 << 30 | i read each GP and fixed counter (failing %lx)", bad);
	wrmsr(MSR_IA32_PMC0, 0xffffffffu); /* -1: sign-extended to the width */
	vec = rdpmc_safe(0, &v);
	report(!vec && v == gp_mask, "GP0 = -1 reads %lx: the %u-bit width, zero above", v,
	       gp_width);
	wrmsr(MSR_CORE_PERF_FIXED_CTR0, fixed_mask);
	vec = rdpmc_safe(RDPMC_FIXED, &v);
	report(!vec && v == fixed_mask, "FIXED0 = all ones reads %lx: the %u-bit width", v,
	       fixed_width);

	report(rdpmc_safe(nr_gp, &v) == GP_VEC, "ECX = %u (no such GP counter) #GPs", nr_gp);
	report(rdpmc_safe(RDPMC_FIXED | fixed_absent, &v) == GP_VEC,
	       "ECX = 1 << 30 | %u (no such fixed counter) #GPs", fixed_absent);
	/*
	 * Fast read (ECX[31]) is the NetBurst/P6 encoding (SDM Vol. 3B 22.6.3-
	 * 22.6.9); with architectural perfmon ECX[31:16] is the counter type
	 * and 8000H is none (Vol. 2B RDPMC): #GP, alone or with a type.
	 */
	report(rdpmc_safe(RDPMC_FAST, &v) == GP_VEC &&
		       rdpmc_safe(RDPMC_FAST | RDPMC_FIXED, &v) == GP_VEC,
	       "fast-read bit 31 #GPs (ECX = 80000000, c0000000)");
	if (metrics)
		report_skip("RDPMC ECX = 1 << 29 (PERF_METRICS, SDM Vol. 2B RDPMC): "
			    "not checked by this program");

	for (unsigned int i = 0; i < nr_gp; i++)
		wrmsr(MSR_IA32_PMC0 + i, 0);
	for (unsigned int i = 0; i < 32; i++)
		if (fixed_map & BIT(i))
			wrmsr(MSR_CORE_PERF_FIXED_CTR0 + i, 0);
}

static void check_pebs_enable(void)
{
	uint64_t valid, reserved, got, bad;
	bool ok;

	report_prefix("msr: pebs_enable: ");
	if (pebs_fmt == 0xf) {
		/* Architectural PEBS: PEBS_UNAVAILABLE stays 1 (SDM Vol. 3B 22.10.1.2) */
		report(rdmsr(MSR_IA32_MISC_ENABLE) & BIT(12),
		       "PEBS_FMT 0xF: MISC_ENABLE.PEBS_UNAVAILABLE reads 1");
		report_skip("PEBS_FMT 0xF: no legacy PEBS, IA32_PEBS_ENABLE not checked");
		return;
	}
	if (!legacy_pebs) {
		report_skip("no PEBS (DS %u, PEBS_FMT %u, PEBS_UNAVAILABLE): not checked", has_ds,
			    pebs_fmt);
		return;
	}
	if (perf_cap & PERF_CAP_PEBS_BASELINE) {
		/*
		 * PEBS_BASELINE: every enumerated counter has its bit, GP from 0,
		 * fixed from 32, the rest reserved (SDM Vol. 3B 22.9.1, Figure 22-68);
		 * 62:60 only with PEBS_OUTPUT_PT_AVAIL [Table 22-77], left out then.
		 */
		valid = counters_bits();
		reserved = ~valid;
		if (perf_cap & PERF_CAP_PEBS_OUTPUT_PT)
			reserved &= ~GENMASK(62, 60);
	} else {
		/*
		 * Before the baseline: PEBS_EN_PMCi at i, and (Nehalem on) the
		 * load-latency enables at 32 + i (SDM Vol. 3B 22.3.1.1.2, as
		 * Linux uses them); bit 63 (SNB's PS_EN) left out.
		 */
		valid = gp_en | gp_en << 32;
		reserved = GENMASK(62, 0) & ~valid;
	}
	ok = round_trips(MSR_IA32_PEBS_ENABLE, valid, &got);
	report(ok, "writable bits %lx round-trip (read %lx)", valid, got);
	ok = round_trips(MSR_IA32_PEBS_ENABLE, valid & 0x5555555555555555ul, &got);
	report(ok, "%lx round-trips (read %lx)", valid & 0x5555555555555555ul, got);
	bad = reserved_not_gp(MSR_IA32_PEBS_ENABLE, 1, reserved);
	report(!bad, "each reserved bit of %lx #GPs, value kept (wrong: %lx)", reserved, bad);
	wrmsr(MSR_IA32_PEBS_ENABLE, 0);
}

static void check_ds_area(void)
{
	uint64_t top = BIT(la_bits - 1) - 1, got, bad;
	bool ok;

	report_prefix("msr: ds_area: ");
	if (!has_ds) {
		report_skip("no DS: DS_AREA checked absent at reset");
		return;
	}
	/*
	 * A linear address (SDM Vol. 3B 20.4.9): any canonical value writes, a
	 * non-canonical one #GPs (SDM Vol. 2B WRMSR), with
	 * the CPUID.80000008H:EAX[15:8] address width.
	 */
	ok = round_trips(MSR_IA32_DS_AREA, 0xffff800000123000ul, &got);
	report(ok, "ffff800000123000 round-trips (read %lx)", got);
	ok = round_trips(MSR_IA32_DS_AREA, top & ~0xffful, &got);
	report(ok, "%lx (top of the lower half, %u-bit) round-trips (read %lx)", top & ~0xffful,
	       la_bits, got);
	bad = reserved_not_gp(MSR_IA32_DS_AREA, 0, GENMASK(63, la_bits - 1));
	report(!bad, "each single bit %u..63 (non-canonical) #GPs, value kept (wrong: %lx)",
	       la_bits - 1, bad);
	wrmsr(MSR_IA32_DS_AREA, 0);
}

static void check_debugctl(void)
{
	uint64_t valid = DEBUGCTL_BTF, reserved, got, bad = 0;
	bool ok;

	report_prefix("msr: debugctl: ");
	/* SDM Vol. 3B 20.4.1, Figure 20-3: 11 and 0 with (legacy) LBRs, 12 with v2+, 14 with
	 * SMM_FREEZE
	 */
	if (version >= 2)
		valid |= DEBUGCTL_FREEZE_PERFMON_ON_PMI;
	if (perf_cap & PERF_CAP_SMM_FREEZE)
		valid |= DEBUGCTL_FREEZE_WHILE_SMM;
	if (perf_cap & PERF_CAP_LBR_FMT)
		valid |= DEBUGCTL_LBR | DEBUGCTL_FREEZE_LBRS;
	/*
	 * Reserved: 5:3 and 63:16; FREEZE_WHILE_SMM without PERF_CAPABILITIES[12]
	 * (SDM Vol. 3B 20.4.1); BLD and RTM where CPUID does not enumerate them.
	 */
	reserved = GENMASK(5, 3) | GENMASK(63, 16);
	if (!(perf_cap & PERF_CAP_SMM_FREEZE))
		reserved |= DEBUGCTL_FREEZE_WHILE_SMM;
	if (!has_bld)
		reserved |= DEBUGCTL_BLD;
	if (!has_rtm)
		reserved |= DEBUGCTL_RTM;
	for (unsigned int b = 0; b < 64; b++)
		if ((valid & BIT(b)) && !round_trips(MSR_IA32_DEBUGCTL, BIT(b), &got))
			bad |= BIT(b);
	report(!bad, "each of bits %lx round-trips alone (wrong: %lx)", valid, bad);
	ok = round_trips(MSR_IA32_DEBUGCTL, valid, &got);
	report(ok, "%lx round-trips (read %lx)", valid, got);
	bad = reserved_not_gp(MSR_IA32_DEBUGCTL, DEBUGCTL_BTF, reserved);
	report(!bad, "each reserved bit of %lx #GPs, value kept (wrong: %lx)", reserved, bad);
	wrmsr(MSR_IA32_DEBUGCTL, 0);
}

int main(uint64_t arg)
{
	report_prefix("msr: ");
	idt_init();
	enumerate();
	printf("perfmon v%u: %u GP x %u bits, fixed %x x %u bits; PERF_CAPABILITIES %lx; DS %u; "
	       "%u-bit linear addresses\n",
	       version, nr_gp, gp_width, fixed_map, fixed_width, perf_cap, has_ds, la_bits);
	report(version >= 2 && nr_gp > 0 && gp_width > 32 && fixed_width > 32,
	       "perfmon v2+ with GP and fixed counters wider than 32 bits");
	if (version < 2 || !nr_gp || gp_width <= 32 || fixed_width <= 32)
		return report_summary();

	check_reset();
	/* Nothing counts from here on: the checks write counters and selects freely. */
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	check_evtsel();
	check_fixed_ctrl();
	check_global();
	check_counters();
	check_rdpmc();
	check_pebs_enable();
	check_ds_area();
	check_debugctl();
	return report_summary();
}
