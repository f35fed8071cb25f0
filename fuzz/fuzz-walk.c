/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the guest page walk (vpmu/walk.c).
 *
 * Input:
 *   bytes 0..31   CR0, CR3, CR4, EFER (little-endian u64)
 *   byte  32      number of accesses - 1 (low 3 bits)
 *   then          the accesses, 12 bytes each: gla u64, len u16,
 *                 flags u8 (low 5 bits: one beyond WALK_SET_AD is
 *                 invalid on purpose), op u8 (write, read, translate)
 *   the rest      guest RAM: the first half is region 0 at gpa 0, the
 *                 second region 1 at gpa 0x40000, 32 KiB each at most
 *
 * Each region ends right at a PROT_NONE page and starts after canary
 * bytes, so a store past a region faults and one before it is seen.
 * After every access the whole RAM is compared with what the
 * translations say should have changed; any difference is abort().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "walk.h"
#include "fuzz.h"

#define REGION_MAX  (32 * 1024)
#define SLACK	    4096
#define AREA	    (SLACK + REGION_MAX) /* canaries, then the region */
#define CANARY	    0xa5
#define MAX_LEN	    0xffff
#define MAX_PIECES  (MAX_LEN / 4096 + 2)
#define ACCESS_SIZE 12
#define HEADER_SIZE 33

static const uint64_t region_gpa[2] = { 0, 0x40000 };

static uint8_t *area[2]; /* AREA bytes, a PROT_NONE page after */
static uint8_t snap[2][AREA], expect[2][AREA], scratch[2][REGION_MAX];
static uint8_t src[MAX_LEN], dst[MAX_LEN], want[MAX_LEN], canaries[AREA];

static struct guest_region regs[2], scratch_regs[2];
static struct guest_mem mem, scratch_mem;

#define check(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz-walk: %s:%d: invariant broken: %s\n", __FILE__,      \
				__LINE__, #cond);                                                  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void setup_once(void)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t span = (size_t) page + 2 * (AREA + (size_t) page);
	uint8_t *base;

	if (area[0])
		return;
	check(AREA % page == 0);
	/* guard | area 0 | guard | area 1 | guard */
	base = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	check(base != MAP_FAILED);
	check(!mprotect(base, (size_t) page, PROT_NONE));
	area[0] = base + page;
	area[1] = area[0] + AREA + page;
	check(!mprotect(area[0] + AREA, (size_t) page, PROT_NONE));
	check(!mprotect(area[1] + AREA, (size_t) page, PROT_NONE));
	memset(canaries, CANARY, sizeof(canaries));
	for (size_t k = 0; k < MAX_LEN; k++)
		src[k] = (uint8_t) (k * 131 + 7);
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void take_snapshot(void)
{
	memcpy(snap[0], area[0], AREA);
	memcpy(snap[1], area[1], AREA);
}

static bool same_as(uint8_t img[2][AREA])
{
	return !memcmp(img[0], area[0], AREA) && !memcmp(img[1], area[1], AREA);
}

/* Offset in its area of a gpa that guest_mem_ptr() accepted. */
static void locate(const uint8_t *hva, int *ret_i, size_t *ret_off)
{
	for (int i = 0; i < 2; i++) {
		if (hva >= area[i] && hva < area[i] + AREA) {
			*ret_i = i;
			*ret_off = (size_t) (hva - area[i]);
			return;
		}
	}
	check(!"guest_mem_ptr() returned a pointer outside guest RAM");
}

/*
 * What a copy must do, from walk_translate() on the untouched image:
 * the pieces, the A/D bits (each piece's WALK_SET_AD walk on a fresh
 * copy), then the data. Fills `expect` (and `want` for a read).
 */
