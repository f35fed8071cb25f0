/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a Linux bzImage for bzimage_parse and
 * bzimage_boot_params (bzimage_load, below, is what vpmu-vmm does) with a file
 * the user names. Odd first byte: the rest of the input is the image, as
 * it comes. Even: the rest is XORed over the setup header of a valid
 * 64-bit bzImage (from 0x1f0) and what is left sizes its kernel, so that
 * runs get past the magic numbers to the fields that matter. The last
 * byte picks the RAM size, the command line length and the initrd.
 * Besides the sanitizers it checks the contract: only the documented
 * errors, each one line in err; on success a kernel between 1 MiB and
 * 4 GiB that fits the file, and a zero page that fits RAM (the loader
 * copies kernel_size bytes to load_addr once bzimage_boot_params has said
 * yes) with nothing written past its 4 KiB. Then the whole 64-bit load,
 * bzimage_load, into one of four guest memory layouts (the KVM path's,
 * the emulator's with RAM only above 4 GiB, 2 MiB of RAM, a RAM range
 * with no host memory behind it) with placements the input picks: on
 * success the kernel, boot data and initrd lie in backed RAM, apart, and
 * below 4 GiB unless the kernel may be loaded above, and the zero page's
 * e820 is the layout.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
	put32(img + BP_KERNEL_ALIGNMENT, 0x200000);
	img[BP_RELOCATABLE] = 1;
	put16(img + BP_XLOADFLAGS, XLF_KERNEL_64);
	put32(img + BP_CMDLINE_SIZE, 2047);
	put32(img + BP_PREF_ADDRESS, 0x1000000);
	put32(img + BP_INIT_SIZE, 0x800000);
	for (size_t i = 0; i < n && i < HDR_LEN; i++)
		img[HDR_START + i] ^= in[i];
	return (SETUP_SECTS + 1) * 512 + kernel;
}

#define GIB	(1ull << 30)
#define LOW_LEN (64 * MIB)

static uint8_t *low_mem, *high_mem;
static uint8_t initrd_buf[256 * 1024];

