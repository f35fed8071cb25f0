/* SPDX-License-Identifier: MIT */
/*
 * Linux bzImage (x86 boot protocol 2.06+, Documentation/arch/x86/boot.rst):
 * the setup header, the zero page (struct boot_params, zero-page.rst) a
 * 64-bit entry takes in RSI, and the whole 64-bit boot protocol load
 * (bzimage_load) that the KVM path and the emulator share.
 */
#ifndef VMM_BZIMAGE_H
#define VMM_BZIMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* setup header fields, by offset in the image and in the zero page */
#define BP_ACPI_RSDP_ADDR    0x070 /* u64, boot_params (zero-page.rst) */
#define BP_EXT_RAMDISK_IMAGE 0x0c0
#define BP_EXT_RAMDISK_SIZE  0x0c4
#define BP_EXT_CMD_LINE_PTR  0x0c8
#define BP_E820_ENTRIES	     0x1e8
#define BP_SETUP_SECTS	     0x1f1
#define BP_BOOT_FLAG	     0x1fe
#define BP_HDR_JUMP	     0x200
#define BP_HEADER	     0x202 /* "HdrS" */
#define BP_VERSION	     0x206
#define BP_TYPE_OF_LOADER    0x210
#define BP_LOADFLAGS	     0x211
#define BP_CODE32_START	     0x214
#define BP_RAMDISK_IMAGE     0x218
#define BP_RAMDISK_SIZE	     0x21c
#define BP_HEAP_END_PTR	     0x224
#define BP_CMD_LINE_PTR	     0x228
#define BP_INITRD_ADDR_MAX   0x22c
#define BP_KERNEL_ALIGNMENT  0x230
#define BP_RELOCATABLE	     0x234
#define BP_XLOADFLAGS	     0x236
#define BP_CMDLINE_SIZE	     0x238
#define BP_PREF_ADDRESS	     0x258
#define BP_INIT_SIZE	     0x260
#define BP_E820_TABLE	     0x2d0
#define BP_E820_ENTRY_SIZE   20 /* u64 addr, u64 size, u32 type, packed */
#define BP_E820_MAX	     128
#define BP_SIZE		     4096

#define LOADFLAG_LOADED_HIGH	   (1u << 0)
#define LOADFLAG_CAN_USE_HEAP	   (1u << 7)
#define XLF_KERNEL_64		   (1u << 0)
#define XLF_CAN_BE_LOADED_ABOVE_4G (1u << 1)
#define E820_RAM		   1
#define E820_RESERVED		   2

struct bzimage {
	uint16_t version;
	unsigned int setup_sects; /* 512-byte sectors after the boot sector */
	uint64_t kernel_offset;	  /* the protected-mode kernel in the file */
	uint64_t kernel_size;
	uint64_t load_addr; /* where it goes: 1 MiB, or pref_address if relocatable */
	uint64_t entry64;   /* load_addr + 0x200 */
	uint64_t init_size; /* memory the kernel needs from load_addr while it decompresses */
	uint32_t initrd_addr_max;
	uint32_t cmdline_size; /* longest command line, without the NUL */
	uint64_t header_end;   /* the setup header is [0x1f1, header_end) */
	bool relocatable;
	uint32_t kernel_alignment; /* for a relocatable kernel */
	uint16_t xloadflags;
};

/* 0, or a negative errno with one line in err saying what is wrong with the image. */
int bzimage_parse(const uint8_t *img, size_t size, struct bzimage *ret, char *err, size_t errlen);

/*
 * Fill the zero page for one contiguous RAM of ram_size bytes: the
 * image's setup header, type_of_loader 0xff (undefined loader),
 * CAN_USE_HEAP, the command line and initrd where the VMM put them, and
 * an e820 map of RAM below 640 KiB, a reserved hole up to 1 MiB, then the
 * rest. The older, 32-bit-addressed form of bzimage_load's zero page.
 */
int bzimage_boot_params(const uint8_t *img, const struct bzimage *bz, uint64_t ram_size,
			uint32_t cmdline_addr, size_t cmdline_len, uint32_t initrd_addr,
			uint32_t initrd_size, uint8_t zero_page[BP_SIZE], char *err, size_t errlen);

/*
 * Guest-physical memory as the loader sees it: ranges in ascending,
 * non-overlapping order, each RAM or reserved in the e820 map the kernel
 * gets (and in that order), backed by host memory at `host` (NULL: listed
 * in e820 only, nothing is written there).
 */
struct guest_range {
	uint64_t gpa, size;
	uint8_t *host;
	uint32_t type; /* E820_RAM or E820_RESERVED */
};

