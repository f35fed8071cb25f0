/* SPDX-License-Identifier: MIT */
/*
 * The emulator vCPU: setup, the run loop, and exact counting.
 *
 * Modelled time: every instruction takes EMU_CYCLES_PER_INSN (1) core
 * cycle, a taken branch EMU_CYCLES_TAKEN (1) more; the core clock runs at
 * the TSC rate, so reference cycles equal core cycles and the guest's TSC
 * advances by exactly the cycles retired (RDTSC, IA32_TSC, fixed counter
 * 2 and CPUID 15H agree). HLT stops the clock: there is no timer.
 *
 * Counting: a block hook feeds each translated block to the vPMU once the
 * next block starts (so the last branch's direction is known). Before a
 * block whose instructions could overflow a counter, the VMM asks the
 * vPMU which instruction the overflow lands on (vpmu_exact_would_overflow
 * over the block's prefixes) and runs the block again from its start with
 * Unicorn's `until` right after that instruction, so the guest stops
 * there and its PMI arrives there (the PEBS record gets that IP and the
 * register state after it) -- no code hook, so no block stays slow. An
 * overflow on a block's last instruction needs nothing: the next block's
 * hook is right after it. Blocks with special instructions, interrupt
 * windows and REP iterations use step mode: a code hook on every
 * instruction of the block. Special instructions (emu-cpu.c) get code
 * hooks at their own addresses only.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "emu-priv.h"

#define RFLAGS_IF	   (1ull << 9)
#define STEP_EXIT_HEADROOM 4096	  /* leave step mode with this many events left */
#define PMI_STORM_MIN	   8	  /* instructions between PMIs below this... */
#define PMI_STORM_COUNT	   100000 /* ...this many times in a row: a storm */

void emu_config_init(struct emu_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->model = "Skylake-Server";
	cfg->mem_size = 128ull << 20;
	cfg->pmu = true;
	cfg->serial_out = stdout;
	cfg->pmu_backend = VPMU_BACKEND_EXACT;
	cfg->pmu_signo = SIGRTMIN + 4;
}

void emu_fatal(struct emu *emu, const char *fmt, ...)
{
	va_list ap;

	if (emu->fatal)
		return;
	va_start(ap, fmt);
	vsnprintf(emu->fatal_msg, sizeof(emu->fatal_msg), fmt, ap);
	va_end(ap);
	emu->fatal = true;
	if (emu->in_run)
		uc_emu_stop(emu->uc);
}

uint64_t emu_reg(struct emu *emu, int reg)
{
	uint64_t v = 0;

	uc_reg_read(emu->uc, reg, &v);
	return v;
}

void emu_set_reg(struct emu *emu, int reg, uint64_t v)
{
	uc_reg_write(emu->uc, reg, &v);
}

uint64_t emu_tsc(const struct emu *emu)
{
	return emu->tsc_offset + emu->st.cycles;
}

void emu_stop(struct emu *emu, uint64_t resume_rip)
{
	emu->stopped = true;
	emu->resume_rip = resume_rip;
	emu->cur = NULL;
	uc_emu_stop(emu->uc);
}

void emu_raise(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip)
{
	emu->pending_vector = (int) vector;
	emu->pending_has_err = has_err;
	emu->pending_err = err;
	emu->pending_rip = rip;
	emu_stop(emu, rip);
}

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
static uint64_t data_address(struct emu *emu, const struct insn *in)
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
	return (emu->nmi_pending && !emu->nmi_blocked) || lapic_pending(&emu->apic) >= 0;
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

	if (!emu->stepping)
		return;
	emu->hook_rip = addr;
	if (emu->prev_valid) {
		if ((emu->prev.flags & IC_REP) && addr == emu->prev.addr)
			return; /* the next iteration of the same REP instruction */
		if (step_retired(emu, addr))
			return;
	}
	if (emu->fatal || emu->want_stop || emu->kicked) {
		emu_stop(emu, addr);
		return;
	}
	if (insn_decode(emu, addr, emu->cs64, &in) < 0) {
		emu_fatal(emu, "cannot decode guest code at %#llx", (unsigned long long) addr);
		return;
	}
	if (in.special && in.special != SP_STI && in.special != SP_POPF && in.special != SP_IRET) {
		if (cpu_exec_special(emu, &in) && emu->window && --emu->window == 0 &&
		    !emu->stopped)
			emu_stop(emu, addr + in.len);
		return;
	}
	window_special(emu, &in);
	emu->prev = in;
	emu->prev_valid = true;
	emu->prev_dla = data_address(emu, &in);
}

