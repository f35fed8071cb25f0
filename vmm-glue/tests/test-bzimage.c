/* SPDX-License-Identifier: MIT */
/*
 * bzImage parsing and the zero page, on images built here field by field
 * (x86 boot protocol, Documentation/arch/x86/boot.rst): good ones at
 * protocol 2.12 and 2.15, and one bad image per check; and the whole
 * 64-bit load into the KVM path's and the emulator's memory layouts,
 * checked with a page walk and descriptor decoding written from the SDM.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bzimage.h"

#define SETUP_SECTS 3
#define KERNEL_SIZE (64 * 1024)
#define IMG_SIZE    ((SETUP_SECTS + 1) * 512 + KERNEL_SIZE)

static uint8_t img[IMG_SIZE];
static uint8_t zp[BP_SIZE];
static char err[256];

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t) v);
	put16(p + 2, (uint16_t) (v >> 16));
}
static uint16_t get16(const uint8_t *p)
{
	return (uint16_t) (p[0] | p[1] << 8);
}
static uint32_t get32(const uint8_t *p)
{
	return get16(p) | (uint32_t) get16(p + 2) << 16;
}
static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t) get32(p + 4) << 32;
}

/* A bzImage as a 64-bit kernel built with protocol `version` looks to a loader. */
static void make_image(uint16_t version)
{
	memset(img, 0, sizeof(img));
	img[BP_SETUP_SECTS] = SETUP_SECTS;
	put16(img + BP_BOOT_FLAG, 0xaa55);
	img[BP_HDR_JUMP] = 0xeb;     /* jmp rel8 ... */
	img[BP_HDR_JUMP + 1] = 0x6a; /* ... to 0x26c, past the header */
	memcpy(img + BP_HEADER, "HdrS", 4);
	put16(img + BP_VERSION, version);
	img[BP_LOADFLAGS] = LOADFLAG_LOADED_HIGH;
	put32(img + BP_CODE32_START, 0x100000);
	put32(img + BP_INITRD_ADDR_MAX, 0x7fffffff);
	put32(img + BP_KERNEL_ALIGNMENT, 0x200000);
	img[BP_RELOCATABLE] = 1;
	put16(img + BP_XLOADFLAGS, XLF_KERNEL_64);
	put32(img + BP_CMDLINE_SIZE, 2047);
	put32(img + BP_PREF_ADDRESS, 0x1000000);
	put32(img + BP_INIT_SIZE, 0x800000);
	memset(img + (SETUP_SECTS + 1) * 512, 0x90, KERNEL_SIZE);
}

Test(bzimage, parse_good)
{
	struct bzimage bz;

	make_image(0x020f);
	cr_assert_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(bz.version, 0x020f);
	cr_expect_eq(bz.setup_sects, SETUP_SECTS);
	cr_expect_eq(bz.kernel_offset, 2048);
	cr_expect_eq(bz.kernel_size, KERNEL_SIZE);
	cr_expect_eq(bz.load_addr, 0x1000000, "relocatable: pref_address");
	cr_expect_eq(bz.entry64, 0x1000200, "64-bit entry at load address + 200H");
	cr_expect_eq(bz.init_size, 0x800000);
	cr_expect_eq(bz.cmdline_size, 2047);
	cr_expect_eq(bz.initrd_addr_max, 0x7fffffff);
	cr_expect_eq(bz.header_end, 0x26c);

	/* not relocatable: 1 MiB; setup_sects 0 means 4 */
	img[BP_RELOCATABLE] = 0;
	img[BP_SETUP_SECTS] = 0;
	cr_assert_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(bz.load_addr, 0x100000);
	cr_expect_eq(bz.entry64, 0x100200);
	cr_expect_eq(bz.setup_sects, 4);
	cr_expect_eq(bz.kernel_offset, 2560);
}

