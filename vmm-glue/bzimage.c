/* SPDX-License-Identifier: MIT */
/*
 * The x86 Linux boot protocol (Documentation/arch/x86/boot.rst, "64-bit
 * Boot Protocol"; the zero page per zero-page.rst), one implementation
 * for every vCPU backend.
 *
 * bzimage_load lays guest memory out like this:
 * - the protected-mode kernel (the image past its setup sectors) at the
 *   load address: a non-relocatable kernel at 1 MiB; a relocatable one
 *   where the caller asks or at the lowest address at or above
 *   pref_address, aligned to kernel_alignment, where init_size bytes of
 *   RAM follow. Not below pref_address: the 64-bit entry decompresses to
 *   max(load address, LOAD_PHYSICAL_ADDR = pref_address), so RAM there is
 *   needed anyway. Above 4 GiB only with XLF_CAN_BE_LOADED_ABOVE_4G;
 * - the boot data, one block of pages: zero page, GDT (null, null,
 *   __BOOT_CS 64-bit code, __BOOT_DS data), page tables, command line;
 * - the initrd, page aligned, as high as allowed: under initrd_addr_max,
 *   or anywhere in RAM if nothing fits there and the kernel can be loaded
 *   above 4 GiB (which the protocol extends to the ramdisk);
 * each in one backed RAM range (the boot data may also go in a backed
 * reserved range when the caller names it), none overlapping another.
 * The e820 map is the caller's ranges, in order. The page tables map
 * guest-physical = linear with 2 MiB pages for the first 4 GiB and for
 * every GiB the kernel's init_size span and the boot data touch.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot-tables.h"
#include "bzimage.h"

#ifdef HAVE_LZMA
#include <lzma.h>
#endif

#define MIB	     (1ull << 20)
#define GIB	     (1ull << 30)
#define PAGE	     4096ull
#define LOW_RAM_END  0x9fc00ull	  /* 639 KiB: the EBDA and legacy ROMs lie above */
#define BOOT_MAP_END (4ull << 30) /* pref_address + init_size must lie below */
#define PHYS_LIMIT   (1ull << 46) /* what the loader places and maps, 64 TiB */

/* the boot data block */
#define BD_ZERO_PAGE 0x0000
#define BD_GDT	     0x1000
#define BD_PT	     0x2000
#define BD_PT_PAGES  24
#define BD_CMDLINE   (BD_PT + BD_PT_PAGES * PAGE)

#define GDT_CODE64 0x00af9b000000ffffull /* P, DPL 0, code exec/read, L, G */
#define GDT_DATA   0x00cf93000000ffffull /* P, DPL 0, data read/write, D/B, G */
#define PTE_P	   0x1ull
#define PTE_RW	   0x2ull
#define PTE_PS	   0x80ull

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
	bz.relocatable = img[BP_RELOCATABLE] != 0;
	bz.kernel_alignment = rd32(img + BP_KERNEL_ALIGNMENT);
	bz.xloadflags = rd16(img + BP_XLOADFLAGS);
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

/* The image's setup header and the loader's fields (boot.rst, "Details of Header Fields"). */
static void zero_page_fill(const uint8_t *img, const struct bzimage *bz, uint8_t *zp,
			   uint64_t kernel_addr, uint64_t cmdline_addr, uint64_t initrd_addr,
			   uint64_t initrd_size)
{
	memset(zp, 0, BP_SIZE);
	memcpy(zp + BP_SETUP_SECTS, img + BP_SETUP_SECTS, bz->header_end - BP_SETUP_SECTS);
	zp[BP_TYPE_OF_LOADER] = 0xff;
	zp[BP_LOADFLAGS] |= LOADFLAG_CAN_USE_HEAP;
	wr16(zp + BP_HEAP_END_PTR, 0xfe00); /* end of the real-mode heap, as 2.01+ wants */
	wr32(zp + BP_CMD_LINE_PTR, (uint32_t) cmdline_addr);
	wr32(zp + BP_EXT_CMD_LINE_PTR, (uint32_t) (cmdline_addr >> 32));
	if (initrd_size) {
		wr32(zp + BP_RAMDISK_IMAGE, (uint32_t) initrd_addr);
		wr32(zp + BP_EXT_RAMDISK_IMAGE, (uint32_t) (initrd_addr >> 32));
		wr32(zp + BP_RAMDISK_SIZE, (uint32_t) initrd_size);
		wr32(zp + BP_EXT_RAMDISK_SIZE, (uint32_t) (initrd_size >> 32));
	}
	wr32(zp + BP_CODE32_START, (uint32_t) kernel_addr);
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
	zero_page_fill(img, bz, zero_page, bz->load_addr, cmdline_addr, initrd_addr, initrd_size);
	e820_add(zero_page, 0, LOW_RAM_END, E820_RAM);
	e820_add(zero_page, LOW_RAM_END, MIB - LOW_RAM_END, E820_RESERVED);
	e820_add(zero_page, MIB, ram_size - MIB, E820_RAM);
	return 0;
}

