/* SPDX-License-Identifier: MIT */
/*
 * The README demo: measure a small workload from inside the guest the way
 * `perf stat` and `perf record` would. Counting: fixed counters
 * (instructions, cycles, ref-cycles) and GP counters (branches, taken
 * conditional branches... loads, stores). Sampling: PEBS, as
 * `perf record -e instructions:pp -c 20000` sets it up on Skylake: GP1
 * counts INST_RETIRED.PREC_DIST from -20000 with -20000 in its DS reset
 * slot, PEBS_ENABLE bit 1 on, the threshold one record below the end of
 * the buffer; the PMI (GLOBAL_STATUS bit 62) drains the buffer. Each
 * record gives the EventingIP, the registers after it, and the TSC.
 * SDM Vol. 3B 20.4.9 (DS save area), 22.6.2.4 (PEBS records, format 3);
 * on an adaptive-PEBS model (format 4) the record is Basic + GPRs.
 */
#include "guest.h"
#include "vpmu/pebs.h" /* the DS save area layout, SDM Vol. 3B Figure 20-8 */

#define PMI_VECTOR  0xf0
#define PERIOD	    20000
#define MAX_SAMPLES 256
#define PEBS_CTR    1 /* where Skylake counts INST_RETIRED.PREC_DIST */
#define BUF_RECORDS 16

static volatile uint64_t ds_area[32] __attribute__((aligned(64)));
static uint8_t pebs_buf[BUF_RECORDS * 200] __attribute__((aligned(64)));

/* Where the record keeps what the demo prints: format 3, or adaptive Basic + GPRs */
static struct {
	unsigned int size, eventing_ip, rip, tsc, applicable, rax;
} layout;

struct sample {
	uint64_t eventing_ip, rip, rax, tsc, applicable;
};

static struct sample samples[MAX_SAMPLES];
static volatile unsigned int nr_samples, nr_records, pmis, misaligned;

/* the workload: insertion sort of a pseudo-random array, then a checksum */
static uint32_t data[600];

/*
 * The workload's functions go in their own section, so that the linker's
 * __start_/__stop_ symbols bound them: every sample must fall in there.
 */
#define WORKLOAD __attribute__((noinline, section("sampled_text")))
extern const char __start_sampled_text[], __stop_sampled_text[];

WORKLOAD static void fill(uint32_t seed)
{
	for (unsigned int i = 0; i < sizeof(data) / sizeof(data[0]); i++) {
		seed = seed * 1103515245u + 12345u;
		data[i] = seed >> 8;
	}
}

WORKLOAD static void sort(void)
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

WORKLOAD static uint32_t checksum(void)
{
	uint32_t s = 0;

	for (unsigned int i = 0; i < sizeof(data) / sizeof(data[0]); i++)
		s = (s << 5 | s >> 27) ^ data[i];
	return s;
}

WORKLOAD static uint32_t workload(void)
{
	fill(1);
	sort();
	return checksum();
}

static const struct {
	const char *name;
	void *start;
} syms[] = {
	{ "fill", (void *) fill },
	{ "sort", (void *) sort },
	{ "checksum", (void *) checksum },
	{ "workload", (void *) workload },
};
#define NR_SYMS (sizeof(syms) / sizeof(syms[0]))

static int symbol(uint64_t ip, uint64_t *ret_off)
{
	int best = -1;
	uint64_t best_start = 0;

	if (ip < (uint64_t) __start_sampled_text || ip >= (uint64_t) __stop_sampled_text)
		return -1;
	for (unsigned int i = 0; i < NR_SYMS; i++) {
		uint64_t s = (uint64_t) syms[i].start;

		if (s <= ip && s >= best_start) {
			best = (int) i;
			best_start = s;
		}
	}
	*ret_off = ip - best_start;
	return best;
}

static uint64_t rec64(const uint8_t *rec, unsigned int off)
{
	return *(volatile const uint64_t *) (rec + off);
}

