/* SPDX-License-Identifier: MIT */
/*
 * Lookups over the generated event catalogues (events-*.c).
 */
#include <strings.h>

#include "bits.h"
#include "events.h"
#include "vpmu/msr.h"

/*
 * The fields that select what is counted. USR, OS, PC, INT and EN only say
 * when and how, and bits 63:32 (IN_TX/IN_TXCP on TSX parts) are not part of
 * a catalogue encoding.
 */
#define EVTSEL_MATCH_MASK                                                                          \
	(ARCH_PERFMON_EVENTSEL_EVENT | ARCH_PERFMON_EVENTSEL_UMASK | ARCH_PERFMON_EVENTSEL_EDGE |  \
	 ARCH_PERFMON_EVENTSEL_ANY | ARCH_PERFMON_EVENTSEL_INV | ARCH_PERFMON_EVENTSEL_CMASK)

uint64_t vpmu_event_encode(const struct vpmu_event_desc *ev)
{
	uint64_t v;

	/*
	 * Fixed-counter-only rows carry no EventSel in the list. Use the
	 * pseudo-encoding Linux and the upstream JSON give them: event 0x00,
	 * umask n + 1 for IA32_FIXED_CTRn. No GP event uses event 0x00.
	 */
	if (ev->fixed_idx >= 0 && ev->event == 0)
		return FIELD_PREP(ARCH_PERFMON_EVENTSEL_UMASK, ev->fixed_idx + 1);

	v = FIELD_PREP(ARCH_PERFMON_EVENTSEL_EVENT, ev->event);
	v |= FIELD_PREP(ARCH_PERFMON_EVENTSEL_UMASK, ev->umask);
	v |= FIELD_PREP(ARCH_PERFMON_EVENTSEL_CMASK, ev->cmask);
	if (ev->flags & VPMU_EV_EDGE)
		v |= ARCH_PERFMON_EVENTSEL_EDGE;
	if (ev->flags & VPMU_EV_ANY)
		v |= ARCH_PERFMON_EVENTSEL_ANY;
	if (ev->flags & VPMU_EV_INV)
		v |= ARCH_PERFMON_EVENTSEL_INV;
	return v;
}

const struct vpmu_event_desc *vpmu_event_find(const struct vpmu_event_table *t, const char *name)
{
	size_t i;

	if (!t || !name)
		return NULL;
	for (i = 0; i < t->nr; i++) {
		if (!strcasecmp(t->events[i].name, name))
			return &t->events[i];
	}
	return NULL;
}

const struct vpmu_event_desc *vpmu_event_decode(const struct vpmu_event_table *t, uint64_t evtsel)
{
	uint64_t want = evtsel & EVTSEL_MATCH_MASK;
	size_t i;

	if (!t)
		return NULL;
	/* Catalogue order, so an alias resolves to the name listed first. */
	for (i = 0; i < t->nr; i++) {
		if (vpmu_event_encode(&t->events[i]) == want)
			return &t->events[i];
	}
	return NULL;
}
