/* SPDX-License-Identifier: MIT */
/*
 * Guest RDMSR/WRMSR of every PMU MSR. An MSR address is first classified
 * (which register, which index) through one table; whether this vCPU has
 * it and which bits it may write come from the masks model_derive() made.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "pmu.h"

enum msr_kind {
	K_PMC,
	K_EVTSEL,
	K_A_PMC,
	K_FIXED_CTR,
	K_FIXED_CTRL,
	K_GLOBAL_STATUS,
	K_GLOBAL_CTRL,
	K_GLOBAL_OVF_CTRL,
	K_GLOBAL_STATUS_SET,
	K_GLOBAL_INUSE,
	K_PERF_METRICS,
	K_PERF_CAPABILITIES,
	K_OFFCORE_RSP,
	K_LBR_SELECT,
	K_LBR_TOS,
	K_DEBUGCTL,
	K_PEBS_ENABLE,
	K_DATA_CFG,
	K_PEBS_BASE,
	K_PEBS_INDEX,
	K_LD_LAT,
	K_FRONTEND,
	K_DS_AREA,
	K_LBR_FROM,
	K_LBR_TO,
	K_LBR_INFO,
	K_GP_CFG_C,
	K_FX_CFG_C,
	K_NR,
};
_Static_assert(K_NR <= VPMU_MSR_KINDS, "struct vpmu_vcpu.msr_count too small");
/*
 * classify() finds the kind of 38DH..392H by arithmetic, K_FIXED_CTRL +
 * (msr - 38DH): those six kinds must follow each other in address order.
 */
#define KIND_AT(kind, msr) ((kind) -K_FIXED_CTRL == (msr) -MSR_CORE_PERF_FIXED_CTR_CTRL)
_Static_assert(KIND_AT(K_GLOBAL_STATUS, MSR_CORE_PERF_GLOBAL_STATUS), "GLOBAL_STATUS at 38EH");
_Static_assert(KIND_AT(K_GLOBAL_CTRL, MSR_CORE_PERF_GLOBAL_CTRL), "GLOBAL_CTRL at 38FH");
_Static_assert(KIND_AT(K_GLOBAL_OVF_CTRL, MSR_CORE_PERF_GLOBAL_OVF_CTRL),
	       "GLOBAL_OVF_CTRL at 390H");
_Static_assert(KIND_AT(K_GLOBAL_STATUS_SET, MSR_CORE_PERF_GLOBAL_STATUS_SET),
	       "GLOBAL_STATUS_SET at 391H");
_Static_assert(KIND_AT(K_GLOBAL_INUSE, MSR_CORE_PERF_GLOBAL_INUSE), "GLOBAL_INUSE at 392H");
/* a table entry holds the kind in bits 13:8 and the index in bits 7:0 */
_Static_assert(K_NR <= 0x40 && VPMU_MAX_LBR <= 0x100, "kind and index fit a table entry");

/*
 * Architectural address ranges, ascending. `span` is how many registers
 * the address range can hold; the vCPU may have fewer (then -ENXIO).
 */
