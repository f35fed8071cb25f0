/* SPDX-License-Identifier: MIT */
/*
 * The time backend: cycles from the vCPU thread's CPU time. Exact
 * numbers come from a fake perf kernel (fake-perf.h); a last group runs
 * on the real task-clock, its signals and ring buffer.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "facts.h"
#include "fake-perf.h"
#include "pmu.h"

#define PMC	   0xc1
#define EVTSEL	   0x186
#define FIXED_CTR  0x309
#define FIXED_CTRL 0x38d
#define STATUS	   0x38e
#define GCTRL	   0x38f
#define OVF_CTRL   0x390

#define USR	  B(16)
#define OS	  B(17)
#define INT	  B(20)
#define EN	  B(22)
#define FX_OS(i)  B(4 * (i))
#define FX_USR(i) B(4 * (i) + 1)
#define FX_PMI(i) B(4 * (i) + 3)
#define MASK48	  LOW(48)

#define CORE_CYCLES  0x003c /* CPU_CLK_UNHALTED.THREAD_P (SDM Vol. 3B Table 21-1) */
#define REF_XCLK     0x013c /* CPU_CLK_UNHALTED.REF_XCLK */
#define INST_RETIRED 0x00c0

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

/* Fixed counter 1 (core cycles) counting with a PMI every `period` cycles. */
static void arm_fixed1(struct vpmu_vcpu *v, uint64_t period)
{
	test_wrmsr(v, FIXED_CTR + 1, (0 - period) & MASK48);
	test_wrmsr(v, FIXED_CTRL, FX_OS(1) | FX_USR(1) | FX_PMI(1));
	test_wrmsr(v, GCTRL, B(33));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
}

/* What a guest PMI handler does: status, reload the same period, clear the status. */
static void guest_pmi_handler(struct vpmu_vcpu *v, unsigned int msr, unsigned int bit,
			      uint64_t period)
{
	cr_assert(test_rdmsr(v, STATUS) & B(bit));
	test_wrmsr(v, msr, (0 - period) & MASK48);
	test_wrmsr(v, OVF_CTRL, B(bit));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
}

static void setup(void)
{
	fake_install();
}

static void teardown(void)
{
	fake_uninstall();
}

TestSuite(time, .init = setup, .fini = teardown);

/*
 * CPUID.0AH:EBX bit j = architectural event j unavailable (Table 21-1):
 * only 0 (core cycles) and 2 (reference cycles) come from a clock.
 */
Test(time, cpuid_says_only_cycles)
{
	struct vpmu_cpuid_entry e;
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);

	cr_assert_eq(vpmu_cpuid(v, 0xa, 0, &e), 0);
	cr_expect_eq(e.ebx, 0x7a, "EBX %#x: 7 events, all but 0 and 2 unavailable", e.ebx);
	vpmu_vcpu_free(v);
	v = fake_vcpu("Icelake-Server", VPMU_BACKEND_TIME);
	cr_assert_eq(vpmu_cpuid(v, 0xa, 0, &e), 0);
	cr_expect_eq(e.ebx, 0xfa, "EBX %#x: 8 events, all but 0 and 2 unavailable", e.ebx);
	vpmu_vcpu_free(v);
}

/*
 * The host event: task-clock on this thread, the overflow signal routed
 * to it, a sample period in ns that ends when the guest counter wraps:
 * Skylake-Server's TSC is 25 MHz * 168 / 2 = 2.1 GHz (CPUID 15H), so
 * 1000000 cycles take 476190.47 ns: overflow at 476191 ns, not before.
 */
Test(time, host_event_and_period)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	struct fake_event *e;
	int fd;

	arm_fixed1(v, 1000000);
	fd = fd_of(v, 33);
	e = fake_ev(fd);
	cr_assert_not_null(e);
	cr_expect_eq(e->attr.type, PERF_TYPE_SOFTWARE);
	cr_expect_eq(e->attr.config, PERF_COUNT_SW_TASK_CLOCK);
	cr_expect_eq(e->attr.sample_period, 476191);
	cr_expect(e->attr.sample_type & PERF_SAMPLE_READ);
	cr_expect_eq(e->attr.read_format,
		     PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING);
	cr_expect(!e->attr.disabled);
	cr_expect_eq(e->owner_tid, (int) syscall(SYS_gettid));
	cr_expect_eq(e->sig, SIGRTMIN + 4, "F_SETSIG %d", e->sig);
	cr_expect(e->async);

	fake_count(fd, 476190);
	cr_expect_eq(vpmu_vcpu_poll(v), 0);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), (0 - 1000000 + 999999) & MASK48);
	cr_expect_eq(fake_out.pmis, 0);
	fake_count(fd, 1);
	cr_expect_eq(vpmu_vcpu_poll(v), 1);
	cr_expect_eq(fake_out.pmis, 1);
	cr_expect(test_rdmsr(v, STATUS) & B(33));
	/* 476191 ns = 1000001.1 cycles: one past the wrap */
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 1);
	vpmu_vcpu_free(v);
}

