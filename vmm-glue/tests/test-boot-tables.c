/* SPDX-License-Identifier: MIT */
/*
 * The MP and ACPI tables, read back the way an OS finds them: scan for
 * the signatures on 16-byte boundaries, check every checksum, follow the
 * pointers, and check each field at the offset the specifications give
 * (Intel MP Specification 1.4 Tables 4-1, 4-2, 4-4, 4-8; ACPI 6.4 Tables
 * 5.3, 5.4, 5.9, 5.14, 5.19, 5.21 and the AML grammar of §20.2). The
 * parser here is written from the specs, not from boot-tables.c.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "boot-tables.h"

static uint8_t area[BOOT_TABLES_SIZE];
static char err[128];

static uint16_t g16(const uint8_t *p)
{
	return (uint16_t) (p[0] | p[1] << 8);
}
static uint32_t g32(const uint8_t *p)
{
	return g16(p) | (uint32_t) g16(p + 2) << 16;
}
static uint64_t g64(const uint8_t *p)
{
	return g32(p) | (uint64_t) g32(p + 4) << 32;
}

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s = (uint8_t) (s + *p++);
	return s;
}

/* guest-physical -> the area, asserting it lies inside */
static const uint8_t *phys(uint64_t gpa, size_t len)
{
	cr_assert(gpa >= 0xe0000 && gpa + len <= 0x100000, "%#lx+%zu outside E0000H-FFFFFH",
		  (unsigned long) gpa, len);
	return area + (gpa - 0xe0000);
}

/* the first 16-byte aligned `sig` in [lo, hi) */
static uint64_t scan(const char *sig, size_t siglen, uint64_t lo, uint64_t hi)
{
	for (uint64_t a = lo; a < hi; a += 16)
		if (!memcmp(phys(a, siglen), sig, siglen))
			return a;
	return 0;
}

static const uint8_t *sdt(uint64_t gpa, const char *sig, uint32_t *ret_len)
{
	const uint8_t *t = phys(gpa, 36);
	uint32_t len = g32(t + 4);

	cr_assert_eq(memcmp(t, sig, 4), 0, "%.4s at %#lx", sig, (unsigned long) gpa);
	cr_assert_geq(len, 36);
	t = phys(gpa, len);
	cr_expect_eq(sum(t, len), 0, "%.4s checksum", sig);
	cr_expect_eq(memcmp(t + 10, "VPMU  ", 6), 0);
	cr_expect_eq(memcmp(t + 16, "VPMUVMM ", 8), 0);
	cr_expect_eq(g32(t + 24), 1);
	cr_expect_eq(memcmp(t + 28, "VPMU", 4), 0);
	cr_expect_eq(g32(t + 32), 1);
	*ret_len = len;
	return t;
}

static void build(unsigned int cpus)
{
	struct boot_tables_config cfg = { .cpus = cpus,
					  .cpu_signature = 0x50654,
					  .cpu_features = 0xbfebfbff };

	memset(area, 0xcc, sizeof(area));
	cr_assert_eq(boot_tables_build(area, &cfg, err, sizeof(err)), 0, "%s", err);
}

static void check_gas_io(const uint8_t *g, uint8_t bits, uint64_t port, const char *what)
{
	cr_expect_eq(g[0], 1, "%s: system I/O", what);
	cr_expect_eq(g[1], bits, "%s: bit width", what);
	cr_expect_eq(g[2], 0, "%s: bit offset", what);
	cr_expect_eq(g64(g + 4), port, "%s: address", what);
}