/* Take the records from the buffer and empty it (what perf's drain_pebs does). */
static void drain(void)
{
	uint64_t base = ds_area[DS_PEBS_BASE / 8], index = ds_area[DS_PEBS_INDEX / 8];

	if ((index - base) % layout.size)
		misaligned++;
	for (uint64_t r = base; r + layout.size <= index; r += layout.size) {
		const uint8_t *rec = (const uint8_t *) r;

		nr_records++;
		if (nr_samples < MAX_SAMPLES)
			samples[nr_samples++] = (struct sample){
				rec64(rec, layout.eventing_ip), rec64(rec, layout.rip),
				rec64(rec, layout.rax),		rec64(rec, layout.tsc),
				rec64(rec, layout.applicable),
			};
	}
	ds_area[DS_PEBS_INDEX / 8] = base;
}

static volatile uint64_t pmi_status_bad;

/* The buffer interrupt: stop counting, drain, clear OvfBuffer, go on. */
static void on_pmi(struct frame *f)
{
	uint64_t ctrl = rdmsr(MSR_CORE_PERF_GLOBAL_CTRL), status;

	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	pmis++;
	if (!(status & GLOBAL_STATUS_BUFFER_OVF))
		pmi_status_bad++;
	drain();
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, status); /* bit 62 included */
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);		      /* unmask the LVT */
	apic_eoi();
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, ctrl);
}

static unsigned int pebs_setup(void)
{
	uint64_t cap = 0, base = (uint64_t) pebs_buf, evtsel;
	unsigned int fmt;
	uint32_t r[4];

	cpuid(1, 0, r);
	if (r[2] & (1u << 15)) /* PDCM */
		cap = rdmsr(MSR_IA32_PERF_CAPABILITIES);
	fmt = PERF_CAP_PEBS_FORMAT(cap);
	evtsel = 0x1c0 | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT |
		 EVTSEL_EN; /* INST_RETIRED.PREC_DIST */
	if (fmt == 3) {
		layout.size = 200;
		layout.rip = 0x08;
		layout.rax = 0x10;
		layout.applicable = 0x90;
		layout.eventing_ip = 0xb0;
		layout.tsc = 0xc0;
	} else if (fmt == 4) {
		/* Basic + GPRs (DATA_CFG bit 1), the counter with Adaptive_Record */
		layout.size = 32 + 144;
		layout.eventing_ip = 0x08;
		layout.applicable = 0x10;
		layout.tsc = 0x18;
		layout.rip = 0x28;
		layout.rax = 0x30;
		wrmsr(MSR_PEBS_DATA_CFG, 1u << 1);
		evtsel |= EVTSEL_ADAPTIVE;
	} else {
		return fmt;
	}
	ds_area[DS_PEBS_BASE / 8] = base;
	ds_area[DS_PEBS_INDEX / 8] = base;
	ds_area[DS_PEBS_ABS_MAX / 8] = base + BUF_RECORDS * layout.size;
	ds_area[DS_PEBS_THRESHOLD / 8] = base + (BUF_RECORDS - 1) * layout.size;
	ds_area[DS_PEBS_GP_RESET(PEBS_CTR) / 8] = (1ull << 48) - PERIOD;
	wrmsr(MSR_IA32_DS_AREA, (uint64_t) ds_area);
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	wrmsr(MSR_IA32_PERFEVTSEL0 + PEBS_CTR, 0);
	wrmsr(MSR_IA32_PMC0_FULL + PEBS_CTR, (1ull << 48) - PERIOD);
	wrmsr(MSR_IA32_PERFEVTSEL0 + PEBS_CTR, evtsel);
	wrmsr(MSR_IA32_PEBS_ENABLE, 1u << PEBS_CTR);
	return fmt;
}

static const struct {
	const char *name;
	uint64_t evtsel;
} gp_events[4] = {
	{ "branches", 0xc4 },		    /* BR_INST_RETIRED.ALL_BRANCHES */
	{ "branches:conditional", 0x01c4 }, /* BR_INST_RETIRED.CONDITIONAL */
	{ "mem-loads", 0x81d0 },	    /* MEM_INST_RETIRED.ALL_LOADS */
	{ "mem-stores", 0x82d0 },	    /* MEM_INST_RETIRED.ALL_STORES */
};

