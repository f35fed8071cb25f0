/* SPDX-License-Identifier: MIT */
/*
 * pebs_decode_record() is the inverse of vpmu/pebs-record.c: records
 * built there decode back to the values they were built from, and every
 * truncation or damaged size is an error, never a read out of bounds
 * (records are decoded from heap copies of exactly their length so that
 * ASan sees any overread).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "vpmu/msr.h"
#include "pebs-decode.h"
#include "pebs-record.h"
#include "pebs-values.h"

static uint8_t buf[8192];
static struct pebs_lbr_entry lbrs[PEBS_TEST_LBRS];
static struct pebs_counters counters;

static struct pebs_sample sample(unsigned int seed, bool long_mode)
{
	struct pebs_sample s = {
		.eventing_ip = 0xffffffff81001111ULL + seed,
		.ip = 0xffffffff81002222ULL + seed,
		.rflags = 0x200a46ULL,
		.dla = 0x00007fffdead1000ULL + seed,
		.data_src = 0xa5,
		.latency = 0x0000012300004567ULL,
		.tsx_aux = 0x0bad0000000000d1ULL,
		.tsc = 0x0123456789abcdefULL + seed,
		.retire_latency = 0x1234 + seed,
		.long_mode = long_mode,
		.sse = true,
	};

	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		s.gpr[r] = ((0xfe00ULL + r) << 48) | (0x00a50000ULL + 0x11 * (r + 1));
	for (unsigned int n = 0; n < 16; n++)
		for (unsigned int b = 0; b < 16; b++)
			s.xmm[n][b] = (uint8_t) (((n << 4) | b) ^ 0x5a ^ seed);
	return s;
}

static void init_values(void)
{
	pebs_test_values(lbrs, &counters);
}

TestSuite(pebs_decode, .init = init_values);

static uint64_t want_gpr(const struct pebs_sample *s, unsigned int r)
{
	if (s->long_mode)
		return s->gpr[r];
	return r >= PEBS_R8 ? 0 : s->gpr[r] & 0xffffffffULL;
}

/* Decode from a heap copy of exactly len bytes. */
static int decode(const struct pebs_decode_info *info, const uint8_t *p, size_t len,
		  struct pebs_decoded *d, const char **why)
{
	uint8_t *copy = malloc(len ? len : 1);
	int r;

	cr_assert_not_null(copy);
	memcpy(copy, p, len);
	r = pebs_decode_record(info, copy, len, d, why);
	free(copy);
	return r;
}

/* Every proper prefix of a record fails cleanly. */
static void expect_prefixes_fail(const struct pebs_decode_info *info, size_t size)
{
	struct pebs_decoded *d = malloc(sizeof(*d));
	const char *why;

	for (size_t len = 0; len < size; len++) {
		why = NULL;
		cr_expect_lt(decode(info, buf, len, d, &why), 0, "prefix %zu of %zu decoded", len,
			     size);
		cr_expect_not_null(why);
	}
	free(d);
}

static void expect_gprs(const struct pebs_decoded *d, const struct pebs_sample *s)
{
	cr_expect_eq(d->rflags, s->rflags);
	cr_expect_eq(d->ip, s->ip);
	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		cr_expect_eq(d->gpr[r], want_gpr(s, r), "GPR %u", r);
}

static void expect_xmms(const struct pebs_decoded *d, const struct pebs_sample *s)
{
	for (unsigned int n = 0; n < 16; n++) {
		uint8_t want[16] = { 0 };

		if (s->sse && (n < 8 || s->long_mode))
			memcpy(want, s->xmm[n], 16);
		cr_expect_arr_eq(d->xmm[n], want, 16, "XMM%u", n);
	}
}

static void expect_meminfo(const struct pebs_decoded *d, const struct pebs_sample *s)
{
	cr_expect(d->groups & PEBS_DEC_MEMINFO);
	cr_expect_eq(d->dla, s->dla);
	cr_expect_eq(d->data_src, s->data_src);
	cr_expect_eq(d->latency, s->latency);
	cr_expect_eq(d->tsx, s->tsx_aux);
}

