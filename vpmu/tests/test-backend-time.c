/* SPDX-License-Identifier: MIT */
/*
 * The time backend: cycles from the vCPU thread's CPU time. Exact
 * numbers come from a fake perf kernel (fake-perf.h); a last group runs
 * on the real task-clock, its signals and ring buffer.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <math.h>
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

/*
 * A reload later than the host's grid allows (the guest's handler ran
 * longer than a period): the new period starts at the reload, and the
 * time from the wrap to the reload is discarded, to the ns, in the stats
 * and the JSON, so that running - discarded is the guest's periods. A
 * timely reload discards nothing.
 */
Test(time, late_reload_discards_from_the_wrap)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	const struct vpmu_counter_stats *cs;
	struct vpmu_stats st;
	char json[8192];
	size_t len;
	int fd;

	arm_fixed1(v, 2100000); /* 1 ms */
	fd = fd_of(v, 33);
	fake_ev(fd)->latency = 2000; /* each sample 2 us past its overflow */
	fake_count(fd, 1002000);
	cr_assert_eq(vpmu_vcpu_poll(v), 1);
	guest_pmi_handler(v, FIXED_CTR + 1, 33, 2100000);
	cr_expect_eq(ctr_stats(v, 9, &st)->time_running, 1002000);
	cr_expect_eq(st.time_discarded[9], 0, "a timely reload: %llu ns discarded",
		     (unsigned long long) st.time_discarded[9]);

	/* the second period wraps at 2 ms; the handler takes 3.5 ms to reload */
	fake_count(fd, 1000000);
	cr_assert_eq(vpmu_vcpu_poll(v), 1);
	fake_count(fd, 3500000);
	cr_expect_eq(vpmu_vcpu_poll(v), 0, "the host's grid points while it waits are not PMIs");
	guest_pmi_handler(v, FIXED_CTR + 1, 33, 2100000);
	cr_expect_eq(ctr_stats(v, 9, &st)->time_running, 5502000);
	cr_expect_eq(st.time_discarded[9], 5502000 - 2000000, "%llu ns discarded",
		     (unsigned long long) st.time_discarded[9]);

	/* the third period runs from the reload: 1 ms of CPU time on */
	fake_count(fd, 999999);
	cr_expect_eq(vpmu_vcpu_poll(v), 0);
	fake_count(fd, 1);
	cr_expect_eq(vpmu_vcpu_poll(v), 1);
	cr_expect_eq(fake_out.pmis, 3);
	cs = ctr_stats(v, 9, &st);
	cr_expect_eq(cs->time_running - st.time_discarded[9], 3 * 1000000,
		     "running %llu ns - discarded %llu ns = 3 periods",
		     (unsigned long long) cs->time_running,
		     (unsigned long long) st.time_discarded[9]);
	cr_assert_eq(vpmu_stats_to_json(&st, 0, json, sizeof(json), &len), 0);
	cr_expect(strstr(json, "\"slot\":9,") &&
			  strstr(strstr(json, "\"slot\":9,"),
				 "\"time_running\":6502000,\"time_discarded\":3502000,"),
		  "%s", json);
	vpmu_vcpu_free(v);
}

/*
 * A guest write, then a read of the counter before the next sync: the
 * read returns the written value, and the host time counted before it is
 * accounted as discarded; what is counted after the read counts.
 */
Test(time, write_then_read_discards_the_folded_count)
{
	struct vpmu_vcpu *v = fake_vcpu("Skylake-Server", VPMU_BACKEND_TIME);
	struct vpmu_stats st;
	int fd;

	arm_fixed1(v, 2100000);
	fd = fd_of(v, 33);
	fake_count(fd, 400000);
	test_wrmsr(v, FIXED_CTR + 1, 1000);
	fake_count(fd, 100000);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 1000);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	ctr_stats(v, 9, &st);
	cr_expect_eq(st.time_discarded[9], 500000, "%llu ns discarded",
		     (unsigned long long) st.time_discarded[9]);
	fake_count(fd, 200000);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 1000 + 420000);
	cr_assert_eq(vpmu_vcpu_sync(v), 0); /* publishes */
	cr_expect_eq(ctr_stats(v, 9, &st)->time_running, 700000);
	cr_expect_eq(st.time_discarded[9], 500000);
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
	fake.now_ns += 1000000;
	cr_expect_eq(vpmu_vcpu_poll(v), 0);
	cr_expect_eq(fake_out.pmis, 0);
	/* past the deadline (2 ms grace): the poll reads and finds the wrap */
	fake.now_ns += 4000000;
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
 * Where the host event's time went, once the guest has disabled the
 * counter: `handled` periods reloaded by the handler, the count since the
 * last reload, and what late reloads discarded (time_discarded) add up to
 * the event's running time. This holds whatever CPU time the thread got
 * and however late the host's samples came (a loaded machine): it says
 * that no time was lost. And every wrap raised its PMI: the counter is
 * within its period after the last reload, unless the last wrap's PMI
 * came from the read here (then within two). 200 us: perf's task-clock
 * count can step back a little between an overflow sample and a later
 * read when the thread is preempted in between (its clock is the task's
 * context time; seen: 30 us under ASan on a busy machine), and the vPMU
 * has counted the sample's value; ns/cycle rounding adds under 1 ns per
 * re-arm. Returns the running time, ns.
 */
