/* SPDX-License-Identifier: MIT */
/*
 * Counting, overflow, freeze on PMI and PMI requests, driven through the
 * exact backend with exact numbers.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "vpmu/vpmu.h"
#include "facts.h"
#include "pmu.h"

#define EVTSEL	   0x186
#define A_PMC	   0x4c1
#define PMC	   0xc1
#define FIXED_CTR  0x309
#define FIXED_CTRL 0x38d
#define STATUS	   0x38e
#define GCTRL	   0x38f
#define OVF_CTRL   0x390
#define STATUS_SET 0x391
#define DEBUGCTL   0x1d9

/* IA32_PERFEVTSELx bits (§22.6.8.1) */
#define USR	       B(16)
#define OS	       B(17)
#define EDGE	       B(18)
#define INT	       B(20)
#define EN	       B(22)
#define INV	       B(23)
#define CMASK(n)       ((uint64_t) (n) << 24)
#define INST_ANY_P     0x00c0 /* INST_RETIRED.ANY_P */
#define BR_NEAR_CALL   0x02c4 /* BR_INST_RETIRED.NEAR_CALL */
#define BR_COND_NTAKEN 0x10c4
#define LLC_REF	       0x4f2e /* LONGEST_LAT_CACHE.REFERENCE */
#define REF_XCLK       0x013c /* CPU_CLK_THREAD_UNHALTED.REF_XCLK */

#define CTR_FRZ B(59)
#define LBR_FRZ B(58)

static int pmis;

static void on_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	(void) vcpu;
	(*(int *) data)++;
}

static struct vpmu_vcpu *vcpu_v(const char *model, int version)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.version = version;
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.pmi = on_pmi;
	cfg.pmi_data = &pmis;
	pmis = 0;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	return v;
}

static struct vpmu_vcpu *vcpu(const char *model)
{
	return vcpu_v(model, -1);
}

#define rd test_rdmsr

#define wr test_wrmsr

/* n instructions, 1 cycle and 1 reference cycle each, at `cpl` */
static void run(struct vpmu_vcpu *v, uint64_t n, unsigned int cpl)
{
	struct vpmu_exact_counts c = {
		.instructions = n,
		.cycles = n,
		.ref_cycles = n,
		.cpl = cpl,
	};

	cr_assert_eq(vpmu_exact_feed(v, &c), 0);
}

ParameterizedTestParameters(count, gp_overflow_after_exactly_n)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

/* A counter preset to 2^48 - N overflows on the Nth event. */
ParameterizedTest(unsigned int *fi, count, gp_overflow_after_exactly_n)
{
	const struct model_facts *f = &facts[*fi];
	const uint64_t top = B(f->width);

	for (unsigned int i = 0; i < f->nr_gp; i++) {
		struct vpmu_vcpu *v = vcpu(f->name);

		wr(v, A_PMC + i, top - 1000);
		wr(v, EVTSEL + i, INST_ANY_P | USR | OS | INT | EN);
		cr_assert_eq(vpmu_vcpu_sync(v), 0);
		cr_expect_eq(vpmu_exact_headroom(v), 1000);
		run(v, 999, 0);
		cr_expect_eq(rd(v, PMC + i), top - 1);
		cr_expect_eq(rd(v, STATUS), 0);
		cr_expect_eq(pmis, 0);
		cr_expect_eq(vpmu_exact_headroom(v), 1);
		run(v, 1, 0);
		cr_expect_eq(rd(v, PMC + i), 0, "wrapped to 0");
		cr_expect_eq(rd(v, STATUS), B(i), "%s GP%u: status", f->name, i);
		cr_expect_eq(pmis, 1, "INT set: one PMI");
		/* it goes on counting from 0, next overflow 2^48 events away */
		run(v, 5, 3);
		cr_expect_eq(rd(v, PMC + i), 5);
		cr_expect_eq(vpmu_exact_headroom(v), top - 5);
		vpmu_vcpu_free(v);
	}
}

/*
 * vpmu_exact_would_overflow: the same arithmetic as the feed, changing
 * nothing; it honours USR/OS, and branches count in their own unit.
 */
