/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>

#include "lapic.h"

static struct lapic l;

static void setup(void)
{
	lapic_reset(&l, 0);
}

TestSuite(lapic, .init = setup);

Test(lapic, reset_values)
{
	/* SDM Vol. 3A §11.4.7.1: LVTs masked, SVR 0FFH, xAPIC enabled at 0xFEE00000 */
	cr_assert_eq(l.base, 0xfee00000ull | APIC_BASE_ENABLE | APIC_BASE_BSP);
	cr_assert_eq(lapic_mmio_read(&l, APIC_SPIV), 0xff);
	cr_assert_eq(lapic_mmio_read(&l, APIC_LVTPC), APIC_LVT_MASKED);
	cr_assert_eq(lapic_mmio_read(&l, APIC_LVR) & 0xff, 0x14);
	cr_assert(lapic_xapic_enabled(&l));
}

Test(lapic, x2apic_msrs_need_x2apic_mode)
{
	uint64_t v;

	cr_assert_eq(lapic_msr_read(&l, 0x834, &v), -EINVAL);
	cr_assert_eq(lapic_msr_read(&l, 0x1b, &v), -ENOENT);
	cr_assert_eq(lapic_set_base(&l, l.base | APIC_BASE_EXTD), 0);
	cr_assert_eq(lapic_msr_write(&l, 0x80f, 0x1ff), 0);
	cr_assert_eq(lapic_msr_write(&l, 0x834, 0xf0), 0);
	cr_assert_eq(lapic_msr_read(&l, 0x834, &v), 0);
	cr_assert_eq(v, 0xf0);
	/* xAPIC MMIO is off in x2APIC mode */
	cr_assert_eq(lapic_mmio_read(&l, APIC_LVTPC), 0xffffffffu);
	/* read-only and write-only registers fault */
	cr_assert_eq(lapic_msr_write(&l, 0x803, 0), -EINVAL); /* version */
	cr_assert_eq(lapic_msr_read(&l, 0x80b, &v), -EINVAL); /* EOI */
	cr_assert_eq(lapic_msr_write(&l, 0x80b, 1), -EINVAL); /* EOI takes 0 */
}

Test(lapic, mode_transitions)
{
	/* x2APIC -> xAPIC directly is invalid; disable first (Figure 11-27) */
	cr_assert_eq(lapic_set_base(&l, l.base | APIC_BASE_EXTD), 0);
	cr_assert_eq(lapic_set_base(&l, 0xfee00000ull | APIC_BASE_ENABLE), -EINVAL);
	cr_assert_eq(lapic_set_base(&l, 0xfee00000ull), 0);
	cr_assert_eq(lapic_set_base(&l, 0xfee00000ull | APIC_BASE_EXTD), -EINVAL);
	cr_assert_eq(lapic_set_base(&l, 0xfee00000ull | APIC_BASE_ENABLE | APIC_BASE_EXTD),
		     -EINVAL);
	cr_assert_eq(lapic_set_base(&l, 0xfee00000ull | APIC_BASE_ENABLE), 0);
}

Test(lapic, software_disabled_keeps_lvt_masked)
{
	lapic_mmio_write(&l, APIC_LVTPC, 0xf0);
	cr_assert_eq(lapic_lvtpc(&l), 0xf0 | APIC_LVT_MASKED);
	lapic_mmio_write(&l, APIC_SPIV, 0x1ff);
	lapic_mmio_write(&l, APIC_LVTPC, 0xf0);
	cr_assert_eq(lapic_lvtpc(&l), 0xf0);
}