Test(bzimage, parse_bad)
{
	struct bzimage bz = { .version = 0x1234 };

	make_image(0x020f);
	cr_expect_eq(bzimage_parse(img, 0x200, &bz, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "truncated bzImage: 512 bytes, the setup header alone needs 612");
	img[BP_HEADER] = 'X';
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -ENOEXEC);
	cr_expect_str_eq(err,
			 "not a bzImage: no \"HdrS\" setup header at 0x202 or no 0xAA55 boot flag");
	make_image(0x020f);
	put16(img + BP_BOOT_FLAG, 0);
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -ENOEXEC);
	make_image(0x0205);
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -ENOEXEC);
	cr_expect_str_eq(err,
			 "bzImage boot protocol 2.05 is older than 2.06, which this loader needs");
	make_image(0x020f);
	img[BP_LOADFLAGS] = 0;
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -ENOEXEC);
	cr_expect_str_eq(err,
			 "a zImage (loaded low), not a bzImage: rebuild the kernel as bzImage");
	make_image(0x020b);
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -ENOEXEC);
	cr_expect_str_eq(
		err, "the kernel has no 64-bit entry point (XLF_KERNEL_64): build it for x86-64");
	make_image(0x020f);
	put16(img + BP_XLOADFLAGS, 0);
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -ENOEXEC);
	make_image(0x020f);
	img[BP_SETUP_SECTS] = 200;
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(
		err,
		"truncated bzImage: 200 setup sectors end at 102912 bytes, past the file's 67584");
	make_image(0x020f);
	img[BP_HDR_JUMP + 1] = 0x10; /* a header that ends before init_size */
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "bzImage setup header ends at 0x212, outside the zero page");
	/* a pref_address whose sum with init_size wraps, or that misses 1 MiB..4 GiB */
	make_image(0x020f);
	put32(img + BP_PREF_ADDRESS, 0xfffff000);
	put32(img + BP_PREF_ADDRESS + 4, 0xffffffff);
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err,
			 "bzImage pref_address 0xfffffffffffff000 with 8 MiB to decompress in "
			 "does not fit between 1 MiB and 4 GiB, where this loader puts the kernel");
	put32(img + BP_PREF_ADDRESS + 4, 0);
	put32(img + BP_PREF_ADDRESS, 0xff800000); /* ends exactly at 4 GiB: fine */
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), 0, "%s", err);
	put32(img + BP_PREF_ADDRESS, 0xff801000); /* 4 KiB past it */
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -EINVAL);
	put32(img + BP_PREF_ADDRESS, 0x1000); /* over the loader's boot data */
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "bzImage pref_address 0x1000 with 8 MiB to decompress in does not "
			      "fit between 1 MiB and 4 GiB, where this loader puts the kernel");
	bz.version = 0x1234;
	cr_expect_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), -EINVAL);
	cr_expect_eq(bz.version, 0x1234, "untouched on failure");
}

Test(bzimage, zero_page)
{
	struct bzimage bz;
	static const uint64_t e820[3][3] = {
		{ 0, 0x9fc00, 1 },
		{ 0x9fc00, 0x60400, 2 },
		{ 0x100000, (256ull << 20) - 0x100000, 1 },
	};

	make_image(0x020f);
	cr_assert_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), 0);
	memset(zp, 0xcc, sizeof(zp));
	cr_assert_eq(bzimage_boot_params(img, &bz, 256ull << 20, 0x20000, 40, 0x7000000, 0x123456,
					 zp, err, sizeof(err)),
		     0, "%s", err);
	/* the header comes from the image, the loader's fields are ours */
	cr_expect_eq(memcmp(zp + BP_HEADER, "HdrS", 4), 0);
	cr_expect_eq(get16(zp + BP_VERSION), 0x020f);
	cr_expect_eq(zp[BP_SETUP_SECTS], SETUP_SECTS);
	cr_expect_eq(get32(zp + BP_INIT_SIZE), 0x800000);
	cr_expect_eq(zp[BP_TYPE_OF_LOADER], 0xff);
	cr_expect_eq(zp[BP_LOADFLAGS], LOADFLAG_LOADED_HIGH | LOADFLAG_CAN_USE_HEAP);
	cr_expect_eq(get16(zp + BP_HEAP_END_PTR), 0xfe00);
	cr_expect_eq(get32(zp + BP_CMD_LINE_PTR), 0x20000);
	cr_expect_eq(get32(zp + BP_RAMDISK_IMAGE), 0x7000000);
	cr_expect_eq(get32(zp + BP_RAMDISK_SIZE), 0x123456);
	cr_expect_eq(get32(zp + BP_CODE32_START), 0x1000000);
	cr_expect_eq(zp[0], 0, "outside the header: zero");
	cr_expect_eq(zp[0x26c], 0);
	cr_expect_eq(zp[BP_E820_ENTRIES], 3);
	for (int i = 0; i < 3; i++) {
		const uint8_t *e = zp + BP_E820_TABLE + i * BP_E820_ENTRY_SIZE;

		cr_expect_eq(get64(e), e820[i][0], "e820[%d].addr", i);
		cr_expect_eq(get64(e + 8), e820[i][1], "e820[%d].size", i);
		cr_expect_eq(get32(e + 16), e820[i][2], "e820[%d].type", i);
	}
	cr_expect_eq(zp[BP_E820_TABLE + 3 * BP_E820_ENTRY_SIZE], 0);
	/* no initrd: ramdisk fields 0 */
	cr_assert_eq(bzimage_boot_params(img, &bz, 256ull << 20, 0x20000, 0, 0x7000000, 0, zp, err,
					 sizeof(err)),
		     0);
	cr_expect_eq(get32(zp + BP_RAMDISK_IMAGE), 0);
	cr_expect_eq(get32(zp + BP_RAMDISK_SIZE), 0);
}

