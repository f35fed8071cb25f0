/* SPDX-License-Identifier: MIT */
/*
 * Guest memory and the guest page walk (SDM Vol. 3A ch. 4, "Paging").
 *
 * Decisions a reader should know:
 *  - MAXPHYADDR is WALK_MAXPHYADDR (52, the architectural maximum): with
 *    it, 4-level and 5-level entries have no reserved address bits, PAE
 *    entries reserve 62:52. 32-bit paging uses min(MAXPHYADDR, 40) = 40
 *    for PSE-36 (SDM 4.3): a 4-MByte PDE supplies physical bits 39:32 in
 *    its bits 20:13, and bit 21 is reserved.
 *  - Outside long mode (paging off, 32-bit, PAE) the CPU forms 32-bit
 *    linear addresses; a gla >= 2^32 is -EFAULT, and so is a copy that
 *    would wrap at 4 GiB. In long mode a copy that runs into the
 *    non-canonical hole or past 2^64 is -EFAULT too: nothing here wraps.
 *  - PAE PDPTEs are read from guest memory at each walk (hardware caches
 *    them at MOV CR3; a VMM that tracks them can keep them in RAM).
 *  - Not modelled: protection keys (no PKRU in struct walk_paging), SMEP
 *    (no instruction fetches), LAM, and explicit supervisor accesses
 *    under SMAP (they depend on RFLAGS.AC, which we do not have: they are
 *    allowed). WALK_IMPLICIT_SUPERVISOR wins over WALK_USER.
 *  - walk_translate() also requires the byte at the translated gpa to be
 *    guest RAM; walk_write()/walk_read() check every piece in full.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "walk.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "paging entries are read as host integers: little-endian hosts only"
#endif

#define WALK_MAXPHYADDR 52
/* 32-bit paging: min(MAXPHYADDR, 40) physical bits (SDM 4.3) */
#define PSE36_MAXPHYADDR 40
/* the address field of an 8-byte entry ends at bit 51 whatever MAXPHYADDR is */
#define ADDR_FIELD_END 52
static_assert(WALK_MAXPHYADDR >= PSE36_MAXPHYADDR && WALK_MAXPHYADDR <= ADDR_FIELD_END,
	      "the masks below assume 40 <= MAXPHYADDR <= 52");

/* SDM Vol. 3A 2.5: control registers; Vol. 4 Table 2-2: IA32_EFER */
#define X86_CR0_WP   BIT_ULL(16)
#define X86_CR0_PG   BIT_ULL(31)
#define X86_CR4_PSE  BIT_ULL(4)
#define X86_CR4_PGE  BIT_ULL(7)
#define X86_CR4_PAE  BIT_ULL(5)
#define X86_CR4_LA57 BIT_ULL(12)
#define X86_CR4_SMAP BIT_ULL(21)
#define EFER_LMA     BIT_ULL(10)
#define EFER_NXE     BIT_ULL(11)

/* SDM Vol. 3A 4.3-4.5, Tables 4-4 to 4-20: paging-structure entries */
#define PTE_P  BIT_ULL(0)
#define PTE_RW BIT_ULL(1)
#define PTE_US BIT_ULL(2)
#define PTE_A  BIT_ULL(5)
#define PTE_D  BIT_ULL(6)
#define PTE_PS BIT_ULL(7)
#define PTE_G  BIT_ULL(8) /* in the entry that maps the page */
#define PTE_XD BIT_ULL(63)

/* Table 4-8: PAE PDPTE bits 2:1 and 8:5 are reserved (no R/W, U/S, A) */
#define PAE_PDPTE_RSVD (GENMASK_ULL(2, 1) | GENMASK_ULL(8, 5))
/* Tables 4-6 and 4-9: a large page's PAT is bit 12, the bits above up to
 * the page alignment are reserved. */
#define PSE36_PDE_RSVD GENMASK_ULL(21, 21)
#define PDE_2M_RSVD    GENMASK_ULL(20, 13)
#define PDPTE_1G_RSVD  GENMASK_ULL(29, 13)

#define PAGE_SHIFT 12
#define PAGE_SIZE  BIT_ULL(PAGE_SHIFT)

/* The entries a walk used, so A/D can be set once it has succeeded. */
#define WALK_MAX_LEVELS 5

