/* SPDX-License-Identifier: MIT */
/*
 * Local APIC model (SDM Vol. 3A ch. 11; x2APIC §11.12). Reset values per
 * Table 11-1 "Local APIC Register Address Map" and §11.4.7.1: LVTs masked,
 * SVR 0FFH (software disabled), TPR 0, timer registers 0 (Figures 11-10,
 * 11-11), IA32_TSC_DEADLINE 0 (§11.5.4.1).
 *
 * The timer (§11.5.4) is kept as a formula of the guest TSC rather than a
 * count that something decrements: a count-down that started at TSC t0
 * from count c0 has seen
 *	k(now) = floor((now - t0) * timer_hz / (tsc_hz * divisor))
 * ticks, and its m-th tick falls at TSC t0 + ceil(m * divisor * tsc_hz /
 * timer_hz). One-shot: the current count is c0 - k, then 0 and an
 * interrupt at k = c0, then it stays 0 until the initial count is written
 * again. Periodic: interrupts at k = c0, c0 + initial, c0 + 2 * initial...
 * and in between the count reads initial - ((k - c0) mod initial), so it
 * reads the initial count at the instant of the reload. All in 128-bit
 * integers: exact, no drift over any number of periods.
 *
 * What the SDM leaves open, decided here:
 * - A divide configuration write while counting keeps the current count
 *   and counts the rest at the new rate from the write on (the part of a
 *   tick already elapsed is dropped).
 * - Timer mode 11b (reserved) does not count; the TSC deadline reads 0
 *   and ignores writes in it, as in every mode but TSC-deadline.
 * - A masked timer still counts and expires (a one-shot stops, a deadline
 *   disarms and clears) but raises nothing; unmasking later raises
 *   nothing either.
 */
#include <errno.h>
#include <string.h>

#include "lapic.h"

#define APIC_VERSION 0x14u /* integrated APIC */
#define APIC_MAX_LVT 6u	   /* CMCI..error: 7 entries, max index 6 */

enum { LVT_CMCI, LVT_TIMER, LVT_THERMAL, LVT_PMC, LVT_LINT0, LVT_LINT1, LVT_ERROR };

/* writable bits per LVT (§11.5.1, Figure 11-8) */
static const uint32_t lvt_mask[7] = {
	0x000117ff, /* CMCI: vector, mode, mask */
	0x000710ff, /* timer: vector, mask, mode 18:17 */
	0x000117ff, /* thermal */
	0x000117ff, /* PMC */
	0x0001f7ff, /* LINT0: + polarity, remote IRR(ro), trigger */
	0x0001f7ff, /* LINT1 */
	0x000110ff, /* error: vector, mask */
};

__extension__ typedef unsigned __int128 u128;

static unsigned int timer_mode(const struct lapic *l)
{
	return (l->lvt[LVT_TIMER] >> APIC_LVT_TIMER_SHIFT) & 3;
}

/* Figure 11-10: divide value in bits 3, 1:0; 111b divides by 1, n by 2^(n+1) */
static uint32_t timer_divisor(uint32_t tdcr)
{
	uint32_t v = ((tdcr >> 1) & 4) | (tdcr & 3);

	return v == 7 ? 1 : 2u << v;
}

static bool counting(const struct lapic *l)
{
	unsigned int mode = timer_mode(l);

	return l->timer_armed && l->tsc_hz && l->timer_hz &&
	       (mode == APIC_LVT_TIMER_ONESHOT || mode == APIC_LVT_TIMER_PERIODIC);
}

/* Ticks since timer_t0 at `now` (an earlier `now` counts as none). */
static u128 ticks_at(const struct lapic *l, uint64_t now)
{
	if (now <= l->timer_t0)
		return 0;
	return (u128) (now - l->timer_t0) * l->timer_hz /
	       ((u128) l->tsc_hz * timer_divisor(l->tdcr));
}

/* The TSC of tick m since timer_t0, or UINT64_MAX past the TSC's range. */
static uint64_t tick_tsc(const struct lapic *l, u128 m)
{
	u128 num = m * timer_divisor(l->tdcr) * l->tsc_hz;
	u128 dt = (num + l->timer_hz - 1) / l->timer_hz;

	if (dt >= (u128) (UINT64_MAX - l->timer_t0))
		return UINT64_MAX;
	return l->timer_t0 + (uint64_t) dt;
}

