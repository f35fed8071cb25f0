/* SPDX-License-Identifier: MIT */
/*
 * Exact counting on the emulator vCPU: every retired guest instruction
 * reaches the vPMU's exact backend.
 *
 * Modelled time: every instruction takes EMU_CYCLES_PER_INSN (1) core
 * cycle, a taken branch EMU_CYCLES_TAKEN (1) more; the core clock runs at
 * the TSC rate, so reference cycles equal core cycles and the guest's TSC
 * advances by exactly the cycles retired (RDTSC, IA32_TSC, fixed counter
 * 2 and CPUID 15H agree).
 *
 * A block hook feeds each translated block to the vPMU once the next
 * block starts (so the last branch's direction is known). Before a block
 * whose instructions could overflow a counter, the VMM asks the vPMU which
 * instruction the overflow lands on (vpmu_exact_would_overflow over the
 * block's prefixes) and runs the block again from its start with a
 * Unicorn exit right after that instruction, so the guest stops there and
 * its PMI arrives there (the PEBS record gets that IP and the register
 * state after it) -- no code hook, so no block stays slow. An overflow on
 * a block's last instruction needs nothing: the next block's hook is right
 * after it. Blocks with special instructions, interrupt windows and REP
 * iterations use step mode: a code hook on every instruction of the
 * block. Special instructions (emu-cpu.c) get code hooks at their own
 * addresses only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "emu-priv.h"

static void acc_add(struct vpmu_exact_counts *a, const struct vpmu_exact_counts *c)
{
	a->instructions += c->instructions;
	a->cycles += c->cycles;
	a->ref_cycles += c->ref_cycles;
	a->branches += c->branches;
	a->cond_branches += c->cond_branches;
	a->cond_taken += c->cond_taken;
	a->near_calls += c->near_calls;
	a->near_returns += c->near_returns;
	a->near_taken += c->near_taken;
	a->far_branches += c->far_branches;
	a->branch_misses += c->branch_misses;
	a->loads += c->loads;
	a->stores += c->stores;
	a->mem_insts += c->mem_insts;
	a->cpl = c->cpl;
	a->last_ip = c->last_ip;
	a->last_dla = c->last_dla;
}

/* Instructions the emulator may batch: fewer than any counter's overflow needs. */
static uint64_t feed_budget(struct emu *emu)
{
	uint64_t h = vpmu_exact_headroom(emu->pmu);

	if (h == UINT64_MAX)
		return UINT64_MAX;
	return h ? (h - 1) / EMU_CYCLES_MAX : 0;
}

/* Hand the batched counts to the vPMU: before anything reads or changes its state. */
void emu_feed_flush(struct emu *emu)
{
	if (emu->acc_valid) {
		emu->acc_valid = false;
		vpmu_exact_feed(emu->pmu, &emu->acc);
		memset(&emu->acc, 0, sizeof(emu->acc));
	}
	emu->budget = 0; /* the guest may change counters next: ask again */
}

/*
 * Count retired instructions. While they cannot overflow any counter they
 * are only added up (one addition per block, the common case); the feed
 * that may overflow one goes to the vPMU at once, with everything before it.
 */
void emu_feed(struct emu *emu, struct vpmu_exact_counts *c)
{
	c->cpl = emu->cpl;
	c->ref_cycles = c->cycles;
	emu->st.instructions += c->instructions;
	emu->st.cycles += c->cycles;
	emu->lbr_cycles += c->cycles;
	if (!emu->pmu)
		return;
	if (emu->acc_valid && emu->acc.cpl != c->cpl)
		emu_feed_flush(emu);
	if (!emu->budget && !emu->acc_valid)
		emu->budget = feed_budget(emu);
	if (c->instructions < emu->budget) {
		acc_add(&emu->acc, c);
		emu->acc_valid = true;
		emu->budget -= c->instructions;
		return;
	}
	emu_feed_flush(emu);
	vpmu_exact_feed(emu->pmu, c);
}

