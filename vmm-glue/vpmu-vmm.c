/* SPDX-License-Identifier: MIT */
/*
 * vpmu-vmm: boot a guest kernel with the vPMU attached. The vCPU is KVM
 * (kvm.c: the guest on KVM, its PMU in this process) or the built-in
 * emulator (Unicorn + Capstone, exact counting); the guest's serial
 * output goes to stdout and the exit status comes from the isa-debug-exit
 * device.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bzimage.h"
#include "emu.h"
#include "kvm.h"
#include "loader.h"
#include "pebs-dump.h"
#include "stats-server.h"
#include "vpmu/vpmu.h"

#define EXIT_VMM_ERROR 2 /* even: a debug-exit status is always odd */

/* --pmu-filter: shared by every vCPU, freed after them (a global, so never a leak report) */
static struct vpmu_filter *pmu_filter;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vpmu-vmm [OPTIONS] KERNEL\n"
		"       vpmu-vmm [OPTIONS] --restore FILE\n"
		"Boot KERNEL (multiboot v1, ELF64, or a Linux bzImage) with a virtual PMU.\n\n"
		"  --accel auto|kvm|emu        vCPU: auto picks kvm where /dev/kvm works and the "
		"host has a\n"
		"                              hardware PMU to back guest counters, else emu "
		"(default auto)\n"
		"  --smp N                     vCPUs (KVM only; default 1)\n"
		"  --cpu MODEL[,perfmon=N]     guest CPU model (default Skylake-Server), its PMU "
		"narrowed\n"
		"                              to architectural perfmon version N (2 up to the "
		"model's)\n"
		"  --mem SIZE                  guest RAM, e.g. 128M, 1G (default 128M; no suffix: "
		"MiB);\n"
		"                              above 3 GiB it goes on from 4 GiB (the APIC hole)\n"
		"  --host-counters auto|exact|time|perf  what backs guest counters: exact (the "
		"emulator\n"
		"                              counts every instruction), time (cycles from the "
		"vCPU\n"
		"                              thread's CPU time, real perf overflow signals), "
		"perf (host\n"
		"                              hardware events, guest mode only: KVM); auto: exact "
		"on emu,\n"
		"                              perf on KVM (time there without a host PMU)\n"
		"  --append CMDLINE            kernel command line\n"
		"  --initrd FILE               pass FILE as a multiboot module (a bzImage's "
		"initrd)\n"
		"  --stats PATH                serve vPMU statistics on Unix socket PATH (read "
		"with vpmu-stat)\n"
		"  --pebs-dump FILE            at exit, write the guest's PEBS buffer to FILE "
		"(read with vpmu-pebs)\n"
		"  --max-insns N               stop with an error after N guest instructions\n"
		"  --timeout SECONDS           stop with an error after this much wall time\n"
		"  --pmu-filter FILE           allow/deny guest PMU events and fixed counters, as "
		"KVM's\n"
		"                              PMU event filter does (format: docs/pmu-filter.md)\n"
		"  --save-at N FILE            emulator: at the first block boundary after N "
		"guest\n"
		"                              instructions, save the guest (CPU, RAM, devices, "
		"vPMU)\n"
		"                              to FILE and exit 0\n"
		"  --restore FILE              emulator: go on with the guest saved in FILE (no "
		"KERNEL;\n"
		"                              its model and RAM size come from FILE)\n"
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
	case 'k':
	case 'K':
		mul = 1ull << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1ull << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1ull << 30;
		end++;
		break;
	case '\0':
		break;
	default:
		return -EINVAL;
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

