/* SPDX-License-Identifier: MIT */
/* The guest event catalogues through the public API (vpmu/vpmu.h). */
#include <errno.h>

#include "abi.h"
#include "events.h"
#include "model.h"

static const struct vpmu_event_table *table_of(size_t model)
{
	const char *name = vpmu_model_name(model);
	const struct vpmu_model *m = name ? model_lookup(name) : NULL;

	return m ? m->events : NULL;
}

size_t vpmu_catalog_count(size_t model)
{
	const struct vpmu_event_table *t = table_of(model);

	return t ? t->nr : 0;
}

int vpmu_catalog_event(size_t model, size_t index, struct vpmu_catalog_event *ret, size_t size)
{
	const struct vpmu_event_table *t = table_of(model);
	const struct vpmu_event_desc *d;
	struct vpmu_catalog_event e;

	if (!ret)
		return -EINVAL;
	if (!t || index >= t->nr)
		return -ENOENT;
	d = &t->events[index];
	e = (struct vpmu_catalog_event){
		.name = d->name,
		.desc = d->desc,
		.errata = d->errata,
		.encoding = vpmu_event_encode(d),
		.fixed_idx = d->fixed_idx,
		.pdist_counter = d->pdist_counter,
		.event = d->event,
		.umask = d->umask,
		.cmask = d->cmask,
		.flags = d->flags,
		.aux_msr = d->aux_msr,
		.aux_value = d->aux_value,
		.counters = d->counters,
		.counters_ht_off = d->counters_ht_off,
	};
	abi_copy_out(ret, size, &e, sizeof(e));
	return 0;
}

int vpmu_catalog_find(size_t model, const char *name, size_t *ret_index)
{
	const struct vpmu_event_table *t = table_of(model);
	const struct vpmu_event_desc *d = vpmu_event_find(t, name);

	if (!ret_index)
		return -EINVAL;
	if (!d)
		return -ENOENT;
	*ret_index = (size_t) (d - t->events);
	return 0;
}

int vpmu_catalog_decode(size_t model, uint64_t evtsel, size_t *ret_index)
{
	const struct vpmu_event_table *t = table_of(model);
	const struct vpmu_event_desc *d = vpmu_event_decode(t, evtsel);

	if (!ret_index)
		return -EINVAL;
	if (!d)
		return -ENOENT;
	*ret_index = (size_t) (d - t->events);
	return 0;
}