Test(count, would_overflow_predicts_the_feed)
{
	struct vpmu_vcpu *v = vcpu("Icelake-Server");
	const uint64_t top = B(48);
	struct vpmu_exact_counts c = { .instructions = 999, .cycles = 999, .ref_cycles = 999 };

	wr(v, A_PMC + 0, top - 1000);
	wr(v, EVTSEL + 0, INST_ANY_P | OS | INT | EN);
	wr(v, A_PMC + 1, top - 3);
	wr(v, EVTSEL + 1, 0xc4 | USR | INT | EN); /* BR_INST_RETIRED.ALL_BRANCHES, ring 3 only */
	wr(v, GCTRL, 3);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect(!vpmu_exact_would_overflow(v, &c));
	c.instructions = 1000;
	cr_expect(vpmu_exact_would_overflow(v, &c), "the 1000th instruction overflows GP0");
	c.cpl = 3;
	cr_expect(!vpmu_exact_would_overflow(v, &c), "GP0 counts at CPL 0 only");
	c.branches = 3;
	cr_expect(vpmu_exact_would_overflow(v, &c), "the 3rd ring-3 branch overflows GP1");
	c.branches = 2;
	cr_expect(!vpmu_exact_would_overflow(v, &c));
	cr_expect_eq(vpmu_exact_headroom(v), 3, "nothing changed");
	cr_expect_eq(rd(v, PMC + 0), top - 1000);
	cr_expect_eq(rd(v, STATUS), 0);
	cr_expect_eq(pmis, 0);
	/* not synced since a write: "maybe" */
	wr(v, A_PMC + 0, top - 1000);
	c.cpl = 0;
	c.instructions = 1;
	c.branches = 0;
	cr_expect(vpmu_exact_would_overflow(v, &c));
	vpmu_vcpu_free(v);
}

Test(count, no_pmi_without_int)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");

	wr(v, A_PMC + 2, B(48) - 10);
	wr(v, EVTSEL + 2, INST_ANY_P | USR | OS | EN);
	vpmu_vcpu_sync(v);
	run(v, 10, 0);
	cr_expect_eq(rd(v, STATUS), B(2));
	cr_expect_eq(pmis, 0);
	vpmu_vcpu_free(v);
}

/* Legacy 32-bit write of -N sign-extends: overflow after N (§22.6.8.2). */
Test(count, legacy_write_minus_n)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");

	wr(v, PMC, (uint32_t) -1000);
	cr_expect_eq(rd(v, PMC), 0xfffffffffc18ULL);
	wr(v, EVTSEL, INST_ANY_P | USR | OS | INT | EN);
	vpmu_vcpu_sync(v);
	run(v, 999, 3);
	cr_expect_eq(pmis, 0);
	run(v, 1, 3);
	cr_expect_eq(pmis, 1);
	cr_expect_eq(rd(v, STATUS), B(0));
	vpmu_vcpu_free(v);
}

/* A write of all-ones overflows on the very next event. */
Test(count, write_all_ones_then_one_event)
{
	struct vpmu_vcpu *v = vcpu("Icelake-Server");

	wr(v, A_PMC + 7, B(48) - 1);
	wr(v, EVTSEL + 7, INST_ANY_P | OS | INT | EN);
	vpmu_vcpu_sync(v);
	cr_expect_eq(rd(v, STATUS), 0, "writing the value alone sets no status");
	cr_expect_eq(vpmu_exact_headroom(v), 1);
	run(v, 1, 0);
	cr_expect_eq(rd(v, STATUS), B(7));
	cr_expect_eq(pmis, 1);
	vpmu_vcpu_free(v);
}

ParameterizedTestParameters(count, fixed_overflow_after_exactly_n)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, count, fixed_overflow_after_exactly_n)
{
	const struct model_facts *f = &facts[*fi];

	/* fixed 0..2: instructions, cycles, reference cycles (TSC rate) */
	for (unsigned int i = 0; i < 3; i++) {
		struct vpmu_vcpu *v = vcpu(f->name);

		wr(v, FIXED_CTR + i, B(f->width) - 500);
		wr(v, FIXED_CTRL, 0xbULL << (4 * i)); /* OS, USR, PMI */
		wr(v, GCTRL, B(32 + i));
		vpmu_vcpu_sync(v);
		run(v, 499, 3);
		cr_expect_eq(rd(v, STATUS), 0);
		cr_expect_eq(rd(v, FIXED_CTR + i), B(f->width) - 1);
		run(v, 1, 0);
		cr_expect_eq(rd(v, STATUS), B(32 + i), "%s fixed %u", f->name, i);
		cr_expect_eq(rd(v, FIXED_CTR + i), 0);
		cr_expect_eq(pmis, 1);
		/* without the PMI bit: status only */
		wr(v, OVF_CTRL, B(32 + i));
		wr(v, FIXED_CTR + i, B(f->width) - 1);
		wr(v, FIXED_CTRL, 0x3ULL << (4 * i));
		vpmu_vcpu_sync(v);
		run(v, 1, 0);
		cr_expect_eq(rd(v, STATUS), B(32 + i));
		cr_expect_eq(pmis, 1);
		vpmu_vcpu_free(v);
	}
}