/* ns -> cycles on the running total: no drift from rounding each step. */
Test(time, conversion_is_exact)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	int f1, f2, g0;

	test_wrmsr(v, EVTSEL, REF_XCLK | USR | OS | EN);
	test_wrmsr(v, FIXED_CTRL, FX_OS(1) | FX_OS(2));
	test_wrmsr(v, GCTRL, B(0) | B(33) | B(34));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	f1 = fd_of(v, 33);
	f2 = fd_of(v, 34);
	g0 = fd_of(v, 0);
	cr_assert(f1 >= 0 && f2 >= 0 && g0 >= 0);
	for (int i = 0; i < 1000; i++) {
		fake_count(f1, 1);
		fake_count(f2, 1);
		fake_count(g0, 1);
		test_rdmsr(v, FIXED_CTR + 1);
		test_rdmsr(v, FIXED_CTR + 2);
		test_rdmsr(v, PMC);
	}
	/* 1000 ns at 2.1 GHz, 2.1 GHz, 25 MHz */
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 2100);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 2), 2100);
	cr_expect_eq(test_rdmsr(v, PMC), 25);
	fake_count(f1, 1000000000);
	fake_count(g0, 1000000000);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 2100 + 2100000000ull);
	cr_expect_eq(test_rdmsr(v, PMC), 25 + 25000000);
	vpmu_vcpu_free(v);

	/* LunarLake: 38.4 MHz crystal * 120 / 2 = 2.304 GHz */
	v = fake_vcpu("LunarLake", VPMU_BACKEND_TIME);
	test_wrmsr(v, FIXED_CTRL, FX_OS(1));
	test_wrmsr(v, GCTRL, B(33));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	fake_count(fd_of(v, 33), 1000);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 2304);
	vpmu_vcpu_free(v);
}

/*
 * Steady sampling: the guest reloads the same period in its PMI handler.
 * The kernel reloads the host period by itself and the sample carries the
 * count, so a PMI costs no syscall at all.
 */
Test(time, steady_sampling_costs_no_syscall)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	unsigned int before;
	int fd;

	arm_fixed1(v, 2100000); /* 1 ms */
	fd = fd_of(v, 33);
	/* each sample is taken 3 us past its overflow, as the hrtimer's would be */
	fake_ev(fd)->latency = 3000;
	fake_count(fd, 5000);
	before = fake_syscalls();
	for (int i = 0; i < 100; i++) {
		fake_count(fd, 1000000);
		cr_assert_eq(vpmu_vcpu_poll(v), 1, "PMI %d", i);
		guest_pmi_handler(v, FIXED_CTR + 1, 33, 2100000);
	}
	cr_expect_eq(fake_out.pmis, 100);
	cr_expect_eq(fake_syscalls() - before, 0, "%u syscalls for 100 PMIs",
		     fake_syscalls() - before);
	cr_expect_eq(fake.opens, 1);
	vpmu_vcpu_free(v);
}

/*
 * vpmu_vcpu_pending(): an emulator without signals asks between blocks.
 * It says true exactly when an overflow record is in the ring, costs no
 * syscall, and the poll then takes the record.
 */
