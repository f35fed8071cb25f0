/* SPDX-License-Identifier: MIT */
/*
 * Guest page faults reach the guest as #PF (SDM Vol. 3A 4.7, 6.15): a
 * load from a linear page the tables do not map, a store to a read-only
 * page with CR0.WP set, and a fetch from an unmapped page; each with CR2
 * = the linear address, the error code's P/W/I bits, and the frame's RIP
 * at the faulting instruction with the instructions before it done and
 * the ones after it not. The handler maps the page and returns, and the
 * instruction runs again.
 */
#include "guest.h"

#define VA_LOAD 0x40000000ull /* PDPT[1]: nothing identity-mapped here */
#define VA_CODE 0x40200000ull
#define PA_DATA 0x00300000ull
#define PA_CODE 0x00301000ull
#define PA_RO	0x00302000ull

extern char pf_load[], pf_store[];
static volatile uint64_t pf_rip, pf_cr2, pf_err, pfs;
static uint64_t pf_map_va, pf_map_pa, pf_map_flags;

static uint64_t read_cr2(void)
{
	uint64_t v;

	__asm__ volatile("mov %%cr2, %0" : "=r"(v));
	return v;
}

static void on_pf(struct frame *f)
{
	pfs++;
	pf_rip = f->rip;
	pf_cr2 = read_cr2();
	pf_err = f->error;
	map_page(pf_map_va, pf_map_pa, pf_map_flags); /* fix it; the instruction runs again */
}

int main(uint64_t arg)
{
	uint64_t rbx, rcx;
	int (*fn)(void) = (int (*)(void)) VA_CODE;
	static const uint8_t ret7[] = { 0xb8, 7, 0, 0, 0, 0xc3 }; /* mov $7, %eax; ret */

	report_prefix("pagefault: ");
	idt_init();
	set_handler(14, on_pf);
	*(volatile uint64_t *) PA_DATA = 0x1234;

	/* a load from an unmapped page: error code 0 (not present, read, supervisor) */
	pf_map_va = VA_LOAD, pf_map_pa = PA_DATA, pf_map_flags = PTE_W;
	/* clang-format off */
	__asm__ volatile("xor %%ebx, %%ebx\n\t"
			 "inc %%rbx\n"
			 ".globl pf_load\n"
			 "pf_load:\n\t"
			 "mov (%2), %%rcx\n\t"
			 "inc %%rbx\n\t"
			 : "=&b"(rbx), "=&c"(rcx) : "r"(VA_LOAD) : "memory");
	/* clang-format on */
	printf("load: #PF at %lx, CR2 %lx, error %lx; rbx %lu, rcx %lx\n", pf_rip, pf_cr2, pf_err,
	       rbx, rcx);
	report(pfs == 1, "load: one #PF");
	report(pf_rip == (uint64_t) pf_load, "load: frame RIP = the faulting mov");
	report(pf_cr2 == VA_LOAD, "load: CR2 = the linear address");
	report(pf_err == 0, "load: error code 0 (not present, read, CPL 0)");
	report(rbx == 2, "load: the inc before it ran once, the one after it once");
	report(rcx == 0x1234, "load: after the handler mapped the page, the load read it");

	/* a store to a read-only page with CR0.WP: error code 3 (present, write) */
	map_page(VA_LOAD + 0x1000, PA_RO, 0);
	(void) *(volatile uint64_t *) (VA_LOAD + 0x1000);
	pf_map_va = VA_LOAD + 0x1000, pf_map_pa = PA_RO, pf_map_flags = PTE_W;
	/* clang-format off */
	__asm__ volatile(".globl pf_store\n"
			 "pf_store:\n\t"
			 "movq $0x5678, (%0)\n\t" :: "r"(VA_LOAD + 0x1000) : "memory");
	/* clang-format on */
	report(pfs == 2, "store: one #PF");
	report(pf_rip == (uint64_t) pf_store, "store: frame RIP = the faulting mov");
	report(pf_cr2 == VA_LOAD + 0x1000, "store: CR2 = the linear address");
	report(pf_err == 3, "store: error code 3 (present, write, CPL 0): %lx", pf_err);
	report(*(volatile uint64_t *) PA_RO == 0x5678, "store: done once the page is writable");

	/* a fetch from an unmapped page: the frame's RIP is the target */
	for (unsigned int i = 0; i < sizeof(ret7); i++)
		((volatile uint8_t *) PA_CODE)[i] = ret7[i];
	pf_map_va = VA_CODE, pf_map_pa = PA_CODE, pf_map_flags = 0;
	report(fn() == 7, "fetch: the call returns once the page is mapped");
	report(pfs == 3, "fetch: one #PF");
	report(pf_rip == VA_CODE && pf_cr2 == VA_CODE, "fetch: RIP = CR2 = the target (%lx, %lx)",
	       pf_rip, pf_cr2);
	report((pf_err & ~16ull) == 0, "fetch: not present, read (I/D only with NX): %lx", pf_err);
	return report_summary();
}
