/* SPDX-License-Identifier: MIT */
/*
 * Guest memory and the guest page walk: guest-linear -> guest-physical
 * through the guest's own page tables, then guest-physical -> host
 * pointer, strictly inside the RAM regions the VMM registered. Used by
 * the PEBS writer and by the emulator's paging (vmm-glue). Private.
 */
#ifndef VPMU_WALK_H
#define VPMU_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One contiguous range of guest RAM, host-mapped at hva. */
struct guest_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;
};

struct guest_mem {
	const struct guest_region *regions; /* sorted by gpa, non-overlapping */
	size_t nr;
};

/*
 * Host pointer to [gpa, gpa + len) if that whole range lies inside one
 * region, else NULL. len 0 is treated as 1. Never wraps.
 */
void *guest_mem_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len);

/* The guest's paging state at the time of the access. */
struct walk_paging {
	uint64_t cr0, cr3, cr4, efer;
};

/* walk_translate() flags */
#define WALK_WRITE		 (1u << 0) /* a write: needs R/W where CR0.WP or CPL 3 says so */
#define WALK_USER		 (1u << 1) /* a CPL-3 access: needs U/S on every level */
#define WALK_IMPLICIT_SUPERVISOR (1u << 2) /* e.g. a PEBS/DS write: SMAP applies to user pages */
#define WALK_SET_AD		 (1u << 3) /* set Accessed (and Dirty for writes) bits like hardware */
#define WALK_ALL_FLAGS		 (WALK_WRITE | WALK_USER | WALK_IMPLICIT_SUPERVISOR | WALK_SET_AD)

struct walk_result {
	uint64_t gpa;	    /* translation of the linear address */
	uint64_t page_size; /* 4 KiB, 2 MiB, 4 MiB (non-PAE PSE) or 1 GiB; paging off: 4 KiB */
	uint64_t len;	    /* bytes from the linear address to the end of its page */
	bool writable;	    /* effective R/W over all levels */
	bool user;	    /* effective U/S over all levels */
	bool nx;	    /* effective XD (only with EFER.NXE) */
	bool global; /* G in the entry that maps the page, with CR4.PGE: a MOV to CR3 keeps it */
};

/*
 * Translate `gla` per the paging mode CR0.PG/CR4.PAE/EFER.LMA/CR4.LA57/
 * CR4.PSE select: no paging, 32-bit (4 KiB / 4 MiB pages), PAE (4 KiB /
 * 2 MiB), 4-level and 5-level (4 KiB / 2 MiB / 1 GiB). Every paging-
 * structure entry is read through guest_mem_ptr(). Returns 0, -EFAULT
 * (non-canonical, not present, reserved bit set, or a table / the page
 * outside guest RAM) or -EACCES (present but the access is not allowed).
 */
int walk_translate(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		   unsigned int flags, struct walk_result *ret);

/*
 * Copy `len` bytes to/from guest-linear `gla`, split at page boundaries.
 * Every page is translated and bounds-checked first; on any failure
 * nothing is written and the error of the first failing page is returned.
 */
int walk_write(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
	       const void *src, size_t len, unsigned int flags);
int walk_read(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla, void *dst,
	      size_t len, unsigned int flags);

/*
 * A validated translation cache for walk_write_cached/walk_read_cached:
 * a hit re-reads every paging-structure entry the cached walk used and
 * compares it with what that walk left there (A/D included), so it is
 * exactly the translation a fresh walk would give now -- the guest's
 * tables at the time of the access, not a TLB that needs flushing --
 * for a few loads instead of a walk. Long-mode and 32-bit paging only
 * (PAE PDPTEs have no A bit and are not traced). One owner thread; reset
 * it whenever the guest_mem regions change.
 */
#define WALK_CACHE_LINES  16 /* a 64 KiB PEBS buffer (Linux's) and the DS page */
#define WALK_CACHE_LEVELS 5

struct walk_cache_line {
	uint64_t tag;	       /* page of the gla | walk flags; 0: empty */
	uint8_t *hva;	       /* host address of the 4 KiB page */
	unsigned int nr, size; /* traced entries and their width */
	void *entry[WALK_CACHE_LEVELS];
	uint64_t value[WALK_CACHE_LEVELS];
};

/*
 * Every line was walked with the paging registers in p: a lookup compares
 * them once, not per line, and a change of CR0/CR3/CR4/EFER empties all
 * lines. An empty cache holds CR0 = ~0, which no guest can have.
 */
struct walk_cache {
	struct walk_paging p;
	struct walk_cache_line line[WALK_CACHE_LINES];
};

void walk_cache_reset(struct walk_cache *c);

/*
 * walk_write_cached/walk_read_cached: walk_write/walk_read through the
 * cache. The hit on one page is inline, so that the PEBS writer's common
 * case costs the paging-register compare, the entry loads and the copy;
 * everything else (two pages, a miss, a fault) is the *_miss call.
 */
