/* SPDX-License-Identifier: MIT */
/*
 * PEBS record builders: legacy format 3, adaptive formats 4-6 and
 * architectural PEBS. Pure functions; every byte written is zeroed
 * first, so a reserved field or an absent value always reads 0.
 */
#include <assert.h>
#include <string.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "pebs-record.h"

/* Format 3, SDM Vol. 3B Figure 20-10 and 22.3.8.1.1 (90H..C0H). */
static_assert(PEBS3_R8 == PEBS3_RAX + 8 * 8, "R8 follows the 8 legacy GPRs");
static_assert(PEBS_R8 == 8 && PEBS_R15 == 15, "enum pebs_gpr numbers R8-R15 as the SDM does");
static_assert(PEBS3_APPLICABLE == PEBS3_R8 + 8 * 8, "Applicable Counters at 90H, after R15");
static_assert(PEBS3_SIZE == PEBS3_TSC + 8 && PEBS3_SIZE == 200, "format 3 is 200 bytes");

/* Adaptive group sizes, SDM Vol. 3B 22.9.2.2, Tables 22-96..22-101. */
static_assert(PEBS_BASIC_SIZE == 32, "Basic group");
static_assert(PEBS_MEMINFO_SIZE == 32, "Memory Info group");
static_assert(PEBS_GPRS_SIZE == 144 && PEBS_GPRS_REG(PEBS_NR_GPRS) == PEBS_GPRS_SIZE, "GPR group");
static_assert(PEBS_XMMS_SIZE == 256 && PEBS_XMMS_REG(16) == PEBS_XMMS_SIZE, "XMM group");
static_assert(PEBS_LBR_ENTRY_SIZE == 24, "LBR entry");
static_assert(PEBS_CNTR_HDR_SIZE == 16, "Table 22-103: 128-bit counters header");

/* Table 22-104, all groups and 32 LBRs. */
#define EX1_MEM PEBS_BASIC_SIZE
#define EX1_GPR (EX1_MEM + PEBS_MEMINFO_SIZE)
#define EX1_XMM (EX1_GPR + PEBS_GPRS_SIZE)
#define EX1_LBR (EX1_XMM + PEBS_XMMS_SIZE)
static_assert(EX1_MEM + PEBS_MEMINFO_DLA == 0x20 && EX1_MEM + PEBS_MEMINFO_TSX == 0x38, "Ex 1 mem");
static_assert(EX1_GPR + PEBS_GPRS_RFLAGS == 0x40 && EX1_GPR + PEBS_GPRS_RIP == 0x48, "Ex 1 gpr");
static_assert(EX1_GPR + PEBS_GPRS_REG(PEBS_RAX) == 0x50, "Ex 1 RAX");
static_assert(EX1_GPR + PEBS_GPRS_REG(PEBS_RDI) == 0x88, "Ex 1 RDI");
static_assert(EX1_GPR + PEBS_GPRS_REG(PEBS_R8) == 0x90, "Ex 1 R8");
static_assert(EX1_GPR + PEBS_GPRS_REG(PEBS_R15) == 0xc8, "Ex 1 R15");
static_assert(EX1_XMM + PEBS_XMMS_REG(0) == 0xd0, "Ex 1 XMM0");
static_assert(EX1_XMM + PEBS_XMMS_REG(15) == 0x1c0, "Ex 1 XMM15");
static_assert(EX1_LBR == 0x1d0, "Ex 1 LBR[TOS].FROM");
static_assert(EX1_LBR + 31 * PEBS_LBR_ENTRY_SIZE + PEBS_LBR_FROM == 0x4b8, "Ex 1 last FROM");
static_assert(EX1_LBR + 31 * PEBS_LBR_ENTRY_SIZE + PEBS_LBR_INFO == 0x4c8, "Ex 1 last INFO");
static_assert(EX1_LBR + 32 * PEBS_LBR_ENTRY_SIZE == 0x4d0, "Ex 1 total");

