/* SPDX-License-Identifier: MIT */
/*
 * PEBS records through the guest page walk: records/s and bytes/s into a
 * guest buffer mapped with 4 KiB pages by real 4-level page tables, next
 * to memcpy of the same bytes to the same host addresses (translated once,
 * up front) in the same run. Target: ratio >= 0.5 for 4 KiB pages.
 *
 * Two paths: walk_write() walks every level for every record; the PEBS
 * writer's walk_write_cached() re-reads the paging entries a previous
 * walk used and compares them (so it too reflects the guest's tables at
 * the time of writing) and only walks when they changed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "walk.h"

#define RAM_SIZE (64u << 20)
#define BUF_LA	 0xffffc90000000000ULL
/* the PEBS buffer Linux gives each CPU: 64 KiB, refilled from its base after each drain */
#define BUF_PAGES 16u
#define FILLS	  32
#define BUF_PA	  (16u << 20)

static uint8_t *ram;
static uint64_t next_table = 0x1000;

static uint64_t alloc_table(void)
{
	uint64_t pa = next_table;

	next_table += 0x1000;
	memset(ram + pa, 0, 0x1000);
	return pa;
}

static void map4k(uint64_t cr3, uint64_t la, uint64_t pa)
{
	uint64_t table = cr3;

	for (int level = 3; level > 0; level--) {
		uint64_t *e = (uint64_t *) (ram + table) + ((la >> (12 + 9 * level)) & 0x1ff);

		if (!(*e & 1))
			*e = alloc_table() | 3;
		table = *e & 0x000ffffffffff000ULL;
	}
	((uint64_t *) (ram + table))[(la >> 12) & 0x1ff] = pa | 3;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(void)
{
	/* a format-3 record, an adaptive one with GPRs+XMMs, the largest (Table 22-104) */
	static const size_t sizes[] = { 200, 464, 1232 };
	struct guest_region region;
	struct guest_mem mem;
	struct walk_paging p;
	uint8_t record[1232];
	uint8_t **dst, **dst2;
	size_t *first;
	uint64_t cr3;

	ram = aligned_alloc(4096, RAM_SIZE);
	dst = calloc(BUF_PAGES * 4096 / 200 + 1, sizeof(*dst));
	dst2 = calloc(BUF_PAGES * 4096 / 200 + 1, sizeof(*dst2));
	first = calloc(BUF_PAGES * 4096 / 200 + 1, sizeof(*first));
	if (!ram || !dst || !dst2 || !first) {
		fprintf(stderr, "bench-pebs: out of memory\n");
		return 1;
	}
	memset(ram, 0, RAM_SIZE);
	memset(record, 0x5a, sizeof(record));
	cr3 = alloc_table();
	/* scatter the buffer's pages: page i at a physical page far from i-1 */
	for (unsigned int i = 0; i < BUF_PAGES; i++)
		map4k(cr3, BUF_LA + i * 4096ULL, BUF_PA + ((i * 613u) % BUF_PAGES) * 4096ULL);
	region = (struct guest_region){ 0, RAM_SIZE, ram };
	mem = (struct guest_mem){ &region, 1 };
	p = (struct walk_paging){ .cr0 = (1u << 31) | (1u << 16) | 1,
				  .cr3 = cr3,
				  .cr4 = 1u << 5,
				  .efer = (1u << 8) | (1u << 10) };

	printf("PEBS records into a 64 KiB guest buffer of scattered 4 KiB pages (4-level tables),"
	       " filled 32 times, best of 5\n");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k], n = (BUF_PAGES * 4096ULL) / size;
		double best_w = 1e30, best_m = 1e30, best_c = 1e30;
		struct walk_cache cache;

		/* where each record lands, both halves of one that spans pages */
		for (size_t i = 0; i < n; i++) {
			struct walk_result res;

			if (walk_translate(&mem, &p, BUF_LA + i * size, 0, &res) < 0)
				return 1;
			dst[i] = ram + res.gpa;
			first[i] = res.len < size ? res.len : size;
			if (walk_translate(&mem, &p, BUF_LA + i * size + first[i], 0, &res) < 0)
				return 1;
			dst2[i] = ram + res.gpa;
		}
		walk_cache_reset(&cache);
		for (int rep = 0; rep < 5; rep++) {
			double t0 = now_ns(), t1, t2, t3;

			for (int fill = 0; fill < FILLS; fill++)
				for (size_t i = 0; i < n; i++)
					if (walk_write(&mem, &p, BUF_LA + i * size, record, size,
						       WALK_IMPLICIT_SUPERVISOR) < 0) {
						fprintf(stderr,
							"bench-pebs: walk failed at record %zu\n",
							i);
						return 1;
					}
			t1 = now_ns();
			for (int fill = 0; fill < FILLS; fill++)
				for (size_t i = 0; i < n; i++) {
					memcpy(dst[i], record, first[i]);
					if (first[i] < size)
						memcpy(dst2[i], record + first[i], size - first[i]);
				}
			t2 = now_ns();
			for (int fill = 0; fill < FILLS; fill++)
				for (size_t i = 0; i < n; i++)
					if (walk_write_cached(
						    &mem, &p, BUF_LA + i * size, record, size,
						    WALK_IMPLICIT_SUPERVISOR | WALK_SET_AD,
						    &cache) < 0) {
						fprintf(stderr,
							"bench-pebs: cached walk failed at record "
							"%zu\n",
							i);
						return 1;
					}
			t3 = now_ns();
			best_w = t1 - t0 < best_w ? t1 - t0 : best_w;
			best_m = t2 - t1 < best_m ? t2 - t1 : best_m;
			best_c = t3 - t2 < best_c ? t3 - t2 : best_c;
		}
		printf("  %4zu-byte records: memcpy %6.2f Mrec/s %7.1f MB/s\n", size,
		       FILLS * n / best_m * 1e3, FILLS * n * size / best_m * 1e3);
		printf("      full walk each record  %6.2f Mrec/s %7.1f MB/s  ratio %.2f\n",
		       FILLS * n / best_w * 1e3, FILLS * n * size / best_w * 1e3, best_m / best_w);
		printf("      validated cache (PEBS) %6.2f Mrec/s %7.1f MB/s  ratio %.2f (target "
		       ">= 0.50)\n",
		       FILLS * n / best_c * 1e3, FILLS * n * size / best_c * 1e3, best_m / best_c);
	}
	free(ram);
	free(dst);
	free(dst2);
	free(first);
	return 0;
}