Test(lapic, priority_eoi_and_self_ipi)
{
	lapic_mmio_write(&l, APIC_SPIV, 0x1ff);
	cr_assert_eq(lapic_pending(&l), -1);
	lapic_set_irr(&l, 0x31);
	lapic_set_irr(&l, 0xf0);
	cr_assert_eq(lapic_pending(&l), 0xf0);
	lapic_ack(&l, 0xf0);
	/* 0x31 is below the in-service class 0xf */
	cr_assert_eq(lapic_pending(&l), -1);
	lapic_mmio_write(&l, APIC_EOI, 0);
	cr_assert_eq(lapic_pending(&l), 0x31);
	lapic_mmio_write(&l, APIC_TASKPRI, 0x40);
	cr_assert_eq(lapic_pending(&l), -1);
	lapic_mmio_write(&l, APIC_TASKPRI, 0);
	lapic_ack(&l, 0x31);
	lapic_mmio_write(&l, APIC_EOI, 0);
	/* ICR self-IPI, fixed mode, shorthand "self" */
	lapic_mmio_write(&l, APIC_ICR, 1u << 18 | 0x55);
	cr_assert_eq(lapic_pending(&l), 0x55);
	/* vectors 0-15 are illegal */
	lapic_set_irr(&l, 3);
	cr_assert(l.esr & (1u << 6));
}

/*
 * The APIC timer (SDM Vol. 3A §11.5.4, §11.5.4.1) on Skylake-Server's
 * clocks: a 25 MHz core crystal (CPUID 15H ECX) and a TSC of 25 MHz *
 * 168 / 2 = 2.1 GHz, so one timer tick before the divider is 84 TSC
 * cycles. The clock callback reads `now`, which each test moves by hand.
 */
#define SKX_TSC_HZ     2100000000ull
#define SKX_CRYSTAL_HZ 25000000ull
#define TIMER_VEC      0xec

static uint64_t now;

static uint64_t test_clock(void *data)
{
	return *(uint64_t *) data;
}

static void timer_setup(void)
{
	now = 0;
	lapic_reset(&l, 0);
	lapic_timer_config(&l, SKX_TSC_HZ, SKX_CRYSTAL_HZ, true, test_clock, &now);
	lapic_mmio_write(&l, APIC_SPIV, 0x1ff);
}

static bool irr_has(uint8_t v)
{
	return l.irr[v / 32] & (1u << (v % 32));
}

static void lvtt(unsigned int mode, bool masked)
{
	lapic_mmio_write(&l, APIC_LVTT,
			 TIMER_VEC | mode << APIC_LVT_TIMER_SHIFT | (masked ? APIC_LVT_MASKED : 0));
}

TestSuite(timer, .init = timer_setup);

/* Figure 11-10: bits 3, 1:0 = 000b..110b divide by 2..128, 111b by 1; bit 2 reserved */
Test(timer, divide_configuration_encodings)
{
	static const struct {
		uint32_t tdcr, divisor;
	} enc[] = { { 0x0, 2 },	 { 0x1, 4 },  { 0x2, 8 },   { 0x3, 16 },
		    { 0x8, 32 }, { 0x9, 64 }, { 0xa, 128 }, { 0xb, 1 } };

	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	for (unsigned int i = 0; i < sizeof(enc) / sizeof(enc[0]); i++) {
		now = 1000;
		lapic_mmio_write(&l, APIC_TDCR, enc[i].tdcr);
		lapic_mmio_write(&l, APIC_TMICT, 1000);
		cr_expect_eq(lapic_timer_next(&l), 1000 + 84ull * enc[i].divisor * 1000,
			     "TDCR %#x: divide by %u", enc[i].tdcr, enc[i].divisor);
		now = 1000 + 84ull * enc[i].divisor * 10;
		cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 990, "TDCR %#x after 10 ticks",
			     enc[i].tdcr);
		now -= 1;
		cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 991, "TDCR %#x 1 TSC earlier",
			     enc[i].tdcr);
	}
	lapic_mmio_write(&l, APIC_TDCR, 0xffffffff);
	cr_expect_eq(lapic_mmio_read(&l, APIC_TDCR), 0xb, "bit 2 and 31:4 reserved");
}