static uint64_t account(struct vpmu_vcpu *v, unsigned int handled)
{
	const struct vpmu_counter_stats *cs;
	struct vpmu_stats st;
	uint64_t past, running;
	double counted;

	test_wrmsr(v, GCTRL, 0);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	/* cycles since the last reload (a whole period more if its PMI came unhandled) */
	past = (test_rdmsr(v, FIXED_CTR + 1) + 2100000) & MASK48;
	cr_assert_eq(vpmu_vcpu_sync(v), 0); /* publish what that read folded */
	cs = ctr_stats(v, 9, &st);
	running = cs->time_running;
	counted = (double) handled * 1e6 + (double) past / 2.1 + (double) st.time_discarded[9];
	cr_log_info("host event running %llu ns = %u periods + %llu cycles + %llu ns discarded "
		    "(%+.0f ns)\n",
		    (unsigned long long) running, handled, (unsigned long long) past,
		    (unsigned long long) st.time_discarded[9], (double) running - counted);
	cr_expect(running > 0 && fabs((double) running - counted) <= 200000,
		  "running %llu ns, but %u periods + %llu cycles + %llu ns discarded = %.0f ns",
		  (unsigned long long) running, handled, (unsigned long long) past,
		  (unsigned long long) st.time_discarded[9], counted);
	cr_expect(past < 2100000 ||
			  (past < 2 * 2100000 && (unsigned int) fake_out.pmis == handled + 1),
		  "%llu cycles since the last reload, %d PMIs for %u reloads: a wrap raised no PMI",
		  (unsigned long long) past, fake_out.pmis, handled);
	return running;
}

/*
 * CPU time in, cycles out, and a real overflow signal to this thread for
 * each period: 1 ms periods over 60 ms of this thread's CPU time, the PMI
 * handler reloading the period. Checked without depending on how much
 * CPU the thread got or when: every PMI came with its signal, the host
 * event's running time is exactly the periods, the partial one and what
 * late reloads discarded (account()), and it is this thread's CPU time
 * within 2 ms (task-clock and CLOCK_THREAD_CPUTIME_ID both count the
 * thread's time on a CPU, and differ by this thread's own few calls
 * between reading one and enabling or disabling the other, and by some us
 * per context switch: a busy machine adds switches, not CPU time).
 */
Test(time, real_task_clock_signals, .timeout = 20)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct vpmu_vcpu *v;
	unsigned int handled = 0;
	uint64_t running;
	double t0, t1;

	sigaction(SIGRTMIN + 4, &sa, NULL);
	t0 = thread_cpu_s();
	v = real_vcpu();
	while (thread_cpu_s() - t0 < 0.06) {
		if (signals)
			vpmu_vcpu_poll(v);
		/* a guest's handler runs for each PMI */
		if ((unsigned int) fake_out.pmis > handled) {
			guest_pmi_handler(v, FIXED_CTR + 1, 33, 2100000);
			handled++;
		}
	}
	running = account(v, handled);
	t1 = thread_cpu_s();
	cr_log_info("%.1f ms CPU, host event running %.1f ms, %d signals, %d PMIs\n",
		    (t1 - t0) * 1e3, (double) running / 1e6, (int) signals, fake_out.pmis);
	/* the last PMI may come from account()'s read, before its sample and signal */
	cr_expect_gt(handled, 0);
	cr_expect_geq(signals, handled, "%d signals for %u PMIs handled", (int) signals, handled);
	cr_expect(fabs((double) running - (t1 - t0) * 1e9) <= 2e6,
		  "task-clock ran %llu ns in %.0f ns of this thread's CPU time",
		  (unsigned long long) running, (t1 - t0) * 1e9);
	vpmu_vcpu_free(v);
}

/*
 * With the signal blocked (every signal stays pending), polling still
 * finds every overflow: the host event's running time is exactly the
 * periods the handler reloaded, the partial one and what late reloads
 * discarded (account()), however much CPU the thread got; and the
 * kernel did send one queued signal per host overflow, none of which
 * was taken.
 */
Test(time, real_blocked_signal_loses_nothing, .timeout = 20)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct timespec zero = { 0, 0 };
	unsigned int handled = 0, queued = 0;
	sigset_t set;
	struct vpmu_vcpu *v;
	double t0;

	sigaction(SIGRTMIN + 4, &sa, NULL); /* counts any that got through */
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 4);
	sigaddset(&set, SIGIO);
	sigprocmask(SIG_BLOCK, &set, NULL);
	v = real_vcpu();
	t0 = thread_cpu_s();
	while (thread_cpu_s() - t0 < 0.05) {
		vpmu_vcpu_poll(v);
		if ((unsigned int) fake_out.pmis > handled) {
			guest_pmi_handler(v, FIXED_CTR + 1, 33, 2100000);
			handled++;
		}
	}
	account(v, handled);
	while (sigtimedwait(&set, NULL, &zero) > 0)
		queued++;
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	cr_log_info("signals blocked: %d PMIs, %u signals left pending\n", fake_out.pmis, queued);
	/* the last PMI may come from account()'s read, before its sample and signal */
	cr_expect_gt(handled, 0);
	cr_expect_eq(signals, 0, "a blocked signal was taken");
	cr_expect_geq(queued, handled, "%u signals queued for %u PMIs found by polling", queued,
		      handled);
	vpmu_vcpu_free(v);
}