Test(count, local_and_global_enable)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");

	wr(v, EVTSEL, INST_ANY_P | USR | OS | EN);
	wr(v, FIXED_CTRL, 0x3); /* fixed 0, both rings */
	wr(v, GCTRL, B(0) | B(32));
	vpmu_vcpu_sync(v);
	run(v, 100, 0);
	cr_expect_eq(rd(v, PMC), 100);
	cr_expect_eq(rd(v, FIXED_CTR), 100);
	/* global disable stops both */
	wr(v, GCTRL, 0);
	vpmu_vcpu_sync(v);
	run(v, 50, 0);
	cr_expect_eq(rd(v, PMC), 100);
	cr_expect_eq(rd(v, FIXED_CTR), 100);
	wr(v, GCTRL, B(0) | B(32));
	vpmu_vcpu_sync(v);
	run(v, 7, 0);
	cr_expect_eq(rd(v, PMC), 107);
	/* local disable: EN clear / ring bits clear */
	wr(v, EVTSEL, INST_ANY_P | USR | OS);
	wr(v, FIXED_CTRL, 0);
	vpmu_vcpu_sync(v);
	run(v, 50, 0);
	cr_expect_eq(rd(v, PMC), 107);
	cr_expect_eq(rd(v, FIXED_CTR), 107);
	/* EN with neither USR nor OS counts nothing */
	wr(v, EVTSEL, INST_ANY_P | EN);
	vpmu_vcpu_sync(v);
	run(v, 50, 0);
	run(v, 50, 3);
	cr_expect_eq(rd(v, PMC), 107);
	vpmu_vcpu_free(v);
}

Test(count, usr_os_filtering)
{
	struct vpmu_vcpu *v = vcpu("Icelake-Server");

	wr(v, EVTSEL + 0, INST_ANY_P | USR | EN);
	wr(v, EVTSEL + 1, INST_ANY_P | OS | EN);
	wr(v, EVTSEL + 2, INST_ANY_P | USR | OS | EN);
	wr(v, FIXED_CTRL, 0x1 | 0x2 << 4); /* fixed 0 ring 0, fixed 1 ring > 0 */
	wr(v, GCTRL, 0x7 | B(32) | B(33));
	vpmu_vcpu_sync(v);
	run(v, 10, 0);
	run(v, 200, 3);
	run(v, 3000, 1);
	cr_expect_eq(rd(v, PMC + 0), 3200);
	cr_expect_eq(rd(v, PMC + 1), 10);
	cr_expect_eq(rd(v, PMC + 2), 3210);
	cr_expect_eq(rd(v, FIXED_CTR + 0), 10);
	cr_expect_eq(rd(v, FIXED_CTR + 1), 3200);
	vpmu_vcpu_free(v);
}

Test(count, branch_kinds_and_memory)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	struct vpmu_exact_counts c = {
		.instructions = 1000,
		.cycles = 1500,
		.branches = 300,
		.cond_branches = 200,
		.cond_taken = 150,
		.near_calls = 20,
		.near_returns = 19,
		.near_taken = 210,
		.far_branches = 2,
		.loads = 400,
		.stores = 100,
		.mem_insts = 450,
	};

	wr(v, EVTSEL + 0, BR_NEAR_CALL | USR | OS | EN);
	wr(v, EVTSEL + 1, BR_COND_NTAKEN | USR | OS | EN);
	wr(v, EVTSEL + 2, 0x83d0 | USR | OS | EN); /* MEM_INST_RETIRED.ANY */
	wr(v, EVTSEL + 3, 0x40c4 | USR | OS | EN); /* BR_INST_RETIRED.FAR_BRANCH */
	vpmu_vcpu_sync(v);
	cr_assert_eq(vpmu_exact_feed(v, &c), 0);
	cr_expect_eq(rd(v, PMC + 0), 20);
	cr_expect_eq(rd(v, PMC + 1), 50);
	cr_expect_eq(rd(v, PMC + 2), 450);
	cr_expect_eq(rd(v, PMC + 3), 2);
	/* CMask/Inv on instructions: each instruction retires in its own cycle */
	wr(v, EVTSEL + 0, INST_ANY_P | USR | OS | EN | CMASK(1));
	wr(v, EVTSEL + 1, INST_ANY_P | USR | OS | EN | CMASK(2));
	wr(v, EVTSEL + 2, INST_ANY_P | USR | OS | EN | CMASK(1) | INV);	 /* stall cycles */
	wr(v, EVTSEL + 3, INST_ANY_P | USR | OS | EN | CMASK(16) | INV); /* all cycles */
	for (unsigned int i = 0; i < 4; i++)
		wr(v, A_PMC + i, 0);
	vpmu_vcpu_sync(v);
	cr_assert_eq(vpmu_exact_feed(v, &c), 0);
	cr_expect_eq(rd(v, PMC + 0), 1000);
	cr_expect_eq(rd(v, PMC + 1), 0);
	cr_expect_eq(rd(v, PMC + 2), 500);
	cr_expect_eq(rd(v, PMC + 3), 1500);
	vpmu_vcpu_free(v);
}

