/* SPDX-License-Identifier: MIT */
/*
 * Local APIC model for the emulator vCPU (SDM Vol. 3A ch. 11): the
 * registers a test kernel and a PMI path touch, in xAPIC MMIO form at
 * IA32_APIC_BASE and x2APIC MSR form (800H + offset / 16), with the mode
 * switched through IA32_APIC_BASE as hardware does. No timer.
 */
#ifndef VMM_LAPIC_H
#define VMM_LAPIC_H

#include <stdbool.h>
#include <stdint.h>

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
#define APIC_LVTPC    0x340
#define APIC_LVT0     0x350
#define APIC_LVT1     0x360
#define APIC_LVTERR   0x370
#define APIC_TMICT    0x380
#define APIC_TMCCT    0x390
#define APIC_TDCR     0x3e0
#define APIC_SELF_IPI 0x3f0 /* x2APIC only (MSR 83FH) */

#define APIC_LVT_MASKED	 (1u << 16)
#define APIC_SPIV_ENABLE (1u << 8)

struct lapic {
	uint64_t base; /* IA32_APIC_BASE */
	uint32_t id;
	uint32_t tpr, ldr, dfr, svr, esr;
	uint32_t icr_lo, icr_hi;
	uint32_t lvt[7]; /* CMCI, timer, thermal, PMC, LINT0, LINT1, error */
	uint32_t tmict, tdcr;
	uint32_t irr[8], isr[8], tmr[8];
	uint64_t eois, self_ipis;
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
 * x2APIC MSR 800H-8FFH: 0, -ENOENT (not an x2APIC MSR), -EINVAL (#GP:
 * x2APIC off, reserved/read-only register or reserved bits).
 */
int lapic_msr_read(struct lapic *l, uint32_t msr, uint64_t *ret_value);
int lapic_msr_write(struct lapic *l, uint32_t msr, uint64_t value);

/* Raise fixed interrupt `vector` (IRR); vectors below 16 are dropped (illegal). */
void lapic_set_irr(struct lapic *l, uint8_t vector);
/* Highest-priority vector deliverable now (above PPR), or -1. */
int lapic_pending(const struct lapic *l);
/* The CPU accepts `vector`: IRR -> ISR. */
void lapic_ack(struct lapic *l, uint8_t vector);

uint32_t lapic_lvtpc(const struct lapic *l);
void lapic_set_lvtpc(struct lapic *l, uint32_t value);

#endif
