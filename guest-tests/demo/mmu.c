/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-mmu.py's guest: the emulator's software MMU under the
 * paging events a multi-process kernel makes, each run N times with the
 * event (event=on) or without it (event=off: the same loop, the event's
 * instruction left out), so that the bench can subtract the two. Read
 * from the multiboot command line (key=value words):
 *
 *   k=K        address spaces (default 64, at most 256): page-table roots
 *              that each map `pages` 4 KiB pages at linear 1 GiB
 *              (PDPT[1], past RAM) onto frames of their own, and share
 *              the boot tables' identity map of RAM (PDPT[0]), as
 *              processes share a kernel
 *   pages=P    pages each address space maps (default 256, at most 4096)
 *   n=N        iterations (default 100; 0: the setup alone)
 *   work=cr3   (default) iteration i: MOV CR3 to root i mod K, then one
 *              load from each of the P pages, as a process that runs
 *              after a switch touches its working set
 *   work=pf    iteration i, page j = i mod P of root 0: clear its PTE's P
 *              bit, INVLPG, load from it: a #PF whose handler sets P
 *              again and returns, and the load runs again (demand paging
 *              churn: one fault, one INVLPG that unmaps a page)
 *   work=invlpg  the same with the PTE left as it is: INVLPG of a page
 *              whose translation did not change, then the load
 *   work=remap the same with the PTE moved to another frame (and back
 *              at the next visit): INVLPG, then the load through the new
 *              translation
 *   event=off  the same loop without the MOV CR3 or INVLPG (and with the
 *              PTE left as it is)
 *
 * Every run builds the same K address spaces and loads once from each
 * page of root 0 before its loop. Each frame holds a tag naming its
 * address space and page; the loop sums what it loads and the guest
 * checks the sum against what the tables say it must be. It prints the
 * sum, the page loads and its #PF count; the exact instruction count is
 * vpmu-vmm --verbose's. Exit status 0 (isa-debug-exit: 1) when the sum
 * and the fault count are right, 1 (3) when not, 2 (5) for a bad
 * command line or too little RAM (frames are taken from 16 MiB up to the
 * top of RAM; without multiboot information RAM is taken to be 128 MiB).
 */
#include "guest.h"
#include <stddef.h>

#define VA_BASE		0x40000000ull /* PDPT[1]: linear 1 GiB */
#define POOL_BASE	(16ull << 20) /* past the image, its stack and the boot information */
#define PAGE		4096ull
#define MAX_K		256
#define MAX_PAGES	4096
#define MB_FLAG_MEMORY	(1u << 0)
#define MB_FLAG_CMDLINE (1u << 2)
#define TAG(s, j)	((uint64_t) (s) << 32 | (j))
#define TAG_ALT(j)	(1ull << 40 | (j)) /* work=remap's other frame of root 0's page j */

enum work { WORK_CR3, WORK_PF, WORK_INVLPG, WORK_REMAP };
static const char *const work_names[] = { "cr3", "pf", "invlpg", "remap" };

static uint64_t roots[MAX_K];
static volatile uint64_t *pte0;	 /* root 0's PTEs, page j at pte0[j] (its PTs are contiguous) */
static uint64_t flip[MAX_PAGES]; /* XORed into pte0[j] each visit: the event's PTE change */
static uint64_t next_frame, ram_top;
static unsigned int nr_pages;
static volatile uint64_t faults;

static bool word_is(const char *s, const char *end, const char *want)
{
	while (s < end && *want && *s == *want)
		s++, want++;
	return s == end && !*want;
}

struct args {
	enum work work;
	bool event;
	uint64_t k, pages, n;
};

