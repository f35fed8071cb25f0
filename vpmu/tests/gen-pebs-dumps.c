/* SPDX-License-Identifier: MIT */
/*
 * Test helper: writes PEBS dump files (vpmu/pebs.h) whose records come
 * from vpmu/pebs-record.c's builders, and expected.json: for every dump,
 * the values each record was built from, in the shape `vpmu-pebs --json`
 * prints them. test-vpmu-pebs.py runs the real program and compares.
 *
 *   gen-pebs-dumps OUTDIR
 */
#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "vpmu/pebs.h"
#include "pebs-record.h"
#include "pebs-values.h"

static_assert(sizeof(struct vpmu_pebs_dump_header) == 112, "packed little-endian header");

static const char *const gpr_names[PEBS_NR_GPRS] = {
	"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15",
};

static const char *outdir;
static FILE *exp_f; /* expected.json */
static bool first_dump = true;

static uint8_t records[1 << 16];
static size_t records_len;
static unsigned int nr_records;
static struct pebs_lbr_entry lbrs[PEBS_TEST_LBRS];
static struct pebs_counters counters;

static struct pebs_sample sample(unsigned int seed, bool long_mode)
{
	struct pebs_sample s = {
		.eventing_ip = 0xffffffff81001000ULL + seed,
		.ip = 0xffffffff81002000ULL + seed,
		.rflags = 0x246 + ((uint64_t) seed << 32),
		.dla = 0x00007fffdead0000ULL + 8 * seed,
		.data_src = 0xa5 + seed,
		.latency = 0x0000012300004567ULL + seed,
		.tsx_aux = 0x0bad0000000000d1ULL + seed,
		.tsc = 0x0123456789abcdefULL + 1000 * seed,
		.retire_latency = 0x1234 + 7 * seed,
		.long_mode = long_mode,
		.sse = true,
	};

	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		s.gpr[r] = ((0xfe00ULL + r) << 48) | (0x00a50000ULL + 0x11 * (r + 1)) | seed << 20;
	for (unsigned int n = 0; n < 16; n++)
		for (unsigned int b = 0; b < 16; b++)
			s.xmm[n][b] = (uint8_t) (((n << 4) | b) ^ seed);
	return s;
}

static void init_values(void)
{
	pebs_test_values(lbrs, &counters);
}

/* ---- expected.json ---- */

static bool comma;

static void ekey(const char *k)
{
	fprintf(exp_f, "%s\"%s\":", comma ? "," : "", k);
	comma = true;
}

static void ex(const char *k, uint64_t v)
{
	ekey(k);
	fprintf(exp_f, "\"0x%" PRIx64 "\"", v);
}

static void eopen(const char *k)
{
	if (k)
		ekey(k);
	else if (comma)
		fputc(',', exp_f);
	fputc('{', exp_f);
	comma = false;
}

static void eclose(void)
{
	fputc('}', exp_f);
	comma = true;
}

static uint64_t gpr_value(const struct pebs_sample *s, unsigned int r)
{
	if (s->long_mode)
		return s->gpr[r];
	return r >= PEBS_R8 ? 0 : s->gpr[r] & 0xffffffffULL;
}

static void expect_gprs(const struct pebs_sample *s, bool ssp, uint64_t ssp_value)
{
	eopen("gprs");
	ex("rflags", s->rflags);
	ex("rip", s->ip);
	if (ssp)
		ex("ssp", ssp_value);
	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		ex(gpr_names[r], gpr_value(s, r));
	eclose();
}

static void expect_xmms(const struct pebs_sample *s, bool xstate)
{
	eopen("xmms");
	if (xstate)
		ex("xstate", ARCH_PEBS_XER_XSTATE_SSE);
	ekey("xmm");
	fputc('[', exp_f);
	for (unsigned int n = 0; n < 16; n++) {
		fprintf(exp_f, "%s\"0x", n ? "," : "");
		for (int b = 15; b >= 0; b--)
			fprintf(exp_f, "%02x",
				s->sse && (n < 8 || s->long_mode) ? s->xmm[n][b] : 0);
		fputc('"', exp_f);
	}
	fputc(']', exp_f);
	eclose();
}

