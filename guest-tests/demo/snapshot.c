/* SPDX-License-Identifier: MIT */
/*
 * A guest whose output depends on everything a snapshot of the emulator
 * must carry (vmm-glue/tests/test-snapshot.py splits it anywhere and
 * compares): the LAPIC timer in periodic and TSC-deadline mode (SDM Vol.
 * 3A 11.5.4, 11.5.4.1) and HLT skipping to its next interrupt, the TSC,
 * a counter sampling instructions retired with a PMI every PMI_PERIOD of
 * them, fixed counter 0 (INST_RETIRED.ANY), PMIs that come while the
 * timer handler runs with interrupts off and wait in the IRR for its
 * IRET, the CMOS RTC, the 8254's channel 0 and the ACPI PM timer on the
 * modelled clock, and a checksum over memory the guest wrote. Every
 * timer tick and PMI prints what it saw.
 */
#include "guest.h"

#define TIMER_VECTOR	 0xe0
#define PMI_VECTOR	 0xf0
#define MSR_X2APIC_LVTT	 0x832
#define MSR_X2APIC_TMICT 0x838
#define MSR_X2APIC_TMCCT 0x839
#define MSR_X2APIC_TDCR	 0x83e
#define MSR_TSC_DEADLINE 0x6e0
#define LVTT_PERIODIC	 (1u << 17)
#define LVTT_DEADLINE	 (2u << 17)
#define PMI_PERIOD	 7919  /* a prime: the PMIs drift against the timer */
#define TIMER_TSC	 40000 /* the timer's period in TSC cycles: longer than its handler */
#define BUSY_TICKS	 4
#define IDLE_TICKS	 8
#define DEADLINES	 3

static volatile unsigned int ticks, pmis, deadline_irqs;
static volatile uint64_t sum, ctr_mask;
static uint64_t data[2048];

static uint32_t inl(uint16_t port)
{
	uint32_t v;

	__asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static void on_timer(struct frame *f)
{
	ticks++;
	printf("tick %u: tsc %lu, instructions %lu, pmis %u, current count %lu, rip %lx\n", ticks,
	       rdtsc(), rdmsr(MSR_CORE_PERF_FIXED_CTR0), pmis, rdmsr(MSR_X2APIC_TMCCT), f->rip);
	/* interrupts are off in here: a PMI that comes now waits in the IRR until the IRET */
	for (unsigned int i = 0; i < 2000; i++)
		sum += data[i % 2048] ^ i;
	apic_eoi();
}

static void on_deadline(struct frame *f)
{
	deadline_irqs++;
	printf("deadline %u: tsc %lu, deadline now %lu\n", deadline_irqs, rdtsc(),
	       rdmsr(MSR_TSC_DEADLINE));
	apic_eoi();
}

static void on_pmi(struct frame *f)
{
	uint64_t st = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);

	pmis++;
	printf("pmi %u: status %lx, rip %lx, tsc %lu, ticks %u\n", pmis, st, f->rip, rdtsc(),
	       ticks);
	wrmsr(MSR_IA32_PMC0_FULL, (ctr_mask - PMI_PERIOD + 1) & ctr_mask);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, st);
	wrmsr(MSR_LVT_PMI, PMI_VECTOR); /* the delivery masked it */
	apic_eoi();
}

/* The clocks the platform runs on the modelled TSC. */
static void clocks(const char *when)
{
	unsigned int sec, pit;

	outb(0x70, 0x00);
	sec = inb(0x71);
	outb(0x43, 0x00); /* latch channel 0 */
	pit = inb(0x40);
	pit |= (unsigned int) inb(0x40) << 8;
	printf("%s: RTC seconds %x, PIT channel 0 %u, PM timer %u, tsc %lu\n", when, sec, pit,
	       inl(0x608) & 0xffffff, rdtsc());
}

int main(uint64_t arg)
{
	uint32_t r[4];
	uint64_t t;

	idt_init();
	set_handler(TIMER_VECTOR, on_timer);
	set_handler(TIMER_VECTOR + 1, on_deadline);
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	cpuid(0xa, 0, r);
	ctr_mask = (1ull << ((r[0] >> 16) & 0xff)) - 1;
	for (unsigned int i = 0; i < 2048; i++)
		data[i] = i * 0x9e3779b97f4a7c15ull;
	clocks("start");

	/* fixed counter 0 counts everything; GP 0 samples it with a PMI */
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x3);
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	wrmsr(MSR_IA32_PMC0_FULL, (ctr_mask - PMI_PERIOD + 1) & ctr_mask);
	wrmsr(MSR_IA32_PERFEVTSEL0, 0xc0 | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1 | 1ull << 32);

	/* the timer counts the crystal: TSC = crystal * EBX / EAX (CPUID 15H) */
	cpuid(0x15, 0, r);
	wrmsr(MSR_X2APIC_TDCR, 0xb); /* divide by 1 */
	wrmsr(MSR_X2APIC_LVTT, TIMER_VECTOR | LVTT_PERIODIC);
	wrmsr(MSR_X2APIC_TMICT, r[0] && r[1] ? (uint64_t) TIMER_TSC * r[0] / r[1] : 476);
	sti();
	while (ticks < BUSY_TICKS)
		for (unsigned int i = 0; i < 64; i++)
			data[(sum + i) % 2048] += sum ^ i, sum += data[i];
	clocks("busy done");
	while (ticks < IDLE_TICKS)
		__asm__ volatile("hlt");
	clocks("idle done");

	cpuid(1, 0, r);
	if (r[2] & (1u << 24)) {
		wrmsr(MSR_X2APIC_LVTT, (TIMER_VECTOR + 1) | LVTT_DEADLINE);
		for (unsigned int i = 0; i < DEADLINES; i++) {
			t = rdtsc() + 20000 + 5000 * i;
			wrmsr(MSR_TSC_DEADLINE, t);
			while (deadline_irqs <= i)
				__asm__ volatile("hlt");
		}
	}
	cli();
	wrmsr(MSR_X2APIC_LVTT, APIC_LVT_MASKED);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	clocks("end");
	printf("sum %lx, instructions %lu, pmis %u, ticks %u, deadlines %u\n", sum,
	       rdmsr(MSR_CORE_PERF_FIXED_CTR0), pmis, ticks, deadline_irqs);
	report(ticks >= IDLE_TICKS, "periodic timer: %u ticks", ticks);
	report(pmis > 0, "PMIs: %u", pmis);
	report(!(r[2] & (1u << 24)) || deadline_irqs == DEADLINES, "TSC deadlines: %u",
	       deadline_irqs);
	return report_summary();
}
