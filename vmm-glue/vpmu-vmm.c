/* SPDX-License-Identifier: MIT */
/*
 * vpmu-vmm: boot a guest kernel with the vPMU attached. On this build the
 * vCPU is the built-in emulator (Unicorn + Capstone) with exact counting;
 * the guest's serial output goes to stdout and the exit status comes from
 * the isa-debug-exit device.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu.h"
#include "loader.h"
#include "vpmu/vpmu.h"

#define EXIT_VMM_ERROR 2	/* even: a debug-exit status is always odd */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vpmu-vmm [OPTIONS] KERNEL\n"
		"Boot KERNEL (multiboot v1 or ELF64) with a virtual PMU.\n\n"
		"  --accel auto|kvm|emu        vCPU: auto picks emu when /dev/kvm is absent (default auto)\n"
		"  --cpu MODEL                 guest CPU model (default Skylake-Server)\n"
		"  --mem SIZE                  guest RAM, e.g. 128M, 1G (default 128M; no suffix: MiB)\n"
		"  --host-counters exact|time|perf  what backs guest counters (default exact on emu)\n"
		"  --append CMDLINE            kernel command line\n"
		"  --initrd FILE               pass FILE as a multiboot module\n"
		"  --stats PATH                stats endpoint (not available yet)\n"
		"  --max-insns N               stop with an error after N guest instructions\n"
		"  -v, --verbose               print a summary of vPMU activity on exit\n"
		"  -h, --help                  this text\n\n"
		"The guest's exit status is the isa-debug-exit value V written to port 0xf4,\n"
		"as (V << 1) | 1; vpmu-vmm exits with 2 on its own errors.\n\nCPU models:\n");
	for (size_t i = 0; i < vpmu_model_count(); i++)
		fprintf(f, "  %-16s %s\n", vpmu_model_name(i), vpmu_model_description(i));
}

static int parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1ull << 20;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case '\0': break;
	default: return -EINVAL;
	}
	if ((*end == 'i' || *end == 'I') && end[1] == 'B')
		end += 2;
	else if (*end == 'B' || *end == 'b')
		end++;
	if (*end || !v || v > (1ull << 40) / mul)
		return -EINVAL;
	*ret = v * mul;
	return 0;
}