static void hook_special(uc_engine *uc, uint64_t addr, uint32_t size, void *data)
{
	struct emu *emu = data;
	struct blk *b = emu->cur;
	unsigned int k;

	if (emu->stepping || !b)
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
	if (cpu_exec_special(emu, &b->insns[k]))
		emu->fed = k + 1;
}

static void install_special_hooks(struct emu *emu, struct blk *b)
{
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
			emu->paging_dirty = true; /* start over with no hooks */
			return;
		}
		if (uc_hook_add(emu->uc, &emu->special_hooks[emu->nr_special], UC_HOOK_CODE,
				(void *) hook_special, emu, a, a) != UC_ERR_OK) {
			emu_fatal(emu, "cannot hook the instruction at %#llx",
				  (unsigned long long) a);
			return;
		}
		emu->special_addr[emu->nr_special++] = a;
		if (emu->trace)
			fprintf(stderr, "trace: hook special %#llx\n", (unsigned long long) a);
	}
	b->hooked = true;
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
	emu->until_arming = true;
	emu->st.until_stops++;
	emu_stop(emu, b->addr);
	return true;
}

/* Count block `b` one instruction at a time from now on: a code hook over it. */
static void hook_block_for_steps(struct emu *emu, struct blk *b)
{
	if (emu->nr_step == MAX_STEP_HOOKS) {
		emu->paging_dirty = true; /* start over with no hooks */
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

static void hook_block(uc_engine *uc, uint64_t addr, uint32_t size, void *data)
{
	struct emu *emu = data;
	struct blk *b;
	bool step, near;

	if (emu->trampoline >= 0)
		return; /* not guest code: intr_deliver's CPL change */
	if (emu->trace)
		fprintf(stderr, "trace: block %#llx+%u\n", (unsigned long long) addr, size);
	emu->hook_rip = addr;
	if (emu->prev_valid && !((emu->prev.flags & IC_REP) && addr == emu->prev.addr) &&
	    step_retired(emu, addr))
		return;
	if (emu->cur)
		retire_cur(emu, addr);
	emu->cur = NULL;
	emu->stepping = false;
	/* a host counter's overflow record, without a signal: stop here and poll */
	if (emu->host_poll && ++emu->poll_tick >= EMU_POLL_BLOCKS) {
		emu->poll_tick = 0;
		if (vpmu_vcpu_pending(emu->pmu))
			emu->kicked = 1;
	}
	if (emu->fatal || emu->want_stop || emu->kicked) {
		emu_stop(emu, addr);
		return;
	}
	b = &emu->blocks[(addr ^ addr >> 12) % BLK_CACHE];
	if (!b->insns || b->addr != addr || b->size != size || b->cs64 != emu->cs64) {
		if (blk_decode(emu, addr, size, emu->cs64, b) < 0) {
			emu_fatal(emu, "cannot decode guest code at %#llx",
				  (unsigned long long) addr);
			return;
		}
	}
	if (b->has_special && !b->hooked) {
		/* retranslate the block with hooks on its special instructions */
		install_special_hooks(emu, b);
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
		if (emu->stopped)
			return; /* arm_until stopped before: rerun */
		if (arm_until(emu, b)) {
			if (!emu->stopped) {
				emu->cur = b;
				emu->fed = 0;
			}
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
		emu->stepping = true;
		return;
	}
	emu->cur = b;
	emu->fed = 0;
}

/* Where the current block stood when Unicorn stopped at `rip` on its own. */
static void retire_to(struct emu *emu, uint64_t rip, bool trap)
{
	const struct blk *b = emu->cur;

	if (emu->stepping) {
		if (emu->prev_valid && (trap || rip != emu->prev.addr))
			step_feed_prev(emu, rip);
		emu->prev_valid = false;
		return;
	}
	if (!b)
		return;
	for (unsigned int k = emu->fed; k < b->n; k++) {
		if (b->insns[k].addr == rip) {
			feed_range(emu, b, emu->fed, k, rip);
			emu->cur = NULL;
			return;
		}
	}
	feed_range(emu, b, emu->fed, b->n, rip);
	emu->cur = NULL;
}

static void hook_intr(uc_engine *uc, uint32_t intno, void *data)
{
	struct emu *emu = data;
	uint64_t rip = emu_reg(emu, UC_X86_REG_RIP);
	/* vectors with an error code (SDM Vol. 3A Table 6-1); Unicorn does not
	 * say which code, the frame gets 0 */
	bool err = intno == 8 || (intno >= 10 && intno <= 14) || intno == 17;
	bool trap = intno == 3 || intno == 4 || intno >= 32;

	if (emu->trampoline >= 0) {
		emu->trampoline = (int) intno;
		uc_emu_stop(uc);
		return;
	}
	retire_to(emu, rip, trap);
	emu->st.exceptions++;
	emu_raise(emu, intno, err, 0, rip);
}

static bool hook_invalid(uc_engine *uc, void *data)
{
	struct emu *emu = data;
	uint64_t rip = emu_reg(emu, UC_X86_REG_RIP);

	retire_to(emu, rip, false);
	emu->st.exceptions++;
	emu_raise(emu, 6, false, 0, rip); /* #UD */
	return false;
}

static uint32_t hook_in(uc_engine *uc, uint32_t port, int size, void *data)
{
	struct emu *emu = data;
	uint32_t v = 0;

	emu->st.io_exits++;
	if (emu->plat.exited || emu->fatal)
		return 0;
	if (platform_io(&emu->plat, (uint16_t) port, (unsigned int) size, false, &v) < 0)
		emu_fatal(emu, "guest read from I/O port %#x, where no device is", port);
	return v;
}

static void hook_out(uc_engine *uc, uint32_t port, int size, uint32_t value, void *data)
{
	struct emu *emu = data;

	emu->st.io_exits++;
	if (emu->plat.exited || emu->fatal)
		return;
	if (platform_io(&emu->plat, (uint16_t) port, (unsigned int) size, true, &value) < 0)
		emu_fatal(emu, "guest wrote %#x to I/O port %#x, where no device is", value, port);
	if (emu->plat.exited) {
		emu->plat.serial_out = NULL; /* it has exited: nothing more is printed */
		uc_emu_stop(uc);
	}
}

static void pmi_cb(void *data, struct vpmu_vcpu *vcpu)
{
	struct emu *emu = data;
	struct vpmu_lvt d;

	vpmu_lvt_decode(lapic_lvtpc(&emu->apic), &d);
	if (d.action == VPMU_LVT_DROP || !(emu->apic.base & APIC_BASE_ENABLE))
		return;
	lapic_set_lvtpc(&emu->apic, d.after);
	if (d.action == VPMU_LVT_NMI)
		emu->nmi_pending = true;
	else
		lapic_set_irr(&emu->apic, d.vector);
	vpmu_pmi_delivered(vcpu);
	emu->st.pmis++;
	if (emu->st.instructions - emu->last_pmi_insns < PMI_STORM_MIN) {
		if (++emu->storm > PMI_STORM_COUNT)
			emu_fatal(emu,
				  "PMI storm: %u PMIs in a row fewer than %u instructions apart "
				  "(a counter re-armed too close to overflow?)",
				  PMI_STORM_COUNT, PMI_STORM_MIN);
	} else {
		emu->storm = 0;
	}
	emu->last_pmi_insns = emu->st.instructions;
	emu->want_stop = true;
}

static int regs_cb(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *r)
{
	static const int gprs[16] = {
		UC_X86_REG_RAX, UC_X86_REG_RCX, UC_X86_REG_RDX, UC_X86_REG_RBX,
		UC_X86_REG_RSP, UC_X86_REG_RBP, UC_X86_REG_RSI, UC_X86_REG_RDI,
		UC_X86_REG_R8,	UC_X86_REG_R9,	UC_X86_REG_R10, UC_X86_REG_R11,
		UC_X86_REG_R12, UC_X86_REG_R13, UC_X86_REG_R14, UC_X86_REG_R15,
	};
	struct emu *emu = data;

	memset(r, 0, sizeof(*r));
	r->rip = emu->hook_rip;
	r->rflags = emu_reg(emu, UC_X86_REG_RFLAGS);
	for (int i = 0; i < 16; i++)
		r->gpr[i] = emu_reg(emu, gprs[i]);
	for (int i = 0; i < 16; i++)
		uc_reg_read(emu->uc, UC_X86_REG_XMM0 + i, r->xmm[i]);
	r->cr0 = emu->cr0;
	r->cr3 = emu->cr3;
	r->cr4 = emu->cr4;
	r->efer = emu->efer;
	r->tsc = emu_tsc(emu);
	r->cpl = emu->cpl;
	r->long_mode = emu->cs64 && (emu->efer & (1ull << 10));
	r->sse = emu->cr4 & (1ull << 9);
	return 0;
}

int emu_new(const struct emu_config *cfg, struct emu **ret, char *err, size_t errlen)
{
	struct emu *emu;
	struct vpmu_config vc;
	struct vpmu_mem_region region;
	uc_err ue;
	int r;

	if (!cfg->mem_size || cfg->mem_size & 0xfff || cfg->mem_size > (64ull << 30)) {
		snprintf(err, errlen,
			 "RAM size must be a multiple of 4 KiB between 4 KiB and 64 GiB");
		return -EINVAL;
	}
	if (cfg->mem_size > 0xfee00000ull) {
		snprintf(err, errlen,
			 "RAM above 0xfee00000 would overlap the local APIC: use at most 4070 MiB");
		return -EINVAL;
	}
	emu = calloc(1, sizeof(*emu));
	if (!emu) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	emu->cfg = *cfg;
	emu->trace = getenv("VPMU_EMU_TRACE") != NULL;
	emu->pending_vector = -1;
	emu->trampoline = -1;
	emu->ram_size = cfg->mem_size;
	emu->ram = mmap(NULL, emu->ram_size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (emu->ram == MAP_FAILED) {
		emu->ram = NULL;
		emu_free(emu);
		snprintf(err, errlen, "cannot allocate %llu MiB of guest RAM",
			 (unsigned long long) (cfg->mem_size >> 20));
		return -ENOMEM;
	}
	emu->region.gpa = 0;
	emu->region.size = emu->ram_size;
	emu->region.hva = emu->ram;
	emu->mem.regions = &emu->region;
	emu->mem.nr = 1;
	{
		static uint8_t apic_page[4096];

		emu->map_regions[0] = emu->region;
		emu->map_regions[1].gpa = APIC_DEFAULT_BASE;
		emu->map_regions[1].size = sizeof(apic_page);
		emu->map_regions[1].hva = apic_page;
		emu->mem_map.regions = emu->map_regions;
		emu->mem_map.nr = 2;
	}
	lapic_reset(&emu->apic, 0);
	platform_init(&emu->plat, cfg->serial_out, cfg->mem_size, 1);
	emu->pat = 0x0007040600070406ull;
	emu->misc_enable = 1; /* fast strings */

	if (cfg->pmu) {
		vpmu_config_init(&vc);
		vc.model = cfg->model;
		vc.version = cfg->pmu_version ? cfg->pmu_version : -1;
		vc.backend = (enum vpmu_backend) cfg->pmu_backend;
		vc.signo = cfg->pmu_signo;
		vc.pmi = pmi_cb;
		vc.pmi_data = emu;
		vc.regs = regs_cb;
		vc.regs_data = emu;
		vc.filter = cfg->pmu_filter;
		vc.linear_bits = 48; /* Unicorn has no 5-level paging: CPUID.80000008H says 48 */
		/* errors come back as codes; vpmu-vmm prints its own line for them */
		vc.log = cfg->pmu_log;
		vc.log_data = cfg->pmu_log_data;
		vc.log_level = VPMU_LOG_WARNING;
		r = vpmu_vcpu_new(&vc, &emu->pmu);
		emu->host_poll = cfg->pmu_backend != VPMU_BACKEND_EXACT && cfg->pmu_signo == -1;
		if (r < 0) {
			snprintf(err, errlen,
				 r == -ENOENT
					 ? "unknown CPU model '%s' (vpmu-vmm --help lists them)"
					 : "cannot create the vPMU for '%s'",
				 cfg->model);
			emu_free(emu);
			return r;
		}
		region.gpa = 0;
		region.size = emu->ram_size;
		region.hva = emu->ram;
		vpmu_vcpu_set_memory(emu->pmu, &region, 1);
	} else if (vpmu_model_find(cfg->model) < 0) {
		snprintf(err, errlen, "unknown CPU model '%s' (vpmu-vmm --help lists them)",
			 cfg->model);
		emu_free(emu);
		return -ENOENT;
	}
	r = cpu_cpuid_init(emu);
	if (r < 0) {
		snprintf(err, errlen, "CPUID table too small for the PMU leaves");
		emu_free(emu);
		return r;
	}

	ue = uc_open(UC_ARCH_X86, UC_MODE_64, &emu->uc);
	if (ue != UC_ERR_OK) {
		emu->uc = NULL;
		snprintf(err, errlen, "cannot start Unicorn: %s", uc_strerror(ue));
		emu_free(emu);
		return -EIO;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &emu->csh64) != CS_ERR_OK ||
	    cs_open(CS_ARCH_X86, CS_MODE_32, &emu->csh32) != CS_ERR_OK) {
		snprintf(err, errlen, "cannot start Capstone");
		emu_free(emu);
		return -EIO;
	}
	cs_option(emu->csh64, CS_OPT_DETAIL, CS_OPT_ON);
	cs_option(emu->csh32, CS_OPT_DETAIL, CS_OPT_ON);
	ue = uc_hook_add(emu->uc, &emu->hooks[0], UC_HOOK_BLOCK, (void *) hook_block, emu, 1, 0);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[1], UC_HOOK_INTR, (void *) hook_intr, emu, 1,
				 0);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[2], UC_HOOK_INSN_INVALID,
				 (void *) hook_invalid, emu, 1, 0);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[3], UC_HOOK_INSN, (void *) hook_in, emu, 1, 0,
				 UC_X86_INS_IN);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[4], UC_HOOK_INSN, (void *) hook_out, emu, 1,
				 0, UC_X86_INS_OUT);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[5], UC_HOOK_MEM_UNMAPPED,
				 (void *) mmu_hook_unmapped, emu, 1, 0);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[6], UC_HOOK_MEM_WRITE_PROT,
				 (void *) mmu_hook_prot, emu, 1, 0);
	if (ue != UC_ERR_OK) {
		snprintf(err, errlen, "cannot hook Unicorn: %s", uc_strerror(ue));
		emu_free(emu);
		return -EIO;
	}
	*ret = emu;
	return 0;
}

