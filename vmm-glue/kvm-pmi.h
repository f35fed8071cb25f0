/* SPDX-License-Identifier: MIT */
/*
 * A virtual PMI into a KVM guest without losing any other interrupt.
 *
 * The guest's local APIC is in the kernel; hardware sets the mask bit of
 * the LVT performance-counter entry when it delivers a PMI (SDM Vol. 3B
 * 21.6.3, Vol. 3A 11.5.1). KVM_GET_LAPIC + KVM_SET_LAPIC would write it
 * back with the whole register page: KVM then reloads IRR and ISR from
 * that copy, cancels and restarts the APIC timer and drops the posted
 * interrupts, so an IPI, an irqfd or a timer interrupt arriving between
 * the two ioctls is lost. So:
 *
 *  - x2APIC mode: the entry is read and written alone, as the x2APIC
 *    MSRs 834H (LVT performance counter) and 802H (ID) with KVM_GET_MSRS /
 *    KVM_SET_MSRS, which KVM handles as a register access of the guest's
 *    own (kvm_x2apic_msr_write(): that one register, nothing else);
 *  - xAPIC mode: KVM has no way to write one register of an xAPIC, so the
 *    entry is only read (KVM_GET_LAPIC changes nothing) and the mask bit
 *    is left to the guest: its handler sets the entry again anyway (Linux
 *    writes it unmasked at the end of every PMI). The difference from
 *    hardware: a second PMI before the handler rewrites the entry is
 *    delivered (an NMI waits for the handler's IRET, a vector in the IRR)
 *    where hardware drops it.
 *
 * The PMI goes to the vCPU's own APIC ID, read from its APIC with the
 * entry (a guest may change its xAPIC ID): an MSI (KVM_SIGNAL_MSI) for
 * a vector, KVM_NMI on the vCPU for NMI delivery. KVM_SIGNAL_MSI
 * returning 0 means the interrupt was not delivered as one of its own:
 * the APIC merged it with the same vector pending in its IRR.
 *
 * The ioctls go through an ops table so that unit tests check the
 * sequence against a recorded fake without /dev/kvm.
 */
#ifndef VMM_KVM_PMI_H
#define VMM_KVM_PMI_H

#include <stdint.h>

#include "vpmu/vpmu.h"

struct kvm_pmi_ops {
	/* ioctl(2) on the vCPU's fd and on the VM's fd: its result, -1 with errno set */
	int (*vcpu_ioctl)(void *ctx, unsigned long request, void *arg);
	int (*vm_ioctl)(void *ctx, unsigned long request, void *arg);
};

enum kvm_pmi_result {
	KVM_PMI_DROPPED,       /* APIC disabled, entry masked, or a mode that delivers nothing */
	KVM_PMI_DELIVERED,     /* an interrupt with the entry's vector */
	KVM_PMI_DELIVERED_NMI, /* an NMI */
	KVM_PMI_MERGED,	       /* KVM_SIGNAL_MSI returned 0: merged with a pending one */
};

/*
 * Deliver one PMI to the vCPU behind `ops`/`ctx` as its LVT entry says,
 * and tell `pmu` (may be NULL): vpmu_pmi_delivered() or vpmu_pmi_merged().
 * Returns an enum kvm_pmi_result, or -errno when an ioctl failed (then
 * nothing was delivered).
 */
int kvm_pmi_deliver(const struct kvm_pmi_ops *ops, void *ctx, struct vpmu_vcpu *pmu);

#endif
