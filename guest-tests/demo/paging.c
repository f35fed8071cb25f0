/* SPDX-License-Identifier: MIT */
/*
 * A virtual layout that differs from the physical one: 4 KiB pages at
 * 1 GiB + x mapped onto scattered physical pages, written and read through
 * both mappings, remapped (INVLPG and a CR3 reload), and code run from a
 * virtual address whose physical page lies elsewhere.
 */
#include "guest.h"

#define VA	0x40000000ull /* PDPT[1]: nothing identity-mapped here */
#define PA_A	0x00300000ull
#define PA_B	0x00305000ull
#define PA_CODE 0x0030a000ull

static uint64_t pd1[512] __attribute__((aligned(4096)));
static uint64_t pt1[512] __attribute__((aligned(4096)));

int main(uint64_t mb_info)
{
	uint64_t cr3 = read_cr3();
	uint64_t *pml4 = (uint64_t *) (cr3 & ~0xfffull);
	uint64_t *pdpt = (uint64_t *) (pml4[0] & ~0xfffull);
	volatile uint32_t *va = (volatile uint32_t *) VA;
	volatile uint32_t *pa_a = (volatile uint32_t *) PA_A, *pa_b = (volatile uint32_t *) PA_B;
	static const uint8_t ret42[] = { 0xb8, 42, 0, 0, 0, 0xc3 }; /* mov $42, %eax; ret */
	int (*fn)(void) = (int (*)(void))(VA + 0x2000);

	report_prefix("paging: ");
	printf("multiboot info at %lx, CR3 %lx\n", mb_info, cr3);
	report(mb_info != 0, "multiboot info pointer in EBX");
	pdpt[1] = (uint64_t) pd1 | 3;
	pd1[0] = (uint64_t) pt1 | 3;
	pt1[0] = PA_A | 3;
	pt1[1] = PA_B | 3;
	pt1[2] = PA_CODE | 3;
	pa_b[0] = 0x22222222;
	__asm__ volatile("mov %0, %%cr3" ::"r"(cr3) : "memory");

	va[0] = 0x11111111;
	va[1024 + 1] = 0x33333333; /* second virtual page = PA_B */
	report(pa_a[0] == 0x11111111, "write through VA lands in its physical page");
	report(pa_b[1] == 0x33333333, "second virtual page maps PA_B");
	report(va[1024] == 0x22222222, "read through VA sees PA_B");

	pt1[0] = PA_B | 3;
	invlpg(VA);
	report(va[0] == 0x22222222, "after remap + INVLPG, VA reads the new page");
	va[2] = 0x44444444;
	report(pa_b[2] == 0x44444444 && pa_a[2] != 0x44444444,
	       "after remap, writes go to the new page");

	pt1[0] = PA_A | 3;
	__asm__ volatile("mov %0, %%cr3" ::"r"(cr3) : "memory");
	report(va[0] == 0x11111111, "after remap + CR3 reload, VA reads the old page again");

	for (unsigned int i = 0; i < sizeof(ret42); i++)
		((volatile uint8_t *) PA_CODE)[i] = ret42[i];
	report(fn() == 42, "code runs at a virtual address backed by another physical page");
	return report_summary();
}
