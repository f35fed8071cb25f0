/* SPDX-License-Identifier: MIT */
/*
 * The KVM vCPU backend (see kvm.h). One thread per vCPU; the platform
 * devices are shared under one lock. Built everywhere, run only where
 * /dev/kvm exists: the data it hands KVM is built by kvm-setup.c and
 * bzimage.c, which unit tests check without the device.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "boot-tables.h"
#include "bzimage.h"
#include "kvm-pmi.h"
#include "kvm-setup.h"
#include "kvm.h"
#include "platform.h"
#include "vpmu/msr.h"
#include "vpmu/pebs.h" /* enum pebs_gpr: the order of vpmu_guest_regs.gpr */

#define KVM_API_VERSION_WANTED 12
#define TSS_ADDR	       0xfffbd000u /* 3 pages below the BIOS area, as KVM wants for VMX */
#define IDENTITY_MAP_ADDR      0xfffbc000u
#define RAM_LIMIT	       0xc0000000ull /* the PCI hole starts at 3 GiB */
#define KICK_SIGNAL	       SIGUSR2	     /* makes KVM_RUN return on another vCPU thread */
#define MSR_IA32_TSC	       0x10
#define MAX_SHADOW	       16

/* Linux: RAM from 1 MiB up (bzimage_load_pc lays out the first MiB) */
#define LINUX_LOW_MEM 0x100000ull

struct kvm_cpu {
	struct kvm_vm *vm;
	unsigned int index;
	int fd;
	struct kvm_run *run;
	struct vpmu_vcpu *pmu;
	pthread_t thread;
	bool pmi_pending;
	bool pmi_warned; /* a PMI ioctl failed: said once */
	/* counter MSRs KVM refused as RDPMC shadow: bit i IA32_PMCi, 32+i IA32_FIXED_CTRi */
	uint64_t shadow_refused;
	struct kvm_vm_stats st; /* this vCPU's share, summed by kvm_vm_stats */
	int error;
	char err[256];
};

struct kvm_vm {
	struct kvm_vm_config cfg;
	int kvm, fd;
	size_t run_size;
	uint8_t *ram;
	uint64_t ram_size;
	struct kvm_cpu cpus[KVM_VM_MAX_VCPUS];
	unsigned int nr_cpus;
	struct kvm_msr_filter_plan filter;
	pthread_mutex_t lock; /* platform, done, stats */
	struct platform plat;
	bool done;
	char unpack_note[160]; /* kvm_vm_boot_linux left the kernel packed: why */
};

void kvm_vm_config_init(struct kvm_vm_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->model = "Skylake-Server";
	cfg->mem_size = 128ull << 20;
	cfg->smp = 1;
	cfg->serial_out = stdout;
	cfg->backend = VPMU_BACKEND_NONE;
}

/*
 * The platform's ISA interrupt lines go to KVM's in-kernel 8259As and I/O
 * APIC (KVM_CREATE_IRQCHIP), which decode ports 20H-21H, A0H-A1H and
 * 4D0H-4D1H themselves: those never exit to the platform. A line KVM
 * refuses can only be a VMM bug; the guest sees no interrupt.
 */
static void irq_line(void *data, unsigned int line, bool level)
{
	struct kvm_vm *vm = data;
	struct kvm_irq_level irq = { .irq = line, .level = level };

	(void) ioctl(vm->fd, KVM_IRQ_LINE, &irq);
}

static int set_err(char *err, size_t errlen, int r, const char *what)
{
	snprintf(err, errlen, "%s: %s", what, strerror(r < 0 ? -r : r));
	return r < 0 ? r : -r;
}

static bool has_cap(int kvm, long cap)
{
	return ioctl(kvm, KVM_CHECK_EXTENSION, cap) > 0;
}

int kvm_probe(char *why, size_t whylen)
{
	static const struct {
		long cap;
		const char *name;
	} caps[] = {
		{ KVM_CAP_IRQCHIP, "an in-kernel irqchip (KVM_CAP_IRQCHIP)" },
		{ KVM_CAP_SIGNAL_MSI, "KVM_SIGNAL_MSI (KVM_CAP_SIGNAL_MSI)" },
		{ KVM_CAP_X86_USER_SPACE_MSR,
		  "MSR exits to userspace (KVM_CAP_X86_USER_SPACE_MSR, Linux 5.10+)" },
		{ KVM_CAP_X86_MSR_FILTER, "MSR filters (KVM_CAP_X86_MSR_FILTER, Linux 5.10+)" },
	};
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (kvm < 0) {
		snprintf(why, whylen, "/dev/kvm: %s", strerror(errno));
		return -errno;
	}
	if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION_WANTED) {
		snprintf(why, whylen, "/dev/kvm speaks an API version other than %d",
			 KVM_API_VERSION_WANTED);
		close(kvm);
		return -ENOTSUP;
	}
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (!has_cap(kvm, caps[i].cap)) {
			snprintf(why, whylen, "this KVM lacks %s", caps[i].name);
			close(kvm);
			return -ENOTSUP;
		}
	}
	close(kvm);
	return 0;
}

/* ---- vPMU callbacks (on the vCPU's thread) ---- */