Test(timer, one_shot_counts_down_and_stops_at_zero)
{
	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	lapic_mmio_write(&l, APIC_TDCR, 0xb); /* divide by 1 */
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 0, "not started");
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	now = 500;
	lapic_mmio_write(&l, APIC_TMICT, 100000);
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMICT), 100000);
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 100000);
	now = 500 + 83;
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 100000, "83 TSC cycles: no tick yet");
	now = 500 + 84;
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 99999);
	now = 500 + 84 * 99999ull;
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 1);
	cr_expect_eq(lapic_timer_next(&l), 500 + 8400000);
	cr_expect_not(lapic_timer_advance(&l, 500 + 8400000 - 1));
	cr_expect_not(irr_has(TIMER_VEC));
	cr_expect(lapic_timer_advance(&l, 500 + 8400000));
	cr_expect(irr_has(TIMER_VEC));
	cr_expect_eq(l.timer_irqs, 1);
	now = 500 + 8400000 + 84 * 5;
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 0, "stays 0 until reprogrammed");
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	cr_expect_not(lapic_timer_advance(&l, UINT64_MAX - 1), "one interrupt only");
	/* reprogramming restarts it */
	lapic_mmio_write(&l, APIC_TMICT, 10);
	cr_expect_eq(lapic_timer_next(&l), now + 840);
	/* a write of 0 stops it */
	lapic_mmio_write(&l, APIC_TMICT, 0);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 0);
}

Test(timer, register_access_fires_what_expired)
{
	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	lapic_mmio_write(&l, APIC_TDCR, 0xb);
	lapic_mmio_write(&l, APIC_TMICT, 10);
	now = 840;
	cr_expect_not(irr_has(TIMER_VEC));
	(void) lapic_mmio_read(&l, APIC_TASKPRI);
	cr_expect(irr_has(TIMER_VEC), "a read at the expiry TSC raises it");
	cr_expect_eq(lapic_pending(&l), TIMER_VEC);
}

Test(timer, periodic_reloads_without_drift)
{
	lvtt(APIC_LVT_TIMER_PERIODIC, false);
	lapic_mmio_write(&l, APIC_TDCR, 0x0); /* divide by 2: 168 TSC per tick */
	lapic_mmio_write(&l, APIC_TMICT, 1000);
	cr_expect_eq(lapic_timer_next(&l), 168000);
	now = 168000 - 168;
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 1);
	cr_expect(lapic_timer_advance(&l, 168000));
	cr_expect_eq(lapic_timer_current(&l, 168000), 1000, "reloaded at the expiry");
	cr_expect_eq(lapic_timer_current(&l, 168000 + 168), 999);
	cr_expect_eq(lapic_timer_next(&l), 2 * 168000);
	lapic_ack(&l, TIMER_VEC);
	lapic_mmio_write(&l, APIC_EOI, 0);
	/* a jump over several periods raises one interrupt and keeps the phase */
	cr_expect(lapic_timer_advance(&l, 10 * 168000 + 5));
	cr_expect_eq(l.timer_irqs, 2);
	cr_expect_eq(lapic_timer_next(&l), 11 * 168000);
	cr_expect_eq(lapic_timer_current(&l, 10 * 168000 + 168 * 3), 997);
	/* a new initial count restarts counting from the write */
	now = 10 * 168000 + 168 * 3;
	lapic_mmio_write(&l, APIC_TMICT, 10);
	cr_expect_eq(lapic_timer_next(&l), now + 1680);
	/* 0 stops it */
	lapic_mmio_write(&l, APIC_TMICT, 0);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
}

/* A rate that does not divide the TSC: each expiry is the ceiling of m * period, no drift. */
Test(timer, periodic_exact_with_fractional_period)
{
	lapic_timer_config(&l, 1000, 3, true, test_clock, &now);
	lvtt(APIC_LVT_TIMER_PERIODIC, false);
	lapic_mmio_write(&l, APIC_TDCR, 0xb);
	lapic_mmio_write(&l, APIC_TMICT, 1);
	cr_expect_eq(lapic_timer_next(&l), 334); /* ceil(1000/3) */
	lapic_timer_advance(&l, 334);
	cr_expect_eq(lapic_timer_next(&l), 667); /* ceil(2000/3) */
	lapic_timer_advance(&l, 667);
	cr_expect_eq(lapic_timer_next(&l), 1000);
	lapic_timer_advance(&l, 3000000);
	cr_expect_eq(lapic_timer_next(&l), 3000334);
}

