/* SPDX-License-Identifier: MIT */
/*
 * The built-in guest CPU models, named like QEMU's -cpu models.
 *
 * Sources: the SDM Vol. 3B sections cited at each value, Intel's
 * Skylake-server (06_55H) core event list (vpmu/events/skylake-server.txt),
 * or Linux where noted.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "bits.h"
#include "model.h"
#include "vpmu/msr.h"
#include "events.h"

#define CAP_LBR_FMT(n)	FIELD_PREP(PERF_CAP_LBR_FMT, n)
#define CAP_PEBS_FMT(n) FIELD_PREP(PERF_CAP_PEBS_FORMAT, n)

static const struct vpmu_model models[] = {
	{
		/*
		 * Skylake server, 06_55H, as its event list describes it:
		 * perfmon v4, 4 GP counters per thread with HT on, 3 fixed,
		 * PEBS format 3; LBR format 5 with 32 entries + LBR_INFO (SDM
		 * Vol. 3B 20.4.8, Table 20-4), 25 MHz crystal (Vol. 3B 22.7.3,
		 * Table 22-95). No adaptive, no EPT-friendly PEBS.
		 * PERF_CAPABILITIES = 0x33c5: LBR_FMT 5, PEBS_TRAP, ARCH_REG,
		 * PEBS_FMT 3, FREEZE_WHILE_SMM, FW_WRITE (what SKX reports).
		 */
		.name = "Skylake-Server",
		.description = "Xeon Scalable (06_55H): perfmon v4, 4 GP + 3 fixed, PEBS format 3, "
			       "32 LBRs",
		.version = 4,
		.nr_gp = 4,
		.gp_width = 48,
		.nr_fixed = 3,
		.fixed_width = 48,
		.arch_events_len = 7,
		.lbr_depth = 32,
		.linear_bits = 48,
		.phys_bits = 46,
		.features = MODEL_F_DS | MODEL_F_PEBS | MODEL_F_OFFCORE | MODEL_F_FRONTEND,
		.perf_capabilities = CAP_LBR_FMT(5) | PERF_CAP_PEBS_TRAP | PERF_CAP_ARCH_REG |
				     CAP_PEBS_FMT(3) | PERF_CAP_FREEZE_WHILE_SMM |
				     PERF_CAP_FW_WRITES,
		/* INST_RETIRED.PREC_DIST: GP counter 1 (the event list's Counter=1, PDISTCounter)
		 */
		.pdist_counters = BIT_ULL(1),
		/* Linux's SKL extra_regs valid masks */
		.offcore_rsp_valid = 0x3fffff8fffULL,
		.frontend_valid = 0x7fbfffULL,
		/* 25 MHz × 168/2 = 2.1 GHz TSC */
		.tsc_crystal_hz = 25000000,
		.tsc_ratio_num = 168,
		.tsc_ratio_den = 2,
		.events = &vpmu_events_skylake_server,
	},
	{
		/*
		 * Ice Lake server, 06_6AH: perfmon v5, 8 GP, 4 fixed (3 =
		 * TOPDOWN.SLOTS), PEBS format 4 with PEBS_BASELINE (extended +
		 * adaptive PEBS on every counter), EPT-friendly PEBS (§22.9.5),
		 * PERF_METRICS, 32 LBRs + LBR_INFO, LA57.
		 */
		.name = "Icelake-Server",
		.description = "Xeon 3rd gen (06_6AH): perfmon v5, 8 GP + 4 fixed, adaptive PEBS "
			       "format 4, EPT-friendly PEBS",
		.version = 5,
		.nr_gp = 8,
		.gp_width = 48,
		.nr_fixed = 4,
		.fixed_width = 48,
		.arch_events_len = 8,
		.lbr_depth = 32,
		.linear_bits = 57,
		.phys_bits = 52,
		.features = MODEL_F_DS | MODEL_F_PEBS | MODEL_F_EPT_PEBS |
			    MODEL_F_ANYTHREAD_DEPRECATED | MODEL_F_OFFCORE | MODEL_F_FRONTEND,
		.perf_capabilities = CAP_LBR_FMT(5) | PERF_CAP_PEBS_TRAP | PERF_CAP_ARCH_REG |
				     CAP_PEBS_FMT(4) | PERF_CAP_FREEZE_WHILE_SMM |
				     PERF_CAP_FW_WRITES | PERF_CAP_PEBS_BASELINE |
				     PERF_CAP_PERF_METRICS,
		/* PDIST on GP counter 0 and fixed counter 0 */
		.pdist_counters = BIT_ULL(0) | BIT_ULL(32),
		.offcore_rsp_valid = 0x3fffffbfffULL,
		.frontend_valid = 0x7fff17ULL,
		/* 25 MHz × 92 = 2.3 GHz */
		.tsc_crystal_hz = 25000000,
		.tsc_ratio_num = 92,
		.tsc_ratio_den = 1,
		.events = NULL,
	},
	{
		/*
		 * Lunar Lake P-core (Lion Cove, 06_BDH): perfmon v6 (CPUID
		 * 23H counter bitmaps, UMASK2, EQ), PEBS format 6 with the
		 * counters & metrics group (DATA_CFG bits 4/5/47:32/55:48)
		 * and timed PEBS (PERF_CAPABILITIES[17]) (SDM Vol. 3B
		 * 22.9.2.3, Table 22-102; 22.9.9). Its LBRs are architectural LBRs (CPUID 1CH),
		 * which vpmu does not model: LBR_FMT 0, no LBR group.
		 */
		.name = "LunarLake",
		.description = "Core Ultra 200V P-core (06_BDH): perfmon v6, 8 GP + 4 fixed, PEBS "
			       "format 6, counters group, timed PEBS",
		.version = 6,
		.nr_gp = 8,
		.gp_width = 48,
		.nr_fixed = 4,
		.fixed_width = 48,
		.arch_events_len = 8,
		.lbr_depth = 0,
		.linear_bits = 48,
		.phys_bits = 46,
		.features = MODEL_F_DS | MODEL_F_PEBS | MODEL_F_EPT_PEBS |
			    MODEL_F_ANYTHREAD_DEPRECATED | MODEL_F_OFFCORE | MODEL_F_FRONTEND |
			    MODEL_F_UMASK2 | MODEL_F_EQ,
		.perf_capabilities = PERF_CAP_PEBS_TRAP | PERF_CAP_ARCH_REG | CAP_PEBS_FMT(6) |
				     PERF_CAP_FREEZE_WHILE_SMM | PERF_CAP_FW_WRITES |
				     PERF_CAP_PEBS_BASELINE | PERF_CAP_PERF_METRICS |
				     PERF_CAP_PEBS_TIMING_INFO,
		.pdist_counters = BIT_ULL(0) | BIT_ULL(32),
		.offcore_rsp_valid = 0x3fffffffffULL,
		.frontend_valid = 0x7fff1fULL,
		/* 38.4 MHz × 120/2 = 2.304 GHz */
		.tsc_crystal_hz = 38400000,
		.tsc_ratio_num = 120,
		.tsc_ratio_den = 2,
		.events = NULL,
	},
	{
		/*
		 * Architectural PEBS (§22.10): CPUID.23H advertises it
		 * (sub-leaves 4 and 5), PERF_CAPABILITIES reports PEBS_FMT =
		 * 0xF, BASELINE = 0, PEBS_TRAP = ARCH_REG = TIMING_INFO = 1,
		 * no PT output (SDM Vol. 3B 22.10.1.1); IA32_MISC_ENABLE.PEBS_
		 * UNAVAILABLE stays 1 (Vol. 3B 22.10.1.2). No DS area (its
		 * output buffer is physically addressed), no legacy PEBS.
		 */
		.name = "arch-pebs",
		.description = "Architectural PEBS core (CPUID 23H): perfmon v6, 8 GP + 4 fixed, "
			       "PEBS_FMT 0xF",
		.version = 6,
		.nr_gp = 8,
		.gp_width = 48,
		.nr_fixed = 4,
		.fixed_width = 48,
		.arch_events_len = 8,
		.lbr_depth = 0,
		.linear_bits = 57,
		.phys_bits = 52,
		.features = MODEL_F_PEBS | MODEL_F_ANYTHREAD_DEPRECATED | MODEL_F_OFFCORE |
			    MODEL_F_FRONTEND | MODEL_F_UMASK2 | MODEL_F_EQ,
		.perf_capabilities = PERF_CAP_PEBS_TRAP | PERF_CAP_ARCH_REG |
				     CAP_PEBS_FMT(PEBS_FMT_ARCH) | PERF_CAP_FREEZE_WHILE_SMM |
				     PERF_CAP_FW_WRITES | PERF_CAP_PERF_METRICS |
				     PERF_CAP_PEBS_TIMING_INFO,
		.pdist_counters = BIT_ULL(0) | BIT_ULL(32),
		.offcore_rsp_valid = 0x3fffffffffULL,
		.frontend_valid = 0x7fff1fULL,
		.tsc_crystal_hz = 38400000,
		.tsc_ratio_num = 120,
		.tsc_ratio_den = 2,
		.events = NULL,
	},
};