/* Table 22-105, Basic + GPRs + 3 LBRs. */
#define EX2_GPR PEBS_BASIC_SIZE
#define EX2_LBR (EX2_GPR + PEBS_GPRS_SIZE)
static_assert(EX2_GPR + PEBS_GPRS_RFLAGS == 0x20 && EX2_GPR + PEBS_GPRS_RIP == 0x28, "Ex 2 gpr");
static_assert(EX2_GPR + PEBS_GPRS_REG(PEBS_RAX) == 0x30, "Ex 2 RAX");
static_assert(EX2_GPR + PEBS_GPRS_REG(PEBS_RDI) == 0x68, "Ex 2 RDI");
static_assert(EX2_GPR + PEBS_GPRS_REG(PEBS_R8) == 0x70, "Ex 2 R8");
static_assert(EX2_GPR + PEBS_GPRS_REG(PEBS_R15) == 0xa8, "Ex 2 R15");
static_assert(EX2_LBR == 0xb0, "Ex 2 LBR[TOS].FROM");
static_assert(EX2_LBR + 2 * PEBS_LBR_ENTRY_SIZE + PEBS_LBR_INFO == 0xf0, "Ex 2 last INFO");
static_assert(EX2_LBR + 3 * PEBS_LBR_ENTRY_SIZE == 0xf8, "Ex 2 total");

/* Architectural PEBS, Linux's struct arch_pebs_* sizes. */
static_assert(ARCH_PEBS_HDR_SIZE == 16, "arch_pebs_header");
static_assert(ARCH_PEBS_BASIC_SIZE == 48, "arch_pebs_basic");
static_assert(ARCH_PEBS_AUX_SIZE == 64 && ARCH_PEBS_AUX_TSX + 8 == ARCH_PEBS_AUX_SIZE,
	      "arch_pebs_aux");
static_assert(ARCH_PEBS_GPRS_SSP == ARCH_PEBS_GPRS_REG(PEBS_NR_GPRS), "SSP after R15");
static_assert(ARCH_PEBS_GPRS_SIZE == 160 && ARCH_PEBS_GPRS_SSP + 16 == ARCH_PEBS_GPRS_SIZE,
	      "arch_pebs_gprs");
static_assert(ARCH_PEBS_XER_SIZE == 16 + 256, "XER header + XMM0-15");
static_assert(ARCH_PEBS_LBR_HDR_SIZE == 48 && ARCH_PEBS_LBR_LER_INFO + 8 == ARCH_PEBS_LBR_HDR_SIZE,
	      "arch_pebs_lbr_header");
/* The record header flags each group at the bit its CFG_C select uses. */
static_assert(ARCH_PEBS_HDR_AUX == ARCH_PEBS_AUX && ARCH_PEBS_HDR_GPR == ARCH_PEBS_GPR &&
		      ARCH_PEBS_HDR_XMM == ARCH_PEBS_VECR_XMM && ARCH_PEBS_HDR_LBR == ARCH_PEBS_LBR,
	      "header group bits mirror CFG_C");
static_assert(((ARCH_PEBS_CNTR_GP | ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_CNTR_METRICS) &
	       ~ARCH_PEBS_HDR_CNTR) == 0,
	      "counters selects within header [39:35]");

