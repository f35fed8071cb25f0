/* SPDX-License-Identifier: MIT */
/*
 * A Linux bzImage on the emulator: the 64-bit boot protocol
 * (Documentation/x86/boot.rst) over the Linux RAM layout (emu.c:
 * ram_layout): kernel at its preferred address, zero page with an e820
 * map of the RAM ranges, command line and initrd, a boot GDT with
 * __BOOT_CS/__BOOT_DS and page tables identity-mapping the first 4 GiB.
 */
#include <errno.h>
#include <string.h>

#include "bzimage.h"
#include "emu-priv.h"

#define LX_GDT	       0x500ull
#define LX_ZERO_PAGE   0x7000ull
#define LX_PML4	       0x9000ull
#define LX_PDPT	       0xa000ull
#define LX_PD	       0xb000ull /* 4 PDs: the first 4 GiB with 2 MiB pages */
#define LX_CMDLINE     0x20000ull
#define LX_CMDLINE_MAX 0x10000ull
#define GDT_CODE64     0x00af9b000000ffffull
#define GDT_DATA       0x00cf93000000ffffull

static void wr64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static void e820_add(uint8_t *zp, unsigned int *n, uint64_t addr, uint64_t size, uint32_t type)
{
	uint8_t *e = zp + BP_E820_TABLE + *n * BP_E820_ENTRY_SIZE;

	wr64(e, addr);
	wr64(e + 8, size);
	memcpy(e + 16, &type, 4);
	(*n)++;
}

int emu_load_linux(struct emu *emu, const void *image, size_t size, const char *cmdline,
		   const void *initrd, size_t initrd_size, char *err, size_t errlen)
{
	const struct emu_mmu *m = &emu->mmu;
	const struct guest_region *hi = &m->ram[m->nr_ram - 1];
	uint8_t *ram = emu->ram, *zp = ram + LX_ZERO_PAGE;
	size_t cmdline_len = cmdline ? strlen(cmdline) : 0;
	uint64_t initrd_addr = 0, top;
	struct bzimage bz;
	unsigned int n = 0;
	int r;

	r = bzimage_parse(image, size, &bz, err, errlen);
	if (r < 0)
		return r;
	if (cmdline_len >= LX_CMDLINE_MAX) {
		snprintf(err, errlen,
			 "kernel command line of %zu bytes: this loader takes up to %llu",
			 cmdline_len, LX_CMDLINE_MAX - 1);
		return -E2BIG;
	}
	/* the kernel and what it decompresses into must lie in one RAM range */
	if (m->nr_ram < 2 || bz.load_addr < m->ram[1].gpa ||
	    bz.load_addr + bz.init_size > m->ram[1].gpa + m->ram[1].size) {
		snprintf(err, errlen,
			 "the kernel wants guest-physical %#llx..%#llx, outside RAM: raise --mem",
			 (unsigned long long) bz.load_addr,
			 (unsigned long long) (bz.load_addr + bz.init_size));
		return -ENOMEM;
	}
	if (initrd_size) {
		top = m->ram[1].gpa + m->ram[1].size;
		if (top > (uint64_t) bz.initrd_addr_max + 1)
			top = (uint64_t) bz.initrd_addr_max + 1;
		if (initrd_size > top || top - initrd_size < bz.load_addr + bz.init_size) {
			snprintf(err, errlen,
				 "the initrd (%zu bytes) does not fit in RAM above the kernel: "
				 "raise "
				 "--mem",
				 initrd_size);
			return -ENOMEM;
		}
		initrd_addr = (top - initrd_size) & ~0xfffull;
	}
	r = bzimage_boot_params(image, &bz, m->ram_top, LX_CMDLINE, cmdline_len,
				(uint32_t) initrd_addr, (uint32_t) initrd_size, zp, err, errlen);
	if (r < 0)
		return r;
	/* the e820 map of the emulator's RAM ranges; the BIOS area (tables) reserved */
	e820_add(zp, &n, 0, 0x9fc00, E820_RAM);
	e820_add(zp, &n, 0x9fc00, 0x100000 - 0x9fc00, E820_RESERVED);
	for (unsigned int i = 1; i < m->nr_ram; i++)
		e820_add(zp, &n, m->ram[i].gpa, m->ram[i].size, E820_RAM);
	zp[BP_E820_ENTRIES] = (uint8_t) n;
	(void) hi;

	memcpy(ram + bz.load_addr, (const uint8_t *) image + bz.kernel_offset, bz.kernel_size);
	if (cmdline_len)
		memcpy(ram + LX_CMDLINE, cmdline, cmdline_len);
	ram[LX_CMDLINE + cmdline_len] = 0;
	if (initrd_size)
		memcpy(ram + initrd_addr, initrd, initrd_size);

	memset(ram + LX_GDT, 0, 4 * 8);
	wr64(ram + LX_GDT + 0x10, GDT_CODE64);
	wr64(ram + LX_GDT + 0x18, GDT_DATA);
	memset(ram + LX_PML4, 0, 6 * 4096);
	wr64(ram + LX_PML4, LX_PDPT | 3);
	for (uint64_t i = 0; i < 4; i++) {
		wr64(ram + LX_PDPT + i * 8, (LX_PD + i * 4096) | 3);
		for (uint64_t j = 0; j < 512; j++)
			wr64(ram + LX_PD + i * 4096 + j * 8, ((i * 512 + j) << 21) | 0x83);
	}
	return emu_boot_linux64(emu, LX_GDT, 4 * 8 - 1, LX_PML4, bz.entry64, LX_ZERO_PAGE, err,
				errlen);
}