/*
 * ---- the kernel inflated by the VMM (bzimage_unpack) ----
 *
 * A bzImage's protected-mode part is a decompressor with the kernel
 * (vmlinux, an ELF64 file) as its payload: payload_offset and
 * payload_length in the setup header (boot protocol 2.08+,
 * Documentation/arch/x86/boot.rst) say where, the first bytes say how it
 * is compressed. On an emulator the decompressor is the slowest part of a
 * boot (Debian's XZ payload: ~4.5 billion guest instructions, more than
 * the kernel then needs to reach /init), so the VMM inflates it itself,
 * as VMMs that boot a vmlinux do, and enters the kernel's own startup_64
 * (the ELF entry) with the same 64-bit boot protocol state: the loaded
 * segments at their physical addresses, RSI the zero page. What is lost is
 * only what the decompressor would have done on top: physical and virtual
 * KASLR (the kernel is where it was linked, as with nokaslr).
 */
#define BP_PAYLOAD_OFFSET 0x248
#define BP_PAYLOAD_LENGTH 0x24c

static const uint8_t xz_magic[6] = { 0xfd, '7', 'z', 'X', 'Z', 0 };

#ifdef HAVE_LZMA
/* XZ into a buffer grown as needed, at most `max` bytes. */
static int unxz(const uint8_t *in, size_t in_size, size_t max, uint8_t **ret, size_t *ret_size,
		char *err, size_t errlen)
{
	lzma_stream s = LZMA_STREAM_INIT;
	size_t cap = in_size * 4 < max ? in_size * 4 : max;
	uint8_t *out = malloc(cap);
	lzma_ret lr;

	if (!out)
		return fail(err, errlen, -ENOMEM, "out of memory for the decompressed kernel");
	if (lzma_stream_decoder(&s, UINT64_MAX, 0) != LZMA_OK) {
		free(out);
		return fail(err, errlen, -ENOMEM, "cannot start an XZ decoder");
	}
	s.next_in = in;
	s.avail_in = in_size;
	s.next_out = out;
	s.avail_out = cap;
	for (;;) {
		lr = lzma_code(&s, LZMA_FINISH);
		if (lr == LZMA_STREAM_END)
			break;
		if (lr == LZMA_OK && !s.avail_out && cap < max) {
			size_t done = cap;
			uint8_t *n;

			cap = cap * 2 < max ? cap * 2 : max;
			n = realloc(out, cap);
			if (!n) {
				lzma_end(&s);
				free(out);
				return fail(err, errlen, -ENOMEM,
					    "out of memory for the decompressed kernel");
			}
			out = n;
			s.next_out = out + done;
			s.avail_out = cap - done;
			continue;
		}
		lzma_end(&s);
		free(out);
		return fail(err, errlen, -EINVAL,
			    lr == LZMA_OK ? "the kernel's XZ payload inflates past %zu MiB"
					  : "the kernel's XZ payload is damaged (liblzma error %d)",
			    lr == LZMA_OK ? max >> 20 : (size_t) lr);
	}
	*ret_size = (size_t) s.total_out;
	lzma_end(&s);
	*ret = out;
	return 0;
}
#endif

/*
 * The vmlinux ELF64 (x86-64, executable) in elf[0, size): its PT_LOAD
 * segments checked to lie inside the file and, by physical address, inside
 * [base, base + span); the entry point the same way.
 */