static void expect_lbr_entry(const char *k, const struct pebs_lbr_entry *e)
{
	eopen(k);
	ex("from", e->from);
	ex("to", e->to);
	ex("info", e->info);
	eclose();
}

static void expect_lbrs(unsigned int n, unsigned int avail)
{
	static const struct pebs_lbr_entry zero;

	ekey("nr");
	fprintf(exp_f, "%u", n);
	ekey("entries");
	fputc('[', exp_f);
	comma = false;
	for (unsigned int i = 0; i < n; i++)
		expect_lbr_entry(NULL, i < avail ? &lbrs[i] : &zero);
	fputc(']', exp_f);
	comma = true;
}

static void expect_counters(uint32_t pmc, uint32_t fixed, uint32_t metrics)
{
	char k[8];

	eopen("counters");
	ex("pmc_mask", pmc);
	ex("fixed_mask", fixed);
	ex("metrics_mask", metrics);
	eopen("pmc");
	for (unsigned int i = 0; i < 32; i++)
		if (pmc & (1U << i)) {
			snprintf(k, sizeof(k), "%u", i);
			ex(k, counters.pmc[i]);
		}
	eclose();
	eopen("fixed");
	for (unsigned int i = 0; i < 16; i++)
		if (fixed & (1U << i)) {
			snprintf(k, sizeof(k), "%u", i);
			ex(k, counters.fixed[i]);
		}
	eclose();
	if (metrics & 1)
		ex("metrics_base", counters.metrics_base);
	if (metrics & 2)
		ex("metrics", counters.metrics);
	eclose();
}

static void expect_groups(const char *const *g)
{
	ekey("groups");
	fputc('[', exp_f);
	for (unsigned int i = 0; g[i]; i++)
		fprintf(exp_f, "%s\"%s\"", i ? "," : "", g[i]);
	fputc(']', exp_f);
}

/* ---- dumps ---- */

static void dump_begin(void)
{
	records_len = 0;
	nr_records = 0;
	fprintf(exp_f, "%s\n{\"records\":[", first_dump ? "" : ",");
	first_dump = false;
	comma = false;
}

static void dump_end(const char *file, const char *model, uint64_t caps, uint64_t data_cfg,
		     uint64_t pebs_enable)
{
	struct vpmu_pebs_dump_header h;
	char path[4096];
	FILE *f;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, VPMU_PEBS_DUMP_MAGIC, 8);
	h.version = VPMU_PEBS_DUMP_VERSION;
	h.header_size = sizeof(h);
	snprintf(h.model, sizeof(h.model), "%s", model);
	h.perf_capabilities = caps;
	h.pebs_enable = pebs_enable;
	h.data_cfg = data_cfg;
	h.ds_area = 0xfffffe0000001000ULL;
	h.pebs_base = 0xfffffe0000010000ULL;
	h.pebs_index = h.pebs_base + records_len;
	h.pebs_threshold = h.pebs_base + 0x8000;
	h.records_len = records_len;

	snprintf(path, sizeof(path), "%s/%s", outdir, file);
	f = fopen(path, "wb");
	if (!f || fwrite(&h, sizeof(h), 1, f) != 1 ||
	    (records_len && fwrite(records, records_len, 1, f) != 1) || fclose(f)) {
		fprintf(stderr, "gen-pebs-dumps: cannot write %s\n", path);
		exit(1);
	}
	fprintf(exp_f,
		"],\"file\":\"%s\",\"model\":\"%s\",\"perf_capabilities\":\"0x%" PRIx64
		"\",\"decoded\":%u}",
		file, model, caps, nr_records);
}

static void add(size_t size)
{
	if (!size) {
		fprintf(stderr, "gen-pebs-dumps: the builder refused record %u\n", nr_records);
		exit(1);
	}
	records_len += size;
	nr_records++;
}

