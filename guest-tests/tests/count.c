/* SPDX-License-Identifier: MIT */
/*
 * Counting: what the counters count, exactly, on the exact-counting
 * emulator (elsewhere, e.g. KVM, counts are printed and only what holds
 * on any backend is checked: disabled counters stay 0, RDPMC = RDMSR).
 *
 * Modelled time (vmm-glue/emu.c, emu-insn.c, vpmu/backend-exact.c): every
 * instruction retires alone and takes 1 core cycle, a taken branch
 * (conditional taken, or any JMP/CALL/RET/INT/IRET) 1 more; reference
 * cycles (fixed counter 2) equal core cycles; REF_XCLK (3CH/01H) counts
 * the crystal clock, reference cycles * CPUID.15H EAX / EBX, accumulated
 * so that a run of D reference cycles gives floor(D*EAX/EBX) or one more.
 * An instruction counts in the CPL it began in: IRETQ to ring 3 is an OS
 * instruction, INT from ring 3 a USR one. A WRMSR that starts counting
 * counts itself, one that stops counting does not (the emulator feeds an
 * instruction after executing it), as in demo/pmi.c.
 *
 * count_loop(ctrl, N), the bracket every check but ring 3 uses:
 *   wrmsr GLOBAL_CTRL = ctrl     #1 (starts counting)
 *   mov N, %ecx                  #2
 *   dec %ecx; jnz                #3 .. #2N+2 (N jnz, N-1 of them taken)
 *   xor, xor, mov $0x38f         #2N+3 .. #2N+5
 *   wrmsr GLOBAL_CTRL = 0        (stops counting: not counted)
 * so INST_RETIRED = 2N + 5, BR_INST_RETIRED = N, and
 * cycles = 2N + 5 + (N - 1) = 3N + 4.
 *
 * ring3_run(ctrl, N): ring 0 enables counting and IRETQs to a ring-3
 * loop that INTs back through a DPL-3 gate whose stub (our own asm, not
 * the library's C path, so that every counted instruction is known) stops
 * counting, then restores the ring-0 stack, segments and registers:
 *   OS:  wrmsr (#1), iretq (#2)
 *   USR: mov N, %ecx; N x (dec; jnz); int $USER_VECTOR   = 2N + 2
 *   OS:  xor, xor, mov $0x38f (#3..#5), wrmsr (not counted)
 * so instructions: USR 2N + 2, OS 5; branches: USR N + 1 (the jnz and
 * the INT), OS 1 (IRETQ); cycles: USR 2N + 2 + (N - 1) + 1 = 3N + 2,
 * OS 5 + 1 = 6.
 *
 * SDM: USR counts at CPL > 0, OS at CPL 0 (Vol. 3B 22.6.8.1, the same
 * bits in the architectural IA32_PERFEVTSELx); CMask counts cycles with
 * at least CMask events, Inv inverts that compare and is ignored when
 * CMask is 0 (22.6.8.1); E counts 0->1 transitions. A counter counts
 * only with its EN (or FIXED_CTR_CTRL ring bits) and its GLOBAL_CTRL
 * bit both set (SDM Vol. 3B 21.2.2).
 */
#include "guest.h"

#define MSR_IA32_PERFEVTSEL(i) (MSR_IA32_PERFEVTSEL0 + (i))
#define MSR_IA32_PMC(i)	       (MSR_IA32_PMC0 + (i))
#define MSR_FIXED_CTR(i)       (MSR_CORE_PERF_FIXED_CTR0 + (i))
#define EVTSEL_EDGE	       (1ull << 18)
#define EVTSEL_INV	       (1ull << 23)
#define EVTSEL_CMASK(n)	       ((uint64_t) (n) << 24)
#define GLOBAL_FIXED(i)	       (1ull << (32 + (i)))
#define FIXED_OS	       1ull
#define FIXED_USR	       2ull
#define FIXED_FIELD(i, v)      ((uint64_t) (v) << (4 * (i)))
#define RDPMC_FIXED	       (1u << 30)

/* architectural events (SDM Vol. 3B Table 21-1) */
#define EV_CYCLES   0x003c /* UnHalted Core Cycles */
#define EV_REF_XCLK 0x013c /* UnHalted Reference Cycles (crystal clock) */
#define EV_INST	    0x00c0 /* Instructions Retired */
#define EV_BRANCH   0x00c4 /* Branch Instructions Retired */
#define RING	    (EVTSEL_USR | EVTSEL_OS)

