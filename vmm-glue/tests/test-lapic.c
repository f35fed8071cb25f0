/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>

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
