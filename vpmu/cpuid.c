/* SPDX-License-Identifier: MIT */
/*
 * CPUID leaves the PMU owns, synthesised from the narrowed model.
 * Layouts of 0AH and 23H are SDM Vol. 2A CPUID (leaves 0AH and 23H); 15H
 * per Vol. 3B 22.7.3.
 */
#include <errno.h>
#include <string.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "pmu.h"

#define CPUID_1_ECX_DTES64 BIT_ULL(2)
#define CPUID_1_ECX_DS_CPL BIT_ULL(4)
#define CPUID_1_ECX_PDCM   BIT_ULL(15)
#define CPUID_1_EDX_DS	   BIT_ULL(21)
/* CPUID.(07H,1):EAX[8]: leaf 23H exists (Linux X86_FEATURE_ARCH_PERFMON_EXT) */
#define CPUID_7_1_EAX_PERFMON_EXT BIT_ULL(8)

/* CPUID.23H.0:EAX: which sub-leaves are valid (Linux's cpuid35_eax) */
#define CPUID_23_EAX_CNTR_SUBLEAF      BIT_ULL(1)
#define CPUID_23_EAX_PEBS_CAPS_SUBLEAF BIT_ULL(4)
#define CPUID_23_EAX_PEBS_CNTR_SUBLEAF BIT_ULL(5)
#define CPUID_23_EBX_UMASK2	       BIT_ULL(0)
#define CPUID_23_EBX_EQ		       BIT_ULL(1)

static uint32_t max_leaf(const struct vpmu_model *m)
{
	return m->version >= 6 ? 0x23 : 0x15;
}

static void leaf_0a(const struct vpmu_vcpu *vcpu, struct vpmu_cpuid_entry *e)
{
	const struct vpmu_model *m = &vcpu->model;

	/* EAX: version, #GP, GP width, length of the EBX event vector */
	e->eax = m->version | (uint32_t) m->nr_gp << 8 | (uint32_t) m->gp_width << 16 |
		 (uint32_t) m->arch_events_len << 24;
	/* EBX: bit set = architectural event NOT available (to this backend) */
	e->ebx = (uint32_t) vcpu->unavailable_events;
	/* ECX: fixed-counter bitmap, perfmon v5+ */
	e->ecx = m->version >= 5 ? (uint32_t) vcpu->mask.fixed : 0;
	/* EDX: #contiguous fixed counters, their width, AnyThread deprecation */
	e->edx = 0;
	if (m->version >= 2)
		e->edx = m->nr_fixed | (uint32_t) m->fixed_width << 5;
	if (m->features & MODEL_F_ANYTHREAD_DEPRECATED)
		e->edx |= BIT_ULL(15);
}

static void leaf_23(const struct vpmu_vcpu *vcpu, uint32_t index, struct vpmu_cpuid_entry *e)
{
	const struct vpmu_model *m = &vcpu->model;
	const struct vpmu_masks *k = &vcpu->mask;

	switch (index) {
	case 0:
		e->eax = CPUID_23_EAX_CNTR_SUBLEAF;
		if (model_arch_pebs(m))
			e->eax |= CPUID_23_EAX_PEBS_CAPS_SUBLEAF | CPUID_23_EAX_PEBS_CNTR_SUBLEAF;
		if (m->features & MODEL_F_UMASK2)
			e->ebx |= CPUID_23_EBX_UMASK2;
		if (m->features & MODEL_F_EQ)
			e->ebx |= CPUID_23_EBX_EQ;
		break;
	case 1:
		/* GP and fixed counter bitmaps; also gate DATA_CFG 47:32/55:48 */
		e->eax = (uint32_t) k->gp;
		e->ebx = (uint32_t) k->fixed;
		break;
	case 4:
		/* Arch PEBS capabilities: the CFG_C group bits 63:32 it accepts */
		if (model_arch_pebs(m))
			e->ebx = (uint32_t) (k->pebs_cfg_c >> 32);
		break;
	case 5:
		/* Arch PEBS counters: PEBS-capable GP/fixed, then PDist GP/fixed */
		if (model_arch_pebs(m)) {
			e->eax = (uint32_t) k->gp;
			e->ecx = (uint32_t) k->fixed;
			e->ebx = (uint32_t) m->pdist_counters;
			e->edx = (uint32_t) (m->pdist_counters >> 32);
		}
		break;
	default:
		break;
	}
}

int vpmu_cpuid(const struct vpmu_vcpu *vcpu, uint32_t function, uint32_t index,
	       struct vpmu_cpuid_entry *ret_entry)
{
	const struct vpmu_model *m = &vcpu->model;
	struct vpmu_cpuid_entry e;

