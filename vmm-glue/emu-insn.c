/* SPDX-License-Identifier: MIT */
/*
 * Instruction classification with Capstone: what each instruction counts
 * as (branch kinds, loads, stores, REP string), and which ones the VMM
 * must see before Unicorn executes them (RDMSR, WRMSR, RDPMC, RDTSC,
 * CPUID, HLT, MOV CR, INVLPG, and STI/POPF/IRET that open interrupt
 * windows).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "emu-priv.h"

static const struct {
	unsigned int cs;
	int uc;
	bool r32;
} regmap[] = {
	{ X86_REG_RAX, UC_X86_REG_RAX, false },	   { X86_REG_RCX, UC_X86_REG_RCX, false },
	{ X86_REG_RDX, UC_X86_REG_RDX, false },	   { X86_REG_RBX, UC_X86_REG_RBX, false },
	{ X86_REG_RSP, UC_X86_REG_RSP, false },	   { X86_REG_RBP, UC_X86_REG_RBP, false },
	{ X86_REG_RSI, UC_X86_REG_RSI, false },	   { X86_REG_RDI, UC_X86_REG_RDI, false },
	{ X86_REG_R8, UC_X86_REG_R8, false },	   { X86_REG_R9, UC_X86_REG_R9, false },
	{ X86_REG_R10, UC_X86_REG_R10, false },	   { X86_REG_R11, UC_X86_REG_R11, false },
	{ X86_REG_R12, UC_X86_REG_R12, false },	   { X86_REG_R13, UC_X86_REG_R13, false },
	{ X86_REG_R14, UC_X86_REG_R14, false },	   { X86_REG_R15, UC_X86_REG_R15, false },
	{ X86_REG_EAX, UC_X86_REG_RAX, true },	   { X86_REG_ECX, UC_X86_REG_RCX, true },
	{ X86_REG_EDX, UC_X86_REG_RDX, true },	   { X86_REG_EBX, UC_X86_REG_RBX, true },
	{ X86_REG_ESP, UC_X86_REG_RSP, true },	   { X86_REG_EBP, UC_X86_REG_RBP, true },
	{ X86_REG_ESI, UC_X86_REG_RSI, true },	   { X86_REG_EDI, UC_X86_REG_RDI, true },
	{ X86_REG_R8D, UC_X86_REG_R8, true },	   { X86_REG_R9D, UC_X86_REG_R9, true },
	{ X86_REG_R10D, UC_X86_REG_R10, true },	   { X86_REG_R11D, UC_X86_REG_R11, true },
	{ X86_REG_R12D, UC_X86_REG_R12, true },	   { X86_REG_R13D, UC_X86_REG_R13, true },
	{ X86_REG_R14D, UC_X86_REG_R14, true },	   { X86_REG_R15D, UC_X86_REG_R15, true },
	{ X86_REG_RIP, UC_X86_REG_RIP, false },	   { X86_REG_EIP, UC_X86_REG_RIP, true },
	{ X86_REG_FS, UC_X86_REG_FS_BASE, false }, { X86_REG_GS, UC_X86_REG_GS_BASE, false },
};

int insn_uc_reg(unsigned int csreg)
{
	for (size_t i = 0; i < sizeof(regmap) / sizeof(regmap[0]); i++)
		if (regmap[i].cs == csreg)
			return regmap[i].uc;
	return -1;
}

bool insn_is_gpr32(unsigned int csreg)
{
	for (size_t i = 0; i < sizeof(regmap) / sizeof(regmap[0]); i++)
		if (regmap[i].cs == csreg)
			return regmap[i].r32;
	return false;
}

static bool is_string(unsigned int id)
{
	switch (id) {
	case X86_INS_MOVSB:
	case X86_INS_MOVSW:
	case X86_INS_MOVSD:
	case X86_INS_MOVSQ:
	case X86_INS_STOSB:
	case X86_INS_STOSW:
	case X86_INS_STOSD:
	case X86_INS_STOSQ:
	case X86_INS_LODSB:
	case X86_INS_LODSW:
	case X86_INS_LODSD:
	case X86_INS_LODSQ:
	case X86_INS_CMPSB:
	case X86_INS_CMPSW:
	case X86_INS_CMPSD:
	case X86_INS_CMPSQ:
	case X86_INS_SCASB:
	case X86_INS_SCASW:
	case X86_INS_SCASD:
	case X86_INS_SCASQ:
	case X86_INS_INSB:
	case X86_INS_INSW:
	case X86_INS_INSD:
	case X86_INS_OUTSB:
	case X86_INS_OUTSW:
	case X86_INS_OUTSD:
		return true;
	default:
		return false;
	}
}

/* Jumps, calls, returns and far transfers (classify finds Jcc by Capstone's jump group) */
static void classify_branch(const cs_x86 *x, unsigned int id, struct insn *in)
{
	switch (id) {
	case X86_INS_JMP:
		in->flags |= IC_BRANCH | IC_UNCOND;
		if (x->op_count && x->operands[0].type != X86_OP_IMM)
			in->flags |= IC_IND;
		break;
	case X86_INS_CALL:
		in->flags |= IC_BRANCH | IC_UNCOND | IC_CALL | IC_STORE;
		if (x->op_count && x->operands[0].type != X86_OP_IMM)
			in->flags |= IC_IND;
		in->dla = DLA_PUSH;
		break;
	case X86_INS_RET:
		in->flags |= IC_BRANCH | IC_UNCOND | IC_RET | IC_LOAD;
		in->dla = DLA_POP;
		break;
	case X86_INS_LJMP:
	case X86_INS_LCALL:
	case X86_INS_RETF:
	case X86_INS_RETFQ:
	case X86_INS_INT:
	case X86_INS_INT3:
	case X86_INS_INTO:
	case X86_INS_INT1:
	case X86_INS_SYSCALL:
	case X86_INS_SYSRET:
	case X86_INS_SYSENTER:
	case X86_INS_SYSEXIT:
		in->flags |= IC_BRANCH | IC_UNCOND | IC_FAR;
		break;
	case X86_INS_IRET:
	case X86_INS_IRETD:
	case X86_INS_IRETQ:
		in->flags |= IC_BRANCH | IC_UNCOND | IC_FAR | IC_LOAD;
		in->special = SP_IRET;
		in->dla = DLA_POP;
		break;
	case X86_INS_LOOP:
	case X86_INS_LOOPE:
	case X86_INS_LOOPNE:
	case X86_INS_JCXZ:
	case X86_INS_JECXZ:
	case X86_INS_JRCXZ:
		in->flags |= IC_BRANCH | IC_COND;
		break;
	default:
		break;
	}
}

