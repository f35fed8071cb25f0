/* SPDX-License-Identifier: MIT */
/*
 * PEBS records byte for byte. Every expected offset is computed here from
 * the SDM group sizes and tables (Vol. 3B 22.9.2, Figure 20-10, 22.3.8.1.1)
 * as literals, never from the offsets in vpmu/pebs.h,
 * and every field carries a distinct value so a misplaced one is caught.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <string.h>

#include "pebs-record.h"
#include "pebs-values.h"

#define B(n)	 (1ULL << (n))
#define CANARY	 0xcc
#define BUF_SIZE 4096

static uint8_t buf[BUF_SIZE];

static uint64_t rd64(const uint8_t *p, size_t off)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < 8; i++)
		v |= (uint64_t) p[off + i] << (8 * i);
	return v;
}

static uint32_t rd32(const uint8_t *p, size_t off)
{
	return (uint32_t) rd64(p, off);
}

/* Every byte from off on is still the canary. */
static void expect_untouched_from(size_t off)
{
	for (size_t i = off; i < BUF_SIZE; i++)
		if (buf[i] != CANARY) {
			cr_expect_fail("byte %#zx written past the record", i);
			return;
		}
}

static void expect_zero(const uint8_t *p, size_t off, size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (p[off + i]) {
			cr_expect_fail("%s: byte %#zx is %#x, want 0", what, off + i, p[off + i]);
			return;
		}
}

static void clear_buf(void)
{
	memset(buf, CANARY, sizeof(buf));
}

/* Distinct recognizable values; GPR upper halves non-zero to test the truncation. */
static struct pebs_sample sample(bool long_mode)
{
	struct pebs_sample s = {
		.eventing_ip = 0xffffffff81001111ULL,
		.ip = 0xffffffff81002222ULL,
		.rflags = 0x0000000000200a46ULL,
		.dla = 0x00007fffdead1000ULL,
		.data_src = 0x00000000000000a5ULL,
		.latency = 0x0000012300004567ULL,
		.tsx_aux = 0x0bad0000000000d1ULL,
		.tsc = 0x0123456789abcdefULL,
		.retire_latency = 0x1234,
		.long_mode = long_mode,
		.sse = true,
	};

	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		s.gpr[r] = ((0xfe00ULL + r) << 48) | (0x00a50000ULL + 0x11 * (r + 1));
	for (unsigned int n = 0; n < 16; n++)
		for (unsigned int b = 0; b < 16; b++)
			s.xmm[n][b] = (uint8_t) (((n << 4) | b) ^ 0x5a);
	return s;
}

static struct pebs_lbr_entry lbrs[PEBS_TEST_LBRS];
static struct pebs_counters counters;

static void init_values(void)
{
	pebs_test_values(lbrs, &counters);
}

/*
 * The SDM's register order for the adaptive GPR group (Table 22-99):
 * RAX RCX RDX RBX RSP RBP RSI RDI R8..R15. Spelled out here, not taken
 * from the enum.
 */
static const enum pebs_gpr adaptive_order[16] = {
	PEBS_RAX, PEBS_RCX, PEBS_RDX, PEBS_RBX, PEBS_RSP, PEBS_RBP, PEBS_RSI, PEBS_RDI,
	PEBS_R8,  PEBS_R9,  PEBS_R10, PEBS_R11, PEBS_R12, PEBS_R13, PEBS_R14, PEBS_R15,
};
/* The legacy order (SDM Vol. 3B Figure 20-10): RAX RBX RCX RDX RSI RDI RBP RSP R8..R15. */
static const enum pebs_gpr legacy_order[16] = {
	PEBS_RAX, PEBS_RBX, PEBS_RCX, PEBS_RDX, PEBS_RSI, PEBS_RDI, PEBS_RBP, PEBS_RSP,
	PEBS_R8,  PEBS_R9,  PEBS_R10, PEBS_R11, PEBS_R12, PEBS_R13, PEBS_R14, PEBS_R15,
};

static uint64_t want_gpr(const struct pebs_sample *s, enum pebs_gpr r)
{
	if (s->long_mode)
		return s->gpr[r];
	return r >= PEBS_R8 ? 0 : (s->gpr[r] & 0xffffffffULL);
}

static void expect_xmm(const uint8_t *p, size_t off, const struct pebs_sample *s)
{
	for (unsigned int n = 0; n < 16; n++) {
		bool present = s->sse && (n < 8 || s->long_mode);

		for (unsigned int b = 0; b < 16; b++) {
			uint8_t want = present ? s->xmm[n][b] : 0;

			cr_expect_eq(p[off + 16 * n + b], want, "XMM%u byte %u at %#zx", n, b,
				     off + 16 * n + b);
		}
	}
}

static void expect_lbr_entries(const uint8_t *p, size_t off, unsigned int n,
			       const struct pebs_lbr_entry *l, unsigned int avail)
{
	for (unsigned int i = 0; i < n; i++) {
		size_t e = off + 24 * i;
		bool have = l && i < avail;

		cr_expect_eq(rd64(p, e), have ? l[i].from : 0, "LBR %u FROM at %#zx", i, e);
		cr_expect_eq(rd64(p, e + 8), have ? l[i].to : 0, "LBR %u TO at %#zx", i, e + 8);
		cr_expect_eq(rd64(p, e + 16), have ? l[i].info : 0, "LBR %u INFO at %#zx", i,
			     e + 16);
	}
}

static unsigned int popcount64(uint64_t v)
{
	unsigned int n = 0;

	for (; v; v &= v - 1)
		n++;
	return n;
}

/*
 * Table 22-103: returns the group's size; checks header and values.
 * pmc/fixed/metrics: the bit vectors the test expects.
 */
