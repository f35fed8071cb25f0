/* SPDX-License-Identifier: MIT */
/*
 * MP and ACPI tables for the BIOS area (offsets below are the specs').
 *
 * MP (Intel MultiProcessor Specification 1.4, chapter 4):
 * - floating pointer (§4.1, Table 4-1), 16 bytes at F0000H: "_MP_", the
 *   configuration table's address, length 1 (paragraphs), revision 04H,
 *   checksum, feature byte 1 = 0 (a configuration table follows), feature
 *   byte 2 = 0 (virtual wire mode, no IMCR).
 * - configuration table header (§4.2, Table 4-2): "PCMP", base table
 *   length, revision 04H, checksum, OEM ID, product ID, no OEM table,
 *   entry count, local APIC address FEE00000H, no extended table.
 * - one processor entry per CPU (§4.3.1, Table 4-4): type 0, APIC ID,
 *   APIC version 14H, flags EN (and BP for CPU 0), signature and feature
 *   flags from CPUID.01H; then one bus entry (§4.3.2, Table 4-8): type 1,
 *   bus 0, "ISA   ". No I/O APIC entry: none is modelled.
 *
 * ACPI (ACPI 6.4, chapter 5):
 * - RSDP (§5.2.5.3, Table 5.3), revision 2, both checksums.
 * - RSDT and XSDT (§5.2.7, §5.2.8) list the FADT and the MADT.
 * - FADT (§5.2.9, Table 5.9), revision 6.4, 276 bytes: FACS in
 *   FIRMWARE_CTRL only (the spec wants X_FIRMWARE_CTRL zero then), the
 *   DSDT in both DSDT and X_DSDT; SCI on IRQ 9; no SMI command port
 *   (always in ACPI mode); PM1a_EVT_BLK 600H (4 bytes), PM1a_CNT_BLK 604H
 *   (2), PM_TMR_BLK 608H (4, 24-bit), no PM1b/PM2/GPE blocks; C2/C3
 *   latencies that say "not supported" (101, 1001); RTC century at CMOS
 *   32H; IA-PC boot flags (Table 5.10): legacy devices, no 8042 (so Linux
 *   does not spend boot time probing a keyboard that is not there; the
 *   controller still answers and resets), no VGA, no MSI; flags (Table
 *   5.11): WBINVD, PROC_C1, PWR_BUTTON and SLP_BUTTON (none as fixed
 *   hardware), RESET_REG_SUP; RESET_REG = system I/O CF9H, 8 bits, value
 *   06H; the X_ blocks as Generic Address Structures (§5.2.3.2) matching
 *   the 32-bit ones.
 * - FACS (§5.2.10, Table 5.14), 64 bytes, version 2, no waking vector.
 * - DSDT (§5.2.11.1): one object, Name (_S5, Package () {5, 5, 0, 0}) in
 *   AML (§20.2.5.2 NameOp, §20.2.5.4 PackageOp, §20.2.4 PkgLength), so
 *   that the OS finds the SLP_TYP for soft-off (§7.4.2) and powers off
 *   through PM1a_CNT. Without \_S5 Linux has no ACPI power-off.
 * - MADT (§5.2.12, Table 5.19): local APIC address FEE00000H, flags
 *   PCAT_COMPAT (the PIC ports answer), one Processor Local APIC entry
 *   (§5.2.12.2, Table 5.21) per CPU: UID i, APIC ID i, enabled.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "acpi-pm.h"
#include "boot-tables.h"
#include "platform.h"

#define LAPIC_ADDR     0xfee00000u
#define LAPIC_VER      0x14
#define SCI_IRQ	       9
#define FADT_LEN       276
#define FACS_LEN       64
#define SDT_HDR_LEN    36
#define MPC_HDR_LEN    44
#define MP_CPU_LEN     20
#define MP_BUS_LEN     8
#define MADT_LAPIC_LEN 8

/* FADT IA-PC boot architecture flags (Table 5.10) and fixed feature flags (Table 5.11) */
#define IAPC_LEGACY_DEVICES    (1u << 0)
#define IAPC_VGA_NOT_PRESENT   (1u << 2)
#define IAPC_MSI_NOT_SUPPORTED (1u << 3)
#define FADT_WBINVD	       (1u << 0)
#define FADT_PROC_C1	       (1u << 2)
#define FADT_PWR_BUTTON	       (1u << 4)
#define FADT_SLP_BUTTON	       (1u << 5)
#define FADT_RESET_REG_SUP     (1u << 10)

#define GAS_SYSTEM_IO 1

static void w16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
}
static void w32(uint8_t *p, uint32_t v)
{
	w16(p, (uint16_t) v);
	w16(p + 2, (uint16_t) (v >> 16));
}
static void w64(uint8_t *p, uint64_t v)
{
	w32(p, (uint32_t) v);
	w32(p + 4, (uint32_t) (v >> 32));
}