Test(timer, divide_change_mid_count_keeps_the_count)
{
	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	lapic_mmio_write(&l, APIC_TDCR, 0x0); /* by 2 */
	lapic_mmio_write(&l, APIC_TMICT, 1000);
	now = 168 * 100;
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 900);
	lapic_mmio_write(&l, APIC_TDCR, 0xb); /* by 1 from here */
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 900);
	cr_expect_eq(lapic_timer_next(&l), 16800 + 900 * 84);
}

Test(timer, masked_counts_but_raises_nothing)
{
	lvtt(APIC_LVT_TIMER_ONESHOT, true);
	lapic_mmio_write(&l, APIC_TDCR, 0xb);
	lapic_mmio_write(&l, APIC_TMICT, 10);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX, "a masked expiry wakes nothing");
	now = 84 * 4;
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 6, "still counting");
	cr_expect_not(lapic_timer_advance(&l, 840));
	cr_expect_not(irr_has(TIMER_VEC));
	cr_expect_eq(lapic_timer_current(&l, 840), 0);
	/* unmasking after the expiry raises nothing */
	now = 900;
	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	cr_expect_not(irr_has(TIMER_VEC));
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	/* a software-disabled APIC masks the timer (§11.4.7.2) */
	lapic_mmio_write(&l, APIC_TMICT, 10);
	lapic_mmio_write(&l, APIC_SPIV, 0xff);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	cr_expect_not(lapic_timer_advance(&l, 100000));
}

Test(timer, tsc_deadline)
{
	uint64_t v = 1;

	/* outside TSC-deadline mode the MSR reads 0 and ignores writes */
	cr_expect_eq(lapic_msr_write(&l, MSR_IA32_TSC_DEADLINE, 5000), 0);
	cr_expect_eq(lapic_msr_read(&l, MSR_IA32_TSC_DEADLINE, &v), 0);
	cr_expect_eq(v, 0);
	lvtt(APIC_LVT_TIMER_DEADLINE, false);
	cr_expect_eq(lapic_mmio_read(&l, APIC_LVTT) >> 17 & 3, 2);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX, "not armed by the mode alone");
	now = 1000;
	cr_expect_eq(lapic_msr_write(&l, MSR_IA32_TSC_DEADLINE, 5000), 0);
	cr_expect_eq(lapic_msr_read(&l, MSR_IA32_TSC_DEADLINE, &v), 0);
	cr_expect_eq(v, 5000);
	cr_expect_eq(lapic_timer_next(&l), 5000);
	/* initial count ignored, current count 0 */
	lapic_mmio_write(&l, APIC_TMICT, 1234);
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMICT), 0);
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 0);
	cr_expect_not(lapic_timer_advance(&l, 4999));
	cr_expect(lapic_timer_advance(&l, 5000), "fires when the TSC equals the deadline");
	cr_expect(irr_has(TIMER_VEC));
	now = 5000;
	cr_expect_eq(lapic_msr_read(&l, MSR_IA32_TSC_DEADLINE, &v), 0);
	cr_expect_eq(v, 0, "disarmed and cleared");
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	lapic_ack(&l, TIMER_VEC);
	lapic_mmio_write(&l, APIC_EOI, 0);
	/* moving it, then writing 0, disarms */
	lapic_msr_write(&l, MSR_IA32_TSC_DEADLINE, 9000);
	lapic_msr_write(&l, MSR_IA32_TSC_DEADLINE, 8000);
	cr_expect_eq(lapic_timer_next(&l), 8000);
	lapic_msr_write(&l, MSR_IA32_TSC_DEADLINE, 0);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	cr_expect_not(lapic_timer_advance(&l, 100000));
	/* a deadline already passed fires at the write */
	now = 200000;
	lapic_msr_write(&l, MSR_IA32_TSC_DEADLINE, 100);
	cr_expect(irr_has(TIMER_VEC));
	lapic_msr_read(&l, MSR_IA32_TSC_DEADLINE, &v);
	cr_expect_eq(v, 0);
	cr_expect_eq(l.timer_irqs, 2);
}