static const struct msr_range {
	uint32_t base;
	uint16_t span;
	uint8_t stride;
	uint8_t kind;
} ranges[] = {
	{ MSR_IA32_PMC0, VPMU_MAX_GP, 1, K_PMC },
	{ MSR_P6_EVNTSEL0, VPMU_MAX_GP, 1, K_EVTSEL },
	{ MSR_OFFCORE_RSP_0, 2, 1, K_OFFCORE_RSP },
	{ MSR_LBR_SELECT, 1, 1, K_LBR_SELECT },
	{ MSR_LBR_TOS, 1, 1, K_LBR_TOS },
	{ MSR_IA32_DEBUGCTLMSR, 1, 1, K_DEBUGCTL },
	{ MSR_CORE_PERF_FIXED_CTR0, VPMU_MAX_FIXED, 1, K_FIXED_CTR },
	{ MSR_PERF_METRICS, 1, 1, K_PERF_METRICS },
	{ MSR_IA32_PERF_CAPABILITIES, 1, 1, K_PERF_CAPABILITIES },
	{ MSR_CORE_PERF_FIXED_CTR_CTRL, 1, 1, K_FIXED_CTRL },
	{ MSR_CORE_PERF_GLOBAL_STATUS, 1, 1, K_GLOBAL_STATUS },
	{ MSR_CORE_PERF_GLOBAL_CTRL, 1, 1, K_GLOBAL_CTRL },
	{ MSR_CORE_PERF_GLOBAL_OVF_CTRL, 1, 1, K_GLOBAL_OVF_CTRL },
	{ MSR_CORE_PERF_GLOBAL_STATUS_SET, 1, 1, K_GLOBAL_STATUS_SET },
	{ MSR_CORE_PERF_GLOBAL_INUSE, 1, 1, K_GLOBAL_INUSE },
	{ MSR_IA32_PEBS_ENABLE, 1, 1, K_PEBS_ENABLE },
	{ MSR_PEBS_DATA_CFG, 1, 1, K_DATA_CFG },
	{ MSR_IA32_PEBS_BASE, 1, 1, K_PEBS_BASE },
	{ MSR_IA32_PEBS_INDEX, 1, 1, K_PEBS_INDEX },
	{ MSR_PEBS_LD_LAT_THRESHOLD, 1, 1, K_LD_LAT },
	{ MSR_PEBS_FRONTEND, 1, 1, K_FRONTEND },
	{ MSR_IA32_PMC0_FULL, VPMU_MAX_GP, 1, K_A_PMC },
	{ MSR_IA32_DS_AREA, 1, 1, K_DS_AREA },
	{ MSR_LBR_NHM_FROM, VPMU_MAX_LBR, 1, K_LBR_FROM },
	{ MSR_LBR_NHM_TO, VPMU_MAX_LBR, 1, K_LBR_TO },
	{ MSR_LBR_INFO_0, VPMU_MAX_LBR, 1, K_LBR_INFO },
	{ MSR_IA32_PMC_V6_GP0_CFG_C, VPMU_MAX_GP, MSR_IA32_PMC_V6_STEP, K_GP_CFG_C },
	{ MSR_IA32_PMC_V6_FX0_CFG_C, VPMU_MAX_FIXED, MSR_IA32_PMC_V6_STEP, K_FX_CFG_C },
};

/* How many registers of `kind` this vCPU has. */
static unsigned int kind_count(const struct vpmu_vcpu *vcpu, enum msr_kind kind)
{
	const struct vpmu_model *m = &vcpu->model;
	const struct vpmu_masks *k = &vcpu->mask;
	bool v2 = m->version >= 2, v4 = m->version >= 4;

	switch (kind) {
	case K_PMC:
	case K_EVTSEL:
		return m->nr_gp;
	case K_A_PMC:
		return model_full_width(m) ? m->nr_gp : 0;
	case K_FIXED_CTR:
		return v2 ? m->nr_fixed : 0;
	case K_FIXED_CTRL:
	case K_GLOBAL_STATUS:
	case K_GLOBAL_CTRL:
	case K_GLOBAL_OVF_CTRL:
	case K_PERF_CAPABILITIES: /* CPUID.01H:ECX[15] PDCM, v2+ */
		return v2;
	case K_GLOBAL_STATUS_SET:
	case K_GLOBAL_INUSE:
		return v4;
	case K_PERF_METRICS:
		return model_has_metrics(m);
	case K_OFFCORE_RSP:
		return k->offcore_rsp[0] ? 2 : 0;
	case K_LBR_SELECT:
	case K_LBR_TOS:
		return m->lbr_depth > 0;
	case K_LBR_FROM:
	case K_LBR_TO:
		return m->lbr_depth;
	case K_LBR_INFO:
		/* LBR formats 5 and 7 keep flags in LBR_INFO (Table 20-16) */
		return model_lbr_fmt(m) == 5 || model_lbr_fmt(m) == 7 ? m->lbr_depth : 0;
	case K_DEBUGCTL:
		return 1;
	case K_PEBS_ENABLE:
		return model_legacy_pebs(m);
	case K_DATA_CFG:
		return model_adaptive_pebs(m);
	case K_PEBS_BASE:
	case K_PEBS_INDEX:
		return model_arch_pebs(m);
	case K_GP_CFG_C:
		return model_arch_pebs(m) ? m->nr_gp : 0;
	case K_FX_CFG_C:
		return model_arch_pebs(m) ? m->nr_fixed : 0;
	case K_LD_LAT:
		return k->ld_lat != 0;
	case K_FRONTEND:
		return k->frontend != 0;
	case K_DS_AREA:
		return (m->features & MODEL_F_DS) != 0;
	case K_NR:
		break;
	}
	return 0;
}

