/* SPDX-License-Identifier: MIT */
/* The backend of a vCPU that has none: no event is backed, nothing counts. */
#include <errno.h>
#include <stddef.h>

#include "backend.h"

static int none_init(struct vpmu_vcpu *vcpu, void **ret_state)
{
	*ret_state = NULL;
	return 0;
}

static void none_fini(void *state)
{
}

static bool none_can_count(void *state, const struct vpmu_host_event *ev)
{
	return false;
}

static int none_update(void *state, unsigned int ctr, const struct vpmu_hw_want *want,
		       uint64_t *ret_delta)
{
	*ret_delta = 0;
	return want->ev.kind == HEV_NONE ? 0 : -EOPNOTSUPP;
}

static uint64_t none_read(void *state, unsigned int ctr, bool discard)
{
	return 0;
}

const struct vpmu_backend_ops vpmu_backend_none = {
	.name = "none",
	.init = none_init,
	.fini = none_fini,
	.can_count = none_can_count,
	.update = none_update,
	.read = none_read,
};
