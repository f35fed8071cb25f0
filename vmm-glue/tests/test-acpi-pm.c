/* SPDX-License-Identifier: MIT */
/*
 * ACPI PM1a event/control blocks and the PM timer (ACPI 6.4 §4.8.3,
 * Tables 4.11-4.13; PM timer §4.8.3.3), byte by byte as the platform
 * reaches them, on a 2.1 GHz guest TSC.
 */
#include <criterion/criterion.h>

#include "acpi-pm.h"

#define TSC_HZ 2100000000ull

static struct acpi_pm pm;

static void setup(void)
{
	acpi_pm_init(&pm, TSC_HZ);
}

TestSuite(acpi_pm, .init = setup);

static uint32_t rd(uint16_t port, unsigned int size, uint64_t now)
{
	uint32_t v = 0;

	for (unsigned int i = 0; i < size; i++)
		v |= (uint32_t) acpi_pm_read(&pm, (uint16_t) (port + i), now) << (8 * i);
	return v;
}

static void wr(uint16_t port, unsigned int size, uint32_t v, uint64_t now)
{
	for (unsigned int i = 0; i < size; i++)
		acpi_pm_write(&pm, (uint16_t) (port + i), (uint8_t) (v >> (8 * i)), now);
}

Test(acpi_pm, decodes_the_fadt_blocks)
{
	for (uint16_t port = 0x5f0; port < 0x620; port++)
		cr_expect_eq(acpi_pm_decodes(port),
			     (port >= 0x600 && port < 0x606) || (port >= 0x608 && port < 0x60c),
			     "port %#x", port);
}

/* 3.579545 MHz: a 2.1 GHz TSC of t reads floor(t * 3579545 / 2.1e9), 24 bits */
Test(acpi_pm, timer)
{
	cr_expect_eq(rd(PORT_ACPI_PM_TMR, 4, 0), 0);
	cr_expect_eq(rd(PORT_ACPI_PM_TMR, 4, 586), 0); /* 586 * 3579545 / 2.1e9 = 0.9989 */
	cr_expect_eq(rd(PORT_ACPI_PM_TMR, 4, 587), 1); /* 1.00058 */
	cr_expect_eq(rd(PORT_ACPI_PM_TMR, 4, TSC_HZ), 3579545);
	cr_expect_eq(rd(PORT_ACPI_PM_TMR, 4, 10 * TSC_HZ), 35795450 & 0xffffff, "24 bits");
	wr(PORT_ACPI_PM_TMR, 4, 0, TSC_HZ);
	cr_expect_eq(rd(PORT_ACPI_PM_TMR, 4, TSC_HZ), 3579545, "read-only");
}

/* TMR_STS: set when bit 23 changes (every 2^23 ticks = 2.3435 s), write 1 to clear */
Test(acpi_pm, tmr_sts)
{
	uint64_t flip = (8388608ull * TSC_HZ + 3579545 - 1) / 3579545; /* first TSC at tick 2^23 */

	cr_expect_eq(rd(PORT_ACPI_PM1A_EVT, 2, flip - 1), 0);
	cr_expect_eq(rd(PORT_ACPI_PM1A_EVT, 2, flip), ACPI_PM1_TMR_STS);
	wr(PORT_ACPI_PM1A_EVT, 2, 0xfffe, flip);
	cr_expect_eq(rd(PORT_ACPI_PM1A_EVT, 2, flip), ACPI_PM1_TMR_STS, "0 bits clear nothing");
	wr(PORT_ACPI_PM1A_EVT, 2, ACPI_PM1_TMR_STS, flip);
	cr_expect_eq(rd(PORT_ACPI_PM1A_EVT, 2, flip), 0);
	cr_expect_eq(rd(PORT_ACPI_PM1A_EVT, 2, 2 * flip), ACPI_PM1_TMR_STS);
}

Test(acpi_pm, enable_register)
{
	wr(PORT_ACPI_PM1A_EVT + 2, 2, 0xffff, 0);
	cr_expect_eq(rd(PORT_ACPI_PM1A_EVT + 2, 2, 0), 0x4721,
		     "TMR_EN GBL_EN PWRBTN_EN SLPBTN_EN RTC_EN PCIEXP_WAKE_DIS");
	wr(PORT_ACPI_PM1A_EVT + 3, 1, 0, 0);
	cr_expect_eq(rd(PORT_ACPI_PM1A_EVT + 2, 2, 0), 0x21, "byte writes keep the other byte");
}

Test(acpi_pm, control_and_sleep)
{
	cr_expect_eq(rd(PORT_ACPI_PM1A_CNT, 2, 0), ACPI_PM1_SCI_EN, "always in ACPI mode");
	wr(PORT_ACPI_PM1A_CNT, 2, ACPI_PM1_BM_RLD | ACPI_PM1_GBL_RLS | 3u << 10, 0);
	cr_expect_eq(rd(PORT_ACPI_PM1A_CNT, 2, 0), ACPI_PM1_SCI_EN | ACPI_PM1_BM_RLD | 3u << 10,
		     "GBL_RLS is write-only");
	wr(PORT_ACPI_PM1A_CNT, 2, 3u << 10 | ACPI_PM1_SLP_EN, 0);
	cr_expect_not(pm.poweroff, "S3 is not a state here");
	cr_expect_eq(pm.sleep_ignored, 1);
	cr_expect_eq(rd(PORT_ACPI_PM1A_CNT, 2, 0) & ACPI_PM1_SLP_EN, 0, "SLP_EN is write-only");
	wr(PORT_ACPI_PM1A_CNT, 2, 5u << 10, 0);
	cr_expect_not(pm.poweroff, "SLP_TYP alone does nothing");
	wr(PORT_ACPI_PM1A_CNT + 1, 1, (5u << 10 | ACPI_PM1_SLP_EN) >> 8, 0);
	cr_expect(pm.poweroff, "S5");
}