Test(bzimage, zero_page_limits)
{
	struct bzimage bz;

	make_image(0x020f);
	cr_assert_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), 0);
	cr_expect_eq(bzimage_boot_params(img, &bz, 256ull << 20, 0x20000, 2048, 0, 0, zp, err,
					 sizeof(err)),
		     -E2BIG);
	cr_expect_str_eq(err,
			 "command line of 2048 bytes is longer than the kernel's limit of 2047");
	put32(img + BP_INITRD_ADDR_MAX, 0x37ffffff);
	cr_assert_eq(bzimage_parse(img, IMG_SIZE, &bz, err, sizeof(err)), 0);
	cr_expect_eq(bzimage_boot_params(img, &bz, 2ull << 30, 0x20000, 0, 0x37fff000, 0x2000, zp,
					 err, sizeof(err)),
		     -E2BIG);
	cr_expect_str_eq(
		err, "initrd at 0x37fff000..0x38000fff ends above the kernel's limit 0x37ffffff");
	cr_expect_eq(
		bzimage_boot_params(img, &bz, 16ull << 20, 0x20000, 0, 0, 0, zp, err, sizeof(err)),
		-ENOMEM);
	cr_expect_str_eq(err, "the kernel needs 24 MiB of RAM from 0x1000000 to decompress, more "
			      "than --mem gives: raise --mem");
}

/* ---- bzimage_load: the whole 64-bit boot protocol ---- */

#define MIB  (1ull << 20)
#define GIB  (1ull << 30)
#define HIGH (4 * GIB)

static uint8_t *low, *high;
static struct guest_range kvm_ranges[3], emu_ranges[3];
static uint8_t initrd[0x123456];

static void mem_setup(void)
{
	low = calloc(1, 64 * MIB);
	high = calloc(1, 64 * MIB);
	cr_assert(low && high);
	/* one RAM block from 0, as the KVM path has it */
	kvm_ranges[0] = (struct guest_range){ 0, 0x9fc00, low, E820_RAM };
	kvm_ranges[1] = (struct guest_range){ 0x9fc00, 0x60400, low + 0x9fc00, E820_RESERVED };
	kvm_ranges[2] = (struct guest_range){ MIB, 63 * MIB, low + MIB, E820_RAM };
	/* the emulator's: low RAM, the BIOS area, then RAM from 4 GiB */
	emu_ranges[0] = (struct guest_range){ 0, 0x9f000, low, E820_RAM };
	emu_ranges[1] = (struct guest_range){ 0x9f000, 0x61000, low + 0x9f000, E820_RESERVED };
	emu_ranges[2] = (struct guest_range){ HIGH, 64 * MIB, high, E820_RAM };
	for (size_t i = 0; i < sizeof(initrd); i++)
		initrd[i] = (uint8_t) (i * 7 + 3);
}

static void mem_teardown(void)
{
	free(low);
	free(high);
}

TestSuite(bzimage_load, .init = mem_setup, .fini = mem_teardown);

/* host memory behind guest-physical addr in the test's own layouts, or NULL */
static uint8_t *guest(const struct guest_range *ranges, uint64_t addr, uint64_t len)
{
	for (int i = 0; i < 3; i++)
		if (ranges[i].host && addr >= ranges[i].gpa &&
		    addr + len <= ranges[i].gpa + ranges[i].size)
			return ranges[i].host + (addr - ranges[i].gpa);
	return NULL;
}

/*
 * A 4-level walk (SDM Vol. 3A §4.5, Figures 4-8 and 4-9): PML4E bits
 * 47:39, PDPTE 38:30, PDE 29:21 with PS = 1 for a 2 MiB page. Returns
 * the physical address, or UINT64_MAX if not present or not writable.
 */
static uint64_t walk(const struct guest_range *ranges, uint64_t cr3, uint64_t va)
{
	uint64_t table = cr3 & ~0xfffull, e = 0;
	static const int shift[3] = { 39, 30, 21 };

	for (int level = 0; level < 3; level++) {
		uint8_t *p = guest(ranges, table + ((va >> shift[level]) & 511) * 8, 8);

		if (!p)
			return UINT64_MAX;
		e = get64(p);
		if ((e & 3) != 3)
			return UINT64_MAX;
		if (level < 2) {
			cr_assert_eq(e & 0x80, 0, "no large page above the PD here");
			table = e & 0x000ffffffffff000ull;
		}
	}
	cr_assert_eq(e & 0x80, 0x80, "2 MiB page");
	return (e & 0x000fffffffe00000ull) | (va & (2 * MIB - 1));
}

