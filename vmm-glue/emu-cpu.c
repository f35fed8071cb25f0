/* SPDX-License-Identifier: MIT */
/*
 * The instructions the VMM executes itself, before Unicorn would: RDMSR
 * and WRMSR (Unicorn ignores unknown MSRs instead of faulting), RDPMC
 * (#UD in Unicorn), RDTSC/RDTSCP (the guest's virtual clock, not the
 * host's), CPUID (the model's table with the PMU leaves from vpmu), HLT,
 * MOV to/from CR8 (the local APIC's TPR). MOV to CR0/CR3/CR4 and INVLPG
 * are looked at first (the paging change they make is checked against
 * the window pages, emu-mmu.c), then Unicorn executes them itself, which
 * keeps its mode and TLB right.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "emu-priv.h"

#define X86_CR0_PE  (1ull << 0)
#define X86_CR0_PG  (1ull << 31)
#define X86_CR4_TSD (1ull << 2)
#define X86_CR4_PAE (1ull << 5)
#define X86_CR4_PCE (1ull << 8)
#define EFER_SCE    (1ull << 0)
#define EFER_LME    (1ull << 8)
#define EFER_LMA    (1ull << 10)
#define EFER_NXE    (1ull << 11)

#define X86_CR0_WP   (1ull << 16)
#define X86_CR4_PSE  (1ull << 4)
#define X86_CR4_PGE  (1ull << 7)
#define X86_CR4_LA57 (1ull << 12)

#define MSR_IA32_TSC	      0x10
#define MSR_IA32_BIOS_SIGN_ID 0x8b
#define MSR_IA32_MCG_CAP      0x179
#define MSR_IA32_MCG_STATUS   0x17a
#define MSR_IA32_MISC_ENABLE  0x1a0
#define MSR_IA32_PAT	      0x277
#define MSR_EFER	      0xc0000080
#define MSR_STAR	      0xc0000081
#define MSR_LSTAR	      0xc0000082
#define MSR_CSTAR	      0xc0000083
#define MSR_SYSCALL_MASK      0xc0000084
#define MSR_FS_BASE	      0xc0000100
#define MSR_GS_BASE	      0xc0000101
#define MSR_KERNEL_GS_BASE    0xc0000102
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176

#define GP 13
#define UD 6

/* MSRs Unicorn implements correctly: passed through to it (canonical ones checked first) */
static const uint32_t passthrough[] = {
	0x174,	    0x175,	0x176,			/* SYSENTER_CS/ESP/EIP */
	0xc0000081, 0xc0000082, 0xc0000083, 0xc0000084, /* STAR LSTAR CSTAR FMASK */
	0xc0000100, 0xc0000101, 0xc0000102, 0xc0000103, /* FS/GS/KERNEL_GS base, TSC_AUX */
};

/*
 * MSRs that hold a linear address: a WRMSR of a non-canonical value #GPs
 * (SDM Vol. 4, IA32_FS_BASE ... IA32_LSTAR; Vol. 2B WRMSR).
 */
static bool holds_address(uint32_t msr)
{
	return msr == MSR_FS_BASE || msr == MSR_GS_BASE || msr == MSR_KERNEL_GS_BASE ||
	       msr == MSR_LSTAR || msr == MSR_CSTAR || msr == MSR_IA32_SYSENTER_ESP ||
	       msr == MSR_IA32_SYSENTER_EIP;
}

static bool canonical(uint64_t v)
{
	/* 48-bit linear addresses: CPUID.80000008H:EAX[15:8] = 48 (no LA57) */
	return (uint64_t) ((int64_t) (v << 16) >> 16) == v;
}

static bool is_passthrough(uint32_t msr)
{
	for (size_t i = 0; i < sizeof(passthrough) / sizeof(passthrough[0]); i++)
		if (passthrough[i] == msr)
			return true;
	return false;
}

static const struct {
	const char *model;
	uint32_t fms;
} fms_table[] = {
	{ "Skylake-Server", 0x00050654 },
	{ "Icelake-Server", 0x000606a6 },
	{ "LunarLake", 0x000b06d1 },
	{ "arch-pebs", 0x000b06d1 },
};

