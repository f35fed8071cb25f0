/* SPDX-License-Identifier: MIT */
/*
 * The calls a custom KVM VMM makes to give its guest a vPMU with libvpmu,
 * in one file and nothing but the public API (vpmu/vpmu.h) and KVM's
 * ioctls. The guest is a few real-mode instructions that program a
 * counter the way a perf driver does and read it back:
 *
 *   wrmsr IA32_PERFEVTSEL0 = INST_RETIRED.ANY_P | USR | OS | EN
 *   wrmsr IA32_PERF_GLOBAL_CTRL = 1
 *   rdmsr IA32_PMC0, rdmsr IA32_PERF_GLOBAL_STATUS
 *   out 0xf4 (exit)
 *
 * The VMM's part, in the order it happens:
 *   1. vpmu_vcpu_new() per vCPU, vpmu_vcpu_set_memory() with guest RAM;
 *   2. CPUID: vpmu_cpuid_patch() over KVM_GET_SUPPORTED_CPUID, then
 *      KVM_SET_CPUID2; IA32_MISC_ENABLE through vpmu_misc_enable_patch();
 *   3. vpmu_msr_list() -> KVM_X86_SET_MSR_FILTER deny bits, and
 *      KVM_CAP_X86_USER_SPACE_MSR, so every PMU MSR access exits;
 *   4. run loop: vpmu_vcpu_sync() before KVM_RUN, KVM_EXIT_X86_RDMSR/WRMSR
 *      -> vpmu_msr_read/write (error -> #GP), a PMI callback that the loop
 *      turns into an MSI/NMI per vpmu_lvt_decode() of the LVT entry, to
 *      the vCPU's own APIC ID, masking the entry alone (x2APIC MSR 834H
 *      with KVM_SET_MSRS; never KVM_SET_LAPIC, which rewrites the whole
 *      APIC and loses interrupts), then vpmu_pmi_delivered(), or
 *      vpmu_pmi_merged() when KVM_SIGNAL_MSI returns 0;
 *   5. RDPMC: KVM emulates it in the kernel, so write vpmu_rdpmc_peek() values
 *      into KVM's PMU counters (host-initiated KVM_SET_MSRS) before entry.
 *
 * Exits 77 (a skip for test harnesses) where /dev/kvm is absent.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vpmu/msr.h> /* APIC_LVTPC, MSR_X2APIC_LVTPC */
#include <vpmu/vpmu.h>

#define RAM_SIZE  (1u << 20)
#define CODE_ADDR 0x1000

/* 16-bit code (operand-size prefixes where 32-bit values are needed) */
static const uint8_t guest_code[] = {
	0x66, 0xb9, 0x86, 0x01, 0x00, 0x00, /* mov ecx, 0x186 (IA32_PERFEVTSEL0) */
	0x66, 0xb8, 0xc0, 0x00, 0x43, 0x00, /* mov eax, 0x4300c0 (EN|OS|USR, C0H) */
	0x66, 0x31, 0xd2,		    /* xor edx, edx */
	0x0f, 0x30,			    /* wrmsr */
	0x66, 0xb9, 0x8f, 0x03, 0x00, 0x00, /* mov ecx, 0x38f (IA32_PERF_GLOBAL_CTRL) */
	0x66, 0xb8, 0x01, 0x00, 0x00, 0x00, /* mov eax, 1 */
	0x0f, 0x30,			    /* wrmsr */
	0x66, 0xb9, 0xc1, 0x00, 0x00, 0x00, /* mov ecx, 0xc1 (IA32_PMC0) */
	0x0f, 0x32,			    /* rdmsr */
	0x66, 0xb9, 0x8e, 0x03, 0x00, 0x00, /* mov ecx, 0x38e (IA32_PERF_GLOBAL_STATUS) */
	0x0f, 0x32,			    /* rdmsr */
	0xe6, 0xf4,			    /* out 0xf4, al: done */
	0xf4,				    /* hlt */
};

struct vm {
	int kvm, fd, cpu;
	struct kvm_run *run;
	struct vpmu_vcpu *pmu;
	int pmi_pending;
};

