/* SPDX-License-Identifier: MIT */
/*
 * A fake perf_event kernel behind the host backends' syscall table
 * (perf_sys, perf-util.h), for deterministic tests: events count what the
 * test says they counted, overflow on the period grid the way the kernel
 * reloads a period (the next overflow one period after the previous one),
 * write PERF_RECORD_SAMPLE records into the ring buffer, and fail with
 * whatever errno a test injects. Every syscall is counted. Its monotonic
 * clock stands still until a test moves it (fake.now_ns), so the time
 * backend's wall-clock deadlines do not depend on how fast the test runs
 * (a loaded machine). fake_vcpu()
 * makes a vCPU on a host backend whose PMIs and log lines land in fake_out.
 */
#ifndef VPMU_TEST_FAKE_PERF_H
#define VPMU_TEST_FAKE_PERF_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "perf-util.h"
#include "vpmu/vpmu.h"

#define FAKE_MAX  64
#define FAKE_FD0  1000
#define FAKE_PAGE 4096

struct fake_event {
	bool open;
	struct perf_event_attr attr;
	uint64_t count, enabled_ns, running_ns;
	bool enabled;
	uint64_t period, next; /* next overflow at this count */
	uint8_t *ring;	       /* 1 + 1 pages */
	int owner_tid, sig;
	bool async;
	uint64_t sample_ip, sample_addr, sample_weight;
	uint64_t latency;	  /* a sample's count is this far past its overflow */
	bool drop_samples;	  /* overflow without a record (a lost sample) */
	bool short_read;	  /* read() returns 0 bytes (pinned, unschedulable) */
	uint64_t running_deficit; /* running = enabled - this (multiplexed) */
};

static struct fake_perf {
	struct fake_event ev[FAKE_MAX];
	unsigned int nr_open, max_open;
	unsigned int opens, reads, ioctls, fcntls, mmaps, munmaps, closes;
	int fail_open;	     /* errno for the next open(s), 0: none */
	int fail_open_count; /* how many opens fail (-1: all) */
	int fail_mmap;
	int fail_ioctl;
	int64_t now_ns; /* CLOCK_MONOTONIC, as the backends see it */
} fake;

static struct fake_event *fake_ev(int fd)
{
	int i = fd - FAKE_FD0;

	return i >= 0 && i < FAKE_MAX && fake.ev[i].open ? &fake.ev[i] : NULL;
}

static unsigned int fake_syscalls(void)
{
	return fake.opens + fake.reads + fake.ioctls + fake.fcntls + fake.mmaps + fake.munmaps +
	       fake.closes;
}

static int fake_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		     unsigned long flags)
{
	fake.opens++;
	if (fake.fail_open && fake.fail_open_count) {
		int e = fake.fail_open;

		if (fake.fail_open_count > 0 && --fake.fail_open_count == 0)
			fake.fail_open = 0;
		errno = e;
		return -1;
	}
	for (int i = 0; i < FAKE_MAX; i++) {
		struct fake_event *e = &fake.ev[i];

		if (e->open)
			continue;
		memset(e, 0, sizeof(*e));
		e->open = true;
		e->attr = *attr;
		e->enabled = !attr->disabled;
		e->period = attr->sample_period;
		e->next = e->period;
		fake.nr_open++;
		if (fake.nr_open > fake.max_open)
			fake.max_open = fake.nr_open;
		return FAKE_FD0 + i;
	}
	errno = EMFILE;
	return -1;
}

static ssize_t fake_read(int fd, void *buf, size_t len)
{
	struct fake_event *e = fake_ev(fd);
	uint64_t v[3];

	fake.reads++;
	if (!e) {
		errno = EBADF;
		return -1;
	}
	if (e->short_read)
		return 0;
	v[0] = e->count;
	v[1] = e->enabled_ns;
	v[2] = e->enabled_ns - e->running_deficit;
	memcpy(buf, v, len < sizeof(v) ? len : sizeof(v));
	return (ssize_t) (len < sizeof(v) ? len : sizeof(v));
}

static int fake_ioctl(int fd, unsigned long req, unsigned long arg)
{
	struct fake_event *e = fake_ev(fd);

	fake.ioctls++;
	if (!e) {
		errno = EBADF;
		return -1;
	}
	if (fake.fail_ioctl) {
		errno = fake.fail_ioctl;
		return -1;
	}
	if (req == PERF_EVENT_IOC_PERIOD) {
		/* the kernel restarts the period from now */
		e->period = *(uint64_t *) arg;
		e->next = e->count + e->period;
	} else if (req == PERF_EVENT_IOC_ENABLE) {
		e->enabled = true;
	} else if (req == PERF_EVENT_IOC_DISABLE) {
		e->enabled = false;
	}
	return 0;
}

static int fake_fcntl(int fd, int cmd, unsigned long arg)
{
	struct fake_event *e = fake_ev(fd);

	fake.fcntls++;
	if (!e) {
		errno = EBADF;
		return -1;
	}
	if (cmd == F_SETOWN_EX)
		e->owner_tid = ((struct f_owner_ex *) arg)->pid;
	else if (cmd == F_SETSIG)
		e->sig = (int) arg;
	else if (cmd == F_SETFL)
		e->async = arg & O_ASYNC;
	return 0;
}