static void expect_mapped(const struct guest_range *ranges, uint64_t cr3, uint64_t addr,
			  const char *what)
{
	cr_expect_eq(walk(ranges, cr3, addr), addr, "%s at %#lx identity-mapped", what,
		     (unsigned long) addr);
}

/* Descriptor fields (SDM Vol. 3A §3.4.5, Figure 3-8) */
static void expect_segment(uint64_t d, bool code, const char *what)
{
	cr_expect_eq(d & 0xffff, 0xffff, "%s limit 15:0", what);
	cr_expect_eq(d >> 48 & 0xf, 0xf, "%s limit 19:16", what);
	cr_expect_eq((d >> 16 & 0xffffff) | (d >> 56) << 24, 0, "%s base 0", what);
	cr_expect_eq(d >> 40 & 0xf, code ? 0xb : 0x3, "%s type (accessed)", what);
	cr_expect_eq(d >> 44 & 1, 1, "%s S", what);
	cr_expect_eq(d >> 45 & 3, 0, "%s DPL 0", what);
	cr_expect_eq(d >> 47 & 1, 1, "%s P", what);
	cr_expect_eq(d >> 53 & 1, code ? 1 : 0, "%s L", what);
	cr_expect_eq(d >> 54 & 1, code ? 0 : 1, "%s D/B", what);
	cr_expect_eq(d >> 55 & 1, 1, "%s G", what);
}

static void expect_e820(const uint8_t *z, const struct guest_range *ranges, int n)
{
	cr_expect_eq(z[BP_E820_ENTRIES], n);
	for (int i = 0; i < n; i++) {
		const uint8_t *e = z + BP_E820_TABLE + i * BP_E820_ENTRY_SIZE;

		cr_expect_eq(get64(e), ranges[i].gpa, "e820[%d].addr", i);
		cr_expect_eq(get64(e + 8), ranges[i].size, "e820[%d].size", i);
		cr_expect_eq(get32(e + 16), ranges[i].type, "e820[%d].type", i);
	}
}

static const char cmdline[] = "console=ttyS0 nokaslr";

