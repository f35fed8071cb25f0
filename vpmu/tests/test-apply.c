/* SPDX-License-Identifier: MIT */
/*
 * Folding a counter is a pure read: a wrap a guest read or a PEBS
 * record's counters group finds is queued, and the work (re-arm, PEBS
 * record, freeze, PMI) happens once, at the next sync, never from inside
 * the read. A scripted backend stands in for a host backend whose
 * counter wrapped before its overflow signal arrived.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "backend.h"
#include "facts.h"
#include "pmu.h"

#define PMC0	   0xc1
#define EVTSEL0	   0x186
#define EVTSEL1	   0x187
#define A_PMC0	   0x4c1
#define A_PMC1	   0x4c2
#define STATUS	   0x38e
#define GCTRL	   0x38f
#define PEBS_BASE  0x3f4
#define PEBS_INDEX 0x3f5
#define GP0_CFG_C  0x1903
#define GP1_CFG_C  0x1907

/* PERFEVTSEL: INST_RETIRED.ANY_P, USR OS EN, and INT */
#define SEL	0x4300c0ULL
#define SEL_INT (SEL | B(20))

/* What the next update or read of each counter reports as counted. */
static uint64_t script[64];
static unsigned int reads_in_pmi;
static int pmis;
static uint8_t ram[1 << 20];
static uint64_t header_at_pmi; /* the PEBS record header when the PMI came */

static bool script_can_count(void *state, const struct vpmu_host_event *ev)
{
	return true;
}

static int script_update(void *state, unsigned int ctr, const struct vpmu_hw_want *want,
			 uint64_t *ret_delta)
{
	*ret_delta = want->discard ? 0 : script[ctr];
	script[ctr] = 0;
	return 0;
}

static uint64_t script_read(void *state, unsigned int ctr, bool discard)
{
	uint64_t d = script[ctr];

	script[ctr] = 0;
	return d;
}

static const struct vpmu_backend_ops scripted = {
	.name = "scripted",
	.cheap_read = false,
	.can_count = script_can_count,
	.update = script_update,
	.read = script_read,
};

static void on_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	pmis++;
	memcpy(&header_at_pmi, ram, 8);
}

static int get_regs(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->rip = 0x1000;
	ret->long_mode = true;
	return 0;
}

static struct vpmu_vcpu *scripted_vcpu(const char *model)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_mem_region r = { .gpa = 0x400000, .size = sizeof(ram), .hva = ram };

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.backend = VPMU_BACKEND_NONE;
	cfg.pmi = on_pmi;
	cfg.regs = get_regs;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	cr_assert_eq(vpmu_vcpu_set_memory(v, &r, 1), 0);
	v->backend = &scripted; /* before anything is programmed */
	memset(script, 0, sizeof(script));
	memset(ram, 0, sizeof(ram));
	pmis = 0;
	reads_in_pmi = 0;
	header_at_pmi = 0;
	return v;
}

static void scripted_free(struct vpmu_vcpu *v)
{
	v->backend = &vpmu_backend_none; /* its state is the none backend's */
	vpmu_vcpu_free(v);
}

/* A guest RDMSR that finds its counter wrapped asks for no PMI itself. */
Test(fold, guest_read_queues_the_pmi)
{
	struct vpmu_vcpu *v = scripted_vcpu("Skylake-Server");

	test_wrmsr(v, A_PMC0, 0xfffffffffff0ULL);
	test_wrmsr(v, EVTSEL0, SEL_INT);
	vpmu_vcpu_sync(v);
	cr_assert(!vpmu_vcpu_pending(v));
	script[0] = 0x20; /* 16 to the wrap, 16 past it */
	cr_expect_eq(test_rdmsr(v, PMC0), 0x10, "the read folds the wrapped count");
	cr_expect_eq(test_rdmsr(v, STATUS) & 1, 1, "its overflow bit is set at once");
	cr_expect_eq(pmis, 0, "no PMI from inside the read");
	cr_expect(vpmu_vcpu_pending(v), "the PMI waits for the next sync");
	vpmu_vcpu_sync(v);
	cr_expect_eq(pmis, 1, "exactly one PMI, at the sync");
	cr_expect(!vpmu_vcpu_pending(v));
	vpmu_vcpu_sync(v);
	cr_expect_eq(pmis, 1, "and not again");
	scripted_free(v);
}

/*
 * Architectural PEBS with a counters group: GP0's assist snapshots GP1,
 * whose fold finds it wrapped (INT set). Its PMI comes after the record
 * is in the buffer, from the sync, not from inside the snapshot.
 */
Test(fold, pebs_snapshot_does_not_reenter)
{
	struct vpmu_vcpu *v = scripted_vcpu("arch-pebs");

	test_wrmsr(v, PEBS_BASE, 0x400000);
	test_wrmsr(v, PEBS_INDEX, B(32) | (0x100ULL << 36));	 /* EN, threshold 4 KiB */
	test_wrmsr(v, GP0_CFG_C, B(63) | B(36) | 0xffffff00ULL); /* EN, CNTR_GP, reload -256 */
	test_wrmsr(v, GP1_CFG_C, B(35));			 /* CNTR_ALLOW */
	test_wrmsr(v, A_PMC0, 0xffffffffffffULL);
	test_wrmsr(v, A_PMC1, 0xfffffffffff0ULL);
	test_wrmsr(v, EVTSEL0, SEL);
	test_wrmsr(v, EVTSEL1, SEL_INT);
	vpmu_vcpu_sync(v);
	script[0] = 1;	  /* GP0 wraps: its PEBS assist */
	script[1] = 0x11; /* GP1 wrapped too, found only by the snapshot */
	counters_overflowed(v, B(0));
	cr_expect_eq(pmis, 1, "GP1's PMI");
	cr_expect_neq(header_at_pmi, 0, "asked for after the record was written");
	cr_expect_eq(test_rdmsr(v, STATUS) & 3, 2, "GP0's bit cleared by the assist, GP1's set");
	cr_expect_eq(test_rdmsr(v, A_PMC1), 1, "GP1 folded once");
	scripted_free(v);
}