Test(timer, mode_change_disarms)
{
	uint64_t v;

	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	lapic_mmio_write(&l, APIC_TDCR, 0xb);
	lapic_mmio_write(&l, APIC_TMICT, 1000);
	now = 840;
	lvtt(APIC_LVT_TIMER_ONESHOT, true); /* same mode: the mask alone changes nothing else */
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 990);
	lvtt(APIC_LVT_TIMER_PERIODIC, false);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX, "one-shot -> periodic disarms");
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 0);
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMICT), 1000, "the initial count stays");
	lvtt(APIC_LVT_TIMER_DEADLINE, false);
	lapic_msr_write(&l, MSR_IA32_TSC_DEADLINE, 100000);
	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	lvtt(APIC_LVT_TIMER_DEADLINE, false);
	lapic_msr_read(&l, MSR_IA32_TSC_DEADLINE, &v);
	cr_expect_eq(v, 0, "leaving TSC-deadline mode disarmed it");
	cr_expect_not(lapic_timer_advance(&l, 200000));
	/* reserved mode 11b does not count */
	lapic_mmio_write(&l, APIC_LVTT, TIMER_VEC | 3u << 17);
	lapic_mmio_write(&l, APIC_TMICT, 10);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	cr_expect_eq(lapic_mmio_read(&l, APIC_TMCCT), 0);
}

Test(timer, deadline_unsupported)
{
	uint64_t v;

	lapic_timer_config(&l, SKX_TSC_HZ, SKX_CRYSTAL_HZ, false, test_clock, &now);
	cr_expect_eq(lapic_msr_read(&l, MSR_IA32_TSC_DEADLINE, &v), -ENOENT);
	cr_expect_eq(lapic_msr_write(&l, MSR_IA32_TSC_DEADLINE, 1), -ENOENT);
	lvtt(APIC_LVT_TIMER_DEADLINE | APIC_LVT_TIMER_PERIODIC, false);
	cr_expect_eq(lapic_mmio_read(&l, APIC_LVTT), TIMER_VEC | 1u << 17, "bit 18 reserved");
}

Test(timer, x2apic_msrs)
{
	uint64_t v;

	cr_assert_eq(lapic_set_base(&l, l.base | APIC_BASE_EXTD), 0);
	cr_expect_eq(lapic_msr_write(&l, 0x832, TIMER_VEC | 1u << 17), 0); /* periodic */
	cr_expect_eq(lapic_msr_write(&l, 0x83e, 0x3), 0);		   /* by 16 */
	cr_expect_eq(lapic_msr_write(&l, 0x838, 500), 0);
	now = 84 * 16 * 7;
	cr_expect_eq(lapic_msr_read(&l, 0x839, &v), 0);
	cr_expect_eq(v, 493);
	cr_expect_eq(lapic_msr_write(&l, 0x839, 1), -EINVAL, "current count is read-only");
	cr_expect_eq(lapic_msr_read(&l, 0x83e, &v), 0);
	cr_expect_eq(v, 3);
	cr_expect_eq(lapic_msr_read(&l, 0x838, &v), 0);
	cr_expect_eq(v, 500);
	cr_expect_eq(lapic_timer_next(&l), 84ull * 16 * 500);
}

Test(timer, apic_disable_resets_the_timer_but_keeps_its_clock)
{
	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	lapic_mmio_write(&l, APIC_TMICT, 1000);
	cr_assert_eq(lapic_set_base(&l, 0xfee00000ull), 0);
	cr_expect_eq(lapic_timer_next(&l), UINT64_MAX);
	cr_assert_eq(lapic_set_base(&l, 0xfee00000ull | APIC_BASE_ENABLE), 0);
	lapic_mmio_write(&l, APIC_SPIV, 0x1ff);
	lvtt(APIC_LVT_TIMER_ONESHOT, false);
	lapic_mmio_write(&l, APIC_TDCR, 0xb);
	lapic_mmio_write(&l, APIC_TMICT, 2);
	cr_expect_eq(lapic_timer_next(&l), 168, "still 84 TSC per tick");
}