static size_t expect_cntr_group(const uint8_t *p, size_t off, uint32_t pmc, uint32_t fixed,
				uint32_t metrics, const struct pebs_counters *c)
{
	size_t v = off + 16;

	cr_expect_eq(rd32(p, off + 0), pmc, "PMC bitvector");
	cr_expect_eq(rd32(p, off + 4), fixed, "FIXED bitvector");
	cr_expect_eq(rd32(p, off + 8), metrics, "Metrics bitvector");
	cr_expect_eq(rd32(p, off + 12), 0, "reserved dword");
	for (unsigned int i = 0; i < 32; i++)
		if (pmc & B(i)) {
			cr_expect_eq(rd64(p, v), c ? c->pmc[i] : 0, "PMC%u at %#zx", i, v);
			v += 8;
		}
	for (unsigned int i = 0; i < 16; i++)
		if (fixed & B(i)) {
			cr_expect_eq(rd64(p, v), c ? c->fixed[i] : 0, "FIXED%u at %#zx", i, v);
			v += 8;
		}
	if (metrics & 1) {
		cr_expect_eq(rd64(p, v), c ? c->metrics_base : 0, "metrics base at %#zx", v);
		v += 8;
	}
	if (metrics & 2) {
		cr_expect_eq(rd64(p, v), c ? c->metrics : 0, "PERF_METRICS at %#zx", v);
		v += 8;
	}
	cr_expect_eq(v - off, 16 + 8 * (size_t) popcount64(((uint64_t) pmc << 32 | fixed)) +
				      8 * (size_t) popcount64(metrics));
	return v - off;
}

struct adaptive_want {
	unsigned int fmt;
	uint64_t data_cfg;
	bool timed;
	uint64_t applicable;
	unsigned int nr_lbr; /* entries available */
	const struct pebs_counters *c;
	/* counters group expectation (fmt 6) */
	bool cntr;
	uint32_t pmc, fixed, metrics;
};

/*
 * Walks an adaptive record with the SDM group sizes (Basic 32, Memory
 * Info 32, GPRs 144, XMMs 256, LBR 24 per entry, counters 16 + 8 each)
 * and checks every field. Returns the expected size.
 */
static size_t expect_adaptive(const uint8_t *p, size_t got, const struct adaptive_want *w,
			      const struct pebs_sample *s)
{
	uint64_t dc = w->data_cfg;
	unsigned int n_lbr = (dc & B(3)) ? (unsigned int) ((dc >> 24) & 0xff) + 1 : 0;
	size_t size = 32 + ((dc & B(0)) ? 32 : 0) + ((dc & B(1)) ? 144 : 0) +
		      ((dc & B(2)) ? 256 : 0) + 24 * (size_t) n_lbr;
	size_t off = 32;
	uint64_t q0;

	if (w->cntr)
		size += 16 + 8 * (size_t) (popcount64(w->pmc) + popcount64(w->fixed) +
					   popcount64(w->metrics));
	cr_assert_eq(got, size, "record size: got %zu want %zu (data_cfg %#llx)", got, size,
		     (unsigned long long) dc);

	if (w->timed) {
		uint64_t rl = s->retire_latency > 0xffff ? 0xffff : s->retire_latency;

		q0 = (dc & 0xffffffffULL) | (rl << 32) | ((uint64_t) size << 48);
	} else {
		q0 = (dc & 0xffffffffffffULL) | ((uint64_t) size << 48);
	}
	cr_expect_eq(rd64(p, 0x00), q0, "Basic qword 0: %#llx want %#llx",
		     (unsigned long long) rd64(p, 0), (unsigned long long) q0);
	cr_expect_eq(rd64(p, 0x00) >> 48, size, "Record Size [63:48]");
	cr_expect_eq(rd64(p, 0x08), s->eventing_ip, "Basic IP = EventingIP");
	cr_expect_eq(rd64(p, 0x10), w->applicable, "Applicable Counters");
	cr_expect_eq(rd64(p, 0x18), s->tsc, "TSC");

	if (dc & B(0)) {
		cr_expect_eq(rd64(p, off + 0x00), s->dla, "DLA at %#zx", off);
		cr_expect_eq(rd64(p, off + 0x08), s->data_src, "data source");
		cr_expect_eq(rd64(p, off + 0x10), s->latency, "latency");
		cr_expect_eq(rd64(p, off + 0x18), s->tsx_aux, "TSX aux");
		off += 32;
	}
	if (dc & B(1)) {
		cr_expect_eq(rd64(p, off + 0x00), s->rflags, "RFLAGS at %#zx", off);
		cr_expect_eq(rd64(p, off + 0x08), s->ip, "RIP (trap-like next IP)");
		for (unsigned int i = 0; i < 16; i++)
			cr_expect_eq(rd64(p, off + 0x10 + 8 * i), want_gpr(s, adaptive_order[i]),
				     "GPR slot %u at %#zx", i, off + 0x10 + 8 * i);
		off += 144;
	}
	if (dc & B(2)) {
		expect_xmm(p, off, s);
		off += 256;
	}
	if (dc & B(3)) {
		expect_lbr_entries(p, off, n_lbr, lbrs, w->nr_lbr);
		off += 24 * (size_t) n_lbr;
	}
	if (w->cntr)
		off += expect_cntr_group(p, off, w->pmc, w->fixed, w->metrics, w->c);
	cr_expect_eq(off, size, "groups add up");
	expect_untouched_from(size);
	return size;
}

static size_t build(struct pebs_config *cfg, const struct pebs_sample *s)
{
	clear_buf();
	return pebs_record_build(cfg, s, buf, sizeof(buf));
}

TestSuite(pebs_record, .init = init_values);

/* ---- format 3 ---- */