/*
 * Every PMU MSR lies below VPMU_MSR_LUT_END, and is classified by one load
 * from the vCPU's own table, built once from ranges[]. Entry: 0 = not a
 * PMU MSR, else LUT_PMU | kind << 8 | index, plus LUT_PRESENT if this
 * vCPU has it.
 */
#define LUT_PRESENT 0x8000u
#define LUT_PMU	    0x4000u

/* 0 and the kind/index; -ENOENT (not a PMU MSR) or -ENXIO (not on this vCPU). */
static inline __attribute__((always_inline)) int
classify(const struct vpmu_vcpu *vcpu, uint32_t msr, enum msr_kind *kind, unsigned int *idx)
{
	unsigned int e;

	/*
	 * The PMI handler's registers by arithmetic: no dependent load
	 * before the dispatch (bench/bench-msr.c measures this path).
	 */
	if (msr - MSR_CORE_PERF_FIXED_CTR_CTRL <=
	    MSR_CORE_PERF_GLOBAL_INUSE - MSR_CORE_PERF_FIXED_CTR_CTRL) {
		*kind = (enum msr_kind)(K_FIXED_CTRL + (msr - MSR_CORE_PERF_FIXED_CTR_CTRL));
		*idx = 0;
		return vcpu->msr_count[*kind] ? 0 : -ENXIO;
	}
	if (msr >= VPMU_MSR_LUT_END)
		return -ENOENT;
	e = vcpu->msr_lut[msr];
	*kind = (enum msr_kind)((e >> 8) & 0x3f);
	*idx = e & 0xff;
	if (e & LUT_PRESENT)
		return 0;
	return e ? -ENXIO : -ENOENT;
}

void msr_counts_init(struct vpmu_vcpu *vcpu)
{
	/*
	 * ranges[] in ascending address order, none overlapping the next
	 * (the lookup table would give an address two kinds), all below
	 * the end of the table; vpmu_msr_list() promises ascending order.
	 */
	for (size_t i = 0; i < ARRAY_SIZE(ranges); i++) {
		uint32_t end = ranges[i].base + (ranges[i].span - 1u) * ranges[i].stride;

		assert(end < VPMU_MSR_LUT_END);
		assert(i + 1 == ARRAY_SIZE(ranges) || end < ranges[i + 1].base);
	}
	for (unsigned int k = 0; k < K_NR; k++)
		vcpu->msr_count[k] = (uint8_t) kind_count(vcpu, (enum msr_kind) k);
	memset(vcpu->msr_lut, 0, sizeof(vcpu->msr_lut));
	for (size_t i = 0; i < ARRAY_SIZE(ranges); i++) {
		const struct msr_range *r = &ranges[i];

		for (unsigned int j = 0; j < r->span; j++) {
			unsigned int e = LUT_PMU | (unsigned int) r->kind << 8 | j;

			if (j < vcpu->msr_count[r->kind])
				e |= LUT_PRESENT;
			vcpu->msr_lut[r->base + j * r->stride] = (uint16_t) e;
		}
	}
}