/* REF_XCLK counts the crystal: TSC = crystal × 168/2 on Skylake-Server. */
Test(count, reference_cycles)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	struct vpmu_exact_counts c = { .ref_cycles = 83 };

	wr(v, EVTSEL, REF_XCLK | USR | OS | EN);
	wr(v, FIXED_CTRL, 0x3 << 8);
	wr(v, GCTRL, B(0) | B(34));
	vpmu_vcpu_sync(v);
	cr_assert_eq(vpmu_exact_feed(v, &c), 0);
	cr_expect_eq(rd(v, PMC), 0);
	c.ref_cycles = 1;
	cr_assert_eq(vpmu_exact_feed(v, &c), 0);
	cr_expect_eq(rd(v, PMC), 1, "84 TSC ticks = 1 crystal tick");
	c.ref_cycles = 84 * 1000;
	cr_assert_eq(vpmu_exact_feed(v, &c), 0);
	cr_expect_eq(rd(v, PMC), 1001);
	cr_expect_eq(rd(v, FIXED_CTR + 2), 84 * 1001);
	vpmu_vcpu_free(v);
}

/* An event the backend cannot count never counts, and stats say so. */
Test(count, unbacked_event)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	struct vpmu_stats st;

	wr(v, EVTSEL + 1, LLC_REF | USR | OS | EN);
	wr(v, EVTSEL + 2, INST_ANY_P | USR | OS | EN | EDGE | CMASK(1));
	vpmu_vcpu_sync(v);
	run(v, 1000, 0);
	cr_expect_eq(rd(v, PMC + 1), 0);
	cr_expect_eq(rd(v, PMC + 2), 0);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.counters[1].flags,
		     VPMU_CTR_IMPLEMENTED | VPMU_CTR_PROGRAMMED | VPMU_CTR_UNBACKED);
	cr_expect_eq(st.counters[1].error, -EOPNOTSUPP);
	cr_expect_eq(st.counters[2].flags & VPMU_CTR_UNBACKED, VPMU_CTR_UNBACKED);
	cr_expect_eq(st.counters[0].flags, VPMU_CTR_IMPLEMENTED, "never programmed");
	vpmu_vcpu_free(v);
}

/* Overshoot in one batch is kept: the counter wraps and goes on. */
Test(count, overshoot_in_one_batch)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");

	wr(v, A_PMC, B(48) - 10);
	wr(v, EVTSEL, INST_ANY_P | USR | OS | EN | INT);
	vpmu_vcpu_sync(v);
	run(v, 25, 0);
	cr_expect_eq(rd(v, PMC), 15);
	cr_expect_eq(rd(v, STATUS), B(0));
	cr_expect_eq(pmis, 1);
	vpmu_vcpu_free(v);
}

/*
 * Table 20-3, legacy column (perfmon v2-3): the CPU clears GLOBAL_CTRL,
 * the handler reads status, clears it through OVF_CTRL, re-enables.
 */
