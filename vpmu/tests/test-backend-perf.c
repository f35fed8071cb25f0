/* SPDX-License-Identifier: MIT */
/*
 * The perf backend: guest counters on host hardware events. The engine
 * runs against a fake perf kernel (fake-perf.h) on a fake Skylake-server
 * host; the first test uses this host's real perf_event_open, whatever
 * it has (no PMU: every counter unbacked with a reason; a PMU: counting).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "facts.h"
#include "fake-perf.h"
#include "hostmap.h"
#include "model.h"
#include "pmu.h"

#define PMC	    0xc1
#define EVTSEL	    0x186
#define FIXED_CTR   0x309
#define FIXED_CTRL  0x38d
#define STATUS	    0x38e
#define GCTRL	    0x38f
#define OVF_CTRL    0x390
#define PEBS_ENABLE 0x3f1

#define USR	  B(16)
#define OS	  B(17)
#define INT	  B(20)
#define EN	  B(22)
#define FX_OS(i)  B(4 * (i))
#define FX_USR(i) B(4 * (i) + 1)
#define MASK48	  LOW(48)

#define CORE_CYCLES  0x003c /* CPU_CLK_UNHALTED.THREAD_P */
#define INST_RETIRED 0x00c0 /* INST_RETIRED.ANY_P */

static int fd_of(struct vpmu_vcpu *v, unsigned int ctr)
{
	return ((struct hc_set *) v->backend_state)->ctr[ctr].fd;
}

static const struct vpmu_counter_stats *ctr_stats(struct vpmu_vcpu *v, unsigned int slot,
						  struct vpmu_stats *st)
{
	cr_assert_eq(vpmu_stats_read(v, st), 0);
	return &st->counters[slot];
}

/* ---- this host, real perf_event_open ---------------------------------- */

/*
 * Whatever this host has, the vCPU runs: a hardware PMU backs the
 * counters; without one (as on most cloud VMs) each programmed counter is
 * unbacked with the reason in its stats and the log, reads back what the
 * guest wrote, and CPUID 0AH EBX marks every architectural event
 * unavailable.
 */
Test(perf_real, degrades_or_counts)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_PERF);
	const struct vpmu_counter_stats *cs;
	struct vpmu_cpuid_entry e;
	struct vpmu_stats st;
	char json[8192];
	size_t len;

	test_wrmsr(v, PMC, 100);
	test_wrmsr(v, EVTSEL, INST_RETIRED | USR | EN);
	test_wrmsr(v, FIXED_CTRL, FX_USR(0));
	test_wrmsr(v, GCTRL, B(0) | B(32));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cs = ctr_stats(v, 0, &st);
	cr_assert_eq(vpmu_stats_to_json(&st, 0, json, sizeof(json), &len), 0);
	cr_log_info("host: %s; gp0 flags %#x error %d\n",
		    fake_out.warnings ? fake_out.last_warning : "counting", cs->flags, cs->error);
	if (cs->flags & VPMU_CTR_BACKED) {
		/* a host PMU: the event is open (exclude_host: host work counts nothing) */
		cr_expect(fd_of(v, 0) >= 0);
		cr_expect(test_rdmsr(v, PMC) >= 100);
	} else {
		cr_expect(cs->flags & VPMU_CTR_UNBACKED);
		cr_expect_lt(cs->error, 0);
		cr_expect_eq(fd_of(v, 0), -1);
		cr_expect_geq(fake_out.warnings, 1);
		cr_expect(strstr(fake_out.last_warning, "perf backend"), "%s",
			  fake_out.last_warning);
		cr_expect(strstr(json, "\"state\":\"unbacked\""), "%s", json);
		cr_expect_eq(test_rdmsr(v, PMC), 100);
		cr_assert_eq(vpmu_vcpu_sync(v), 0);
		cr_expect_eq(test_rdmsr(v, PMC), 100, "an unbacked counter does not count");
		cr_assert_eq(vpmu_cpuid(v, 0xa, 0, &e), 0);
		cr_expect_eq(e.ebx, 0x7f, "EBX %#x: no event available", e.ebx);
	}
	vpmu_vcpu_free(v);
}

/* ---- a fake Skylake-server host ----------------------------------------- */

static int fake_detect(struct host_pmu *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->kind = HOST_PMU_HW;
	ret->raw_ok = true;
	ret->intel = true;
	snprintf(ret->pfm_pmu, sizeof(ret->pfm_pmu), "skx");
	ret->model = model_lookup("Skylake-Server");
	snprintf(ret->why, sizeof(ret->why), "a fake Skylake-server host");
	return 0;
}

static void setup(void)
{
	fake_install();
	perf_backend_detect = fake_detect;
}

static void teardown(void)
{
	fake_uninstall();
	perf_backend_detect = host_pmu_detect;
}

TestSuite(perf, .init = setup, .fini = teardown);

/* GP0 counting core cycles with a PMI every `period`. */
static void arm_gp0(struct vpmu_vcpu *v, uint64_t sel, uint64_t period)
{
	test_wrmsr(v, PMC, (0 - period) & MASK48);
	test_wrmsr(v, EVTSEL, sel | INT | EN);
	test_wrmsr(v, GCTRL, B(0));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
}

