/* SPDX-License-Identifier: MIT */
/*
 * Counting: the guest value of a counter is the guest-written base plus
 * what its host counter counted since, masked to the counter width (as KVM
 * does). MSR writes only mark counters dirty; vpmu_vcpu_sync() hands each
 * dirty counter to the backend in one operation. Overflow sets
 * GLOBAL_STATUS, may request a PMI, and applies freeze-on-PMI.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "bits.h"
#include "filter.h"
#include "vpmu/msr.h"
#include "pmu.h"

#define FIXED_BASE 32

static inline bool is_fixed(unsigned int ctr)
{
	return ctr >= FIXED_BASE;
}

static uint64_t width_mask(const struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	return is_fixed(ctr) ? vcpu->mask.fixed_width : vcpu->mask.gp_width;
}

static uint64_t all_counters(const struct vpmu_vcpu *vcpu)
{
	return vcpu->mask.gp | vcpu->mask.fixed << FIXED_BASE;
}

/* The value of the extra MSR an event depends on, so a change recreates it. */
static uint64_t aux_value(const struct vpmu_vcpu *vcpu, uint64_t evtsel)
{
	switch (evtsel & (ARCH_PERFMON_EVENTSEL_EVENT | ARCH_PERFMON_EVENTSEL_UMASK)) {
	case 0x01b7:
		return vcpu->offcore_rsp[0]; /* OFFCORE_RESPONSE_0 */
	case 0x01bb:
		return vcpu->offcore_rsp[1]; /* OFFCORE_RESPONSE_1 */
	case 0x01cd:
		return vcpu->ld_lat; /* MEM_TRANS_RETIRED.LOAD_LATENCY */
	case 0x01c6:
		return vcpu->frontend; /* FRONTEND_RETIRED.* */
	}
	return 0;
}

/* What the guest asks of counter `ctr` right now. */
static void want_of(const struct vpmu_vcpu *vcpu, unsigned int ctr, struct vpmu_hw_want *w)
{
	memset(w, 0, sizeof(*w));
	if (is_fixed(ctr)) {
		unsigned int i = ctr - FIXED_BASE;
		uint64_t ctrl = vcpu->fixed_ctrl;

		/* a fixed counter counts when a ring bit is set (Fig 22-45) */
		if (ctrl & (FIXED_CTRL_OS(i) | FIXED_CTRL_USR(i))) {
			w->ev.kind = HEV_FIXED;
			w->ev.fixed = (uint8_t) i;
			w->ev.os = !!(ctrl & FIXED_CTRL_OS(i));
			w->ev.usr = !!(ctrl & FIXED_CTRL_USR(i));
		}
	} else {
		uint64_t sel = vcpu->gp[ctr].evtsel;

		/* EN and at least one of USR/OS, else it counts nothing */
		if ((sel & ARCH_PERFMON_EVENTSEL_ENABLE) &&
		    (sel & (ARCH_PERFMON_EVENTSEL_USR | ARCH_PERFMON_EVENTSEL_OS))) {
			w->ev.kind = HEV_GP;
			w->ev.usr = !!(sel & ARCH_PERFMON_EVENTSEL_USR);
			w->ev.os = !!(sel & ARCH_PERFMON_EVENTSEL_OS);
			w->ev.config =
				sel & ~(ARCH_PERFMON_EVENTSEL_ENABLE | ARCH_PERFMON_EVENTSEL_INT |
					ARCH_PERFMON_EVENTSEL_USR | ARCH_PERFMON_EVENTSEL_OS |
					ARCH_PERFMON_EVENTSEL_PIN_CONTROL | ICL_EVENTSEL_ADAPTIVE);
			w->ev.aux = aux_value(vcpu, sel);
		}
	}
	/* counting needs the global enable and no streamlined freeze (§20.4.7) */
	w->enabled = w->ev.kind != HEV_NONE && (vcpu->global_ctrl & BIT_ULL(ctr)) &&
		     !(vcpu->global_status & GLOBAL_STATUS_COUNTERS_FROZEN);
	w->discard = counter_hw((struct vpmu_vcpu *) vcpu, ctr)->discard;
	w->base = *counter_value((struct vpmu_vcpu *) vcpu, ctr);
	w->mask = width_mask(vcpu, ctr);
}

static bool pmi_enabled(const struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	if (is_fixed(ctr))
		return vcpu->fixed_ctrl & FIXED_CTRL_PMI(ctr - FIXED_BASE);
	return vcpu->gp[ctr].evtsel & ARCH_PERFMON_EVENTSEL_INT;
}

/*
 * Add what the host counted. Passing the all-ones value is an overflow:
 * the counter wraps, its GLOBAL_STATUS bit is set and, with INT / the
 * fixed PMI bit, a PMI becomes due (vcpu->pmi_due, handled by apply()).
 * Returns true if it wrapped.
 */
