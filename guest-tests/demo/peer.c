/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-peer.py's guest: the same work under QEMU's TCG and under
 * vpmu-vmm's emulator, the work and the vPMU mode read from the multiboot
 * command line (`-append` / `--append`; QEMU puts the kernel's file name
 * first, so only key=value words are read):
 *
 *   work=loop   a register loop of 4 instructions (add, xor, dec, jnz) run
 *               n times (default 100 000 000): 4n loop instructions
 *   work=sort   n passes (default 2) of a quicksort (Hoare partition,
 *               median of three, insertion sort below 16 words) of 512 Ki
 *               pseudo-random 32-bit words (2 MiB, xorshift64 from a fixed
 *               seed, the same every pass: the instructions are linear in
 *               n), each checked sorted and folded into a checksum (FNV-1a
 *               over the sorted words) that every VMM must agree on
 *   n=N         0 gives a near-empty run: the VMM's startup cost
 *   mode=idle   touches no PMU MSR and no x2APIC (runs under QEMU's TCG)
 *   mode=count  the four GP counters (INST_RETIRED C0H, BR_INST_RETIRED
 *               C4H, MEM_INST_RETIRED.ALL_STORES D0H/82H, core cycles
 *               3CH) and the three fixed counters counting, OS and USR,
 *               no overflow near
 *   mode=pebs   mode=count with GP0 a PEBS counter on INST_RETIRED at
 *               period 10 000 (counter and DS reset slot at -10 000), a
 *               64 KiB DS buffer and a PMI at its threshold (one record
 *               below its end), which empties it
 *   mode=lbr    mode=count with IA32_DEBUGCTL.LBR set: every branch goes
 *               into the model's LBR stack (LBR_SELECT 0, all branches;
 *               SDM Vol. 3B 20.4.1, 20.4.8)
 *
 * The ELF64 form (no multiboot information) runs work=loop mode=idle.
 * The guest prints what it did and, in the loop's case, its instruction
 * count; the whole guest's exact count is vpmu-vmm's --verbose summary.
 * Exit status 0 (isa-debug-exit: 1) when the work checked out, 1 (3) when
 * the sort came out unsorted, 2 (5) for a bad command line.
 */
#define PMI_VECTOR 0xf0
#include "guest.h"
#include <stddef.h>

#include "pebs-sampler.h" /* GP0 PEBS at a period of 10 000, the 64 KiB buffer */

#define SORT_WORDS	(512u * 1024u)
#define SORT_SMALL	16 /* partitions this small: insertion sort */
#define DEBUGCTL_LBR	(1ull << 0)
#define MSR_LBR_TOS	0x1c9
#define MB_FLAG_CMDLINE (1u << 2)

enum work { WORK_LOOP, WORK_SORT };
enum mode { MODE_IDLE, MODE_COUNT, MODE_PEBS, MODE_LBR };
static const char *const work_names[] = { "loop", "sort" };
static const char *const mode_names[] = { "idle", "count", "pebs", "lbr" };

static uint32_t words[SORT_WORDS];

static bool word_is(const char *s, const char *end, const char *want)
{
	while (s < end && *want && *s == *want)
		s++, want++;
	return s == end && !*want;
}

static int pick(const char *s, const char *end, const char *const *names, int nr)
{
	for (int i = 0; i < nr; i++)
		if (word_is(s, end, names[i]))
			return i;
	return -1;
}

/* key=value words of the multiboot command line; others are left alone. */
static void parse_cmdline(uint64_t mb_info, enum work *work, enum mode *mode, uint64_t *n,
			  bool *n_given)
{
	const volatile uint32_t *mbi = (const volatile uint32_t *) mb_info;
	const char *s;

	if (!mb_info || !(mbi[0] & MB_FLAG_CMDLINE) || !mbi[4])
		return;
	s = (const char *) (uint64_t) mbi[4];
	while (*s) {
		const char *w = s, *eq = NULL, *end;
		int v;

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
			v = pick(eq + 1, end, work_names, 2);
			if (v < 0)
				cmdline_bad_word("peer", w, end, "use work=loop or work=sort");
			*work = (enum work) v;
		} else if (word_is(w, eq, "mode")) {
			v = pick(eq + 1, end, mode_names, 4);
			if (v < 0)
				cmdline_bad_word("peer", w, end,
						 "use mode=idle, count, pebs or lbr");
			*mode = (enum mode) v;
		} else if (word_is(w, eq, "n")) {
			if (!cmdline_num(eq + 1, end, n))
				cmdline_bad_word("peer", w, end, "n= takes a decimal count");
			*n_given = true;
		}
	}
}

static void pmu_start(enum mode mode)
{
	static const uint64_t events[4] = { 0xc0, 0xc4, 0x82d0, 0x3c };

	idt_init();
	set_handler(PMI_VECTOR, sampler_on_pmi);
	x2apic_enable();
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	sti();
	for (int i = 0; i < 4; i++) {
		wrmsr(MSR_IA32_PMC0_FULL + i, 0);
		wrmsr(MSR_IA32_PERFEVTSEL0 + i, events[i] | EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
	}
	if (mode == MODE_PEBS)
		sampler_start(0xc0); /* INST_RETIRED.ANY_P */
	if (mode == MODE_LBR)
		wrmsr(MSR_IA32_DEBUGCTL, DEBUGCTL_LBR);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x333);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0x70000000full);
}

