/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a Linux bzImage for bzimage_parse and
 * bzimage_boot_params, what vpmu-vmm --accel kvm does with a kernel file
 * the user names. Odd first byte: the rest of the input is the image, as
 * it comes. Even: the rest is XORed over the setup header of a valid
 * 64-bit bzImage (from 0x1f0) and what is left sizes its kernel, so that
 * runs get past the magic numbers to the fields that matter. The last
 * byte picks the RAM size, the command line length and the initrd.
 * Besides the sanitizers it checks the contract: only the documented
 * errors, each one line in err; on success a kernel between 1 MiB and
 * 4 GiB that fits the file, and a zero page that fits RAM (the loader
 * copies kernel_size bytes to load_addr once bzimage_boot_params has said
 * yes) with nothing written past its 4 KiB.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bzimage.h"
#include "fuzz.h"

#define MIB    (1ull << 20)
#define CANARY 0x5a

static const uint64_t ram_sizes[8] = {
	0, 2 * MIB, 2 * MIB + 1, 16 * MIB, 64 * MIB, 1ull << 30, 4ull << 30, 64ull << 30,
};

static void check_err(const char *err, size_t errlen)
{
	size_t n = strnlen(err, errlen);

	CHECK(n > 0 && n < errlen);
	CHECK(!memchr(err, '\n', n));
}

#define HDR_START   0x1f0
#define HDR_LEN	    0x80
#define SETUP_SECTS 3
#define IMG_MAX	    (((SETUP_SECTS + 1) * 512) + 8192)

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

/* A good 64-bit bzImage (protocol 2.15, relocatable to 16 MiB), the input XORed over its header. */
static size_t from_template(const uint8_t *in, size_t n, uint8_t *img)
{
	size_t kernel = n > HDR_LEN ? n - HDR_LEN : 1;

	if (kernel > IMG_MAX - (SETUP_SECTS + 1) * 512)
		kernel = IMG_MAX - (SETUP_SECTS + 1) * 512;
	memset(img, 0, IMG_MAX);
	img[BP_SETUP_SECTS] = SETUP_SECTS;
	put16(img + BP_BOOT_FLAG, 0xaa55);
	img[BP_HDR_JUMP] = 0xeb;
	img[BP_HDR_JUMP + 1] = 0x6a;
	memcpy(img + BP_HEADER, "HdrS", 4);
	put16(img + BP_VERSION, 0x020f);
	img[BP_LOADFLAGS] = LOADFLAG_LOADED_HIGH;
	put32(img + BP_INITRD_ADDR_MAX, 0x7fffffff);
	img[BP_RELOCATABLE] = 1;
	put16(img + BP_XLOADFLAGS, XLF_KERNEL_64);
	put32(img + BP_CMDLINE_SIZE, 2047);
	put32(img + BP_PREF_ADDRESS, 0x1000000);
	put32(img + BP_INIT_SIZE, 0x800000);
	for (size_t i = 0; i < n && i < HDR_LEN; i++)
		img[HDR_START + i] ^= in[i];
	return (SETUP_SECTS + 1) * 512 + kernel;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t zp[BP_SIZE + 64];
	static uint8_t img[IMG_MAX];
	struct bzimage bz;
	char err[160];
	uint8_t knob;
	uint64_t ram, span;
	size_t cmdline_len;
	uint32_t initrd_addr, initrd_size;
	int r;

	if (size < 2)
		return 0;
	knob = data[size - 1];
	if (data[0] & 1) {
		data++;
		size--;
	} else {
		size = from_template(data + 1, size - 1, img);
		data = img;
	}
	err[0] = 0;
	r = bzimage_parse(data, size, &bz, err, sizeof(err));
	CHECK(r == 0 || r == -EINVAL || r == -ENOEXEC);
	if (r < 0) {
		check_err(err, sizeof(err));
		return 0;
	}
	span = bz.init_size > bz.kernel_size ? bz.init_size : bz.kernel_size;
	CHECK(bz.kernel_offset + bz.kernel_size == size && bz.kernel_size > 0);
	CHECK(bz.load_addr >= MIB && bz.load_addr + span <= 4ull << 30);
	CHECK(bz.entry64 == bz.load_addr + 0x200);
	CHECK(bz.header_end > BP_SETUP_SECTS && bz.header_end <= BP_SIZE && bz.header_end <= size);

	ram = ram_sizes[knob & 7];
	cmdline_len = (size_t) (knob >> 3 & 3) * 1500;
	initrd_size = knob & 0x20 ? (uint32_t) size * 4096 : 0;
	initrd_addr = knob & 0x40 ? 0x7fff0000u : 0x10000000u;
	memset(zp, CANARY, sizeof(zp));
	err[0] = 0;
	r = bzimage_boot_params(data, &bz, ram, 0x20000, cmdline_len, initrd_addr, initrd_size, zp,
				err, sizeof(err));
	CHECK(r == 0 || r == -E2BIG || r == -ENOMEM);
	for (size_t i = BP_SIZE; i < sizeof(zp); i++)
		CHECK(zp[i] == CANARY);
	if (r < 0) {
		check_err(err, sizeof(err));
		return 0;
	}
	/* what the loader then copies lands in RAM */
	CHECK(bz.load_addr + span <= ram);
	CHECK(cmdline_len <= bz.cmdline_size);
	CHECK(!initrd_size || (uint64_t) initrd_addr + initrd_size - 1 <= bz.initrd_addr_max);
	CHECK(zp[BP_TYPE_OF_LOADER] == 0xff && zp[BP_E820_ENTRIES] == 3);
	CHECK(memcmp(zp + BP_HEADER, "HdrS", 4) == 0);
	return 0;
}