static int check_vmlinux(const uint8_t *elf, size_t size, uint64_t base, uint64_t span,
			 uint64_t *ret_entry, char *err, size_t errlen)
{
	uint64_t phoff, entry;
	unsigned int phnum, phentsize, loads = 0;
	bool entry_in = false;

	if (size < 64 || memcmp(elf, "\177ELF", 4) || elf[4] != 2 || elf[5] != 1 ||
	    (elf[16] | elf[17] << 8) != 2 || (elf[18] | elf[19] << 8) != 62)
		return fail(err, errlen, -ENOEXEC,
			    "the bzImage's payload is not an x86-64 ELF executable (vmlinux)");
	entry = rd64(elf + 24);
	phoff = rd64(elf + 32);
	phentsize = elf[54] | elf[55] << 8;
	phnum = elf[56] | elf[57] << 8;
	if (phentsize < 56 || phoff > size || (uint64_t) phnum * phentsize > size - phoff)
		return fail(err, errlen, -ENOEXEC, "vmlinux: program headers outside the file");
	for (unsigned int i = 0; i < phnum; i++) {
		const uint8_t *ph = elf + phoff + (uint64_t) i * phentsize;
		uint64_t off = rd64(ph + 8), paddr = rd64(ph + 24), filesz = rd64(ph + 32),
			 memsz = rd64(ph + 40);

		if (rd32(ph) != 1) /* PT_LOAD */
			continue;
		if (off > size || filesz > size - off || filesz > memsz || paddr < base ||
		    memsz > span || paddr - base > span - memsz)
			return fail(
				err, errlen, -ENOEXEC,
				"vmlinux: segment %u (physical %#" PRIx64 ", %#" PRIx64
				" bytes) outside the file or the kernel's init_size from %#" PRIx64,
				i, paddr, memsz, base);
		if (entry >= paddr && entry - paddr < memsz)
			entry_in = true;
		loads++;
	}
	if (!loads || !entry_in)
		return fail(err, errlen, -ENOEXEC,
			    "vmlinux: no loadable segment holds the entry point %#" PRIx64, entry);
	*ret_entry = entry;
	return 0;
}

int bzimage_unpack(const uint8_t *img, const struct bzimage *bz, uint8_t **ret, size_t *ret_size,
		   uint64_t *ret_entry, char *err, size_t errlen)
{
	uint64_t off, len, entry = 0;
	const uint8_t *payload;
	uint8_t *elf = NULL;
	size_t elf_size = 0;
	int r;

	if (bz->version < 0x0208)
		return fail(err, errlen, -ENOTSUP,
			    "boot protocol %u.%02u names no payload (2.08+ does)", bz->version >> 8,
			    bz->version & 0xff);
	off = rd32(img + BP_PAYLOAD_OFFSET);
	len = rd32(img + BP_PAYLOAD_LENGTH);
	if (off > bz->kernel_size || len > bz->kernel_size - off || len < sizeof(xz_magic))
		return fail(err, errlen, -EINVAL,
			    "bzImage payload %#" PRIx64 "+%#" PRIx64
			    " lies outside the kernel's %" PRIu64 " bytes",
			    off, len, bz->kernel_size);
	payload = img + bz->kernel_offset + off;
	if (memcmp(payload, xz_magic, sizeof(xz_magic)))
		return fail(err, errlen, -ENOTSUP,
			    "the kernel's payload is not XZ-compressed (first bytes %02x %02x %02x "
			    "%02x): the guest decompresses it",
			    payload[0], payload[1], payload[2], payload[3]);
#ifdef HAVE_LZMA
	r = unxz(payload, len, bz->init_size ? bz->init_size : 1ull << 30, &elf, &elf_size, err,
		 errlen);
#else
	r = fail(err, errlen, -ENOTSUP,
		 "vpmu-vmm was built without liblzma: the guest decompresses its kernel");
#endif
	if (r < 0)
		return r;
	r = check_vmlinux(elf, elf_size, bz->load_addr, bz->init_size, &entry, err, errlen);
	if (r < 0) {
		free(elf);
		return r;
	}
	*ret = elf;
	*ret_size = elf_size;
	*ret_entry = entry;
	return 0;
}

void bzimage_place_vmlinux(const uint8_t *elf, uint64_t base, uint8_t *host)
{
	uint64_t phoff = rd64(elf + 32);
	unsigned int phnum = elf[56] | elf[57] << 8, phentsize = elf[54] | elf[55] << 8;

	for (unsigned int i = 0; i < phnum; i++) {
		const uint8_t *ph = elf + phoff + (uint64_t) i * phentsize;
		uint64_t off = rd64(ph + 8), paddr = rd64(ph + 24), filesz = rd64(ph + 32),
			 memsz = rd64(ph + 40);

		if (rd32(ph) != 1)
			continue;
		memcpy(host + (paddr - base), elf + off, filesz);
		memset(host + (paddr - base) + filesz, 0, memsz - filesz);
	}
}

