/* SPDX-License-Identifier: MIT */
/*
 * PEBS as the guest sees it: the DS save area, the record layouts of
 * formats 3-6 and of architectural PEBS, and the PEBS dump file that
 * `vpmu-vmm --pebs-dump` writes and `vpmu-pebs` reads. Facts of the SDM
 * (offsets never change), for tools that read what libvpmu writes into
 * guest memory. Optional for embedders: vpmu/vpmu.h does not need it.
 */
#ifndef VPMU_PEBS_H
#define VPMU_PEBS_H

#include <stdint.h>

#include "vpmu/bits.h"

/*
 * The DS buffer management area, 64-bit layout (SDM Vol. 3B 20.4.9.1,
 * Figure 20-8; the only one with CPUID.01H:ECX.DTES64 set, and Figure
 * 22-69 for the PEBS part): byte offsets from IA32_DS_AREA.
 */
#define DS_BTS_BASE	  0x00
#define DS_BTS_INDEX	  0x08
#define DS_BTS_ABS_MAX	  0x10
#define DS_BTS_THRESHOLD  0x18
#define DS_PEBS_BASE	  0x20
#define DS_PEBS_INDEX	  0x28
#define DS_PEBS_ABS_MAX	  0x30
#define DS_PEBS_THRESHOLD 0x38
/* PEBS counter reset values: one qword per GP counter from 40H */
#define DS_PEBS_GP_RESET(n) (0x40 + 8 * (n))
/*
 * The fixed counters' reset values follow the GP ones: after 8 GP slots
 * for PEBS format 4, after 32 for formats 5 and 6 (SDM Vol. 3B
 * 22.6.2.4.2, PEBSRecordFormat).
 */
#define DS_PEBS_FIXED_RESET(fmt, n) ((fmt) == 4 ? 0x80 + 8 * (n) : 0x140 + 8 * (n))

/*
 * GPR indexes: the SDM's register-number order (RAX RCX RDX RBX RSP RBP
 * RSI RDI R8-R15), the order of the adaptive and architectural GPR groups
 * and of struct vpmu_guest_regs.gpr.
 */
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

/* One LBR entry as the LBR groups record it. */
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

/*
 * Format 3: the fixed 200-byte record, SDM Vol. 3B 20.4.9.1 Figure 20-10
 * (RFLAGS, RIP, the GPRs) and 22.3.8.1.1 (90H-C0H: Applicable Counters,
 * data linear address, data source, latency, EventingIP, TSX, TSC).
 */
#define PEBS3_RFLAGS	  0x00
#define PEBS3_RIP	  0x08
#define PEBS3_RAX	  0x10 /* the legacy GPR block: see pebs3_gpr_offset() */
#define PEBS3_R8	  0x50
#define PEBS3_APPLICABLE  0x90
#define PEBS3_DLA	  0x98
#define PEBS3_DATA_SRC	  0xa0
#define PEBS3_LATENCY	  0xa8
#define PEBS3_EVENTING_IP 0xb0
#define PEBS3_TSX	  0xb8
#define PEBS3_TSC	  0xc0
#define PEBS3_SIZE	  0xc8

/*
 * Where formats 0-3 keep register `r` (enum pebs_gpr): the legacy order
 * RAX RBX RCX RDX RSI RDI RBP RSP from 10H, then R8-R15 from 50H (SDM
 * Vol. 3B 20.4.9.1, Figure 20-10). The one table of that order.
 */
static inline unsigned int pebs3_gpr_offset(unsigned int r)
{
	/* the legacy slot of RAX RCX RDX RBX RSP RBP RSI RDI */
	static const unsigned char slot[8] = { 0, 2, 3, 1, 7, 6, 4, 5 };

	return r < 8 ? PEBS3_RAX + 8u * slot[r] : PEBS3_R8 + 8u * (r - 8);
}

/*
 * Adaptive PEBS (formats 4-6), SDM §22.9.2.2. Offsets are relative to the
 * start of their group; groups are packed back to back in the order
 * Basic, Memory Info, GPRs, XMMs, LBRs, Counters (Table 22-104; 22.9.2.3.1
 * does not place the Counters group, Linux's parser reads it after LBRs).
 */