Test(bzimage_load, kvm_layout)
{
	struct bzimage_load_config cfg = {
		.ranges = kvm_ranges,
		.nr_ranges = 3,
		.image = img,
		.image_size = IMG_SIZE,
		.cmdline = cmdline,
		.initrd = initrd,
		.initrd_size = sizeof(initrd),
		.acpi_rsdp = 0xe0000,
	};
	struct bzimage_entry e;
	const uint8_t *z, *gdt;

	make_image(0x020f);
	cr_assert_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	/* placement: pref_address; boot data from 4 KiB; initrd at the top of RAM, page aligned */
	cr_expect_eq(e.kernel_addr, 0x1000000);
	cr_expect_eq(e.kernel_end, 0x1800000, "init_size 8 MiB");
	cr_expect_eq(e.rip, 0x1000200);
	cr_expect_eq(e.boot_data_addr, 0x1000);
	cr_expect_eq(e.rsi, 0x1000, "zero page first");
	cr_expect_eq(e.gdt_base, 0x2000);
	cr_expect_eq(e.cr3, 0x3000);
	cr_expect_eq(e.cmdline_addr, 0x1b000);
	cr_expect_eq(e.initrd_addr, (64 * MIB - sizeof(initrd)) & ~0xfffull);
	cr_expect_eq(e.initrd_addr, 0x3edc000);
	/* 64-bit entry state (boot.rst) */
	cr_expect_eq(e.cs, 0x10, "__BOOT_CS");
	cr_expect_eq(e.ds, 0x18, "__BOOT_DS");
	cr_expect_eq(e.gdt_limit, 31);
	cr_expect_eq(e.cr0 & 0x80000001u, 0x80000001u, "PG PE");
	cr_expect_eq(e.cr4 & 0x20, 0x20, "PAE");
	cr_expect_eq(e.efer & 0x500, 0x500, "LME LMA");
	gdt = guest(kvm_ranges, e.gdt_base, 32);
	cr_expect_eq(get64(gdt), 0);
	expect_segment(get64(gdt + 0x10), true, "__BOOT_CS");
	expect_segment(get64(gdt + 0x18), false, "__BOOT_DS");
	/* contents */
	cr_expect_eq(memcmp(guest(kvm_ranges, e.kernel_addr, KERNEL_SIZE),
			    img + (SETUP_SECTS + 1) * 512, KERNEL_SIZE),
		     0, "the protected-mode kernel");
	cr_expect_str_eq((const char *) guest(kvm_ranges, e.cmdline_addr, sizeof(cmdline)),
			 cmdline);
	cr_expect_eq(
		memcmp(guest(kvm_ranges, e.initrd_addr, sizeof(initrd)), initrd, sizeof(initrd)),
		0);
	/* zero page */
	z = guest(kvm_ranges, e.rsi, BP_SIZE);
	cr_expect_eq(memcmp(z + BP_HEADER, "HdrS", 4), 0);
	cr_expect_eq(z[BP_TYPE_OF_LOADER], 0xff);
	cr_expect_eq(z[BP_LOADFLAGS], LOADFLAG_LOADED_HIGH | LOADFLAG_CAN_USE_HEAP);
	cr_expect_eq(get32(z + BP_CMD_LINE_PTR), 0x1b000);
	cr_expect_eq(get32(z + BP_EXT_CMD_LINE_PTR), 0);
	cr_expect_eq(get32(z + BP_RAMDISK_IMAGE), 0x3edc000);
	cr_expect_eq(get32(z + BP_EXT_RAMDISK_IMAGE), 0);
	cr_expect_eq(get32(z + BP_RAMDISK_SIZE), sizeof(initrd));
	cr_expect_eq(get32(z + BP_EXT_RAMDISK_SIZE), 0);
	cr_expect_eq(get64(z + BP_ACPI_RSDP_ADDR), 0xe0000);
	expect_e820(z, kvm_ranges, 3);
	/* identity map: kernel span, zero page, command line, GDT, low memory, the LAPIC page */
	expect_mapped(kvm_ranges, e.cr3, e.kernel_addr, "kernel");
	expect_mapped(kvm_ranges, e.cr3, e.kernel_end - 1, "end of init_size");
	expect_mapped(kvm_ranges, e.cr3, e.rsi, "zero page");
	expect_mapped(kvm_ranges, e.cr3, e.cmdline_addr + sizeof(cmdline) - 1, "command line");
	expect_mapped(kvm_ranges, e.cr3, e.gdt_base, "GDT");
	expect_mapped(kvm_ranges, e.cr3, 0x40e, "BIOS data area");
	expect_mapped(kvm_ranges, e.cr3, 0xfee00000, "local APIC");
	expect_mapped(kvm_ranges, e.cr3, 4 * GIB - 1, "last byte below 4 GiB");
	cr_expect_eq(walk(kvm_ranges, e.cr3, 4 * GIB), UINT64_MAX, "nothing above 4 GiB");
}