/* ---- bzimage_load ---- */

struct span {
	uint64_t addr, len;
};

static bool overlap(struct span a, struct span b)
{
	return a.len && b.len && a.addr < b.addr + b.len && b.addr < a.addr + a.len;
}

static uint64_t range_end(const struct guest_range *r)
{
	return r->gpa + r->size;
}

static bool holds(const struct guest_range *r, uint64_t addr, uint64_t len)
{
	return addr >= r->gpa && len <= r->size && addr - r->gpa <= r->size - len;
}

/* The backed range of `type` (0: any) holding [addr, addr + len), or NULL. */
static const struct guest_range *find_range(const struct bzimage_load_config *cfg, uint64_t addr,
					    uint64_t len, uint32_t type)
{
	for (unsigned int i = 0; i < cfg->nr_ranges; i++) {
		const struct guest_range *r = &cfg->ranges[i];

		if (r->host && (!type || r->type == type) && holds(r, addr, len))
			return r;
	}
	return NULL;
}

static uint8_t *host_at(const struct bzimage_load_config *cfg, uint64_t addr, uint64_t len)
{
	const struct guest_range *r = find_range(cfg, addr, len, 0);

	return r ? r->host + (addr - r->gpa) : NULL;
}

static bool hits(struct span s, const struct span *obst, unsigned int n, uint64_t *ret_end)
{
	for (unsigned int i = 0; i < n; i++)
		if (overlap(s, obst[i])) {
			*ret_end = obst[i].addr + obst[i].len;
			return true;
		}
	return false;
}

/* The lowest `align`-aligned address >= min in backed RAM that fits len below limit. */
static uint64_t place_low(const struct bzimage_load_config *cfg, uint64_t min, uint64_t len,
			  uint64_t align, uint64_t limit, const struct span *obst, unsigned int n)
{
	for (unsigned int i = 0; i < cfg->nr_ranges; i++) {
		const struct guest_range *r = &cfg->ranges[i];
		uint64_t a = r->gpa > min ? r->gpa : min,
			 end = range_end(r) < limit ? range_end(r) : limit, next;

		if (!r->host || r->type != E820_RAM)
			continue;
		for (;;) {
			a = (a + align - 1) & ~(align - 1);
			if (a < r->gpa || a > end || len > end - a)
				break;
			if (!hits((struct span){ a, len }, obst, n, &next))
				return a;
			a = next;
		}
	}
	return UINT64_MAX;
}

/* The highest page-aligned place for len bytes of backed RAM ending at or below limit. */
static uint64_t place_high(const struct bzimage_load_config *cfg, uint64_t len, uint64_t limit,
			   const struct span *obst, unsigned int n)
{
	for (unsigned int i = cfg->nr_ranges; i-- > 0;) {
		const struct guest_range *r = &cfg->ranges[i];
		uint64_t end = range_end(r) < limit ? range_end(r) : limit, a;

		if (!r->host || r->type != E820_RAM || end < r->gpa || end - r->gpa < len)
			continue;
		a = (end - len) & ~(PAGE - 1);
		while (a >= r->gpa) {
			bool moved = false;

			for (unsigned int k = 0; k < n; k++)
				if (overlap((struct span){ a, len }, obst[k])) {
					if (obst[k].addr < len)
						return UINT64_MAX;
					a = (obst[k].addr - len) & ~(PAGE - 1);
					moved = true;
					break;
				}
			if (!moved)
				return a;
		}
	}
	return UINT64_MAX;
}

static int check_ranges(const struct bzimage_load_config *cfg, char *err, size_t errlen)
{
	if (!cfg->nr_ranges || cfg->nr_ranges > BP_E820_MAX)
		return fail(err, errlen, -EINVAL,
			    "%u guest memory ranges: the e820 map holds 1 to %d", cfg->nr_ranges,
			    BP_E820_MAX);
	for (unsigned int i = 0; i < cfg->nr_ranges; i++) {
		const struct guest_range *r = &cfg->ranges[i];

		if (!r->size || r->gpa >= PHYS_LIMIT || r->size > PHYS_LIMIT - r->gpa ||
		    (r->type != E820_RAM && r->type != E820_RESERVED))
			return fail(err, errlen, -EINVAL,
				    "guest memory range %u (%#" PRIx64 ", %#" PRIx64
				    " bytes, type %u) "
				    "is empty, above 64 TiB or neither RAM nor reserved",
				    i, r->gpa, r->size, r->type);
		if (i && r->gpa < range_end(&cfg->ranges[i - 1]))
			return fail(err, errlen, -EINVAL,
				    "guest memory range %u at %#" PRIx64 " overlaps or precedes "
				    "range %u: list them in ascending order",
				    i, r->gpa, i - 1);
	}
	return 0;
}