/* INT vector, DPL 3: back to ring 0 (the selectors: lib/ring3.c) */
#define USER_VECTOR 0x81

static unsigned int nr_gp, nr_fixed;
static bool exact;		    /* the exact-counting emulator: counts are checked exactly */
static uint32_t xclk_den, xclk_num; /* CPUID.15H EAX, EBX */

void count_loop(uint64_t ctrl, uint32_t n);
void count_rdpmc(uint64_t ctrl, uint32_t n, uint32_t rdpmc_ecx, uint32_t msr);
void ring3_run(uint64_t ctrl, uint32_t n);
extern char user_entry[], user_int_end[], user_gate[], user_page[];
uint64_t mid_rdpmc, mid_rdmsr, ring0_rsp;
uint64_t frame_rip, frame_cs, frame_rsp, frame_ss;

/* clang-format off */
__asm__(
	".pushsection .text\n"
	/* rdi = GLOBAL_CTRL value, esi = N */
	".globl count_loop\n"
	"count_loop:\n\t"
	"mov %rdi, %rax\n\t"
	"mov %rdi, %rdx\n\t"
	"shr $32, %rdx\n\t"
	"mov $0x38f, %ecx\n\t"
	"wrmsr\n\t"
	"mov %esi, %ecx\n"
	"1:\n\t"
	"dec %ecx\n\t"
	"jnz 1b\n\t"
	"xor %eax, %eax\n\t"
	"xor %edx, %edx\n\t"
	"mov $0x38f, %ecx\n\t"
	"wrmsr\n\t"
	"ret\n"

	/*
	 * rdi = GLOBAL_CTRL value, esi = N, edx = RDPMC index, ecx = the same
	 * counter's MSR. Counted: wrmsr #1, mov #2, loop #3..#2N+2, mov #2N+3,
	 * rdpmc #2N+4 (reads 2N+3 instructions), mov shl or mov #2N+5..#2N+8,
	 * rdmsr #2N+9 (reads 2N+8), mov shl or xor xor mov #2N+10..#2N+15.
	 */
	".globl count_rdpmc\n"
	"count_rdpmc:\n\t"
	"mov %edx, %r8d\n\t"
	"mov %ecx, %r10d\n\t"
	"mov %rdi, %rax\n\t"
	"mov %rdi, %rdx\n\t"
	"shr $32, %rdx\n\t"
	"mov $0x38f, %ecx\n\t"
	"wrmsr\n\t"
	"mov %esi, %ecx\n"
	"1:\n\t"
	"dec %ecx\n\t"
	"jnz 1b\n\t"
	"mov %r8d, %ecx\n\t"
	"rdpmc\n\t"
	"mov %eax, %r9d\n\t"
	"shl $32, %rdx\n\t"
	"or %rdx, %r9\n\t"
	"mov %r10d, %ecx\n\t"
	"rdmsr\n\t"
	"mov %eax, %r11d\n\t"
	"shl $32, %rdx\n\t"
	"or %rdx, %r11\n\t"
	"xor %eax, %eax\n\t"
	"xor %edx, %edx\n\t"
	"mov $0x38f, %ecx\n\t"
	"wrmsr\n\t"
	"mov %r9, mid_rdpmc(%rip)\n\t"
	"mov %r11, mid_rdmsr(%rip)\n\t"
	"ret\n"

	/*
	 * rdi = GLOBAL_CTRL value, esi = N. Saves the callee-saved registers,
	 * RFLAGS and RSP, then IRETQs to user_entry at CPL 3 on user_stack.
	 */
	".globl ring3_run\n"
	"ring3_run:\n\t"
	"push %rbx\n\t"
	"push %rbp\n\t"
	"push %r12\n\t"
	"push %r13\n\t"
	"push %r14\n\t"
	"push %r15\n\t"
	"pushfq\n\t"
	"mov %rsp, ring0_rsp(%rip)\n\t"
	"mov $" xstr(USER_DS) ", %eax\n\t"
	"mov %eax, %ds\n\t"
	"mov %eax, %es\n\t"
	"pushq $" xstr(USER_DS) "\n\t"
	"lea user_stack+4096(%rip), %rax\n\t"
	"push %rax\n\t"
	"pushq $2\n\t"			/* RFLAGS: IF = 0, IOPL 0 */
	"pushq $" xstr(USER_CS) "\n\t"
	"lea user_entry(%rip), %rax\n\t"
	"push %rax\n\t"
	"mov %rdi, %rax\n\t"
	"mov %rdi, %rdx\n\t"
	"shr $32, %rdx\n\t"
	"mov $0x38f, %ecx\n\t"
	"wrmsr\n\t"			/* OS #1: counting starts */
	"iretq\n"			/* OS #2 */

	/* The DPL-3 gate's target, at CPL 0 on the TSS RSP0 stack. */
	".globl user_gate\n"
	"user_gate:\n\t"
	"xor %eax, %eax\n\t"		/* OS #3 */
	"xor %edx, %edx\n\t"		/* OS #4 */
	"mov $0x38f, %ecx\n\t"		/* OS #5 */
	"wrmsr\n\t"			/* counting stops */
	"mov 0(%rsp), %rax\n\t"
	"mov %rax, frame_rip(%rip)\n\t"
	"mov 8(%rsp), %rax\n\t"
	"mov %rax, frame_cs(%rip)\n\t"
	"mov 24(%rsp), %rax\n\t"
	"mov %rax, frame_rsp(%rip)\n\t"
	"mov 32(%rsp), %rax\n\t"
	"mov %rax, frame_ss(%rip)\n\t"
	"mov $" xstr(KERNEL_DS) ", %eax\n\t"
	"mov %eax, %ds\n\t"
	"mov %eax, %es\n\t"
	"mov %eax, %ss\n\t"
	"mov ring0_rsp(%rip), %rsp\n\t"
	"popfq\n\t"
	"pop %r15\n\t"
	"pop %r14\n\t"
	"pop %r13\n\t"
	"pop %r12\n\t"
	"pop %rbp\n\t"
	"pop %rbx\n\t"
	"ret\n"
	".popsection\n"

	/* The ring-3 code, alone in its 4 KiB page: the only code page with U set. */
	".pushsection .text.user, \"ax\"\n"
	".balign 4096\n"
	".globl user_page\n"
	"user_page:\n"
	".globl user_entry\n"
	"user_entry:\n\t"
	"mov %esi, %ecx\n"		/* USR #1 */
	"1:\n\t"
	"dec %ecx\n\t"
	"jnz 1b\n\t"			/* USR #2 .. #2N+1 */
	"int $" xstr(USER_VECTOR) "\n"	/* USR #2N+2 */
	".globl user_int_end\n"
	"user_int_end:\n\t"
	"ud2\n"
	".balign 4096\n"
	".popsection\n");
