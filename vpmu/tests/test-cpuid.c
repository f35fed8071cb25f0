/* SPDX-License-Identifier: MIT */
/*
 * CPUID leaves 01H, 0AH, 15H, 23H per model. Layouts: SDM Vol. 2A CPUID
 * (leaves 0AH, 23H), Vol. 3B 22.7.3 (15H), Vol. 3B 20.4.9 (01H DS bits).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>

#include "vpmu/vpmu.h"
#include "facts.h"

static struct vpmu_vcpu *new_vcpu(const char *model)
{
	return test_vcpu(model, VPMU_BACKEND_EXACT);
}

static struct vpmu_cpuid_entry leaf(struct vpmu_vcpu *v, uint32_t fn, uint32_t idx)
{
	struct vpmu_cpuid_entry e;

	cr_assert_eq(vpmu_cpuid(v, fn, idx, &e), 0, "leaf %#x.%u", fn, idx);
	cr_expect_eq(e.function, fn);
	cr_expect_eq(e.index, idx);
	return e;
}

ParameterizedTestParameters(cpuid, leaf_0a)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, cpuid, leaf_0a)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);
	struct vpmu_cpuid_entry e = leaf(v, 0xa, 0);

	/* EAX[7:0] version, [15:8] #GP, [23:16] width, [31:24] EBX length */
	cr_expect_eq(e.eax & 0xff, f->version);
	cr_expect_eq((e.eax >> 8) & 0xff, f->nr_gp);
	cr_expect_eq((e.eax >> 16) & 0xff, f->width);
	cr_expect_eq(e.eax >> 24, f->arch_events_len);
	/*
	 * EBX: 1 = event unavailable. The exact backend counts cycles,
	 * instructions, reference cycles, branches and branch misses; it
	 * has no cache model (LLC reference 3, LLC miss 4) and no pipeline
	 * model (topdown slots 7).
	 */
	cr_expect_eq(e.ebx, B(3) | B(4) | (f->arch_events_len > 7 ? B(7) : 0));
	/* ECX: fixed-counter bitmap from v5 on, 0 before */
	cr_expect_eq(e.ecx, f->version >= 5 ? LOW(f->nr_fixed) : 0);
	/* EDX[4:0] #fixed, [12:5] width, [15] AnyThread deprecated */
	cr_expect_eq(e.edx & 0x1f, f->nr_fixed);
	cr_expect_eq((e.edx >> 5) & 0xff, f->width);
	cr_expect_eq((e.edx >> 15) & 1, f->anythread_dep);
	cr_expect_eq(e.edx & ~0x9fffu, 0, "EDX reserved bits");
	vpmu_vcpu_free(v);
}

/* Exact register values for the two models whose real parts we know. */
Test(cpuid, leaf_0a_exact)
{
	struct vpmu_vcpu *v = new_vcpu("Skylake-Server");
	struct vpmu_cpuid_entry e = leaf(v, 0xa, 0);

	cr_expect_eq(e.eax, 0x07300404);
	cr_expect_eq(e.ebx, 0x18);
	cr_expect_eq(e.edx, 0x00000603);
	vpmu_vcpu_free(v);
	v = new_vcpu("Icelake-Server");
	e = leaf(v, 0xa, 0);
	cr_expect_eq(e.eax, 0x08300805);
	cr_expect_eq(e.ecx, 0xf);
	cr_expect_eq(e.edx, 0x00008604);
	vpmu_vcpu_free(v);
}