static void put64(uint8_t *p, uint64_t v)
{
	for (unsigned int i = 0; i < 8; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
	for (unsigned int i = 0; i < 4; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

/*
 * Outside 64-bit mode the upper halves of RAX..RDI and all of R8-R15 read
 * 0 (§22.9.2.2.3). RIP and RFLAGS are recorded as given.
 */
static uint64_t gpr_value(const struct pebs_sample *s, enum pebs_gpr r)
{
	if (s->long_mode)
		return s->gpr[r];
	return r >= PEBS_R8 ? 0 : s->gpr[r] & 0xffffffffULL;
}

static void put_gprs(uint8_t *g, const struct pebs_sample *s)
{
	put64(g + PEBS_GPRS_RFLAGS, s->rflags);
	put64(g + PEBS_GPRS_RIP, s->ip);
	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		put64(g + PEBS_GPRS_REG(r), gpr_value(s, r));
}

/* All zero without SSE; XMM8-15 zero outside 64-bit mode (Table 22-100). */
static void put_xmms(uint8_t *x, const struct pebs_sample *s)
{
	if (!s->sse)
		return;
	for (unsigned int n = 0; n < 16; n++)
		if (n < 8 || s->long_mode)
			memcpy(x + PEBS_XMMS_REG(n), s->xmm[n], 16);
}

/*
 * n entries, most recent (TOS) first as the caller hands them over. When
 * fewer than n are available the rest are zero-filled entries: the group
 * keeps the size the guest configured, because Record Size and every
 * later group's offset follow from DATA_CFG alone and a guest parser
 * must be able to rely on them (the SDM: "implementations that do not
 * support some features will have to pad zeroes", §22.9.2.4).
 */
static void put_lbrs(uint8_t *l, unsigned int n, const struct pebs_lbr_entry *lbr,
		     unsigned int nr_lbr)
{
	for (unsigned int i = 0; i < n && lbr && i < nr_lbr; i++) {
		uint8_t *e = l + (size_t) i * PEBS_LBR_ENTRY_SIZE;

		put64(e + PEBS_LBR_FROM, lbr[i].from);
		put64(e + PEBS_LBR_TO, lbr[i].to);
		put64(e + PEBS_LBR_INFO, lbr[i].info);
	}
}

struct cntr_vecs {
	uint32_t pmc, fixed, metrics;
};

static size_t cntr_group_size(const struct cntr_vecs *v)
{
	return PEBS_CNTR_HDR_SIZE +
	       8 * (size_t) (__builtin_popcount(v->pmc) + __builtin_popcount(v->fixed) +
			     __builtin_popcount(v->metrics));
}

/* Table 22-103: header, then PMCs, FIXED_CTRs, metrics base, metrics in bit order. */
static void put_cntr_group(uint8_t *c, const struct cntr_vecs *v, const struct pebs_counters *vals)
{
	uint8_t *p = c + PEBS_CNTR_HDR_SIZE;

	put32(c + PEBS_CNTR_PMC_BITVEC, v->pmc);
	put32(c + PEBS_CNTR_FIXED_BITVEC, v->fixed);
	put32(c + PEBS_CNTR_METRICS_BITVEC, v->metrics);
	for (unsigned int i = 0; i < 32; i++)
		if (v->pmc & (1U << i)) {
			put64(p, vals ? vals->pmc[i] : 0);
			p += 8;
		}
	for (unsigned int i = 0; i < 16; i++)
		if (v->fixed & (1U << i)) {
			put64(p, vals ? vals->fixed[i] : 0);
			p += 8;
		}
	if (v->metrics & BIT_ULL(0)) {
		put64(p, vals ? vals->metrics_base : 0);
		p += 8;
	}
	if (v->metrics & BIT_ULL(1))
		put64(p, vals ? vals->metrics : 0);
}

/* ---- legacy format 3 and adaptive formats 4-6 ---- */

#define DATACFG_GROUPS_FMT4                                                                        \
	(PEBS_DATACFG_MEMINFO | PEBS_DATACFG_GP | PEBS_DATACFG_XMMS | PEBS_DATACFG_LBRS |          \
	 PEBS_DATACFG_LBR_ENTRIES)
#define DATACFG_GROUPS_FMT6                                                                        \
	(DATACFG_GROUPS_FMT4 | PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS |                          \
	 PEBS_DATACFG_INCLUDE_PMC | PEBS_DATACFG_INCLUDE_FIXED)

/* §22.9.2.3.1: which counters the record captures. */
static struct cntr_vecs adaptive_cntr_vecs(uint64_t data_cfg)
{
	struct cntr_vecs v = { 0 };

	if (data_cfg & PEBS_DATACFG_CNTR) {
		v.pmc = (uint32_t) FIELD_GET(PEBS_DATACFG_INCLUDE_PMC, data_cfg);
		v.fixed = (uint32_t) FIELD_GET(PEBS_DATACFG_INCLUDE_FIXED, data_cfg);
	}
	if ((data_cfg & PEBS_DATACFG_METRICS) && (data_cfg & BIT_ULL(48 + PEBS_CNTR_METRICS_FIXED)))
		v.metrics = PEBS_CNTR_METRICS_ALL;
	return v;
}

static bool has_cntr_group(uint64_t data_cfg)
{
	/* "either the COUNTERS bit or the METRICS bit must be enabled" */
	return data_cfg & (PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS);
}

static unsigned int adaptive_nr_lbr(uint64_t data_cfg)
{
	if (!(data_cfg & PEBS_DATACFG_LBRS))
		return 0;
	return (unsigned int) FIELD_GET(PEBS_DATACFG_LBR_ENTRIES, data_cfg) + 1;
}

/*
 * Invalid: a format other than 3-6; a non-zero data_cfg on format 3
 * (there is no MSR_PEBS_DATA_CFG); a DATA_CFG bit the format does not
 * define (reserved bits #GP on the write, so the counters group and the
 * include bits on formats 4/5 land here); more than 32 LBR entries with
 * the LBR group selected.
 */
size_t pebs_record_size(const struct pebs_config *cfg)
{
	uint64_t dc = cfg->data_cfg;
	size_t size = PEBS_BASIC_SIZE;

	switch (cfg->fmt) {
	case 3:
		return dc ? 0 : PEBS3_SIZE;
	case 4:
	case 5:
		if (dc & ~DATACFG_GROUPS_FMT4)
			return 0;
		break;
	case 6:
		if (dc & ~DATACFG_GROUPS_FMT6)
			return 0;
		break;
	default:
		return 0;
	}
	if (adaptive_nr_lbr(dc) > PEBS_LBR_MAX_ENTRIES)
		return 0;

	if (dc & PEBS_DATACFG_MEMINFO)
		size += PEBS_MEMINFO_SIZE;
	if (dc & PEBS_DATACFG_GP)
		size += PEBS_GPRS_SIZE;
	if (dc & PEBS_DATACFG_XMMS)
		size += PEBS_XMMS_SIZE;
	size += (size_t) adaptive_nr_lbr(dc) * PEBS_LBR_ENTRY_SIZE;
	if (has_cntr_group(dc)) {
		struct cntr_vecs v = adaptive_cntr_vecs(dc);

		size += cntr_group_size(&v);
	}
	return size;
}

static void build_fmt3(const struct pebs_config *cfg, const struct pebs_sample *s, uint8_t *buf)
{
	put64(buf + PEBS3_RFLAGS, s->rflags);
	put64(buf + PEBS3_RIP, s->ip);
	/* Figure 20-10: the legacy register order, not the SDM's register numbers */
	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		put64(buf + pebs3_gpr_offset(r), gpr_value(s, r));
	put64(buf + PEBS3_APPLICABLE, cfg->applicable);
	put64(buf + PEBS3_DLA, s->dla);
	put64(buf + PEBS3_DATA_SRC, s->data_src);
	put64(buf + PEBS3_LATENCY, s->latency);
	put64(buf + PEBS3_EVENTING_IP, s->eventing_ip);
	put64(buf + PEBS3_TSX, s->tsx_aux);
	put64(buf + PEBS3_TSC, s->tsc);
}

/* Basic qword 0: Table 22-96, or Table 22-108 with Timed PEBS (§22.9.9). */
static uint64_t basic_format(const struct pebs_config *cfg, const struct pebs_sample *s,
			     size_t size)
{
	uint64_t q = FIELD_PREP(PEBS_BASIC_RECORD_SIZE, size);

	if (cfg->timed) {
		uint64_t lat = s->retire_latency > 0xffff ? 0xffff : s->retire_latency;

		q |= cfg->data_cfg & PEBS_BASIC_TIMED_RECORD_FORMAT;
		q |= FIELD_PREP(PEBS_BASIC_RETIRE_LATENCY, lat);
	} else {
		q |= cfg->data_cfg & PEBS_BASIC_RECORD_FORMAT;
	}
	return q;
}

size_t pebs_record_build(const struct pebs_config *cfg, const struct pebs_sample *s, uint8_t *buf,
			 size_t cap)
{
	size_t size = pebs_record_size(cfg);
	uint64_t dc = cfg->data_cfg;
	uint8_t *p = buf;

	if (!size || size > cap)
		return 0;
	memset(buf, 0, size);
	if (cfg->fmt == 3) {
		build_fmt3(cfg, s, buf);
		return size;
	}

	put64(p + PEBS_BASIC_FORMAT, basic_format(cfg, s, size));
	put64(p + PEBS_BASIC_IP, s->eventing_ip);
	put64(p + PEBS_BASIC_APPLICABLE, cfg->applicable);
	put64(p + PEBS_BASIC_TSC, s->tsc);
	p += PEBS_BASIC_SIZE;

	if (dc & PEBS_DATACFG_MEMINFO) {
		put64(p + PEBS_MEMINFO_DLA, s->dla);
		put64(p + PEBS_MEMINFO_DATA_SRC, s->data_src);
		put64(p + PEBS_MEMINFO_LATENCY, s->latency);
		put64(p + PEBS_MEMINFO_TSX, s->tsx_aux);
		p += PEBS_MEMINFO_SIZE;
	}
	if (dc & PEBS_DATACFG_GP) {
		put_gprs(p, s);
		p += PEBS_GPRS_SIZE;
	}
	if (dc & PEBS_DATACFG_XMMS) {
		put_xmms(p, s);
		p += PEBS_XMMS_SIZE;
	}
	if (dc & PEBS_DATACFG_LBRS) {
		unsigned int n = adaptive_nr_lbr(dc);

		put_lbrs(p, n, cfg->lbr, cfg->nr_lbr);
		p += (size_t) n * PEBS_LBR_ENTRY_SIZE;
	}
	if (has_cntr_group(dc)) {
		struct cntr_vecs v = adaptive_cntr_vecs(dc);

		put_cntr_group(p, &v, cfg->counters);
		p += cntr_group_size(&v);
	}
	assert((size_t) (p - buf) == size);
	return size;
}

/* ---- architectural PEBS ---- */

#define ARCH_PEBS_CNTR_SELECTS (ARCH_PEBS_CNTR_GP | ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_CNTR_METRICS)

/*
 * LBR depth selector CFG_C[41:40] (Linux ARCH_PEBS_LBR_NUM_*): 0 none,
 * 1 8 entries, 2 16 entries, 3 the variable depth (MSR_ARCH_LBR_DEPTH).
 */
static unsigned int arch_nr_lbr(const struct arch_pebs_config *cfg)
{
	unsigned int sel = (unsigned int) FIELD_GET(ARCH_PEBS_LBR, cfg->cfg_c);

	return sel == ARCH_PEBS_LBR_SEL_VAR ? cfg->lbr_depth : 8 * sel;
}

/*
 * Counters group (SDM §22.10 lists it; layout shared with adaptive PEBS
 * per Linux, which parses both with one helper). The triggering counter's
 * CNTR_GP / CNTR_FIXED select "the GP / fixed counters that allow it",
 * i.e. those whose own CFG_C has CNTR_ALLOW (Linux sets ALLOW on every
 * member of a counter-snapshot group). CNTR_METRICS records the metrics
 * base and PERF_METRICS (bit vector 3).
 */
static struct cntr_vecs arch_cntr_vecs(const struct arch_pebs_config *cfg)
{
	struct cntr_vecs v = { 0 };

	if (cfg->cfg_c & ARCH_PEBS_CNTR_GP)
		v.pmc = cfg->gp_allow;
	if (cfg->cfg_c & ARCH_PEBS_CNTR_FIXED)
		v.fixed = cfg->fixed_allow & 0xffff; /* struct pebs_counters holds 16 */
	if (cfg->cfg_c & ARCH_PEBS_CNTR_METRICS)
		v.metrics = PEBS_CNTR_METRICS_ALL;
	return v;
}

static size_t arch_raw_size(const struct arch_pebs_config *cfg)
{
	uint64_t c = cfg->cfg_c;
	size_t size = ARCH_PEBS_HDR_SIZE + ARCH_PEBS_BASIC_SIZE;

	if (c & ARCH_PEBS_AUX)
		size += ARCH_PEBS_AUX_SIZE;
	if (c & ARCH_PEBS_GPR)
		size += ARCH_PEBS_GPRS_SIZE;
	if (c & ARCH_PEBS_VECR_XMM)
		size += ARCH_PEBS_XER_SIZE;
	if (c & ARCH_PEBS_LBR)
		size += ARCH_PEBS_LBR_HDR_SIZE + (size_t) arch_nr_lbr(cfg) * PEBS_LBR_ENTRY_SIZE;
	if (c & ARCH_PEBS_CNTR_SELECTS) {
		struct cntr_vecs v = arch_cntr_vecs(cfg);

		size += cntr_group_size(&v);
	}
	return size;
}

/*
 * Invalid: PEBS not enabled on the counter (ARCH_PEBS_EN clear), or the
 * variable LBR depth selected with a depth outside 1..64.
 */
size_t arch_pebs_record_size(const struct arch_pebs_config *cfg)
{
	size_t raw;

	if (!(cfg->cfg_c & ARCH_PEBS_EN))
		return 0;
	if (FIELD_GET(ARCH_PEBS_LBR, cfg->cfg_c) == ARCH_PEBS_LBR_SEL_VAR &&
	    (cfg->lbr_depth == 0 || cfg->lbr_depth > ARCH_PEBS_LBR_MAX_DEPTH))
		return 0;
	raw = arch_raw_size(cfg);
	/*
	 * IA32_PEBS_INDEX.WR is a byte offset whose bits 3:0 are reserved
	 * (Linux ARCH_PEBS_INDEX_WR_SHIFT 4), so records start 16-byte
	 * aligned: we pad at the end and count the pad in the header size,
	 * which is how a reader (Linux's: at += header->size) steps over it.
	 * Only an odd number of counters-group values needs it.
	 */
	return (raw + ARCH_PEBS_ALIGN - 1) & ~(size_t) (ARCH_PEBS_ALIGN - 1);
}

size_t arch_pebs_record_build(const struct arch_pebs_config *cfg, const struct pebs_sample *s,
			      uint8_t *buf, size_t cap)
{
	size_t size = arch_pebs_record_size(cfg);
	uint64_t c = cfg->cfg_c;
	uint64_t hdr;
	uint8_t *p = buf;

	if (!size || size > cap)
		return 0;
	memset(buf, 0, size);

	hdr = FIELD_PREP(ARCH_PEBS_HDR_RECORD_SIZE, size) | ARCH_PEBS_HDR_BASIC |
	      (c & (ARCH_PEBS_AUX | ARCH_PEBS_GPR | ARCH_PEBS_VECR_XMM | ARCH_PEBS_LBR |
		    ARCH_PEBS_CNTR_SELECTS));
	if (s->long_mode)
		hdr |= ARCH_PEBS_HDR_64BIT_MODE;
	put64(p + ARCH_PEBS_HDR_FORMAT, hdr);
	p += ARCH_PEBS_HDR_SIZE;

	put64(p + ARCH_PEBS_BASIC_IP, s->eventing_ip);
	put64(p + ARCH_PEBS_BASIC_APPLICABLE, cfg->applicable);
	put64(p + ARCH_PEBS_BASIC_TSC, s->tsc);
	if (cfg->retire_valid) {
		uint64_t lat = s->retire_latency > 0xffff ? 0xffff : s->retire_latency;
		uint64_t q = FIELD_PREP(ARCH_PEBS_BASIC_RETIRE_LATENCY, lat);

		put64(p + ARCH_PEBS_BASIC_RETIRE, q | ARCH_PEBS_BASIC_RETIRE_VALID);
	}
	p += ARCH_PEBS_BASIC_SIZE;

	if (c & ARCH_PEBS_AUX) {
		put64(p + ARCH_PEBS_AUX_DLA, s->dla);
		put64(p + ARCH_PEBS_AUX_DATA_SRC, s->data_src);
		put64(p + ARCH_PEBS_AUX_LATENCY, s->latency);
		put64(p + ARCH_PEBS_AUX_TSX, s->tsx_aux);
		p += ARCH_PEBS_AUX_SIZE;
	}
	if (c & ARCH_PEBS_GPR) {
		/* Same prefix as the adaptive group, then SSP and a reserved qword. */
		put_gprs(p, s);
		put64(p + ARCH_PEBS_GPRS_SSP, cfg->ssp);
		p += ARCH_PEBS_GPRS_SIZE;
	}
	if (c & ARCH_PEBS_VECR_XMM) {
		/*
		 * XER header qword 0: the XSAVE components that follow (our
		 * reading of Linux's arch_pebs_xer_header.xstate); only XMM0-15,
		 * component 1 (SSE), is emulated. Registers read 0 without SSE.
		 */
		put64(p + ARCH_PEBS_XER_XSTATE, ARCH_PEBS_XER_XSTATE_SSE);
		put_xmms(p + ARCH_PEBS_XER_HDR_SIZE, s);
		p += ARCH_PEBS_XER_SIZE;
	}
	if (c & ARCH_PEBS_LBR) {
		unsigned int n = arch_nr_lbr(cfg);

		/* Header qword 0 reserved; depth = the entries that follow. */
		put64(p + ARCH_PEBS_LBR_CTL, cfg->lbr_ctl);
		put64(p + ARCH_PEBS_LBR_DEPTH, n);
		put64(p + ARCH_PEBS_LBR_LER_FROM, cfg->ler.from);
		put64(p + ARCH_PEBS_LBR_LER_TO, cfg->ler.to);
		put64(p + ARCH_PEBS_LBR_LER_INFO, cfg->ler.info);
		p += ARCH_PEBS_LBR_HDR_SIZE;
		/* Arch LBRs have no TOS: entry 0 is the most recent. Shortfall zero-filled. */
		put_lbrs(p, n, cfg->lbr, cfg->nr_lbr);
		p += (size_t) n * PEBS_LBR_ENTRY_SIZE;
	}
	if (c & ARCH_PEBS_CNTR_SELECTS) {
		struct cntr_vecs v = arch_cntr_vecs(cfg);

		put_cntr_group(p, &v, cfg->counters);
		p += cntr_group_size(&v);
	}
	assert((size_t) (p - buf) <= size && size - (size_t) (p - buf) < ARCH_PEBS_ALIGN);
	return size;
}