static void parse_cmdline(const char *s, struct args *a)
{
	while (*s) {
		const char *w = s, *eq = NULL, *end;
		int v = -1;

		while (*s && *s != ' ') {
			if (*s == '=' && !eq)
				eq = s;
			s++;
		}
		end = s;
		while (*s == ' ')
			s++;
		if (!eq)
			continue;
		if (word_is(w, eq, "work")) {
			for (int i = 0; i < 4; i++)
				if (word_is(eq + 1, end, work_names[i]))
					v = i;
			if (v < 0)
				cmdline_bad_word("mmu", w, end,
						 "use work=cr3, pf, invlpg or remap");
			a->work = (enum work) v;
		} else if (word_is(w, eq, "event")) {
			if (word_is(eq + 1, end, "on") || word_is(eq + 1, end, "off"))
				a->event = word_is(eq + 1, end, "on");
			else
				cmdline_bad_word("mmu", w, end, "use event=on or event=off");
		} else if (word_is(w, eq, "k")) {
			if (!cmdline_num(eq + 1, end, &a->k) || !a->k || a->k > MAX_K)
				cmdline_bad_word("mmu", w, end, "k= takes 1 to 256 address spaces");
		} else if (word_is(w, eq, "pages")) {
			if (!cmdline_num(eq + 1, end, &a->pages) || !a->pages ||
			    a->pages > MAX_PAGES)
				cmdline_bad_word("mmu", w, end, "pages= takes 1 to 4096");
		} else if (word_is(w, eq, "n")) {
			if (!cmdline_num(eq + 1, end, &a->n))
				cmdline_bad_word("mmu", w, end, "n= takes a decimal count");
		}
	}
}

static uint64_t frame(void)
{
	uint64_t f = next_frame;

	if (f + PAGE > ram_top) {
		printf("mmu: out of frames at %lx: give the guest more RAM (--mem) or fewer "
		       "pages (k x pages)\n",
		       f);
		exit(2);
	}
	next_frame += PAGE;
	return f;
}

static uint64_t *zeroed(uint64_t pa)
{
	uint64_t *t = (uint64_t *) pa;

	for (int i = 0; i < 512; i++)
		t[i] = 0;
	return t;
}

static void on_pf(struct frame *f)
{
	uint64_t cr2, j;

	__asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
	j = (cr2 - VA_BASE) / PAGE;
	if (cr2 < VA_BASE || j >= nr_pages || (pte0[j] & PTE_P)) {
		printf("mmu: unexpected #PF at rip %lx, CR2 %lx, error %lx\n", f->rip, cr2,
		       f->error);
		exit(1);
	}
	pte0[j] |= PTE_P; /* not present before: no TLB entry to flush */
	faults++;
}

/*
 * Address space s: a PML4 and PDPT of its own, PDPT[0] the boot tables'
 * identity map (every entry of the boot PDPT but [1] is shared), PDPT[1]
 * a PD whose contiguous PTs map `pages` pages at VA_BASE onto new frames,
 * each tagged TAG(s, j).
 */
static uint64_t space_new(unsigned int s, uint64_t pages, const uint64_t *boot_pdpt)
{
	uint64_t *pml4 = zeroed(frame()), *pdpt = zeroed(frame()), *pd = zeroed(frame());
	uint64_t nr_pt = (pages + 511) / 512, pt = frame();

	zeroed(pt);
	for (uint64_t t = 1; t < nr_pt; t++)
		zeroed(frame());
	for (int i = 0; i < 512; i++)
		pdpt[i] = boot_pdpt[i];
	pml4[0] = (uint64_t) pdpt | PTE_P | PTE_W;
	pdpt[1] = (uint64_t) pd | PTE_P | PTE_W;
	for (uint64_t t = 0; t < nr_pt; t++)
		pd[t] = (pt + t * PAGE) | PTE_P | PTE_W;
	for (uint64_t j = 0; j < pages; j++) {
		uint64_t data = frame();

		*(uint64_t *) data = TAG(s, j);
		((uint64_t *) pt)[j] = data | PTE_P | PTE_W;
	}
	if (s == 0)
		pte0 = (volatile uint64_t *) pt;
	return (uint64_t) pml4;
}

static inline uint64_t load(uint64_t j)
{
	return *(volatile uint64_t *) (VA_BASE + j * PAGE);
}

/* work=cr3: the MOV CR3 and the working set's loads after it */
static uint64_t loop_cr3(const struct args *a)
{
	uint64_t sum = 0;

	for (uint64_t i = 0; i < a->n; i++) {
		if (a->event)
			write_cr3(roots[i % a->k]);
		for (uint64_t j = 0; j < a->pages; j++)
			sum += load(j);
	}
	return sum;
}

