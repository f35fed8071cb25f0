/* SPDX-License-Identifier: MIT */
/*
 * bzImage parsing and the zero page, on images built here field by field
 * (x86 boot protocol, Documentation/arch/x86/boot.rst): good ones at
 * protocol 2.12 and 2.15, and one bad image per check.
 */
#include <criterion/criterion.h>
#include <errno.h>
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
