/* SPDX-License-Identifier: MIT */
/*
 * Guest event -> host perf_event_attr. In order:
 *  1. the same model on a host that takes raw events: the guest's event
 *     select, as is (PERF_TYPE_RAW), its extra MSR in config1;
 *  2. an architectural event (SDM Vol. 3B 21.2.1.2, Table 21-1) the guest
 *     model enumerates, with no modifier: the generic perf event Linux
 *     maps to it on every vendor (topdown slots: raw, Intel hosts only);
 *  3. otherwise by name: the guest's catalogue names the event, libpfm4
 *     encodes that name for the host PMU, and the guest's edge/inv/cmask
 *     are carried as modifiers and checked in the result.
 * Fixed counters map onto the generic events of the same meaning.
 * Anything else is unbacked (-ENOENT), never approximated.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bits.h"
#include "events.h"
#include "hostmap.h"
#include "vpmu/msr.h"

#include <perfmon/pfmlib_perf_event.h>

#define EVTSEL_CODE (ARCH_PERFMON_EVENTSEL_EVENT | ARCH_PERFMON_EVENTSEL_UMASK)
#define EVTSEL_MODS                                                                                \
	(ARCH_PERFMON_EVENTSEL_EDGE | ARCH_PERFMON_EVENTSEL_INV | ARCH_PERFMON_EVENTSEL_CMASK)

/*
 * Linux's pseudo-encodings for events only a fixed counter counts
 * (event 0x00, umask = fixed index + 1): topdown slots is fixed counter 3.
 */
#define PSEUDO_TOPDOWN_SLOTS 0x0400

#define NO_GENERIC UINT64_MAX

/*
 * SDM Vol. 3B Table 21-1, in CPUID.0AH:EBX bit order. The generic event
 * is the one Linux's Intel event map encodes as exactly this event: 3CH/
 * 01H counts at the bus/crystal clock, which is perf's bus-cycles, not
 * ref-cycles (fixed counter 2, TSC rate). Topdown slots has none.
 */
static const struct {
	uint16_t code;
	uint64_t generic;
} arch_events[] = {
	{ 0x003c, PERF_COUNT_HW_CPU_CYCLES },	 { 0x00c0, PERF_COUNT_HW_INSTRUCTIONS },
	{ 0x013c, PERF_COUNT_HW_BUS_CYCLES },	 { 0x4f2e, PERF_COUNT_HW_CACHE_REFERENCES },
	{ 0x412e, PERF_COUNT_HW_CACHE_MISSES },	 { 0x00c4, PERF_COUNT_HW_BRANCH_INSTRUCTIONS },
	{ 0x00c5, PERF_COUNT_HW_BRANCH_MISSES }, { 0x01a4, NO_GENERIC },
};

/* Fixed counter i counts what this generic event counts (SDM Table 21-2). */
static const uint64_t fixed_generic[] = {
	PERF_COUNT_HW_INSTRUCTIONS,   /* INST_RETIRED.ANY */
	PERF_COUNT_HW_CPU_CYCLES,     /* CPU_CLK_UNHALTED.THREAD */
	PERF_COUNT_HW_REF_CPU_CYCLES, /* CPU_CLK_UNHALTED.REF_TSC */
	NO_GENERIC,		      /* TOPDOWN.SLOTS */
};

static int fail(const char **ret_why, const char *why)
{
	if (ret_why)
		*ret_why = why;
	return -ENOENT;
}

/* Encode "pmu::name" with libpfm4; type and config words into *out. */
static int pfm_encode(const struct host_pmu *host, const char *name, struct perf_event_attr *out)
{
	struct perf_event_attr a;
	pfm_perf_encode_arg_t arg;
	char buf[256];
	int n;

	if (!host->pfm_pmu[0] || host_pfm_init() != PFM_SUCCESS)
		return -ENOENT;
	n = snprintf(buf, sizeof(buf), "%s::%s", host->pfm_pmu, name);
	if (n < 0 || (size_t) n >= sizeof(buf))
		return -ENAMETOOLONG;
	memset(&a, 0, sizeof(a));
	memset(&arg, 0, sizeof(arg));
	arg.attr = &a;
	arg.size = sizeof(arg);
	if (pfm_get_os_event_encoding(buf, PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT, &arg) !=
	    PFM_SUCCESS)
		return -ENOENT;
	out->type = a.type;
	out->config = a.config;
	out->config1 = a.config1;
	out->config2 = a.config2;
	return 0;
}

static bool host_has_slots(const struct host_pmu *host)
{
	struct perf_event_attr a;

	if (!host->intel || !host->raw_ok)
		return false;
	/* CPUID.0AH: architectural event 7 and fixed counter 3 */
	if (host->model)
		return host->model->arch_events_len >= 8 && host->model->nr_fixed >= 4;
	return !pfm_encode(host, "TOPDOWN:SLOTS", &a);
}

