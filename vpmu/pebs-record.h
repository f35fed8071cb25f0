/* SPDX-License-Identifier: MIT */
/*
 * PEBS record layouts and builders: pure functions from "what happened"
 * (struct pebs_sample) and "what to record" (struct pebs_config) to the
 * bytes hardware would write. The offsets (vpmu/pebs.h) are checked with
 * static_assert against the SDM's tables (Vol. 3B 22.9.2, Figure 20-10).
 * Private.
 */
#ifndef VPMU_PEBS_RECORD_H
#define VPMU_PEBS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "vpmu/pebs.h"

/* What the sampled instruction did, and the machine state after it. */
struct pebs_sample {
	uint64_t eventing_ip; /* the instruction that caused the event */
	uint64_t ip;	      /* trap-like: the next instruction's address */
	uint64_t rflags;
	uint64_t gpr[PEBS_NR_GPRS];
	uint8_t xmm[16][16];
	uint64_t dla;	   /* data linear address, 0 = unknown */
	uint64_t data_src; /* Memory Auxiliary Info / legacy data source */
	uint64_t latency;  /* access latency (load latency, core cycles) */
	uint64_t tsx_aux;  /* TSX auxiliary info / abort info */
	uint64_t tsc;
	uint64_t retire_latency; /* core cycles since the previous retirement (timed PEBS) */
	bool long_mode;		 /* 64-bit mode: else upper GPR halves and R8-R15 read 0 */
	bool sse;		 /* SSE enabled: else the XMM group is all zeros */
};

struct pebs_config {
	unsigned int fmt;    /* PERF_CAPABILITIES.PEBS_FMT: 3, 4, 5 or 6 */
	bool timed;	     /* PERF_CAPABILITIES[17]: Retire Latency in Basic [47:32] */
	uint64_t applicable; /* Applicable Counters, PEBS_ENABLE bit format */
	/*
	 * Formats 4-6: MSR_PEBS_DATA_CFG as it applies to this record, or 0
	 * for a basic-only record (no triggering counter had Adaptive_Record).
	 */
	uint64_t data_cfg;
	/* LBR group: the LBR stack from TOS backwards, nr_lbr entries available */
	const struct pebs_lbr_entry *lbr;
	unsigned int nr_lbr;
	const struct pebs_counters *counters; /* counters group values (may be NULL) */
};

/*
 * Size of the record `cfg` describes; 0 if cfg is not valid (unknown
 * format, a counters group on a format below 6, more LBRs asked than
 * 32). Basic[63:48] of adaptive records carries the same value.
 */
size_t pebs_record_size(const struct pebs_config *cfg);

/*
 * Build the record into buf (cap bytes). Returns the size written, or 0
 * if it does not fit or cfg is invalid (buf is then left untouched).
 * Side effect the caller applies: with the Metrics group, PERF_METRICS
 * and FIXED_CTR3 are cleared after being recorded (§22.9.2.3.1).
 */
size_t pebs_record_build(const struct pebs_config *cfg, const struct pebs_sample *s, uint8_t *buf,
			 size_t cap);

struct arch_pebs_config {
	/*
	 * The triggering counter's IA32_PMC_{GPn,FXm}_CFG_C: ARCH_PEBS_EN
	 * must be set; AUX, GPR, VECR_XMM, LBR and CNTR_{GP,FIXED,METRICS}
	 * select the groups. RELOAD_VALUE and other bits are ignored here.
	 */
	uint64_t cfg_c;
	uint64_t applicable; /* Applicable Counters, GLOBAL_STATUS bit format */
	bool retire_valid;   /* Basic Retire Latency valid bit (not on FIXED_CTR0) */
	/* Counters group: counters whose own CFG_C has CNTR_ALLOW */
	uint32_t gp_allow;		      /* captured when cfg_c has CNTR_GP */
	uint32_t fixed_allow;		      /* captured when cfg_c has CNTR_FIXED */
	const struct pebs_counters *counters; /* values (may be NULL: read as 0) */
	/* LBR group */
	unsigned int lbr_depth;		  /* entries for selector 3: MSR_ARCH_LBR_DEPTH */
	uint64_t lbr_ctl;		  /* MSR_ARCH_LBR_CTL, copied into the LBR header */
	struct pebs_lbr_entry ler;	  /* last event record FROM/TO/INFO */
	const struct pebs_lbr_entry *lbr; /* most recent first, nr_lbr available */
	unsigned int nr_lbr;
	uint64_t ssp; /* shadow stack pointer, GPR group */
};

/* Size of the architectural PEBS record cfg describes (padding included); 0 if invalid. */
size_t arch_pebs_record_size(const struct arch_pebs_config *cfg);

/*
 * Build one complete architectural PEBS record (no fragments: CONTINUED
 * is 0) into buf. Returns its size, or 0 if it does not fit in cap or
 * cfg is invalid (buf is then left untouched).
 */
size_t arch_pebs_record_build(const struct arch_pebs_config *cfg, const struct pebs_sample *s,
			      uint8_t *buf, size_t cap);

#endif