Test(pebs_record, format3_every_field)
{
	struct pebs_sample s = sample(true);
	struct pebs_config cfg = { .fmt = 3, .applicable = B(0) | B(2) | B(32) };
	/* SDM Vol. 3B Figure 20-10, and 22.3.8.1.1 for 90H-C0H */
	static const size_t gpr_off[16] = {
		0x10, 0x18, 0x20, 0x28, 0x30, 0x38, 0x40, 0x48,
		0x50, 0x58, 0x60, 0x68, 0x70, 0x78, 0x80, 0x88,
	};
	size_t n;

	cr_expect_eq(pebs_record_size(&cfg), 200);
	n = build(&cfg, &s);
	cr_assert_eq(n, 200);
	cr_expect_eq(rd64(buf, 0x00), s.rflags, "RFLAGS");
	cr_expect_eq(rd64(buf, 0x08), s.ip, "RIP = the next IP");
	for (unsigned int i = 0; i < 16; i++)
		cr_expect_eq(rd64(buf, gpr_off[i]), s.gpr[legacy_order[i]],
			     "legacy slot %u at %#zx", i, gpr_off[i]);
	cr_expect_eq(rd64(buf, 0x10), s.gpr[PEBS_RAX]);
	cr_expect_eq(rd64(buf, 0x18), s.gpr[PEBS_RBX], "RBX second in the legacy order");
	cr_expect_eq(rd64(buf, 0x30), s.gpr[PEBS_RSI]);
	cr_expect_eq(rd64(buf, 0x48), s.gpr[PEBS_RSP], "RSP last of the eight");
	cr_expect_eq(rd64(buf, 0x90), cfg.applicable, "Applicable Counters");
	cr_expect_eq(rd64(buf, 0x98), s.dla, "DLA");
	cr_expect_eq(rd64(buf, 0xa0), s.data_src, "data source");
	cr_expect_eq(rd64(buf, 0xa8), s.latency, "latency");
	cr_expect_eq(rd64(buf, 0xb0), s.eventing_ip, "EventingIP");
	cr_expect_eq(rd64(buf, 0xb8), s.tsx_aux, "TSX");
	cr_expect_eq(rd64(buf, 0xc0), s.tsc, "TSC");
	expect_untouched_from(200);
}

/* The same registers land in different slots in the legacy and adaptive orders. */
Test(pebs_record, legacy_vs_adaptive_gpr_order)
{
	struct pebs_sample s = sample(true);
	struct pebs_config c3 = { .fmt = 3 };
	struct pebs_config c4 = { .fmt = 4, .data_cfg = B(1) };
	uint8_t legacy[200];
	const size_t g = 0x20 + 0x10; /* adaptive: Basic 32 B, then RFLAGS, RIP */

	cr_assert_eq(build(&c3, &s), 200);
	memcpy(legacy, buf, sizeof(legacy));
	cr_assert_eq(build(&c4, &s), 32 + 144);

	/* slot 1: RBX (legacy) vs RCX (adaptive) */
	cr_expect_eq(rd64(legacy, 0x18), s.gpr[PEBS_RBX]);
	cr_expect_eq(rd64(buf, g + 0x08), s.gpr[PEBS_RCX]);
	cr_expect_neq(rd64(legacy, 0x18), rd64(buf, g + 0x08));
	/* slot 3: RDX vs RBX; slot 4: RSI vs RSP; slot 7: RSP vs RDI */
	cr_expect_eq(rd64(legacy, 0x28), s.gpr[PEBS_RDX]);
	cr_expect_eq(rd64(buf, g + 0x18), s.gpr[PEBS_RBX]);
	cr_expect_eq(rd64(legacy, 0x30), s.gpr[PEBS_RSI]);
	cr_expect_eq(rd64(buf, g + 0x20), s.gpr[PEBS_RSP]);
	cr_expect_eq(rd64(legacy, 0x48), s.gpr[PEBS_RSP]);
	cr_expect_eq(rd64(buf, g + 0x38), s.gpr[PEBS_RDI]);
	/* RAX and R8..R15 agree */
	cr_expect_eq(rd64(legacy, 0x10), rd64(buf, g));
	for (unsigned int i = 0; i < 8; i++)
		cr_expect_eq(rd64(legacy, 0x50 + 8 * i), rd64(buf, g + 0x40 + 8 * i));
}

Test(pebs_record, format3_outside_long_mode)
{
	struct pebs_sample s = sample(false);
	struct pebs_config cfg = { .fmt = 3 };
	static const size_t gpr_off[8] = { 0x10, 0x18, 0x20, 0x28, 0x30, 0x38, 0x40, 0x48 };

	cr_assert_eq(build(&cfg, &s), 200);
	for (unsigned int i = 0; i < 8; i++) {
		cr_expect_eq(rd64(buf, gpr_off[i]), s.gpr[legacy_order[i]] & 0xffffffffULL,
			     "upper half of legacy slot %u zero", i);
		cr_expect_neq(rd64(buf, gpr_off[i]), 0, "lower half kept");
	}
	expect_zero(buf, 0x50, 64, "R8-R15 outside 64-bit mode");
	cr_expect_eq(rd64(buf, 0xb0), s.eventing_ip);
}

Test(pebs_record, format3_rejects_data_cfg)
{
	struct pebs_sample s = sample(true);
	struct pebs_config cfg = { .fmt = 3, .data_cfg = B(1) };

	cr_expect_eq(pebs_record_size(&cfg), 0);
	cr_expect_eq(build(&cfg, &s), 0);
	expect_untouched_from(0);
}

/* ---- adaptive: every DATA_CFG[3:0] combination, formats 4, 5 and 6 ---- */

struct combo {
	unsigned int fmt;
	unsigned int groups; /* DATA_CFG[3:0] */
};

ParameterizedTestParameters(pebs_record, every_group_combination)
{
	static struct combo c[48];

	for (unsigned int i = 0; i < 48; i++)
		c[i] = (struct combo){ .fmt = 4 + i / 16, .groups = i % 16 };
	return cr_make_param_array(struct combo, c, 48);
}

ParameterizedTest(struct combo *p, pebs_record, every_group_combination)
{
	struct pebs_sample s = sample(true);
	/* LBR Entries field always set, so an unselected LBR group must still not count it */
	unsigned int entries = (p->groups % 4) * 2 + 1; /* 2, 4, 6 or 8 entries */
	struct adaptive_want w = {
		.fmt = p->fmt,
		.data_cfg = p->groups | ((uint64_t) entries << 24),
		.applicable = B(1) | B(33),
		.nr_lbr = 32,
	};
	struct pebs_config cfg = {
		.fmt = p->fmt,
		.applicable = w.applicable,
		.data_cfg = w.data_cfg,
		.lbr = lbrs,
		.nr_lbr = 32,
	};
	size_t n;

	init_values();
	n = build(&cfg, &s);
	cr_expect_eq(pebs_record_size(&cfg), n);
	expect_adaptive(buf, n, &w, &s);

	/* No triggering counter with Adaptive_Record: Basic only, Record Format 0. */
	cfg.data_cfg = 0;
	w.data_cfg = 0;
	n = build(&cfg, &s);
	cr_assert_eq(n, 32);
	cr_expect_eq(rd64(buf, 0), 32ULL << 48, "Record Format 0, size 32");
	expect_adaptive(buf, n, &w, &s);
}

