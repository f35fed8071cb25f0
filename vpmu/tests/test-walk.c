/* SPDX-License-Identifier: MIT */
/*
 * The guest page walk against real page tables written entry by entry
 * into a guest RAM image: every paging mode and page size of SDM Vol. 3A
 * ch. 4, every fault the walk can report, A/D updates, and a property
 * test over random page-table images that guest RAM is only ever
 * written where the translations say, and never on failure.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "walk.h"

#define KiB  1024ULL
#define MiB  (1024 * KiB)
#define GiB  (1024 * MiB)
#define PAGE (4 * KiB)

/* SDM Vol. 3A 2.5, Vol. 4 Table 2-2 */
#define CR0_PE	 BIT_ULL(0)
#define CR0_WP	 BIT_ULL(16)
#define CR0_PG	 BIT_ULL(31)
#define CR4_PSE	 BIT_ULL(4)
#define CR4_PAE	 BIT_ULL(5)
#define CR4_LA57 BIT_ULL(12)
#define CR4_SMAP BIT_ULL(21)
#define EFER_LME BIT_ULL(8)
#define EFER_LMA BIT_ULL(10)
#define EFER_NXE BIT_ULL(11)

/* SDM Vol. 3A Tables 4-4 to 4-20 */
#define P    BIT_ULL(0)
#define RW   BIT_ULL(1)
#define US   BIT_ULL(2)
#define A    BIT_ULL(5)
#define D    BIT_ULL(6)
#define PS   BIT_ULL(7)
#define XD   BIT_ULL(63)
#define ADDR GENMASK_ULL(51, 12)

/*
 * The guest: 4 MiB at 0 (page tables from 1 MiB up, data pages below and
 * above), 4 MiB at 1 GiB (large-page targets), 4 MiB at 4 GiB (PSE-36),
 * holes between.
 */
#define RAM0_GPA   0ULL
#define RAM1_GPA   (1 * GiB)
#define RAM2_GPA   (4 * GiB)
#define RAM_SIZE   (4 * MiB)
#define TABLES_GPA (1 * MiB)
#define TABLES_END (2 * MiB)
#define HOLE_GPA   (2 * GiB)

static struct {
	struct guest_region reg[3];
	struct guest_mem mem;
	uint64_t next_table;
	uint8_t *snap[3];
} vm;

static void vm_init(void)
{
	static const uint64_t gpa[3] = { RAM0_GPA, RAM1_GPA, RAM2_GPA };

	for (int i = 0; i < 3; i++) {
		vm.reg[i] = (struct guest_region){ gpa[i], RAM_SIZE, calloc(1, RAM_SIZE) };
		vm.snap[i] = malloc(RAM_SIZE);
		cr_assert(vm.reg[i].hva && vm.snap[i]);
	}
	vm.mem = (struct guest_mem){ vm.reg, 3 };
	vm.next_table = TABLES_GPA;
}

static void vm_fini(void)
{
	for (int i = 0; i < 3; i++) {
		free(vm.reg[i].hva);
		free(vm.snap[i]);
	}
}

TestSuite(walk, .init = vm_init, .fini = vm_fini);

static uint8_t *host(uint64_t gpa, uint64_t len)
{
	uint8_t *ptr = guest_mem_ptr(&vm.mem, gpa, len);

	cr_assert_not_null(ptr, "gpa %#" PRIx64 " is not RAM", gpa);
	return ptr;
}

static uint64_t get64(uint64_t gpa)
{
	uint64_t v;

	memcpy(&v, host(gpa, 8), 8);
	return v;
}

static void put64(uint64_t gpa, uint64_t v)
{
	memcpy(host(gpa, 8), &v, 8);
}

static uint32_t get32(uint64_t gpa)
{
	uint32_t v;

	memcpy(&v, host(gpa, 4), 4);
	return v;
}

static void put32(uint64_t gpa, uint32_t v)
{
	memcpy(host(gpa, 4), &v, 4);
}

static void snapshot(void)
{
	for (int i = 0; i < 3; i++)
		memcpy(vm.snap[i], vm.reg[i].hva, RAM_SIZE);
}

static bool unchanged(void)
{
	for (int i = 0; i < 3; i++)
		if (memcmp(vm.snap[i], vm.reg[i].hva, RAM_SIZE))
			return false;
	return true;
}

static uint64_t new_table(void)
{
	uint64_t gpa = vm.next_table;

	cr_assert_lt(gpa, TABLES_END);
	vm.next_table += PAGE;
	memset(host(gpa, PAGE), 0, PAGE);
	return gpa;
}

/*
 * 8-byte-entry paging (PAE below the PDPT, 4- and 5-level): map the page
 * of `gla` at `leaf` (1: 4 KiB, 2: 2 MiB, 3: 1 GiB) to `gpa`, creating
 * tables as needed; intermediate entries are P|RW|US.
 */
static void map64(uint64_t table, unsigned int level, uint64_t gla, uint64_t gpa, unsigned int leaf,
		  uint64_t flags)
{
	for (;; level--) {
		uint64_t e_gpa = table + ((gla >> (12 + 9 * (level - 1))) & 511) * 8;
		uint64_t e;

		if (level == leaf) {
			put64(e_gpa, gpa | flags | (leaf > 1 ? PS : 0));
			return;
		}
		e = get64(e_gpa);
		if (!(e & P)) {
			e = new_table() | P | RW | US;
			put64(e_gpa, e);
		}
		table = e & ADDR;
	}
}

/* gpa of the entry at `at` that the walk for gla uses, from `level` down */
static uint64_t entry64(uint64_t table, unsigned int level, uint64_t gla, unsigned int at)
{
	for (;; level--) {
		uint64_t e_gpa = table + ((gla >> (12 + 9 * (level - 1))) & 511) * 8;

		if (level == at)
			return e_gpa;
		table = get64(e_gpa) & ADDR;
	}
}

/* PAE: the PDPT is 32 bytes at `pdpt`; PDPTEs carry only P */
static void map_pae(uint64_t pdpt, uint64_t gla, uint64_t gpa, unsigned int leaf, uint64_t flags)
{
	uint64_t e_gpa = pdpt + (gla >> 30) * 8;
	uint64_t e = get64(e_gpa);

	if (!(e & P)) {
		e = new_table() | P;
		put64(e_gpa, e);
	}
	map64(e & ADDR, 2, gla, gpa, leaf, flags);
}

static uint64_t entry_pae(uint64_t pdpt, uint64_t gla, unsigned int at)
{
	uint64_t e_gpa = pdpt + (gla >> 30) * 8;

	if (at == 3)
		return e_gpa;
	return entry64(get64(e_gpa) & ADDR, 2, gla, at);
}

/* 32-bit paging: 4 KiB pages, or a 4 MiB page (PSE-36: gpa bits 39:32 in PDE 20:13) */
static void map32(uint64_t pd, uint64_t gla, uint64_t gpa, bool big, uint32_t flags)
{
	uint64_t e_gpa = pd + (gla >> 22) * 4;
	uint32_t e;

	if (big) {
		put32(e_gpa, (uint32_t) (gpa & GENMASK_ULL(31, 22)) |
				     (uint32_t) ((gpa >> 32) << 13) | flags | (uint32_t) PS);
		return;
	}
	e = get32(e_gpa);
	if (!(e & P)) {
		e = (uint32_t) new_table() | (uint32_t) (P | RW | US);
		put32(e_gpa, e);
	}
	put32((e & 0xfffff000u) + ((gla >> 12) & 1023) * 4, (uint32_t) gpa | flags);
}

static uint64_t entry32(uint64_t pd, uint64_t gla, unsigned int at)
{
	uint64_t e_gpa = pd + (gla >> 22) * 4;

	if (at == 2)
		return e_gpa;
	return (get32(e_gpa) & 0xfffff000u) + ((gla >> 12) & 1023) * 4;
}

static struct walk_paging lm4(uint64_t cr3)
{
	return (struct walk_paging){ .cr0 = CR0_PE | CR0_PG | CR0_WP,
				     .cr3 = cr3,
				     .cr4 = CR4_PAE,
				     .efer = EFER_LME | EFER_LMA | EFER_NXE };
}

static struct walk_paging lm5(uint64_t cr3)
{
	struct walk_paging p = lm4(cr3);

	p.cr4 |= CR4_LA57;
	return p;
}

static struct walk_paging pae(uint64_t cr3)
{
	return (struct walk_paging){
		.cr0 = CR0_PE | CR0_PG | CR0_WP, .cr3 = cr3, .cr4 = CR4_PAE, .efer = EFER_NXE
	};
}

static struct walk_paging p32(uint64_t cr3)
{
	return (struct walk_paging){ .cr0 = CR0_PE | CR0_PG | CR0_WP, .cr3 = cr3, .cr4 = CR4_PSE };
}

static struct walk_result xlate(const struct walk_paging *p, uint64_t gla, unsigned int flags)
{
	struct walk_result res;
	int r;

