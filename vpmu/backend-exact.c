/* SPDX-License-Identifier: MIT */
/*
 * The exact backend: an emulator feeds what each run of retired
 * instructions did (vpmu_exact_feed) and this backend counts the events an
 * instruction-level emulator can know exactly. Everything else is unbacked,
 * never approximated:
 *   - LONGEST_LAT_CACHE.* (2EH) and TOPDOWN.SLOTS: no cache or pipeline model;
 *   - EdgeDetect, and CMask on cycle events: no per-cycle history.
 * Modelled time: every instruction retires alone in its own cycle(s), so a
 * per-instruction event (instructions, branches, memory instructions)
 * occurs at most once per cycle; CMask/Inv on those are then exact:
 *   CMask 1 -> the event itself, CMask >= 2 -> 0,
 *   Inv + CMask 1 -> cycles - event, Inv + CMask >= 2 -> cycles.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "bits.h"
#include "vpmu/msr.h"
#include "pmu.h"

enum field {
	F_NONE,
	F_INST,
	F_CYCLES,
	F_REF,	/* TSC-rate reference cycles (fixed counter 2) */
	F_XCLK, /* crystal-clock reference cycles (3CH/01H) */
	F_BRANCHES,
	F_COND,
	F_COND_NTAKEN,
	F_CALLS,
	F_RETS,
	F_NEAR_TAKEN,
	F_FAR,
	F_MISSES,
	F_LOADS,
	F_STORES,
	F_MEM,
};

/* Which events count what: architectural (SDM Vol. 3B Table 21-1) and the
 * Skylake-server catalogue's, whose encodings later cores keep. */
static const struct exact_event {
	uint8_t event, umask, field;
	bool per_insn; /* at most one per instruction: CMask/Inv exact */
} events[] = {
	{ 0x3c, 0x00, F_CYCLES, false },     /* CPU_CLK_UNHALTED.THREAD_P (arch 0) */
	{ 0xc0, 0x00, F_INST, true },	     /* INST_RETIRED.ANY_P (arch 1) */
	{ 0x3c, 0x01, F_XCLK, false },	     /* CPU_CLK_THREAD_UNHALTED.REF_XCLK (arch 2) */
	{ 0xc4, 0x00, F_BRANCHES, true },    /* BR_INST_RETIRED.ALL_BRANCHES (arch 5) */
	{ 0xc5, 0x00, F_MISSES, true },	     /* BR_MISP_RETIRED.ALL_BRANCHES (arch 6) */
	{ 0xc0, 0x01, F_INST, true },	     /* INST_RETIRED.PREC_DIST */
	{ 0xc4, 0x01, F_COND, true },	     /* BR_INST_RETIRED.CONDITIONAL */
	{ 0xc4, 0x02, F_CALLS, true },	     /* BR_INST_RETIRED.NEAR_CALL */
	{ 0xc4, 0x04, F_BRANCHES, true },    /* BR_INST_RETIRED.ALL_BRANCHES_PS */
	{ 0xc4, 0x08, F_RETS, true },	     /* BR_INST_RETIRED.NEAR_RETURN */
	{ 0xc4, 0x10, F_COND_NTAKEN, true }, /* BR_INST_RETIRED.COND_NTAKEN */
	{ 0xc4, 0x20, F_NEAR_TAKEN, true },  /* BR_INST_RETIRED.NEAR_TAKEN */
	{ 0xc4, 0x40, F_FAR, true },	     /* BR_INST_RETIRED.FAR_BRANCH */
	{ 0xd0, 0x81, F_LOADS, true },	     /* MEM_INST_RETIRED.ALL_LOADS */
	{ 0xd0, 0x82, F_STORES, true },	     /* MEM_INST_RETIRED.ALL_STORES */
	{ 0xd0, 0x83, F_MEM, true },	     /* MEM_INST_RETIRED.ANY */
};

/* Fixed counters 0..2: INST_RETIRED.ANY, CPU_CLK_UNHALTED.THREAD, REF_TSC. */
static const uint8_t fixed_fields[] = { F_INST, F_CYCLES, F_REF };

struct exact_ctr {
	uint8_t field;
	uint8_t cmask;
	bool inv;
	bool usr, os;
	bool running;
	uint64_t pending;   /* counted since the last update/read */
	uint64_t remaining; /* events until the guest counter overflows */
};

struct exact_state {
	struct vpmu_vcpu *vcpu;
	struct exact_ctr ctr[64];      /* GLOBAL_CTRL numbering */
	struct vpmu_host_event ev[64]; /* the event each counter is set up for */
	uint64_t running;	       /* mask of running counters */
	uint64_t ref_total;	       /* for the crystal-clock conversion */
	uint32_t xclk_num, xclk_den;   /* ref cycles * den / num = crystal cycles */
};