Test(time, pending_tells_without_syscall)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	unsigned int before;
	int fd;

	arm_fixed1(v, 2100000); /* 1 ms */
	fd = fd_of(v, 33);
	before = fake_syscalls();
	cr_expect_not(vpmu_vcpu_pending(v), "nothing counted yet");
	fake_count(fd, 999999);
	cr_expect_not(vpmu_vcpu_pending(v), "1 ns before the overflow");
	fake_count(fd, 1);
	cr_expect(vpmu_vcpu_pending(v), "the overflow record is in the ring");
	cr_expect_eq(fake_syscalls() - before, 0);
	cr_expect_eq(vpmu_vcpu_poll(v), 1);
	cr_expect_not(vpmu_vcpu_pending(v), "the poll took it");
	cr_expect_eq(fake_out.pmis, 1);
	vpmu_vcpu_free(v);
}

/*
 * Samples taken late by a varying amount (the hrtimer's latency): the
 * period goes on from each wrap point, so PMIs stay one per period of
 * CPU time and the guest's count stays the host's.
 */
Test(time, late_samples_keep_the_period)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	struct fake_event *e;
	unsigned int before;
	int fd;

	arm_fixed1(v, 2100000);
	fd = fd_of(v, 33);
	e = fake_ev(fd);
	fake_count(fd, 10000);
	before = fake_syscalls();
	for (int i = 0; i < 50; i++) {
		e->latency = i % 2 ? 1000 : 9000;
		fake_count(fd, 1000000);
		cr_assert_eq(vpmu_vcpu_poll(v), 1, "PMI %d", i);
		guest_pmi_handler(v, FIXED_CTR + 1, 33, 2100000);
	}
	cr_expect_eq(fake_out.pmis, 50);
	cr_expect_eq(fake_syscalls() - before, 0);
	/* the grid stayed at 1 ms: 50 overflows in 50 ms of CPU time */
	cr_expect_eq(e->next, 51000000, "next host overflow at %llu", (unsigned long long) e->next);
	/* 50.01 ms of CPU at 2.1 GHz = 50 periods and 21000 cycles */
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), (0 - 2100000 + 21000) & MASK48);
	vpmu_vcpu_free(v);
}

/* A changed period re-arms: one read and one period ioctl, then steady again. */
Test(time, new_period_rearms_once)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	struct fake_event *e;
	unsigned int r0, i0;
	int fd;

	arm_fixed1(v, 2100000);
	fd = fd_of(v, 33);
	e = fake_ev(fd);
	fake_count(fd, 1000000);
	cr_assert_eq(vpmu_vcpu_poll(v), 1);
	r0 = fake.reads;
	i0 = fake.ioctls;
	guest_pmi_handler(v, FIXED_CTR + 1, 33, 4200000); /* 2 ms now */
	cr_expect_eq(fake.reads - r0, 1);
	cr_expect_eq(fake.ioctls - i0, 1);
	cr_expect_eq(e->period, 2000000);
	for (int i = 0; i < 10; i++) {
		fake_count(fd, 2000000);
		cr_assert_eq(vpmu_vcpu_poll(v), 1);
		guest_pmi_handler(v, FIXED_CTR + 1, 33, 4200000);
	}
	cr_expect_eq(fake.reads - r0, 1);
	cr_expect_eq(fake.ioctls - i0, 1);
	cr_expect_eq(fake_out.pmis, 11);
	vpmu_vcpu_free(v);
}

/*
 * A guest that does not reload after the overflow: the host's next
 * overflow is not the guest's (no PMI), and the counter is re-armed for
 * its real wrap, far away.
 */
Test(time, no_reload_no_second_pmi)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	struct fake_event *e;
	int fd;

	arm_fixed1(v, 2100000);
	fd = fd_of(v, 33);
	e = fake_ev(fd);
	fake_count(fd, 1000000);
	cr_assert_eq(vpmu_vcpu_poll(v), 1);
	test_wrmsr(v, OVF_CTRL, B(33));
	fake_count(fd, 1000000);
	cr_expect_eq(vpmu_vcpu_poll(v), 0);
	cr_expect_eq(fake_out.pmis, 1);
	cr_expect_eq(test_rdmsr(v, STATUS) & B(33), 0);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 2100000);
	/* re-armed at the 48-bit wrap: (2^48 - 2100000) / 2.1 GHz from here */
	cr_expect_gt(e->period, 100000000000000ull, "period %llu", (unsigned long long) e->period);
	vpmu_vcpu_free(v);
}

/*
 * Overflow never lost: a sample that never came (or a lost record) is
 * found by a later poll, which reads the count and raises the overflow.
 */