void emu_free(struct emu *emu)
{
	if (!emu)
		return;
	for (unsigned int i = 0; i < BLK_CACHE; i++)
		blk_free(&emu->blocks[i]);
	if (emu->uc)
		uc_close(emu->uc);
	if (emu->csh64)
		cs_close(&emu->csh64);
	if (emu->csh32)
		cs_close(&emu->csh32);
	vpmu_vcpu_free(emu->pmu);
	if (emu->ram)
		munmap(emu->ram, emu->ram_size);
	free(emu);
}

struct vmm_ram emu_ram(struct emu *emu)
{
	struct vmm_ram r = { emu->ram, emu->ram_size };

	return r;
}

void emu_paging(const struct emu *emu, uint64_t *ret_cr0, uint64_t *ret_cr3, uint64_t *ret_cr4,
		uint64_t *ret_efer)
{
	*ret_cr0 = emu->cr0;
	*ret_cr3 = emu->cr3;
	*ret_cr4 = emu->cr4;
	*ret_efer = emu->efer;
}

struct vpmu_vcpu *emu_vpmu(struct emu *emu)
{
	return emu->pmu;
}

struct platform *emu_platform(struct emu *emu)
{
	return &emu->plat;
}

void emu_kick(struct emu *emu)
{
	emu->kicked = 1;
}

