/* SPDX-License-Identifier: MIT */
/*
 * Guest paging on Unicorn 2.0.1, which translates linear = physical: the
 * VMM walks the guest's page tables (vpmu's walker, the one the PEBS
 * writer uses) when Unicorn touches an unmapped linear page, and maps an
 * alias of the guest RAM behind it there, coalescing runs of linear pages
 * that are contiguous in guest-physical memory (Unicorn asserts past 4096
 * memory sections). Every alias goes when the guest changes CR0/CR3/CR4/
 * EFER or runs INVLPG. The xAPIC page is mapped as MMIO.
 */
#include <errno.h>
#include <string.h>

#include "emu-priv.h"

#define PAGE	4096ull
#define RUN_MAX (2ull << 20) /* coalesce up to 2 MiB per alias */

static struct walk_paging paging(const struct emu *emu)
{
	struct walk_paging p = { emu->cr0, emu->cr3, emu->cr4, emu->efer };

	return p;
}

int mmu_read(struct emu *emu, uint64_t la, void *dst, size_t len)
{
	struct walk_paging p = paging(emu);

	return walk_read(&emu->mem, &p, la, dst, len, 0);
}

int mmu_write(struct emu *emu, uint64_t la, const void *src, size_t len)
{
	struct walk_paging p = paging(emu);

	return walk_write(&emu->mem, &p, la, src, len, WALK_WRITE | WALK_SET_AD);
}

static bool overlaps(const struct emu *emu, uint64_t la, uint64_t size)
{
	for (unsigned int i = 0; i < emu->nr_aliases; i++) {
		const struct alias *a = &emu->aliases[i];

		if (la < a->la + a->size && a->la < la + size)
			return true;
	}
	return false;
}

static uint64_t apic_read(uc_engine *uc, uint64_t offset, unsigned size, void *data)
{
	struct emu *emu = data;

	return lapic_mmio_read(&emu->apic, (uint32_t) offset);
}

static void apic_write(uc_engine *uc, uint64_t offset, unsigned size, uint64_t value, void *data)
{
	struct emu *emu = data;

	lapic_mmio_write(&emu->apic, (uint32_t) offset, (uint32_t) value);
	/* an LVT unmask, EOI or self-IPI may make an interrupt deliverable */
	emu->want_stop = true;
}

static bool add_alias(struct emu *emu, uint64_t la, uint64_t size, bool mmio, uint32_t prot,
		      uint8_t *hva)
{
	struct alias *a;

	if (emu->nr_aliases >= MAX_ALIASES + 16)
		return false;
	a = &emu->aliases[emu->nr_aliases++];
	a->la = la;
	a->size = size;
	a->mmio = mmio;
	a->prot = prot;
	a->hva = hva;
	a->settle = !mmio && emu->in_run;
	emu->st.aliases++;
	/* near Unicorn's limit: drop them all at the next block boundary */
	if (emu->nr_aliases >= MAX_ALIASES) {
		emu->paging_dirty = true;
		emu->want_stop = true;
	}
	return true;
}

/*
 * A guest page fault: remember it and abort the access; the run loop
 * delivers #PF once Unicorn has stopped (emu_pf_deliver). Error code per
 * SDM Vol. 3A 4.7: P (a protection violation, not a missing page), W/R,
 * U/S (CPL 3), I/D (an instruction fetch, where NX or SMEP make it one).
 * Tables that lead outside RAM read as not present here (hardware would
 * read all ones there and report a reserved-bit fault).
 */
static bool page_fault(struct emu *emu, uint64_t la, bool present, bool write, bool fetch)
{
	emu->pf_pending = true;
	emu->pf_addr = la;
	emu->pf_fetch = fetch;
	emu->pf_err =
		(present ? 1u : 0) | (write ? 2u : 0) | (emu->cpl == 3 ? 4u : 0) |
		(fetch && ((emu->efer & (1ull << 11)) || (emu->cr4 & (1ull << 20))) ? 16u : 0);
	return false;
}

