/* SPDX-License-Identifier: MIT */
/*
 * PEBS record decoder: bytes + format in, fields out. The inverse of
 * libvpmu's record builders, reading at the offsets the public
 * vpmu/pebs.h names. Every read is bounds-checked against the record's own size and
 * the bytes available, so a truncated or garbage buffer yields an error,
 * never an out-of-bounds read. Never prints.
 */
#ifndef VPMU_PEBS_DECODE_H
#define VPMU_PEBS_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vpmu/pebs.h"

/* How the buffer was written: PERF_CAPABILITIES.PEBS_FMT and [17]. */
struct pebs_decode_info {
	unsigned int fmt; /* 3, 4, 5, 6, or 0xf (architectural PEBS) */
	bool timed;	  /* timed PEBS: Basic[47:32] is Retire Latency (formats 4-6) */
};

/* struct pebs_decoded.groups */
#define PEBS_DEC_BASIC	 (1u << 0)
#define PEBS_DEC_MEMINFO (1u << 1) /* Memory Info (adaptive) / Aux (arch) */
#define PEBS_DEC_GPRS	 (1u << 2)
#define PEBS_DEC_XMMS	 (1u << 3)
#define PEBS_DEC_LBRS	 (1u << 4)
#define PEBS_DEC_CNTR	 (1u << 5)

#define PEBS_DEC_MAX_LBR ARCH_PEBS_LBR_MAX_DEPTH

struct pebs_decoded {
	unsigned int fmt;    /* as in pebs_decode_info */
	size_t size;	     /* bytes the record takes, padding included */
	unsigned int groups; /* PEBS_DEC_* */
	/* Format header: adaptive Basic qword 0 / arch PEBS header qword 0 */
	uint64_t format_qword;
	uint64_t record_format; /* adaptive: Basic[47:0] ([31:0] when timed) */
	bool mode64;		/* arch PEBS header 64BIT_MODE */
	/* Basic (format 3: its equivalents) */
	uint64_t eventing_ip;
	uint64_t applicable;
	uint64_t tsc;
	bool has_retire_latency; /* timed adaptive PEBS or arch PEBS */
	bool retire_valid;	 /* arch PEBS: the valid bit; timed: always */
	uint64_t retire_latency;
	/* Memory Info / Aux */
	uint64_t dla, data_src, latency, tsx;
	/* GPRs: enum pebs_gpr order whatever the record's order */
	uint64_t rflags, ip;
	uint64_t gpr[PEBS_NR_GPRS];
	uint64_t ssp; /* arch PEBS */
	/* XMMs */
	uint64_t xstate; /* arch PEBS XER header */
	uint8_t xmm[16][16];
	/* LBRs */
	unsigned int nr_lbr;
	struct pebs_lbr_entry lbr[PEBS_DEC_MAX_LBR];
	unsigned int lbr_sel;	   /* arch PEBS depth selector [41:40] */
	uint64_t lbr_ctl;	   /* arch PEBS */
	struct pebs_lbr_entry ler; /* arch PEBS */
	/* Counters & metrics */
	uint32_t pmc_mask, fixed_mask, metrics_mask;
	struct pebs_counters counters; /* only the masked entries are meaningful */
};

/*
 * Decode the record at the start of buf (len bytes available). 0 and
 * *ret filled (ret->size = bytes to step over); or a negative errno with
 * *why set to a static one-line reason and *ret untouched:
 * -EOPNOTSUPP for a format we do not decode, -EINVAL for a malformed
 * record, -EMSGSIZE when the record claims more bytes than len.
 */
int pebs_decode_record(const struct pebs_decode_info *info, const uint8_t *buf, size_t len,
		       struct pebs_decoded *ret, const char **why);

/* Format name for messages: "3", "4 (adaptive)", "architectural", ... */
const char *pebs_decode_format_name(unsigned int fmt);

#endif
