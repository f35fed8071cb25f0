/* SPDX-License-Identifier: MIT */
/*
 * What the time and perf backends share: perf_event_open plumbing (the
 * overflow signal to the vCPU thread, counts with their enabled/running
 * times, the period ioctl, the ring buffer of overflow samples) and the
 * host-counter engine that turns host counts and overflow samples into
 * guest counts and guest overflows. Private to libvpmu.
 *
 * How a guest counter rides on a host event (one event per counter):
 *   - The host event samples every `period` host units, the events left
 *     until the guest counter wraps; the kernel reloads that period by
 *     itself after each overflow, on a grid (the next overflow is one
 *     period after the previous one, not after its handling).
 *   - An overflow sample carries the count at the overflow (PERF_SAMPLE_
 *     READ): the poll folds it without a read(). A guest that reloads its
 *     counter right after the PMI with the same period finds the host
 *     already armed for it: steady sampling costs no syscall per PMI.
 *     The new period then starts at the wrap point, so the guest's own
 *     handler time counts into it, as with a sampling driver that reloads
 *     period - overshoot (Linux) or PEBS auto-reload.
 *   - A host overflow that is not the guest's (the guest did not reload,
 *     or changed the period) is only folded; the counter is then re-armed
 *     at the events really left (a read() and a period ioctl).
 *   - Nothing is lost: counts stay in the kernel until the next read or
 *     sample; a lost signal leaves its sample in the ring for the next
 *     poll; lost or throttled samples, and the time backend's wall-clock
 *     bound, make the poll read() the count and raise a wrap found there.
 */
#ifndef VPMU_PERF_UTIL_H
#define VPMU_PERF_UTIL_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"

/*
 * The syscalls of the host backends, one table per process. Each behaves
 * like its libc function (-1 and errno on failure). Tests replace entries
 * to inject failures; benchmarks wrap them to count syscalls. Not thread
 * safe to change while vCPUs run.
 */
struct perf_sys {
	int (*open)(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		    unsigned long flags);
	ssize_t (*read)(int fd, void *buf, size_t len);
	int (*ioctl)(int fd, unsigned long request, unsigned long arg);
	int (*fcntl)(int fd, int cmd, unsigned long arg);
	void *(*mmap)(size_t len, int fd); /* shared, read-write; MAP_FAILED on failure */
	int (*munmap)(void *addr, size_t len);
	int (*close)(int fd);
	/* CLOCK_MONOTONIC in ns, for the time backend's deadlines; NULL: the real one */
	int64_t (*monotonic_ns)(void);
};

extern struct perf_sys perf_sys;
extern const struct perf_sys perf_sys_real;

/* A count as read(2) returns it with TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING. */
struct perf_count {
	uint64_t value;
	uint64_t enabled; /* ns the event was enabled */
	uint64_t running; /* ns it was on a counter: less when multiplexed */
};

/* One overflow sample, as far as the sample type carries it. */
struct perf_sample {
	uint64_t ip, addr, weight, data_src;
	struct perf_count count; /* PERF_SAMPLE_READ */
};

/* The ring buffer of one event: one metadata page and 2^n data pages. */
struct perf_ring {
	void *base; /* NULL: none */
	size_t len; /* mapped bytes */
	uint64_t data_size;
	uint64_t sample_type;
};

enum perf_rec {
	PERF_REC_NONE, /* no more records */
	PERF_REC_SAMPLE,
	PERF_REC_LOST, /* samples lost, throttled, or a record this parser cannot read */
};

/*
 * Open `attr` (read_format, wakeup and sample fields are the caller's) on
 * the calling thread, any CPU, and route its overflow signal to the
 * calling thread: F_SETOWN_EX (F_OWNER_TID), F_SETSIG `signo` (> 0; 0:
 * SIGIO) and O_ASYNC; signo < 0: no signal. With `ring`, maps a ring
 * buffer of `pages` data pages (a power of two); a mapping failure is
 * returned in *ret_ring_err and the event stays open without a ring.
 * Returns the fd or -errno.
 */
int perf_open(struct perf_event_attr *attr, int signo, struct perf_ring *ring, unsigned int pages,
	      int *ret_ring_err);
void perf_close(int fd, struct perf_ring *ring);
int perf_read_count(int fd, struct perf_count *ret);
int perf_set_period(int fd, uint64_t period);
int perf_enable(int fd, bool on);

