/* SPDX-License-Identifier: MIT */
/*
 * A guest that flips the enable bit (IA32_PERFEVTSEL0 bit 22, SDM Vol. 3B
 * Figure 21-1) of a counter TOGGLES times, as a guest may, whatever backs
 * it. When the host cannot back the event, each enable is one more failed
 * attempt on the host: the VMM's log must not get a line per toggle
 * (vmm-glue/tests/test-log-flood.py counts them). The counter is on core
 * cycles (3CH/00H); GLOBAL_CTRL enables it once.
 */
#include "guest.h"

#define EVTSEL_CYCLES (0x3cul | 3ul << 16) /* USR OS */
#define EN	      (1ul << 22)
#define TOGGLES	      100000u

int main(uint64_t arg)
{
	unsigned int n = (uint32_t) arg ? (uint32_t) arg : TOGGLES, i;

	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
	for (i = 0; i < n; i++) {
		wrmsr(MSR_IA32_PERFEVTSEL0, EVTSEL_CYCLES | EN);
		wrmsr(MSR_IA32_PERFEVTSEL0, EVTSEL_CYCLES);
	}
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	printf("toggle: PERFEVTSEL0 enabled and disabled %u times\n", i);
	report(rdmsr(MSR_IA32_PERFEVTSEL0) == EVTSEL_CYCLES, "PERFEVTSEL0 reads what was written");
	return report_summary();
}
