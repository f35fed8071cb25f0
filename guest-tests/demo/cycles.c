/* SPDX-License-Identifier: MIT */
/*
 * Three counters over a known loop, for the host-backend fault tests
 * (vmm-glue/tests/test-perf-faults.py): fixed counter 1
 * (CPU_CLK_UNHALTED.THREAD), GP counter 0 on the same cycles through
 * its architectural event (3CH/00H, SDM Vol. 3B Table 21-1) and GP
 * counter 1 on INST_RETIRED.ANY_P (C0H/00H), all OS | USR. The guest
 * prints what they counted; the host side knows which ones its backend
 * can back. What the guest itself checks holds whatever backs them: a
 * counter never runs backwards, and a disabled one stands still.
 */
#include "guest.h"

#define EVTSEL_CYCLES (0x3cul | 3ul << 16 | 1ul << 22) /* USR OS EN */
#define EVTSEL_INSTS  (0xc0ul | 3ul << 16 | 1ul << 22)
#define FX1_CTRL      (0x3ul << 4)	/* fixed 1: OS | USR, no PMI */
#define ENABLE	      (1ul << 33 | 3ul) /* fixed 1, GP 0 and 1 */
#define LOOPS	      20000000ul

static void spin(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		__asm__ volatile("" ::: "memory");
}

int main(uint64_t arg)
{
	uint64_t f1, g0, g1, f1b, g0b, g1b;

	(void) arg;
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_IA32_PERFEVTSEL0, EVTSEL_CYCLES);
	wrmsr(MSR_IA32_PERFEVTSEL0 + 1, EVTSEL_INSTS);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, FX1_CTRL);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, ENABLE);
	spin(LOOPS / 2);
	f1 = rdmsr(MSR_CORE_PERF_FIXED_CTR0 + 1);
	g0 = rdmsr(MSR_IA32_PMC0);
	g1 = rdmsr(MSR_IA32_PMC0 + 1);
	spin(LOOPS / 2);
	f1b = rdmsr(MSR_CORE_PERF_FIXED_CTR0 + 1);
	g0b = rdmsr(MSR_IA32_PMC0);
	g1b = rdmsr(MSR_IA32_PMC0 + 1);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	printf("cycles: fixed1 %lu gp0 %lu gp1 %lu\n", f1b, g0b, g1b);
	report(f1b >= f1 && g0b >= g0 && g1b >= g1, "no counter ran backwards");
	f1 = rdmsr(MSR_CORE_PERF_FIXED_CTR0 + 1);
	g0 = rdmsr(MSR_IA32_PMC0);
	spin(LOOPS / 10);
	report(rdmsr(MSR_CORE_PERF_FIXED_CTR0 + 1) == f1 && rdmsr(MSR_IA32_PMC0) == g0,
	       "with GLOBAL_CTRL 0 nothing counts");
	return report_summary();
}
