/* SPDX-License-Identifier: MIT */
/*
 * The instructions the VMM executes itself, before Unicorn would: RDMSR
 * and WRMSR (Unicorn ignores unknown MSRs instead of faulting), RDPMC
 * (#UD in Unicorn), RDTSC/RDTSCP (the guest's virtual clock, not the
 * host's), CPUID (the model's table with the PMU leaves from vpmu), HLT,
 * MOV to/from CR0/CR2/CR3/CR4/CR8 and INVLPG (the VMM owns guest paging).
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

#define MSR_IA32_TSC	     0x10
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MSR_IA32_PAT	     0x277
#define MSR_EFER	     0xc0000080

#define GP 13
#define UD 6

/* MSRs Unicorn implements correctly: passed through to it */
static const uint32_t passthrough[] = {
	0x174,	    0x175,	0x176,			/* SYSENTER_CS/ESP/EIP */
	0xc0000081, 0xc0000082, 0xc0000083, 0xc0000084, /* STAR LSTAR CSTAR FMASK */
	0xc0000100, 0xc0000101, 0xc0000102, 0xc0000103, /* FS/GS/KERNEL_GS base, TSC_AUX */
};

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
	/* ECX: SSE3 SSSE3 CX16 SSE4.1 SSE4.2 x2APIC POPCNT hypervisor;
	 * EDX: FPU DE PSE TSC MSR PAE CX8 APIC SEP PGE CMOV PAT CLFSH MMX FXSR SSE SSE2 */
	add(emu, 1, 0, fms, 1u << 16 | 8u << 8,
	    1u << 0 | 1u << 9 | 1u << 13 | 1u << 19 | 1u << 20 | 1u << 21 | 1u << 23 | 1u << 31,
	    1u << 0 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 8 | 1u << 9 |
		    1u << 11 | 1u << 13 | 1u << 15 | 1u << 16 | 1u << 19 | 1u << 23 | 1u << 24 |
		    1u << 25 | 1u << 26);
	add(emu, 7, 0, 0, 0, 0, 0);
	add(emu, 0x80000000, 0, 0x80000008, 0, 0, 0);
	/* LAHF; SYSCALL NX 1GB-pages LM */
	add(emu, 0x80000001, 0, 0, 0, 1u << 0, 1u << 11 | 1u << 20 | 1u << 26 | 1u << 29);
	add(emu, 0x80000002, 0, w[0], w[1], w[2], w[3]);
	add(emu, 0x80000003, 0, w[4], w[5], w[6], w[7]);
	add(emu, 0x80000004, 0, w[8], w[9], w[10], w[11]);
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

static void cpuid(struct emu *emu, uint32_t fn, uint32_t idx, uint32_t *r)
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
		r = lapic_set_base(&emu->apic, v);
		emu->paging_dirty = true; /* the xAPIC page moved or went */
		return r;
	case MSR_EFER: {
		uint64_t lma;

		if (v & ~(EFER_SCE | EFER_LME | EFER_LMA | EFER_NXE))
			return -EINVAL;
		/* LME may not change while paging is on (§9.8.5) */
		if ((emu->cr0 & X86_CR0_PG) && ((v ^ emu->efer) & EFER_LME))
			return -EINVAL;
		lma = (v & EFER_LME) && (emu->cr0 & X86_CR0_PG) ? EFER_LMA : 0;
		emu->efer = (v & ~EFER_LMA) | lma;
		{
			uc_x86_msr m = { .rid = MSR_EFER,
					 .value = (v & (EFER_SCE | EFER_NXE)) | EFER_LME |
						  EFER_LMA };

			uc_reg_write(emu->uc, UC_X86_REG_MSR, &m);
		}
		emu->paging_dirty = true;
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
	default:
		break;
	}
	if (is_passthrough(msr)) {
		uc_x86_msr m = { .rid = msr, .value = v };

		return uc_reg_write(emu->uc, UC_X86_REG_MSR, &m) == UC_ERR_OK ? 0 : -EINVAL;
	}
	return -EINVAL;
}

static uint64_t gpr_mask(const struct emu *emu)
{
	return emu->cs64 ? ~0ull : 0xffffffffull;
}

static int mov_to_cr(struct emu *emu, unsigned int crn, uint64_t v)
{
	uint64_t ucv;

	switch (crn) {
	case 0:
		if ((v & X86_CR0_PG) && !(v & X86_CR0_PE))
			return -EINVAL;
		if (!(v & X86_CR0_PE)) {
			emu_fatal(emu, "guest left protected mode: real mode is not supported on "
				       "the emulator");
			return 0;
		}
		if ((v & X86_CR0_PG) && (emu->efer & EFER_LME) && !(emu->cr4 & X86_CR4_PAE))
			return -EINVAL;
		emu->cr0 = v & 0xffffffffull;
		if ((emu->efer & EFER_LME) && (v & X86_CR0_PG))
			emu->efer |= EFER_LMA;
		else
			emu->efer &= ~EFER_LMA;
		/* Unicorn keeps PG clear: with it set, it would walk the tables itself */
		ucv = (emu->cr0 | X86_CR0_PE) & ~X86_CR0_PG;
		emu_set_reg(emu, UC_X86_REG_CR0, ucv);
		emu->paging_dirty = true;
		return 0;
	case 2:
		emu->cr2 = v;
		emu_set_reg(emu, UC_X86_REG_CR2, v);
		return 0;
	case 3:
		emu->cr3 = v;
		emu->paging_dirty = true;
		return 0;
	case 4:
		if ((emu->efer & EFER_LMA) && !(v & X86_CR4_PAE))
			return -EINVAL;
		emu->cr4 = v;
		emu_set_reg(emu, UC_X86_REG_CR4, v | X86_CR4_PAE);
		emu->paging_dirty = true;
		return 0;
	case 8:
		if (v & ~0xfull)
			return -EINVAL;
		emu->apic.tpr = (uint32_t) v << 4;
		emu->want_stop = true;
		return 0;
	default:
		return -ENOENT;
	}
}