	memset(&e, 0, sizeof(e));
	e.function = function;
	e.index = index;
	switch (function) {
	case 0x01:
		if (m->version >= 2)
			e.ecx |= CPUID_1_ECX_PDCM;
		if (m->features & MODEL_F_DS) {
			e.ecx |= CPUID_1_ECX_DTES64 | CPUID_1_ECX_DS_CPL;
			e.edx |= CPUID_1_EDX_DS;
		}
		break;
	case 0x07:
		/* sub-leaf 0 EAX: the last sub-leaf; sub-leaf 1 EAX[8]: leaf 23H */
		if (index > 1)
			return -ENOENT;
		if (m->version >= 6)
			e.eax = index == 0 ? 1 : (uint32_t) CPUID_7_1_EAX_PERFMON_EXT;
		break;
	case 0x0a:
		leaf_0a(vcpu, &e);
		break;
	case 0x15:
		/* TSC Hz = ECX * EBX / EAX (§22.7.3) */
		e.eax = m->tsc_ratio_den;
		e.ebx = m->tsc_ratio_num;
		e.ecx = m->tsc_crystal_hz;
		break;
	case 0x23:
		if (m->version < 6)
			return -ENOENT;
		leaf_23(vcpu, index, &e);
		break;
	default:
		return -ENOENT;
	}
	*ret_entry = e;
	return 0;
}

static void patch_one(const struct vpmu_vcpu *vcpu, struct vpmu_cpuid_entry *e)
{
	struct vpmu_cpuid_entry pmu;

	if (e->function == 0) {
		if (e->eax < max_leaf(&vcpu->model))
			e->eax = max_leaf(&vcpu->model);
		return;
	}
	if (vpmu_cpuid(vcpu, e->function, e->index, &pmu) < 0) {
		/* leaf 23H is all PMU: a model without it shows none of the host's */
		if (e->function == 0x23)
			e->eax = e->ebx = e->ecx = e->edx = 0;
		return;
	}
	if (e->function == 0x07) {
		if (e->index == 0 && e->eax < pmu.eax)
			e->eax = pmu.eax;
		if (e->index == 1)
			e->eax = (e->eax & ~(uint32_t) CPUID_7_1_EAX_PERFMON_EXT) | pmu.eax;
		return;
	}
	if (e->function == 0x01) {
		uint32_t ecx_bits = CPUID_1_ECX_DTES64 | CPUID_1_ECX_DS_CPL | CPUID_1_ECX_PDCM;

		e->ecx = (e->ecx & ~ecx_bits) | pmu.ecx;
		e->edx = (e->edx & ~(uint32_t) CPUID_1_EDX_DS) | pmu.edx;
		return;
	}
	*e = pmu;
}

static bool has_entry(const struct vpmu_cpuid_entry *entries, size_t nr, uint32_t fn, uint32_t idx)
{
	for (size_t i = 0; i < nr; i++)
		if (entries[i].function == fn && entries[i].index == idx)
			return true;
	return false;
}

int vpmu_cpuid_patch(const struct vpmu_vcpu *vcpu, struct vpmu_cpuid_entry *entries, size_t *nr,
		     size_t capacity)
{
	static const struct {
		uint32_t fn, idx;
	} owned[] = {
		{ 0x07, 1 }, { 0x0a, 0 }, { 0x15, 0 }, { 0x23, 0 }, { 0x23, 1 },
		{ 0x23, 2 }, { 0x23, 3 }, { 0x23, 4 }, { 0x23, 5 },
	};
	int r = 0;

	for (size_t i = 0; i < *nr; i++)
		patch_one(vcpu, &entries[i]);
	for (size_t i = 0; i < ARRAY_SIZE(owned); i++) {
		struct vpmu_cpuid_entry e;

		if (has_entry(entries, *nr, owned[i].fn, owned[i].idx) ||
		    vpmu_cpuid(vcpu, owned[i].fn, owned[i].idx, &e) < 0)
			continue;
		if (*nr >= capacity) {
			r = -ENOSPC;
			continue;
		}
		entries[(*nr)++] = e;
	}
	return r;
}

uint64_t vpmu_misc_enable_patch(const struct vpmu_vcpu *vcpu, uint64_t value)
{
	/*
	 * Bit 7: perfmon available (a DATA_CFG write is ignored without it,
	 * Table 22-102 note 1). Bit 11: BTS is not emulated. Bit 12: PEBS
	 * unavailable unless legacy PEBS is; it stays 1 on arch-PEBS parts
	 * (§22.10.1.2).
	 */
	value |= MSR_IA32_MISC_ENABLE_EMON | MSR_IA32_MISC_ENABLE_BTS_UNAVAIL;
	if (model_legacy_pebs(&vcpu->model))
		value &= ~MSR_IA32_MISC_ENABLE_PEBS_UNAVAIL;
	else
		value |= MSR_IA32_MISC_ENABLE_PEBS_UNAVAIL;
	return value;
}