/* PUSH and POP, of flags too: a stack access at RSP */
static void classify_stack(unsigned int id, struct insn *in)
{
	switch (id) {
	case X86_INS_PUSH:
	case X86_INS_PUSHF:
	case X86_INS_PUSHFD:
	case X86_INS_PUSHFQ:
		in->flags |= IC_STORE;
		in->dla = DLA_PUSH;
		break;
	case X86_INS_POP:
		in->flags |= IC_LOAD;
		in->dla = DLA_POP;
		break;
	case X86_INS_POPF:
	case X86_INS_POPFD:
	case X86_INS_POPFQ:
		in->flags |= IC_LOAD;
		in->dla = DLA_POP;
		in->special = SP_POPF;
		break;
	default:
		break;
	}
}

/* The instructions the VMM executes or looks at before Unicorn does (emu-cpu.c) */
static void classify_special(unsigned int id, struct insn *in)
{
	switch (id) {
	case X86_INS_RDMSR:
		in->special = SP_RDMSR;
		break;
	case X86_INS_WRMSR:
		in->special = SP_WRMSR;
		break;
	case X86_INS_RDPMC:
		in->special = SP_RDPMC;
		break;
	case X86_INS_RDTSC:
		in->special = SP_RDTSC;
		break;
	case X86_INS_RDTSCP:
		in->special = SP_RDTSCP;
		break;
	case X86_INS_CPUID:
		in->special = SP_CPUID;
		break;
	case X86_INS_HLT:
		in->special = SP_HLT;
		break;
	case X86_INS_INVLPG:
		in->special = SP_INVLPG;
		break;
	case X86_INS_STI:
		in->special = SP_STI;
		break;
	default:
		break;
	}
}

