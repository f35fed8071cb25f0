/* SPDX-License-Identifier: MIT */
/*
 * perf_event_open plumbing and the host-counter engine shared by the
 * time and perf backends (see perf-util.h for how a guest counter rides
 * on a host event).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bits.h"
#include "perf-util.h"
#include "pmu.h"

#define READ_FORMAT	  (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING)
#define RING_PAGES	  1	  /* 64 samples of the largest kind between two polls */
#define DEADLINE_GRACE_NS 2000000 /* a sample later than this past its time is overdue */

/* ---- syscalls ----------------------------------------------------------- */

static int sys_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		    unsigned long flags)
{
	return (int) syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

static ssize_t sys_read(int fd, void *buf, size_t len)
{
	return read(fd, buf, len);
}

static int sys_ioctl(int fd, unsigned long request, unsigned long arg)
{
	return ioctl(fd, request, arg);
}

static int sys_fcntl(int fd, int cmd, unsigned long arg)
{
	return fcntl(fd, cmd, arg);
}

static void *sys_mmap(size_t len, int fd)
{
	return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

static int sys_munmap(void *addr, size_t len)
{
	return munmap(addr, len);
}

static int sys_close(int fd)
{
	return close(fd);
}

const struct perf_sys perf_sys_real = {
	.open = sys_open,
	.read = sys_read,
	.ioctl = sys_ioctl,
	.fcntl = sys_fcntl,
	.mmap = sys_mmap,
	.munmap = sys_munmap,
	.close = sys_close,
};

struct perf_sys perf_sys = {
	.open = sys_open,
	.read = sys_read,
	.ioctl = sys_ioctl,
	.fcntl = sys_fcntl,
	.mmap = sys_mmap,
	.munmap = sys_munmap,
	.close = sys_close,
};

static int neg_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

static size_t page_size(void)
{
	static size_t size;

	if (!size)
		size = (size_t) sysconf(_SC_PAGESIZE);
	return size;
}

int perf_open(struct perf_event_attr *attr, int signo, struct perf_ring *ring, unsigned int pages,
	      int *ret_ring_err)
{
	int fd, r;

	attr->size = sizeof(*attr);
	fd = perf_sys.open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return neg_errno();
	if (signo >= 0) {
		/* the overflow signal goes to this thread, the vCPU's, not the process */
		struct f_owner_ex owner = { F_OWNER_TID, (pid_t) syscall(SYS_gettid) };

		if (perf_sys.fcntl(fd, F_SETOWN_EX, (unsigned long) &owner) < 0 ||
		    (signo > 0 && perf_sys.fcntl(fd, F_SETSIG, (unsigned long) signo) < 0) ||
		    perf_sys.fcntl(fd, F_SETFL, O_ASYNC) < 0) {
			r = neg_errno();
			perf_sys.close(fd);
			return r;
		}
	}
	if (ring) {
		size_t len = (1 + pages) * page_size();
		void *p;

		memset(ring, 0, sizeof(*ring));
		p = perf_sys.mmap(len, fd);
		if (p == MAP_FAILED) {
			*ret_ring_err = neg_errno();
		} else {
			ring->base = p;
			ring->len = len;
			ring->data_size = pages * page_size();
			ring->sample_type = attr->sample_type;
		}
	}
	return fd;
}

void perf_close(int fd, struct perf_ring *ring)
{
	if (ring && ring->base) {
		perf_sys.munmap(ring->base, ring->len);
		ring->base = NULL;
	}
	if (fd >= 0)
		perf_sys.close(fd);
}

int perf_read_count(int fd, struct perf_count *ret)
{
	uint64_t v[3];
	ssize_t n = perf_sys.read(fd, v, sizeof(v));

	if (n < 0)
		return neg_errno();
	/* a pinned event that could not be scheduled reads as end of file */
	if (n != (ssize_t) sizeof(v))
		return -EBUSY;
	ret->value = v[0];
	ret->enabled = v[1];
	ret->running = v[2];
	return 0;
}

int perf_set_period(int fd, uint64_t period)
{
	return perf_sys.ioctl(fd, PERF_EVENT_IOC_PERIOD, (unsigned long) &period) < 0 ? neg_errno()
										      : 0;
}

int perf_enable(int fd, bool on)
{
	return perf_sys.ioctl(fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) < 0
		       ? neg_errno()
		       : 0;
}

/* Copy `len` bytes at ring offset `at` (which may wrap) to `dst`. */
static void ring_copy(const uint8_t *data, uint64_t size, uint64_t at, void *dst, size_t len)
{
	size_t off = (size_t) (at % size), first = len;

	if (first > size - off)
		first = size - off;
	memcpy(dst, data + off, first);
	memcpy((uint8_t *) dst + first, data, len - first);
}

/* The fields of a PERF_RECORD_SAMPLE, in the order perf_event.h lists them. */
static bool parse_sample(uint64_t type, const uint64_t *w, size_t nw, struct perf_sample *ret)
{
	size_t i = 0;

#define TAKE(dst)                                                                                  \
	do {                                                                                       \
		if (i >= nw)                                                                       \
			return false;                                                              \
		(dst) = w[i++];                                                                    \
	} while (0)
	uint64_t skip;

	memset(ret, 0, sizeof(*ret));
	if (type &
	    ~(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
	      PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |
	      PERF_SAMPLE_PERIOD | PERF_SAMPLE_READ | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC))
		return false;
	if (type & PERF_SAMPLE_IDENTIFIER)
		TAKE(skip);
	if (type & PERF_SAMPLE_IP)
		TAKE(ret->ip);
	if (type & PERF_SAMPLE_TID)
		TAKE(skip);
	if (type & PERF_SAMPLE_TIME)
		TAKE(skip);
	if (type & PERF_SAMPLE_ADDR)
		TAKE(ret->addr);
	if (type & PERF_SAMPLE_ID)
		TAKE(skip);
	if (type & PERF_SAMPLE_STREAM_ID)
		TAKE(skip);
	if (type & PERF_SAMPLE_CPU)
		TAKE(skip);
	if (type & PERF_SAMPLE_PERIOD)
		TAKE(skip);
	if (type & PERF_SAMPLE_READ) {
		/* one event, READ_FORMAT: value, time enabled, time running */
		TAKE(ret->count.value);
		TAKE(ret->count.enabled);
		TAKE(ret->count.running);
	}
	if (type & PERF_SAMPLE_WEIGHT)
		TAKE(ret->weight);
	if (type & PERF_SAMPLE_DATA_SRC)
		TAKE(ret->data_src);
#undef TAKE
	(void) skip;
	return true;
}

bool perf_ring_pending(const struct perf_ring *ring)
{
	const struct perf_event_mmap_page *pg = ring->base;

	return pg && __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE) != pg->data_tail;
}

enum perf_rec perf_ring_next(struct perf_ring *ring, struct perf_sample *ret)
{
	struct perf_event_mmap_page *pg = ring->base;
	struct perf_event_header h;
	uint64_t words[32];
	const uint8_t *data;
	uint64_t head, tail;

	if (!pg)
		return PERF_REC_NONE;
	data = (const uint8_t *) pg + (pg->data_offset ? pg->data_offset : page_size());
	/* data_head is written by the kernel: read it before the records (acquire) */
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	tail = pg->data_tail;
	while (tail != head) {
		enum perf_rec rec = PERF_REC_NONE;

		if (head - tail < sizeof(h) || head - tail > ring->data_size)
			goto corrupt;
		ring_copy(data, ring->data_size, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail)
			goto corrupt;
		if (h.type == PERF_RECORD_SAMPLE) {
			size_t len = h.size - sizeof(h);

			rec = PERF_REC_LOST;
			if (len <= sizeof(words)) {
				ring_copy(data, ring->data_size, tail + sizeof(h), words, len);
				if (parse_sample(ring->sample_type, words, len / 8, ret))
					rec = PERF_REC_SAMPLE;
			}
		} else if (h.type == PERF_RECORD_LOST || h.type == PERF_RECORD_THROTTLE) {
			rec = PERF_REC_LOST;
		}
		tail += h.size;
		/* the record is copied out: the kernel may reuse its bytes (release) */
		__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
		if (rec != PERF_REC_NONE)
			return rec;
	}
	return PERF_REC_NONE;
corrupt:
	__atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
	return PERF_REC_LOST;
}

/* ---- the engine --------------------------------------------------------- */

static int64_t mono_ns(void)
{
	struct timespec ts;

	if (perf_sys.monotonic_ns)
		return perf_sys.monotonic_ns();
	/* the vDSO: no syscall */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Guest events in host count h (exact integer math, never drifts). */
static uint64_t g_of(const struct host_ctr *c, uint64_t h)
{
	return (uint64_t) ((unsigned __int128) h * c->mul / c->div);
}

/* The smallest host count holding g guest events. */
static uint64_t h_of(const struct host_ctr *c, uint64_t g)
{
	unsigned __int128 h = ((unsigned __int128) g * c->div + c->mul - 1) / c->mul;

	return h > UINT64_MAX ? UINT64_MAX : (uint64_t) h;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static const char *ctr_kind(unsigned int ctr)
{
	return ctr >= 32 ? "fixed" : "gp";
}

static unsigned int ctr_index(unsigned int ctr)
{
	return ctr >= 32 ? ctr - 32 : ctr;
}

static const char *errno_name(int err)
{
	switch (-err) {
	case EMFILE:
		return "EMFILE: too many open files, raise RLIMIT_NOFILE";
	case ENFILE:
		return "ENFILE: the system's file table is full";
	case ENOENT:
		return "ENOENT: the host has no such event";
	case EOPNOTSUPP:
		return "EOPNOTSUPP: the host PMU cannot do this";
	case EACCES:
		return "EACCES: not allowed, see kernel.perf_event_paranoid";
	case EPERM:
		return "EPERM: not allowed, see kernel.perf_event_paranoid";
	case EBUSY:
		return "EBUSY: the host PMU is taken";
	case ENODEV:
		return "ENODEV: no such PMU";
	case EINVAL:
		return "EINVAL: the host refused the attributes";
	case ENOMEM:
		return "ENOMEM";
	case ENOSYS:
		return "ENOSYS: no perf_event_open in this kernel";
	}
	return NULL;
}

void hc_log_error(struct hc_set *s, unsigned int ctr, int site, int err, const char *what,
		  const char *why)
{
	struct host_ctr *c = &s->ctr[ctr];
	const char *name = errno_name(err);
	char num[32];

	if (c->warned == err)
		return; /* the same failure again, nothing changed since */
	c->warned = err;
	if (!name) {
		snprintf(num, sizeof(num), "errno %d", -err);
		name = num;
	}
	ctr_logf(s->vcpu, ctr, LOG_REASON(site, err), VPMU_LOG_WARNING,
		 "%s backend: counter %s%u%s%s%s: %s failed (%s): it does not count",
		 s->vcpu->backend->name, ctr_kind(ctr), ctr_index(ctr), what ? " (" : "",
		 what ? what : "", what ? ")" : "", why, name);
}

static void set_deadline(struct host_ctr *c)
{
	uint64_t left;

	if (!c->wall_bound || !c->host_enabled)
		return;
	/* ns of this thread's CPU time never come faster than ns of wall time */
	left = c->next > c->seen ? c->next - c->seen : 0;
	c->deadline = mono_ns() + (int64_t) (left > INT64_MAX / 2 ? INT64_MAX / 2 : left) +
		      DEADLINE_GRACE_NS +
		      (int64_t) (c->period / 4 > INT64_MAX / 4 ? INT64_MAX / 4 : c->period / 4);
}

static void observe(struct host_ctr *c, const struct perf_count *n)
{
	c->last = *n;
	if (n->value > c->seen)
		c->seen = n->value;
	if (c->seen > c->vpos)
		c->vpos = c->seen;
}

static int refresh(struct host_ctr *c)
{
	struct perf_count n;
	int r = perf_read_count(c->fd, &n);

	c->read_err = r < 0 ? r : 0;
	if (r < 0)
		return r;
	observe(c, &n);
	c->frozen_exact = !c->host_enabled;
	return 0;
}

/* Guest events since the last report; true in *ret_wrapped if they reach the wrap. */
static uint64_t report(struct host_ctr *c, bool *ret_wrapped)
{
	uint64_t d = g_of(c, c->vpos) - g_of(c, c->rep);

	*ret_wrapped = c->remaining && d >= c->remaining;
	c->rep = c->vpos;
	c->remaining = d < c->remaining ? c->remaining - d : 0;
	return d;
}

static bool guest_wrapped(const struct host_ctr *c)
{
	return c->remaining && g_of(c, c->vpos) - g_of(c, c->rep) >= c->remaining;
}

static void release(struct hc_set *s, unsigned int ctr)
{
	struct host_ctr *c = &s->ctr[ctr];

	perf_close(c->fd, &c->ring);
	c->fd = -1;
	s->open &= ~BIT_ULL(ctr);
}

/* How early a host overflow may come and still be the guest's (rounding, clock skew). */
static uint64_t early_slack(const struct host_ctr *c, uint64_t rep, uint64_t wrap)
{
	uint64_t span = wrap > rep ? wrap - rep : 0;

	return span / 64 + 2 + h_of(c, 1);
}

/* Whether the host's next overflow would be the guest's wrap at `wrap` (from `rep`). */
static bool in_window(const struct host_ctr *c, uint64_t rep, uint64_t wrap)
{
	uint64_t slack = early_slack(c, rep, wrap);
	uint64_t lo = wrap > slack ? wrap - slack : 0;

	/* at most a little early, and no later than the host's shortest period allows */
	return c->next >= lo && c->next <= sat_add(wrap, c->min_period - 1);
}

/*
 * A guest write replaced the counter's value; the new count starts at host
 * count `to` and the last report was at `from`. Account as discarded what
 * the host counted and the guest never saw: from the last report, or,
 * after a guest overflow that no guest read followed, from the wrap (the
 * count past the wrap was in the value the write replaced). The time
 * backend's stats show it (time_discarded).
 */
static void drop(struct host_ctr *c, uint64_t from, uint64_t to)
{
	if (c->past_wrap && c->mark < from)
		from = c->mark;
	if (to > from)
		c->discarded += to - from;
	c->past_wrap = false;
}

/*
 * Re-arm with a read: the next host overflow where the guest wraps (or
 * as soon as the host can, past it). -errno if the host refused.
 */
static int rearm(struct hc_set *s, unsigned int ctr, bool have_read)
{
	struct host_ctr *c = &s->ctr[ctr];
	uint64_t period;
	int r;

	if (!have_read && (r = refresh(c)) < 0)
		return r;
	period = c->wrap > c->seen ? c->wrap - c->seen : 0;
	if (period < c->min_period)
		period = c->min_period;
	r = perf_set_period(c->fd, period);
	if (r < 0)
		return r;
	c->period = period;
	c->next = sat_add(c->seen, period);
	c->armed = true;
	c->rearms++;
	set_deadline(c);
	return 0;
}

/*
 * Keep the host's arming when its next overflow is the guest's wrap;
 * otherwise re-arm, except when the host would only be early and nothing was read:
 * that overflow is taken as spurious and re-arms then (the guest usually
 * reloads first, and then the grid fits again).
 */
static int arm(struct hc_set *s, unsigned int ctr, bool have_read, bool force)
{
	struct host_ctr *c = &s->ctr[ctr];

	if (in_window(c, c->rep, c->wrap)) {
		c->armed = true;
		set_deadline(c);
		return 0;
	}
	c->armed = false;
	if (c->next < c->wrap && !have_read && !force) {
		set_deadline(c);
		return 0;
	}
	return rearm(s, ctr, have_read);
}

void hc_init(struct hc_set *s, struct vpmu_vcpu *vcpu, int signo)
{
	memset(s, 0, sizeof(*s));
	s->vcpu = vcpu;
	s->signo = signo;
	s->ring_pages = RING_PAGES;
	for (unsigned int i = 0; i < ARRAY_SIZE(s->ctr); i++)
		s->ctr[i].fd = -1;
}

void hc_fini(struct hc_set *s)
{
	while (s->open)
		release(s, (unsigned int) __builtin_ctzll(s->open));
}

static int create(struct hc_set *s, unsigned int ctr, const struct vpmu_hw_want *w,
		  const struct hc_params *p, uint64_t carried)
{
	struct host_ctr *c = &s->ctr[ctr];
	struct perf_event_attr a = p->attr;
	int fd, ring_err = 0, warned = c->warned;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->warned = warned;
	c->ev = w->ev;
	c->mul = p->mul;
	c->div = p->div;
	c->min_period = p->min_period ? p->min_period : 1;
	c->wall_bound = p->wall_bound;
	/* a new event counts from 0: the guest wraps `remaining` events from now */
	c->remaining = w->mask + 1 - ((w->base + carried) & w->mask);
	c->wrap = h_of(c, c->remaining);
	c->period = c->wrap > c->min_period ? c->wrap : c->min_period;
	a.sample_period = c->period;
	a.sample_type = PERF_SAMPLE_READ | p->sample_type;
	a.read_format = READ_FORMAT;
	a.disabled = !w->enabled;
	a.wakeup_events = 1;
	fd = perf_open(&a, s->signo, &c->ring, s->ring_pages, &ring_err);
	if (fd < 0) {
		hc_log_error(s, ctr, LOG_OPEN, fd, p->what, "perf_event_open");
		return fd;
	}
	c->fd = fd;
	c->host_enabled = w->enabled;
	c->frozen_exact = !w->enabled;
	c->next = c->period;
	c->armed = true;
	c->ring_err = ring_err;
	c->warned = 0;
	if (ring_err)
		ctr_logf(s->vcpu, ctr, LOG_REASON(LOG_RING, ring_err), VPMU_LOG_WARNING,
			 "%s backend: counter %s%u: no ring buffer for "
			 "overflow samples (%s): each poll reads the count instead",
			 s->vcpu->backend->name, ctr_kind(ctr), ctr_index(ctr),
			 strerror(-ring_err));
	s->open |= BIT_ULL(ctr);
	set_deadline(c);
	return 0;
}

int hc_update(struct hc_set *s, unsigned int ctr, const struct vpmu_hw_want *want,
	      const struct hc_params *p, int err, uint64_t *ret_delta)
{
	struct host_ctr *c = &s->ctr[ctr];
	uint64_t delta = 0;
	bool wrapped, have_read = false;
	int r;

	if (c->fd >= 0 && (!p || memcmp(&c->ev, &want->ev, sizeof(c->ev)) != 0)) {
		/* the event changes or goes: what it counted so far is the guest's */
		if (!want->discard && !c->frozen_exact)
			refresh(c);
		if (!want->discard)
			delta = report(c, &wrapped);
		release(s, ctr);
	}
	c->ev = want->ev;
	if (want->ev.kind == HEV_NONE) {
		c->warned = 0;
		*ret_delta = delta;
		return 0;
	}
	if (!p) {
		*ret_delta = delta;
		return err < 0 ? err : -EOPNOTSUPP;
	}
	if (c->fd < 0) {
		*ret_delta = delta;
		r = create(s, ctr, want, p, delta);
		return r < 0 ? r : 1;
	}

	/* the same event: the value, the enable or the period changed */
	if (want->discard) {
		uint64_t rep_before = c->rep;
		bool fits = false;

		c->remaining = want->mask + 1 - (want->base & want->mask);
		if (c->reload_ok) {
			/*
			 * A reload after the guest's overflow: if the host's grid
			 * fits the new period, it goes on from the wrap (or from
			 * the guest's read of the counter) with no syscall.
			 */
			uint64_t rep = c->read_since ? c->vpos : c->grid_wrap;
			uint64_t wrap = h_of(c, sat_add(g_of(c, rep), c->remaining));

			fits = in_window(c, rep, wrap);
			if (fits) {
				c->rep = rep;
				if (c->vpos < rep)
					c->vpos = rep;
			}
		}
		if (!fits) {
			/* drop exactly what was counted up to now */
			if (!c->frozen_exact) {
				r = refresh(c);
				have_read = r == 0;
			}
			c->rep = c->vpos;
		}
		drop(c, rep_before, c->rep);
		c->reload_ok = false;
	} else {
		delta = report(c, &wrapped);
		c->remaining = want->mask + 1 - ((want->base + delta) & want->mask);
	}
	c->wrap = h_of(c, sat_add(g_of(c, c->rep), c->remaining));
	if (want->enabled != c->host_enabled) {
		r = perf_enable(c->fd, want->enabled);
		if (r < 0) {
			hc_log_error(s, ctr, LOG_ENABLE, r, NULL,
				     want->enabled ? "enable" : "disable");
			release(s, ctr);
			*ret_delta = delta;
			return r;
		}
		c->host_enabled = want->enabled;
		c->frozen_exact = false;
	}
	r = arm(s, ctr, have_read, false);
	if (r < 0)
		hc_log_error(s, ctr, LOG_ARM, r, NULL, "re-arming the overflow (late overflows)");
	*ret_delta = delta;
	return 0;
}

uint64_t hc_read(struct hc_set *s, unsigned int ctr, bool discard)
{
	struct host_ctr *c = &s->ctr[ctr];
	bool wrapped;
	uint64_t d;

	if (c->fd < 0)
		return 0;
	if (!c->frozen_exact)
		refresh(c);
	c->read_since = true;
	if (discard)
		drop(c, c->rep, c->vpos); /* the core drops what this read returns */
	d = report(c, &wrapped);
	if (wrapped) {
		/* found by this read: the host overflow still to come is not the guest's */
		c->armed = false;
		c->reload_ok = true;
		c->grid_wrap = c->wrap;
	}
	c->past_wrap = false; /* the guest has seen the count */
	return d;
}

uint64_t hc_poll(struct hc_set *s)
{
	struct vpmu_vcpu *vcpu = s->vcpu;
	uint64_t ovf = 0, open = s->open;
	int64_t now = 0;

	while (open) {
		unsigned int ctr = (unsigned int) __builtin_ctzll(open);
		struct host_ctr *c = &s->ctr[ctr];
		/* a guest write waits to be applied: its old arming no longer holds */
		bool rewritten = counter_hw(vcpu, ctr)->discard;
		bool need_read = !c->ring.base, spurious = false, wrapped = false;
		struct perf_sample smp;
		enum perf_rec rec;

		open &= open - 1;
		while ((rec = perf_ring_next(&c->ring, &smp)) != PERF_REC_NONE) {
			uint64_t point = c->next;
			bool matched;

			if (rec == PERF_REC_LOST) {
				c->lost++;
				need_read = true;
				continue;
			}
			c->samples++;
			observe(c, &smp.count);
			/* the host reloads its period on a grid: which grid point was this? */
			matched = sat_add(c->seen, early_slack(c, 0, c->period)) >= point;
			if (matched) {
				do
					c->next = sat_add(c->next, c->period);
				while (c->next <= c->seen && c->next != UINT64_MAX);
			} else {
				c->next = sat_add(c->seen, c->period);
			}
			if (c->armed && matched && !rewritten && !wrapped) {
				/* the guest's overflow: it wraps here, even if the host was a bit
				 * early */
				if (c->vpos < c->wrap)
					c->vpos = c->wrap;
				c->grid_wrap = point;
				c->mark = point;
				c->past_wrap = true;
				c->armed = false;
				c->reload_ok = true;
				c->read_since = false;
				wrapped = true;
				if (smp.ip || smp.addr) {
					vcpu->last_ip = smp.ip;
					vcpu->last_dla = smp.addr;
					vcpu->last_latency = smp.weight;
				}
			} else if (!wrapped) {
				c->reload_ok = false;
				if (guest_wrapped(c))
					wrapped = true;
				else
					spurious = true;
			}
		}
		if (!need_read && c->wall_bound && c->host_enabled && !wrapped) {
			if (!now)
				now = mono_ns();
			need_read = now > c->deadline;
		}
		if (need_read && !wrapped && c->host_enabled) {
			if (refresh(c) == 0 && guest_wrapped(c)) {
				/* a signal or sample went missing: the count says it wrapped */
				c->lost++;
				c->armed = false;
				c->reload_ok = true;
				c->read_since = true;
				c->grid_wrap = c->wrap;
				c->mark = c->wrap;
				c->past_wrap = true;
				wrapped = true;
			} else {
				set_deadline(c);
			}
			/* the host's timer went on along its grid */
			while (c->next <= c->seen && c->next != UINT64_MAX)
				c->next = sat_add(c->next, c->period);
		}
		if (wrapped) {
			c->spurious += spurious;
			ovf |= BIT_ULL(ctr);
		} else if (spurious) {
			c->spurious++;
			if (c->host_enabled && arm(s, ctr, false, true) < 0)
				c->armed = false;
		}
	}
	return ovf;
}

bool hc_pending(const struct hc_set *s)
{
	for (uint64_t open = s->open; open; open &= open - 1)
		if (perf_ring_pending(&s->ctr[__builtin_ctzll(open)].ring))
			return true;
	return false;
}

void hc_info(struct hc_set *s, unsigned int ctr, struct vpmu_backend_info *ret)
{
	const struct host_ctr *c = &s->ctr[ctr];

	memset(ret, 0, sizeof(*ret));
	if (c->fd < 0)
		return;
	ret->time_enabled = c->last.enabled;
	ret->time_running = c->last.running;
	/* host units are ns only where they are this thread's CPU time */
	ret->time_discarded = c->wall_bound ? c->discarded : 0;
	if (c->read_err) {
		/* a pinned event the host could not schedule reads nothing */
		ret->degraded = true;
		ret->error = c->read_err;
	} else if (c->ring_err) {
		ret->degraded = true;
		ret->error = c->ring_err;
	} else if (c->last.running < c->last.enabled) {
		/* multiplexed or not scheduled: perf scales nothing, the guest sees less */
		ret->degraded = true;
		ret->error = -EBUSY;
	} else if (c->lost) {
		ret->degraded = true;
		ret->error = -ENOBUFS;
	}
}
