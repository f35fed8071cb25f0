/* SPDX-License-Identifier: MIT */
/*
 * The KVM setup data, without /dev/kvm: the MSR filter covers every PMU
 * MSR of each model and nothing else, the CPUID2 table carries the
 * model's PMU leaves, PMI MSIs are composed as the SDM says, and the
 * RDPMC shadow holds the vPMU's counter values.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <string.h>

#include "kvm-setup.h"

static const char *const models[] = { "Skylake-Server", "Icelake-Server", "LunarLake",
				      "arch-pebs" };
#define NR_MODELS (sizeof(models) / sizeof(models[0]))

static struct vpmu_vcpu *new_vcpu(const char *model)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.backend = VPMU_BACKEND_EXACT;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0, "%s", model);
	return v;
}

ParameterizedTestParameters(kvm_setup, filter_covers_pmu_msrs)
{
	static int idx[NR_MODELS];

	for (size_t i = 0; i < NR_MODELS; i++)
		idx[i] = (int) i;
	return cr_make_param_array(int, idx, NR_MODELS);
}

ParameterizedTest(int *m, kvm_setup, filter_covers_pmu_msrs)
{
	static struct kvm_msr_filter_plan plan;
	static uint32_t msrs[4096];
	static bool pmu[0x4000];
	struct vpmu_vcpu *v = new_vcpu(models[*m]);
	size_t n = vpmu_msr_list(v, msrs, 4096);
	unsigned int ranges = 0;

	cr_assert(n > 10 && n < 4096);
	cr_assert_eq(kvm_msr_filter_build(msrs, n, &plan), 0);
	memset(pmu, 0, sizeof(pmu));
	for (size_t i = 0; i < n; i++) {
		cr_expect(kvm_msr_filter_denies(&plan.filter, msrs[i], false), "%#x read", msrs[i]);
		cr_expect(kvm_msr_filter_denies(&plan.filter, msrs[i], true), "%#x write", msrs[i]);
		cr_assert_lt(msrs[i], 0x4000u, "PMU MSRs live below 4000H");
		pmu[msrs[i]] = true;
	}
	/* nothing else: every other MSR up to 3FFFH, and the far ranges, stay with KVM */
	for (uint32_t msr = 0; msr < 0x4000; msr++)
		if (!pmu[msr])
			cr_expect(!kvm_msr_filter_denies(&plan.filter, msr, false) &&
					  !kvm_msr_filter_denies(&plan.filter, msr, true),
				  "%#x", msr);
	cr_expect(!kvm_msr_filter_denies(&plan.filter, 0xc0000080, true)); /* EFER */
	cr_expect(!kvm_msr_filter_denies(&plan.filter, 0x4b564d00, true)); /* kvmclock */
	/* the architectural core of every model's list */
	for (uint32_t msr = 0x38d; msr <= 0x390; msr++)
		cr_expect(pmu[msr], "%#x listed", msr);
	cr_expect(pmu[0xc1] && pmu[0x186] && pmu[0x309] && pmu[0x345]);
	cr_expect_eq(plan.filter.flags, KVM_MSR_FILTER_DEFAULT_ALLOW);
	for (unsigned int i = 0; i < KVM_MSR_FILTER_MAX_RANGES; i++) {
		const struct kvm_msr_filter_range *r = &plan.filter.ranges[i];

		if (!r->nmsrs)
			continue;
		ranges++;
		cr_expect_eq(r->flags, KVM_MSR_FILTER_READ | KVM_MSR_FILTER_WRITE);
		cr_expect_leq(r->nmsrs, KVM_MSR_FILTER_MAX_BITMAP_SIZE * 8u);
		cr_expect(r->bitmap >= plan.bitmap[0] &&
			  r->bitmap <= plan.bitmap[KVM_MSR_FILTER_MAX_RANGES - 1]);
	}
	cr_expect_eq(ranges, 1, "%s: one range spans 0C1H..3FFFH", models[*m]);
	vpmu_vcpu_free(v);
}

Test(kvm_setup, filter_too_spread_out)
{
	static struct kvm_msr_filter_plan plan;
	uint32_t msrs[KVM_MSR_FILTER_MAX_RANGES + 1];

	for (unsigned int i = 0; i < KVM_MSR_FILTER_MAX_RANGES + 1; i++)
		msrs[i] = i * 0x10000u;
	cr_expect_eq(kvm_msr_filter_build(msrs, KVM_MSR_FILTER_MAX_RANGES + 1, &plan), -E2BIG);
	cr_expect_eq(kvm_msr_filter_build(msrs, KVM_MSR_FILTER_MAX_RANGES, &plan), 0);
	cr_expect_eq(plan.filter.ranges[15].base, 0xf0000u);
	cr_expect_eq(plan.filter.ranges[15].nmsrs, 1);
	cr_expect_eq(plan.filter.ranges[15].bitmap[0] & 1, 0);
	cr_expect(kvm_msr_filter_denies(&plan.filter, 0xf0000, false));
	cr_expect(!kvm_msr_filter_denies(&plan.filter, 0xf0001, false));
}