/* --cpu MODEL[,perfmon=N]: cuts `arg` at the comma; *ret_version 0 without a suffix. */
static int parse_cpu(char *arg, int *ret_version)
{
	char *opt = strchr(arg, ','), *end;
	long v;

	*ret_version = 0;
	if (!opt)
		return 0;
	if (strncmp(opt + 1, "perfmon=", 8))
		return -EINVAL;
	errno = 0;
	v = strtol(opt + 9, &end, 10);
	if (errno || end == opt + 9 || *end || v < 1 || v > 255)
		return -EINVAL;
	*opt = '\0';
	*ret_version = (int) v;
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

static void summary_vpmu(struct vpmu_vcpu *vcpu);

/* The vPMU's warnings (a host counter it could not open, ...): one line each. */
static void pmu_log(void *data, enum vpmu_log_level level, const char *msg)
{
	(void) data;
	(void) level;
	fprintf(stderr, "vpmu-vmm: vpmu: %s\n", msg);
}

static void summary(struct emu *emu)
{
	struct emu_stats s;

	emu_get_stats(emu, &s);
	fprintf(stderr,
		"vpmu-vmm: guest: %llu instructions, %llu cycles (modelled); %llu blocks, "
		"%llu instructions single-stepped in %llu stretches, %llu stops after an "
		"overflowing instruction; %llu TB flushes; %llu HLTs skipped to the timer\n",
		(unsigned long long) s.instructions, (unsigned long long) s.cycles,
		(unsigned long long) s.blocks, (unsigned long long) s.stepped,
		(unsigned long long) s.step_entries, (unsigned long long) s.until_stops,
		(unsigned long long) s.tb_flushes, (unsigned long long) s.halts);
	fprintf(stderr,
		"vpmu-vmm: memory: %llu windows, %llu pages mapped on first touch, %llu dropped "
		"at %llu paging changes, %llu full drops, %llu writes to translated code\n",
		(unsigned long long) s.windows, (unsigned long long) s.window_pages,
		(unsigned long long) s.window_unmaps, (unsigned long long) s.resyncs,
		(unsigned long long) s.window_flushes, (unsigned long long) s.smc_events);
	fprintf(stderr,
		"vpmu-vmm: exits: %llu MSR, %llu CPUID, %llu RDPMC, %llu I/O; events: %llu "
		"interrupts, %llu NMIs, %llu exceptions, %llu PMIs\n",
		(unsigned long long) s.msr_exits, (unsigned long long) s.cpuid_exits,
		(unsigned long long) s.rdpmc_exits, (unsigned long long) s.io_exits,
		(unsigned long long) s.interrupts, (unsigned long long) s.nmis,
		(unsigned long long) s.exceptions, (unsigned long long) s.pmis);
	if (s.kicks)
		fprintf(stderr,
			"vpmu-vmm: host-counter overflows: %llu stopped the guest to poll the "
			"vPMU\n",
			(unsigned long long) s.kicks);
	for (unsigned int v = 0; v < 32; v++)
		if (s.by_vector[v])
			fprintf(stderr, "vpmu-vmm: exception vector %u raised %llu times\n", v,
				(unsigned long long) s.by_vector[v]);
	if (s.exceptions)
		fprintf(stderr,
			"vpmu-vmm: the last exception: vector %u, error code %#x, at RIP %#llx "
			"(CR2 %#llx)\n",
			s.last_exc_vector, s.last_exc_error, (unsigned long long) s.last_exc_rip,
			(unsigned long long) s.last_exc_cr2);
	if (s.pmis) {
		char at[EMU_PMI_RECORD * 24] = "";
		size_t n = 0;

		for (unsigned int i = 0; i < EMU_PMI_RECORD && i < s.pmis; i++)
			n += (size_t) snprintf(at + n, sizeof(at) - n, " %llu",
					       (unsigned long long) s.pmi_insns[i]);
		fprintf(stderr, "vpmu-vmm: the first PMIs came after these instructions:%s\n", at);
	}
	platform_print_unknown(emu_platform(emu), stderr);
	summary_vpmu(emu_vpmu(emu));
}

static void summary_vpmu(struct vpmu_vcpu *vcpu)
{
	struct vpmu_stats v;

	if (!vcpu || vpmu_stats_read(vcpu, &v) < 0)
		return;
	fprintf(stderr,
		"vpmu-vmm: vpmu %s/%s: %llu MSR reads, %llu writes, %llu #GP, %llu RDPMC, "
		"%llu overflows, %llu PMIs requested, %llu delivered, %llu merged\n",
		v.model, v.backend, (unsigned long long) v.msr_reads,
		(unsigned long long) v.msr_writes, (unsigned long long) v.msr_faults,
		(unsigned long long) v.rdpmcs, (unsigned long long) v.overflows,
		(unsigned long long) v.pmis_requested, (unsigned long long) v.pmis_delivered,
		(unsigned long long) v.pmis_merged);
	for (unsigned int i = 0; i < VPMU_STATS_COUNTERS; i++) {
		const struct vpmu_counter_stats *c = &v.counters[i];
		const char *state;
		char note[96];

		if (!(c->flags & VPMU_CTR_PROGRAMMED) && !c->overflows && !v.log_repeats[i])
			continue;
		if (c->time_enabled)
			fprintf(stderr,
				"vpmu-vmm:   %s%u host event enabled %llu ns, running %llu ns, "
				"discarded at reloads %llu ns\n",
				i < 8 ? "gp" : "fixed", i < 8 ? i : i - 8,
				(unsigned long long) c->time_enabled,
				(unsigned long long) c->time_running,
				(unsigned long long) v.time_discarded[i]);
		state = c->flags & VPMU_CTR_UNBACKED   ? "unbacked"
			: c->flags & VPMU_CTR_FILTERED ? "filtered"
			: c->flags & VPMU_CTR_DEGRADED ? "degraded"
						       : NULL;
		note[0] = '\0';
		if (state)
			snprintf(note, sizeof(note), " (%s%s%s)", state, c->error ? ": " : "",
				 c->error ? strerror(-c->error) : "");
		fprintf(stderr, "vpmu-vmm:   %s%u config %#llx count %llu overflows %llu%s\n",
			i < 8 ? "gp" : "fixed", i < 8 ? i : i - 8, (unsigned long long) c->config,
			(unsigned long long) c->count, (unsigned long long) c->overflows, note);
		/* the library logs one line per counter and reason: the rest are counted */
		if (v.log_repeats[i])
			fprintf(stderr,
				"vpmu-vmm:   %s%u: its warning above repeated %llu times, not "
				"logged again\n",
				i < 8 ? "gp" : "fixed", i < 8 ? i : i - 8,
				(unsigned long long) v.log_repeats[i]);
	}
}

/* ---- the stats endpoint (--stats PATH): stats-server.c --------------------- */

static int stats_start(struct stats_server **srv, const char *path, struct vpmu_vcpu *vcpu,
		       char *err, size_t errlen)
{
	/* the stop signals' handler removes the socket (stats_server_unlink_path) */
	return stats_server_start(path, &vcpu, vcpu ? 1 : 0, srv, err, errlen);
}

/* ---- host-counter signals ----------------------------------------------- */

/*
 * Under KVM the time and perf backends signal the vCPU thread when a guest
 * counter overflows (vpmu_config.signo, or SIGIO when the kernel's queue
 * of real-time signals is full), which makes KVM_RUN return (kvm.c
 * handles signo). SIGIO would end the process: it gets a handler that
 * does nothing but interrupt. The emulator takes no signals: it finds
 * the overflow records between blocks (emu_config.pmu_signo = -1).
 */
/*
 * SIGINT, SIGTERM (and SIGALRM for --timeout) stop the guest where it is:
 * the run loop returns, vpmu-vmm says where the guest was, prints its
 * summary, removes the stats socket and exits 130 / 143 (2 for the
 * timeout). The handlers are installed before anything else, even when
 * the signals were inherited as ignored. A second SIGINT or SIGTERM ends
 * the process at once (the socket is still removed).
 */
static volatile sig_atomic_t stop_sig;
static struct emu *volatile stop_emu;
static struct kvm_vm *volatile stop_vm;

static void on_stop_signal(int sig)
{
	if (stop_sig && sig != SIGALRM) {
		stats_server_unlink_path();
		_exit(128 + sig);
	}
	if (!stop_sig)
		stop_sig = sig;
	if (stop_emu)
		emu_interrupt(stop_emu);
	if (stop_vm)
		kvm_vm_interrupt(stop_vm);
}

static void stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);
}

