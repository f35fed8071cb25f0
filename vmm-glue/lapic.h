/* SPDX-License-Identifier: MIT */
/*
 * Local APIC model for the emulator vCPU (SDM Vol. 3A ch. 11): the
 * registers a test kernel and a PMI path touch, in xAPIC MMIO form at
 * IA32_APIC_BASE and x2APIC MSR form (800H + offset / 16), with the mode
 * switched through IA32_APIC_BASE as hardware does, and the APIC timer in
 * its one-shot, periodic and TSC-deadline modes (§11.5.4, §11.5.4.1) on
 * the modelled clock: a guest TSC value the caller supplies. The timer
 * never reads host time, so a guest's timer interrupts land on the same
 * instruction every run.
 */
#ifndef VMM_LAPIC_H
#define VMM_LAPIC_H

#include <stdbool.h>
#include <stdint.h>

#include "vpmu/msr.h" /* APIC_LVTPC, APIC_LVT_MASKED */

#define MSR_IA32_APICBASE 0x1b
#define APIC_BASE_BSP	  (1ull << 8)
#define APIC_BASE_EXTD	  (1ull << 10)
#define APIC_BASE_ENABLE  (1ull << 11)
#define APIC_DEFAULT_BASE 0xfee00000ull

/* register offsets (xAPIC MMIO) */
#define APIC_ID	      0x20
#define APIC_LVR      0x30
#define APIC_TASKPRI  0x80
#define APIC_PROCPRI  0xa0
#define APIC_EOI      0xb0
#define APIC_LDR      0xd0
#define APIC_DFR      0xe0
#define APIC_SPIV     0xf0
#define APIC_ISR      0x100
#define APIC_TMR      0x180
#define APIC_IRR      0x200
#define APIC_ESR      0x280
#define APIC_LVTCMCI  0x2f0
#define APIC_ICR      0x300
#define APIC_ICR2     0x310
#define APIC_LVTT     0x320
#define APIC_LVTTHMR  0x330
#define APIC_LVT0     0x350
#define APIC_LVT1     0x360
#define APIC_LVTERR   0x370
#define APIC_TMICT    0x380
#define APIC_TMCCT    0x390
#define APIC_TDCR     0x3e0
#define APIC_SELF_IPI 0x3f0 /* x2APIC only (MSR 83FH) */

#define APIC_SPIV_ENABLE (1u << 8)

/* SDM Vol. 3A §11.5.1, Figure 11-8: LVT timer mode, bits 18:17 (Table 11-2) */
#define APIC_LVT_TIMER_SHIFT	17
#define APIC_LVT_TIMER_ONESHOT	0u
#define APIC_LVT_TIMER_PERIODIC 1u
#define APIC_LVT_TIMER_DEADLINE 2u

#define MSR_IA32_TSC_DEADLINE 0x6e0

/* The guest TSC now, for register accesses that depend on time. */
typedef uint64_t (*lapic_clock_fn)(void *data);

struct lapic {
	uint64_t base; /* IA32_APIC_BASE */
	uint32_t id;
	uint32_t tpr, ldr, dfr, svr, esr;
	uint32_t icr_lo, icr_hi;
	uint32_t lvt[7]; /* CMCI, timer, thermal, PMC, LINT0, LINT1, error */
	uint32_t tmict, tdcr;
	uint32_t irr[8], isr[8], tmr[8];
	uint64_t eois, self_ipis;
	/* timer configuration (lapic_timer_config; kept across APIC disable) */
	uint64_t tsc_hz;	 /* guest TSC rate; 0: unconfigured, the count-down never runs */
	uint64_t timer_hz;	 /* the timer's input before the divider */
	bool deadline_supported; /* CPUID.01H:ECX[24] as the guest sees it */
	lapic_clock_fn clock;
	void *clock_data;
	/* timer state */
	bool timer_armed;     /* one-shot/periodic count-down running */
	uint64_t timer_t0;    /* TSC where the count-down (re)started... */
	uint32_t timer_c0;    /* ...from this count */
	uint64_t timer_fired; /* expiries since timer_t0 (periodic) */
	uint64_t tsc_deadline;
	uint64_t timer_irqs; /* timer interrupts raised into IRR */
};

