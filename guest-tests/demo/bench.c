/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-emu's guest: a loop of a known instruction count, run in the
 * mode the host passes in RDI: 0 no counters, 1 every counter counting
 * with no overflow near, 2 GP0 a PEBS counter on INST_RETIRED.PREC_DIST
 * with a period of 10 000 (counter and DS reset slot at -10 000), a
 * 64 KiB buffer as perf's default, the threshold one record below its end:
 * a PMI each time the buffer fills, which empties it.
 */
#define PMI_VECTOR 0xf0
#include "pebs-sampler.h" /* GP0 PEBS at a period of 10 000, the 64 KiB buffer */

#define ITERATIONS 25000000ull /* 4 instructions each: 100M, so setup is noise */

int main(uint64_t mode)
{
	uint64_t n = ITERATIONS, acc = 0;

	idt_init();
	set_handler(PMI_VECTOR, sampler_on_pmi);
	x2apic_enable();
	sti();
	if (mode == 1) {
		for (int i = 0; i < 4; i++) {
			wrmsr(MSR_IA32_PMC0_FULL + i, 0);
			wrmsr(MSR_IA32_PERFEVTSEL0 + i, (i == 0	  ? 0xc0
							 : i == 1 ? 0xc4
							 : i == 2 ? 0x81d0
								  : 0x3c) |
								EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
		}
		wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x333);
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0x70000000full);
	} else if (mode == 2) {
		sampler_start(0x1c0); /* INST_RETIRED.PREC_DIST */
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
	}
	__asm__ volatile("1:\n\t"
			 "add %1, %0\n\t"
			 "xor $5, %0\n\t"
			 "dec %1\n\t"
			 "jnz 1b"
			 : "+r"(acc), "+r"(n));
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	if (mode == 2)
		sampler_drain();
	printf("bench mode %lu: %llu loop instructions, %lu PMIs, %lu PEBS records, acc %lx\n",
	       mode, ITERATIONS * 4, sampler_pmis, sampler_records, acc);
	exit(0);
}