Test(freeze, legacy_pmi_handler)
{
	struct vpmu_vcpu *v = vcpu_v("Skylake-Server", 3);

	wr(v, DEBUGCTL, B(12) | B(11) | B(0)); /* freeze perfmon + LBRs, LBR on */
	wr(v, A_PMC, B(48) - 100);
	wr(v, EVTSEL, INST_ANY_P | USR | OS | INT | EN);
	wr(v, FIXED_CTRL, 0x3);
	wr(v, GCTRL, B(0) | B(32));
	vpmu_vcpu_sync(v);
	run(v, 100, 3);
	/* 1-2: frozen, GLOBAL_CTRL cleared, DEBUGCTL.LBR cleared */
	cr_expect_eq(pmis, 1);
	cr_expect_eq(rd(v, GCTRL), 0);
	cr_expect_eq(rd(v, DEBUGCTL), B(12) | B(11));
	/* counters no longer count */
	run(v, 40, 3);
	cr_expect_eq(rd(v, PMC), 0);
	cr_expect_eq(rd(v, FIXED_CTR), 100);
	/* 3: read status; 5: write 1s to OVF_CTRL; 6: status clear */
	cr_expect_eq(rd(v, STATUS), B(0));
	wr(v, OVF_CTRL, rd(v, STATUS));
	cr_expect_eq(rd(v, STATUS), 0);
	/* 7: re-enable; counting resumes */
	wr(v, GCTRL, B(0) | B(32));
	vpmu_vcpu_sync(v);
	run(v, 3, 3);
	cr_expect_eq(rd(v, PMC), 3);
	cr_expect_eq(rd(v, FIXED_CTR), 103);
	vpmu_vcpu_free(v);
}

/*
 * Table 20-3, streamlined column (v4+): the CPU sets CTR_Frz and leaves
 * GLOBAL_CTRL alone; the handler writes the status mask to
 * GLOBAL_STATUS_RESET and counting resumes with no re-enable.
 */
Test(freeze, streamlined_pmi_handler)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	uint64_t mask;

	wr(v, DEBUGCTL, B(12) | B(11) | B(0));
	wr(v, A_PMC, B(48) - 100);
	wr(v, EVTSEL, INST_ANY_P | USR | OS | INT | EN);
	wr(v, FIXED_CTRL, 0x3);
	wr(v, GCTRL, B(0) | B(32));
	vpmu_vcpu_sync(v);
	run(v, 100, 3);
	cr_expect_eq(pmis, 1);
	cr_expect_eq(rd(v, GCTRL), B(0) | B(32), "GLOBAL_CTRL unchanged");
	cr_expect_eq(rd(v, DEBUGCTL), B(12) | B(11) | B(0), "DEBUGCTL.LBR unchanged");
	mask = rd(v, STATUS);
	cr_expect_eq(mask, B(0) | CTR_FRZ | LBR_FRZ);
	run(v, 40, 3);
	cr_expect_eq(rd(v, PMC), 0, "frozen");
	cr_expect_eq(rd(v, FIXED_CTR), 100);
	wr(v, OVF_CTRL, mask);
	cr_expect_eq(rd(v, STATUS), 0);
	vpmu_vcpu_sync(v);
	run(v, 3, 3);
	cr_expect_eq(rd(v, PMC), 3);
	cr_expect_eq(rd(v, FIXED_CTR), 103);
	vpmu_vcpu_free(v);
}

/* Without the freeze bits nothing freezes. */
Test(freeze, off)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");

	wr(v, A_PMC, B(48) - 1);
	wr(v, EVTSEL, INST_ANY_P | USR | OS | INT | EN);
	vpmu_vcpu_sync(v);
	run(v, 10, 0);
	cr_expect_eq(rd(v, STATUS), B(0));
	cr_expect_eq(rd(v, PMC), 9);
	vpmu_vcpu_free(v);
}

/*
 * GLOBAL_STATUS_SET (v4) sets status bits with their effects (CTR_Frz
 * stops counting) and requests no PMI: it is the state-restore path.
 */
Test(status, set_and_reset)
{
	struct vpmu_vcpu *v = vcpu("Icelake-Server");

	wr(v, EVTSEL, INST_ANY_P | USR | OS | INT | EN);
	vpmu_vcpu_sync(v);
	wr(v, STATUS_SET, B(0) | B(33) | B(62));
	cr_expect_eq(rd(v, STATUS), B(0) | B(33) | B(62));
	cr_expect_eq(pmis, 0);
	wr(v, STATUS_SET, CTR_FRZ);
	vpmu_vcpu_sync(v);
	run(v, 10, 0);
	cr_expect_eq(rd(v, PMC), 0, "CTR_Frz set by software freezes too");
	wr(v, OVF_CTRL, CTR_FRZ | B(33));
	cr_expect_eq(rd(v, STATUS), B(0) | B(62));
	vpmu_vcpu_sync(v);
	run(v, 10, 0);
	cr_expect_eq(rd(v, PMC), 10);
	cr_expect_eq(vpmu_msr_write(v, STATUS_SET, B(40)), -EINVAL, "no fixed counter 8");
	vpmu_vcpu_free(v);
}