/* The byte that makes the sum of p[0..len) zero, stored at p[at]. */
static void checksum(uint8_t *p, size_t len, size_t at)
{
	uint8_t sum = 0;

	p[at] = 0;
	for (size_t i = 0; i < len; i++)
		sum = (uint8_t) (sum + p[i]);
	p[at] = (uint8_t) -sum;
}

static uint8_t *at(uint8_t *area, uint64_t gpa)
{
	return area + (gpa - BOOT_TABLES_BASE);
}

/* ACPI system description table header (§5.2.6, Table 5.4); checksum left to sdt_done. */
static void sdt_header(uint8_t *t, const char *sig, uint32_t len, uint8_t rev)
{
	memcpy(t, sig, 4);
	w32(t + 4, len);
	t[8] = rev;
	memcpy(t + 10, "VPMU  ", 6);
	memcpy(t + 16, "VPMUVMM ", 8);
	w32(t + 24, 1);
	memcpy(t + 28, "VPMU", 4);
	w32(t + 32, 1);
}

static void sdt_done(uint8_t *t, uint32_t len)
{
	checksum(t, len, 9);
}

/* Generic Address Structure (§5.2.3.2, Table 5.1) in system I/O space */
static void gas_io(uint8_t *g, uint8_t bits, uint8_t access, uint64_t port)
{
	g[0] = GAS_SYSTEM_IO;
	g[1] = bits;
	g[2] = 0;
	g[3] = access;
	w64(g + 4, port);
}

static void build_fadt(uint8_t *f)
{
	sdt_header(f, "FACP", FADT_LEN, 6);
	w32(f + 36, (uint32_t) BOOT_TABLES_FACS);
	w32(f + 40, (uint32_t) BOOT_TABLES_DSDT);
	f[45] = 0; /* preferred PM profile: unspecified */
	w16(f + 46, SCI_IRQ);
	w32(f + 48, 0); /* SMI_CMD: none, ACPI mode is fixed */
	w32(f + 56, PORT_ACPI_PM1A_EVT);
	w32(f + 64, PORT_ACPI_PM1A_CNT);
	w32(f + 76, PORT_ACPI_PM_TMR);
	f[88] = ACPI_PM1_EVT_LEN;
	f[89] = ACPI_PM1_CNT_LEN;
	f[91] = ACPI_PM_TMR_LEN;
	w16(f + 96, 101);  /* P_LVL2_LAT > 100: no C2 */
	w16(f + 98, 1001); /* P_LVL3_LAT > 1000: no C3 */
	f[108] = RTC_CENTURY;
	w16(f + 109, IAPC_LEGACY_DEVICES | IAPC_VGA_NOT_PRESENT | IAPC_MSI_NOT_SUPPORTED);
	w32(f + 112,
	    FADT_WBINVD | FADT_PROC_C1 | FADT_PWR_BUTTON | FADT_SLP_BUTTON | FADT_RESET_REG_SUP);
	gas_io(f + 116, 8, 1, PORT_RST_CNT);
	f[128] = RST_CNT_RESET;
	f[131] = 4; /* FADT minor version: ACPI 6.4 */
	/* X_FIRMWARE_CTRL stays 0: "if FIRMWARE_CTRL is non-zero this field must be zero" */
	w64(f + 140, BOOT_TABLES_DSDT);
	gas_io(f + 148, ACPI_PM1_EVT_LEN * 8, 0, PORT_ACPI_PM1A_EVT);
	gas_io(f + 172, ACPI_PM1_CNT_LEN * 8, 0, PORT_ACPI_PM1A_CNT);
	gas_io(f + 208, ACPI_PM_TMR_LEN * 8, 0, PORT_ACPI_PM_TMR);
	sdt_done(f, FADT_LEN);
}

/* Name (_S5, Package () {5, 5, 0, 0}) */
static const uint8_t dsdt_aml[] = {
	0x08, '_',
	'S',  '5',
	'_', /* NameOp NameString */
	0x12, 0x08,
	0x04,		       /* PackageOp PkgLength(8) NumElements(4) */
	0x0a, ACPI_S5_SLP_TYP, /* BytePrefix SLP_TYPa */
	0x0a, ACPI_S5_SLP_TYP, /* BytePrefix SLP_TYPb */
	0x00, 0x00,	       /* ZeroOp ZeroOp */
};