static void *fake_mmap(size_t len, int fd)
{
	struct fake_event *e = fake_ev(fd);
	struct perf_event_mmap_page *pg;

	fake.mmaps++;
	if (!e || fake.fail_mmap) {
		errno = e ? fake.fail_mmap : EBADF;
		return MAP_FAILED;
	}
	e->ring = aligned_alloc(FAKE_PAGE, len);
	memset(e->ring, 0, len);
	pg = (struct perf_event_mmap_page *) e->ring;
	pg->data_offset = FAKE_PAGE;
	pg->data_size = len - FAKE_PAGE;
	return e->ring;
}

static int fake_munmap(void *addr, size_t len)
{
	fake.munmaps++;
	for (int i = 0; i < FAKE_MAX; i++) {
		if (fake.ev[i].ring == addr) {
			free(addr);
			fake.ev[i].ring = NULL;
			return 0;
		}
	}
	free(addr); /* the event was closed first */
	return 0;
}

static int fake_close(int fd)
{
	struct fake_event *e = fake_ev(fd);

	fake.closes++;
	if (!e) {
		errno = EBADF;
		return -1;
	}
	e->open = false;
	fake.nr_open--;
	return 0;
}

/* Append a record to the event's ring buffer as the kernel would. */
static void fake_record(struct fake_event *e, uint32_t type, const uint64_t *words, unsigned int n)
{
	struct perf_event_mmap_page *pg = (struct perf_event_mmap_page *) e->ring;
	uint8_t *data = e->ring + FAKE_PAGE;
	struct perf_event_header h = { .type = type, .size = (uint16_t) (8 + 8 * n) };
	uint64_t head = pg->data_head;
	uint8_t rec[512];

	memcpy(rec, &h, 8);
	memcpy(rec + 8, words, 8 * n);
	for (unsigned int i = 0; i < h.size; i++)
		data[(head + i) % pg->data_size] = rec[i];
	__atomic_store_n(&pg->data_head, head + h.size, __ATOMIC_RELEASE);
}

static void fake_sample(struct fake_event *e, uint64_t value)
{
	uint64_t w[16];
	unsigned int n = 0;
	uint64_t t = e->attr.sample_type;

	if (t & PERF_SAMPLE_IP)
		w[n++] = e->sample_ip;
	if (t & PERF_SAMPLE_ADDR)
		w[n++] = e->sample_addr;
	if (t & PERF_SAMPLE_READ) {
		w[n++] = value;
		w[n++] = e->enabled_ns;
		w[n++] = e->enabled_ns - e->running_deficit;
	}
	if (t & PERF_SAMPLE_WEIGHT)
		w[n++] = e->sample_weight;
	if (t & PERF_SAMPLE_DATA_SRC)
		w[n++] = 0;
	fake_record(e, PERF_RECORD_SAMPLE, w, n);
}

/* The event on `fd` counts `n` more (if enabled), overflowing on its grid. */
static void fake_count(int fd, uint64_t n)
{
	struct fake_event *e = fake_ev(fd);

	uint64_t end;

	if (!e || !e->enabled)
		return;
	e->enabled_ns += n;
	end = e->count + n;
	/* each overflow on the grid writes a sample, its count `latency` past it */
	while (e->period && e->next <= end) {
		uint64_t at = e->next + e->latency < end ? e->next + e->latency : end;

		if (!e->drop_samples && e->ring)
			fake_sample(e, at);
		e->next += e->period;
	}
	e->count = end;
}

static int64_t fake_monotonic_ns(void)
{
	return fake.now_ns;
}

static void fake_install(void)
{
	memset(&fake, 0, sizeof(fake));
	perf_sys.open = fake_open;
	perf_sys.read = fake_read;
	perf_sys.ioctl = fake_ioctl;
	perf_sys.fcntl = fake_fcntl;
	perf_sys.mmap = fake_mmap;
	perf_sys.munmap = fake_munmap;
	perf_sys.close = fake_close;
	perf_sys.monotonic_ns = fake_monotonic_ns;
}

static void fake_uninstall(void)
{
	perf_sys = perf_sys_real;
}

/* ---- a vCPU on a host backend over the fake, with its PMIs and log lines ---- */

static struct {
	int pmis, warnings;
	char last_log[512], last_warning[512];
} fake_out;

static void fake_on_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	(void) data;
	(void) vcpu;
	fake_out.pmis++;
}

static void fake_on_log(void *data, enum vpmu_log_level level, const char *msg)
{
	(void) data;
	if (level <= VPMU_LOG_WARNING) {
		fake_out.warnings++;
		snprintf(fake_out.last_warning, sizeof(fake_out.last_warning), "%s", msg);
	}
	snprintf(fake_out.last_log, sizeof(fake_out.last_log), "%s", msg);
}

/* A vCPU of `model` on `backend`, every log line to fake_out, the counts reset. */
static struct vpmu_vcpu *fake_vcpu(const char *model, enum vpmu_backend backend)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.backend = backend;
	cfg.pmi = fake_on_pmi;
	cfg.log = fake_on_log;
	cfg.log_level = VPMU_LOG_DEBUG;
	memset(&fake_out, 0, sizeof(fake_out));
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	return v;
}

#endif