/* MSR writes only mark counters; one sync does one operation per counter. */
Test(batching, one_op_per_changed_counter)
{
	struct vpmu_vcpu *v = vcpu("Icelake-Server");
	struct vpmu_stats a, b;

	wr(v, EVTSEL, INST_ANY_P | USR | OS | EN);
	wr(v, EVTSEL + 1, BR_NEAR_CALL | USR | OS | EN);
	vpmu_vcpu_sync(v);
	cr_assert_eq(vpmu_stats_read(v, &a), 0);
	cr_expect_eq(a.creates, 2);
	/* 100 writes: counter values, GLOBAL_CTRL toggles, the same event */
	for (int i = 0; i < 25; i++) {
		wr(v, A_PMC, B(48) - 1000 - i);
		wr(v, GCTRL, 0);
		wr(v, GCTRL, 0xff);
		wr(v, EVTSEL, INST_ANY_P | USR | OS | EN);
	}
	vpmu_vcpu_sync(v);
	cr_assert_eq(vpmu_stats_read(v, &b), 0);
	/* GP0 changed value, GP1 only saw GLOBAL_CTRL go and come back:
	 * both were touched, each gets exactly one operation */
	cr_expect_leq(b.backend_ops - a.backend_ops, 2);
	cr_expect_eq(b.counters[0].updates - a.counters[0].updates, 1);
	cr_expect_eq(b.creates, a.creates, "re-arming with the same event creates nothing");
	cr_expect_eq(rd(v, PMC), B(48) - 1024);
	/* a changed event is recreated, once */
	wr(v, EVTSEL, BR_NEAR_CALL | USR | OS | EN);
	wr(v, EVTSEL, INST_ANY_P | OS | EN);
	vpmu_vcpu_sync(v);
	cr_assert_eq(vpmu_stats_read(v, &a), 0);
	cr_expect_eq(a.creates, b.creates + 1);
	cr_expect_eq(a.backend_ops, b.backend_ops + 1);
	/* an untouched vCPU syncs for free */
	vpmu_vcpu_sync(v);
	cr_assert_eq(vpmu_stats_read(v, &b), 0);
	cr_expect_eq(b.backend_ops, a.backend_ops);
	vpmu_vcpu_free(v);
}

/* A read of a counter is exact at any time, even between syncs. */
Test(count, reads_are_exact)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	uint64_t val;

	wr(v, EVTSEL, INST_ANY_P | USR | OS | EN);
	vpmu_vcpu_sync(v);
	run(v, 12345, 0);
	cr_expect_eq(rd(v, PMC), 12345);
	cr_assert_eq(vpmu_rdpmc(v, 0, &val), 0);
	cr_expect_eq(val, 12345);
	/* a write then a read before any sync: the new value, nothing stale */
	wr(v, A_PMC, 7);
	cr_expect_eq(rd(v, PMC), 7);
	vpmu_vcpu_sync(v);
	run(v, 1, 0);
	cr_expect_eq(rd(v, PMC), 8);
	vpmu_vcpu_free(v);
}

Test(count, feed_needs_exact_backend)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_exact_counts c = { .instructions = 1 };

	vpmu_config_init(&cfg);
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	cr_expect_eq(vpmu_exact_feed(v, &c), -EOPNOTSUPP);
	cr_expect_eq(vpmu_exact_headroom(v), UINT64_MAX);
	vpmu_vcpu_free(v);
	cfg.backend = (enum vpmu_backend) 42;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &v), -EINVAL);
}

Test(lvt, decode)
{
	struct vpmu_lvt l;

	vpmu_lvt_decode(0xfe, &l); /* fixed, vector 0xfe */
	cr_expect_eq(l.action, VPMU_LVT_FIXED);
	cr_expect_eq(l.vector, 0xfe);
	cr_expect_eq(l.after, 0x100fe, "delivery sets the mask bit");
	vpmu_lvt_decode(0x400, &l); /* NMI */
	cr_expect_eq(l.action, VPMU_LVT_NMI);
	cr_expect_eq(l.after, 0x10400);
	vpmu_lvt_decode(0x100fe, &l); /* masked */
	cr_expect_eq(l.action, VPMU_LVT_DROP);
	cr_expect_eq(l.after, 0x100fe);
	vpmu_vcpu_free(NULL);
	vpmu_lvt_decode(0x0f, &l); /* illegal vector 15 */
	cr_expect_eq(l.action, VPMU_LVT_DROP);
	vpmu_lvt_decode(0x2fe, &l); /* SMI */
	cr_expect_eq(l.action, VPMU_LVT_DROP);
	vpmu_lvt_decode(0x7fe, &l); /* ExtINT */
	cr_expect_eq(l.action, VPMU_LVT_DROP);
}

