/* SPDX-License-Identifier: MIT */
/*
 * What a KVM VMM hands to KVM so that the vPMU lives in userspace, as
 * plain data built from a vCPU and checked by unit tests without
 * /dev/kvm: the MSR filter that routes every PMU MSR to userspace, the
 * CPUID2 table, the MSI that delivers a PMI, and the RDPMC shadow values.
 */
#ifndef VMM_KVM_SETUP_H
#define VMM_KVM_SETUP_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vpmu/vpmu.h"

/*
 * KVM_X86_SET_MSR_FILTER (Documentation/virt/kvm/api.rst): default allow,
 * ranges whose bitmap has a 0 bit for each PMU MSR (read and write), so
 * that with KVM_CAP_X86_USER_SPACE_MSR (KVM_MSR_EXIT_REASON_FILTER) every
 * guest access to one exits to userspace and nothing else does. The
 * bitmaps live in the plan; filter.ranges[i].bitmap points into it.
 */
#define KVM_PLAN_BITMAP_BYTES KVM_MSR_FILTER_MAX_BITMAP_SIZE
struct kvm_msr_filter_plan {
	struct kvm_msr_filter filter;
	uint8_t bitmap[KVM_MSR_FILTER_MAX_RANGES][KVM_PLAN_BITMAP_BYTES];
};

/* -E2BIG when the MSRs need more ranges than KVM takes. */
int kvm_msr_filter_build(const uint32_t *msrs, size_t n, struct kvm_msr_filter_plan *ret);
/* Whether the filter sends a guest access to msr to userspace. */
bool kvm_msr_filter_denies(const struct kvm_msr_filter *f, uint32_t msr, bool write);

/*
 * The CPUID table for KVM_SET_CPUID2: the host's KVM_GET_SUPPORTED_CPUID
 * entries with the PMU leaves replaced by the model's (vpmu_cpuid_patch),
 * indexed leaves flagged KVM_CPUID_FLAG_SIGNIFCANT_INDEX. Returns the
 * number of entries, or -ENOSPC.
 */
int kvm_cpuid_build(const struct vpmu_vcpu *vcpu, const struct kvm_cpuid_entry2 *supported,
		    size_t nr_supported, struct kvm_cpuid_entry2 *ret, size_t capacity);

/*
 * A PMI as the LVT performance-counter entry says: an MSI to the vCPU's
 * APIC (SDM Vol. 3A 11.11.1/11.11.2: address FEE00000H | ID << 12,
 * physical destination; data = delivery mode << 8 | vector, edge).
 * NMI delivery uses delivery mode 100b with vector 0. -EINVAL for LVT
 * delivery modes a PMI cannot use; -EAGAIN when the entry is masked.
 */
int kvm_pmi_msi(uint32_t lvt, uint32_t apic_id, struct kvm_msi *ret);

/*
 * Stock KVM emulates guest RDPMC in the kernel from its own PMU's
 * counters. With that PMU kept as a shadow that counts nothing (every
 * PMU MSR write goes to userspace), host-initiated KVM_SET_MSRS of these
 * values before each entry make a guest RDPMC read the vPMU's counters,
 * at most one exit stale. Fills ret (capacity entries) and returns how
 * many.
 */
size_t kvm_rdpmc_shadow(struct vpmu_vcpu *vcpu, struct kvm_msr_entry *ret, size_t capacity);

#endif
