/* SPDX-License-Identifier: MIT */
/* The guest RAM a vCPU may write PEBS records to. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "pmu.h"
#include "vpmu/walk.h"

static int by_gpa(const void *a, const void *b)
{
	const struct guest_region *x = a, *y = b;

	return x->gpa < y->gpa ? -1 : x->gpa > y->gpa;
}

/*
 * A sorted, checked copy of `regions`: -EINVAL for an empty, wrapping or
 * overlapping one. *ret is NULL for none.
 */
static int regions_copy(const struct vpmu_mem_region *regions, size_t nr, struct guest_region **ret)
{
	struct guest_region *r = NULL;

	if (nr && !regions)
		return -EINVAL;
	if (nr) {
		r = calloc(nr, sizeof(*r));
		if (!r)
			return -ENOMEM;
	}
	for (size_t i = 0; i < nr; i++) {
		if (!regions[i].size || !regions[i].hva ||
		    regions[i].gpa + regions[i].size - 1 < regions[i].gpa) {
			free(r);
			return -EINVAL;
		}
		r[i] = (struct guest_region){ regions[i].gpa, regions[i].size, regions[i].hva };
	}
	qsort(r, nr, sizeof(*r), by_gpa);
	for (size_t i = 1; i < nr; i++)
		if (r[i].gpa < r[i - 1].gpa + r[i - 1].size) {
			free(r);
			return -EINVAL;
		}
	*ret = r;
	return 0;
}

int vpmu_vcpu_set_memory(struct vpmu_vcpu *vcpu, const struct vpmu_mem_region *regions, size_t nr)
{
	struct guest_region *r;
	int err = regions_copy(regions, nr, &r);

	if (err < 0)
		return err;
	free(vcpu->mem_regions);
	vcpu->mem_regions = r;
	vcpu->mem.regions = r;
	vcpu->mem.nr = nr;
	walk_cache_reset(&vcpu->walk_cache);
	return 0;
}

/* ---- the public walk (vpmu/walk.h) --------------------------------------- */

struct vpmu_guest_memory {
	struct guest_mem mem;
	struct guest_region *regions;
};

int vpmu_guest_memory_new(const struct vpmu_mem_region *regions, size_t nr,
			  struct vpmu_guest_memory **ret_mem)
{
	struct vpmu_guest_memory *m;
	int err;

	if (!ret_mem || !nr)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	err = regions_copy(regions, nr, &m->regions);
	if (err < 0) {
		free(m);
		return err;
	}
	m->mem = (struct guest_mem){ m->regions, nr };
	*ret_mem = m;
	return 0;
}

void vpmu_guest_memory_free(struct vpmu_guest_memory *mem)
{
	if (!mem)
		return;
	free(mem->regions);
	free(mem);
}

void *vpmu_guest_memory_ptr(const struct vpmu_guest_memory *mem, uint64_t gpa, uint64_t len)
{
	return mem ? guest_mem_ptr(&mem->mem, gpa, len) : NULL;
}

/* The public flags are the walker's own, bit for bit. */
_Static_assert(VPMU_WALK_WRITE == WALK_WRITE && VPMU_WALK_USER == WALK_USER &&
		       VPMU_WALK_IMPLICIT_SUPERVISOR == WALK_IMPLICIT_SUPERVISOR &&
		       VPMU_WALK_SET_AD == WALK_SET_AD,
	       "vpmu/walk.h flags");

static struct walk_paging paging_of(const struct vpmu_paging *p)
{
	return (struct walk_paging){ p->cr0, p->cr3, p->cr4, p->efer };
}

int vpmu_walk_translate(const struct vpmu_guest_memory *mem, const struct vpmu_paging *p,
			uint64_t gla, unsigned int flags, struct vpmu_walk_result *ret, size_t size)
{
	struct walk_paging wp;
	struct walk_result w;
	struct vpmu_walk_result out;
	int err;

	if (!mem || !p || !ret || (flags & ~WALK_ALL_FLAGS))
		return -EINVAL;
	wp = paging_of(p);
	err = walk_translate(&mem->mem, &wp, gla, flags, &w);
	if (err < 0)
		return err;
	out = (struct vpmu_walk_result){ .gpa = w.gpa,
					 .page_size = w.page_size,
					 .len = w.len,
					 .writable = w.writable,
					 .user = w.user,
					 .nx = w.nx,
					 .global = w.global };
	abi_copy_out(ret, size, &out, sizeof(out));
	return 0;
}

int vpmu_walk_read(const struct vpmu_guest_memory *mem, const struct vpmu_paging *p, uint64_t gla,
		   void *dst, size_t len, unsigned int flags)
{
	struct walk_paging wp;

	if (!mem || !p || (len && !dst) || (flags & ~WALK_ALL_FLAGS))
		return -EINVAL;
	wp = paging_of(p);
	return walk_read(&mem->mem, &wp, gla, dst, len, flags);
}

int vpmu_walk_write(const struct vpmu_guest_memory *mem, const struct vpmu_paging *p, uint64_t gla,
		    const void *src, size_t len, unsigned int flags)
{
	struct walk_paging wp;

	if (!mem || !p || (len && !src) || (flags & ~WALK_ALL_FLAGS))
		return -EINVAL;
	wp = paging_of(p);
	return walk_write(&mem->mem, &wp, gla, src, len, flags);
}