static void build_acpi(uint8_t *area, unsigned int cpus)
{
	uint8_t *rsdp = at(area, BOOT_TABLES_RSDP), *rsdt = at(area, BOOT_TABLES_RSDT);
	uint8_t *xsdt = at(area, BOOT_TABLES_XSDT), *facs = at(area, BOOT_TABLES_FACS);
	uint8_t *dsdt = at(area, BOOT_TABLES_DSDT), *madt = at(area, BOOT_TABLES_MADT);
	uint32_t len;

	memcpy(rsdp, "RSD PTR ", 8);
	memcpy(rsdp + 9, "VPMU  ", 6);
	rsdp[15] = 2;
	w32(rsdp + 16, (uint32_t) BOOT_TABLES_RSDT);
	w32(rsdp + 20, 36);
	w64(rsdp + 24, BOOT_TABLES_XSDT);
	checksum(rsdp, 20, 8);
	checksum(rsdp, 36, 32);

	sdt_header(rsdt, "RSDT", SDT_HDR_LEN + 2 * 4, 1);
	w32(rsdt + 36, (uint32_t) BOOT_TABLES_FADT);
	w32(rsdt + 40, (uint32_t) BOOT_TABLES_MADT);
	sdt_done(rsdt, SDT_HDR_LEN + 2 * 4);

	sdt_header(xsdt, "XSDT", SDT_HDR_LEN + 2 * 8, 1);
	w64(xsdt + 36, BOOT_TABLES_FADT);
	w64(xsdt + 44, BOOT_TABLES_MADT);
	sdt_done(xsdt, SDT_HDR_LEN + 2 * 8);

	build_fadt(at(area, BOOT_TABLES_FADT));

	memcpy(facs, "FACS", 4);
	w32(facs + 4, FACS_LEN);
	facs[32] = 2; /* version */

	len = SDT_HDR_LEN + (uint32_t) sizeof(dsdt_aml);
	sdt_header(dsdt, "DSDT", len, 2);
	memcpy(dsdt + SDT_HDR_LEN, dsdt_aml, sizeof(dsdt_aml));
	sdt_done(dsdt, len);

	len = SDT_HDR_LEN + 8 + cpus * MADT_LAPIC_LEN;
	sdt_header(madt, "APIC", len, 5);
	w32(madt + 36, LAPIC_ADDR);
	w32(madt + 40, 1); /* PCAT_COMPAT */
	for (unsigned int i = 0; i < cpus; i++) {
		uint8_t *e = madt + 44 + i * MADT_LAPIC_LEN;

		e[0] = 0; /* Processor Local APIC */
		e[1] = MADT_LAPIC_LEN;
		e[2] = (uint8_t) i; /* ACPI processor UID */
		e[3] = (uint8_t) i; /* APIC ID */
		w32(e + 4, 1);	    /* enabled */
	}
	sdt_done(madt, len);
}

static void build_mp(uint8_t *area, const struct boot_tables_config *cfg)
{
	uint8_t *mpf = at(area, BOOT_TABLES_MPF), *mpc = at(area, BOOT_TABLES_MPC), *e;
	uint16_t len = (uint16_t) (MPC_HDR_LEN + cfg->cpus * MP_CPU_LEN + MP_BUS_LEN);

	memcpy(mpf, "_MP_", 4);
	w32(mpf + 4, (uint32_t) BOOT_TABLES_MPC);
	mpf[8] = 1;
	mpf[9] = 4;
	checksum(mpf, 16, 10);

	memcpy(mpc, "PCMP", 4);
	w16(mpc + 4, len);
	mpc[6] = 4;
	memcpy(mpc + 8, "VPMU    ", 8);
	memcpy(mpc + 16, "VPMU-VMM    ", 12);
	w16(mpc + 34, (uint16_t) (cfg->cpus + 1));
	w32(mpc + 36, LAPIC_ADDR);
	e = mpc + MPC_HDR_LEN;
	for (unsigned int i = 0; i < cfg->cpus; i++, e += MP_CPU_LEN) {
		e[0] = 0;
		e[1] = (uint8_t) i;
		e[2] = LAPIC_VER;
		e[3] = (uint8_t) (1 | (i == 0 ? 2 : 0)); /* EN, BP */
		w32(e + 4, cfg->cpu_signature);
		w32(e + 8, cfg->cpu_features);
	}
	e[0] = 1;
	e[1] = 0;
	memcpy(e + 2, "ISA   ", 6);
	checksum(mpc, len, 7);
}

int boot_tables_build(uint8_t *area, const struct boot_tables_config *cfg, char *err, size_t errlen)
{
	if (cfg->cpus < 1 || cfg->cpus > BOOT_TABLES_MAX_CPUS) {
		snprintf(err, errlen, "%u CPUs: the boot tables describe 1 to %d", cfg->cpus,
			 BOOT_TABLES_MAX_CPUS);
		return -EINVAL;
	}
	memset(area, 0, BOOT_TABLES_SIZE);
	build_acpi(area, cfg->cpus);
	build_mp(area, cfg);
	return 0;
}
