/* SPDX-License-Identifier: MIT */
/*
 * The LBR stack of LBR format 5 (SDM Vol. 3B 20.4.8, 20.12, Table 20-16):
 * TOS incremented before each write and wrapping, FROM/TO sign-extended
 * from bit 47, LBR_INFO cycles saturating, LBR_SELECT suppressing branch
 * classes, freeze on PMI (legacy and streamlined).
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "facts.h"

#define LBR_TOS	   0x1c9
#define LBR_SELECT 0x1c8
#define FROM(i)	   (0x680 + (i))
#define TO(i)	   (0x6c0 + (i))
#define INFO(i)	   (0xdc0 + (i))
#define DEBUGCTL   0x1d9

static struct vpmu_vcpu *lbr_vcpu(int version)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = "Skylake-Server";
	cfg.version = version;
	cfg.backend = VPMU_BACKEND_EXACT;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	return v;
}

Test(lbr, records_branches_from_tos)
{
	struct vpmu_vcpu *v = lbr_vcpu(-1);

	cr_expect_not(vpmu_lbr_active(v), "off until DEBUGCTL.LBR");
	vpmu_lbr_branch(v, 0x1000, 0x2000, VPMU_BR_JMP, 0, 5);
	cr_expect_eq(test_rdmsr(v, LBR_TOS), 0, "nothing recorded while off");
	test_wrmsr(v, DEBUGCTL, B(0));
	cr_expect(vpmu_lbr_active(v));
	vpmu_lbr_branch(v, 0x401000, 0x401100, VPMU_BR_CALL, 3, 7);
	vpmu_lbr_branch(v, 0xffffffff81000000ULL, 0xffffffff81000040ULL, VPMU_BR_COND, 0, 0x12345);
	cr_expect_eq(test_rdmsr(v, LBR_TOS), 2);
	cr_expect_eq(test_rdmsr(v, FROM(1)), 0x401000);
	cr_expect_eq(test_rdmsr(v, TO(1)), 0x401100);
	cr_expect_eq(test_rdmsr(v, INFO(1)), 7);
	cr_expect_eq(test_rdmsr(v, FROM(2)), 0xffffffff81000000ULL, "63:48 sign-extended");
	cr_expect_eq(test_rdmsr(v, INFO(2)), 0xffff, "cycle count saturates at 16 bits");
	/* 31 more: TOS wraps modulo 32 and overwrites the oldest */
	for (unsigned int i = 0; i < 31; i++)
		vpmu_lbr_branch(v, 0x500000 + i, 0x600000 + i, VPMU_BR_JMP, 3, 1);
	cr_expect_eq(test_rdmsr(v, LBR_TOS), 1);
	cr_expect_eq(test_rdmsr(v, FROM(1)), 0x500000 + 30);
	cr_expect_eq(test_rdmsr(v, FROM(2)), 0xffffffff81000000ULL, "entry 2 survives");
	vpmu_vcpu_free(v);
}

/* Each LBR_SELECT bit suppresses its class (Tables 20-11..13). */
Test(lbr, select_filters)
{
	static const struct {
		unsigned int bit;
		enum vpmu_branch_kind kind;
		unsigned int cpl;
	} cases[] = {
		{ 0, VPMU_BR_JMP, 0 },	    /* CPL_EQ_0 */
		{ 1, VPMU_BR_JMP, 3 },	    /* CPL_NEQ_0 */
		{ 2, VPMU_BR_COND, 3 },	    /* JCC */
		{ 3, VPMU_BR_CALL, 3 },	    /* NEAR_REL_CALL */
		{ 4, VPMU_BR_CALL_IND, 3 }, /* NEAR_IND_CALL */
		{ 5, VPMU_BR_RET, 3 },	    /* NEAR_RET */
		{ 6, VPMU_BR_JMP_IND, 3 },  /* NEAR_IND_JMP */
		{ 7, VPMU_BR_JMP, 3 },	    /* NEAR_REL_JMP */
		{ 8, VPMU_BR_FAR, 3 },	    /* FAR_BRANCH */
	};

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct vpmu_vcpu *v = lbr_vcpu(-1);

		test_wrmsr(v, DEBUGCTL, B(0));
		test_wrmsr(v, LBR_SELECT, B(cases[i].bit));
		vpmu_lbr_branch(v, 0x1000, 0x2000, cases[i].kind, cases[i].cpl, 1);
		cr_expect_eq(test_rdmsr(v, LBR_TOS), 0, "bit %u suppresses it", cases[i].bit);
		/* with that bit clear, the branch is recorded */
		test_wrmsr(v, LBR_SELECT, 0);
		vpmu_lbr_branch(v, 0x1000, 0x2000, cases[i].kind, cases[i].cpl, 1);
		cr_expect_eq(test_rdmsr(v, LBR_TOS), 1, "bit %u clear: recorded", cases[i].bit);
		vpmu_vcpu_free(v);
	}
}