static void map_guest(void)
{
	if (low_mem)
		return;
	/* untouched pages cost nothing: the loader writes a few of them */
	low_mem = mmap(NULL, LOW_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	high_mem = mmap(NULL, LOW_LEN, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(low_mem != MAP_FAILED && high_mem != MAP_FAILED);
}

static unsigned int layout(unsigned int which, struct guest_range *r)
{
	switch (which & 3) {
	case 0: /* the KVM path's */
		r[0] = (struct guest_range){ 0, 0x9fc00, low_mem, E820_RAM };
		r[1] = (struct guest_range){ 0x9fc00, 0x60400, low_mem + 0x9fc00, E820_RESERVED };
		r[2] = (struct guest_range){ MIB, LOW_LEN - MIB, low_mem + MIB, E820_RAM };
		return 3;
	case 1: /* the emulator's: RAM only above 4 GiB past the low 636 KiB */
		r[0] = (struct guest_range){ 0, 0x9f000, low_mem, E820_RAM };
		r[1] = (struct guest_range){ 0x9f000, 0x61000, low_mem + 0x9f000, E820_RESERVED };
		r[2] = (struct guest_range){ 4 * GIB, LOW_LEN, high_mem, E820_RAM };
		return 3;
	case 2:
		r[0] = (struct guest_range){ 0, 2 * MIB, low_mem, E820_RAM };
		return 1;
	default: /* RAM the loader must not write: no host memory */
		r[0] = (struct guest_range){ 0, 0x9f000, low_mem, E820_RAM };
		r[1] = (struct guest_range){ MIB, LOW_LEN - MIB, NULL, E820_RAM };
		return 2;
	}
}

static bool in_backed_ram(const struct guest_range *r, unsigned int n, uint64_t a, uint64_t len)
{
	for (unsigned int i = 0; i < n; i++)
		if (r[i].host && r[i].type == E820_RAM && a >= r[i].gpa && len <= r[i].size &&
		    a - r[i].gpa <= r[i].size - len)
			return true;
	return false;
}

static bool apart(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return !alen || !blen || a + alen <= b || b + blen <= a;
}

static void check_load(const uint8_t *data, size_t size, uint8_t knob, uint8_t knob2)
{
	static const uint64_t kernel_at[4] = { 0, 0x1000000, 0x1200000, 4 * GIB };
	static const uint64_t initrd_at[4] = { 0, 0x2000000, 4 * GIB + 0x2000000, 0x10000 };
	static const uint64_t bd_at[4] = { 0, 0x20000, 4 * GIB + 0x3000000, 0x9e000 };
	static const char cmd[] = "console=ttyS0 nokaslr";
	struct guest_range r[3];
	struct bzimage_load_config cfg = { 0 };
	struct bzimage_entry e;
	char err[200];
	const uint8_t *zp;
	unsigned int n;
	int ret;

	map_guest();
	n = layout(knob, r);
	cfg.ranges = r;
	cfg.nr_ranges = n;
	cfg.image = data;
	cfg.image_size = size;
	cfg.cmdline = knob2 & 0x80 ? NULL : cmd;
	cfg.initrd = initrd_buf;
	cfg.initrd_size = knob2 & 0x40 ? (size_t) size * 16 % sizeof(initrd_buf) : 0;
	cfg.kernel_addr = kernel_at[knob2 & 3];
	cfg.initrd_addr = initrd_at[(knob2 >> 2) & 3];
	cfg.boot_data_addr = bd_at[(knob2 >> 4) & 3];
	cfg.acpi_rsdp = 0xe0000;
	cfg.unpack = knob & 0x80; /* the payload inflated here: its offset, length, XZ and ELF */
	err[0] = 0;
	ret = bzimage_load(&cfg, &e, err, sizeof(err));
	CHECK(ret == 0 || ret == -EINVAL || ret == -ENOEXEC || ret == -E2BIG || ret == -ENOMEM);
	if (ret < 0) {
		check_err(err, sizeof(err));
		return;
	}
	CHECK(e.unpacked ? cfg.unpack && e.rip >= e.kernel_addr && e.rip < e.kernel_end
			 : e.rip == e.kernel_addr + 0x200);
	CHECK(e.kernel_end > e.kernel_addr);
	CHECK(in_backed_ram(r, n, e.kernel_addr, e.kernel_end - e.kernel_addr));
	CHECK(!cfg.initrd_size || in_backed_ram(r, n, e.initrd_addr, cfg.initrd_size));
	CHECK(apart(e.kernel_addr, e.kernel_end - e.kernel_addr, e.boot_data_addr,
		    e.boot_data_size));
	CHECK(apart(e.kernel_addr, e.kernel_end - e.kernel_addr, e.initrd_addr, cfg.initrd_size));
	CHECK(apart(e.boot_data_addr, e.boot_data_size, e.initrd_addr, cfg.initrd_size));
	if (!(e.bz.xloadflags & XLF_CAN_BE_LOADED_ABOVE_4G))
		CHECK(e.kernel_end <= 4 * GIB && e.boot_data_addr + e.boot_data_size <= 4 * GIB &&
		      e.initrd_addr + cfg.initrd_size <= (uint64_t) e.bz.initrd_addr_max + 1);
	CHECK(e.rsi >= e.boot_data_addr && e.cr3 > e.rsi &&
	      e.cr3 < e.boot_data_addr + e.boot_data_size);
	zp = e.rsi < 4 * GIB ? low_mem + e.rsi : high_mem + (e.rsi - 4 * GIB);
	CHECK(zp[BP_E820_ENTRIES] == n && zp[BP_TYPE_OF_LOADER] == 0xff);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t zp[BP_SIZE + 64];
	static uint8_t img[IMG_MAX];
	struct bzimage bz;
	char err[160];
	uint8_t knob, knob2;
	uint64_t ram, span;
	size_t cmdline_len;
	uint32_t initrd_addr, initrd_size;
	int r;

	if (size < 2)
		return 0;
	knob = data[size - 1];
	knob2 = data[size - 2];
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
	check_load(data, size, knob, knob2);
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
