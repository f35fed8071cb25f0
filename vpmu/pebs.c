/* SPDX-License-Identifier: MIT */
/*
 * The PEBS assist, done in software: when a PEBS-enabled counter
 * overflows, build the record the model's format describes and write it
 * into the guest's buffer through the guest's own page tables (legacy
 * PEBS: the DS save area, SDM Vol. 3B 20.4.9; architectural PEBS: the
 * physically addressed buffer of IA32_PEBS_BASE/INDEX, Vol. 3B 22.10), then
 * reload the counters and raise the buffer interrupt at the threshold.
 *
 * Semantics (SDM Vol. 3B 22.6.2.2, 22.6.2.4, 22.9.1; 20.4.9.5):
 *   - the record is written for the instruction whose event overflowed the
 *     counter, with the register state after it (trap-like) -- the PDist
 *     behaviour, exact on the emulator; a host sample that comes later
 *     (KVM) is written at the next sync, the skid §22.9.5 allows;
 *   - counters overflowing together share one record (Applicable Counters);
 *   - the bounds check failing skips the record entirely, as does a DS
 *     area the guest did not map (a guest mistake: what hardware gives);
 *   - each applicable counter is reloaded from its DS reset slot and its
 *     GLOBAL_STATUS bit cleared; index >= threshold sets OvfBuffer (bit
 *     62) and requests a PMI; there is no circular mode;
 *   - without the guest's registers (regs callback failing) the record is
 *     deferred to the next sync, never dropped.
 */
#include <errno.h>
#include <string.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "pebs-record.h"
#include "pmu.h"

#define MAX_RECORD 4096 /* larger than any record any format builds */

bool pebs_counter_enabled(const struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	const struct vpmu_model *m = &vcpu->model;

	if (model_arch_pebs(m)) {
		uint64_t cfg_c = ctr >= 32 ? vcpu->fixed[ctr - 32].cfg_c : vcpu->gp[ctr].cfg_c;

		return (cfg_c & ARCH_PEBS_EN) && (vcpu->pebs_index & ARCH_PEBS_INDEX_EN);
	}
	if (!model_legacy_pebs(m))
		return false;
	/* formats 1-3: GP counters only (bits 32+ enable load latency there) */
	if (!model_adaptive_pebs(m) && ctr >= 32)
		return false;
	return vcpu->pebs_enable & BIT_ULL(ctr);
}

static void sample_from(const struct vpmu_vcpu *vcpu, const struct vpmu_guest_regs *r,
			struct pebs_sample *s)
{
	memset(s, 0, sizeof(*s));
	s->eventing_ip = vcpu->last_ip;
	s->ip = r->rip;
	s->rflags = r->rflags;
	memcpy(s->gpr, r->gpr, sizeof(s->gpr));
	memcpy(s->xmm, r->xmm, sizeof(s->xmm));
	s->dla = vcpu->last_dla;
	/* no cache model: data source and latency "could not be retrieved" (0) */
	s->tsc = r->tsc;
	s->retire_latency = vcpu->last_latency;
	s->long_mode = r->long_mode;
	s->sse = r->sse;
}

static void counters_snapshot(struct vpmu_vcpu *vcpu, struct pebs_counters *c)
{
	memset(c, 0, sizeof(*c));
	for (unsigned int i = 0; i < vcpu->model.nr_gp; i++)
		c->pmc[i] = counter_read(vcpu, i);
	for (unsigned int i = 0; i < vcpu->model.nr_fixed; i++)
		c->fixed[i] = counter_read(vcpu, 32 + i);
	c->metrics_base = vcpu->model.nr_fixed > 3 ? c->fixed[3] : 0;
	c->metrics = vcpu->perf_metrics;
}

/* The LBR stack from TOS backwards (Table 22-101). */
static unsigned int lbr_snapshot(const struct vpmu_vcpu *vcpu, struct pebs_lbr_entry *e)
{
	unsigned int depth = vcpu->model.lbr_depth;

	for (unsigned int i = 0; i < depth; i++) {
		unsigned int k = (unsigned int) (vcpu->lbr_tos + depth - i) % depth;

		e[i] = (struct pebs_lbr_entry){ vcpu->lbr_from[k], vcpu->lbr_to[k],
						vcpu->lbr_info[k] };
	}
	return depth;
}