/* Call-stack mode: returns pop the call they return from. */
Test(lbr, call_stack_mode)
{
	struct vpmu_vcpu *v = lbr_vcpu(-1);

	test_wrmsr(v, DEBUGCTL, B(0));
	/* JCC, NEAR_IND_JMP, NEAR_REL_JMP, FAR suppressed, EN_CALLSTACK, no CPL filter */
	test_wrmsr(v, LBR_SELECT, B(2) | B(6) | B(7) | B(8) | B(9));
	vpmu_lbr_branch(v, 0x100, 0x1000, VPMU_BR_CALL, 3, 1);
	vpmu_lbr_branch(v, 0x1010, 0x2000, VPMU_BR_CALL_IND, 3, 1);
	vpmu_lbr_branch(v, 0x2010, 0x2100, VPMU_BR_JMP, 3, 1);
	cr_expect_eq(test_rdmsr(v, LBR_TOS), 2);
	vpmu_lbr_branch(v, 0x2200, 0x1015, VPMU_BR_RET, 3, 1);
	cr_expect_eq(test_rdmsr(v, LBR_TOS), 1, "the inner call popped");
	cr_expect_eq(test_rdmsr(v, FROM(1)), 0x100, "the outer call is on top");
	vpmu_vcpu_free(v);
}

/* Freeze_LBRs_On_PMI: streamlined sets LBR_Frz, legacy clears DEBUGCTL.LBR. */
Test(lbr, freeze_on_pmi)
{
	for (int version = 3; version <= 4; version++) {
		struct vpmu_vcpu *v = lbr_vcpu(version);
		struct vpmu_exact_counts c = { .instructions = 1, .cycles = 1 };

		test_wrmsr(v, DEBUGCTL, B(0) | B(11));
		test_wrmsr(v, 0x4c1, B(48) - 1);
		test_wrmsr(v, 0x186, 0x5300c0); /* INST_RETIRED.ANY_P, INT */
		vpmu_vcpu_sync(v);
		vpmu_lbr_branch(v, 0x10, 0x20, VPMU_BR_JMP, 3, 1);
		cr_assert_eq(vpmu_exact_feed(v, &c), 0);
		cr_expect_not(vpmu_lbr_active(v), "v%d: frozen after the PMI", version);
		vpmu_lbr_branch(v, 0x30, 0x40, VPMU_BR_JMP, 3, 1);
		cr_expect_eq(test_rdmsr(v, LBR_TOS), 1, "v%d: nothing recorded while frozen",
			     version);
		if (version >= 4) {
			cr_expect_eq(test_rdmsr(v, 0x38e) & B(58), B(58), "LBR_Frz");
			cr_expect_eq(test_rdmsr(v, DEBUGCTL), B(0) | B(11), "DEBUGCTL unchanged");
			test_wrmsr(v, 0x390, B(58) | B(0));
		} else {
			cr_expect_eq(test_rdmsr(v, DEBUGCTL), B(11),
				     "legacy: DEBUGCTL.LBR cleared");
			test_wrmsr(v, DEBUGCTL, B(0) | B(11));
		}
		cr_expect(vpmu_lbr_active(v), "v%d: thawed by the handler", version);
		vpmu_lbr_branch(v, 0x50, 0x60, VPMU_BR_JMP, 3, 1);
		cr_expect_eq(test_rdmsr(v, FROM(2)), 0x50);
		vpmu_vcpu_free(v);
	}
}

Test(lbr, models_without_lbrs)
{
	struct vpmu_vcpu *v = test_vcpu("LunarLake", VPMU_BACKEND_EXACT);
	uint64_t val;

	cr_expect_eq(vpmu_msr_write(v, DEBUGCTL, B(0)), -EINVAL);
	cr_expect_not(vpmu_lbr_active(v));
	vpmu_lbr_branch(v, 1, 2, VPMU_BR_JMP, 0, 1);
	cr_expect_eq(vpmu_msr_read(v, LBR_TOS, &val), -ENXIO);
	vpmu_vcpu_free(v);
}