struct walk_trace {
	void *entry[WALK_MAX_LEVELS]; /* only entries that have an A bit */
	unsigned int nr;	      /* the last one maps the page */
	unsigned int size;	      /* 4 (32-bit paging) or 8 */
};

void *guest_mem_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	const struct guest_region *r;
	size_t lo = 0, hi = mem->nr;
	uint64_t off;

	if (!len)
		len = 1;
	/* [gpa, gpa + len) must not wrap, whatever a region claims */
	if (gpa + (len - 1) < gpa)
		return NULL;

	/* the last region starting at or below gpa */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (mem->regions[mid].gpa <= gpa)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	r = &mem->regions[lo - 1];
	off = gpa - r->gpa;
	if (off >= r->size || len > r->size - off)
		return NULL;
	return r->hva + off;
}

static bool aligned(const void *ptr, unsigned int size)
{
	return ((uintptr_t) ptr & (size - 1)) == 0;
}

/*
 * One load: another vCPU may be rewriting the entry, and every decision
 * about it must see the same value.
 */
static int read_entry(const struct guest_mem *mem, uint64_t gpa, unsigned int size,
		      struct walk_trace *trace, bool has_a, uint64_t *ret)
{
	void *ptr = guest_mem_ptr(mem, gpa, size);
	uint64_t v;

	if (!ptr)
		return -EFAULT;
	if (size == 4) {
		uint32_t v32;

		if (aligned(ptr, 4))
			v32 = __atomic_load_n((uint32_t *) ptr, __ATOMIC_RELAXED);
		else
			memcpy(&v32, ptr, 4);
		v = v32;
	} else {
		if (aligned(ptr, 8))
			v = __atomic_load_n((uint64_t *) ptr, __ATOMIC_RELAXED);
		else
			memcpy(&v, ptr, 8);
	}
	if (has_a)
		trace->entry[trace->nr++] = ptr;
	*ret = v;
	return 0;
}

static uint64_t load_entry(const void *ptr, unsigned int size);

/* Locked OR, as the processor's own A/D updates are (SDM 4.8). */
static void set_bits(void *ptr, unsigned int size, uint64_t bits)
{
	if (size == 4) {
		uint32_t v;

		if (aligned(ptr, 4)) {
			__atomic_fetch_or((uint32_t *) ptr, (uint32_t) bits, __ATOMIC_SEQ_CST);
			return;
		}
		memcpy(&v, ptr, 4);
		v |= (uint32_t) bits;
		memcpy(ptr, &v, 4);
	} else {
		uint64_t v;

		if (aligned(ptr, 8)) {
			__atomic_fetch_or((uint64_t *) ptr, bits, __ATOMIC_SEQ_CST);
			return;
		}
		memcpy(&v, ptr, 8);
		v |= bits;
		memcpy(ptr, &v, 8);
	}
}

static void trace_set_ad(const struct walk_trace *trace, bool write)
{
	for (unsigned int i = 0; i < trace->nr; i++) {
		uint64_t bits = PTE_A;

		if (write && i == trace->nr - 1)
			bits |= PTE_D;
		/* like the processor, write only bits that are still clear */
		if ((load_entry(trace->entry[i], trace->size) & bits) != bits)
			set_bits(trace->entry[i], trace->size, bits);
	}
}

static void leaf(struct walk_result *res, uint64_t gla, uint64_t base, uint64_t page_size)
{
	uint64_t off = gla & (page_size - 1);

	res->gpa = (base & ~(page_size - 1)) | off;
	res->page_size = page_size;
	res->len = page_size - off;
}

/* SDM 4.3: 32-bit paging, 4-byte entries, 4-KByte and 4-MByte pages. */
static int walk_32bit(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		      struct walk_result *res, struct walk_trace *trace)
{
	uint64_t pde, pte;
	int r;

	trace->size = 4;
	r = read_entry(mem, (p->cr3 & GENMASK_ULL(31, 12)) | ((gla >> 22) << 2), 4, trace, true,
		       &pde);
	if (r < 0)
		return r;
	if (!(pde & PTE_P))
		return -EFAULT;
	res->writable = pde & PTE_RW;
	res->user = pde & PTE_US;

	/* PS is ignored, not reserved, without CR4.PSE */
	if ((p->cr4 & X86_CR4_PSE) && (pde & PTE_PS)) {
		uint64_t hi = FIELD_GET(GENMASK_ULL(PSE36_MAXPHYADDR - 20, 13), pde);

		if (pde & PSE36_PDE_RSVD)
			return -EFAULT;
		leaf(res, gla, (pde & GENMASK_ULL(31, 22)) | (hi << 32), BIT_ULL(22));
		res->global = (p->cr4 & X86_CR4_PGE) && (pde & PTE_G);
		return 0;
	}

	r = read_entry(mem, (pde & GENMASK_ULL(31, 12)) | (((gla >> 12) & 0x3ff) << 2), 4, trace,
		       true, &pte);
	if (r < 0)
		return r;
	if (!(pte & PTE_P))
		return -EFAULT;
	res->writable &= !!(pte & PTE_RW);
	res->user &= !!(pte & PTE_US);
	leaf(res, gla, pte & GENMASK_ULL(31, 12), PAGE_SIZE);
	res->global = (p->cr4 & X86_CR4_PGE) && (pte & PTE_G);
	return 0;
}