void emu_get_stats(const struct emu *emu, struct emu_stats *ret)
{
	*ret = emu->st;
}

static int load_segments(struct emu *emu, uint64_t gdt, uint16_t limit, uint16_t cs, uint16_t ds)
{
	uc_x86_mmr g = { 0, gdt, limit, 0 };
	/* FS and GS stay null: loading them through Unicorn's API faults outside emulation */
	static const int data_regs[] = { UC_X86_REG_DS, UC_X86_REG_ES, UC_X86_REG_SS };

	if (uc_reg_write(emu->uc, UC_X86_REG_GDTR, &g) != UC_ERR_OK || !mmu_ensure(emu, gdt) ||
	    !mmu_ensure(emu, gdt + limit))
		return -EFAULT;
	if (uc_reg_write(emu->uc, UC_X86_REG_CS, &cs) != UC_ERR_OK)
		return -EFAULT;
	for (size_t i = 0; i < sizeof(data_regs) / sizeof(data_regs[0]); i++)
		if (uc_reg_write(emu->uc, data_regs[i], &ds) != UC_ERR_OK)
			return -EFAULT;
	return 0;
}

int emu_boot(struct emu *emu, const struct vmm_boot *boot, uint64_t arg, char *err, size_t errlen)
{
	uint64_t zero = 0;
	uc_x86_mmr idtr = { 0, 0, 0, 0 };

	uc_reg_write(emu->uc, UC_X86_REG_IDTR, &idtr);
	emu_set_reg(emu, UC_X86_REG_RFLAGS, 2);
	if (boot->kind == VMM_BOOT_ELF64) {
		emu->cr0 = 0x80050033; /* PG AM WP NE ET MP PE */
		emu->cr3 = boot->cr3;
		emu->cr4 = 0x620;  /* OSXMMEXCPT OSFXSR PAE */
		emu->efer = 0x500; /* LMA LME */
		emu->cs64 = true;
		/* Unicorn keeps CR0.PG clear: it then runs IA-32e code on linear = physical */
		emu_set_reg(emu, UC_X86_REG_CR0, emu->cr0 & ~(1ull << 31));
		emu_set_reg(emu, UC_X86_REG_CR4, emu->cr4);
		if (load_segments(emu, boot->gdt, 23, 0x08, 0x10) < 0) {
			snprintf(err, errlen, "%s",
				 emu->fatal ? emu->fatal_msg : "cannot load the boot GDT");
			return -EFAULT;
		}
		emu_set_reg(emu, UC_X86_REG_RSP, boot->stack);
		emu_set_reg(emu, UC_X86_REG_RDI, arg);
	} else {
		/*
		 * multiboot: 32-bit protected mode, paging off, flat segments from a
		 * GDT the VMM puts past the image (the kernel loads its own). Unicorn
		 * changes code size only on a real far transfer, so a one-instruction
		 * 64-bit stub after the GDT far-jumps to the entry ("jmp far [rip]"):
		 * that instruction is the first one the guest is counted for.
		 */
		static const uint64_t gdt[3] = { 0, 0x00cf9a000000ffffull, 0x00cf92000000ffffull };
		uint64_t at = (boot->free_start + 15) & ~15ull, stub = at + sizeof(gdt);
		uint8_t code[12] = { 0xff, 0x2d, 0, 0, 0, 0 };
		uint32_t entry = (uint32_t) boot->entry;
		uint16_t sel = 0x08;

		if (stub + sizeof(code) > emu->ram_size) {
			snprintf(err, errlen, "no room for the boot GDT past the kernel");
			return -E2BIG;
		}
		memcpy(code + 6, &entry, 4);
		memcpy(code + 10, &sel, 2);
		memcpy(emu->ram + at, gdt, sizeof(gdt));
		memcpy(emu->ram + stub, code, sizeof(code));
		emu->cr0 = 0x11; /* ET PE */
		emu->cr3 = 0;
		emu->cr4 = 0;
		emu->efer = 0;
		emu->cs64 = true; /* the stub */
		emu_set_reg(emu, UC_X86_REG_CR0, 0x11);
		emu_set_reg(emu, UC_X86_REG_CR4, 0x20);
		{
			uc_x86_mmr g = { 0, at, sizeof(gdt) - 1, 0 };

			uc_reg_write(emu->uc, UC_X86_REG_GDTR, &g);
		}
		emu_set_reg(emu, UC_X86_REG_RAX, 0x2badb002);
		emu_set_reg(emu, UC_X86_REG_RBX, boot->mb_info);
		emu_set_reg(emu, UC_X86_REG_RSP, zero);
		emu->resume_rip = stub;
		emu_set_reg(emu, UC_X86_REG_RIP, stub);
		return 0;
	}
	emu->resume_rip = boot->entry;
	emu_set_reg(emu, UC_X86_REG_RIP, boot->entry);
	emu_refresh_mode(emu);
	if (emu->fatal) {
		snprintf(err, errlen, "%s", emu->fatal_msg);
		return -EFAULT;
	}
	return 0;
}

