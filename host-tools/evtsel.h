/* SPDX-License-Identifier: MIT */
/*
 * IA32_PERFEVTSELx for the host tools: a model's catalogue, encoding a
 * catalogue event with modifiers, and which bits of a value a guest
 * WRMSR would be refused for, asked of the library itself through its
 * public API. Never prints.
 */
#ifndef VPMU_EVTSEL_H
#define VPMU_EVTSEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vpmu/vpmu.h"

/* A model and what its event selects have, asked of the library. */
struct evtsel_model {
	size_t index;		   /* the library's model index */
	const char *name;	   /* canonical spelling */
	size_t nr_events;	   /* catalogue events; 0: no catalogue */
	bool adaptive, eq, umask2; /* bit 34, bit 36, bits 47:40 writable */
	struct vpmu_vcpu *vcpu;	   /* for the WRMSR probe */
};

/* -ENOENT: no such model; -ENOMEM or another vpmu_vcpu_new error. */
int evtsel_model_open(const char *name, struct evtsel_model *ret);
void evtsel_model_close(struct evtsel_model *m);

/* Catalogue event `i` into *ret; -ENOENT past the end. */
int evtsel_event(const struct evtsel_model *m, size_t i, struct vpmu_catalog_event *ret);
/* The event called `name` (case-insensitive) and its index; -ENOENT. */
int evtsel_find(const struct evtsel_model *m, const char *name, struct vpmu_catalog_event *ret,
		size_t *ret_index);
/* The first catalogue event `value` selects, and its index; -ENOENT. */
int evtsel_decode(const struct evtsel_model *m, uint64_t value, struct vpmu_catalog_event *ret,
		  size_t *ret_index);

/*
 * The bits of `value` the model refuses in IA32_PERFEVTSEL0: each set bit
 * is written alone through vpmu_msr_write(), -EINVAL marks it reserved;
 * *ret_gp is whether a guest WRMSR of the whole value gets #GP. 0, or a
 * negative errno if the library answered something else.
 */
int evtsel_reserved(struct evtsel_model *m, uint64_t value, uint64_t *ret_mask, bool *ret_gp);

/* struct evtsel_mods.flags */
#define EVTSEL_MOD_USR	(1u << 0)
#define EVTSEL_MOD_OS	(1u << 1)
#define EVTSEL_MOD_INT	(1u << 2)
#define EVTSEL_MOD_EDGE (1u << 3)
#define EVTSEL_MOD_INV	(1u << 4)

struct evtsel_mods {
	unsigned int flags; /* EVTSEL_MOD_*; neither USR nor OS means both */
	int cmask;	    /* -1: the event's own */
};

/* The full IA32_PERFEVTSELx value: the event's encoding, the modifiers, EN. */
uint64_t evtsel_encode(const struct vpmu_catalog_event *ev, const struct evtsel_mods *mods);

/* "AnyThread", "IN_TX", ... for a bit of IA32_PERFEVTSELx, or NULL. */
const char *evtsel_bit_name(unsigned int bit);

#endif
