/* SPDX-License-Identifier: MIT */
/*
 * Kernel loaders: multiboot v1 (ELF32 or a.out kludge) and ELF64.
 *
 * Everything is checked before the first byte of guest RAM is written, so
 * a refused image leaves RAM and *ret as they were. Image fields are read
 * byte by byte as little-endian: the image is untrusted and unaligned, and
 * its layout must not depend on the host's.
 *
 * Where the loader puts its own data (the "boot area"):
 *  - multiboot: info block, memory map, module list and strings;
 *  - ELF64: a 16 KiB stack, the GDT, the PML4, the PDPT and the PDs.
 * The boot area goes at 0x1000 when it fits below 640 KiB without touching
 * the kernel (or the modules); otherwise page-aligned right after the
 * kernel and its modules. Low memory first because kernels linked at
 * 1 MiB or above commonly hand out memory from their _end onwards and
 * would trample page tables or an info block placed there. Page 0 is never
 * used, so mb_info and cr3 are never 0 and a guest null dereference does
 * not read loader data.
 *
 * Modules are placed page-aligned from the first page boundary after the
 * kernel image, in the order given.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "loader.h"
#include "vpmu/bits.h"

#define PAGE_SIZE UINT64_C(0x1000)
#define SZ_1K	  UINT64_C(0x400)
#define SZ_640K	  UINT64_C(0xA0000)
#define SZ_1M	  UINT64_C(0x100000)
#define SZ_2M	  UINT64_C(0x200000)
#define SZ_1G	  UINT64_C(0x40000000)
#define SZ_4G	  UINT64_C(0x100000000)

/* Multiboot Specification 0.6.96, 3.1.1-3.1.3: the OS image header. */
#define MB_HEADER_MAGIC	  0x1BADB002U
#define MB_SEARCH_END	  8192
#define MB_HF_PAGE_ALIGN  VPMU_BIT_ULL(0)
#define MB_HF_MEMORY_INFO VPMU_BIT_ULL(1)
#define MB_HF_VIDEO_MODE  VPMU_BIT_ULL(2)
#define MB_HF_AOUT_KLUDGE VPMU_BIT_ULL(16)
/* Bits 0-15 are requirements: a loader that does not know one must refuse. */
#define MB_HF_REQUIRED VPMU_GENMASK_ULL(15, 0)
#define MB_HF_KNOWN    (MB_HF_PAGE_ALIGN | MB_HF_MEMORY_INFO)

#define MBH_MAGIC	  0
#define MBH_FLAGS	  4
#define MBH_CHECKSUM	  8
#define MBH_HEADER_ADDR	  12
#define MBH_LOAD_ADDR	  16
#define MBH_LOAD_END_ADDR 20
#define MBH_BSS_END_ADDR  24
#define MBH_ENTRY_ADDR	  28
#define MBH_AOUT_SIZE	  32

/* Multiboot 0.6.96, 3.3: boot information format. */
#define MBI_F_MEMORY	  VPMU_BIT_ULL(0)
#define MBI_F_CMDLINE	  VPMU_BIT_ULL(2)
#define MBI_F_MODS	  VPMU_BIT_ULL(3)
#define MBI_F_MMAP	  VPMU_BIT_ULL(6)
#define MBI_F_LOADER_NAME VPMU_BIT_ULL(9)

#define MBI_FLAGS	     0
#define MBI_MEM_LOWER	     4
#define MBI_MEM_UPPER	     8
#define MBI_CMDLINE	     16
#define MBI_MODS_COUNT	     20
#define MBI_MODS_ADDR	     24
#define MBI_MMAP_LENGTH	     44
#define MBI_MMAP_ADDR	     48
#define MBI_BOOT_LOADER_NAME 64
#define MBI_SIZE	     88 /* up to and including the VBE fields */

#define MOD_START  0
#define MOD_END	   4
#define MOD_STRING 8
#define MOD_SIZE   16

/* Each entry is preceded by its size, which does not count the size field. */
#define MMAP_SIZE	 0
#define MMAP_BASE	 4
#define MMAP_LENGTH	 12
#define MMAP_TYPE	 20
#define MMAP_ENTRY_SIZE	 24
#define MMAP_MAX_ENTRIES 3
#define MMAP_RAM	 1
#define MMAP_RESERVED	 2

#define MB_LOADER_NAME "vpmu-vmm"
/* Keeps every size computation over the module list far from overflow. */
#define MB_MAX_MODS 65536

/* ELF (System V gABI; x86-64 psABI) header and program header layouts. */
#define EI_CLASS    4
#define EI_DATA	    5
#define EI_VERSION  6
#define EI_NIDENT   16
#define ELFCLASS32  1
#define ELFCLASS64  2
#define ELFDATA2LSB 1
#define EV_CURRENT  1
#define ET_EXEC	    2
#define EM_386	    3
#define EM_X86_64   62
#define PT_LOAD	    1