/* Tick at which the next expiry falls (one-shot: the only one). */
static u128 next_expiry_tick(const struct lapic *l)
{
	return (u128) l->timer_c0 + (u128) l->timer_fired * l->tmict;
}

uint32_t lapic_timer_current(const struct lapic *l, uint64_t now)
{
	u128 k;

	if (!counting(l))
		return 0;
	k = ticks_at(l, now);
	if (k < l->timer_c0)
		return (uint32_t) (l->timer_c0 - k);
	if (timer_mode(l) == APIC_LVT_TIMER_ONESHOT || !l->tmict)
		return 0;
	return l->tmict - (uint32_t) ((k - l->timer_c0) % l->tmict);
}

uint64_t lapic_timer_next(const struct lapic *l)
{
	if (l->lvt[LVT_TIMER] & APIC_LVT_MASKED)
		return UINT64_MAX;
	if (timer_mode(l) == APIC_LVT_TIMER_DEADLINE)
		return l->tsc_deadline ? l->tsc_deadline : UINT64_MAX;
	if (!counting(l))
		return UINT64_MAX;
	return tick_tsc(l, next_expiry_tick(l));
}

static bool timer_fire(struct lapic *l)
{
	if (l->lvt[LVT_TIMER] & APIC_LVT_MASKED)
		return false;
	l->timer_irqs++;
	lapic_set_irr(l, (uint8_t) l->lvt[LVT_TIMER]);
	return true;
}

bool lapic_timer_advance(struct lapic *l, uint64_t now)
{
	u128 k, fired;

	if (timer_mode(l) == APIC_LVT_TIMER_DEADLINE) {
		/* §11.5.4.1: fires when the TSC equals or exceeds the deadline, then disarms */
		if (!l->tsc_deadline || now < l->tsc_deadline)
			return false;
		l->tsc_deadline = 0;
		return timer_fire(l);
	}
	if (!counting(l))
		return false;
	k = ticks_at(l, now);
	if (k < next_expiry_tick(l))
		return false;
	if (timer_mode(l) == APIC_LVT_TIMER_ONESHOT || !l->tmict) {
		l->timer_armed = false; /* stays at 0 until reprogrammed */
		return timer_fire(l);
	}
	fired = (k - l->timer_c0) / l->tmict + 1;
	l->timer_fired = fired > UINT64_MAX ? UINT64_MAX : (uint64_t) fired;
	return timer_fire(l);
}

static uint64_t clock_now(const struct lapic *l)
{
	return l->clock ? l->clock(l->clock_data) : 0;
}

/* Before any register access: fire what expired, return the time. */
static uint64_t timer_sync(struct lapic *l)
{
	uint64_t now = clock_now(l);

	lapic_timer_advance(l, now);
	return now;
}

void lapic_timer_config(struct lapic *l, uint64_t tsc_hz, uint64_t timer_hz,
			bool deadline_supported, lapic_clock_fn clock, void *clock_data)
{
	l->tsc_hz = tsc_hz;
	l->timer_hz = timer_hz;
	l->deadline_supported = deadline_supported;
	l->clock = clock;
	l->clock_data = clock_data;
}

static void timer_start(struct lapic *l, uint64_t now, uint32_t count)
{
	l->timer_armed = count != 0; /* a write of 0 stops the timer (§11.5.4) */
	l->timer_t0 = now;
	l->timer_c0 = count;
	l->timer_fired = 0;
}

static void write_tmict(struct lapic *l, uint32_t v, uint64_t now)
{
	unsigned int mode = timer_mode(l);

	/* §11.5.4.1: ignored in TSC-deadline mode */
	if (mode == APIC_LVT_TIMER_DEADLINE)
		return;
	l->tmict = v;
	if (mode == APIC_LVT_TIMER_ONESHOT || mode == APIC_LVT_TIMER_PERIODIC)
		timer_start(l, now, v);
}

static void write_tdcr(struct lapic *l, uint32_t v, uint64_t now)
{
	if (counting(l)) {
		uint32_t cur = lapic_timer_current(l, now);

		l->tdcr = v & 0xb;
		timer_start(l, now, cur);
		return;
	}
	l->tdcr = v & 0xb;
}