static void pmi_cb(void *data, struct vpmu_vcpu *vcpu)
{
	struct kvm_cpu *c = data;

	(void) vcpu;
	c->pmi_pending = true; /* delivered before the next KVM_RUN */
}

static int regs_cb(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *r)
{
	struct kvm_cpu *c = data;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_fpu fpu;
	union {
		struct kvm_msrs h;
		uint8_t storage[sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)];
	} tsc;

	(void) vcpu;
	memset(&tsc, 0, sizeof(tsc));
	tsc.h.nmsrs = 1;
	tsc.h.entries[0].index = MSR_IA32_TSC;
	if (ioctl(c->fd, KVM_GET_REGS, &regs) < 0 || ioctl(c->fd, KVM_GET_SREGS, &sregs) < 0 ||
	    ioctl(c->fd, KVM_GET_FPU, &fpu) < 0 || ioctl(c->fd, KVM_GET_MSRS, &tsc) != 1)
		return -errno ? -errno : -EIO; /* the record waits for the next sync */
	memset(r, 0, sizeof(*r));
	r->rip = regs.rip;
	r->rflags = regs.rflags;
	r->gpr[PEBS_RAX] = regs.rax, r->gpr[PEBS_RCX] = regs.rcx, r->gpr[PEBS_RDX] = regs.rdx;
	r->gpr[PEBS_RBX] = regs.rbx, r->gpr[PEBS_RSP] = regs.rsp, r->gpr[PEBS_RBP] = regs.rbp;
	r->gpr[PEBS_RSI] = regs.rsi, r->gpr[PEBS_RDI] = regs.rdi, r->gpr[PEBS_R8] = regs.r8;
	r->gpr[PEBS_R9] = regs.r9, r->gpr[PEBS_R10] = regs.r10, r->gpr[PEBS_R11] = regs.r11;
	r->gpr[PEBS_R12] = regs.r12, r->gpr[PEBS_R13] = regs.r13, r->gpr[PEBS_R14] = regs.r14;
	r->gpr[PEBS_R15] = regs.r15;
	memcpy(r->xmm, fpu.xmm, sizeof(r->xmm));
	r->cr0 = sregs.cr0;
	r->cr3 = sregs.cr3;
	r->cr4 = sregs.cr4;
	r->efer = sregs.efer;
	r->tsc = tsc.h.entries[0].data;
	r->cpl = sregs.ss.dpl;
	r->long_mode = sregs.cs.l && (sregs.efer & (1ull << 10));
	r->sse = sregs.cr4 & (1ull << 9);
	return 0;
}

/* ---- setup ---- */

static void kick_handler(int sig)
{
	(void) sig; /* only makes KVM_RUN return with EINTR */
}

#define CPUID_1_EDX_DS (1u << 21)

/* One warning line through the VMM's vPMU log callback, if it gave one. */
__attribute__((format(printf, 2, 3))) static void kvm_warn(struct kvm_cpu *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!c->vm->cfg.pmu_log)
		return;
	memcpy(msg, "kvm: ", 5);
	va_start(ap, fmt);
	vsnprintf(msg + 5, sizeof(msg) - 5, fmt, ap);
	va_end(ap);
	c->vm->cfg.pmu_log(c->vm->cfg.pmu_log_data, VPMU_LOG_WARNING, msg);
}

/* CPUID leaf 01H of vCPU c as KVM answers it (KVM_GET_CPUID2); false if KVM does not say. */
static bool kvm_cpuid_1(struct kvm_cpu *c, struct kvm_cpuid_entry2 *ret)
{
	struct {
		struct kvm_cpuid2 h;
		struct kvm_cpuid_entry2 e[256];
	} got;

	got.h.nent = 256;
	if (ioctl(c->fd, KVM_GET_CPUID2, &got) < 0)
		return false;
	for (uint32_t k = 0; k < got.h.nent; k++)
		if (got.h.entries[k].function == 1) {
			*ret = got.h.entries[k];
			return true;
		}
	return false;
}

/*
 * Whether KVM kept the DS bit of CPUID leaf 01H (EDX[21]) as set. Stock
 * KVM does; kvm-pvm hosts give the guest the host's leaf 01H instead,
 * where an AMD host has no DS. True if KVM dropped it.
 */
static bool kvm_hides_ds(struct kvm_cpu *c, const struct kvm_cpuid_entry2 *set, size_t nr)
{
	struct kvm_cpuid_entry2 got;

	if (!kvm_cpuid_1(c, &got))
		return false;
	for (size_t i = 0; i < nr; i++)
		if (set[i].function == 1 && (set[i].edx & CPUID_1_EDX_DS))
			return !(got.edx & CPUID_1_EDX_DS);
	return false;
}

