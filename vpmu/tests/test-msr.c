/* SPDX-License-Identifier: MIT */
/*
 * Every PMU MSR of every model: existence, reset value, round trip of
 * every writable bit, and #GP on every reserved bit.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>

#include "vpmu/vpmu.h"
#include "facts.h"

enum kind {
	RW,    /* plain register: writable bits, the rest #GP */
	RO,    /* read-only: every write #GP */
	W1C,   /* GLOBAL_OVF_CTRL: clears GLOBAL_STATUS bits, reads 0 */
	W1S,   /* GLOBAL_STATUS_SET: sets GLOBAL_STATUS bits, reads 0 */
	PMC,   /* legacy counter write: 31:0 sign-extended, EDX ignored */
	CANON, /* linear address: must be canonical */
};

struct exp_msr {
	uint32_t msr;
	enum kind kind;
	uint64_t reset;
	uint64_t valid; /* RW/W1C/W1S: writable bits; CANON: width */
};

struct exp_table {
	struct exp_msr m[256];
	unsigned int n;
};

static void add(struct exp_table *t, uint32_t msr, enum kind kind, uint64_t reset, uint64_t valid)
{
	cr_assert_lt(t->n, 256);
	t->m[t->n++] = (struct exp_msr){ msr, kind, reset, valid };
}

/*
 * The MSR map per SDM Vol. 4 Table 2-2 and Vol. 3B ch. 20-22; the comments
 * name the source of each mask.
 */
static void expected(const struct model_facts *f, struct exp_table *t)
{
	uint64_t gp = LOW(f->nr_gp), fx = LOW(f->nr_fixed);
	uint64_t wmask = LOW(f->width);
	uint64_t status, evtsel, fixed_ctrl = 0, debugctl;
	bool lbr = f->lbr_depth > 0;

	t->n = 0;
	/* IA32_PMCx 0xc1+x: legacy writes */
	for (unsigned int i = 0; i < f->nr_gp; i++)
		add(t, 0xc1 + i, PMC, 0, wmask);
	/* IA32_PERFEVTSELx 0x186+x: 31:0 minus AnyThread (21, refused) */
	evtsel = 0xffffffffULL & ~B(21);
	if (f->adaptive)
		evtsel |= B(34); /* Adaptive_Record, §22.9.2.1 */
	if (f->v6_bits)
		evtsel |= B(36) | (0xffULL << 40); /* EQ, UMASK2 */
	for (unsigned int i = 0; i < f->nr_gp; i++)
		add(t, 0x186 + i, RW, 0, evtsel);
	/* MSR_OFFCORE_RSP_0/1; bit 63 only on RSP_0 (§22.5.5.4) */
	add(t, 0x1a6, RW, 0, f->offcore_valid);
	add(t, 0x1a7, RW, 0, f->offcore_valid & ~B(63));
	if (lbr) {
		add(t, 0x1c8, RW, 0, 0x3ff);		/* LBR_SELECT 9:0 */
		add(t, 0x1c9, RW, 0, f->lbr_depth - 1); /* TOS */
	}
	/* IA32_DEBUGCTL (Fig 20-3): BTF; LBR; freeze bits (v2+); SMM freeze */
	debugctl = B(1) | B(12);
	if (lbr)
		debugctl |= B(0) | B(11);
	if (f->perf_caps & B(12))
		debugctl |= B(14);
	add(t, 0x1d9, RW, 0, debugctl);
	/* IA32_FIXED_CTRx 0x309+x: bits above the width reserved */
	for (unsigned int i = 0; i < f->nr_fixed; i++)
		add(t, 0x309 + i, RW, 0, wmask);
	if (f->metrics)
		add(t, 0x329, RW, 0, ~0ULL); /* PERF_METRICS */
	add(t, 0x345, RO, f->perf_caps, 0);
	/* FIXED_CTR_CTRL: OS, USR, PMI per nibble; AnyThread refused */
	for (unsigned int i = 0; i < f->nr_fixed; i++) {
		fixed_ctrl |= 0xbULL << (4 * i);
		if (f->adaptive)
			fixed_ctrl |= B(32 + 4 * i);
	}
	add(t, 0x38d, RW, 0, fixed_ctrl);
	add(t, 0x38e, RO, 0, 0); /* GLOBAL_STATUS */
	/* GLOBAL_CTRL: GP enables set at RESET (SDM §21.2.2) */
	add(t, 0x38f, RW, gp, gp | fx << 32 | (f->metrics ? B(48) : 0));
	status = gp | fx << 32 | B(63) | B(59); /* CondChgd, CTR_Frz (v4+) */
	if (f->metrics)
		status |= B(48);
	if (lbr)
		status |= B(58); /* LBR_Frz */
	if (f->legacy_pebs || f->arch_pebs)
		status |= B(62); /* OvfBuffer */
	add(t, 0x390, W1C, 0, status);
	add(t, 0x391, W1S, 0, status);
	add(t, 0x392, RO, 0, 0); /* GLOBAL_INUSE */
	if (f->legacy_pebs) {
		/* Baseline: GP and fixed; fmt 3: GP and load-latency 32+i */
		add(t, 0x3f1, RW, 0, f->adaptive ? gp | fx << 32 : gp | gp << 32);
	}
	if (f->adaptive) {
		uint64_t cfg = 0x7; /* MemInfo, GPRs, XMMs */

		if (lbr)
			cfg |= B(3) | 0xffULL << 24;
		if (f->fmt6)
			cfg |= B(4) | B(5) | gp << 32 | fx << 48;
		add(t, 0x3f2, RW, 0, cfg);
	}
	if (f->arch_pebs) {
		add(t, 0x3f4, RW, 0, (LOW(f->phys_bits) & ~0xfffULL) | 0xf);
		add(t, 0x3f5, RW, 0, (LOW(27) & ~0xfULL) | B(31) | B(32) | (LOW(59) & ~LOW(36)));
	}
	add(t, 0x3f6, RW, 0, 0xffff); /* LD_LAT_THRESHOLD */
	add(t, 0x3f7, RW, 0, f->frontend_valid);
	/* IA32_A_PMCx 0x4c1+x: needs FW_WRITE (PERF_CAPABILITIES[13]) */
	if (f->perf_caps & B(13))
		for (unsigned int i = 0; i < f->nr_gp; i++)
			add(t, 0x4c1 + i, RW, 0, wmask);
	if (f->ds)
		add(t, 0x600, CANON, 0, f->linear_bits);
	for (unsigned int i = 0; i < f->lbr_depth; i++)
		add(t, 0x680 + i, CANON, 0, 48);
	for (unsigned int i = 0; i < f->lbr_depth; i++)
		add(t, 0x6c0 + i, CANON, 0, 48);
	/* LBR_INFO (Table 20-16): 15:0 cycles, 60:16 reserved, 63:61 flags */
	for (unsigned int i = 0; i < f->lbr_depth; i++)
		add(t, 0xdc0 + i, RW, 0, 0xffff | B(61) | B(62) | B(63));
	if (f->arch_pebs) {
		uint64_t cfg_c = 0xffffffffULL | B(35) | B(36) | B(37) | B(38) | B(49) | B(61) |
				 B(62) | B(63);

		for (unsigned int i = 0; i < f->nr_gp; i++)
			add(t, 0x1903 + 4 * i, RW, 0, cfg_c);
		for (unsigned int i = 0; i < f->nr_fixed; i++)
			add(t, 0x1983 + 4 * i, RW, 0, cfg_c);
	}
}

