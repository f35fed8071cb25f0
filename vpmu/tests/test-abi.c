/* SPDX-License-Identifier: MIT */
/*
 * The size contract of the public structs (vpmu/vpmu.h, "ABI"): a program
 * built against an older or a newer header than the library's. The
 * VPMU_0.1 sizes are written here as numbers, what a program built
 * against that header passes, not taken from the library.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "vpmu/vpmu.h"
#include "facts.h"

#define CONFIG_V01 112 /* struct vpmu_config up to linear_bits */
#define REGS_V01   448
#define COUNTS_V01 136
#define STATS_V01  1224
#define CANARY	   0xa5

static unsigned int regs_calls;
static size_t regs_fill; /* bytes the fake VMM's callback writes */

static int fill_regs(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *ret)
{
	/* a VMM built against another header writes its own struct's size */
	memset(ret, 0, regs_fill);
	ret->rip = 0x1005;
	ret->long_mode = true;
	regs_calls++;
	return 0;
}

static bool all(const void *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (((const uint8_t *) p)[i] != v)
			return false;
	return true;
}

Test(abi, config_init_writes_the_callers_size)
{
	uint8_t buf[sizeof(struct vpmu_config) + 64];
	struct vpmu_config *cfg = (struct vpmu_config *) buf;

	memset(buf, CANARY, sizeof(buf));
	vpmu_config_init(cfg);
	cr_expect_eq(cfg->size, sizeof(struct vpmu_config));
	cr_expect_eq(cfg->regs_size, sizeof(struct vpmu_guest_regs));
	cr_expect(all(buf + sizeof(*cfg), 64, CANARY), "nothing past the struct");

	/* a program built against VPMU_0.1 calls the function of that name */
	memset(buf, CANARY, sizeof(buf));
	(vpmu_config_init)(cfg);
	cr_expect_eq(cfg->size, CONFIG_V01);
	cr_expect_eq(cfg->version, -1);
	cr_expect(all(buf + CONFIG_V01, sizeof(buf) - CONFIG_V01, CANARY),
		  "not a byte past the VPMU_0.1 struct");

	/* a newer program's larger struct: the part we do not know is zeroed */
	memset(buf, CANARY, sizeof(buf));
	vpmu_config_init_sized(cfg, sizeof(*cfg) + 32, sizeof(struct vpmu_guest_regs));
	cr_expect_eq(cfg->size, sizeof(*cfg) + 32);
	cr_expect(all(buf + sizeof(*cfg), 32, 0));
	cr_expect(all(buf + sizeof(*cfg) + 32, 32, CANARY));
}

Test(abi, old_config_creates_a_vcpu)
{
	uint8_t buf[sizeof(struct vpmu_config)];
	struct vpmu_config *cfg = (struct vpmu_config *) buf;
	struct vpmu_vcpu *v = NULL;

	memset(buf, CANARY, sizeof(buf)); /* garbage where 0.1 had no field */
	(vpmu_config_init)(cfg);
	cr_assert_eq(vpmu_vcpu_new(cfg, &v), 0, "regs_size past the 0.1 struct is not read");
	vpmu_vcpu_free(v);
}

/* The regs callback may write what the VMM's struct holds, larger or smaller. */
Test(abi, regs_size_bounds_the_callback)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_mem_region r;
	static uint8_t ram[1 << 16];

	vpmu_config_init(&cfg);
	cfg.model = "arch-pebs";
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.regs = fill_regs;
	cfg.regs_size = REGS_V01 - 8;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL, "smaller than any header's struct");
	cfg.regs_size = REGS_V01 + 4096; /* a newer VMM's struct */
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	r = (struct vpmu_mem_region){ .gpa = 0x400000, .size = sizeof(ram), .hva = ram };
	cr_assert_eq(vpmu_vcpu_set_memory(v, &r, 1), 0);
	test_wrmsr(v, 0x3f4, 0x400000);
	test_wrmsr(v, 0x3f5, B(32) | (0x100ULL << 36));
	test_wrmsr(v, 0x1903, B(63) | 0xffffff00ULL);
	test_wrmsr(v, 0x4c1, 0xffffffffffffULL);
	test_wrmsr(v, 0x186, 0x4300c0);
	vpmu_vcpu_sync(v);
	regs_fill = cfg.regs_size; /* ASan: the library's buffer holds all of it */
	regs_calls = 0;
	struct vpmu_exact_counts c = { .instructions = 1, .cycles = 1, .last_ip = 0x1000 };
	cr_assert_eq(vpmu_exact_feed(v, &c), 0);
	cr_expect_eq(regs_calls, 1);
	cr_expect_eq(test_rdmsr(v, 0x3f5) & 0x7fffff0, 64, "one basic record written");
	vpmu_vcpu_free(v);
}