/* Resolve `ev` to how it is counted; false if unbacked. */
static bool resolve(const struct vpmu_host_event *ev, struct exact_ctr *c)
{
	uint8_t event, umask;

	memset(c, 0, sizeof(*c));
	if (ev->kind == HEV_FIXED) {
		if (ev->fixed >= ARRAY_SIZE(fixed_fields))
			return false;
		c->field = fixed_fields[ev->fixed];
		return true;
	}
	if (ev->kind != HEV_GP)
		return false;
	/* Edge detection needs per-cycle history; EQ and UMASK2 are unmodelled */
	if (ev->config & (ARCH_PERFMON_EVENTSEL_EDGE | ARCH_PERFMON_EVENTSEL_EQ |
			  ARCH_PERFMON_EVENTSEL_UMASK2 | HSW_IN_TX | HSW_IN_TX_CHECKPOINTED))
		return false;
	event = (uint8_t) FIELD_GET(ARCH_PERFMON_EVENTSEL_EVENT, ev->config);
	umask = (uint8_t) FIELD_GET(ARCH_PERFMON_EVENTSEL_UMASK, ev->config);
	for (size_t i = 0; i < ARRAY_SIZE(events); i++) {
		if (events[i].event != event || events[i].umask != umask)
			continue;
		c->field = events[i].field;
		c->cmask = (uint8_t) FIELD_GET(ARCH_PERFMON_EVENTSEL_CMASK, ev->config);
		c->inv = ev->config & ARCH_PERFMON_EVENTSEL_INV;
		/* Inv is ignored when CMask is 0 (§22.6.8.1) */
		if (!c->cmask)
			c->inv = false;
		return !c->cmask || events[i].per_insn;
	}
	return false;
}

static bool exact_can_count(void *state, const struct vpmu_host_event *ev)
{
	struct exact_ctr c;

	return resolve(ev, &c);
}

static int exact_init(struct vpmu_vcpu *vcpu, void **ret_state)
{
	struct exact_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->vcpu = vcpu;
	s->xclk_num = vcpu->model.tsc_ratio_num;
	s->xclk_den = vcpu->model.tsc_ratio_den;
	*ret_state = s;
	return 0;
}

static void exact_fini(void *state)
{
	free(state);
}

static int exact_update(void *state, unsigned int ctr, const struct vpmu_hw_want *want,
			uint64_t *ret_delta)
{
	struct exact_state *s = state;
	struct exact_ctr *c = &s->ctr[ctr];
	uint64_t delta = want->discard ? 0 : c->pending;
	struct exact_ctr next;
	bool ok = resolve(&want->ev, &next);
	/* a new event is a "created" host counter, as a perf fd would be */
	bool created = memcmp(&s->ev[ctr], &want->ev, sizeof(want->ev)) != 0;

	*ret_delta = delta;
	next.usr = want->ev.usr;
	next.os = want->ev.os;
	next.running = ok && want->enabled;
	next.remaining = want->mask + 1 - ((want->base + delta) & want->mask);
	*c = next;
	if (c->running)
		s->running |= BIT_ULL(ctr);
	else
		s->running &= ~BIT_ULL(ctr);
	s->ev[ctr] = want->ev;
	if (want->ev.kind == HEV_NONE)
		return 0;
	if (!ok)
		return -EOPNOTSUPP;
	return created ? 1 : 0;
}

static uint64_t exact_read(void *state, unsigned int ctr, bool discard)
{
	struct exact_state *s = state;
	uint64_t d = s->ctr[ctr].pending;

	s->ctr[ctr].pending = 0;
	return d;
}

static uint64_t field_value(const struct vpmu_exact_counts *e, uint64_t xclk, enum field f)
{
	switch (f) {
	case F_INST:
		return e->instructions;
	case F_CYCLES:
		return e->cycles;
	case F_REF:
		return e->ref_cycles;
	case F_XCLK:
		return xclk;
	case F_BRANCHES:
		return e->branches;
	case F_COND:
		return e->cond_branches;
	case F_COND_NTAKEN:
		return e->cond_branches - e->cond_taken;
	case F_CALLS:
		return e->near_calls;
	case F_RETS:
		return e->near_returns;
	case F_NEAR_TAKEN:
		return e->near_taken;
	case F_FAR:
		return e->far_branches;
	case F_MISSES:
		return e->branch_misses;
	case F_LOADS:
		return e->loads;
	case F_STORES:
		return e->stores;
	case F_MEM:
		return e->mem_insts;
	case F_NONE:
		break;
	}
	return 0;
}

static uint64_t count_of(const struct exact_ctr *c, const struct vpmu_exact_counts *e,
			 uint64_t xclk)
{
	uint64_t v = field_value(e, xclk, (enum field) c->field);

	if (!c->cmask)
		return v;
	if (!c->inv)
		return c->cmask == 1 ? v : 0;
	if (c->cmask == 1)
		return e->cycles > v ? e->cycles - v : 0;
	return e->cycles;
}

