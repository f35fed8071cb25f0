/* SPDX-License-Identifier: MIT */
/*
 * Last branch records (SDM Vol. 3B 20.4.8, 20.9-20.12):
 *  - models with LBRs (LBR format 5: FROM/TO + LBR_INFO, 32 entries on
 *    06_55H and 06_6AH): a known branch sequence (rel/indirect jmp and
 *    call, ret, taken Jcc, not-taken Jcc) read back from TOS downwards,
 *    exactly; LBR_INFO cycles and flags; TOS wrap; LBR_SELECT filters
 *    (Table 20-13) and call-stack mode; far branches (INT n, IRETQ, the
 *    PMI itself); freeze on PMI (20.4.7, 20.12.2);
 *  - models without (LBR_FMT 0): the LBR MSRs and DEBUGCTL.LBR #GP.
 *
 * The sequence (lbr_seq), with DEBUGCTL written inside it so that only its
 * branches are recorded:
 *   b0: jmp t0                 NEAR_REL_JMP
 *   b1: call fn  (fn: ret)     NEAR_REL_CALL, then NEAR_RET back to t2
 *   b3: jmp *%rax  -> t3       NEAR_IND_JMP
 *   b4: call *%rax -> fn       NEAR_IND_CALL, then NEAR_RET back to t5
 *   b6: jz t6 (taken)          JCC
 *   nt: jnz (not taken)        nothing
 */
#include "guest.h"

#define MSR_LBR_SELECT		    0x1c8
#define MSR_LBR_TOS		    0x1c9
#define MSR_LBR_FROM(i)		    (0x680 + (i))
#define MSR_LBR_TO(i)		    (0x6c0 + (i))
#define MSR_LBR_INFO(i)		    (0xdc0 + (i))
#define DEBUGCTL_LBR		    (1ull << 0)
#define DEBUGCTL_FREEZE_LBRS_ON_PMI (1ull << 11)
#define GLOBAL_STATUS_LBR_FRZ	    (1ull << 58)
#define LBR_INFO_CYCLES		    0xffffull
#define CPUID_7_EDX_ARCH_LBR	    (1u << 19)

/* MSR_LBR_SELECT, Table 20-13: a set bit suppresses the class */
#define SEL_CPL_EQ_0	  (1u << 0)
#define SEL_CPL_NEQ_0	  (1u << 1)
#define SEL_JCC		  (1u << 2)
#define SEL_NEAR_REL_CALL (1u << 3)
#define SEL_NEAR_IND_CALL (1u << 4)
#define SEL_NEAR_RET	  (1u << 5)
#define SEL_NEAR_IND_JMP  (1u << 6)
#define SEL_NEAR_REL_JMP  (1u << 7)
#define SEL_FAR_BRANCH	  (1u << 8)
#define SEL_EN_CALLSTACK  (1u << 9)

#define PMI_VECTOR 0xf0
#define NR_SEQ	   7

extern char lbr_b0[], lbr_t0[], lbr_b1[], lbr_fn[], lbr_ret[], lbr_t2[], lbr_b3[], lbr_t3[];
extern char lbr_b4[], lbr_t5[], lbr_b6[], lbr_t6[];
extern char cs_b0[], cs_a[], cs_b1[], cs_b[], cs_ret_b[], cs_t1[];
extern char frz_loop[], frz_jnz[];
extern char far_int[], far_next[], far_handler[], far_iret[];
extern const uint64_t isr_stubs[256];

static unsigned int depth, version;

struct rec {
	uint64_t from, to;
	uint32_t cls;	 /* the LBR_SELECT bit that suppresses it */
	uint64_t cycles; /* LBR_INFO cycle count, emulator model; 0: not checked */
};

/*
 * The expected records, oldest first. Cycles are the emulator's model
 * (vmm-glue/emu.c: 1 per instruction, 1 more per taken branch) counted
 * since the previous record: the first record's predecessor is outside
 * the sequence, so it is not checked.
 */