/* ---- the two worked examples ---- */

/* Table 22-104: all groups, 32 LBRs. */
Test(pebs_record, sdm_example1_all_groups_32_lbrs)
{
	struct pebs_sample s = sample(true);
	struct pebs_config cfg = {
		.fmt = 4,
		.data_cfg = 0xf | (31ULL << 24),
		.applicable = B(0),
		.lbr = lbrs,
		.nr_lbr = 32,
	};
	static const struct {
		size_t off;
		enum pebs_gpr r;
	} g[] = {
		{ 0x50, PEBS_RAX }, { 0x58, PEBS_RCX }, { 0x60, PEBS_RDX }, { 0x68, PEBS_RBX },
		{ 0x70, PEBS_RSP }, { 0x78, PEBS_RBP }, { 0x80, PEBS_RSI }, { 0x88, PEBS_RDI },
		{ 0x90, PEBS_R8 },  { 0xc8, PEBS_R15 },
	};

	cr_assert_eq(build(&cfg, &s), 0x4d0);
	cr_expect_eq(rd64(buf, 0x00) >> 48, 0x4d0, "Record Size");
	cr_expect_eq(rd64(buf, 0x00) & 0xffffffffffffULL, 0x1f00000f, "Record Format = DATA_CFG");
	cr_expect_eq(rd64(buf, 0x08), s.eventing_ip);
	cr_expect_eq(rd64(buf, 0x10), B(0));
	cr_expect_eq(rd64(buf, 0x18), s.tsc);
	cr_expect_eq(rd64(buf, 0x20), s.dla, "0x20 DLA");
	cr_expect_eq(rd64(buf, 0x28), s.data_src, "0x28 data source");
	cr_expect_eq(rd64(buf, 0x30), s.latency, "0x30 latency");
	cr_expect_eq(rd64(buf, 0x38), s.tsx_aux, "0x38 TSX");
	cr_expect_eq(rd64(buf, 0x40), s.rflags, "0x40 RFLAGS");
	cr_expect_eq(rd64(buf, 0x48), s.ip, "0x48 RIP");
	for (unsigned int i = 0; i < sizeof(g) / sizeof(g[0]); i++)
		cr_expect_eq(rd64(buf, g[i].off), s.gpr[g[i].r], "GPR at %#zx", g[i].off);
	cr_expect_arr_eq(buf + 0xd0, s.xmm[0], 16, "0xD0 XMM0");
	cr_expect_arr_eq(buf + 0x1c0, s.xmm[15], 16, "0x1C0 XMM15");
	cr_expect_eq(rd64(buf, 0x1d0), lbrs[0].from, "0x1D0 LBR[TOS].FROM");
	cr_expect_eq(rd64(buf, 0x1d8), lbrs[0].to, "0x1D8 LBR[TOS].TO");
	cr_expect_eq(rd64(buf, 0x1e0), lbrs[0].info, "0x1E0 LBR[TOS].INFO");
	cr_expect_eq(rd64(buf, 0x1e8), lbrs[1].from, "0x1E8 LBR[TOS-1].FROM");
	cr_expect_eq(rd64(buf, 0x4b8), lbrs[31].from, "0x4B8 last FROM");
	cr_expect_eq(rd64(buf, 0x4c0), lbrs[31].to, "0x4C0 last TO");
	cr_expect_eq(rd64(buf, 0x4c8), lbrs[31].info, "0x4C8 last INFO");
	expect_untouched_from(0x4d0);
}

/* Table 22-105: Basic + GPRs + 3 LBRs. */
Test(pebs_record, sdm_example2_basic_gpr_3_lbrs)
{
	struct pebs_sample s = sample(true);
	struct pebs_config cfg = {
		.fmt = 4,
		.data_cfg = B(1) | B(3) | (2ULL << 24),
		.lbr = lbrs,
		.nr_lbr = 3,
	};

	cr_assert_eq(build(&cfg, &s), 0xf8);
	cr_expect_eq(rd64(buf, 0x00) >> 48, 0xf8);
	cr_expect_eq(rd64(buf, 0x20), s.rflags, "0x20 RFLAGS");
	cr_expect_eq(rd64(buf, 0x28), s.ip, "0x28 RIP");
	cr_expect_eq(rd64(buf, 0x30), s.gpr[PEBS_RAX], "0x30 RAX");
	cr_expect_eq(rd64(buf, 0x68), s.gpr[PEBS_RDI], "0x68 RDI");
	cr_expect_eq(rd64(buf, 0x70), s.gpr[PEBS_R8], "0x70 R8");
	cr_expect_eq(rd64(buf, 0xa8), s.gpr[PEBS_R15], "0xA8 R15");
	cr_expect_eq(rd64(buf, 0xb0), lbrs[0].from, "0xB0 LBR[TOS].FROM");
	cr_expect_eq(rd64(buf, 0xb8), lbrs[0].to, "0xB8 LBR[TOS].TO");
	cr_expect_eq(rd64(buf, 0xc0), lbrs[0].info, "0xC0 LBR[TOS].INFO");
	cr_expect_eq(rd64(buf, 0xc8), lbrs[1].from, "0xC8 LBR[TOS-1].FROM");
	cr_expect_eq(rd64(buf, 0xd0), lbrs[1].to);
	cr_expect_eq(rd64(buf, 0xd8), lbrs[1].info);
	cr_expect_eq(rd64(buf, 0xe0), lbrs[2].from, "0xE0 oldest FROM");
	cr_expect_eq(rd64(buf, 0xe8), lbrs[2].to, "0xE8 oldest TO");
	cr_expect_eq(rd64(buf, 0xf0), lbrs[2].info, "0xF0 oldest INFO");
	expect_untouched_from(0xf8);
}

/* ---- outside long mode, no SSE ---- */

