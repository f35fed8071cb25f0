/* SPDX-License-Identifier: MIT */
/*
 * Guest event catalogues: data generated at build time from the perfmon
 * event lists shipped in this folder (see gen-events.py). Private.
 */
#ifndef VPMU_EVENTS_H
#define VPMU_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "vpmu/vpmu.h" /* VPMU_EV_*: the flags are public */

struct vpmu_event_desc {
	const char *name;	  /* e.g. "BR_INST_RETIRED.NEAR_CALL" */
	const char *desc;	  /* UTF-8 prose */
	const char *errata;	  /* "SKL091, SKL044" or NULL */
	int8_t fixed_idx;	  /* -1, or n for IA32_FIXED_CTRn events */
	int8_t pdist_counter;	  /* -1, or the PDISTCounter value */
	uint8_t event;		  /* EventSel (0 for fixed-only events) */
	uint8_t umask;		  /* UMask */
	uint8_t cmask;		  /* CMask */
	uint16_t flags;		  /* VPMU_EV_* */
	uint16_t aux_msr;	  /* 0, 0x3f6 or 0x3f7 */
	uint32_t aux_value;	  /* value for aux_msr */
	uint32_t counters;	  /* Counter= as a bitmask (bit i = GP i) */
	uint32_t counters_ht_off; /* CounterHTOff= as a bitmask */
};

struct vpmu_event_table {
	const char *model; /* guest model name */
	size_t nr;
	const struct vpmu_event_desc *events;
};

/* Generated: the Skylake-server (06_55H) core event list. */
extern const struct vpmu_event_table vpmu_events_skylake_server;

/* IA32_PERFEVTSELx bits 31:0 of an event, without USR/OS/INT/EN. */
uint64_t vpmu_event_encode(const struct vpmu_event_desc *ev);
/* Case-insensitive name lookup; NULL if absent. */
const struct vpmu_event_desc *vpmu_event_find(const struct vpmu_event_table *t, const char *name);
/*
 * The first event whose event/umask/cmask/inv/edge/any match the low 32
 * bits of an IA32_PERFEVTSELx value (USR/OS/INT/EN/PC ignored); NULL if
 * none. Aliases resolve to the first name in catalogue order.
 */
const struct vpmu_event_desc *vpmu_event_decode(const struct vpmu_event_table *t, uint64_t evtsel);

#endif
