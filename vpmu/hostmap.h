/* SPDX-License-Identifier: MIT */
/*
 * The host side of real counters: what PMU this host has (host-pmu.c) and
 * which perf_event_attr counts a guest event on it (hostmap.c). Private;
 * the perf and time backends use it.
 *
 * libpfm4 encodes an event only for a PMU it detected on this machine,
 * even with an explicit "pmu::" prefix. A program (a test) that builds a
 * struct host_pmu for another CPU by hand sets LIBPFM_ENCODE_INACTIVE=1
 * in its environment before the first call here: then libpfm4 encodes
 * "pmu::EVENT" for every PMU it knows. (LIBPFM_FORCE_PMU also works, but
 * for one PMU per pfm_initialize() only.)
 */
#ifndef VPMU_HOSTMAP_H
#define VPMU_HOSTMAP_H

#include <linux/perf_event.h>
#include <stdbool.h>

#include "backend.h"
#include "model.h"

enum host_pmu_kind {
	HOST_PMU_NONE,	   /* perf_event_open unusable */
	HOST_PMU_SOFTWARE, /* only software events: no hardware PMU */
	HOST_PMU_HW,	   /* hardware events open */
};

struct host_pmu {
	enum host_pmu_kind kind;
	bool raw_ok;	  /* PERF_TYPE_RAW: the core PMU takes raw encodings */
	bool intel;	  /* GenuineIntel core PMU */
	char pfm_pmu[32]; /* libpfm4 name of the core PMU ("skx", "icx"), "" if unknown */
	const struct vpmu_model *model; /* the vpmu model equal to the host core, or NULL */
	char why[160];			/* one line: what was found and why */
};

/*
 * Probe perf_event_open (hardware instructions, raw 0xc0, then
 * task-clock), CPUID vendor/family/model, and libpfm4's core PMU. Fills
 * *ret; returns 0 (what was found is in ret->kind and ret->why).
 * host_pmu_probe() then host_pmu_decide().
 */
int host_pmu_detect(struct host_pmu *ret);

/*
 * What the detection reads from the machine, so that it can be recorded
 * on one host and replayed on another (the tests hold recorded hosts).
 */
struct host_probe {
	/* CPUID leaves 0 and 1 (SDM Vol. 2A), EAX EBX ECX EDX; cpuid_ok false: no CPUID */
	bool cpuid_ok;
	uint32_t leaf0[4], leaf1[4];
	/* perf_event_open on this thread: 0 or -errno */
	int hw;	 /* PERF_TYPE_HARDWARE, instructions */
	int raw; /* PERF_TYPE_RAW 0xc0 */
	int sw;	 /* PERF_TYPE_SOFTWARE, task-clock */
	/* libpfm4: 0 and its first present core PMU's name, or -errno; how many more */
	int pfm;
	char pfm_pmu[32];
	unsigned int pfm_more;
};

/* Read the machine: every probe above, each once. */
void host_pmu_probe(struct host_probe *ret);

/* What those inputs say the host has (no system call). */
void host_pmu_decide(const struct host_probe *in, struct host_pmu *ret);

/*
 * Fill *ret_attr for guest event `ev` of guest model `guest` on `host`:
 * type and config/config1/config2, exclude_user/exclude_kernel from
 * usr/os, exclude_host = exclude_hv = 1, exclude_guest = 0, pinned = 1,
 * precise_ip = 0 always (host PEBS with exclude_host would have the CPU
 * write PEBS records through the guest's DS area), size. The sample and
 * enable fields stay 0 for the backend. Returns 0, or -ENOENT when the
 * host cannot count it (-EINVAL for a malformed request); *ret_why
 * (if not NULL) gets a static string saying which rule applied or why
 * not. *ret_attr is untouched on failure.
 *
 * The same model is recognised by name, so a narrowed copy of a model
 * maps like the model itself.
 */
int hostmap_attr(const struct vpmu_model *guest, const struct host_pmu *host,
		 const struct vpmu_host_event *ev, struct perf_event_attr *ret_attr,
		 const char **ret_why);

/* pfm_initialize() once per process (host-pmu.c); its libpfm4 result. */
int host_pfm_init(void);

#endif