/* The exit status for a run a stop signal ended, after one line saying so. */
static int stopped_status(const char *where, double timeout)
{
	if (stop_sig == SIGALRM) {
		fprintf(stderr, "vpmu-vmm: --timeout %g: the guest did not exit in time; %s\n",
			timeout, where);
		return EXIT_VMM_ERROR;
	}
	fprintf(stderr, "vpmu-vmm: stopped by %s; %s\n", stop_sig == SIGINT ? "SIGINT" : "SIGTERM",
		where);
	return 128 + stop_sig;
}

static int arm_timeout(double seconds)
{
	struct itimerval it = {
		{ 0, 0 }, { (time_t) seconds, (suseconds_t) ((seconds - (time_t) seconds) * 1e6) }
	};

	if (seconds <= 0)
		return 0;
	if (!it.it_value.tv_sec && !it.it_value.tv_usec)
		it.it_value.tv_usec = 1;
	return setitimer(ITIMER_REAL, &it, NULL);
}

static void on_host_signal(int sig)
{
	(void) sig;
}

static void host_signals(int signo)
{
	struct sigaction sa = { .sa_handler = on_host_signal, .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	sigaction(signo, &sa, NULL);
	sigaction(SIGIO, &sa, NULL);
}

/* ---- --accel kvm ----------------------------------------------------------- */

static bool is_bzimage(const uint8_t *img, size_t size)
{
	return size > 0x206 && !memcmp(img + BP_HEADER, "HdrS", 4);
}

/* Whether perf can count hardware instructions here: what backs guest counters under KVM. */
static bool host_has_pmu(void)
{
	struct perf_event_attr a = { .type = PERF_TYPE_HARDWARE,
				     .size = sizeof(a),
				     .config = PERF_COUNT_HW_INSTRUCTIONS,
				     .disabled = 1,
				     .exclude_kernel = 1,
				     .exclude_hv = 1 };
	int fd = (int) syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* ---- options (init) ------------------------------------------------------- */

struct opts {
	const char *accel, *counters, *append, *initrd, *stats, *dump, *filter_path, *kernel;
	const char *save_path, *restore_path;
	uint64_t save_at;
	bool save, verbose, cpu_given, mem_given;
	double timeout;
	unsigned int smp;
	struct emu_config cfg;
	char model[32]; /* --restore: the snapshot's model */
	/* the kernel and initrd, read by read_images */
	void *image, *initrd_data;
	size_t size, initrd_size;
};

static int opt_max_insns(const char *arg, uint64_t *ret)
{
	char *end;

	errno = 0;
	*ret = strtoull(arg, &end, 0);
	if (errno || *end || !*ret) {
		fprintf(stderr, "vpmu-vmm: --max-insns %s: give a number of instructions above 0\n",
			arg);
		return -1;
	}
	return 0;
}

static int opt_timeout(const char *arg, double *ret)
{
	char *end;

	*ret = strtod(arg, &end);
	if (*end || !(*ret > 0) || *ret > 1e6) {
		fprintf(stderr,
			"vpmu-vmm: --timeout %s: give seconds of wall time, e.g. 30 or 0.5\n", arg);
		return -1;
	}
	return 0;
}

static int opt_smp(const char *arg, unsigned int *ret)
{
	char *end;
	unsigned long n = strtoul(arg, &end, 10);

	if (*end || !n || n > KVM_VM_MAX_VCPUS) {
		fprintf(stderr, "vpmu-vmm: --smp %s: use 1 to %u\n", arg, KVM_VM_MAX_VCPUS);
		return -1;
	}
	*ret = (unsigned int) n;
	return 0;
}

/* --save-at N FILE: N from getopt, FILE the next argument. */
static int opt_save_at(struct opts *o, const char *arg, int argc, char **argv)
{
	char *end;

	errno = 0;
	o->save_at = strtoull(arg, &end, 0);
	if (errno || *end || end == arg || arg[0] == '-' || optind >= argc ||
	    argv[optind][0] == '-' || !argv[optind][0]) {
		fprintf(stderr,
			"vpmu-vmm: --save-at %s: use --save-at N FILE (N: guest "
			"instructions, 0 or more; FILE: the snapshot to write)\n",
			arg);
		return -1;
	}
	o->save_path = argv[optind++];
	o->save = true;
	return 0;
}

static const struct option long_opts[] = {
	{ "accel", required_argument, NULL, 'a' },
	{ "cpu", required_argument, NULL, 'c' },
	{ "mem", required_argument, NULL, 'm' },
	{ "host-counters", required_argument, NULL, 'H' },
	{ "append", required_argument, NULL, 'A' },
	{ "initrd", required_argument, NULL, 'i' },
	{ "stats", required_argument, NULL, 's' },
	{ "pebs-dump", required_argument, NULL, 'P' },
	{ "max-insns", required_argument, NULL, 'n' },
	{ "timeout", required_argument, NULL, 'T' },
	{ "pmu-filter", required_argument, NULL, 'F' },
	{ "save-at", required_argument, NULL, 'W' },
	{ "restore", required_argument, NULL, 'R' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "smp", required_argument, NULL, 'S' },
	{ "help", no_argument, NULL, 'h' },
	{},
};

/* One option: 0, 1 (--help: done), -1 (a line said what was wrong). */
static int parse_option(struct opts *o, int c, int argc, char **argv)
{
	switch (c) {
	case 'a':
		o->accel = optarg;
		return 0;
	case 'c':
		if (parse_cpu(optarg, &o->cfg.pmu_version) < 0) {
			fprintf(stderr,
				"vpmu-vmm: --cpu %s: use MODEL or MODEL,perfmon=N (N: the perfmon "
				"version, 2 up to the model's)\n",
				optarg);
			return -1;
		}
		o->cfg.model = optarg;
		o->cpu_given = true;
		return 0;
	case 'm':
		if (parse_size(optarg, &o->cfg.mem_size) < 0) {
			fprintf(stderr, "vpmu-vmm: --mem %s: not a size (use e.g. 128M or 1G)\n",
				optarg);
			return -1;
		}
		o->mem_given = true;
		return 0;
	case 'H':
		o->counters = optarg;
		return 0;
	case 'A':
		o->append = optarg;
		return 0;
	case 'i':
		o->initrd = optarg;
		return 0;
	case 's':
		o->stats = optarg;
		return 0;
	case 'P':
		o->dump = optarg;
		return 0;
	case 'n':
		return opt_max_insns(optarg, &o->cfg.max_instructions);
	case 'T':
		return opt_timeout(optarg, &o->timeout);
	case 'F':
		o->filter_path = optarg;
		return 0;
	case 'W':
		return opt_save_at(o, optarg, argc, argv);
	case 'R':
		o->restore_path = optarg;
		return 0;
	case 'v':
		o->verbose = true;
		return 0;
	case 'S':
		return opt_smp(optarg, &o->smp);
	case 'h':
		usage(stdout);
		return 1;
	default:
		fprintf(stderr, "vpmu-vmm: see vpmu-vmm --help\n");
		return -1;
	}
}

/* What the options say together: the kernel, the accelerator and counters named right. */
static int check_options(struct opts *o, int argc, char **argv)
{
	if (o->restore_path && optind != argc) {
		fprintf(stderr,
			"vpmu-vmm: --restore %s: the snapshot holds the guest's kernel in "
			"its RAM; give no KERNEL\n",
			o->restore_path);
		return -1;
	}
	if (!o->restore_path && optind != argc - 1) {
		fprintf(stderr, "vpmu-vmm: %s (see vpmu-vmm --help)\n",
			optind == argc ? "no KERNEL given" : "more than one KERNEL given");
		return -1;
	}
	o->kernel = o->restore_path ? NULL : argv[optind];
	if (strcmp(o->accel, "auto") && strcmp(o->accel, "kvm") && strcmp(o->accel, "emu")) {
		fprintf(stderr, "vpmu-vmm: --accel %s: use auto, kvm or emu\n", o->accel);
		return -1;
	}
	if (strcmp(o->counters, "auto") && strcmp(o->counters, "exact") &&
	    strcmp(o->counters, "time") && strcmp(o->counters, "perf")) {
		fprintf(stderr, "vpmu-vmm: --host-counters %s: use auto, exact, time or perf\n",
			o->counters);
		return -1;
	}
	if (o->restore_path && (o->append || o->initrd)) {
		fprintf(stderr, "vpmu-vmm: --restore %s: the guest booted already; drop --%s\n",
			o->restore_path, o->append ? "append" : "initrd");
		return -1;
	}
	if ((o->save || o->restore_path) && !strcmp(o->accel, "kvm")) {
		fprintf(stderr,
			"vpmu-vmm: --%s is the emulator's: use --accel emu (or auto) to save or "
			"restore a guest\n",
			o->save ? "save-at" : "restore");
		return -1;
	}
	return 0;
}

/* 0: run; 1: exit 0 (--help); -1: exit EXIT_VMM_ERROR (a line said why). */
static int parse_options(int argc, char **argv, struct opts *o)
{
	int c, r;

	memset(o, 0, sizeof(*o));
	o->accel = "auto";
	o->counters = "auto";
	o->smp = 1;
	emu_config_init(&o->cfg);
	o->cfg.pmu_log = pmu_log;
	while ((c = getopt_long(argc, argv, "vh", long_opts, NULL)) != -1) {
		r = parse_option(o, c, argc, argv);
		if (r)
			return r;
	}
	if (check_options(o, argc, argv) < 0)
		return -1;
	if (o->filter_path) {
		char err[512] = "";

		r = vpmu_filter_load(o->filter_path, &pmu_filter, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "vpmu-vmm: --pmu-filter %s: %s\n", o->filter_path,
				err[0] ? err : strerror(-r));
			return -1;
		}
		o->cfg.pmu_filter = pmu_filter;
	}
	return 0;
}

/* ---- accelerator and host-counter policy ---------------------------------- */

/* --accel: KVM or the emulator; auto says why with --verbose. */
static bool choose_kvm(const struct opts *o)
{
	char why[256];
	bool use_kvm;

	if (strcmp(o->accel, "auto"))
		return !strcmp(o->accel, "kvm");
	if (o->save || o->restore_path) {
		snprintf(why, sizeof(why), "snapshots are the emulator's (--%s)",
			 o->save ? "save-at" : "restore");
		use_kvm = false;
	} else if (kvm_probe(why, sizeof(why)) < 0) {
		use_kvm = false;
	} else if (!host_has_pmu()) {
		snprintf(why, sizeof(why),
			 "KVM works here but the host has no hardware PMU to back guest counters; "
			 "the emulator counts exactly");
		use_kvm = false;
	} else {
		snprintf(why, sizeof(why), "/dev/kvm works and the host has a hardware PMU");
		use_kvm = true;
	}
	if (o->verbose)
		fprintf(stderr, "vpmu-vmm: --accel auto: using %s (%s)\n",
			use_kvm ? "KVM" : "the emulator", why);
	return use_kvm;
}

/* --host-counters under KVM: perf where the host has a PMU, else time. */
static void kvm_backend(const struct opts *o, struct kvm_vm_config *kc)
{
	char why[256];

	if (!strcmp(o->counters, "time")) {
		kc->backend = VPMU_BACKEND_TIME;
		snprintf(why, sizeof(why), "asked for: cycles from the vCPU threads' CPU time");
	} else if (host_has_pmu()) {
		kc->backend = VPMU_BACKEND_PERF;
		snprintf(why, sizeof(why), "%s: host hardware events in guest mode",
			 !strcmp(o->counters, "perf") ? "asked for"
						      : "the host has a hardware PMU");
	} else if (!strcmp(o->counters, "perf")) {
		kc->backend = VPMU_BACKEND_PERF;
		snprintf(why, sizeof(why),
			 "asked for, but the host has no hardware PMU: guest counters will be "
			 "unbacked (--host-counters time counts cycles)");
	} else {
		kc->backend = VPMU_BACKEND_TIME;
		snprintf(why, sizeof(why),
			 "the host has no hardware PMU: cycles from the vCPU threads' CPU time");
	}
	if (o->verbose)
		fprintf(stderr, "vpmu-vmm: --host-counters %s: using %s (%s)\n", o->counters,
			kc->backend == VPMU_BACKEND_PERF ? "perf" : "time", why);
}

/* --host-counters on the emulator: exact, or time when asked for. */
static void emu_backend(struct opts *o)
{
	char why[256];

	if (!strcmp(o->counters, "time")) {
		o->cfg.pmu_backend = VPMU_BACKEND_TIME;
		o->cfg.pmu_signo = -1; /* no signals: the emulator looks between blocks */
		snprintf(why, sizeof(why),
			 "asked for: cycles from this thread's CPU time, which is the guest's; "
			 "other events unbacked");
	} else {
		snprintf(why, sizeof(why), "%sthe emulator counts every event it models exactly",
			 strcmp(o->counters, "auto") ? "asked for: " : "");
	}
	if (o->verbose)
		fprintf(stderr, "vpmu-vmm: --host-counters %s: using %s (%s)\n", o->counters,
			o->cfg.pmu_backend == VPMU_BACKEND_TIME ? "time" : "exact", why);
}

/* The kernel and --initrd into memory. */
static int read_images(struct opts *o)
{
	char err[512];

	o->image = read_file(o->kernel, &o->size, err, sizeof(err));
	if (o->image && o->initrd)
		o->initrd_data = read_file(o->initrd, &o->initrd_size, err, sizeof(err));
	if (!o->image || (o->initrd && !o->initrd_data)) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		return -1;
	}
	return 0;
}