/* The kernel's load address; UINT64_MAX with err set if there is none. */
static int place_kernel(const struct bzimage_load_config *cfg, const struct bzimage *bz,
			uint64_t span, uint64_t limit, const struct span *obst, unsigned int n,
			uint64_t *ret, char *err, size_t errlen)
{
	uint64_t align = bz->kernel_alignment < PAGE ? PAGE : bz->kernel_alignment, a;

	if (!bz->relocatable) {
		if (cfg->kernel_addr && cfg->kernel_addr != bz->load_addr)
			return fail(err, errlen, -EINVAL,
				    "the kernel is not relocatable: it loads at %#" PRIx64
				    ", not %#" PRIx64,
				    bz->load_addr, cfg->kernel_addr);
		a = bz->load_addr;
	} else if (bz->kernel_alignment & (bz->kernel_alignment - 1)) {
		return fail(err, errlen, -ENOEXEC,
			    "bzImage kernel_alignment %#x is not a power of two",
			    bz->kernel_alignment);
	} else if (cfg->kernel_addr) {
		a = cfg->kernel_addr;
		if (a & (align - 1) || a < bz->load_addr)
			return fail(err, errlen, -EINVAL,
				    "kernel address %#" PRIx64 " must be aligned to %#" PRIx64
				    " and at or above the kernel's pref_address %#" PRIx64,
				    a, align, bz->load_addr);
	} else {
		a = place_low(cfg, bz->load_addr, span, align, limit, obst, n);
		if (a == UINT64_MAX)
			return fail(err, errlen, -ENOMEM,
				    "no RAM range holds the kernel's %" PRIu64
				    " MiB at or above %#" PRIx64 "%s: give the guest more memory",
				    (span + MIB - 1) / MIB, bz->load_addr,
				    limit <= BOOT_MAP_END ? " and below 4 GiB" : "");
	}
	if (!find_range(cfg, a, span, E820_RAM) || span > limit || a > limit - span)
		return fail(err, errlen, -ENOMEM,
			    "the kernel needs %" PRIu64 " MiB of RAM from %#" PRIx64
			    "%s, and the guest memory has no such range: give it more memory",
			    (span + MIB - 1) / MIB, a, limit <= BOOT_MAP_END ? " below 4 GiB" : "");
	*ret = a;
	return 0;
}

struct pt_alloc {
	uint8_t *base; /* BD_PT_PAGES pages at gpa */
	uint64_t gpa;
	unsigned int used;
};

/* The next-level table under entry i of `table`, made if absent. */
static int pt_next(struct pt_alloc *pt, uint8_t *table, unsigned int i, uint8_t **ret)
{
	uint8_t *e = table + 8 * i;
	uint64_t v = rd64(e);

	if (!(v & PTE_P)) {
		if (pt->used == BD_PT_PAGES)
			return -ENOMEM;
		v = (pt->gpa + pt->used * PAGE) | PTE_P | PTE_RW;
		wr64(e, v);
		pt->used++;
	}
	*ret = pt->base + ((v & ~(PAGE - 1)) - pt->gpa);
	return 0;
}

/* Identity-map 1 GiB number g with 2 MiB pages (SDM Vol. 3A §4.5, 4-level paging). */
static int map_gib(struct pt_alloc *pt, uint64_t g)
{
	uint8_t *pdpt, *pd;

	if (pt_next(pt, pt->base, (unsigned int) (g >> 9) & 511, &pdpt) < 0 ||
	    pt_next(pt, pdpt, (unsigned int) g & 511, &pd) < 0)
		return -ENOMEM;
	for (uint64_t j = 0; j < 512; j++)
		wr64(pd + 8 * j, (g * GIB + j * 2 * MIB) | PTE_P | PTE_RW | PTE_PS);
	return 0;
}