static uint64_t global_inuse(const struct vpmu_vcpu *vcpu)
{
	uint64_t v = 0;
	bool pmi = false;

	/*
	 * SDM Vol. 3B §21.2.4.3 (IA32_PERF_GLOBAL_INUSE): GP i in use when its event
	 * select bits 7:0 are non-zero, fixed i when its ring bits are, bit
	 * 63 when any counter's PMI enable is set.
	 */
	for (unsigned int i = 0; i < vcpu->model.nr_gp; i++) {
		if (vcpu->gp[i].evtsel & ARCH_PERFMON_EVENTSEL_EVENT)
			v |= BIT_ULL(i);
		pmi |= vcpu->gp[i].evtsel & ARCH_PERFMON_EVENTSEL_INT;
	}
	for (unsigned int i = 0; i < vcpu->model.nr_fixed; i++) {
		if (vcpu->fixed_ctrl & (FIXED_CTRL_OS(i) | FIXED_CTRL_USR(i)))
			v |= BIT_ULL(32 + i);
		pmi |= vcpu->fixed_ctrl & FIXED_CTRL_PMI(i);
	}
	return pmi ? v | GLOBAL_INUSE_PMI : v;
}

/* The value of register `i` of `kind`, as RDMSR returns it (counters folded). */
static uint64_t kind_value(struct vpmu_vcpu *vcpu, enum msr_kind kind, unsigned int i)
{
	uint64_t v;

	switch (kind) {
	case K_PMC:
	case K_A_PMC:
		v = counter_read(vcpu, i);
		break;
	case K_EVTSEL:
		v = vcpu->gp[i].evtsel;
		break;
	case K_FIXED_CTR:
		v = counter_read(vcpu, 32 + i);
		break;
	case K_FIXED_CTRL:
		v = vcpu->fixed_ctrl;
		break;
	case K_GLOBAL_STATUS:
		v = vcpu->global_status;
		break;
	case K_GLOBAL_CTRL:
		v = vcpu->global_ctrl;
		break;
	/* Write-only in effect: reads return 0 */
	case K_GLOBAL_OVF_CTRL:
	case K_GLOBAL_STATUS_SET:
		v = 0;
		break;
	case K_GLOBAL_INUSE:
		v = global_inuse(vcpu);
		break;
	case K_PERF_METRICS:
		v = vcpu->perf_metrics;
		break;
	case K_PERF_CAPABILITIES:
		v = vcpu->model.perf_capabilities;
		break;
	case K_OFFCORE_RSP:
		v = vcpu->offcore_rsp[i];
		break;
	case K_LBR_SELECT:
		v = vcpu->lbr_select;
		break;
	case K_LBR_TOS:
		v = vcpu->lbr_tos;
		break;
	case K_DEBUGCTL:
		v = vcpu->debugctl;
		break;
	case K_PEBS_ENABLE:
		v = vcpu->pebs_enable;
		break;
	case K_DATA_CFG:
		v = vcpu->data_cfg;
		break;
	case K_PEBS_BASE:
		v = vcpu->pebs_base;
		break;
	case K_PEBS_INDEX:
		v = vcpu->pebs_index;
		break;
	case K_LD_LAT:
		v = vcpu->ld_lat;
		break;
	case K_FRONTEND:
		v = vcpu->frontend;
		break;
	case K_DS_AREA:
		v = vcpu->ds_area;
		break;
	case K_LBR_FROM:
		v = vcpu->lbr_from[i];
		break;
	case K_LBR_TO:
		v = vcpu->lbr_to[i];
		break;
	case K_LBR_INFO:
		v = vcpu->lbr_info[i];
		break;
	case K_GP_CFG_C:
		v = vcpu->gp[i].cfg_c;
		break;
	case K_FX_CFG_C:
		v = vcpu->fixed[i].cfg_c;
		break;
	default:
		v = 0;
		break;
	}
	return v;
}