static void *read_file(const char *path, size_t *ret_size, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		size_t got;

		if (n == cap) {
			uint8_t *nb;

			cap = cap ? cap * 2 : 1 << 20;
			if (cap > (1ull << 30) || !(nb = realloc(buf, cap))) {
				snprintf(err, errlen, "%s is too large", path);
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*ret_size = n;
	return buf;
}

static void summary(struct emu *emu)
{
	struct emu_stats s;
	struct vpmu_stats v;

	emu_get_stats(emu, &s);
	fprintf(stderr, "vpmu-vmm: guest: %llu instructions, %llu cycles (modelled); %llu blocks, "
		"%llu instructions single-stepped in %llu stretches; %llu TB flushes, %llu aliases "
		"(%llu flushes)\n",
		(unsigned long long)s.instructions, (unsigned long long)s.cycles,
		(unsigned long long)s.blocks, (unsigned long long)s.stepped,
		(unsigned long long)s.step_entries, (unsigned long long)s.tb_flushes,
		(unsigned long long)s.aliases, (unsigned long long)s.alias_flushes);
	fprintf(stderr, "vpmu-vmm: exits: %llu MSR, %llu CPUID, %llu RDPMC, %llu I/O; events: %llu "
		"interrupts, %llu NMIs, %llu exceptions, %llu PMIs\n",
		(unsigned long long)s.msr_exits, (unsigned long long)s.cpuid_exits,
		(unsigned long long)s.rdpmc_exits, (unsigned long long)s.io_exits,
		(unsigned long long)s.interrupts, (unsigned long long)s.nmis,
		(unsigned long long)s.exceptions, (unsigned long long)s.pmis);
	if (!emu_vpmu(emu) || vpmu_stats_read(emu_vpmu(emu), &v) < 0)
		return;
	fprintf(stderr, "vpmu-vmm: vpmu %s/%s: %llu MSR reads, %llu writes, %llu #GP, %llu RDPMC, "
		"%llu overflows, %llu PMIs requested, %llu delivered\n",
		v.model, v.backend, (unsigned long long)v.msr_reads, (unsigned long long)v.msr_writes,
		(unsigned long long)v.msr_faults, (unsigned long long)v.rdpmcs,
		(unsigned long long)v.overflows, (unsigned long long)v.pmis_requested,
		(unsigned long long)v.pmis_delivered);
	for (unsigned int i = 0; i < VPMU_STATS_COUNTERS; i++) {
		const struct vpmu_counter_stats *c = &v.counters[i];

		if (!(c->flags & VPMU_CTR_PROGRAMMED) && !c->overflows)
			continue;
		fprintf(stderr, "vpmu-vmm:   %s%u config %#llx count %llu overflows %llu%s\n",
			i < 8 ? "gp" : "fixed", i < 8 ? i : i - 8, (unsigned long long)c->config,
			(unsigned long long)c->count, (unsigned long long)c->overflows,
			c->flags & VPMU_CTR_UNBACKED ? " (unbacked)" : "");
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "accel", required_argument, NULL, 'a' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "mem", required_argument, NULL, 'm' },
		{ "host-counters", required_argument, NULL, 'H' },
		{ "append", required_argument, NULL, 'A' },
		{ "initrd", required_argument, NULL, 'i' },
		{ "stats", required_argument, NULL, 's' },
		{ "max-insns", required_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	const char *accel = "auto", *counters = "exact", *append = NULL, *initrd = NULL;
	struct emu_config cfg;
	struct emu *emu = NULL;
	struct vmm_boot boot;
	struct vmm_module mod;
	char err[512];
	void *image, *initrd_data = NULL;
	size_t size, initrd_size = 0;
	bool verbose = false;
	int c, r, status = 0;

	emu_config_init(&cfg);
	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 'a': accel = optarg; break;
		case 'c': cfg.model = optarg; break;
		case 'm':
			if (parse_size(optarg, &cfg.mem_size) < 0) {
				fprintf(stderr, "vpmu-vmm: --mem %s: not a size (use e.g. 128M or 1G)\n", optarg);
				return EXIT_VMM_ERROR;
			}
			break;
		case 'H': counters = optarg; break;
		case 'A': append = optarg; break;
		case 'i': initrd = optarg; break;
		case 's':
			fprintf(stderr, "vpmu-vmm: --stats %s: the stats endpoint is not available yet in this "
				"build; going on without it\n", optarg);
			break;
		case 'n': cfg.max_instructions = strtoull(optarg, NULL, 0); break;
		case 'v': verbose = true; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "vpmu-vmm: see vpmu-vmm --help\n");
			return EXIT_VMM_ERROR;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "vpmu-vmm: %s (see vpmu-vmm --help)\n",
			optind == argc ? "no KERNEL given" : "more than one KERNEL given");
		return EXIT_VMM_ERROR;
	}
	if (strcmp(accel, "auto") && strcmp(accel, "kvm") && strcmp(accel, "emu")) {
		fprintf(stderr, "vpmu-vmm: --accel %s: use auto, kvm or emu\n", accel);
		return EXIT_VMM_ERROR;
	}
	if (strcmp(counters, "exact") && strcmp(counters, "time") && strcmp(counters, "perf")) {
		fprintf(stderr, "vpmu-vmm: --host-counters %s: use exact, time or perf\n", counters);
		return EXIT_VMM_ERROR;
	}
	if (!strcmp(accel, "kvm")) {
		fprintf(stderr, "vpmu-vmm: --accel kvm is not available yet in this build: use --accel emu "
			"(or auto)\n");
		return EXIT_VMM_ERROR;
	}
	if (!strcmp(accel, "auto") && verbose)
		fprintf(stderr, "vpmu-vmm: --accel auto: using the emulator (%s)\n",
			access("/dev/kvm", R_OK | W_OK) ? "/dev/kvm is absent"
							 : "the KVM vCPU is not in this build yet");
	if (!strcmp(counters, "perf")) {
		fprintf(stderr, "vpmu-vmm: --host-counters perf makes no sense under the emulator, whose "
			"guest never runs on the host PMU: use --host-counters exact\n");
		return EXIT_VMM_ERROR;
	}
	if (!strcmp(counters, "time")) {
		fprintf(stderr, "vpmu-vmm: --host-counters time is not available yet in this build: use "
			"--host-counters exact\n");
		return EXIT_VMM_ERROR;
	}

	image = read_file(argv[optind], &size, err, sizeof(err));
	if (!image) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		return EXIT_VMM_ERROR;
	}
	if (initrd) {
		initrd_data = read_file(initrd, &initrd_size, err, sizeof(err));
		if (!initrd_data) {
			fprintf(stderr, "vpmu-vmm: %s\n", err);
			free(image);
			return EXIT_VMM_ERROR;
		}
		mod.data = initrd_data;
		mod.size = initrd_size;
		mod.cmdline = initrd;
	}
	r = emu_new(&cfg, &emu, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		status = EXIT_VMM_ERROR;
		goto out;
	}
	{
		struct vmm_ram ram = emu_ram(emu);

		r = vmm_load_kernel(&ram, image, size, append, initrd ? &mod : NULL, initrd ? 1 : 0,
				    &boot, err, sizeof(err));
	}
	if (r < 0) {
		fprintf(stderr, "vpmu-vmm: %s: %s\n", argv[optind], err);
		status = EXIT_VMM_ERROR;
		goto out;
	}
	r = emu_boot(emu, &boot, 0, err, sizeof(err));
	if (r == 0)
		r = emu_run(emu, &status, err, sizeof(err));
	fflush(stdout);
	if (r < 0) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		status = EXIT_VMM_ERROR;
	}
	if (verbose)
		summary(emu);
out:
	emu_free(emu);
	free(image);
	free(initrd_data);
	return status;
}
