/* SPDX-License-Identifier: MIT */
/*
 * The KVM vCPU backend of vpmu-vmm: the guest runs on KVM, its PMU lives
 * in userspace. Every PMU MSR of the model exits to userspace through
 * KVM_X86_SET_MSR_FILTER and goes to vpmu_msr_read/write; CPUID comes
 * from the model (KVM_SET_CPUID2); PMIs are MSIs or NMIs to the vCPU's
 * own local APIC as its LVT performance-counter entry says, with the
 * entry's mask bit set as hardware does in x2APIC mode, and nothing else
 * of the APIC rewritten (kvm-pmi.h). KVM's own PMU is kept, counting nothing,
 * as the RDPMC shadow: stock KVM emulates guest RDPMC in the kernel, so
 * the vPMU's counter values are written into it (host-initiated
 * KVM_SET_MSRS) before every entry, and a guest RDPMC reads them at most
 * one exit stale.
 */
#ifndef VMM_KVM_H
#define VMM_KVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loader.h"
#include "vpmu/vpmu.h"

#define KVM_VM_MAX_VCPUS 64

struct kvm_vm_config {
	const char *model;	   /* guest CPU model */
	uint64_t mem_size;	   /* guest RAM at guest-physical 0, below the 3 GiB hole */
	unsigned int smp;	   /* vCPUs: 1..KVM_VM_MAX_VCPUS */
	FILE *serial_out;	   /* COM1 output */
	enum vpmu_backend backend; /* what backs guest counters: NONE or a host backend */
	int signo;		   /* the host backends' overflow signal, 0: none */
	bool trace;		   /* exits on stderr */
	const struct vpmu_filter *pmu_filter; /* NULL: the default policy; outlives the VM */
	vpmu_log_fn pmu_log;		      /* the vPMU's warnings and errors; NULL: none */
	void *pmu_log_data;
	/* the perfmon version the vPMU exposes (vpmu_config.version); 0: the model's */
	int pmu_version;
};

struct kvm_vm;

void kvm_vm_config_init(struct kvm_vm_config *cfg);

/* 0 when /dev/kvm is there and has what the backend needs; else -errno and why. */
int kvm_probe(char *why, size_t whylen);

int kvm_vm_new(const struct kvm_vm_config *cfg, struct kvm_vm **ret, char *err, size_t errlen);
void kvm_vm_free(struct kvm_vm *vm);

struct vmm_ram kvm_vm_ram(struct kvm_vm *vm);
struct vpmu_vcpu *kvm_vm_vpmu(struct kvm_vm *vm, unsigned int cpu);

/* Enter a kernel the loader placed (multiboot: 32-bit protected mode; ELF64: long mode). */
int kvm_vm_boot(struct kvm_vm *vm, const struct vmm_boot *boot, char *err, size_t errlen);
/*
 * Load and enter a Linux bzImage through its 64-bit entry point with
 * bzimage_load, the loader the emulator uses: zero page, command line,
 * initrd, e820, identity page tables, the boot GDT, and the MP and ACPI
 * tables of boot-tables.c (one CPU entry per vCPU). The kernel is inflated
 * by the VMM where it can be (see kvm_vm_unpack_note).
 */
int kvm_vm_boot_linux(struct kvm_vm *vm, const void *image, size_t size, const char *cmdline,
		      const void *initrd, size_t initrd_size, char *err, size_t errlen);
/* After kvm_vm_boot_linux: NULL if vpmu-vmm inflated the kernel, else why the guest does. */
const char *kvm_vm_unpack_note(const struct kvm_vm *vm);

/* From a signal handler (async-signal-safe): stop every vCPU; kvm_vm_run returns. */
void kvm_vm_interrupt(struct kvm_vm *vm);
/* One line: vCPU 0's RIP, CPL and mode. */
void kvm_vm_describe(struct kvm_vm *vm, char *buf, size_t len);

/* Run every vCPU until the guest exits (debug-exit status in *ret_status) or fails. */
int kvm_vm_run(struct kvm_vm *vm, int *ret_status, char *err, size_t errlen);

struct kvm_vm_stats {
	uint64_t exits, msr_exits, io_exits, pmis, nmis, shadow_writes, signals;
	uint64_t pmis_merged; /* KVM_SIGNAL_MSI returned 0: merged with a pending interrupt */
};
/* Summed over the vCPUs; call after kvm_vm_run returned. */
void kvm_vm_stats(struct kvm_vm *vm, struct kvm_vm_stats *ret);

#endif