int msr_get(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t *ret_value)
{
	enum msr_kind kind;
	unsigned int i;
	int r = classify(vcpu, msr, &kind, &i);

	if (r < 0)
		return r;
	*ret_value = kind_value(vcpu, kind, i);
	return 0;
}

int vpmu_msr_read(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t *ret_value)
{
	int r;

	vcpu->stats.msr_reads++;
	r = msr_get(vcpu, msr, ret_value);
	if (r == -ENXIO)
		vcpu->stats.msr_faults++;
	return r;
}

/* GP counters whose event reads the extra MSR at `msr` (its value is in their host event). */
static void dirty_aux_users(struct vpmu_vcpu *vcpu, uint32_t msr)
{
	static const struct {
		uint32_t msr;
		uint16_t event;
	} users[] = {
		{ MSR_OFFCORE_RSP_0, 0x01b7 },
		{ MSR_OFFCORE_RSP_1, 0x01bb },
		{ MSR_PEBS_LD_LAT_THRESHOLD, 0x01cd },
		{ MSR_PEBS_FRONTEND, 0x01c6 },
	};

	for (size_t u = 0; u < ARRAY_SIZE(users); u++) {
		if (users[u].msr != msr)
			continue;
		for (unsigned int i = 0; i < vcpu->model.nr_gp; i++)
			if ((vcpu->gp[i].evtsel & 0xffff) == users[u].event)
				vcpu->dirty |= BIT_ULL(i);
	}
}

/* Counters whose FIXED_CTR_CTRL nibble differs between two values. */
static uint64_t fixed_ctrl_changes(uint64_t old, uint64_t new)
{
	uint64_t diff = old ^ new, mask = 0;

	for (unsigned int i = 0; i < VPMU_MAX_FIXED; i++)
		if (diff & (GENMASK_ULL(4 * i + 3, 4 * i) | FIXED_CTRL_ADAPTIVE(i)))
			mask |= BIT_ULL(32 + i);
	return mask;
}

/* Store `v` in *reg if it has no bit outside `valid`; else #GP. */
static int set_masked(uint64_t *reg, uint64_t v, uint64_t valid)
{
	if (v & ~valid)
		return -EINVAL;
	*reg = v;
	return 0;
}

static int msr_write(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t v);

int vpmu_msr_write(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t v)
{
	int r = msr_write(vcpu, msr, v);

	vcpu->stats.msr_writes++;
	if (r == -EINVAL || r == -ENXIO)
		vcpu->stats.msr_faults++;
	return r;
}

/* The counters and their local controls. */
static int write_counter(struct vpmu_vcpu *vcpu, enum msr_kind kind, unsigned int i, uint64_t v)
{
	const struct vpmu_masks *k = &vcpu->mask;

	switch (kind) {
	case K_PMC:
		/*
		 * Legacy write: bits 31:0 are written and bit 31 is sign-
		 * extended to the counter width; EDX is ignored (§22.6.8.2).
		 */
		counter_write(vcpu, i, sign_extend64(v & 0xffffffffULL, 32) & k->gp_width);
		return 0;
	case K_A_PMC:
		/* Full-width write: bits above the width are reserved. */
		if (v & ~k->gp_width)
			return -EINVAL;
		counter_write(vcpu, i, v);
		return 0;
	case K_EVTSEL:
		if (v & ~(k->evtsel | (i == 2 ? k->evtsel2_extra : 0)))
			return -EINVAL;
		if (v != vcpu->gp[i].evtsel)
			vcpu->dirty |= BIT_ULL(i);
		vcpu->gp[i].evtsel = v;
		return 0;
	case K_FIXED_CTR:
		/* Bits above the counter width must be 0, §22.6.2.1 */
		if (v & ~k->fixed_width)
			return -EINVAL;
		counter_write(vcpu, 32 + i, v);
		return 0;
	default: /* K_FIXED_CTRL */
		if (v & ~k->fixed_ctrl)
			return -EINVAL;
		vcpu->dirty |= fixed_ctrl_changes(vcpu->fixed_ctrl, v);
		vcpu->fixed_ctrl = v;
		return 0;
	}
}