static void free_images(struct opts *o)
{
	free(o->image);
	free(o->initrd_data);
	o->image = o->initrd_data = NULL;
}

/* --verbose: who inflated a bzImage's kernel (bzimage_load's unpack), on either vCPU backend */
static void linux_unpack_say(const char *note)
{
	if (note)
		fprintf(stderr, "vpmu-vmm: the guest decompresses its kernel: %s\n", note);
	else
		fprintf(stderr,
			"vpmu-vmm: kernel inflated by vpmu-vmm, entered at its startup_64\n");
}

/* ---- --accel kvm (work) --------------------------------------------------------- */

/* The guest's kernel into the VM, its vCPUs at the entry point. */
static int kvm_load(struct kvm_vm *vm, const struct opts *o)
{
	struct vmm_module mod = { o->initrd_data, o->initrd_size, o->initrd };
	struct vmm_boot boot;
	char err[512];
	int r;

	if (is_bzimage(o->image, o->size)) {
		r = kvm_vm_boot_linux(vm, o->image, o->size, o->append, o->initrd_data,
				      o->initrd_size, err, sizeof(err));
		if (r == 0 && o->verbose)
			linux_unpack_say(kvm_vm_unpack_note(vm));
	} else {
		struct vmm_ram ram = kvm_vm_ram(vm);

		r = vmm_load_kernel(&ram, o->image, o->size, o->append, o->initrd ? &mod : NULL,
				    o->initrd ? 1 : 0, &boot, err, sizeof(err));
		if (r == 0)
			r = kvm_vm_boot(vm, &boot, err, sizeof(err));
	}
	if (r < 0)
		fprintf(stderr, "vpmu-vmm: %s: %s\n", o->kernel, err);
	return r;
}