static int map_span(struct pt_alloc *pt, struct span s)
{
	for (uint64_t g = s.addr / GIB; s.len && g <= (s.addr + s.len - 1) / GIB; g++)
		if (map_gib(pt, g) < 0)
			return -ENOMEM;
	return 0;
}

/* The boot data block: where the caller put it, checked, or in the lowest RAM beside the rest. */
static int place_boot_data(const struct bzimage_load_config *cfg, struct span kern, struct span rd,
			   uint64_t bd_size, uint64_t limit, bool high, struct span *ret, char *err,
			   size_t errlen)
{
	struct span bd = { cfg->boot_data_addr, bd_size }, obst[2] = { kern, rd };

	if (!cfg->boot_data_addr) {
		bd.addr = place_low(cfg, PAGE, bd_size, PAGE, limit, obst, 2);
		if (bd.addr == UINT64_MAX)
			return fail(err, errlen, -ENOMEM,
				    "no RAM range holds the %" PRIu64 " KiB of zero page, page "
				    "tables and command line: give the guest more memory",
				    bd_size / 1024);
	} else if (bd.addr & (PAGE - 1) || !find_range(cfg, bd.addr, bd_size, 0) ||
		   bd.addr > limit - bd_size) {
		return fail(err, errlen, -EINVAL,
			    "boot data at %#" PRIx64 " (%" PRIu64 " KiB) must be page aligned, in "
			    "backed guest memory%s",
			    bd.addr, bd_size / 1024, high ? "" : " and below 4 GiB");
	}
	*ret = bd;
	return 0;
}

/* The initrd: where the caller put it, checked, or as high as the kernel allows. */
static int place_initrd(const struct bzimage_load_config *cfg, const struct bzimage *bz,
			struct span kern, struct span bd, bool high, struct span *ret, char *err,
			size_t errlen)
{
	uint64_t initrd_limit = (uint64_t) bz->initrd_addr_max + 1;
	struct span rd = { cfg->initrd_addr, cfg->initrd_size }, obst[2] = { kern, bd };

	if (!cfg->initrd_addr) {
		rd.addr = place_high(cfg, cfg->initrd_size, initrd_limit, obst, 2);
		if (rd.addr == UINT64_MAX && high)
			rd.addr = place_high(cfg, cfg->initrd_size, PHYS_LIMIT, obst, 2);
		if (rd.addr == UINT64_MAX)
			return fail(err, errlen, -ENOMEM,
				    "the initrd (%zu bytes) fits in no RAM range%s beside "
				    "the kernel: give the guest more memory",
				    cfg->initrd_size, high ? "" : " below initrd_addr_max");
	} else if (!find_range(cfg, rd.addr, cfg->initrd_size, E820_RAM)) {
		return fail(err, errlen, -EINVAL,
			    "initrd at %#" PRIx64 " (%zu bytes) is not in guest RAM", rd.addr,
			    cfg->initrd_size);
	}
	if (!high && (rd.addr > initrd_limit || cfg->initrd_size > initrd_limit - rd.addr))
		return fail(err, errlen, -E2BIG,
			    "initrd at %#" PRIx64 "..%#" PRIx64
			    " ends above the kernel's limit %#x",
			    rd.addr, rd.addr + cfg->initrd_size - 1, bz->initrd_addr_max);
	*ret = rd;
	return 0;
}

/*
 * The kernel inflated here (*ret_elf, its entry point), if asked and
 * possible; where it is not, e->unpack_note says why and *ret_elf stays
 * NULL: the guest decompresses it.
 */
static int unpack_kernel(const struct bzimage_load_config *cfg, struct bzimage_entry *e,
			 uint8_t **ret_elf, uint64_t *ret_entry, char *err, size_t errlen)
{
	size_t elf_size = 0;
	int r;

	if (!cfg->unpack)
		return 0;
	if (e->kernel_addr != e->bz.load_addr) {
		snprintf(e->unpack_note, sizeof(e->unpack_note),
			 "the kernel goes to %#" PRIx64 ", not its pref_address %#" PRIx64
			 ": the guest decompresses it",
			 e->kernel_addr, e->bz.load_addr);
		return 0;
	}
	r = bzimage_unpack(cfg->image, &e->bz, ret_elf, &elf_size, ret_entry, err, errlen);
	if (r == -ENOTSUP)
		snprintf(e->unpack_note, sizeof(e->unpack_note), "%s", err);
	else if (r < 0)
		return r;
	return 0;
}

