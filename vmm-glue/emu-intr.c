/* SPDX-License-Identifier: MIT */
/*
 * Event delivery through the guest IDT (SDM Vol. 3A ch. 6): interrupt and
 * trap gates in IA-32e mode (16-byte gates, IST, 64-bit frame aligned to
 * 16 bytes) and in 32-bit protected mode (8-byte gates, 32-bit frame),
 * with the stack switch to the TSS stack on a privilege change. Unicorn
 * delivers nothing itself: the VMM writes the frame and loads CS:RIP.
 * Task gates and 16-bit gates are not supported (delivery fails: #DF).
 */
#include <errno.h>
#include <string.h>

#include "emu-priv.h"

#define RFLAGS_TF (1ull << 8)
#define RFLAGS_IF (1ull << 9)
#define RFLAGS_NT (1ull << 14)
#define RFLAGS_RF (1ull << 16)
#define RFLAGS_VM (1ull << 17)
#define EFER_LMA  (1ull << 10)

static int read_desc(struct emu *emu, uint16_t sel, uint64_t *ret)
{
	uc_x86_mmr gdtr;

	if (sel & 4)
		return -EFAULT; /* LDT selectors: unsupported */
	if (uc_reg_read(emu->uc, UC_X86_REG_GDTR, &gdtr) != UC_ERR_OK)
		return -EFAULT;
	if ((uint32_t) (sel & ~7u) + 7 > gdtr.limit)
		return -EFAULT;
	return mmu_read(emu, gdtr.base + (sel & ~7u), ret, 8) < 0 ? -EFAULT : 0;
}

void emu_refresh_mode(struct emu *emu)
{
	uint16_t cs = (uint16_t) emu_reg(emu, UC_X86_REG_CS);
	uint64_t d;

	emu->cpl = cs & 3;
	if (read_desc(emu, cs, &d) == 0 && (d >> 47 & 1))
		emu->cs64 = d >> 53 & 1;
}

static int load_seg(struct emu *emu, int reg, uint16_t sel)
{
	return uc_reg_write(emu->uc, reg, &sel) == UC_ERR_OK ? 0 : -EFAULT;
}

/* Where the trampoline lives in the VMM scratch page (emu-mmu.c) */
#define TRAMP	     (SCRATCH_BASE + 0x1000)
#define TRAMP_LDT    0x00 /* one 16-byte 64-bit call gate, LDT selector 7 */
#define TRAMP_FARPTR 0x10 /* m16:32 for the LCALL: only the selector matters */
#define TRAMP_LCALL  0x20
#define TRAMP_INT3   0x30

/*
 * Unicorn 2.0.1's 64-bit register API writes CS and SS selectors only, not
 * their descriptor caches: after a delivery from ring 3 its CPL (SS.DPL)
 * would stay 3 and the handler's MOV SS, IN/OUT, IRET to ring 0... fault.
 * So Unicorn makes the privilege change itself: a far CALL through a
 * 64-bit call gate (SDM Vol. 3A 5.8.3.1, 5.8.6) to the handler's code
 * segment, from VMM scratch code and a one-gate LDT, stopped by an INT3
 * at the gate's target. It runs with Unicorn's paging off, so that the
 * scratch page (at a non-canonical address no guest can reach) executes
 * at CPL 3; the guest's GDT, TSS and stack are read and written through
 * the same linear mappings as always. What the CALL pushed on the guest's
 * ring-0 stack is put back; the caller writes the real frame.
 */