static struct vpmu_vcpu *new_vcpu(const char *model)
{
	return test_vcpu(model, VPMU_BACKEND_NONE);
}

static const struct exp_msr *find(const struct exp_table *t, uint32_t msr)
{
	for (unsigned int i = 0; i < t->n; i++)
		if (t->m[i].msr == msr)
			return &t->m[i];
	return NULL;
}

#define rd test_rdmsr

/* The library's MSR list and the table above are the same set. */
Test(msr, list_matches_table)
{
	for (unsigned int f = 0; f < NR_FACTS; f++) {
		static struct exp_table t;
		struct vpmu_vcpu *v = new_vcpu(facts[f].name);
		uint32_t list[512];
		size_t n = vpmu_msr_list(v, list, 512);

		expected(&facts[f], &t);
		cr_assert_leq(n, 512);
		for (size_t i = 0; i < n; i++) {
			cr_expect(find(&t, list[i]),
				  "%s: MSR %#x implemented but not in the test table",
				  facts[f].name, list[i]);
			if (i)
				cr_expect_gt(list[i], list[i - 1], "list not ascending");
		}
		for (unsigned int i = 0; i < t.n; i++) {
			bool found = false;

			for (size_t j = 0; j < n; j++)
				found |= list[j] == t.m[i].msr;
			cr_expect(found, "%s: MSR %#x expected but not implemented", facts[f].name,
				  t.m[i].msr);
		}
		cr_expect_eq(n, t.n, "%s: %zu MSRs, expected %u", facts[f].name, n, t.n);
		/* n = 0 asks for the count only */
		cr_expect_eq(vpmu_msr_list(v, NULL, 0), n);
		vpmu_vcpu_free(v);
	}
}