/* Page tables first: nothing is written to guest memory on failure. */
static int build_page_tables(const struct bzimage_load_config *cfg, struct span kern,
			     struct span bd, char *err, size_t errlen)
{
	struct pt_alloc pt;

	pt.base = host_at(cfg, bd.addr + BD_PT, BD_PT_PAGES * PAGE);
	pt.gpa = bd.addr + BD_PT;
	pt.used = 1; /* the PML4 */
	memset(pt.base, 0, BD_PT_PAGES * PAGE);
	if (map_span(&pt, (struct span){ 0, BOOT_MAP_END }) < 0 || map_span(&pt, kern) < 0 ||
	    map_span(&pt, bd) < 0) {
		memset(pt.base, 0, BD_PT_PAGES * PAGE);
		return fail(err, errlen, -ENOMEM,
			    "the identity map of the kernel and boot data needs more than %d "
			    "page-table pages",
			    BD_PT_PAGES);
	}
	return 0;
}

/* kernel (inflated, or the image's protected-mode part), command line, initrd */
static void copy_images(const struct bzimage_load_config *cfg, const struct bzimage *bz,
			const uint8_t *elf, struct span kern, struct span bd, struct span rd,
			size_t cmdline_len)
{
	uint8_t *p;

	if (elf)
		bzimage_place_vmlinux(elf, kern.addr, host_at(cfg, kern.addr, kern.len));
	else
		memcpy(host_at(cfg, kern.addr, bz->kernel_size), cfg->image + bz->kernel_offset,
		       bz->kernel_size);
	p = host_at(cfg, bd.addr + BD_CMDLINE, cmdline_len + 1);
	if (cmdline_len)
		memcpy(p, cfg->cmdline, cmdline_len);
	p[cmdline_len] = 0;
	if (rd.len)
		memcpy(host_at(cfg, rd.addr, rd.len), cfg->initrd, rd.len);
}

/* The zero page and the GDT in the boot data block. */
static void write_boot_data(const struct bzimage_load_config *cfg, const struct bzimage *bz,
			    struct span kern, struct span bd, struct span rd)
{
	uint8_t *zp, *p;

	zp = host_at(cfg, bd.addr + BD_ZERO_PAGE, BP_SIZE);
	zero_page_fill(cfg->image, bz, zp, kern.addr, bd.addr + BD_CMDLINE, rd.addr, rd.len);
	wr64(zp + BP_ACPI_RSDP_ADDR, cfg->acpi_rsdp);
	for (unsigned int i = 0; i < cfg->nr_ranges; i++)
		e820_add(zp, cfg->ranges[i].gpa, cfg->ranges[i].size, cfg->ranges[i].type);

	/* GDT: __BOOT_CS and __BOOT_DS at 10H and 18H */
	p = host_at(cfg, bd.addr + BD_GDT, PAGE);
	memset(p, 0, PAGE);
	wr64(p + BZ_BOOT_CS, GDT_CODE64);
	wr64(p + BZ_BOOT_DS, GDT_DATA);
}

/* The 64-bit entry state (boot.rst, "64-bit Boot Protocol") and where things went. */
static void set_entry_state(struct bzimage_entry *e, uint64_t entry, struct span kern,
			    struct span bd, struct span rd)
{
	e->rip = e->unpacked ? entry : kern.addr + 0x200;
	e->rsi = bd.addr + BD_ZERO_PAGE;
	e->cr0 = 0x80050033; /* PG AM WP NE ET MP PE */
	e->cr3 = bd.addr + BD_PT;
	e->cr4 = 0x620;	 /* OSXMMEXCPT OSFXSR PAE */
	e->efer = 0x500; /* LMA LME */
	e->gdt_base = bd.addr + BD_GDT;
	e->gdt_limit = 4 * 8 - 1;
	e->cs = BZ_BOOT_CS;
	e->ds = BZ_BOOT_DS;
	e->kernel_end = kern.addr + kern.len;
	e->cmdline_addr = bd.addr + BD_CMDLINE;
	e->initrd_addr = rd.addr;
	e->boot_data_addr = bd.addr;
	e->boot_data_size = bd.len;
}

