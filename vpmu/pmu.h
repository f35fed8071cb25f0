/* SPDX-License-Identifier: MIT */
/* The per-vCPU PMU state. Private to libvpmu. */
#ifndef VPMU_PMU_H
#define VPMU_PMU_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "vpmu/vpmu.h"
#include "backend.h"
#include "model.h"
#include "walk.h"

/* Host side of one guest counter. */
struct vpmu_hw {
	struct vpmu_host_event ev; /* as last given to the backend */
	bool enabled;
	bool discard; /* guest rewrote the value since the last fold */
	bool backed;
	int error;     /* last update's error, if unbacked */
	bool filtered; /* programmed, but the event filter denies it */
	uint64_t overflows, creates, updates;
};

struct vpmu_gp {
	uint64_t evtsel;
	uint64_t value; /* counter value, masked to the GP width */
	uint64_t cfg_c; /* arch PEBS IA32_PMC_GPn_CFG_C */
	struct vpmu_hw hw;
};

struct vpmu_fixed {
	uint64_t value;
	uint64_t cfg_c; /* arch PEBS IA32_PMC_FXn_CFG_C */
	struct vpmu_hw hw;
};

/* Seqlock-published copy of struct vpmu_stats, read word by word. */
struct vpmu_stats_pub {
	unsigned int seq; /* odd while the vCPU thread writes */
	uint64_t words[sizeof(struct vpmu_stats) / 8];
};

/*
 * Log lines about one counter: one per reason for the life of the vCPU
 * (ctr_logf); the repeats are counted. A reason is a site and an errno
 * (LOG_REASON); a counter remembers this many, later new ones count as
 * repeats too, so a guest cannot make more lines than this per counter.
 */
#define VPMU_LOG_REASONS 8
#define LOG_REASON(site, err)                                                                      \
	((int) ((unsigned int) (site) << 16 | ((unsigned int) -(err) &0xffff)))

enum log_site {
	LOG_MAP = 1,	/* no host event for the guest event */
	LOG_OPEN,	/* perf_event_open failed */
	LOG_ENABLE,	/* enabling or disabling the host event failed */
	LOG_ARM,	/* re-arming the overflow failed */
	LOG_RING,	/* no ring buffer */
	LOG_CLOCK_ONLY, /* the time backend counts only cycles */
	LOG_UNBACKED,	/* the core's note of an unbacked counter */
};

struct vpmu_log_seen {
	int reason[VPMU_LOG_REASONS];
	unsigned int nr;
	uint64_t repeats;
};

#define VPMU_MSR_KINDS	 32
#define VPMU_MSR_LUT_END 0x1a00 /* past the highest PMU MSR vpmu models */

struct vpmu_vcpu {
	struct vpmu_model model; /* narrowed copy */
	struct vpmu_masks mask;
	uint8_t msr_count[VPMU_MSR_KINDS];  /* registers of each MSR kind */
	uint16_t msr_lut[VPMU_MSR_LUT_END]; /* MSR -> kind/index, see msr.c */

	vpmu_log_fn log;
	void *log_data;
	enum vpmu_log_level log_level;
	struct vpmu_log_seen log_seen[VPMU_STATS_COUNTERS]; /* by stats slot; never reset */

	struct vpmu_gp gp[VPMU_MAX_GP];
	struct vpmu_fixed fixed[VPMU_MAX_FIXED];
	uint64_t fixed_ctrl;
	uint64_t global_ctrl;
	uint64_t global_status;
	uint64_t perf_metrics;
	uint64_t debugctl;
	uint64_t pebs_enable;
	uint64_t data_cfg;
	uint64_t ld_lat;
	uint64_t frontend;
	uint64_t offcore_rsp[2];
	uint64_t ds_area;
	uint64_t pebs_base;
	uint64_t pebs_index;
	uint64_t lbr_select;
	uint64_t lbr_tos;
	uint64_t lbr_from[VPMU_MAX_LBR];
	uint64_t lbr_to[VPMU_MAX_LBR];
	uint64_t lbr_info[VPMU_MAX_LBR];