static inline bool add_delta(struct vpmu_vcpu *vcpu, unsigned int ctr, uint64_t delta)
{
	uint64_t *v = counter_value(vcpu, ctr), m = width_mask(vcpu, ctr);
	bool wrapped;

	if (!delta)
		return false;
	wrapped = delta > m - *v;
	*v = (*v + delta) & m;
	vcpu->stats_dirty = true;
	if (!wrapped)
		return false;
	vcpu->global_status |= BIT_ULL(ctr);
	counter_hw(vcpu, ctr)->overflows++;
	vcpu->stats.overflows++;
	/* a PEBS counter's overflow arms the assist; its PMI is the buffer's */
	if (pebs_counter_enabled(vcpu, ctr))
		vcpu->pebs_pending |= BIT_ULL(ctr);
	else if (pmi_enabled(vcpu, ctr))
		vcpu->pmi_due = true;
	return true;
}

/* One backend operation: bring counter `ctr` to what the guest asks. */
static void counter_update(struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	struct vpmu_hw *hw = counter_hw(vcpu, ctr);
	struct vpmu_hw_want w;
	uint64_t delta = 0;
	bool filtered;
	int r;

	want_of(vcpu, ctr, &w);
	/* the event filter, before any host event is created: denied = not counting */
	filtered =
		w.ev.kind != HEV_NONE &&
		!filter_allows_counter(vcpu->filter, ctr, is_fixed(ctr) ? 0 : vcpu->gp[ctr].evtsel,
				       vcpu->fixed_ctrl);
	if (filtered) {
		memset(&w.ev, 0, sizeof(w.ev));
		w.enabled = false;
	}
	if (hw->filtered != filtered) {
		hw->filtered = filtered;
		vcpu->stats_dirty = true;
	}
	/* never programmed and still not: nothing for the backend to do */
	if (w.ev.kind == HEV_NONE && hw->ev.kind == HEV_NONE) {
		hw->discard = false;
		return;
	}
	r = vcpu->backend->update(vcpu->backend_state, ctr, &w, &delta);
	hw->updates++;
	vcpu->stats.backend_ops++;
	hw->discard = false;
	hw->ev = w.ev;
	hw->enabled = w.enabled;
	if (r < 0) {
		if (hw->backed || hw->error != r)
			ctr_logf(vcpu, ctr, LOG_REASON(LOG_UNBACKED, r), VPMU_LOG_DEBUG,
				 "counter %u: event %#llx unbacked (%d)", ctr,
				 (unsigned long long) w.ev.config, r);
		hw->backed = false;
		hw->error = r;
	} else {
		hw->backed = w.ev.kind != HEV_NONE;
		hw->error = 0;
		if (r > 0) {
			hw->creates++;
			vcpu->stats.creates++;
		}
	}
	vcpu->stats_dirty = true;
	add_delta(vcpu, ctr, delta);
}

/*
 * A PMI is due: freeze per DEBUGCTL (Table 20-3: legacy for v2-3 clears
 * GLOBAL_CTRL, streamlined for v4+ sets CTR_Frz / LBR_Frz), then ask the VMM.
 */
static void pmi_request(struct vpmu_vcpu *vcpu)
{
	bool streamlined = vcpu->model.version >= 4;

	vcpu->stats.pmis_requested++;
	if (vcpu->debugctl & DEBUGCTLMSR_FREEZE_PERFMON_ON_PMI) {
		if (streamlined)
			vcpu->global_status |= GLOBAL_STATUS_COUNTERS_FROZEN;
		else
			vcpu->global_ctrl = 0;
		vcpu->dirty |= all_counters(vcpu);
	}
	if (vcpu->debugctl & DEBUGCTLMSR_FREEZE_LBRS_ON_PMI) {
		if (streamlined)
			vcpu->global_status |= GLOBAL_STATUS_LBRS_FROZEN;
		else
			vcpu->debugctl &= ~DEBUGCTLMSR_LBR;
	}
}

static void update_dirty(struct vpmu_vcpu *vcpu)
{
	while (vcpu->dirty) {
		unsigned int ctr = (unsigned int) __builtin_ctzll(vcpu->dirty);

		vcpu->dirty &= vcpu->dirty - 1;
		counter_update(vcpu, ctr);
	}
}

/*
 * The one place queued work is done: dirty counters go to the backend,
 * deferred PEBS assists run, due PMIs freeze and go to the VMM, until
 * nothing is left. Called only from the entry points (sync, poll, an
 * exact feed's overflow), never from below: folding a counter
 * (counter_fold) only queues what a wrap calls for, so nothing under
 * apply() can reach apply() again. For each PMI an overflow calls for,
 * the freeze takes effect on the host counters before the VMM hears of
 * it. The PMI callback must not call back into vpmu other than
 * vpmu_pmi_delivered() and vpmu_stats_read().
 */