	r = walk_translate(&vm.mem, p, gla, flags, &res);
	cr_assert_eq(r, 0, "gla %#" PRIx64 " flags %#x: %d", gla, flags, r);
	cr_assert_eq(res.len, res.page_size - (gla & (res.page_size - 1)));
	return res;
}

static void expect(const struct walk_paging *p, uint64_t gla, unsigned int flags, uint64_t gpa,
		   uint64_t page_size)
{
	struct walk_result res = xlate(p, gla, flags);

	cr_assert_eq(res.gpa, gpa, "gla %#" PRIx64 ": gpa %#" PRIx64 ", expected %#" PRIx64, gla,
		     res.gpa, gpa);
	cr_assert_eq(res.page_size, page_size, "gla %#" PRIx64 ": page size %#" PRIx64, gla,
		     res.page_size);
}

/* An error leaves ret_* and guest memory as they were. */
static void expect_err(const struct walk_paging *p, uint64_t gla, unsigned int flags, int err)
{
	struct walk_result res, before;
	int r;

	memset(&res, 0xa5, sizeof(res));
	before = res;
	snapshot();
	r = walk_translate(&vm.mem, p, gla, flags | WALK_SET_AD, &res);
	cr_assert_eq(r, err, "gla %#" PRIx64 " flags %#x: %d, expected %d", gla, flags, r, err);
	cr_assert(!memcmp(&res, &before, sizeof(res)), "ret touched on failure");
	cr_assert(unchanged(), "guest memory changed by a failed walk");
}

Test(walk, guest_mem_ptr_bounds)
{
	static uint8_t a[0x2000], b[0x100], top[0x1000], bad[0x100];
	const struct guest_region regs[] = {
		{ 0x1000, 0x1000, a },
		{ 0x2000, 0x1000, a + 0x1000 },
		{ 0x10000, 0x100, b },
		{ UINT64_MAX - 0xfff, 0x1000, top },
	};
	const struct guest_mem mem = { regs, 4 }, empty = { regs, 0 };
	/* a region that claims to run past 2^64 */
	const struct guest_region wrap_reg = { UINT64_MAX - 0xf, 0x100, bad };
	const struct guest_mem wrap = { &wrap_reg, 1 };

	cr_assert_eq(guest_mem_ptr(&mem, 0x1000, 0x1000), a);
	cr_assert_eq(guest_mem_ptr(&mem, 0x1800, 0x800), a + 0x800);
	/* adjacent regions are still two regions */
	cr_assert_null(guest_mem_ptr(&mem, 0x1800, 0x801));
	cr_assert_eq(guest_mem_ptr(&mem, 0x2000, 0x1000), a + 0x1000);
	cr_assert_null(guest_mem_ptr(&mem, 0xfff, 2));
	cr_assert_null(guest_mem_ptr(&mem, 0, 1));
	cr_assert_null(guest_mem_ptr(&mem, 0x3000, 1));
	cr_assert_null(guest_mem_ptr(&mem, 0x8000, 1));
	/* len 0 is 1 */
	cr_assert_eq(guest_mem_ptr(&mem, 0x10000, 0), b);
	cr_assert_eq(guest_mem_ptr(&mem, 0x100ff, 0), b + 0xff);
	cr_assert_null(guest_mem_ptr(&mem, 0x10100, 0));
	cr_assert_null(guest_mem_ptr(&mem, 0x10000, 0x101));
	cr_assert_null(guest_mem_ptr(&mem, 0x1000, UINT64_MAX));
	/* the top of the address space */
	cr_assert_eq(guest_mem_ptr(&mem, UINT64_MAX, 1), top + 0xfff);
	cr_assert_eq(guest_mem_ptr(&mem, UINT64_MAX - 0xfff, 0x1000), top);
	cr_assert_null(guest_mem_ptr(&mem, UINT64_MAX, 2));
	cr_assert_null(guest_mem_ptr(&mem, UINT64_MAX - 0xfff, 0x1001));
	cr_assert_null(guest_mem_ptr(&empty, 0x1000, 1));
	cr_assert_eq(guest_mem_ptr(&wrap, UINT64_MAX - 0xf, 0x10), bad);
	cr_assert_null(guest_mem_ptr(&wrap, UINT64_MAX - 0xf, 0x11));
	cr_assert_null(guest_mem_ptr(&wrap, UINT64_MAX, 0x20));
}

