/* SPDX-License-Identifier: MIT */
/* Models, narrowing, reset, RDPMC, GLOBAL_INUSE, and the log contract. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vpmu/vpmu.h"
#include "facts.h"

static char last_log[512];
static int log_calls;

static void capture(void *data, enum vpmu_log_level level, const char *msg)
{
	(void) data;
	(void) level;
	log_calls++;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

static struct vpmu_vcpu *new_vcpu(const char *model)
{
	return test_vcpu(model, VPMU_BACKEND_NONE);
}

#define rd test_rdmsr

Test(models, names_are_case_insensitive)
{
	cr_assert_eq(vpmu_model_count(), NR_FACTS);
	for (unsigned int i = 0; i < NR_FACTS; i++) {
		char upper[64];
		int idx = vpmu_model_find(facts[i].name);

		cr_assert_geq(idx, 0, "%s", facts[i].name);
		cr_expect_str_eq(vpmu_model_name((size_t) idx), facts[i].name);
		cr_expect_not_null(vpmu_model_description((size_t) idx));
		for (size_t j = 0; j <= strlen(facts[i].name); j++)
			upper[j] = (char) (facts[i].name[j] >= 'a' && facts[i].name[j] <= 'z'
						   ? facts[i].name[j] - 32
						   : facts[i].name[j]);
		cr_expect_eq(vpmu_model_find(upper), idx, "%s", upper);
	}
	cr_expect_eq(vpmu_model_find("skylake-server"), vpmu_model_find("Skylake-Server"));
	cr_expect_eq(vpmu_model_find("pentium4"), -ENOENT);
	cr_expect_eq(vpmu_model_find(NULL), -ENOENT);
	cr_expect_null(vpmu_model_name(NR_FACTS));
}

Test(config, unknown_model_logs_one_line)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = (struct vpmu_vcpu *) 0x1;

	vpmu_config_init(&cfg);
	cfg.model = "Cascadelake-Foo";
	cfg.log = capture;
	log_calls = 0;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -ENOENT);
	cr_expect_eq(v, (struct vpmu_vcpu *) 0x1, "ret untouched on failure");
	cr_expect_eq(log_calls, 1);
	cr_expect(strstr(last_log, "Cascadelake-Foo"), "log names the model: %s", last_log);
}

Test(config, inconsistent_requests_refused)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.log = capture;
	cfg.model = "Skylake-Server";
	cfg.nr_gp = 5; /* SKX has 4 with HT on */
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL);
	cr_expect(strstr(last_log, "nr_gp"), "%s", last_log);
	cfg.nr_gp = -1;
	cfg.nr_fixed = 4; /* SKX has 3 */
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL);
	cr_expect(strstr(last_log, "nr_fixed"), "%s", last_log);
	/* PERF_METRICS without fixed counter 3 (TOPDOWN.SLOTS) */
	cfg.model = "Icelake-Server";
	cfg.nr_fixed = 3;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL);
	cr_expect(strstr(last_log, "PERF_METRICS"), "%s", last_log);
	cfg.flags = VPMU_CONFIG_NO_METRICS;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), 0);
	vpmu_vcpu_free(v);
	cfg.flags = 1u << 31;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL);
	cfg.flags = 0;
	cfg.size = 8;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL, "struct size mismatch");
	vpmu_vcpu_free(NULL);
}

Test(config, narrowing_counters)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_cpuid_entry e;
	uint64_t val;

	vpmu_config_init(&cfg);
	cfg.model = "Icelake-Server";
	cfg.nr_gp = 2;
	cfg.nr_fixed = 4;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	cr_expect_eq(vpmu_msr_read(v, 0xc3, &val), -ENXIO);
	cr_expect_eq(vpmu_msr_write(v, 0x38f, 0x4), -EINVAL, "GLOBAL_CTRL bit of a hidden counter");
	cr_expect_eq(rd(v, 0x38f), 0x3, "reset GLOBAL_CTRL = the 2 GP enables");
	cr_expect_eq(vpmu_msr_write(v, 0x3f1, 0x4), -EINVAL, "PEBS_ENABLE bit of a hidden counter");
	cr_assert_eq(vpmu_cpuid(v, 0xa, 0, &e), 0);
	cr_expect_eq((e.eax >> 8) & 0xff, 2);
	vpmu_vcpu_free(v);
}

Test(config, narrowing_pebs_and_lbr)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_cpuid_entry e;
	uint64_t val;

	vpmu_config_init(&cfg);
	cfg.model = "Skylake-Server";
	cfg.flags = VPMU_CONFIG_NO_PEBS | VPMU_CONFIG_NO_LBR;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	/* PEBS_FMT, TRAP, ARCH_REG and LBR_FMT gone: 0x33c5 -> 0x3000 */
	cr_expect_eq(rd(v, 0x345), 0x3000);
	cr_expect_eq(vpmu_msr_read(v, 0x3f1, &val), -ENXIO);
	cr_expect_eq(vpmu_msr_read(v, 0x600, &val), -ENXIO);
	cr_expect_eq(vpmu_msr_read(v, 0x3f6, &val), -ENXIO);
	cr_expect_eq(vpmu_msr_read(v, 0x680, &val), -ENXIO);
	cr_expect_eq(vpmu_msr_write(v, 0x1d9, 1), -EINVAL, "DEBUGCTL.LBR without LBRs");
	cr_expect_eq(vpmu_msr_write(v, 0x390, 1ULL << 62), -EINVAL, "no OvfBuffer without PEBS");
	cr_expect_eq(vpmu_misc_enable_patch(v, 0), (1ULL << 7) | (1ULL << 11) | (1ULL << 12));
	cr_assert_eq(vpmu_cpuid(v, 1, 0, &e), 0);
	cr_expect_eq(e.edx & (1u << 21), 0, "no DS");
	cr_expect_eq(e.ecx, 1u << 15, "PDCM only");
	vpmu_vcpu_free(v);
}