static void kvm_summary(struct kvm_vm *vm, unsigned int smp)
{
	struct kvm_vm_stats st;

	kvm_vm_stats(vm, &st);
	fprintf(stderr,
		"vpmu-vmm: kvm: %u vCPU(s); exits: %llu, %llu MSR, %llu I/O; %llu PMIs (%llu "
		"NMIs), %llu RDPMC shadow refreshes, %llu signals\n",
		smp, (unsigned long long) st.exits, (unsigned long long) st.msr_exits,
		(unsigned long long) st.io_exits, (unsigned long long) st.pmis,
		(unsigned long long) st.nmis, (unsigned long long) st.shadow_writes,
		(unsigned long long) st.signals);
	for (unsigned int i = 0; i < smp; i++)
		summary_vpmu(kvm_vm_vpmu(vm, i));
}

static int run_kvm(const struct kvm_vm_config *kc, const struct opts *o)
{
	struct stats_server *srv = NULL;
	struct kvm_vm *vm = NULL;
	char err[512];
	int r, status = 0;

	r = kvm_vm_new(kc, &vm, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "vpmu-vmm: --accel kvm: %s\n", err);
		return EXIT_VMM_ERROR;
	}
	if (kvm_load(vm, o) < 0) {
		kvm_vm_free(vm);
		return EXIT_VMM_ERROR;
	}
	if (o->stats && stats_start(&srv, o->stats, kvm_vm_vpmu(vm, 0), err, sizeof(err)) < 0) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		kvm_vm_free(vm);
		return EXIT_VMM_ERROR;
	}
	stop_vm = vm;
	if (stop_sig) {
		r = 0; /* stopped before it started */
	} else {
		arm_timeout(o->timeout);
		r = kvm_vm_run(vm, &status, err, sizeof(err));
	}
	stop_vm = NULL;
	fflush(stdout);
	if (stop_sig) {
		kvm_vm_describe(vm, err, sizeof(err));
		status = stopped_status(err, o->timeout);
	} else if (r < 0) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		status = EXIT_VMM_ERROR;
	}
	stats_server_stop(srv);
	if (o->verbose || stop_sig)
		kvm_summary(vm, kc->smp);
	kvm_vm_free(vm);
	return status;
}

