/* SPDX-License-Identifier: MIT */
/*
 * The PMU accesses of a Linux guest's perf PMI handler (intel_pmu_handle_irq
 * with one sampling counter): read GLOBAL_STATUS, disable GLOBAL_CTRL,
 * reset the status bits, read the counter (RDPMC, as x86_perf_event_update
 * does), re-arm it, re-enable. Prints
 * ns per access for vpmu and for a raw array store of the same sequence
 * measured in the same run, and their ratio (target: <= 2).
 *
 * The baseline is what the cheapest MSR emulation a VMM could call costs:
 * a function that bounds-checks the MSR number and loads or stores an
 * array slot, in a shared library like libvpmu (bench/baseline-regs.c),
 * so both sides pay the same call. The same loop with the store inlined
 * is printed too, for reference: no VMM reaches MSR emulation without a
 * call.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vpmu/vpmu.h"
#include "baseline-regs.h"

#define ROUNDS 2000000

enum { RD, WR, PMC };
static const struct access {
	int op;
	uint32_t msr;
	uint64_t value;
} seq[] = {
	{ RD, 0x38e, 0 },		  /* GLOBAL_STATUS */
	{ WR, 0x38f, 0 },		  /* GLOBAL_CTRL = 0 */
	{ WR, 0x390, 1 },		  /* STATUS_RESET PMC0 */
	{ PMC, 0, 0 },			  /* RDPMC 0 (count update) */
	{ WR, 0x4c1, 0xffffffff0000ULL }, /* re-arm: -period */
	{ WR, 0x38f, 0x70000000fULL },	  /* GLOBAL_CTRL on */
};
#define SEQ_LEN (sizeof(seq) / sizeof(seq[0]))

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static volatile uint64_t sink;

static double run_vpmu(struct vpmu_vcpu *v)
{
	double t0 = now_ns();
	uint64_t acc = 0;

	for (unsigned int r = 0; r < ROUNDS; r++)
		for (unsigned int i = 0; i < SEQ_LEN; i++) {
			uint64_t val;

			if (seq[i].op == RD) {
				vpmu_msr_read(v, seq[i].msr, &val);
				acc += val;
			} else if (seq[i].op == PMC) {
				vpmu_rdpmc(v, seq[i].msr, &val);
				acc += val;
			} else {
				vpmu_msr_write(v, seq[i].msr, seq[i].value);
			}
		}
	sink = acc;
	return (now_ns() - t0) / (ROUNDS * (double) SEQ_LEN);
}

/* The cheapest possible emulation: an array indexed by MSR number. */
static double run_array(struct baseline_regs *a)
{
	double t0 = now_ns();
	uint64_t acc = 0;

	for (unsigned int r = 0; r < ROUNDS; r++)
		for (unsigned int i = 0; i < SEQ_LEN; i++) {
			uint64_t val;

			if (seq[i].op != WR) {
				baseline_msr_read(a, seq[i].msr, &val);
				acc += val;
			} else {
				baseline_msr_write(a, seq[i].msr, seq[i].value);
			}
		}
	sink = acc;
	return (now_ns() - t0) / (ROUNDS * (double) SEQ_LEN);
}

static double run_inline(volatile uint64_t *regs)
{
	double t0 = now_ns();
	uint64_t acc = 0;

	for (unsigned int r = 0; r < ROUNDS; r++)
		for (unsigned int i = 0; i < SEQ_LEN; i++) {
			if (seq[i].op != WR)
				acc += regs[seq[i].msr & 0x7ff];
			else
				regs[seq[i].msr & 0x7ff] = seq[i].value;
		}
	sink = acc;
	return (now_ns() - t0) / (ROUNDS * (double) SEQ_LEN);
}

int main(void)
{
	static volatile uint64_t regs[0x800];
	static struct baseline_regs arr;
	struct vpmu_config cfg;
	struct vpmu_vcpu *v;
	double best_v = 1e9, best_a = 1e9, best_i = 1e9;
	struct mallinfo2 m0, m1;

	vpmu_config_init(&cfg);
	cfg.model = "Skylake-Server";
	cfg.backend = VPMU_BACKEND_EXACT;
	if (vpmu_vcpu_new(&cfg, &v) < 0) {
		fprintf(stderr, "bench-msr: cannot create a Skylake-Server vCPU\n");
		return 1;
	}
	/* a sampling counter, as perf record programs it */
	vpmu_msr_write(v, 0x186, 0x5300c0);
	vpmu_vcpu_sync(v);
	/* the path allocates nothing: heap figures before and after a run */
	m0 = mallinfo2();
	run_vpmu(v);
	m1 = mallinfo2();
	/* best of 5, interleaved so both see the same machine state */
	for (int i = 0; i < 5; i++) {
		double a = run_array(&arr), b = run_vpmu(v), c = run_inline(regs);

		best_a = a < best_a ? a : best_a;
		best_v = b < best_v ? b : best_v;
		best_i = c < best_i ? c : best_i;
	}
	printf("pmi-handler MSR sequence (%zu accesses x %d rounds, best of 5)\n", SEQ_LEN, ROUNDS);
	printf("  vpmu_msr_read/write: %6.2f ns/access\n", best_v);
	printf("  raw array baseline:  %6.2f ns/access (shared-library call)\n", best_a);
	printf("  inlined array store: %6.2f ns/access (reference only)\n", best_i);
	printf("  ratio: %.2fx (target <= 2.00x)\n", best_v / best_a);
	printf("  heap change over %d accesses: %zd bytes in use, %zd arenas (target 0: no "
	       "allocation)\n",
	       ROUNDS * (int) SEQ_LEN, (ssize_t) (m1.uordblks - m0.uordblks),
	       (ssize_t) (m1.arena - m0.arena));
	vpmu_vcpu_free(v);
	return 0;
}