/*
 * SDM 4.4 and 4.5: PAE, 4-level and 5-level paging, 8-byte entries with
 * 9 index bits per level. `level` is the level of the table at `table`
 * (5 = PML5 ... 1 = page table).
 */
static int walk_64bit(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		      uint64_t table, unsigned int level, bool pae, struct walk_result *res,
		      struct walk_trace *trace)
{
	uint64_t addr_mask = GENMASK_ULL(WALK_MAXPHYADDR - 1, PAGE_SHIFT);
	uint64_t rsvd;

	/*
	 * PAE reserves every bit from MAXPHYADDR to 62 (Tables 4-9 to 4-11);
	 * 4- and 5-level paging only 51:MAXPHYADDR, 62:52 are ignored
	 * (Tables 4-15 to 4-20). Without EFER.NXE bit 63 is reserved too.
	 */
	if (pae)
		rsvd = GENMASK_ULL(62, WALK_MAXPHYADDR);
	else
		rsvd = lowmask_ull(ADDR_FIELD_END) & ~lowmask_ull(WALK_MAXPHYADDR);
	if (!(p->efer & EFER_NXE))
		rsvd |= PTE_XD;

	for (;; level--) {
		unsigned int shift = PAGE_SHIFT + 9 * (level - 1);
		uint64_t index = (gla >> shift) & 0x1ff;
		uint64_t e, e_rsvd = rsvd;
		int r;

		r = read_entry(mem, table + index * 8, 8, trace, true, &e);
		if (r < 0)
			return r;
		if (!(e & PTE_P))
			return -EFAULT;

		/* PS in a PML5E or PML4E is reserved (Tables 4-15, 4-16) */
		if (level >= 4)
			e_rsvd |= PTE_PS;
		else if (level == 3 && (e & PTE_PS))
			e_rsvd |= PDPTE_1G_RSVD;
		else if (level == 2 && (e & PTE_PS))
			e_rsvd |= PDE_2M_RSVD;
		if (e & e_rsvd)
			return -EFAULT;

		res->writable &= !!(e & PTE_RW);
		res->user &= !!(e & PTE_US);
		if (p->efer & EFER_NXE)
			res->nx |= !!(e & PTE_XD);

		/* bit 7 of a PTE is PAT, not PS */
		if (level == 1 || (level <= 3 && (e & PTE_PS))) {
			leaf(res, gla, e & addr_mask, BIT_ULL(shift));
			res->global = (p->cr4 & X86_CR4_PGE) && (e & PTE_G);
			return 0;
		}
		table = e & addr_mask;
	}
}

/* SDM 4.4.1: the four PDPTEs at CR3 bits 31:5 lead to the page directory. */
static int walk_pae(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		    struct walk_result *res, struct walk_trace *trace)
{
	uint64_t pdpte, rsvd = PAE_PDPTE_RSVD | GENMASK_ULL(63, WALK_MAXPHYADDR);
	int r;

	trace->size = 8;
	/* no A bit in a PDPTE: it is not traced for A/D */
	r = read_entry(mem, (p->cr3 & GENMASK_ULL(31, 5)) | ((gla >> 30) << 3), 8, trace, false,
		       &pdpte);
	if (r < 0)
		return r;
	if (!(pdpte & PTE_P))
		return -EFAULT;
	if (pdpte & rsvd)
		return -EFAULT;
	return walk_64bit(mem, p, gla, pdpte & GENMASK_ULL(WALK_MAXPHYADDR - 1, PAGE_SHIFT), 2,
			  true, res, trace);
}