static int exact_feed(struct vpmu_vcpu *vcpu, const struct vpmu_exact_counts *e)
{
	struct exact_state *s = vcpu->backend_state;
	uint64_t ovf = 0, xclk, running;
	unsigned __int128 t0, t1;

	if (vcpu->backend != &vpmu_backend_exact)
		return -EOPNOTSUPP;
	/* a feed without the sync the VMM owes us still counts correctly */
	if (vcpu->dirty)
		vpmu_vcpu_sync(vcpu);

	t0 = (unsigned __int128) s->ref_total * s->xclk_den / s->xclk_num;
	s->ref_total += e->ref_cycles;
	t1 = (unsigned __int128) s->ref_total * s->xclk_den / s->xclk_num;
	xclk = (uint64_t) (t1 - t0);

	/* the run's last instruction is the one a PEBS record reports */
	if (e->instructions) {
		vcpu->last_ip = e->last_ip;
		vcpu->last_dla = e->last_dla;
		vcpu->last_latency = e->cycles / e->instructions;
	}
	running = s->running;
	while (running) {
		unsigned int i = (unsigned int) __builtin_ctzll(running);
		struct exact_ctr *c = &s->ctr[i];
		uint64_t n;

		running &= running - 1;
		if (!(e->cpl ? c->usr : c->os))
			continue;
		n = count_of(c, e, xclk);
		if (!n)
			continue;
		c->pending += n;
		if (n >= c->remaining) {
			ovf |= BIT_ULL(i);
			c->remaining = 0;
		} else {
			c->remaining -= n;
		}
	}
	if (ovf)
		counters_overflowed(vcpu, ovf);
	return 0;
}

static bool exact_would_overflow(const struct vpmu_vcpu *vcpu, const struct vpmu_exact_counts *e)
{
	const struct exact_state *s = vcpu->backend_state;
	uint64_t running, xclk;
	unsigned __int128 t0, t1;

	if (vcpu->backend != &vpmu_backend_exact)
		return false;
	/* not synced yet: the counters may be about to change, so say "maybe" */
	if (vcpu->dirty)
		return true;
	t0 = (unsigned __int128) s->ref_total * s->xclk_den / s->xclk_num;
	t1 = (unsigned __int128) (s->ref_total + e->ref_cycles) * s->xclk_den / s->xclk_num;
	xclk = (uint64_t) (t1 - t0);
	running = s->running;
	while (running) {
		unsigned int i = (unsigned int) __builtin_ctzll(running);
		const struct exact_ctr *c = &s->ctr[i];

		running &= running - 1;
		if ((e->cpl ? c->usr : c->os) && count_of(c, e, xclk) >= c->remaining)
			return true;
	}
	return false;
}

/* The caller's struct as this library's: a copy only when the sizes differ. */
static const struct vpmu_exact_counts *counts_in(const struct vpmu_exact_counts *c, size_t size,
						 struct vpmu_exact_counts *copy, int *ret)
{
	*ret = 0;
	if (size == sizeof(*c))
		return c;
	*ret = abi_copy_in(copy, sizeof(*copy), c, size);
	return copy;
}

int vpmu_exact_feed_sized(struct vpmu_vcpu *vcpu, const struct vpmu_exact_counts *c, size_t size)
{
	struct vpmu_exact_counts copy;
	int r;

	c = counts_in(c, size, &copy, &r);
	return r < 0 ? r : exact_feed(vcpu, c);
}

int(vpmu_exact_feed)(struct vpmu_vcpu *vcpu, const struct vpmu_exact_counts *c)
{
	return vpmu_exact_feed_sized(vcpu, c, EXACT_COUNTS_SIZE_V01);
}

/* A struct with fields this library does not know: as if they were zero. */
bool vpmu_exact_would_overflow_sized(const struct vpmu_vcpu *vcpu,
				     const struct vpmu_exact_counts *c, size_t size)
{
	struct vpmu_exact_counts copy;

	if (size != sizeof(*c)) {
		memset(&copy, 0, sizeof(copy));
		memcpy(&copy, c, size < sizeof(copy) ? size : sizeof(copy));
		c = &copy;
	}
	return exact_would_overflow(vcpu, c);
}

bool(vpmu_exact_would_overflow)(const struct vpmu_vcpu *vcpu, const struct vpmu_exact_counts *c)
{
	return vpmu_exact_would_overflow_sized(vcpu, c, EXACT_COUNTS_SIZE_V01);
}

uint64_t vpmu_exact_headroom(const struct vpmu_vcpu *vcpu)
{
	const struct exact_state *s = vcpu->backend_state;
	uint64_t best = UINT64_MAX, running;

	if (vcpu->backend != &vpmu_backend_exact)
		return UINT64_MAX;
	running = s->running;
	while (running) {
		unsigned int i = (unsigned int) __builtin_ctzll(running);

		running &= running - 1;
		if (s->ctr[i].remaining < best)
			best = s->ctr[i].remaining;
	}
	return best;
}

/* Reference cycles so far: where the crystal clock's next tick falls. */
static uint64_t exact_phase(const void *state)
{
	return ((const struct exact_state *) state)->ref_total;
}

static void exact_set_phase(void *state, uint64_t phase)
{
	((struct exact_state *) state)->ref_total = phase;
}

const struct vpmu_backend_ops vpmu_backend_exact = {
	.name = "exact",
	.cheap_read = true,
	.init = exact_init,
	.fini = exact_fini,
	.can_count = exact_can_count,
	.update = exact_update,
	.read = exact_read,
	.phase = exact_phase,
	.set_phase = exact_set_phase,
};
