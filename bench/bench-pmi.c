/* SPDX-License-Identifier: MIT */
/*
 * Host cost of a guest PMI in steady-state sampling with the time backend:
 * the emulator runs the timer-pmi guest (fixed counter 1, one PMI per
 * period of CPU time, the handler reloading the same period: 3 PMU MSR
 * accesses, GLOBAL_STATUS read, FIXED_CTR1 write, GLOBAL_OVF_CTRL write,
 * and 2 x2APIC ones, LVT unmask and EOI, which the emulator offers vpmu
 * first, so they show in its MSR figures too) and every
 * syscall libvpmu makes goes through a counting wrapper of its syscall
 * table (perf_sys). Syscalls per PMI are all of a run's over its PMIs,
 * creating and closing the host event included (an upper bound on steady
 * state); the per-PMI MSR and poll figures are the difference of a long
 * and a short run, per PMI in between. The emulator takes no overflow
 * signal (vpmu_config.signo -1): it finds the host's overflow record in the event's ring buffer
 * between blocks (vpmu_vcpu_pending, no syscall), so libvpmu's syscalls
 * are all the host syscalls a PMI costs; the signals a handler catches
 * anyway are counted too (each would add an rt_sigreturn), and must be 0.
 * Printed next to it: the guest's PMU MSR accesses per PMI (what a KVM
 * VMM would take as exits) and the polls that found an overflow.
 *
 * Usage: bench-pmi TIMER_PMI_KERNEL
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu.h"
#include "loader.h"
#include "perf-util.h"
#include "vpmu/vpmu.h"

enum { SC_OPEN, SC_READ, SC_IOCTL, SC_FCNTL, SC_MMAP, SC_MUNMAP, SC_CLOSE, SC_KINDS };
static const char *const sc_names[SC_KINDS] = {
	"perf_event_open", "read", "ioctl", "fcntl", "mmap", "munmap", "close",
};
static unsigned long long sc[SC_KINDS];
static volatile sig_atomic_t signals;
static struct emu *kick_emu;

static int w_open(struct perf_event_attr *a, pid_t pid, int cpu, int group, unsigned long flags)
{
	sc[SC_OPEN]++;
	return perf_sys_real.open(a, pid, cpu, group, flags);
}

static ssize_t w_read(int fd, void *buf, size_t len)
{
	sc[SC_READ]++;
	return perf_sys_real.read(fd, buf, len);
}

static int w_ioctl(int fd, unsigned long req, unsigned long arg)
{
	sc[SC_IOCTL]++;
	return perf_sys_real.ioctl(fd, req, arg);
}

static int w_fcntl(int fd, int cmd, unsigned long arg)
{
	sc[SC_FCNTL]++;
	return perf_sys_real.fcntl(fd, cmd, arg);
}

static void *w_mmap(size_t len, int fd)
{
	sc[SC_MMAP]++;
	return perf_sys_real.mmap(len, fd);
}

static int w_munmap(void *addr, size_t len)
{
	sc[SC_MUNMAP]++;
	return perf_sys_real.munmap(addr, len);
}

static int w_close(int fd)
{
	sc[SC_CLOSE]++;
	return perf_sys_real.close(fd);
}

static void on_signal(int sig)
{
	(void) sig;
	signals++;
	if (kick_emu)
		emu_kick(kick_emu);
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

struct result {
	unsigned long long sc[SC_KINDS], syscalls, signals, pmis, pmu_msrs, msr_exits, polls;
	double cpu;
};

static int run(const void *image, size_t size, unsigned int pmis, unsigned int period_us,
	       struct result *ret)
{
	struct emu_config cfg;
	struct emu_stats st;
	struct vpmu_stats vs;
	struct vmm_boot boot;
	struct vmm_ram ram;
	struct emu *emu;
	char err[256];
	int status = 0;
	double t0;
	FILE *serial = tmpfile();

	memset(sc, 0, sizeof(sc));
	signals = 0;
	emu_config_init(&cfg);
	cfg.serial_out = serial;
	cfg.mem_size = 16ull << 20;
	cfg.pmu_backend = VPMU_BACKEND_TIME;
	cfg.pmu_signo = -1;
	if (emu_new(&cfg, &emu, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench-pmi: %s\n", err);
		return -1;
	}
	ram = emu_ram(emu);
	if (vmm_load_kernel(&ram, image, size, NULL, NULL, 0, &boot, err, sizeof(err)) < 0 ||
	    emu_boot(emu, &boot, (uint64_t) period_us << 32 | pmis, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench-pmi: %s\n", err);
		emu_free(emu);
		return -1;
	}
	kick_emu = emu;
	t0 = cpu_seconds();
	if (emu_run(emu, &status, err, sizeof(err)) < 0 || status != 1) {
		char line[256];

		fprintf(stderr, "bench-pmi: the guest failed: %s (status %d)\n", err, status);
		rewind(serial);
		while (fgets(line, sizeof(line), serial))
			fprintf(stderr, "  %s", line);
		kick_emu = NULL;
		emu_free(emu);
		return -1;
	}
	ret->cpu = cpu_seconds() - t0;
	emu_get_stats(emu, &st);
	vpmu_stats_read(emu_vpmu(emu), &vs);
	kick_emu = NULL;
	emu_free(emu); /* closes the host event: its syscalls count */
	fclose(serial);
	memcpy(ret->sc, sc, sizeof(sc));
	ret->syscalls = 0;
	for (int i = 0; i < SC_KINDS; i++)
		ret->syscalls += sc[i];
	ret->signals = (unsigned long long) signals;
	ret->pmis = st.pmis;
	ret->pmu_msrs = vs.msr_reads + vs.msr_writes + vs.rdpmcs;
	ret->msr_exits = st.msr_exits;
	ret->polls = st.kicks;
	return 0;
}