static bool same_model(const struct vpmu_model *guest, const struct host_pmu *host)
{
	return host->model && host->model->name && guest->name &&
	       !strcmp(host->model->name, guest->name);
}

/*
 * The catalogue row for a guest event select. Rows that program an extra
 * MSR (frontend, load latency) share one encoding: the MSR value picks
 * the row.
 */
static const struct vpmu_event_desc *guest_row(const struct vpmu_event_table *t, uint64_t sel,
					       uint64_t aux)
{
	const struct vpmu_event_desc *d = vpmu_event_decode(t, sel);
	uint64_t code;

	if (!d || !d->aux_msr)
		return d;
	code = vpmu_event_encode(d);
	for (size_t i = 0; i < t->nr; i++) {
		const struct vpmu_event_desc *e = &t->events[i];

		if (e->aux_msr == d->aux_msr && e->aux_value == aux && vpmu_event_encode(e) == code)
			return e;
	}
	return NULL;
}

/*
 * libpfm4 spelling of a perfmon name: "EVENT.UMASK.MORE" is
 * "EVENT:UMASK_MORE". With strip_ps, a "_PS" suffix (the PEBS twin of an
 * event, same count) is dropped. false if there is nothing to try.
 */
static bool pfm_name(char *buf, size_t len, const char *name, bool strip_ps)
{
	size_t n = strlen(name);
	char *dot;

	if (strip_ps) {
		if (n < 3 || strcmp(name + n - 3, "_PS"))
			return false;
		n -= 3;
	}
	if (n >= len)
		return false;
	memcpy(buf, name, n);
	buf[n] = '\0';
	dot = strchr(buf, '.');
	if (!dot)
		return true;
	*dot = ':';
	for (char *p = dot + 1; *p; p++)
		if (*p == '.')
			*p = '_';
	return true;
}

/* Rule 3: by name through libpfm4, the guest's modifiers carried. */
static int by_name(const struct vpmu_model *guest, const struct host_pmu *host,
		   const struct vpmu_host_event *ev, struct perf_event_attr *out,
		   const char **ret_why)
{
	uint64_t sel = ev->config & GENMASK_ULL(31, 0), mods = sel & EVTSEL_MODS;
	const struct vpmu_event_desc *rows[2];

	if (ev->config != sel)
		return fail(ret_why, "event select bits above 31 have no meaning on another model");
	if (!guest->events)
		return fail(ret_why, "the guest model has no event catalogue to name this event");
	if (!host->intel)
		return fail(ret_why, "guest event names are Intel's: the host PMU is not");
	if (!host->raw_ok)
		return fail(ret_why, "the host PMU refuses raw events");
	if (!host->pfm_pmu[0])
		return fail(ret_why, "libpfm4 does not know the host PMU");

	rows[0] = guest_row(guest->events, sel, ev->aux);
	/* the same umask without modifiers, the modifiers carried over */
	rows[1] = mods ? vpmu_event_decode(guest->events, sel & EVTSEL_CODE) : NULL;
	if (rows[1] && (rows[1]->aux_msr || rows[1] == rows[0]))
		rows[1] = NULL;
	if (!rows[0] && !rows[1])
		return fail(ret_why, ev->aux ? "no catalogue event of the guest model has this "
					       "event select and extra MSR value"
					     : "no catalogue event of the guest model has this "
					       "event select");

	for (unsigned int r = 0; r < ARRAY_SIZE(rows); r++) {
		for (int strip = 0; rows[r] && strip < 2; strip++) {
			struct perf_event_attr a;
			char name[160], spec[200];

			if (!pfm_name(name, sizeof(name), rows[r]->name, strip))
				continue;
			snprintf(spec, sizeof(spec), "%s:e=%u:i=%u:c=%u", name,
				 !!(sel & ARCH_PERFMON_EVENTSEL_EDGE),
				 !!(sel & ARCH_PERFMON_EVENTSEL_INV),
				 (unsigned int) FIELD_GET(ARCH_PERFMON_EVENTSEL_CMASK, sel));
			if (pfm_encode(host, spec, &a))
				continue;
			/*
			 * What libpfm4 built must count as the guest asked:
			 * its modifiers, this thread only, a real event.
			 */
			if ((a.config & (EVTSEL_MODS | ARCH_PERFMON_EVENTSEL_ANY)) != mods ||
			    !(a.config & ARCH_PERFMON_EVENTSEL_EVENT))
				continue;
			out->type = a.type;
			out->config = a.config;
			out->config1 = a.config1;
			out->config2 = a.config2;
			if (ret_why)
				*ret_why = "by name through libpfm4";
			return 0;
		}
	}
	return fail(ret_why, "libpfm4 has no event of this name for the host PMU");
}