static void add(struct emu *emu, uint32_t fn, uint32_t idx, uint32_t a, uint32_t b, uint32_t c,
		uint32_t d)
{
	struct vpmu_cpuid_entry *e = &emu->cpuid[emu->nr_cpuid++];

	e->function = fn;
	e->index = idx;
	e->eax = a;
	e->ebx = b;
	e->ecx = c;
	e->edx = d;
}

int cpu_cpuid_init(struct emu *emu)
{
	uint32_t fms = 0x00050654;
	static const char brand[48] = "vpmu virtual CPU (exact counting emulator)";
	uint32_t w[12];

	for (size_t i = 0; i < sizeof(fms_table) / sizeof(fms_table[0]); i++)
		if (!strcasecmp(fms_table[i].model, emu->cfg.model))
			fms = fms_table[i].fms;
	memcpy(w, brand, sizeof(w));
	emu->nr_cpuid = 0;
	add(emu, 0, 0, 0x0d, 0x756e6547, 0x6c65746e, 0x49656e69); /* GenuineIntel */
	/*
	 * Exactly what Unicorn 2.0.1 executes (test-unicorn checks each
	 * bit by running its instruction): no POPCNT, MOVBE, PCLMULQDQ,
	 * XSAVE, AVX, RDRAND there. ECX: SSE3 SSSE3 CX16 SSE4.1 SSE4.2 x2APIC
	 * TSC-deadline (lapic.c) AES hypervisor. EDX: FPU DE PSE TSC MSR PAE MCE CX8 APIC PGE MCA
	 * CMOV PAT CLFSH MMX FXSR SSE SSE2 (no SEP: SYSENTER is not emulated;
	 * MCE/MCA with IA32_MCG_CAP reporting no banks).
	 */
	add(emu, 1, 0, fms, 1u << 16 | 8u << 8,
	    1u << 0 | 1u << 9 | 1u << 13 | 1u << 19 | 1u << 20 | 1u << 21 | 1u << 24 | 1u << 25 |
		    1u << 31,
	    1u << 0 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 7 | 1u << 8 |
		    1u << 9 | 1u << 13 | 1u << 14 | 1u << 15 | 1u << 16 | 1u << 19 | 1u << 23 |
		    1u << 24 | 1u << 25 | 1u << 26);
	/* EBX: BMI1 SMEP BMI2 ADX SMAP (Unicorn's page walk enforces SMEP and SMAP) */
	add(emu, 7, 0, 0, 1u << 3 | 1u << 7 | 1u << 8 | 1u << 19 | 1u << 20, 0, 0);
	add(emu, 0x80000000, 0, 0x80000008, 0, 0, 0);
	/* ECX: LAHF LZCNT PREFETCHW; EDX: SYSCALL NX 1GB-pages RDTSCP LM */
	add(emu, 0x80000001, 0, 0, 0, 1u << 0 | 1u << 5 | 1u << 8,
	    1u << 11 | 1u << 20 | 1u << 26 | 1u << 27 | 1u << 29);
	add(emu, 0x80000002, 0, w[0], w[1], w[2], w[3]);
	add(emu, 0x80000003, 0, w[4], w[5], w[6], w[7]);
	add(emu, 0x80000004, 0, w[8], w[9], w[10], w[11]);
	/* EDX[8]: invariant TSC (the modelled clock never changes rate) */
	add(emu, 0x80000007, 0, 0, 0, 0, 1u << 8);
	add(emu, 0x80000008, 0, 0x3028, 0, 0, 0);
	if (emu->pmu)
		return vpmu_cpuid_patch(emu->pmu, emu->cpuid, &emu->nr_cpuid,
					sizeof(emu->cpuid) / sizeof(emu->cpuid[0]));
	return 0;
}

static bool has_subleaves(uint32_t fn)
{
	return fn == 4 || fn == 7 || fn == 0xb || fn == 0xd || fn == 0x23;
}

void cpu_cpuid_leaf(struct emu *emu, uint32_t fn, uint32_t idx, uint32_t *r)
{
	memset(r, 0, 4 * sizeof(*r));
	for (size_t i = 0; i < emu->nr_cpuid; i++) {
		const struct vpmu_cpuid_entry *e = &emu->cpuid[i];

		if (e->function != fn || (has_subleaves(fn) && e->index != idx))
			continue;
		r[0] = e->eax;
		r[1] = e->ebx;
		r[2] = e->ecx;
		r[3] = e->edx;
		break;
	}
	if (fn == 1)
		r[1] |= emu->apic.id << 24;
}

