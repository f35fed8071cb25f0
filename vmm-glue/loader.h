/* SPDX-License-Identifier: MIT */
/*
 * Kernel loaders for vpmu-vmm: multiboot v1 (32-bit ELF or a.out-kludge
 * image with a multiboot header) and ELF64 (entered in 64-bit mode on
 * identity page tables the loader builds). Guest RAM is one block at
 * guest-physical 0.
 */
#ifndef VMM_LOADER_H
#define VMM_LOADER_H

#include <stddef.h>
#include <stdint.h>

struct vmm_ram {
	uint8_t *base; /* host mapping of guest-physical 0 */
	uint64_t size;
};

struct vmm_module {
	const void *data; /* e.g. an -initrd file */
	size_t size;
	const char *cmdline; /* module string, may be NULL */
};

enum vmm_boot_kind {
	VMM_BOOT_MULTIBOOT, /* enter 32-bit protected mode, flat segments, paging off:
			     * EAX = 0x2BADB002, EBX = mb_info, EIP = entry */
	VMM_BOOT_ELF64,	    /* enter 64-bit mode: CR3 = cr3 (identity map of RAM),
			     * RIP = entry, RSP = stack, RDI = 0 */
};

struct vmm_boot {
	enum vmm_boot_kind kind;
	uint64_t entry;
	uint32_t mb_info;     /* multiboot: guest-physical address of the info block */
	uint64_t cr3;	      /* ELF64: PML4 the loader built */
	uint64_t gdt;	      /* ELF64: a GDT with a 64-bit code segment at selector 0x08
			       * and data at 0x10, 3 entries */
	uint64_t stack;	      /* ELF64: initial RSP (top of a loader-reserved stack) */
	uint64_t image_start; /* lowest and one past the highest byte the image occupies */
	uint64_t image_end;
	uint64_t free_start; /* first guest-physical byte past everything the loader wrote */
};

/*
 * Load `image` into `ram`. On failure returns a negative errno and writes
 * one line (no newline) saying what is wrong with the image into `err`:
 * -ENOEXEC (not a multiboot or ELF64 image / bad magic), -EINVAL
 * (truncated, overlapping or malformed segments, entry outside the
 * loaded image), -E2BIG (does not fit in RAM). Never reads outside
 * image[0..size) and never writes outside ram.
 */
int vmm_load_kernel(const struct vmm_ram *ram, const void *image, size_t size, const char *cmdline,
		    const struct vmm_module *mods, size_t nr_mods, struct vmm_boot *ret, char *err,
		    size_t errlen);

#endif
