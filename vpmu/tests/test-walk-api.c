/* SPDX-License-Identifier: MIT */
/*
 * The public guest page walk (vpmu/walk.h), as a VMM uses it: guest RAM
 * in two regions, 4-level tables built here by hand (SDM Vol. 3A 4.5:
 * PML4E/PDPTE/PDE/PTE, P bit 0, R/W bit 1, U/S bit 2, A bit 5, D bit 6),
 * a translation, a read and a write across a page boundary into pages
 * far apart physically, and the errors.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "vpmu/walk.h"

#define P  (1ULL << 0)
#define RW (1ULL << 1)
#define US (1ULL << 2)
#define A  (1ULL << 5)
#define D  (1ULL << 6)
#define G  (1ULL << 8)

static uint8_t low[1 << 20], high[1 << 16]; /* GPA 0 and GPA 0x40000000 */

static void set(uint64_t gpa, uint64_t v)
{
	memcpy(gpa >= 0x40000000 ? high + gpa - 0x40000000 : low + gpa, &v, 8);
}

static uint64_t get(uint64_t gpa)
{
	uint64_t v;

	memcpy(&v, gpa >= 0x40000000 ? high + gpa - 0x40000000 : low + gpa, 8);
	return v;
}

/* LA 0x7f0000001000 -> GPA 0x5000 (R/W), LA +0x1000 -> GPA 0x40001000 (read-only) */
#define LA 0x7f0000001000ULL

static struct vpmu_paging tables(void)
{
	uint64_t pml4 = 0x1000, pdpt = 0x2000, pd = 0x3000, pt = 0x4000;

	memset(low, 0, sizeof(low));
	memset(high, 0, sizeof(high));
	set(pml4 + 8 * ((LA >> 39) & 0x1ff), pdpt | P | RW | US);
	set(pdpt + 8 * ((LA >> 30) & 0x1ff), pd | P | RW | US);
	set(pd + 8 * ((LA >> 21) & 0x1ff), pt | P | RW | US);
	set(pt + 8 * ((LA >> 12) & 0x1ff), 0x5000 | P | RW | US);
	set(pt + 8 * (((LA >> 12) + 1) & 0x1ff), 0x40001000 | P | US);
	/* CR0.PG|PE, CR4.PAE, EFER.LME|LMA: 4-level paging */
	return (struct vpmu_paging){ .cr0 = (1ULL << 31) | 1,
				     .cr3 = pml4,
				     .cr4 = 1ULL << 5,
				     .efer = (1ULL << 8) | (1ULL << 10) };
}

static struct vpmu_guest_memory *memory(void)
{
	struct vpmu_mem_region r[2] = {
		{ .gpa = 0x40000000, .size = sizeof(high), .hva = high },
		{ .gpa = 0, .size = sizeof(low), .hva = low },
	};
	struct vpmu_guest_memory *m = NULL;

	cr_assert_eq(vpmu_guest_memory_new(r, 2, &m), 0);
	return m;
}

/* G in the PTE makes a global page only with CR4.PGE (bit 7), SDM Vol. 3A 4.10.2.4 */
Test(walk_api, global)
{
	struct vpmu_paging p = tables();
	struct vpmu_guest_memory *m = memory();
	uint64_t pte = 0x4000 + 8 * ((LA >> 12) & 0x1ff);
	struct vpmu_walk_result w;

	cr_assert_eq(vpmu_walk_translate(m, &p, LA, 0, &w, sizeof(w)), 0);
	cr_expect(!w.global, "no G bit");
	set(pte, get(pte) | G);
	cr_assert_eq(vpmu_walk_translate(m, &p, LA, 0, &w, sizeof(w)), 0);
	cr_expect(!w.global, "G without CR4.PGE");
	p.cr4 |= 1ULL << 7;
	cr_assert_eq(vpmu_walk_translate(m, &p, LA, 0, &w, sizeof(w)), 0);
	cr_expect(w.global, "G with CR4.PGE");
	cr_expect_eq(w.gpa, 0x5000);
	vpmu_guest_memory_free(m);
}

