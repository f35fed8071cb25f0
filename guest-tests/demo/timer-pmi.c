/* SPDX-License-Identifier: MIT */
/*
 * Sampling on core cycles, as a profiler would: fixed counter 1
 * (CPU_CLK_UNHALTED.THREAD, SDM Vol. 3B Table 21-2) with a PMI every
 * 1 ms worth of cycles at the nominal clock (CPUID 15H: TSC Hz = ECX *
 * EBX / EAX), the handler reloading the same period, until TIMER_PMIS
 * PMIs have come. Under vpmu-vmm --host-counters time the cycles are the
 * emulator thread's CPU time, so the PMIs come from real perf overflows
 * at one per ms of CPU; the host side (vmm-glue/tests/
 * test-host-counters.py, bench/bench-pmi.c) compares them with the CPU
 * time. The handler: GLOBAL_STATUS read, status clear, counter reload,
 * LVT unmask, GLOBAL_STATUS read again, EOI (4 PMU MSR accesses, 2 APIC).
 * main's argument (RDI; 0 under vpmu-vmm) may set the number of PMIs
 * (bits 31:0) and the period in us (bits 63:32).
 *
 * Under vpmu-vmm (argument 0) the handler of PMIs 100, 200 and 300 is
 * slow on purpose: it waits LATE_PERIODS periods of core cycles, timed on
 * GP counter 0 (3CH/00H, SDM Vol. 3B Table 21-1: the same clock, no PMI),
 * before it reloads. Such a reload comes later than the host's sampling
 * grid allows; the vPMU discards the time since the wrap and reports it
 * (vpmu-vmm --verbose "discarded at reloads"), which the host side's
 * accounting checks to the ns.
 */
#include "guest.h"

#define PMI_VECTOR   0xf1
#define TIMER_PMIS   400
#define FIXED1	     (1ul << 33)  /* GLOBAL_CTRL / GLOBAL_STATUS bit of fixed counter 1 */
#define FX1_CTRL     (0xbul << 4) /* FIXED_CTR_CTRL: fixed 1 OS | USR | PMI (Figure 21-2) */
#define MASK48	     ((1ul << 48) - 1)
#define SPIN_LIMIT   (1ul << 34) /* loop iterations: give up (the host will have timed out) */
#define GP0	     (1ul << 0)
#define CYCLES_SEL   (0x3cul | 1ul << 16 | 1ul << 17 | 1ul << 22) /* 3CH/00H, USR, OS, EN */
#define LATE_EVERY   100 /* PMIs between two slow handlers */
#define LATE_PERIODS 3	 /* how many periods a slow handler waits */

static volatile unsigned int pmis, strays, empty, entries, late;
static uint64_t preset, period;
static bool slow_handlers;

/* Wait `cycles` core cycles as GP counter 0 counts them. */
static void wait_cycles(uint64_t cycles)
{
	uint64_t start = rdmsr(MSR_IA32_PMC0), spins = 0;

	while (((rdmsr(MSR_IA32_PMC0) - start) & MASK48) < cycles && spins++ < SPIN_LIMIT)
		;
}

/*
 * The status is cleared before the reload, so an overflow that comes
 * while the handler runs (slower than a period: the emulator translating
 * it the first time) stays in GLOBAL_STATUS; after unmasking the LVT the
 * handler looks again, as Linux does, since that overflow's PMI found the
 * LVT masked and was dropped (SDM Vol. 3A, Local Vector Table: a masked
 * entry delivers nothing). An interrupt whose overflow the loop already
 * took finds an empty status.
 */
static void on_pmi(struct frame *f)
{
	uint64_t status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);

	entries++; /* one per PMI delivered: the VMM's "delivered" */
	if (!status)
		empty++;
	while (status) {
		if (status & FIXED1)
			pmis++;
		else
			strays++;
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, status);
		if (slow_handlers && (status & FIXED1) && pmis % LATE_EVERY == 0 &&
		    pmis < TIMER_PMIS) {
			wait_cycles(LATE_PERIODS * period);
			late++;
		}
		wrmsr(MSR_CORE_PERF_FIXED_CTR0 + 1, preset);
		wrmsr(MSR_LVT_PMI, PMI_VECTOR); /* the delivery masked it */
		status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	}
	apic_eoi();
}

