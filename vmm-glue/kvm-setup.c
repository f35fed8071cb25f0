/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvm-setup.h"
#include "vpmu/msr.h"

#define MSRS_PER_RANGE (KVM_PLAN_BITMAP_BYTES * 8u)

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;

	return x < y ? -1 : x > y;
}

int kvm_msr_filter_build(const uint32_t *msrs, size_t n, struct kvm_msr_filter_plan *ret)
{
	uint32_t *sorted = malloc((n ? n : 1) * sizeof(*sorted));
	unsigned int nr = 0;
	size_t i = 0;

	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, msrs, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_u32);
	memset(ret, 0, sizeof(*ret));
	ret->filter.flags = KVM_MSR_FILTER_DEFAULT_ALLOW;
	/* greedy: a range starts at the lowest MSR not yet covered and spans what its bitmap can */
	while (i < n) {
		struct kvm_msr_filter_range *r;
		uint32_t base = sorted[i], last = base;
		uint8_t *bm;

		if (nr == KVM_MSR_FILTER_MAX_RANGES) {
			free(sorted);
			memset(ret, 0, sizeof(*ret));
			return -E2BIG;
		}
		for (size_t j = i; j < n && sorted[j] - base < MSRS_PER_RANGE; j++)
			last = sorted[j];
		bm = ret->bitmap[nr];
		r = &ret->filter.ranges[nr++];
		r->flags = KVM_MSR_FILTER_READ | KVM_MSR_FILTER_WRITE;
		r->base = base;
		r->nmsrs = last - base + 1;
		r->bitmap = bm;
		/* a set bit allows the access: allow all, then deny the PMU's */
		memset(bm, 0xff, (r->nmsrs + 7) / 8);
		for (; i < n && sorted[i] <= last; i++)
			bm[(sorted[i] - base) / 8] &= (uint8_t) ~(1u << ((sorted[i] - base) % 8));
	}
	free(sorted);
	return 0;
}

bool kvm_msr_filter_denies(const struct kvm_msr_filter *f, uint32_t msr, bool write)
{
	uint32_t need = write ? KVM_MSR_FILTER_WRITE : KVM_MSR_FILTER_READ;

	for (unsigned int i = 0; i < KVM_MSR_FILTER_MAX_RANGES; i++) {
		const struct kvm_msr_filter_range *r = &f->ranges[i];
		uint32_t off = msr - r->base;

		if (!r->nmsrs || !(r->flags & need) || msr < r->base || off >= r->nmsrs)
			continue;
		return !(r->bitmap[off / 8] & (1u << (off % 8)));
	}
	return f->flags & KVM_MSR_FILTER_DEFAULT_DENY;
}

/* Leaves whose output depends on ECX (SDM Vol. 2A CPUID, Table 3-8). */
static bool indexed_leaf(uint32_t function)
{
	static const uint32_t leaves[] = { 0x4,	 0x7,  0xb,  0xd,  0xf,	      0x10,
					   0x12, 0x14, 0x17, 0x18, 0x1d,      0x1e,
					   0x1f, 0x20, 0x23, 0x24, 0x8000001d };

	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++)
		if (leaves[i] == function)
			return true;
	return false;
}

int kvm_cpuid_build(const struct vpmu_vcpu *vcpu, const struct kvm_cpuid_entry2 *supported,
		    size_t nr_supported, struct kvm_cpuid_entry2 *ret, size_t capacity)
{
	struct vpmu_cpuid_entry *e = calloc(capacity ? capacity : 1, sizeof(*e));
	size_t nr = nr_supported;
	int r;

	if (!e)
		return -ENOMEM;
	if (nr_supported > capacity) {
		free(e);
		return -ENOSPC;
	}
	for (size_t i = 0; i < nr_supported; i++)
		e[i] = (struct vpmu_cpuid_entry){ supported[i].function, supported[i].index,
						  supported[i].eax,	 supported[i].ebx,
						  supported[i].ecx,	 supported[i].edx };
	r = vpmu_cpuid_patch(vcpu, e, &nr, capacity);
	if (r < 0) {
		free(e);
		return r;
	}
	for (size_t i = 0; i < nr; i++) {
		struct kvm_cpuid_entry2 *k = &ret[i];

		/*
		 * The host's entries keep their flags, and every entry of a leaf
		 * whose output depends on ECX gets the index flag: KVM answers a
		 * sub-leaf with the first entry of its leaf that has no flag, and
		 * a host KVM that lists leaf 23H with nothing in it gives sub-leaf
		 * 0 none (seen on an Intel host), which hid sub-leaves 1-5.
		 */
		uint32_t flags =
			(i < nr_supported ? supported[i].flags : 0) |
			(indexed_leaf(e[i].function) ? KVM_CPUID_FLAG_SIGNIFCANT_INDEX : 0);

		memset(k, 0, sizeof(*k));
		k->function = e[i].function;
		k->index = e[i].index;
		k->flags = flags;
		k->eax = e[i].eax;
		k->ebx = e[i].ebx;
		k->ecx = e[i].ecx;
		k->edx = e[i].edx;
		/*
		 * IA32_DEBUGCTL is the vPMU's (its LBR and freeze bits), which has
		 * no BLD (bit 2): a guest told of bus-lock detection
		 * (CPUID.07H.0:ECX[24]) would set it and take a #GP.
		 */
		if (k->function == 7 && k->index == 0)
			k->ecx &= ~(1u << 24);
	}
	free(e);
	return (int) nr;
}

int kvm_pmi_msi(uint32_t lvt, uint32_t apic_id, struct kvm_msi *ret)
{
	struct vpmu_lvt l;
	uint32_t data;

	if (apic_id > 0xff)
		return -EINVAL; /* the xAPIC MSI address holds an 8-bit destination */
	vpmu_lvt_decode(lvt, &l);
	switch (l.action) {
	case VPMU_LVT_NMI:
		data = 4u << 8; /* delivery mode 100b; the vector is ignored */
		break;
	case VPMU_LVT_FIXED:
		data = l.vector; /* delivery mode 000b */
		break;
	default:
		return lvt & APIC_LVT_MASKED ? -EAGAIN : -EINVAL;
	}
	memset(ret, 0, sizeof(*ret));
	ret->address_lo = 0xfee00000u | apic_id << 12; /* RH = 0, DM = 0: physical */
	ret->address_hi = 0;
	ret->data = data; /* trigger mode 0: edge */
	return 0;
}

size_t kvm_rdpmc_shadow(struct vpmu_vcpu *vcpu, struct kvm_msr_entry *ret, size_t capacity)
{
	size_t n = 0;
	uint64_t v;

	/* IA32_PMCx and IA32_FIXED_CTRx, as far as RDPMC reaches (it faults past the last) */
	for (uint32_t i = 0; n < capacity && vpmu_rdpmc_peek(vcpu, i, &v) == 0; i++)
		ret[n++] = (struct kvm_msr_entry){ .index = MSR_IA32_PMC0 + i, .data = v };
	for (uint32_t i = 0; n < capacity && vpmu_rdpmc_peek(vcpu, 1u << 30 | i, &v) == 0; i++)
		ret[n++] =
			(struct kvm_msr_entry){ .index = MSR_CORE_PERF_FIXED_CTR0 + i, .data = v };
	return n;
}