/* clang-format on */

static void pmu_reset(void)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0);
	for (unsigned int i = 0; i < nr_gp; i++) {
		wrmsr(MSR_IA32_PERFEVTSEL(i), 0);
		wrmsr(MSR_IA32_PMC(i), 0);
	}
	for (unsigned int i = 0; i < nr_fixed; i++)
		wrmsr(MSR_FIXED_CTR(i), 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
}

static uint64_t gp(unsigned int i)
{
	return rdmsr(MSR_IA32_PMC(i));
}

static uint64_t fixed(unsigned int i)
{
	return rdmsr(MSR_FIXED_CTR(i));
}

/* An exact count: checked on the exact-counting emulator, printed anywhere. */
static void expect(const char *what, uint64_t got, uint64_t want)
{
	if (exact)
		report(got == want, "%s: %lu (expected %lu)", what, got, want);
	else
		printf("%s: %lu (exact count on the emulator: %lu)\n", what, got, want);
}

static void set_gp(unsigned int i, uint64_t evtsel)
{
	wrmsr(MSR_IA32_PERFEVTSEL(i), evtsel);
}

static void basic_counts(uint32_t n)
{
	uint64_t insts = 2ull * n + 5, cycles = 3ull * n + 4, xclk_lo, xclk;

	report_prefix("count: basic: ");
	pmu_reset();
	set_gp(0, EV_INST | RING | EVTSEL_EN);
	set_gp(1, EV_BRANCH | RING | EVTSEL_EN);
	set_gp(2, EV_CYCLES | RING | EVTSEL_EN);
	set_gp(3, EV_REF_XCLK | RING | EVTSEL_EN);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL,
	      FIXED_FIELD(0, 3) | FIXED_FIELD(1, 3) | FIXED_FIELD(2, 3));
	count_loop(0xf | GLOBAL_FIXED(0) | GLOBAL_FIXED(1) | GLOBAL_FIXED(2), n);
	printf("N = %u: instructions %lu, branches %lu, cycles %lu, ref xclk %lu; fixed %lu %lu "
	       "%lu\n",
	       n, gp(0), gp(1), gp(2), gp(3), fixed(0), fixed(1), fixed(2));
	expect("INST_RETIRED (C0H) = 2N+5", gp(0), insts);
	expect("BR_INST_RETIRED (C4H) = N", gp(1), n);
	expect("core cycles (3CH) = 3N+4", gp(2), cycles);
	expect("fixed 0 INST_RETIRED.ANY = 2N+5", fixed(0), insts);
	expect("fixed 1 CPU_CLK_UNHALTED.THREAD = 3N+4", fixed(1), cycles);
	expect("fixed 2 CPU_CLK_UNHALTED.REF_TSC = core cycles", fixed(2), cycles);
	xclk = gp(3);
	if (!xclk_num || !xclk_den) {
		report_skip("CPUID.15H gives no TSC/crystal ratio: REF_XCLK not checked");
	} else if (exact) {
		xclk_lo = cycles * xclk_den / xclk_num;
		report(xclk == xclk_lo || xclk == xclk_lo + 1,
		       "REF_XCLK (3CH/01H) = ref cycles * %u / %u: %lu (expected %lu or %lu)",
		       xclk_den, xclk_num, xclk, xclk_lo, xclk_lo + 1);
	}
	report(rdmsr(MSR_CORE_PERF_GLOBAL_STATUS) == 0, "no overflow status after counting from 0");
}