size_t vpmu_model_count(void)
{
	return ARRAY_SIZE(models);
}

const char *vpmu_model_name(size_t index)
{
	return index < ARRAY_SIZE(models) ? models[index].name : NULL;
}

const char *vpmu_model_description(size_t index)
{
	return index < ARRAY_SIZE(models) ? models[index].description : NULL;
}

int vpmu_model_find(const char *name)
{
	if (!name)
		return -ENOENT;
	for (size_t i = 0; i < ARRAY_SIZE(models); i++)
		if (!strcasecmp(models[i].name, name))
			return (int) i;
	return -ENOENT;
}

const struct vpmu_model *model_lookup(const char *name)
{
	int i = vpmu_model_find(name);

	return i < 0 ? NULL : &models[i];
}

int model_narrow(const struct vpmu_model *base, const struct vpmu_config *cfg,
		 struct vpmu_model *out, const char **why)
{
	struct vpmu_model m = *base;

	if (cfg->nr_gp > (int) base->nr_gp || cfg->nr_gp < -1) {
		*why = "nr_gp is larger than the model's GP counter count (or below -1)";
		return -EINVAL;
	}
	if (cfg->nr_fixed > (int) base->nr_fixed || cfg->nr_fixed < -1) {
		*why = "nr_fixed is larger than the model's fixed counter count (or below -1)";
		return -EINVAL;
	}
	if (cfg->flags &
	    ~(unsigned int) (VPMU_CONFIG_NO_PEBS | VPMU_CONFIG_NO_LBR | VPMU_CONFIG_NO_METRICS)) {
		*why = "unknown VPMU_CONFIG_* flag";
		return -EINVAL;
	}
	if (cfg->version != -1 && (cfg->version < 2 || cfg->version > (int) base->version)) {
		*why = "version must be -1 or between 2 and the model's perfmon version";
		return -EINVAL;
	}
	if (cfg->version > 0 && cfg->version < base->version) {
		m.version = (uint8_t) cfg->version;
		/* CPUID 23H, UMASK2 and EQ are perfmon v6 */
		if (m.version < 6)
			m.features &= ~(MODEL_F_UMASK2 | MODEL_F_EQ);
		/* AnyThread deprecation is enumerated from v5 on */
		if (m.version < 5)
			m.features &= ~MODEL_F_ANYTHREAD_DEPRECATED;
	}
	if (cfg->nr_gp >= 0)
		m.nr_gp = (uint8_t) cfg->nr_gp;
	if (cfg->nr_fixed >= 0)
		m.nr_fixed = (uint8_t) cfg->nr_fixed;

