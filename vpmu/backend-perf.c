/* SPDX-License-Identifier: MIT */
/*
 * The perf backend: each enabled guest counter is one host hardware event
 * (hostmap.c picks it: the same encoding on the same model, by name
 * through libpfm4 otherwise, generic events for architectural ones),
 * counting guest mode only (exclude_host) on the vCPU thread, pinned, so
 * it either counts all the time or not at all. Its overflow signal goes
 * to the vCPU thread; the sample it writes (guest IP, data address,
 * weight, data source) becomes the guest's overflow sample. Never
 * precise_ip: host PEBS with exclude_host would write records through the
 * guest's DS area.
 *
 * A host without a hardware PMU (most cloud VMs), or an event the host
 * cannot count, leaves the counter unbacked with the reason in the stats
 * and one log line: the guest runs on and sees a counter that does not
 * count. A pinned event the host cannot schedule (another user holds the
 * PMU) reads nothing and shows as degraded with its enabled/running times.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hostmap.h"
#include "perf-util.h"
#include "pmu.h"

struct perf_state {
	struct hc_set set;
	struct host_pmu host;
};

int (*perf_backend_detect)(struct host_pmu *ret) = host_pmu_detect;

static int perf_init(struct vpmu_vcpu *vcpu, void **ret_state)
{
	struct perf_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	hc_init(&s->set, vcpu, vcpu->signo);
	perf_backend_detect(&s->host);
	if (s->host.kind != HOST_PMU_HW)
		vpmu_logf(vcpu, VPMU_LOG_WARNING,
			  "perf backend: %s: guest counters will not count "
			  "(the time backend counts cycles from CPU time)",
			  s->host.why);
	*ret_state = s;
	return 0;
}

static void perf_fini(void *state)
{
	struct perf_state *s = state;

	if (!s)
		return;
	hc_fini(&s->set);
	free(s);
}

static bool perf_can_count(void *state, const struct vpmu_host_event *ev)
{
	struct perf_state *s = state;
	struct perf_event_attr a;

	return hostmap_attr(&s->set.vcpu->model, &s->host, ev, &a, NULL) == 0;
}

static int perf_update(void *state, unsigned int ctr, const struct vpmu_hw_want *want,
		       uint64_t *ret_delta)
{
	struct perf_state *s = state;
	struct hc_params p;
	const char *why = NULL;
	int r;

	if (want->ev.kind == HEV_NONE)
		return hc_update(&s->set, ctr, want, NULL, 0, ret_delta);
	memset(&p, 0, sizeof(p));
	r = hostmap_attr(&s->set.vcpu->model, &s->host, &want->ev, &p.attr, &why);
	if (r < 0) {
		/* -ENOENT from the map means "the host has nothing for it" */
		int err = r == -ENOENT && s->host.kind != HOST_PMU_HW ? -EOPNOTSUPP : r;

		hc_log_error(&s->set, ctr, LOG_MAP, err, why ? why : "no host event",
			     "mapping the event");
		return hc_update(&s->set, ctr, want, NULL, err, ret_delta);
	}
	p.attr.precise_ip = 0;
	p.attr.exclude_host = 1;
	p.mul = 1;
	p.div = 1;
	p.min_period = 1;
	p.sample_type =
		PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC;
	p.what = why;
	return hc_update(&s->set, ctr, want, &p, 0, ret_delta);
}

static uint64_t perf_read(void *state, unsigned int ctr, bool discard)
{
	struct perf_state *s = state;

	return hc_read(&s->set, ctr, discard);
}

static uint64_t perf_poll(void *state)
{
	struct perf_state *s = state;

	return hc_poll(&s->set);
}

static bool perf_pending(const void *state)
{
	const struct perf_state *s = state;

	return hc_pending(&s->set);
}

static void perf_info(void *state, unsigned int ctr, struct vpmu_backend_info *ret)
{
	struct perf_state *s = state;

	hc_info(&s->set, ctr, ret);
}

const struct vpmu_backend_ops vpmu_backend_perf = {
	.name = "perf",
	.init = perf_init,
	.fini = perf_fini,
	.can_count = perf_can_count,
	.update = perf_update,
	.read = perf_read,
	.poll = perf_poll,
	.pending = perf_pending,
	.info = perf_info,
};