Test(pebs_record, adaptive_outside_long_mode)
{
	struct pebs_sample s = sample(false);
	struct pebs_config cfg = { .fmt = 5, .data_cfg = B(1) | B(2) };
	struct adaptive_want w = { .fmt = 5, .data_cfg = cfg.data_cfg };

	expect_adaptive(buf, build(&cfg, &s), &w, &s);
	/* explicit: R8-R15 (0x20 + 0x50 .. 0xb0) and XMM8-15 (0xb0 + 0x80 ..) zero */
	expect_zero(buf, 0x20 + 0x50, 64, "R8-R15");
	expect_zero(buf, 0xb0 + 0x80, 128, "XMM8-15");
	cr_expect_eq(rd64(buf, 0x30), s.gpr[PEBS_RAX] & 0xffffffffULL, "RAX lower half");
	cr_expect_eq(rd64(buf, 0x30) >> 32, 0, "RAX upper half");
	cr_expect_arr_eq(buf + 0xb0 + 0x70, s.xmm[7], 16, "XMM7 kept");

	s.sse = false;
	expect_adaptive(buf, build(&cfg, &s), &w, &s);
	expect_zero(buf, 0xb0, 256, "XMMs without SSE");
}

/* ---- LBR ordering and shortfall ---- */

Test(pebs_record, lbr_order_and_zero_fill)
{
	struct pebs_sample s = sample(true);
	struct pebs_config cfg = { .fmt = 4, .data_cfg = B(3) | (7ULL << 24), .lbr = lbrs };

	/* 5 available, 8 asked: TOS..TOS-4 in order, then 3 zero entries; size as configured */
	cfg.nr_lbr = 5;
	cr_assert_eq(build(&cfg, &s), 32 + 8 * 24);
	cr_expect_eq(rd64(buf, 0) >> 48, 32 + 8 * 24);
	for (unsigned int i = 0; i < 5; i++) {
		cr_expect_eq(rd64(buf, 32 + 24 * i), lbrs[i].from, "entry %u = TOS-%u", i, i);
		cr_expect_eq(rd64(buf, 32 + 24 * i + 8), lbrs[i].to);
		cr_expect_eq(rd64(buf, 32 + 24 * i + 16), lbrs[i].info);
	}
	expect_zero(buf, 32 + 5 * 24, 3 * 24, "missing entries");
	expect_untouched_from(32 + 8 * 24);

	/* more available than asked: only the 8 newest */
	cfg.nr_lbr = 20;
	cr_assert_eq(build(&cfg, &s), 32 + 8 * 24);
	expect_lbr_entries(buf, 32, 8, lbrs, 8);
	expect_untouched_from(32 + 8 * 24);

	/* none at all */
	cfg.lbr = NULL;
	cfg.nr_lbr = 3;
	cr_assert_eq(build(&cfg, &s), 32 + 8 * 24);
	expect_zero(buf, 32, 8 * 24, "no LBRs");

	/* one entry (field 0) */
	cfg.lbr = lbrs;
	cfg.data_cfg = B(3);
	cr_assert_eq(build(&cfg, &s), 32 + 24);
	expect_lbr_entries(buf, 32, 1, lbrs, 1);
}

/* ---- timed PEBS ---- */

Test(pebs_record, timed_retire_latency)
{
	struct pebs_sample s = sample(true);
	/* LBR Entries (bits 31:24) survive the [31:0] format; include bits do not */
	struct pebs_config cfg = {
		.fmt = 6,
		.timed = true,
		.data_cfg = B(0) | B(4) | (5ULL << 24) | B(33) | B(49),
		.counters = &counters,
	};
	static const struct {
		uint64_t in, out;
	} lat[] = {
		{ 0, 0 },
		{ 1, 1 },
		{ 0x1234, 0x1234 },
		{ 0xfffe, 0xfffe },
		{ 0xffff, 0xffff },
		{ 0x10000, 0xffff },
		{ 0x123456, 0xffff },
		{ ~0ULL, 0xffff },
	};
	const uint64_t size = 32 + 32 + 16 + 16;

	for (unsigned int i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
		s.retire_latency = lat[i].in;
		cr_assert_eq(build(&cfg, &s), size);
		cr_expect_eq(rd64(buf, 0), 0x05000011ULL | (lat[i].out << 32) | (size << 48),
			     "latency %#llx: qword0 %#llx", (unsigned long long) lat[i].in,
			     (unsigned long long) rd64(buf, 0));
		cr_expect_eq((rd64(buf, 0) >> 32) & 0xffff, lat[i].out, "Retire Latency [47:32]");
	}
	/* the rest of the record is unchanged by Timed PEBS */
	cr_expect_eq(rd64(buf, 0x08), s.eventing_ip);
	cr_expect_eq(rd64(buf, 0x20), s.dla);
	cr_expect_eq(rd32(buf, 0x40), B(1), "PMC1 included");
	cr_expect_eq(rd32(buf, 0x44), B(1), "FIXED1 included");
	cr_expect_eq(rd64(buf, 0x50), counters.pmc[1]);
	cr_expect_eq(rd64(buf, 0x58), counters.fixed[1]);

	/* without Timed PEBS: [47:0] is the format, include PMC bits show, FIXED bits cut */
	cfg.timed = false;
	cr_assert_eq(build(&cfg, &s), size);
	cr_expect_eq(rd64(buf, 0), 0x0000000205000011ULL | (size << 48));

	/* a basic-only record carries the latency too */
	cfg.timed = true;
	cfg.data_cfg = 0;
	s.retire_latency = 0x4321;
	cr_assert_eq(build(&cfg, &s), 32);
	cr_expect_eq(rd64(buf, 0), (0x4321ULL << 32) | (32ULL << 48));
}

/* ---- format 6 counters & metrics group ---- */

struct cntr_case {
	uint64_t data_cfg;
	uint32_t pmc, fixed, metrics;
};