/* GLOBAL_CTRL and the writes that reset or set GLOBAL_STATUS bits. */
static int write_global(struct vpmu_vcpu *vcpu, enum msr_kind kind, uint64_t v)
{
	const struct vpmu_masks *k = &vcpu->mask;
	uint64_t old;

	if (kind == K_GLOBAL_CTRL) {
		if (v & ~k->global_ctrl)
			return -EINVAL;
		vcpu->dirty |= (vcpu->global_ctrl ^ v) & (k->gp | k->fixed << 32);
		vcpu->global_ctrl = v;
		return 0;
	}
	if (v & ~(kind == K_GLOBAL_OVF_CTRL ? k->status_reset : k->status_set))
		return -EINVAL;
	old = vcpu->global_status;
	if (kind == K_GLOBAL_OVF_CTRL)
		vcpu->global_status &= ~v;
	else
		vcpu->global_status |= v;
	/* CTR_Frz changing starts or stops every counter */
	if ((old ^ vcpu->global_status) & GLOBAL_STATUS_COUNTERS_FROZEN)
		vcpu->dirty |= k->gp | k->fixed << 32;
	return 0;
}

/* PEBS, the DS area and the extra MSRs some events read. */
static int write_sampling(struct vpmu_vcpu *vcpu, enum msr_kind kind, unsigned int i, uint32_t msr,
			  uint64_t v)
{
	const struct vpmu_masks *k = &vcpu->mask;
	uint64_t *reg, valid;
	int r;

	switch (kind) {
	case K_DS_AREA:
		if (!is_canonical(v, vcpu->model.linear_bits))
			return -EINVAL;
		vcpu->ds_area = v;
		return 0;
	case K_PERF_METRICS:
		vcpu->perf_metrics = v;
		return 0;
	case K_PEBS_ENABLE:
		return set_masked(&vcpu->pebs_enable, v, k->pebs_enable);
	case K_DATA_CFG:
		return set_masked(&vcpu->data_cfg, v, k->data_cfg);
	case K_PEBS_BASE:
		return set_masked(&vcpu->pebs_base, v, k->pebs_base);
	case K_PEBS_INDEX:
		return set_masked(&vcpu->pebs_index, v, k->pebs_index);
	case K_GP_CFG_C:
		return set_masked(&vcpu->gp[i].cfg_c, v, k->pebs_cfg_c);
	case K_FX_CFG_C:
		return set_masked(&vcpu->fixed[i].cfg_c, v, k->pebs_cfg_c);
	case K_OFFCORE_RSP:
		reg = &vcpu->offcore_rsp[i], valid = k->offcore_rsp[i];
		break;
	case K_LD_LAT:
		reg = &vcpu->ld_lat, valid = k->ld_lat;
		break;
	default: /* K_FRONTEND */
		reg = &vcpu->frontend, valid = k->frontend;
		break;
	}
	/* an extra MSR: the events that read it take the new value at the sync */
	r = set_masked(reg, v, valid);
	if (!r)
		dirty_aux_users(vcpu, msr);
	return r;
}

/* DEBUGCTL and the LBR stack. */
static int write_lbr(struct vpmu_vcpu *vcpu, enum msr_kind kind, unsigned int i, uint64_t v)
{
	const struct vpmu_masks *k = &vcpu->mask;

	switch (kind) {
	case K_DEBUGCTL:
		return set_masked(&vcpu->debugctl, v, k->debugctl);
	case K_LBR_SELECT:
		return set_masked(&vcpu->lbr_select, v, k->lbr_select);
	case K_LBR_TOS:
		return set_masked(&vcpu->lbr_tos, v, k->lbr_tos);
	case K_LBR_INFO:
		return set_masked(&vcpu->lbr_info[i], v, k->lbr_info);
	default: /* K_LBR_FROM, K_LBR_TO */
		/* Format 5 FROM/TO: 47:0 address, 63:48 its sign extension */
		if (!is_canonical(v, 48))
			return -EINVAL;
		if (kind == K_LBR_FROM)
			vcpu->lbr_from[i] = v;
		else
			vcpu->lbr_to[i] = v;
		return 0;
	}
}

