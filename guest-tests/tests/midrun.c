/* SPDX-License-Identifier: MIT */
/*
 * Counting switched on in the middle of a run, after a long uncounted
 * stretch: the exact counts from the enabling WRMSR on. An emulator that
 * runs uncounted code on translations without counting (a fast path) must
 * count exactly once a counter is enabled, also in code that it already
 * translated, and even when the enable comes from inside a hot loop.
 *
 * mid_run(ctrl, N, K): a loop of N iterations that writes GLOBAL_CTRL =
 * ctrl when K iterations are left (K = 0: never, and no MSR is touched):
 *
 *        mov N, %r9; mov K, %r10; (eax, edx, ecx set for the WRMSR)
 *   1:   cmp %r10, %r9
 *        jne 2f
 *        wrmsr                   counting starts: counted (#1)
 *   2:   dec %r9
 *        jnz 1b
 *        test %r10, %r10
 *        jz 3f                   K = 0: no closing WRMSR
 *        xor %eax, %eax
 *        xor %edx, %edx
 *        wrmsr                   counting stops: not counted
 *   3:   ret
 *
 * Counted, K >= 1: the WRMSR, its iteration's dec and jnz (2), K - 1
 * iterations of cmp, jne, dec, jnz (4 each), test, jz, xor, xor (4):
 * INST_RETIRED = 1 + 2 + 4 (K - 1) + 4 = 4K + 3; BR_INST_RETIRED (every
 * branch instruction, taken or not): 1 + 2 (K - 1) + 1 = 2K. The N - K
 * iterations before the WRMSR (4 instructions each) are the uncounted
 * stretch. As in count.c, the exact-counting emulator counts an
 * instruction after it executed, so a WRMSR that starts counting counts
 * itself and one that stops counting does not.
 *
 * SDM Vol. 3B 21.2.2: a counter counts only with its enable (EN in
 * IA32_PERFEVTSELx, the ring bits of its IA32_FIXED_CTR_CTRL field) and
 * its IA32_PERF_GLOBAL_CTRL bit set; INST_RETIRED.ANY is fixed counter 0
 * and event C0H, BR_INST_RETIRED.ALL_BRANCHES event C4H (the architectural
 * events, 21.2.1). Counts are checked exactly on the exact-counting
 * emulator only; elsewhere (KVM) they are printed.
 */
#include "guest.h"

#define MSR_FIXED_CTR0 MSR_CORE_PERF_FIXED_CTR0
#define EV_INST	       0x00c0
#define EV_BRANCH      0x00c4
#define RING	       (EVTSEL_USR | EVTSEL_OS)
#define GLOBAL_ON      (1ull << 32 | 3) /* fixed 0, GP 0 and 1 */
#define STRETCH	       10000000u	/* iterations, 4 instructions each */

uint64_t mid_run(uint64_t ctrl, uint64_t n, uint64_t k);

/* clang-format off */
__asm__(
	".pushsection .text\n"
	/* rdi = GLOBAL_CTRL value, rsi = N, rdx = K */
	".globl mid_run\n"
	"mid_run:\n\t"
	"mov %rsi, %r9\n\t"
	"mov %rdx, %r10\n\t"
	"mov %rdi, %rax\n\t"
	"mov %rdi, %rdx\n\t"
	"shr $32, %rdx\n\t"
	"mov $0x38f, %ecx\n"
	"1:\n\t"
	"cmp %r10, %r9\n\t"
	"jne 2f\n\t"
	"wrmsr\n"
	"2:\n\t"
	"dec %r9\n\t"
	"jnz 1b\n\t"
	"test %r10, %r10\n\t"
	"jz 3f\n\t"
	"xor %eax, %eax\n\t"
	"xor %edx, %edx\n\t"
	"wrmsr\n"
	"3:\n\t"
	"ret\n"
	".popsection\n");
/* clang-format on */

struct counts {
	uint64_t fixed0, inst, branches;
};

static struct counts read_counts(void)
{
	return (struct counts){ rdmsr(MSR_FIXED_CTR0), rdmsr(MSR_IA32_PMC0),
				rdmsr(MSR_IA32_PMC0 + 1) };
}

static void print_counts(const char *what, struct counts c)
{
	printf("%s: fixed 0 %lu, GP0 (C0H) %lu, GP1 (C4H) %lu\n", what, c.fixed0, c.inst,
	       c.branches);
}