/* work=pf, invlpg, remap: the PTE change (none with event=off), INVLPG, the load */
static uint64_t loop_page(const struct args *a)
{
	uint64_t sum = 0;

	for (uint64_t i = 0; i < a->n; i++) {
		uint64_t j = i % a->pages;

		pte0[j] ^= flip[j];
		if (a->event)
			invlpg(VA_BASE + j * PAGE);
		sum += load(j);
	}
	return sum;
}

/* What the loop must have summed, from what the tables said at each load. */
static uint64_t expected(const struct args *a)
{
	uint64_t sum = 0;

	for (uint64_t i = 0; i < a->n; i++) {
		uint64_t j = i % a->pages, visit = i / a->pages;

		if (a->work == WORK_CR3) {
			uint64_t s = a->event ? i % a->k : 0;

			/* sum over j of TAG(s, j) */
			sum += a->pages * (s << 32) + a->pages * (a->pages - 1) / 2;
		} else if (a->work == WORK_REMAP && a->event && visit % 2 == 0) {
			sum += TAG_ALT(j);
		} else {
			sum += TAG(0, j);
		}
	}
	return sum;
}

int main(uint64_t mb_info)
{
	const volatile uint32_t *mbi = (const volatile uint32_t *) mb_info;
	struct args a = { .work = WORK_CR3, .event = true, .k = 64, .pages = 256, .n = 100 };
	uint64_t *boot_pdpt = (uint64_t *) (((uint64_t *) (read_cr3() & PTE_ADDR))[0] & PTE_ADDR);
	uint64_t sum, want, want_faults, loads;

	ram_top = 128ull << 20;
	if (mb_info && (mbi[0] & MB_FLAG_MEMORY))
		ram_top = (1ull << 20) + (uint64_t) mbi[2] * 1024;
	if (mb_info && (mbi[0] & MB_FLAG_CMDLINE) && mbi[4])
		parse_cmdline((const char *) (uint64_t) mbi[4], &a);
	if (ram_top > VA_BASE || (boot_pdpt[1] & PTE_P)) {
		printf("mmu: RAM reaches linear 1 GiB, where the address spaces map their "
		       "pages: give the guest less than 1 GiB (--mem)\n");
		exit(2);
	}
	nr_pages = (unsigned int) a.pages;
	idt_init();
	set_handler(14, on_pf);
	next_frame = POOL_BASE;
	for (unsigned int s = 0; s < a.k; s++)
		roots[s] = space_new(s, a.pages, boot_pdpt);
	for (uint64_t j = 0; j < a.pages; j++) {
		if (a.work == WORK_REMAP) {
			uint64_t alt = frame();

			*(uint64_t *) alt = TAG_ALT(j);
			flip[j] = a.event ? (pte0[j] ^ alt) & PTE_ADDR : 0;
		} else if (a.work == WORK_PF) {
			flip[j] = a.event ? PTE_P : 0;
		}
	}

	write_cr3(roots[0]);
	sum = 0;
	for (uint64_t j = 0; j < a.pages; j++)
		sum += load(j); /* root 0's pages mapped before the loop, in every run */
	sum = a.work == WORK_CR3 ? loop_cr3(&a) : loop_page(&a);

	want = expected(&a);
	want_faults = a.work == WORK_PF && a.event ? a.n : 0;
	loads = a.work == WORK_CR3 ? a.n * a.pages : a.n;
	printf("mmu: work=%s k=%lu pages=%lu n=%lu event=%s: %lu page loads, %lu #PF, "
	       "sum %lx (expected %lx)\n",
	       work_names[a.work], a.k, a.pages, a.n, a.event ? "on" : "off", loads, faults, sum,
	       want);
	if (sum != want || faults != want_faults) {
		printf("mmu: wrong %s: the emulator's MMU loaded through a stale translation\n",
		       sum != want ? "sum" : "#PF count");
		return 1;
	}
	return 0;
}