Test(walk, paging_off)
{
	struct walk_paging p = { .cr0 = CR0_PE, .cr4 = CR4_PAE | CR4_SMAP, .efer = EFER_NXE };
	struct walk_result res;
	uint8_t buf[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	res = xlate(&p, 0x12345, WALK_WRITE | WALK_USER);
	cr_assert_eq(res.gpa, 0x12345);
	cr_assert_eq(res.page_size, PAGE);
	cr_assert_eq(res.len, 0xcbb);
	cr_assert(res.writable && res.user && !res.nx);
	expect(&p, RAM1_GPA + 0x1fff, WALK_IMPLICIT_SUPERVISOR, RAM1_GPA + 0x1fff, PAGE);
	expect_err(&p, HOLE_GPA, 0, -EFAULT);
	/* RAM at 4 GiB exists, but no 32-bit linear address reaches it */
	expect_err(&p, RAM2_GPA, 0, -EFAULT);

	cr_assert_eq(walk_write(&vm.mem, &p, RAM1_GPA + 0xffc, buf, 8, 0), 0);
	cr_assert(!memcmp(host(RAM1_GPA + 0xffc, 8), buf, 8));
}

Test(walk, lm4_4k)
{
	uint64_t pml4 = new_table();
	struct walk_paging p = lm4(pml4 | 0x18);
	struct walk_result res;

	map64(pml4, 4, 0x00007fffdeadb000, 0x23000, 1, P | RW | US);
	map64(pml4, 4, 0xffff800012345000, 0x45000, 1, P | RW);

	res = xlate(&p, 0x00007fffdeadb123, WALK_WRITE | WALK_USER);
	cr_assert_eq(res.gpa, 0x23123);
	cr_assert_eq(res.page_size, PAGE);
	cr_assert_eq(res.len, 0xedd);
	cr_assert(res.writable && res.user && !res.nx);

	res = xlate(&p, 0xffff800012345ffe, WALK_WRITE);
	cr_assert_eq(res.gpa, 0x45ffe);
	cr_assert_eq(res.len, 2);
	cr_assert(res.writable && !res.user);
	/* the neighbours are not mapped */
	expect_err(&p, 0x00007fffdeadc000, 0, -EFAULT);
	expect_err(&p, 0x00007fffdeada000, 0, -EFAULT);
}

Test(walk, lm4_2m)
{
	uint64_t pml4 = new_table();
	struct walk_paging p = lm4(pml4);

	map64(pml4, 4, 0x0000004000200000, RAM1_GPA + 2 * MiB, 2, P | RW | US);
	expect(&p, 0x0000004000212345, WALK_USER, RAM1_GPA + 2 * MiB + 0x12345, 2 * MiB);
	expect(&p, 0x00000040003fffff, 0, RAM1_GPA + 4 * MiB - 1, 2 * MiB);
	cr_assert_eq(xlate(&p, 0x0000004000200000, 0).len, 2 * MiB);
}

Test(walk, lm4_1g)
{
	uint64_t pml4 = new_table();
	struct walk_paging p = lm4(pml4);

	map64(pml4, 4, 0x0000000140000000, RAM1_GPA, 3, P | RW | US);
	expect(&p, 0x0000000140034567, WALK_WRITE, RAM1_GPA + 0x34567, GiB);
	cr_assert_eq(xlate(&p, 0x0000000140034567, 0).len, GiB - 0x34567);
	/* the page is 1 GiB, the RAM behind it only 4 MiB */
	expect_err(&p, 0x0000000140000000 + 8 * MiB, 0, -EFAULT);
}

Test(walk, lm5_4k_2m_1g)
{
	uint64_t pml5 = new_table();
	struct walk_paging p5 = lm5(pml5), p4 = lm4(pml5);

	map64(pml5, 5, 0x00abcdef12345000, 0x31000, 1, P | RW | US);
	map64(pml5, 5, 0x0012340000600000, RAM1_GPA + 2 * MiB, 2, P | RW | US);
	map64(pml5, 5, 0x00345600c0000000, RAM1_GPA, 3, P | RW | US);
	map64(pml5, 5, 0xff80000000001000, 0x32000, 1, P | RW);

	expect(&p5, 0x00abcdef12345678, WALK_WRITE | WALK_USER, 0x31678, PAGE);
	expect(&p5, 0x00123400006abcde, 0, RAM1_GPA + 2 * MiB + 0xabcde, 2 * MiB);
	expect(&p5, 0x00345600c0123456, 0, RAM1_GPA + 0x123456, GiB);
	expect(&p5, 0xff80000000001010, WALK_WRITE, 0x32010, PAGE);
	/* 57-bit canonical, 48-bit not: the same tables under 4-level paging */
	expect_err(&p4, 0x00abcdef12345678, 0, -EFAULT);
	expect_err(&p4, 0xff80000000001010, 0, -EFAULT);
}

Test(walk, pae_2m_4k)
{
	/* CR3 bits 31:5 locate the PDPT; bits 4:3 are PWT/PCD */
	uint64_t pdpt = new_table() + 0x40;
	struct walk_paging p = pae(pdpt | 0x18);

	map_pae(pdpt, 0xc0a00000, RAM1_GPA + 2 * MiB, 2, P | RW | US);
	map_pae(pdpt, 0x40005000, 0x31000, 1, P | RW | US);
	expect(&p, 0xc0a01234, WALK_WRITE | WALK_USER, RAM1_GPA + 2 * MiB + 0x1234, 2 * MiB);
	expect(&p, 0x40005ffc, WALK_WRITE, 0x31ffc, PAGE);
	cr_assert_eq(xlate(&p, 0x40005ffc, 0).len, 4);
	/* nothing above 4 GiB outside long mode */
	expect_err(&p, 0x1c0a01234, 0, -EFAULT);
	/* the PDPT is 4 entries at CR3 bits 31:5, not at the page it sits in */
	expect_err(
		&(struct walk_paging){
			.cr0 = p.cr0, .cr3 = pdpt - 0x40, .cr4 = p.cr4, .efer = p.efer },
		0x40005000, 0, -EFAULT);
}

Test(walk, pse_4m_and_4k)
{
	uint64_t pd = new_table();
	struct walk_paging p = p32(pd);

	map32(pd, 0x08048000, 0x17000, false, P | RW | US);
	map32(pd, 0xc0400000, RAM1_GPA, true, P | RW);
	/* PSE-36: bits 39:32 of the page from PDE bits 20:13 */
	map32(pd, 0xc0800000, RAM2_GPA, true, P | RW);
	cr_assert_eq(get32(pd + (0xc0800000 >> 22) * 4), (1u << 13) | P | RW | PS);

	expect(&p, 0x08048abc, WALK_WRITE | WALK_USER, 0x17abc, PAGE);
	expect(&p, 0xc0412345, WALK_WRITE, RAM1_GPA + 0x12345, 4 * MiB);
	cr_assert_eq(xlate(&p, 0xc0412345, 0).len, 4 * MiB - 0x12345);
	expect(&p, 0xc0812345, 0, RAM2_GPA + 0x12345, 4 * MiB);
	cr_assert(!xlate(&p, 0xc0812345, 0).user);
	expect_err(&p, 0xc0812345, WALK_USER, -EACCES);
	expect_err(&p, 0x1c0812345, 0, -EFAULT);
	/* bit 21 is reserved in a 4 MiB PDE with 40 physical address bits */
	put32(pd + (0xc0800000 >> 22) * 4, get32(pd + (0xc0800000 >> 22) * 4) | (1u << 21));
	expect_err(&p, 0xc0812345, 0, -EFAULT);
}

Test(walk, pse_off_ignores_ps)
{
	/* bits 20:13 of the table's address clear: they are PSE-36 bits to a 4 MiB PDE */
	uint64_t pd = new_table(), pt = 0x1000;
	struct walk_paging p = p32(pd);

	memset(host(pt, PAGE), 0, PAGE);
	/* one PDE with PS set that also points to a page table */
	put32(pd + (0x00400000 >> 22) * 4, (uint32_t) (pt | P | RW | US | PS));
	put32(pt + 5 * 4, 0x55000 | P | RW | US);
	/* CR4.PSE=1: a 4 MiB page at (pt & 0xffc00000) = 0; bit 12 is PAT */
	expect(&p, 0x00405123, 0, 0x5123, 4 * MiB);
	/* CR4.PSE=0: PS is ignored, the PDE is a page-table pointer */
	p.cr4 &= ~CR4_PSE;
	expect(&p, 0x00405123, 0, 0x55123, PAGE);
}

Test(walk, not_present_each_level)
{
	uint64_t root = new_table(), pdpt = new_table() + 0x20, pd = new_table();
	const uint64_t gla5 = 0x0055667788999000, gla_pae = 0x80123000, gla32 = 0x80123000;
	struct walk_paging p5 = lm5(root), pp = pae(pdpt), p2 = p32(pd);

	map64(root, 5, gla5, 0x21000, 1, P | RW | US);
	for (unsigned int l = 5; l >= 1; l--) {
		uint64_t e = entry64(root, 5, gla5, l), v = get64(e);

		put64(e, v & ~P);
		expect_err(&p5, gla5 + 8, 0, -EFAULT);
		put64(e, v);
		expect(&p5, gla5 + 8, 0, 0x21008, PAGE);
	}

	map_pae(pdpt, gla_pae, 0x22000, 1, P | RW | US);
	for (unsigned int l = 3; l >= 1; l--) {
		uint64_t e = entry_pae(pdpt, gla_pae, l), v = get64(e);

		put64(e, v & ~P);
		expect_err(&pp, gla_pae, 0, -EFAULT);
		put64(e, v);
		expect(&pp, gla_pae, 0, 0x22000, PAGE);
	}

	map32(pd, gla32, 0x24000, false, P | RW | US);
	for (unsigned int l = 2; l >= 1; l--) {
		uint64_t e = entry32(pd, gla32, l);
		uint32_t v = get32(e);

		put32(e, v & ~(uint32_t) P);
		expect_err(&p2, gla32, 0, -EFAULT);
		put32(e, v);
		expect(&p2, gla32, 0, 0x24000, PAGE);
	}
}

/* Set `bit` in the entry at `e` (8 bytes), expect `err`, restore. */
static void try_bit64(const struct walk_paging *p, uint64_t gla, uint64_t e, uint64_t bit, int err)
{
	uint64_t v = get64(e);

	put64(e, v | bit);
	if (err)
		expect_err(p, gla, 0, err);
	else
		xlate(p, gla, 0);
	put64(e, v);
}

Test(walk, reserved_bits)
{
	uint64_t root = new_table(), pdpt = new_table() + 0x60;
	const uint64_t g4k = 0x0000123456789000, g2m = 0x0000123400200000, g1g = 0x0000120040000000;
	const uint64_t g5 = 0x0001000000000000;
	struct walk_paging p = lm4(root), p5 = lm5(new_table()), pp = pae(pdpt);

	map64(root, 4, g4k, 0x26000, 1, P | RW | US);
	map64(root, 4, g2m, RAM1_GPA, 2, P | RW | US);
	map64(root, 4, g1g, RAM1_GPA, 3, P | RW | US);
	map64(p5.cr3, 5, g5, 0x27000, 1, P | RW | US);

	/* PS is reserved in a PML4E and a PML5E */
	try_bit64(&p, g4k, entry64(root, 4, g4k, 4), PS, -EFAULT);
	try_bit64(&p5, g5, entry64(p5.cr3, 5, g5, 5), PS, -EFAULT);
	try_bit64(&p5, g5, entry64(p5.cr3, 5, g5, 4), PS, -EFAULT);
	/* a 1 GiB page: 29:13 reserved, 12 is PAT */
	try_bit64(&p, g1g, entry64(root, 4, g1g, 3), BIT_ULL(13), -EFAULT);
	try_bit64(&p, g1g, entry64(root, 4, g1g, 3), BIT_ULL(29), -EFAULT);
	try_bit64(&p, g1g, entry64(root, 4, g1g, 3), BIT_ULL(12), 0);
	/* a 2 MiB page: 20:13 reserved, 12 is PAT */
	try_bit64(&p, g2m, entry64(root, 4, g2m, 2), BIT_ULL(13), -EFAULT);
	try_bit64(&p, g2m, entry64(root, 4, g2m, 2), BIT_ULL(20), -EFAULT);
	try_bit64(&p, g2m, entry64(root, 4, g2m, 2), BIT_ULL(12), 0);
	/* PTE bit 7 is PAT; 62:52 are ignored in 4-level paging (MAXPHYADDR 52) */
	try_bit64(&p, g4k, entry64(root, 4, g4k, 1), PS, 0);
	try_bit64(&p, g4k, entry64(root, 4, g4k, 1), BIT_ULL(52) | BIT_ULL(62), 0);
	put64(entry64(root, 4, g4k, 1), get64(entry64(root, 4, g4k, 1)) | BIT_ULL(55));
	expect(&p, g4k + 0x10, 0, 0x26010, PAGE);

	/* PAE: PDPTE 2:1 and 8:5 reserved, and 63:52 */
	map_pae(pdpt, 0x40000000, 0x28000, 1, P | RW | US);
	map_pae(pdpt, 0x80000000, RAM1_GPA, 2, P | RW | US);
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 3), BIT_ULL(1), -EFAULT);
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 3), BIT_ULL(2), -EFAULT);
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 3), BIT_ULL(5), -EFAULT);
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 3), BIT_ULL(8), -EFAULT);
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 3), BIT_ULL(52), -EFAULT);
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 3), XD, -EFAULT);
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 3), BIT_ULL(3) | BIT_ULL(4), 0);
	/* PAE PDE/PTE: 62:52 reserved */
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 2), BIT_ULL(52), -EFAULT);
	try_bit64(&pp, 0x40000000, entry_pae(pdpt, 0x40000000, 1), BIT_ULL(62), -EFAULT);
	try_bit64(&pp, 0x80000000, entry_pae(pdpt, 0x80000000, 2), BIT_ULL(13), -EFAULT);
	try_bit64(&pp, 0x80000000, entry_pae(pdpt, 0x80000000, 2), BIT_ULL(12), 0);
}