Test(stats, figures)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	struct vpmu_stats st;
	uint64_t val;

	wr(v, A_PMC, B(48) - 5);
	wr(v, EVTSEL, INST_ANY_P | USR | OS | INT | EN);
	cr_expect_eq(vpmu_msr_write(v, EVTSEL, B(21)), -EINVAL);
	cr_expect_eq(vpmu_msr_read(v, 0xc5, &val), -ENXIO);
	vpmu_vcpu_sync(v);
	run(v, 5, 0);
	vpmu_pmi_delivered(v);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.version, VPMU_STATS_VERSION);
	cr_expect_str_eq(st.model, "Skylake-Server");
	cr_expect_str_eq(st.backend, "exact");
	cr_expect_eq(st.msr_writes, 3);
	cr_expect_eq(st.msr_reads, 1);
	cr_expect_eq(st.msr_faults, 2);
	cr_expect_eq(st.overflows, 1);
	cr_expect_eq(st.pmis_requested, 1);
	cr_expect_eq(st.pmis_delivered, 1);
	cr_expect_eq(st.global_status, B(0));
	cr_expect_eq(st.counters[0].config, INST_ANY_P | USR | OS | INT | EN);
	cr_expect_eq(st.counters[0].overflows, 1);
	cr_expect_eq(st.counters[0].flags, VPMU_CTR_IMPLEMENTED | VPMU_CTR_PROGRAMMED |
						   VPMU_CTR_BACKED | VPMU_CTR_RUNNING);
	cr_expect_eq(st.counters[8].flags, VPMU_CTR_IMPLEMENTED);
	cr_expect_eq(st.counters[11].flags, 0, "Skylake-Server has no fixed counter 3");
	cr_expect_eq(st.pmis_merged, 0);
	vpmu_vcpu_free(v);
}

/*
 * A second PMI while the first one's vector is still pending in the IRR:
 * the APIC merges them into one interrupt (SDM Vol. 3A 11.8.4). The VMM
 * says so with vpmu_pmi_merged(): counted apart from the delivered ones.
 */
Test(stats, merged_pmis)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	struct vpmu_stats st;
	char json[8192];
	size_t len;

	wr(v, A_PMC, B(48) - 5);
	wr(v, EVTSEL, INST_ANY_P | USR | OS | INT | EN);
	vpmu_vcpu_sync(v);
	run(v, 5, 0);
	vpmu_pmi_delivered(v);
	wr(v, A_PMC, B(48) - 5);
	run(v, 5, 0);
	vpmu_pmi_merged(v);
	wr(v, A_PMC, B(48) - 5);
	run(v, 5, 0);
	vpmu_pmi_merged(v);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.pmis_requested, 3);
	cr_expect_eq(st.pmis_delivered, 1);
	cr_expect_eq(st.pmis_merged, 2);
	cr_assert_eq(vpmu_stats_to_json(&st, 0, json, sizeof(json), &len), 0);
	cr_expect(strstr(json, "\"pmis_requested\":3,\"pmis_delivered\":1,"), "%s", json);
	cr_expect(strstr(json, ",\"pmis_merged\":2,"), "%s", json);
	cr_expect(strstr(json, ",\"log_repeats\":0}"), "%s", json);
	/* a caller whose struct ends before the fields: they are left out, never read */
	cr_assert_eq(vpmu_stats_to_json_sized(&st, offsetof(struct vpmu_stats, pmis_merged), 0,
					      json, sizeof(json), &len),
		     0);
	cr_expect(!strstr(json, "pmis_merged") && !strstr(json, "log_repeats"), "%s", json);
	vpmu_vcpu_free(v);
}

/*
 * A reader thread copies the stats while the vCPU thread counts. GP0 and
 * fixed 0 both count instructions and are published together, so any
 * torn copy shows them apart, or a count going backwards.
 */
static atomic_bool done, reading;

static void *reader(void *arg)
{
	struct vpmu_vcpu *v = arg;
	uint64_t last = 0, reads = 0;
	struct vpmu_stats st;

	while (!atomic_load(&done)) {
		cr_assert_eq(vpmu_stats_read(v, &st), 0);
		if (st.counters[0].count != st.counters[8].count || st.counters[0].count < last ||
		    st.counters[0].count != 7 * (st.syncs - 1)) {
			fprintf(stderr, "torn: gp0 %llu fixed0 %llu last %llu syncs %llu\n",
				(unsigned long long) st.counters[0].count,
				(unsigned long long) st.counters[8].count,
				(unsigned long long) last, (unsigned long long) st.syncs);
			return (void *) 1;
		}
		last = st.counters[0].count;
		reads++;
		atomic_store(&reading, true);
	}
	return reads ? NULL : (void *) 2;
}

