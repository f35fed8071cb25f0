/* SPDX-License-Identifier: MIT */
/*
 * PMI acceptance test: GP counter 0 counts INST_RETIRED.ANY_P from
 * 2^48 - 1000 with freeze-on-PMI; the PMI arrives through the x2APIC LVT
 * and the IDT right after the 1000th instruction. The counted code is
 *   #1  wrmsr (GLOBAL_CTRL: counting starts with it)
 *   #2  mov $2000, %ecx
 *   #3  dec %ecx   #4 jnz   #5 dec   #6 jnz ...
 * so #1000 is a taken jnz (the eventing IP) with ECX = 1501, and the PMI
 * frame's RIP is the loop head. Then the same through an NMI, then #GP
 * from an unknown MSR and #UD from ud2 with their frames.
 */
#include "guest.h"

#define PMI_VECTOR 0xf0
#define PRESET	   ((1ull << 48) - 1000)

extern char pmi_loop[], pmi_jnz[], gp_insn[], ud_insn[];
static volatile uint64_t pmi_rip, pmi_rcx, pmi_ctr, pmi_status, pmi_vector;
static volatile int pmis;
static volatile uint64_t exc_rip, exc_err, exc_vec;

static void on_pmi(struct frame *f)
{
	pmi_rip = f->rip;
	pmi_rcx = f->rcx;
	pmi_vector = f->vector;
	pmi_ctr = rdmsr(MSR_IA32_PMC0_FULL);
	pmi_status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, pmi_status);
	pmis++;
	if (f->vector != 2)
		apic_eoi();
}

static void on_exc(struct frame *f)
{
	exc_rip = f->rip;
	exc_err = f->error;
	exc_vec = f->vector;
	f->rip += 2; /* rdmsr and ud2 are 2 bytes */
}

static void run_counted(void)
{
	/* clang-format off */
	__asm__ volatile(
		"mov $0x38f, %%ecx\n\t"
		"mov $1, %%eax\n\t"
		"xor %%edx, %%edx\n\t"
		"wrmsr\n\t"
		"mov $2000, %%ecx\n"
		".globl pmi_loop\n"
		"pmi_loop:\n\t"
		"dec %%ecx\n"
		".globl pmi_jnz\n"
		"pmi_jnz:\n\t"
		"jnz pmi_loop\n\t"
		::: "eax", "ecx", "edx", "memory");
	/* clang-format on */
}

static void arm(uint32_t lvt)
{
	pmis = 0;
	/* GLOBAL_CTRL resets to all GP counters enabled: counting starts at the wrmsr below */
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(0x834, lvt); /* LVT performance counter */
	wrmsr(MSR_IA32_DEBUGCTL, DEBUGCTL_FREEZE_PERFMON_ON_PMI);
	wrmsr(MSR_IA32_PMC0_FULL, PRESET);
	wrmsr(MSR_IA32_PERFEVTSEL0, 0xc0 | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
}

static void check(const char *how)
{
	uint64_t counted = 2 + 2 * (2000 - pmi_rcx);

	printf("%s: PMI vector %lu, instructions counted to overflow: %lu, eventing IP %p (jnz), "
	       "frame RIP %lx, ECX %lu, counter %lu, GLOBAL_STATUS %lx\n",
	       how, pmi_vector, counted, (void *) pmi_jnz, pmi_rip, pmi_rcx, pmi_ctr, pmi_status);
	report(pmis == 1, "%s: exactly one PMI", how);
	report(counted == 1000, "%s: overflow after exactly 1000 instructions", how);
	report(pmi_rip == (uint64_t) pmi_loop, "%s: PMI right after the eventing instruction", how);
	report(pmi_ctr == 0, "%s: counter frozen at 0 on PMI", how);
	report(pmi_status & 1, "%s: GLOBAL_STATUS.PMC0", how);
}

int main(uint64_t arg)
{
	uint32_t r[4];

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	set_handler(2, on_pmi);
	set_handler(13, on_exc);
	set_handler(6, on_exc);
	x2apic_enable();
	cpuid(0xa, 0, r);
	printf("CPUID.0AH: version %u, %u GP counters of %u bits\n", r[0] & 0xff,
	       (r[0] >> 8) & 0xff, (r[0] >> 16) & 0xff);
	report((r[0] & 0xff) >= 2, "architectural perfmon present");

	sti();
	arm(PMI_VECTOR);
	run_counted();
	check("fixed");
	/* LVT masked by the delivery, as hardware does */
	report(rdmsr(0x834) & (1u << 16), "LVT masked after the PMI");

	arm(4u << 8); /* NMI delivery mode */
	run_counted();
	check("nmi");

	__asm__ volatile(".globl gp_insn\ngp_insn:\n\trdmsr" ::"c"(0x12345) : "eax", "edx");
	report(exc_vec == 13 && exc_rip == (uint64_t) gp_insn && exc_err == 0,
	       "#GP(0) on an unknown MSR at its RIP");
	__asm__ volatile(".globl ud_insn\nud_insn:\n\tud2");
	report(exc_vec == 6 && exc_rip == (uint64_t) ud_insn, "#UD on ud2 at its RIP");
	return report_summary();
}