ParameterizedTestParameters(cpuid, leaf_01_and_misc_enable)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, cpuid, leaf_01_and_misc_enable)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);
	struct vpmu_cpuid_entry e = leaf(v, 1, 0);
	uint64_t misc;

	cr_expect_eq((e.ecx >> 15) & 1, 1, "PDCM: PERF_CAPABILITIES exists");
	cr_expect_eq((e.edx >> 21) & 1, f->ds, "DS");
	cr_expect_eq((e.ecx >> 2) & 1, f->ds, "DTES64: 64-bit DS layout");
	cr_expect_eq((e.ecx >> 4) & 1, f->ds, "DS-CPL");
	cr_expect_eq(e.ecx & ~((1u << 15) | (1u << 2) | (1u << 4)), 0);
	cr_expect_eq(e.edx & ~(1u << 21), 0);
	cr_expect_eq(e.eax | e.ebx, 0);
	/* MISC_ENABLE: EMON (7) = 1, BTS_UNAVAIL (11) = 1, PEBS_UNAVAIL (12) */
	misc = vpmu_misc_enable_patch(v, 1);
	cr_expect_eq(misc, 1 | B(7) | B(11) | (f->legacy_pebs ? 0 : B(12)));
	cr_expect_eq(vpmu_misc_enable_patch(v, B(12)) & B(12), f->legacy_pebs ? 0 : B(12));
	vpmu_vcpu_free(v);
}

ParameterizedTestParameters(cpuid, leaf_15)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, cpuid, leaf_15)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);
	struct vpmu_cpuid_entry e = leaf(v, 0x15, 0);

	/* TSC Hz = ECX × EBX ÷ EAX (§22.7.3); crystal per Table 22-95 */
	cr_expect_eq(e.ecx, f->crystal_hz);
	cr_assert_neq(e.eax, 0);
	cr_expect_eq((uint64_t) e.ecx * e.ebx / e.eax, f->tsc_hz);
	vpmu_vcpu_free(v);
}

ParameterizedTestParameters(cpuid, leaf_23)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, cpuid, leaf_23)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);
	struct vpmu_cpuid_entry e;

	if (f->version < 6) {
		cr_expect_eq(vpmu_cpuid(v, 0x23, 0, &e), -ENOENT);
		vpmu_vcpu_free(v);
		return;
	}
	e = leaf(v, 0x23, 0);
	/* EAX: sub-leaf 1 valid; 4 and 5 (arch PEBS) only on arch PEBS */
	cr_expect_eq(e.eax, B(1) | (f->arch_pebs ? B(4) | B(5) : 0));
	cr_expect_eq(e.ebx, 0x3, "UMASK2 and EQ");
	e = leaf(v, 0x23, 1);
	cr_expect_eq(e.eax, LOW(f->nr_gp));
	cr_expect_eq(e.ebx, LOW(f->nr_fixed));
	e = leaf(v, 0x23, 4);
	/* arch PEBS groups the CFG_C MSRs accept, bits 63:32 of it */
	cr_expect_eq(e.ebx, f->arch_pebs ? (uint32_t) ((B(35) | B(36) | B(37) | B(38) | B(49) |
							B(61) | B(62) | B(63)) >>
						       32)
					 : 0);
	e = leaf(v, 0x23, 5);
	cr_expect_eq(e.eax, f->arch_pebs ? LOW(f->nr_gp) : 0);
	cr_expect_eq(e.ecx, f->arch_pebs ? LOW(f->nr_fixed) : 0);
	vpmu_vcpu_free(v);
}

/* PERF_CAPABILITIES, CPUID and MISC_ENABLE tell one story. */
ParameterizedTestParameters(cpuid, agrees_with_msrs)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, cpuid, agrees_with_msrs)
{
	const struct model_facts *f = &facts[*fi];
	struct vpmu_vcpu *v = new_vcpu(f->name);
	uint64_t caps = 0, fmt;

	cr_assert_eq(vpmu_msr_read(v, 0x345, &caps), 0);
	cr_expect_eq(caps, f->perf_caps);
	fmt = (caps >> 8) & 0xf;
	if (f->arch_pebs) {
		/* §22.10.1.1: BASELINE 0, TRAP = ARCH_REG = TIMING = 1, no PT */
		cr_expect_eq(fmt, 0xf);
		cr_expect_eq(caps & (B(14) | B(16)), 0);
		cr_expect_eq(caps & (B(6) | B(7) | B(17)), B(6) | B(7) | B(17));
	}
	if (f->adaptive)
		cr_expect(fmt >= 4 && (caps & B(14)), "adaptive needs FMT >= 4 and BASELINE");
	cr_expect_eq(f->lbr_depth ? 5 : 0, caps & 0x3f, "LBR_FMT 5 iff 32 LBRs + LBR_INFO");
	vpmu_vcpu_free(v);
}