#define E_TYPE	      16
#define E_MACHINE     18
#define E32_ENTRY     24
#define E32_PHOFF     28
#define E32_PHENTSIZE 42
#define E32_PHNUM     44
#define E32_EHDR_SIZE 52
#define E64_ENTRY     24
#define E64_PHOFF     32
#define E64_PHENTSIZE 54
#define E64_PHNUM     56
#define E64_EHDR_SIZE 64

#define P32_TYPE   0
#define P32_OFFSET 4
#define P32_VADDR  8
#define P32_PADDR  12
#define P32_FILESZ 16
#define P32_MEMSZ  20
#define P32_SIZE   32
#define P64_TYPE   0
#define P64_OFFSET 8
#define P64_VADDR  16
#define P64_PADDR  24
#define P64_FILESZ 32
#define P64_MEMSZ  40
#define P64_SIZE   56

/* Real kernels have a handful; a cap keeps the overlap check quadratic in a small n. */
#define MAX_SEGS 64

/* SDM Vol. 3A 4.5, Tables 4-15..4-18: 4-level paging entries. */
#define PTE_P	   VPMU_BIT_ULL(0)
#define PTE_RW	   VPMU_BIT_ULL(1)
#define PTE_PS	   VPMU_BIT_ULL(7)
#define PT_ENTRIES 512

/*
 * SDM Vol. 3A 3.4.5, 5.2.1: flat descriptors, base 0, limit 0xFFFFF with
 * G=1. Code: P, DPL 0, S, type 0xB (execute/read, accessed), L=1, D=0.
 * Data: P, DPL 0, S, type 0x3 (read/write, accessed), D/B=1. The accessed
 * bits are preset so loading a selector never needs to write the GDT.
 */
#define GDT_CODE64  0x00AF9B000000FFFFULL
#define GDT_DATA    0x00CF93000000FFFFULL
#define GDT_ENTRIES 3

/* ELF64 boot area: stack lowest, so an overflow runs into page 0 or kernel bss, not the tables. */
#define E64_STACK_SIZE UINT64_C(0x4000)
#define E64_GDT_OFF    E64_STACK_SIZE
#define E64_PML4_OFF   (E64_GDT_OFF + PAGE_SIZE)
#define E64_PDPT_OFF   (E64_PML4_OFF + PAGE_SIZE)
#define E64_PD_OFF     (E64_PDPT_OFF + PAGE_SIZE)

#define BOOT_AREA_LOW PAGE_SIZE

struct seg {
	uint64_t offset;
	uint64_t paddr;
	uint64_t vaddr;
	uint64_t filesz;
	uint64_t memsz;
	unsigned int index; /* program header number, for messages */
};

struct plan {
	const char *what; /* "ELF32 segment", "ELF64 segment", NULL for the a.out kludge */
	struct seg segs[MAX_SEGS];
	unsigned int nr_segs;
	uint64_t entry;
	bool entry_is_vaddr_ok; /* ELF: e_entry may be a p_vaddr, translated to p_paddr */
	uint64_t image_start;
	uint64_t image_end;
};

