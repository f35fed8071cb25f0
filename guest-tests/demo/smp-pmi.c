/* SPDX-License-Identifier: MIT */
/*
 * PMIs on two vCPUs during an IPI storm, for KVM (vmm-glue/tests/
 * test-smp-pmi.py runs it with --smp 2 --host-counters time). Each CPU
 * samples core cycles on fixed counter 1 (CPU_CLK_UNHALTED.THREAD, SDM
 * Vol. 3B Table 21-2) with a PMI every PERIOD_US of cycles at the nominal
 * clock; the AP meanwhile keeps IPI_VECTORS IPIs on their way to the BSP
 * (x2APIC ICR, SDM Vol. 3A 11.12.9), each vector again once the BSP's
 * handler took it. A VMM that rewrites the BSP's APIC page
 * to mask the PMI's LVT entry loses an IPI that arrives meanwhile: the AP then waits for it in
 * vain, as a Linux guest waits for a TLB-shootdown IPI. A PMI routed to the other CPU's APIC ID
 * finds that CPU's GLOBAL_STATUS empty, and its own CPU never takes it.
 *
 * main's argument (RDI; 0 under vpmu-vmm) may set the number of IPIs
 * (bits 31:0) and the PMI period in us (bits 63:32).
 */
#include "guest.h"

#define TRAMP_BASE  0x70000ul
#define PMI_VECTOR  0xf1
#define IPI_VECTOR  0x30 /* and the next IPI_VECTORS - 1, all below PMI_VECTOR */
#define IPI_VECTORS 192
#define IPIS	    1000000u
#define STORM_S	    3 /* the AP stops sending after this long, whatever the count */
#define FIXED1	    (1ul << 33)
#define FX1_CTRL    (0xbul << 4) /* fixed 1: OS | USR | PMI (SDM Vol. 3B Figure 21-2) */
#define MASK48	    ((1ul << 48) - 1)
#define MSR_X2_ID   0x802
#define MSR_X2_ICR  0x830
#define ICR_INIT    (5u << 8 | 1u << 14) /* INIT, level assert */
#define ICR_SIPI    (6u << 8 | 1u << 14) /* start-up */
#define WAIT_S	    3			 /* an IPI not taken in this long is lost, not late */
#define AP_START_US 500000ul

extern const uint8_t tramp_start[], tramp_end[], tramp_cr3[], tramp_entry[], tramp_stack[];

static volatile unsigned int ap_up, ap_done, ipis_got, ipis_sent, ipis_lost;
static volatile unsigned int got[IPI_VECTORS];
static uint64_t tsc_hz;
static volatile unsigned int pmis[2], empty[2], entries[2], strays[2], wrong_cpu;
static uint64_t preset;
static uint8_t ap_stack[16384] __attribute__((aligned(16)));

static unsigned int cpu(void)
{
	return (unsigned int) rdmsr(MSR_X2_ID);
}

/* As timer-pmi's handler: status, clear, reload, unmask, look again, EOI. */
static void on_pmi(struct frame *f)
{
	unsigned int me = cpu();
	uint64_t status;

	if (me > 1) {
		wrong_cpu++;
		apic_eoi();
		return;
	}
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	entries[me]++;
	if (!status)
		empty[me]++;
	while (status) {
		if (status & FIXED1)
			pmis[me]++;
		else
			strays[me]++;
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, status);
		wrmsr(MSR_CORE_PERF_FIXED_CTR0 + 1, preset);
		wrmsr(MSR_LVT_PMI, PMI_VECTOR);
		status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	}
	apic_eoi();
}

static void on_ipi(struct frame *f)
{
	ipis_got++;
	got[f->vector - IPI_VECTOR]++;
	apic_eoi();
}

static void start_sampling(void)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	wrmsr(MSR_CORE_PERF_FIXED_CTR0 + 1, preset);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, FX1_CTRL);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, FIXED1);
}

static void stop_sampling(void)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
}

static unsigned int want_ipis;

/* The AP, in 64-bit mode on the BSP's page tables and selectors. */
static void ap_main(void)
{
	idt_init(); /* the same table, the same values: only its LIDT matters here */
	x2apic_enable();
	start_sampling();
	sti();
	ap_up = 1;
	/*
	 * IPI_VECTORS IPIs in flight all the time: a vector goes again as
	 * soon as the BSP took it (never while pending: the APIC would merge
	 * the two, SDM Vol. 3A 11.8.4). One the BSP never takes stays behind.
	 */
	unsigned int sent[IPI_VECTORS] = { 0 }, behind = 0;
	uint64_t last = rdtsc();

	uint64_t start = last;

	while (ipis_sent < want_ipis && rdtsc() - last < WAIT_S * tsc_hz &&
	       rdtsc() - start < STORM_S * tsc_hz) {
		for (unsigned int v = 0; v < IPI_VECTORS && ipis_sent < want_ipis; v++) {
			if (got[v] != sent[v])
				continue;
			wrmsr(MSR_X2_ICR, IPI_VECTOR + v); /* fixed, physical, to APIC ID 0 */
			sent[v]++;
			ipis_sent++;
			last = rdtsc();
		}
	}
	/* the last ones have their time too */
	last = rdtsc();
	while (ipis_got != ipis_sent && rdtsc() - last < WAIT_S * tsc_hz)
		;
	for (unsigned int v = 0; v < IPI_VECTORS; v++)
		behind += sent[v] - got[v];
	ipis_lost = behind;
	stop_sampling();
	ap_done = 1;
	for (;;)
		__asm__ volatile("hlt");
}