static void seq_expect(struct rec *r)
{
	r[0] = (struct rec){ (uint64_t) lbr_b0, (uint64_t) lbr_t0, SEL_NEAR_REL_JMP, 0 };
	r[1] = (struct rec){ (uint64_t) lbr_b1, (uint64_t) lbr_fn, SEL_NEAR_REL_CALL, 2 };
	r[2] = (struct rec){ (uint64_t) lbr_ret, (uint64_t) lbr_t2, SEL_NEAR_RET, 2 };
	r[3] = (struct rec){ (uint64_t) lbr_b3, (uint64_t) lbr_t3, SEL_NEAR_IND_JMP, 3 };
	r[4] = (struct rec){ (uint64_t) lbr_b4, (uint64_t) lbr_fn, SEL_NEAR_IND_CALL, 3 };
	r[5] = (struct rec){ (uint64_t) lbr_ret, (uint64_t) lbr_t5, SEL_NEAR_RET, 2 };
	r[6] = (struct rec){ (uint64_t) lbr_b6, (uint64_t) lbr_t6, SEL_JCC, 3 };
}

/* Enable DEBUGCTL = dbg, run the sequence, DEBUGCTL = 0. Not inlined: its labels exist once. */
static void __attribute__((noinline)) lbr_seq(uint64_t dbg)
{
	uint64_t a = (uint32_t) dbg, d = dbg >> 32, c = MSR_IA32_DEBUGCTL;

	/* clang-format off */
	__asm__ volatile(
		"wrmsr\n\t"
		".globl lbr_b0\nlbr_b0:\n\t"
		"jmp lbr_t0\n\t"
		"ud2\n"
		".globl lbr_t0\nlbr_t0:\n"
		".globl lbr_b1\nlbr_b1:\n\t"
		"call lbr_fn\n"
		".globl lbr_t2\nlbr_t2:\n\t"
		"lea lbr_t3(%%rip), %%rax\n"
		".globl lbr_b3\nlbr_b3:\n\t"
		"jmp *%%rax\n\t"
		"ud2\n"
		".globl lbr_t3\nlbr_t3:\n\t"
		"lea lbr_fn(%%rip), %%rax\n"
		".globl lbr_b4\nlbr_b4:\n\t"
		"call *%%rax\n"
		".globl lbr_t5\nlbr_t5:\n\t"
		"xor %%eax, %%eax\n"
		".globl lbr_b6\nlbr_b6:\n\t"
		"jz lbr_t6\n\t"
		"ud2\n"
		".globl lbr_t6\nlbr_t6:\n\t"
		"jnz lbr_bad\n\t"
		"xor %%edx, %%edx\n\t"
		"wrmsr\n\t"
		"jmp lbr_end\n"
		".globl lbr_fn\nlbr_fn:\n"
		".globl lbr_ret\nlbr_ret:\n\t"
		"ret\n"
		"lbr_bad:\n\t"
		"ud2\n"
		"lbr_end:\n\t"
		: "+a"(a), "+d"(d), "+c"(c)
		:
		: "memory", "cc");
	/* clang-format on */
}

/*
 * Nested calls for call-stack mode: b0 calls a, a's b1 calls b, b returns,
 * then LBRs go off inside a: the stack must hold the call b0 -> a alone.
 */
static void __attribute__((noinline)) cs_seq(uint64_t dbg)
{
	uint64_t a = (uint32_t) dbg, d = dbg >> 32, c = MSR_IA32_DEBUGCTL;

	/* clang-format off */
	__asm__ volatile(
		"wrmsr\n\t"
		".globl cs_b0\ncs_b0:\n\t"
		"call cs_a\n\t"
		"jmp cs_end\n"
		".globl cs_a\ncs_a:\n"
		".globl cs_b1\ncs_b1:\n\t"
		"call cs_b\n"
		".globl cs_t1\ncs_t1:\n\t"
		"xor %%eax, %%eax\n\t"
		"xor %%edx, %%edx\n\t"
		"wrmsr\n\t"
		"ret\n"
		".globl cs_b\ncs_b:\n"
		".globl cs_ret_b\ncs_ret_b:\n\t"
		"ret\n"
		"cs_end:\n\t"
		: "+a"(a), "+d"(d), "+c"(c)
		:
		: "memory", "cc");
	/* clang-format on */
}