static void legacy_record(const struct pebs_config *cfg, const struct pebs_sample *s)
{
	size_t off = records_len;
	size_t size = pebs_record_build(cfg, s, records + off, sizeof(records) - off);
	uint64_t dc = cfg->data_cfg;

	add(size);
	eopen(NULL);
	ekey("offset");
	fprintf(exp_f, "%zu", off);
	ekey("size");
	fprintf(exp_f, "%zu", size);
	ex("eventing_ip", s->eventing_ip);
	ex("applicable", cfg->applicable);
	ex("tsc", s->tsc);
	if (cfg->fmt == 3) {
		static const char *const g[] = { "basic", "meminfo", "gprs", NULL };

		expect_groups(g);
		eopen("meminfo");
		ex("dla", s->dla);
		ex("data_src", s->data_src);
		ex("latency", s->latency);
		ex("tsx", s->tsx_aux);
		eclose();
		expect_gprs(s, false, 0);
		eclose();
		return;
	}
	{
		const char *g[8];
		unsigned int n = 0;

		g[n++] = "basic";
		if (dc & PEBS_DATACFG_MEMINFO)
			g[n++] = "meminfo";
		if (dc & PEBS_DATACFG_GP)
			g[n++] = "gprs";
		if (dc & PEBS_DATACFG_XMMS)
			g[n++] = "xmms";
		if (dc & PEBS_DATACFG_LBRS)
			g[n++] = "lbrs";
		if (dc & (PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS))
			g[n++] = "counters";
		g[n] = NULL;
		expect_groups(g);
	}
	if (cfg->timed) {
		ex("record_format", dc & PEBS_BASIC_TIMED_RECORD_FORMAT);
		ekey("retire_latency");
		fprintf(exp_f, "%" PRIu64, s->retire_latency > 0xffff ? 0xffff : s->retire_latency);
	} else {
		ex("record_format", dc & PEBS_BASIC_RECORD_FORMAT);
	}
	if (dc & PEBS_DATACFG_MEMINFO) {
		eopen("meminfo");
		ex("dla", s->dla);
		ex("data_src", s->data_src);
		ex("latency", s->latency);
		ex("tsx", s->tsx_aux);
		eclose();
	}
	if (dc & PEBS_DATACFG_GP)
		expect_gprs(s, false, 0);
	if (dc & PEBS_DATACFG_XMMS)
		expect_xmms(s, false);
	if (dc & PEBS_DATACFG_LBRS) {
		eopen("lbrs");
		expect_lbrs((unsigned int) FIELD_GET(PEBS_DATACFG_LBR_ENTRIES, dc) + 1,
			    cfg->nr_lbr);
		eclose();
	}
	if (dc & (PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS)) {
		uint32_t pmc = 0, fixed = 0, met = 0;

		if (dc & PEBS_DATACFG_CNTR) {
			pmc = (uint32_t) FIELD_GET(PEBS_DATACFG_INCLUDE_PMC, dc);
			fixed = (uint32_t) FIELD_GET(PEBS_DATACFG_INCLUDE_FIXED, dc);
		}
		if ((dc & PEBS_DATACFG_METRICS) && (dc & BIT_ULL(48 + 3)))
			met = 3;
		expect_counters(pmc, fixed, met);
	}
	eclose();
}