Test(reset, power_on_and_init)
{
	struct vpmu_vcpu *v = new_vcpu("Icelake-Server");

	cr_assert_eq(vpmu_msr_write(v, 0x4c1, 0x123456789aULL), 0);
	cr_assert_eq(vpmu_msr_write(v, 0x186, 0x5300c0), 0);
	cr_assert_eq(vpmu_msr_write(v, 0x38f, 0), 0);
	cr_assert_eq(vpmu_msr_write(v, 0x3f1, 1), 0);
	cr_assert_eq(vpmu_msr_write(v, 0x1d9, 0x1001), 0);
	cr_assert_eq(vpmu_msr_write(v, 0x391, 1), 0);
	/* INIT: MSRs kept, PEBS (the DS mechanism) disabled */
	vpmu_vcpu_reset(v, VPMU_RESET_INIT);
	cr_expect_eq(rd(v, 0xc1), 0x123456789aULL);
	cr_expect_eq(rd(v, 0x186), 0x5300c0);
	cr_expect_eq(rd(v, 0x38f), 0);
	cr_expect_eq(rd(v, 0x3f1), 0);
	cr_expect_eq(rd(v, 0x1d9), 0x1001);
	/* power-on: everything architectural */
	vpmu_vcpu_reset(v, VPMU_RESET_POWER_ON);
	cr_expect_eq(rd(v, 0xc1), 0);
	cr_expect_eq(rd(v, 0x186), 0);
	cr_expect_eq(rd(v, 0x38f), 0xff);
	cr_expect_eq(rd(v, 0x38e), 0);
	cr_expect_eq(rd(v, 0x1d9), 0);
	vpmu_vcpu_free(v);
}

ParameterizedTestParameters(rdpmc, encodings)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, rdpmc, encodings)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);
	uint64_t val = 77;

	cr_assert_eq(vpmu_msr_write(v, 0xc1 + f->nr_gp - 1, 0x80000000), 0);
	cr_assert_eq(vpmu_msr_write(v, 0x309 + f->nr_fixed - 1, 0xabcdef012345ULL), 0);
	cr_assert_eq(vpmu_rdpmc(v, f->nr_gp - 1, &val), 0);
	cr_expect_eq(val, 0xffff80000000ULL);
	cr_assert_eq(vpmu_rdpmc(v, (1u << 30) | (f->nr_fixed - 1), &val), 0);
	cr_expect_eq(val, 0xabcdef012345ULL);
	val = 77;
	cr_expect_eq(vpmu_rdpmc(v, f->nr_gp, &val), -EINVAL, "GP index out of range");
	cr_expect_eq(vpmu_rdpmc(v, (1u << 30) | f->nr_fixed, &val), -EINVAL, "fixed out of range");
	cr_expect_eq(vpmu_rdpmc(v, 1u << 31, &val), -EINVAL, "fast read");
	cr_expect_eq(vpmu_rdpmc(v, (1u << 31) | (1u << 30), &val), -EINVAL, "fast fixed read");
	cr_expect_eq(vpmu_rdpmc(v, 0x100, &val), -EINVAL);
	cr_expect_eq(val, 77);
	if (f->metrics) {
		cr_assert_eq(vpmu_msr_write(v, 0x329, 0x0102030405060708ULL), 0);
		cr_expect_eq(vpmu_rdpmc(v, 1u << 29, &val), 0);
		cr_expect_eq(val, 0x0102030405060708ULL);
	} else {
		cr_expect_eq(vpmu_rdpmc(v, 1u << 29, &val), -EINVAL);
	}
	vpmu_vcpu_free(v);
}

ParameterizedTestParameters(inuse, tracks_programming)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, inuse, tracks_programming)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);

	cr_expect_eq(rd(v, 0x392), 0);
	/* EN alone does not make a counter in use: bits 7:0 do */
	cr_assert_eq(vpmu_msr_write(v, 0x187, 1ULL << 22), 0);
	cr_expect_eq(rd(v, 0x392), 0);
	cr_assert_eq(vpmu_msr_write(v, 0x187, 0xc0), 0);
	cr_expect_eq(rd(v, 0x392), 1ULL << 1);
	cr_assert_eq(vpmu_msr_write(v, 0x38d, 0x2 << 4), 0); /* fixed 1, USR */
	cr_expect_eq(rd(v, 0x392), (1ULL << 1) | (1ULL << 33));
	cr_assert_eq(vpmu_msr_write(v, 0x187, 0xc0 | (1ULL << 20)), 0);
	cr_expect_eq(rd(v, 0x392), (1ULL << 1) | (1ULL << 33) | (1ULL << 63), "PMI in use");
	vpmu_vcpu_free(v);
}
