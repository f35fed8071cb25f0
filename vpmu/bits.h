/* SPDX-License-Identifier: MIT */
/*
 * Register helpers. Masks, never C bitfields: bitfield layout is the
 * compiler's choice, an MSR layout is the SDM's.
 */
#ifndef VPMU_BITS_H
#define VPMU_BITS_H

#include <stdint.h>

#define BIT_ULL(n) (1ULL << (n))
/* Bits h..l inclusive, h >= l, h <= 63. */
#define GENMASK_ULL(h, l) ((~0ULL >> (63 - (h))) & (~0ULL << (l)))
/* Low n bits, n in 0..64. */
static inline uint64_t lowmask_ull(unsigned int n)
{
	return n >= 64 ? ~0ULL : (1ULL << n) - 1;
}

/* Shift of the lowest set bit of a non-zero mask. */
#define MASK_SHIFT(mask)    ((unsigned int) __builtin_ctzll(mask))
#define FIELD_GET(mask, v)  (((uint64_t) (v) & (mask)) >> MASK_SHIFT(mask))
#define FIELD_PREP(mask, v) (((uint64_t) (v) << MASK_SHIFT(mask)) & (mask))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Sign-extend the low `bits` bits of v. */
static inline uint64_t sign_extend64(uint64_t v, unsigned int bits)
{
	unsigned int shift = 64 - bits;

	return (uint64_t) ((int64_t) (v << shift) >> shift);
}

/* Canonical for a linear-address width of `bits` (48 or 57). */
static inline int is_canonical(uint64_t addr, unsigned int bits)
{
	return sign_extend64(addr, bits) == addr;
}

#endif
