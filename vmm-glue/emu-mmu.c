/* SPDX-License-Identifier: MIT */
/*
 * Guest memory for the emulator vCPU on Unicorn 2.0.1 (see emu-priv.h).
 *
 * Guest RAM is a memory file. Unicorn runs with the guest's own paging
 * registers, so its page walk checks every access exactly as the SDM
 * says (Vol. 3A ch. 4: present, R/W with CR0.WP, U/S, XD, SMEP/SMAP,
 * reserved bits, Accessed/Dirty) and raises #PF at the faulting
 * instruction with CR2 set. Its walk reads the guest's tables from
 * Unicorn's address space, where RAM sits at its guest-physical
 * addresses (the identity regions). After a successful walk Unicorn
 * 2.0.1 uses the linear address itself as the address of the data, so
 * each linear range outside the identity regions is a window: one
 * Unicorn region over a host reserve in which a page is mapped from the
 * RAM file (the guest page the tables name) when the host first touches
 * it. That touch is a host SIGSEGV, taken here; it never reaches the
 * guest, which only sees the walk Unicorn already did.
 *
 * Mapped pages are checked against the guest's tables again whenever
 * the guest changes its paging (MOV CR0/CR3/CR4, INVLPG, EFER): pages
 * whose translation changed are dropped, with the translations Unicorn
 * made from them. Self-modifying code through another mapping of the same
 * guest page (Linux's text_poke writes kernel text through a temporary
 * mm) is caught by mapping pages that hold translated code read-only in
 * every window: a write through any of them is a host fault, after which
 * the run loop drops the translations of every mapping of that page.
 *
 * Known limit: a linear address inside an identity region always means
 * that guest-physical address (Unicorn cannot map it elsewhere), so a
 * guest that maps linear addresses inside its RAM's physical range onto
 * other pages is refused with one line (mmu_check_identity).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "emu-priv.h"

#define PAGE	 4096ull
#define CR0_PG	 (1ull << 31)
#define CR4_PAE	 (1ull << 5)
#define CR4_LA57 (1ull << 12)
#define EFER_LMA (1ull << 10)
#define POP_SOFT (POP_CAP - 4096) /* past this, drop every mapped page at the next stop */
#define PF_ERR_W (1u << 1)	  /* host page-fault error code: a write (REG_ERR) */

/* ---- the SIGSEGV handler: a window page the host touched first ------- */

#define MAX_EMUS 4
static struct emu *volatile emus[MAX_EMUS];
static struct sigaction old_segv;
static int handler_users;

static struct vpmu_paging paging(const struct emu *emu)
{
	struct vpmu_paging p = { emu->cr0, emu->cr3, emu->cr4, emu->efer };

	return p;
}

static struct window *window_of_host(struct emu *emu, const uint8_t *a)
{
	for (unsigned int i = 0; i < emu->mmu.nr_win; i++) {
		struct window *w = &emu->mmu.win[i];

		if (a >= w->host && a < w->host + w->size)
			return w;
	}
	return NULL;
}

static bool in_identity(const struct emu_mmu *m, uint64_t gpa)
{
	for (unsigned int i = 0; i < m->nr_ram; i++)
		if (gpa >= m->ram[i].gpa && gpa < m->ram[i].gpa + m->ram[i].size)
			return true;
	return false;
}

static bool is_code(const struct emu *emu, uint64_t gpa)
{
	uint64_t pfn = gpa / PAGE;

	return gpa < emu->mmu.ram_top && (emu->mmu.code[pfn / 8] >> (pfn % 8) & 1);
}

/*
 * Stop Unicorn at the next block boundary, from anywhere (a signal handler
 * too): the block hook sees the flag. Never uc_emu_stop() here: Unicorn
 * 2.0.1 looks for a stop request after every memory access too, and one
 * seen there leaves the block half done with RIP at its start, so the
 * instructions before the access would run twice.
 */
static void request_stop(struct emu *emu)
{
	emu->async_stop = 1;
}

static int32_t pop_alloc(struct emu_mmu *m)
{
	int32_t i = m->free_head;

	if (i < 0)
		return -1;
	m->free_head = m->pop[i].next;
	return i;
}

/* Map the window page at `a` (host) onto what the guest's tables say now. Async-signal-safe. */
static bool map_page(struct emu *emu, struct window *w, uint8_t *a)
{
	struct emu_mmu *m = &emu->mmu;
	uint64_t idx = (uint64_t) (a - w->host) / PAGE, la = w->la + idx * PAGE, gpa;
	struct vpmu_paging p = paging(emu);
	struct vpmu_walk_result res;
	uint8_t *host = w->host + idx * PAGE;
	bool ro = false, global = false;
	int32_t i;

	i = pop_alloc(m);
	if (i < 0)
		return false;
	if (vpmu_walk_translate(emu->mem, &p, la, 0, &res, sizeof(res)) == 0) {
		gpa = res.gpa & ~(PAGE - 1);
		ro = is_code(emu, gpa);
		global = res.global;
		if (mmap(host, PAGE, ro ? PROT_READ : PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, m->memfd, (off_t) gpa) == MAP_FAILED) {
			m->pop[i].next = m->free_head;
			m->free_head = i;
			return false;
		}
	} else {
		/*
		 * Unicorn's walk let the access through, so the guest's tables
		 * map this page outside RAM (or changed without a TLB flush):
		 * unbacked physical memory reads all ones (no device answers).
		 */
		gpa = POP_NO_RAM;
		if (mmap(host, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
			 0) == MAP_FAILED) {
			m->pop[i].next = m->free_head;
			m->free_head = i;
			return false;
		}
		memset(host, 0xff, PAGE);
		if (!m->bad) {
			m->bad_la = la;
			m->bad = mmu_maps_apic(emu, la) ? 2 : 1;
			if (m->bad == 2)
				request_stop(emu);
		}
	}
	m->pop[i] = (struct pop){ .la = la,
				  .gpa = gpa,
				  .next = -1,
				  .dense = m->nr_used,
				  .win = (uint16_t) (w - m->win),
				  .ro = ro,
				  .global = global };
	if (gpa != POP_NO_RAM) {
		m->pop[i].next = m->gpa_head[gpa / PAGE];
		m->gpa_head[gpa / PAGE] = i;
	}
	m->used[m->nr_used++] = (uint32_t) i;
	w->pop[idx] = (uint32_t) i + 1;
	m->faults++;
	if (m->nr_used >= POP_SOFT && !m->pop_full) {
		m->pop_full = 1;
		request_stop(emu);
	}
	return true;
}

