/* SPDX-License-Identifier: MIT */
/*
 * The guest page walk libvpmu writes PEBS records with, for a VMM's own
 * use (an emulator's MMU, reading the guest's DS area): guest-linear ->
 * guest-physical through the guest's own page tables (every x86 paging
 * mode), then guest-physical -> host pointer, strictly inside the guest
 * RAM the VMM registered. Optional for embedders.
 */
#ifndef VPMU_WALK_H_PUBLIC
#define VPMU_WALK_H_PUBLIC

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vpmu/vpmu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Guest RAM for the walk: host mappings of guest-physical ranges. Immutable once made. */
struct vpmu_guest_memory;

/*
 * Copy `regions` (they must not overlap or wrap). -EINVAL: overlapping,
 * wrapping or empty regions, NULL arguments; -ENOMEM.
 */
VPMU_API int vpmu_guest_memory_new(const struct vpmu_mem_region *regions, size_t nr,
				   struct vpmu_guest_memory **ret_mem);
VPMU_API void vpmu_guest_memory_free(struct vpmu_guest_memory *mem);

/*
 * Host pointer to guest-physical [gpa, gpa + len) if all of it lies in
 * one region, else NULL (len 0 counts as 1; never wraps).
 */
VPMU_API void *vpmu_guest_memory_ptr(const struct vpmu_guest_memory *mem, uint64_t gpa,
				     uint64_t len);

/*
 * The guest's paging registers at the time of the access: they select
 * the mode (none, 32-bit, PAE, 4- and 5-level). A frozen layout: x86
 * paging is these four registers.
 */
struct vpmu_paging {
	uint64_t cr0, cr3, cr4, efer;
};

/* vpmu_walk_*() flags */
#define VPMU_WALK_WRITE		      (1u << 0) /* a write: R/W needed where CR0.WP or CPL 3 say */
#define VPMU_WALK_USER		      (1u << 1) /* a CPL-3 access: U/S needed at every level */
#define VPMU_WALK_IMPLICIT_SUPERVISOR (1u << 2) /* e.g. a PEBS/DS write: SMAP applies */
#define VPMU_WALK_SET_AD	      (1u << 3) /* set Accessed (and Dirty) bits as hardware */

/* A translation. Grows at its end: vpmu_walk_translate() takes sizeof(*ret). */
struct vpmu_walk_result {
	uint64_t gpa;	    /* guest-physical address of the linear one */
	uint64_t page_size; /* 4 KiB, 2 MiB, 4 MiB (32-bit PSE) or 1 GiB; no paging: 4 KiB */
	uint64_t len;	    /* bytes from the address to the end of its page */
	bool writable;	    /* R/W over all levels */
	bool user;	    /* U/S over all levels */
	bool nx;	    /* XD over all levels (with EFER.NXE) */
	/*
	 * G (bit 8) set in the entry that maps the page, with CR4.PGE set:
	 * a global page, whose TLB entry a MOV to CR3 keeps (SDM Vol. 3A
	 * 4.10.2.4, 4.10.4.1).
	 */
	bool global;
};

/*
 * Translate `gla` as the guest's MMU would for an access of kind `flags`
 * (VPMU_WALK_*), reading every paging-structure entry from `mem`. 0 and
 * *ret filled (`size` bytes: sizeof(*ret)); -EFAULT: not canonical, not
 * present, a reserved bit set, or a table or the page outside `mem`;
 * -EACCES: present, but this access is not allowed; -EINVAL: bad
 * arguments.
 */
VPMU_API int vpmu_walk_translate(const struct vpmu_guest_memory *mem, const struct vpmu_paging *p,
				 uint64_t gla, unsigned int flags, struct vpmu_walk_result *ret,
				 size_t size);

/*
 * Copy `len` bytes from / to guest-linear `gla`, page by page. Every page
 * is translated and checked first: on any error nothing is copied and
 * the first failing page's error is returned (as vpmu_walk_translate).
 */
VPMU_API int vpmu_walk_read(const struct vpmu_guest_memory *mem, const struct vpmu_paging *p,
			    uint64_t gla, void *dst, size_t len, unsigned int flags);
VPMU_API int vpmu_walk_write(const struct vpmu_guest_memory *mem, const struct vpmu_paging *p,
			     uint64_t gla, const void *src, size_t len, unsigned int flags);

#ifdef __cplusplus
}
#endif

#endif