static void guest_pmi_handler(struct vpmu_vcpu *v, uint64_t period)
{
	cr_assert(test_rdmsr(v, STATUS) & B(0));
	test_wrmsr(v, PMC, (0 - period) & MASK48);
	test_wrmsr(v, OVF_CTRL, B(0));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
}

/*
 * The host event: the guest's own encoding (same model), guest mode only,
 * pinned, never precise (even for a PEBS counter), sampling IP, address,
 * weight and data source with the count, every `period` events.
 */
Test(perf, host_event)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_PERF);
	struct vpmu_cpuid_entry ce;
	struct fake_event *e;

	cr_assert_eq(vpmu_cpuid(v, 0xa, 0, &ce), 0);
	cr_expect_eq(ce.ebx, 0, "EBX %#x: every architectural event maps", ce.ebx);
	test_wrmsr(v, PEBS_ENABLE, B(0));
	arm_gp0(v, CORE_CYCLES | OS, 100000);
	e = fake_ev(fd_of(v, 0));
	cr_assert_not_null(e);
	cr_expect_eq(e->attr.type, PERF_TYPE_RAW);
	cr_expect_eq(e->attr.config, CORE_CYCLES);
	cr_expect(e->attr.exclude_host);
	cr_expect(!e->attr.exclude_guest);
	cr_expect(e->attr.exclude_user, "OS only");
	cr_expect(!e->attr.exclude_kernel);
	cr_expect(e->attr.pinned);
	cr_expect_eq(e->attr.precise_ip, 0, "never host PEBS with exclude_host");
	cr_expect_eq(e->attr.sample_type, PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_WEIGHT |
						  PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_READ);
	cr_expect_eq(e->attr.sample_period, 100000);
	cr_expect_eq(e->sig, SIGRTMIN + 4);
	vpmu_vcpu_free(v);
}

/*
 * The host's overflow sample is the guest's: its IP and data address
 * become what a PEBS record reports (vcpu->last_ip / last_dla, as the
 * exact backend feeds them), its weight the latency.
 */
Test(perf, sample_reaches_the_core)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_PERF);
	struct fake_event *e;
	unsigned int before;
	int fd;

	arm_gp0(v, CORE_CYCLES | USR | OS, 100000);
	fd = fd_of(v, 0);
	e = fake_ev(fd);
	e->sample_ip = 0x401234;
	e->sample_addr = 0x7ff000;
	e->sample_weight = 57;
	e->latency = 12; /* skid: the interrupt comes 12 events late */
	fake_count(fd, 99999);
	cr_expect_eq(vpmu_vcpu_poll(v), 0);
	fake_count(fd, 100);
	cr_expect_eq(vpmu_vcpu_poll(v), 1);
	cr_expect_eq(fake_out.pmis, 1);
	cr_expect_eq(v->last_ip, 0x401234);
	cr_expect_eq(v->last_dla, 0x7ff000);
	cr_expect_eq(v->last_latency, 57);
	/* 100099 events: 99 past the wrap */
	cr_expect_eq(test_rdmsr(v, PMC), 99);

	/* steady sampling from here: no syscall per PMI */
	guest_pmi_handler(v, 100000);
	before = fake_syscalls();
	for (int i = 0; i < 20; i++) {
		fake_count(fd, 100000);
		cr_assert_eq(vpmu_vcpu_poll(v), 1, "PMI %d", i);
		test_wrmsr(v, PMC, (0 - 100000) & MASK48);
		test_wrmsr(v, OVF_CTRL, B(0));
		cr_assert_eq(vpmu_vcpu_sync(v), 0);
	}
	cr_expect_eq(fake_out.pmis, 21);
	cr_expect_eq(fake_syscalls() - before, 0);
	vpmu_vcpu_free(v);
}

static int open_errnos[] = { EMFILE, ENOENT, EOPNOTSUPP, EACCES, EBUSY };

ParameterizedTestParameters(perf, open_failure_unbacks_one_counter)
{
	return cr_make_param_array(int, open_errnos, sizeof(open_errnos) / sizeof(open_errnos[0]));
}

/* A refused perf_event_open: that counter unbacked and silent, the others count. */
ParameterizedTest(int *err, perf, open_failure_unbacks_one_counter)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_PERF);
	const struct vpmu_counter_stats *cs;
	struct vpmu_stats st;

	fake.fail_open = *err;
	fake.fail_open_count = 1;
	test_wrmsr(v, PMC, 7);
	test_wrmsr(v, EVTSEL, INST_RETIRED | USR | OS | EN);
	test_wrmsr(v, EVTSEL + 1, CORE_CYCLES | USR | OS | EN);
	test_wrmsr(v, GCTRL, B(0) | B(1));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fd_of(v, 0), -1);
	cr_assert(fd_of(v, 1) >= 0);
	cr_expect_eq(fake_out.warnings, 1, "%d warnings: %s", fake_out.warnings,
		     fake_out.last_warning);
	cr_expect(strstr(fake_out.last_warning, "counter gp0"), "%s", fake_out.last_warning);
	cr_expect(strstr(fake_out.last_warning, strerrorname_np(*err)), "%s",
		  fake_out.last_warning);
	cs = ctr_stats(v, 0, &st);
	cr_expect(cs->flags & VPMU_CTR_UNBACKED);
	cr_expect_eq(cs->error, -*err);
	cr_expect(st.counters[1].flags & VPMU_CTR_BACKED);
	fake_count(fd_of(v, 1), 5000);
	cr_expect_eq(test_rdmsr(v, PMC), 7);
	cr_expect_eq(test_rdmsr(v, PMC + 1), 5000);
	vpmu_vcpu_free(v);
}