/*
 * A write to a page mapped read-only because it holds translated code run
 * through another page. Its bytes before the write are kept, for
 * mmu_smc_service to see which translations the writes made stale; the
 * write then goes through (the handler returns and the store is redone).
 */
static bool code_write(struct emu *emu, struct pop *pp, uint8_t *host)
{
	struct emu_mmu *m = &emu->mmu;
	int n = m->smc_n, i;

	for (i = 0; i < n && m->smc_gpa[i] != pp->gpa; i++)
		;
	if (i == n) {
		if (n < SMC_CAP) {
			memcpy(m->smc_old + (size_t) n * PAGE, host, PAGE);
			m->smc_gpa[n] = pp->gpa;
			m->smc_n = n + 1;
		} else {
			m->smc_overflow = 1;
		}
	}
	if (mprotect(host, PAGE, PROT_READ | PROT_WRITE) < 0)
		return false;
	pp->ro = false;
	return true;
}

static bool handle_fault(struct emu *emu, uint8_t *a, bool write)
{
	struct window *w = window_of_host(emu, a);
	uint64_t idx;

	if (!w)
		return false;
	idx = (uint64_t) (a - w->host) / PAGE;
	if (w->pop[idx]) {
		struct pop *pp = &emu->mmu.pop[w->pop[idx] - 1];

		if (write && pp->ro)
			return code_write(emu, pp, w->host + idx * PAGE);
		return false; /* mapped and still faulting: not ours to hide */
	}
	return map_page(emu, w, a);
}

static void on_segv(int sig, siginfo_t *si, void *uctx)
{
	ucontext_t *uc = uctx;
	bool write = uc && (uc->uc_mcontext.gregs[REG_ERR] & PF_ERR_W);

	for (unsigned int i = 0; i < MAX_EMUS; i++) {
		struct emu *emu = emus[i];

		if (emu && handle_fault(emu, si->si_addr, write))
			return;
	}
	/* not a window page: whoever handled SIGSEGV before (ASan, or the default) */
	if ((old_segv.sa_flags & SA_SIGINFO) && old_segv.sa_sigaction) {
		old_segv.sa_sigaction(sig, si, uctx);
		return;
	}
	if (old_segv.sa_handler != SIG_DFL && old_segv.sa_handler != SIG_IGN) {
		old_segv.sa_handler(sig);
		return;
	}
	signal(SIGSEGV, SIG_DFL); /* the access faults again and the process dies with it */
}

static int handler_add(struct emu *emu)
{
	unsigned int i;

	for (i = 0; i < MAX_EMUS && emus[i]; i++)
		;
	if (i == MAX_EMUS)
		return -EBUSY;
	if (handler_users++ == 0) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_segv;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSEGV, &sa, &old_segv) < 0) {
			handler_users--;
			return -errno;
		}
	}
	emus[i] = emu;
	return 0;
}

static void handler_remove(struct emu *emu)
{
	for (unsigned int i = 0; i < MAX_EMUS; i++) {
		if (emus[i] != emu)
			continue;
		emus[i] = NULL;
		if (--handler_users == 0)
			sigaction(SIGSEGV, &old_segv, NULL);
	}
}

/* ---- setup ------------------------------------------------------------ */

static uint8_t m_dummy[PAGE]; /* stands in for the APIC page in a walk: never read */

/*
 * The guest memory the walks read: RAM (emu->mem), and RAM with the local
 * APIC's page (emu->mem_apic, for mmu_maps_apic()). Made here once: the
 * walks run in the SIGSEGV handler, which must not allocate.
 */
static int walk_memory(struct emu *emu, char *err, size_t errlen)
{
	struct emu_mmu *m = &emu->mmu;
	struct vpmu_mem_region regs[sizeof(m->ram) / sizeof(m->ram[0]) + 1];
	int r;

	memcpy(regs, m->ram, m->nr_ram * sizeof(regs[0]));
	regs[m->nr_ram] =
		(struct vpmu_mem_region){ .gpa = APIC_DEFAULT_BASE, .size = PAGE, .hva = m_dummy };
	r = vpmu_guest_memory_new(regs, m->nr_ram, &emu->mem);
	if (r == 0)
		r = vpmu_guest_memory_new(regs, m->nr_ram + 1, &emu->mem_apic);
	if (r < 0)
		snprintf(err, errlen, "cannot describe guest RAM to the page walk: %s",
			 strerror(-r));
	return r;
}

