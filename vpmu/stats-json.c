/* SPDX-License-Identifier: MIT */
/*
 * One vCPU's published statistics as a JSON object, so that every VMM
 * embedding libvpmu serves the same snapshot (vpmu-vmm --stats, read by
 * vpmu-stat). The object is built in the caller's buffer; nothing is
 * allocated, so it is safe on any thread next to vpmu_stats_read().
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "bits.h"
#include "events.h"
#include "model.h"
#include "vpmu/msr.h"
#include "vpmu/vpmu.h"

struct out {
	char *buf;
	size_t size;
	size_t len; /* bytes the whole document needs, NUL excluded */
};

static VPMU_PRINTF(2, 3) void put(struct out *o, const char *fmt, ...)
{
	size_t room = o->len < o->size ? o->size - o->len : 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t) n;
}

/* A JSON string from at most `max` bytes of `s` (fixed-size, maybe unterminated fields). */
static void put_str(struct out *o, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	put(o, "\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char) s[i];

		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			put(o, "\\u%04x", c); /* bytes, not UTF-8: keep the output valid */
		else
			put(o, "%c", c);
	}
	put(o, "\"");
}

/* The catalogue of a model, where libvpmu has one. */
static const struct vpmu_event_table *catalogue(const struct vpmu_stats *st)
{
	char name[sizeof(st->model) + 1];
	const struct vpmu_model *m;

	memcpy(name, st->model, sizeof(st->model));
	name[sizeof(st->model)] = '\0';
	m = model_lookup(name);
	return m ? m->events : NULL;
}

static const char *event_name(const struct vpmu_event_table *t, unsigned int slot,
			      const struct vpmu_counter_stats *c)
{
	const struct vpmu_event_desc *ev;

	if (!t)
		return NULL;
	if (slot >= 8) {
		/* fixed: the catalogue's pseudo-encoding, umask n + 1 (see events.c) */
		if (!(c->config & 3))
			return NULL;
		ev = vpmu_event_decode(t, FIELD_PREP(ARCH_PERFMON_EVENTSEL_UMASK, slot - 8 + 1));
	} else {
		if (!(c->config & (ARCH_PERFMON_EVENTSEL_EVENT | ARCH_PERFMON_EVENTSEL_UMASK)))
			return NULL;
		ev = vpmu_event_decode(t, c->config);
	}
	return ev ? ev->name : NULL;
}

/* A value the caller's struct may not have: NULL leaves the key out. */
static void put_opt(struct out *o, const char *key, const uint64_t *v)
{
	if (v)
		put(o, ",\"%s\":%" PRIu64, key, *v);
}

static void put_counter(struct out *o, const struct vpmu_event_table *t, unsigned int slot,
			const struct vpmu_counter_stats *c, const uint64_t *time_discarded,
			const uint64_t *log_repeats)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} flags[] = {
		{ VPMU_CTR_IMPLEMENTED, "implemented" }, { VPMU_CTR_PROGRAMMED, "programmed" },
		{ VPMU_CTR_RUNNING, "running" },	 { VPMU_CTR_BACKED, "backed" },
		{ VPMU_CTR_UNBACKED, "unbacked" },	 { VPMU_CTR_FILTERED, "filtered" },
		{ VPMU_CTR_DEGRADED, "degraded" },
	};
	const char *name = event_name(t, slot, c);
	bool first = true;

	put(o, "{\"slot\":%u,\"kind\":\"%s\",\"index\":%u,\"config\":%" PRIu64 ",\"event\":", slot,
	    slot >= 8 ? "fixed" : "gp", slot >= 8 ? slot - 8 : slot, c->config);
	if (name)
		put_str(o, name, 256);
	else
		put(o, "null");
	put(o, ",\"count\":%" PRIu64 ",\"time_enabled\":%" PRIu64 ",\"time_running\":%" PRIu64,
	    c->count, c->time_enabled, c->time_running);
	put_opt(o, "time_discarded", time_discarded);
	put(o,
	    ",\"overflows\":%" PRIu64 ",\"creates\":%" PRIu64 ",\"updates\":%" PRIu64
	    ",\"flags\":[",
	    c->overflows, c->creates, c->updates);
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		if (!(c->flags & flags[i].bit))
			continue;
		put(o, "%s\"%s\"", first ? "" : ",", flags[i].name);
		first = false;
	}
	put(o, "],\"state\":\"%s\",\"error\":%" PRId32,
	    c->flags & VPMU_CTR_BACKED	   ? "backed"
	    : c->flags & VPMU_CTR_UNBACKED ? "unbacked"
	    : c->flags & VPMU_CTR_FILTERED ? "filtered"
					   : "idle",
	    c->error);
	put_opt(o, "log_repeats", log_repeats);
	put(o, "}");
}

