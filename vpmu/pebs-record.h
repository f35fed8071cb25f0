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

#include "bits.h"

/* GPR indexes: the SDM's register-number order, as the adaptive GPR group. */
enum pebs_gpr {
	PEBS_RAX,
	PEBS_RCX,
	PEBS_RDX,
	PEBS_RBX,
	PEBS_RSP,
	PEBS_RBP,
	PEBS_RSI,
	PEBS_RDI,
	PEBS_R8,
	PEBS_R9,
	PEBS_R10,
	PEBS_R11,
	PEBS_R12,
	PEBS_R13,
	PEBS_R14,
	PEBS_R15,
	PEBS_NR_GPRS,
};

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

struct pebs_lbr_entry {
	uint64_t from, to, info;
};

/* The counters & metrics group values (format 6, §22.9.2.3.1). */
struct pebs_counters {
	uint64_t pmc[32];
	uint64_t fixed[16];
	uint64_t metrics_base; /* FIXED_CTR3 */
	uint64_t metrics;      /* PERF_METRICS */
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

/* Format 3: the fixed 200-byte record (offsets per CHECKLIST.md §C.3). */
#define PEBS3_RFLAGS	  0x00
#define PEBS3_RIP	  0x08
#define PEBS3_RAX	  0x10 /* then RBX RCX RDX RSI RDI RBP RSP: the legacy order */
#define PEBS3_R8	  0x50
#define PEBS3_APPLICABLE  0x90
#define PEBS3_DLA	  0x98
#define PEBS3_DATA_SRC	  0xa0
#define PEBS3_LATENCY	  0xa8
#define PEBS3_EVENTING_IP 0xb0
#define PEBS3_TSX	  0xb8
#define PEBS3_TSC	  0xc0
#define PEBS3_SIZE	  0xc8
/* The rest of the legacy GPR block (seed 004 Fig 20-10; formats 0-3 share it). */
#define PEBS3_RBX  0x18
#define PEBS3_RCX  0x20
#define PEBS3_RDX  0x28
#define PEBS3_RSI  0x30
#define PEBS3_RDI  0x38
#define PEBS3_RBP  0x40
#define PEBS3_RSP  0x48
#define PEBS3_R(n) (PEBS3_R8 + 8 * ((n) -8)) /* R8..R15 */

/*
 * Adaptive PEBS (formats 4-6), SDM §22.9.2.2. Offsets are relative to the
 * start of their group; groups are packed back to back in the order
 * Basic, Memory Info, GPRs, XMMs, LBRs, Counters (Table 22-104; the seeds
 * do not place the Counters group, Linux's parser reads it after LBRs).
 */
/* Basic group, Table 22-96 (Table 22-108 with Timed PEBS) */
#define PEBS_BASIC_FORMAT	       0x00 /* qword: Record Format, [Retire Latency,] Record Size */
#define PEBS_BASIC_IP		       0x08 /* EventingIP */
#define PEBS_BASIC_APPLICABLE	       0x10
#define PEBS_BASIC_TSC		       0x18
#define PEBS_BASIC_SIZE		       0x20
#define PEBS_BASIC_RECORD_FORMAT       GENMASK_ULL(47, 0)
#define PEBS_BASIC_TIMED_RECORD_FORMAT GENMASK_ULL(31, 0)
#define PEBS_BASIC_RETIRE_LATENCY      GENMASK_ULL(47, 32)
#define PEBS_BASIC_RECORD_SIZE	       GENMASK_ULL(63, 48)

/* Memory Access Info group, DATA_CFG bit 0, Table 22-97 */
#define PEBS_MEMINFO_DLA      0x00
#define PEBS_MEMINFO_DATA_SRC 0x08
#define PEBS_MEMINFO_LATENCY  0x10
#define PEBS_MEMINFO_TSX      0x18
#define PEBS_MEMINFO_SIZE     0x20

/* GPR group, DATA_CFG bit 1, Table 22-99: RFLAGS, RIP, then enum pebs_gpr order */
#define PEBS_GPRS_RFLAGS 0x00
#define PEBS_GPRS_RIP	 0x08
#define PEBS_GPRS_REG(r) (0x10 + 8 * (r)) /* r: enum pebs_gpr */
#define PEBS_GPRS_SIZE	 0x90

/* XMM group, DATA_CFG bit 2, Table 22-100: XMM0..XMM15, 16 bytes each */
#define PEBS_XMMS_REG(n) (16 * (n))
#define PEBS_XMMS_SIZE	 0x100

/* LBR group, DATA_CFG bit 3, Table 22-101: (DATA_CFG[31:24] + 1) entries from TOS backwards */
/* (fewer than asked in pebs_config.nr_lbr: the rest are zero entries, the size stays) */
#define PEBS_LBR_FROM	     0x00
#define PEBS_LBR_TO	     0x08
#define PEBS_LBR_INFO	     0x10
#define PEBS_LBR_ENTRY_SIZE  0x18
#define PEBS_LBR_MAX_ENTRIES 32

/* Counters & Metrics group, DATA_CFG bits 4/5 (format 6), Table 22-103 */
#define PEBS_CNTR_PMC_BITVEC	 0x00 /* dword */
#define PEBS_CNTR_FIXED_BITVEC	 0x04 /* dword */
#define PEBS_CNTR_METRICS_BITVEC 0x08 /* dword */
#define PEBS_CNTR_RESERVED	 0x0c /* dword */
#define PEBS_CNTR_HDR_SIZE	 0x10 /* then 8-byte values: PMCs, FIXED, metrics base, metrics */
#define PEBS_CNTR_METRICS_ALL	 0x3  /* Metrics BitVector: base (FIXED_CTR3) + PERF_METRICS */
#define PEBS_CNTR_METRICS_FIXED	 3    /* DATA_CFG bit 48 + 3 gates the metrics */

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

/*
 * Architectural PEBS (SDM §22.10; the seeds stop at §22.10.2.1, so the
 * record layout below is Linux's reading in arch/x86/include/asm/
 * perf_event.h, struct arch_pebs_*, with the bits as msr-index.h names
 * them). Each counter selects its own groups in IA32_PMC_{GPn,FXm}_CFG_C
 * (ARCH_PEBS_* in msr-index.h). A record is
 *
 *   Header   16 B: qword 0 = size [15:0], 64BIT_MODE [30], CONTINUED [31],
 *                  then the present groups at the same bit positions as
 *                  their CFG_C selects: counters [39:35] (GP 36, FIXED 37,
 *                  METRICS 38), LBR depth selector [41:40], XMM [49],
 *                  GPR [61], AUX [62], BASIC [63]; qword 1 reserved.
 *   Basic    48 B: IP (EventingIP), Applicable Counters, TSC,
 *                  Retire Latency [15:0] + valid [16], 2 reserved qwords.
 *   Aux      64 B: DLA, 4 reserved qwords, Memory Aux Info, latency, TSX.
 *   GPRs    160 B: RFLAGS, RIP, RAX RCX RDX RBX RSP RBP RSI RDI, R8-R15,
 *                  SSP, 1 reserved qword.
 *   XER  16+256 B: header (XSAVE component bitmap, reserved), XMM0-15.
 *   LBRs  48+24N B: header (reserved, LBR_CTL, depth, LER FROM/TO/INFO),
 *                  then N FROM/TO/INFO entries, most recent first.
 *   Counters 16+8n B: the same header and values as adaptive PEBS.
 *
 * in that order, and padded with zeros to a multiple of 16 bytes (see
 * ARCH_PEBS_ALIGN).
 */
#define ARCH_PEBS_HDR_FORMAT	  0x00
#define ARCH_PEBS_HDR_SIZE	  0x10
#define ARCH_PEBS_HDR_RECORD_SIZE GENMASK_ULL(15, 0)
#define ARCH_PEBS_HDR_64BIT_MODE  BIT_ULL(30)
#define ARCH_PEBS_HDR_CONTINUED	  BIT_ULL(31)
#define ARCH_PEBS_HDR_CNTR	  GENMASK_ULL(39, 35)
#define ARCH_PEBS_HDR_LBR	  GENMASK_ULL(41, 40)
#define ARCH_PEBS_HDR_XMM	  BIT_ULL(49)
#define ARCH_PEBS_HDR_GPR	  BIT_ULL(61)
#define ARCH_PEBS_HDR_AUX	  BIT_ULL(62)
#define ARCH_PEBS_HDR_BASIC	  BIT_ULL(63)

#define ARCH_PEBS_BASIC_IP	       0x00
#define ARCH_PEBS_BASIC_APPLICABLE     0x08
#define ARCH_PEBS_BASIC_TSC	       0x10
#define ARCH_PEBS_BASIC_RETIRE	       0x18
#define ARCH_PEBS_BASIC_RETIRE_LATENCY GENMASK_ULL(15, 0)
#define ARCH_PEBS_BASIC_RETIRE_VALID   BIT_ULL(16)
#define ARCH_PEBS_BASIC_SIZE	       0x30

#define ARCH_PEBS_AUX_DLA      0x00
#define ARCH_PEBS_AUX_DATA_SRC 0x28
#define ARCH_PEBS_AUX_LATENCY  0x30
#define ARCH_PEBS_AUX_TSX      0x38
#define ARCH_PEBS_AUX_SIZE     0x40

#define ARCH_PEBS_GPRS_RFLAGS 0x00
#define ARCH_PEBS_GPRS_RIP    0x08
#define ARCH_PEBS_GPRS_REG(r) (0x10 + 8 * (r)) /* r: enum pebs_gpr */
#define ARCH_PEBS_GPRS_SSP    0x90
#define ARCH_PEBS_GPRS_SIZE   0xa0

#define ARCH_PEBS_XER_XSTATE	 0x00 /* XSAVE components that follow */
#define ARCH_PEBS_XER_HDR_SIZE	 0x10
#define ARCH_PEBS_XER_XSTATE_SSE BIT_ULL(1) /* XSAVE component 1: XMM0-15 */
#define ARCH_PEBS_XER_SIZE	 (ARCH_PEBS_XER_HDR_SIZE + PEBS_XMMS_SIZE)

#define ARCH_PEBS_LBR_CTL	0x08
#define ARCH_PEBS_LBR_DEPTH	0x10
#define ARCH_PEBS_LBR_LER_FROM	0x18
#define ARCH_PEBS_LBR_LER_TO	0x20
#define ARCH_PEBS_LBR_LER_INFO	0x28
#define ARCH_PEBS_LBR_HDR_SIZE	0x30
#define ARCH_PEBS_LBR_SEL_NONE	0
#define ARCH_PEBS_LBR_SEL_8	1
#define ARCH_PEBS_LBR_SEL_16	2
#define ARCH_PEBS_LBR_SEL_VAR	3  /* arch_pebs_config.lbr_depth entries */
#define ARCH_PEBS_LBR_MAX_DEPTH 64 /* MSR_ARCH_LBR_DEPTH's largest value */

#define ARCH_PEBS_ALIGN 16 /* IA32_PEBS_INDEX.WR counts 16-byte units */

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