/* The emulator's layout: no RAM between 636 KiB and 4 GiB */
Test(bzimage_load, emulator_layout_above_4g)
{
	struct bzimage_load_config cfg = {
		.ranges = emu_ranges,
		.nr_ranges = 3,
		.image = img,
		.image_size = IMG_SIZE,
		.cmdline = cmdline,
		.initrd = initrd,
		.initrd_size = sizeof(initrd),
	};
	struct bzimage_entry e;
	const uint8_t *z;

	make_image(0x020f);
	put16(img + BP_XLOADFLAGS, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
	cr_assert_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(e.kernel_addr, HIGH, "first 2 MiB-aligned RAM at or above 16 MiB");
	cr_expect_eq(e.rip, HIGH + 0x200);
	cr_expect_eq(e.boot_data_addr, 0x1000, "low RAM");
	cr_expect_eq(e.initrd_addr, (HIGH + 64 * MIB - sizeof(initrd)) & ~0xfffull,
		     "nothing under initrd_addr_max: the top of RAM above 4 GiB");
	z = guest(emu_ranges, e.rsi, BP_SIZE);
	cr_expect_eq(get32(z + BP_RAMDISK_IMAGE), (uint32_t) e.initrd_addr);
	cr_expect_eq(get32(z + BP_EXT_RAMDISK_IMAGE), 1, "bits 63:32 of the initrd address");
	cr_expect_eq(get64(z + BP_ACPI_RSDP_ADDR), 0);
	expect_e820(z, emu_ranges, 3);
	cr_expect_eq(memcmp(guest(emu_ranges, HIGH, KERNEL_SIZE), img + (SETUP_SECTS + 1) * 512,
			    KERNEL_SIZE),
		     0);
	expect_mapped(emu_ranges, e.cr3, HIGH, "kernel above 4 GiB");
	expect_mapped(emu_ranges, e.cr3, e.kernel_end - 1, "end of init_size");
	expect_mapped(emu_ranges, e.cr3, e.rsi, "zero page");
	expect_mapped(emu_ranges, e.cr3, e.cmdline_addr, "command line");
	cr_expect_eq(walk(emu_ranges, e.cr3, HIGH + GIB), UINT64_MAX, "only the GiB it needs");

	/* command line and boot data above 4 GiB: ext_cmd_line_ptr */
	cfg.boot_data_addr = HIGH + 32 * MIB;
	cr_assert_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	z = guest(emu_ranges, e.rsi, BP_SIZE);
	cr_expect_eq(e.rsi, HIGH + 32 * MIB);
	cr_expect_eq(get32(z + BP_CMD_LINE_PTR), (uint32_t) (32 * MIB + 0x1a000));
	cr_expect_eq(get32(z + BP_EXT_CMD_LINE_PTR), 1);
	cr_expect_str_eq((const char *) guest(emu_ranges, e.cmdline_addr, sizeof(cmdline)),
			 cmdline);
}

Test(bzimage_load, caller_placement)
{
	struct bzimage_load_config cfg = {
		.ranges = kvm_ranges,
		.nr_ranges = 3,
		.image = img,
		.image_size = IMG_SIZE,
		.kernel_addr = 0x2000000,
		.initrd = initrd,
		.initrd_size = sizeof(initrd),
		.initrd_addr = 0x1000000,
		.boot_data_addr = 0x20000,
	};
	struct bzimage_entry e;
	const uint8_t *z;

	make_image(0x020f);
	cr_assert_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(e.kernel_addr, 0x2000000);
	cr_expect_eq(e.initrd_addr, 0x1000000);
	cr_expect_eq(e.rsi, 0x20000);
	z = guest(kvm_ranges, e.rsi, BP_SIZE);
	cr_expect_eq(get32(z + BP_CODE32_START), 0x2000000);
	cr_expect_eq(get32(z + BP_CMD_LINE_PTR), 0x20000 + 0x1a000);
	cr_expect_eq(*guest(kvm_ranges, e.cmdline_addr, 1), 0, "empty command line");
	/* the loader's own choices go around the caller's */
	cfg.kernel_addr = 0;
	cfg.boot_data_addr = 0;
	cfg.initrd_addr = 0x1000000;
	cr_assert_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(e.kernel_addr, 0x1200000, "the next 2 MiB boundary past the initrd");
	cfg.initrd_addr = 0;
	cfg.boot_data_addr = 0x1000000;
	cr_assert_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(e.kernel_addr, 0x1200000, "and past the boot data");
	cr_expect_eq(e.initrd_addr, 0x3edc000);
}

Test(bzimage_load, refusals)
{
	struct bzimage_load_config cfg = {
		.ranges = kvm_ranges,
		.nr_ranges = 3,
		.image = img,
		.image_size = IMG_SIZE,
	};
	struct guest_range bad[2];
	struct bzimage_entry e = { .rip = 0x1234 };
	static char longline[2049];

	make_image(0x020f);
	cfg.kernel_addr = 0x1100000;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "kernel address 0x1100000 must be aligned to 0x200000 and at or "
			      "above the kernel's pref_address 0x1000000");
	cfg.kernel_addr = 0x800000;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL, "below pref_address");
	cfg.kernel_addr = 0x3a00000; /* 58 MiB + 8 MiB > 64 MiB */
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -ENOMEM);
	cr_expect_str_eq(err, "the kernel needs 8 MiB of RAM from 0x3a00000 below 4 GiB, and "
			      "the guest memory has no such range: give it more memory");
	img[BP_RELOCATABLE] = 0;
	cfg.kernel_addr = 0x2000000;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "the kernel is not relocatable: it loads at 0x100000, not 0x2000000");
	cfg.kernel_addr = 0;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(e.kernel_addr, 0x100000, "not relocatable: 1 MiB");
	make_image(0x020f);
	/* only RAM above 4 GiB, and a kernel without XLF_CAN_BE_LOADED_ABOVE_4G */
	cfg.ranges = emu_ranges;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -ENOMEM);
	cr_expect_str_eq(err, "no RAM range holds the kernel's 8 MiB at or above 0x1000000 and "
			      "below 4 GiB: give the guest more memory");
	cfg.ranges = kvm_ranges;
	memset(longline, 'x', 2048);
	cfg.cmdline = longline;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -E2BIG);
	cr_expect_str_eq(err,
			 "command line of 2048 bytes is longer than the kernel's limit of 2047");
	cfg.cmdline = NULL;
	put32(img + BP_INITRD_ADDR_MAX, 0x37ffffff);
	cfg.initrd = initrd;
	cfg.initrd_size = sizeof(initrd);
	cfg.initrd_addr = 0x37fff000;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "initrd at 0x37fff000 (1193046 bytes) is not in guest RAM");
	cfg.initrd_addr = 0x1000000;
	cfg.kernel_addr = 0x1000000;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "kernel 0x1000000+0x800000, boot data 0x1000+0x1b000 and initrd "
			      "0x1000000+0x123456 overlap");
	cfg.initrd_addr = 0;
	cfg.kernel_addr = 0;
	cfg.initrd_size = 80 * MIB;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -ENOMEM);
	cr_expect_str_eq(err, "the initrd (83886080 bytes) fits in no RAM range below "
			      "initrd_addr_max beside the kernel: give the guest more memory");
	cfg.initrd_size = 0;
	/* ranges out of order */
	bad[0] = kvm_ranges[2];
	bad[1] = kvm_ranges[0];
	cfg.ranges = bad;
	cfg.nr_ranges = 2;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "guest memory range 1 at 0 overlaps or precedes range 0: list them "
			      "in ascending order");
	cfg.nr_ranges = 0;
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "0 guest memory ranges: the e820 map holds 1 to 128");
	cr_expect_eq(e.rip, 0x100200, "untouched on failure (from the last success)");
	/* nothing was written by the failures: only the one success's kernel at 1 MiB */
	for (uint64_t a = 0x1000000; a < 0x1000000 + KERNEL_SIZE; a += 512)
		cr_expect_eq(low[a], 0, "no kernel copied at %#lx", (unsigned long) a);
}

