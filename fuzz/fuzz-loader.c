/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: arbitrary bytes as a kernel image for vmm_load_kernel.
 *
 * The whole input is the image, so a plain ELF or multiboot file is a
 * valid seed (build/fuzz/loader-seeds DIR writes some). The
 * last byte also picks the RAM size, the number of modules, the err
 * buffer length and whether there is a command line; modules and the
 * command line are slices of the input.
 *
 * Guest RAM ends exactly at a PROT_NONE page and starts one guard page
 * (plus canary bytes, for sizes that are not page multiples) after
 * another, so a write outside RAM faults or trips the canary check.
 * Besides the sanitizers it checks the contract: only the documented
 * errors, err NUL-terminated within errlen and one non-empty line, *ret
 * and RAM untouched on failure, and on success a layout inside RAM with
 * the loader's own data clear of the kernel.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loader.h"
#include "fuzz.h"

#define PAGE	  4096UL
#define CANARY	  0xA5
#define ERR_SLACK 16

/* Small enough to snapshot per run; odd sizes exercise the non-page-multiple paths. */
static const uint64_t ram_sizes[4] = { 0x10000, 0x100123, 0x200000, 0x401000 };
static const size_t err_lens[8] = { 0, 1, 2, 7, 16, 64, 256, 512 };

struct region {
	uint8_t *map; /* guard | canary + RAM | guard */
	size_t map_len;
	struct vmm_ram ram;
	size_t canary_len; /* bytes between the low guard page and ram.base */
};

static struct region regions[4];
static uint8_t *snapshot;

static struct region *get_region(unsigned int i)
{
	struct region *r = &regions[i];
	size_t inner;

	if (r->map)
		return r;
	inner = (ram_sizes[i] + PAGE - 1) & ~(PAGE - 1);
	r->map_len = inner + 2 * PAGE;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(r->map != MAP_FAILED);
	CHECK(!mprotect(r->map, PAGE, PROT_NONE));
	CHECK(!mprotect(r->map + PAGE + inner, PAGE, PROT_NONE));
	r->canary_len = inner - ram_sizes[i];
	memset(r->map + PAGE, CANARY, r->canary_len);
	r->ram.base = r->map + PAGE + r->canary_len;
	r->ram.size = ram_sizes[i];
	return r;
}

static void check_canary(const struct region *r)
{
	for (size_t i = 0; i < r->canary_len; i++)
		CHECK(r->map[PAGE + i] == CANARY);
}

static bool overlap(uint64_t a, uint64_t a_end, uint64_t b, uint64_t b_end)
{
	return a < b_end && b < a_end;
}

static void check_success(const struct vmm_ram *ram, const struct vmm_boot *b)
{
	CHECK(b->image_start < b->image_end);
	CHECK(b->image_end <= ram->size);
	CHECK(b->entry >= b->image_start && b->entry < b->image_end);
	CHECK(b->free_start >= b->image_end && b->free_start <= ram->size);
	if (b->kind == VMM_BOOT_MULTIBOOT) {
		/* The info block is 88 bytes, then the memory map. */
		CHECK(b->mb_info >= PAGE && b->mb_info % 8 == 0);
		CHECK(b->mb_info + 88ULL <= b->free_start);
		CHECK(!overlap(b->mb_info, b->mb_info + 88ULL, b->image_start, b->image_end));
		CHECK(b->image_end <= 0x100000000ULL);
	} else {
		CHECK(b->kind == VMM_BOOT_ELF64);
		CHECK(b->cr3 % PAGE == 0 && b->gdt % PAGE == 0 && b->stack % 16 == 0);
		CHECK(b->stack >= 0x4000 + PAGE);
		CHECK(b->cr3 + 3 * PAGE <= ram->size && b->cr3 + 3 * PAGE <= b->free_start);
		CHECK(!overlap(b->stack - 0x4000, b->cr3 + 3 * PAGE, b->image_start, b->image_end));
		CHECK(b->gdt + 24 <= ram->size);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t knob = size ? data[size - 1] : 0;
	struct region *r = get_region(knob & 3);
	size_t nr_mods = (knob >> 2) & 3;
	size_t errlen = err_lens[(knob >> 4) & 7];
	bool have_cmdline = knob & 0x80;
	struct vmm_module mods[3];
	struct vmm_boot boot, before;
	char cmdline[65], *err;
	bool snap = r->ram.size <= 0x10000;
	int rc;

	if (!snapshot)
		CHECK((snapshot = malloc(0x10000)));

	/* Module i: a slice chosen by two input bytes; cmdline: up to 64 input bytes. */
	for (size_t i = 0; i < nr_mods; i++) {
		size_t a = size > 2 * i + 1 ? data[2 * i] * size / 256 : 0;
		size_t b = size > 2 * i + 2 ? data[2 * i + 1] * size / 256 : 0;

		if (a > b) {
			size_t t = a;

			a = b;
			b = t;
		}
		mods[i] = (struct vmm_module){
			.data = size ? data + a : NULL,
			.size = b - a,
			.cmdline = (i & 1) ? NULL : "mod",
		};
	}
	memset(cmdline, 0, sizeof(cmdline));
	memcpy(cmdline, data + size / 2, size - size / 2 < 64 ? size - size / 2 : 64);

	err = malloc(errlen + ERR_SLACK);
	CHECK(err);
	memset(err, 0x5A, errlen + ERR_SLACK);
	memset(&boot, 0xC3, sizeof(boot));
	before = boot;
	if (snap)
		memcpy(snapshot, r->ram.base, r->ram.size);

	rc = vmm_load_kernel(&r->ram, data, size, have_cmdline ? cmdline : NULL, mods, nr_mods,
			     &boot, errlen ? err : NULL, errlen);

	check_canary(r);
	for (size_t i = errlen; i < errlen + ERR_SLACK; i++)
		CHECK((uint8_t) err[i] == 0x5A);
	if (errlen)
		CHECK(memchr(err, 0, errlen));
	if (rc) {
		CHECK(rc == -ENOEXEC || rc == -EINVAL || rc == -E2BIG);
		CHECK(!memcmp(&boot, &before, sizeof(boot)));
		if (errlen > 1)
			CHECK(err[0] != 0 && !strchr(err, '\n'));
		if (snap)
			CHECK(!memcmp(snapshot, r->ram.base, r->ram.size));
	} else {
		if (errlen)
			CHECK(err[0] == 0);
		check_success(&r->ram, &boot);
	}
	free(err);
	return 0;
}