	if (cfg->flags & VPMU_CONFIG_NO_PEBS) {
		/* Keep PEBS_FMT 0xF: it says "no legacy PEBS", still true. */
		if (model_pebs_fmt(&m) != PEBS_FMT_ARCH)
			m.perf_capabilities &= ~PERF_CAP_PEBS_FORMAT;
		m.perf_capabilities &=
			~(PERF_CAP_PEBS_TRAP | PERF_CAP_ARCH_REG | PERF_CAP_PEBS_BASELINE |
			  PERF_CAP_PEBS_OUTPUT_PT | PERF_CAP_PEBS_TIMING_INFO);
		m.features &= ~(MODEL_F_PEBS | MODEL_F_DS | MODEL_F_EPT_PEBS | MODEL_F_FRONTEND);
		m.pdist_counters = 0;
	}
	if (cfg->flags & VPMU_CONFIG_NO_LBR) {
		m.perf_capabilities &= ~PERF_CAP_LBR_FMT;
		m.lbr_depth = 0;
	}
	if (cfg->flags & VPMU_CONFIG_NO_METRICS)
		m.perf_capabilities &= ~(PERF_CAP_PERF_METRICS | PERF_CAP_RDPMC_METRICS_CLEAR);

	/*
	 * The counters group (format 6) and architectural PEBS select
	 * counters through the CPUID 23H bitmaps, which need perfmon v6.
	 */
	if ((model_arch_pebs(&m) || (model_legacy_pebs(&m) && model_pebs_fmt(&m) >= 6)) &&
	    m.version < 6) {
		*why = "this PEBS format needs perfmon v6 (CPUID 23H): keep the version or add "
		       "VPMU_CONFIG_NO_PEBS";
		return -EINVAL;
	}
	/* PERF_METRICS is defined against fixed counter 3, TOPDOWN.SLOTS. */
	if (model_has_metrics(&m) && m.nr_fixed < 4) {
		*why = "PERF_METRICS needs fixed counter 3: set nr_fixed to 4 or add "
		       "VPMU_CONFIG_NO_METRICS";
		return -EINVAL;
	}
	/* Extended PEBS covers every counter; PDist counters must exist. */
	m.pdist_counters &= lowmask_ull(m.nr_gp) | (lowmask_ull(m.nr_fixed) << 32);
	*out = m;
	return 0;
}