/* INT 41H to far_handler, whose IRETQ returns to far_next: two far branches. */
static void __attribute__((noinline)) far_seq(uint64_t dbg)
{
	uint64_t a = (uint32_t) dbg, d = dbg >> 32, c = MSR_IA32_DEBUGCTL;

	/* clang-format off */
	__asm__ volatile(
		"wrmsr\n"
		".globl far_int\nfar_int:\n\t"
		"int $0x41\n"
		".globl far_next\nfar_next:\n\t"
		"xor %%eax, %%eax\n\t"
		"xor %%edx, %%edx\n\t"
		"wrmsr\n\t"
		"jmp far_end\n"
		".globl far_handler\nfar_handler:\n"
		".globl far_iret\nfar_iret:\n\t"
		"iretq\n"
		"far_end:\n\t"
		: "+a"(a), "+d"(d), "+c"(c)
		:
		: "memory", "cc");
	/* clang-format on */
}

/* Point IDT vector 41H at far_handler: a 64-bit interrupt gate, DPL 0. */
static void far_gate(void)
{
	struct {
		uint16_t limit;
		uint64_t base;
	} __attribute__((packed)) idtr;
	uint64_t h = (uint64_t) far_handler, *g;
	uint16_t cs;

	__asm__ volatile("sidt %0" : "=m"(idtr));
	__asm__ volatile("mov %%cs, %0" : "=r"(cs));
	g = (uint64_t *) (idtr.base + 16 * 0x41);
	g[0] = (h & 0xffff) | (uint64_t) cs << 16 | 0x8eull << 40 | (h >> 16 & 0xffff) << 48;
	g[1] = h >> 32;
}

static void lbr_clear(void)
{
	for (unsigned int i = 0; i < depth; i++) {
		wrmsr(MSR_LBR_FROM(i), 0);
		wrmsr(MSR_LBR_TO(i), 0);
		wrmsr(MSR_LBR_INFO(i), 0);
	}
}

/* Entry k places below the top of stack. */
static unsigned int below_tos(unsigned int tos, unsigned int k)
{
	return (tos + depth - k % depth) % depth;
}

/*
 * Run the sequence with LBR_SELECT = sel from TOS = tos0 on a cleared
 * stack and compare with the unfiltered records that sel keeps: TOS
 * advanced by their number, the entries below TOS are them newest first,
 * the next one below is still clear.
 */
static void check_seq(uint32_t sel, unsigned int tos0, const char *what)
{
	struct rec all[NR_SEQ], want[NR_SEQ];
	unsigned int n = 0, tos, bad = 0;

	seq_expect(all);
	for (unsigned int i = 0; i < NR_SEQ; i++)
		if (!(sel & all[i].cls) && !(sel & SEL_CPL_EQ_0))
			want[n++] = all[i];
	lbr_clear();
	wrmsr(MSR_LBR_TOS, tos0);
	wrmsr(MSR_LBR_SELECT, sel);
	lbr_seq(DEBUGCTL_LBR);
	wrmsr(MSR_LBR_SELECT, 0);
	tos = (unsigned int) rdmsr(MSR_LBR_TOS);
	report(tos == (tos0 + n) % depth, "%s: TOS %u -> %u, %u records", what, tos0, tos, n);
	for (unsigned int k = 0; k < n; k++) {
		unsigned int e = below_tos(tos, k);
		const struct rec *w = &want[n - 1 - k];
		uint64_t from = rdmsr(MSR_LBR_FROM(e)), to = rdmsr(MSR_LBR_TO(e));

		if (from != w->from || to != w->to) {
			printf("  TOS-%u (entry %u): %lx -> %lx, expected %lx -> %lx\n", k, e, from,
			       to, w->from, w->to);
			bad++;
		}
	}
	if (n)
		report(!bad, "%s: FROM/TO of the %u records match the sequence's labels", what, n);
	if (n < depth) {
		unsigned int e = below_tos(tos, n);

		report(rdmsr(MSR_LBR_FROM(e)) == 0 && rdmsr(MSR_LBR_TO(e)) == 0,
		       "%s: nothing else recorded (entry %u still clear)", what, e);
	}
}