Test(time, lost_sample_found_by_poll)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	const struct vpmu_counter_stats *cs;
	struct vpmu_stats st;
	struct fake_event *e;
	int fd;

	arm_fixed1(v, 21000); /* 10 us */
	fd = fd_of(v, 33);
	e = fake_ev(fd);
	e->drop_samples = true;
	fake_count(fd, 20000);
	/* the wall clock says the overflow cannot be due yet: no read */
	cr_expect_eq(vpmu_vcpu_poll(v), 0);
	/* past the deadline (2 ms grace): the poll reads and finds the wrap */
	usleep(5000);
	cr_expect_eq(vpmu_vcpu_poll(v), 1);
	cr_expect_eq(fake_out.pmis, 1);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 21000);
	cs = ctr_stats(v, 9, &st);
	cr_expect(cs->flags & VPMU_CTR_DEGRADED);
	cr_expect_eq(cs->error, -ENOBUFS);

	/* a PERF_RECORD_LOST says so at once */
	e->drop_samples = false;
	guest_pmi_handler(v, FIXED_CTR + 1, 33, 21000);
	e->drop_samples = true;
	fake_count(fd, 10000);
	fake_record(e, PERF_RECORD_LOST, (uint64_t[]){ 0, 1 }, 2);
	cr_expect_eq(vpmu_vcpu_poll(v), 1);
	cr_expect_eq(fake_out.pmis, 2);
	vpmu_vcpu_free(v);
}

/* No ring buffer (mmap refused): still counts, overflows found by reading. */
Test(time, no_ring_buffer_degrades)
{
	struct vpmu_vcpu *v;
	const struct vpmu_counter_stats *cs;
	struct vpmu_stats st;
	int fd;

	fake.fail_mmap = EPERM;
	v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	arm_fixed1(v, 2100000);
	fd = fd_of(v, 33);
	cr_assert(fd >= 0);
	cr_expect(strstr(fake_out.last_log, "no ring buffer"), "log: %s", fake_out.last_log);
	fake_count(fd, 1000000);
	cr_expect_eq(vpmu_vcpu_poll(v), 1);
	cs = ctr_stats(v, 9, &st);
	cr_expect(cs->flags & VPMU_CTR_BACKED);
	cr_expect(cs->flags & VPMU_CTR_DEGRADED);
	cr_expect_eq(cs->error, -EPERM);
	vpmu_vcpu_free(v);
}

/*
 * Faults: whatever perf_event_open says, the vCPU goes on; that counter
 * is unbacked with the errno in its stats and one warning in the log,
 * does not count, and the other counters count.
 */
static int open_errnos[] = { EMFILE, ENOENT, EOPNOTSUPP, EACCES, EBUSY };

ParameterizedTestParameters(time, open_failure_unbacks_one_counter)
{
	return cr_make_param_array(int, open_errnos, sizeof(open_errnos) / sizeof(open_errnos[0]));
}

ParameterizedTest(int *err, time, open_failure_unbacks_one_counter)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	const struct vpmu_counter_stats *cs;
	struct vpmu_stats st;
	char json[8192];
	size_t len;

	fake.fail_open = *err;
	fake.fail_open_count = -1;
	test_wrmsr(v, FIXED_CTR + 1, 1234);
	arm_fixed1(v, 2100000);
	cr_expect_eq(fd_of(v, 33), -1);
	cr_expect_eq(fake_out.warnings, 1, "one warning, got %d: %s", fake_out.warnings,
		     fake_out.last_warning);
	cr_expect(strstr(fake_out.last_warning, "counter fixed1"), "%s", fake_out.last_warning);
	cr_expect(strstr(fake_out.last_warning, strerrorname_np(*err)), "%s",
		  fake_out.last_warning);
	cs = ctr_stats(v, 9, &st);
	cr_expect(cs->flags & VPMU_CTR_UNBACKED);
	cr_expect_eq(cs->error, -*err, "error %d", cs->error);
	cr_assert_eq(vpmu_stats_to_json(&st, 0, json, sizeof(json), &len), 0);
	cr_expect(strstr(json, "\"state\":\"unbacked\""), "%s", json);

	/* the host works again: another counter counts, this one still does not */
	fake.fail_open = 0;
	test_wrmsr(v, EVTSEL, CORE_CYCLES | USR | OS | EN);
	test_wrmsr(v, GCTRL, B(0) | B(33));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_assert(fd_of(v, 0) >= 0);
	fake_count(fd_of(v, 0), 1000);
	cr_expect_eq(test_rdmsr(v, PMC), 2100);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), (0 - 2100000) & MASK48);
	cs = ctr_stats(v, 0, &st);
	cr_expect(cs->flags & VPMU_CTR_BACKED);
	cr_expect_eq(cs->error, 0);
	cr_expect_eq(fake_out.warnings, 1);
	/* reprogrammed once the host can, it counts again */
	test_wrmsr(v, FIXED_CTRL, FX_OS(1));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_assert(fd_of(v, 33) >= 0);
	fake_count(fd_of(v, 33), 1000);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), (0 - 2100000 + 2100) & MASK48);
	vpmu_vcpu_free(v);
}