/* IA32_MISC_ENABLE stays KVM's, with the PMU bits (7, 11, 12) as the model says. */
static int misc_enable_patch(struct kvm_cpu *c, char *err, size_t errlen)
{
	union {
		struct kvm_msrs h;
		uint8_t storage[sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)];
	} m;

	memset(&m, 0, sizeof(m));
	m.h.nmsrs = 1;
	m.h.entries[0].index = MSR_IA32_MISC_ENABLE;
	if (ioctl(c->fd, KVM_GET_MSRS, &m) != 1)
		return set_err(err, errlen, -EIO, "reading IA32_MISC_ENABLE");
	m.h.entries[0].data = vpmu_misc_enable_patch(c->pmu, m.h.entries[0].data);
	if (ioctl(c->fd, KVM_SET_MSRS, &m) != 1)
		return set_err(err, errlen, -EIO, "writing IA32_MISC_ENABLE");
	return 0;
}

static int cpu_init(struct kvm_vm *vm, unsigned int i, const struct kvm_cpuid2 *supported,
		    char *err, size_t errlen)
{
	struct kvm_cpu *c = &vm->cpus[i];
	struct vpmu_config vc;
	struct vpmu_mem_region region = { 0, vm->ram_size, vm->ram };
	union {
		struct kvm_cpuid2 h;
		uint8_t storage[sizeof(struct kvm_cpuid2) + 256 * sizeof(struct kvm_cpuid_entry2)];
	} cpuid;
	int r;

	c->vm = vm;
	c->index = i;
	c->fd = ioctl(vm->fd, KVM_CREATE_VCPU, (unsigned long) i);
	if (c->fd < 0)
		return set_err(err, errlen, -errno, "KVM_CREATE_VCPU");
	c->run = mmap(NULL, vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->run == MAP_FAILED) {
		c->run = NULL;
		return set_err(err, errlen, -errno, "mmap of kvm_run");
	}
	vpmu_config_init(&vc);
	vc.model = vm->cfg.model;
	vc.version = vm->cfg.pmu_version ? vm->cfg.pmu_version : -1;
	vc.backend = vm->cfg.backend;
	vc.pmi = pmi_cb;
	vc.pmi_data = c;
	vc.regs = regs_cb;
	vc.regs_data = c;
	vc.filter = vm->cfg.pmu_filter;
	vc.signo = vm->cfg.signo ? vm->cfg.signo : -1;
	vc.log = vm->cfg.pmu_log;
	vc.log_data = vm->cfg.pmu_log_data;
	vc.log_level = VPMU_LOG_WARNING;
	vc.linear_bits = 48;
	for (unsigned int e = 0; e < supported->nent; e++) {
		const struct kvm_cpuid_entry2 *k = &supported->entries[e];

		if (k->function == 0x80000008 && ((k->eax >> 8) & 0xff) == 57)
			vc.linear_bits = 57; /* the host has 5-level paging, so has the guest */
		/* the guest's leaf 7 is KVM's: HLE (EBX[4]) or RTM (EBX[11]) makes IN_TX valid */
		if (k->function == 7 && k->index == 0 && (k->ebx & (1u << 4 | 1u << 11)))
			vc.tsx = true;
	}
	for (;;) {
		r = vpmu_vcpu_new(&vc, &c->pmu);
		if (r < 0) {
			snprintf(err, errlen,
				 r == -ENOENT
					 ? "unknown CPU model '%s' (vpmu-vmm --help lists them)"
					 : "cannot create the vPMU for '%s'",
				 vm->cfg.model);
			return r;
		}
		vpmu_vcpu_set_memory(c->pmu, &region, 1);
		r = kvm_cpuid_build(c->pmu, supported->entries, supported->nent, cpuid.h.entries,
				    256);
		if (r < 0)
			return set_err(err, errlen, r, "building the CPUID table");
		cpuid.h.nent = (uint32_t) r;
		/* CPUID.01H:EBX[31:24] and leaf 0BH carry the APIC ID: KVM fills them per vCPU */
		if (ioctl(c->fd, KVM_SET_CPUID2, &cpuid) < 0)
			return set_err(err, errlen, -errno, "KVM_SET_CPUID2");
		if ((vc.flags & VPMU_CONFIG_NO_PEBS) || !kvm_hides_ds(c, cpuid.h.entries, r))
			break;
		/* a guest that sees no DS must not find DS_AREA and PEBS answering either */
		if (i == 0)
			kvm_warn(c,
				 "this KVM hides DS (CPUID.01H:EDX[21]) from the guest: the vPMU "
				 "runs %s without DS and PEBS to match",
				 vm->cfg.model);
		vpmu_vcpu_free(c->pmu);
		c->pmu = NULL;
		vc.flags |= VPMU_CONFIG_NO_PEBS;
	}
	return misc_enable_patch(c, err, errlen);
}

static int check_vm_config(const struct kvm_vm_config *cfg, char *err, size_t errlen)
{
	if (!cfg->mem_size || cfg->mem_size & 0xfff || cfg->mem_size > RAM_LIMIT) {
		snprintf(err, errlen, "RAM size must be a multiple of 4 KiB up to 3 GiB under KVM");
		return -EINVAL;
	}
	if (!cfg->smp || cfg->smp > KVM_VM_MAX_VCPUS) {
		snprintf(err, errlen, "--smp %u: use 1 to %u", cfg->smp, KVM_VM_MAX_VCPUS);
		return -EINVAL;
	}
	return 0;
}