static enum vpmu_branch_kind branch_kind(const struct insn *in)
{
	if (in->flags & IC_FAR)
		return VPMU_BR_FAR;
	if (in->flags & IC_COND)
		return VPMU_BR_COND;
	if (in->flags & IC_CALL)
		return in->flags & IC_IND ? VPMU_BR_CALL_IND : VPMU_BR_CALL;
	if (in->flags & IC_RET)
		return VPMU_BR_RET;
	return in->flags & IC_IND ? VPMU_BR_JMP_IND : VPMU_BR_JMP;
}

/* A retired branch from `in` to `to`: taken-only extras and the LBR. */
static void branch_retired(struct emu *emu, const struct insn *in, uint64_t to,
			   struct vpmu_exact_counts *c, bool *ret_lbr)
{
	bool taken = (in->flags & IC_UNCOND) || to != in->addr + in->len;

	*ret_lbr = false;
	if (!(in->flags & IC_BRANCH) || !taken)
		return;
	/*
	 * A far branch that went on at the next instruction is a software
	 * interrupt that Unicorn hands to the VMM: its one LBR record, INT ->
	 * handler, is intr_deliver()'s to write.
	 */
	if ((in->flags & IC_FAR) && to == in->addr + in->len) {
		emu->lbr_int_from = in->addr;
		emu->lbr_int_ret = to;
		return;
	}
	if ((in->flags & IC_COND)) {
		c->cond_taken++;
		c->near_taken++;
		c->cycles += EMU_CYCLES_TAKEN;
	}
	*ret_lbr = emu->pmu && vpmu_lbr_active(emu->pmu);
}

/* Feed insns [from, to) of `b`; `next` is where execution went after insns[to - 1]. */
static void feed_range(struct emu *emu, const struct blk *b, unsigned int from, unsigned int to,
		       uint64_t next)
{
	struct vpmu_exact_counts c;
	const struct insn *last;
	bool lbr = false;

	if (from >= to)
		return;
	if (from == 0 && to == b->n) {
		c = b->sum;
	} else {
		memset(&c, 0, sizeof(c));
		for (unsigned int i = from; i < to; i++)
			insn_count(&b->insns[i], false, &c);
	}
	last = &b->insns[to - 1];
	if (to == b->n)
		branch_retired(emu, last, next, &c, &lbr);
	c.last_ip = last->addr;
	c.last_dla = last->addr == emu->until_dla_ip ? emu->until_dla : 0;
	emu->st.blocks++;
	if (lbr) {
		/*
		 * the branch retires last: its LBR entry carries the block's
		 * cycles, and is written before its count can request a PMI
		 * whose freeze (or PEBS LBR group) must include it
		 */
		uint64_t cyc = emu->lbr_cycles + c.cycles;

		vpmu_lbr_branch(emu->pmu, last->addr, next, branch_kind(last), emu->cpl, cyc);
		emu_feed(emu, &c);
		emu->lbr_cycles = 0;
		return;
	}
	emu_feed(emu, &c);
}

/* The current block is done: execution continues at `next`. */
static void retire_cur(struct emu *emu, uint64_t next)
{
	const struct blk *b = emu->cur;
	const struct insn *last = &b->insns[b->n - 1];

	if (emu->fed) {
		/* resumed inside the block after an emulated instruction */
		for (unsigned int k = emu->fed; k < b->n; k++)
			if (b->insns[k].addr == next && k == emu->fed)
				return;
	}
	/* a REP string instruction loops on itself: it retires once, when it ends */
	if ((last->flags & IC_REP) && next == last->addr) {
		feed_range(emu, b, emu->fed, b->n - 1u, next);
		return;
	}
	feed_range(emu, b, emu->fed, b->n, next);
	if (last->flags & IC_FAR)
		emu_refresh_mode(emu);
}

