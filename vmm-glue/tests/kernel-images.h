/* SPDX-License-Identifier: MIT */
/*
 * Kernel image builders for the loader tests and the fuzz-loader seed
 * tool (fuzz/loader-seeds.c): ELF64, ELF32-with-multiboot-header and
 * a.out-kludge multiboot images, built into `img` (IMG_CAP bytes, the
 * includer's), so each test states exactly which bytes go where. Every
 * function is static: each includer gets its own copy. KI_CHECK(cond)
 * is what a builder does when asked for an image that does not fit
 * (default: abort; the tests make it a Criterion assertion).
 */
#ifndef VPMU_TEST_KERNEL_IMAGES_H
#define VPMU_TEST_KERNEL_IMAGES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef KI_CHECK
#define KI_CHECK(cond)                                                                             \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)
#endif

#define MB_MAGIC 0x1BADB002U
#define PT_LOAD	 1
#define PT_NOTE	 4
#define IMG_CAP	 (1u << 20)

static uint8_t *img;

/* --- little-endian accessors -------------------------------------------- */

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t) v);
	put32(p + 4, (uint32_t) (v >> 32));
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
	       (uint32_t) p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t) get32(p) | (uint64_t) get32(p + 4) << 32;
}

/* --- image builders ------------------------------------------------------ */

struct tseg {
	uint64_t paddr;
	uint64_t vaddr; /* 0: same as paddr */
	uint64_t filesz;
	uint64_t memsz;
	uint32_t type;	 /* 0: PT_LOAD */
	uint64_t offset; /* filled in by the builder */
};

/* Bytes at the start of segment 0 that the multiboot header replaced. */
static uint64_t pat_skip0;

static inline uint8_t pat(unsigned int seg, uint64_t i)
{
	return (uint8_t) (0x11 * (seg + 1) + i * 7 + (i >> 8));
}

static inline void mb_header(uint8_t *p, uint32_t flags)
{
	put32(p, MB_MAGIC);
	put32(p + 4, flags);
	put32(p + 8, (uint32_t) - (MB_MAGIC + flags));
}

/*
 * ELF executable: header, program headers, then each segment's file bytes
 * (a pattern) in order; the file ends exactly where the last segment's
 * bytes end, so every shorter prefix is a truncated image. With
 * mb_flags >= 0 a multiboot header starts the first segment's bytes.
 */
static inline size_t build_elf(bool is64, uint64_t entry, struct tseg *segs, unsigned int n,
			       int64_t mb_flags)
{
	size_t ehsz = is64 ? 64 : 52, phsz = is64 ? 56 : 32;
	size_t off = ehsz + n * phsz;

	memset(img, 0, IMG_CAP);
	memcpy(img, "\177ELF", 4);
	img[4] = is64 ? 2 : 1;
	img[5] = 1;
	img[6] = 1;
	put16(img + 16, 2);
	put16(img + 18, is64 ? 62 : 3);
	put32(img + 20, 1);
	if (is64) {
		put64(img + 24, entry);
		put64(img + 32, ehsz);
		put16(img + 52, 64);
		put16(img + 54, 56);
		put16(img + 56, (uint16_t) n);
	} else {
		put32(img + 24, (uint32_t) entry);
		put32(img + 28, (uint32_t) ehsz);
		put16(img + 40, 52);
		put16(img + 42, 32);
		put16(img + 44, (uint16_t) n);
	}
	for (unsigned int i = 0; i < n; i++) {
		struct tseg *s = &segs[i];
		uint8_t *ph = img + ehsz + i * phsz;
		uint64_t vaddr = s->vaddr ? s->vaddr : s->paddr;

		off = (off + 15) & ~(size_t) 15;
		s->offset = off;
		KI_CHECK(off + s->filesz <= IMG_CAP);
		for (uint64_t j = 0; j < s->filesz; j++)
			img[off + j] = pat(i, j);
		if (is64) {
			put32(ph, s->type ? s->type : PT_LOAD);
			put32(ph + 4, 7);
			put64(ph + 8, s->offset);
			put64(ph + 16, vaddr);
			put64(ph + 24, s->paddr);
			put64(ph + 32, s->filesz);
			put64(ph + 40, s->memsz);
			put64(ph + 48, 0x1000);
		} else {
			put32(ph, s->type ? s->type : PT_LOAD);
			put32(ph + 4, (uint32_t) s->offset);
			put32(ph + 8, (uint32_t) vaddr);
			put32(ph + 12, (uint32_t) s->paddr);
			put32(ph + 16, (uint32_t) s->filesz);
			put32(ph + 20, (uint32_t) s->memsz);
			put32(ph + 24, 7);
			put32(ph + 28, 0x1000);
		}
		off += s->filesz;
	}
	pat_skip0 = 0;
	if (mb_flags >= 0) {
		KI_CHECK(segs[0].filesz >= 12);
		mb_header(img + segs[0].offset, (uint32_t) mb_flags);
		pat_skip0 = 12;
	}
	return off;
}

struct aout {
	uint32_t load_addr;
	uint32_t text; /* bytes loaded from the file, from offset 0 */
	uint32_t bss;
	uint32_t entry_off;
	uint32_t hdr_off; /* where the multiboot header sits in the file */
};

#define AOUT_HDR_OFF 16

/* An a.out-kludge image: header at a.hdr_off, loaded from file offset 0. */
static inline size_t build_aout(const struct aout *a, uint32_t extra_flags)
{
	uint8_t *h = img + a->hdr_off;
	uint32_t load_end = a->load_addr + a->text;

	memset(img, 0, IMG_CAP);
	for (uint32_t i = 0; i < a->text; i++)
		img[i] = pat(0, i);
	mb_header(h, (1u << 16) | extra_flags);
	put32(h + 12, a->load_addr + a->hdr_off);
	put32(h + 16, a->load_addr);
	put32(h + 20, load_end);
	put32(h + 24, a->bss ? load_end + a->bss : 0);
	put32(h + 28, a->load_addr + a->entry_off);
	return a->text;
}

/* --- the canned images the tests start from ------------------------------ */

static struct tseg e64_segs[2];

static inline size_t good_elf64(void)
{
	e64_segs[0] = (struct tseg){ .paddr = 0x200000, .filesz = 0x1234, .memsz = 0x3000 };
	e64_segs[1] = (struct tseg){ .paddr = 0x400000, .filesz = 0x100, .memsz = 0x100 };
	return build_elf(true, 0x200010, e64_segs, 2, -1);
}

static struct tseg e32_segs[2];

static inline size_t good_elf32_mb(int64_t flags)
{
	e32_segs[0] = (struct tseg){ .paddr = 0x100000, .filesz = 0x800, .memsz = 0x800 };
	e32_segs[1] = (struct tseg){ .paddr = 0x102000, .filesz = 0x123, .memsz = 0x2345 };
	return build_elf(false, 0x100020, e32_segs, 2, flags);
}

static const struct aout good_aout_desc = {
	.load_addr = 0x100000,
	.text = 0x1800,
	.bss = 0x2100,
	.entry_off = 0x40,
	.hdr_off = AOUT_HDR_OFF,
};

#endif