int bzimage_load(const struct bzimage_load_config *cfg, struct bzimage_entry *ret, char *err,
		 size_t errlen)
{
	struct bzimage_entry e = { 0 };
	size_t cmdline_len = cfg->cmdline ? strlen(cfg->cmdline) : 0;
	uint64_t span, limit, bd_size, entry = 0;
	struct span obst[2], kern, bd, rd = { 0, 0 };
	uint8_t *elf = NULL;
	bool high;
	int r;

	r = check_ranges(cfg, err, errlen);
	if (r < 0)
		return r;
	r = bzimage_parse(cfg->image, cfg->image_size, &e.bz, err, errlen);
	if (r < 0)
		return r;
	high = e.bz.xloadflags & XLF_CAN_BE_LOADED_ABOVE_4G;
	limit = high ? PHYS_LIMIT : BOOT_MAP_END;
	if (cmdline_len > e.bz.cmdline_size)
		return fail(err, errlen, -E2BIG,
			    "command line of %zu bytes is longer than the kernel's limit of %u",
			    cmdline_len, e.bz.cmdline_size);
	span = e.bz.init_size > e.bz.kernel_size ? e.bz.init_size : e.bz.kernel_size;
	bd_size = BD_CMDLINE + ((cmdline_len + 1 + PAGE - 1) & ~(PAGE - 1));
	bd = (struct span){ cfg->boot_data_addr, cfg->boot_data_addr ? bd_size : 0 };
	if (cfg->initrd_size && cfg->initrd_addr)
		rd = (struct span){ cfg->initrd_addr, cfg->initrd_size };

	/* the kernel, around what the caller placed */
	obst[0] = bd;
	obst[1] = rd;
	r = place_kernel(cfg, &e.bz, span, limit, obst, 2, &e.kernel_addr, err, errlen);
	if (r < 0)
		return r;
	kern = (struct span){ e.kernel_addr, span };
	r = place_boot_data(cfg, kern, rd, bd_size, limit, high, &bd, err, errlen);
	if (r < 0)
		return r;
	if (cfg->initrd_size) {
		r = place_initrd(cfg, &e.bz, kern, bd, high, &rd, err, errlen);
		if (r < 0)
			return r;
	}
	if (overlap(kern, bd) || overlap(kern, rd) || overlap(bd, rd))
		return fail(err, errlen, -EINVAL,
			    "kernel %#" PRIx64 "+%#" PRIx64 ", boot data %#" PRIx64 "+%#" PRIx64
			    " and initrd %#" PRIx64 "+%#" PRIx64 " overlap",
			    kern.addr, kern.len, bd.addr, bd.len, rd.addr, rd.len);

	r = unpack_kernel(cfg, &e, &elf, &entry, err, errlen);
	if (r < 0)
		return r;
	r = build_page_tables(cfg, kern, bd, err, errlen);
	if (r < 0) {
		free(elf);
		return r;
	}
	copy_images(cfg, &e.bz, elf, kern, bd, rd, cmdline_len);
	e.unpacked = elf != NULL;
	free(elf);
	write_boot_data(cfg, &e.bz, kern, bd, rd);
	set_entry_state(&e, entry, kern, bd, rd);
	*ret = e;
	return 0;
}

#define PC_EBDA	   0x9f000ull
#define PC_LOW_END 0x100000ull

int bzimage_load_pc(uint8_t *low, const struct guest_range *high, unsigned int nr_high,
		    const struct boot_tables_config *tables,
		    const struct bzimage_load_config *kernel, struct bzimage_entry *ret, char *err,
		    size_t errlen)
{
	struct guest_range ranges[2 + BZIMAGE_PC_MAX_HIGH];
	struct bzimage_load_config cfg = *kernel;
	int r;

	if (nr_high > BZIMAGE_PC_MAX_HIGH)
		nr_high = BZIMAGE_PC_MAX_HIGH;
	ranges[0] = (struct guest_range){ 0, PC_EBDA, low, E820_RAM };
	ranges[1] =
		(struct guest_range){ PC_EBDA, PC_LOW_END - PC_EBDA, low + PC_EBDA, E820_RESERVED };
	memcpy(ranges + 2, high, nr_high * sizeof(*high));
	r = boot_tables_build(low + BOOT_TABLES_BASE, tables, err, errlen);
	if (r < 0)
		return r;
	cfg.ranges = ranges;
	cfg.nr_ranges = 2 + nr_high;
	cfg.acpi_rsdp = BOOT_TABLES_RSDP;
	cfg.unpack = true; /* the guest's own decompressor is the slowest part of a boot there */
	return bzimage_load(&cfg, ret, err, errlen);
}
