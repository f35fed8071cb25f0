/* SPDX-License-Identifier: MIT */
/* PMI delivery on KVM that touches the LVT entry only (see kvm-pmi.h). */
#include <errno.h>
#include <linux/kvm.h>
#include <string.h>

#include "kvm-pmi.h"
#include "kvm-setup.h"
#include "vpmu/msr.h"

#define MSR_IA32_APICBASE	0x1b
#define APICBASE_EXTD		(1ull << 10) /* x2APIC mode */
#define APICBASE_EN		(1ull << 11) /* the local APIC is enabled */
#define APIC_ID			0x20
#define X2APIC_MSR(reg)		(0x800u + (reg) / 16) /* SDM Vol. 3A Table 11-6 */
#define MSI_DELIVERY_MODE(data) (((data) >> 8) & 7)
#define DELIVERY_NMI		4

union msrs {
	struct kvm_msrs h;
	uint8_t storage[sizeof(struct kvm_msrs) + 2 * sizeof(struct kvm_msr_entry)];
};

static int neg_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/* KVM_GET_MSRS of n (<= 2) MSRs: each one or an error. */
static int get_msrs(const struct kvm_pmi_ops *ops, void *ctx, const uint32_t *index, uint64_t *ret,
		    uint32_t n)
{
	union msrs m;
	int r;

	memset(&m, 0, sizeof(m));
	m.h.nmsrs = n;
	for (uint32_t i = 0; i < n; i++)
		m.h.entries[i].index = index[i];
	r = ops->vcpu_ioctl(ctx, KVM_GET_MSRS, &m);
	if (r < 0)
		return neg_errno();
	if (r != (int) n)
		return -EIO; /* KVM refused one (an x2APIC MSR out of x2APIC mode) */
	for (uint32_t i = 0; i < n; i++)
		ret[i] = m.h.entries[i].data;
	return 0;
}

int kvm_pmi_deliver(const struct kvm_pmi_ops *ops, void *ctx, struct vpmu_vcpu *pmu)
{
	uint32_t base_msr = MSR_IA32_APICBASE, lvt, id;
	uint64_t base;
	struct vpmu_lvt l;
	struct kvm_msi msi;
	bool x2apic;
	int r;

	r = get_msrs(ops, ctx, &base_msr, &base, 1);
	if (r < 0)
		return r;
	/* a disabled local APIC delivers no local interrupt (SDM Vol. 3A 11.4.3) */
	if (!(base & APICBASE_EN))
		return KVM_PMI_DROPPED;
	x2apic = base & APICBASE_EXTD;
	if (x2apic) {
		const uint32_t index[2] = { X2APIC_MSR(APIC_LVTPC), X2APIC_MSR(APIC_ID) };
		uint64_t val[2];

		r = get_msrs(ops, ctx, index, val, 2);
		if (r < 0)
			return r;
		lvt = (uint32_t) val[0];
		id = (uint32_t) val[1]; /* the x2APIC ID, 32 bits */
	} else {
		/* read only: KVM_SET_LAPIC would rewrite IRR, ISR and the timer */
		struct kvm_lapic_state s;

		if (ops->vcpu_ioctl(ctx, KVM_GET_LAPIC, &s) < 0)
			return neg_errno();
		memcpy(&lvt, s.regs + APIC_LVTPC, 4);
		memcpy(&id, s.regs + APIC_ID, 4);
		id >>= 24; /* the xAPIC ID is bits 31:24 (SDM Vol. 3A 11.4.6) */
	}
	vpmu_lvt_decode(lvt, &l);
	if (l.action == VPMU_LVT_DROP)
		return KVM_PMI_DROPPED;
	r = kvm_pmi_msi(lvt, id, &msi);
	if (r < 0)
		return r == -EAGAIN ? KVM_PMI_DROPPED : r;
	if (x2apic) {
		/* as the APIC does on delivery: the entry's mask bit, this register only */
		union msrs m;

		memset(&m, 0, sizeof(m));
		m.h.nmsrs = 1;
		m.h.entries[0].index = X2APIC_MSR(APIC_LVTPC);
		m.h.entries[0].data = l.after;
		r = ops->vcpu_ioctl(ctx, KVM_SET_MSRS, &m);
		if (r < 0)
			return neg_errno();
		if (r != 1)
			return -EIO;
	}
	if (MSI_DELIVERY_MODE(msi.data) == DELIVERY_NMI) {
		/* the vCPU's own NMI: no routing needed */
		if (ops->vcpu_ioctl(ctx, KVM_NMI, NULL) < 0)
			return neg_errno();
		if (pmu)
			vpmu_pmi_delivered(pmu);
		return KVM_PMI_DELIVERED_NMI;
	}
	r = ops->vm_ioctl(ctx, KVM_SIGNAL_MSI, &msi);
	if (r < 0)
		return neg_errno();
	if (r == 0) {
		/* "0 if the guest blocked the MSI": not an interrupt of its own */
		if (pmu)
			vpmu_pmi_merged(pmu);
		return KVM_PMI_MERGED;
	}
	if (pmu)
		vpmu_pmi_delivered(pmu);
	return KVM_PMI_DELIVERED;
}