static int map_gp(const struct vpmu_model *guest, const struct host_pmu *host,
		  const struct vpmu_host_event *ev, struct perf_event_attr *out,
		  const char **ret_why)
{
	uint64_t carried = EVTSEL_CODE | EVTSEL_MODS;

	if (ev->config & ARCH_PERFMON_EVENTSEL_ANY)
		return fail(ret_why, "AnyThread would count the sibling thread");
	if (!FIELD_GET(ARCH_PERFMON_EVENTSEL_EVENT, ev->config))
		return fail(ret_why,
			    "event 0x00 is a fixed-counter pseudo-encoding, not a GP event");

	/* 1. identity */
	if (same_model(guest, host) && host->raw_ok) {
		if (guest->features & MODEL_F_EQ)
			carried |= ARCH_PERFMON_EVENTSEL_EQ;
		if (guest->features & MODEL_F_UMASK2)
			carried |= ARCH_PERFMON_EVENTSEL_UMASK2;
		/* the host's raw event select has them at the same place (perf's in_tx, in_tx_cp)
		 */
		if (guest->features & MODEL_F_TSX)
			carried |= HSW_IN_TX | HSW_IN_TX_CHECKPOINTED;
		if (ev->config & ~carried)
			return fail(ret_why, "event select bits the host event cannot carry");
		out->type = PERF_TYPE_RAW;
		out->config = ev->config;
		/* offcore response, load latency, frontend: the extra MSR */
		out->config1 = ev->aux;
		if (ret_why)
			*ret_why = "identity: same model, raw event select";
		return 0;
	}

	/* 2. architectural */
	for (unsigned int j = 0; j < ARRAY_SIZE(arch_events) && j < guest->arch_events_len; j++) {
		if (ev->config != arch_events[j].code)
			continue;
		if (arch_events[j].generic != NO_GENERIC) {
			out->type = PERF_TYPE_HARDWARE;
			out->config = arch_events[j].generic;
			if (ret_why)
				*ret_why = "architectural event: generic perf event";
			return 0;
		}
		if (!host_has_slots(host))
			return fail(ret_why, "topdown slots: the host has no slots event");
		out->type = PERF_TYPE_RAW;
		out->config = arch_events[j].code;
		if (ret_why)
			*ret_why = "architectural topdown slots: raw";
		return 0;
	}

	/* 3. by name */
	return by_name(guest, host, ev, out, ret_why);
}

static int map_fixed(const struct vpmu_model *guest, const struct host_pmu *host,
		     const struct vpmu_host_event *ev, struct perf_event_attr *out,
		     const char **ret_why)
{
	if (ev->fixed >= guest->nr_fixed || ev->fixed >= ARRAY_SIZE(fixed_generic))
		return fail(ret_why, "the guest model has no such fixed counter");
	if (fixed_generic[ev->fixed] != NO_GENERIC) {
		out->type = PERF_TYPE_HARDWARE;
		out->config = fixed_generic[ev->fixed];
		if (ret_why)
			*ret_why = "fixed counter: generic perf event";
		return 0;
	}
	if (!host_has_slots(host))
		return fail(ret_why, "topdown slots: the host has no slots event");
	out->type = PERF_TYPE_RAW;
	out->config = PSEUDO_TOPDOWN_SLOTS;
	if (ret_why)
		*ret_why = "fixed counter 3: raw topdown slots";
	return 0;
}

int hostmap_attr(const struct vpmu_model *guest, const struct host_pmu *host,
		 const struct vpmu_host_event *ev, struct perf_event_attr *ret_attr,
		 const char **ret_why)
{
	struct perf_event_attr a;
	int r;

	if (!guest || !host || !ev || !ret_attr)
		return -EINVAL;
	if (ev->kind != HEV_GP && ev->kind != HEV_FIXED) {
		if (ret_why)
			*ret_why = "no event";
		return -EINVAL;
	}
	if (host->kind == HOST_PMU_NONE)
		return fail(ret_why, "perf_event_open is unusable on this host");
	if (host->kind == HOST_PMU_SOFTWARE)
		return fail(ret_why, "the host has no hardware PMU");

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	r = ev->kind == HEV_GP ? map_gp(guest, host, ev, &a, ret_why)
			       : map_fixed(guest, host, ev, &a, ret_why);
	if (r)
		return r;
	a.exclude_user = !ev->usr;
	a.exclude_kernel = !ev->os;
	a.exclude_hv = 1;
	/* count the guest only: the vCPU thread also runs the VMM */
	a.exclude_host = 1;
	a.exclude_guest = 0;
	a.pinned = 1;
	/*
	 * Never host PEBS: with exclude_host the CPU would write PEBS records
	 * through the guest's DS area. Precise guest samples are built by
	 * the core from the overflow, not by the host.
	 */
	a.precise_ip = 0;
	*ret_attr = a;
	return 0;
}
