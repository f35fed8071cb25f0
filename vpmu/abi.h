/* SPDX-License-Identifier: MIT */
/*
 * The sizes of the public structs as the VPMU_0.1 header had them, and
 * copying a caller's struct of any size in and out (see "ABI" at the top
 * of vpmu/vpmu.h). When a field is appended to one of these structs,
 * its assertion below becomes offsetof(that field) == the 0.1 size: the
 * 0.1 size never changes.
 */
#ifndef VPMU_ABI_H
#define VPMU_ABI_H

#include <stddef.h>

#include "vpmu/vpmu.h"

#define CONFIG_SIZE_V01	      offsetof(struct vpmu_config, regs_size)
#define REGS_SIZE_V01	      ((size_t) 448)
#define EXACT_COUNTS_SIZE_V01 ((size_t) 136)
#define STATS_SIZE_V01	      ((size_t) 1224)
_Static_assert(sizeof(struct vpmu_guest_regs) == REGS_SIZE_V01, "vpmu_guest_regs: see above");
_Static_assert(sizeof(struct vpmu_exact_counts) == EXACT_COUNTS_SIZE_V01,
	       "vpmu_exact_counts: see above");
_Static_assert(offsetof(struct vpmu_stats, time_discarded) == STATS_SIZE_V01,
	       "vpmu_stats: see above");
/* the oldest config vpmu_vcpu_new() takes ends before `filter` */
#define CONFIG_SIZE_MIN offsetof(struct vpmu_config, filter)
/* a regs struct this large is a mistake, not a newer header */
#define REGS_SIZE_MAX ((size_t) 65536)

/* Whether a caller's struct of `size` bytes holds all of field `f` of `type`. */
#define ABI_HAS(type, size, f) ((size) >= offsetof(type, f) + sizeof(((type *) 0)->f))

/*
 * A caller's input struct of `size` bytes into the library's `dst` of
 * `dst_size`: fields the caller does not have read 0. -E2BIG when the
 * caller's struct is larger and a byte the library does not know is set.
 */
int abi_copy_in(void *dst, size_t dst_size, const void *src, size_t size);
/* The library's `src` into the caller's `size` bytes at `dst`; the rest of dst zeroed. */
void abi_copy_out(void *dst, size_t size, const void *src, size_t src_size);
/* Whether the bytes of `p` from `from` to `size` are all zero. */
int abi_tail_is_zero(const void *p, size_t from, size_t size);

#endif