static int model(const struct walk_paging *p, uint64_t gla, size_t len, unsigned int flags,
		 bool write)
{
	uint64_t gpas[MAX_PIECES], lens[MAX_PIECES];
	unsigned int nr = 0, xflags = flags & ~WALK_SET_AD;
	uint64_t a = gla;
	size_t left = len, done = 0;

	memcpy(expect, snap, sizeof(expect));
	if (!len)
		return 0;
	if (len - 1 > UINT64_MAX - gla)
		return -EFAULT;
	xflags = write ? xflags | WALK_WRITE : xflags & ~WALK_WRITE;
	while (left) {
		struct walk_result res;
		uint64_t n;
		int r;

		r = walk_translate(&mem, p, a, xflags, &res);
		if (r < 0)
			return r;
		check(res.len && res.len <= res.page_size);
		check((res.gpa & (res.page_size - 1)) == (a & (res.page_size - 1)));
		n = res.len < left ? res.len : left;
		if (!guest_mem_ptr(&mem, res.gpa, n))
			return -EFAULT;
		check(nr < MAX_PIECES);
		gpas[nr] = res.gpa;
		lens[nr++] = n;
		a += n;
		left -= n;
	}
	check(same_as(snap));

	if (flags & WALK_SET_AD) {
		a = gla;
		for (unsigned int i = 0; i < nr; i++) {
			struct walk_result res;

			for (int j = 0; j < 2; j++)
				memcpy(scratch[j], regs[j].hva, regs[j].size);
			check(!walk_translate(&scratch_mem, p, a, xflags | WALK_SET_AD, &res));
			for (int j = 0; j < 2; j++) {
				size_t base = AREA - regs[j].size;

				for (size_t k = 0; k < regs[j].size; k++)
					expect[j][base + k] |= scratch[j][k];
			}
			a += lens[i];
		}
	}
	for (unsigned int i = 0; i < nr; i++) {
		int reg;
		size_t off;

		locate(guest_mem_ptr(&mem, gpas[i], lens[i]), &reg, &off);
		if (write)
			memcpy(&expect[reg][off], src + done, lens[i]);
		else
			memcpy(want + done, &expect[reg][off], lens[i]);
		done += lens[i];
	}
	return 0;
}

static void do_copy(const struct walk_paging *p, uint64_t gla, size_t len, unsigned int flags,
		    bool write)
{
	int want_r, r;

	memset(dst, 0x3c, len);
	memset(want, 0x3c, len);
	take_snapshot();
	want_r = model(p, gla, len, flags, write);
	check(same_as(snap));
	if (write)
		r = walk_write(&mem, p, gla, src, len, flags);
	else
		r = walk_read(&mem, p, gla, dst, len, flags);
	check(r == want_r);
	check(r == 0 || r == -EFAULT || r == -EACCES || r == -EINVAL || r == -ENOMEM);
	if (r < 0) {
		/* a failed copy writes nothing, anywhere */
		check(same_as(snap));
		check(!memcmp(dst, want, len));
		return;
	}
	check(same_as(expect));
	if (!write)
		check(!memcmp(dst, want, len));
}

/*
 * PAE paging outside long mode: did the walk's A/D update change one of
 * the four PDPTEs at CR3[31:5]? The walker reads them from memory on every
 * walk (hardware loads them at MOV CR3), and bits 5 and 6, A and D in a
 * PDE or PTE, are reserved in a PDPTE: a guest whose PDE or PTE is also
 * its PDPTE gets a fault on the next walk, as it would after reloading
 * CR3 on hardware.
 */
static bool ad_set_in_pdptes(const struct walk_paging *p)
{
	uint64_t pdpt = p->cr3 & 0xffffffe0u;

	if (!(p->cr0 & (1ull << 31)) || !(p->cr4 & (1ull << 5)) || (p->efer & (1ull << 10)))
		return false;
	for (int i = 0; i < 2; i++) {
		uint64_t base = regs[i].gpa, end = base + regs[i].size;
		size_t k0 = AREA - regs[i].size;

		for (uint64_t g = pdpt; g < pdpt + 32; g++)
			if (g >= base && g < end &&
			    snap[i][k0 + (g - base)] != area[i][k0 + (g - base)])
				return true;
	}
	return false;
}