/*
 * USR/OS across ring 3, in two passes so that every ring setting meets
 * every event: instructions USR 2N+2 / OS 5, branches USR N+1 / OS 1,
 * cycles USR 3N+2 / OS 6 (see the top of the file).
 */
static void ring3_counts(uint32_t n)
{
	uint64_t ui = 2ull * n + 2, oi = 5, ub = n + 1, ob = 1, uc = 3ull * n + 2, oc = 6;
	uint64_t ctrl = 0xf | GLOBAL_FIXED(0) | GLOBAL_FIXED(1) | GLOBAL_FIXED(2);

	report_prefix("count: ring 3: ");
	pmu_reset();
	set_gp(0, EV_INST | EVTSEL_USR | EVTSEL_EN);
	set_gp(1, EV_INST | EVTSEL_OS | EVTSEL_EN);
	set_gp(2, EV_INST | RING | EVTSEL_EN);
	set_gp(3, EV_BRANCH | EVTSEL_USR | EVTSEL_EN);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, FIXED_FIELD(0, FIXED_USR) | FIXED_FIELD(1, FIXED_OS) |
						    FIXED_FIELD(2, FIXED_USR | FIXED_OS));
	frame_rip = frame_cs = frame_rsp = frame_ss = 0;
	ring3_run(ctrl, n);
	printf("back from ring 3: frame RIP %lx CS %lx RSP %lx SS %lx\n", frame_rip, frame_cs,
	       frame_rsp, frame_ss);
	report(frame_cs == USER_CS && frame_ss == USER_DS, "INT frame from CPL 3 (CS %lx, SS %lx)",
	       frame_cs, frame_ss);
	report(frame_rip == (uint64_t) user_int_end && frame_rsp == (uint64_t) (user_stack + 4096),
	       "INT frame RIP after the INT, RSP the user stack");
	printf("N = %u: inst USR %lu OS %lu both %lu, branches USR %lu; fixed 0 USR %lu, "
	       "fixed 1 OS %lu, fixed 2 both %lu\n",
	       n, gp(0), gp(1), gp(2), gp(3), fixed(0), fixed(1), fixed(2));
	expect("INST_RETIRED USR = 2N+2", gp(0), ui);
	expect("INST_RETIRED OS = 5", gp(1), oi);
	expect("INST_RETIRED USR|OS = 2N+7", gp(2), ui + oi);
	expect("BR_INST_RETIRED USR = N+1", gp(3), ub);
	expect("fixed 0 (instructions) USR", fixed(0), ui);
	expect("fixed 1 (cycles) OS", fixed(1), oc);
	expect("fixed 2 (ref cycles) USR|OS", fixed(2), uc + oc);

	pmu_reset();
	set_gp(0, EV_BRANCH | EVTSEL_OS | EVTSEL_EN);
	set_gp(1, EV_CYCLES | EVTSEL_USR | EVTSEL_EN);
	set_gp(2, EV_CYCLES | EVTSEL_OS | EVTSEL_EN);
	set_gp(3, EV_BRANCH | RING | EVTSEL_EN);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL,
	      FIXED_FIELD(0, FIXED_OS) | FIXED_FIELD(1, FIXED_USR) | FIXED_FIELD(2, FIXED_USR));
	ring3_run(ctrl, n);
	printf("N = %u: branches OS %lu, cycles USR %lu OS %lu, branches both %lu; fixed 0 OS %lu, "
	       "fixed 1 USR %lu, fixed 2 USR %lu\n",
	       n, gp(0), gp(1), gp(2), gp(3), fixed(0), fixed(1), fixed(2));
	expect("BR_INST_RETIRED OS = 1 (IRETQ)", gp(0), ob);
	expect("core cycles USR = 3N+2", gp(1), uc);
	expect("core cycles OS = 6", gp(2), oc);
	expect("BR_INST_RETIRED USR|OS = N+2", gp(3), ub + ob);
	expect("fixed 0 (instructions) OS", fixed(0), oi);
	expect("fixed 1 (cycles) USR", fixed(1), uc);
	expect("fixed 2 (ref cycles) USR", fixed(2), uc);
}