ParameterizedTestParameters(kvm_setup, cpuid_table)
{
	static int idx[NR_MODELS];

	for (size_t i = 0; i < NR_MODELS; i++)
		idx[i] = (int) i;
	return cr_make_param_array(int, idx, NR_MODELS);
}

/* A host's KVM_GET_SUPPORTED_CPUID, abridged: the PMU leaves are the host's and must go. */
static const struct kvm_cpuid_entry2 host[] = {
	{ .function = 0, .eax = 0x16, .ebx = 0x756e6547, .ecx = 0x6c65746e, .edx = 0x49656e69 },
	{ .function = 1,
	  .eax = 0x50654,
	  .ecx = 0xfffa3203 & ~(1u << 15),
	  .edx = 0x0f8bfbff & ~(1u << 21) },
	{ .function = 7,
	  .index = 0,
	  .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX,
	  .ebx = 0xd19f4fbb,
	  .ecx = 1u << 24 | 1u << 6 }, /* BUS_LOCK_DETECT, GFNI */
	{ .function = 0xa, .eax = 0x07300802, .ebx = 0xffffffff, .edx = 0x603 },
	/* the host's leaf 23H, sub-leaf 0 without the index flag, as an Intel host lists it */
	{ .function = 0x23, .index = 0, .eax = 0x3f, .ebx = 0x7 },
	{ .function = 0x80000000, .eax = 0x80000008 },
};

ParameterizedTest(int *m, kvm_setup, cpuid_table)
{
	struct kvm_cpuid_entry2 out[64];
	struct vpmu_vcpu *v = new_vcpu(models[*m]);
	struct vpmu_cpuid_entry want;
	int nr = kvm_cpuid_build(v, host, sizeof(host) / sizeof(host[0]), out, 64);
	bool saw_a = false, saw_23 = false, saw_7_0 = false, saw_7_1 = false;
	bool has_23 = vpmu_cpuid(v, 0x23, 0, &want) == 0;

	cr_assert_geq(nr, (int) (sizeof(host) / sizeof(host[0])));
	cr_assert_eq(vpmu_cpuid(v, 0xa, 0, &want), 0);
	for (int i = 0; i < nr; i++) {
		const struct kvm_cpuid_entry2 *e = &out[i];

		if (e->function == 0xa) {
			saw_a = true;
			cr_expect_eq(e->eax, want.eax);
			cr_expect_eq(e->ebx, want.ebx);
			cr_expect_eq(e->ecx, want.ecx);
			cr_expect_eq(e->edx, want.edx);
		}
		if (e->function == 7) {
			cr_expect_eq(e->flags, KVM_CPUID_FLAG_SIGNIFCANT_INDEX);
		}
		if (e->function == 7 && e->index == 0) {
			saw_7_0 = true;
			cr_expect_eq(e->eax, has_23 ? 1 : 0, "7.0:EAX is the last sub-leaf");
			cr_expect_eq(e->ebx, 0xd19f4fbb, "non-PMU leaves untouched");
			/* the vPMU's DEBUGCTL has no BLD (bit 2): no bus-lock detection either */
			cr_expect_eq(e->ecx, 1u << 6, "7.0:ECX %#x: BUS_LOCK_DETECT cleared",
				     e->ecx);
		}
		if (e->function == 7 && e->index == 1) {
			/* EAX[8] (ARCH_PERFMON_EXT) is how a guest finds leaf 23H */
			saw_7_1 = true;
			cr_expect_eq(e->eax, has_23 ? 1u << 8 : 0);
			cr_expect_eq(e->ebx | e->ecx | e->edx, 0);
		}
		if (e->function == 1) {
			struct vpmu_cpuid_entry pm;

			cr_assert_eq(vpmu_cpuid(v, 1, 0, &pm), 0);
			cr_expect_eq(e->eax, 0x50654);
			cr_expect_eq(!!(e->ecx & (1u << 15)), !!(pm.ecx & (1u << 15)), "PDCM");
			cr_expect_eq(!!(e->edx & (1u << 21)), !!(pm.edx & (1u << 21)), "DS");
		}
		if (e->function == 0x23 && !has_23) {
			/* the host's leaf stays, and says nothing */
			cr_expect_eq(e->flags, KVM_CPUID_FLAG_SIGNIFCANT_INDEX);
			cr_expect_eq(e->eax | e->ebx | e->ecx | e->edx, 0);
		} else if (e->function == 0x23) {
			struct vpmu_cpuid_entry a;

			saw_23 = true;
			cr_expect_eq(e->flags, KVM_CPUID_FLAG_SIGNIFCANT_INDEX);
			cr_assert_eq(vpmu_cpuid(v, 0x23, e->index, &a), 0);
			cr_expect_eq(e->eax, a.eax);
			cr_expect_eq(e->ebx, a.ebx);
		}
		if (e->function == 0)
			cr_expect_geq(e->eax, has_23 ? 0x23u : 0x16u);
	}
	cr_expect(saw_a);
	cr_expect(saw_7_0);
	cr_expect(saw_7_1, "%s: 07H sub-leaf 1 appended", models[*m]);
	cr_expect_eq(saw_23, has_23, "%s: leaf 23H", models[*m]);
	/* perfmon v6 models enumerate leaf 23H (SDM Vol. 2A CPUID leaf 23H; Vol. 3B 22.10.1):
	 * arch-pebs and LunarLake */
	cr_expect_eq(has_23, !!strcmp(models[*m], "Skylake-Server") &&
				     !!strcmp(models[*m], "Icelake-Server"));
	cr_expect_eq(kvm_cpuid_build(v, host, sizeof(host) / sizeof(host[0]), out, 2), -ENOSPC);
	vpmu_vcpu_free(v);
}