void lapic_reset(struct lapic *l, uint32_t id);
bool lapic_xapic_enabled(const struct lapic *l);
bool lapic_x2apic_enabled(const struct lapic *l);

/* IA32_APIC_BASE write: 0, or -EINVAL for a transition hardware refuses (#GP). */
int lapic_set_base(struct lapic *l, uint64_t value);

/* 32-bit xAPIC MMIO access at `offset` in the 4 KiB page. */
uint32_t lapic_mmio_read(struct lapic *l, uint32_t offset);
void lapic_mmio_write(struct lapic *l, uint32_t offset, uint32_t value);

/*
 * x2APIC MSR 800H-8FFH and IA32_TSC_DEADLINE (6E0H, where supported): 0,
 * -ENOENT (not an APIC MSR), -EINVAL (#GP: x2APIC off, reserved/read-only
 * register or reserved bits).
 */
int lapic_msr_read(struct lapic *l, uint32_t msr, uint64_t *ret_value);
int lapic_msr_write(struct lapic *l, uint32_t msr, uint64_t value);

/* Raise fixed interrupt `vector` (IRR); vectors below 16 are dropped (illegal). */
void lapic_set_irr(struct lapic *l, uint8_t vector);
/* Highest-priority vector deliverable now (above PPR), or -1. */
int lapic_pending(const struct lapic *l);
/* The CPU accepts `vector`: IRR -> ISR. */
void lapic_ack(struct lapic *l, uint8_t vector);

/*
 * Whether an external 8259A's INT reaches the core through LINT0: with the
 * APIC disabled in IA32_APIC_BASE, LINT0 is the INTR pin (SDM Vol. 3A
 * 11.4.3); with it enabled, when LVT LINT0 is unmasked with delivery mode
 * ExtINT (111B, §11.5.1). The vector then comes from the 8259A's
 * acknowledge, not through IRR, and TPR/PPR do not hold it back (§11.8).
 */
bool lapic_extint(const struct lapic *l);

uint32_t lapic_lvtpc(const struct lapic *l);
void lapic_set_lvtpc(struct lapic *l, uint32_t value);

/*
 * The timer's clocks (after lapic_reset): the guest TSC runs at tsc_hz and
 * the timer counts timer_hz ticks per second before the divide
 * configuration register divides them. On a part whose CPUID 15H
 * enumerates the core crystal clock that is the crystal (§11.5.4): for
 * Skylake-Server, 25 MHz against a 2.1 GHz TSC. deadline_supported says
 * whether the guest's CPUID.01H:ECX[24] advertises TSC-deadline mode: if
 * not, LVT timer bit 18 is reserved and MSR 6E0H does not exist. `clock`
 * (may be NULL: time stands at 0) tells the guest TSC when the guest
 * touches a register whose value depends on time (current count,
 * IA32_TSC_DEADLINE, or any write that starts, stops or rescales the
 * count); every register access first fires what has expired by then.
 */
void lapic_timer_config(struct lapic *l, uint64_t tsc_hz, uint64_t timer_hz,
			bool deadline_supported, lapic_clock_fn clock, void *clock_data);

/*
 * The guest TSC at which the timer next raises an interrupt, or
 * UINT64_MAX if it will not (disarmed, stopped, or its LVT entry is
 * masked: a masked expiry wakes nothing). An emulator's HLT may jump the
 * modelled clock straight there.
 */
uint64_t lapic_timer_next(const struct lapic *l);

/*
 * Bring the timer to guest TSC `now`: an expiry at or before it sets the
 * LVT timer vector in IRR (unless masked), a one-shot count stops at 0,
 * a periodic count reloads, a TSC deadline disarms and clears. Returns
 * true if an interrupt was raised. Several periods that elapsed at once
 * raise one interrupt, as IRR holds one bit per vector.
 */
bool lapic_timer_advance(struct lapic *l, uint64_t now);

/* The current-count register's value at guest TSC `now` (§11.5.4). */
uint32_t lapic_timer_current(const struct lapic *l, uint64_t now);

#endif