/* The unfiltered sequence with every entry printed, and LBR_INFO. */
static void test_sequence(void)
{
	struct rec all[NR_SEQ];
	unsigned int tos, bad = 0;

	seq_expect(all);
	lbr_clear();
	wrmsr(MSR_LBR_TOS, 5);
	lbr_seq(DEBUGCTL_LBR);
	tos = (unsigned int) rdmsr(MSR_LBR_TOS);
	report(rdmsr(MSR_IA32_DEBUGCTL) == 0, "DEBUGCTL.LBR off again");
	for (unsigned int k = 0; k < NR_SEQ; k++) {
		unsigned int e = below_tos(tos, k);
		const struct rec *w = &all[NR_SEQ - 1 - k];
		uint64_t info = rdmsr(MSR_LBR_INFO(e));

		printf("TOS-%u (entry %2u): FROM %lx TO %lx INFO %lx (expected %lx -> %lx, %lu "
		       "cycles)\n",
		       k, e, rdmsr(MSR_LBR_FROM(e)), rdmsr(MSR_LBR_TO(e)), info, w->from, w->to,
		       w->cycles);
		/* Table 20-16: 15:0 cycles, 60:16 reserved, 61 TSX_ABORT, 62 IN_TSX,
		 * 63 MISPRED: no TSX, and the emulator mispredicts nothing */
		if (info & ~LBR_INFO_CYCLES)
			bad++;
		if (w->cycles && (info & LBR_INFO_CYCLES) != w->cycles)
			bad++;
	}
	report(!bad, "LBR_INFO: cycles since the previous record, no MISPRED/IN_TSX/TSX_ABORT");
	check_seq(0, 5, "all branches");
	/* TOS is incremented modulo the depth before each write (20.11) */
	check_seq(0, depth - 3, "wrapping TOS");
}