static void reload(struct vpmu_vcpu *vcpu, unsigned int ctr, uint64_t value)
{
	uint64_t width = ctr >= 32 ? vcpu->mask.fixed_width : vcpu->mask.gp_width;

	/* bits above the counter width are ignored (SDM Vol. 3B 20.4.9, PEBS counter reset) */
	counter_write(vcpu, ctr, value & width);
}

static bool is_adaptive(const struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	if (ctr >= 32)
		return vcpu->fixed_ctrl & FIXED_CTRL_ADAPTIVE(ctr - 32);
	return vcpu->gp[ctr].evtsel & ICL_EVENTSEL_ADAPTIVE;
}

static void legacy_assist(struct vpmu_vcpu *vcpu, uint64_t ctrs, const struct pebs_sample *s,
			  const struct walk_paging *p)
{
	const unsigned int flags = WALK_IMPLICIT_SUPERVISOR | WALK_SET_AD;
	unsigned int fmt = model_pebs_fmt(&vcpu->model);
	struct pebs_lbr_entry lbr[VPMU_MAX_LBR];
	struct pebs_counters counters;
	struct pebs_config cfg = { .fmt = fmt };
	uint64_t ds = vcpu->ds_area, area[4], index, reset;
	uint8_t record[MAX_RECORD];
	size_t size;

	cfg.timed = vcpu->model.perf_capabilities & PERF_CAP_PEBS_TIMING_INFO;
	cfg.applicable = ctrs;
	if (fmt >= 4) {
		for (uint64_t m = ctrs; m; m &= m - 1)
			if (is_adaptive(vcpu, (unsigned int) __builtin_ctzll(m)))
				cfg.data_cfg = vcpu->data_cfg;
		if (cfg.data_cfg & PEBS_DATACFG_LBRS) {
			cfg.nr_lbr = lbr_snapshot(vcpu, lbr);
			cfg.lbr = lbr;
		}
		if (cfg.data_cfg & (PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS)) {
			counters_snapshot(vcpu, &counters);
			cfg.counters = &counters;
		}
	}

	if (walk_read_cached(&vcpu->mem, p, ds + DS_PEBS_BASE, area, sizeof(area), flags,
			     &vcpu->walk_cache) < 0) {
		vcpu->stats.walk_faults++;
		vcpu->stats.pebs_skipped++;
		return;
	}
	index = area[1];
	size = pebs_record_size(&cfg);
	/* the bounds check: the record must fit below the absolute maximum */
	if (!size || index < area[0] || index > area[2] || area[2] - index < size) {
		vcpu->stats.pebs_skipped++;
	} else if (pebs_record_build(&cfg, s, record, sizeof(record)) != size ||
		   walk_write_cached(&vcpu->mem, p, index, record, size, flags, &vcpu->walk_cache) <
			   0) {
		vcpu->stats.walk_faults++;
		vcpu->stats.pebs_skipped++;
	} else {
		index += size;
		if (walk_write_cached(&vcpu->mem, p, ds + DS_PEBS_INDEX, &index, sizeof(index),
				      flags, &vcpu->walk_cache) < 0) {
			vcpu->stats.walk_faults++;
		} else {
			vcpu->stats.pebs_records++;
			vcpu->stats.pebs_bytes += size;
			if (index >= area[3]) {
				vcpu->global_status |= GLOBAL_STATUS_BUFFER_OVF;
				vcpu->pmi_due = true;
			}
		}
		/* the Metrics group clears what it recorded (§22.9.2.3.1) */
		if ((cfg.data_cfg & PEBS_DATACFG_METRICS) && vcpu->model.nr_fixed > 3) {
			vcpu->perf_metrics = 0;
			counter_write(vcpu, 35, 0);
		}
	}

	/* reload every applicable counter from its DS reset slot */
	for (uint64_t m = ctrs; m; m &= m - 1) {
		unsigned int ctr = (unsigned int) __builtin_ctzll(m);
		uint64_t slot =
			ctr >= 32 ? DS_PEBS_FIXED_RESET(fmt, ctr - 32) : DS_PEBS_GP_RESET(ctr);

		vcpu->global_status &= ~BIT_ULL(ctr);
		if (walk_read_cached(&vcpu->mem, p, ds + slot, &reset, sizeof(reset), flags,
				     &vcpu->walk_cache) < 0) {
			vcpu->stats.walk_faults++;
			continue;
		}
		reload(vcpu, ctr, reset);
	}
}