/*
 * EN and GLOBAL_CTRL: a counter counts only with both (SDM Vol. 3B
 * 21.2.2); a fixed counter's enable is its FIXED_CTR_CTRL ring
 * field; an EN counter with neither USR nor OS counts at no CPL.
 */
static void enables(uint32_t n)
{
	uint64_t insts = 2ull * n + 5, cycles = 3ull * n + 4;

	report_prefix("count: enables: ");
	pmu_reset();
	set_gp(0, EV_INST | RING | EVTSEL_EN); /* GLOBAL_CTRL bit 0 clear */
	set_gp(1, EV_INST | RING);	       /* EN clear */
	set_gp(2, EV_INST | EVTSEL_EN);	       /* neither USR nor OS */
	set_gp(3, EV_INST | RING | EVTSEL_EN); /* both: the control */
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, FIXED_FIELD(1, 3) | FIXED_FIELD(2, 3));
	/* fixed 0: GLOBAL_CTRL set, ring field 0; fixed 1: field set, GLOBAL_CTRL clear */
	count_loop(0xe | GLOBAL_FIXED(0) | GLOBAL_FIXED(2), n);
	printf("N = %u: GP %lu %lu %lu %lu, fixed %lu %lu %lu\n", n, gp(0), gp(1), gp(2), gp(3),
	       fixed(0), fixed(1), fixed(2));
	report(gp(0) == 0, "EN, GLOBAL_CTRL bit clear: does not count (%lu)", gp(0));
	report(gp(1) == 0, "GLOBAL_CTRL bit set, EN clear: does not count (%lu)", gp(1));
	report(gp(2) == 0, "EN without USR or OS: does not count (%lu)", gp(2));
	report(fixed(0) == 0,
	       "fixed 0: GLOBAL_CTRL bit set, FIXED_CTR_CTRL field 0: does not count (%lu)",
	       fixed(0));
	report(fixed(1) == 0, "fixed 1: field OS|USR, GLOBAL_CTRL bit clear: does not count (%lu)",
	       fixed(1));
	expect("GP 3, EN and GLOBAL_CTRL: counts 2N+5", gp(3), insts);
	expect("fixed 2, field and GLOBAL_CTRL: counts 3N+4", fixed(2), cycles);

	/* the same counters the other way round: now they count */
	pmu_reset();
	set_gp(0, EV_INST | RING | EVTSEL_EN);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, FIXED_FIELD(0, 3) | FIXED_FIELD(1, 3));
	count_loop(0x1 | GLOBAL_FIXED(0) | GLOBAL_FIXED(1), n);
	expect("GP 0 with its GLOBAL_CTRL bit: counts", gp(0), insts);
	expect("fixed 0 with its field: counts", fixed(0), insts);
	expect("fixed 1 with its GLOBAL_CTRL bit: counts", fixed(1), cycles);
}

