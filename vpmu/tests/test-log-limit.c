/* SPDX-License-Identifier: MIT */
/*
 * A guest cannot flood the VMM's log: toggling the enable bit of a counter
 * whose event the host cannot back gives one line per counter and reason
 * for the life of the vCPU; the repeats are counted in the stats
 * (log_repeats[slot]) and the JSON. Against the fake perf
 * kernel (fake-perf.h): perf_event_open failing, and an event the host
 * has no mapping for.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "facts.h"
/* the fake's helpers this file does not need */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "fake-perf.h"
#include "hostmap.h"
#include "pmu.h"

#define EVTSEL	   0x186
#define FIXED_CTRL 0x38d
#define GCTRL	   0x38f

#define USR	  B(16)
#define OS	  B(17)
#define EN	  B(22)
#define FX_OS(i)  B(4 * (i))
#define FX_USR(i) B(4 * (i) + 1)

#define TOGGLES 100000

static struct {
	unsigned int lines, warnings;
	char first[512], last[512], last_warning[512];
} out;

static void on_log(void *data, enum vpmu_log_level level, const char *msg)
{
	(void) data;
	if (!out.lines)
		snprintf(out.first, sizeof(out.first), "%s", msg);
	snprintf(out.last, sizeof(out.last), "%s", msg);
	out.lines++;
	if (level <= VPMU_LOG_WARNING) {
		out.warnings++;
		snprintf(out.last_warning, sizeof(out.last_warning), "%s", msg);
	}
}

/* Every level the library has, so that nothing is filtered before the limit. */
static struct vpmu_vcpu *new_vcpu(enum vpmu_backend backend)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = "Skylake-Server";
	cfg.backend = backend;
	cfg.log = on_log;
	cfg.log_level = VPMU_LOG_DEBUG;
	cfg.signo = -1;
	memset(&out, 0, sizeof(out));
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	return v;
}

/* The guest's FIXED_CTR_CTRL enable of fixed counter 1, on and off, each applied. */
static void toggle_fixed1(struct vpmu_vcpu *v, unsigned int times)
{
	for (unsigned int i = 0; i < times; i++) {
		test_wrmsr(v, FIXED_CTRL, FX_OS(1) | FX_USR(1));
		cr_assert_eq(vpmu_vcpu_sync(v), 0);
		test_wrmsr(v, FIXED_CTRL, 0);
		cr_assert_eq(vpmu_vcpu_sync(v), 0);
	}
}

static void setup(void)
{
	fake_install();
}

static void teardown(void)
{
	fake_uninstall();
	perf_backend_detect = host_pmu_detect;
}

TestSuite(log_limit, .init = setup, .fini = teardown);

/* perf_event_open refused (EMFILE) at every enable: one warning, 99 999 repeats. */
Test(log_limit, open_failure_toggled)
{
	struct vpmu_vcpu *v = new_vcpu(VPMU_BACKEND_TIME);
	struct vpmu_stats st;
	char json[8192], want[64];
	size_t len;

	fake.fail_open = EMFILE;
	fake.fail_open_count = -1;
	test_wrmsr(v, GCTRL, B(33));
	toggle_fixed1(v, TOGGLES);
	cr_expect_eq(fake.opens, TOGGLES, "every enable tried the host: %u", fake.opens);
	cr_expect_eq(out.warnings, 1, "%u warnings for %d toggles, the last: %s", out.warnings,
		     TOGGLES, out.last);
	cr_expect_leq(out.lines, 3, "%u lines in all", out.lines);
	cr_expect(strstr(out.first, "counter fixed1") && strstr(out.first, "EMFILE"), "%s",
		  out.first);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	/* each toggle has the same lines to say (the warning, and the core's debug note) */
	cr_expect_eq(st.log_repeats[9], (uint64_t) out.lines * (TOGGLES - 1),
		     "fixed1: %llu repeats of %u lines", (unsigned long long) st.log_repeats[9],
		     out.lines);
	cr_expect_eq(st.log_repeats[8], 0);
	cr_assert_eq(vpmu_stats_to_json(&st, 0, json, sizeof(json), &len), 0);
	snprintf(want, sizeof(want), "\"log_repeats\":%llu}",
		 (unsigned long long) st.log_repeats[9]);
	cr_expect(strstr(json, want), "%s in %s", want, json);

	/* for the life of the vCPU: a power-on reset does not start over */
	vpmu_vcpu_reset(v, VPMU_RESET_POWER_ON);
	test_wrmsr(v, GCTRL, B(33));
	toggle_fixed1(v, 10);
	cr_expect_eq(out.warnings, 1, "after a reset: %u warnings", out.warnings);
	vpmu_vcpu_free(v);
}