static void die(const char *what)
{
	fprintf(stderr, "embed-kvm: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* libvpmu asks for a PMI: the loop delivers it before the next entry. */
static void on_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	(void) vcpu;
	((struct vm *) data)->pmi_pending = 1;
}

#define MSR_IA32_APICBASE 0x1b
#define APICBASE_EXTD	  (1u << 10) /* x2APIC mode */
#define APICBASE_EN	  (1u << 11)
#define X2APIC_ID	  0x802 /* x2APIC MSRs: 800H + xAPIC offset / 16 */

/*
 * The PMI as the guest's LVT performance-counter entry says. Hardware
 * sets the entry's mask bit on delivery. Never do that with KVM_GET_LAPIC
 * + KVM_SET_LAPIC: KVM_SET_LAPIC replaces the whole APIC state (IRR, ISR,
 * timer) with the copy, and an IPI or timer interrupt that arrived in
 * between is lost. In x2APIC mode the entry is an MSR that KVM_SET_MSRS
 * writes alone; in xAPIC mode KVM cannot write one register, so the entry
 * is only read and the guest's handler (which unmasks it anyway) keeps it.
 */
static void deliver_pmi(struct vm *vm)
{
	union {
		struct kvm_msrs h;
		uint8_t storage[sizeof(struct kvm_msrs) + 2 * sizeof(struct kvm_msr_entry)];
	} m;
	struct vpmu_lvt lvt;
	uint32_t v, id;
	int x2apic, r;

	vm->pmi_pending = 0;
	memset(&m, 0, sizeof(m));
	m.h.nmsrs = 1;
	m.h.entries[0].index = MSR_IA32_APICBASE;
	if (ioctl(vm->cpu, KVM_GET_MSRS, &m) != 1)
		die("KVM_GET_MSRS IA32_APIC_BASE");
	if (!(m.h.entries[0].data & APICBASE_EN))
		return; /* a disabled APIC delivers nothing */
	x2apic = !!(m.h.entries[0].data & APICBASE_EXTD);
	if (x2apic) {
		m.h.nmsrs = 2;
		m.h.entries[0] = (struct kvm_msr_entry){ .index = MSR_X2APIC_LVTPC };
		m.h.entries[1] = (struct kvm_msr_entry){ .index = X2APIC_ID };
		if (ioctl(vm->cpu, KVM_GET_MSRS, &m) != 2)
			die("KVM_GET_MSRS x2APIC LVT and ID");
		v = (uint32_t) m.h.entries[0].data;
		id = (uint32_t) m.h.entries[1].data;
	} else {
		struct kvm_lapic_state lapic; /* read only */

		if (ioctl(vm->cpu, KVM_GET_LAPIC, &lapic) < 0)
			die("KVM_GET_LAPIC");
		memcpy(&v, lapic.regs + APIC_LVTPC, 4);
		memcpy(&id, lapic.regs + 0x20, 4); /* APIC ID in bits 31:24 */
		id >>= 24;
	}
	vpmu_lvt_decode(v, &lvt);
	if (lvt.action == VPMU_LVT_DROP)
		return;
	if (x2apic) {
		m.h.nmsrs = 1;
		m.h.entries[0] =
			(struct kvm_msr_entry){ .index = MSR_X2APIC_LVTPC, .data = lvt.after };
		if (ioctl(vm->cpu, KVM_SET_MSRS, &m) != 1)
			die("KVM_SET_MSRS x2APIC LVT");
	}
	if (lvt.action == VPMU_LVT_NMI) {
		if (ioctl(vm->cpu, KVM_NMI, 0) < 0)
			die("KVM_NMI");
		vpmu_pmi_delivered(vm->pmu);
		return;
	}
	{
		/* to this vCPU's own APIC: physical destination, fixed, edge */
		struct kvm_msi msi = { .address_lo = 0xfee00000u | id << 12, .data = lvt.vector };

		r = ioctl(vm->fd, KVM_SIGNAL_MSI, &msi);
		if (r < 0)
			die("KVM_SIGNAL_MSI");
	}
	if (r == 0)
		vpmu_pmi_merged(vm->pmu); /* merged with the same vector pending in the IRR */
	else
		vpmu_pmi_delivered(vm->pmu);
}

/*
 * KVM_X86_SET_MSR_FILTER: one range over MSRs 0..2FFFH (a range's bitmap
 * is at most 600H bytes), a 0 bit for each PMU MSR.
 */
static void route_pmu_msrs(struct vm *vm)
{
	static uint8_t bitmap[0x3000 / 8];
	struct kvm_msr_filter filter = { .flags = KVM_MSR_FILTER_DEFAULT_ALLOW };
	struct kvm_enable_cap cap = { .cap = KVM_CAP_X86_USER_SPACE_MSR,
				      .args[0] = KVM_MSR_EXIT_REASON_FILTER };
	uint32_t msrs[1024];
	size_t n = vpmu_msr_list(vm->pmu, msrs, 1024);

	memset(bitmap, 0xff, sizeof(bitmap));
	for (size_t i = 0; i < n; i++)
		if (msrs[i] < 0x3000)
			bitmap[msrs[i] / 8] &= (uint8_t) ~(1u << (msrs[i] % 8));
	filter.ranges[0] =
		(struct kvm_msr_filter_range){ .flags = KVM_MSR_FILTER_READ | KVM_MSR_FILTER_WRITE,
					       .nmsrs = 0x3000,
					       .base = 0,
					       .bitmap = bitmap };
	if (ioctl(vm->fd, KVM_ENABLE_CAP, &cap) < 0 ||
	    ioctl(vm->fd, KVM_X86_SET_MSR_FILTER, &filter) < 0)
		die("routing PMU MSRs to userspace");
}

static void set_cpuid(struct vm *vm)
{
	struct kvm_cpuid2 *k = calloc(1, sizeof(*k) + 256 * sizeof(k->entries[0]));
	struct vpmu_cpuid_entry e[256];
	size_t nr;

	if (!k)
		die("calloc");
	k->nent = 256;
	if (ioctl(vm->kvm, KVM_GET_SUPPORTED_CPUID, k) < 0)
		die("KVM_GET_SUPPORTED_CPUID");
	for (nr = 0; nr < k->nent; nr++)
		e[nr] = (struct vpmu_cpuid_entry){ k->entries[nr].function, k->entries[nr].index,
						   k->entries[nr].eax,	    k->entries[nr].ebx,
						   k->entries[nr].ecx,	    k->entries[nr].edx };
	if (vpmu_cpuid_patch(vm->pmu, e, &nr, 256) < 0)
		die("vpmu_cpuid_patch");
	for (size_t i = 0; i < nr; i++) {
		uint32_t flags =
			i < k->nent ? k->entries[i].flags : KVM_CPUID_FLAG_SIGNIFCANT_INDEX;

		k->entries[i] = (struct kvm_cpuid_entry2){ .function = e[i].function,
							   .index = e[i].index,
							   .flags = flags,
							   .eax = e[i].eax,
							   .ebx = e[i].ebx,
							   .ecx = e[i].ecx,
							   .edx = e[i].edx };
	}
	k->nent = (uint32_t) nr;
	if (ioctl(vm->cpu, KVM_SET_CPUID2, k) < 0)
		die("KVM_SET_CPUID2");
	free(k);
}

/* Before each entry: guest RDPMC reads KVM's counters, so give them the vPMU's values. */
static void refresh_rdpmc_shadow(struct vm *vm)
{
	union {
		struct kvm_msrs h;
		uint8_t storage[sizeof(struct kvm_msrs) + 16 * sizeof(struct kvm_msr_entry)];
	} m;
	uint64_t v;

	memset(&m.h, 0, sizeof(m.h));
	for (uint32_t i = 0; m.h.nmsrs < 16 && vpmu_rdpmc_peek(vm->pmu, i, &v) == 0; i++)
		m.h.entries[m.h.nmsrs++] = (struct kvm_msr_entry){ .index = 0xc1 + i, .data = v };
	for (uint32_t i = 0; m.h.nmsrs < 16 && vpmu_rdpmc_peek(vm->pmu, 1u << 30 | i, &v) == 0; i++)
		m.h.entries[m.h.nmsrs++] = (struct kvm_msr_entry){ .index = 0x309 + i, .data = v };
	ioctl(vm->cpu, KVM_SET_MSRS, &m);
}

int main(void)
{
	struct vm vm = { 0 };
	struct vpmu_config cfg;
	struct vpmu_mem_region region;
	struct kvm_userspace_memory_region mem;
	struct kvm_sregs sregs;
	struct kvm_regs regs = { .rip = CODE_ADDR, .rflags = 2 };
	uint64_t status = 0, pmc0 = 0;
	uint8_t *ram;

	vm.kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm.kvm < 0) {
		printf("embed-kvm: /dev/kvm: %s: nothing to run here\n", strerror(errno));
		return 77;
	}
	vm.fd = ioctl(vm.kvm, KVM_CREATE_VM, 0);
	if (vm.fd < 0 || ioctl(vm.fd, KVM_CREATE_IRQCHIP, 0) < 0)
		die("KVM_CREATE_VM/IRQCHIP");
	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ram == MAP_FAILED)
		die("mmap");
	memcpy(ram + CODE_ADDR, guest_code, sizeof(guest_code));
	mem = (struct kvm_userspace_memory_region){ .memory_size = RAM_SIZE,
						    .userspace_addr = (uint64_t) (uintptr_t) ram };
	if (ioctl(vm.fd, KVM_SET_USER_MEMORY_REGION, &mem) < 0)
		die("KVM_SET_USER_MEMORY_REGION");
	vm.cpu = ioctl(vm.fd, KVM_CREATE_VCPU, 0);
	if (vm.cpu < 0)
		die("KVM_CREATE_VCPU");
	vm.run = mmap(NULL, (size_t) ioctl(vm.kvm, KVM_GET_VCPU_MMAP_SIZE, 0),
		      PROT_READ | PROT_WRITE, MAP_SHARED, vm.cpu, 0);
	if (vm.run == MAP_FAILED)
		die("mmap kvm_run");

	/* 1. the vPMU of this vCPU */
	vpmu_config_init(&cfg);
	cfg.model = "Icelake-Server";
	cfg.backend = VPMU_BACKEND_NONE; /* a real VMM picks a host-counter backend */
	cfg.pmi = on_pmi;
	cfg.pmi_data = &vm;
	if (vpmu_vcpu_new(&cfg, &vm.pmu) < 0) {
		fprintf(stderr, "embed-kvm: vpmu_vcpu_new failed\n");
		return 1;
	}
	region = (struct vpmu_mem_region){ 0, RAM_SIZE, ram };
	vpmu_vcpu_set_memory(vm.pmu, &region, 1);
	/* 2. and 3. */
	set_cpuid(&vm);
	route_pmu_msrs(&vm);

	if (ioctl(vm.cpu, KVM_GET_SREGS, &sregs) < 0)
		die("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(vm.cpu, KVM_SET_SREGS, &sregs) < 0 || ioctl(vm.cpu, KVM_SET_REGS, &regs) < 0)
		die("KVM_SET_SREGS/REGS");

	/* 4. and 5. */
	for (;;) {
		vpmu_vcpu_sync(vm.pmu);
		if (vm.pmi_pending)
			deliver_pmi(&vm);
		refresh_rdpmc_shadow(&vm);
		if (ioctl(vm.cpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR)
				continue; /* a host counter's overflow signal */
			die("KVM_RUN");
		}
		switch (vm.run->exit_reason) {
		case KVM_EXIT_X86_RDMSR: {
			uint64_t v = 0;

			vm.run->msr.error = vpmu_msr_read(vm.pmu, vm.run->msr.index, &v) < 0;
			vm.run->msr.data = v;
			if (vm.run->msr.index == 0xc1)
				pmc0 = v;
			if (vm.run->msr.index == 0x38e)
				status = v;
			break;
		}
		case KVM_EXIT_X86_WRMSR:
			vm.run->msr.error =
				vpmu_msr_write(vm.pmu, vm.run->msr.index, vm.run->msr.data) < 0;
			break;
		case KVM_EXIT_IO:
			if (vm.run->io.port == 0xf4) {
				printf("embed-kvm: guest programmed PERFEVTSEL0 and GLOBAL_CTRL "
				       "through "
				       "libvpmu; it read PMC0 = %llu, GLOBAL_STATUS = %#llx\n",
				       (unsigned long long) pmc0, (unsigned long long) status);
				vpmu_vcpu_free(vm.pmu);
				return 0;
			}
			break;
		default:
			fprintf(stderr, "embed-kvm: unexpected exit %u\n", vm.run->exit_reason);
			return 1;
		}
	}
}