/* /dev/kvm, the VM, and what a VM needs before it has memory: TSS, identity map, irqchip */
static int vm_create(struct kvm_vm *vm, char *err, size_t errlen)
{
	uint64_t ident = IDENTITY_MAP_ADDR;

	vm->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->kvm < 0)
		return set_err(err, errlen, -errno, "/dev/kvm");
	vm->fd = ioctl(vm->kvm, KVM_CREATE_VM, 0);
	if (vm->fd < 0)
		return set_err(err, errlen, -errno, "KVM_CREATE_VM");
	vm->run_size = (size_t) ioctl(vm->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (ioctl(vm->fd, KVM_SET_TSS_ADDR, (unsigned long) TSS_ADDR) < 0 ||
	    ioctl(vm->fd, KVM_SET_IDENTITY_MAP_ADDR, &ident) < 0 ||
	    ioctl(vm->fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return set_err(err, errlen, -errno,
			       "setting up the VM (TSS, identity map, irqchip)");
	return 0;
}

/* Guest RAM: anonymous memory as memory slot 0, from guest-physical 0. */
static int ram_init(struct kvm_vm *vm, char *err, size_t errlen)
{
	struct kvm_userspace_memory_region mem;

	vm->ram_size = vm->cfg.mem_size;
	vm->ram = mmap(NULL, vm->ram_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (vm->ram == MAP_FAILED) {
		vm->ram = NULL;
		return set_err(err, errlen, -errno, "guest RAM");
	}
	mem = (struct kvm_userspace_memory_region){ .slot = 0,
						    .guest_phys_addr = 0,
						    .memory_size = vm->ram_size,
						    .userspace_addr =
							    (uint64_t) (uintptr_t) vm->ram };
	if (ioctl(vm->fd, KVM_SET_USER_MEMORY_REGION, &mem) < 0)
		return set_err(err, errlen, -errno, "KVM_SET_USER_MEMORY_REGION");
	return 0;
}

/* Every vCPU, from KVM's supported CPUID; vm->nr_cpus counts those to free. */
static int cpus_init(struct kvm_vm *vm, char *err, size_t errlen)
{
	struct kvm_cpuid2 *supported;
	int r = 0;

	supported = calloc(1, sizeof(*supported) + 256 * sizeof(supported->entries[0]));
	if (!supported) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	supported->nent = 256;
	if (ioctl(vm->kvm, KVM_GET_SUPPORTED_CPUID, supported) < 0) {
		r = set_err(err, errlen, -errno, "KVM_GET_SUPPORTED_CPUID");
		goto out;
	}
	for (unsigned int i = 0; i < vm->cfg.smp; i++) {
		r = cpu_init(vm, i, supported, err, errlen);
		vm->nr_cpus = i + 1;
		if (r < 0)
			goto out;
	}
out:
	free(supported);
	return r;
}

/* every PMU MSR of the model to userspace, nothing else (vCPU 0 lists the model's) */
static int msr_filter_init(struct kvm_vm *vm, char *err, size_t errlen)
{
	struct kvm_enable_cap cap = { .cap = KVM_CAP_X86_USER_SPACE_MSR };
	uint32_t msrs[4096];
	size_t nmsrs;
	int r;

	nmsrs = vpmu_msr_list(vm->cpus[0].pmu, msrs, sizeof(msrs) / sizeof(msrs[0]));
	r = kvm_msr_filter_build(msrs, nmsrs, &vm->filter);
	if (r < 0)
		return set_err(err, errlen, r, "building the MSR filter");
	cap.args[0] = KVM_MSR_EXIT_REASON_FILTER;
	if (ioctl(vm->fd, KVM_ENABLE_CAP, &cap) < 0 ||
	    ioctl(vm->fd, KVM_X86_SET_MSR_FILTER, &vm->filter.filter) < 0)
		return set_err(err, errlen, -errno, "routing PMU MSRs to userspace (MSR filter)");
	return 0;
}

/* The signals that only make KVM_RUN return: the kick, and the vPMU's own if it has one. */
static void kick_signals_init(const struct kvm_vm_config *cfg)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler;
	sigaction(KICK_SIGNAL, &sa, NULL);
	if (cfg->signo)
		sigaction(cfg->signo, &sa, NULL);
}

int kvm_vm_new(const struct kvm_vm_config *cfg, struct kvm_vm **ret, char *err, size_t errlen)
{
	struct kvm_vm *vm;
	int r;

	r = check_vm_config(cfg, err, errlen);
	if (r < 0)
		return r;
	r = kvm_probe(err, errlen);
	if (r < 0)
		return r;
	vm = calloc(1, sizeof(*vm));
	if (!vm) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	vm->cfg = *cfg;
	vm->fd = -1;
	pthread_mutex_init(&vm->lock, NULL);
	r = vm_create(vm, err, errlen);
	if (r < 0)
		goto fail;
	r = ram_init(vm, err, errlen);
	if (r < 0)
		goto fail;
	platform_init(&vm->plat, cfg->serial_out, vm->ram_size, (uint16_t) cfg->smp);
	platform_set_irq(&vm->plat, irq_line, vm);
	r = cpus_init(vm, err, errlen);
	if (r < 0)
		goto fail;
	r = msr_filter_init(vm, err, errlen);
	if (r < 0)
		goto fail;
	kick_signals_init(cfg);
	*ret = vm;
	return 0;
fail:
	kvm_vm_free(vm);
	return r;
}

void kvm_vm_free(struct kvm_vm *vm)
{
	if (!vm)
		return;
	for (unsigned int i = 0; i < vm->nr_cpus; i++) {
		struct kvm_cpu *c = &vm->cpus[i];

		vpmu_vcpu_free(c->pmu);
		if (c->run)
			munmap(c->run, vm->run_size);
		if (c->fd >= 0)
			close(c->fd);
	}
	if (vm->ram)
		munmap(vm->ram, vm->ram_size);
	if (vm->fd >= 0)
		close(vm->fd);
	if (vm->kvm >= 0)
		close(vm->kvm);
	pthread_mutex_destroy(&vm->lock);
	free(vm);
}

struct vmm_ram kvm_vm_ram(struct kvm_vm *vm)
{
	return (struct vmm_ram){ vm->ram, vm->ram_size };
}

struct vpmu_vcpu *kvm_vm_vpmu(struct kvm_vm *vm, unsigned int cpu)
{
	return cpu < vm->nr_cpus ? vm->cpus[cpu].pmu : NULL;
}

void kvm_vm_stats(struct kvm_vm *vm, struct kvm_vm_stats *ret)
{
	/* read after kvm_vm_run returned: the vCPU threads are gone */
	memset(ret, 0, sizeof(*ret));
	for (unsigned int i = 0; i < vm->nr_cpus; i++) {
		const struct kvm_vm_stats *s = &vm->cpus[i].st;

		ret->exits += s->exits;
		ret->msr_exits += s->msr_exits;
		ret->io_exits += s->io_exits;
		ret->pmis += s->pmis;
		ret->pmis_merged += s->pmis_merged;
		ret->nmis += s->nmis;
		ret->shadow_writes += s->shadow_writes;
		ret->signals += s->signals;
	}
}

/* ---- boot ---- */

static void flat_seg(struct kvm_segment *s, uint16_t sel, bool code, bool l)
{
	*s = (struct kvm_segment){ .base = 0,
				   .limit = 0xffffffff,
				   .selector = sel,
				   .type = code ? 11 : 3,
				   .present = 1,
				   .dpl = 0,
				   .db = code && l ? 0 : 1,
				   .s = 1,
				   .l = l,
				   .g = 1 };
}

static int enter_long_mode(struct kvm_cpu *c, uint64_t cr3, uint64_t gdt, uint16_t gdt_limit,
			   uint16_t cs, uint16_t ds, char *err, size_t errlen)
{
	struct kvm_sregs s;

	if (ioctl(c->fd, KVM_GET_SREGS, &s) < 0)
		return set_err(err, errlen, -errno, "KVM_GET_SREGS");
	flat_seg(&s.cs, cs, true, true);
	flat_seg(&s.ds, ds, false, false);
	s.es = s.fs = s.gs = s.ss = s.ds;
	s.gdt.base = gdt;
	s.gdt.limit = gdt_limit;
	s.cr0 = 0x80050033; /* PG AM WP NE ET MP PE, as the emulator enters ELF64 kernels */
	s.cr3 = cr3;
	s.cr4 = 0x620;	/* OSXMMEXCPT OSFXSR PAE */
	s.efer = 0x500; /* LMA LME */
	if (ioctl(c->fd, KVM_SET_SREGS, &s) < 0)
		return set_err(err, errlen, -errno, "KVM_SET_SREGS");
	return 0;
}

int kvm_vm_boot(struct kvm_vm *vm, const struct vmm_boot *boot, char *err, size_t errlen)
{
	struct kvm_cpu *c = &vm->cpus[0]; /* the others wait for INIT/SIPI in the irqchip */
	struct kvm_regs regs = { .rflags = 2, .rip = boot->entry };
	int r;

	if (boot->kind == VMM_BOOT_ELF64) {
		r = enter_long_mode(c, boot->cr3, boot->gdt, 3 * 8 - 1, 0x08, 0x10, err, errlen);
		if (r < 0)
			return r;
		regs.rsp = boot->stack;
	} else {
		struct kvm_sregs s;

		/* multiboot 0.6.96 §3.2: 32-bit flat segments, paging off, GDTR not to be trusted
		 */
		if (ioctl(c->fd, KVM_GET_SREGS, &s) < 0)
			return set_err(err, errlen, -errno, "KVM_GET_SREGS");
		flat_seg(&s.cs, 0x08, true, false);
		flat_seg(&s.ds, 0x10, false, false);
		s.es = s.fs = s.gs = s.ss = s.ds;
		s.cr0 = 0x11; /* ET PE */
		s.cr4 = 0;
		s.efer = 0;
		if (ioctl(c->fd, KVM_SET_SREGS, &s) < 0)
			return set_err(err, errlen, -errno, "KVM_SET_SREGS");
		regs.rax = 0x2badb002;
		regs.rbx = boot->mb_info;
	}
	if (ioctl(c->fd, KVM_SET_REGS, &regs) < 0)
		return set_err(err, errlen, -errno, "KVM_SET_REGS");
	return 0;
}

/*
 * The 64-bit boot protocol through bzimage_load, as on the emulator: RAM
 * below the EBDA, the BIOS area (reserved) with the MP and ACPI tables of
 * boot-tables.c, then the rest of RAM. The kernel is inflated here where
 * it can be: the guest's own decompressor runs at CPL 0 from identity-mapped
 * low memory, which a KVM without hardware virtualization (kvm-pvm)
 * emulates instruction by instruction, minutes for one XZ payload.
 */
int kvm_vm_boot_linux(struct kvm_vm *vm, const void *image, size_t size, const char *cmdline,
		      const void *initrd, size_t initrd_size, char *err, size_t errlen)
{
	struct kvm_cpu *c = &vm->cpus[0];
	struct guest_range high;
	struct kvm_cpuid_entry2 leaf1;
	struct bzimage_load_config cfg;
	struct bzimage_entry e;
	struct boot_tables_config bt = { .cpus = vm->nr_cpus };
	struct kvm_regs regs = { .rflags = 2 };
	int r;

	if (vm->ram_size <= LINUX_LOW_MEM) {
		snprintf(err, errlen, "a Linux guest needs more than 1 MiB of RAM: raise --mem");
		return -ENOMEM;
	}
	high = (struct guest_range){ LINUX_LOW_MEM, vm->ram_size - LINUX_LOW_MEM,
				     vm->ram + LINUX_LOW_MEM, E820_RAM };
	if (kvm_cpuid_1(c, &leaf1)) { /* the MP table's processor entries carry it */
		bt.cpu_signature = leaf1.eax;
		bt.cpu_features = leaf1.edx;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.image = image;
	cfg.image_size = size;
	cfg.cmdline = cmdline;
	cfg.initrd = initrd;
	cfg.initrd_size = initrd_size;
	r = bzimage_load_pc(vm->ram, &high, 1, &bt, &cfg, &e, err, errlen);
	if (r < 0)
		return r;
	snprintf(vm->unpack_note, sizeof(vm->unpack_note), "%s", e.unpacked ? "" : e.unpack_note);
	r = enter_long_mode(c, e.cr3, e.gdt_base, e.gdt_limit, e.cs, e.ds, err, errlen);
	if (r < 0)
		return r;
	regs.rip = e.rip;
	regs.rsi = e.rsi;
	if (ioctl(c->fd, KVM_SET_REGS, &regs) < 0)
		return set_err(err, errlen, -errno, "KVM_SET_REGS");
	return 0;
}

const char *kvm_vm_unpack_note(const struct kvm_vm *vm)
{
	return vm->unpack_note[0] ? vm->unpack_note : NULL;
}

/* ---- running ---- */

static void stop_all(struct kvm_vm *vm)
{
	vm->done = true;
	for (unsigned int i = 0; i < vm->nr_cpus; i++) {
		vm->cpus[i].run->immediate_exit = 1;
		if (vm->cpus[i].thread && !pthread_equal(vm->cpus[i].thread, pthread_self()))
			pthread_kill(vm->cpus[i].thread, KICK_SIGNAL);
	}
}

static int cpu_fail(struct kvm_cpu *c, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int cpu_fail(struct kvm_cpu *c, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	c->error = r;
	pthread_mutex_lock(&c->vm->lock);
	stop_all(c->vm);
	pthread_mutex_unlock(&c->vm->lock);
	return r;
}

static int cpu_vcpu_ioctl(void *ctx, unsigned long request, void *arg)
{
	return ioctl(((struct kvm_cpu *) ctx)->fd, request, arg);
}

static int cpu_vm_ioctl(void *ctx, unsigned long request, void *arg)
{
	return ioctl(((struct kvm_cpu *) ctx)->vm->fd, request, arg);
}

static const struct kvm_pmi_ops cpu_pmi_ops = { cpu_vcpu_ioctl, cpu_vm_ioctl };

/*
 * Deliver the PMI the vPMU asked for as the LVT performance-counter entry
 * says, to this vCPU's own APIC ID, masking the entry as the local APIC
 * does (x2APIC mode) without rewriting the rest of the APIC: see
 * kvm-pmi.h. GLOBAL_STATUS was set by the core before it asked.
 */
static void deliver_pmi(struct kvm_cpu *c)
{
	int r;

	c->pmi_pending = false;
	r = kvm_pmi_deliver(&cpu_pmi_ops, c, c->pmu);
	switch (r) {
	case KVM_PMI_DELIVERED_NMI:
		c->st.nmis++;
		/* fall through */
	case KVM_PMI_DELIVERED:
		c->st.pmis++;
		break;
	case KVM_PMI_MERGED:
		c->st.pmis_merged++;
		break;
	case KVM_PMI_DROPPED:
		vpmu_pmi_dropped(c->pmu); /* masked LVT or APIC off: lost, as on hardware */
		break;
	default:
		if (!c->pmi_warned)
			kvm_warn(c,
				 "vCPU %u: a PMI could not be delivered: %s (later ones are "
				 "counted as requested, not delivered)",
				 c->index, strerror(-r));
		c->pmi_warned = true;
		break;
	}
}

static uint64_t shadow_bit(uint32_t msr)
{
	return msr >= MSR_CORE_PERF_FIXED_CTR0 ? 1ull << (32 + msr - MSR_CORE_PERF_FIXED_CTR0)
					       : 1ull << (msr - MSR_IA32_PMC0);
}

/*
 * The guest's RDPMC reads KVM's shadow PMU: bring it up to the vPMU's
 * values. KVM_SET_MSRS stops at the first MSR it refuses (its own PMU has
 * fewer counters than the model, or none at all); that one is left out
 * from then on, the rest are written, and one line says so. Without this a
 * host with no KVM PMU would pay a failing ioctl, and a kernel log line,
 * on every exit.
 */
static void write_shadow(struct kvm_cpu *c)
{
	struct kvm_msr_entry all[MAX_SHADOW];
	union {
		struct kvm_msrs h;
		uint8_t storage[sizeof(struct kvm_msrs) +
				MAX_SHADOW * sizeof(struct kvm_msr_entry)];
	} m;
	size_t n = kvm_rdpmc_shadow(c->pmu, all, MAX_SHADOW);
	uint64_t refused = 0;
	bool wrote = false;

	memset(&m.h, 0, sizeof(m.h));
	for (size_t i = 0; i < n; i++)
		if (!(c->shadow_refused & shadow_bit(all[i].index)))
			m.h.entries[m.h.nmsrs++] = all[i];
	while (m.h.nmsrs) {
		int r = ioctl(c->fd, KVM_SET_MSRS, &m);

		if (r == (int) m.h.nmsrs) {
			wrote = true;
			break;
		}
		if (r < 0) {
			for (uint32_t i = 0; i < m.h.nmsrs; i++)
				refused |= shadow_bit(m.h.entries[i].index);
			break;
		}
		wrote |= r > 0;
		refused |= shadow_bit(m.h.entries[r].index);
		m.h.nmsrs -= (uint32_t) r + 1;
		memmove(m.h.entries, m.h.entries + r + 1, m.h.nmsrs * sizeof(m.h.entries[0]));
	}
	if (wrote)
		c->st.shadow_writes++;
	if (!refused)
		return;
	c->shadow_refused |= refused;
	kvm_warn(c,
		 "vCPU %u: KVM's own PMU refuses the RDPMC shadow of GP counters %#x and "
		 "fixed counters %#x (bitmaps; KVM has fewer counters than the model, or no PMU "
		 "on this host): a guest RDPMC of those reads KVM's value, not the vPMU's; "
		 "RDMSR reads the right one",
		 c->index, (unsigned int) (uint32_t) refused, (unsigned int) (refused >> 32));
}

static int handle_io(struct kvm_cpu *c)
{
	struct kvm_run *run = c->run;
	uint8_t *data = (uint8_t *) run + run->io.data_offset;
	bool write = run->io.direction == KVM_EXIT_IO_OUT;
	int r = 0;

	pthread_mutex_lock(&c->vm->lock);
	c->st.io_exits++;
	for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size) {
		uint32_t v = 0;

		if (write)
			memcpy(&v, data, run->io.size);
		/* unknown ports read as all ones and ignore writes, as on a PC */
		if (platform_io(&c->vm->plat, run->io.port, run->io.size, write, &v) < 0)
			v = 0xffffffff;
		if (!write)
			memcpy(data, &v, run->io.size);
	}
	if (c->vm->plat.exited) {
		stop_all(c->vm);
		r = 1;
	}
	pthread_mutex_unlock(&c->vm->lock);
	return r;
}

static void handle_msr(struct kvm_cpu *c, bool write)
{
	struct kvm_run *run = c->run;
	int r;

	c->st.msr_exits++;
	if (write) {
		r = vpmu_msr_write(c->pmu, run->msr.index, run->msr.data);
	} else {
		uint64_t v = 0;

		r = vpmu_msr_read(c->pmu, run->msr.index, &v);
		run->msr.data = v;
	}
	/* -EINVAL (#GP per the model), -ENXIO (the model lacks it), -ENOENT: all #GP */
	run->msr.error = r < 0;
}

static void *cpu_thread(void *arg)
{
	struct kvm_cpu *c = arg;
	struct kvm_vm *vm = c->vm;
	sigset_t unblock;

	sigemptyset(&unblock);
	sigaddset(&unblock, KICK_SIGNAL);
	if (vm->cfg.signo)
		sigaddset(&unblock, vm->cfg.signo);
	pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);
	for (;;) {
		int r;

		vpmu_vcpu_sync(c->pmu);
		if (c->pmi_pending)
			deliver_pmi(c);
		write_shadow(c);
		if (vm->done)
			return NULL;
		r = ioctl(c->fd, KVM_RUN, 0);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				c->st.signals++;
				c->run->immediate_exit = vm->done;
				continue; /* a host counter's signal, or a kick */
			}
			cpu_fail(c, -errno, "KVM_RUN on vCPU %u: %s", c->index, strerror(errno));
			return NULL;
		}
		c->st.exits++;
		if (vm->cfg.trace)
			fprintf(stderr, "kvm: vCPU %u exit %u\n", c->index, c->run->exit_reason);
		switch (c->run->exit_reason) {
		case KVM_EXIT_IO:
			if (handle_io(c))
				return NULL;
			break;
		case KVM_EXIT_X86_RDMSR:
			handle_msr(c, false);
			break;
		case KVM_EXIT_X86_WRMSR:
			handle_msr(c, true);
			break;
		case KVM_EXIT_MMIO:
			/* no MMIO devices: reads as all ones, writes ignored */
			if (!c->run->mmio.is_write)
				memset(c->run->mmio.data, 0xff, sizeof(c->run->mmio.data));
			break;
		case KVM_EXIT_INTR:
			c->st.signals++;
			break;
		case KVM_EXIT_HLT:
			cpu_fail(c, -EFAULT, "vCPU %u halted with nothing that can wake it",
				 c->index);
			return NULL;
		case KVM_EXIT_SHUTDOWN:
			cpu_fail(c, -EFAULT, "guest triple fault on vCPU %u (shutdown)", c->index);
			return NULL;
		case KVM_EXIT_SYSTEM_EVENT:
			cpu_fail(c, -EFAULT,
				 "guest system event %u on vCPU %u (reset or power off)",
				 c->run->system_event.type, c->index);
			return NULL;
		case KVM_EXIT_FAIL_ENTRY:
			cpu_fail(c, -EFAULT, "KVM could not enter vCPU %u (hardware reason %#llx)",
				 c->index,
				 (unsigned long long)
					 c->run->fail_entry.hardware_entry_failure_reason);
			return NULL;
		case KVM_EXIT_INTERNAL_ERROR: {
			struct kvm_regs regs = { 0 };

			ioctl(c->fd, KVM_GET_REGS, &regs);
			cpu_fail(c, -EFAULT, "KVM internal error %u%s on vCPU %u at rip %#llx",
				 c->run->internal.suberror,
				 c->run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION
					 ? " (KVM could not emulate an instruction)"
					 : "",
				 c->index, (unsigned long long) regs.rip);
			return NULL;
		}
		default:
			cpu_fail(c, -EFAULT, "unexpected KVM exit %u on vCPU %u",
				 c->run->exit_reason, c->index);
			return NULL;
		}
	}
}