Test(walk, nx)
{
	uint64_t root = new_table(), pdpt = new_table();
	const uint64_t gla = 0x00000abc00001000;
	struct walk_paging p = lm4(root), pp = pae(pdpt);

	map64(root, 4, gla, 0x29000, 1, P | RW | US);
	map_pae(pdpt, 0x1000, 0x2a000, 1, P | RW | US);
	cr_assert(!xlate(&p, gla, 0).nx);
	for (unsigned int l = 4; l >= 1; l--) {
		uint64_t e = entry64(root, 4, gla, l), v = get64(e);

		put64(e, v | XD);
		p.efer |= EFER_NXE;
		cr_assert(xlate(&p, gla, WALK_WRITE).nx, "XD at level %u", l);
		/* without EFER.NXE bit 63 is reserved */
		p.efer &= ~EFER_NXE;
		expect_err(&p, gla, 0, -EFAULT);
		put64(e, v);
		cr_assert(!xlate(&p, gla, 0).nx);
	}

	put64(entry_pae(pdpt, 0x1000, 1), get64(entry_pae(pdpt, 0x1000, 1)) | XD);
	cr_assert(xlate(&pp, 0x1000, 0).nx);
	pp.efer = 0;
	expect_err(&pp, 0x1000, 0, -EFAULT);
}

Test(walk, write_protect)
{
	uint64_t root = new_table(), pd = new_table();
	const uint64_t ro = 0x0000000012345000, ro_top = 0x0000400000000000;
	struct walk_paging p = lm4(root), p2 = p32(pd);

	map64(root, 4, ro, 0x2b000, 1, P | US);
	/* writable leaf under a read-only PML4E: R/W is ANDed over levels */
	map64(root, 4, ro_top, 0x2c000, 1, P | RW | US);
	put64(entry64(root, 4, ro_top, 4), get64(entry64(root, 4, ro_top, 4)) & ~RW);

	for (int i = 0; i < 2; i++) {
		uint64_t gla = i ? ro_top : ro;

		cr_assert(!xlate(&p, gla, 0).writable);
		xlate(&p, gla, WALK_USER);
		/* CR0.WP=1: supervisor writes need R/W too */
		p.cr0 |= CR0_WP;
		expect_err(&p, gla, WALK_WRITE, -EACCES);
		expect_err(&p, gla, WALK_WRITE | WALK_USER, -EACCES);
		/* CR0.WP=0: only user writes do */
		p.cr0 &= ~CR0_WP;
		xlate(&p, gla, WALK_WRITE);
		xlate(&p, gla, WALK_WRITE | WALK_IMPLICIT_SUPERVISOR);
		expect_err(&p, gla, WALK_WRITE | WALK_USER, -EACCES);
	}

	map32(pd, 0x1000, 0x2d000, false, P | US);
	expect_err(&p2, 0x1000, WALK_WRITE, -EACCES);
	p2.cr0 &= ~CR0_WP;
	expect(&p2, 0x1000, WALK_WRITE, 0x2d000, PAGE);
}

Test(walk, user_supervisor)
{
	uint64_t root = new_table(), pdpt = new_table();
	const uint64_t gla = 0x0000000080000000;
	struct walk_paging p = lm4(root), pp = pae(pdpt);

	map64(root, 4, gla, 0x2e000, 1, P | RW | US);
	for (unsigned int l = 4; l >= 1; l--) {
		uint64_t e = entry64(root, 4, gla, l), v = get64(e);

		put64(e, v & ~US);
		expect_err(&p, gla, WALK_USER, -EACCES);
		expect_err(&p, gla, WALK_USER | WALK_WRITE, -EACCES);
		cr_assert(!xlate(&p, gla, WALK_WRITE).user);
		put64(e, v);
		cr_assert(xlate(&p, gla, WALK_USER).user);
	}
	/* a PAE PDPTE has no U/S: user access follows the PDE and PTE */
	map_pae(pdpt, gla, 0x2f000, 1, P | RW | US);
	cr_assert(xlate(&pp, gla, WALK_USER).user);
	put64(entry_pae(pdpt, gla, 2), get64(entry_pae(pdpt, gla, 2)) & ~US);
	expect_err(&pp, gla, WALK_USER, -EACCES);
}

Test(walk, smap_implicit_supervisor)
{
	uint64_t root = new_table();
	const uint64_t user = 0x0000000000400000, kern = 0xffffffff81000000;
	struct walk_paging p = lm4(root);
	uint8_t buf[16] = { 0xee };

	map64(root, 4, user, 0x30000, 1, P | RW | US);
	map64(root, 4, kern, 0x33000, 1, P | RW);

	/* no SMAP: PEBS may write a user page */
	xlate(&p, user, WALK_WRITE | WALK_IMPLICIT_SUPERVISOR);
	p.cr4 |= CR4_SMAP;
	expect_err(&p, user, WALK_WRITE | WALK_IMPLICIT_SUPERVISOR, -EACCES);
	expect_err(&p, user, WALK_IMPLICIT_SUPERVISOR, -EACCES);
	/* implicit supervisor beats CPL 3 */
	expect_err(&p, user, WALK_USER | WALK_IMPLICIT_SUPERVISOR, -EACCES);
	/* explicit supervisor accesses depend on RFLAGS.AC, not known here: allowed */
	xlate(&p, user, WALK_WRITE);
	xlate(&p, user, WALK_WRITE | WALK_USER);
	/* supervisor pages are fine */
	expect(&p, kern + 0x10, WALK_WRITE | WALK_IMPLICIT_SUPERVISOR, 0x33010, PAGE);
	expect_err(&p, kern, WALK_USER, -EACCES);

	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, user, buf, sizeof(buf), WALK_IMPLICIT_SUPERVISOR),
		     -EACCES);
	cr_assert(unchanged());
	cr_assert_eq(walk_write(&vm.mem, &p, kern, buf, sizeof(buf), WALK_IMPLICIT_SUPERVISOR), 0);
	cr_assert(!memcmp(host(0x33000, sizeof(buf)), buf, sizeof(buf)));
}

Test(walk, non_canonical)
{
	uint64_t root = new_table();
	struct walk_paging p4 = lm4(root), p5 = lm5(root);

	map64(root, 4, 0xffff800000000000, 0x34000, 1, P | RW);
	map64(root, 4, 0x00007ffffffff000, 0x35000, 1, P | RW);
	expect(&p4, 0xffff800000000000, 0, 0x34000, PAGE);
	expect(&p4, 0x00007fffffffffff, 0, 0x35fff, PAGE);
	expect_err(&p4, 0x0000800000000000, 0, -EFAULT);
	expect_err(&p4, 0xffff7fffffffffff, 0, -EFAULT);
	expect_err(&p4, 0x8000000000000000, 0, -EFAULT);

	/* 5-level: bit 47 is an index bit, 56 the sign */
	map64(root, 5, 0x0000800000000000, 0x36000, 1, P | RW);
	expect(&p5, 0x0000800000000123, 0, 0x36123, PAGE);
	expect_err(&p5, 0x0100000000000000, 0, -EFAULT);
	expect_err(&p5, 0xfeffffffffffffff, 0, -EFAULT);
}

Test(walk, tables_outside_ram)
{
	uint64_t root = new_table();
	const uint64_t gla = 0x0000000000800000;
	struct walk_paging p = lm4(root);
	static uint8_t small[0x1004];
	const struct guest_region reg = { 0, sizeof(small), small };
	const struct guest_mem mem = { &reg, 1 };
	struct walk_paging p2, p4;
	struct walk_result res;

	map64(root, 4, gla, 0x37000, 1, P | RW);
	map64(root, 4, gla + PAGE, HOLE_GPA, 1, P | RW);
	expect(&p, gla, 0, 0x37000, PAGE);
	/* the page itself is in the hole */
	expect_err(&p, gla + PAGE, 0, -EFAULT);
	/* a table in the hole */
	try_bit64(&p, gla, entry64(root, 4, gla, 3), HOLE_GPA, -EFAULT);
	/* a table beyond every region */
	put64(entry64(root, 4, gla, 2), (get64(entry64(root, 4, gla, 2)) & ~ADDR) | (8 * GiB));
	expect_err(&p, gla, 0, -EFAULT);
	/* CR3 in the hole */
	p.cr3 = HOLE_GPA;
	expect_err(&p, gla, 0, -EFAULT);

	/*
	 * RAM that ends 4 bytes into a page: an 8-byte PML4E there straddles
	 * the end; a 4-byte 32-bit PDE fits. It points back at its own page
	 * as a page table, whose entry 0 is the PDE itself and entry 1 is
	 * past the end.
	 */
	memset(small, 0, sizeof(small));
	small[0x1000] = 0x03;
	small[0x1001] = 0x10;
	p2 = (struct walk_paging){ .cr0 = CR0_PG, .cr3 = 0x1000 };
	p4 = (struct walk_paging){ .cr0 = CR0_PG, .cr3 = 0x1000, .cr4 = CR4_PAE, .efer = EFER_LMA };
	cr_assert_eq(walk_translate(&mem, &p4, 0, 0, &res), -EFAULT);
	cr_assert_eq(walk_translate(&mem, &p2, 0x1000, 0, &res), -EFAULT);
	cr_assert_eq(walk_translate(&mem, &p2, 0x10, 0, &res), -EFAULT);
	cr_assert_eq(walk_translate(&mem, &p2, 0x3, WALK_WRITE, &res), 0);
	cr_assert_eq(res.gpa, 0x1003);
}