int main(uint64_t arg)
{
	struct cpuid_regs a = cpuid_regs(0xa, 0), t = cpuid_regs(0x15, 0);
	uint64_t hz, spins = 0, left, past, period_us = arg >> 32 ? arg >> 32 : 1000;
	unsigned int got, after, want = (uint32_t) arg ? (uint32_t) arg : TIMER_PMIS;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	report(!(a.b & 1), "CPUID.0AH:EBX[0] = 0: core cycles available");
	report((a.d & 0x1f) >= 2, "at least 2 fixed counters (CPUID.0AH:EDX[4:0] = %u)",
	       a.d & 0x1f);
	report(t.a && t.b && t.c, "CPUID 15H: crystal %u Hz, ratio %u/%u", t.c, t.b, t.a);
	if (!t.a || !t.b || !t.c)
		return report_summary();
	hz = (uint64_t) t.c * t.b / t.a;
	period = hz / 1000000 * period_us;
	preset = (0 - period) & MASK48;
	printf("timer-pmi: nominal clock %lu Hz, PMI every %lu cycles (%lu us), until %u PMIs\n",
	       hz, period, period_us, want);

	slow_handlers = !arg;

	sti();
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	wrmsr(MSR_CORE_PERF_FIXED_CTR0 + 1, preset);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, FX1_CTRL);
	wrmsr(MSR_IA32_PMC0, 0);
	wrmsr(MSR_IA32_PERFEVTSEL0, slow_handlers ? CYCLES_SEL : 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, FIXED1 | (slow_handlers ? GP0 : 0));
	while (pmis < want && spins < SPIN_LIMIT)
		spins++;
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	got = pmis;
	left = rdmsr(MSR_CORE_PERF_FIXED_CTR0 + 1);
	past = (left - preset) & MASK48;
	printf("timer-pmi: %u PMIs, %u without the fixed-1 status bit, %u with an empty status, "
	       "%lu loop iterations, %u slow handlers; counter at %lu cycles into the next "
	       "period\n",
	       got, strays, empty, spins, late, past);
	/*
	 * A few more may land between the loop's test and the GLOBAL_CTRL
	 * write: host overflows come some 10-50 us after the wrap (task-clock hrtimer), which is
	 * several periods at the shortest ones bench-pmi uses.
	 */
	report(got >= want && got < want + 8, "%u PMIs came", want);
	report(strays == 0, "every overflow had GLOBAL_STATUS bit 33 (fixed counter 1)");
	if (slow_handlers)
		report(late == TIMER_PMIS / LATE_EVERY - 1, "%u slow handlers reloaded late", late);
	/*
	 * A host overflow comes some us after the wrap: the guest may
	 * disable the counter in between. Then the count says it wrapped, and
	 * its PMI follows (this read folded the count).
	 */
	report(past < period || pmis > got,
	       "the counter is within its period after the last reload, "
	       "or its overflow raised a PMI");

	/* disabled: no more PMIs, whatever time passes */
	for (spins = 0; spins < 1000; spins++)
		__asm__ volatile("" ::: "memory"); /* room for the PMI of the read above */
	after = pmis;
	for (spins = 0; spins < 2000000; spins++) /* ~50 ms: 50 periods */
		__asm__ volatile("" ::: "memory");
	report(pmis == after, "no PMI with GLOBAL_CTRL 0 (%u more)", pmis - after);
	/*
	 * What the VMM's stats must match: each interrupt is a PMI it
	 * delivered; each overflow one it was asked for. An overflow while the
	 * handler has the LVT masked is found by the handler's second look,
	 * and its PMI is dropped, as hardware drops it.
	 */
	printf("timer-pmi: in all %u overflows, %u interrupts\n", pmis + strays, entries);
	return report_summary();
}