/* The next record of `ring` (consumed); PERF_REC_NONE when empty. */
enum perf_rec perf_ring_next(struct perf_ring *ring, struct perf_sample *ret);
/* Whether the kernel wrote a record perf_ring_next() has not taken: two loads, no syscall. */
bool perf_ring_pending(const struct perf_ring *ring);

/* ---- the host-counter engine ------------------------------------------ */

/* How a backend counts one guest event on the host. */
struct hc_params {
	struct perf_event_attr attr; /* type, config*, exclude_*; the engine adds the rest */
	uint64_t mul, div;	     /* guest events = host count * mul / div */
	uint64_t min_period;	     /* shortest host period that overflows on time */
	uint64_t sample_type;	     /* extra PERF_SAMPLE_* for the guest sample (IP, ADDR...) */
	bool wall_bound;	     /* host units are ns of this thread's CPU time */
	const char *what;	     /* for log lines: "task-clock", "raw 0x3c" ... */
};

struct host_ctr {
	int fd; /* -1: no host event */
	struct perf_ring ring;
	struct vpmu_host_event ev; /* what it counts */
	uint64_t mul, div, min_period;
	bool wall_bound;
	bool host_enabled;
	bool armed;	    /* the overflow at `next` is the guest's */
	bool reload_ok;	    /* a guest overflow was just taken: a reload keeps the grid */
	bool read_since;    /* ... and the guest read the counter since */
	bool frozen_exact;  /* disabled on the host and read since: `seen` is now */
	uint64_t period;    /* host sample period now */
	uint64_t next;	    /* host count at the next host overflow (the grid) */
	uint64_t wrap;	    /* host count where the guest counter wraps */
	uint64_t grid_wrap; /* the grid point of the last guest overflow */
	uint64_t seen;	    /* latest host count observed */
	uint64_t vpos;	    /* position counted to the guest (>= seen after an early overflow) */
	uint64_t rep;	    /* position already reported to the core */
	uint64_t remaining; /* guest events from `rep` to the wrap */
	int64_t deadline;   /* CLOCK_MONOTONIC ns: a sample is overdue (wall_bound) */
	struct perf_count last; /* latest count read or sampled */
	int ring_err;		/* no ring buffer: why */
	int read_err;		/* the last read() failed: why (-EBUSY: not scheduled) */
	int warned;		/* errno last logged for this counter, since its event changed */
	uint64_t samples, lost, spurious, rearms;
	bool past_wrap; /* the guest counter wrapped at `mark`; no guest read or write since */
	uint64_t mark;
	uint64_t discarded; /* host units counted, then dropped by a guest write (drop()) */
};

/* A backend's state starts with its hc_set (tests reach it through vcpu->backend_state). */
struct hc_set {
	struct vpmu_vcpu *vcpu;
	int signo;
	unsigned int ring_pages;
	struct host_ctr ctr[64]; /* GLOBAL_CTRL numbering */
	uint64_t open;		 /* counters with a host event */
};

void hc_init(struct hc_set *s, struct vpmu_vcpu *vcpu, int signo);
void hc_fini(struct hc_set *s);

/*
 * The backend update (see backend.h) for one counter: `p` is how to
 * count want->ev, or NULL when it cannot be counted, `err` then saying
 * why (negative errno). Returns 1 (created), 0 (reused) or -errno.
 */
int hc_update(struct hc_set *s, unsigned int ctr, const struct vpmu_hw_want *want,
	      const struct hc_params *p, int err, uint64_t *ret_delta);
/* The backend read (see backend.h); `discard`: the core drops what it returns. */
uint64_t hc_read(struct hc_set *s, unsigned int ctr, bool discard);
/* Fold every host overflow since the last poll; the counters that wrapped. */
uint64_t hc_poll(struct hc_set *s);
/* Whether a host counter has a record for hc_poll(); no syscall. */
bool hc_pending(const struct hc_set *s);
void hc_info(struct hc_set *s, unsigned int ctr, struct vpmu_backend_info *ret);

struct host_pmu;

/* backend-perf.c: how it learns the host's PMU (tests substitute a host). */
extern int (*perf_backend_detect)(struct host_pmu *ret);

/*
 * Log `err` for counter `ctr` at `site` (enum log_site): a WARNING when it
 * is not the error last logged for the counter, through ctr_logf (one
 * line per counter and reason for the life of the vCPU, then counted).
 */
void hc_log_error(struct hc_set *s, unsigned int ctr, int site, int err, const char *what,
		  const char *why);

#endif
