/* SPDX-License-Identifier: MIT */
/*
 * A guest for the stats endpoint (vpmu-stat): it programs known counters,
 * runs known loops, freezes the counters and then idles for a bounded
 * number of I/O reads, so that a host tool can read the figures while
 * the guest still runs.
 *
 *   1. fixed counter 0 (INST_RETIRED.ANY) and GP counter 0
 *      (BR_INST_RETIRED.ALL_BRANCHES) over SPIN_LOOPS iterations of
 *      dec/jnz: exactly SPIN_LOOPS branches;
 *   2. GP counter 1 (INST_RETIRED.ANY_P) with a PMI every SPIN_PERIOD
 *      instructions over a longer loop; the handler counts the PMIs;
 *   3. GLOBAL_CTRL 0 (every count frozen), a "ready" line, then
 *      SPIN_WAIT reads of the COM1 line status register.
 */
#include "guest.h"

#define PMI_VECTOR     0xf0
#define SPIN_LOOPS     100000
#define SPIN_PMI_LOOPS 50000
#define SPIN_PERIOD    10000
#define SPIN_WAIT      120000000
#define PRESET	       ((1ull << 48) - SPIN_PERIOD)

static volatile unsigned int pmis;

static void on_pmi(struct frame *f)
{
	uint64_t status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);

	if (status & 2)
		wrmsr(MSR_IA32_PMC0_FULL + 1, PRESET);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, status);
	wrmsr(MSR_LVT_PMI, PMI_VECTOR); /* the delivery masked it */
	pmis++;
	apic_eoi();
}

/* dec/jnz `n` times between the WRMSRs that enable `ctrl` and disable everything */
static void run_counted(uint64_t ctrl, uint32_t n)
{
	/* clang-format off */
	__asm__ volatile(
		"mov $0x38f, %%ecx\n\t"
		"wrmsr\n\t"
		"mov %2, %%ecx\n"
		"1:\n\t"
		"dec %%ecx\n\t"
		"jnz 1b\n\t"
		"mov $0x38f, %%ecx\n\t"
		"xor %%eax, %%eax\n\t"
		"xor %%edx, %%edx\n\t"
		"wrmsr\n\t"
		: "+a"((uint32_t){ (uint32_t)ctrl }), "+d"((uint32_t){ (uint32_t)(ctrl >> 32) })
		: "r"(n)
		: "ecx", "memory");
	/* clang-format on */
}

int main(uint64_t arg)
{
	uint64_t insns, branches, pmi_count;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	sti();

	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR0, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x3); /* fixed 0: OS and USR, no PMI */
	wrmsr(MSR_IA32_PMC0_FULL, 0);
	wrmsr(MSR_IA32_PERFEVTSEL0, 0xc4 | EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
	run_counted((1ull << 32) | 1, SPIN_LOOPS);
	insns = rdmsr(MSR_CORE_PERF_FIXED_CTR0);
	branches = rdmsr(MSR_IA32_PMC0_FULL);
	printf("spin: fixed0 instructions %lu, gp0 branches %lu\n", insns, branches);
	report(branches == SPIN_LOOPS, "branches counted exactly");
	report(insns >= 2 * SPIN_LOOPS && insns <= 2 * SPIN_LOOPS + 8, "instructions counted");

	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	wrmsr(MSR_IA32_PMC0_FULL + 1, PRESET);
	wrmsr(MSR_IA32_PERFEVTSEL0 + 1, 0xc0 | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
	run_counted(2, SPIN_PMI_LOOPS);
	pmi_count = pmis;
	printf("spin: gp1 PMIs %lu\n", pmi_count);
	report(pmi_count >= 2 * SPIN_PMI_LOOPS / SPIN_PERIOD - 1 &&
		       pmi_count <= 2 * SPIN_PMI_LOOPS / SPIN_PERIOD + 1,
	       "PMIs every %u instructions", SPIN_PERIOD);

	printf("spin: ready, waiting\n");
	for (unsigned int i = 0; i < SPIN_WAIT; i++)
		(void) inb(0x3fd);
	printf("spin: done\n");
	return report_summary();
}