static void expect_lbrs(const struct pebs_decoded *d, unsigned int n, unsigned int avail)
{
	cr_expect_eq(d->nr_lbr, n);
	for (unsigned int i = 0; i < n && i < d->nr_lbr; i++) {
		bool have = i < avail;

		cr_expect_eq(d->lbr[i].from, have ? lbrs[i].from : 0, "LBR %u from", i);
		cr_expect_eq(d->lbr[i].to, have ? lbrs[i].to : 0, "LBR %u to", i);
		cr_expect_eq(d->lbr[i].info, have ? lbrs[i].info : 0, "LBR %u info", i);
	}
}

static void expect_counters(const struct pebs_decoded *d, uint32_t pmc, uint32_t fixed,
			    uint32_t metrics)
{
	cr_expect(d->groups & PEBS_DEC_CNTR);
	cr_expect_eq(d->pmc_mask, pmc);
	cr_expect_eq(d->fixed_mask, fixed);
	cr_expect_eq(d->metrics_mask, metrics);
	for (unsigned int i = 0; i < 32; i++)
		if (pmc & (1U << i))
			cr_expect_eq(d->counters.pmc[i], counters.pmc[i], "PMC%u", i);
	for (unsigned int i = 0; i < 16; i++)
		if (fixed & (1U << i))
			cr_expect_eq(d->counters.fixed[i], counters.fixed[i], "FIXED%u", i);
	if (metrics & 1)
		cr_expect_eq(d->counters.metrics_base, counters.metrics_base);
	if (metrics & 2)
		cr_expect_eq(d->counters.metrics, counters.metrics);
}

Test(pebs_decode, format3)
{
	for (int lm = 0; lm < 2; lm++) {
		struct pebs_config cfg = { .fmt = 3, .applicable = 0x5 };
		struct pebs_decode_info info = { .fmt = 3 };
		struct pebs_sample s = sample(3, lm);
		struct pebs_decoded d;
		const char *why = NULL;
		size_t size = pebs_record_build(&cfg, &s, buf, sizeof(buf));

		cr_assert_eq(size, 200);
		cr_assert_eq(decode(&info, buf, size, &d, &why), 0, "%s", why);
		cr_expect_eq(d.size, 200);
		cr_expect_eq(d.eventing_ip, s.eventing_ip);
		cr_expect_eq(d.applicable, 0x5);
		cr_expect_eq(d.tsc, s.tsc);
		cr_expect(!d.has_retire_latency);
		expect_meminfo(&d, &s);
		expect_gprs(&d, &s);
		expect_prefixes_fail(&info, size);
	}
}