static int msr_write(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t v)
{
	enum msr_kind kind;
	unsigned int i;
	int r = classify(vcpu, msr, &kind, &i);

	if (r < 0)
		return r;
	switch (kind) {
	case K_PMC:
	case K_A_PMC:
	case K_EVTSEL:
	case K_FIXED_CTR:
	case K_FIXED_CTRL:
		return write_counter(vcpu, kind, i, v);
	case K_GLOBAL_CTRL:
	case K_GLOBAL_OVF_CTRL:
	case K_GLOBAL_STATUS_SET:
		return write_global(vcpu, kind, v);
	case K_PERF_METRICS:
	case K_OFFCORE_RSP:
	case K_PEBS_ENABLE:
	case K_DATA_CFG:
	case K_PEBS_BASE:
	case K_PEBS_INDEX:
	case K_LD_LAT:
	case K_FRONTEND:
	case K_DS_AREA:
	case K_GP_CFG_C:
	case K_FX_CFG_C:
		return write_sampling(vcpu, kind, i, msr, v);
	case K_DEBUGCTL:
	case K_LBR_SELECT:
	case K_LBR_TOS:
	case K_LBR_FROM:
	case K_LBR_TO:
	case K_LBR_INFO:
		return write_lbr(vcpu, kind, i, v);
	case K_GLOBAL_STATUS:	  /* read-only */
	case K_GLOBAL_INUSE:	  /* read-only */
	case K_PERF_CAPABILITIES: /* read-only */
		return -EINVAL;
	case K_NR:
		break;
	}
	return -ENOENT;
}

/*
 * Restore: set MSR `msr` to `v`, a value RDMSR returned on a vCPU like
 * this one (vpmu_vcpu_restore), with the checks a guest WRMSR gets. What
 * a WRMSR cannot set is set here: counters at their full width,
 * GLOBAL_STATUS; what RDMSR derives or reads as 0 must be what it reads
 * here (PERF_CAPABILITIES, GLOBAL_OVF_CTRL, GLOBAL_STATUS_SET; the caller
 * compares GLOBAL_INUSE once every event select is in). -EINVAL: a value
 * this vCPU cannot hold; -ENOENT/-ENXIO: not an MSR it has.
 */
int msr_restore(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t v)
{
	const struct vpmu_masks *k = &vcpu->mask;
	enum msr_kind kind;
	unsigned int i;
	int r = classify(vcpu, msr, &kind, &i);

	if (r < 0)
		return r;
	switch (kind) {
	case K_PMC:
	case K_A_PMC:
		return set_masked(&vcpu->gp[i].value, v, k->gp_width);
	case K_FIXED_CTR:
		return set_masked(&vcpu->fixed[i].value, v, k->fixed_width);
	case K_GLOBAL_STATUS:
		return set_masked(&vcpu->global_status, v, k->global_status);
	case K_GLOBAL_OVF_CTRL:
	case K_GLOBAL_STATUS_SET:
	case K_PERF_CAPABILITIES:
		return v == kind_value(vcpu, kind, i) ? 0 : -EINVAL;
	case K_GLOBAL_INUSE:
		return 0;
	default:
		return msr_write(vcpu, msr, v);
	}
}

size_t vpmu_msr_list(const struct vpmu_vcpu *vcpu, uint32_t *msrs, size_t n)
{
	size_t total = 0;

	for (size_t r = 0; r < ARRAY_SIZE(ranges); r++) {
		unsigned int count = vcpu->msr_count[ranges[r].kind];

		for (unsigned int i = 0; i < count && i < ranges[r].span; i++) {
			if (total < n)
				msrs[total] = ranges[r].base + i * ranges[r].stride;
			total++;
		}
	}
	return total;
}
