/* SPDX-License-Identifier: MIT */
/*
 * The ACPI fixed-hardware power-management registers the FADT names
 * (boot-tables.c): PM1a event and control blocks and the PM timer, on the
 * modelled clock. See acpi-pm.c.
 */
#ifndef VMM_ACPI_PM_H
#define VMM_ACPI_PM_H

#include <stdbool.h>
#include <stdint.h>

#define PORT_ACPI_PM1A_EVT 0x600 /* PM1_STS at +0, PM1_EN at +2 */
#define PORT_ACPI_PM1A_CNT 0x604
#define PORT_ACPI_PM_TMR   0x608
#define ACPI_PM1_EVT_LEN   4
#define ACPI_PM1_CNT_LEN   2
#define ACPI_PM_TMR_LEN	   4
#define ACPI_PM_TMR_HZ	   3579545ull
#define ACPI_S5_SLP_TYP	   5 /* the DSDT's \_S5 package gives this SLP_TYP */

/* ACPI 6.4 §4.8.3.1 Tables 4.11, 4.12 (PM1 status, enable), §4.8.3.2.1 Table 4.13 (PM1 control) */
#define ACPI_PM1_TMR_STS (1u << 0)
#define ACPI_PM1_WAK_STS (1u << 15)
#define ACPI_PM1_SCI_EN	 (1u << 0)
#define ACPI_PM1_BM_RLD	 (1u << 1)
#define ACPI_PM1_GBL_RLS (1u << 2)
#define ACPI_PM1_SLP_TYP (7u << 10)
#define ACPI_PM1_SLP_EN	 (1u << 13)
#define ACPI_PM1_EN_MASK 0x4721u /* TMR_EN GBL_EN PWRBTN_EN SLPBTN_EN RTC_EN PCIEXP_WAKE_DIS */

struct acpi_pm {
	uint64_t tsc_hz; /* 0: the timer stands still */
	uint16_t en, cnt;
	uint64_t tmr_epoch;	/* PM timer bit 23 epoch TMR_STS was last cleared at */
	bool poweroff;		/* SLP_EN written with SLP_TYP = S5 */
	uint16_t sleep_ignored; /* SLP_EN writes with another SLP_TYP (no such state here) */
};

void acpi_pm_init(struct acpi_pm *pm, uint64_t tsc_hz);

/* True if `port` is one of the blocks' bytes. */
bool acpi_pm_decodes(uint16_t port);

/* One byte of the blocks at guest TSC `now`. */
uint8_t acpi_pm_read(struct acpi_pm *pm, uint16_t port, uint64_t now);
void acpi_pm_write(struct acpi_pm *pm, uint16_t port, uint8_t value, uint64_t now);

/* The PM timer's 24-bit count at `now`. */
uint32_t acpi_pm_timer(const struct acpi_pm *pm, uint64_t now);

#endif