/* Format 4: the 16 combinations of Memory Info, GPRs, XMMs, LBRs. */
Test(pebs_decode, format4_all_group_combinations)
{
	for (unsigned int combo = 0; combo < 16; combo++) {
		unsigned int n_lbr = 1 + (combo * 7) % 32;
		uint64_t dc = combo;
		struct pebs_config cfg = { .fmt = 4,
					   .applicable = 1ULL << combo,
					   .lbr = lbrs,
					   .nr_lbr = combo == 9 ? 2 : 32 };
		struct pebs_decode_info info = { .fmt = 4 };
		struct pebs_sample s = sample(combo, combo != 6);
		struct pebs_decoded d;
		const char *why = NULL;
		size_t size;

		if (dc & PEBS_DATACFG_LBRS)
			dc |= FIELD_PREP(PEBS_DATACFG_LBR_ENTRIES, n_lbr - 1);
		cfg.data_cfg = dc;
		size = pebs_record_build(&cfg, &s, buf, sizeof(buf));
		cr_assert_neq(size, 0);
		cr_assert_eq(decode(&info, buf, size, &d, &why), 0, "combo %u: %s", combo, why);
		cr_expect_eq(d.size, size, "combo %u", combo);
		cr_expect_eq(d.record_format, dc);
		cr_expect_eq(d.eventing_ip, s.eventing_ip);
		cr_expect_eq(d.applicable, 1ULL << combo);
		cr_expect_eq(d.tsc, s.tsc);
		cr_expect_eq(!!(d.groups & PEBS_DEC_MEMINFO), !!(combo & 1));
		cr_expect_eq(!!(d.groups & PEBS_DEC_GPRS), !!(combo & 2));
		cr_expect_eq(!!(d.groups & PEBS_DEC_XMMS), !!(combo & 4));
		cr_expect_eq(!!(d.groups & PEBS_DEC_LBRS), !!(combo & 8));
		cr_expect(!(d.groups & PEBS_DEC_CNTR));
		if (combo & 1)
			expect_meminfo(&d, &s);
		if (combo & 2)
			expect_gprs(&d, &s);
		if (combo & 4)
			expect_xmms(&d, &s);
		if (combo & 8)
			expect_lbrs(&d, n_lbr, cfg.nr_lbr);
		expect_prefixes_fail(&info, size);
		/* With more bytes after it, the record still ends where its size says. */
		cr_expect_eq(decode(&info, buf, sizeof(buf), &d, &why), 0);
		cr_expect_eq(d.size, size);
	}
}

Test(pebs_decode, format6_counters_group_timed)
{
	static const struct {
		uint64_t dc;
		uint32_t pmc, fixed, metrics;
	} cases[] = {
		{ PEBS_DATACFG_CNTR | (0xffULL << 32) | (0xfULL << 48), 0xff, 0xf, 0 },
		{ PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS | (0x5ULL << 32) | (0x9ULL << 48), 0x5,
		  0x9, 3 },
		{ PEBS_DATACFG_METRICS | (0x8ULL << 48), 0, 0, 3 },
		{ PEBS_DATACFG_METRICS, 0, 0, 0 }, /* metrics without FIXED3: empty group */
		{ 0x7 | PEBS_DATACFG_CNTR | (0x1ULL << 32), 0x1, 0, 0 },
	};

	for (int timed = 0; timed < 2; timed++)
		for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct pebs_config cfg = { .fmt = 6,
						   .timed = timed,
						   .applicable = 3,
						   .data_cfg = cases[i].dc,
						   .counters = &counters };
			struct pebs_decode_info info = { .fmt = 6, .timed = timed };
			struct pebs_sample s = sample(i, true);
			struct pebs_decoded d;
			const char *why = NULL;
			size_t size = pebs_record_build(&cfg, &s, buf, sizeof(buf));

			cr_assert_neq(size, 0, "case %u", i);
			cr_assert_eq(decode(&info, buf, size, &d, &why), 0, "case %u: %s", i, why);
			cr_expect_eq(d.size, size);
			expect_counters(&d, cases[i].pmc, cases[i].fixed, cases[i].metrics);
			cr_expect_eq(d.has_retire_latency, timed);
			if (timed) {
				cr_expect_eq(d.retire_latency, s.retire_latency);
				cr_expect_eq(d.record_format, cases[i].dc & 0xffffffffULL);
			} else {
				cr_expect_eq(d.record_format, cases[i].dc & GENMASK_ULL(47, 0));
			}
			if (cases[i].dc & PEBS_DATACFG_GP)
				expect_gprs(&d, &s);
			expect_prefixes_fail(&info, size);
		}
}

Test(pebs_decode, timed_retire_latency_saturates)
{
	struct pebs_config cfg = { .fmt = 6, .timed = true, .applicable = 1 };
	struct pebs_decode_info info = { .fmt = 6, .timed = true };
	struct pebs_sample s = sample(0, true);
	struct pebs_decoded d;
	const char *why = NULL;

	s.retire_latency = 0x123456;
	cr_assert_eq(pebs_record_build(&cfg, &s, buf, sizeof(buf)), 32);
	cr_assert_eq(decode(&info, buf, 32, &d, &why), 0);
	cr_expect_eq(d.retire_latency, 0xffff);
	cr_expect(d.retire_valid);
}

