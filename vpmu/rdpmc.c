/* SPDX-License-Identifier: MIT */
/* Guest RDPMC: SDM Vol. 2B RDPMC, ECX encoding for architectural perfmon. */
#include <errno.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "pmu.h"

int vpmu_rdpmc(struct vpmu_vcpu *vcpu, uint32_t ecx, uint64_t *ret_value)
{
	vcpu->stats.rdpmcs++;
	return vpmu_rdpmc_peek(vcpu, ecx, ret_value);
}

int vpmu_rdpmc_peek(struct vpmu_vcpu *vcpu, uint32_t ecx, uint64_t *ret_value)
{
	const struct vpmu_model *m = &vcpu->model;
	uint32_t idx = ecx & ~(uint32_t) (RDPMC_FIXED | RDPMC_FAST | RDPMC_METRICS);
	/* Fast reads (ECX[31]) are a P6/NetBurst feature: #GP here. */
	if (ecx & RDPMC_FAST)
		return -EINVAL;
	if (ecx & RDPMC_METRICS) {
		/* ECX = 1 << 29 reads PERF_METRICS where it exists. */
		if (!model_has_metrics(m) || (ecx & ~(uint32_t) RDPMC_METRICS))
			return -EINVAL;
		*ret_value = vcpu->perf_metrics;
		return 0;
	}
	if (ecx & RDPMC_FIXED) {
		if (idx >= m->nr_fixed || m->version < 2)
			return -EINVAL;
		*ret_value = counter_read(vcpu, 32 + idx);
		return 0;
	}
	if (idx >= m->nr_gp)
		return -EINVAL;
	*ret_value = counter_read(vcpu, idx);
	return 0;
}
