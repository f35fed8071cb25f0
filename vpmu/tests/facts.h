/* SPDX-License-Identifier: MIT */
/*
 * What the tests expect of each guest CPU model, written down from the
 * SDM independently of the library's model table (vpmu/models.c), so that
 * a wrong row there fails here.
 */
#ifndef VPMU_TEST_FACTS_H
#define VPMU_TEST_FACTS_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>

#include "vpmu/vpmu.h"

#define B(n)   (1ULL << (n))
#define LOW(n) ((n) >= 64 ? ~0ULL : (1ULL << (n)) - 1)

struct model_facts {
	const char *name;
	unsigned int version, nr_gp, nr_fixed, width, lbr_depth, linear_bits, phys_bits;
	unsigned int arch_events_len;
	uint64_t perf_caps; /* IA32_PERF_CAPABILITIES value */
	bool ds, legacy_pebs, adaptive, fmt6, arch_pebs, metrics, v6_bits, anythread_dep;
	uint64_t offcore_valid, frontend_valid;
	uint32_t crystal_hz;
	uint64_t tsc_hz;
};

/*
 * Skylake-server: 0x33c5 = LBR_FMT 5 | PEBS_TRAP (6) | ARCH_REG (7) |
 * PEBS_FMT 3 (11:8) | FREEZE_WHILE_SMM (12) | FW_WRITE (13), §22.8.
 * Ice Lake server adds PEBS_FMT 4, BASELINE (14), PERF_METRICS (15).
 * LunarLake: PEBS_FMT 6 + TIMING_INFO (17), no LBR_FMT (arch LBR not
 * modelled). arch-pebs: PEBS_FMT 0xF, BASELINE 0, TRAP/ARCH_REG/TIMING
 * 1 (§22.10.1.1).
 */
static const struct model_facts facts[] = {
	{ "Skylake-Server",
	  4,
	  4,
	  3,
	  48,
	  32,
	  48,
	  46,
	  7,
	  0x33c5,
	  true,
	  true,
	  false,
	  false,
	  false,
	  false,
	  false,
	  false,
	  0x3fffff8fffULL,
	  0x7fbfffULL,
	  25000000,
	  2100000000ULL },
	{ "Icelake-Server",
	  5,
	  8,
	  4,
	  48,
	  32,
	  57,
	  52,
	  8,
	  0xf4c5,
	  true,
	  true,
	  true,
	  false,
	  false,
	  true,
	  false,
	  true,
	  0x3fffffbfffULL,
	  0x7fff17ULL,
	  25000000,
	  2300000000ULL },
	{ "LunarLake",
	  6,
	  8,
	  4,
	  48,
	  0,
	  48,
	  46,
	  8,
	  0x2f6c0,
	  true,
	  true,
	  true,
	  true,
	  false,
	  true,
	  true,
	  true,
	  0x3fffffffffULL,
	  0x7fff1fULL,
	  38400000,
	  2304000000ULL },
	{ "arch-pebs",
	  6,
	  8,
	  4,
	  48,
	  0,
	  57,
	  52,
	  8,
	  0x2bfc0,
	  false,
	  false,
	  false,
	  false,
	  true,
	  true,
	  true,
	  true,
	  0x3fffffffffULL,
	  0x7fff1fULL,
	  38400000,
	  2304000000ULL },
};
#define NR_FACTS (sizeof(facts) / sizeof(facts[0]))

/*
 * Criterion runs each parameter in a fresh process, where pointers into
 * the parent's data are not valid: parameterize over indexes.
 */
static unsigned int fact_index[] = { 0, 1, 2, 3 };
_Static_assert(sizeof(fact_index) / sizeof(fact_index[0]) == NR_FACTS, "one index per model");

/* A vCPU of `model` with the given backend, created or the test fails. */
static inline struct vpmu_vcpu *test_vcpu(const char *model, enum vpmu_backend backend)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.backend = backend;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0, "vpmu_vcpu_new(%s)", model);
	return v;
}

/* RDMSR that must succeed. */
static inline uint64_t test_rdmsr(struct vpmu_vcpu *v, uint32_t msr)
{
	uint64_t val = 0xdeadbeef;

	cr_assert_eq(vpmu_msr_read(v, msr, &val), 0, "rdmsr %#x", msr);
	return val;
}

/* WRMSR that must succeed. */
static inline void test_wrmsr(struct vpmu_vcpu *v, uint32_t msr, uint64_t val)
{
	cr_assert_eq(vpmu_msr_write(v, msr, val), 0, "wrmsr %#x %#llx", msr,
		     (unsigned long long) val);
}

#endif