/* ---- the kernel inflated by the VMM (bzimage_unpack in bzimage.c) ---- */

#define BP_PAYLOAD_OFFSET 0x248
#define BP_PAYLOAD_LENGTH 0x24c
#define SEG0		  0x1000000ull /* the kernel's pref_address */
#define SEG1		  0x1200000ull
#define ENTRY		  (SEG0 + 0x40)

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t) v);
	put32(p + 4, (uint32_t) (v >> 32));
}

/*
 * A vmlinux as the ELF64 spec lays it out (System V gABI, x86-64 psABI):
 * the header, two PT_LOAD program headers, then segment 0 (0x100 bytes of
 * code at SEG0) and segment 1 (0x10 bytes of data at SEG1 and 0x1ff0 bytes
 * of BSS). `seg1` moves the second segment.
 */
static size_t make_vmlinux(uint8_t *elf, uint64_t seg1)
{
	size_t off0 = 64 + 2 * 56, off1 = off0 + 0x100;

	memset(elf, 0, off1 + 0x10);
	memcpy(elf, "\177ELF", 4);
	elf[4] = 2;		/* ELFCLASS64 */
	elf[5] = 1;		/* little endian */
	elf[6] = 1;		/* EV_CURRENT */
	put16(elf + 16, 2);	/* ET_EXEC */
	put16(elf + 18, 62);	/* EM_X86_64 */
	put64(elf + 24, ENTRY); /* e_entry */
	put64(elf + 32, 64);	/* e_phoff */
	put16(elf + 52, 64);	/* e_ehsize */
	put16(elf + 54, 56);	/* e_phentsize */
	put16(elf + 56, 2);	/* e_phnum */
	for (int i = 0; i < 2; i++) {
		uint8_t *ph = elf + 64 + 56 * i;

		put32(ph, 1); /* PT_LOAD */
		put64(ph + 8, i ? off1 : off0);
		put64(ph + 16, 0xffffffff81000000ull + (i ? seg1 - SEG0 : 0));
		put64(ph + 24, i ? seg1 : SEG0);
		put64(ph + 32, i ? 0x10 : 0x100);
		put64(ph + 40, i ? 0x2000 : 0x100);
	}
	for (int i = 0; i < 0x100; i++)
		elf[off0 + i] = (uint8_t) (0x40 + i);
	for (int i = 0; i < 0x10; i++)
		elf[off1 + i] = (uint8_t) (0xd0 + i);
	return off1 + 0x10;
}

/* make_image with `payload` (len bytes) as the protected-mode kernel's payload at offset 0x100 */
static void image_with_payload(const uint8_t *payload, size_t len)
{
	make_image(0x020f);
	cr_assert_leq(len, KERNEL_SIZE - 0x100);
	memcpy(img + (SETUP_SECTS + 1) * 512 + 0x100, payload, len);
	put32(img + BP_PAYLOAD_OFFSET, 0x100);
	put32(img + BP_PAYLOAD_LENGTH, (uint32_t) len);
}

#ifdef HAVE_LZMA
#include <lzma.h>