static int mov_from_cr(struct emu *emu, unsigned int crn, uint64_t *v)
{
	switch (crn) {
	case 0:
		*v = emu->cr0;
		return 0;
	case 2:
		*v = emu->cr2;
		return 0;
	case 3:
		*v = emu->cr3;
		return 0;
	case 4:
		*v = emu->cr4;
		return 0;
	case 8:
		*v = emu->apic.tpr >> 4;
		return 0;
	default:
		return -ENOENT;
	}
}

bool cpu_exec_special(struct emu *emu, const struct insn *in)
{
	uint64_t next = in->addr + in->len, v = 0;
	bool stop = false;
	int r = 0;

	emu_feed_flush(emu); /* the vPMU sees every count before the guest touches it */
	switch (in->special) {
	case SP_RDMSR:
	case SP_WRMSR: {
		uint32_t msr = (uint32_t) emu_reg(emu, UC_X86_REG_RCX);

		emu->st.msr_exits++;
		if (emu->cpl) {
			r = -EINVAL;
			break;
		}
		if (in->special == SP_RDMSR) {
			r = cpu_msr_read(emu, msr, &v);
			if (!r) {
				emu_set_reg(emu, UC_X86_REG_RAX, v & 0xffffffffull);
				emu_set_reg(emu, UC_X86_REG_RDX, v >> 32);
			}
		} else {
			v = (emu_reg(emu, UC_X86_REG_RAX) & 0xffffffffull) |
			    emu_reg(emu, UC_X86_REG_RDX) << 32;
			r = cpu_msr_write(emu, msr, v);
			stop = emu->want_stop || emu->paging_dirty;
		}
		break;
	}
	case SP_RDPMC:
		emu->st.rdpmc_exits++;
		if ((emu->cpl && !(emu->cr4 & X86_CR4_PCE)) || !emu->pmu) {
			r = -EINVAL;
			break;
		}
		r = vpmu_rdpmc(emu->pmu, (uint32_t) emu_reg(emu, UC_X86_REG_RCX), &v);
		if (!r) {
			emu_set_reg(emu, UC_X86_REG_RAX, v & 0xffffffffull);
			emu_set_reg(emu, UC_X86_REG_RDX, v >> 32);
		}
		break;
	case SP_RDTSC:
	case SP_RDTSCP:
		if (emu->cpl && (emu->cr4 & X86_CR4_TSD)) {
			r = -EINVAL;
			break;
		}
		v = emu_tsc(emu);
		emu_set_reg(emu, UC_X86_REG_RAX, v & 0xffffffffull);
		emu_set_reg(emu, UC_X86_REG_RDX, v >> 32);
		if (in->special == SP_RDTSCP)
			emu_set_reg(emu, UC_X86_REG_RCX, 0);
		break;
	case SP_CPUID: {
		uint32_t regs[4];

		emu->st.cpuid_exits++;
		cpuid(emu, (uint32_t) emu_reg(emu, UC_X86_REG_RAX),
		      (uint32_t) emu_reg(emu, UC_X86_REG_RCX), regs);
		emu_set_reg(emu, UC_X86_REG_RAX, regs[0]);
		emu_set_reg(emu, UC_X86_REG_RBX, regs[1]);
		emu_set_reg(emu, UC_X86_REG_RCX, regs[2]);
		emu_set_reg(emu, UC_X86_REG_RDX, regs[3]);
		break;
	}
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
		emu->paging_dirty = true;
		stop = true;
		break;
	case SP_MOV_TO_CR:
		if (emu->cpl) {
			r = -EINVAL;
			break;
		}
		r = in->gpr < 0 ? -ENOENT
				: mov_to_cr(emu, in->crn, emu_reg(emu, in->gpr) & gpr_mask(emu));
		stop = true;
		break;
	case SP_MOV_FROM_CR:
		if (emu->cpl) {
			r = -EINVAL;
			break;
		}
		r = in->gpr < 0 ? -ENOENT : mov_from_cr(emu, in->crn, &v);
		if (!r)
			emu_set_reg(emu, in->gpr, v & gpr_mask(emu));
		break;
	default:
		return false;
	}
	if (emu->fatal) {
		emu_stop(emu, in->addr);
		return false;
	}
	if (r == -ENOENT) {
		emu_raise(emu, UD, false, 0, in->addr);
		return false;
	}
	if (r < 0) {
		emu_raise(emu, GP, true, 0, in->addr);
		return false;
	}
	{
		struct vpmu_exact_counts c;

		memset(&c, 0, sizeof(c));
		insn_count(in, false, &c);
		c.last_ip = in->addr;
		emu_feed(emu, &c);
	}
	if (stop || emu->want_stop)
		emu_stop(emu, next);
	else
		emu_set_reg(emu, UC_X86_REG_RIP, next);
	return true;
}