static void drop_translations(struct emu *emu)
{
	for (unsigned int i = 0; i < emu->nr_special; i++)
		uc_hook_del(emu->uc, emu->special_hooks[i]);
	emu->nr_special = 0;
	for (unsigned int i = 0; i < emu->nr_step; i++)
		uc_hook_del(emu->uc, emu->step_hooks[i]);
	emu->nr_step = 0;
	for (unsigned int i = 0; i < BLK_CACHE; i++)
		blk_free(&emu->blocks[i]);
	uc_ctl_flush_tlb(emu->uc);
	emu->st.tb_flushes++;
	emu->remove_cache = false;
}

/*
 * The instruction a data access faulted in. Unicorn 2.0.1 leaves RIP at
 * the start of the translated block, with the instructions before the
 * faulting one done; the block's decoded instructions tell which one it
 * is: in step mode the one being stepped, else the first not yet counted
 * that reads (or writes) memory as the fault did and whose operand (from
 * the registers now) lies at the faulting address.
 */
static uint64_t faulting_insn(struct emu *emu)
{
	const struct blk *b = emu->cur;
	uint64_t first = 0;

	if (emu->stepping && emu->prev_valid)
		return emu->prev.addr;
	if (emu->pf_fetch || !b)
		return emu_reg(emu, UC_X86_REG_RIP);
	for (unsigned int j = emu->fed; j < b->n; j++) {
		const struct insn *in = &b->insns[j];
		uint64_t a;

		/* a write fault comes from an instruction that writes memory, a read one that reads
		 */
		if (in->dla == DLA_NONE || !(in->flags & (emu->pf_err & 2 ? IC_STORE : IC_LOAD)))
			continue;
		if (!first)
			first = in->addr;
		a = data_address(emu, in);
		/* an operand up to 64 bytes (XSAVE aside) may start on the page before */
		if (emu->pf_addr - a < 64 || (a & ~0xfffull) == (emu->pf_addr & ~0xfffull))
			return in->addr;
	}
	return first ? first : b->insns[emu->fed < b->n ? emu->fed : 0].addr;
}

