/* SPDX-License-Identifier: MIT */
/*
 * --pebs-dump FILE: the guest's PEBS buffer at exit, in the format of
 * vpmu/pebs.h (struct vpmu_pebs_dump_header, then the records), for
 * vpmu-pebs. Uses only libvpmu's public API.
 */
#ifndef VMM_PEBS_DUMP_H
#define VMM_PEBS_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "emu.h"
#include "vpmu/vpmu.h"
#include "vpmu/walk.h"

/*
 * Write `vcpu`'s PEBS buffer to `path`: through the DS area (legacy PEBS,
 * walked with the guest's `paging`) or IA32_PEBS_BASE/INDEX
 * (architectural PEBS) in the guest RAM at `ram` (guest-physical 0,
 * `ram_size` bytes). 0, or a negative errno with one line in `err`.
 */
int pebs_dump_write(struct vpmu_vcpu *vcpu, const struct vpmu_paging *paging, void *ram,
		    uint64_t ram_size, const char *path, char *err, size_t errlen);

/* pebs_dump_write() of the emulator's vCPU, RAM and paging registers now. */
static inline int pebs_dump(struct emu *emu, const char *path, char *err, size_t errlen)
{
	struct vmm_ram ram = emu_ram(emu);
	struct vpmu_paging p;

	emu_paging(emu, &p.cr0, &p.cr3, &p.cr4, &p.efer);
	return pebs_dump_write(emu_vpmu(emu), &p, ram.base, ram.size, path, err, errlen);
}

#endif
