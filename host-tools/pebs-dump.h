/* SPDX-License-Identifier: MIT */
/*
 * The PEBS dump file `vpmu-vmm --pebs-dump FILE` writes at exit and
 * `vpmu-pebs` decodes: a header, then the bytes of the guest's PEBS buffer
 * from its base to its index (the records the guest has not consumed).
 * All fields little-endian.
 */
#ifndef VPMU_PEBS_DUMP_H
#define VPMU_PEBS_DUMP_H

#include <stdint.h>

#define VPMU_PEBS_DUMP_MAGIC   "VPMUPEBS"
#define VPMU_PEBS_DUMP_VERSION 1
/*
 * The most bytes of records a dump holds: vpmu-vmm writes no more, and
 * vpmu-pebs reads no more (architectural PEBS buffers end at 4 KiB << 15
 * = 128 MiB; a DS buffer past this is no buffer a guest really uses).
 */
#define VPMU_PEBS_DUMP_MAX_RECORDS (256ull << 20)
/* The largest header_size a reader accepts (later versions may grow it). */
#define VPMU_PEBS_DUMP_MAX_HEADER 4096u

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
