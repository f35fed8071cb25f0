/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-emu's guest: a loop of a known instruction count, run in the
 * mode the host passes in RDI: 0 no counters, 1 every counter counting
 * with no overflow near, 2 GP0 sampling INST_RETIRED every 10 000
 * instructions with a PMI each time.
 */
#include "guest.h"

#define PMI_VECTOR	0xf0
#define PERIOD		10000
#define ITERATIONS	5000000ull	/* 4 instructions each */

static volatile uint64_t pmis;

static void on_pmi(struct frame *f)
{
	pmis++;
	wrmsr(MSR_IA32_PMC0_FULL, (1ull << 48) - PERIOD);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, 1);
	wrmsr(0x834, PMI_VECTOR);
	apic_eoi();
}

int main(uint64_t mode)
{
	uint64_t n = ITERATIONS, acc = 0;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	sti();
	if (mode == 1) {
		for (int i = 0; i < 4; i++) {
			wrmsr(MSR_IA32_PMC0_FULL + i, 0);
			wrmsr(MSR_IA32_PERFEVTSEL0 + i, (i == 0 ? 0xc0 : i == 1 ? 0xc4 : i == 2 ? 0x81d0 : 0x3c) |
			      EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
		}
		wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x333);
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0x70000000full);
	} else if (mode == 2) {
		wrmsr(0x834, PMI_VECTOR);
		wrmsr(MSR_IA32_PMC0_FULL, (1ull << 48) - PERIOD);
		wrmsr(MSR_IA32_PERFEVTSEL0, 0xc0 | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
	}
	__asm__ volatile("1:\n\t"
			 "add %1, %0\n\t"
			 "xor $5, %0\n\t"
			 "dec %1\n\t"
			 "jnz 1b"
			 : "+r"(acc), "+r"(n));
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	printf("bench mode %lu: %llu loop instructions, %lu PMIs, acc %lx\n", mode, ITERATIONS * 4,
	       pmis, acc);
	exit(0);
}