int intr_enter_ring0(struct emu *emu, uint16_t sel)
{
	uint8_t *page = emu->mmu.scratch + (TRAMP - SCRATCH_BASE);
	uint64_t rsp0, gate_lo, gate_hi, target = TRAMP + TRAMP_INT3, rip, rsp, rflags;
	uint8_t save[32];
	uc_x86_mmr ldtr, ldt, tr;
	uint16_t far_sel = 0x07; /* LDT index 0, RPL 3 */
	int vector;
	bool ok;

	/* Unicorn reads RSP0 from its own TR: it must hold a present TSS */
	if (emu->in_run || uc_reg_read(emu->uc, UC_X86_REG_TR, &tr) != UC_ERR_OK ||
	    !(tr.flags & (1u << 15)) || mmu_read(emu, tr.base + 4, &rsp0, 8) < 0 ||
	    mmu_read(emu, (rsp0 & ~15ull) - sizeof(save), save, sizeof(save)) < 0 ||
	    uc_reg_read(emu->uc, UC_X86_REG_LDTR, &ldtr) != UC_ERR_OK)
		return -EFAULT;
	rip = emu_reg(emu, UC_X86_REG_RIP);
	rsp = emu_reg(emu, UC_X86_REG_RSP);
	rflags = emu_reg(emu, UC_X86_REG_RFLAGS);
	gate_lo = (target & 0xffff) | (uint64_t) sel << 16 | 0xecull << 40 |
		  ((target >> 16) & 0xffff) << 48;
	gate_hi = target >> 32;
	memset(page, 0, 0x40);
	memcpy(page + TRAMP_LDT, &gate_lo, 8);
	memcpy(page + TRAMP_LDT + 8, &gate_hi, 8);
	memcpy(page + TRAMP_FARPTR + 4, &far_sel, 2);
	/* lcall *TRAMP_FARPTR(%rip): FF /3, m16:32 */
	memcpy(page + TRAMP_LCALL, "\xff\x1d", 2);
	{
		int32_t rel = (int32_t) (TRAMP_FARPTR - (TRAMP_LCALL + 6));

		memcpy(page + TRAMP_LCALL + 2, &rel, 4);
	}
	page[TRAMP_INT3] = 0xcc;
	ldt = (uc_x86_mmr){
		.selector = 0, .base = TRAMP + TRAMP_LDT, .limit = 15, .flags = 0x8200
	};
	uc_reg_write(emu->uc, UC_X86_REG_LDTR, &ldt);
	mmu_pg_off(emu);
	emu_run_vmm(emu, TRAMP + TRAMP_LCALL, &vector);
	ok = vector == 3;
	mmu_pg_on(emu, true); /* TLB entries filled without paging */
	uc_reg_write(emu->uc, UC_X86_REG_LDTR, &ldtr);
	mmu_write(emu, (rsp0 & ~15ull) - sizeof(save), save, sizeof(save));
	/* the guest's registers as they were, in ring 0 now */
	emu_set_reg(emu, UC_X86_REG_RIP, rip);
	emu_set_reg(emu, UC_X86_REG_RSP, rsp);
	emu_set_reg(emu, UC_X86_REG_RFLAGS, rflags);
	if (!ok)
		return -EFAULT;
	emu->cpl = 0;
	return 0;
}

/* An interrupt or trap gate and its handler's code segment, as the IDT gives them */
struct gate {
	unsigned int type, ist, dpl;
	uint16_t sel;
	uint64_t handler;
};

/* The gate for `vector`: -EFAULT where delivery through it is not possible here. */
static int read_gate(struct emu *emu, unsigned int vector, bool lm, struct gate *ret)
{
	unsigned int gate_size = lm ? 16 : 8;
	uint64_t gate[2] = { 0, 0 }, desc;
	uc_x86_mmr idtr;
	struct gate g;

	if (uc_reg_read(emu->uc, UC_X86_REG_IDTR, &idtr) != UC_ERR_OK)
		return -EFAULT;
	if ((uint64_t) vector * gate_size + gate_size - 1 > idtr.limit)
		return -EFAULT;
	if (mmu_read(emu, idtr.base + (uint64_t) vector * gate_size, gate, gate_size) < 0)
		return -EFAULT;
	g.type = (unsigned int) (gate[0] >> 40 & 0xf);
	if (!(gate[0] >> 47 & 1) || (g.type != 0xe && g.type != 0xf))
		return -EFAULT;
	g.sel = (uint16_t) (gate[0] >> 16);
	g.handler = (gate[0] & 0xffff) | (gate[0] >> 32 & 0xffff0000ull);
	if (lm)
		g.handler |= gate[1] << 32;
	g.ist = lm ? (unsigned int) (gate[0] >> 32 & 7) : 0;
	if (read_desc(emu, g.sel, &desc) < 0 || !(desc >> 47 & 1) || !(desc >> 43 & 1))
		return -EFAULT;
	g.dpl = (unsigned int) (desc >> 45 & 3);
	if (g.dpl > emu->cpl)
		return -EFAULT;
	*ret = g;
	return 0;
}