Test(walk, piece_must_be_ram)
{
	static uint8_t ram[0x2800];
	const struct guest_region reg = { 0, sizeof(ram), ram };
	const struct guest_mem mem = { &reg, 1 };
	const struct walk_paging p = { .cr0 = CR0_PE };
	uint8_t buf[0x20], copy[sizeof(ram)];
	struct walk_result res;

	memset(buf, 0x77, sizeof(buf));
	memset(ram, 0x11, sizeof(ram));
	memcpy(copy, ram, sizeof(ram));
	/* the first byte is RAM, so the translation stands ... */
	cr_assert_eq(walk_translate(&mem, &p, 0x27f0, 0, &res), 0);
	cr_assert_eq(res.len, 0x810);
	/* ... but a copy must fit RAM in full */
	cr_assert_eq(walk_write(&mem, &p, 0x27f0, buf, sizeof(buf), 0), -EFAULT);
	cr_assert_eq(walk_read(&mem, &p, 0x27f0, buf, sizeof(buf), 0), -EFAULT);
	cr_assert(!memcmp(ram, copy, sizeof(ram)));
	cr_assert_eq(buf[0], 0x77);
	cr_assert_eq(walk_write(&mem, &p, 0x27f0, buf, 0x10, 0), 0);
	cr_assert(!memcmp(ram + 0x27f0, buf, 0x10));
}

Test(walk, split_noncontiguous)
{
	uint64_t root = new_table();
	const uint64_t gla = 0x0000123456789000;
	struct walk_paging p = lm4(root);
	uint8_t src[32], dst[32];

	for (unsigned int i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t) (0x40 + i);
	/* the higher linear page maps to the lower, non-adjacent physical page */
	map64(root, 4, gla, 0x81000, 1, P | RW);
	map64(root, 4, gla + PAGE, 0x42000, 1, P | RW);

	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0xff0, src, sizeof(src), WALK_WRITE), 0);
	cr_assert(!memcmp(host(0x81ff0, 16), src, 16));
	cr_assert(!memcmp(host(0x42000, 16), src + 16, 16));
	/* and nothing else */
	memcpy(host(0x81ff0, 16), vm.snap[0] + 0x81ff0, 16);
	memcpy(host(0x42000, 16), vm.snap[0] + 0x42000, 16);
	cr_assert(unchanged());

	memcpy(host(0x81ff0, 16), src, 16);
	memcpy(host(0x42000, 16), src + 16, 16);
	memset(dst, 0, sizeof(dst));
	cr_assert_eq(walk_read(&vm.mem, &p, gla + 0xff0, dst, sizeof(dst), 0), 0);
	cr_assert(!memcmp(dst, src, sizeof(src)));
}

Test(walk, failed_copy_writes_nothing)
{
	uint64_t root = new_table();
	const uint64_t gla = 0x0000000000600000;
	struct walk_paging p = lm4(root);
	uint8_t src[3 * 4096], dst[3 * 4096];

	memset(src, 0x5a, sizeof(src));
	memset(dst, 0xc3, sizeof(dst));
	map64(root, 4, gla, 0x50000, 1, P | RW);
	/* gla + 1 page: not present */
	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0x800, src, 0x1000, WALK_SET_AD), -EFAULT);
	cr_assert(unchanged());
	cr_assert_eq(walk_read(&vm.mem, &p, gla + 0x800, dst, 0x1000, WALK_SET_AD), -EFAULT);
	cr_assert(unchanged());
	cr_assert_eq(dst[0], 0xc3);

	/* second page read-only under CR0.WP: -EACCES, still nothing */
	map64(root, 4, gla + PAGE, 0x51000, 1, P);
	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0x800, src, 0x1000, WALK_SET_AD), -EACCES);
	cr_assert(unchanged());
	cr_assert_eq(walk_read(&vm.mem, &p, gla + 0x800, dst, 0x1000, 0), 0);

	/* the third of three pieces fails: the error is that piece's */
	put64(entry64(root, 4, gla + PAGE, 1), 0x51000 | P | RW);
	map64(root, 4, gla + 2 * PAGE, HOLE_GPA, 1, P | RW);
	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0x10, src, sizeof(src) - 0x20, 0), -EFAULT);
	cr_assert(unchanged());
	map64(root, 4, gla + 2 * PAGE, 0x52000, 1, P);
	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0x10, src, sizeof(src) - 0x20, 0), -EACCES);
	cr_assert(unchanged());
	/* the first piece failing first */
	cr_assert_eq(walk_write(&vm.mem, &p, gla - 0x10, src, 0x20, 0), -EFAULT);
	cr_assert(unchanged());
}

Test(walk, accessed_dirty)
{
	uint64_t root = new_table(), pdpt = new_table(), pd = new_table();
	const uint64_t gla = 0x0000000a00003000, g2m = 0x0000000b00200000;
	struct walk_paging p = lm4(root), pp = pae(pdpt), p2 = p32(pd);
	uint64_t e[4];
	uint8_t buf[0x20] = { 0 };

	map64(root, 4, gla, 0x53000, 1, P | RW);
	map64(root, 4, gla + PAGE, 0x54000, 1, P | RW);
	map64(root, 4, g2m, RAM1_GPA, 2, P | RW);
	for (unsigned int l = 4; l >= 1; l--)
		e[l - 1] = entry64(root, 4, gla, l);

	/* no WALK_SET_AD: no change */
	snapshot();
	xlate(&p, gla, WALK_WRITE);
	cr_assert_eq(walk_write(&vm.mem, &p, gla, buf, 8, 0), 0);
	cr_assert(unchanged());

	/* a read sets A on every level, D nowhere */
	xlate(&p, gla, WALK_SET_AD);
	for (unsigned int l = 4; l >= 1; l--)
		cr_assert_eq(get64(e[l - 1]) & (A | D), A, "level %u", l);
	cr_assert_eq(get64(entry64(root, 4, gla + PAGE, 1)) & (A | D), 0);
	/* a write sets D in the PTE only */
	xlate(&p, gla, WALK_SET_AD | WALK_WRITE);
	for (unsigned int l = 4; l >= 2; l--)
		cr_assert_eq(get64(e[l - 1]) & (A | D), A, "level %u", l);
	cr_assert_eq(get64(e[0]) & (A | D), A | D);
	/* the rest of the entry is untouched */
	cr_assert_eq(get64(e[0]), 0x53000 | P | RW | A | D);

	/* a 2 MiB page: D in the PDE */
	xlate(&p, g2m, WALK_SET_AD | WALK_WRITE);
	cr_assert_eq(get64(entry64(root, 4, g2m, 2)), RAM1_GPA | P | RW | PS | A | D);

	/* a copy over two pages: both PTEs */
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0xff0, buf, sizeof(buf), WALK_SET_AD), 0);
	cr_assert_eq(get64(entry64(root, 4, gla + PAGE, 1)) & (A | D), A | D);
	/* walk_read: A only */
	put64(entry64(root, 4, gla + PAGE, 1), 0x54000 | P | RW);
	cr_assert_eq(walk_read(&vm.mem, &p, gla + 0xff0, buf, sizeof(buf), WALK_SET_AD), 0);
	cr_assert_eq(get64(entry64(root, 4, gla + PAGE, 1)) & (A | D), A);

	/* failures change nothing: permission at the leaf, page outside RAM, a later piece */
	put64(e[0], 0x53000 | P);
	for (unsigned int l = 4; l >= 1; l--)
		put64(e[l - 1], get64(e[l - 1]) & ~(A | D));
	expect_err(&p, gla, WALK_SET_AD | WALK_WRITE, -EACCES);
	put64(e[0], HOLE_GPA | P | RW);
	expect_err(&p, gla, WALK_SET_AD | WALK_WRITE, -EFAULT);
	put64(e[0], 0x53000 | P | RW);
	put64(entry64(root, 4, gla + PAGE, 1), 0);
	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0xff0, buf, sizeof(buf), WALK_SET_AD), -EFAULT);
	cr_assert(unchanged());

	/* PAE: the PDPTE has no A bit and stays as it was */
	map_pae(pdpt, 0x40001000, 0x55000, 1, P | RW);
	xlate(&pp, 0x40001000, WALK_SET_AD | WALK_WRITE);
	cr_assert_eq(get64(entry_pae(pdpt, 0x40001000, 3)) & ~ADDR, P);
	cr_assert_eq(get64(entry_pae(pdpt, 0x40001000, 2)) & (A | D), A);
	cr_assert_eq(get64(entry_pae(pdpt, 0x40001000, 1)) & (A | D), A | D);

	/* 32-bit paging: 4-byte entries, the neighbours untouched */
	map32(pd, 0x00401000, 0x56000, false, P | RW);
	map32(pd, 0x00402000, 0x57000, false, P | RW);
	map32(pd, 0x00800000, RAM1_GPA, true, P | RW);
	e[1] = get32(entry32(pd, 0x00401000, 2));
	xlate(&p2, 0x00401000, WALK_SET_AD | WALK_WRITE);
	cr_assert_eq(get32(entry32(pd, 0x00401000, 2)), e[1] | A);
	cr_assert_eq(get32(entry32(pd, 0x00401000, 1)), 0x56000 | P | RW | A | D);
	cr_assert_eq(get32(entry32(pd, 0x00402000, 1)), 0x57000 | P | RW);
	xlate(&p2, 0x00800000, WALK_SET_AD);
	cr_assert_eq(get32(entry32(pd, 0x00800000, 2)), (uint32_t) RAM1_GPA | P | RW | PS | A);
}

