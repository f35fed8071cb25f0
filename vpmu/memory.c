/* SPDX-License-Identifier: MIT */
/* The guest RAM a vCPU may write PEBS records to. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pmu.h"

static int by_gpa(const void *a, const void *b)
{
	const struct guest_region *x = a, *y = b;

	return x->gpa < y->gpa ? -1 : x->gpa > y->gpa;
}

int vpmu_vcpu_set_memory(struct vpmu_vcpu *vcpu, const struct vpmu_mem_region *regions, size_t nr)
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
	free(vcpu->mem_regions);
	vcpu->mem_regions = r;
	vcpu->mem.regions = r;
	vcpu->mem.nr = nr;
	walk_cache_reset(&vcpu->walk_cache);
	return 0;
}
