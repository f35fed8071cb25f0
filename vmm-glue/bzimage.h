/* SPDX-License-Identifier: MIT */
/*
 * Linux bzImage (x86 boot protocol 2.06+, Documentation/arch/x86/boot.rst):
 * the setup header, and the zero page (struct boot_params) a 64-bit
 * entry takes in RSI.
 */
#ifndef VMM_BZIMAGE_H
#define VMM_BZIMAGE_H

#include <stddef.h>
#include <stdint.h>

/* setup header fields, by offset in the image and in the zero page */
#define BP_E820_ENTRIES	    0x1e8
#define BP_SETUP_SECTS	    0x1f1
#define BP_BOOT_FLAG	    0x1fe
#define BP_HDR_JUMP	    0x200
#define BP_HEADER	    0x202 /* "HdrS" */
#define BP_VERSION	    0x206
#define BP_TYPE_OF_LOADER   0x210
#define BP_LOADFLAGS	    0x211
#define BP_CODE32_START	    0x214
#define BP_RAMDISK_IMAGE    0x218
#define BP_RAMDISK_SIZE	    0x21c
#define BP_HEAP_END_PTR	    0x224
#define BP_CMD_LINE_PTR	    0x228
#define BP_INITRD_ADDR_MAX  0x22c
#define BP_KERNEL_ALIGNMENT 0x230
#define BP_RELOCATABLE	    0x234
#define BP_XLOADFLAGS	    0x236
#define BP_CMDLINE_SIZE	    0x238
#define BP_PREF_ADDRESS	    0x258
#define BP_INIT_SIZE	    0x260
#define BP_E820_TABLE	    0x2d0
#define BP_E820_ENTRY_SIZE  20 /* u64 addr, u64 size, u32 type, packed */
#define BP_E820_MAX	    128
#define BP_SIZE		    4096

#define LOADFLAG_LOADED_HIGH  (1u << 0)
#define LOADFLAG_CAN_USE_HEAP (1u << 7)
#define XLF_KERNEL_64	      (1u << 0)
#define E820_RAM	      1
#define E820_RESERVED	      2

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
};

/* 0, or a negative errno with one line in err saying what is wrong with the image. */
int bzimage_parse(const uint8_t *img, size_t size, struct bzimage *ret, char *err, size_t errlen);

/*
 * Fill the zero page: the image's setup header, type_of_loader 0xff
 * (undefined loader), CAN_USE_HEAP, the command line and initrd where the
 * VMM put them, and an e820 map of ram_size bytes of RAM (below 640 KiB,
 * a reserved hole up to 1 MiB, then the rest).
 */
int bzimage_boot_params(const uint8_t *img, const struct bzimage *bz, uint64_t ram_size,
			uint32_t cmdline_addr, size_t cmdline_len, uint32_t initrd_addr,
			uint32_t initrd_size, uint8_t zero_page[BP_SIZE], char *err, size_t errlen);

#endif