static void step_feed_prev(struct emu *emu, uint64_t next)
{
	struct vpmu_exact_counts c;
	bool lbr;

	memset(&c, 0, sizeof(c));
	insn_count(&emu->prev, false, &c);
	branch_retired(emu, &emu->prev, next, &c, &lbr);
	c.last_ip = emu->prev.addr;
	c.last_dla = emu->prev_dla;
	emu->prev_valid = false;
	emu->st.stepped++;
	/* the branch's record first, as in feed_range() */
	if (lbr)
		vpmu_lbr_branch(emu->pmu, emu->prev.addr, next, branch_kind(&emu->prev), emu->cpl,
				emu->lbr_cycles + c.cycles);
	emu_feed(emu, &c);
	if (lbr)
		emu->lbr_cycles = 0;
	if (emu->prev.flags & IC_FAR)
		emu_refresh_mode(emu);
}

static uint64_t reg_value(struct emu *emu, unsigned int csreg, uint64_t next)
{
	int r;

	if (csreg == X86_REG_INVALID)
		return 0;
	if (csreg == X86_REG_RIP || csreg == X86_REG_EIP)
		return next;
	r = insn_uc_reg(csreg);
	if (r < 0)
		return 0;
	return insn_is_gpr32(csreg) ? emu_reg(emu, r) & 0xffffffffull : emu_reg(emu, r);
}

/* The linear address the instruction about to run will access (before it runs). */
uint64_t count_data_address(struct emu *emu, const struct insn *in)
{
	uint64_t a = 0, mask = emu->cs64 ? ~0ull : 0xffffffffull;

	switch (in->dla) {
	case DLA_MODRM:
		a = reg_value(emu, in->base, in->addr + in->len) +
		    reg_value(emu, in->index, 0) * in->scale + (uint64_t) in->disp;
		if (in->seg == X86_REG_FS || in->seg == X86_REG_GS)
			a += reg_value(emu, in->seg, 0);
		break;
	case DLA_PUSH:
		a = emu_reg(emu, UC_X86_REG_RSP) - in->opsize;
		break;
	case DLA_POP:
		a = emu_reg(emu, UC_X86_REG_RSP);
		break;
	case DLA_RSI:
		a = emu_reg(emu, UC_X86_REG_RSI);
		break;
	case DLA_RDI:
		a = emu_reg(emu, UC_X86_REG_RDI);
		break;
	default:
		return 0;
	}
	return a & mask;
}

static bool anything_pending(struct emu *emu)
{
	return (emu->nmi_pending && !emu->nmi_blocked) || lapic_pending(&emu->apic) >= 0 ||
	       (lapic_extint(&emu->apic) && pic_intr(&emu->plat.pic));
}

/* STI, POPF, IRET: an interrupt may become deliverable after them. */
static bool window_special(struct emu *emu, const struct insn *in)
{
	if (in->special == SP_IRET && emu->nmi_blocked)
		emu->nmi_blocked = false; /* NMIs are blocked until the next IRET */
	if (in->special != SP_STI && in->special != SP_POPF && in->special != SP_IRET)
		return false;
	if (!anything_pending(emu))
		return false;
	/* STI: one more instruction runs in its interrupt shadow */
	emu->window = in->special == SP_STI ? 2 : 1;
	return true;
}

/* The instruction stepped before retired and execution went on at `next`. */
static bool step_retired(struct emu *emu, uint64_t next)
{
	step_feed_prev(emu, next);
	if (emu->window && --emu->window == 0) {
		emu_stop(emu, next); /* the interrupt window is open now */
		return true;
	}
	return false;
}