int walk_write_miss(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		    const void *src, size_t len, unsigned int flags, struct walk_cache *c);
int walk_read_miss(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		   void *dst, size_t len, unsigned int flags, struct walk_cache *c);

#define WALK_PAGE_SIZE 4096u

static inline struct walk_cache_line *walk_cache_line_of(struct walk_cache *c, uint64_t gla)
{
	return &c->line[(gla / WALK_PAGE_SIZE) % WALK_CACHE_LINES];
}

/*
 * A line's tag: the page of the gla, the walk flags in the offset bits,
 * and bit 11 always set so that no tag is 0, the empty line's.
 */
#define WALK_TAG_IN_USE (1u << 11)
_Static_assert(WALK_ALL_FLAGS < WALK_TAG_IN_USE, "walk flags fit below the tag's in-use bit");

static inline uint64_t walk_cache_tag(uint64_t gla, unsigned int flags)
{
	return (gla & ~(uint64_t) (WALK_PAGE_SIZE - 1)) | WALK_TAG_IN_USE | flags;
}

static inline bool walk_same_paging(const struct walk_paging *a, const struct walk_paging *b)
{
	return a->cr3 == b->cr3 && a->cr0 == b->cr0 && a->cr4 == b->cr4 && a->efer == b->efer;
}

/*
 * Host address of gla if the cached walk is still what the tables say:
 * every entry it used re-read (aligned at fill: single loads) and equal.
 * The caller has checked that the cache's paging registers are the
 * guest's.
 */
static inline uint8_t *walk_cache_lookup(struct walk_cache *c, uint64_t gla, unsigned int flags)
{
	const struct walk_cache_line *l = walk_cache_line_of(c, gla);
	uint64_t diff = 0;

	if (l->tag != walk_cache_tag(gla, flags))
		return NULL;
	if (l->size == 8 && l->nr == 4) {
		/* 4-level paging, 4 KiB page: the common case, unrolled */
		diff = (__atomic_load_n((const uint64_t *) l->entry[0], __ATOMIC_RELAXED) ^
			l->value[0]) |
		       (__atomic_load_n((const uint64_t *) l->entry[1], __ATOMIC_RELAXED) ^
			l->value[1]) |
		       (__atomic_load_n((const uint64_t *) l->entry[2], __ATOMIC_RELAXED) ^
			l->value[2]) |
		       (__atomic_load_n((const uint64_t *) l->entry[3], __ATOMIC_RELAXED) ^
			l->value[3]);
	} else if (l->size == 8) {
		for (unsigned int i = 0; i < l->nr; i++)
			diff |= __atomic_load_n((const uint64_t *) l->entry[i], __ATOMIC_RELAXED) ^
				l->value[i];
	} else {
		for (unsigned int i = 0; i < l->nr; i++)
			diff |= __atomic_load_n((const uint32_t *) l->entry[i], __ATOMIC_RELAXED) ^
				l->value[i];
	}
	return diff ? NULL : l->hva + (gla & (WALK_PAGE_SIZE - 1));
}

/* Host address of [gla, gla + len) when it lies in one page whose cached walk holds; else NULL. */
static inline uint8_t *walk_cached_one_page(struct walk_cache *c, const struct walk_paging *p,
					    uint64_t gla, size_t len, unsigned int flags)
{
	if (!c || (flags & ~WALK_ALL_FLAGS) || !len ||
	    len > WALK_PAGE_SIZE - (gla & (WALK_PAGE_SIZE - 1)) || !walk_same_paging(&c->p, p))
		return NULL;
	return walk_cache_lookup(c, gla, flags);
}

static inline int walk_write_cached(const struct guest_mem *mem, const struct walk_paging *p,
				    uint64_t gla, const void *src, size_t len, unsigned int flags,
				    struct walk_cache *c)
{
	uint8_t *hva = walk_cached_one_page(c, p, gla, len, flags | WALK_WRITE);

	if (!hva)
		return len ? walk_write_miss(mem, p, gla, src, len, flags | WALK_WRITE, c) : 0;
	memmove(hva, src, len); /* memmove: src may itself be guest RAM */
	return 0;
}

static inline int walk_read_cached(const struct guest_mem *mem, const struct walk_paging *p,
				   uint64_t gla, void *dst, size_t len, unsigned int flags,
				   struct walk_cache *c)
{
	uint8_t *hva = walk_cached_one_page(c, p, gla, len, flags & ~WALK_WRITE);

	if (!hva)
		return len ? walk_read_miss(mem, p, gla, dst, len, flags & ~WALK_WRITE, c) : 0;
	memmove(dst, hva, len);
	return 0;
}

#endif
