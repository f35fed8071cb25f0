/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bzimage.h"

#define MIB	     (1ull << 20)
#define LOW_RAM_END  0x9fc00ull	  /* 639 KiB: the EBDA and legacy ROMs lie above */
#define BOOT_MAP_END (4ull << 30) /* the 64-bit entry's identity map (kvm.c) */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t) (p[0] | p[1] << 8);
}
static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t) rd16(p) | (uint32_t) rd16(p + 2) << 16;
}
static uint64_t rd64(const uint8_t *p)
{
	return rd32(p) | (uint64_t) rd32(p + 4) << 32;
}
static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
}
static void wr32(uint8_t *p, uint32_t v)
{
	wr16(p, (uint16_t) v);
	wr16(p + 2, (uint16_t) (v >> 16));
}
static void wr64(uint8_t *p, uint64_t v)
{
	wr32(p, (uint32_t) v);
	wr32(p + 4, (uint32_t) (v >> 32));
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

int bzimage_parse(const uint8_t *img, size_t size, struct bzimage *ret, char *err, size_t errlen)
{
	struct bzimage bz = { 0 };
	uint64_t span;

	if (size < BP_INIT_SIZE + 4)
		return fail(err, errlen, -EINVAL,
			    "truncated bzImage: %zu bytes, the setup header alone needs %d", size,
			    BP_INIT_SIZE + 4);
	if (memcmp(img + BP_HEADER, "HdrS", 4) || rd16(img + BP_BOOT_FLAG) != 0xaa55)
		return fail(
			err, errlen, -ENOEXEC,
			"not a bzImage: no \"HdrS\" setup header at 0x202 or no 0xAA55 boot flag");
	bz.version = rd16(img + BP_VERSION);
	if (bz.version < 0x0206)
		return fail(
			err, errlen, -ENOEXEC,
			"bzImage boot protocol %u.%02u is older than 2.06, which this loader needs",
			bz.version >> 8, bz.version & 0xff);
	if (!(img[BP_LOADFLAGS] & LOADFLAG_LOADED_HIGH))
		return fail(err, errlen, -ENOEXEC,
			    "a zImage (loaded low), not a bzImage: rebuild the kernel as bzImage");
	if (bz.version < 0x020c || !(rd16(img + BP_XLOADFLAGS) & XLF_KERNEL_64))
		return fail(err, errlen, -ENOEXEC,
			    "the kernel has no 64-bit entry point (XLF_KERNEL_64): build it for "
			    "x86-64");
	bz.setup_sects = img[BP_SETUP_SECTS] ? img[BP_SETUP_SECTS] : 4;
	bz.kernel_offset = (uint64_t) (bz.setup_sects + 1) * 512;
	if (bz.kernel_offset >= size)
		return fail(err, errlen, -EINVAL,
			    "truncated bzImage: %u setup sectors end at %" PRIu64
			    " bytes, past the file's %zu",
			    bz.setup_sects, bz.kernel_offset, size);
	bz.kernel_size = size - bz.kernel_offset;
	bz.header_end = BP_HDR_JUMP + 2 + img[BP_HDR_JUMP + 1]; /* jmp rel8 over the header */
	if (bz.header_end > BP_SIZE || bz.header_end < BP_INIT_SIZE + 4)
		return fail(err, errlen, -EINVAL,
			    "bzImage setup header ends at %#" PRIx64 ", outside the zero page",
			    bz.header_end);
	bz.init_size = rd32(img + BP_INIT_SIZE);
	bz.initrd_addr_max = rd32(img + BP_INITRD_ADDR_MAX);
	bz.cmdline_size = rd32(img + BP_CMDLINE_SIZE);
	bz.load_addr = img[BP_RELOCATABLE] && rd64(img + BP_PREF_ADDRESS)
			       ? rd64(img + BP_PREF_ADDRESS)
			       : MIB;
	/*
	 * The loader's own boot data (zero page, command line, page tables)
	 * lies below 1 MiB and its identity map ends at 4 GiB: the kernel and
	 * the room it decompresses in must lie between. Checked here, so that
	 * no sum below can wrap around.
	 */
	span = bz.init_size > bz.kernel_size ? bz.init_size : bz.kernel_size;
	if (bz.load_addr < MIB || bz.load_addr > BOOT_MAP_END || span > BOOT_MAP_END - bz.load_addr)
		return fail(
			err, errlen, -EINVAL,
			"bzImage pref_address %#" PRIx64 " with %" PRIu64 " MiB to decompress in "
			"does not fit between 1 MiB and 4 GiB, where this loader puts the kernel",
			bz.load_addr, (span + MIB - 1) / MIB);
	bz.entry64 = bz.load_addr + 0x200;
	*ret = bz;
	return 0;
}

static void e820_add(uint8_t *zp, uint64_t addr, uint64_t size, uint32_t type)
{
	uint8_t n = zp[BP_E820_ENTRIES];
	uint8_t *e = zp + BP_E820_TABLE + n * BP_E820_ENTRY_SIZE;

	wr64(e, addr);
	wr64(e + 8, size);
	wr32(e + 16, type);
	zp[BP_E820_ENTRIES] = (uint8_t) (n + 1);
}

int bzimage_boot_params(const uint8_t *img, const struct bzimage *bz, uint64_t ram_size,
			uint32_t cmdline_addr, size_t cmdline_len, uint32_t initrd_addr,
			uint32_t initrd_size, uint8_t zero_page[BP_SIZE], char *err, size_t errlen)
{
	uint64_t need =
		bz->load_addr + (bz->init_size > bz->kernel_size ? bz->init_size : bz->kernel_size);

	if (cmdline_len > bz->cmdline_size)
		return fail(err, errlen, -E2BIG,
			    "command line of %zu bytes is longer than the kernel's limit of %u",
			    cmdline_len, bz->cmdline_size);
	if (initrd_size && (uint64_t) initrd_addr + initrd_size - 1 > bz->initrd_addr_max)
		return fail(err, errlen, -E2BIG,
			    "initrd at %#x..%#" PRIx64 " ends above the kernel's limit %#x",
			    initrd_addr, (uint64_t) initrd_addr + initrd_size - 1,
			    bz->initrd_addr_max);
	if (ram_size <= 2 * MIB || need > ram_size)
		return fail(err, errlen, -ENOMEM,
			    "the kernel needs %" PRIu64 " MiB of RAM from %#" PRIx64
			    " to decompress, more than --mem gives: raise --mem",
			    (need + MIB - 1) / MIB, bz->load_addr);
	memset(zero_page, 0, BP_SIZE);
	memcpy(zero_page + BP_SETUP_SECTS, img + BP_SETUP_SECTS, bz->header_end - BP_SETUP_SECTS);
	zero_page[BP_TYPE_OF_LOADER] = 0xff;
	zero_page[BP_LOADFLAGS] |= LOADFLAG_CAN_USE_HEAP;
	wr16(zero_page + BP_HEAP_END_PTR, 0xfe00); /* end of the real-mode heap, as 2.01+ wants */
	wr32(zero_page + BP_CMD_LINE_PTR, cmdline_addr);
	wr32(zero_page + BP_RAMDISK_IMAGE, initrd_size ? initrd_addr : 0);
	wr32(zero_page + BP_RAMDISK_SIZE, initrd_size);
	wr32(zero_page + BP_CODE32_START, (uint32_t) bz->load_addr);
	e820_add(zero_page, 0, LOW_RAM_END, E820_RAM);
	e820_add(zero_page, LOW_RAM_END, MIB - LOW_RAM_END, E820_RESERVED);
	e820_add(zero_page, MIB, ram_size - MIB, E820_RAM);
	return 0;
}