Test(abi, exact_counts_of_any_size)
{
	struct vpmu_vcpu *v = test_vcpu("Skylake-Server", VPMU_BACKEND_EXACT);
	struct {
		struct vpmu_exact_counts c;
		uint64_t newer_field;
	} big;

	test_wrmsr(v, 0x186, 0x4300c0); /* INST_RETIRED.ANY_P */
	vpmu_vcpu_sync(v);
	memset(&big, 0, sizeof(big));
	big.c.instructions = 5;
	cr_expect_eq(vpmu_exact_feed_sized(v, &big.c, sizeof(big)), 0, "unknown field 0: fine");
	big.newer_field = 1;
	cr_expect_eq(vpmu_exact_feed_sized(v, &big.c, sizeof(big)), -E2BIG,
		     "unknown field set: refused");
	cr_expect_eq(test_rdmsr(v, 0xc1), 5, "and not counted");
	/* an older struct ending before `cpl`: what follows reads 0 (CPL 0, no IP) */
	big.c.cpl = 3;
	cr_expect_eq(vpmu_exact_feed_sized(v, &big.c, offsetof(struct vpmu_exact_counts, cpl)), 0);
	cr_expect_eq(test_rdmsr(v, 0xc1), 10);
	cr_expect_eq((vpmu_exact_feed) (v, &big.c), 0, "the VPMU_0.1 entry point");
	cr_expect_eq(test_rdmsr(v, 0xc1), 15);
	vpmu_vcpu_free(v);
}

Test(abi, stats_of_any_size)
{
	struct vpmu_vcpu *v = test_vcpu("Icelake-Server", VPMU_BACKEND_EXACT);
	uint8_t buf[sizeof(struct vpmu_stats) + 64];
	struct vpmu_stats *st = (struct vpmu_stats *) buf;
	char json[8192];
	size_t len;

	memset(buf, CANARY, sizeof(buf));
	cr_assert_eq(vpmu_stats_read_sized(v, st, sizeof(buf)), 0);
	cr_expect_eq(st->version, VPMU_STATS_VERSION);
	cr_expect_str_eq(st->model, "Icelake-Server");
	cr_expect(all(buf + sizeof(*st), 64, 0), "past what the library knows: zeroed");

	memset(buf, CANARY, sizeof(buf));
	cr_assert_eq((vpmu_stats_read) (v, st), 0, "the VPMU_0.1 entry point");
	cr_expect(all(buf + STATS_V01, sizeof(buf) - STATS_V01, CANARY),
		  "not a byte past the VPMU_0.1 struct");
	cr_expect_eq(vpmu_stats_read_sized(v, st, STATS_V01 - 8), -EINVAL);

	cr_assert_eq(vpmu_stats_to_json(st, 0, json, sizeof(json), &len), 0);
	cr_expect_eq(strlen(json), len);
	cr_expect_eq(vpmu_stats_to_json_sized(st, STATS_V01 - 8, 0, json, sizeof(json), &len),
		     -EINVAL);
	cr_assert_eq((vpmu_stats_to_json) (st, 0, json, sizeof(json), &len), 0);
	vpmu_vcpu_free(v);
}
