/* SPDX-License-Identifier: MIT */
/*
 * Register field helpers for the layouts in vpmu/msr.h and vpmu/pebs.h:
 * masks, never C bitfields (bitfield layout is the compiler's choice, a
 * register's is the SDM's). Portable C99 and C++; constant expressions
 * for constant arguments. Prefixed, so that they never collide with an
 * embedder's own BIT()/GENMASK().
 */
#ifndef VPMU_BITS_H_PUBLIC
#define VPMU_BITS_H_PUBLIC

#include <stdint.h>

#define VPMU_BIT_ULL(n) ((uint64_t) 1 << (n))
/* Bits h..l inclusive, 63 >= h >= l. */
#define VPMU_GENMASK_ULL(h, l) ((~(uint64_t) 0 >> (63 - (h))) & (~(uint64_t) 0 << (l)))
/* The lowest set bit of a non-zero mask, as a value. */
#define VPMU_MASK_LSB(mask) ((uint64_t) (mask) & (~(uint64_t) (mask) + 1))
/* The field `mask` of `v`, shifted down; `v` shifted into field `mask`. */
#define VPMU_FIELD_GET(mask, v)	 (((uint64_t) (v) & (uint64_t) (mask)) / VPMU_MASK_LSB(mask))
#define VPMU_FIELD_PREP(mask, v) (((uint64_t) (v) *VPMU_MASK_LSB(mask)) & (uint64_t) (mask))

#endif