/* §11.5.4.1: a write that changes the timer mode disarms the timer */
static void write_lvtt(struct lapic *l, uint32_t v)
{
	unsigned int old = timer_mode(l);

	l->lvt[LVT_TIMER] = v;
	if (timer_mode(l) != old) {
		l->timer_armed = false;
		l->tsc_deadline = 0;
	}
}

void lapic_reset(struct lapic *l, uint32_t id)
{
	memset(l, 0, sizeof(*l));
	l->base = APIC_DEFAULT_BASE | APIC_BASE_ENABLE | APIC_BASE_BSP;
	l->id = id;
	l->dfr = 0xffffffffu;
	l->svr = 0xff;
	for (unsigned int i = 0; i < 7; i++)
		l->lvt[i] = APIC_LVT_MASKED;
}

bool lapic_xapic_enabled(const struct lapic *l)
{
	return (l->base & APIC_BASE_ENABLE) && !(l->base & APIC_BASE_EXTD);
}

bool lapic_x2apic_enabled(const struct lapic *l)
{
	return (l->base & APIC_BASE_ENABLE) && (l->base & APIC_BASE_EXTD);
}

int lapic_set_base(struct lapic *l, uint64_t value)
{
	uint64_t old = l->base & (APIC_BASE_ENABLE | APIC_BASE_EXTD);
	uint64_t new = value &(APIC_BASE_ENABLE | APIC_BASE_EXTD);
	/* bits 7:0, 9 and above MAXPHYADDR (40 here) are reserved */
	if (value & (0xffull | (1ull << 9) | ~((1ull << 40) - 1)))
		return -EINVAL;
	/* §11.12.5, Figure 11-27: EXTD without EN is invalid, and x2APIC may
	 * only be left by disabling the APIC */
	if (new == APIC_BASE_EXTD)
		return -EINVAL;
	if (old == (APIC_BASE_ENABLE | APIC_BASE_EXTD) && new == APIC_BASE_ENABLE)
		return -EINVAL;
	if (old == 0 && new == (APIC_BASE_ENABLE | APIC_BASE_EXTD))
		return -EINVAL;
	if (!(new &APIC_BASE_ENABLE)) {
		struct lapic keep = *l;

		lapic_reset(l, keep.id);
		lapic_timer_config(l, keep.tsc_hz, keep.timer_hz, keep.deadline_supported,
				   keep.clock, keep.clock_data);
		l->timer_irqs = keep.timer_irqs;
		l->base = (value & ~0xfffull) | (value & APIC_BASE_BSP);
		return 0;
	}
	l->base = (value & ~0xfffull) | (l->base & APIC_BASE_BSP) | new;
	return 0;
}

static int highest(const uint32_t *v)
{
	for (int i = 7; i >= 0; i--)
		if (v[i])
			return i * 32 + 31 - __builtin_clz(v[i]);
	return -1;
}

static uint32_t ppr(const struct lapic *l)
{
	int isr = highest(l->isr);
	uint32_t isrv = isr < 0 ? 0 : (uint32_t) isr;

	if ((l->tpr & 0xf0) >= (isrv & 0xf0))
		return l->tpr & 0xff;
	return isrv & 0xf0;
}

void lapic_set_irr(struct lapic *l, uint8_t vector)
{
	if (vector < 16) {
		l->esr |= 1u << 6; /* send/receive illegal vector */
		return;
	}
	l->irr[vector / 32] |= 1u << (vector % 32);
}

int lapic_pending(const struct lapic *l)
{
	int v = highest(l->irr);

	if (v < 0 || !(l->base & APIC_BASE_ENABLE) || !(l->svr & APIC_SPIV_ENABLE))
		return -1;
	if (((uint32_t) v & 0xf0) <= (ppr(l) & 0xf0))
		return -1;
	return v;
}

void lapic_ack(struct lapic *l, uint8_t vector)
{
	l->irr[vector / 32] &= ~(1u << (vector % 32));
	l->isr[vector / 32] |= 1u << (vector % 32);
}

bool lapic_extint(const struct lapic *l)
{
	uint32_t lint0 = l->lvt[LVT_LINT0];

	if (!(l->base & APIC_BASE_ENABLE))
		return true;
	return !(lint0 & APIC_LVT_MASKED) && ((lint0 >> 8) & 7) == 7;
}

static void eoi(struct lapic *l)
{
	int v = highest(l->isr);

	l->eois++;
	if (v >= 0)
		l->isr[v / 32] &= ~(1u << (v % 32));
}