int mmu_init(struct emu *emu, const struct vpmu_mem_region *ram, unsigned int nr, char *err,
	     size_t errlen)
{
	struct emu_mmu *m = &emu->mmu;
	uint64_t top = 0, pages;
	int r;

	m->memfd = -1;
	if (!nr || nr > sizeof(m->ram) / sizeof(m->ram[0])) {
		snprintf(err, errlen, "internal: %u RAM ranges", nr);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < nr; i++)
		if (ram[i].gpa + ram[i].size > top)
			top = ram[i].gpa + ram[i].size;
	m->memfd = memfd_create("vpmu-guest-ram", MFD_CLOEXEC);
	if (m->memfd < 0 || ftruncate(m->memfd, (off_t) top) < 0) {
		snprintf(err, errlen, "cannot create %llu MiB of guest RAM: %s",
			 (unsigned long long) (top >> 20), strerror(errno));
		return -ENOMEM;
	}
	emu->ram = mmap(NULL, top, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, m->memfd, 0);
	if (emu->ram == MAP_FAILED) {
		emu->ram = NULL;
		snprintf(err, errlen, "cannot map %llu MiB of guest RAM: %s",
			 (unsigned long long) (top >> 20), strerror(errno));
		return -ENOMEM;
	}
	m->ram_top = top;
	m->nr_ram = nr;
	for (unsigned int i = 0; i < nr; i++) {
		m->ram[i] = ram[i];
		m->ram[i].hva = emu->ram + ram[i].gpa;
	}
	r = walk_memory(emu, err, errlen);
	if (r < 0)
		return r;

	pages = top / PAGE;
	m->pop = calloc(POP_CAP, sizeof(*m->pop));
	m->used = calloc(POP_CAP, sizeof(*m->used));
	m->gpa_head = malloc(pages * sizeof(*m->gpa_head));
	m->code = calloc(pages / 8 + 1, 1);
	m->scratch = mmap(NULL, SCRATCH_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	m->smc_old = mmap(NULL, SMC_CAP * PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (!m->pop || !m->used || !m->gpa_head || !m->code || m->scratch == MAP_FAILED ||
	    m->smc_old == MAP_FAILED) {
		if (m->scratch == MAP_FAILED)
			m->scratch = NULL;
		if (m->smc_old == MAP_FAILED)
			m->smc_old = NULL;
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < pages; i++)
		m->gpa_head[i] = -1;
	for (uint32_t i = 0; i < POP_CAP; i++)
		m->pop[i].next = i + 1 < POP_CAP ? (int32_t) i + 1 : -1;
	m->free_head = 0;
	return 0;
}

static uint64_t apic_read(uc_engine *uc, uint64_t offset, unsigned size, void *data)
{
	struct emu *emu = data;

	return lapic_mmio_read(&emu->apic, (uint32_t) offset);
}

static void apic_write(uc_engine *uc, uint64_t offset, unsigned size, uint64_t value, void *data)
{
	struct emu *emu = data;

	lapic_mmio_write(&emu->apic, (uint32_t) offset, (uint32_t) value);
	/* an LVT unmask, EOI or self-IPI may make an interrupt deliverable */
	emu->want_stop = true;
}

int mmu_attach(struct emu *emu, char *err, size_t errlen)
{
	struct emu_mmu *m = &emu->mmu;
	int r;

	for (unsigned int i = 0; i < m->nr_ram; i++) {
		if (uc_mem_map_ptr(emu->uc, m->ram[i].gpa, m->ram[i].size, UC_PROT_ALL,
				   m->ram[i].hva) != UC_ERR_OK) {
			snprintf(err, errlen, "cannot map guest RAM at %#llx in Unicorn",
				 (unsigned long long) m->ram[i].gpa);
			return -EIO;
		}
	}
	if (uc_mmio_map(emu->uc, APIC_DEFAULT_BASE, PAGE, apic_read, emu, apic_write, emu) !=
		    UC_ERR_OK ||
	    uc_mem_map_ptr(emu->uc, SCRATCH_BASE, SCRATCH_SIZE, UC_PROT_ALL, m->scratch) !=
		    UC_ERR_OK) {
		snprintf(err, errlen, "cannot map the local APIC or VMM scratch memory in Unicorn");
		return -EIO;
	}
	r = handler_add(emu);
	if (r < 0) {
		snprintf(err, errlen, "cannot take SIGSEGV for guest memory: %s", strerror(-r));
		return r;
	}
	return 0;
}

void mmu_free(struct emu *emu)
{
	struct emu_mmu *m = &emu->mmu;

	handler_remove(emu);
	for (unsigned int i = 0; i < m->nr_win; i++) {
		munmap(m->win[i].host, m->win[i].size);
		free(m->win[i].pop);
	}
	m->nr_win = 0;
	free(m->pop);
	free(m->used);
	free(m->gpa_head);
	free(m->code);
	if (m->scratch)
		munmap(m->scratch, SCRATCH_SIZE);
	if (m->smc_old)
		munmap(m->smc_old, SMC_CAP * PAGE);
	if (emu->ram)
		munmap(emu->ram, m->ram_top);
	if (m->memfd >= 0)
		close(m->memfd);
	vpmu_guest_memory_free(emu->mem);
	vpmu_guest_memory_free(emu->mem_apic);
	emu->mem = emu->mem_apic = NULL;
}

/* ---- guest memory as the VMM reads and writes it --------------------- */

int mmu_read(struct emu *emu, uint64_t la, void *dst, size_t len)
{
	struct vpmu_paging p = paging(emu);

	return vpmu_walk_read(emu->mem, &p, la, dst, len, 0);
}

int mmu_write(struct emu *emu, uint64_t la, const void *src, size_t len)
{
	struct vpmu_paging p = paging(emu);

	return vpmu_walk_write(emu->mem, &p, la, src, len, VPMU_WALK_WRITE | VPMU_WALK_SET_AD);
}

/* ---- Unicorn's TLB and translations ---------------------------------- */

/*
 * Unicorn 2.0.1 translates a linear address through the guest's tables
 * in uc_ctl_remove_cache and uc_mem_unmap: for a page the tables do not
 * map, remove_cache drops nothing, still returns UC_ERR_OK and writes the
 * address into the guest's CR2 (test-unicorn pins it). Those calls run
 * with its CR0.PG clear (linear = Unicorn address, which
 * is how Unicorn keys the window pages anyway); the TLB entries filled
 * meanwhile have no permission checks, so mmu_pg_on() flushes them unless
 * the caller knows a flush follows.
 */
void mmu_pg_off(struct emu *emu)
{
	struct emu_mmu *m = &emu->mmu;

	if (m->pg_saved)
		return;
	m->cr0_saved = emu_reg(emu, UC_X86_REG_CR0);
	emu_set_reg(emu, UC_X86_REG_CR0, m->cr0_saved & ~CR0_PG);
	m->pg_saved = true;
}

void mmu_pg_on(struct emu *emu, bool flush)
{
	struct emu_mmu *m = &emu->mmu;

	if (!m->pg_saved)
		return;
	emu_set_reg(emu, UC_X86_REG_CR0, m->cr0_saved);
	m->pg_saved = false;
	if (flush)
		mmu_tlb_flush(emu);
}

/*
 * Unicorn 2.0.1 has no call that only empties its TLB; mapping a region
 * does (memory_map_ptr -> tlb_flush). A page of the VMM scratch range is
 * mapped and unmapped for it: two rebuilds of a region list kept short.
 */
void mmu_tlb_flush(struct emu *emu)
{
	static const uint64_t at = SCRATCH_BASE + SCRATCH_SIZE;

	if (uc_mem_map_ptr(emu->uc, at, PAGE, UC_PROT_READ, emu->mmu.scratch) == UC_ERR_OK)
		uc_mem_unmap(emu->uc, at, PAGE);
	emu->flush_tlb = false;
}

/* Drop Unicorn's translations of [la, la + len) and our decodes. With mmu_pg_off() in effect. */
static void tb_drop(struct emu *emu, uint64_t la, uint64_t len)
{
	uc_err e = uc_ctl_remove_cache(emu->uc, la, la + len);

	if (emu->trace)
		fprintf(stderr, "trace: drop translations %#llx+%#llx: %s\n",
			(unsigned long long) la, (unsigned long long) len, uc_strerror(e));
	emu->mmu.tb_pages++;
	for (unsigned int i = 0; i < BLK_CACHE; i++) {
		struct blk *b = &emu->blocks[i];

		if (b->insns && b->addr < la + len && la < b->addr + b->size)
			blk_free(b);
	}
}

/*
 * Have Unicorn translate [la, la + len) again (its hooks changed there,
 * or an exit was armed in it); the code itself is the same.
 */
void mmu_tb_invalidate(struct emu *emu, uint64_t la, uint64_t len)
{
	bool was = emu->mmu.pg_saved;

	mmu_pg_off(emu);
	uc_ctl_remove_cache(emu->uc, la, la + len);
	if (!was)
		mmu_pg_on(emu, true);
}

/* ---- windows ------------------------------------------------------------ */

/* Map (or unmap) window `w` in Unicorn: its range, less the holes (sorted). */
static int win_map(struct emu *emu, struct window *w, bool map)
{
	uint64_t at = 0; /* offsets into the window: its end may be 2^64 */
	int r = 0;

	for (unsigned int i = 0; i <= w->nr_holes; i++) {
		uint64_t stop = i < w->nr_holes ? w->hole[i] - w->la : w->size;

		if (stop > at) {
			uc_err e = map ? uc_mem_map_ptr(emu->uc, w->la + at, stop - at, UC_PROT_ALL,
							w->host + at)
				       : uc_mem_unmap(emu->uc, w->la + at, stop - at);

			if (e != UC_ERR_OK)
				r = -EIO;
		}
		at = stop + PAGE;
	}
	return r;
}

/* Do [a, a + as) and [b, b + bs) overlap? Sizes above 0, and a range may end at 2^64. */
static bool overlap(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
	return a - b < bs || b - a < as;
}

/* Is [la, la + size) free of identity regions, MMIO, scratch and windows? */
static bool range_free(const struct emu *emu, uint64_t la, uint64_t size)
{
	const struct emu_mmu *m = &emu->mmu;

	for (unsigned int i = 0; i < m->nr_ram; i++)
		if (overlap(la, size, m->ram[i].gpa, m->ram[i].size))
			return false;
	if (overlap(la, size, APIC_DEFAULT_BASE, PAGE))
		return false;
	if (overlap(la, size, SCRATCH_BASE, SCRATCH_SIZE + PAGE))
		return false;
	for (unsigned int i = 0; i < m->nr_win; i++)
		if (overlap(la, size, m->win[i].la, m->win[i].size))
			return false;
	return true;
}

/* The largest free range around page `la` inside its WIN_SIZE block, at page granularity. */
static void window_bounds(const struct emu *emu, uint64_t la, uint64_t *ret_lo, uint64_t *ret_hi)
{
	uint64_t block = la & ~(WIN_SIZE - 1), lo = la & ~(PAGE - 1), hi = lo + PAGE;

	/* grow by halving steps: few region compares, never past an obstacle */
	for (uint64_t step = WIN_SIZE / 2; step >= PAGE; step /= 2) {
		if (lo - block >= step && range_free(emu, lo - step, step))
			lo -= step;
		if (block + WIN_SIZE - hi >= step && range_free(emu, hi, step))
			hi += step;
	}
	*ret_lo = lo;
	*ret_hi = hi;
}

static int window_new(struct emu *emu, uint64_t la)
{
	struct emu_mmu *m = &emu->mmu;
	struct window *w;
	uint64_t lo, hi;

	if (!range_free(emu, la & ~(PAGE - 1), PAGE))
		return -EEXIST;
	if (m->nr_win == MAX_WINDOWS)
		return -ENOSPC;
	window_bounds(emu, la, &lo, &hi);
	w = &m->win[m->nr_win];
	w->la = lo;
	w->size = hi - lo;
	w->host =
		mmap(NULL, w->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (w->host == MAP_FAILED)
		return -ENOMEM;
	w->pop = calloc(w->size / PAGE, sizeof(*w->pop));
	if (!w->pop) {
		munmap(w->host, w->size);
		return -ENOMEM;
	}
	if (uc_mem_map_ptr(emu->uc, w->la, w->size, UC_PROT_ALL, w->host) != UC_ERR_OK) {
		free(w->pop);
		munmap(w->host, w->size);
		return -EIO;
	}
	w->settle = emu->in_run;
	if (w->settle)
		request_stop(emu); /* map it again from outside soon: see settle() */
	m->nr_win++;
	emu->st.windows++;
	return 0;
}

/*
 * Unicorn touched a linear address no region covers: give it a window.
 * Whether the guest may access it is for Unicorn's page walk to say.
 */
bool mmu_hook_unmapped(uc_engine *uc, uc_mem_type type, uint64_t addr, int size, int64_t value,
		       void *data)
{
	struct emu *emu = data;
	uint64_t end = addr + (uint64_t) (size > 0 ? size - 1 : 0);
	int r;

	if (emu->fatal)
		return false;
	r = window_new(emu, addr);
	if (r == 0 && (end & ~(PAGE - 1)) != (addr & ~(PAGE - 1)))
		r = window_new(emu, end);
	if (r == -EEXIST)
		r = 0;
	if (r < 0) {
		emu_fatal(emu, "cannot map linear %#llx for the guest (%s; %u windows)",
			  (unsigned long long) addr, strerror(-r), emu->mmu.nr_win);
		return false;
	}
	return true;
}

/*
 * Unicorn 2.0.1 ignores uc_ctl_remove_cache and `until` for a region
 * mapped from inside a run (measured on the old per-page aliases): map
 * such windows again from outside. The host pages stay as they are.
 */
static void settle(struct emu *emu)
{
	struct emu_mmu *m = &emu->mmu;

	for (unsigned int i = 0; i < m->nr_win; i++) {
		struct window *w = &m->win[i];

		if (!w->settle)
			continue;
		w->settle = false;
		mmu_pg_off(emu);
		if (win_map(emu, w, false) < 0 || win_map(emu, w, true) < 0)
			emu_fatal(emu, "cannot map linear %#llx for the guest again",
				  (unsigned long long) w->la);
	}
	mmu_pg_on(emu, false); /* mapping flushed the TLB */
}

/* ---- mapped pages: unmapping, and checking them against the tables ---- */

static void gpa_unlink(struct emu_mmu *m, int32_t i)
{
	uint64_t gpa = m->pop[i].gpa;
	int32_t *link;

	if (gpa == POP_NO_RAM)
		return;
	for (link = &m->gpa_head[gpa / PAGE]; *link >= 0; link = &m->pop[*link].next)
		if (*link == i) {
			*link = m->pop[i].next;
			return;
		}
}

/* Unmap window page `i`: the host page becomes PROT_NONE again. Outside the handler only. */
static void pop_drop(struct emu *emu, int32_t i)
{
	struct emu_mmu *m = &emu->mmu;
	struct pop *pp = &m->pop[i];
	struct window *w = &m->win[pp->win];
	uint64_t idx = (pp->la - w->la) / PAGE;
	uint32_t last;

	mmap(w->host + idx * PAGE, PAGE, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	w->pop[idx] = 0;
	gpa_unlink(m, i);
	last = m->used[--m->nr_used];
	m->used[pp->dense] = last;
	m->pop[last].dense = pp->dense;
	pp->next = m->free_head;
	m->free_head = i;
	m->unmapped++;
}

/*
 * The guest is about to use paging registers `next` (and has perhaps
 * changed its tables): drop every mapped page whose translation is no
 * longer what it was, with Unicorn's translations of it, as a TLB flush
 * would (SDM Vol. 3A 4.10.4): a MOV to CR3 alone keeps pages a global
 * entry maps (a kernel's, in every process), anything else looks at all.
 * `only`: INVLPG of that one page; ~0: all.
 */
void mmu_resync(struct emu *emu, const struct vpmu_paging *next, uint64_t only)
{
	struct emu_mmu *m = &emu->mmu;
	struct vpmu_paging cur = paging(emu);
	bool cr3_only = cur.cr0 == next->cr0 && cur.cr4 == next->cr4 && cur.efer == next->efer &&
			only == ~0ull;
	bool pg = false;

	m->resyncs++;
	for (uint32_t k = 0; k < m->nr_used;) {
		int32_t i = (int32_t) m->used[k];
		struct pop *pp = &m->pop[i];
		struct vpmu_walk_result res;
		uint64_t gpa;

		if (only != ~0ull && pp->la != (only & ~(PAGE - 1))) {
			k++;
			continue;
		}
		if (cr3_only && pp->global) {
			k++;
			continue;
		}
		gpa = vpmu_walk_translate(emu->mem, next, pp->la, 0, &res, sizeof(res)) == 0
			      ? res.gpa & ~(PAGE - 1)
			      : POP_NO_RAM;
		if (gpa == pp->gpa && gpa != POP_NO_RAM) {
			k++;
			continue;
		}
		if (!pg) {
			mmu_pg_off(emu);
			pg = true;
		}
		tb_drop(emu, pp->la, PAGE);
		pop_drop(emu, i); /* used[k] now holds another page: look at k again */
	}
	/* the caller's native CR write or INVLPG flushes the TLB entries this filled */
	if (pg)
		mmu_pg_on(emu, false);
}

/* Drop every mapped page (and the translations Unicorn made from them). */
static void drop_all(struct emu *emu)
{
	struct emu_mmu *m = &emu->mmu;

	mmu_pg_off(emu);
	while (m->nr_used) {
		int32_t i = (int32_t) m->used[m->nr_used - 1];

		tb_drop(emu, m->pop[i].la, PAGE);
		pop_drop(emu, i);
	}
	mmu_pg_on(emu, true);
}

static void protect(struct emu *emu, struct pop *pp, bool ro)
{
	struct window *w = &emu->mmu.win[pp->win];

	if (pp->ro != ro && mprotect(w->host + (pp->la - w->la), PAGE,
				     ro ? PROT_READ : PROT_READ | PROT_WRITE) == 0)
		pp->ro = ro;
}

/*
 * Translated code came from guest page `gpa`, fetched at linear `la`:
 * from now on the page is mapped read-only in every other window, so that
 * a write through any other mapping of it is seen (mmu_service drops the
 * translations it made stale). A write through `la` itself Unicorn sees on
 * its own (it keys translations by that mapping).
 */
void mmu_code_page(struct emu *emu, uint64_t la, uint64_t gpa)
{
	struct emu_mmu *m = &emu->mmu;
	uint64_t pfn = gpa / PAGE;

	if (gpa >= m->ram_top)
		return;
	m->code[pfn / 8] |= (uint8_t) (1u << (pfn % 8));
	for (int32_t i = m->gpa_head[pfn]; i >= 0; i = m->pop[i].next) {
		struct pop *pp = &m->pop[i];

		if (pp->la == (la & ~(PAGE - 1)))
			pp->exec = true;
		protect(emu, pp, !pp->exec);
	}
}

/*
 * Guest page `gpa` was written through a mapping it does not run from
 * while it held translated code: drop what was made of it, through every
 * mapping. It holds no translated code any more, so nothing keeps it
 * read-only until code runs from it again (a page that held code once,
 * such as a boot loader's, is ordinary data after).
 */
static void code_written(struct emu *emu, uint64_t gpa)
{
	struct emu_mmu *m = &emu->mmu;
	uint64_t pfn = gpa / PAGE;

	if (gpa >= m->ram_top)
		return;
	if (in_identity(m, gpa))
		tb_drop(emu, gpa, PAGE);
	for (int32_t i = m->gpa_head[pfn]; i >= 0; i = m->pop[i].next) {
		struct pop *pp = &m->pop[i];

		tb_drop(emu, pp->la, PAGE);
		pp->exec = false;
		protect(emu, pp, false);
	}
	m->code[pfn / 8] &= (uint8_t) ~(1u << (pfn % 8));
}

/* The bytes [*lo, *hi) of a page that differ between `a` and `b`; false if none do. */
static bool changed_bytes(const uint8_t *a, const uint8_t *b, uint64_t *lo, uint64_t *hi)
{
	uint64_t l = 0, h = PAGE;

	while (l < PAGE && a[l] == b[l])
		l++;
	if (l == PAGE)
		return false;
	while (a[h - 1] == b[h - 1])
		h--;
	*lo = l;
	*hi = h;
	return true;
}

/*
 * Guest page `gpa` runs the current block [at, at + len) and was written
 * through another mapping: drop only the translations of the bytes that
 * changed, [lo, hi), in every mapping, so the block that wrote can go on
 * (Linux's text_poke patching a site on the page of its own memcpy), and
 * keep the page read-only elsewhere. True if the current block is among
 * them: it must not run as translated.
 */
static bool code_patched(struct emu *emu, uint64_t gpa, uint64_t lo, uint64_t hi, uint64_t at,
			 uint32_t len)
{
	struct emu_mmu *m = &emu->mmu;
	bool stale = false;

	if (in_identity(m, gpa)) {
		tb_drop(emu, gpa + lo, hi - lo);
		stale |= overlap(at, len, gpa + lo, hi - lo);
	}
	for (int32_t i = m->gpa_head[gpa / PAGE]; i >= 0; i = m->pop[i].next) {
		struct pop *pp = &m->pop[i];

		tb_drop(emu, pp->la + lo, hi - lo);
		stale |= overlap(at, len, pp->la + lo, hi - lo);
		protect(emu, pp, !pp->exec);
	}
	return stale;
}

/* Is the current block [at, at + len) on guest page `gpa`, through any mapping? */
static bool runs_from(struct emu *emu, uint64_t gpa, uint64_t at, uint32_t len)
{
	struct emu_mmu *m = &emu->mmu;

	if (!len)
		return false;
	if (in_identity(m, gpa) && overlap(at, len, gpa, PAGE))
		return true;
	for (int32_t i = m->gpa_head[gpa / PAGE]; i >= 0; i = m->pop[i].next)
		if (overlap(at, len, m->pop[i].la, PAGE))
			return true;
	return false;
}

/*
 * Drop the translations that code pages written through another mapping
 * since the last time made stale. Called by the block hook of the block
 * [at, at + len) about to run, and between runs (len 0). The block that
 * wrote has finished: cross-modified code runs stale for at most that
 * block, as a processor's prefetched instructions may until it serializes
 * (SDM Vol. 3A 8.1.3). True if the block about to run is stale itself:
 * stop before it and run it again, translated anew.
 */
bool mmu_smc_service(struct emu *emu, uint64_t at, uint32_t len)
{
	struct emu_mmu *m = &emu->mmu;
	bool was = m->pg_saved, stale = false;
	int n = m->smc_n;

	if (!n && !m->smc_overflow)
		return false;
	mmu_pg_off(emu);
	if (m->smc_overflow) {
		m->smc_overflow = 0;
		for (uint64_t pfn = 0; pfn < m->ram_top / PAGE; pfn++)
			if (m->code[pfn / 8] >> (pfn % 8) & 1) {
				stale |= runs_from(emu, pfn * PAGE, at, len);
				code_written(emu, pfn * PAGE);
			}
	}
	for (int i = 0; i < n; i++) {
		uint64_t gpa = m->smc_gpa[i], lo, hi;

		if (!changed_bytes(m->smc_old + (size_t) i * PAGE, emu->ram + gpa, &lo, &hi)) {
			/* the same bytes again: nothing is stale, the page stays guarded */
			for (int32_t k = m->gpa_head[gpa / PAGE]; k >= 0; k = m->pop[k].next)
				protect(emu, &m->pop[k], !m->pop[k].exec);
			continue;
		}
		if (emu->trace)
			fprintf(stderr, "trace: code page %#llx written at +%#llx..+%#llx\n",
				(unsigned long long) gpa, (unsigned long long) lo,
				(unsigned long long) hi);
		if (runs_from(emu, gpa, at, len))
			stale |= code_patched(emu, gpa, lo, hi, at, len);
		else
			code_written(emu, gpa);
	}
	m->smc_n = 0;
	emu->st.smc_events++;
	if (!was)
		mmu_pg_on(emu, true);
	return stale;
}

/* Between runs: what the SIGSEGV handler left to do, and windows to settle. */
void mmu_service(struct emu *emu)
{
	struct emu_mmu *m = &emu->mmu;

	settle(emu);
	if (m->bad == 2) {
		emu_fatal(emu,
			  "the guest reached the local APIC through linear %#llx, which it mapped "
			  "there without INVLPG: on the emulator such a mapping needs a TLB flush "
			  "(or use x2APIC)",
			  (unsigned long long) m->bad_la);
		m->bad = 3;
	}
	mmu_smc_service(emu, 0, 0);
	if (m->pop_full) {
		drop_all(emu);
		m->pop_full = 0;
		emu->st.window_flushes++;
	}
	if (emu->flush_tlb)
		mmu_tlb_flush(emu);
}

/*
 * Unicorn reads linear addresses inside an identity region as that
 * guest-physical address. A guest whose tables map such a linear page
 * elsewhere cannot run here: say so instead of running it wrongly.
 * Checked at every paging change by scanning the tables over RAM's
 * physical range, skipping whole subtrees that are not present.
 */
struct scan {
	const struct emu *emu;
	unsigned int esize; /* bytes per entry: 8, or 4 for 32-bit paging */
	uint64_t lo, hi;    /* the identity range looked at */
	uint64_t bad_la, bad_gpa;
};

static uint64_t read_entry(const struct scan *sc, uint64_t table, unsigned int idx)
{
	const void *ptr =
		vpmu_guest_memory_ptr(sc->emu->mem, table + (uint64_t) idx * sc->esize, sc->esize);
	uint64_t e = 0;

	if (ptr)
		memcpy(&e, ptr, sc->esize);
	return e;
}

/* Level `shift` covers 1 << shift bytes per entry of `table`, starting at linear `base`. */
static bool scan_level(struct scan *sc, uint64_t table, uint64_t base, unsigned int shift,
		       unsigned int nr, bool large_ok)
{
	uint64_t span = 1ull << shift;
	uint64_t addr_mask = sc->esize == 8 ? 0x000ffffffffff000ull : 0xfffff000ull;

	for (unsigned int i = 0; i < nr; i++) {
		uint64_t la = base + i * span, e;

		if (la + span <= sc->lo || la >= sc->hi)
			continue;
		e = read_entry(sc, table, i);
		if (!(e & 1))
			continue;
		if (shift == 12 || (large_ok && (e & 0x80))) {
			uint64_t gpa = e & addr_mask & ~(span - 1);

			if (shift == 22 && sc->esize == 4)
				gpa = (e & 0xffc00000ull) | ((e >> 13 & 0xff) << 32); /* PSE-36 */
			if (gpa != la) {
				sc->bad_la = la;
				sc->bad_gpa = gpa;
				return false;
			}
			continue;
		}
		if (!scan_level(sc, e & addr_mask, la, shift - (sc->esize == 8 ? 9 : 10),
				sc->esize == 8 ? 512 : 1024, true))
			return false;
	}
	return true;
}

int mmu_check_identity(struct emu *emu, const struct vpmu_paging *p, uint64_t *ret_la,
		       uint64_t *ret_gpa)
{
	const struct emu_mmu *m = &emu->mmu;

	if (!(p->cr0 & CR0_PG))
		return 0;
	for (unsigned int i = 0; i < m->nr_ram; i++) {
		struct scan sc = { .emu = emu,
				   .lo = m->ram[i].gpa,
				   .hi = m->ram[i].gpa + m->ram[i].size };
		uint64_t cr3 = p->cr3;
		bool ok;

		if ((p->efer & EFER_LMA) && (p->cr4 & CR4_LA57)) {
			sc.esize = 8;
			ok = scan_level(&sc, cr3 & 0x000ffffffffff000ull, 0, 48, 512, false);
		} else if (p->efer & EFER_LMA) {
			sc.esize = 8;
			ok = scan_level(&sc, cr3 & 0x000ffffffffff000ull, 0, 39, 512, false);
		} else if (p->cr4 & CR4_PAE) {
			sc.esize = 8;
			ok = scan_level(&sc, cr3 & 0xffffffe0ull, 0, 30, 4, false);
		} else {
			sc.esize = 4;
			ok = scan_level(&sc, cr3 & 0xfffff000ull, 0, 22, 1024, (p->cr4 >> 4) & 1);
		}
		if (!ok) {
			*ret_la = sc.bad_la;
			*ret_gpa = sc.bad_gpa;
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * The same check for the one page at `la` (INVLPG after the guest edited
 * an entry): -EINVAL with the physical page in *ret_gpa when `la` lies in
 * an identity region but the tables now map it elsewhere.
 */
int mmu_check_identity_page(struct emu *emu, uint64_t la, uint64_t *ret_gpa)
{
	struct vpmu_paging p = paging(emu);
	struct vpmu_walk_result res;
	uint64_t page = la & ~(PAGE - 1);

	int r;

	if (!(p.cr0 & CR0_PG) || !in_identity(&emu->mmu, page))
		return 0;
	r = vpmu_walk_translate(emu->mem, &p, page, 0, &res, sizeof(res));
	if (r == -EFAULT) {
		/* mapped onto no RAM: the local APIC (Linux's fixmap) or nothing */
		*ret_gpa = mmu_maps_apic(emu, page) ? APIC_DEFAULT_BASE : UINT64_MAX;
		return -EINVAL;
	}
	if (r < 0)
		return 0; /* not mapped: nothing is wrong until it is */
	*ret_gpa = res.gpa & ~(PAGE - 1);
	return *ret_gpa == page ? 0 : -EINVAL;
}

/* Whether the guest's tables map linear page `la` onto the local APIC's page now. */
bool mmu_maps_apic(struct emu *emu, uint64_t la)
{
	struct vpmu_paging p = paging(emu);
	struct vpmu_walk_result res;

	/* the walk reads the tables from RAM and accepts the APIC page as its target */
	return la < SCRATCH_BASE + SCRATCH_SIZE && la >= SCRATCH_BASE
		       ? false
		       : vpmu_walk_translate(emu->mem_apic, &p, la & ~(PAGE - 1), 0, &res,
					     sizeof(res)) == 0 &&
				 (res.gpa & ~(PAGE - 1)) == APIC_DEFAULT_BASE;
}

/*
 * The guest maps linear page `la` onto the xAPIC page (Linux's fixmap
 * does): Unicorn must run the local APIC's MMIO callbacks there, not read
 * memory. The page leaves its window (which is mapped again around it)
 * and becomes an MMIO region of its own. Outside a run.
 */
int mmu_apic_alias(struct emu *emu, uint64_t la)
{
	struct emu_mmu *m = &emu->mmu;
	struct window *w = NULL;
	unsigned int i;

	la &= ~(PAGE - 1);
	if (la == APIC_DEFAULT_BASE)
		return 0; /* the identity page is MMIO already */
	for (int tries = 0; !w && tries < 2; tries++) {
		for (i = 0; i < m->nr_win; i++)
			if (la - m->win[i].la < m->win[i].size)
				w = &m->win[i];
		if (!w && window_new(emu, la) < 0)
			return -ENOSPC; /* RAM's identity range, scratch, or no window left */
	}
	if (w) {
		for (i = 0; i < w->nr_holes; i++)
			if (w->hole[i] == la)
				return 0;
		if (w->nr_holes == WIN_HOLES)
			return -ENOSPC;
		mmu_pg_off(emu);
		win_map(emu, w, false);
		if (w->pop[(la - w->la) / PAGE]) {
			tb_drop(emu, la, PAGE);
			pop_drop(emu, (int32_t) w->pop[(la - w->la) / PAGE] - 1);
		}
		for (i = w->nr_holes; i > 0 && w->hole[i - 1] > la; i--)
			w->hole[i] = w->hole[i - 1];
		w->hole[i] = la;
		w->nr_holes++;
		if (win_map(emu, w, true) < 0) {
			mmu_pg_on(emu, true);
			return -EIO;
		}
	} else {
		return -EEXIST;
	}
	if (uc_mmio_map(emu->uc, la, PAGE, apic_read, emu, apic_write, emu) != UC_ERR_OK) {
		mmu_pg_on(emu, true);
		return -EIO;
	}
	mmu_pg_on(emu, true);
	emu->st.apic_aliases++;
	return 0;
}