Test(pebs_decode, arch_pebs)
{
	static const uint64_t cfgs[] = {
		ARCH_PEBS_EN,
		ARCH_PEBS_EN | ARCH_PEBS_AUX | ARCH_PEBS_GPR | ARCH_PEBS_VECR_XMM |
			FIELD_PREP(ARCH_PEBS_LBR, 1) | ARCH_PEBS_CNTR_GP | ARCH_PEBS_CNTR_FIXED |
			ARCH_PEBS_CNTR_METRICS,
		ARCH_PEBS_EN | FIELD_PREP(ARCH_PEBS_LBR, 2) | ARCH_PEBS_GPR,
		ARCH_PEBS_EN | FIELD_PREP(ARCH_PEBS_LBR, 3) | ARCH_PEBS_AUX,
		ARCH_PEBS_EN | ARCH_PEBS_CNTR_GP,
		ARCH_PEBS_EN | ARCH_PEBS_VECR_XMM | ARCH_PEBS_CNTR_FIXED,
	};

	for (unsigned int i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		uint64_t c = cfgs[i];
		struct arch_pebs_config cfg = {
			.cfg_c = c,
			.applicable = 0x100000001ULL << (i % 2),
			.retire_valid = i != 3,
			.gp_allow = i == 4 ? 0x7 : 0x81,
			.fixed_allow = 0x5,
			.counters = &counters,
			.lbr_depth = 37,
			.lbr_ctl = 0x7f0001,
			.ler = { 0x1111, 0x2222, 0x3333 },
			.lbr = lbrs,
			.nr_lbr = i == 3 ? 20 : 64,
			.ssp = 0x7ffff0001000ULL,
		};
		struct pebs_decode_info info = { .fmt = PEBS_FMT_ARCH };
		struct pebs_sample s = sample(i, i != 2);
		struct pebs_decoded d;
		const char *why = NULL;
		size_t size = arch_pebs_record_build(&cfg, &s, buf, sizeof(buf));

		cr_assert_neq(size, 0, "case %u", i);
		cr_assert_eq(decode(&info, buf, size, &d, &why), 0, "case %u: %s", i, why);
		cr_expect_eq(d.size, size);
		cr_expect_eq(d.mode64, s.long_mode);
		cr_expect_eq(d.eventing_ip, s.eventing_ip);
		cr_expect_eq(d.applicable, cfg.applicable);
		cr_expect_eq(d.tsc, s.tsc);
		cr_expect_eq(d.retire_valid, cfg.retire_valid);
		cr_expect_eq(d.retire_latency, cfg.retire_valid ? s.retire_latency : 0);
		if (c & ARCH_PEBS_AUX)
			expect_meminfo(&d, &s);
		if (c & ARCH_PEBS_GPR) {
			expect_gprs(&d, &s);
			cr_expect_eq(d.ssp, cfg.ssp);
		}
		if (c & ARCH_PEBS_VECR_XMM) {
			expect_xmms(&d, &s);
			cr_expect_eq(d.xstate, ARCH_PEBS_XER_XSTATE_SSE);
		}
		cr_expect_eq(!!(d.groups & PEBS_DEC_LBRS), !!(c & ARCH_PEBS_LBR));
		if (c & ARCH_PEBS_LBR) {
			unsigned int sel = (unsigned int) FIELD_GET(ARCH_PEBS_LBR, c);

			cr_expect_eq(d.lbr_sel, sel);
			cr_expect_eq(d.lbr_ctl, cfg.lbr_ctl);
			cr_expect_eq(d.ler.from, 0x1111);
			cr_expect_eq(d.ler.to, 0x2222);
			cr_expect_eq(d.ler.info, 0x3333);
			expect_lbrs(&d, sel == 3 ? 37 : 8 * sel, cfg.nr_lbr);
		}
		if (c & (ARCH_PEBS_CNTR_GP | ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_CNTR_METRICS))
			expect_counters(&d, c & ARCH_PEBS_CNTR_GP ? cfg.gp_allow : 0,
					c & ARCH_PEBS_CNTR_FIXED ? cfg.fixed_allow : 0,
					c & ARCH_PEBS_CNTR_METRICS ? 3 : 0);
		else
			cr_expect(!(d.groups & PEBS_DEC_CNTR));
		expect_prefixes_fail(&info, size);
	}
}

