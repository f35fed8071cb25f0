/* SPDX-License-Identifier: MIT */
/*
 * A guest gone wrong: every IDT gate points at a linear address no page
 * maps, through IST 1 (SDM Vol. 3A 6.14.5), then it calls that address.
 * The fetch faults (#PF), the #PF's handler fetch faults again, and so on:
 * with the interrupt stack table each delivery starts on the same stack,
 * so no frame ever reaches unmapped memory and no double fault comes.
 * Hardware spins there for ever; vpmu-vmm must end it with one line and
 * exit status 2 instead.
 */
#include "guest.h"

#define IST_TSS_SEL 0x18
#define NOWHERE	    0x00007f0000000000ull /* no PML4 entry maps it */

struct tss64 {
	uint32_t reserved0;
	uint64_t rsp[3];
	uint64_t reserved1;
	uint64_t ist[7];
	uint64_t reserved2;
	uint16_t reserved3, iomap_base;
} __attribute__((packed));

struct gate64 {
	uint16_t off0, sel;
	uint8_t ist, type;
	uint16_t off1;
	uint32_t off2, zero;
} __attribute__((packed));

static struct tss64 tss __attribute__((aligned(16)));
static struct gate64 idt[256] __attribute__((aligned(16)));
static uint8_t ist_stack[4096] __attribute__((aligned(16)));
static uint64_t gdt[5] __attribute__((aligned(16))) = {
	0,
	0x00af9b000000ffffull, /* 0x08 kernel code, 64-bit */
	0x00cf93000000ffffull, /* 0x10 kernel data */
	0,		       /* 0x18 the TSS, 16 bytes */
	0,
};

int main(uint64_t arg)
{
	uint64_t base = (uint64_t) &tss, limit = sizeof(tss) - 1;
	struct desc_ptr g = { sizeof(gdt) - 1, (uint64_t) gdt };
	struct desc_ptr i = { sizeof(idt) - 1, (uint64_t) idt };

	tss.ist[0] = (uint64_t) (ist_stack + sizeof(ist_stack));
	tss.iomap_base = sizeof(tss);
	/* SDM Vol. 3A 8.2.3: the 64-bit TSS descriptor */
	gdt[3] = (limit & 0xffff) | (base & 0xffffff) << 16 | 0x89ull << 40 |
		 (limit >> 16 & 0xf) << 48 | (base >> 24 & 0xff) << 56;
	gdt[4] = base >> 32;
	for (int v = 0; v < 256; v++)
		idt[v] = (struct gate64){ .off0 = (uint16_t) NOWHERE,
					  .sel = KERNEL_CS,
					  .ist = 1,
					  .type = 0x8e, /* present, DPL 0, interrupt gate */
					  .off1 = (uint16_t) (NOWHERE >> 16),
					  .off2 = (uint32_t) (NOWHERE >> 32) };
	printf("excloop: every gate at 0x%lx through IST 1, calling it\n", (unsigned long) NOWHERE);
	/* clang-format off */
	__asm__ volatile("lgdt %0\n\t"
			 "pushq $" xstr(KERNEL_CS) "\n\t"
			 "lea 1f(%%rip), %%rax\n\t"
			 "push %%rax\n\t"
			 "lretq\n"
			 "1:\n\t"
			 "mov $" xstr(KERNEL_DS) ", %%eax\n\t"
			 "mov %%eax, %%ss\n\t"
			 "mov $" xstr(IST_TSS_SEL) ", %%eax\n\t"
			 "ltr %%ax\n\t"
			 "lidt %1\n\t"
			 "call *%2" ::"m"(g), "m"(i), "r"(NOWHERE)
			 : "rax", "memory");
	/* clang-format on */
	return 1;
}