static void check_acpi(unsigned int cpus)
{
	uint64_t rsdp_at = scan("RSD PTR ", 8, 0xe0000, 0x100000), entries[2];
	const uint8_t *rsdp, *rsdt, *xsdt, *fadt = NULL, *madt = NULL, *facs, *dsdt, *aml;
	uint32_t len, flen, mlen, dlen;

	cr_assert_eq(rsdp_at, BOOT_TABLES_RSDP);
	rsdp = phys(rsdp_at, 36);
	cr_expect_eq(sum(rsdp, 20), 0, "RSDP checksum (first 20 bytes)");
	cr_expect_eq(sum(rsdp, 36), 0, "RSDP extended checksum");
	cr_expect_eq(rsdp[15], 2, "revision 2: XSDT present");
	cr_expect_eq(g32(rsdp + 20), 36);
	cr_expect_eq(memcmp(rsdp + 9, "VPMU  ", 6), 0, "OEMID");
	cr_expect_eq(rsdp[33] | rsdp[34] | rsdp[35], 0, "reserved");

	rsdt = sdt(g32(rsdp + 16), "RSDT", &len);
	cr_expect_eq(len, 36 + 2 * 4);
	cr_expect_eq(rsdt[8], 1);
	xsdt = sdt(g64(rsdp + 24), "XSDT", &len);
	cr_assert_eq(len, 36 + 2 * 8);
	cr_expect_eq(xsdt[8], 1);
	for (int i = 0; i < 2; i++) {
		entries[i] = g64(xsdt + 36 + 8 * i);
		cr_expect_eq(g32(rsdt + 36 + 4 * i), entries[i], "RSDT and XSDT agree");
		if (!memcmp(phys(entries[i], 4), "FACP", 4))
			fadt = sdt(entries[i], "FACP", &flen);
		else
			madt = sdt(entries[i], "APIC", &mlen);
	}
	cr_assert(fadt && madt, "XSDT lists the FADT and the MADT");

	/* FADT, ACPI 6.4 Table 5.9 */
	cr_expect_eq(flen, 276);
	cr_expect_eq(fadt[8], 6, "FADT major version");
	cr_expect_eq(fadt[131], 4, "FADT minor version");
	cr_expect_eq(g16(fadt + 46), 9, "SCI_INT");
	cr_expect_eq(g32(fadt + 48), 0, "SMI_CMD: none");
	cr_expect_eq(g32(fadt + 56), 0x600, "PM1a_EVT_BLK");
	cr_expect_eq(g32(fadt + 60), 0, "PM1b_EVT_BLK");
	cr_expect_eq(g32(fadt + 64), 0x604, "PM1a_CNT_BLK");
	cr_expect_eq(g32(fadt + 68), 0, "PM1b_CNT_BLK");
	cr_expect_eq(g32(fadt + 72), 0, "PM2_CNT_BLK");
	cr_expect_eq(g32(fadt + 76), 0x608, "PM_TMR_BLK");
	cr_expect_eq(g32(fadt + 80), 0, "GPE0_BLK");
	cr_expect_eq(fadt[88], 4, "PM1_EVT_LEN");
	cr_expect_eq(fadt[89], 2, "PM1_CNT_LEN");
	cr_expect_eq(fadt[91], 4, "PM_TMR_LEN");
	cr_expect_eq(fadt[92], 0, "GPE0_BLK_LEN");
	cr_expect_eq(g16(fadt + 96), 101, "P_LVL2_LAT: no C2");
	cr_expect_eq(g16(fadt + 98), 1001, "P_LVL3_LAT: no C3");
	cr_expect_eq(fadt[108], 0x32, "CENTURY at CMOS 32H");
	cr_expect_eq(g16(fadt + 109), 0x0d,
		     "IAPC_BOOT_ARCH: legacy devices, no 8042, no VGA, no MSI");
	cr_expect_eq(g32(fadt + 112), 0x435,
		     "WBINVD PROC_C1 PWR_BUTTON SLP_BUTTON RESET_REG_SUP, not HW_REDUCED");
	check_gas_io(fadt + 116, 8, 0xcf9, "RESET_REG");
	cr_expect_eq(fadt[119], 1, "RESET_REG byte access");
	cr_expect_eq(fadt[128], 0x06, "RESET_VALUE");
	cr_expect_eq(g64(fadt + 132), 0, "X_FIRMWARE_CTRL zero when FIRMWARE_CTRL is set");
	cr_expect_eq(g64(fadt + 140), g32(fadt + 40), "X_DSDT = DSDT");
	check_gas_io(fadt + 148, 32, 0x600, "X_PM1a_EVT_BLK");
	check_gas_io(fadt + 172, 16, 0x604, "X_PM1a_CNT_BLK");
	check_gas_io(fadt + 208, 32, 0x608, "X_PM_TMR_BLK");
	for (int off = 160; off < 276; off++)
		if (off < 172 || (off >= 184 && off < 208) || off >= 220)
			cr_expect_eq(fadt[off], 0, "FADT byte %d (unused blocks, sleep regs)", off);

	/* FACS, Table 5.14: 64-byte aligned */
	cr_expect_eq(g32(fadt + 36) % 64, 0);
	facs = phys(g32(fadt + 36), 64);
	cr_expect_eq(memcmp(facs, "FACS", 4), 0);
	cr_expect_eq(g32(facs + 4), 64);
	cr_expect_eq(g32(facs + 12), 0, "no waking vector");
	cr_expect_eq(g32(facs + 16), 0, "global lock free");
	cr_expect_eq(facs[32], 2, "version");

	/* DSDT: Name (_S5, Package () {SLP_TYPa, SLP_TYPb, ...}) in AML (§20.2) */
	dsdt = sdt(g32(fadt + 40), "DSDT", &dlen);
	cr_expect_eq(dsdt[8], 2, "revision 2: 64-bit integers");
	aml = dsdt + 36;
	cr_assert_eq(dlen, 36 + 14);
	cr_expect_eq(aml[0], 0x08, "NameOp");
	cr_expect_eq(memcmp(aml + 1, "_S5_", 4), 0);
	cr_expect_eq(aml[5], 0x12, "PackageOp");
	cr_expect_eq(aml[6] >> 6, 0, "one-byte PkgLength");
	cr_expect_eq(aml[6] & 0x3f, 8, "PkgLength covers itself to the end");
	cr_expect_eq(6 + (aml[6] & 0x3f), 14, "the package ends the DSDT");
	cr_expect_eq(aml[7], 4, "NumElements");
	cr_expect_eq(aml[8], 0x0a, "BytePrefix");
	cr_expect_eq(aml[9], 5, "SLP_TYPa = 5, what PM1a_CNT takes for S5");
	cr_expect_eq(aml[10], 0x0a);
	cr_expect_eq(aml[11], 5, "SLP_TYPb");
	cr_expect_eq(aml[12], 0x00, "ZeroOp");
	cr_expect_eq(aml[13], 0x00, "ZeroOp");

	/* MADT, Tables 5.19 and 5.21 */
	cr_expect_eq(madt[8], 5);
	cr_expect_eq(mlen, 44 + 8 * cpus);
	cr_expect_eq(g32(madt + 36), 0xfee00000u, "local APIC address");
	cr_expect_eq(g32(madt + 40), 1, "PCAT_COMPAT");
	for (unsigned int i = 0; i < cpus; i++) {
		const uint8_t *e = madt + 44 + 8 * i;

		cr_expect_eq(e[0], 0, "CPU %u: Processor Local APIC", i);
		cr_expect_eq(e[1], 8);
		cr_expect_eq(e[2], i, "UID");
		cr_expect_eq(e[3], i, "APIC ID");
		cr_expect_eq(g32(e + 4), 1, "enabled, not online-capable");
	}
}