Test(walk, remap_follows_tables)
{
	uint64_t root = new_table();
	const uint64_t gla = 0x0000000070000000;
	struct walk_paging p = lm4(root);
	char buf[16];

	/* linear layout the reverse of the physical one */
	map64(root, 4, gla, 0x60000, 1, P | RW);
	map64(root, 4, gla + PAGE, 0x5f000, 1, P | RW);
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0xffa, "hello, paging", 14, 0), 0);
	cr_assert(!memcmp(host(0x60ffa, 6), "hello,", 6));
	cr_assert(!memcmp(host(0x5f000, 8), " paging", 8));

	memcpy(host(0x70ffa, 14), "other page!!!", 14);
	put64(entry64(root, 4, gla, 1), 0x70000 | P | RW);
	expect(&p, gla + 0xffa, 0, 0x70ffa, PAGE);
	cr_assert_eq(walk_read(&vm.mem, &p, gla + 0xffa, buf, 6, 0), 0);
	cr_assert(!memcmp(buf, "other ", 6));
	cr_assert_eq(walk_read(&vm.mem, &p, gla + 0xffa, buf, 14, 0), 0);
	cr_assert(!memcmp(buf, "other  paging", 14));
}

Test(walk, zero_length_and_flags)
{
	struct walk_paging p = lm4(HOLE_GPA);
	struct walk_result res;
	uint8_t b = 0;

	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, 0x0000800000000000, &b, 0, 0), 0);
	cr_assert_eq(walk_read(&vm.mem, &p, 0x1000, &b, 0, WALK_SET_AD), 0);
	cr_assert(unchanged());
	p.cr0 &= ~CR0_PG;
	cr_assert_eq(walk_translate(&vm.mem, &p, 0x1000, 1u << 7, &res), -EINVAL);
	cr_assert_eq(walk_write(&vm.mem, &p, 0x1000, &b, 1, 1u << 4), -EINVAL);
}

Test(walk, wrap)
{
	uint64_t root = new_table(), pd = new_table();
	struct walk_paging p = lm4(root), p2 = p32(pd);
	uint8_t buf[16];

	memset(buf, 0x99, sizeof(buf));
	map64(root, 4, 0xfffffffffffff000, 0x90000, 1, P | RW);
	map64(root, 4, 0x0000000000000000, 0x91000, 1, P | RW);
	map64(root, 4, 0x00007ffffffff000, 0x92000, 1, P | RW);
	map32(pd, 0xfffff000, 0x93000, false, P | RW);
	map32(pd, 0x00000000, 0x94000, false, P | RW);

	snapshot();
	/* past 2^64 */
	cr_assert_eq(walk_write(&vm.mem, &p, 0xfffffffffffffff8, buf, 16, 0), -EFAULT);
	cr_assert_eq(walk_write(&vm.mem, &p, 0xffffffffffffffff, buf, 2, 0), -EFAULT);
	/* into the non-canonical hole */
	cr_assert_eq(walk_write(&vm.mem, &p, 0x00007ffffffffff8, buf, 16, 0), -EFAULT);
	/* past 4 GiB outside long mode */
	cr_assert_eq(walk_write(&vm.mem, &p2, 0xfffffff8, buf, 16, 0), -EFAULT);
	cr_assert_eq(walk_write(&vm.mem, &p2, 0xffffffff, buf, SIZE_MAX, 0), -EFAULT);
	cr_assert(unchanged());

	cr_assert_eq(walk_write(&vm.mem, &p, 0xfffffffffffffff8, buf, 8, 0), 0);
	cr_assert(!memcmp(host(0x90ff8, 8), buf, 8));
	cr_assert_eq(walk_write(&vm.mem, &p, 0xffffffffffffffff, buf, 1, 0), 0);
	cr_assert_eq(walk_write(&vm.mem, &p2, 0xfffffff8, buf, 8, 0), 0);
	cr_assert(!memcmp(host(0x93ff8, 8), buf, 8));
}

Test(walk, long_copy)
{
	uint64_t root = new_table();
	const uint64_t gla = 0x0000001000000000;
	struct walk_paging p = lm4(root);
	static uint8_t src[16 * 4096], dst[16 * 4096];

	/* 17 pieces, physical pages descending and apart */
	for (unsigned int i = 0; i < 17; i++)
		map64(root, 4, gla + i * PAGE, 0x200000 + (16 - i) * 2 * PAGE, 1, P | RW);
	for (unsigned int i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t) (i * 7 + (i >> 12));

	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0x800, src, sizeof(src), WALK_SET_AD), 0);
	for (unsigned int i = 0; i < sizeof(src); i++) {
		uint64_t a = 0x800 + i;

		cr_assert_eq(*host(0x200000 + (16 - a / PAGE) * 2 * PAGE + a % PAGE, 1), src[i],
			     "byte %u", i);
	}
	for (unsigned int i = 0; i < 17; i++)
		cr_assert_eq(get64(entry64(root, 4, gla + i * PAGE, 1)) & (A | D), A | D);
	cr_assert_eq(walk_read(&vm.mem, &p, gla + 0x800, dst, sizeof(dst), 0), 0);
	cr_assert(!memcmp(src, dst, sizeof(src)));

	/* the 17th piece fails after 16 were planned: nothing written (and nothing leaked) */
	put64(entry64(root, 4, gla + 16 * PAGE, 1), 0);
	memset(src, 0xfe, sizeof(src));
	snapshot();
	cr_assert_eq(walk_write(&vm.mem, &p, gla + 0x800, src, sizeof(src), WALK_SET_AD), -EFAULT);
	cr_assert_eq(walk_read(&vm.mem, &p, gla + 0x800, dst, sizeof(dst), WALK_SET_AD), -EFAULT);
	cr_assert(unchanged());
}

/*
 * Property test. Random page-table images in small RAM with a hole and
 * guard bytes around both regions; random modes, CR3 and accesses. The
 * expected effect of a copy is built from walk_translate() per page on
 * an untouched copy of the image: A/D updates (the union of each page's
 * walk with WALK_SET_AD, each on a fresh copy) and then the data.
 */
#define PR_GUARD     4096
#define PR_RAM0_GPA  0x0ULL
#define PR_RAM0_SIZE (16 * 4096)
#define PR_RAM1_GPA  0x20000ULL
#define PR_RAM1_SIZE (8 * 4096)
#define PR_IMAGE     (PR_RAM0_SIZE + PR_RAM1_SIZE)
#define PR_BUF	     (3 * PR_GUARD + PR_IMAGE)
#define PR_MAX_LEN   (3 * 4096)
#define PR_CASES     2000
#define PR_ACCESSES  10