/* Sizes that lie: too big for the buffer, too small or too big for the groups. */
Test(pebs_decode, damaged_sizes)
{
	struct pebs_config cfg = { .fmt = 4, .applicable = 1, .data_cfg = 0x3 };
	struct pebs_decode_info info = { .fmt = 4 };
	struct pebs_sample s = sample(0, true);
	struct pebs_decoded d;
	const char *why;
	size_t size = pebs_record_build(&cfg, &s, buf, sizeof(buf));
	uint64_t q = 0;

	cr_assert_eq(size, 32 + 32 + 144);
	memcpy(&q, buf, 8);
	for (uint64_t bad = 0; bad < 0x10000; bad += 8) {
		uint64_t nq = (q & GENMASK_ULL(47, 0)) | (bad << 48);

		if (bad == size)
			continue;
		memcpy(buf, &nq, 8);
		why = NULL;
		cr_expect_lt(decode(&info, buf, size + 64, &d, &why), 0, "size %#llx decoded",
			     (unsigned long long) bad);
		cr_expect_not_null(why);
	}
	/* A format 4 record claiming the format 6 counters group */
	q = (q & ~GENMASK_ULL(47, 0)) | PEBS_DATACFG_CNTR;
	memcpy(buf, &q, 8);
	cr_expect_eq(decode(&info, buf, size, &d, &why), -EINVAL);

	/* Arch PEBS: size 0, unaligned, past the end, CONTINUED */
	info.fmt = PEBS_FMT_ARCH;
	for (unsigned int i = 0; i < 4; i++) {
		static const uint64_t hdr[] = { ARCH_PEBS_HDR_BASIC, ARCH_PEBS_HDR_BASIC | 0x48,
						ARCH_PEBS_HDR_BASIC | 0x1000,
						ARCH_PEBS_HDR_BASIC | ARCH_PEBS_HDR_CONTINUED |
							0x40 };

		memset(buf, 0, 0x100);
		memcpy(buf, &hdr[i], 8);
		cr_expect_lt(decode(&info, buf, 0x100, &d, &why), 0, "arch header %u", i);
	}
	/* Unsupported formats */
	info.fmt = 2;
	cr_expect_eq(decode(&info, buf, 0x100, &d, &why), -EOPNOTSUPP);
}

/* Random bytes never crash or read past len. */
Test(pebs_decode, garbage)
{
	static const unsigned int fmts[] = { 3, 4, 5, 6, PEBS_FMT_ARCH };
	struct pebs_decoded d;
	const char *why;
	unsigned int seed = 1;

	for (unsigned int iter = 0; iter < 20000; iter++) {
		struct pebs_decode_info info = { .fmt = fmts[iter % 5], .timed = iter & 8 };
		size_t len = (iter * 37) % 1600;

		for (size_t i = 0; i < len; i++) {
			seed = seed * 1103515245 + 12345;
			buf[i] = (uint8_t) (seed >> 16);
		}
		/* Plausible sizes often, so the group walk is reached. */
		if (iter & 1 && len >= 8) {
			uint64_t sz = (seed >> 4) % (len + 64);

			if (info.fmt == PEBS_FMT_ARCH) {
				buf[0] = (uint8_t) (sz & 0xf0);
				buf[1] = (uint8_t) (sz >> 8);
			} else {
				buf[6] = (uint8_t) sz;
				buf[7] = (uint8_t) (sz >> 8);
			}
		}
		if (decode(&info, buf, len, &d, &why) == 0)
			cr_expect_leq(d.size, len);
	}
}