Test(msr, reset_values)
{
	for (unsigned int f = 0; f < NR_FACTS; f++) {
		static struct exp_table t;
		struct vpmu_vcpu *v = new_vcpu(facts[f].name);

		expected(&facts[f], &t);
		for (unsigned int i = 0; i < t.n; i++)
			cr_expect_eq(rd(v, t.m[i].msr), t.m[i].reset,
				     "%s: MSR %#x reset %#llx, want %#llx", facts[f].name,
				     t.m[i].msr, (unsigned long long) rd(v, t.m[i].msr),
				     (unsigned long long) t.m[i].reset);
		vpmu_vcpu_free(v);
	}
}

/*
 * One write of a single bit, checked against what the SDM says that MSR
 * does with it. Returns 1 if the bit is reserved (a #GP case), else 0.
 */
static int check_bit(struct vpmu_vcpu *v, const char *model, const struct exp_msr *e,
		     unsigned int b)
{
	uint64_t bit = B(b), before = rd(v, e->msr), status_before;
	int r;

	switch (e->kind) {
	case RO:
		cr_expect_eq(vpmu_msr_write(v, e->msr, bit), -EINVAL, "%s %#x bit %u: RO write",
			     model, e->msr, b);
		cr_expect_eq(rd(v, e->msr), before, "%s %#x changed by a refused write", model,
			     e->msr);
		return 1;
	case PMC:
		cr_expect_eq(vpmu_msr_write(v, e->msr, bit), 0, "%s %#x bit %u", model, e->msr, b);
		/* bit 31 sign-extends to the width; bits 63:32 are dropped */
		cr_expect_eq(rd(v, e->msr),
			     b < 31    ? bit
			     : b == 31 ? e->valid & ~LOW(31)
				       : 0,
			     "%s %#x legacy write of bit %u", model, e->msr, b);
		return 0;
	case CANON:
		r = vpmu_msr_write(v, e->msr, bit);
		if (b < e->valid - 1) {
			cr_expect_eq(r, 0, "%s %#x bit %u", model, e->msr, b);
			cr_expect_eq(rd(v, e->msr), bit);
			return 0;
		}
		/* a lone bit at or above the sign bit is non-canonical */
		cr_expect_eq(r, -EINVAL, "%s %#x non-canonical bit %u", model, e->msr, b);
		cr_expect_eq(rd(v, e->msr), before);
		return 1;
	case W1C:
	case W1S:
		status_before = rd(v, 0x38e);
		r = vpmu_msr_write(v, e->msr, bit);
		if (!(e->valid & bit)) {
			cr_expect_eq(r, -EINVAL, "%s %#x reserved bit %u", model, e->msr, b);
			cr_expect_eq(rd(v, 0x38e), status_before);
			return 1;
		}
		cr_expect_eq(r, 0, "%s %#x bit %u", model, e->msr, b);
		cr_expect_eq(rd(v, 0x38e),
			     e->kind == W1S ? status_before | bit : status_before & ~bit,
			     "%s %#x bit %u on GLOBAL_STATUS", model, e->msr, b);
		cr_expect_eq(rd(v, e->msr), 0, "%s %#x reads 0", model, e->msr);
		return 0;
	case RW:
		r = vpmu_msr_write(v, e->msr, bit);
		if (!(e->valid & bit)) {
			cr_expect_eq(r, -EINVAL, "%s %#x reserved bit %u accepted", model, e->msr,
				     b);
			cr_expect_eq(rd(v, e->msr), before, "%s %#x changed by a refused write",
				     model, e->msr);
			return 1;
		}
		cr_expect_eq(r, 0, "%s %#x writable bit %u refused", model, e->msr, b);
		cr_expect_eq(rd(v, e->msr), bit, "%s %#x bit %u round trip", model, e->msr, b);
		return 0;
	}
	return 0;
}

Test(msr, every_bit_of_every_msr)
{
	unsigned long total_reserved = 0, total_writable = 0;

	for (unsigned int f = 0; f < NR_FACTS; f++) {
		static struct exp_table t;
		unsigned long reserved = 0, writable = 0;

		expected(&facts[f], &t);
		for (unsigned int i = 0; i < t.n; i++) {
			const struct exp_msr *e = &t.m[i];

			for (unsigned int b = 0; b < 64; b++) {
				/* a fresh vCPU per case: no state leaks between bits */
				struct vpmu_vcpu *v = new_vcpu(facts[f].name);

				if (check_bit(v, facts[f].name, e, b))
					reserved++;
				else
					writable++;
				vpmu_vcpu_free(v);
			}
			/* all writable bits at once */
			if (e->kind == RW) {
				struct vpmu_vcpu *v = new_vcpu(facts[f].name);

				cr_expect_eq(vpmu_msr_write(v, e->msr, e->valid), 0);
				cr_expect_eq(rd(v, e->msr), e->valid, "%s %#x full mask",
					     facts[f].name, e->msr);
				vpmu_vcpu_free(v);
			}
		}
		fprintf(stderr,
			"msr: %-15s %3u MSRs, %5lu reserved-bit #GP cases, %5lu writable-bit "
			"cases\n",
			facts[f].name, t.n, reserved, writable);
		total_reserved += reserved;
		total_writable += writable;
	}
	fprintf(stderr,
		"msr: checked %lu (MSR, bit, model) reserved-bit cases and %lu writable-bit "
		"cases\n",
		total_reserved, total_writable);
	cr_assert_gt(total_reserved, 0);
}

