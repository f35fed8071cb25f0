/* SPDX-License-Identifier: MIT */
/*
 * Emulator speed with the vPMU: guest instructions per second on the same
 * guest loop (guest-tests/demo/bench.c) with no counters, with every
 * counter counting and no overflow near, and with GP0 a PEBS counter at
 * period 10 000: the vPMU writes a record into the guest's DS buffer each
 * period and raises a PMI only when the buffer reaches its threshold (the
 * guest sets up the DS area). CPU time of this thread; each mode runs
 * twice (interleaved) and the better run counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu.h"
#include "loader.h"
#include "vpmu/vpmu.h"

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int run(const void *image, size_t size, uint64_t mode, double *ret_ips, uint64_t *ret_pmis,
	       uint64_t *ret_records)
{
	struct emu_config cfg;
	struct emu *emu;
	struct emu_stats st;
	struct vmm_boot boot;
	struct vmm_ram ram;
	char err[256];
	int status = 0;
	double t0, t1;
	FILE *devnull = fopen("/dev/null", "w");

	emu_config_init(&cfg);
	cfg.serial_out = devnull;
	cfg.mem_size = 16ull << 20; /* the guest needs little: less RAM to fault in per run */
	if (emu_new(&cfg, &emu, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench-emu: %s\n", err);
		return -1;
	}
	ram = emu_ram(emu);
	if (vmm_load_kernel(&ram, image, size, NULL, NULL, 0, &boot, err, sizeof(err)) < 0 ||
	    emu_boot(emu, &boot, mode, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench-emu: %s\n", err);
		emu_free(emu);
		return -1;
	}
	t0 = cpu_seconds();
	if (emu_run(emu, &status, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench-emu: %s\n", err);
		emu_free(emu);
		return -1;
	}
	t1 = cpu_seconds();
	emu_get_stats(emu, &st);
	*ret_ips = (double) st.instructions / (t1 - t0);
	*ret_pmis = st.pmis;
	*ret_records = 0;
	if (emu_vpmu(emu)) {
		struct vpmu_stats vs;

		vpmu_vcpu_sync(emu_vpmu(emu));
		if (vpmu_stats_read(emu_vpmu(emu), &vs) == 0)
			*ret_records = vs.pebs_records;
	}
	emu_free(emu);
	fclose(devnull);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *names[3] = {
		"vPMU off (no counter enabled)",
		"all 7 counters counting, no overflow near",
		"GP0 PEBS at period 10000 (64 KiB DS buffer, PMI at threshold)",
	};
	double ips[3];
	uint64_t pmis[3], records[3];
	FILE *f;
	void *image;
	long size;

	if (argc != 2) {
		fprintf(stderr, "usage: bench-emu BENCH-KERNEL (guest-tests/bench.elf64)\n");
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "bench-emu: cannot read %s\n", argv[1]);
		return 2;
	}
	image = malloc((size_t) size);
	if (!image || fread(image, 1, (size_t) size, f) != (size_t) size) {
		fprintf(stderr, "bench-emu: cannot read %s\n", argv[1]);
		return 2;
	}
	fclose(f);
	/*
	 * Two rounds of the three modes, best of each: the process's first
	 * emulator pays page faults for its translation buffer that later
	 * ones do not, and would make whichever mode ran first look slow.
	 */
	for (int m = 0; m < 3; m++)
		ips[m] = 0;
	for (int round = 0; round < 2; round++) {
		for (int m = 0; m < 3; m++) {
			double v;

			if (run(image, (size_t) size, (uint64_t) m, &v, &pmis[m], &records[m]) < 0)
				return 1;
			if (v > ips[m])
				ips[m] = v;
		}
	}
	for (int m = 0; m < 3; m++)
		printf("%-64s %8.2f M guest instructions/s (%llu PMIs, %llu PEBS records)\n",
		       names[m], ips[m] / 1e6, (unsigned long long) pmis[m],
		       (unsigned long long) records[m]);
	printf("ratio all-counting / off: %.2f (target >= 0.5)\n", ips[1] / ips[0]);
	printf("slowdown PEBS / off: %.2fx (target <= 1.2x)\n", ips[0] / ips[2]);
	free(image);
	return 0;
}