ParameterizedTestParameters(pebs_record, counters_group)
{
	static struct cntr_case c[] = {
		/* Counters, PMC0/1/3, FIXED0/2 */
		{ B(4) | B(32) | B(33) | B(35) | B(48) | B(50), 0xb, 0x5, 0 },
		/* Counters + Metrics with FIXED_CTR3: fixed 3 and the metrics, bitvector 3 */
		{ B(4) | B(5) | B(51), 0, 0x8, 3 },
		/* Metrics without bit 51: the group is there, empty */
		{ B(5), 0, 0, 0 },
		/* Metrics + bit 51 without Counters: no PMC/FIXED despite include bits */
		{ B(5) | B(51) | B(32) | B(34), 0, 0, 3 },
		/* Counters without include bits: header only */
		{ B(4), 0, 0, 0 },
		/* every PMC and FIXED include bit, plus the metrics */
		{ B(4) | B(5) | (0xffffULL << 32) | (0xffULL << 48), 0xffff, 0xff, 3 },
		/* single PMC15 and FIXED7 (the top include bits) */
		{ B(4) | B(47) | B(55), 0x8000, 0x80, 0 },
	};

	return cr_make_param_array(struct cntr_case, c, sizeof(c) / sizeof(c[0]));
}

ParameterizedTest(struct cntr_case *p, pebs_record, counters_group)
{
	struct pebs_sample s = sample(true);
	struct pebs_config cfg = { .fmt = 6, .data_cfg = p->data_cfg, .counters = &counters };
	struct adaptive_want w = {
		.fmt = 6,
		.data_cfg = p->data_cfg,
		.c = &counters,
		.cntr = true,
		.pmc = p->pmc,
		.fixed = p->fixed,
		.metrics = p->metrics,
	};

	init_values();
	expect_adaptive(buf, build(&cfg, &s), &w, &s);

	/* after every other group, LBRs included */
	cfg.data_cfg = w.data_cfg = p->data_cfg | 0xf | (1ULL << 24);
	cfg.lbr = lbrs;
	cfg.nr_lbr = 2;
	w.nr_lbr = 2;
	expect_adaptive(buf, build(&cfg, &s), &w, &s);

	/* no values given: zeros, same layout */
	cfg.counters = NULL;
	w.c = NULL;
	expect_adaptive(buf, build(&cfg, &s), &w, &s);
}

/* A worked counters example with literal offsets. */
Test(pebs_record, counters_group_literal_offsets)
{
	struct pebs_sample s = sample(true);
	struct pebs_config cfg = {
		.fmt = 6,
		.data_cfg = B(4) | B(5) | B(34) | B(48) | B(51),
		.counters = &counters,
	};

	cr_assert_eq(build(&cfg, &s), 32 + 16 + 5 * 8);
	cr_expect_eq(rd64(buf, 0x20), 0x0000000900000004ULL, "PMC vec 0x4, FIXED vec 0x9");
	cr_expect_eq(rd64(buf, 0x28), 0x3, "Metrics vec 3, reserved 0");
	cr_expect_eq(rd64(buf, 0x30), counters.pmc[2], "PMC2");
	cr_expect_eq(rd64(buf, 0x38), counters.fixed[0], "FIXED0");
	cr_expect_eq(rd64(buf, 0x40), counters.fixed[3], "FIXED3");
	cr_expect_eq(rd64(buf, 0x48), counters.metrics_base, "metrics base");
	cr_expect_eq(rd64(buf, 0x50), counters.metrics, "PERF_METRICS");
	expect_untouched_from(0x58);
}

/* ---- invalid configurations and short buffers ---- */

Test(pebs_record, invalid_configs)
{
	struct pebs_sample s = sample(true);
	static const struct {
		unsigned int fmt;
		uint64_t data_cfg;
	} bad[] = {
		{ 0, 0 },
		{ 1, 0 },
		{ 2, 0 },
		{ 7, 0 },
		{ 0xf, 0 },
		/* counters group below format 6 */
		{ 4, B(4) },
		{ 5, B(4) },
		{ 4, B(5) },
		{ 5, B(5) | B(51) },
		{ 4, B(32) },
		{ 5, B(48) }, /* include bits < fmt 6 */
		/* reserved bits */
		{ 4, B(6) },
		{ 6, B(6) },
		{ 6, B(23) },
		{ 6, B(56) },
		{ 6, B(63) },
		{ 4, B(3) | (32ULL << 24) },
		{ 6, B(3) | (0xffULL << 24) }, /* > 32 LBRs */
		{ 3, B(0) },
	};

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pebs_config cfg = {
			.fmt = bad[i].fmt,
			.data_cfg = bad[i].data_cfg,
			.lbr = lbrs,
			.nr_lbr = 32,
			.counters = &counters,
		};

		cr_expect_eq(pebs_record_size(&cfg), 0, "case %u", i);
		cr_expect_eq(build(&cfg, &s), 0, "case %u", i);
		expect_untouched_from(0);
	}

	/* the LBR Entries field alone, without the LBR group, is fine */
	struct pebs_config ok = { .fmt = 4, .data_cfg = 0xffULL << 24 };

	cr_expect_eq(pebs_record_size(&ok), 32);
	/* 32 LBRs is the largest */
	ok.data_cfg = B(3) | (31ULL << 24);
	cr_expect_eq(pebs_record_size(&ok), 32 + 32 * 24);
}

Test(pebs_record, too_small_buffer_untouched)
{
	struct pebs_sample s = sample(true);
	struct pebs_config cfgs[] = {
		{ .fmt = 3 },
		{ .fmt = 4 },
		{ .fmt = 4, .data_cfg = 0xf | (31ULL << 24), .lbr = lbrs, .nr_lbr = 32 },
		{ .fmt = 6, .data_cfg = B(4) | B(5) | B(51) | B(32), .counters = &counters },
	};

	for (unsigned int i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		size_t size = pebs_record_size(&cfgs[i]);

		cr_assert_neq(size, 0);
		clear_buf();
		cr_expect_eq(pebs_record_build(&cfgs[i], &s, buf, size - 1), 0, "cap size-1");
		expect_untouched_from(0);
		cr_expect_eq(pebs_record_build(&cfgs[i], &s, buf, 0), 0, "cap 0");
		expect_untouched_from(0);
		cr_expect_eq(pebs_record_build(&cfgs[i], &s, buf, size), size, "exact fit");
		expect_untouched_from(size);
	}
}

/* ---- architectural PEBS (SDM §22.10; layout per Linux's struct arch_pebs_*) ---- */

#define CFG_EN	       B(63)
#define CFG_AUX	       B(62)
#define CFG_GPR	       B(61)
#define CFG_XMM	       B(49)
#define CFG_LBR(sel)   ((uint64_t) (sel) << 40)
#define CFG_CNTR_GP    B(36)
#define CFG_CNTR_FIXED B(37)
#define CFG_CNTR_MET   B(38)