static void apply(struct vpmu_vcpu *vcpu)
{
	assert(!vcpu->applying);
	vcpu->applying = true;
	for (;;) {
		update_dirty(vcpu);
		/* reloads counters (dirty again); its snapshot may queue more */
		if (vcpu->pebs_pending && pebs_assist(vcpu))
			continue;
		if (!vcpu->pmi_due)
			break;
		vcpu->pmi_due = false;
		pmi_request(vcpu);
		update_dirty(vcpu);
		stats_publish(vcpu);
		vcpu->pmi_outstanding = true;
		if (vcpu->pmi)
			vcpu->pmi(vcpu->pmi_data, vcpu);
	}
	/* a wrap this publication folds stays queued for the next apply */
	if (vcpu->stats_dirty)
		stats_publish(vcpu);
	vcpu->applying = false;
}

void counters_overflowed(struct vpmu_vcpu *vcpu, uint64_t ctr_mask)
{
	/* re-reading and re-arming is the update the backend needs anyway */
	vcpu->dirty |= ctr_mask & all_counters(vcpu);
	apply(vcpu);
}

/* Queue the counters the host says overflowed; how many. */
static int take_overflows(struct vpmu_vcpu *vcpu)
{
	uint64_t ovf;

	if (!vcpu->backend->poll)
		return 0;
	/* the backend's update, called for each of them, folds what they counted */
	ovf = vcpu->backend->poll(vcpu->backend_state) & all_counters(vcpu);
	vcpu->dirty |= ovf;
	return __builtin_popcountll(ovf);
}

int vpmu_vcpu_poll(struct vpmu_vcpu *vcpu)
{
	int n = take_overflows(vcpu);

	apply(vcpu);
	return n;
}

bool vpmu_vcpu_pending(const struct vpmu_vcpu *vcpu)
{
	/* work a fold queued (a guest read found a wrap) waits for the next sync too */
	if (vcpu->pmi_due || vcpu->pebs_pending || vcpu->pmi_restore)
		return true;
	return vcpu->backend->pending && vcpu->backend->pending(vcpu->backend_state);
}

int vpmu_vcpu_sync(struct vpmu_vcpu *vcpu)
{
	vcpu->stats.syncs++;
	vcpu->stats_dirty = true;
	take_overflows(vcpu);
	if (vcpu->pmi_restore) {
		/* a PMI asked for before a snapshot and not delivered: ask again */
		vcpu->pmi_restore = false;
		vcpu->pmi_due = true;
	}
	apply(vcpu);
	return 0;
}

/*
 * Fold what the host counted into the value: a pure read of the backend.
 * A wrap it finds is only recorded (GLOBAL_STATUS, a PEBS assist or a PMI
 * due, add_delta) and the counter queued for re-arming; the next apply()
 * does the work. So a guest read, a PEBS record's counters group and the
 * stats can fold at any time without reaching apply() from inside it.
 */
void counter_fold(struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	struct vpmu_hw *hw = counter_hw(vcpu, ctr);
	uint64_t delta;

	if (!hw->backed)
		return;
	delta = vcpu->backend->read(vcpu->backend_state, ctr, hw->discard);
	vcpu->stats.backend_reads++;
	if (hw->discard) {
		delta = 0;
		hw->discard = false;
	}
	/* it wrapped before its overflow was reported: re-arm at the next apply */
	if (add_delta(vcpu, ctr, delta))
		vcpu->dirty |= BIT_ULL(ctr);
}

void counters_reset(struct vpmu_vcpu *vcpu)
{
	/* values and controls were zeroed: release every host event at sync */
	vcpu->dirty = all_counters(vcpu);
	for (unsigned int i = 0; i < VPMU_MAX_GP; i++)
		vcpu->gp[i].hw.discard = true;
	for (unsigned int i = 0; i < VPMU_MAX_FIXED; i++)
		vcpu->fixed[i].hw.discard = true;
}

/*
 * CPUID.0AH:EBX: bit j set = architectural event j unavailable. vpmu says
 * unavailable for what the backend cannot count, so a guest is told the
 * truth instead of reading zeros. Encodings: SDM Vol. 3B Table 21-1.
 */
uint32_t counters_unavailable_events(struct vpmu_vcpu *vcpu)
{
	static const uint16_t arch_events[] = {
		0x003c, /* 0 UnHalted Core Cycles */
		0x00c0, /* 1 Instructions Retired */
		0x013c, /* 2 UnHalted Reference Cycles */
		0x4f2e, /* 3 LLC Reference */
		0x412e, /* 4 LLC Misses */
		0x00c4, /* 5 Branch Instructions Retired */
		0x00c5, /* 6 Branch Misses Retired */
		0x01a4, /* 7 Topdown Slots */
	};
	uint32_t unavailable = 0;

	for (unsigned int j = 0; j < ARRAY_SIZE(arch_events) && j < vcpu->model.arch_events_len;
	     j++) {
		struct vpmu_host_event ev = {
			.kind = HEV_GP,
			.usr = 1,
			.os = 1,
			.config = arch_events[j],
		};

		if (!vcpu->backend->can_count(vcpu->backend_state, &ev))
			unavailable |= 1u << j;
	}
	return unavailable;
}