int main(uint64_t arg)
{
	uint64_t counts[4], fixed[3];
	unsigned int fmt, hits[NR_SYMS] = { 0 }, outside = 0, tsc_back = 0, wrong_app = 0;
	uint32_t r;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	sti();

	printf("== perf stat -e instructions,cycles,ref-cycles,branches,... -- workload ==\n");
	for (int i = 0; i < 4; i++) {
		wrmsr(MSR_IA32_PMC0_FULL + i, 0);
		wrmsr(MSR_IA32_PERFEVTSEL0 + i,
		      gp_events[i].evtsel | EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
	}
	for (int i = 0; i < 3; i++)
		wrmsr(MSR_CORE_PERF_FIXED_CTR0 + i, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x333); /* fixed 0-2: OS + USR */
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

	printf("\n== perf record -e instructions:pp -c %u -- workload ==\n", PERIOD);
	fmt = pebs_setup();
	if (fmt != 3 && fmt != 4) {
		printf("no PEBS format 3 or 4 on this CPU (format %u): no sampling\n", fmt);
		report(false, "PEBS format 3 or 4");
		return report_summary();
	}
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1u << PEBS_CTR);
	workload();
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_IA32_PEBS_ENABLE, 0);
	drain();
	printf("[ perf record: captured %u samples, PEBS format %u, %u-byte records, %u buffer "
	       "PMIs ]\n",
	       nr_records, fmt, layout.size, pmis);
	for (unsigned int i = 0; i < nr_samples; i++) {
		uint64_t off = 0;
		int sym = symbol(samples[i].eventing_ip, &off);

		if (sym >= 0)
			hits[sym]++;
		else
			outside++;
		if (i > 0 && samples[i].tsc < samples[i - 1].tsc)
			tsc_back++;
		if (samples[i].applicable != 1u << PEBS_CTR)
			wrong_app++;
		if (i < 8)
			printf("  sample %2u: ip %lx  %s+0x%lx\trip after %lx  rax %lx  tsc %lu\n",
			       i, samples[i].eventing_ip, sym >= 0 ? syms[sym].name : "?", off,
			       samples[i].rip, samples[i].rax, samples[i].tsc);
	}
	printf("\n# Overhead  Symbol\n");
	for (unsigned int i = 0; i < NR_SYMS; i++)
		if (hits[i])
			printf("  %3u.%u%%    %s\n", hits[i] * 100 / nr_samples,
			       hits[i] * 1000 / nr_samples % 10, syms[i].name);
	report(fixed[0] > 10000 && counts[0] > 1000, "counts look like a workload ran");
	report(nr_records == fixed[0] / PERIOD || nr_records + 1 == fixed[0] / PERIOD ||
		       nr_records == fixed[0] / PERIOD + 1,
	       "one sample per %u instructions (%u samples, "
	       "%lu instructions)",
	       PERIOD, nr_records, fixed[0]);
	report(nr_records > BUF_RECORDS && pmis == (nr_records - 1) / (BUF_RECORDS - 1),
	       "a buffer PMI each %u records (%u PMIs)", BUF_RECORDS - 1, pmis);
	report(pmis && !pmi_status_bad, "every PMI has GLOBAL_STATUS.OvfBuffer (bit 62)");
	report(!rdmsr(MSR_CORE_PERF_GLOBAL_STATUS), "GLOBAL_STATUS clear after the last reset");
	report(!misaligned, "records are exactly %u bytes apart", layout.size);
	report(!outside && !wrong_app,
	       "every sample's EventingIP lies in the workload [%p, %p) and "
	       "names GP%u",
	       (void *) __start_sampled_text, (void *) __stop_sampled_text, PEBS_CTR);
	report(!tsc_back, "TSC never goes backwards between samples");
	return report_summary();
}