static void delay_us(uint64_t us, uint64_t tsc_hz)
{
	uint64_t t0 = rdtsc();

	while (rdtsc() - t0 < us * (tsc_hz / 1000000))
		;
}

int main(uint64_t arg)
{
	struct cpuid_regs t = cpuid_regs(0x15, 0);
	uint64_t hz, period_us = arg >> 32 ? arg >> 32 : 1000, t0;
	uint8_t *tramp = (uint8_t *) TRAMP_BASE;
	uint64_t *cr3 = (uint64_t *) (TRAMP_BASE + (tramp_cr3 - tramp_start));
	uint64_t *entry = (uint64_t *) (TRAMP_BASE + (tramp_entry - tramp_start));
	uint64_t *stack = (uint64_t *) (TRAMP_BASE + (tramp_stack - tramp_start));

	want_ipis = (uint32_t) arg ? (uint32_t) arg : IPIS;
	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	for (unsigned int v = 0; v < IPI_VECTORS; v++)
		set_handler(IPI_VECTOR + v, on_ipi);
	x2apic_enable();
	report(t.a && t.b && t.c, "CPUID 15H: crystal %u Hz, ratio %u/%u", t.c, t.b, t.a);
	if (!t.a || !t.b || !t.c)
		return report_summary();
	hz = (uint64_t) t.c * t.b / t.a;
	tsc_hz = hz; /* the nominal clock: a rough second of TSC is enough here */
	preset = (0 - hz / 1000000 * period_us) & MASK48;

	/* the AP: INIT, then a start-up IPI at TRAMP_BASE (SDM Vol. 3A 9.4.4.1) */
	for (const uint8_t *p = tramp_start; p < tramp_end; p++)
		tramp[p - tramp_start] = *p;
	*cr3 = read_cr3();
	*entry = (uint64_t) ap_main;
	*stack = (uint64_t) (ap_stack + sizeof(ap_stack));
	wrmsr(MSR_X2_ICR, 1ul << 32 | ICR_INIT);
	delay_us(10000, hz);
	wrmsr(MSR_X2_ICR, 1ul << 32 | ICR_SIPI | TRAMP_BASE >> 12);
	t0 = rdtsc();
	while (!ap_up && rdtsc() - t0 < AP_START_US * (hz / 1000000))
		;
	if (!ap_up) {
		wrmsr(MSR_X2_ICR, 1ul << 32 | ICR_SIPI | TRAMP_BASE >> 12);
		t0 = rdtsc();
		while (!ap_up && rdtsc() - t0 < WAIT_S * hz)
			;
	}
	report(ap_up, "the AP (APIC ID 1) started");
	if (!ap_up)
		return report_summary();
	printf("smp-pmi: %u IPIs from the AP, PMIs every %lu us on both CPUs\n", want_ipis,
	       period_us);

	start_sampling();
	sti();
	t0 = rdtsc();
	while (!ap_done && rdtsc() - t0 < 20 * WAIT_S * hz)
		;
	stop_sampling();
	/* room for a PMI whose overflow came with the stop */
	delay_us(20000, hz);
	cli();
	printf("smp-pmi: IPIs sent %u, taken %u, never taken %u\n", ipis_sent, ipis_got, ipis_lost);
	for (unsigned int i = 0; i < 2; i++)
		printf("smp-pmi: cpu%u: %u PMI interrupts, %u overflows, %u with an empty status, "
		       "%u stray bits\n",
		       i, entries[i], pmis[i], empty[i], strays[i]);
	report(ap_done, "the AP finished its IPIs");
	report(ap_done && !ipis_lost && ipis_got == ipis_sent && ipis_sent >= IPI_VECTORS,
	       "no IPI lost during PMIs (%u sent, %u taken)", ipis_sent, ipis_got);
	report(pmis[0] > 0 && pmis[1] > 0, "each CPU took PMIs of its own counter (%u, %u)",
	       pmis[0], pmis[1]);
	report(!empty[0] && !empty[1] && !wrong_cpu,
	       "no PMI reached a CPU whose counter did not overflow (%u, %u empty)", empty[0],
	       empty[1]);
	report(!strays[0] && !strays[1], "only fixed counter 1 overflowed");
	return report_summary();
}
