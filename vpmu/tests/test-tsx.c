/* SPDX-License-Identifier: MIT */
/*
 * IN_TX and IN_TXCP (IA32_PERFEVTSELx bits 32 and 33, SDM Vol. 3B
 * 22.3.6.5), as KVM has them: writable when the VMM tells the guest of
 * HLE or RTM (vpmu_config.tsx) and the host has TSX, IN_TXCP on
 * IA32_PERFEVTSEL2 only; reserved (#GP) otherwise. The host's TSX is
 * substituted (vpmu_host_tsx) so that every case runs on any host.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "facts.h"
#include "hostmap.h"
#include "model.h"
#include "pmu.h"
#include "vpmu/msr.h"

#define EVTSEL	0x186
#define IN_TX	B(32)
#define IN_TXCP B(33)
#define BASE	(0x3cull | B(16) | B(17) | B(22)) /* core cycles, USR OS EN */

static bool host_with_tsx(void)
{
	return true;
}

static bool host_without_tsx(void)
{
	return false;
}

static struct vpmu_vcpu *new_vcpu(const char *model, bool tsx, bool (*host)(void))
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_host_tsx = host;
	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.tsx = tsx;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0, "%s", model);
	return v;
}

static bool (*real_host_tsx)(void);

static void save(void)
{
	real_host_tsx = vpmu_host_tsx;
}

static void restore(void)
{
	vpmu_host_tsx = real_host_tsx;
}

TestSuite(tsx, .init = save, .fini = restore);

/* What each GP counter's event select takes with bit `bit` set: 0 or -EINVAL. */
static void expect_bit(struct vpmu_vcpu *v, uint64_t bit, const int want[8], const char *what)
{
	uint64_t val = 0;

	for (uint32_t i = 0; i < 4; i++) {
		cr_expect_eq(vpmu_msr_write(v, EVTSEL + i, BASE | bit), want[i],
			     "%s: PERFEVTSEL%u with bit %d", what, i, __builtin_ctzll(bit));
		cr_expect_eq(vpmu_msr_read(v, EVTSEL + i, &val), 0);
		cr_expect_eq(val, want[i] ? 0 : BASE | bit, "%s: PERFEVTSEL%u reads %#llx", what, i,
			     (unsigned long long) val);
		cr_assert_eq(vpmu_msr_write(v, EVTSEL + i, 0), 0);
	}
}

static const int all_ok[8] = { 0 };
static const int all_gp[8] = { -EINVAL, -EINVAL, -EINVAL, -EINVAL };
static const int only_pmc2[8] = { -EINVAL, -EINVAL, 0, -EINVAL };

/* The default, and the models' CPUID: no HLE or RTM, so both bits are reserved. */
Test(tsx, reserved_without_guest_tsx)
{
	struct vpmu_vcpu *v = new_vcpu("Skylake-Server", false, host_with_tsx);

	expect_bit(v, IN_TX, all_gp, "no guest TSX");
	expect_bit(v, IN_TXCP, all_gp, "no guest TSX");
	vpmu_vcpu_free(v);
}

/* KVM's intel_pmu_refresh(): the guest's HLE/RTM counts only where the host has TSX. */
Test(tsx, reserved_without_host_tsx)
{
	struct vpmu_vcpu *v = new_vcpu("Skylake-Server", true, host_without_tsx);

	expect_bit(v, IN_TX, all_gp, "no host TSX");
	expect_bit(v, IN_TXCP, all_gp, "no host TSX");
	vpmu_vcpu_free(v);
}

Test(tsx, in_tx_everywhere_in_txcp_on_pmc2)
{
	static const char *const models[] = { "Skylake-Server", "Icelake-Server" };

	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		struct vpmu_vcpu *v = new_vcpu(models[m], true, host_with_tsx);

		expect_bit(v, IN_TX, all_ok, models[m]);
		expect_bit(v, IN_TXCP, only_pmc2, models[m]);
		expect_bit(v, IN_TX | IN_TXCP, only_pmc2, models[m]);
		/* bits 34 and up stay what the model has (ICX: 34 is Adaptive_Record) */
		cr_expect_eq(vpmu_msr_write(v, EVTSEL + 2, BASE | B(35)), -EINVAL, "%s", models[m]);
		vpmu_vcpu_free(v);
	}
}

/* A config from before `tsx` existed: reserved, whatever the host. */
Test(tsx, old_config_size)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_host_tsx = host_with_tsx;
	vpmu_config_init(&cfg);
	cfg.tsx = true;
	cfg.size = offsetof(struct vpmu_config, tsx);
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	expect_bit(v, IN_TX, all_gp, "old config");
	vpmu_vcpu_free(v);
}

/* The perf backend carries the bits to the host's raw event select on the same model. */
Test(tsx, identity_map_carries_the_bits)
{
	struct vpmu_vcpu *v = new_vcpu("Skylake-Server", true, host_with_tsx);
	struct host_pmu host = { .kind = HOST_PMU_HW, .raw_ok = true, .intel = true };
	struct vpmu_host_event ev = {
		.kind = HEV_GP, .usr = true, .os = true, .config = 0x3c | IN_TX | IN_TXCP
	};
	struct perf_event_attr a;

	host.model = model_lookup("Skylake-Server");
	cr_assert_eq(hostmap_attr(&v->model, &host, &ev, &a, NULL), 0);
	cr_expect_eq(a.type, PERF_TYPE_RAW);
	cr_expect_eq(a.config, 0x3c | IN_TX | IN_TXCP);
	vpmu_vcpu_free(v);
	/* without TSX the bits cannot reach the host */
	v = new_vcpu("Skylake-Server", false, host_with_tsx);
	cr_expect_eq(hostmap_attr(&v->model, &host, &ev, &a, NULL), -ENOENT);
	vpmu_vcpu_free(v);
}