/*
 * `st_size` bytes of the caller's struct: every field this library knows
 * that lies inside them (ABI_HAS(struct vpmu_stats, st_size, f) for a
 * field appended after VPMU_0.1).
 */
int vpmu_stats_to_json_sized(const struct vpmu_stats *st, size_t st_size, unsigned int index,
			     char *buf, size_t size, size_t *ret_len)
{
	const struct vpmu_event_table *t;
	struct out o = { .buf = buf, .size = size };
	bool first = true;

	if (!st || !ret_len || (!buf && size) || st_size < STATS_SIZE_V01)
		return -EINVAL;
	if (st->version != VPMU_STATS_VERSION)
		return -EPROTO;
	t = catalogue(st);

	put(&o, "{\"index\":%u,\"model\":", index);
	put_str(&o, st->model, sizeof(st->model));
	put(&o, ",\"backend\":");
	put_str(&o, st->backend, sizeof(st->backend));
	put(&o, ",\"version\":%" PRIu32 ",\"seq\":%" PRIu32, st->version, st->seq);
#define FIELD(f) put(&o, ",\"" #f "\":%" PRIu64, st->f)
	FIELD(msr_reads);
	FIELD(msr_writes);
	FIELD(msr_faults);
	FIELD(rdpmcs);
	FIELD(syncs);
	FIELD(backend_ops);
	FIELD(backend_reads);
	FIELD(creates);
	FIELD(overflows);
	FIELD(pmis_requested);
	FIELD(pmis_delivered);
	FIELD(global_status);
	FIELD(global_ctrl);
	FIELD(pebs_records);
	FIELD(pebs_bytes);
	FIELD(pebs_skipped);
	FIELD(pebs_deferred);
	FIELD(walk_faults);
#undef FIELD
	put_opt(&o, "pmis_merged",
		ABI_HAS(struct vpmu_stats, st_size, pmis_merged) ? &st->pmis_merged : NULL);
	put(&o, ",\"counters\":[");
	for (unsigned int i = 0; i < VPMU_STATS_COUNTERS; i++) {
		if (!(st->counters[i].flags & VPMU_CTR_IMPLEMENTED))
			continue;
		if (!first)
			put(&o, ",");
		put_counter(&o, t, i, &st->counters[i],
			    ABI_HAS(struct vpmu_stats, st_size, time_discarded)
				    ? &st->time_discarded[i]
				    : NULL,
			    ABI_HAS(struct vpmu_stats, st_size, log_repeats) ? &st->log_repeats[i]
									     : NULL);
		first = false;
	}
	put(&o, "]}");

	if (!buf) {
		*ret_len = o.len;
		return 0;
	}
	if (o.len >= size)
		return -ENOSPC;
	*ret_len = o.len;
	return 0;
}

int(vpmu_stats_to_json)(const struct vpmu_stats *st, unsigned int index, char *buf, size_t size,
			size_t *ret_len)
{
	return vpmu_stats_to_json_sized(st, STATS_SIZE_V01, index, buf, size, ret_len);
}
