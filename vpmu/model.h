/* SPDX-License-Identifier: MIT */
/*
 * Guest CPU models are data: one row per model in models.c, narrowed by the
 * embedder's struct vpmu_config, and turned once into the masks the MSR
 * and CPUID code apply. No model logic lives anywhere else.
 */
#ifndef VPMU_MODEL_H
#define VPMU_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "vpmu/vpmu.h"

struct vpmu_event_table;

#define VPMU_MAX_GP    8 /* IA32_PMC0..7 at 0xc1..0xc8 */
#define VPMU_MAX_FIXED 4 /* IA32_FIXED_CTR0..3 */
#define VPMU_MAX_LBR   32

/* struct vpmu_model.features */
#define MODEL_F_DS		     (1u << 0) /* CPUID.01H:EDX[21]: DS save area */
#define MODEL_F_EPT_PEBS	     (1u << 1) /* EPT-friendly PEBS, §22.9.5 */
#define MODEL_F_ANYTHREAD_DEPRECATED (1u << 2) /* CPUID.0AH:EDX[15] */
#define MODEL_F_OFFCORE		     (1u << 3) /* MSR_OFFCORE_RSP_0/1 */
#define MODEL_F_FRONTEND	     (1u << 4) /* MSR_PEBS_FRONTEND */
#define MODEL_F_UMASK2		     (1u << 5) /* CPUID.23H.0:EBX[0] */
#define MODEL_F_EQ		     (1u << 6) /* CPUID.23H.0:EBX[1] */
#define MODEL_F_PEBS		     (1u << 7) /* PEBS of the format in PERF_CAPABILITIES */
#define MODEL_F_TSX		     (1u << 8) /* IN_TX / IN_TXCP: vpmu_config.tsx and a TSX host */

struct vpmu_model {
	const char *name;
	const char *description;
	uint8_t version; /* CPUID.0AH:EAX[7:0] */
	uint8_t nr_gp;
	uint8_t gp_width;
	uint8_t nr_fixed;
	uint8_t fixed_width;
	uint8_t arch_events_len; /* CPUID.0AH:EAX[31:24] */
	uint8_t lbr_depth;
	uint8_t linear_bits;	    /* canonical checks: 48, or 57 with LA57 */
	uint8_t phys_bits;	    /* MAXPHYADDR */
	uint32_t features;	    /* MODEL_F_* */
	uint64_t perf_capabilities; /* IA32_PERF_CAPABILITIES */
	uint64_t pdist_counters;    /* PEBS_ENABLE bit format */
	uint64_t offcore_rsp_valid; /* writable bits of MSR_OFFCORE_RSP_0 */
	uint64_t frontend_valid;    /* writable bits of MSR_PEBS_FRONTEND */
	uint32_t tsc_crystal_hz;    /* CPUID.15H:ECX */
	uint32_t tsc_ratio_num;	    /* CPUID.15H:EBX */
	uint32_t tsc_ratio_den;	    /* CPUID.15H:EAX */
	const struct vpmu_event_table *events;
};

/* What a vCPU's narrowed model allows, derived once by model_derive(). */
struct vpmu_masks {
	uint64_t gp;	   /* bit i per GP counter */
	uint64_t fixed;	   /* bit i per fixed counter */
	uint64_t gp_width; /* value bits of a GP counter */
	uint64_t fixed_width;
	uint64_t evtsel;	/* writable IA32_PERFEVTSELx bits */
	uint64_t evtsel2_extra; /* ... and those only IA32_PERFEVTSEL2 has (IN_TXCP) */
	uint64_t fixed_ctrl;
	uint64_t global_ctrl;
	uint64_t global_status; /* bits GLOBAL_STATUS can hold */
	uint64_t status_reset;	/* writable GLOBAL_OVF_CTRL bits */
	uint64_t status_set;	/* writable GLOBAL_STATUS_SET bits */
	uint64_t debugctl;
	uint64_t pebs_enable;
	uint64_t data_cfg;
	uint64_t ld_lat;
	uint64_t offcore_rsp[2];
	uint64_t frontend;
	uint64_t lbr_select;
	uint64_t lbr_tos;
	uint64_t lbr_info;
	uint64_t pebs_cfg_c; /* arch PEBS IA32_PMC_*_CFG_C */
	uint64_t pebs_base;
	uint64_t pebs_index;
};

const struct vpmu_model *model_lookup(const char *name);

/*
 * Narrow `base` per `cfg` into `out` and derive `masks`. -EINVAL with a
 * message in `why` (a static string) when the request is inconsistent.
 */
int model_narrow(const struct vpmu_model *base, const struct vpmu_config *cfg,
		 struct vpmu_model *out, const char **why);
void model_derive(const struct vpmu_model *m, struct vpmu_masks *masks);

static inline unsigned int model_pebs_fmt(const struct vpmu_model *m)
{
	return (unsigned int) ((m->perf_capabilities >> 8) & 0xf);
}
static inline bool model_legacy_pebs(const struct vpmu_model *m)
{
	unsigned int fmt = model_pebs_fmt(m);

	return (m->features & MODEL_F_PEBS) && (m->features & MODEL_F_DS) && fmt != 0xf;
}
static inline bool model_adaptive_pebs(const struct vpmu_model *m)
{
	return model_legacy_pebs(m) && model_pebs_fmt(m) >= 4 &&
	       (m->perf_capabilities & (1ULL << 14));
}
static inline bool model_arch_pebs(const struct vpmu_model *m)
{
	return (m->features & MODEL_F_PEBS) && model_pebs_fmt(m) == 0xf;
}
static inline bool model_has_metrics(const struct vpmu_model *m)
{
	return m->perf_capabilities & (1ULL << 15);
}
static inline bool model_full_width(const struct vpmu_model *m)
{
	return m->perf_capabilities & (1ULL << 13);
}
static inline unsigned int model_lbr_fmt(const struct vpmu_model *m)
{
	return (unsigned int) (m->perf_capabilities & 0x3f);
}

#endif