void kvm_vm_interrupt(struct kvm_vm *vm)
{
	/* async-signal-safe: no lock; the vCPU threads see done at their next exit */
	vm->done = true;
	for (unsigned int i = 0; i < vm->nr_cpus; i++) {
		vm->cpus[i].run->immediate_exit = 1;
		if (vm->cpus[i].thread && !pthread_equal(vm->cpus[i].thread, pthread_self()))
			pthread_kill(vm->cpus[i].thread, KICK_SIGNAL);
	}
}

void kvm_vm_describe(struct kvm_vm *vm, char *buf, size_t len)
{
	struct kvm_regs regs;
	struct kvm_sregs sregs;

	if (ioctl(vm->cpus[0].fd, KVM_GET_REGS, &regs) < 0 ||
	    ioctl(vm->cpus[0].fd, KVM_GET_SREGS, &sregs) < 0) {
		snprintf(buf, len, "vCPU 0's registers unreadable: %s", strerror(errno));
		return;
	}
	snprintf(buf, len, "vCPU 0 at RIP %#llx, CPL %u, %s, paging %s",
		 (unsigned long long) regs.rip, sregs.cs.selector & 3,
		 !(sregs.efer & (1u << 10)) ? "32-bit protected mode"
		 : sregs.cs.l		    ? "64-bit mode"
					    : "compatibility mode",
		 (sregs.cr0 >> 31) ? "on" : "off");
}

