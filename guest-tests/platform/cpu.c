/* SPDX-License-Identifier: MIT */
/*
 * CPU behaviour test kernels written for other VMMs rely on, checked the
 * way such a kernel checks it:
 * - WRMSR of a non-canonical value to the MSRs that hold a linear
 *   address #GPs and leaves the MSR as it was (SDM Vol. 2B WRMSR; Vol. 4
 *   IA32_FS_BASE, IA32_GS_BASE, IA32_KERNEL_GS_BASE, IA32_LSTAR,
 *   IA32_CSTAR, IA32_SYSENTER_ESP, IA32_SYSENTER_EIP); canonical values
 *   are taken.
 * - Machine-check capability (SDM Vol. 3B 16.3.1): CPUID.01H:EDX MCE[7]
 *   and MCA[14] agree with IA32_MCG_CAP being readable; IA32_MCG_STATUS
 *   reads; MSRs past the bank count (MCG_CAP[7:0]) and MCG_CTL without
 *   MCG_CAP[8] #GP.
 * - A memory access through a non-canonical address is #GP(0), #SS(0)
 *   when it goes through the stack segment (RSP or RBP based): SDM Vol.
 *   3A 6.15, interrupts 12 and 13.
 * - The xAPIC page mapped at another linear address (as Linux's fixmap
 *   does) reads the same registers as at its physical address (SDM Vol.
 *   3A 11.4.1: the APIC is reached by physical address, whatever maps it).
 */
#include "guest.h"

#define MSR_IA32_MCG_CAP    0x179
#define MSR_IA32_MCG_STATUS 0x17a
#define MSR_IA32_MCG_CTL    0x17b
#define MSR_IA32_MC0_CTL    0x400

#define NONCANONICAL 0x0000800000000000ull
#define CANONICAL_HI 0xffff800000001000ull

static const struct {
	uint32_t msr;
	const char *name;
} address_msrs[] = {
	{ 0xc0000100, "IA32_FS_BASE" },	       { 0xc0000101, "IA32_GS_BASE" },
	{ 0xc0000102, "IA32_KERNEL_GS_BASE" }, { 0xc0000082, "IA32_LSTAR" },
	{ 0xc0000083, "IA32_CSTAR" },	       { 0x175, "IA32_SYSENTER_ESP" },
	{ 0x176, "IA32_SYSENTER_EIP" },
};

static void canonical_msrs(void)
{
	for (unsigned int i = 0; i < sizeof(address_msrs) / sizeof(address_msrs[0]); i++) {
		uint32_t msr = address_msrs[i].msr;
		uint64_t before, after, v;
		int r;

		if (rdmsr_safe(msr, &before)) {
			report(false, "%s (0x%x) reads", address_msrs[i].name, msr);
			continue;
		}
		r = wrmsr_safe(msr, NONCANONICAL);
		rdmsr_safe(msr, &after);
		report(r == 13 && after == before,
		       "%s = %llx (non-canonical): #GP, value kept (vector %d, reads %lx)",
		       address_msrs[i].name, NONCANONICAL, r, after);
		r = wrmsr_safe(msr, CANONICAL_HI);
		rdmsr_safe(msr, &v);
		report(r == 0 && v == CANONICAL_HI, "%s = %llx (canonical) taken",
		       address_msrs[i].name, CANONICAL_HI);
		wrmsr_safe(msr, before);
	}
}

static void machine_check(void)
{
	struct cpuid_regs r1 = cpuid_regs(1, 0);
	bool mce = r1.d & (1u << 7), mca = r1.d & (1u << 14);
	uint64_t cap = 0, status = 1, v;
	int r = rdmsr_safe(MSR_IA32_MCG_CAP, &cap);
	unsigned int banks = (unsigned int) (cap & 0xff);

	report(mca == (r == 0), "CPUID.01H:EDX.MCA %d and IA32_MCG_CAP readable (vector %d) agree",
	       mca, r);
	report(!mca || mce, "MCA only with MCE (EDX %x)", r1.d);
	if (r) {
		report_skip("no IA32_MCG_CAP: the rest needs MCA");
		return;
	}
	printf("IA32_MCG_CAP %lx: %u banks, MCG_CTL_P %d\n", cap, banks, (int) (cap >> 8 & 1));
	report(rdmsr_safe(MSR_IA32_MCG_STATUS, &status) == 0 && !(status & 4),
	       "IA32_MCG_STATUS reads, no machine check in progress (%lx)", status);
	report(rdmsr_safe(MSR_IA32_MC0_CTL + 4 * banks, &v) == 13,
	       "IA32_MC%u_CTL (0x%x), past the %u banks: #GP", banks, MSR_IA32_MC0_CTL + 4 * banks,
	       banks);
	if (!(cap & (1u << 8)))
		report(rdmsr_safe(MSR_IA32_MCG_CTL, &v) == 13,
		       "IA32_MCG_CTL without MCG_CTL_P: #GP");
	report(wrmsr_safe(MSR_IA32_MCG_CAP, cap) == 13, "IA32_MCG_CAP is read-only: WRMSR #GPs");
}