static int walk_long(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		     struct walk_result *res, struct walk_trace *trace)
{
	bool la57 = p->cr4 & X86_CR4_LA57;

	if (!is_canonical(gla, la57 ? 57 : 48))
		return -EFAULT;
	trace->size = 8;
	/* CR3 bits 11:0 are PCID or flags, bits 63:52 never an address */
	return walk_64bit(mem, p, gla, p->cr3 & GENMASK_ULL(WALK_MAXPHYADDR - 1, PAGE_SHIFT),
			  la57 ? 5 : 4, false, res, trace);
}

/* SDM 4.6: access rights from the effective R/W, U/S of the walk. */
static int check_access(const struct walk_paging *p, const struct walk_result *res,
			unsigned int flags)
{
	bool user = (flags & WALK_USER) && !(flags & WALK_IMPLICIT_SUPERVISOR);

	if (user && !res->user)
		return -EACCES;
	/* 4.6.1: implicit supervisor accesses to user pages are SMAP-checked whatever AC says */
	if ((flags & WALK_IMPLICIT_SUPERVISOR) && res->user && (p->cr4 & X86_CR4_SMAP))
		return -EACCES;
	if ((flags & WALK_WRITE) && !res->writable && (user || (p->cr0 & X86_CR0_WP)))
		return -EACCES;
	return 0;
}

/* The walk and the access check, without touching guest memory. */
static int walk(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		unsigned int flags, struct walk_result *ret, struct walk_trace *ret_trace)
{
	struct walk_result res = { .writable = true, .user = true };
	struct walk_trace trace = { .nr = 0 };
	int r;

	if (flags & ~WALK_ALL_FLAGS)
		return -EINVAL;

	if (!(p->cr0 & X86_CR0_PG)) {
		/* No paging is only possible outside long mode: 32-bit addresses. */
		if (gla >> 32)
			return -EFAULT;
		/* and no access rights to check: U/S, R/W and SMAP need paging */
		leaf(&res, gla, gla, PAGE_SIZE);
		*ret = res;
		*ret_trace = trace;
		return 0;
	} else if (p->efer & EFER_LMA) {
		r = walk_long(mem, p, gla, &res, &trace);
		if (r < 0)
			return r;
	} else {
		if (gla >> 32)
			return -EFAULT;
		if (p->cr4 & X86_CR4_PAE)
			r = walk_pae(mem, p, gla, &res, &trace);
		else
			r = walk_32bit(mem, p, gla, &res, &trace);
		if (r < 0)
			return r;
	}

	r = check_access(p, &res, flags);
	if (r < 0)
		return r;
	*ret = res;
	*ret_trace = trace;
	return 0;
}

int walk_translate(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		   unsigned int flags, struct walk_result *ret)
{
	struct walk_result res;
	struct walk_trace trace;
	int r;

	r = walk(mem, p, gla, flags, &res, &trace);
	if (r < 0)
		return r;
	if (!guest_mem_ptr(mem, res.gpa, 1))
		return -EFAULT;
	if (flags & WALK_SET_AD)
		trace_set_ad(&trace, flags & WALK_WRITE);
	*ret = res;
	return 0;
}

/* One page-sized (or shorter) piece of a copy, checked and ready. */
struct piece {
	uint8_t *hva;
	size_t len;
	uint64_t gla;
	uint64_t gpa; /* walked pieces: the translation of gla */
	bool walked;  /* a full walk (not a cache hit): may fill the cache */
	struct walk_trace trace;
};

#define PIECES_ON_STACK 8

/*
 * Translate and bounds-check every piece of [gla, gla + len) before the
 * caller touches anything. The host pointers are kept rather than the
 * walk redone later: the copy itself may rewrite the guest's page
 * tables, and must not change where its own later pieces land.
 */
static uint64_t load_entry(const void *ptr, unsigned int size)
{
	uint64_t v;

	if (size == 4) {
		uint32_t v32;

		if (aligned(ptr, 4))
			v32 = __atomic_load_n((const uint32_t *) ptr, __ATOMIC_RELAXED);
		else
			memcpy(&v32, ptr, 4);
		return v32;
	}
	if (aligned(ptr, 8))
		return __atomic_load_n((const uint64_t *) ptr, __ATOMIC_RELAXED);
	memcpy(&v, ptr, 8);
	return v;
}

