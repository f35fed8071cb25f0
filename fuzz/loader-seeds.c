/* SPDX-License-Identifier: MIT */
/*
 * A seed corpus for fuzz-loader: writes a few kernel images that
 * vmm_load_kernel accepts (the loader tests' canned ones, built by
 * vmm-glue/tests/kernel-images.h) into a folder, after checking that the
 * loader takes each of them.
 *
 * Usage: loader-seeds DIR
 *   then: build-fuzz/fuzz/fuzz-loader DIR
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "kernel-images.h"
#include "loader.h"

#define RAM_SIZE (128ULL << 20)

static int write_seed(const char *dir, const char *name, size_t len)
{
	struct vmm_ram ram = { .size = RAM_SIZE };
	struct vmm_boot boot;
	char path[4096], err[256] = "";
	FILE *f;
	int r;

	ram.base = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ram.base == MAP_FAILED) {
		fprintf(stderr, "loader-seeds: no memory for the guest RAM: %s\n", strerror(errno));
		return -1;
	}
	r = vmm_load_kernel(&ram, img, len, NULL, NULL, 0, &boot, err, sizeof(err));
	munmap(ram.base, RAM_SIZE);
	if (r < 0) {
		fprintf(stderr, "loader-seeds: the loader refuses seed %s: %s\n", name, err);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(img, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "loader-seeds: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	printf("%s: %zu bytes\n", path, len);
	return 0;
}

int main(int argc, char **argv)
{
	struct tseg s[1] = { {
		.paddr = 0x100000,
		.vaddr = 0xFFFFFFFF80100000ULL,
		.filesz = 0x40,
		.memsz = 0x80,
	} };
	const char *dir;
	int bad = 0;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: loader-seeds DIR (writes fuzz-loader seeds there)\n");
		return 2;
	}
	dir = argv[1];
	if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
		fprintf(stderr, "loader-seeds: cannot create %s: %s\n", dir, strerror(errno));
		return 1;
	}
	img = calloc(1, IMG_CAP);
	if (!img) {
		fprintf(stderr, "loader-seeds: out of memory\n");
		return 1;
	}
	bad |= write_seed(dir, "elf64", good_elf64());
	bad |= write_seed(dir, "elf32-mb", good_elf32_mb(3));
	bad |= write_seed(dir, "aout-mb", build_aout(&good_aout_desc, 1));
	bad |= write_seed(dir, "elf64-higher-half",
			  build_elf(true, 0xFFFFFFFF80100000ULL, s, 1, -1));
	bad |= write_seed(dir, "elf32-mb-small", build_elf(false, 0x100000, s, 1, 0));
	free(img);
	return bad ? 1 : 0;
}