/* Counters, event selects and the fixed counters' control. */
static void derive_counters(const struct vpmu_model *m, struct vpmu_masks *k)
{
	k->gp = lowmask_ull(m->nr_gp);
	k->fixed = lowmask_ull(m->nr_fixed);
	k->gp_width = lowmask_ull(m->gp_width);
	k->fixed_width = lowmask_ull(m->fixed_width);

	/*
	 * Event select: bits 31:0 except AnyThread (bit 21), refused as KVM
	 * and Xen refuse it: it would count the sibling thread. Bit 19 (PC)
	 * is accepted and ignored, as KVM does.
	 */
	k->evtsel = GENMASK_ULL(31, 0) & ~ARCH_PERFMON_EVENTSEL_ANY;
	if (model_adaptive_pebs(m))
		k->evtsel |= ICL_EVENTSEL_ADAPTIVE;
	if (m->features & MODEL_F_EQ)
		k->evtsel |= ARCH_PERFMON_EVENTSEL_EQ;
	if (m->features & MODEL_F_UMASK2)
		k->evtsel |= ARCH_PERFMON_EVENTSEL_UMASK2;
	/*
	 * Intel TSX: IN_TX (bit 32) on every GP counter, IN_TXCP (bit 33) on
	 * IA32_PERFEVTSEL2 only (SDM Vol. 3B 22.3.6.5), when the guest is told
	 * of HLE or RTM and the host has them, as KVM has it.
	 */
	if (m->features & MODEL_F_TSX) {
		k->evtsel |= HSW_IN_TX;
		if (m->nr_gp > 2)
			k->evtsel2_extra = HSW_IN_TX_CHECKPOINTED;
	}

	for (unsigned int i = 0; i < m->nr_fixed; i++) {
		k->fixed_ctrl |= FIXED_CTRL_OS(i) | FIXED_CTRL_USR(i) | FIXED_CTRL_PMI(i);
		if (model_adaptive_pebs(m))
			k->fixed_ctrl |= FIXED_CTRL_ADAPTIVE(i);
	}
}

/* GLOBAL_CTRL, GLOBAL_STATUS and what resets and sets it; DEBUGCTL's freeze bits. */
static void derive_global(const struct vpmu_model *m, struct vpmu_masks *k)
{
	bool lbr = m->lbr_depth > 0;

	k->global_ctrl = k->gp | (k->fixed << GLOBAL_STATUS_FIXED_SHIFT);
	if (model_has_metrics(m))
		k->global_ctrl |= GLOBAL_CTRL_EN_PERF_METRICS;

	k->global_status = k->gp | (k->fixed << GLOBAL_STATUS_FIXED_SHIFT) | GLOBAL_STATUS_COND_CHG;
	if (model_has_metrics(m))
		k->global_status |= GLOBAL_STATUS_PERF_METRICS_OVF;
	if (model_legacy_pebs(m) || model_arch_pebs(m))
		k->global_status |= GLOBAL_STATUS_BUFFER_OVF;
	if (m->version >= 4) {
		/* Streamlined freeze, SDM Vol. 3B 20.4.7, Table 20-3. */
		k->global_status |= GLOBAL_STATUS_COUNTERS_FROZEN;
		if (lbr)
			k->global_status |= GLOBAL_STATUS_LBRS_FROZEN;
	}
	k->status_reset = k->global_status;
	k->status_set = m->version >= 4 ? k->global_status : 0;

	k->debugctl = DEBUGCTLMSR_BTF;
	if (lbr)
		k->debugctl |= DEBUGCTLMSR_LBR;
	if (m->version >= 2) {
		k->debugctl |= DEBUGCTLMSR_FREEZE_PERFMON_ON_PMI;
		if (lbr)
			k->debugctl |= DEBUGCTLMSR_FREEZE_LBRS_ON_PMI;
	}
	if (m->perf_capabilities & PERF_CAP_FREEZE_WHILE_SMM)
		k->debugctl |= DEBUGCTLMSR_FREEZE_IN_SMM;
}