static volatile uint64_t fault_vec, fault_err, fault_rip, resume_at;

static void on_fault(struct frame *f)
{
	fault_vec = f->vector;
	fault_err = f->error;
	fault_rip = f->rip;
	f->rip = resume_at;
}

extern char gp_load[], gp_after[], ss_load[], ss_after[], gp_store[], gp_store_after[];

static void noncanonical_access(void)
{
	uint64_t rbp_save;

	set_handler(12, on_fault);
	set_handler(13, on_fault);

	fault_vec = ~0ull;
	resume_at = (uint64_t) gp_after;
	__asm__ volatile(".globl gp_load\n"
			 "gp_load: mov (%0), %%rax\n"
			 ".globl gp_after\n"
			 "gp_after:\n" ::"r"(NONCANONICAL)
			 : "rax", "memory");
	report(fault_vec == 13 && fault_err == 0 && fault_rip == (uint64_t) gp_load,
	       "load through %llx (non-canonical): #GP(0) at the load (vector %ld, error %lx)",
	       NONCANONICAL, (long) fault_vec, fault_err);

	fault_vec = ~0ull;
	resume_at = (uint64_t) gp_store_after;
	__asm__ volatile(".globl gp_store\n"
			 "gp_store: movq $1, 8(%0)\n"
			 ".globl gp_store_after\n"
			 "gp_store_after:\n" ::"r"(0x8000000000000000ull)
			 : "memory");
	report(fault_vec == 13 && fault_err == 0 && fault_rip == (uint64_t) gp_store,
	       "store through 8000000000000008: #GP(0) (vector %ld)", (long) fault_vec);

	/* RBP as the base: the stack segment, so #SS(0) */
	fault_vec = ~0ull;
	resume_at = (uint64_t) ss_after;
	__asm__ volatile("mov %%rbp, %0\n\t"
			 "mov %1, %%rbp\n"
			 ".globl ss_load\n"
			 "ss_load: mov 16(%%rbp), %%rax\n"
			 ".globl ss_after\n"
			 "ss_after:\n\t"
			 "mov %0, %%rbp\n"
			 : "=&r"(rbp_save)
			 : "r"(NONCANONICAL)
			 : "rax", "memory");
	report(fault_vec == 12 && fault_err == 0 && fault_rip == (uint64_t) ss_load,
	       "load through RBP = %llx: #SS(0) at the load (vector %ld, error %lx)", NONCANONICAL,
	       (long) fault_vec, fault_err);

	set_handler(12, 0);
	set_handler(13, 0);
}

#define VA_APIC 0xffffffffff5fc000ull /* where Linux's fixmap puts it */

static void apic_elsewhere(void)
{
	volatile uint32_t *ident = (volatile uint32_t *) XAPIC_BASE, *alias;
	uint32_t lvr, svr;

	xapic_enable();
	map_page(VA_APIC, XAPIC_BASE, PTE_W | PTE_PCD);
	alias = (volatile uint32_t *) VA_APIC;
	lvr = ident[0x30 / 4];
	report((lvr & 0xff) >= 0x10 && alias[0x30 / 4] == lvr,
	       "APIC version register at %llx reads as at FEE00030H (%x, %x)", VA_APIC + 0x30,
	       alias[0x30 / 4], lvr);
	svr = alias[0xf0 / 4];
	alias[0xf0 / 4] = svr ^ 0x0f; /* the spurious vector's low bits are writable */
	report(ident[0xf0 / 4] == (svr ^ 0x0f), "a write through it reaches the APIC (SVR %x)",
	       ident[0xf0 / 4]);
	alias[0xf0 / 4] = svr;
}

int main(uint64_t arg)
{
	report_prefix("cpu: ");
	idt_init();
	canonical_msrs();
	machine_check();
	noncanonical_access();
	apic_elsewhere();
	return report_summary();
}