/* The precise figure: with only WARNING lines logged, repeats == toggles - 1. */
Test(log_limit, repeats_counted_exactly)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_stats st;

	vpmu_config_init(&cfg);
	cfg.backend = VPMU_BACKEND_TIME;
	cfg.log = on_log;
	cfg.log_level = VPMU_LOG_WARNING;
	cfg.signo = -1;
	memset(&out, 0, sizeof(out));
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	fake.fail_open = EMFILE;
	fake.fail_open_count = -1;
	test_wrmsr(v, GCTRL, B(33));
	toggle_fixed1(v, TOGGLES);
	cr_expect_eq(out.lines, 1, "%u lines", out.lines);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.log_repeats[9], TOGGLES - 1);
	vpmu_vcpu_free(v);
}

/* A host whose PMU libpfm4 does not know: a model-specific guest event has no host event. */
static int unknown_host(struct host_pmu *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->kind = HOST_PMU_HW;
	ret->raw_ok = true;
	ret->intel = true;
	snprintf(ret->why, sizeof(ret->why), "a fake host PMU libpfm4 does not know");
	return 0;
}

/* The case: the enable bit of an unmappable event, toggled by the guest. */
Test(log_limit, unmappable_event_toggled)
{
	struct vpmu_vcpu *v;
	struct vpmu_stats st;

	perf_backend_detect = unknown_host;
	v = new_vcpu(VPMU_BACKEND_PERF);
	test_wrmsr(v, GCTRL, B(0));
	for (unsigned int i = 0; i < TOGGLES; i++) {
		/* UOPS_EXECUTED.THREAD (B1H/01H): in the catalogue, not architectural */
		test_wrmsr(v, EVTSEL, 0x01b1 | USR | OS | EN);
		cr_assert_eq(vpmu_vcpu_sync(v), 0);
		test_wrmsr(v, EVTSEL, 0x01b1 | USR | OS);
		cr_assert_eq(vpmu_vcpu_sync(v), 0);
	}
	cr_expect_eq(fake.opens, 0);
	cr_expect_eq(out.warnings, 1, "%u warnings, the last: %s", out.warnings, out.last);
	cr_expect_leq(out.lines, 3, "%u lines in all", out.lines);
	cr_expect(strstr(out.first, "counter gp0") && strstr(out.first, "mapping the event"), "%s",
		  out.first);
	test_wrmsr(v, EVTSEL, 0x01b1 | USR | OS | EN);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.log_repeats[0], (uint64_t) out.lines * TOGGLES, "%llu repeats of %u lines",
		     (unsigned long long) st.log_repeats[0], out.lines);
	cr_expect(st.counters[0].flags & VPMU_CTR_UNBACKED);

	/* another reason on the same counter is news: one more line */
	test_wrmsr(v, EVTSEL, 0);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	fake.fail_open = EBUSY;
	fake.fail_open_count = -1;
	test_wrmsr(v, EVTSEL, 0x00c0 | USR | OS | EN); /* instructions: a generic perf event */
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(out.warnings, 2, "%u warnings, the last: %s", out.warnings, out.last_warning);
	cr_expect(strstr(out.last_warning, "EBUSY"), "%s", out.last_warning);
	vpmu_vcpu_free(v);
}

/* However many reasons a guest finds, a counter gets at most VPMU_LOG_REASONS lines. */
Test(log_limit, reasons_are_bounded)
{
	static const int errnos[] = { EMFILE, ENOENT, EOPNOTSUPP, EBUSY, EINVAL, ENODEV,
				      ENOMEM, ENOSPC, E2BIG,	  ENXIO, EIO,	 EFAULT };
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_stats st;

	vpmu_config_init(&cfg);
	cfg.backend = VPMU_BACKEND_TIME;
	cfg.log = on_log;
	cfg.log_level = VPMU_LOG_WARNING;
	cfg.signo = -1;
	memset(&out, 0, sizeof(out));
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	test_wrmsr(v, GCTRL, B(33));
	for (unsigned int round = 0; round < 3; round++) {
		for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
			fake.fail_open = errnos[i];
			fake.fail_open_count = -1;
			toggle_fixed1(v, 1);
		}
	}
	cr_expect_eq(out.warnings, VPMU_LOG_REASONS, "%u warnings", out.warnings);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.log_repeats[9] + out.lines, 3 * 12,
		     "every line not logged is counted: %llu repeats, %u lines",
		     (unsigned long long) st.log_repeats[9], out.lines);
	vpmu_vcpu_free(v);
}