Test(cpuid, patch_table)
{
	struct vpmu_vcpu *v = new_vcpu("LunarLake");
	struct vpmu_cpuid_entry t[16] = {
		{ .function = 0, .eax = 0x16, .ebx = 0x756e6547 },
		{ .function = 1, .eax = 0x806c1, .ecx = 0x80000000u | (1u << 2), .edx = 0x1 },
		{ .function = 0xa, .eax = 0xdead },
	};
	size_t nr = 3;

	cr_assert_eq(vpmu_cpuid_patch(v, t, &nr, 16), 0);
	cr_expect_eq(t[0].eax, 0x23, "max leaf raised to 23H");
	cr_expect_eq(t[0].ebx, 0x756e6547, "vendor untouched");
	cr_expect_eq(t[1].eax, 0x806c1, "signature untouched");
	cr_expect_eq(t[1].ecx, 0x80000000u | (1u << 2) | (1u << 4) | (1u << 15));
	cr_expect_eq(t[1].edx, 0x1 | (1u << 21));
	cr_expect_eq(t[2].eax, 0x08300806, "0AH replaced");
	/* appended: (07H,1), 15H and 23H sub-leaves 0..5 */
	cr_expect_eq(nr, 3 + 1 + 1 + 6);
	cr_expect_eq(t[3].function, 0x07);
	cr_expect_eq(t[3].index, 1);
	cr_expect_eq(t[3].eax, 1u << 8, "ARCH_PERFMON_EXT: leaf 23H exists");
	cr_expect_eq(t[4].function, 0x15);
	cr_expect_eq(t[5].function, 0x23);
	cr_expect_eq(t[6].index, 1);
	cr_expect_eq(t[6].eax, 0xff);
	/* patching twice changes nothing */
	cr_assert_eq(vpmu_cpuid_patch(v, t, &nr, 16), 0);
	cr_expect_eq(nr, 11);
	/* too small a table: -ENOSPC, what fits is patched */
	nr = 3;
	t[2].eax = 0xdead;
	cr_expect_eq(vpmu_cpuid_patch(v, t, &nr, 4), -ENOSPC);
	cr_expect_eq(nr, 4);
	cr_expect_eq(t[2].eax, 0x08300806);
	vpmu_vcpu_free(v);
	/* a model without DS clears a VMM's stale DS bits */
	v = new_vcpu("arch-pebs");
	t[0] = (struct vpmu_cpuid_entry){ .function = 1,
					  .ecx = (1u << 2) | (1u << 4),
					  .edx = 1u << 21 };
	nr = 1;
	cr_expect_eq(vpmu_cpuid_patch(v, t, &nr, 1), -ENOSPC);
	cr_expect_eq(t[0].ecx, 1u << 15);
	cr_expect_eq(t[0].edx, 0);
	vpmu_vcpu_free(v);
}

/* Without a backend nothing counts, and the guest is told so. */
Test(cpuid, no_backend_no_events)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_cpuid_entry e;

	vpmu_config_init(&cfg);
	cfg.model = "Icelake-Server";
	cfg.backend = VPMU_BACKEND_NONE;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	e = leaf(v, 0xa, 0);
	cr_expect_eq(e.ebx, 0xff);
	vpmu_vcpu_free(v);
}

