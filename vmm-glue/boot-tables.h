/* SPDX-License-Identifier: MIT */
/*
 * The firmware tables a PC kernel looks for in the BIOS area
 * E0000H-FFFFFH: an MP 1.4 floating pointer and configuration table, and
 * ACPI's RSDP, RSDT, XSDT, FADT, FACS, DSDT and MADT, describing 1..N
 * CPUs with local APICs at FEE00000H, no I/O APIC, and the fixed
 * hardware acpi-pm.c and platform.c model. See boot-tables.c.
 */
#ifndef VMM_BOOT_TABLES_H
#define VMM_BOOT_TABLES_H

#include <stddef.h>
#include <stdint.h>

#define BOOT_TABLES_BASE     0xe0000ull /* guest-physical start of the area... */
#define BOOT_TABLES_SIZE     0x20000u	/* ...up to 1 MiB; e820 must mark it reserved */
#define BOOT_TABLES_MAX_CPUS 254	/* xAPIC IDs 0..253 (FFH is the broadcast ID) */

/* where each table lands (guest-physical) */
#define BOOT_TABLES_RSDP (BOOT_TABLES_BASE + 0x0000)
#define BOOT_TABLES_RSDT (BOOT_TABLES_BASE + 0x0040)
#define BOOT_TABLES_XSDT (BOOT_TABLES_BASE + 0x0080)
#define BOOT_TABLES_FADT (BOOT_TABLES_BASE + 0x0100)
#define BOOT_TABLES_FACS (BOOT_TABLES_BASE + 0x0240) /* 64-byte aligned */
#define BOOT_TABLES_DSDT (BOOT_TABLES_BASE + 0x0280)
#define BOOT_TABLES_MADT (BOOT_TABLES_BASE + 0x0300)
#define BOOT_TABLES_MPF	 (BOOT_TABLES_BASE + 0x10000) /* F0000H: Linux scans F0000H-FFFFFH */
#define BOOT_TABLES_MPC	 (BOOT_TABLES_BASE + 0x10010)

struct boot_tables_config {
	unsigned int cpus;	/* 1..BOOT_TABLES_MAX_CPUS; APIC ID i for CPU i, CPU 0 boots */
	uint32_t cpu_signature; /* CPUID.01H:EAX, for the MP processor entries */
	uint32_t cpu_features;	/* CPUID.01H:EDX */
};

/*
 * Write every table into `area`, the BOOT_TABLES_SIZE bytes at
 * BOOT_TABLES_BASE (zeroed first). 0, or -EINVAL with one line in err.
 * Pass BOOT_TABLES_RSDP to the kernel as boot_params.acpi_rsdp_addr (or
 * let it scan for "RSD PTR ").
 */
int boot_tables_build(uint8_t *area, const struct boot_tables_config *cfg, char *err,
		      size_t errlen);

#endif