static void hook_step(uc_engine *uc, uint64_t addr, uint32_t size, void *data)
{
	struct emu *emu = data;
	struct insn in;

	if (emu->mode != EMU_STEP)
		return;
	emu->hook_rip = addr;
	if (emu->prev_valid) {
		if ((emu->prev.flags & IC_REP) && addr == emu->prev.addr)
			return; /* the next iteration of the same REP instruction */
		if (step_retired(emu, addr))
			return;
	}
	if ((emu->mmu.smc_n || emu->mmu.smc_overflow) && mmu_smc_service(emu, addr, 15))
		emu->async_stop = 1; /* 15: the longest instruction (SDM Vol. 2A 2.3.11) */
	if (emu->fatal || emu->want_stop || emu->kicked || emu->async_stop || emu->interrupted) {
		emu_stop(emu, addr);
		return;
	}
	if (insn_decode(emu, addr, emu->cs64, &in) < 0) {
		emu_fatal(emu, "cannot decode guest code at %#llx", (unsigned long long) addr);
		return;
	}
	if (in.special && in.special != SP_STI && in.special != SP_POPF && in.special != SP_IRET) {
		int r = cpu_exec_special(emu, &in);

		if (r == SPECIAL_DONE && emu->window && --emu->window == 0 && !emu_stopped(emu))
			emu_stop(emu, addr + in.len);
		if (r != SPECIAL_NATIVE)
			return;
		/* checked: Unicorn executes it, and it retires like any other */
	}
	window_special(emu, &in);
	emu->prev = in;
	emu->prev_valid = true;
	emu->prev_dla = count_data_address(emu, &in);
}

static void hook_special(uc_engine *uc, uint64_t addr, uint32_t size, void *data)
{
	struct emu *emu = data;
	struct blk *b = emu->cur;
	unsigned int k;

	if (emu->mode != EMU_FAST)
		return;
	emu->hook_rip = addr;
	if (emu->trace)
		fprintf(stderr, "trace: special %#llx\n", (unsigned long long) addr);
	for (k = emu->fed; k < b->n && b->insns[k].addr != addr; k++)
		;
	if (k == b->n || !b->insns[k].special)
		return;
	feed_range(emu, b, emu->fed, k, addr);
	emu->fed = k;
	if (window_special(emu, &b->insns[k])) {
		emu_stop(emu, addr); /* run it and its shadow in step mode */
		return;
	}
	/* an emulated one is counted there; a native one retires with the block */
	if (cpu_exec_special(emu, &b->insns[k]) == SPECIAL_DONE)
		emu->fed = k + 1;
}

/* Code hooks on the special instructions of `b`; true if one was new (retranslate it). */
static bool install_special_hooks(struct emu *emu, struct blk *b)
{
	bool added = false;

	for (unsigned int i = 0; i < b->n; i++) {
		uint64_t a = b->insns[i].addr;
		bool have = false;

		if (!b->insns[i].special)
			continue;
		for (unsigned int j = 0; j < emu->nr_special && !have; j++)
			have = emu->special_addr[j] == a;
		if (have)
			continue;
		if (emu->nr_special == MAX_SPECIAL_HOOKS) {
			emu->evict_hooks = true; /* the run loop makes room */
			return true;
		}
		if (uc_hook_add(emu->uc, &emu->special_hooks[emu->nr_special], UC_HOOK_CODE,
				(void *) hook_special, emu, a, a) != UC_ERR_OK) {
			emu_fatal(emu, "cannot hook the instruction at %#llx",
				  (unsigned long long) a);
			return true;
		}
		emu->special_addr[emu->nr_special++] = a;
		added = true;
		if (emu->trace)
			fprintf(stderr, "trace: hook special %#llx\n", (unsigned long long) a);
	}
	b->hooked = true;
	return added;
}

static bool listed(const uint64_t *v, unsigned int n, uint64_t a)
{
	for (unsigned int i = 0; i < n; i++)
		if (v[i] == a)
			return true;
	return false;
}

/*
 * Index of the instruction of `b` (not its last) whose retirement
 * overflows a counter, or -1: none does before the last one, where the
 * next block's hook is the precise stop anyway.
 */
static int overflow_index(struct emu *emu, const struct blk *b)
{
	struct vpmu_exact_counts c;

	memset(&c, 0, sizeof(c));
	c.cpl = emu->cpl;
	for (unsigned int i = 0; i + 1 < b->n; i++) {
		insn_count(&b->insns[i], false, &c);
		if (vpmu_exact_would_overflow(emu->pmu, &c))
			return (int) i;
	}
	return -1;
}

/*
 * Near an overflow, for a block without special instructions: arm a stop
 * right after the overflowing instruction and rerun the block. False when
 * no stop is needed (or possible): count the block as usual.
 */