static void check_mp(unsigned int cpus)
{
	/* Linux looks at 0-3FFH, 9FC00H-9FFFFH and F0000H-FFFFFH */
	uint64_t mpf_at = scan("_MP_", 4, 0xf0000, 0x100000);
	const uint8_t *mpf, *mpc, *e;
	uint16_t len;

	cr_assert_eq(mpf_at, 0xf0000);
	mpf = phys(mpf_at, 16);
	cr_expect_eq(sum(mpf, 16), 0, "floating pointer checksum");
	cr_expect_eq(mpf[8], 1, "length in paragraphs");
	cr_expect_eq(mpf[9], 4, "MP 1.4");
	cr_expect_eq(mpf[11], 0, "a configuration table is present");
	cr_expect_eq(mpf[12], 0, "virtual wire mode, no IMCR");
	cr_expect_eq(g32(mpf + 12) >> 8, 0, "feature bytes 3-5 reserved");
	mpc = phys(g32(mpf + 4), 44);
	cr_assert_eq(memcmp(mpc, "PCMP", 4), 0);
	len = g16(mpc + 4);
	cr_assert_eq(len, 44 + 20 * cpus + 8);
	mpc = phys(g32(mpf + 4), len);
	cr_expect_eq(sum(mpc, len), 0, "base table checksum");
	cr_expect_eq(mpc[6], 4);
	cr_expect_eq(memcmp(mpc + 8, "VPMU    ", 8), 0, "OEM ID, space padded");
	cr_expect_eq(memcmp(mpc + 16, "VPMU-VMM    ", 12), 0, "product ID");
	cr_expect_eq(g32(mpc + 28), 0, "no OEM table");
	cr_expect_eq(g16(mpc + 34), cpus + 1, "entry count");
	cr_expect_eq(g32(mpc + 36), 0xfee00000u);
	cr_expect_eq(g16(mpc + 40), 0, "no extended table");
	e = mpc + 44;
	for (unsigned int i = 0; i < cpus; i++, e += 20) {
		cr_expect_eq(e[0], 0, "processor entry");
		cr_expect_eq(e[1], i, "APIC ID");
		cr_expect_eq(e[2], 0x14, "APIC version");
		cr_expect_eq(e[3], i == 0 ? 3 : 1, "EN, BP on CPU 0 only");
		cr_expect_eq(g32(e + 4), 0x50654, "signature");
		cr_expect_eq(g32(e + 8), 0xbfebfbff, "features");
		cr_expect_eq(g64(e + 12), 0, "reserved");
	}
	cr_expect_eq(e[0], 1, "bus entry");
	cr_expect_eq(e[1], 0, "bus 0");
	cr_expect_eq(memcmp(e + 2, "ISA   ", 6), 0);
}