static void test_select(void)
{
	static const struct {
		uint32_t sel;
		const char *what;
	} cases[] = {
		{ SEL_JCC, "LBR_SELECT.JCC" },
		{ SEL_NEAR_REL_CALL, "LBR_SELECT.NEAR_REL_CALL" },
		{ SEL_NEAR_IND_CALL, "LBR_SELECT.NEAR_IND_CALL" },
		{ SEL_NEAR_RET, "LBR_SELECT.NEAR_RET" },
		/* "except near indirect calls and near returns" (Table 20-12) */
		{ SEL_NEAR_IND_JMP, "LBR_SELECT.NEAR_IND_JMP" },
		/* "except near relative calls" */
		{ SEL_NEAR_REL_JMP, "LBR_SELECT.NEAR_REL_JMP" },
		{ SEL_FAR_BRANCH, "LBR_SELECT.FAR_BRANCH (no far branch here)" },
		/* CPL_EQ_0: no branch ending in ring 0 (this code is ring 0) */
		{ SEL_CPL_EQ_0, "LBR_SELECT.CPL_EQ_0 at ring 0" },
		{ SEL_CPL_NEQ_0, "LBR_SELECT.CPL_NEQ_0 at ring 0" },
		{ SEL_JCC | SEL_NEAR_RET | SEL_NEAR_REL_JMP,
		  "LBR_SELECT.JCC|NEAR_RET|NEAR_REL_JMP" },
	};
	unsigned int tos, e;

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_seq(cases[i].sel, 10, cases[i].what);
	report(wrmsr_safe(MSR_LBR_SELECT, 1u << 10) == 13, "LBR_SELECT bit 10 (reserved): #GP");

	/*
	 * Call-stack mode (Table 20-13 note, 20.11): JCC, NEAR_IND_JMP,
	 * NEAR_REL_JMP, FAR_BRANCH and EN_CALLSTACK set; a return pops the
	 * record of its call.
	 */
	lbr_clear();
	wrmsr(MSR_LBR_TOS, 0);
	wrmsr(MSR_LBR_SELECT,
	      SEL_JCC | SEL_NEAR_IND_JMP | SEL_NEAR_REL_JMP | SEL_FAR_BRANCH | SEL_EN_CALLSTACK);
	cs_seq(DEBUGCTL_LBR);
	wrmsr(MSR_LBR_SELECT, 0);
	tos = (unsigned int) rdmsr(MSR_LBR_TOS);
	e = below_tos(tos, 0);
	printf("call stack: TOS %u, top %lx -> %lx (call %p -> %p)\n", tos, rdmsr(MSR_LBR_FROM(e)),
	       rdmsr(MSR_LBR_TO(e)), (void *) cs_b0, (void *) cs_a);
	report(tos == 1 && rdmsr(MSR_LBR_FROM(1)) == (uint64_t) cs_b0 &&
		       rdmsr(MSR_LBR_TO(1)) == (uint64_t) cs_a,
	       "call stack: the inner call was popped by its return, the outer call on top");
}

/*
 * Far branches: a software interrupt and its IRETQ, with every near class
 * suppressed, are exactly two records (FROM the INT / IRETQ instruction,
 * TO the handler / the return address); FAR_BRANCH suppresses both.
 */
static void test_far(void)
{
	const uint32_t near = SEL_JCC | SEL_NEAR_REL_CALL | SEL_NEAR_IND_CALL | SEL_NEAR_RET |
			      SEL_NEAR_IND_JMP | SEL_NEAR_REL_JMP;
	unsigned int tos;

	far_gate();
	lbr_clear();
	wrmsr(MSR_LBR_TOS, 0);
	wrmsr(MSR_LBR_SELECT, near);
	far_seq(DEBUGCTL_LBR);
	tos = (unsigned int) rdmsr(MSR_LBR_TOS);
	for (unsigned int i = 1; i <= 3; i++)
		printf("far: entry %u: %lx -> %lx\n", i, rdmsr(MSR_LBR_FROM(i)),
		       rdmsr(MSR_LBR_TO(i)));
	report(tos == 2, "far: INT + IRETQ are 2 records (TOS %u)", tos);
	report(rdmsr(MSR_LBR_FROM(1)) == (uint64_t) far_int &&
		       rdmsr(MSR_LBR_TO(1)) == (uint64_t) far_handler,
	       "far: INT 41H recorded %p -> %p", (void *) far_int, (void *) far_handler);
	report(rdmsr(MSR_LBR_FROM(2)) == (uint64_t) far_iret &&
		       rdmsr(MSR_LBR_TO(2)) == (uint64_t) far_next,
	       "far: IRETQ recorded %p -> %p", (void *) far_iret, (void *) far_next);
	lbr_clear();
	wrmsr(MSR_LBR_TOS, 0);
	wrmsr(MSR_LBR_SELECT, near | SEL_FAR_BRANCH);
	far_seq(DEBUGCTL_LBR);
	wrmsr(MSR_LBR_SELECT, 0);
	report(rdmsr(MSR_LBR_TOS) == 0 && rdmsr(MSR_LBR_FROM(1)) == 0,
	       "far: LBR_SELECT.FAR_BRANCH suppresses both");
}

