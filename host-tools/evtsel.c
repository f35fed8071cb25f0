/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "evtsel.h"
#include "vpmu/msr.h"

/* Whether IA32_PERFEVTSEL0 takes `bit` on this vCPU: the model has that field. */
static bool writable(struct vpmu_vcpu *vcpu, uint64_t bit)
{
	bool ok = vpmu_msr_write(vcpu, MSR_P6_EVNTSEL0, bit) == 0;

	vpmu_msr_write(vcpu, MSR_P6_EVNTSEL0, 0);
	return ok;
}

int evtsel_model_open(const char *name, struct evtsel_model *ret)
{
	int index = vpmu_model_find(name);
	struct vpmu_config cfg;
	struct vpmu_vcpu *vcpu;
	int r;

	if (index < 0)
		return -ENOENT;
	vpmu_config_init(&cfg);
	cfg.model = vpmu_model_name((size_t) index);
	r = vpmu_vcpu_new(&cfg, &vcpu);
	if (r < 0)
		return r;
	ret->index = (size_t) index;
	ret->name = vpmu_vcpu_model(vcpu);
	ret->nr_events = vpmu_catalog_count(ret->index);
	ret->adaptive = writable(vcpu, ICL_EVENTSEL_ADAPTIVE);
	ret->eq = writable(vcpu, ARCH_PERFMON_EVENTSEL_EQ);
	ret->umask2 = writable(vcpu, VPMU_BIT_ULL(40));
	ret->vcpu = vcpu;
	return 0;
}

void evtsel_model_close(struct evtsel_model *m)
{
	if (!m)
		return;
	vpmu_vcpu_free(m->vcpu);
	m->vcpu = NULL;
}

int evtsel_event(const struct evtsel_model *m, size_t i, struct vpmu_catalog_event *ret)
{
	return vpmu_catalog_event(m->index, i, ret, sizeof(*ret));
}

int evtsel_find(const struct evtsel_model *m, const char *name, struct vpmu_catalog_event *ret,
		size_t *ret_index)
{
	size_t i;
	int r = vpmu_catalog_find(m->index, name, &i);

	if (r < 0)
		return r;
	*ret_index = i;
	return evtsel_event(m, i, ret);
}

int evtsel_decode(const struct evtsel_model *m, uint64_t value, struct vpmu_catalog_event *ret,
		  size_t *ret_index)
{
	size_t i;
	int r = vpmu_catalog_decode(m->index, value, &i);

	if (r < 0)
		return r;
	*ret_index = i;
	return evtsel_event(m, i, ret);
}

int evtsel_reserved(struct evtsel_model *m, uint64_t value, uint64_t *ret_mask, bool *ret_gp)
{
	uint64_t mask = 0;
	int r;

	for (unsigned int b = 0; b < 64; b++) {
		if (!(value & VPMU_BIT_ULL(b)))
			continue;
		r = vpmu_msr_write(m->vcpu, MSR_P6_EVNTSEL0, VPMU_BIT_ULL(b));
		if (r == -EINVAL)
			mask |= VPMU_BIT_ULL(b);
		else if (r < 0)
			return r;
	}
	r = vpmu_msr_write(m->vcpu, MSR_P6_EVNTSEL0, value);
	if (r < 0 && r != -EINVAL)
		return r;
	/* Leave the probe counter disabled whatever was written. */
	vpmu_msr_write(m->vcpu, MSR_P6_EVNTSEL0, 0);
	*ret_mask = mask;
	*ret_gp = r == -EINVAL;
	return 0;
}

uint64_t evtsel_encode(const struct vpmu_catalog_event *ev, const struct evtsel_mods *mods)
{
	uint64_t v = ev->encoding | ARCH_PERFMON_EVENTSEL_ENABLE;
	unsigned int f = mods->flags;

	if (!(f & (EVTSEL_MOD_USR | EVTSEL_MOD_OS)))
		f |= EVTSEL_MOD_USR | EVTSEL_MOD_OS;
	if (f & EVTSEL_MOD_USR)
		v |= ARCH_PERFMON_EVENTSEL_USR;
	if (f & EVTSEL_MOD_OS)
		v |= ARCH_PERFMON_EVENTSEL_OS;
	if (f & EVTSEL_MOD_INT)
		v |= ARCH_PERFMON_EVENTSEL_INT;
	if (f & EVTSEL_MOD_EDGE)
		v |= ARCH_PERFMON_EVENTSEL_EDGE;
	if (f & EVTSEL_MOD_INV)
		v |= ARCH_PERFMON_EVENTSEL_INV;
	if (mods->cmask >= 0)
		v = (v & ~ARCH_PERFMON_EVENTSEL_CMASK) |
		    VPMU_FIELD_PREP(ARCH_PERFMON_EVENTSEL_CMASK, (unsigned int) mods->cmask);
	return v;
}

const char *evtsel_bit_name(unsigned int bit)
{
	switch (bit) {
	case 19:
		return "PC";
	case 21:
		return "AnyThread";
	case 32:
		return "IN_TX";
	case 33:
		return "IN_TXCP";
	case 34:
		return "Adaptive";
	case 36:
		return "EQ";
	default:
		return bit >= 40 && bit <= 47 ? "UMASK2" : NULL;
	}
}