/* EACCES once (perf_event_paranoid >= 2): retried with exclude_kernel, and it counts. */
Test(time, eacces_retries_user_only)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);

	fake.fail_open = EACCES;
	fake.fail_open_count = 1;
	arm_fixed1(v, 2100000);
	cr_assert(fd_of(v, 33) >= 0);
	cr_expect(fake_ev(fd_of(v, 33))->attr.exclude_kernel);
	fake_count(fd_of(v, 33), 1000);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), (0 - 2100000 + 2100) & MASK48);
	vpmu_vcpu_free(v);
}

/* Instructions, branches...: unbacked, no host event, never count. */
Test(time, other_events_unbacked)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	const struct vpmu_counter_stats *cs;
	struct vpmu_stats st;

	test_wrmsr(v, EVTSEL, INST_RETIRED | USR | OS | EN);
	test_wrmsr(v, EVTSEL + 1, CORE_CYCLES | B(24) | USR | OS | EN); /* CMask 1 */
	test_wrmsr(v, FIXED_CTRL, FX_OS(0));
	test_wrmsr(v, GCTRL, B(0) | B(1) | B(32));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fake.opens, 0);
	for (unsigned int slot = 0; slot < 9; slot += slot == 1 ? 7 : 1) {
		cs = ctr_stats(v, slot, &st);
		cr_expect(cs->flags & VPMU_CTR_UNBACKED, "slot %u", slot);
		cr_expect_eq(cs->error, -EOPNOTSUPP, "slot %u", slot);
	}
	cr_expect_eq(test_rdmsr(v, PMC), 0);
	vpmu_vcpu_free(v);
}

/*
 * One host event per enabled guest counter, kept while only the enable
 * or the value changes, recreated when the event changes, closed when
 * the counter is disabled.
 */
Test(time, fds_follow_enabled_counters)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	unsigned int opens;

	for (int i = 0; i < 4; i++)
		test_wrmsr(v, EVTSEL + i, CORE_CYCLES | USR | OS | EN);
	test_wrmsr(v, FIXED_CTRL, FX_OS(1) | FX_OS(2));
	test_wrmsr(v, GCTRL, 0xf | B(33) | B(34));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fake.nr_open, 6);
	opens = fake.opens;

	test_wrmsr(v, GCTRL, 0);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	test_wrmsr(v, GCTRL, 0xf | B(33) | B(34));
	test_wrmsr(v, PMC, 5);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fake.opens, opens, "enable and value changes reuse the host events");

	test_wrmsr(v, EVTSEL, REF_XCLK | USR | OS | EN);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fake.opens, opens + 1, "a new event is a new host event");
	cr_expect_eq(fake.nr_open, 6);

	for (int i = 0; i < 4; i++)
		test_wrmsr(v, EVTSEL + i, 0);
	test_wrmsr(v, FIXED_CTRL, 0);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_expect_eq(fake.nr_open, 0);
	cr_expect_eq(fake.max_open, 6);
	vpmu_vcpu_free(v);
}

/* While the guest disables the counter, the host event does not count either. */
Test(time, disabled_counts_nothing)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	int fd;

	test_wrmsr(v, FIXED_CTRL, FX_OS(1) | FX_USR(1));
	test_wrmsr(v, GCTRL, B(33));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	fd = fd_of(v, 33);
	fake_count(fd, 1000);
	test_wrmsr(v, GCTRL, 0);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	fake_count(fd, 1000); /* the host event is disabled: nothing */
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 2100);
	/* USR alone counts the same CPU time: task-clock cannot split the guest's rings */
	cr_expect(!fake_ev(fd)->attr.exclude_user && !fake_ev(fd)->attr.exclude_kernel);
	vpmu_vcpu_free(v);
}

