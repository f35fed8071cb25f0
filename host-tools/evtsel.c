/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "bits.h"
#include "evtsel.h"
#include "msr-index.h"

int evtsel_model_open(const char *name, struct evtsel_model *ret)
{
	const struct vpmu_model *m = model_lookup(name);
	struct vpmu_config cfg;
	struct vpmu_vcpu *vcpu;
	int r;

	if (!m)
		return -ENOENT;
	vpmu_config_init(&cfg);
	cfg.model = m->name;
	r = vpmu_vcpu_new(&cfg, &vcpu);
	if (r < 0)
		return r;
	ret->model = m;
	ret->events = m->events;
	ret->adaptive = model_adaptive_pebs(m);
	ret->eq = m->features & MODEL_F_EQ;
	ret->umask2 = m->features & MODEL_F_UMASK2;
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

int evtsel_reserved(struct evtsel_model *m, uint64_t value, uint64_t *ret_mask, bool *ret_gp)
{
	uint64_t mask = 0;
	int r;

	for (unsigned int b = 0; b < 64; b++) {
		if (!(value & BIT_ULL(b)))
			continue;
		r = vpmu_msr_write(m->vcpu, MSR_P6_EVNTSEL0, BIT_ULL(b));
		if (r == -EINVAL)
			mask |= BIT_ULL(b);
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

uint64_t evtsel_encode(const struct vpmu_event_desc *ev, const struct evtsel_mods *mods)
{
	uint64_t v = vpmu_event_encode(ev) | ARCH_PERFMON_EVENTSEL_ENABLE;
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
		    FIELD_PREP(ARCH_PERFMON_EVENTSEL_CMASK, (unsigned int) mods->cmask);
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