/* Narrowing the version changes the enumeration with it. */
Test(cpuid, narrowed_version)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_cpuid_entry e;
	uint64_t val;

	vpmu_config_init(&cfg);
	cfg.model = "Icelake-Server";
	cfg.version = 3;
	cfg.nr_fixed = 3;
	cfg.flags = VPMU_CONFIG_NO_METRICS;
	cfg.backend = VPMU_BACKEND_EXACT;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	e = leaf(v, 0xa, 0);
	cr_expect_eq(e.eax & 0xff, 3);
	cr_expect_eq(e.ecx, 0, "no fixed bitmap before v5");
	cr_expect_eq(e.edx, 3 | 48 << 5, "no AnyThread deprecation bit before v5");
	/* v4 MSRs and the streamlined freeze bits are gone */
	cr_expect_eq(vpmu_msr_read(v, 0x391, &val), -ENXIO);
	cr_expect_eq(vpmu_msr_read(v, 0x392, &val), -ENXIO);
	cr_expect_eq(vpmu_msr_write(v, 0x390, B(59)), -EINVAL);
	vpmu_vcpu_free(v);
	/* below v6 a format-6 model's PEBS cannot be described */
	cfg.model = "LunarLake";
	cfg.version = 5;
	cfg.nr_fixed = -1;
	cfg.flags = 0;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL);
	cfg.flags = VPMU_CONFIG_NO_PEBS;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	cr_expect_eq(vpmu_cpuid(v, 0x23, 0, &e), -ENOENT);
	vpmu_vcpu_free(v);
	cfg.version = 1;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL, "v1 has no GLOBAL_CTRL: not offered");
	cfg.version = 7;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL);
}

Test(cpuid, not_pmu_leaves)
{
	struct vpmu_vcpu *v = new_vcpu("Skylake-Server");
	struct vpmu_cpuid_entry e = { .function = 99 };

	cr_expect_eq(vpmu_cpuid(v, 0, 0, &e), -ENOENT);
	cr_expect_eq(vpmu_cpuid(v, 7, 2, &e), -ENOENT);
	cr_expect_eq(vpmu_cpuid(v, 6, 0, &e), -ENOENT);
	cr_expect_eq(vpmu_cpuid(v, 0x80000001, 0, &e), -ENOENT);
	cr_expect_eq(e.function, 99, "untouched");
	vpmu_vcpu_free(v);
}

/*
 * Leaf 23H is found through CPUID.(07H,1):EAX[8] (and 07H.0 EAX, the last
 * sub-leaf of 07H, must reach 1): only v6 models say so, every other model
 * takes the bit away from a host table that has it.
 */
Test(cpuid, leaf_7_perfmon_ext)
{
	struct vpmu_vcpu *v = new_vcpu("LunarLake");
	struct vpmu_cpuid_entry e;
	struct vpmu_cpuid_entry t[16] = {
		{ .function = 7, .index = 0, .eax = 0, .ebx = 0x12345678 },
		{ .function = 7, .index = 1, .eax = 0x10 },
	};
	size_t nr = 2;

	e = leaf(v, 7, 0);
	cr_expect_eq(e.eax, 1);
	e = leaf(v, 7, 1);
	cr_expect_eq(e.eax, 1u << 8);
	cr_expect_eq(e.ebx | e.ecx | e.edx, 0);
	cr_assert_eq(vpmu_cpuid_patch(v, t, &nr, 16), 0);
	cr_expect_eq(nr, 2 + 1 + 1 + 6, "0AH, 15H, 23H.0-5 appended; 07H.1 was there");
	for (size_t i = 2; i < nr; i++)
		cr_expect_neq(t[i].function, 7);
	cr_expect_eq(t[0].eax, 1, "last sub-leaf raised to 1");
	cr_expect_eq(t[0].ebx, 0x12345678, "feature bits untouched");
	cr_expect_eq(t[1].eax, 0x10 | 1u << 8, "other 07H.1 bits kept");
	t[0].eax = 2;
	cr_assert_eq(vpmu_cpuid_patch(v, t, &nr, 16), 0);
	cr_expect_eq(t[0].eax, 2, "never lowered");
	vpmu_vcpu_free(v);

	v = new_vcpu("Icelake-Server");
	t[0] = (struct vpmu_cpuid_entry){ .function = 7, .index = 0, .eax = 1 };
	t[1] = (struct vpmu_cpuid_entry){ .function = 7, .index = 1, .eax = 0x10 | 1u << 8 };
	nr = 2;
	cr_assert_eq(vpmu_cpuid_patch(v, t, &nr, 16), 0);
	cr_expect_eq(t[0].eax, 1);
	cr_expect_eq(t[1].eax, 0x10, "a v5 model has no leaf 23H");
	vpmu_vcpu_free(v);
}