/*
 * The stack the frame goes on, in *rsp: the TSS's on a privilege change
 * or through an IST gate. The old SS:RSP, where the frame holds them,
 * go into frame[*n...].
 */
static int switch_stack(struct emu *emu, bool lm, const struct gate *g, uint16_t ss, uint64_t *rsp,
			uint64_t *frame, unsigned int *n)
{
	uc_x86_mmr tr;

	if (g->dpl < emu->cpl || g->ist) {
		if (uc_reg_read(emu->uc, UC_X86_REG_TR, &tr) != UC_ERR_OK)
			return -EFAULT;
		if (lm) {
			uint64_t off = g->ist ? 0x24 + 8 * (g->ist - 1) : 4 + 8 * g->dpl, v;

			if (mmu_read(emu, tr.base + off, &v, 8) < 0)
				return -EFAULT;
			if (g->dpl < emu->cpl) {
				/* only ring 0 has a gate into it here: 1 and 2 are not used */
				if (g->dpl != 0 || intr_enter_ring0(emu, g->sel) < 0)
					return -EFAULT;
				emu_set_reg(emu, UC_X86_REG_SS,
					    g->dpl); /* null SS, RPL = new CPL */
			}
			/* the old stack goes in the frame below */
			frame[(*n)++] = ss;
			frame[(*n)++] = *rsp;
			*rsp = v;
		} else {
			uint32_t esp;
			uint16_t nss;

			if (mmu_read(emu, tr.base + 4 + 8 * g->dpl, &esp, 4) < 0 ||
			    mmu_read(emu, tr.base + 8 + 8 * g->dpl, &nss, 2) < 0)
				return -EFAULT;
			frame[(*n)++] = ss;
			frame[(*n)++] = *rsp;
			if (load_seg(emu, UC_X86_REG_SS, nss) < 0)
				return -EFAULT;
			*rsp = esp;
		}
	} else if (lm) {
		frame[(*n)++] = ss;
		frame[(*n)++] = *rsp;
	}
	return 0;
}

/* Push frame[0..n) (in push order) below *rsp, which moves down over it. */
static int push_frame(struct emu *emu, bool lm, const uint64_t *frame, unsigned int n,
		      uint64_t *rsp)
{
	unsigned int wsz = lm ? 8 : 4;
	uint8_t buf[48];

	*rsp -= (uint64_t) n * wsz;
	/* lowest address first: reverse push order */
	for (unsigned int i = 0; i < n; i++) {
		uint64_t v = frame[n - 1 - i];

		memcpy(buf + i * wsz, &v, wsz);
	}
	if (mmu_write(emu, lm ? *rsp : *rsp & 0xffffffffull, buf, (size_t) n * wsz) < 0)
		return -EFAULT;
	return 0;
}

/* The delivery as an LBR record, where the LBRs are on. */
static void lbr_note_delivery(struct emu *emu, uint64_t rip, uint64_t handler)
{
	if (emu->pmu && vpmu_lbr_active(emu->pmu)) {
		/* INT n is a branch: FROM is the instruction, not the return address */
		uint64_t from =
			emu->lbr_int_from && emu->lbr_int_ret == rip ? emu->lbr_int_from : rip;

		vpmu_lbr_branch(emu->pmu, from, handler, VPMU_BR_FAR, emu->cpl, emu->lbr_cycles);
		emu->lbr_cycles = 0;
	}
	emu->lbr_int_from = 0;
}