/* The KVM path: what only the emulator does refused, then the VM. */
static int main_kvm(struct opts *o)
{
	struct kvm_vm_config kc;
	int status;

	if (!strcmp(o->counters, "exact")) {
		fprintf(stderr,
			"vpmu-vmm: --host-counters exact needs the emulator, which sees every "
			"instruction; under KVM guest counters are backed by host perf events (the "
			"default there)\n");
		return EXIT_VMM_ERROR;
	}
	if (o->dump) {
		fprintf(stderr, "vpmu-vmm: --pebs-dump reads the buffer through the emulator's "
				"paging state: use --accel emu\n");
		return EXIT_VMM_ERROR;
	}
	kvm_vm_config_init(&kc);
	kc.model = o->cfg.model;
	kc.pmu_version = o->cfg.pmu_version;
	kc.mem_size = o->cfg.mem_size;
	kc.smp = o->smp;
	kc.pmu_filter = pmu_filter;
	kc.pmu_log = pmu_log;
	kvm_backend(o, &kc);
	kc.signo = SIGRTMIN + 4; /* vpmu_config_init()'s default, which kvm.c keeps */
	host_signals(kc.signo);
	if (read_images(o) < 0) {
		free_images(o);
		return EXIT_VMM_ERROR;
	}
	status = run_kvm(&kc, o);
	free_images(o);
	return status;
}