static bool cacheable(const struct walk_paging *p)
{
	/* every level of these walks is traced (has an A bit) */
	return (p->cr0 & X86_CR0_PG) && ((p->efer & EFER_LMA) || !(p->cr4 & X86_CR4_PAE));
}

/* After a full walk (and its A/D update): remember the entries as they are now. */
static void cache_fill(struct walk_cache *c, const struct guest_mem *mem,
		       const struct walk_paging *p, const struct piece *pc, unsigned int flags)
{
	struct walk_cache_line *l = walk_cache_line_of(c, pc->gla);
	/* a hit may use any byte of the 4 KiB page: all of it must be RAM */
	uint8_t *page = guest_mem_ptr(mem, pc->gpa & ~(PAGE_SIZE - 1), PAGE_SIZE);

	if (!walk_same_paging(&c->p, p)) {
		walk_cache_reset(c);
		c->p = *p;
	}
	l->tag = 0; /* empty until filled */
	if (!page || !cacheable(p) || !pc->trace.nr || pc->trace.nr > WALK_CACHE_LEVELS)
		return;
	l->hva = page;
	l->nr = pc->trace.nr;
	l->size = pc->trace.size;
	for (unsigned int i = 0; i < l->nr; i++) {
		if (!aligned(pc->trace.entry[i], l->size))
			return; /* misaligned tables: always walk */
		l->entry[i] = pc->trace.entry[i];
		l->value[i] = load_entry(l->entry[i], l->size);
	}
	l->tag = walk_cache_tag(pc->gla, flags);
}

/*
 * Copy without walking when every page of [gla, gla + len) (at most two)
 * hits the cache; false, and nothing copied, otherwise.
 */
static inline __attribute__((always_inline)) bool cached_copy(struct walk_cache *c,
							      const struct walk_paging *p,
							      uint64_t gla, void *buf, size_t len,
							      unsigned int flags)
{
	size_t first = PAGE_SIZE - (gla & (PAGE_SIZE - 1));
	uint8_t *hva0, *hva1 = NULL;

	if ((flags & ~WALK_ALL_FLAGS) || (uint64_t) len - 1 > UINT64_MAX - gla ||
	    len > first + PAGE_SIZE || !walk_same_paging(&c->p, p))
		return false;
	hva0 = walk_cache_lookup(c, gla, flags);
	if (!hva0)
		return false;
	if (len > first) {
		hva1 = walk_cache_lookup(c, gla + first, flags);
		if (!hva1)
			return false;
	} else {
		first = len;
	}
	/* memmove: the other side may itself be guest RAM */
	if (flags & WALK_WRITE) {
		memmove(hva0, buf, first);
		if (hva1)
			memmove(hva1, (uint8_t *) buf + first, len - first);
	} else {
		memmove(buf, hva0, first);
		if (hva1)
			memmove((uint8_t *) buf + first, hva1, len - first);
	}
	return true;
}

void walk_cache_reset(struct walk_cache *c)
{
	memset(c, 0, sizeof(*c));
	c->p.cr0 = ~0ull; /* no guest's CR0: the next lookup misses */
}

static int copy_plan(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		     size_t len, unsigned int flags, struct walk_cache *cache, struct piece *stack,
		     struct piece **ret_pieces, size_t *ret_nr)
{
	struct piece *pieces = stack;
	size_t nr = 0, cap = PIECES_ON_STACK;
	int r;

	if ((uint64_t) len - 1 > UINT64_MAX - gla)
		return -EFAULT;

	while (len) {
		struct walk_result res;
		struct walk_trace trace = { .nr = 0 };
		bool walked = false;
		uint8_t *hva;
		size_t n;

		hva = cache && walk_same_paging(&cache->p, p) ? walk_cache_lookup(cache, gla, flags)
							      : NULL;
		if (hva) {
			n = PAGE_SIZE - (gla & (PAGE_SIZE - 1));
			n = n < len ? n : len;
		} else {
			r = walk(mem, p, gla, flags, &res, &trace);
			if (r < 0)
				goto fail;
			n = res.len < len ? (size_t) res.len : len;
			hva = guest_mem_ptr(mem, res.gpa, n);
			if (!hva) {
				r = -EFAULT;
				goto fail;
			}
			walked = true;
		}

		if (nr == cap) {
			struct piece *grown;

			if (cap > SIZE_MAX / 2 / sizeof(*pieces)) {
				r = -ENOMEM;
				goto fail;
			}
			grown = malloc(2 * cap * sizeof(*pieces));
			if (!grown) {
				r = -ENOMEM;
				goto fail;
			}
			memcpy(grown, pieces, nr * sizeof(*pieces));
			if (pieces != stack)
				free(pieces);
			pieces = grown;
			cap *= 2;
		}
		pieces[nr++] = (struct piece){
			.hva = hva,
			.len = n,
			.gla = gla,
			.gpa = walked ? res.gpa : 0,
			.walked = walked,
			.trace = trace,
		};

		gla += n;
		len -= n;
	}

