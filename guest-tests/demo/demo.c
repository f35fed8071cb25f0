/* SPDX-License-Identifier: MIT */
/*
 * The README demo: measure a small workload from inside the guest the way
 * `perf stat` and `perf record` would. Counting: fixed counters
 * (instructions, cycles, ref-cycles) and GP counters (branches, taken
 * conditional branches... loads, stores). Sampling: INST_RETIRED at a
 * period of 20 000 with a PMI each time, recording the interrupted IP.
 */
#include "guest.h"

#define PMI_VECTOR	0xf0
#define PERIOD		20000
#define MAX_SAMPLES	64

static volatile uint64_t samples[MAX_SAMPLES];
static volatile unsigned int nr_samples;

/* the workload: insertion sort of a pseudo-random array, then a checksum */
static uint32_t data[600];

__attribute__((noinline)) static void fill(uint32_t seed)
{
	for (unsigned int i = 0; i < sizeof(data) / sizeof(data[0]); i++) {
		seed = seed * 1103515245u + 12345u;
		data[i] = seed >> 8;
	}
}

__attribute__((noinline)) static void sort(void)
{
	for (unsigned int i = 1; i < sizeof(data) / sizeof(data[0]); i++) {
		uint32_t v = data[i];
		unsigned int j = i;

		while (j && data[j - 1] > v) {
			data[j] = data[j - 1];
			j--;
		}
		data[j] = v;
	}
}

__attribute__((noinline)) static uint32_t checksum(void)
{
	uint32_t s = 0;

	for (unsigned int i = 0; i < sizeof(data) / sizeof(data[0]); i++)
		s = (s << 5 | s >> 27) ^ data[i];
	return s;
}

static uint32_t workload(void)
{
	fill(1);
	sort();
	return checksum();
}

static const struct { const char *name; void *start; } syms[] = {
	{ "fill", (void *)fill }, { "sort", (void *)sort }, { "checksum", (void *)checksum },
};

static const char *symbol(uint64_t ip)
{
	const char *best = "?";
	uint64_t best_start = 0;

	for (unsigned int i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		uint64_t s = (uint64_t)syms[i].start;

		if (s <= ip && s >= best_start) {
			best = syms[i].name;
			best_start = s;
		}
	}
	return best;
}

static void on_pmi(struct frame *f)
{
	if (nr_samples < MAX_SAMPLES)
		samples[nr_samples++] = f->rip;
	wrmsr(MSR_IA32_PMC0_FULL, (1ull << 48) - PERIOD);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
	wrmsr(0x834, PMI_VECTOR);	/* unmask the LVT */
	apic_eoi();
}

static const struct { const char *name; uint64_t evtsel; } gp_events[4] = {
	{ "branches", 0xc4 },			/* BR_INST_RETIRED.ALL_BRANCHES */
	{ "branches:conditional", 0x01c4 },	/* BR_INST_RETIRED.CONDITIONAL */
	{ "mem-loads", 0x81d0 },		/* MEM_INST_RETIRED.ALL_LOADS */
	{ "mem-stores", 0x82d0 },		/* MEM_INST_RETIRED.ALL_STORES */
};

int main(uint64_t arg)
{
	uint64_t counts[4], fixed[3], sum;
	uint32_t r;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	sti();

	printf("== perf stat -e instructions,cycles,ref-cycles,branches,... -- workload ==\n");
	for (int i = 0; i < 4; i++) {
		wrmsr(MSR_IA32_PMC0_FULL + i, 0);
		wrmsr(MSR_IA32_PERFEVTSEL0 + i, gp_events[i].evtsel | EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
	}
	for (int i = 0; i < 3; i++)
		wrmsr(MSR_CORE_PERF_FIXED_CTR0 + i, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x333);	/* fixed 0-2: OS + USR */
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0x70000000full);
	r = workload();
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	for (int i = 0; i < 4; i++)
		counts[i] = rdpmc(i);
	for (int i = 0; i < 3; i++)
		fixed[i] = rdpmc((1u << 30) | i);
	printf("\n Performance counter stats for 'workload' (checksum %x):\n\n", r);
	printf("%16lu      instructions              #  %lu.%02lu insn per cycle\n", fixed[0],
	       fixed[0] / fixed[1], fixed[0] * 100 / fixed[1] % 100);
	printf("%16lu      cycles\n", fixed[1]);
	printf("%16lu      ref-cycles\n", fixed[2]);
	for (int i = 0; i < 4; i++)
		printf("%16lu      %s\n", counts[i], gp_events[i].name);

	printf("\n== perf record -e instructions -c %u -- workload ==\n", PERIOD);
	wrmsr(0x834, PMI_VECTOR);
	wrmsr(MSR_IA32_PERFEVTSEL0, 0);
	wrmsr(MSR_IA32_PMC0_FULL, (1ull << 48) - PERIOD);
	wrmsr(MSR_IA32_PERFEVTSEL0, 0xc0 | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
	workload();
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	printf("[ perf record: captured %u samples ]\n", nr_samples);
	sum = 0;
	for (unsigned int i = 0; i < nr_samples && i < 8; i++)
		printf("  sample %2u: ip %lx  %s\n", i, samples[i], symbol(samples[i]));
	for (unsigned int i = 0; i < nr_samples; i++)
		sum += samples[i] != 0;
	report(fixed[0] > 10000 && counts[0] > 1000, "counts look like a workload ran");
	report(nr_samples == fixed[0] / PERIOD || nr_samples + 1 == fixed[0] / PERIOD ||
	       nr_samples == fixed[0] / PERIOD + 1, "one sample per %u instructions", PERIOD);
	report(sum == nr_samples, "every sample has an IP");
	return report_summary();
}