/* PEBS of either kind, the extra MSRs events read, the LBR stack. */
static void derive_sampling(const struct vpmu_model *m, struct vpmu_masks *k)
{
	bool lbr = m->lbr_depth > 0;

	if (model_adaptive_pebs(m)) {
		/* PEBS_BASELINE: every counter, GP from bit 0, fixed from 32 */
		k->pebs_enable = k->gp | (k->fixed << 32);
		k->data_cfg = PEBS_DATACFG_MEMINFO | PEBS_DATACFG_GP | PEBS_DATACFG_XMMS;
		if (lbr)
			k->data_cfg |= PEBS_DATACFG_LBRS | PEBS_DATACFG_LBR_ENTRIES;
		if (model_pebs_fmt(m) >= 6) {
			k->data_cfg |= PEBS_DATACFG_CNTR | (k->gp << 32) | (k->fixed << 48);
			if (model_has_metrics(m))
				k->data_cfg |= PEBS_DATACFG_METRICS;
		}
	} else if (model_legacy_pebs(m)) {
		/* Formats 1-3: GP counters, plus load-latency enables at 32+i */
		k->pebs_enable = k->gp | (k->gp << 32);
	}
	if (model_legacy_pebs(m) || model_arch_pebs(m))
		k->ld_lat = GENMASK_ULL(15, 0);
	if (m->features & MODEL_F_OFFCORE) {
		k->offcore_rsp[0] = m->offcore_rsp_valid;
		/* OUTSTANDING (bit 63) exists on RSP_0 only, §22.5.5.4 */
		k->offcore_rsp[1] = m->offcore_rsp_valid & ~BIT_ULL(63);
	}
	if (m->features & MODEL_F_FRONTEND)
		k->frontend = m->frontend_valid;
	if (lbr) {
		/* LBR_SELECT bits 9:0 (EN_CALLSTACK = 9), Tables 20-11..13 */
		k->lbr_select = GENMASK_ULL(9, 0);
		k->lbr_tos = (uint64_t) m->lbr_depth - 1;
		/* Table 20-16: 15:0 cycles, 60:16 reserved, 61..63 flags */
		k->lbr_info = LBR_INFO_CYCLES | LBR_INFO_ABORT | LBR_INFO_IN_TX | LBR_INFO_MISPRED;
	}
	if (model_arch_pebs(m)) {
		k->pebs_cfg_c = ARCH_PEBS_RELOAD | ARCH_PEBS_CNTR_ALLOW | ARCH_PEBS_CNTR_GP |
				ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_VECR_XMM | ARCH_PEBS_GPR |
				ARCH_PEBS_AUX | ARCH_PEBS_EN;
		if (model_has_metrics(m))
			k->pebs_cfg_c |= ARCH_PEBS_CNTR_METRICS;
		if (lbr)
			k->pebs_cfg_c |= ARCH_PEBS_LBR;
		k->pebs_base = GENMASK_ULL(m->phys_bits - 1, 12) | ARCH_PEBS_BASE_SIZE;
		k->pebs_index = ARCH_PEBS_INDEX_WR | ARCH_PEBS_INDEX_FULL | ARCH_PEBS_INDEX_EN |
				ARCH_PEBS_INDEX_THRESH;
	}
}

void model_derive(const struct vpmu_model *m, struct vpmu_masks *k)
{
	memset(k, 0, sizeof(*k));
	derive_counters(m, k);
	derive_global(m, k);
	derive_sampling(m, k);
}