static void arch_record(const struct arch_pebs_config *cfg, const struct pebs_sample *s)
{
	size_t off = records_len;
	size_t size = arch_pebs_record_build(cfg, s, records + off, sizeof(records) - off);
	uint64_t c = cfg->cfg_c;
	const char *g[8];
	unsigned int n = 0;

	add(size);
	eopen(NULL);
	ekey("offset");
	fprintf(exp_f, "%zu", off);
	ekey("size");
	fprintf(exp_f, "%zu", size);
	ekey("mode64");
	fprintf(exp_f, "%s", s->long_mode ? "true" : "false");
	ex("eventing_ip", s->eventing_ip);
	ex("applicable", cfg->applicable);
	ex("tsc", s->tsc);
	ekey("retire_valid");
	fprintf(exp_f, "%s", cfg->retire_valid ? "true" : "false");
	ekey("retire_latency");
	fprintf(exp_f, "%" PRIu64,
		!cfg->retire_valid	     ? 0
		: s->retire_latency > 0xffff ? 0xffff
					     : s->retire_latency);
	g[n++] = "basic";
	if (c & ARCH_PEBS_AUX)
		g[n++] = "meminfo";
	if (c & ARCH_PEBS_GPR)
		g[n++] = "gprs";
	if (c & ARCH_PEBS_VECR_XMM)
		g[n++] = "xmms";
	if (c & ARCH_PEBS_LBR)
		g[n++] = "lbrs";
	if (c & (ARCH_PEBS_CNTR_GP | ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_CNTR_METRICS))
		g[n++] = "counters";
	g[n] = NULL;
	expect_groups(g);
	if (c & ARCH_PEBS_AUX) {
		eopen("meminfo");
		ex("dla", s->dla);
		ex("data_src", s->data_src);
		ex("latency", s->latency);
		ex("tsx", s->tsx_aux);
		eclose();
	}
	if (c & ARCH_PEBS_GPR)
		expect_gprs(s, true, cfg->ssp);
	if (c & ARCH_PEBS_VECR_XMM)
		expect_xmms(s, true);
	if (c & ARCH_PEBS_LBR) {
		unsigned int sel = (unsigned int) FIELD_GET(ARCH_PEBS_LBR, c);

		eopen("lbrs");
		ekey("selector");
		fprintf(exp_f, "%u", sel);
		ex("lbr_ctl", cfg->lbr_ctl);
		expect_lbr_entry("ler", &cfg->ler);
		expect_lbrs(sel == 3 ? cfg->lbr_depth : 8 * sel, cfg->nr_lbr);
		eclose();
	}
	if (c & (ARCH_PEBS_CNTR_GP | ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_CNTR_METRICS))
		expect_counters(c & ARCH_PEBS_CNTR_GP ? cfg->gp_allow : 0,
				c & ARCH_PEBS_CNTR_FIXED ? cfg->fixed_allow : 0,
				c & ARCH_PEBS_CNTR_METRICS ? 3 : 0);
	eclose();
}

#define CAPS_FMT(n) FIELD_PREP(PERF_CAP_PEBS_FORMAT, n)

