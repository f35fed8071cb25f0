/* SPDX-License-Identifier: MIT */
/*
 * Register helpers inside the library: the kernel's short names for the
 * public vpmu/bits.h macros, plus a few private ones. Masks, never C
 * bitfields: bitfield layout is the compiler's choice, an MSR layout is
 * the SDM's.
 */
#ifndef VPMU_BITS_H
#define VPMU_BITS_H

#include <stdint.h>

#include "vpmu/bits.h"

#define BIT_ULL(n)	    VPMU_BIT_ULL(n)
#define GENMASK_ULL(h, l)   VPMU_GENMASK_ULL(h, l)
#define FIELD_GET(mask, v)  VPMU_FIELD_GET(mask, v)
#define FIELD_PREP(mask, v) VPMU_FIELD_PREP(mask, v)

/* Low n bits, n in 0..64. */
static inline uint64_t lowmask_ull(unsigned int n)
{
	return n >= 64 ? ~0ULL : (1ULL << n) - 1;
}

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