/* Basic group, Table 22-96 (Table 22-108 with Timed PEBS) */
#define PEBS_BASIC_FORMAT	       0x00 /* qword: Record Format, [Retire Latency,] Record Size */
#define PEBS_BASIC_IP		       0x08 /* EventingIP */
#define PEBS_BASIC_APPLICABLE	       0x10
#define PEBS_BASIC_TSC		       0x18
#define PEBS_BASIC_SIZE		       0x20
#define PEBS_BASIC_RECORD_FORMAT       VPMU_GENMASK_ULL(47, 0)
#define PEBS_BASIC_TIMED_RECORD_FORMAT VPMU_GENMASK_ULL(31, 0)
#define PEBS_BASIC_RETIRE_LATENCY      VPMU_GENMASK_ULL(47, 32)
#define PEBS_BASIC_RECORD_SIZE	       VPMU_GENMASK_ULL(63, 48)

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
 * Architectural PEBS (SDM Vol. 3B 22.10; beyond 22.10.2.1 the
 * record layout below is Linux's reading in arch/x86/include/asm/
 * perf_event.h, struct arch_pebs_*, with the bits as vpmu/msr.h names
 * them). Each counter selects its own groups in IA32_PMC_{GPn,FXm}_CFG_C
 * (ARCH_PEBS_* in vpmu/msr.h). A record is
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
#define ARCH_PEBS_HDR_RECORD_SIZE VPMU_GENMASK_ULL(15, 0)
#define ARCH_PEBS_HDR_64BIT_MODE  VPMU_BIT_ULL(30)
#define ARCH_PEBS_HDR_CONTINUED	  VPMU_BIT_ULL(31)
#define ARCH_PEBS_HDR_CNTR	  VPMU_GENMASK_ULL(39, 35)
#define ARCH_PEBS_HDR_LBR	  VPMU_GENMASK_ULL(41, 40)
#define ARCH_PEBS_HDR_XMM	  VPMU_BIT_ULL(49)
#define ARCH_PEBS_HDR_GPR	  VPMU_BIT_ULL(61)
#define ARCH_PEBS_HDR_AUX	  VPMU_BIT_ULL(62)
#define ARCH_PEBS_HDR_BASIC	  VPMU_BIT_ULL(63)

#define ARCH_PEBS_BASIC_IP	       0x00
#define ARCH_PEBS_BASIC_APPLICABLE     0x08
#define ARCH_PEBS_BASIC_TSC	       0x10
#define ARCH_PEBS_BASIC_RETIRE	       0x18
#define ARCH_PEBS_BASIC_RETIRE_LATENCY VPMU_GENMASK_ULL(15, 0)
#define ARCH_PEBS_BASIC_RETIRE_VALID   VPMU_BIT_ULL(16)
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
#define ARCH_PEBS_XER_XSTATE_SSE VPMU_BIT_ULL(1) /* XSAVE component 1: XMM0-15 */
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

/*
 * The PEBS dump file `vpmu-vmm --pebs-dump FILE` writes at exit and
 * `vpmu-pebs` decodes: this header, then the bytes of the guest's PEBS
 * buffer from its base to its index (the records the guest has not
 * consumed). All fields little-endian.
 */
#define VPMU_PEBS_DUMP_MAGIC   "VPMUPEBS"
#define VPMU_PEBS_DUMP_VERSION 1

struct vpmu_pebs_dump_header {
	char magic[8];		    /* VPMU_PEBS_DUMP_MAGIC, no NUL */
	uint32_t version;	    /* VPMU_PEBS_DUMP_VERSION */
	uint32_t header_size;	    /* sizeof(struct vpmu_pebs_dump_header) */
	char model[32];		    /* guest CPU model, NUL-terminated */
	uint64_t perf_capabilities; /* IA32_PERF_CAPABILITIES: PEBS_FMT, timed PEBS */
	uint64_t pebs_enable;	    /* IA32_PEBS_ENABLE */
	uint64_t data_cfg;	    /* MSR_PEBS_DATA_CFG (0 before format 4) */
	uint64_t ds_area;	    /* IA32_DS_AREA (legacy PEBS) */
	uint64_t pebs_base;	    /* buffer base: linear (DS) or physical (arch PEBS) */
	uint64_t pebs_index;	    /* the index / IA32_PEBS_INDEX.WR as the guest left it */
	uint64_t pebs_threshold;
	uint64_t records_len; /* bytes that follow */
};

#endif