/* Sign-extended canonical addresses are accepted whole. */
ParameterizedTestParameters(msr, canonical_upper_half)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, msr, canonical_upper_half)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);
	uint64_t high = ~0ULL << (f->linear_bits - 1);

	if (f->ds) {
		cr_expect_eq(vpmu_msr_write(v, 0x600, high | 0x1000), 0);
		cr_expect_eq(rd(v, 0x600), high | 0x1000);
		/* one bit short of canonical */
		cr_expect_eq(vpmu_msr_write(v, 0x600, (high & ~B(63)) | 0x1000), -EINVAL);
	} else {
		cr_expect_eq(vpmu_msr_write(v, 0x600, 0), -ENXIO);
	}
	vpmu_vcpu_free(v);
}

ParameterizedTestParameters(msr, routing_codes)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, msr, routing_codes)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);
	uint64_t val = 0x1234;

	/* Not PMU MSRs at all: the VMM routes them elsewhere. */
	static const uint32_t not_pmu[] = { 0x10, 0x1a0, 0x1b, 0xc0000080, 0xc9, 0x3f3, 0x3f8 };
	for (unsigned int i = 0; i < sizeof(not_pmu) / sizeof(not_pmu[0]); i++) {
		cr_expect_eq(vpmu_msr_read(v, not_pmu[i], &val), -ENOENT, "%#x", not_pmu[i]);
		cr_expect_eq(vpmu_msr_write(v, not_pmu[i], 0), -ENOENT, "%#x", not_pmu[i]);
	}
	cr_expect_eq(val, 0x1234, "ret_value untouched on failure");
	/* PMU MSRs beyond this model: -ENXIO */
	if (f->nr_gp < 8) {
		cr_expect_eq(vpmu_msr_read(v, 0xc1 + f->nr_gp, &val), -ENXIO);
		cr_expect_eq(vpmu_msr_write(v, 0x186 + f->nr_gp, 0), -ENXIO);
	}
	if (f->nr_fixed < 4)
		cr_expect_eq(vpmu_msr_read(v, 0x309 + f->nr_fixed, &val), -ENXIO);
	if (!f->lbr_depth) {
		cr_expect_eq(vpmu_msr_read(v, 0x680, &val), -ENXIO);
		cr_expect_eq(vpmu_msr_read(v, 0x1c9, &val), -ENXIO);
	}
	if (!f->metrics)
		cr_expect_eq(vpmu_msr_read(v, 0x329, &val), -ENXIO);
	if (!f->legacy_pebs)
		cr_expect_eq(vpmu_msr_write(v, 0x3f1, 1), -ENXIO);
	if (!f->adaptive)
		cr_expect_eq(vpmu_msr_write(v, 0x3f2, 1), -ENXIO);
	if (!f->arch_pebs) {
		cr_expect_eq(vpmu_msr_read(v, 0x3f4, &val), -ENXIO);
		cr_expect_eq(vpmu_msr_read(v, 0x1903, &val), -ENXIO);
	}
	cr_expect_eq(val, 0x1234);
	vpmu_vcpu_free(v);
}

/* Legacy vs full-width counter writes, §22.6.8.2 and PERF_CAPABILITIES[13]. */
ParameterizedTestParameters(msr, legacy_and_full_width_writes)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, msr, legacy_and_full_width_writes)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);

	cr_assert_eq(vpmu_msr_write(v, 0xc1, 0x12345678fffffc18ULL), 0);
	/* -1000 in 32 bits, sign-extended to 48: 0xfffffffffc18 */
	cr_expect_eq(rd(v, 0xc1), 0xfffffffffc18ULL);
	cr_expect_eq(rd(v, 0x4c1), 0xfffffffffc18ULL, "A_PMC0 aliases PMC0");
	cr_assert_eq(vpmu_msr_write(v, 0xc1, 0x7fffffff), 0);
	cr_expect_eq(rd(v, 0xc1), 0x7fffffffULL);
	cr_assert_eq(vpmu_msr_write(v, 0x4c2, 0x800000000000ULL), 0);
	cr_expect_eq(rd(v, 0xc2), 0x800000000000ULL);
	cr_expect_eq(vpmu_msr_write(v, 0x4c2, 0x1000000000000ULL), -EINVAL);
	cr_expect_eq(rd(v, 0xc2), 0x800000000000ULL);
	vpmu_vcpu_free(v);
}
