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

/* One contiguous range of guest RAM, host-mapped at hva. */
struct guest_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;
};

struct guest_mem {
	const struct guest_region *regions;	/* sorted by gpa, non-overlapping */
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
#define WALK_WRITE		(1u << 0)	/* a write: needs R/W where CR0.WP or CPL 3 says so */
#define WALK_USER		(1u << 1)	/* a CPL-3 access: needs U/S on every level */
#define WALK_IMPLICIT_SUPERVISOR (1u << 2)	/* e.g. a PEBS/DS write: SMAP applies to user pages */
#define WALK_SET_AD		(1u << 3)	/* set Accessed (and Dirty for writes) bits like hardware */

struct walk_result {
	uint64_t gpa;		/* translation of the linear address */
	uint64_t page_size;	/* 4 KiB, 2 MiB, 4 MiB (non-PAE PSE) or 1 GiB; paging off: 4 KiB */
	uint64_t len;		/* bytes from the linear address to the end of its page */
	bool writable;		/* effective R/W over all levels */
	bool user;		/* effective U/S over all levels */
	bool nx;		/* effective XD (only with EFER.NXE) */
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
int walk_read(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
	      void *dst, size_t len, unsigned int flags);

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
#define WALK_CACHE_LINES	16	/* a 64 KiB PEBS buffer (Linux's) and the DS page */
#define WALK_CACHE_LEVELS	5

struct walk_cache_line {
	bool valid;
	unsigned int flags;
	unsigned int nr, size;			/* traced entries and their width */
	uint64_t page;				/* gla >> 12 */
	struct walk_paging p;
	uint8_t *hva;				/* host address of the 4 KiB page */
	void *entry[WALK_CACHE_LEVELS];
	uint64_t value[WALK_CACHE_LEVELS];
};

struct walk_cache {
	struct walk_cache_line line[WALK_CACHE_LINES];
};

void walk_cache_reset(struct walk_cache *c);
int walk_write_cached(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		      const void *src, size_t len, unsigned int flags, struct walk_cache *c);
int walk_read_cached(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		     void *dst, size_t len, unsigned int flags, struct walk_cache *c);

#endif
