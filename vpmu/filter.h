/* SPDX-License-Identifier: MIT */
/* The PMU event filter, as the counting code applies it. Private to libvpmu. */
#ifndef VPMU_FILTER_H
#define VPMU_FILTER_H

#include <stdbool.h>
#include <stdint.h>

#include "vpmu/vpmu.h"

/* KVM_PMU_EVENT_FILTER_MAX_EVENTS: a filter file stays loadable into KVM. */
#define FILTER_MAX_EVENTS 300

/*
 * Whether counter `ctr` (GP i = i, fixed i = 32 + i) may count what the
 * guest programmed: `evtsel` is IA32_PERFEVTSELx for a GP counter,
 * `fixed_ctrl` the whole IA32_FIXED_CTR_CTRL for a fixed one. NULL
 * filter: the default policy (docs/pmu-filter.md).
 */
bool filter_allows_counter(const struct vpmu_filter *filter, unsigned int ctr, uint64_t evtsel,
			   uint64_t fixed_ctrl);

/*
 * What a snapshot records of the filter its vCPU counts under: 0 for the
 * default policy, else a digest of its rules (the same rules, in any
 * order in the file, give the same digest).
 */
uint64_t filter_digest(const struct vpmu_filter *filter);

#endif