static bool arm_until(struct emu *emu, const struct blk *b)
{
	const struct insn *last = &b->insns[b->n - 1];
	int k;

	/* an overflow on the last instruction is precise at the next block, but not its DLA */
	if (last->dla != DLA_NONE || (last->flags & IC_REP))
		return false;
	k = overflow_index(emu, b);
	if (k < 0)
		return true; /* handled: nothing to stop for */
	if (b->insns[k].flags & IC_REP)
		return false;
	emu->until = b->insns[k + 1].addr;
	emu->until_next = 0;
	if (b->insns[k].dla != DLA_NONE) {
		/* first stop before it, for the address it will access */
		emu->until_next = emu->until;
		emu->until = b->insns[k].addr;
	}
	emu->st.until_stops++;
	emu_set_mode(emu, EMU_REARM);
	emu_stop(emu, b->addr);
	return true;
}

/* Count block `b` one instruction at a time from now on: a code hook over it. */
static void hook_block_for_steps(struct emu *emu, struct blk *b)
{
	if (emu->nr_step == MAX_STEP_HOOKS) {
		emu->evict_hooks = true; /* the run loop makes room */
		return;
	}
	if (uc_hook_add(emu->uc, &emu->step_hooks[emu->nr_step], UC_HOOK_CODE, (void *) hook_step,
			emu, b->addr, b->addr + b->size - 1) != UC_ERR_OK) {
		emu_fatal(emu, "cannot hook the block at %#llx", (unsigned long long) b->addr);
		return;
	}
	emu->step_addr[emu->nr_step++] = b->addr;
	emu->st.step_entries++;
}

/* Count block `b` whole once the next one starts (EMU_FAST). */
static void count_fast(struct emu *emu, struct blk *b)
{
	emu_set_mode(emu, EMU_FAST);
	emu->cur = b;
	emu->fed = 0;
}

void count_hook_block(uc_engine *uc, uint64_t addr, uint32_t size, void *data)
{
	struct emu *emu = data;
	struct blk *b;
	bool step, near;

	if (emu->mode == EMU_VMM)
		return; /* not guest code: VMM code run by Unicorn (boot stub, ring change) */
	if (emu_stopped(emu))
		return; /* a hook stopped the run: this block is entered, then left at once */
	if (emu->trace)
		fprintf(stderr, "trace: block %#llx+%u\n", (unsigned long long) addr, size);
	emu->hook_rip = addr;
	if (emu->prev_valid && !((emu->prev.flags & IC_REP) && addr == emu->prev.addr) &&
	    step_retired(emu, addr))
		return;
	if (emu->mode == EMU_FAST)
		retire_cur(emu, addr);
	emu_set_mode(emu, EMU_BOUNDARY);
	/* code written through another mapping: drop what is stale before it runs */
	if ((emu->mmu.smc_n || emu->mmu.smc_overflow) && mmu_smc_service(emu, addr, size))
		emu->async_stop = 1; /* this block is: run it again, translated anew */
	/* a host counter's overflow record, without a signal: stop here and poll */
	if (emu->host_poll && ++emu->poll_tick >= EMU_POLL_BLOCKS) {
		emu->poll_tick = 0;
		if (vpmu_vcpu_pending(emu->pmu))
			emu->kicked = 1;
	}
	if (emu->cfg.max_instructions && emu->st.instructions > emu->cfg.max_instructions)
		emu_fatal(emu, "the guest ran past %llu instructions (--max-insns)",
			  (unsigned long long) emu->cfg.max_instructions);
	if (emu->stop_armed && emu->st.instructions >= emu->stop_at)
		emu->want_stop = true; /* emu_stop_at: emu_run returns before the next run */
	/* the LAPIC timer's interrupt is due: stop at this block boundary */
	if (emu_tsc(emu) >= emu->timer_at)
		emu->want_stop = true;
	if (emu->fatal || emu->want_stop || emu->kicked || emu->async_stop || emu->interrupted) {
		emu_stop(emu, addr);
		return;
	}
	b = &emu->blocks[(addr ^ addr >> 12) % BLK_CACHE];
	if (!b->insns || b->stale || b->addr != addr || b->size != size || b->cs64 != emu->cs64) {
		if (blk_decode(emu, addr, size, emu->cs64, b) < 0) {
			emu_fatal(emu, "cannot decode guest code at %#llx",
				  (unsigned long long) addr);
			return;
		}
	}
	if (!b->n)
		return; /* it starts with no instruction: Unicorn raises #UD there */
	if (b->has_special && !b->hooked && install_special_hooks(emu, b)) {
		/* retranslate the block with hooks on its special instructions */
		emu->remove_cache = true;
		emu->remove_cache_addr = addr;
		emu->remove_cache_end = addr + size;
		emu_stop(emu, addr);
		return;
	}
	/* near an overflow: a precise stop after it, or one instruction at a time */
	near = false;
	if (!emu->until && emu->pmu && b->n >= emu->budget) {
		emu_feed_flush(emu);
		near = vpmu_exact_headroom(emu->pmu) <= (uint64_t) b->n * EMU_CYCLES_MAX;
	}
	if (near && !emu->window && !emu->prev_valid && !b->has_special) {
		if (emu_stopped(emu))
			return; /* arm_until stopped before: rerun */
		if (arm_until(emu, b)) {
			if (!emu_stopped(emu))
				count_fast(emu, b);
			return;
		}
	}
	step = emu->window || near || emu->prev_valid; /* a stepped REP instruction goes on */
	if (step) {
		if (!listed(emu->step_addr, emu->nr_step, addr)) {
			hook_block_for_steps(emu, b);
			emu->remove_cache = true;
			emu->remove_cache_addr = addr;
			emu->remove_cache_end = addr + size;
			emu_stop(emu, addr);
			return;
		}
		emu_set_mode(emu, EMU_STEP);
		return;
	}
	count_fast(emu, b);
}