/* DEBUGCTL.LBR clear: no branch recorded. */
static void test_off(void)
{
	lbr_clear();
	wrmsr(MSR_LBR_TOS, 3);
	lbr_seq(0);
	report(rdmsr(MSR_LBR_TOS) == 3 && rdmsr(MSR_LBR_FROM(3)) == 0 &&
		       rdmsr(MSR_LBR_FROM(4)) == 0,
	       "DEBUGCTL.LBR = 0: nothing recorded");
}

static volatile struct {
	int count;
	uint64_t rip, rcx, status, debugctl, tos, tos_after;
} seen;
static volatile bool keep_lbr_frz;

static void spin(unsigned int n)
{
	__asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(n));
}

static void on_pmi(struct frame *f)
{
	seen.tos = rdmsr(MSR_LBR_TOS);
	seen.debugctl = rdmsr(MSR_IA32_DEBUGCTL);
	/* not frozen: stop recording before the records of interest are overwritten */
	if (!keep_lbr_frz)
		wrmsr(MSR_IA32_DEBUGCTL, 0);
	seen.count++;
	seen.rip = f->rip;
	seen.rcx = f->rcx;
	seen.status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	spin(50); /* 49 taken branches, recorded unless frozen */
	seen.tos_after = rdmsr(MSR_LBR_TOS);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL,
	      keep_lbr_frz ? seen.status & ~GLOBAL_STATUS_LBR_FRZ : seen.status);
	apic_eoi();
}

/*
 * DEBUGCTL = dbg, then GP0 (INST_RETIRED.ANY_P, INT) counts from -1000:
 * #1 the GLOBAL_CTRL wrmsr, #2 mov, then (dec, jnz) pairs: the 499th
 * taken jnz is instruction 1000, the eventing instruction. It retires
 * before the PMI is requested, so it is the last branch recorded.
 */
static void __attribute__((noinline)) frz_region(uint64_t dbg, uint32_t n)
{
	/* clang-format off */
	__asm__ volatile(
		"mov $0x1d9, %%ecx\n\t"
		"mov %[dbg], %%eax\n\t"
		"xor %%edx, %%edx\n\t"
		"wrmsr\n\t"
		"mov $0x38f, %%ecx\n\t"
		"mov $1, %%eax\n\t"
		"wrmsr\n\t"
		"mov %[n], %%ecx\n"
		".globl frz_loop\nfrz_loop:\n\t"
		"dec %%ecx\n"
		".globl frz_jnz\nfrz_jnz:\n\t"
		"jnz frz_loop\n\t"
		"xor %%eax, %%eax\n\t"
		"mov $0x38f, %%ecx\n\t"
		"wrmsr\n\t"
		"mov $0x1d9, %%ecx\n\t"
		"wrmsr\n\t"
		:: [dbg] "r"((uint32_t)dbg), [n] "r"(n)
		: "eax", "ecx", "edx", "memory", "cc");
	/* clang-format on */
}

static void arm(void)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_IA32_DEBUGCTL, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
	wrmsr(MSR_IA32_PMC0_FULL, (1ull << 48) - 1000);
	wrmsr(MSR_IA32_PERFEVTSEL0, 0xc0 | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
	apic_write(APIC_LVTPC, PMI_VECTOR);
	lbr_clear();
	wrmsr(MSR_LBR_TOS, 0);
	seen.count = 0;
}

/*
 * Freeze LBRs on PMI (20.4.7, 20.12.2). Streamlined (v4+): the PMI
 * request sets GLOBAL_STATUS.LBR_Frz, DEBUGCTL is unchanged, and no
 * branch is recorded (the PMI's own delivery, the handler's branches, the
 * rest of the region) until STATUS_RESET clears LBR_Frz. Legacy (v2-3):
 * DEBUGCTL.LBR is cleared instead.
 */