int main(int argc, char **argv)
{
	static const unsigned int periods_us[] = { 1000, 100 };
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	size_t size;
	void *image;
	FILE *f;

	if (argc != 2) {
		fprintf(stderr, "usage: bench-pmi TIMER_PMI_KERNEL\n");
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (size = (size_t) ftell(f)) == 0 ||
	    fseek(f, 0, SEEK_SET) < 0 || !(image = malloc(size)) ||
	    fread(image, 1, size, f) != size) {
		fprintf(stderr, "bench-pmi: cannot read %s\n", argv[1]);
		return 2;
	}
	fclose(f);
	perf_sys = (struct perf_sys){ .open = w_open,
				      .read = w_read,
				      .ioctl = w_ioctl,
				      .fcntl = w_fcntl,
				      .mmap = w_mmap,
				      .munmap = w_munmap,
				      .close = w_close };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGRTMIN + 4, &sa, NULL);
	sigaction(SIGIO, &sa, NULL);

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("bench-pmi: time backend, emulator, fixed counter 1 sampling, handler reloads the "
	       "same period\n");
	for (size_t i = 0; i < sizeof(periods_us) / sizeof(periods_us[0]); i++) {
		unsigned int p = periods_us[i], n1 = 100, n2 = p >= 1000 ? 1100 : 3100;
		struct result a, b;
		double d;

		if (run(image, size, n1, p, &a) < 0 || run(image, size, n2, p, &b) < 0)
			return 1;
		d = (double) (b.pmis - a.pmis);
		printf("  period %4u us: %llu PMIs in %.3f s CPU; libvpmu syscalls %llu in all (",
		       p, b.pmis, b.cpu, b.syscalls);
		for (int k = 0; k < SC_KINDS; k++)
			printf("%s%s %llu", k ? ", " : "", sc_names[k], b.sc[k]);
		printf(")\n");
		/*
		 * Syscalls: the whole long run's, host event creation and teardown
		 * included, over its PMIs: an upper bound on steady state that
		 * cannot go negative (the few reads and ioctls outside the PMI
		 * path come at timing-dependent moments, so a difference of two
		 * runs can). The MSR figures are exact per PMI: a difference.
		 */
		printf("    per PMI: %.3f host syscalls (libvpmu's, all of the run's over its "
		       "PMIs; "
		       "%.3f signals, each +1 rt_sigreturn), %.3f polls that found the overflow, "
		       "%.2f guest MSR accesses through vpmu, %.2f MSR exits (target: <= 1 "
		       "syscall)\n",
		       (double) b.syscalls / (double) b.pmis, (double) b.signals / (double) b.pmis,
		       ((double) b.polls - (double) a.polls) / d,
		       ((double) b.pmu_msrs - (double) a.pmu_msrs) / d,
		       ((double) b.msr_exits - (double) a.msr_exits) / d);
	}
	free(image);
	return 0;
}
