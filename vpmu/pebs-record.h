/* SPDX-License-Identifier: MIT */
/*
 * PEBS record layouts and builders: pure functions from "what happened"
 * (struct pebs_sample) and "what to record" (struct pebs_config) to the
 * bytes hardware would write. Offsets are constants checked with
 * static_assert against the SDM tables (seed 000 §22.9.2, seed 004
 * Fig 20-10, CHECKLIST.md §C). Private.
 */
#ifndef VPMU_PEBS_RECORD_H
#define VPMU_PEBS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GPR indexes: the SDM's register-number order, as the adaptive GPR group. */
enum pebs_gpr {
	PEBS_RAX, PEBS_RCX, PEBS_RDX, PEBS_RBX, PEBS_RSP, PEBS_RBP, PEBS_RSI, PEBS_RDI,
	PEBS_R8, PEBS_R9, PEBS_R10, PEBS_R11, PEBS_R12, PEBS_R13, PEBS_R14, PEBS_R15,
	PEBS_NR_GPRS,
};

/* What the sampled instruction did, and the machine state after it. */
struct pebs_sample {
	uint64_t eventing_ip;	/* the instruction that caused the event */
	uint64_t ip;		/* trap-like: the next instruction's address */
	uint64_t rflags;
	uint64_t gpr[PEBS_NR_GPRS];
	uint8_t xmm[16][16];
	uint64_t dla;		/* data linear address, 0 = unknown */
	uint64_t data_src;	/* Memory Auxiliary Info / legacy data source */
	uint64_t latency;	/* access latency (load latency, core cycles) */
	uint64_t tsx_aux;	/* TSX auxiliary info / abort info */
	uint64_t tsc;
	uint64_t retire_latency; /* core cycles since the previous retirement (timed PEBS) */
	bool long_mode;		/* 64-bit mode: else upper GPR halves and R8-R15 read 0 */
	bool sse;		/* SSE enabled: else the XMM group is all zeros */
};

struct pebs_lbr_entry {
	uint64_t from, to, info;
};

/* The counters & metrics group values (format 6, §22.9.2.3.1). */
struct pebs_counters {
	uint64_t pmc[32];
	uint64_t fixed[16];
	uint64_t metrics_base;	/* FIXED_CTR3 */
	uint64_t metrics;	/* PERF_METRICS */
};

struct pebs_config {
	unsigned int fmt;	/* PERF_CAPABILITIES.PEBS_FMT: 3, 4, 5 or 6 */
	bool timed;		/* PERF_CAPABILITIES[17]: Retire Latency in Basic [47:32] */
	uint64_t applicable;	/* Applicable Counters, PEBS_ENABLE bit format */
	/*
	 * Formats 4-6: MSR_PEBS_DATA_CFG as it applies to this record, or 0
	 * for a basic-only record (no triggering counter had Adaptive_Record).
	 */
	uint64_t data_cfg;
	/* LBR group: the LBR stack from TOS backwards, nr_lbr entries available */
	const struct pebs_lbr_entry *lbr;
	unsigned int nr_lbr;
	const struct pebs_counters *counters;	/* counters group values (may be NULL) */
};

/* Format 3: the fixed 200-byte record (offsets per CHECKLIST.md §C.3). */
#define PEBS3_RFLAGS		0x00
#define PEBS3_RIP		0x08
#define PEBS3_RAX		0x10	/* then RBX RCX RDX RSI RDI RBP RSP: the legacy order */
#define PEBS3_R8		0x50
#define PEBS3_APPLICABLE	0x90
#define PEBS3_DLA		0x98
#define PEBS3_DATA_SRC		0xa0
#define PEBS3_LATENCY		0xa8
#define PEBS3_EVENTING_IP	0xb0
#define PEBS3_TSX		0xb8
#define PEBS3_TSC		0xc0
#define PEBS3_SIZE		0xc8

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

#endif