/* ---- --accel emu (work) ----------------------------------------------------------- */

/*
 * --restore FILE: the snapshot checked on its own, and the guest it needs:
 * its model, perfmon narrowing, RAM size and layout come from the file;
 * a --cpu or --mem that says otherwise is refused.
 */
static int snapshot_open(struct opts *o, void **ret_blob, size_t *ret_len)
{
	struct emu_snapshot_info info;
	const char *p = o->restore_path;
	char err[512];
	FILE *f = fopen(p, "rb");
	int r;

	if (!f) {
		fprintf(stderr, "vpmu-vmm: --restore %s: cannot open it: %s\n", p, strerror(errno));
		return -1;
	}
	r = emu_snapshot_read(f, ret_blob, ret_len, &info, err, sizeof(err));
	fclose(f);
	if (r < 0) {
		fprintf(stderr, "vpmu-vmm: --restore %s: %s\n", p, err);
		return -1;
	}
	if (vpmu_model_find(info.model) < 0) {
		fprintf(stderr, "vpmu-vmm: --restore %s: a snapshot of an unknown CPU model '%s'\n",
			p, info.model);
	} else if (o->cpu_given &&
		   (strcmp(o->cfg.model, info.model) || o->cfg.pmu_version != info.pmu_version)) {
		fprintf(stderr,
			"vpmu-vmm: --restore %s: a snapshot of a %s%s guest; drop --cpu %s\n", p,
			info.model, info.pmu_version ? " (narrowed)" : "", o->cfg.model);
	} else if (o->mem_given && o->cfg.mem_size != info.mem_size) {
		fprintf(stderr,
			"vpmu-vmm: --restore %s: a snapshot of a guest with %llu MiB of RAM; "
			"drop --mem\n",
			p, (unsigned long long) (info.mem_size >> 20));
	} else {
		memcpy(o->model, info.model, sizeof(o->model));
		o->cfg.model = o->model;
		o->cfg.pmu_version = info.pmu_version;
		o->cfg.mem_size = info.mem_size;
		o->cfg.layout = info.layout;
		return 0;
	}
	free(*ret_blob);
	*ret_blob = NULL;
	return -1;
}

/* A new emulator with the guest in it: booted from KERNEL, or restored (--restore). */
static int emu_create(struct opts *o, struct emu **ret, struct vmm_boot *boot)
{
	struct vmm_module mod = { o->initrd_data, o->initrd_size, o->initrd };
	void *blob = NULL;
	size_t len = 0;
	char err[512];
	int r;

	if (o->restore_path ? snapshot_open(o, &blob, &len) < 0 : read_images(o) < 0)
		return -1;
	if (o->image && is_bzimage(o->image, o->size))
		o->cfg.layout = EMU_LAYOUT_LINUX;
	r = emu_new(&o->cfg, ret, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
	} else if (blob) {
		r = emu_restore(*ret, blob, len, err, sizeof(err));
		if (r < 0)
			fprintf(stderr, "vpmu-vmm: --restore %s: %s\n", o->restore_path, err);
	} else {
		if (o->cfg.layout == EMU_LAYOUT_LINUX) {
			r = emu_load_linux(*ret, o->image, o->size, o->append, o->initrd_data,
					   o->initrd_size, err, sizeof(err));
			if (r == 0 && o->verbose)
				linux_unpack_say(emu_linux_unpack_note(*ret));
		} else {
			struct vmm_ram ram = emu_ram(*ret);

			r = vmm_load_kernel(&ram, o->image, o->size, o->append,
					    o->initrd ? &mod : NULL, o->initrd ? 1 : 0, boot, err,
					    sizeof(err));
		}
		if (r < 0)
			fprintf(stderr, "vpmu-vmm: %s: %s\n", o->kernel, err);
	}
	free(blob);
	return r < 0 ? -1 : 0;
}