uint32_t lapic_lvtpc(const struct lapic *l)
{
	return l->lvt[LVT_PMC];
}

void lapic_set_lvtpc(struct lapic *l, uint32_t value)
{
	l->lvt[LVT_PMC] = value & lvt_mask[LVT_PMC];
}

static int lvt_index(uint32_t offset)
{
	if (offset == APIC_LVTCMCI)
		return LVT_CMCI;
	if (offset >= APIC_LVTT && offset <= APIC_LVTERR && !(offset & 0xf))
		return (int) ((offset - APIC_LVTT) >> 4) + LVT_TIMER;
	return -1;
}

static uint32_t reg_read(const struct lapic *l, uint32_t offset, bool x2, uint64_t now)
{
	int i = lvt_index(offset);

	if (i >= 0)
		return l->lvt[i];
	if (offset >= APIC_ISR && offset < APIC_ISR + 0x80)
		return l->isr[(offset - APIC_ISR) >> 4];
	if (offset >= APIC_TMR && offset < APIC_TMR + 0x80)
		return l->tmr[(offset - APIC_TMR) >> 4];
	if (offset >= APIC_IRR && offset < APIC_IRR + 0x80)
		return l->irr[(offset - APIC_IRR) >> 4];
	switch (offset) {
	case APIC_ID:
		return x2 ? l->id : l->id << 24;
	case APIC_LVR:
		return APIC_VERSION | APIC_MAX_LVT << 16;
	case APIC_TASKPRI:
		return l->tpr;
	case APIC_PROCPRI:
		return ppr(l);
	case APIC_LDR:
		return x2 ? (l->id & 0xfffffff0u) << 12 | 1u << (l->id & 0xf) : l->ldr;
	case APIC_DFR:
		return l->dfr;
	case APIC_SPIV:
		return l->svr;
	case APIC_ESR:
		return l->esr;
	case APIC_ICR:
		return l->icr_lo;
	case APIC_ICR2:
		return l->icr_hi;
	case APIC_TMICT:
		return l->tmict;
	case APIC_TMCCT:
		return lapic_timer_current(l, now);
	case APIC_TDCR:
		return l->tdcr;
	default:
		return 0;
	}
}

/* ICR: only self-directed fixed interrupts and NMIs reach a 1-vCPU guest */
static void send_ipi(struct lapic *l, uint32_t lo, uint32_t dest)
{
	unsigned int shorthand = (lo >> 18) & 3, mode = (lo >> 8) & 7;
	bool self = shorthand == 1 || shorthand == 2 || (shorthand == 0 && dest == l->id);

	if (!self || mode != 0)
		return;
	l->self_ipis++;
	lapic_set_irr(l, (uint8_t) lo);
}

static void reg_write(struct lapic *l, uint32_t offset, uint32_t v, bool x2, uint64_t now)
{
	int i = lvt_index(offset);

	if (i >= 0) {
		uint32_t mask = lvt_mask[i];

		if (!(l->svr & APIC_SPIV_ENABLE))
			v |= APIC_LVT_MASKED; /* §11.4.7.2: masks stay set */
		if (i == LVT_TIMER) {
			/* bit 18 is reserved without TSC-deadline support (§11.5.4.1) */
			if (!l->deadline_supported)
				mask &= ~(1u << 18);
			write_lvtt(l, v & mask);
		} else {
			l->lvt[i] = v & mask;
		}
		return;
	}
	switch (offset) {
	case APIC_ID:
		if (!x2)
			l->id = v >> 24;
		break;
	case APIC_TASKPRI:
		l->tpr = v & 0xff;
		break;
	case APIC_EOI:
		eoi(l);
		break;
	case APIC_LDR:
		if (!x2)
			l->ldr = v & 0xff000000u;
		break;
	case APIC_DFR:
		if (!x2)
			l->dfr = v | 0x0fffffffu;
		break;
	case APIC_SPIV:
		l->svr = v & 0x13ff;
		if (!(v & APIC_SPIV_ENABLE))
			for (unsigned int k = 0; k < 7; k++)
				l->lvt[k] |= APIC_LVT_MASKED;
		break;
	case APIC_ESR:
		l->esr = 0;
		break;
	case APIC_ICR:
		l->icr_lo = v & ~(1u << 12);
		send_ipi(l, v, x2 ? l->icr_hi : l->icr_hi >> 24);
		break;
	case APIC_ICR2:
		l->icr_hi = v;
		break;
	case APIC_TMICT:
		write_tmict(l, v, now);
		break;
	case APIC_TDCR:
		write_tdcr(l, v, now);
		break;
	default:
		break;
	}
}