int main(int argc, char **argv)
{
	char path[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: gen-pebs-dumps OUTDIR\n");
		return 1;
	}
	outdir = argv[1];
	snprintf(path, sizeof(path), "%s/expected.json", outdir);
	exp_f = fopen(path, "w");
	if (!exp_f) {
		fprintf(stderr, "gen-pebs-dumps: cannot write %s\n", path);
		return 1;
	}
	init_values();
	fprintf(exp_f, "[");

	/* Format 3 (Skylake-Server): 64-bit and 32-bit mode records. */
	dump_begin();
	for (unsigned int i = 0; i < 3; i++) {
		struct pebs_config cfg = { .fmt = 3, .applicable = 1ULL << i };
		struct pebs_sample s = sample(i, i != 1);

		legacy_record(&cfg, &s);
	}
	dump_end("fmt3.bin", "Skylake-Server", CAPS_FMT(3) | 5, 0, 0xf);

	/* Format 4 (Icelake-Server): the 16 group combinations, varied LBR depths. */
	dump_begin();
	for (unsigned int combo = 0; combo < 16; combo++) {
		static const unsigned int depth[] = { 32, 1, 3, 16 };
		uint64_t dc = combo;
		struct pebs_config cfg = { .fmt = 4,
					   .applicable = 1ULL << (combo % 8),
					   .lbr = lbrs,
					   .nr_lbr = combo == 15 ? 5 : 32 };
		struct pebs_sample s = sample(combo + 10, true);

		if (dc & PEBS_DATACFG_LBRS)
			dc |= FIELD_PREP(PEBS_DATACFG_LBR_ENTRIES, depth[combo % 4] - 1);
		cfg.data_cfg = dc;
		legacy_record(&cfg, &s);
	}
	dump_end("fmt4.bin", "Icelake-Server", CAPS_FMT(4) | PERF_CAP_PEBS_BASELINE | 5, 0xf, 0xff);

	/* Format 5, basic + memory info. */
	dump_begin();
	{
		struct pebs_config cfg = { .fmt = 5, .applicable = 2, .data_cfg = 1 };
		struct pebs_sample s = sample(40, true);

		legacy_record(&cfg, &s);
	}
	dump_end("fmt5.bin", "Icelake-Server", CAPS_FMT(5) | PERF_CAP_PEBS_BASELINE, 1, 0x2);

	/* Format 6 (LunarLake), timed: the counters & metrics group. */
	dump_begin();
	{
		static const uint64_t dcs[] = {
			0,
			PEBS_DATACFG_CNTR | (0xffULL << 32) | (0xfULL << 48),
			PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS | (0x05ULL << 32) | (0x9ULL << 48),
			PEBS_DATACFG_METRICS | (0x8ULL << 48),
			PEBS_DATACFG_MEMINFO | PEBS_DATACFG_GP | PEBS_DATACFG_XMMS |
				PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS | (0x3ULL << 32) |
				(0xfULL << 48),
			PEBS_DATACFG_CNTR | (0x80ULL << 32),
		};

		for (unsigned int i = 0; i < ARRAY_SIZE(dcs); i++) {
			struct pebs_config cfg = { .fmt = 6,
						   .timed = true,
						   .applicable = 1ULL << i,
						   .data_cfg = dcs[i],
						   .counters = &counters };
			struct pebs_sample s = sample(50 + i, true);

			if (i == 5)
				s.retire_latency = 0x12345; /* saturates at 0xffff */
			legacy_record(&cfg, &s);
		}
	}
	dump_end("fmt6.bin", "LunarLake",
		 CAPS_FMT(6) | PERF_CAP_PEBS_BASELINE | PERF_CAP_PEBS_TIMING_INFO, 0x10, 0xff);

	/* Architectural PEBS: every group, each LBR selector, padding. */
	dump_begin();
	{
		static const uint64_t cfgs[] = {
			ARCH_PEBS_EN,
			ARCH_PEBS_EN | ARCH_PEBS_AUX | ARCH_PEBS_GPR | ARCH_PEBS_VECR_XMM |
				FIELD_PREP(ARCH_PEBS_LBR, 1) | ARCH_PEBS_CNTR_GP |
				ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_CNTR_METRICS,
			ARCH_PEBS_EN | FIELD_PREP(ARCH_PEBS_LBR, 2),
			ARCH_PEBS_EN | FIELD_PREP(ARCH_PEBS_LBR, 3) | ARCH_PEBS_AUX,
			ARCH_PEBS_EN | ARCH_PEBS_CNTR_GP, /* odd count: padded */
			ARCH_PEBS_EN | ARCH_PEBS_GPR | ARCH_PEBS_CNTR_FIXED,
		};

		for (unsigned int i = 0; i < ARRAY_SIZE(cfgs); i++) {
			struct arch_pebs_config cfg = {
				.cfg_c = cfgs[i],
				.applicable = 1ULL << (i + 32 * (i & 1)),
				.retire_valid = i != 2,
				.gp_allow = i == 4 ? 0x7 : 0x5,
				.fixed_allow = 0x3,
				.counters = &counters,
				.lbr_depth = 5,
				.lbr_ctl = 0x7f000f + i,
				.ler = { 0xa000 + i, 0xb000 + i, 0xc000 + i },
				.lbr = lbrs,
				.nr_lbr = i == 2 ? 10 : 64,
				.ssp = 0x00007ffff0000000ULL + i,
			};
			struct pebs_sample s = sample(70 + i, i != 5);

			arch_record(&cfg, &s);
		}
	}
	dump_end("arch.bin", "arch-pebs",
		 CAPS_FMT(PEBS_FMT_ARCH) | PERF_CAP_PEBS_TIMING_INFO | PERF_CAP_PEBS_TRAP, 0, 0);

	/* An empty buffer decodes to zero records. */
	dump_begin();
	dump_end("empty.bin", "Icelake-Server", CAPS_FMT(4) | PERF_CAP_PEBS_BASELINE, 0, 0);

	fprintf(exp_f, "\n]\n");
	if (fclose(exp_f)) {
		fprintf(stderr, "gen-pebs-dumps: cannot write expected.json\n");
		return 1;
	}
	return 0;
}