int kvm_vm_run(struct kvm_vm *vm, int *ret_status, char *err, size_t errlen)
{
	sigset_t block, old;
	int r = 0;

	/* only the vCPU threads take the kick and overflow signals */
	sigemptyset(&block);
	sigaddset(&block, KICK_SIGNAL);
	if (vm->cfg.signo)
		sigaddset(&block, vm->cfg.signo);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (unsigned int i = 0; i < vm->nr_cpus; i++) {
		r = -pthread_create(&vm->cpus[i].thread, NULL, cpu_thread, &vm->cpus[i]);
		if (r < 0) {
			snprintf(err, errlen, "cannot start vCPU thread %u: %s", i, strerror(-r));
			pthread_mutex_lock(&vm->lock);
			stop_all(vm);
			pthread_mutex_unlock(&vm->lock);
			for (unsigned int j = 0; j < i; j++)
				pthread_join(vm->cpus[j].thread, NULL);
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			return r;
		}
	}
	for (unsigned int i = 0; i < vm->nr_cpus; i++)
		pthread_join(vm->cpus[i].thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (unsigned int i = 0; i < vm->nr_cpus; i++) {
		if (vm->cpus[i].error) {
			snprintf(err, errlen, "%s", vm->cpus[i].err);
			return vm->cpus[i].error;
		}
	}
	*ret_status = vm->plat.exit_status;
	return 0;
}