Test(stats, concurrent_reader_sees_no_torn_values)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	pthread_t t;
	void *res;

	wr(v, EVTSEL, INST_ANY_P | USR | OS | EN);
	wr(v, FIXED_CTRL, 0x3);
	wr(v, GCTRL, B(0) | B(32));
	/* sync k publishes 7 * (k - 1) instructions: every field comes from one publication */
	vpmu_vcpu_sync(v);
	atomic_store(&done, false);
	atomic_store(&reading, false);
	cr_assert_eq(pthread_create(&t, NULL, reader, v), 0);
	/* however busy the machine, the reader has started before the writer does */
	while (!atomic_load(&reading))
		sched_yield();
	for (int i = 0; i < 200000; i++) {
		run(v, 7, 0);
		vpmu_vcpu_sync(v); /* publishes */
	}
	atomic_store(&done, true);
	cr_assert_eq(pthread_join(t, &res), 0);
	cr_expect_null(res, "reader saw a torn or backwards value (%p)", res);
	vpmu_vcpu_free(v);
}

/*
 * The same, step by step and deterministic: at every step of a
 * publication (the sequence odd, some words stored), a reader's attempt
 * is refused, never a mixture of two publications; once it is done the
 * attempt gets the new figures whole.
 */
static struct {
	struct vpmu_vcpu *v;
	size_t steps, accepted, publications;
} mid_publication;

static void read_at_each_step(struct vpmu_vcpu *v, size_t step)
{
	struct vpmu_stats st;

	if (v != mid_publication.v)
		return;
	mid_publication.steps++;
	mid_publication.publications += step == 0;
	if (stats_read_attempt(v, &st, NULL, NULL) != -EAGAIN)
		mid_publication.accepted++;
}

Test(stats, reader_never_takes_a_publication_in_progress)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	const size_t words = sizeof(struct vpmu_stats) / 8;
	struct vpmu_stats st;

	wr(v, EVTSEL, INST_ANY_P | USR | OS | EN);
	wr(v, FIXED_CTRL, 0x3);
	wr(v, GCTRL, B(0) | B(32));
	vpmu_vcpu_sync(v);
	cr_assert_eq(stats_read_attempt(v, &st, NULL, NULL), 0);
	cr_expect_eq(st.counters[0].count, 0);
	run(v, 7, 0);
	mid_publication.v = v;
	stats_publish_step = read_at_each_step;
	vpmu_vcpu_sync(v);
	stats_publish_step = NULL;
	cr_expect_eq(mid_publication.publications, 1);
	cr_expect_eq(mid_publication.steps, words + 1, "%zu steps for %zu words",
		     mid_publication.steps, words);
	cr_expect_eq(mid_publication.accepted, 0,
		     "%zu of %zu copies taken while a publication was under way",
		     mid_publication.accepted, mid_publication.steps);
	cr_assert_eq(stats_read_attempt(v, &st, NULL, NULL), 0);
	cr_expect_eq(st.counters[0].count, 7);
	cr_expect_eq(st.counters[8].count, 7);
	vpmu_vcpu_free(v);
}

/* A whole publication between the reader's first look and its copy: the attempt is refused. */
static void publish_meanwhile(void *data)
{
	struct vpmu_vcpu *v = data;

	run(v, 7, 0);
	vpmu_vcpu_sync(v);
}

Test(stats, reader_retries_after_a_publication_during_its_copy)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	struct vpmu_stats st;

	wr(v, EVTSEL, INST_ANY_P | USR | OS | EN);
	wr(v, GCTRL, B(0));
	vpmu_vcpu_sync(v);
	memset(&st, 0x5a, sizeof(st));
	cr_expect_eq(stats_read_attempt(v, &st, publish_meanwhile, v), -EAGAIN);
	cr_expect_eq(st.version, 0x5a5a5a5a, "*ret untouched on -EAGAIN");
	cr_assert_eq(stats_read_attempt(v, &st, NULL, NULL), 0);
	cr_expect_eq(st.counters[0].count, 7);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.counters[0].count, 7);
	vpmu_vcpu_free(v);
}