bool mmu_map(struct emu *emu, uint64_t la, bool write, bool fetch)
{
	struct walk_paging p = paging(emu);
	struct walk_result w;
	uint64_t page = la & ~(PAGE - 1), gpa, run;
	uint32_t prot;
	unsigned int flags = (write ? WALK_WRITE : 0) | WALK_SET_AD;
	int r;

	if (!emu->cs64 && !(emu->efer & (1ull << 10)))
		page &= 0xffffffffull;
	r = walk_translate(&emu->mem_map, &p, page, flags, &w);
	if (r == -EFAULT && (emu->cr0 >> 31))
		return page_fault(emu, la, false, write,
				  fetch); /* not present, or tables outside RAM */
	gpa = r == 0 ? w.gpa : page;
	if (r == -EACCES)
		return page_fault(emu, la, true, write, fetch);
	if ((gpa & ~(PAGE - 1)) == (emu->apic.base & ~(PAGE - 1)) &&
	    lapic_xapic_enabled(&emu->apic)) {
		if (overlaps(emu, page, PAGE) || uc_mmio_map(emu->uc, page, PAGE, apic_read, emu,
							     apic_write, emu) != UC_ERR_OK) {
			emu_fatal(emu, "cannot map the local APIC at linear %#llx",
				  (unsigned long long) page);
			return false;
		}
		return add_alias(emu, page, PAGE, true, 0, NULL);
	}
	if (r < 0 || gpa + PAGE > emu->ram_size) {
		emu_fatal(emu,
			  "guest %s at linear %#llx reaches guest-physical %#llx, outside the %llu "
			  "MiB of RAM",
			  fetch	  ? "fetch"
			  : write ? "write"
				  : "read",
			  (unsigned long long) la, (unsigned long long) gpa,
			  (unsigned long long) (emu->ram_size >> 20));
		return false;
	}
	if (overlaps(emu, page, PAGE)) {
		emu_fatal(emu, "internal: linear page %#llx is mapped and unmapped at once",
			  (unsigned long long) page);
		return false;
	}
	/* coalesce: the following linear pages while they follow in guest-physical memory */
	run = PAGE;
	while (run < RUN_MAX) {
		struct walk_result w2;
		uint64_t next = page + run;

		if (emu->cr0 >> 31) {
			if (walk_translate(&emu->mem_map, &p, next, 0, &w2) < 0 ||
			    w2.gpa != gpa + run || w2.writable != w.writable)
				break;
		} else if (!emu->cs64 && next > 0xffffffffull) {
			break;
		}
		if (gpa + run + PAGE > emu->ram_size || overlaps(emu, next, PAGE))
			break;
		if (((gpa + run) & ~(PAGE - 1)) == (emu->apic.base & ~(PAGE - 1)))
			break;
		run += PAGE;
	}
	prot = (r == 0 && !w.writable && (emu->cr0 >> 31)) ? UC_PROT_READ | UC_PROT_EXEC
							   : UC_PROT_ALL;
	if (uc_mem_map_ptr(emu->uc, page, run, prot, emu->ram + gpa) != UC_ERR_OK) {
		emu_fatal(emu, "cannot map linear %#llx onto guest RAM", (unsigned long long) page);
		return false;
	}
	return add_alias(emu, page, run, false, prot, emu->ram + gpa);
}

void mmu_flush(struct emu *emu)
{
	for (unsigned int i = 0; i < emu->nr_aliases; i++)
		uc_mem_unmap(emu->uc, emu->aliases[i].la, emu->aliases[i].size);
	emu->nr_aliases = 0;
	emu->st.alias_flushes++;
	emu->paging_dirty = false;
}

/*
 * Unicorn 2.0.1 cannot invalidate translations of pages mapped from inside
 * a hook: a later uc_emu_start `until` (or uc_ctl_remove_cache) in them is
 * ignored, measured. Mapping the same alias again from outside a run makes
 * them ordinary; done once per alias before the next run.
 */
void mmu_settle(struct emu *emu)
{
	for (unsigned int i = 0; i < emu->nr_aliases; i++) {
		struct alias *a = &emu->aliases[i];

		if (!a->settle)
			continue;
		a->settle = false;
		if (uc_mem_unmap(emu->uc, a->la, a->size) != UC_ERR_OK ||
		    uc_mem_map_ptr(emu->uc, a->la, a->size, a->prot, a->hva) != UC_ERR_OK) {
			emu_fatal(emu, "cannot map linear %#llx onto guest RAM again",
				  (unsigned long long) a->la);
			return;
		}
	}
}

bool mmu_hook_unmapped(uc_engine *uc, uc_mem_type type, uint64_t addr, int size, int64_t value,
		       void *data)
{
	struct emu *emu = data;
	uint64_t end = addr + (uint64_t) (size > 0 ? size - 1 : 0);

	if (emu->fatal)
		return false;
	if (!mmu_map(emu, addr, type == UC_MEM_WRITE_UNMAPPED, type == UC_MEM_FETCH_UNMAPPED))
		return false;
	/* an access that straddles two pages needs the second one too */
	if ((end & ~(PAGE - 1)) != (addr & ~(PAGE - 1)) && !overlaps(emu, end & ~(PAGE - 1), PAGE))
		return mmu_map(emu, end, type == UC_MEM_WRITE_UNMAPPED,
			       type == UC_MEM_FETCH_UNMAPPED);
	return true;
}

bool mmu_hook_prot(uc_engine *uc, uc_mem_type type, uint64_t addr, int size, int64_t value,
		   void *data)
{
	struct emu *emu = data;

	/* a read-only alias: the guest's tables say the page is not writable */
	return page_fault(emu, addr, true, true, false);
}

bool mmu_ensure(struct emu *emu, uint64_t la)
{
	if (overlaps(emu, la & ~(PAGE - 1), PAGE))
		return true;
	return mmu_map(emu, la, false, false);
}