struct bzimage_load_config {
	const struct guest_range *ranges;
	unsigned int nr_ranges;
	const uint8_t *image;
	size_t image_size;
	const char *cmdline; /* NULL: empty */
	const uint8_t *initrd;
	size_t initrd_size;
	/* placement; 0 lets the loader choose */
	uint64_t kernel_addr; /* relocatable kernels only: aligned, at or above pref_address */
	uint64_t initrd_addr; /* default: as high as initrd_addr_max (or, above 4G, RAM) allows */
	uint64_t boot_data_addr; /* zero page, GDT, page tables, command line: the lowest RAM
				    at or above 4 KiB by default */
	uint64_t acpi_rsdp;	 /* boot_params.acpi_rsdp_addr, 0: the kernel scans for it */
	/*
	 * Decompress the kernel here (bzimage_unpack in bzimage.c) and enter its own
	 * startup_64, where the payload is XZ and the kernel goes to its
	 * pref_address; otherwise (or false) the guest's decompressor runs.
	 */
	bool unpack;
};

/* The 64-bit entry state (boot.rst, "64-bit Boot Protocol") */
struct bzimage_entry {
	uint64_t rip;		      /* the kernel's load address + 0x200 */
	uint64_t rsi;		      /* the zero page */
	uint64_t cr0, cr3, cr4, efer; /* paging on, identity-mapped, long mode */
	uint64_t gdt_base;
	uint16_t gdt_limit;
	uint16_t cs, ds; /* __BOOT_CS 0x10 (64-bit code), __BOOT_DS 0x18, for DS ES SS FS GS */
	/* where things went */
	uint64_t kernel_addr, kernel_end; /* kernel_end: load + max(init_size, file size) */
	uint64_t cmdline_addr, initrd_addr;
	uint64_t boot_data_addr, boot_data_size;
	struct bzimage bz;
	bool unpacked;	       /* rip is the decompressed kernel's startup_64 */
	char unpack_note[160]; /* unpack asked but not done: why */
};

#define BZ_BOOT_CS 0x10
#define BZ_BOOT_DS 0x18

/*
 * Load a bzImage for its 64-bit entry into the guest memory the ranges
 * describe: the protected-mode kernel, the command line, the initrd, the
 * zero page (setup header, cmd_line_ptr/ext_cmd_line_ptr,
 * ramdisk_image/ext_ramdisk_image and sizes, e820 = the ranges,
 * acpi_rsdp_addr), a GDT and 4-level page tables that identity-map with
 * 2 MiB pages the first 4 GiB and every GiB the kernel (with its
 * init_size) and the boot data touch, as the protocol wants the kernel,
 * zero page and command line mapped. Fills *ret with the entry state. 0,
 * or a negative errno with one line in err: -EINVAL/-ENOEXEC a bad image
 * or configuration, -E2BIG a command line or initrd the kernel cannot
 * take, -ENOMEM something does not fit in the RAM the ranges give.
 */
int bzimage_load(const struct bzimage_load_config *cfg, struct bzimage_entry *ret, char *err,
		 size_t errlen);

/*
 * Linux on the PC layout both vpmu-vmm backends give it: RAM from 0 to the
 * EBDA (9F000H), the BIOS area up to 1 MiB reserved and holding
 * boot-tables.c's MP and ACPI tables (RSDP at BOOT_TABLES_RSDP), then the
 * RAM ranges at and above 1 MiB; the kernel inflated by the VMM where it
 * can be (ret->unpacked, else ret->unpack_note says why). Guest-physical
 * address 0 is at `low`. The errors of boot_tables_build and bzimage_load.
 */
struct boot_tables_config;
#define BZIMAGE_PC_MAX_HIGH 4
int bzimage_load_pc(uint8_t *low, const struct guest_range *high, unsigned int nr_high,
		    const struct boot_tables_config *tables,
		    const struct bzimage_load_config *kernel, struct bzimage_entry *ret, char *err,
		    size_t errlen);

/*
 * The kernel ELF (vmlinux) inside a bzImage, inflated: *ret (malloc'd,
 * *ret_size bytes), its PT_LOAD segments checked to lie in the file and,
 * by physical address, in [bz->load_addr, + init_size), and its entry
 * point. -ENOTSUP (with err saying why) where the payload is not XZ or
 * there is no liblzma: the guest's decompressor can still do it; other
 * negative errnos for a damaged payload.
 */
int bzimage_unpack(const uint8_t *img, const struct bzimage *bz, uint8_t **ret, size_t *ret_size,
		   uint64_t *ret_entry, char *err, size_t errlen);

/* Copy vmlinux's PT_LOAD segments (checked by bzimage_unpack) to host + (paddr - base), zeroing
 * BSS. */
void bzimage_place_vmlinux(const uint8_t *elf, uint64_t base, uint8_t *host);

#endif