static size_t arch_build(const struct arch_pebs_config *cfg, const struct pebs_sample *s)
{
	clear_buf();
	return arch_pebs_record_build(cfg, s, buf, sizeof(buf));
}

Test(pebs_record, arch_basic_only)
{
	struct pebs_sample s = sample(true);
	struct arch_pebs_config cfg = {
		.cfg_c = CFG_EN | 0xfffffc00ULL,
		.applicable = B(2) | B(32),
		.retire_valid = true,
	};

	cr_expect_eq(arch_pebs_record_size(&cfg), 64);
	cr_assert_eq(arch_build(&cfg, &s), 64);
	cr_expect_eq(rd64(buf, 0x00), 64 | B(30) | B(63), "header: size, 64BIT_MODE, BASIC");
	cr_expect_eq(rd64(buf, 0x08), 0, "header qword 1 reserved");
	cr_expect_eq(rd64(buf, 0x10), s.eventing_ip, "IP");
	cr_expect_eq(rd64(buf, 0x18), B(2) | B(32), "applicable counters");
	cr_expect_eq(rd64(buf, 0x20), s.tsc, "TSC");
	cr_expect_eq(rd64(buf, 0x28), 0x1234 | B(16), "retire latency + valid");
	expect_zero(buf, 0x30, 16, "basic reserved");
	expect_untouched_from(64);

	s.retire_latency = 0x20000;
	cr_assert_eq(arch_build(&cfg, &s), 64);
	cr_expect_eq(rd64(buf, 0x28), 0xffff | B(16), "saturates");
	cfg.retire_valid = false;
	cr_assert_eq(arch_build(&cfg, &s), 64);
	cr_expect_eq(rd64(buf, 0x28), 0, "not valid: 0");

	s.long_mode = false;
	cr_assert_eq(arch_build(&cfg, &s), 64);
	cr_expect_eq(rd64(buf, 0x00), 64 | B(63), "no 64BIT_MODE");
}

/*
 * All groups, 8 LBRs, counters GP0/GP2, FIXED0/FIXED1, metrics:
 * header 0x000 (16), basic 0x010 (48), aux 0x040 (64), GPRs 0x080 (160),
 * XER 0x120 (16 + 256), LBR 0x230 (48 + 8 * 24), counters 0x320 (16 + 6 * 8),
 * total 0x360.
 */
Test(pebs_record, arch_all_groups)
{
	struct pebs_sample s = sample(true);
	struct arch_pebs_config cfg = {
		.cfg_c = CFG_EN | CFG_AUX | CFG_GPR | CFG_XMM | CFG_LBR(1) | CFG_CNTR_GP |
			 CFG_CNTR_FIXED | CFG_CNTR_MET | B(35),
		.applicable = B(0),
		.retire_valid = true,
		.gp_allow = 0x5,
		.fixed_allow = 0x3,
		.counters = &counters,
		.lbr_ctl = 0x7f000f,
		.ler = { .from = 0x1e1e0001, .to = 0x1e1e0002, .info = 0x1e1e0003 },
		.lbr = lbrs,
		.nr_lbr = 32,
		.ssp = 0x00007ffff0005550ULL,
	};
	uint64_t hdr = 0x360 | B(30) | B(36) | B(37) | B(38) | (1ULL << 40) | B(49) | B(61) |
		       B(62) | B(63);

	cr_expect_eq(arch_pebs_record_size(&cfg), 0x360);
	cr_assert_eq(arch_build(&cfg, &s), 0x360);
	cr_expect_eq(rd64(buf, 0x00), hdr, "header %#llx", (unsigned long long) rd64(buf, 0));
	cr_expect_eq(rd64(buf, 0x10), s.eventing_ip);
	/* aux */
	cr_expect_eq(rd64(buf, 0x40), s.dla, "aux address");
	expect_zero(buf, 0x48, 32, "aux reserved");
	cr_expect_eq(rd64(buf, 0x68), s.data_src, "aux info");
	cr_expect_eq(rd64(buf, 0x70), s.latency, "latency");
	cr_expect_eq(rd64(buf, 0x78), s.tsx_aux, "tsx");
	/* GPRs, adaptive order, then SSP */
	cr_expect_eq(rd64(buf, 0x80), s.rflags);
	cr_expect_eq(rd64(buf, 0x88), s.ip);
	for (unsigned int i = 0; i < 16; i++)
		cr_expect_eq(rd64(buf, 0x90 + 8 * i), s.gpr[adaptive_order[i]], "GPR slot %u", i);
	cr_expect_eq(rd64(buf, 0x110), cfg.ssp, "SSP");
	cr_expect_eq(rd64(buf, 0x118), 0, "GPR reserved");
	/* XER */
	cr_expect_eq(rd64(buf, 0x120), B(1), "XER: XSAVE component 1 (SSE)");
	cr_expect_eq(rd64(buf, 0x128), 0);
	expect_xmm(buf, 0x130, &s);
	/* LBR */
	cr_expect_eq(rd64(buf, 0x230), 0, "LBR header reserved");
	cr_expect_eq(rd64(buf, 0x238), 0x7f000f, "LBR_CTL");
	cr_expect_eq(rd64(buf, 0x240), 8, "depth");
	cr_expect_eq(rd64(buf, 0x248), 0x1e1e0001, "LER FROM");
	cr_expect_eq(rd64(buf, 0x250), 0x1e1e0002, "LER TO");
	cr_expect_eq(rd64(buf, 0x258), 0x1e1e0003, "LER INFO");
	expect_lbr_entries(buf, 0x260, 8, lbrs, 8);
	/* counters */
	cr_expect_eq(expect_cntr_group(buf, 0x320, 0x5, 0x3, 3, &counters), 0x40);
	cr_expect_eq(rd64(buf, 0x330), counters.pmc[0]);
	cr_expect_eq(rd64(buf, 0x338), counters.pmc[2]);
	cr_expect_eq(rd64(buf, 0x358), counters.metrics);
	expect_untouched_from(0x360);
}