/* Where the current block stood when Unicorn stopped at `rip` on its own. */
void count_retire_to(struct emu *emu, uint64_t rip, bool trap)
{
	const struct blk *b = emu->cur;

	if (emu->mode == EMU_STEP) {
		if (emu->prev_valid && (trap || rip != emu->prev.addr))
			step_feed_prev(emu, rip);
		emu->prev_valid = false;
		return;
	}
	if (emu->mode != EMU_FAST)
		return;
	for (unsigned int k = emu->fed; k < b->n; k++) {
		if (b->insns[k].addr == rip) {
			feed_range(emu, b, emu->fed, k, rip);
			emu_set_mode(emu, EMU_BOUNDARY);
			return;
		}
	}
	feed_range(emu, b, emu->fed, b->n, rip);
	emu_set_mode(emu, EMU_BOUNDARY);
}

/* The instruction at `rip` retired and went on at `to` (a SYSCALL the VMM completes). */
void count_retire_through(struct emu *emu, uint64_t rip, uint64_t to)
{
	const struct blk *b = emu->cur;

	if (emu->mode == EMU_STEP) {
		if (emu->prev_valid && emu->prev.addr == rip)
			step_feed_prev(emu, to);
		emu->prev_valid = false;
		return;
	}
	if (emu->mode != EMU_FAST)
		return;
	for (unsigned int k = emu->fed; k < b->n; k++) {
		if (b->insns[k].addr == rip) {
			feed_range(emu, b, emu->fed, k + 1, to);
			emu_set_mode(emu, EMU_BOUNDARY);
			return;
		}
	}
}

/*
 * Unicorn made a new translation at cur->pc (the first time, or again
 * after its own self-modifying-code check dropped one): what we decoded
 * there may be old bytes.
 */
void count_hook_new_tb(uc_engine *uc, uc_tb *cur, uc_tb *prev, void *data)
{
	struct emu *emu = data;
	struct blk *b = &emu->blocks[(cur->pc ^ cur->pc >> 12) % BLK_CACHE];

	if (emu->trace)
		fprintf(stderr, "trace: new translation %#llx+%u\n", (unsigned long long) cur->pc,
			cur->size);
	if (b->insns && b->addr == cur->pc)
		b->stale = true;
}