static void do_translate(const struct walk_paging *p, uint64_t gla, unsigned int flags)
{
	struct walk_result res, res2, before;
	int r, r2;

	memset(&res, 0xa5, sizeof(res));
	before = res;
	take_snapshot();
	r = walk_translate(&mem, p, gla, flags, &res);
	check(r == 0 || r == -EFAULT || r == -EACCES || r == -EINVAL);
	if (r < 0) {
		check(!memcmp(&res, &before, sizeof(res)));
		check(same_as(snap));
		return;
	}
	check(res.page_size == 4096 || res.page_size == 2 << 20 || res.page_size == 4 << 20 ||
	      res.page_size == 1 << 30);
	check(res.len == res.page_size - (gla & (res.page_size - 1)));
	check((res.gpa & (res.page_size - 1)) == (gla & (res.page_size - 1)));
	check(guest_mem_ptr(&mem, res.gpa, 1));

	if (same_as(snap))
		goto consistent;
	/* only A (bit 5) and D (bit 6) may have been set, in the low byte of an entry */
	for (int i = 0; i < 2; i++) {
		for (size_t k = 0; k < AREA; k++) {
			uint8_t was = snap[i][k], now = area[i][k];

			if (was == now)
				continue;
			check(flags & WALK_SET_AD);
			check(k >= AREA - regs[i].size);
			check((k - (AREA - regs[i].size)) % 4 == 0);
			check((was & now) == was && ((was ^ now) & ~0x60) == 0);
		}
	}

consistent:
	/* A/D do not change a translation, unless they landed in a PAE PDPTE */
	r2 = walk_translate(&mem, p, gla, flags & ~WALK_SET_AD, &res2);
	if (r2 == -EFAULT && ad_set_in_pdptes(p))
		return;
	check(r2 == 0);
	check(res2.gpa == res.gpa && res2.page_size == res.page_size && res2.len == res.len &&
	      res2.writable == res.writable && res2.user == res.user && res2.nx == res.nx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct walk_paging p;
	unsigned int nr;
	size_t ram, size0, size1;

	setup_once();
	if (size < HEADER_SIZE)
		return 0;
	p.cr0 = get_le64(data);
	p.cr3 = get_le64(data + 8);
	p.cr4 = get_le64(data + 16);
	p.efer = get_le64(data + 24);
	nr = (data[32] & 7) + 1;
	if (size < HEADER_SIZE + nr * ACCESS_SIZE)
		return 0;

	ram = size - HEADER_SIZE - nr * ACCESS_SIZE;
	size0 = ram / 2 < REGION_MAX ? ram / 2 : REGION_MAX;
	size1 = ram - size0 < REGION_MAX ? ram - size0 : REGION_MAX;
	memset(area[0], CANARY, AREA);
	memset(area[1], CANARY, AREA);
	for (int i = 0; i < 2; i++) {
		size_t sz = i ? size1 : size0;

		regs[i] = (struct guest_region){ region_gpa[i], sz, area[i] + AREA - sz };
		scratch_regs[i] = (struct guest_region){ region_gpa[i], sz, scratch[i] };
	}
	memcpy(regs[0].hva, data + HEADER_SIZE + nr * ACCESS_SIZE, size0);
	memcpy(regs[1].hva, data + HEADER_SIZE + nr * ACCESS_SIZE + size0, size1);
	/* an empty region 0 is no region at all */
	mem = (struct guest_mem){ size0 ? regs : regs + 1, (size_t) !!size0 + !!size1 };
	scratch_mem = (struct guest_mem){ size0 ? scratch_regs : scratch_regs + 1, mem.nr };

	for (unsigned int i = 0; i < nr; i++) {
		const uint8_t *a = data + HEADER_SIZE + i * ACCESS_SIZE;
		uint64_t gla = get_le64(a);
		size_t len = (size_t) a[8] | (size_t) a[9] << 8;
		unsigned int flags = a[10] & 0x1f;

		switch (a[11] % 3) {
		case 0:
			do_copy(&p, gla, len, flags, true);
			break;
		case 1:
			do_copy(&p, gla, len, flags, false);
			break;
		default:
			do_translate(&p, gla, flags);
			break;
		}
		/* the canaries before each region */
		for (int r = 0; r < 2; r++)
			check(!memcmp(area[r], canaries, AREA - regs[r].size));
	}
	return 0;
}
