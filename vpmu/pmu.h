/* SPDX-License-Identifier: MIT */
/* The per-vCPU PMU state. Private to libvpmu. */
#ifndef VPMU_PMU_H
#define VPMU_PMU_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "vpmu/vpmu.h"
#include "model.h"

struct vpmu_gp {
	uint64_t evtsel;
	uint64_t value;		/* counter value, masked to the GP width */
	uint64_t cfg_c;		/* arch PEBS IA32_PMC_GPn_CFG_C */
};

struct vpmu_fixed {
	uint64_t value;
	uint64_t cfg_c;		/* arch PEBS IA32_PMC_FXn_CFG_C */
};

#define VPMU_MSR_KINDS 32

struct vpmu_vcpu {
	struct vpmu_model model;	/* narrowed copy */
	struct vpmu_masks mask;
	uint8_t msr_count[VPMU_MSR_KINDS]; /* registers of each MSR kind */

	vpmu_log_fn log;
	void *log_data;
	enum vpmu_log_level log_level;

	struct vpmu_gp gp[VPMU_MAX_GP];
	struct vpmu_fixed fixed[VPMU_MAX_FIXED];
	uint64_t fixed_ctrl;
	uint64_t global_ctrl;
	uint64_t global_status;
	uint64_t perf_metrics;
	uint64_t debugctl;
	uint64_t pebs_enable;
	uint64_t data_cfg;
	uint64_t ld_lat;
	uint64_t frontend;
	uint64_t offcore_rsp[2];
	uint64_t ds_area;
	uint64_t pebs_base;
	uint64_t pebs_index;
	uint64_t lbr_select;
	uint64_t lbr_tos;
	uint64_t lbr_from[VPMU_MAX_LBR];
	uint64_t lbr_to[VPMU_MAX_LBR];
	uint64_t lbr_info[VPMU_MAX_LBR];
};

/* Fill vcpu->msr_count from the narrowed model (msr.c). */
void msr_counts_init(struct vpmu_vcpu *vcpu);

void vpmu_logf(const struct vpmu_vcpu *vcpu, enum vpmu_log_level level, const char *fmt, ...)
	VPMU_PRINTF(3, 4);

#endif