/* Boot (unless restored) and run until the guest exits, fails, stops or reaches --save-at. */
static int emu_execute(const struct opts *o, struct emu *emu, const struct vmm_boot *boot,
		       int *status)
{
	char err[512];
	int r = 0;

	if (!o->restore_path && o->cfg.layout != EMU_LAYOUT_LINUX)
		r = emu_boot(emu, boot, 0, err, sizeof(err));
	if (o->save)
		emu_stop_at(emu, o->save_at);
	stop_emu = emu;
	if (r == 0 && stop_sig) {
		emu_describe(emu, err, sizeof(err));
		r = -EINTR; /* stopped before it started */
	} else if (r == 0) {
		arm_timeout(o->timeout);
		r = emu_run(emu, status, err, sizeof(err));
	}
	stop_emu = NULL;
	fflush(stdout);
	if (r == -EINTR) {
		*status = stopped_status(err, o->timeout);
	} else if (r < 0) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		*status = EXIT_VMM_ERROR;
	}
	return r;
}

/* --save-at N FILE, at the stop point: the snapshot, then one line. */
static int emu_save_file(const struct opts *o, struct emu *emu)
{
	struct emu_stats s;
	char err[512];
	FILE *f = fopen(o->save_path, "wb");
	int r;

	if (!f) {
		fprintf(stderr, "vpmu-vmm: --save-at %llu %s: cannot create it: %s\n",
			(unsigned long long) o->save_at, o->save_path, strerror(errno));
		return EXIT_VMM_ERROR;
	}
	r = emu_save(emu, f, err, sizeof(err));
	if (fclose(f) != 0 && r == 0) {
		snprintf(err, sizeof(err), "cannot write it: %s", strerror(errno));
		r = -EIO;
	}
	if (r < 0) {
		unlink(o->save_path);
		fprintf(stderr, "vpmu-vmm: --save-at %llu %s: %s\n",
			(unsigned long long) o->save_at, o->save_path, err);
		return EXIT_VMM_ERROR;
	}
	emu_get_stats(emu, &s);
	fprintf(stderr, "vpmu-vmm: saved after %llu instructions to %s\n",
		(unsigned long long) s.instructions, o->save_path);
	return 0;
}

/* After the run (exit): the snapshot, the PEBS dump, the summary. */
static int emu_finish(const struct opts *o, struct emu *emu, int r, int status)
{
	char err[512];

	if (r == EMU_RUN_STOP_POINT) {
		status = emu_save_file(o, emu);
	} else if (r == 0 && o->save) {
		struct emu_stats s;

		emu_get_stats(emu, &s);
		fprintf(stderr,
			"vpmu-vmm: --save-at %llu: the guest exited after %llu instructions; "
			"nothing saved\n",
			(unsigned long long) o->save_at, (unsigned long long) s.instructions);
	}
	if (o->dump && pebs_dump(emu, o->dump, err, sizeof(err)) < 0) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		status = EXIT_VMM_ERROR;
	}
	if (o->verbose || r == -EINTR)
		summary(emu);
	return status;
}

/* The emulator path: what only KVM does refused, then the emulator. */
static int main_emu(struct opts *o)
{
	struct stats_server *srv = NULL;
	struct emu *emu = NULL;
	struct vmm_boot boot;
	char err[512];
	int r, status = EXIT_VMM_ERROR;

	if (o->smp != 1) {
		fprintf(stderr, "vpmu-vmm: --smp %u: the emulator runs one vCPU; use --accel kvm\n",
			o->smp);
		return EXIT_VMM_ERROR;
	}
	if (!strcmp(o->counters, "perf")) {
		fprintf(stderr,
			"vpmu-vmm: --host-counters perf needs --accel kvm: perf counts guest mode "
			"only (exclude_host), which an emulator never enters; use --host-counters "
			"exact or time\n");
		return EXIT_VMM_ERROR;
	}
	emu_backend(o);
	if (emu_create(o, &emu, &boot) < 0)
		goto out;
	if (o->stats && stats_start(&srv, o->stats, emu_vpmu(emu), err, sizeof(err)) < 0) {
		fprintf(stderr, "vpmu-vmm: %s\n", err);
		goto out;
	}
	status = 0;
	r = emu_execute(o, emu, &boot, &status);
	/* before emu_free: the server thread reads the vCPU's stats */
	stats_server_stop(srv);
	srv = NULL;
	status = emu_finish(o, emu, r, status);
out:
	stats_server_stop(srv);
	emu_free(emu);
	free_images(o);
	return status;
}

/* ---- main (exit) ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	struct opts o;
	int r, status;

	stop_signals(); /* first: before the stats socket exists, so it is never left behind */
	r = parse_options(argc, argv, &o);
	if (r)
		return r > 0 ? 0 : EXIT_VMM_ERROR;
	status = choose_kvm(&o) ? main_kvm(&o) : main_emu(&o);
	vpmu_filter_free(pmu_filter); /* after the vCPUs that used it */
	return status;
}