/* MOV to a control register, MOV from CR8 */
static void classify_mov_cr(const cs_x86 *x, unsigned int id, struct insn *in)
{
	if (id == X86_INS_MOV && x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
	    x->operands[1].type == X86_OP_REG) {
		unsigned int a = x->operands[0].reg, b = x->operands[1].reg;

		if (a >= X86_REG_CR0 && a <= X86_REG_CR15) {
			in->special = SP_MOV_TO_CR;
			in->crn = (uint8_t) (a - X86_REG_CR0);
			in->gpr = insn_uc_reg(b);
		} else if (b == X86_REG_CR8) {
			/* the other control registers Unicorn reads itself: they are the guest's */
			in->special = SP_MOV_FROM_CR;
			in->crn = (uint8_t) (b - X86_REG_CR0);
			in->gpr = insn_uc_reg(a);
		}
	}
}

/* String instructions: REP, and the memory they access at RSI or RDI */
static void classify_string(const cs_x86 *x, unsigned int id, struct insn *in)
{
	if (x->prefix[0] == X86_PREFIX_REP || x->prefix[0] == X86_PREFIX_REPNE)
		in->flags |= IC_REP;
	switch (id) {
	case X86_INS_MOVSB:
	case X86_INS_MOVSW:
	case X86_INS_MOVSD:
	case X86_INS_MOVSQ:
		in->flags |= IC_LOAD | IC_STORE;
		in->dla = DLA_RSI;
		break;
	case X86_INS_STOSB:
	case X86_INS_STOSW:
	case X86_INS_STOSD:
	case X86_INS_STOSQ:
	case X86_INS_INSB:
	case X86_INS_INSW:
	case X86_INS_INSD:
		in->flags |= IC_STORE;
		in->dla = DLA_RDI;
		break;
	case X86_INS_SCASB:
	case X86_INS_SCASW:
	case X86_INS_SCASD:
	case X86_INS_SCASQ:
		in->flags |= IC_LOAD;
		in->dla = DLA_RDI;
		break;
	default:
		in->flags |= IC_LOAD;
		in->dla = DLA_RSI;
		break;
	}
}

/* Loads and stores through memory operands; the first one's address for DLA_MODRM */
static void classify_mem_operands(const cs_x86 *x, struct insn *in)
{
	for (unsigned int i = 0; i < x->op_count; i++) {
		const cs_x86_op *op = &x->operands[i];

		if (op->type != X86_OP_MEM)
			continue;
		/* capstone 4 leaves access 0 on some forms: count those as loads */
		if (op->access & CS_AC_WRITE)
			in->flags |= IC_STORE;
		if ((op->access & CS_AC_READ) || !op->access)
			in->flags |= IC_LOAD;
		if (in->dla == DLA_NONE) {
			in->dla = DLA_MODRM;
			in->seg = (uint16_t) op->mem.segment;
			in->base = (uint16_t) op->mem.base;
			in->index = (uint16_t) op->mem.index;
			in->scale = (uint8_t) op->mem.scale;
			in->disp = op->mem.disp;
		}
	}
}

static void classify(const cs_insn *ci, bool cs64, struct insn *in)
{
	const cs_x86 *x = &ci->detail->x86;
	unsigned int id = ci->id;

	in->opsize = cs64 ? 8 : 4;
	classify_branch(x, id, in);
	classify_stack(id, in);
	classify_special(id, in);
	/* Jcc: every other member of the jump group */
	if (!in->flags) {
		for (unsigned int i = 0; i < ci->detail->groups_count; i++)
			if (ci->detail->groups[i] == X86_GRP_JUMP)
				in->flags |= IC_BRANCH | IC_COND;
	}
	classify_mov_cr(x, id, in);
	if (is_string(id)) {
		classify_string(x, id, in);
		return;
	}
	if (id == X86_INS_LEA || id == X86_INS_NOP ||
	    (in->flags & IC_BRANCH && !(in->flags & IC_IND)))
		return;
	classify_mem_operands(x, in);
}