Test(pebs_record, arch_lbr_depths)
{
	struct pebs_sample s = sample(true);
	struct arch_pebs_config cfg = { .cfg_c = CFG_EN | CFG_LBR(2), .lbr = lbrs, .nr_lbr = 64 };

	/* selector 2: 16 entries after the 48-byte header at 0x40 */
	cr_assert_eq(arch_build(&cfg, &s), 64 + 48 + 16 * 24);
	cr_expect_eq(rd64(buf, 0) & 0xffff, 64 + 48 + 16 * 24);
	cr_expect_eq((rd64(buf, 0) >> 40) & 3, 2);
	cr_expect_eq(rd64(buf, 0x40 + 0x10), 16, "depth 16");
	expect_lbr_entries(buf, 0x70, 16, lbrs, 16);

	/* selector 3: the variable depth, 24, with only 10 available: zero-filled */
	cfg.cfg_c = CFG_EN | CFG_LBR(3);
	cfg.lbr_depth = 24;
	cfg.nr_lbr = 10;
	cr_assert_eq(arch_build(&cfg, &s), 64 + 48 + 24 * 24);
	cr_expect_eq(rd64(buf, 0x40 + 0x10), 24, "depth 24");
	expect_lbr_entries(buf, 0x70, 24, lbrs, 10);
	expect_zero(buf, 0x70 + 10 * 24, 14 * 24, "shortfall");
	expect_untouched_from(64 + 48 + 24 * 24);

	cfg.lbr_depth = 64;
	cr_expect_eq(arch_pebs_record_size(&cfg), 64 + 48 + 64 * 24);
	cfg.lbr_depth = 0;
	cr_expect_eq(arch_pebs_record_size(&cfg), 0);
	cfg.lbr_depth = 65;
	cr_expect_eq(arch_pebs_record_size(&cfg), 0);
	cr_expect_eq(arch_build(&cfg, &s), 0);
	expect_untouched_from(0);
}

/* Odd number of counter values: padded to 16 bytes, pad counted in the size. */
Test(pebs_record, arch_padding_and_outside_long_mode)
{
	struct pebs_sample s = sample(false);
	struct arch_pebs_config cfg = {
		.cfg_c = CFG_EN | CFG_GPR | CFG_CNTR_GP,
		.gp_allow = B(1),
		.fixed_allow = 0xff,
		.counters = &counters,
	};
	/* 16 + 48 + 160 + (16 + 8) = 248 -> 256 */
	cr_assert_eq(arch_build(&cfg, &s), 256);
	cr_expect_eq(rd64(buf, 0), 256 | B(36) | B(61) | B(63), "no 64BIT_MODE, CNTR GP");
	for (unsigned int i = 0; i < 8; i++)
		cr_expect_eq(rd64(buf, 0x50 + 8 * i), s.gpr[adaptive_order[i]] & 0xffffffffULL);
	expect_zero(buf, 0x50 + 0x40, 64, "R8-R15");
	cr_expect_eq(expect_cntr_group(buf, 0xe0, B(1), 0, 0, &counters), 24,
		     "FIXED not selected: fixed_allow ignored");
	expect_zero(buf, 0xf8, 8, "pad");
	expect_untouched_from(256);
}

Test(pebs_record, arch_invalid_and_short)
{
	struct pebs_sample s = sample(true);
	struct arch_pebs_config cfg = { .cfg_c = CFG_AUX | CFG_GPR };
	size_t size;

	cr_expect_eq(arch_pebs_record_size(&cfg), 0, "ARCH_PEBS_EN clear");
	cr_expect_eq(arch_build(&cfg, &s), 0);
	expect_untouched_from(0);

	cfg.cfg_c |= CFG_EN;
	size = arch_pebs_record_size(&cfg);
	cr_assert_eq(size, 16 + 48 + 64 + 160);
	clear_buf();
	cr_expect_eq(arch_pebs_record_build(&cfg, &s, buf, size - 1), 0);
	expect_untouched_from(0);
	cr_expect_eq(arch_pebs_record_build(&cfg, &s, buf, size), size);
	expect_untouched_from(size);
}

/*
 * The public layouts (vpmu/pebs.h, vpmu/msr.h) that the library, the VMM,
 * the tools and the guest programs share, against the SDM's numbers:
 * DS buffer management area (Vol. 3B Figure 20-8), reset slots
 * (22.6.2.4.2), the legacy GPR block (Figure 20-10), the LVT mask bit
 * (Vol. 3A Figure 11-8).
 */
Test(layout, public_headers_match_the_sdm)
{
	static const unsigned int legacy_off[16] = {
		0x10, 0x20, 0x28, 0x18,
		0x48, 0x40, 0x30, 0x38, /* RAX RCX RDX RBX RSP RBP RSI RDI */
		0x50, 0x58, 0x60, 0x68,
		0x70, 0x78, 0x80, 0x88, /* R8..R15 */
	};

	cr_expect_eq(DS_PEBS_BASE, 0x20);
	cr_expect_eq(DS_PEBS_INDEX, 0x28);
	cr_expect_eq(DS_PEBS_ABS_MAX, 0x30);
	cr_expect_eq(DS_PEBS_THRESHOLD, 0x38);
	cr_expect_eq(DS_PEBS_GP_RESET(0), 0x40);
	cr_expect_eq(DS_PEBS_GP_RESET(7), 0x78);
	cr_expect_eq(DS_PEBS_FIXED_RESET(4, 0), 0x80, "format 4: 8 GP slots, then fixed");
	cr_expect_eq(DS_PEBS_FIXED_RESET(5, 1), 0x148, "formats 5/6: 32 GP slots, then fixed");
	cr_expect_eq(DS_PEBS_FIXED_RESET(6, 3), 0x158);
	for (unsigned int r = 0; r < 16; r++)
		cr_expect_eq(pebs3_gpr_offset(r), legacy_off[r], "register %u", r);
	cr_expect_eq(APIC_LVT_MASKED, 1u << 16);
	cr_expect_eq(VPMU_FIELD_GET(APIC_LVT_DELIVERY_MODE, 0x10400), 4);
	cr_expect_eq(VPMU_FIELD_PREP(VPMU_GENMASK_ULL(11, 8), 0xf), 0xf00);
}