struct ctx {
	const struct vmm_ram *ram;
	const uint8_t *img;
	uint64_t size;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int fail(const struct ctx *c, int ret, const char *fmt,
						      ...)
{
	va_list ap;

	if (c->err && c->errlen) {
		va_start(ap, fmt);
		vsnprintf(c->err, c->errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t) (p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
	       (uint32_t) p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t) rd32(p) | (uint64_t) rd32(p + 4) << 32;
}

/* Callers have checked that [addr, addr + n) lies inside RAM. */
static void wr32(const struct vmm_ram *ram, uint64_t addr, uint32_t v)
{
	uint8_t *p = ram->base + addr;

	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static void wr64(const struct vmm_ram *ram, uint64_t addr, uint64_t v)
{
	wr32(ram, addr, (uint32_t) v);
	wr32(ram, addr + 4, (uint32_t) (v >> 32));
}

static bool align_up(uint64_t v, uint64_t align, uint64_t *ret)
{
	if (v > UINT64_MAX - (align - 1))
		return false;
	*ret = (v + align - 1) & ~(align - 1);
	return true;
}

static bool ranges_overlap(uint64_t a, uint64_t a_end, uint64_t b, uint64_t b_end)
{
	return a < b_end && b < a_end;
}

static const char *fmt_ram(uint64_t size, char *buf, size_t len)
{
	if (size % SZ_1M == 0)
		snprintf(buf, len, "%" PRIu64 " MiB", size / SZ_1M);
	else
		snprintf(buf, len, "%#" PRIx64 " bytes", size);
	return buf;
}

static const char *seg_name(const struct plan *p, const struct seg *s, char *buf, size_t len)
{
	if (p->what)
		snprintf(buf, len, "%s %u (p_paddr %#" PRIx64 ", p_memsz %#" PRIx64 ")", p->what,
			 s->index, s->paddr, s->memsz);
	else
		snprintf(buf, len,
			 "a.out-kludge image (load_addr %#" PRIx64 ", %#" PRIx64 " bytes)",
			 s->paddr, s->memsz);
	return buf;
}

/*
 * The checks common to every image kind: each segment inside RAM (and
 * below `limit`, 4 GiB for a 32-bit kernel), no two overlapping, the entry
 * point inside one of them. Fills in the image extents.
 */
static int check_segments(const struct ctx *c, struct plan *p, uint64_t limit)
{
	char a[128], b[128], r[32];
	uint64_t entry = p->entry;
	bool found = false;

	p->image_start = UINT64_MAX;
	p->image_end = 0;
	for (unsigned int i = 0; i < p->nr_segs; i++) {
		const struct seg *s = &p->segs[i];
		uint64_t end;

		if (s->paddr > UINT64_MAX - s->memsz)
			return fail(c, -EINVAL, "%s wraps around the end of the address space",
				    seg_name(p, s, a, sizeof(a)));
		end = s->paddr + s->memsz;
		if (end > limit)
			return fail(c, -EINVAL,
				    "%s ends above 4 GiB, out of reach of a 32-bit kernel",
				    seg_name(p, s, a, sizeof(a)));
		if (end > c->ram->size)
			return fail(c, -E2BIG, "%s does not fit in %s of RAM",
				    seg_name(p, s, a, sizeof(a)),
				    fmt_ram(c->ram->size, r, sizeof(r)));
		for (unsigned int j = 0; j < i; j++) {
			const struct seg *t = &p->segs[j];

			if (ranges_overlap(s->paddr, end, t->paddr, t->paddr + t->memsz))
				return fail(c, -EINVAL, "%s overlaps %s",
					    seg_name(p, s, a, sizeof(a)),
					    seg_name(p, t, b, sizeof(b)));
		}
		if (s->paddr < p->image_start)
			p->image_start = s->paddr;
		if (end > p->image_end)
			p->image_end = end;
	}

	for (unsigned int i = 0; i < p->nr_segs && !found; i++) {
		const struct seg *s = &p->segs[i];

		found = entry - s->paddr < s->memsz && entry >= s->paddr;
	}
	/*
	 * A higher-half kernel's e_entry is a virtual address; paging is off
	 * (multiboot) or identity (ELF64) at entry, so jump to where that
	 * code was loaded instead.
	 */
	for (unsigned int i = 0; i < p->nr_segs && !found && p->entry_is_vaddr_ok; i++) {
		const struct seg *s = &p->segs[i];

		if (entry >= s->vaddr && entry - s->vaddr < s->memsz) {
			entry = s->paddr + (entry - s->vaddr);
			found = true;
		}
	}
	if (!found)
		return fail(c, -EINVAL, "entry point %#" PRIx64 " is outside every loaded segment",
			    p->entry);
	p->entry = entry;
	return 0;
}

/* Where an ELF image's program header table is. */
struct elf_table {
	const char *name; /* "ELF32" / "ELF64" */
	bool is64;
	uint64_t phoff;
	unsigned int phentsize, phnum;
};

/* The ELF header: identification, type, machine, entry and the program header table. */
static int elf_header(const struct ctx *c, unsigned int elf_class, struct plan *p,
		      struct elf_table *t)
{
	bool is64 = elf_class == ELFCLASS64;
	const char *name = is64 ? "ELF64" : "ELF32";
	uint64_t ehdr_size = is64 ? E64_EHDR_SIZE : E32_EHDR_SIZE, table_size;
	unsigned int want_phentsize = is64 ? P64_SIZE : P32_SIZE;
	unsigned int want_machine = is64 ? EM_X86_64 : EM_386;
	const uint8_t *img = c->img;
	unsigned int type, machine;

	if (c->size < ehdr_size)
		return fail(c, -EINVAL,
			    "truncated image: the %s header needs %" PRIu64
			    " bytes but the file has %" PRIu64,
			    name, ehdr_size, c->size);
	if (img[EI_DATA] != ELFDATA2LSB)
		return fail(c, -ENOEXEC, "%s image is not little-endian (EI_DATA %u)", name,
			    img[EI_DATA]);
	if (img[EI_VERSION] != EV_CURRENT)
		return fail(c, -ENOEXEC, "%s image has unknown ELF version %u", name,
			    img[EI_VERSION]);
	type = rd16(img + E_TYPE);
	machine = rd16(img + E_MACHINE);
	if (type != ET_EXEC)
		return fail(c, -ENOEXEC,
			    "%s image has e_type %u, not ET_EXEC (2): link the kernel statically, "
			    "not as PIE or object",
			    name, type);
	if (machine != want_machine)
		return fail(c, -ENOEXEC, "%s image has e_machine %u, expected %u (%s)", name,
			    machine, want_machine, is64 ? "EM_X86_64" : "EM_386");

	*t = (struct elf_table){ .name = name, .is64 = is64 };
	if (is64) {
		p->entry = rd64(img + E64_ENTRY);
		t->phoff = rd64(img + E64_PHOFF);
		t->phentsize = rd16(img + E64_PHENTSIZE);
		t->phnum = rd16(img + E64_PHNUM);
	} else {
		p->entry = rd32(img + E32_ENTRY);
		t->phoff = rd32(img + E32_PHOFF);
		t->phentsize = rd16(img + E32_PHENTSIZE);
		t->phnum = rd16(img + E32_PHNUM);
	}
	if (t->phentsize != want_phentsize)
		return fail(c, -EINVAL, "%s image has e_phentsize %u, expected %u", name,
			    t->phentsize, want_phentsize);
	if (t->phnum == 0)
		return fail(c, -EINVAL, "%s image has no program headers", name);
	table_size = (uint64_t) t->phnum * t->phentsize;
	if (t->phoff > c->size)
		return fail(c, -EINVAL,
			    "truncated image: program header table starts at byte %" PRIu64
			    " but the file has %" PRIu64 " bytes",
			    t->phoff, c->size);
	if (table_size > c->size - t->phoff)
		return fail(c, -EINVAL,
			    "truncated image: program header table ends at byte %" PRIu64
			    " but the file has %" PRIu64 " bytes",
			    t->phoff + table_size, c->size);
	return 0;
}

/* Program header `ph` as a segment. */
static struct seg elf_segment(const uint8_t *ph, bool is64, unsigned int index)
{
	struct seg s = { .index = index };

	if (is64) {
		s.offset = rd64(ph + P64_OFFSET);
		s.vaddr = rd64(ph + P64_VADDR);
		s.paddr = rd64(ph + P64_PADDR);
		s.filesz = rd64(ph + P64_FILESZ);
		s.memsz = rd64(ph + P64_MEMSZ);
	} else {
		s.offset = rd32(ph + P32_OFFSET);
		s.vaddr = rd32(ph + P32_VADDR);
		s.paddr = rd32(ph + P32_PADDR);
		s.filesz = rd32(ph + P32_FILESZ);
		s.memsz = rd32(ph + P32_MEMSZ);
	}
	return s;
}

/* Program headers of an ELF32 or ELF64 executable into p->segs. */
static int parse_elf(const struct ctx *c, unsigned int elf_class, struct plan *p)
{
	struct elf_table t = { 0 };
	int rc = elf_header(c, elf_class, p, &t);

	if (rc)
		return rc;
	p->what = t.is64 ? "ELF64 segment" : "ELF32 segment";
	p->entry_is_vaddr_ok = true;
	p->nr_segs = 0;
	for (unsigned int i = 0; i < t.phnum; i++) {
		const uint8_t *ph = c->img + t.phoff + (uint64_t) i * t.phentsize;
		struct seg s;

		if (rd32(ph + (t.is64 ? P64_TYPE : P32_TYPE)) != PT_LOAD)
			continue;
		s = elf_segment(ph, t.is64, i);
		if (s.filesz > s.memsz)
			return fail(c, -EINVAL,
				    "%s segment %u has p_filesz %#" PRIx64
				    " larger than p_memsz %#" PRIx64,
				    t.name, i, s.filesz, s.memsz);
		if (s.offset > c->size || s.filesz > c->size - s.offset)
			return fail(c, -EINVAL,
				    "truncated image: %s segment %u (p_offset %#" PRIx64
				    ", p_filesz %#" PRIx64
				    ") ends past the end of the file (%" PRIu64 " bytes)",
				    t.name, i, s.offset, s.filesz, c->size);
		/* An empty PT_LOAD occupies nothing; the gABI allows it. */
		if (s.memsz == 0)
			continue;
		if (p->nr_segs == MAX_SEGS)
			return fail(c, -EINVAL,
				    "%s image has more than %u non-empty PT_LOAD segments", t.name,
				    MAX_SEGS);
		p->segs[p->nr_segs++] = s;
	}
	if (p->nr_segs == 0)
		return fail(c, -EINVAL, "%s image has no non-empty PT_LOAD segment", t.name);
	return 0;
}

/* Multiboot 0.6.96, 3.1.3: the header's address fields replace the ELF headers. */
static int parse_aout_kludge(const struct ctx *c, uint64_t off, struct plan *p)
{
	const uint8_t *h = c->img + off;
	uint64_t header_addr, load_addr, load_end_addr, bss_end_addr, load_off, filesz, memsz;

	if (c->size - off < MBH_AOUT_SIZE)
		return fail(c, -EINVAL,
			    "truncated image: the multiboot header at offset %#" PRIx64
			    " sets the a.out kludge (flags bit 16) but the file ends %" PRIu64
			    " bytes into it",
			    off, c->size - off);
	header_addr = rd32(h + MBH_HEADER_ADDR);
	load_addr = rd32(h + MBH_LOAD_ADDR);
	load_end_addr = rd32(h + MBH_LOAD_END_ADDR);
	bss_end_addr = rd32(h + MBH_BSS_END_ADDR);

	if (load_addr > header_addr)
		return fail(c, -EINVAL,
			    "multiboot load_addr %#" PRIx64 " is above header_addr %#" PRIx64,
			    load_addr, header_addr);
	if (header_addr - load_addr > off)
		return fail(c, -EINVAL,
			    "multiboot header_addr %#" PRIx64 " - load_addr %#" PRIx64
			    " is past the header's file offset %#" PRIx64,
			    header_addr, load_addr, off);
	load_off = off - (header_addr - load_addr);
	if (load_end_addr == 0) {
		filesz = c->size - load_off;
	} else {
		if (load_end_addr < load_addr)
			return fail(c, -EINVAL,
				    "multiboot load_end_addr %#" PRIx64
				    " is below load_addr %#" PRIx64,
				    load_end_addr, load_addr);
		filesz = load_end_addr - load_addr;
		if (filesz > c->size - load_off)
			return fail(c, -EINVAL,
				    "truncated image: the a.out kludge loads %#" PRIx64
				    " bytes from file offset %#" PRIx64 " but the file has %" PRIu64
				    " bytes",
				    filesz, load_off, c->size);
	}
	if (bss_end_addr == 0) {
		memsz = filesz;
	} else {
		if (bss_end_addr < load_addr + filesz)
			return fail(c, -EINVAL,
				    "multiboot bss_end_addr %#" PRIx64
				    " is below the end of the loaded text and data %#" PRIx64,
				    bss_end_addr, load_addr + filesz);
		memsz = bss_end_addr - load_addr;
	}
	if (memsz == 0)
		return fail(c, -EINVAL,
			    "multiboot a.out kludge loads nothing (load_addr %#" PRIx64 ")",
			    load_addr);

	p->what = NULL;
	p->entry = rd32(h + MBH_ENTRY_ADDR);
	p->entry_is_vaddr_ok = false;
	p->nr_segs = 1;
	p->segs[0] = (struct seg){
		.offset = load_off,
		.paddr = load_addr,
		.vaddr = load_addr,
		.filesz = filesz,
		.memsz = memsz,
	};
	return 0;
}

/*
 * Where the boot area of `len` bytes goes: 0x1000 if it fits below 640 KiB
 * and outside [busy, busy_end), else page-aligned after busy_end.
 */
static int place_boot_area(const struct ctx *c, const char *what, uint64_t len, uint64_t busy,
			   uint64_t busy_end, uint64_t limit, uint64_t *ret_addr)
{
	uint64_t low_end = c->ram->size < SZ_640K ? c->ram->size : SZ_640K;
	uint64_t addr;
	char r[32];

	if (BOOT_AREA_LOW <= low_end && len <= low_end - BOOT_AREA_LOW &&
	    !ranges_overlap(BOOT_AREA_LOW, BOOT_AREA_LOW + len, busy, busy_end)) {
		*ret_addr = BOOT_AREA_LOW;
		return 0;
	}
	if (!align_up(busy_end, PAGE_SIZE, &addr) || addr > c->ram->size || addr > limit ||
	    len > c->ram->size - addr || len > limit - addr)
		return fail(
			c, -E2BIG,
			"no room for the %s (%#" PRIx64
			" bytes): not below 640 KiB beside the kernel, nor after it at %#" PRIx64
			" in %s of RAM",
			what, len, busy_end, fmt_ram(c->ram->size, r, sizeof(r)));
	*ret_addr = addr;
	return 0;
}

static void write_segments(const struct ctx *c, const struct plan *p)
{
	for (unsigned int i = 0; i < p->nr_segs; i++) {
		const struct seg *s = &p->segs[i];
		uint8_t *dst = c->ram->base + s->paddr;

		memcpy(dst, c->img + s->offset, s->filesz);
		memset(dst + s->filesz, 0, s->memsz - s->filesz);
	}
}

static uint64_t str_size(const char *s)
{
	return s ? strlen(s) + 1 : 1;
}

/* Copies a string (NULL meaning "") into RAM and returns the next free address. */
static uint64_t put_string(const struct vmm_ram *ram, uint64_t addr, const char *s)
{
	uint64_t n = str_size(s);

	if (s)
		memcpy(ram->base + addr, s, n);
	else
		ram->base[addr] = 0;
	return addr + n;
}

/* The header's flags, then the image: the a.out kludge or a 32-bit ELF. */
static int mb_parse_image(const struct ctx *c, uint64_t off, struct plan *p)
{
	uint32_t flags = rd32(c->img + off + MBH_FLAGS);

	if (flags & MB_HF_REQUIRED & ~MB_HF_KNOWN) {
		if (flags & MB_HF_VIDEO_MODE)
			return fail(c, -ENOEXEC,
				    "multiboot header at offset %#" PRIx64
				    " requires a video mode (flags bit 2), which vpmu-vmm does not "
				    "set up",
				    off);
		return fail(c, -ENOEXEC,
			    "multiboot header at offset %#" PRIx64
			    " requires unknown features (flags %#" PRIx32 ", bits 3-15)",
			    off, flags);
	}
	if (flags & MB_HF_AOUT_KLUDGE)
		return parse_aout_kludge(c, off, p);
	if (c->size < 4 || memcmp(c->img, "\177ELF", 4))
		return fail(c, -ENOEXEC,
			    "multiboot image without the a.out kludge (flags bit 16) is not an ELF "
			    "file");
	if (c->size <= EI_CLASS || c->img[EI_CLASS] != ELFCLASS32)
		return fail(c, -ENOEXEC,
			    "multiboot image without the a.out kludge (flags bit 16) must be a "
			    "32-bit ELF (ELFCLASS32)");
	return parse_elf(c, ELFCLASS32, p);
}

/*
 * Where the modules go (each page-aligned after the kernel, ending below
 * 4 GiB: mod_end is a 32-bit field) and how large the information block
 * with every string is. Checks only: nothing is written.
 */
static int mb_plan_modules(const struct ctx *c, const struct plan *p, const char *cmdline,
			   const struct vmm_module *mods, size_t nr_mods, uint64_t *ret_blob_size,
			   uint64_t *ret_mods_end)
{
	const struct vmm_ram *ram = c->ram;
	uint64_t cursor, mods_end = p->image_end, blob_size;
	char r[32];

	if (nr_mods > MB_MAX_MODS)
		return fail(c, -E2BIG, "%zu modules, more than the %u vpmu-vmm supports", nr_mods,
			    MB_MAX_MODS);
	if (nr_mods && !mods)
		return fail(c, -EINVAL, "%zu modules but no module array", nr_mods);
	blob_size = MBI_SIZE + MMAP_MAX_ENTRIES * MMAP_ENTRY_SIZE + nr_mods * MOD_SIZE +
		    sizeof(MB_LOADER_NAME) + str_size(cmdline);
	if (!align_up(p->image_end, PAGE_SIZE, &cursor))
		return fail(c, -E2BIG, "no room for modules after the kernel");
	for (size_t i = 0; i < nr_mods; i++) {
		if (!mods[i].data && mods[i].size)
			return fail(c, -EINVAL, "module %zu has %zu bytes but no data", i,
				    mods[i].size);
		if (cursor > ram->size || mods[i].size > ram->size - cursor || cursor >= SZ_4G ||
		    mods[i].size >= SZ_4G - cursor)
			return fail(c, -E2BIG,
				    "module %zu (%zu bytes) does not fit at %#" PRIx64
				    " in %s of RAM below 4 GiB",
				    i, mods[i].size, cursor, fmt_ram(ram->size, r, sizeof(r)));
		mods_end = cursor + mods[i].size;
		if (!align_up(mods_end, PAGE_SIZE, &cursor))
			return fail(c, -E2BIG, "no room after module %zu", i);
		/* Each string is bounded by host memory; the sum by 4 GiB below. */
		if (blob_size > SZ_4G)
			break;
		blob_size += str_size(mods[i].cmdline);
	}
	if (blob_size > SZ_4G)
		return fail(c, -E2BIG,
			    "multiboot information with the command lines is over 4 GiB");
	*ret_blob_size = blob_size;
	*ret_mods_end = mods_end;
	return 0;
}

/*
 * The memory map at `mmap_addr`; how many entries. Multiboot 0.6.96, 3.3:
 * the legacy VGA/BIOS hole stays reserved below 1 MiB.
 */
static uint64_t mb_write_mmap(const struct vmm_ram *ram, uint64_t mmap_addr, uint64_t ram_low)
{
	const uint64_t map[MMAP_MAX_ENTRIES][3] = {
		{ 0, ram_low, MMAP_RAM },
		{ SZ_640K, SZ_1M - SZ_640K, MMAP_RESERVED },
		{ SZ_1M, ram->size > SZ_1M ? ram->size - SZ_1M : 0, MMAP_RAM },
	};
	uint64_t nr_mmap = 0;

	for (unsigned int i = 0; i < MMAP_MAX_ENTRIES; i++) {
		uint64_t e = mmap_addr + nr_mmap * MMAP_ENTRY_SIZE;

		if (!map[i][1])
			continue;
		wr32(ram, e + MMAP_SIZE, MMAP_ENTRY_SIZE - 4);
		wr64(ram, e + MMAP_BASE, map[i][0]);
		wr64(ram, e + MMAP_LENGTH, map[i][1]);
		wr32(ram, e + MMAP_TYPE, (uint32_t) map[i][2]);
		nr_mmap++;
	}
	return nr_mmap;
}

/* The modules' bytes after the kernel, and their entries with their strings from `str`. */
static uint64_t mb_write_modules(const struct vmm_ram *ram, const struct plan *p,
				 const struct vmm_module *mods, size_t nr_mods, uint64_t mods_addr,
				 uint64_t str)
{
	uint64_t cursor = p->image_end;

	for (size_t i = 0; i < nr_mods; i++) {
		uint64_t m = mods_addr + i * MOD_SIZE;

		align_up(cursor, PAGE_SIZE, &cursor);
		if (mods[i].size)
			memcpy(ram->base + cursor, mods[i].data, mods[i].size);
		wr32(ram, m + MOD_START, (uint32_t) cursor);
		wr32(ram, m + MOD_END, (uint32_t) (cursor + mods[i].size));
		wr32(ram, m + MOD_STRING, (uint32_t) str);
		str = put_string(ram, str, mods[i].cmdline);
		cursor += mods[i].size;
	}
	return str;
}

/* The multiboot information block at `blob` (zeroed, blob_size bytes) and what it points to. */
static void mb_write_info(const struct vmm_ram *ram, const struct plan *p, uint64_t blob,
			  uint64_t blob_size, const char *cmdline, const struct vmm_module *mods,
			  size_t nr_mods)
{
	uint64_t mmap_addr = blob + MBI_SIZE;
	uint64_t mods_addr = mmap_addr + MMAP_MAX_ENTRIES * MMAP_ENTRY_SIZE;
	uint64_t str = mods_addr + nr_mods * MOD_SIZE;
	uint64_t ram_low = ram->size < SZ_640K ? ram->size : SZ_640K, nr_mmap, upper;

	memset(ram->base + blob, 0, blob_size);
	nr_mmap = mb_write_mmap(ram, mmap_addr, ram_low);
	wr32(ram, blob + MBI_FLAGS,
	     (uint32_t) (MBI_F_MEMORY | MBI_F_CMDLINE | MBI_F_MODS | MBI_F_MMAP |
			 MBI_F_LOADER_NAME));
	wr32(ram, blob + MBI_MEM_LOWER, (uint32_t) (ram_low / SZ_1K));
	upper = ram->size > SZ_1M ? (ram->size - SZ_1M) / SZ_1K : 0;
	wr32(ram, blob + MBI_MEM_UPPER, upper > UINT32_MAX ? UINT32_MAX : (uint32_t) upper);
	wr32(ram, blob + MBI_MODS_COUNT, (uint32_t) nr_mods);
	wr32(ram, blob + MBI_MODS_ADDR, (uint32_t) mods_addr);
	wr32(ram, blob + MBI_MMAP_LENGTH, (uint32_t) (nr_mmap * MMAP_ENTRY_SIZE));
	wr32(ram, blob + MBI_MMAP_ADDR, (uint32_t) mmap_addr);

	wr32(ram, blob + MBI_BOOT_LOADER_NAME, (uint32_t) str);
	str = put_string(ram, str, MB_LOADER_NAME);
	wr32(ram, blob + MBI_CMDLINE, (uint32_t) str);
	str = put_string(ram, str, cmdline);
	mb_write_modules(ram, p, mods, nr_mods, mods_addr, str);
}

static int load_multiboot(const struct ctx *c, uint64_t off, const char *cmdline,
			  const struct vmm_module *mods, size_t nr_mods, struct vmm_boot *ret)
{
	uint64_t mods_end = 0, blob_size = 0, blob = 0, end;
	struct plan p;
	int rc;

	rc = mb_parse_image(c, off, &p);
	if (!rc)
		rc = check_segments(c, &p, SZ_4G);
	if (!rc)
		rc = mb_plan_modules(c, &p, cmdline, mods, nr_mods, &blob_size, &mods_end);
	if (!rc)
		rc = place_boot_area(c, "multiboot information", blob_size, p.image_start, mods_end,
				     SZ_4G, &blob);
	if (rc)
		return rc;

	/* Checks done: from here on nothing fails. */
	write_segments(c, &p);
	mb_write_info(c->ram, &p, blob, blob_size, cmdline, mods, nr_mods);
	end = blob + blob_size;
	*ret = (struct vmm_boot){
		.kind = VMM_BOOT_MULTIBOOT,
		.entry = p.entry,
		.mb_info = (uint32_t) blob,
		.image_start = p.image_start,
		.image_end = p.image_end,
		.free_start = end > mods_end ? end : mods_end,
	};
	return 0;
}

static int load_elf64(const struct ctx *c, struct vmm_boot *ret)
{
	const struct vmm_ram *ram = c->ram;
	uint64_t nr_pd, nr_2m, area_size, area, pml4, pdpt, pd, end;
	struct plan p;
	int rc;

	rc = parse_elf(c, ELFCLASS64, &p);
	if (rc)
		return rc;
	rc = check_segments(c, &p, UINT64_MAX);
	if (rc)
		return rc;

	/* One PDPT maps 512 GiB with 2 MiB pages; RAM is already known to hold the segments. */
	if (ram->size > (uint64_t) PT_ENTRIES * SZ_1G)
		return fail(c, -E2BIG,
			    "%" PRIu64
			    " GiB of RAM is more than the 512 GiB the ELF64 identity map covers",
			    ram->size / SZ_1G);
	nr_2m = (ram->size + SZ_2M - 1) / SZ_2M;
	nr_pd = (nr_2m + PT_ENTRIES - 1) / PT_ENTRIES;
	area_size = E64_PD_OFF + nr_pd * PAGE_SIZE;
	rc = place_boot_area(c, "ELF64 stack, GDT and page tables", area_size, p.image_start,
			     p.image_end, UINT64_MAX, &area);
	if (rc)
		return rc;

	/* Checks done: from here on nothing fails. */
	write_segments(c, &p);
	memset(ram->base + area, 0, area_size);

	wr64(ram, area + E64_GDT_OFF + 0x08, GDT_CODE64);
	wr64(ram, area + E64_GDT_OFF + 0x10, GDT_DATA);

	pml4 = area + E64_PML4_OFF;
	pdpt = area + E64_PDPT_OFF;
	pd = area + E64_PD_OFF;
	wr64(ram, pml4, pdpt | PTE_P | PTE_RW);
	for (uint64_t i = 0; i < nr_pd; i++)
		wr64(ram, pdpt + i * 8, (pd + i * PAGE_SIZE) | PTE_P | PTE_RW);
	/* The PDs are contiguous, so 2 MiB page i is entry i counted from the first. */
	for (uint64_t i = 0; i < nr_2m; i++)
		wr64(ram, pd + i * 8, i * SZ_2M | PTE_P | PTE_RW | PTE_PS);

	end = area + area_size;
	*ret = (struct vmm_boot){
		.kind = VMM_BOOT_ELF64,
		.entry = p.entry,
		.cr3 = pml4,
		.gdt = area + E64_GDT_OFF,
		.stack = area + E64_STACK_SIZE,
		.image_start = p.image_start,
		.image_end = p.image_end,
		.free_start = end > p.image_end ? end : p.image_end,
	};
	return 0;
}

/*
 * Multiboot 0.6.96, 3.1.2: the header is 4-byte aligned and lies within
 * the first 8192 bytes. Returns the offset of the first one whose checksum
 * holds, or -1; *ret_bad is the offset of the first magic with a bad
 * checksum, or -1.
 */
static int64_t find_multiboot(const uint8_t *img, uint64_t size, int64_t *ret_bad)
{
	int64_t bad = -1;

	for (uint64_t off = 0; off + 12 <= size && off + 12 <= MB_SEARCH_END; off += 4) {
		const uint8_t *h = img + off;
		uint32_t magic = rd32(h + MBH_MAGIC);

		if (magic != MB_HEADER_MAGIC)
			continue;
		if ((uint32_t) (magic + rd32(h + MBH_FLAGS) + rd32(h + MBH_CHECKSUM)) == 0) {
			*ret_bad = bad;
			return (int64_t) off;
		}
		if (bad < 0)
			bad = (int64_t) off;
	}
	*ret_bad = bad;
	return -1;
}

int vmm_load_kernel(const struct vmm_ram *ram, const void *image, size_t size, const char *cmdline,
		    const struct vmm_module *mods, size_t nr_mods, struct vmm_boot *ret, char *err,
		    size_t errlen)
{
	const struct ctx c = {
		.ram = ram,
		.img = image,
		.size = size,
		.err = err,
		.errlen = errlen,
	};
	struct vmm_boot boot;
	int64_t mb, bad;
	bool is_elf;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!ram || !ram->base || !ram->size || !ret || (!image && size))
		return fail(&c, -EINVAL, "vmm_load_kernel: no RAM, no image or no result to fill");

	is_elf = size >= 4 && !memcmp(image, "\177ELF", 4);
	mb = find_multiboot(image, size, &bad);
	if (mb >= 0) {
		rc = load_multiboot(&c, (uint64_t) mb, cmdline, mods, nr_mods, &boot);
	} else if (is_elf && size < EI_NIDENT) {
		rc = fail(&c, -EINVAL,
			  "truncated image: ELF identification needs %d bytes but the file has %zu",
			  EI_NIDENT, size);
	} else if (is_elf && c.img[EI_CLASS] == ELFCLASS64) {
		rc = load_elf64(&c, &boot);
	} else if (bad >= 0) {
		rc = fail(&c, -ENOEXEC,
			  "multiboot header at offset %#" PRIx64
			  " has a bad checksum (magic + flags + checksum != 0)",
			  (uint64_t) bad);
	} else if (is_elf && c.img[EI_CLASS] == ELFCLASS32) {
		rc = fail(&c, -ENOEXEC,
			  "32-bit ELF without a multiboot header in the first 8 KiB: vpmu-vmm "
			  "boots 32-bit kernels only through multiboot");
	} else if (is_elf) {
		rc = fail(&c, -ENOEXEC,
			  "ELF image of unknown class %u (neither ELFCLASS32 nor ELFCLASS64)",
			  c.img[EI_CLASS]);
	} else {
		rc = fail(&c, -ENOEXEC,
			  "not a kernel: no ELF magic and no multiboot header in the first 8 KiB");
	}
	if (rc)
		return rc;
	*ret = boot;
	return 0;
}