Test(boot_tables, one_cpu)
{
	build(1);
	check_acpi(1);
	check_mp(1);
}

Test(boot_tables, four_cpus)
{
	build(4);
	check_acpi(4);
	check_mp(4);
}

Test(boot_tables, most_cpus)
{
	build(BOOT_TABLES_MAX_CPUS);
	check_acpi(BOOT_TABLES_MAX_CPUS);
	check_mp(BOOT_TABLES_MAX_CPUS);
}

Test(boot_tables, cpu_count_checked)
{
	struct boot_tables_config cfg = { .cpus = 0 };

	area[0] = 0x5a;
	cr_expect_eq(boot_tables_build(area, &cfg, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "0 CPUs: the boot tables describe 1 to 254");
	cfg.cpus = 255;
	cr_expect_eq(boot_tables_build(area, &cfg, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "255 CPUs: the boot tables describe 1 to 254");
	cr_expect_eq(area[0], 0x5a, "untouched on failure");
}

/* Nothing outside the tables: the rest of the area is zero */
Test(boot_tables, rest_is_zero)
{
	build(2);
	for (size_t i = 0x300 + 44 + 16; i < 0x10000; i++)
		cr_assert_eq(area[i], 0, "byte %#zx", i);
	for (size_t i = 0x10010 + 44 + 40 + 8; i < BOOT_TABLES_SIZE; i++)
		cr_assert_eq(area[i], 0, "byte %#zx", i);
}