/* The #PF a memory hook saw: count what retired before it, then deliver it there. */
static void pf_deliver(struct emu *emu)
{
	uint64_t rip = faulting_insn(emu);

	emu->pf_pending = false;
	if (emu->stepping)
		emu->prev_valid = false; /* the faulting instruction did not retire */
	else
		retire_to(emu, rip, false);
	emu->cur = NULL;
	emu->until = 0;
	emu->resume_rip = rip;
	emu->cr2 = emu->pf_addr;
	emu->st.page_faults++;
	emu_raise(emu, 14, true, emu->pf_err, rip);
}

/* Deliver an exception or interrupt; a failing delivery escalates to #DF, then a triple fault. */
static void deliver(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip)
{
	if (intr_deliver(emu, vector, has_err, err, rip) == 0)
		return;
	if (vector != 8 && intr_deliver(emu, 8, true, 0, rip) == 0)
		return;
	emu_fatal(emu,
		  "guest triple fault: delivering vector %u at rip %#llx failed, and so did #DF "
		  "(no valid IDT entry or stack?)",
		  vector, (unsigned long long) rip);
}

int emu_run(struct emu *emu, int *ret_status, char *err, size_t errlen)
{
	for (;;) {
		uint64_t rflags;
		uc_err ue;
		int v;

		if (emu->plat.exited) {
			if (emu->pmu)
				emu_feed_flush(emu);
			*ret_status = emu->plat.exit_status;
			return 0;
		}
		if (!emu->fatal && emu->cfg.max_instructions &&
		    emu->st.instructions > emu->cfg.max_instructions)
			emu_fatal(emu, "the guest ran past %llu instructions without exiting",
				  (unsigned long long) emu->cfg.max_instructions);
		if (emu->fatal) {
			if (emu->pmu)
				emu_feed_flush(emu);
			snprintf(err, errlen, "%s", emu->fatal_msg);
			return -EFAULT;
		}
		if (emu->pending_vector >= 0) {
			unsigned int vec = (unsigned int) emu->pending_vector;

			emu->pending_vector = -1;
			if (vec == 14)
				emu_set_reg(emu, UC_X86_REG_CR2, emu->cr2);
			deliver(emu, vec, emu->pending_has_err, emu->pending_err, emu->pending_rip);
			continue;
		}
		rflags = emu_reg(emu, UC_X86_REG_RFLAGS);
		if (emu->halted)
			emu->window = 0;
		if (!emu->window) {
			if (emu->nmi_pending && !emu->nmi_blocked) {
				emu->nmi_pending = false;
				emu->nmi_blocked = true;
				emu->halted = false;
				emu->st.nmis++;
				deliver(emu, 2, false, 0, emu->resume_rip);
				continue;
			}
			if ((rflags & RFLAGS_IF) && (v = lapic_pending(&emu->apic)) >= 0) {
				lapic_ack(&emu->apic, (uint8_t) v);
				emu->halted = false;
				emu->st.interrupts++;
				deliver(emu, (unsigned int) v, false, 0, emu->resume_rip);
				continue;
			}
		}
		if (emu->halted) {
			emu_fatal(emu,
				  "guest halted at rip %#llx with nothing that can wake it (%s)",
				  (unsigned long long) emu->resume_rip,
				  rflags & RFLAGS_IF ? "no interrupt pending, and there is no timer"
						     : "interrupts disabled");
			continue;
		}
		if (emu->paging_dirty) {
			mmu_flush(emu);
			drop_translations(emu);
		}
		if (emu->remove_cache) {
			/*
			 * Retranslate the block that got hooks. uc_ctl_remove_cache()
			 * works on aliases mapped from outside a run (mmu_settle: the
			 * ones mapped from a hook are mapped again first), so only
			 * that block goes, not every translation (~25 ms a flush).
			 */
			mmu_settle(emu);
			uc_ctl_remove_cache(emu->uc, emu->remove_cache_addr, emu->remove_cache_end);
			emu->st.tb_removals++;
			emu->remove_cache = false;
		}
		emu->want_stop = false;
		if (emu->pmu) {
			if (emu->kicked) {
				emu->kicked = 0;
				emu->st.kicks++;
			}
			emu_feed_flush(emu);
			vpmu_vcpu_sync(emu->pmu); /* polls the host counters too */
			if (emu->want_stop)
				continue; /* it raised a PMI: deliver it before running on */
		}
		emu->stopped = false;
		emu->cur = NULL;
		emu->prev_valid = false;
		emu->stepping = false;
		emu->in_run = true;
		if (emu->trace)
			fprintf(stderr, "trace: run at %#llx until %#llx%s\n",
				(unsigned long long) emu->resume_rip,
				(unsigned long long) emu->until, emu->stepping ? " stepping" : "");
		mmu_settle(emu);
		/*
		 * A translated block that holds the stop address runs past it:
		 * drop the translations from here to it (on settled aliases this
		 * works in 2.0.1, measured).
		 */
		if (emu->until && emu->until > emu->resume_rip)
			uc_ctl_remove_cache(emu->uc, emu->resume_rip, emu->until + 1);
		emu->until_arming = false;
		ue = uc_emu_start(emu->uc, emu->resume_rip, emu->until, 0, 0);
		emu->in_run = false;
		if (emu->pf_pending && !emu->fatal) {
			pf_deliver(emu);
			continue;
		}
		/* a stop armed in this run is for the rerun; any other stop drops the old one */
		if (!emu->until_arming &&
		    (emu->stopped || emu->fatal || emu->plat.exited || emu->pending_vector >= 0))
			emu->until = 0;
		if (emu->fatal || emu->plat.exited || emu->pending_vector >= 0)
			continue;
		if (ue != UC_ERR_OK) {
			emu_fatal(emu, "emulation stopped near rip %#llx: %s",
				  (unsigned long long) emu->hook_rip, uc_strerror(ue));
			continue;
		}
		if (!emu->stopped) {
			/* Unicorn returned by itself: at the armed stop (or the guest reached 0) */
			uint64_t rip = emu_reg(emu, UC_X86_REG_RIP);
			bool at_until = emu->until && rip == emu->until;

			emu->resume_rip = rip;
			emu->hook_rip = rip; /* PEBS records report the state here */
			retire_to(emu, rip, false);
			if (at_until && emu->until_next) {
				/* before the overflowing memory instruction: take its address */
				struct insn in;

				if (insn_decode(emu, rip, emu->cs64, &in) == 0) {
					emu->until_dla_ip = rip;
					emu->until_dla = data_address(emu, &in);
				}
				emu->until = emu->until_next;
				emu->until_next = 0;
			} else if (at_until) {
				emu->until = 0;
				emu->until_dla_ip = 0;
			}
		}
	}
}
