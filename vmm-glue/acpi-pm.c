/* SPDX-License-Identifier: MIT */
/*
 * ACPI fixed hardware (ACPI 6.4 §4.8, "ACPI Register Model"):
 * - PM1a_EVT_BLK (§4.8.1.1, §4.8.3.1): PM1_STS (write 1 to clear) and PM1_EN. The
 *   only status that can become 1 is TMR_STS, set when bit 23 of the PM
 *   timer changes; there is no power button, sleep button, RTC alarm or
 *   wake event. No SCI is delivered (no interrupt controller for it).
 * - PM1a_CNT_BLK (§4.8.1.2, §4.8.3.2.1): SCI_EN reads 1 (the FADT has no SMI_CMD:
 *   the machine is always in ACPI mode), BM_RLD and SLP_TYP read back,
 *   GBL_RLS and SLP_EN are write-only. Writing SLP_EN with SLP_TYP =
 *   ACPI_S5_SLP_TYP (the DSDT's \_S5) powers off: `poweroff` latches it
 *   for the platform, which ends the run with status 0. Other sleep types
 *   are no sleeping state here; such a write is counted and ignored.
 * - PM_TMR_BLK (§4.8.3.3): a free-running 24-bit count at 3.579545 MHz
 *   of modelled time (floor(TSC * 3579545 / tsc_hz)); bits 31:24 read 0
 *   (the FADT leaves TMR_VAL_EXT clear). Read-only.
 * Registers are reached byte by byte (the platform splits wider
 * accesses), so a 16-bit write to PM1_CNT sets SLP_TYP and SLP_EN in the
 * same byte write.
 */
#include <string.h>

#include "acpi-pm.h"

__extension__ typedef unsigned __int128 u128;

void acpi_pm_init(struct acpi_pm *pm, uint64_t tsc_hz)
{
	memset(pm, 0, sizeof(*pm));
	pm->tsc_hz = tsc_hz;
}

static uint64_t ticks(const struct acpi_pm *pm, uint64_t now)
{
	if (!pm->tsc_hz)
		return 0;
	return (uint64_t) ((u128) now * ACPI_PM_TMR_HZ / pm->tsc_hz);
}

uint32_t acpi_pm_timer(const struct acpi_pm *pm, uint64_t now)
{
	return (uint32_t) (ticks(pm, now) & 0xffffff);
}

bool acpi_pm_decodes(uint16_t port)
{
	return (port >= PORT_ACPI_PM1A_EVT && port < PORT_ACPI_PM1A_EVT + ACPI_PM1_EVT_LEN) ||
	       (port >= PORT_ACPI_PM1A_CNT && port < PORT_ACPI_PM1A_CNT + ACPI_PM1_CNT_LEN) ||
	       (port >= PORT_ACPI_PM_TMR && port < PORT_ACPI_PM_TMR + ACPI_PM_TMR_LEN);
}

static uint16_t pm1_sts(const struct acpi_pm *pm, uint64_t now)
{
	return (ticks(pm, now) >> 23) != pm->tmr_epoch ? ACPI_PM1_TMR_STS : 0;
}

static uint16_t pm1_cnt(const struct acpi_pm *pm)
{
	return (uint16_t) ((pm->cnt & (ACPI_PM1_BM_RLD | ACPI_PM1_SLP_TYP)) | ACPI_PM1_SCI_EN);
}

uint8_t acpi_pm_read(struct acpi_pm *pm, uint16_t port, uint64_t now)
{
	unsigned int shift = 8 * (port & 1);

	if (port >= PORT_ACPI_PM_TMR && port < PORT_ACPI_PM_TMR + ACPI_PM_TMR_LEN)
		return (uint8_t) (acpi_pm_timer(pm, now) >> (8 * (port - PORT_ACPI_PM_TMR)));
	switch (port & ~1u) {
	case PORT_ACPI_PM1A_EVT:
		return (uint8_t) (pm1_sts(pm, now) >> shift);
	case PORT_ACPI_PM1A_EVT + 2:
		return (uint8_t) (pm->en >> shift);
	case PORT_ACPI_PM1A_CNT:
		return (uint8_t) (pm1_cnt(pm) >> shift);
	default:
		return 0xff;
	}
}

void acpi_pm_write(struct acpi_pm *pm, uint16_t port, uint8_t value, uint64_t now)
{
	unsigned int shift = 8 * (port & 1);
	uint16_t v = (uint16_t) (value << shift), keep = (uint16_t) (0xff00u >> shift);

	switch (port & ~1u) {
	case PORT_ACPI_PM1A_EVT:
		if (v & ACPI_PM1_TMR_STS)
			pm->tmr_epoch = ticks(pm, now) >> 23;
		break;
	case PORT_ACPI_PM1A_EVT + 2:
		pm->en = (uint16_t) (((pm->en & keep) | v) & ACPI_PM1_EN_MASK);
		break;
	case PORT_ACPI_PM1A_CNT:
		pm->cnt = (uint16_t) ((pm->cnt & keep) | v);
		if (v & ACPI_PM1_SLP_EN) {
			if (((pm->cnt & ACPI_PM1_SLP_TYP) >> 10) == ACPI_S5_SLP_TYP)
				pm->poweroff = true;
			else
				pm->sleep_ignored++;
		}
		pm->cnt &= (uint16_t) ~(ACPI_PM1_SLP_EN | ACPI_PM1_GBL_RLS);
		break;
	default:
		break; /* the PM timer is read-only */
	}
}