static void pmu_stop(enum mode mode)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	if (mode == MODE_LBR) {
		wrmsr(MSR_IA32_DEBUGCTL, 0);
		printf("peer: LBR TOS %lu\n", rdmsr(MSR_LBR_TOS));
	}
	if (mode == MODE_PEBS)
		sampler_drain();
	printf("peer: counters: fixed %lu %lu %lu, GP %lu %lu %lu %lu; %lu PMIs, %lu PEBS "
	       "records\n",
	       rdmsr(MSR_CORE_PERF_FIXED_CTR0), rdmsr(MSR_CORE_PERF_FIXED_CTR0 + 1),
	       rdmsr(MSR_CORE_PERF_FIXED_CTR0 + 2), rdmsr(MSR_IA32_PMC0), rdmsr(MSR_IA32_PMC0 + 1),
	       rdmsr(MSR_IA32_PMC0 + 2), rdmsr(MSR_IA32_PMC0 + 3), sampler_pmis, sampler_records);
}

static uint64_t run_loop(uint64_t n)
{
	uint64_t acc = 0;

	if (!n)
		return 0;
	__asm__ volatile("1:\n\t"
			 "add %1, %0\n\t"
			 "xor $5, %0\n\t"
			 "dec %1\n\t"
			 "jnz 1b"
			 : "+r"(acc), "+r"(n));
	return acc;
}

static void insertion_sort(uint32_t *a, long lo, long hi)
{
	for (long i = lo + 1; i <= hi; i++) {
		uint32_t v = a[i];
		long j = i - 1;

		while (j >= lo && a[j] > v) {
			a[j + 1] = a[j];
			j--;
		}
		a[j + 1] = v;
	}
}

static void swap(uint32_t *a, long i, long j)
{
	uint32_t t = a[i];

	a[i] = a[j];
	a[j] = t;
}

/* Hoare partition around the median of three; recursion on the smaller side. */
static void quicksort(uint32_t *a, long lo, long hi)
{
	while (hi - lo >= SORT_SMALL) {
		long mid = lo + (hi - lo) / 2, i = lo - 1, j = hi + 1;
		uint32_t pivot;

		if (a[mid] < a[lo])
			swap(a, mid, lo);
		if (a[hi] < a[lo])
			swap(a, hi, lo);
		if (a[hi] < a[mid])
			swap(a, hi, mid);
		pivot = a[mid];
		for (;;) {
			do
				i++;
			while (a[i] < pivot);
			do
				j--;
			while (a[j] > pivot);
			if (i >= j)
				break;
			swap(a, i, j);
		}
		if (j - lo < hi - j) {
			quicksort(a, lo, j);
			lo = j + 1;
		} else {
			quicksort(a, j + 1, hi);
			hi = j;
		}
	}
	insertion_sort(a, lo, hi);
}

/*
 * n identical passes (the same seed each time, so that the instructions
 * are linear in n); returns the last pass's checksum, *unsorted the
 * out-of-order neighbours seen in all of them.
 */
static uint64_t run_sort(uint64_t n, uint64_t *unsorted)
{
	uint64_t sum = 0;

	*unsorted = 0;
	for (uint64_t pass = 0; pass < n; pass++) {
		uint64_t x = 0x9e3779b97f4a7c15ull;

		for (uint32_t i = 0; i < SORT_WORDS; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			words[i] = (uint32_t) (x >> 16);
		}
		quicksort(words, 0, SORT_WORDS - 1);
		sum = 0xcbf29ce484222325ull;
		for (uint32_t i = 0; i < SORT_WORDS; i++) {
			if (i && words[i - 1] > words[i])
				(*unsorted)++;
			sum = (sum ^ words[i]) * 0x100000001b3ull;
		}
	}
	return sum;
}

int main(uint64_t mb_info)
{
	enum work work = WORK_LOOP;
	enum mode mode = MODE_IDLE;
	uint64_t n = 0, unsorted = 0, result;
	bool n_given = false;

	parse_cmdline(mb_info, &work, &mode, &n, &n_given);
	if (!n_given)
		n = work == WORK_LOOP ? 100000000ull : 2;
	if (mode != MODE_IDLE)
		pmu_start(mode);
	if (work == WORK_LOOP)
		result = run_loop(n);
	else
		result = run_sort(n, &unsorted);
	if (mode != MODE_IDLE)
		pmu_stop(mode);
	if (work == WORK_LOOP)
		printf("peer: work=loop mode=%s n=%lu: %lu loop instructions, acc %lx\n",
		       mode_names[mode], n, 4 * n, result);
	else
		printf("peer: work=sort mode=%s n=%lu: %u words a pass, checksum %lx, %lu "
		       "out of order\n",
		       mode_names[mode], n, SORT_WORDS, result, unsorted);
	exit(unsorted ? 1 : 0);
}