/*
 * CMask/Inv/Edge (SDM Vol. 3B 22.6.8.1). The exact backend retires one
 * instruction per cycle, so on per-instruction events CMask 1 = the event,
 * CMask >= 2 = 0, Inv+CMask 1 = cycles without the event, Inv+CMask >= 2 =
 * every cycle; Inv without CMask is ignored. EdgeDetect, and CMask on a
 * cycle event, need per-cycle history it does not have: unbacked, they
 * never count (vpmu/backend-exact.c, README "Backends").
 */
static void cmask_inv_edge(uint32_t n)
{
	uint64_t insts = 2ull * n + 5, cycles = 3ull * n + 4;

	report_prefix("count: cmask: ");
	pmu_reset();
	set_gp(0, EV_INST | RING | EVTSEL_EN | EVTSEL_CMASK(1));
	set_gp(1, EV_INST | RING | EVTSEL_EN | EVTSEL_CMASK(2));
	set_gp(2, EV_INST | RING | EVTSEL_EN | EVTSEL_CMASK(1) | EVTSEL_INV);
	set_gp(3, EV_INST | RING | EVTSEL_EN | EVTSEL_CMASK(2) | EVTSEL_INV);
	count_loop(0xf, n);
	printf("N = %u: inst cmask1 %lu cmask2 %lu inv+cmask1 %lu inv+cmask2 %lu\n", n, gp(0),
	       gp(1), gp(2), gp(3));
	expect("instructions CMask 1: cycles with >= 1 retired = 2N+5", gp(0), insts);
	expect("instructions CMask 2: cycles with >= 2 retired = 0", gp(1), 0);
	expect("instructions Inv CMask 1: cycles with none retired = N-1", gp(2), cycles - insts);
	expect("instructions Inv CMask 2: cycles with < 2 retired = 3N+4", gp(3), cycles);

	pmu_reset();
	set_gp(0, EV_INST | RING | EVTSEL_EN | EVTSEL_INV);
	set_gp(1, EV_BRANCH | RING | EVTSEL_EN | EVTSEL_CMASK(1));
	set_gp(2, EV_BRANCH | RING | EVTSEL_EN | EVTSEL_CMASK(1) | EVTSEL_INV);
	set_gp(3, EV_INST | RING | EVTSEL_EN);
	count_loop(0xf, n);
	printf("N = %u: inst inv %lu, branches cmask1 %lu inv+cmask1 %lu, inst %lu\n", n, gp(0),
	       gp(1), gp(2), gp(3));
	expect("instructions Inv, CMask 0: Inv ignored = 2N+5", gp(0), insts);
	expect("branches CMask 1 = N", gp(1), n);
	expect("branches Inv CMask 1: cycles without a branch = 2N+4", gp(2), cycles - n);
	expect("instructions, no CMask (control) = 2N+5", gp(3), insts);

	pmu_reset();
	set_gp(0, EV_INST | RING | EVTSEL_EN | EVTSEL_EDGE);
	set_gp(1, EV_INST | RING | EVTSEL_EN | EVTSEL_EDGE | EVTSEL_CMASK(1));
	set_gp(2, EV_CYCLES | RING | EVTSEL_EN | EVTSEL_CMASK(1));
	set_gp(3, EV_INST | RING | EVTSEL_EN);
	count_loop(0xf, n);
	printf("N = %u: inst edge %lu, inst edge+cmask1 %lu, cycles cmask1 %lu, inst %lu\n", n,
	       gp(0), gp(1), gp(2), gp(3));
	if (exact) {
		report(gp(0) == 0 && gp(1) == 0,
		       "EdgeDetect is unbacked on the exact backend: never counts");
		report(gp(2) == 0,
		       "CMask on core cycles is unbacked on the exact backend: never counts");
		expect("instructions beside them (control) = 2N+5", gp(3), insts);
		report_skip(
			"EdgeDetect 0->1 transitions and CMask on cycles: the exact backend has no "
			"per-cycle history (unbacked, documented in README)");
	}
}

/*
 * RDPMC while counting agrees with RDMSR: the value read is every counted
 * instruction before it (see count_rdpmc); stopped, both read the same.
 */