int cpu_msr_read(struct emu *emu, uint32_t msr, uint64_t *ret)
{
	int r = -ENOENT;

	if (emu->pmu)
		r = vpmu_msr_read(emu->pmu, msr, ret);
	if (r != -ENOENT)
		return r;
	r = lapic_msr_read(&emu->apic, msr, ret);
	if (r != -ENOENT)
		return r;
	switch (msr) {
	case MSR_IA32_APICBASE:
		*ret = emu->apic.base;
		return 0;
	case MSR_EFER:
		*ret = emu->efer;
		return 0;
	case MSR_IA32_MISC_ENABLE:
		*ret = emu->pmu ? vpmu_misc_enable_patch(emu->pmu, emu->misc_enable)
				: emu->misc_enable;
		return 0;
	case MSR_IA32_TSC:
		*ret = emu_tsc(emu);
		return 0;
	case MSR_IA32_PAT:
		*ret = emu->pat;
		return 0;
	case MSR_IA32_BIOS_SIGN_ID:
		*ret = 0; /* microcode revision: none loaded */
		return 0;
	case MSR_IA32_MCG_CAP:
		*ret = 0; /* machine-check architecture with no banks, no MCG_CTL */
		return 0;
	case MSR_IA32_MCG_STATUS:
		*ret = 0;
		return 0;
	default:
		break;
	}
	if (is_passthrough(msr)) {
		uc_x86_msr m = { .rid = msr };

		if (uc_reg_read(emu->uc, UC_X86_REG_MSR, &m) != UC_ERR_OK)
			return -EINVAL;
		*ret = m.value;
		return 0;
	}
	platform_note_unknown_msr(&emu->plat, msr, false);
	return -EINVAL;
}

int cpu_msr_write(struct emu *emu, uint32_t msr, uint64_t v)
{
	int r = -ENOENT;

	if (emu->pmu)
		r = vpmu_msr_write(emu->pmu, msr, v);
	if (r != -ENOENT) {
		if (r == 0)
			emu->want_stop = true; /* sync and re-plan stepping before going on */
		return r;
	}
	r = lapic_msr_write(&emu->apic, msr, v);
	if (r != -ENOENT) {
		emu->want_stop = true;
		return r;
	}
	switch (msr) {
	case MSR_IA32_APICBASE:
		if ((v & ~0xfffull) != APIC_DEFAULT_BASE && (v & APIC_BASE_ENABLE)) {
			/* Unicorn's MMIO page stays where it was mapped */
			emu_fatal(emu,
				  "the guest moved the local APIC to %#llx: only %#llx is "
				  "supported on the emulator",
				  (unsigned long long) (v & ~0xfffull), APIC_DEFAULT_BASE);
			return 0;
		}
		r = lapic_set_base(&emu->apic, v);
		emu->want_stop = true;
		return r;
	case MSR_EFER: {
		uint64_t next = (v & ~EFER_LMA) | (emu->efer & EFER_LMA);
		struct vpmu_paging p = { emu->cr0, emu->cr3, emu->cr4, next };

		if (v & ~(EFER_SCE | EFER_LME | EFER_LMA | EFER_NXE))
			return -EINVAL;
		/* LME may not change while paging is on (SDM Vol. 3A 10.8.5) */
		if ((emu->cr0 & X86_CR0_PG) && ((v ^ emu->efer) & EFER_LME))
			return -EINVAL;
		if (next != emu->efer) {
			mmu_resync(emu, &p, ~0ull);
			emu->efer = next;
			emu_write_efer(emu, next);
			emu->flush_tlb = true; /* NXE changes what Unicorn's TLB allows */
			emu->want_stop = true;
		}
		return 0;
	}
	case MSR_IA32_MISC_ENABLE:
		emu->misc_enable = v;
		return 0;
	case MSR_IA32_TSC:
		emu->tsc_offset = v - emu->st.cycles;
		return 0;
	case MSR_IA32_PAT:
		emu->pat = v;
		return 0;
	case MSR_IA32_BIOS_SIGN_ID:
		return 0; /* Linux writes 0 before CPUID leaf 1 to read the revision back */
	case MSR_IA32_MCG_STATUS:
		return v ? -EINVAL : 0; /* no machine check in progress to record */
	default:
		break;
	}
	if (holds_address(msr) && !canonical(v))
		return -EINVAL;
	if (is_passthrough(msr)) {
		uc_x86_msr m = { .rid = msr, .value = v };

		return uc_reg_write(emu->uc, UC_X86_REG_MSR, &m) == UC_ERR_OK ? 0 : -EINVAL;
	}
	platform_note_unknown_msr(&emu->plat, msr, true);
	return -EINVAL;
}