Test(walk_api, regions)
{
	struct vpmu_mem_region overlap[2] = {
		{ .gpa = 0, .size = 0x2000, .hva = low },
		{ .gpa = 0x1000, .size = 0x1000, .hva = high },
	};
	struct vpmu_mem_region wrap = { .gpa = ~0ULL - 10, .size = 0x1000, .hva = low };
	struct vpmu_guest_memory *m = NULL;

	cr_expect_eq(vpmu_guest_memory_new(overlap, 2, &m), -EINVAL);
	cr_expect_eq(vpmu_guest_memory_new(&wrap, 1, &m), -EINVAL);
	cr_expect_eq(vpmu_guest_memory_new(overlap, 0, &m), -EINVAL);
	cr_expect_null(m);
	m = memory();
	cr_expect_eq(vpmu_guest_memory_ptr(m, 0x40000010, 16), high + 0x10);
	cr_expect_eq(vpmu_guest_memory_ptr(m, sizeof(low) - 8, 8), low + sizeof(low) - 8);
	cr_expect_null(vpmu_guest_memory_ptr(m, sizeof(low) - 8, 9), "runs past the region");
	cr_expect_null(vpmu_guest_memory_ptr(m, 0x40000000 + sizeof(high), 1));
	vpmu_guest_memory_free(m);
	vpmu_guest_memory_free(NULL);
}

Test(walk_api, translate_read_write)
{
	struct vpmu_paging p = tables();
	struct vpmu_guest_memory *m = memory();
	struct {
		struct vpmu_walk_result w;
		uint64_t newer;
	} big;
	uint8_t buf[32], back[32];

	memset(&big, 0xee, sizeof(big));
	cr_assert_eq(vpmu_walk_translate(m, &p, LA + 0x123, 0, &big.w, sizeof(big)), 0);
	cr_expect_eq(big.w.gpa, 0x5123);
	cr_expect_eq(big.w.page_size, 4096);
	cr_expect_eq(big.w.len, 4096 - 0x123);
	cr_expect(big.w.writable && big.w.user && !big.w.nx);
	cr_expect_eq(big.newer, 0, "a field past the library's struct: zeroed");
	cr_assert_eq(vpmu_walk_translate(m, &p, LA + 0x1008, 0, &big.w, sizeof(big.w)), 0);
	cr_expect_eq(big.w.gpa, 0x40001008);
	cr_expect(!big.w.writable);

	/* a read across the page boundary, and A bits set where asked */
	for (unsigned int i = 0; i < 32; i++)
		(i < 16 ? low + 0x5ff0 : high + 0x1000 - 16)[i] = (uint8_t) (0x40 + i);
	cr_assert_eq(vpmu_walk_read(m, &p, LA + 0xff0, buf, 32, VPMU_WALK_SET_AD), 0);
	for (unsigned int i = 0; i < 32; i++)
		cr_expect_eq(buf[i], 0x40 + i);
	cr_expect(get(0x4000 + 8 * ((LA >> 12) & 0x1ff)) & A, "PTE accessed");
	cr_expect(!(get(0x4000 + 8 * ((LA >> 12) & 0x1ff)) & D), "a read does not dirty");

	/* a write into the read-only page: nothing written at all */
	memset(buf, 0x99, sizeof(buf));
	cr_expect_eq(vpmu_walk_write(m, &p, LA + 0xff0, buf, 32, VPMU_WALK_USER), -EACCES);
	cr_expect_eq(low[0x5ff0], 0x40, "the first page is untouched too");
	cr_assert_eq(vpmu_walk_write(m, &p, LA + 0x10, buf, 16, VPMU_WALK_SET_AD), 0);
	cr_assert_eq(vpmu_walk_read(m, &p, LA + 0x10, back, 16, 0), 0);
	cr_expect_eq(memcmp(back, buf, 16), 0);
	cr_expect(get(0x4000 + 8 * ((LA >> 12) & 0x1ff)) & D, "PTE dirty after the write");

	cr_expect_eq(vpmu_walk_translate(m, &p, 0x800000000000ULL, 0, &big.w, sizeof(big.w)),
		     -EFAULT, "not canonical");
	cr_expect_eq(vpmu_walk_translate(m, &p, LA + 0x2000, 0, &big.w, sizeof(big.w)), -EFAULT,
		     "not present");
	cr_expect_eq(vpmu_walk_read(m, &p, LA, buf, 8, 1u << 7), -EINVAL, "unknown flag");
	cr_expect_eq(vpmu_walk_translate(NULL, &p, LA, 0, &big.w, sizeof(big.w)), -EINVAL);
	vpmu_guest_memory_free(m);
}