	/* counting */
	const struct vpmu_backend_ops *backend;
	int signo;			  /* host backends' overflow signal (vpmu_config.signo) */
	const struct vpmu_filter *filter; /* NULL: the default policy (filter.c) */
	void *backend_state;
	uint64_t dirty;		     /* counters to update at the next sync */
	uint64_t unavailable_events; /* CPUID.0AH:EBX */
	bool pmi_due;		     /* an overflow with INT/PMI is pending */
	bool pmi_outstanding;	     /* the VMM was asked for a PMI, not yet delivered */
	bool pmi_restore;	     /* ask again at the next sync (restored snapshot) */
	bool applying;		     /* inside apply(): it never nests */
	uint64_t pebs_pending;	     /* PEBS counters whose overflow awaits its record */
	uint64_t last_ip;	     /* the last fed instruction: PEBS EventingIP */
	uint64_t last_dla;
	uint64_t last_latency; /* its modelled cycles: timed PEBS */
	vpmu_pmi_fn pmi;
	void *pmi_data;
	vpmu_regs_fn regs;
	void *regs_data;
	struct vpmu_guest_regs *regs_buf; /* the callback's, regs_buf_size bytes */
	size_t regs_buf_size;		  /* the larger of the VMM's and ours */

	/* guest RAM for PEBS records */
	struct guest_region *mem_regions;
	struct guest_mem mem;
	struct walk_cache walk_cache;

	/* statistics: `stats` is the vCPU thread's, `pub` what readers see */
	struct vpmu_stats stats;
	bool stats_dirty;
	struct vpmu_stats_pub pub;
};

/* counter.c. Counters are numbered as GLOBAL_CTRL numbers them. */
void counter_fold(struct vpmu_vcpu *vcpu, unsigned int ctr);
void counters_reset(struct vpmu_vcpu *vcpu);
uint32_t counters_unavailable_events(struct vpmu_vcpu *vcpu);

static inline struct vpmu_hw *counter_hw(struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	return ctr >= 32 ? &vcpu->fixed[ctr - 32].hw : &vcpu->gp[ctr].hw;
}

static inline uint64_t *counter_value(struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	return ctr >= 32 ? &vcpu->fixed[ctr - 32].value : &vcpu->gp[ctr].value;
}

/*
 * The guest's view of a counter: exact at any time (folds the host count).
 * A wrap the fold finds is queued for the next apply, never done here.
 */
static inline uint64_t counter_read(struct vpmu_vcpu *vcpu, unsigned int ctr)
{
	if (counter_hw(vcpu, ctr)->backed)
		counter_fold(vcpu, ctr);
	return *counter_value(vcpu, ctr);
}

/* A guest write of the value: the host count so far no longer applies. */
static inline void counter_write(struct vpmu_vcpu *vcpu, unsigned int ctr, uint64_t value)
{
	*counter_value(vcpu, ctr) = value;
	counter_hw(vcpu, ctr)->discard = true;
	vcpu->dirty |= 1ULL << ctr;
}

/* pebs.c */
bool pebs_counter_enabled(const struct vpmu_vcpu *vcpu, unsigned int ctr);
/* Write the records vcpu->pebs_pending awaits; false if deferred (no registers yet). */
bool pebs_assist(struct vpmu_vcpu *vcpu);

/* stats.c */
void stats_publish(struct vpmu_vcpu *vcpu);
/*
 * One attempt at a consistent copy of the published stats: 0 and *ret
 * filled, or -EAGAIN (*ret untouched) when a publication was under way or
 * happened during the copy. vpmu_stats_read() retries it. `mid` (tests;
 * NULL otherwise) runs between the first sequence load and the copy.
 */
int stats_read_attempt(const struct vpmu_vcpu *vcpu, struct vpmu_stats *ret,
		       void (*mid)(void *data), void *mid_data);
/*
 * Test hook, NULL otherwise: called on the publishing thread before word
 * `step` of the copy is stored (the sequence is then odd), and with step
 * = the number of words once all are stored, before the sequence is even.
 */
extern void (*stats_publish_step)(struct vpmu_vcpu *vcpu, size_t step);

/* msr.c. Fill vcpu->msr_count from the narrowed model. */
void msr_counts_init(struct vpmu_vcpu *vcpu);
/* RDMSR without counting it as a guest access. */
int msr_get(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t *ret_value);
/* Set an MSR to a value RDMSR returned (snapshot restore), checked as a WRMSR would be. */
int msr_restore(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t v);

void vpmu_logf(const struct vpmu_vcpu *vcpu, enum vpmu_log_level level, const char *fmt, ...)
	VPMU_PRINTF(3, 4);
/*
 * A line about counter `ctr` (GLOBAL_CTRL numbering) for `reason`
 * (LOG_REASON): logged the first time in the vCPU's life, counted in the
 * counter's log_repeats after that. Lines the log level filters out are
 * neither logged nor counted.
 */
void ctr_logf(struct vpmu_vcpu *vcpu, unsigned int ctr, int reason, enum vpmu_log_level level,
	      const char *fmt, ...) VPMU_PRINTF(5, 6);

/* Whether the host has Intel TSX (HLE or RTM in its CPUID); tests substitute a host. */
extern bool (*vpmu_host_tsx)(void);

#endif