static uint64_t gpr_mask(const struct emu *emu)
{
	return emu->cs64 ? ~0ull : 0xffffffffull;
}

/*
 * MOV to CR0/CR3/CR4: the #GP checks of SDM Vol. 2B MOV (Control
 * Registers) and Vol. 3A 2.5; then the window pages are checked against
 * the paging registers to come, and Unicorn executes the MOV itself
 * (SPECIAL_NATIVE). MOV to CR8 is the local APIC's TPR, here.
 */
/* The emulator's one layout limit (emu-mmu.c), met: say so and stop. */
static void identity_refused(struct emu *emu, uint64_t la, uint64_t gpa)
{
	char where[40] = "no RAM";

	if (gpa != UINT64_MAX)
		snprintf(where, sizeof(where), "guest-physical %#llx", (unsigned long long) gpa);
	emu_fatal(emu,
		  "the guest maps linear %#llx onto %s, but on the emulator a linear address "
		  "inside guest RAM's physical range is always that physical address (Unicorn "
		  "2.0.1); use less --mem or --accel kvm",
		  (unsigned long long) la, where);
}

static int mov_to_cr(struct emu *emu, unsigned int crn, uint64_t v)
{
	struct vpmu_paging next = { emu->cr0, emu->cr3, emu->cr4, emu->efer };
	uint64_t bad_la, bad_gpa;

	switch (crn) {
	case 0:
		if (v >> 32)
			return -EINVAL;
		if ((v & X86_CR0_PG) && !(v & X86_CR0_PE))
			return -EINVAL;
		if ((v & (1ull << 29)) && !(v & (1ull << 30))) /* NW without CD */
			return -EINVAL;
		if (!(v & X86_CR0_PE)) {
			emu_fatal(emu,
				  "guest left protected mode: real mode is not supported on the "
				  "emulator");
			return 0;
		}
		if ((v & X86_CR0_PG) && (emu->efer & EFER_LME) && !(emu->cr4 & X86_CR4_PAE))
			return -EINVAL;
		/* clearing PG in 64-bit mode #GPs: leave through compatibility mode */
		if (!(v & X86_CR0_PG) && (emu->cr0 & X86_CR0_PG) && emu->cs64 &&
		    (emu->efer & EFER_LMA))
			return -EINVAL;
		next.cr0 = v;
		if ((emu->efer & EFER_LME) && (v & X86_CR0_PG))
			next.efer |= EFER_LMA;
		else
			next.efer &= ~EFER_LMA;
		break;
	case 3:
		if ((emu->efer & EFER_LMA) && (v >> 52))
			return -EINVAL; /* bits above MAXPHYADDR (and 63: no PCID) */
		next.cr3 = v;
		break;
	case 4:
		/* bits Unicorn and the models have: VME PVI TSD DE PSE PAE MCE PGE PCE OSFXSR
		 * OSXMMEXCPT UMIP FSGSBASE(0) SMEP SMAP; no LA57, PCIDE, OSXSAVE, PKE */
		if (v & ~0x3007ffull & ~0x10000ull)
			return -EINVAL;
		if (v & (X86_CR4_LA57 | (1ull << 17) | (1ull << 18) | (1ull << 16)))
			return -EINVAL;
		if ((emu->efer & EFER_LMA) && !(v & X86_CR4_PAE))
			return -EINVAL;
		next.cr4 = v;
		break;
	case 8:
		if (v & ~0xfull)
			return -EINVAL;
		emu->apic.tpr = (uint32_t) v << 4;
		emu->want_stop = true;
		return 0;
	case 2:
		return SPECIAL_NATIVE;
	default:
		return -ENOENT;
	}
	if (mmu_check_identity(emu, &next, &bad_la, &bad_gpa) < 0) {
		identity_refused(emu, bad_la, bad_gpa);
		return 0;
	}
	mmu_resync(emu, &next, ~0ull);
	emu->cr0 = next.cr0;
	emu->cr3 = next.cr3;
	emu->cr4 = next.cr4;
	emu->efer = next.efer;
	return SPECIAL_NATIVE;
}

