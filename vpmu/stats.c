/* SPDX-License-Identifier: MIT */
/*
 * Statistics: the vCPU thread keeps struct vpmu_stats up to date in place
 * and publishes a copy under a sequence lock; readers on other threads
 * copy it word by word with atomic loads and retry while the sequence is
 * odd or moved. The vCPU never waits for a reader.
 */
#include <errno.h>
#include <string.h>

#include "abi.h"
#include "bits.h"
#include "pmu.h"

static void counter_stats(struct vpmu_vcpu *vcpu, unsigned int ctr, unsigned int slot)
{
	struct vpmu_counter_stats *cs = &vcpu->stats.counters[slot];
	const struct vpmu_hw *hw = counter_hw(vcpu, ctr);
	bool fixed = ctr >= 32;

	/* a wrap found here is only queued: the next apply() handles it */
	if (vcpu->backend->cheap_read)
		counter_fold(vcpu, ctr);
	cs->config = fixed ? (vcpu->fixed_ctrl >> (4 * (ctr - 32))) & 0xf : vcpu->gp[ctr].evtsel;
	cs->count = *counter_value(vcpu, ctr);
	cs->overflows = hw->overflows;
	cs->creates = hw->creates;
	cs->updates = hw->updates;
	cs->flags = VPMU_CTR_IMPLEMENTED;
	if (hw->filtered)
		cs->flags |= VPMU_CTR_PROGRAMMED | VPMU_CTR_FILTERED;
	if (hw->ev.kind != HEV_NONE) {
		cs->flags |= VPMU_CTR_PROGRAMMED;
		cs->flags |= hw->backed ? VPMU_CTR_BACKED : VPMU_CTR_UNBACKED;
		if (hw->backed && hw->enabled)
			cs->flags |= VPMU_CTR_RUNNING;
	}
	cs->error = hw->error;
	vcpu->stats.log_repeats[slot] = vcpu->log_seen[slot].repeats;
	cs->time_enabled = cs->time_running = 0;
	vcpu->stats.time_discarded[slot] = 0;
	if (vcpu->backend->info && hw->backed) {
		struct vpmu_backend_info bi;

		vcpu->backend->info(vcpu->backend_state, ctr, &bi);
		cs->time_enabled = bi.time_enabled;
		cs->time_running = bi.time_running;
		vcpu->stats.time_discarded[slot] = bi.time_discarded;
		if (bi.degraded) {
			cs->flags |= VPMU_CTR_DEGRADED;
			if (!cs->error)
				cs->error = bi.error;
		}
	}
}

void (*stats_publish_step)(struct vpmu_vcpu *vcpu, size_t step);

void stats_publish(struct vpmu_vcpu *vcpu)
{
	struct vpmu_stats *s = &vcpu->stats;
	uint64_t words[sizeof(*s) / 8];
	unsigned int seq;

	for (unsigned int i = 0; i < vcpu->model.nr_gp; i++)
		counter_stats(vcpu, i, i);
	for (unsigned int i = 0; i < vcpu->model.nr_fixed; i++)
		counter_stats(vcpu, 32 + i, 8 + i);
	s->global_status = vcpu->global_status;
	s->global_ctrl = vcpu->global_ctrl;
	seq = __atomic_load_n(&vcpu->pub.seq, __ATOMIC_RELAXED);
	s->seq = (seq + 2) / 2;
	memcpy(words, s, sizeof(words));

	__atomic_store_n(&vcpu->pub.seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
		if (stats_publish_step)
			stats_publish_step(vcpu, i);
		__atomic_store_n(&vcpu->pub.words[i], words[i], __ATOMIC_RELAXED);
	}
	if (stats_publish_step)
		stats_publish_step(vcpu, ARRAY_SIZE(words));
	__atomic_store_n(&vcpu->pub.seq, seq + 2, __ATOMIC_RELEASE);
	vcpu->stats_dirty = false;
}

int stats_read_attempt(const struct vpmu_vcpu *vcpu, struct vpmu_stats *ret,
		       void (*mid)(void *data), void *mid_data)
{
	uint64_t words[sizeof(*ret) / 8];
	unsigned int s1, s2;

	s1 = __atomic_load_n(&vcpu->pub.seq, __ATOMIC_ACQUIRE);
	if (mid)
		mid(mid_data);
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		words[i] = __atomic_load_n(&vcpu->pub.words[i], __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	s2 = __atomic_load_n(&vcpu->pub.seq, __ATOMIC_RELAXED);
	/* odd: a publication is under way; moved: one happened while copying */
	if ((s1 & 1) || s1 != s2)
		return -EAGAIN;
	memcpy(ret, words, sizeof(words));
	return 0;
}

int vpmu_stats_read_sized(const struct vpmu_vcpu *vcpu, struct vpmu_stats *ret, size_t size)
{
	struct vpmu_stats full;

	if (!vcpu || !ret || size < STATS_SIZE_V01)
		return -EINVAL;
	while (stats_read_attempt(vcpu, &full, NULL, NULL) == -EAGAIN)
		;
	abi_copy_out(ret, size, &full, sizeof(full));
	return 0;
}

int(vpmu_stats_read)(const struct vpmu_vcpu *vcpu, struct vpmu_stats *ret)
{
	return vpmu_stats_read_sized(vcpu, ret, STATS_SIZE_V01);
}

void vpmu_pmi_delivered(struct vpmu_vcpu *vcpu)
{
	vcpu->pmi_outstanding = false;
	vcpu->stats.pmis_delivered++;
	stats_publish(vcpu);
}

void vpmu_pmi_merged(struct vpmu_vcpu *vcpu)
{
	vcpu->pmi_outstanding = false;
	vcpu->stats.pmis_merged++;
	stats_publish(vcpu);
}

void vpmu_pmi_dropped(struct vpmu_vcpu *vcpu)
{
	vcpu->pmi_outstanding = false; /* pmis_requested - delivered - merged counts it */
}