static void test_freeze(void)
{
	const uint32_t n = 2000;
	const unsigned int taken = 499; /* jnz retired up to instruction 1000 */
	bool streamlined = version >= 4;
	uint64_t dbg = DEBUGCTL_LBR | DEBUGCTL_FREEZE_LBRS_ON_PMI;
	unsigned int tos, want_tos = taken % depth, e;

	keep_lbr_frz = true;
	arm();
	sti();
	frz_region(dbg, n);
	cli();
	tos = (unsigned int) rdmsr(MSR_LBR_TOS);
	printf("freeze: %d PMI, ECX %lu, GLOBAL_STATUS %lx, DEBUGCTL %lx, TOS %lu in the handler, "
	       "%lu after 50 branches there, %u after the region\n",
	       seen.count, seen.rcx, seen.status, seen.debugctl, seen.tos, seen.tos_after, tos);
	report(seen.count == 1 && seen.rcx == n - taken, "freeze: one PMI after instruction 1000");
	if (streamlined) {
		report(seen.status == (1 | GLOBAL_STATUS_LBR_FRZ),
		       "streamlined: GLOBAL_STATUS = PMC0 | LBR_Frz");
		report(seen.debugctl == dbg, "streamlined: DEBUGCTL unchanged (%lx)",
		       seen.debugctl);
		report_skip(
			"legacy freeze (DEBUGCTL.LBR cleared) is perfmon v2-3; this model is v%u",
			version);
	} else {
		report(seen.status == 1, "legacy: GLOBAL_STATUS = PMC0");
		report(seen.debugctl == (dbg & ~DEBUGCTL_LBR), "legacy: DEBUGCTL.LBR cleared");
	}
	report(seen.tos == want_tos, "freeze: TOS %lu = %u taken jnz mod %u, the eventing jnz last",
	       seen.tos, taken, depth);
	e = below_tos(want_tos, 0);
	report(rdmsr(MSR_LBR_FROM(e)) == (uint64_t) frz_jnz &&
		       rdmsr(MSR_LBR_TO(e)) == (uint64_t) frz_loop,
	       "freeze: top record is the jnz %p -> %p", (void *) frz_jnz, (void *) frz_loop);
	report(seen.tos_after == want_tos && tos == want_tos,
	       "freeze: no record from the PMI delivery, the handler or the rest of the region");
	if (streamlined) {
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, GLOBAL_STATUS_LBR_FRZ);
		report(rdmsr(MSR_CORE_PERF_GLOBAL_STATUS) == 0, "STATUS_RESET clears LBR_Frz");
	}
	check_seq(0, 0, "recording again after the freeze");

	/*
	 * No freeze: the PMI is recorded as an interrupt (FROM = the
	 * interrupted RIP, TO = the handler) right after the eventing jnz.
	 */
	keep_lbr_frz = false;
	arm();
	sti();
	frz_region(DEBUGCTL_LBR, n);
	cli();
	e = below_tos(taken + 1, 0);
	printf("no freeze: TOS %lu in the handler; entry %u: %lx -> %lx; entry %u: %lx -> %lx\n",
	       seen.tos, e, rdmsr(MSR_LBR_FROM(e)), rdmsr(MSR_LBR_TO(e)), below_tos(e, 1),
	       rdmsr(MSR_LBR_FROM(below_tos(e, 1))), rdmsr(MSR_LBR_TO(below_tos(e, 1))));
	report(seen.count == 1 && rdmsr(MSR_LBR_FROM(e)) == seen.rip &&
		       rdmsr(MSR_LBR_TO(e)) == isr_stubs[PMI_VECTOR],
	       "no freeze: the PMI recorded as %lx -> %lx (handler entry)", seen.rip,
	       isr_stubs[PMI_VECTOR]);
	report(rdmsr(MSR_LBR_FROM(below_tos(e, 1))) == (uint64_t) frz_jnz,
	       "no freeze: the eventing jnz recorded before it");
	report(seen.tos != (taken + 1) % depth,
	       "no freeze: the handler's entry branches are recorded (TOS %lu)", seen.tos);
	wrmsr(MSR_IA32_PERFEVTSEL0, 0);
	wrmsr(MSR_IA32_DEBUGCTL, 0);
}