/* The counts after mid_run(GLOBAL_ON, n, k) from *before: exact on the emulator. */
static void check_run(bool exact, const char *what, struct counts before, uint64_t n, uint64_t k)
{
	struct counts c;

	mid_run(GLOBAL_ON, n, k);
	c = read_counts();
	print_counts(what, c);
	if (!exact) {
		report_skip("%s: exact counts on the exact-counting emulator only", what);
		return;
	}
	report(c.fixed0 - before.fixed0 == 4 * k + 3,
	       "%s: fixed 0 (INST_RETIRED.ANY) counted %lu, expected 4K + 3 = %lu", what,
	       c.fixed0 - before.fixed0, 4 * k + 3);
	report(c.inst - before.inst == 4 * k + 3,
	       "%s: GP0 (C0H) counted %lu, expected 4K + 3 = %lu", what, c.inst - before.inst,
	       4 * k + 3);
	report(c.branches - before.branches == 2 * k,
	       "%s: GP1 (C4H) counted %lu, expected 2K = %lu", what, c.branches - before.branches,
	       2 * k);
}

int main(uint64_t arg)
{
	struct cpuid_regs a = cpuid_regs(0xa, 0);
	unsigned int version = a.a & 0xff, nr_gp = a.a >> 8 & 0xff, nr_fixed = a.d & 0x1f;
	bool exact = cpu_brand_has("exact counting emulator");
	struct counts c;

	report_prefix("midrun: ");
	idt_init();
	printf("perfmon v%u, %u GP, %u fixed counters, EBX %x; %s\n", version, nr_gp, nr_fixed, a.b,
	       exact ? "exact-counting emulator" : "not the exact-counting emulator");
	if (version < 2 || nr_gp < 2 || nr_fixed < 1 || (a.a >> 24) < 6 ||
	    (a.b & (1u << 1 | 1u << 5))) {
		report_skip("needs perfmon v2+, 2 GP and 1 fixed counter, instructions and "
			    "branches available (CPUID.0AH)");
		return report_summary();
	}

	/*
	 * 1. 40M instructions with the PMU untouched since reset (no PMU MSR
	 * written at all): nothing counts.
	 */
	mid_run(0, STRETCH, 0);
	c = read_counts();
	print_counts("after 40M uncounted instructions", c);
	report(c.fixed0 == 0 && c.inst == 0 && c.branches == 0,
	       "counters never enabled count nothing over 40M instructions");

	/*
	 * 2. Program fixed 0 and GP0/GP1 with GLOBAL_CTRL 0 (not its RESET
	 * value: that sets the GP counters' enable bits, SDM Vol. 3B 21.2.2,
	 * so EN alone would start them), then the same loop (its code already
	 * run 10M times): 9.9M iterations uncounted, and GLOBAL_CTRL set
	 * inside the loop with 100 000 left.
	 */
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_IA32_PMC0, 0);
	wrmsr(MSR_IA32_PMC0 + 1, 0);
	wrmsr(MSR_FIXED_CTR0, 0);
	wrmsr(MSR_IA32_PERFEVTSEL0, EV_INST | RING | EVTSEL_EN);
	wrmsr(MSR_IA32_PERFEVTSEL0 + 1, EV_BRANCH | RING | EVTSEL_EN);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x3); /* fixed 0: OS and USR */
	check_run(exact, "enabled in a hot loop after 39.6M uncounted", c, STRETCH, 100000);

	/*
	 * 3. Counting stopped again: another uncounted stretch of the same
	 * code changes nothing, then counting resumes near the loop's end
	 * and adds to the held values.
	 */
	c = read_counts();
	mid_run(0, STRETCH, 0);
	if (exact) {
		struct counts d = read_counts();

		report(d.fixed0 == c.fixed0 && d.inst == c.inst && d.branches == c.branches,
		       "stopped counters hold %lu/%lu/%lu over 40M uncounted instructions",
		       c.fixed0, c.inst, c.branches);
	}
	check_run(exact, "resumed 37 iterations before the end", c, STRETCH, 37);

	/* 4. Enabled on the loop's last iteration: K = 1, 7 instructions, 2 branches. */
	check_run(exact, "enabled on the last iteration", read_counts(), STRETCH, 1);

	wrmsr(MSR_IA32_PERFEVTSEL0, 0);
	wrmsr(MSR_IA32_PERFEVTSEL0 + 1, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0);
	return report_summary();
}