static size_t xz(const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
	size_t pos = 0;

	cr_assert_eq(lzma_easy_buffer_encode(0, LZMA_CHECK_CRC32, NULL, in, len, out, &pos, cap),
		     LZMA_OK);
	return pos;
}

Test(bzimage_load, unpacked)
{
	struct bzimage_load_config cfg = { .ranges = kvm_ranges,
					   .nr_ranges = 3,
					   .image = img,
					   .image_size = IMG_SIZE,
					   .cmdline = cmdline,
					   .unpack = true };
	static uint8_t elf[4096], packed[8192];
	size_t n = xz(elf, make_vmlinux(elf, SEG1), packed, sizeof(packed));
	struct bzimage_entry e;
	const uint8_t *g;

	image_with_payload(packed, n);
	memset(low + SEG0, 0xaa, 8 * MIB); /* what was in RAM before: the BSS must be cleared */
	cr_assert_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	cr_expect(e.unpacked, "the VMM inflated it");
	cr_expect_str_eq(e.unpack_note, "");
	cr_expect_eq(e.rip, ENTRY, "entered at vmlinux's entry point, not load address + 200H");
	cr_expect_eq(e.kernel_addr, SEG0);
	g = low + SEG0;
	for (int i = 0; i < 0x100; i++)
		cr_assert_eq(g[i], (uint8_t) (0x40 + i), "segment 0 byte %d", i);
	g = low + SEG1;
	for (int i = 0; i < 0x10; i++)
		cr_assert_eq(g[i], (uint8_t) (0xd0 + i), "segment 1 byte %d", i);
	for (int i = 0x10; i < 0x2000; i++)
		cr_assert_eq(g[i], 0, "BSS byte %#x cleared", i);
	cr_expect_eq(low[SEG0 + 0x100], 0xaa, "nothing written past segment 0");
	cr_expect_eq(walk(kvm_ranges, e.cr3, ENTRY), ENTRY, "the entry identity-mapped");
}

Test(bzimage_load, unpack_refusals)
{
	struct bzimage_load_config cfg = { .ranges = kvm_ranges,
					   .nr_ranges = 3,
					   .image = img,
					   .image_size = IMG_SIZE,
					   .unpack = true };
	static uint8_t elf[4096], packed[8192];
	struct bzimage_entry e;
	size_t n;

	/* a damaged stream: one line, nothing loaded */
	n = xz(elf, make_vmlinux(elf, SEG1), packed, sizeof(packed));
	packed[n / 2] ^= 0x55;
	image_with_payload(packed, n);
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "the kernel's XZ payload is damaged") == err, "%s", err);
	/* a segment past init_size (8 MiB from SEG0) */
	n = xz(elf, make_vmlinux(elf, SEG0 + 8 * MIB), packed, sizeof(packed));
	image_with_payload(packed, n);
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -ENOEXEC);
	cr_expect(strstr(err, "vmlinux: segment 1 (physical 0x1800000") == err, "%s", err);
	/* not an ELF inside */
	memset(elf, 0x90, 256);
	n = xz(elf, 256, packed, sizeof(packed));
	image_with_payload(packed, n);
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -ENOEXEC);
	cr_expect_str_eq(err, "the bzImage's payload is not an x86-64 ELF executable (vmlinux)");
	/* a payload outside the kernel */
	image_with_payload(packed, n);
	put32(img + BP_PAYLOAD_LENGTH, KERNEL_SIZE);
	cr_expect_eq(bzimage_load(&cfg, &e, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "bzImage payload 0x100+0x10000 lies outside") == err, "%s", err);
}
#endif

/* A payload that is not XZ (gzip here): the guest's own decompressor runs, as before. */
Test(bzimage_load, not_xz_left_to_the_guest)
{
	struct bzimage_load_config cfg = { .ranges = kvm_ranges,
					   .nr_ranges = 3,
					   .image = img,
					   .image_size = IMG_SIZE,
					   .unpack = true };
	static const uint8_t gz[16] = { 0x1f, 0x8b, 8, 0 };
	struct bzimage_entry e;

	image_with_payload(gz, sizeof(gz));
	cr_assert_eq(bzimage_load(&cfg, &e, err, sizeof(err)), 0, "%s", err);
	cr_expect(!e.unpacked);
	cr_expect_eq(e.rip, 0x1000200, "the decompressor's 64-bit entry");
	cr_expect(strstr(e.unpack_note, "not XZ-compressed (first bytes 1f 8b 08 00)"), "%s",
		  e.unpack_note);
	cr_expect_eq(low[SEG0 + 0x100], 0x1f, "the compressed kernel copied as it is");
}