/* A model without LBRs: every LBR MSR and DEBUGCTL.LBR #GP. */
static void test_absent(uint64_t cap)
{
	uint64_t v;

	report((cap & 0x3f) == 0, "PERF_CAPABILITIES.LBR_FMT 0 (%lx)", cap & 0x3f);
	report(!(cpuid_regs(7, 0).d & CPUID_7_EDX_ARCH_LBR), "CPUID.07H:EDX[19] (arch LBR) 0");
	report(wrmsr_safe(MSR_IA32_DEBUGCTL, DEBUGCTL_LBR) == 13 && rdmsr(MSR_IA32_DEBUGCTL) == 0,
	       "DEBUGCTL.LBR: #GP, DEBUGCTL stays 0");
	report(wrmsr_safe(MSR_IA32_DEBUGCTL, DEBUGCTL_FREEZE_LBRS_ON_PMI) == 13,
	       "DEBUGCTL.FREEZE_LBRS_ON_PMI: #GP");
	report(rdmsr_safe(MSR_LBR_TOS, &v) == 13, "RDMSR LBR_TOS: #GP");
	report(rdmsr_safe(MSR_LBR_SELECT, &v) == 13, "RDMSR LBR_SELECT: #GP");
	report(rdmsr_safe(MSR_LBR_FROM(0), &v) == 13 && rdmsr_safe(MSR_LBR_TO(0), &v) == 13 &&
		       rdmsr_safe(MSR_LBR_INFO(0), &v) == 13,
	       "RDMSR LBR FROM/TO/INFO 0: #GP");
	report(wrmsr_safe(MSR_LBR_FROM(0), 0) == 13, "WRMSR LBR FROM 0: #GP");
	if (version >= 4)
		report(wrmsr_safe(0x391, GLOBAL_STATUS_LBR_FRZ) == 13,
		       "GLOBAL_STATUS_SET.LBR_Frz: #GP without LBRs");
	report_skip("this model has no LBRs (LBR_FMT 0): branch records not tested");
}

int main(uint64_t arg)
{
	uint32_t fms = cpuid_regs(1, 0).a;
	unsigned int model = ((fms >> 4) & 0xf) | ((fms >> 12) & 0xf0);
	uint64_t cap;

	report_prefix("lbr: ");
	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	version = cpuid_regs(0xa, 0).a & 0xff;
	cap = rdmsr(MSR_IA32_PERF_CAPABILITIES);
	printf("family 6 model %02xH, perfmon v%u, PERF_CAPABILITIES %lx (LBR_FMT %lu)\n", model,
	       version, cap, cap & 0x3f);
	if (!(cap & 0x3f)) {
		test_absent(cap);
		return report_summary();
	}
	/* 20.4.8.1: 000101B = 64-bit EIP FROM/TO, LBR_INFO with flags and cycles */
	report((cap & 0x3f) == 5, "LBR format 000101B (%lx)", cap & 0x3f);
	/* Tables 20-4/20-15: 32 entries, TOS 0..31, for 06_55H and 06_6AH */
	if (model == 0x55 || model == 0x6a)
		depth = 32;
	if (!depth) {
		report_skip("model %02xH: its LBR depth is not in the tables this test knows",
			    model);
		return report_summary();
	}
	report(rdmsr(MSR_LBR_SELECT) == 0, "LBR_SELECT reads 0 (reset value, 20.9.2)");
	report(wrmsr_safe(MSR_LBR_TOS, depth - 1) == 0 && rdmsr(MSR_LBR_TOS) == depth - 1,
	       "TOS takes %u (depth %u)", depth - 1, depth);
	report(wrmsr_safe(MSR_LBR_INFO(depth - 1), 0) == 0, "LBR_INFO_%u exists", depth - 1);
	test_sequence();
	test_off();
	test_select();
	test_far();
	test_freeze();
	return report_summary();
}