static int mov_from_cr(struct emu *emu, unsigned int crn, uint64_t *v)
{
	if (crn != 8)
		return -ENOENT;
	*v = emu->apic.tpr >> 4;
	return 0;
}

/* RDMSR and WRMSR: EDX:EAX from or to the MSR ECX names, at CPL 0 only. */
static int exec_msr(struct emu *emu, const struct insn *in, bool *stop)
{
	uint32_t msr = (uint32_t) emu_reg(emu, UC_X86_REG_RCX);
	uint64_t v;
	int r;

	emu->st.msr_exits++;
	if (emu->cpl)
		return -EINVAL;
	if (in->special == SP_RDMSR) {
		r = cpu_msr_read(emu, msr, &v);
		if (!r) {
			emu_set_reg(emu, UC_X86_REG_RAX, v & 0xffffffffull);
			emu_set_reg(emu, UC_X86_REG_RDX, v >> 32);
		}
	} else {
		v = (emu_reg(emu, UC_X86_REG_RAX) & 0xffffffffull) | emu_reg(emu, UC_X86_REG_RDX)
									     << 32;
		r = cpu_msr_write(emu, msr, v);
		*stop = emu->want_stop;
	}
	return r;
}

/* RDPMC: the vPMU's counter ECX names, at CPL 0 or with CR4.PCE set. */
static int exec_rdpmc(struct emu *emu)
{
	uint64_t v = 0;
	int r;

	emu->st.rdpmc_exits++;
	if ((emu->cpl && !(emu->cr4 & X86_CR4_PCE)) || !emu->pmu)
		return -EINVAL;
	r = vpmu_rdpmc(emu->pmu, (uint32_t) emu_reg(emu, UC_X86_REG_RCX), &v);
	if (!r) {
		emu_set_reg(emu, UC_X86_REG_RAX, v & 0xffffffffull);
		emu_set_reg(emu, UC_X86_REG_RDX, v >> 32);
	}
	return r;
}

/* RDTSC and RDTSCP: the guest's virtual clock, outside CPL 0 only without CR4.TSD. */
static int exec_rdtsc(struct emu *emu, const struct insn *in)
{
	uint64_t v;

	if (emu->cpl && (emu->cr4 & X86_CR4_TSD))
		return -EINVAL;
	v = emu_tsc(emu);
	emu_set_reg(emu, UC_X86_REG_RAX, v & 0xffffffffull);
	emu_set_reg(emu, UC_X86_REG_RDX, v >> 32);
	if (in->special == SP_RDTSCP)
		emu_set_reg(emu, UC_X86_REG_RCX, 0);
	return 0;
}

static void exec_cpuid(struct emu *emu)
{
	uint32_t regs[4];

	emu->st.cpuid_exits++;
	cpu_cpuid_leaf(emu, (uint32_t) emu_reg(emu, UC_X86_REG_RAX),
		       (uint32_t) emu_reg(emu, UC_X86_REG_RCX), regs);
	emu_set_reg(emu, UC_X86_REG_RAX, regs[0]);
	emu_set_reg(emu, UC_X86_REG_RBX, regs[1]);
	emu_set_reg(emu, UC_X86_REG_RCX, regs[2]);
	emu_set_reg(emu, UC_X86_REG_RDX, regs[3]);
}

/*
 * INVLPG at CPL 0: the page checked against the window pages, then
 * SPECIAL_NATIVE; SPECIAL_FAULT where the guest maps the local APIC page
 * there (it becomes MMIO outside a run) or the emulator refuses the
 * mapping.
 */