static void rdpmc_agrees(uint32_t n)
{
	/* counted before the RDPMC, before the RDMSR, in all: k * N + these */
	static const struct {
		const char *name;
		uint32_t ecx, msr, k;
		uint64_t at_rdpmc, at_rdmsr, final;
	} c[] = {
		{ "PMC0 instructions", 0, MSR_IA32_PMC(0), 2, 3, 8, 15 },
		{ "fixed 0 instructions", RDPMC_FIXED | 0, MSR_FIXED_CTR(0), 2, 3, 8, 15 },
		/* cycles: the instructions plus the N - 1 taken jnz before each read */
		{ "fixed 1 cycles", RDPMC_FIXED | 1, MSR_FIXED_CTR(1), 3, 2, 7, 14 },
	};

	uint64_t probe;
	int vec;

	report_prefix("count: rdpmc: ");
	vec = rdpmc_safe(0, &probe);
	if (vec && !exact) {
		/* KVM on a host without a hardware PMU: guest RDPMC cannot exit to the VMM */
		report_skip("RDPMC faults here (vector %d): nothing to compare", vec);
		return;
	}
	report(vec == 0, "RDPMC of PMC0 at CPL 0 does not fault (vector %d)", vec);
	for (unsigned int i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t k = c[i].k, r, v;

		pmu_reset();
		set_gp(0, EV_INST | RING | EVTSEL_EN);
		wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, FIXED_FIELD(0, 3) | FIXED_FIELD(1, 3));
		count_rdpmc(1 | GLOBAL_FIXED(0) | GLOBAL_FIXED(1), n, c[i].ecx, c[i].msr);
		v = rdmsr(c[i].msr);
		r = rdpmc(c[i].ecx);
		printf("%s: RDPMC %lu then RDMSR %lu while counting; stopped: RDMSR %lu RDPMC "
		       "%lu\n",
		       c[i].name, mid_rdpmc, mid_rdmsr, v, r);
		expect(c[i].name, mid_rdpmc, k * n + c[i].at_rdpmc);
		expect("RDMSR 5 instructions later", mid_rdmsr, k * n + c[i].at_rdmsr);
		expect("final count", v, k * n + c[i].final);
		report(r == v, "%s stopped: RDPMC %lu = RDMSR %lu", c[i].name, r, v);
	}
}

static bool on_exact_emulator(void)
{
	return cpu_brand_has("exact counting emulator");
}

int main(uint64_t arg)
{
	struct cpuid_regs a = cpuid_regs(0xa, 0);
	unsigned int version = a.a & 0xff;

	report_prefix("count: ");
	idt_init();
	exact = on_exact_emulator();
	nr_gp = a.a >> 8 & 0xff;
	nr_fixed = a.d & 0x1f;
	if (cpuid_regs(0, 0).a >= 0x15) {
		struct cpuid_regs t = cpuid_regs(0x15, 0);

		xclk_den = t.a;
		xclk_num = t.b;
	}
	printf("perfmon v%u, %u GP, %u fixed counters, EBX %x; %s\n", version, nr_gp, nr_fixed, a.b,
	       exact ? "exact-counting emulator" : "not the exact-counting emulator");
	report(version >= 2 && nr_gp >= 4 && nr_fixed >= 3,
	       "perfmon v2+ with 4+ GP and 3+ fixed counters");
	if (version < 2 || nr_gp < 4 || nr_fixed < 3)
		return report_summary();
	/*
	 * EBX bit set = event unavailable: cycles 0, instructions 1, ref cycles
	 * 2, branches 5; the exact backend counts all four. Elsewhere (KVM)
	 * what is available depends on the host's backend: counts are only
	 * printed there, and ring 3 is not entered (PVM-style KVM hosts cannot
	 * run a bare kernel's INT from ring 3).
	 */
	if (exact)
		report(!(a.b & (1u << 0 | 1u << 1 | 1u << 2 | 1u << 5)) && (a.a >> 24) >= 6,
		       "CPUID.0AH: core cycles, instructions, ref cycles, branches available");
	else
		report_skip("counts are checked exactly only on the exact-counting emulator: "
			    "printed here");

	ring3_gdt_load();
	ring3_gate_install(USER_VECTOR, user_gate);
	ring3_make_user((uint64_t) user_page);
	ring3_make_user((uint64_t) user_stack);

	basic_counts(1000);
	basic_counts(37);
	report_prefix("count: ring 3: ");
	if (exact)
		ring3_counts(500);
	else
		report_skip("ring 3 USR/OS counts: checked on the exact-counting emulator only");
	enables(100);
	cmask_inv_edge(1000);
	rdpmc_agrees(200);
	pmu_reset();
	return report_summary();
}