Test(kvm_setup, pmi_msi)
{
	struct kvm_msi msi;

	/* fixed vector F0H to APIC 3: address FEE03000H, data F0H (edge, fixed) */
	cr_assert_eq(kvm_pmi_msi(0x000000f0, 3, &msi), 0);
	cr_expect_eq(msi.address_lo, 0xfee03000u);
	cr_expect_eq(msi.address_hi, 0);
	cr_expect_eq(msi.data, 0xf0u);
	cr_expect_eq(msi.flags, 0);
	/* NMI: delivery mode 100b, vector ignored */
	cr_assert_eq(kvm_pmi_msi(0x000004fe, 0, &msi), 0);
	cr_expect_eq(msi.address_lo, 0xfee00000u);
	cr_expect_eq(msi.data, 0x400u);
	cr_assert_eq(kvm_pmi_msi(0x00000420, 0xff, &msi), 0);
	cr_expect_eq(msi.address_lo, 0xfeeff000u);
	/* masked, illegal vector, SMI/INIT/ExtINT modes, an x2APIC-only ID */
	cr_expect_eq(kvm_pmi_msi(0x000100f0, 0, &msi), -EAGAIN);
	cr_expect_eq(kvm_pmi_msi(0x0000000f, 0, &msi), -EINVAL);
	cr_expect_eq(kvm_pmi_msi(0x000002f0, 0, &msi), -EINVAL);
	cr_expect_eq(kvm_pmi_msi(0x000005f0, 0, &msi), -EINVAL);
	cr_expect_eq(kvm_pmi_msi(0x000007f0, 0, &msi), -EINVAL);
	cr_expect_eq(kvm_pmi_msi(0x000000f0, 0x100, &msi), -EINVAL);
}

Test(kvm_setup, rdpmc_shadow)
{
	struct vpmu_vcpu *v = new_vcpu("Skylake-Server");
	struct kvm_msr_entry e[16];
	size_t n;

	/* IA32_A_PMC1 (full width), IA32_PMC3 (legacy: bit 31 sign-extends), FIXED_CTR1 */
	cr_assert_eq(vpmu_msr_write(v, 0x4c2, 0xabcd12345678ULL), 0);
	cr_assert_eq(vpmu_msr_write(v, 0xc4, 0x80000001ULL), 0);
	cr_assert_eq(vpmu_msr_write(v, 0x30a, 0x55), 0);
	n = kvm_rdpmc_shadow(v, e, 16);
	cr_assert_eq(n, 7, "Skylake-Server: 4 GP + 3 fixed");
	for (unsigned int i = 0; i < 4; i++)
		cr_expect_eq(e[i].index, 0xc1 + i);
	for (unsigned int i = 0; i < 3; i++)
		cr_expect_eq(e[4 + i].index, 0x309 + i);
	cr_expect_eq(e[0].data, 0);
	cr_expect_eq(e[1].data, 0xabcd12345678ULL);
	cr_expect_eq(e[3].data, 0xffff80000001ULL, "48-bit counter, sign-extended from bit 31");
	cr_expect_eq(e[5].data, 0x55);
	cr_expect_eq(kvm_rdpmc_shadow(v, e, 5), 5);
	vpmu_vcpu_free(v);
}
