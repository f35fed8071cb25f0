/* SPDX-License-Identifier: MIT */
/*
 * A Linux bzImage on the emulator: the 64-bit boot protocol (bzimage_load,
 * shared with the KVM path) over the emulator's Linux RAM layout (emu.c:
 * ram_layout), with the MP and ACPI tables of boot-tables.c in the BIOS
 * area, which e820 marks reserved.
 */
#include <errno.h>
#include <string.h>

#include "boot-tables.h" /* struct boot_tables_config */
#include "bzimage.h"
#include "emu-priv.h"

int emu_load_linux(struct emu *emu, const void *image, size_t size, const char *cmdline,
		   const void *initrd, size_t initrd_size, char *err, size_t errlen)
{
	const struct emu_mmu *m = &emu->mmu;
	struct guest_range high[BZIMAGE_PC_MAX_HIGH];
	struct bzimage_load_config cfg;
	struct bzimage_entry e;
	struct boot_tables_config bt = { .cpus = 1 };
	uint32_t r1[4];
	unsigned int n = 0;
	int r;

	if (emu->cfg.layout != EMU_LAYOUT_LINUX) {
		snprintf(err, errlen, "internal: a Linux guest needs the Linux RAM layout");
		return -EINVAL;
	}
	for (unsigned int i = 1; i < m->nr_ram && n < BZIMAGE_PC_MAX_HIGH; i++)
		high[n++] = (struct guest_range){ m->ram[i].gpa, m->ram[i].size,
						  emu->ram + m->ram[i].gpa, E820_RAM };
	cpu_cpuid_leaf(emu, 1, 0, r1);
	bt.cpu_signature = r1[0];
	bt.cpu_features = r1[3];
	memset(&cfg, 0, sizeof(cfg));
	cfg.image = image;
	cfg.image_size = size;
	cfg.cmdline = cmdline;
	cfg.initrd = initrd;
	cfg.initrd_size = initrd_size;
	r = bzimage_load_pc(emu->ram, high, n, &bt, &cfg, &e, err, errlen);
	if (r < 0)
		return r;
	emu->linux_unpacked = e.unpacked;
	snprintf(emu->linux_unpack_note, sizeof(emu->linux_unpack_note), "%s", e.unpack_note);
	return emu_boot_linux64(emu, e.gdt_base, e.gdt_limit, e.cr3, e.rip, e.rsi, err, errlen);
}

const char *emu_linux_unpack_note(const struct emu *emu)
{
	return emu->linux_unpacked ? NULL : emu->linux_unpack_note;
}
