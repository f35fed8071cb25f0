/* SPDX-License-Identifier: MIT */
/*
 * Local APIC model (SDM Vol. 3A ch. 11; x2APIC §11.12). Reset values per
 * Table 11-? "Local APIC register address map" and §11.4.7.1: LVTs masked,
 * SVR 0FFH (software disabled), TPR 0.
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
		uint32_t id = l->id;

		lapic_reset(l, id);
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

static uint32_t reg_read(const struct lapic *l, uint32_t offset, bool x2)
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
		return 0;
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

static void reg_write(struct lapic *l, uint32_t offset, uint32_t v, bool x2)
{
	int i = lvt_index(offset);

	if (i >= 0) {
		if (!(l->svr & APIC_SPIV_ENABLE))
			v |= APIC_LVT_MASKED; /* §11.4.7.2: masks stay set */
		l->lvt[i] = v & lvt_mask[i];
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
		l->tmict = v;
		break;
	case APIC_TDCR:
		l->tdcr = v & 0xb;
		break;
	default:
		break;
	}
}

uint32_t lapic_mmio_read(struct lapic *l, uint32_t offset)
{
	if (!lapic_xapic_enabled(l))
		return 0xffffffffu; /* a disabled APIC does not decode its page */
	return reg_read(l, offset & 0xff0, false);
}

void lapic_mmio_write(struct lapic *l, uint32_t offset, uint32_t value)
{
	if (!lapic_xapic_enabled(l) || offset == APIC_SELF_IPI)
		return;
	reg_write(l, offset & 0xff0, value, false);
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

int lapic_msr_read(struct lapic *l, uint32_t msr, uint64_t *ret_value)
{
	uint32_t off = (msr - 0x800) << 4;

	if (msr < 0x800 || msr > 0x8ff)
		return -ENOENT;
	if (!lapic_x2apic_enabled(l) || !x2_valid(off, false))
		return -EINVAL;
	if (off == APIC_ICR)
		*ret_value = (uint64_t) l->icr_hi << 32 | l->icr_lo;
	else
		*ret_value = reg_read(l, off, true);
	return 0;
}

int lapic_msr_write(struct lapic *l, uint32_t msr, uint64_t value)
{
	uint32_t off = (msr - 0x800) << 4;

	if (msr < 0x800 || msr > 0x8ff)
		return -ENOENT;
	if (!lapic_x2apic_enabled(l) || !x2_valid(off, true))
		return -EINVAL;
	/* §11.12.1.2: EOI and self-IPI take 0 / a vector; upper halves reserved */
	if (off != APIC_ICR && value >> 32)
		return -EINVAL;
	if (off == APIC_EOI && value)
		return -EINVAL;
	if (off == APIC_SELF_IPI) {
		if (value & ~0xffull)
			return -EINVAL;
		l->self_ipis++;
		lapic_set_irr(l, (uint8_t) value);
		return 0;
	}
	if (off == APIC_ICR) {
		l->icr_hi = (uint32_t) (value >> 32);
		reg_write(l, APIC_ICR, (uint32_t) value, true);
		return 0;
	}
	reg_write(l, off, (uint32_t) value, true);
	return 0;
}