	*ret_pieces = pieces;
	*ret_nr = nr;
	return 0;
fail:
	if (pieces != stack)
		free(pieces);
	return r;
}

/* A/D first, as the processor sets them before the access completes. */
static void copy_set_ad(const struct piece *pieces, size_t nr, unsigned int flags)
{
	if (!(flags & WALK_SET_AD))
		return;
	for (size_t i = 0; i < nr; i++)
		trace_set_ad(&pieces[i].trace, flags & WALK_WRITE);
}

static void copy_fill_cache(struct walk_cache *c, const struct guest_mem *mem,
			    const struct walk_paging *p, const struct piece *pieces, size_t nr,
			    unsigned int flags)
{
	if (!c)
		return;
	for (size_t i = 0; i < nr; i++)
		if (pieces[i].walked)
			cache_fill(c, mem, p, &pieces[i], flags);
}

/* A record across two cached pages: out of line, so a one-page hit stays a few loads. */
static bool __attribute__((noinline))
cached_two_pages(struct walk_cache *c, const struct walk_paging *p, uint64_t gla, void *buf,
		 size_t len, unsigned int flags)
{
	return cached_copy(c, p, gla, buf, len, flags);
}

/* The walks behind a cache miss. */
static int __attribute__((noinline))
write_walked(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
	     const void *src, size_t len, unsigned int flags, struct walk_cache *c)
{
	struct piece stack[PIECES_ON_STACK], *pieces;
	const uint8_t *s = src;
	size_t nr;
	int r;

	r = copy_plan(mem, p, gla, len, flags, c, stack, &pieces, &nr);
	if (r < 0)
		return r;
	copy_set_ad(pieces, nr, flags);
	copy_fill_cache(c, mem, p, pieces, nr, flags);
	/* memmove: src may itself be guest RAM */
	for (size_t i = 0; i < nr; i++) {
		memmove(pieces[i].hva, s, pieces[i].len);
		s += pieces[i].len;
	}
	if (pieces != stack)
		free(pieces);
	return 0;
}

int walk_write_miss(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		    const void *src, size_t len, unsigned int flags, struct walk_cache *c)
{
	if (c && cached_two_pages(c, p, gla, (void *) src, len, flags))
		return 0;
	return write_walked(mem, p, gla, src, len, flags, c);
}

static int __attribute__((noinline))
read_walked(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla, void *dst,
	    size_t len, unsigned int flags, struct walk_cache *c)
{
	struct piece stack[PIECES_ON_STACK], *pieces;
	uint8_t *d = dst;
	size_t nr;
	int r;

	r = copy_plan(mem, p, gla, len, flags, c, stack, &pieces, &nr);
	if (r < 0)
		return r;
	copy_set_ad(pieces, nr, flags);
	copy_fill_cache(c, mem, p, pieces, nr, flags);
	for (size_t i = 0; i < nr; i++) {
		memmove(d, pieces[i].hva, pieces[i].len);
		d += pieces[i].len;
	}
	if (pieces != stack)
		free(pieces);
	return 0;
}

int walk_read_miss(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
		   void *dst, size_t len, unsigned int flags, struct walk_cache *c)
{
	if (c && cached_two_pages(c, p, gla, dst, len, flags))
		return 0;
	return read_walked(mem, p, gla, dst, len, flags, c);
}

int walk_write(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla,
	       const void *src, size_t len, unsigned int flags)
{
	return walk_write_cached(mem, p, gla, src, len, flags, NULL);
}

int walk_read(const struct guest_mem *mem, const struct walk_paging *p, uint64_t gla, void *dst,
	      size_t len, unsigned int flags)
{
	return walk_read_cached(mem, p, gla, dst, len, flags, NULL);
}