static uint64_t rnd(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static bool chance(uint64_t *s, unsigned int percent)
{
	return rnd(s) % 100 < percent;
}

static uint64_t rnd_page(uint64_t *s)
{
	uint64_t r = rnd(s) % 100;

	if (r < 80) {
		uint64_t page = rnd(s) % (PR_IMAGE / 4096);

		return page < PR_RAM0_SIZE / 4096 ? PR_RAM0_GPA + page * 4096
						  : PR_RAM1_GPA + (page - 16) * 4096;
	}
	if (r < 88)
		return 0x10000 + (rnd(s) % 16) * 4096; /* the hole */
	if (r < 94)
		return 0x28000 + (rnd(s) % 64) * 4096; /* past RAM1 */
	return rnd(s) & GENMASK_ULL(51, 12);
}

static uint64_t rnd_entry(uint64_t *s)
{
	uint64_t e = rnd_page(s);

	if (chance(s, 90))
		e |= P;
	e |= rnd(s) & (RW | US | A | D | BIT_ULL(3) | BIT_ULL(4) | BIT_ULL(8) | GENMASK_ULL(11, 9));
	if (chance(s, 50))
		e |= RW | US;
	if (chance(s, 20))
		e |= PS;
	if (chance(s, 8))
		e |= XD;
	if (chance(s, 10))
		e |= BIT_ULL(12);
	if (chance(s, 4))
		e |= BIT_ULL(rnd(s) % 64); /* maybe reserved, maybe not */
	return e;
}

static uint32_t rnd_entry32(uint64_t *s)
{
	uint32_t e = (uint32_t) rnd_page(s);

	if (chance(s, 90))
		e |= P;
	e |= (uint32_t) rnd(s) & (RW | US | A | D | GENMASK_ULL(4, 3) | GENMASK_ULL(11, 8));
	if (chance(s, 30))
		e |= RW | US;
	if (chance(s, 20))
		e |= PS;
	if (chance(s, 10))
		e |= (uint32_t) (rnd(s) & GENMASK_ULL(21, 12));
	return e;
}

enum pr_mode { PR_OFF, PR_32, PR_PAE, PR_LM4, PR_LM5, PR_NR_MODES };

struct pr_vm {
	uint8_t *buf;
	struct guest_region reg[2];
	struct guest_mem mem;
};

static void pr_vm_init(struct pr_vm *v, uint8_t *buf)
{
	v->buf = buf;
	v->reg[0] = (struct guest_region){ PR_RAM0_GPA, PR_RAM0_SIZE, buf + PR_GUARD };
	v->reg[1] = (struct guest_region){ PR_RAM1_GPA, PR_RAM1_SIZE,
					   buf + 2 * PR_GUARD + PR_RAM0_SIZE };
	v->mem = (struct guest_mem){ v->reg, 2 };
}

static uint64_t rnd_gla(uint64_t *s, enum pr_mode mode)
{
	uint64_t gla = rnd(s);

	switch (mode) {
	case PR_OFF:
		gla = chance(s, 85) ? gla % 0x30000 : (uint32_t) gla;
		break;
	case PR_32:
	case PR_PAE:
		gla = chance(s, 97) ? (uint32_t) gla : gla;
		break;
	case PR_LM4:
		gla = chance(s, 95) ? sign_extend64(gla, 48) : gla;
		break;
	default:
		gla = chance(s, 95) ? sign_extend64(gla, 57) : gla;
		break;
	}
	/* large pages map gpa 0 up: small offsets hit RAM */
	if (chance(s, 30))
		gla &= ~GENMASK_ULL(29, 17);
	/* near the end of a page, a page table, the address space */
	if (chance(s, 40))
		gla = (gla | 0xfff) - rnd(s) % 64;
	if (chance(s, 3))
		gla = (mode >= PR_LM4 ? 0x00007fffffffffffULL : 0xffffffffULL) - rnd(s) % 64;
	if (chance(s, 2))
		gla = UINT64_MAX - rnd(s) % 64;
	return gla;
}

static size_t rnd_len(uint64_t *s)
{
	uint64_t r = rnd(s) % 100;

	if (r < 5)
		return 0;
	if (r < 45)
		return 1 + rnd(s) % 16;
	if (r < 80)
		return 1 + rnd(s) % 4096;
	return 1 + rnd(s) % PR_MAX_LEN;
}

struct pr_stats {
	unsigned long cases, writes, reads, ok, efault, eacces, pieces, multi, set_ad;
	unsigned long mode_ok[PR_NR_MODES];
};

/* Host offset in a pr_vm buffer of a gpa range known to be RAM. */
static size_t pr_off(struct pr_vm *v, uint64_t gpa)
{
	uint8_t *ptr = guest_mem_ptr(&v->mem, gpa, 1);

	cr_assert_not_null(ptr);
	return (size_t) (ptr - v->buf);
}

/*
 * The model: the pieces of [gla, gla + len) by walk_translate() on the
 * untouched image `cur`, then the expected image after the copy in
 * `exp` (A/D by WALK_SET_AD walks on fresh copies in `scratch`). For a
 * read, `data` receives what the read must return.
 */
static int pr_model(struct pr_vm *cur, struct pr_vm *scratch, uint8_t *exp,
		    const struct walk_paging *p, enum pr_mode mode, uint64_t gla, size_t len,
		    unsigned int flags, bool write, const uint8_t *src, uint8_t *data,
		    unsigned long *ret_pieces)
{
	uint64_t gpas[PR_MAX_LEN / 4096 + 2], lens[PR_MAX_LEN / 4096 + 2];
	unsigned int nr = 0, xflags = (flags & ~WALK_SET_AD) | (write ? WALK_WRITE : 0);
	uint64_t a = gla;
	size_t left = len, done = 0;

	memcpy(exp, cur->buf, PR_BUF);
	if (!len)
		return 0;
	if (len - 1 > UINT64_MAX - gla)
		return -EFAULT;
	if (!write)
		xflags &= ~WALK_WRITE;
	while (left) {
		struct walk_result res;
		uint64_t n;
		int r;

		r = walk_translate(&cur->mem, p, a, xflags, &res);
		if (r < 0)
			return r;
		/* the result is self-consistent and fits the mode */
		cr_assert_eq(res.gpa & (res.page_size - 1), a & (res.page_size - 1));
		cr_assert_eq(res.len, res.page_size - (a & (res.page_size - 1)));
		switch (res.page_size) {
		case 4 * KiB:
			break;
		case 2 * MiB:
			cr_assert(mode == PR_PAE || mode >= PR_LM4);
			break;
		case 4 * MiB:
			cr_assert(mode == PR_32);
			break;
		case 1 * GiB:
			cr_assert(mode >= PR_LM4);
			break;
		default:
			cr_assert_fail("page size %#" PRIx64, res.page_size);
		}
		if (mode == PR_OFF)
			cr_assert_eq(res.gpa, a);
		n = res.len < left ? res.len : left;
		if (!guest_mem_ptr(&cur->mem, res.gpa, n))
			return -EFAULT;
		cr_assert_lt(nr, ARRAY_SIZE(gpas));
		gpas[nr] = res.gpa;
		lens[nr++] = n;
		a += n;
		left -= n;
	}

	if (flags & WALK_SET_AD) {
		a = gla;
		for (unsigned int i = 0; i < nr; i++) {
			struct walk_result res;

			memcpy(scratch->buf, cur->buf, PR_BUF);
			cr_assert_eq(
				walk_translate(&scratch->mem, p, a, xflags | WALK_SET_AD, &res), 0);
			for (size_t j = 0; j < PR_BUF; j++)
				exp[j] |= scratch->buf[j];
			a += lens[i];
		}
	}
	for (unsigned int i = 0; i < nr; i++) {
		size_t off = pr_off(cur, gpas[i]);

		if (write)
			memcpy(exp + off, src + done, lens[i]);
		else
			memcpy(data + done, exp + off, lens[i]);
		done += lens[i];
	}
	*ret_pieces = nr;
	return 0;
}

static void pr_fill(struct pr_vm *v, uint64_t *s, enum pr_mode mode)
{
	memset(v->buf, 0xa5, PR_BUF);
	for (int i = 0; i < 2; i++) {
		uint8_t *ram = v->reg[i].hva;

		for (uint64_t off = 0; off < v->reg[i].size; off += 8) {
			uint64_t e;

			if (mode == PR_32)
				e = rnd_entry32(s) | (uint64_t) rnd_entry32(s) << 32;
			else if (chance(s, 3))
				e = rnd(s);
			else
				e = rnd_entry(s);
			/* PAE PDPTEs reserve R/W, U/S, A, D, PS: keep some entries clean */
			if (mode == PR_PAE && chance(s, 40))
				e &= GENMASK_ULL(51, 12) | GENMASK_ULL(11, 9) | GENMASK_ULL(4, 3) |
				     P;
			memcpy(ram + off, &e, 8);
		}
	}
}

static bool guards_intact(const struct pr_vm *v)
{
	static const size_t at[3] = { 0, PR_GUARD + PR_RAM0_SIZE,
				      2 * PR_GUARD + PR_RAM0_SIZE + PR_RAM1_SIZE };

	for (int g = 0; g < 3; g++)
		for (size_t i = 0; i < PR_GUARD; i++)
			if (v->buf[at[g] + i] != 0xa5)
				return false;
	return true;
}

Test(walk, property_random_tables)
{
	static uint8_t buf[PR_BUF], scratch_buf[PR_BUF], exp[PR_BUF], before[PR_BUF];
	static uint8_t src[PR_MAX_LEN], data[PR_MAX_LEN], want[PR_MAX_LEN];
	struct pr_vm v, scratch;
	struct pr_stats st = { 0 };

	pr_vm_init(&v, buf);
	pr_vm_init(&scratch, scratch_buf);

	for (unsigned int c = 0; c < PR_CASES; c++) {
		uint64_t s = 0x5eed0000 + c;
		enum pr_mode mode = (enum pr_mode)(rnd(&s) % PR_NR_MODES);
		struct walk_paging p = { .cr0 = CR0_PE };

		pr_fill(&v, &s, mode);
		if (mode != PR_OFF)
			p.cr0 |= CR0_PG;
		if (chance(&s, 50))
			p.cr0 |= CR0_WP;
		if (chance(&s, 50))
			p.cr4 |= CR4_SMAP;
		if (chance(&s, 50))
			p.cr4 |= CR4_PSE;
		if (chance(&s, 50))
			p.efer |= EFER_NXE;
		if (mode == PR_PAE || mode >= PR_LM4)
			p.cr4 |= CR4_PAE;
		if (mode >= PR_LM4)
			p.efer |= EFER_LME | EFER_LMA;
		if (mode == PR_LM5)
			p.cr4 |= CR4_LA57;
		p.cr3 = rnd_page(&s) | (rnd(&s) & 0xfe0);
		st.cases++;

		for (unsigned int k = 0; k < PR_ACCESSES; k++) {
			uint64_t gla = rnd_gla(&s, mode);
			size_t len = rnd_len(&s);
			unsigned int flags = (unsigned int) rnd(&s) & 0xf;
			bool write = chance(&s, 60);
			unsigned long pieces = 0;
			int want_r, r;

			for (size_t i = 0; i < len; i++)
				src[i] = (uint8_t) rnd(&s);
			memset(data, 0x3c, sizeof(data));
			memset(want, 0x3c, sizeof(want));
			memcpy(before, buf, PR_BUF);

			want_r = pr_model(&v, &scratch, exp, &p, mode, gla, len, flags, write, src,
					  want, &pieces);
			cr_assert(!memcmp(before, buf, PR_BUF), "the model touched the image");
			if (write)
				r = walk_write(&v.mem, &p, gla, src, len, flags);
			else
				r = walk_read(&v.mem, &p, gla, data, len, flags);

			cr_assert_eq(r, want_r,
				     "case %u access %u mode %d gla %#" PRIx64
				     " len %zu flags %#x write %d: %d, expected %d",
				     c, k, mode, gla, len, flags, write, r, want_r);
			cr_assert(guards_intact(&v), "case %u access %u: a guard changed", c, k);
			if (r < 0) {
				cr_assert(!memcmp(buf, before, PR_BUF),
					  "case %u access %u: a failed copy changed memory", c, k);
				cr_assert(!memcmp(data, want, sizeof(data)),
					  "case %u access %u: a failed read changed dst", c, k);
			} else {
				cr_assert(!memcmp(buf, exp, PR_BUF),
					  "case %u access %u: memory is not what the translations "
					  "say",
					  c, k);
				cr_assert(!memcmp(data, want, write ? sizeof(data) : len),
					  "case %u access %u: read returned other bytes", c, k);
			}

			st.writes += write;
			st.reads += !write;
			st.ok += r == 0;
			st.efault += r == -EFAULT;
			st.eacces += r == -EACCES;
			st.pieces += pieces;
			st.multi += pieces > 1;
			st.set_ad += r == 0 && (flags & WALK_SET_AD);
			st.mode_ok[mode] += r == 0 && len;
		}
	}

	printf("walk property: %lu images, %lu accesses (%lu writes, %lu reads): %lu ok "
	       "(%lu pieces, %lu multi-page, %lu with A/D), %lu -EFAULT, %lu -EACCES; "
	       "ok by mode off/32/pae/4l/5l: %lu/%lu/%lu/%lu/%lu\n",
	       st.cases, st.writes + st.reads, st.writes, st.reads, st.ok, st.pieces, st.multi,
	       st.set_ad, st.efault, st.eacces, st.mode_ok[PR_OFF], st.mode_ok[PR_32],
	       st.mode_ok[PR_PAE], st.mode_ok[PR_LM4], st.mode_ok[PR_LM5]);
	fflush(stdout);
	/* a property test that never succeeds, or never fails, checks nothing */
	cr_assert_gt(st.multi, 100);
	cr_assert_gt(st.efault, 100);
	cr_assert_gt(st.eacces, 100);
	for (int m = 0; m < PR_NR_MODES; m++)
		cr_assert_gt(st.mode_ok[m], 50, "mode %d", m);
}

/*
 * A cache never reset (zeroed, as calloc leaves it) and one reset are
 * both empty: no access hits, not even page 0 with paging off, whose
 * tag and paging registers a zeroed line would otherwise match. An
 * address beyond RAM with paging off must still fault.
 */
Test(walk, cache_empty_never_hits)
{
	static struct walk_cache zeroed, reset;
	struct walk_paging off = { 0 };
	uint8_t v = 0x77;

	walk_cache_reset(&reset);
	cr_expect_eq(walk_write_cached(&vm.mem, &off, 0x10, &v, 1, 0, &zeroed), 0);
	cr_expect_eq(vm.reg[0].hva[0x10], 0x77);
	cr_expect_eq(walk_write_cached(&vm.mem, &off, 0x20, &v, 1, 0, &reset), 0);
	cr_expect_eq(vm.reg[0].hva[0x20], 0x77);
	cr_expect_eq(
		walk_write_cached(&vm.mem, &off, vm.reg[0].gpa + vm.reg[0].size, &v, 1, 0, &zeroed),
		-EFAULT);
}

/*
 * The validated cache: a hit is what a fresh walk gives now. Remapping
 * a page, clearing A/D, unmapping or switching CR3 is seen on the very
 * next access, with no flush.
 */
Test(walk, cache_follows_the_tables)
{
	static struct walk_cache c;
	uint64_t pml4 = new_table(), pte;
	struct walk_paging p = lm4(pml4), other = lm4(new_table());
	const uint64_t gla = 0x00007f0000401000ULL;
	uint8_t *ram = vm.reg[0].hva, v = 0x11;

	map64(pml4, 4, gla, 0x300000, 1, P | RW);
	pte = entry64(pml4, 4, gla, 1);
	walk_cache_reset(&c);
	cr_assert_eq(walk_write_cached(&vm.mem, &p, gla + 0x10, &v, 1, WALK_SET_AD, &c), 0);
	cr_expect_eq(ram[0x300010], 0x11);
	cr_expect_eq(get64(pte) & (A | D), A | D);
	/* a hit */
	v = 0x22;
	cr_assert_eq(walk_write_cached(&vm.mem, &p, gla + 0x20, &v, 1, WALK_SET_AD, &c), 0);
	cr_expect_eq(ram[0x300020], 0x22);
	/* remap: the next write follows the new PTE */
	put64(pte, 0x380000 | P | RW | A | D);
	v = 0x33;
	cr_assert_eq(walk_write_cached(&vm.mem, &p, gla + 0x20, &v, 1, WALK_SET_AD, &c), 0);
	cr_expect_eq(ram[0x380020], 0x33);
	cr_expect_eq(ram[0x300020], 0x22, "the old page is not written");
	/* the guest clears A and D: the next write sets them again */
	put64(pte, get64(pte) & ~(A | D));
	cr_assert_eq(walk_write_cached(&vm.mem, &p, gla + 0x21, &v, 1, WALK_SET_AD, &c), 0);
	cr_expect_eq(get64(pte) & (A | D), A | D);
	/* read-only now: a write is refused, not served from the cache */
	put64(pte, get64(pte) & ~RW);
	cr_expect_eq(walk_write_cached(&vm.mem, &p, gla + 0x22, &v, 1, WALK_SET_AD, &c), -EACCES);
	/* not present: the cached translation is not used */
	put64(pte, 0);
	cr_expect_eq(walk_write_cached(&vm.mem, &p, gla + 0x20, &v, 1, 0, &c), -EFAULT);
	/* another CR3 never hits a line of the first */
	put64(pte, 0x300000 | P | RW);
	cr_assert_eq(walk_read_cached(&vm.mem, &p, gla, &v, 1, 0, &c), 0);
	cr_expect_eq(walk_read_cached(&vm.mem, &other, gla, &v, 1, 0, &c), -EFAULT);
	/* a record across two cached pages */
	map64(pml4, 4, gla + PAGE, 0x200000, 1, P | RW);
	{
		uint8_t rec[64];

		memset(rec, 0x5c, sizeof(rec));
		for (int k = 0; k < 2; k++)
			cr_assert_eq(walk_write_cached(&vm.mem, &p, gla + PAGE - 32, rec,
						       sizeof(rec), 0, &c),
				     0);
		cr_expect_eq(ram[0x300000 + PAGE - 1], 0x5c);
		cr_expect_eq(ram[0x200000 + 31], 0x5c);
		cr_expect_eq(ram[0x200000 + 32], 0);
	}
}
