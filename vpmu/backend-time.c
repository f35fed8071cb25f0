/* SPDX-License-Identifier: MIT */
/*
 * The time backend: cycle counters from the vCPU thread's CPU time, for
 * hosts without a PMU (most cloud VMs), with real perf overflow signals.
 *
 * Each cycle counter is a perf software task-clock event on the thread
 * that syncs the vCPU (pid 0: the vCPU thread), read in ns and turned
 * into cycles at the model's nominal clock, CPUID 15H: the TSC runs at
 * crystal * EBX / EAX Hz and the core at that rate too (no turbo), so
 *   CPU_CLK_UNHALTED.THREAD (fixed 1, 3CH/00H)  ns * TSC Hz / 1e9
 *   CPU_CLK_UNHALTED.REF_TSC (fixed 2)          ns * TSC Hz / 1e9
 *   CPU_CLK_UNHALTED.REF_XCLK (3CH/01H)         ns * crystal Hz / 1e9
 * in exact integer math on the running total (no drift). The sample
 * period is in ns, so the host overflow comes when the guest counter
 * wraps; task-clock's hrtimer cannot fire sooner than 10 us after the
 * previous overflow, so a shorter guest period overflows late (the guest
 * sees the overshoot).
 *
 * What it counts is the thread's CPU time: the guest's and the VMM's own
 * work on that thread (an emulator's vCPU thread is all guest). It cannot
 * tell guest user from guest kernel time: a counter with USR, OS or both
 * counts all of it. Halted time (the thread sleeping) does not count, as
 * unhalted cycles should not.
 *
 * Everything else (instructions, branches, cache events, CMask, Inv,
 * Edge, AnyThread, fixed counters 0 and 3) is unbacked: it never counts,
 * the stats say so, and CPUID 0AH EBX marks the architectural ones
 * unavailable.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "perf-util.h"
#include "pmu.h"

#define NSEC_PER_SEC	      1000000000ULL
#define TASK_CLOCK_MIN_PERIOD 10000 /* ns: perf_swevent_hrtimer's floor */

enum clk { CLK_NONE, CLK_CORE, CLK_TSC, CLK_XCLK };

struct time_state {
	struct hc_set set;
	uint64_t tsc_hz, crystal_hz;
	bool exclude_kernel; /* perf_event_paranoid refused kernel time: sample user time only */
};

static enum clk resolve(const struct vpmu_host_event *ev)
{
	uint64_t event_umask = ARCH_PERFMON_EVENTSEL_EVENT | ARCH_PERFMON_EVENTSEL_UMASK;

	if (ev->kind == HEV_FIXED)
		return ev->fixed == 1 ? CLK_CORE : ev->fixed == 2 ? CLK_TSC : CLK_NONE;
	if (ev->kind != HEV_GP || (ev->config & ~event_umask) || ev->aux)
		return CLK_NONE; /* CMask, Inv, Edge, AnyThread, in_tx...: not from a clock */
	switch (ev->config) {
	case 0x003c:
		return CLK_CORE; /* CPU_CLK_UNHALTED.THREAD_P */
	case 0x013c:
		return CLK_XCLK; /* CPU_CLK_UNHALTED.REF_XCLK */
	}
	return CLK_NONE;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static int time_init(struct vpmu_vcpu *vcpu, void **ret_state)
{
	const struct vpmu_model *m = &vcpu->model;
	struct time_state *s;

	if (!m->tsc_crystal_hz || !m->tsc_ratio_num || !m->tsc_ratio_den)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	hc_init(&s->set, vcpu, vcpu->signo);
	s->crystal_hz = m->tsc_crystal_hz;
	s->tsc_hz = (uint64_t) m->tsc_crystal_hz * m->tsc_ratio_num / m->tsc_ratio_den;
	*ret_state = s;
	return 0;
}

static void time_fini(void *state)
{
	struct time_state *s = state;

	if (!s)
		return;
	hc_fini(&s->set);
	free(s);
}

static bool time_can_count(void *state, const struct vpmu_host_event *ev)
{
	return resolve(ev) != CLK_NONE;
}

static int time_update(void *state, unsigned int ctr, const struct vpmu_hw_want *want,
		       uint64_t *ret_delta)
{
	struct time_state *s = state;
	struct hc_params p;
	enum clk clk = want->ev.kind == HEV_NONE ? CLK_NONE : resolve(&want->ev);
	uint64_t hz, g;
	int r;

	if (want->ev.kind != HEV_NONE && clk == CLK_NONE) {
		if (s->set.ctr[ctr].warned != -EOPNOTSUPP)
			ctr_logf(s->set.vcpu, ctr, LOG_REASON(LOG_CLOCK_ONLY, -EOPNOTSUPP),
				 VPMU_LOG_INFO,
				 "time backend: counter %s%u: only cycle "
				 "events count from CPU time; this one is unbacked",
				 ctr >= 32 ? "fixed" : "gp", ctr >= 32 ? ctr - 32 : ctr);
		s->set.ctr[ctr].warned = -EOPNOTSUPP;
		return hc_update(&s->set, ctr, want, NULL, -EOPNOTSUPP, ret_delta);
	}
	if (clk == CLK_NONE)
		return hc_update(&s->set, ctr, want, NULL, 0, ret_delta);

	memset(&p, 0, sizeof(p));
	p.attr.type = PERF_TYPE_SOFTWARE;
	p.attr.config = PERF_COUNT_SW_TASK_CLOCK;
	p.attr.exclude_kernel = s->exclude_kernel;
	hz = clk == CLK_XCLK ? s->crystal_hz : s->tsc_hz;
	g = gcd(hz, NSEC_PER_SEC);
	p.mul = hz / g;
	p.div = NSEC_PER_SEC / g;
	p.min_period = TASK_CLOCK_MIN_PERIOD;
	p.wall_bound = true;
	p.what = "task-clock";
	r = hc_update(&s->set, ctr, want, &p, 0, ret_delta);
	if (r == -EACCES && !s->exclude_kernel) {
		/*
		 * perf_event_paranoid >= 2: task-clock still counts all of the
		 * thread's time with exclude_kernel, but its overflows that land
		 * in the kernel are dropped; the poll's wall-clock bound finds them.
		 */
		uint64_t carried = *ret_delta;

		s->exclude_kernel = true;
		p.attr.exclude_kernel = 1;
		vpmu_logf(
			s->set.vcpu, VPMU_LOG_INFO,
			"time backend: kernel.perf_event_paranoid "
			"refuses kernel time; overflows in the kernel are found by the next poll");
		r = hc_update(&s->set, ctr, want, &p, 0, ret_delta);
		*ret_delta += carried;
	}
	return r;
}

static uint64_t time_read(void *state, unsigned int ctr, bool discard)
{
	struct time_state *s = state;

	return hc_read(&s->set, ctr, discard);
}

static uint64_t time_poll(void *state)
{
	struct time_state *s = state;

	return hc_poll(&s->set);
}

static bool time_pending(const void *state)
{
	const struct time_state *s = state;

	return hc_pending(&s->set);
}

static void time_info(void *state, unsigned int ctr, struct vpmu_backend_info *ret)
{
	struct time_state *s = state;

	hc_info(&s->set, ctr, ret);
}

const struct vpmu_backend_ops vpmu_backend_time = {
	.name = "time",
	.init = time_init,
	.fini = time_fini,
	.can_count = time_can_count,
	.update = time_update,
	.read = time_read,
	.poll = time_poll,
	.pending = time_pending,
	.info = time_info,
};