uint32_t lapic_mmio_read(struct lapic *l, uint32_t offset)
{
	if (!lapic_xapic_enabled(l))
		return 0xffffffffu; /* a disabled APIC does not decode its page */
	return reg_read(l, offset & 0xff0, false, timer_sync(l));
}

void lapic_mmio_write(struct lapic *l, uint32_t offset, uint32_t value)
{
	if (!lapic_xapic_enabled(l) || offset == APIC_SELF_IPI)
		return;
	reg_write(l, offset & 0xff0, value, false, timer_sync(l));
}

/* x2APIC registers that exist, and whether they are readable / writable */
static bool x2_valid(uint32_t off, bool write)
{
	if (lvt_index(off) >= 0)
		return true;
	if ((off >= APIC_ISR && off < APIC_IRR + 0x80))
		return !write;
	switch (off) {
	case APIC_ID:
	case APIC_LVR:
	case APIC_PROCPRI:
	case APIC_LDR:
	case APIC_TMCCT:
		return !write;
	case APIC_EOI:
	case APIC_SELF_IPI:
		return write;
	case APIC_TASKPRI:
	case APIC_SPIV:
	case APIC_ESR:
	case APIC_ICR:
	case APIC_TMICT:
	case APIC_TDCR:
		return true;
	default:
		return false;
	}
}

/*
 * §11.5.4.1: IA32_TSC_DEADLINE reads 0 and ignores writes outside
 * TSC-deadline mode; a non-zero write arms, 0 disarms, and a deadline the
 * TSC has already reached fires at once.
 */
static int deadline_msr(struct lapic *l, bool write, uint64_t *value)
{
	uint64_t now;

	if (!l->deadline_supported)
		return -ENOENT;
	now = timer_sync(l);
	if (timer_mode(l) != APIC_LVT_TIMER_DEADLINE) {
		if (!write)
			*value = 0;
		return 0;
	}
	if (!write) {
		*value = l->tsc_deadline;
		return 0;
	}
	l->tsc_deadline = *value;
	lapic_timer_advance(l, now);
	return 0;
}

int lapic_msr_read(struct lapic *l, uint32_t msr, uint64_t *ret_value)
{
	uint32_t off = (msr - 0x800) << 4;

	if (msr == MSR_IA32_TSC_DEADLINE)
		return deadline_msr(l, false, ret_value);
	if (msr < 0x800 || msr > 0x8ff)
		return -ENOENT;
	if (!lapic_x2apic_enabled(l) || !x2_valid(off, false))
		return -EINVAL;
	if (off == APIC_ICR)
		*ret_value = (uint64_t) l->icr_hi << 32 | l->icr_lo;
	else
		*ret_value = reg_read(l, off, true, timer_sync(l));
	return 0;
}

int lapic_msr_write(struct lapic *l, uint32_t msr, uint64_t value)
{
	uint32_t off = (msr - 0x800) << 4;
	uint64_t now;

	if (msr == MSR_IA32_TSC_DEADLINE)
		return deadline_msr(l, true, &value);
	if (msr < 0x800 || msr > 0x8ff)
		return -ENOENT;
	if (!lapic_x2apic_enabled(l) || !x2_valid(off, true))
		return -EINVAL;
	/* §11.12.1.2: EOI and self-IPI take 0 / a vector; upper halves reserved */
	if (off != APIC_ICR && value >> 32)
		return -EINVAL;
	if (off == APIC_EOI && value)
		return -EINVAL;
	now = timer_sync(l);
	if (off == APIC_SELF_IPI) {
		if (value & ~0xffull)
			return -EINVAL;
		l->self_ipis++;
		lapic_set_irr(l, (uint8_t) value);
		return 0;
	}
	if (off == APIC_ICR) {
		l->icr_hi = (uint32_t) (value >> 32);
		reg_write(l, APIC_ICR, (uint32_t) value, true, now);
		return 0;
	}
	reg_write(l, off, (uint32_t) value, true, now);
	return 0;
}