static int exec_invlpg(struct emu *emu, const struct insn *in)
{
	struct vpmu_paging p = { emu->cr0, emu->cr3, emu->cr4, emu->efer };
	uint64_t v, bad_gpa;

	v = count_data_address(emu, in);
	if (mmu_check_identity_page(emu, v, &bad_gpa) < 0) {
		identity_refused(emu, v & ~0xfffull, bad_gpa);
		return SPECIAL_FAULT;
	}
	mmu_resync(emu, &p, v);
	if (mmu_maps_apic(emu, v)) {
		/* Linux's fixmap: the page becomes MMIO, outside a run */
		emu->apic_alias = v;
		emu->native_once = in->addr;
		emu_stop(emu, in->addr);
		return SPECIAL_FAULT;
	}
	return SPECIAL_NATIVE;
}

/* MOV from CR8 (the others Unicorn executes), at CPL 0 only. */
static int exec_mov_from_cr(struct emu *emu, const struct insn *in)
{
	uint64_t v = 0;
	int r;

	if (emu->cpl)
		return -EINVAL;
	r = in->gpr < 0 ? -ENOENT : mov_from_cr(emu, in->crn, &v);
	if (!r)
		emu_set_reg(emu, in->gpr, v & gpr_mask(emu));
	return r;
}

/*
 * After an instruction the VMM executed, with result r: the exception it
 * raises (#UD for -ENOENT, #GP for another error) or its counts fed to
 * the vPMU and RIP past it, the run stopped there if asked.
 */
static int finish_special(struct emu *emu, const struct insn *in, int r, bool stop)
{
	uint64_t next = in->addr + in->len;
	struct vpmu_exact_counts c;

	if (emu->fatal) {
		emu_stop(emu, in->addr);
		return SPECIAL_FAULT;
	}
	if (r == -ENOENT) {
		emu_raise(emu, UD, false, 0, in->addr);
		return SPECIAL_FAULT;
	}
	if (r < 0) {
		emu_raise(emu, GP, true, 0, in->addr);
		return SPECIAL_FAULT;
	}
	memset(&c, 0, sizeof(c));
	insn_count(in, false, &c);
	c.last_ip = in->addr;
	emu_feed(emu, &c);
	if (stop || emu->want_stop)
		emu_stop(emu, next);
	else
		emu_set_reg(emu, UC_X86_REG_RIP, next);
	return SPECIAL_DONE;
}

/*
 * Execute special instruction `in`, which Unicorn is about to run:
 * SPECIAL_DONE (emulated, RIP moved on or the run stopped after it),
 * SPECIAL_NATIVE (checked; Unicorn runs it itself and it retires with its
 * block) or SPECIAL_FAULT (an exception is raised instead).
 */
int cpu_exec_special(struct emu *emu, const struct insn *in)
{
	bool stop = false;
	int r = 0;

	emu_feed_flush(emu); /* the vPMU sees every count before the guest touches it */
	if (in->addr == emu->native_once &&
	    (in->special == SP_INVLPG || in->special == SP_MOV_TO_CR)) {
		emu->native_once = 0;
		return SPECIAL_NATIVE; /* looked at before the stop that let it run now */
	}
	switch (in->special) {
	case SP_RDMSR:
	case SP_WRMSR:
		r = exec_msr(emu, in, &stop);
		break;
	case SP_RDPMC:
		r = exec_rdpmc(emu);
		break;
	case SP_RDTSC:
	case SP_RDTSCP:
		r = exec_rdtsc(emu, in);
		break;
	case SP_CPUID:
		exec_cpuid(emu);
		break;
	case SP_HLT:
		if (emu->cpl) {
			r = -EINVAL;
			break;
		}
		emu->halted = true;
		stop = true;
		break;
	case SP_INVLPG:
		if (emu->cpl) {
			r = -EINVAL;
			break;
		}
		return exec_invlpg(emu, in);
	case SP_MOV_TO_CR:
		if (emu->cpl) {
			r = -EINVAL;
			break;
		}
		r = in->gpr < 0 ? -ENOENT
				: mov_to_cr(emu, in->crn, emu_reg(emu, in->gpr) & gpr_mask(emu));
		if (r == SPECIAL_NATIVE)
			return emu->fatal ? SPECIAL_FAULT : SPECIAL_NATIVE;
		stop = true;
		break;
	case SP_MOV_FROM_CR:
		r = exec_mov_from_cr(emu, in);
		break;
	default:
		return SPECIAL_FAULT;
	}
	return finish_special(emu, in, r, stop);
}