static void arch_assist(struct vpmu_vcpu *vcpu, unsigned int ctr, const struct pebs_sample *s)
{
	uint64_t cfg_c = ctr >= 32 ? vcpu->fixed[ctr - 32].cfg_c : vcpu->gp[ctr].cfg_c;
	uint64_t base = vcpu->pebs_base & ~0xfffULL;
	uint64_t buf_size = 4096ULL << FIELD_GET(ARCH_PEBS_BASE_SIZE, vcpu->pebs_base);
	uint64_t wr = vcpu->pebs_index & ARCH_PEBS_INDEX_WR;
	uint64_t thresh = FIELD_GET(ARCH_PEBS_INDEX_THRESH, vcpu->pebs_index) << 4;
	struct arch_pebs_config cfg = { .cfg_c = cfg_c, .applicable = BIT_ULL(ctr) };
	struct pebs_counters counters;
	uint8_t *dst;
	size_t size;

	/* retire latency is undefined for fixed counter 0 (§22.9.9) */
	cfg.retire_valid = ctr != 32;
	if (cfg_c & (ARCH_PEBS_CNTR_GP | ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_CNTR_METRICS)) {
		for (unsigned int i = 0; i < vcpu->model.nr_gp; i++)
			if (vcpu->gp[i].cfg_c & ARCH_PEBS_CNTR_ALLOW)
				cfg.gp_allow |= 1u << i;
		for (unsigned int i = 0; i < vcpu->model.nr_fixed; i++)
			if (vcpu->fixed[i].cfg_c & ARCH_PEBS_CNTR_ALLOW)
				cfg.fixed_allow |= 1u << i;
		counters_snapshot(vcpu, &counters);
		cfg.counters = &counters;
	}
	size = arch_pebs_record_size(&cfg);
	dst = size && wr + size <= buf_size ? guest_mem_ptr(&vcpu->mem, base + wr, size) : NULL;
	if (!size || wr + size > buf_size) {
		/* full: the record is dropped and FULL set, a PMI tells the guest */
		vcpu->pebs_index |= ARCH_PEBS_INDEX_FULL;
		vcpu->stats.pebs_skipped++;
		vcpu->global_status |= GLOBAL_STATUS_BUFFER_OVF;
		vcpu->pmi_due = true;
	} else if (!dst) {
		vcpu->stats.walk_faults++;
		vcpu->stats.pebs_skipped++;
	} else {
		uint8_t record[MAX_RECORD];

		if (arch_pebs_record_build(&cfg, s, record, sizeof(record)) == size) {
			memcpy(dst, record, size);
			wr += size;
			vcpu->pebs_index = (vcpu->pebs_index & ~ARCH_PEBS_INDEX_WR) | wr;
			vcpu->stats.pebs_records++;
			vcpu->stats.pebs_bytes += size;
			if (wr >= thresh) {
				vcpu->global_status |= GLOBAL_STATUS_BUFFER_OVF;
				vcpu->pmi_due = true;
			}
		} else {
			vcpu->stats.pebs_skipped++;
		}
	}
	/* RELOAD_VALUE[31:0], 1-extended to the counter width (§22.10.2.1) */
	vcpu->global_status &= ~BIT_ULL(ctr);
	reload(vcpu, ctr, (cfg_c & ARCH_PEBS_RELOAD) | ~ARCH_PEBS_RELOAD);
}

bool pebs_assist(struct vpmu_vcpu *vcpu)
{
	struct vpmu_guest_regs regs;
	struct walk_paging paging;
	struct pebs_sample s;
	uint64_t ctrs = vcpu->pebs_pending;

	/* the VMM fills its own struct, which may be larger or smaller than ours */
	memset(vcpu->regs_buf, 0, vcpu->regs_buf_size);
	if (!vcpu->regs || vcpu->regs(vcpu->regs_data, vcpu, vcpu->regs_buf) < 0) {
		vcpu->stats.pebs_deferred++;
		return false;
	}
	memcpy(&regs, vcpu->regs_buf, sizeof(regs));
	vcpu->pebs_pending = 0;
	sample_from(vcpu, &regs, &s);
	paging = (struct walk_paging){ regs.cr0, regs.cr3, regs.cr4, regs.efer };
	if (model_arch_pebs(&vcpu->model)) {
		for (uint64_t m = ctrs; m; m &= m - 1)
			arch_assist(vcpu, (unsigned int) __builtin_ctzll(m), &s);
	} else {
		legacy_assist(vcpu, ctrs, &s, &paging);
	}
	vcpu->stats_dirty = true;
	return true;
}