/* ---- the real task-clock ---------------------------------------------- */

static volatile sig_atomic_t signals;

static void on_signal(int sig)
{
	(void) sig;
	signals++;
}

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* PMIs at one per ms of CPU time: within 5% (see below) and one partial period. */
static bool within(int pmis, double ms)
{
	return pmis >= ms * 0.95 - 1 && pmis <= ms * 1.05 + 1;
}

/* A vCPU on the real perf, or skip the test where this host forbids perf_event_open. */
static struct vpmu_vcpu *real_vcpu(void)
{
	struct vpmu_vcpu *v;
	struct vpmu_stats st;

	fake_uninstall();
	v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	arm_fixed1(v, 2100000);
	if (fd_of(v, 33) < 0) {
		cr_expect(ctr_stats(v, 9, &st)->error < 0);
		cr_expect(strstr(fake_out.last_warning, "perf_event_open failed"), "%s",
			  fake_out.last_warning);
		cr_skip_test("perf_event_open(task-clock) refused here: %s", fake_out.last_warning);
	}
	return v;
}

/*
 * CPU time in, cycles out, and a real overflow signal to this thread for
 * each period: 1 ms periods over ~60 ms of CPU time, the PMI handler
 * reloading the period (so the count goes on from each wrap). Tolerance
 * 5% on cycles (this thread's CPU-time clock and task-clock are read at
 * slightly different moments, and the last overflow's hrtimer may not
 * have fired yet), the same 5% and one more on PMIs (the last period is
 * partial).
 */
Test(time, real_task_clock_signals, .timeout = 20)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct vpmu_vcpu *v;
	double t0, t1, expect;
	uint64_t cycles;

	sigaction(SIGRTMIN + 4, &sa, NULL);
	v = real_vcpu();
	t0 = thread_cpu_s();
	while (thread_cpu_s() - t0 < 0.06) {
		if (signals && vpmu_vcpu_poll(v))
			guest_pmi_handler(v, FIXED_CTR + 1, 33, 2100000);
	}
	t1 = thread_cpu_s();
	cycles = (uint64_t) fake_out.pmis * 2100000 +
		 ((test_rdmsr(v, FIXED_CTR + 1) + 2100000) & MASK48);
	expect = (t1 - t0) * 2.1e9;
	cr_log_info("%.1f ms CPU: %llu cycles (expected %.0f), %d signals, %d PMIs\n",
		    (t1 - t0) * 1e3, (unsigned long long) cycles, expect, (int) signals,
		    fake_out.pmis);
	cr_expect(cycles > expect * 0.95 && cycles < expect * 1.05, "cycles %llu, expected %.0f",
		  (unsigned long long) cycles, expect);
	cr_expect_geq(signals, fake_out.pmis);
	cr_expect(within(fake_out.pmis, (t1 - t0) * 1e3),
		  "%d PMIs in %.1f ms of CPU time at 1 ms "
		  "per PMI",
		  fake_out.pmis, (t1 - t0) * 1e3);
	vpmu_vcpu_free(v);
}

/* With the signal blocked (every signal lost), polling still finds every overflow. */
Test(time, real_blocked_signal_loses_nothing, .timeout = 20)
{
	sigset_t set;
	struct vpmu_vcpu *v;
	double t0, t1;

	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 4);
	sigaddset(&set, SIGIO);
	sigprocmask(SIG_BLOCK, &set, NULL);
	v = real_vcpu();
	t0 = thread_cpu_s();
	while (thread_cpu_s() - t0 < 0.05) {
		if (vpmu_vcpu_poll(v))
			guest_pmi_handler(v, FIXED_CTR + 1, 33, 2100000);
	}
	t1 = thread_cpu_s();
	cr_log_info("%.1f ms CPU, signals blocked: %d PMIs\n", (t1 - t0) * 1e3, fake_out.pmis);
	cr_expect(within(fake_out.pmis, (t1 - t0) * 1e3), "%d PMIs in %.1f ms", fake_out.pmis,
		  (t1 - t0) * 1e3);
	vpmu_vcpu_free(v);
}