/*
 * Multiplexed (time running < time enabled) or never scheduled (a pinned
 * event in error reads end-of-file): degraded, with the host's times.
 */
Test(perf, not_scheduled_is_degraded)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_PERF);
	const struct vpmu_counter_stats *cs;
	struct vpmu_stats st;
	struct fake_event *e;
	char json[8192];
	size_t len;

	arm_gp0(v, CORE_CYCLES | USR | OS, 1000000);
	e = fake_ev(fd_of(v, 0));
	fake_count(fd_of(v, 0), 4000);
	test_rdmsr(v, PMC);
	cr_assert_eq(vpmu_vcpu_sync(v), 0); /* publishes the stats */
	cs = ctr_stats(v, 0, &st);
	cr_expect_eq(cs->flags & VPMU_CTR_DEGRADED, 0);
	cr_expect_eq(cs->time_enabled, 4000);
	cr_expect_eq(cs->time_running, 4000);

	e->running_deficit = 1000;
	test_rdmsr(v, PMC);
	cr_assert_eq(vpmu_vcpu_sync(v), 0); /* publishes the stats */
	cs = ctr_stats(v, 0, &st);
	cr_expect(cs->flags & VPMU_CTR_BACKED);
	cr_expect(cs->flags & VPMU_CTR_DEGRADED);
	cr_expect_eq(cs->error, -EBUSY);
	cr_expect_eq(cs->time_enabled, 4000);
	cr_expect_eq(cs->time_running, 3000);
	cr_assert_eq(vpmu_stats_to_json(&st, 0, json, sizeof(json), &len), 0);
	cr_expect(strstr(json, "\"time_enabled\":4000,\"time_running\":3000,"), "%s", json);
	cr_expect(
		strstr(json, "\"degraded\"],\"state\":\"backed\",\"error\":-16,\"log_repeats\":0}"),
		"%s", json);

	e->running_deficit = 0;
	e->short_read = true;
	test_rdmsr(v, PMC);
	cr_assert_eq(vpmu_vcpu_sync(v), 0); /* publishes the stats */
	cs = ctr_stats(v, 0, &st);
	cr_expect(cs->flags & VPMU_CTR_DEGRADED);
	cr_expect_eq(cs->error, -EBUSY);
	vpmu_vcpu_free(v);
}

/*
 * Reuse: a new period or value is a period ioctl on the same event, an
 * enable change an enable ioctl; a new event recreates it; a disabled
 * counter closes it.
 */
Test(perf, reuse_and_recreate)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_PERF);
	struct fake_event *e;
	unsigned int opens;

	arm_gp0(v, CORE_CYCLES | USR | OS, 1000);
	e = fake_ev(fd_of(v, 0));
	opens = fake.opens;
	fake_count(fd_of(v, 0), 10);
	test_wrmsr(v, PMC, (0 - 5000) & MASK48);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fake.opens, opens);
	cr_expect_eq(e->period, 5000);
	test_wrmsr(v, GCTRL, 0);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect(!e->enabled);
	test_wrmsr(v, GCTRL, B(0));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect(e->enabled);
	cr_expect_eq(fake.opens, opens);

	test_wrmsr(v, EVTSEL, INST_RETIRED | USR | OS | INT | EN);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fake.opens, opens + 1);
	cr_expect_eq(fake.nr_open, 1);
	test_wrmsr(v, EVTSEL, 0);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fake.nr_open, 0);
	vpmu_vcpu_free(v);
}

/* A lost record (ring overrun, throttling): the poll reads and raises the wrap. */
Test(perf, lost_record_found_by_poll)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_PERF);
	struct fake_event *e;
	int fd;

	arm_gp0(v, CORE_CYCLES | USR | OS, 1000);
	fd = fd_of(v, 0);
	e = fake_ev(fd);
	e->drop_samples = true;
	fake_count(fd, 1500);
	cr_expect_eq(vpmu_vcpu_poll(v), 0, "nothing says so yet");
	fake_record(e, PERF_RECORD_THROTTLE, (uint64_t[]){ 0, 0, 0 }, 3);
	cr_expect_eq(vpmu_vcpu_poll(v), 1);
	cr_expect_eq(fake_out.pmis, 1);
	cr_expect_eq(test_rdmsr(v, PMC), 500);
	vpmu_vcpu_free(v);
}