int insn_decode(struct emu *emu, uint64_t addr, bool cs64, struct insn *ret)
{
	uint8_t buf[16];
	cs_insn *ci;
	size_t n, len = sizeof(buf);

	/* a fetch may end at an unmapped page: retry with what is there */
	while (len && mmu_read(emu, addr, buf, len) < 0)
		len = len > 1 ? len - 1 : 0;
	if (!len)
		return -EFAULT;
	n = cs_disasm(cs64 ? emu->csh64 : emu->csh32, buf, len, addr, 1, &ci);
	if (!n)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	ret->addr = addr;
	ret->len = (uint8_t) ci->size;
	ret->gpr = -1;
	classify(ci, cs64, ret);
	cs_free(ci, n);
	return 0;
}

void insn_count(const struct insn *in, bool taken, struct vpmu_exact_counts *c)
{
	unsigned int f = in->flags;

	c->instructions++;
	c->cycles += EMU_CYCLES_PER_INSN;
	if (f & IC_BRANCH) {
		taken |= !!(f & IC_UNCOND);
		c->branches++;
		if (f & IC_COND) {
			c->cond_branches++;
			if (taken)
				c->cond_taken++;
		}
		if (f & IC_CALL)
			c->near_calls++;
		if (f & IC_RET)
			c->near_returns++;
		if (f & IC_FAR)
			c->far_branches++;
		else if (taken)
			c->near_taken++;
		if (taken)
			c->cycles += EMU_CYCLES_TAKEN;
	}
	if (f & IC_LOAD)
		c->loads++;
	if (f & IC_STORE)
		c->stores++;
	if (f & (IC_LOAD | IC_STORE))
		c->mem_insts++;
	c->ref_cycles = c->cycles;
}

/* Translated code came from the guest pages under [addr, addr + size): tell emu-mmu.c. */
static void mark_code(struct emu *emu, uint64_t addr, uint32_t size)
{
	struct vpmu_paging p = { emu->cr0, emu->cr3, emu->cr4, emu->efer };
	uint64_t last = addr + (size ? size - 1 : 0);

	for (uint64_t page = addr & ~0xfffull; page <= last; page += 0x1000) {
		struct vpmu_walk_result w;

		if (vpmu_walk_translate(emu->mem, &p, page, 0, &w, sizeof(w)) == 0)
			mmu_code_page(emu, page, w.gpa & ~0xfffull);
		if (page + 0x1000 < page)
			break;
	}
}

int blk_decode(struct emu *emu, uint64_t addr, uint32_t size, bool cs64, struct blk *b)
{
	struct insn tmp[64], *v = tmp;
	unsigned int n = 0, cap = 64;
	uint64_t a = addr;
	int r = 0;

	while (a < addr + size) {
		if (n == cap) {
			struct insn *nv = malloc(sizeof(*nv) * cap * 2);

			if (!nv) {
				r = -ENOMEM;
				break;
			}
			memcpy(nv, v, sizeof(*nv) * n);
			if (v != tmp)
				free(v);
			v = nv;
			cap *= 2;
		}
		r = insn_decode(emu, a, cs64, &v[n]);
		if (r == -EINVAL) {
			/*
			 * Not an instruction (Unicorn raises #UD there): the block is
			 * what comes before it, maybe nothing.
			 */
			r = 0;
			break;
		}
		if (r < 0)
			break;
		a += v[n].len;
		n++;
	}
	if (r < 0 || n > UINT16_MAX) {
		if (v != tmp)
			free(v);
		return r < 0 ? r : -EINVAL;
	}
	blk_free(b);
	b->insns = malloc(sizeof(*v) * (n ? n : 1));
	if (!b->insns) {
		if (v != tmp)
			free(v);
		return -ENOMEM;
	}
	memcpy(b->insns, v, sizeof(*v) * n);
	if (v != tmp)
		free(v);
	b->addr = addr;
	b->size = size;
	b->n = (uint16_t) n;
	mark_code(emu, addr, size);
	b->cs64 = cs64;
	b->hooked = false;
	b->stale = false;
	b->has_special = false;
	memset(&b->sum, 0, sizeof(b->sum));
	for (unsigned int i = 0; i < n; i++) {
		insn_count(&b->insns[i], false, &b->sum);
		if (b->insns[i].special)
			b->has_special = true;
	}
	return 0;
}

void blk_free(struct blk *b)
{
	free(b->insns);
	b->insns = NULL;
	b->n = 0;
	b->size = 0;
}