int intr_deliver(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip)
{
	bool lm = emu->efer & EFER_LMA;
	uint64_t rsp, rflags, frame[6];
	unsigned int n = 0;
	uint16_t cs, ss;
	struct gate g;

	if (read_gate(emu, vector, lm, &g) < 0)
		return -EFAULT;

	cs = (uint16_t) emu_reg(emu, UC_X86_REG_CS);
	ss = (uint16_t) emu_reg(emu, UC_X86_REG_SS);
	rsp = emu_reg(emu, UC_X86_REG_RSP);
	rflags = emu_reg(emu, UC_X86_REG_RFLAGS);
	if (!lm)
		rsp &= 0xffffffffull;

	if (switch_stack(emu, lm, &g, ss, &rsp, frame, &n) < 0)
		return -EFAULT;
	if (lm)
		rsp &= ~15ull;
	frame[n++] = rflags;
	frame[n++] = cs;
	frame[n++] = rip;
	if (has_err)
		frame[n++] = err;
	if (push_frame(emu, lm, frame, n, &rsp) < 0)
		return -EFAULT;

	if (g.sel != cs && load_seg(emu, UC_X86_REG_CS, g.sel) < 0)
		return -EFAULT;
	rflags &= ~(RFLAGS_TF | RFLAGS_NT | RFLAGS_RF | RFLAGS_VM);
	if (g.type == 0xe)
		rflags &= ~RFLAGS_IF;
	emu_set_reg(emu, UC_X86_REG_RFLAGS, rflags);
	emu_set_reg(emu, UC_X86_REG_RSP, rsp);
	emu_set_reg(emu, UC_X86_REG_RIP, g.handler);
	emu->resume_rip = g.handler;
	lbr_note_delivery(emu, rip, g.handler);
	emu->cpl = g.dpl;
	emu_refresh_mode(emu);
	return 0;
}

#define MSR_STAR	 0xc0000081
#define MSR_LSTAR	 0xc0000082
#define MSR_SYSCALL_MASK 0xc0000084

static uint64_t read_msr(struct emu *emu, uint32_t msr)
{
	uc_x86_msr m = { .rid = msr };

	uc_reg_read(emu->uc, UC_X86_REG_MSR, &m);
	return m.value;
}

/*
 * Complete a SYSCALL that retired in 64-bit mode, `next` being the
 * instruction after it (SDM Vol. 2B SYSCALL): RCX = next, R11 = RFLAGS,
 * RFLAGS &= ~IA32_FMASK (RF cleared), CS = STAR[47:32] and SS = that + 8
 * at CPL 0, RIP = IA32_LSTAR. The CPL change is the ring-0 trampoline's;
 * SS is then loaded from the guest's GDT, which for every kernel that
 * uses SYSCALL holds the flat segment SYSCALL would make.
 */
int intr_syscall(struct emu *emu, uint64_t next)
{
	uint64_t star = read_msr(emu, MSR_STAR), lstar = read_msr(emu, MSR_LSTAR);
	uint64_t fmask = read_msr(emu, MSR_SYSCALL_MASK);
	uint64_t rflags = emu_reg(emu, UC_X86_REG_RFLAGS);
	uint16_t cs = (uint16_t) ((star >> 32) & 0xfffc);

	emu_set_reg(emu, UC_X86_REG_RIP, next);
	if (emu->cpl != 0 && intr_enter_ring0(emu, cs) < 0)
		return -EFAULT;
	if (load_seg(emu, UC_X86_REG_SS, (uint16_t) (cs + 8)) < 0)
		return -EFAULT;
	emu_set_reg(emu, UC_X86_REG_RCX, next);
	emu_set_reg(emu, UC_X86_REG_R11, rflags & ~RFLAGS_RF);
	emu_set_reg(emu, UC_X86_REG_RFLAGS, (rflags & ~fmask & ~RFLAGS_RF) | 2);
	emu_set_reg(emu, UC_X86_REG_RIP, lstar);
	emu->resume_rip = lstar;
	emu->cpl = 0;
	emu_refresh_mode(emu);
	return 0;
}
