/* SPDX-License-Identifier: MIT */
/*
 * Ring 3 for the guest programs that run user code: a GDT with user
 * segments and a 64-bit TSS (its RSP0 the kernel stack interrupts from
 * CPL 3 switch to), a DPL-3 interrupt gate back to ring 0, and user pages.
 */
#include "guest.h"

uint8_t user_stack[4096] __attribute__((aligned(4096)));
static uint8_t ring0_stack[4096] __attribute__((aligned(16)));

struct tss64 {
	uint32_t reserved0;
	uint64_t rsp[3];
	uint64_t reserved1;
	uint64_t ist[7];
	uint64_t reserved2;
	uint16_t reserved3, iomap_base;
} __attribute__((packed));

static struct tss64 tss __attribute__((aligned(16)));
static uint64_t gdt[7] __attribute__((aligned(16))) = {
	0,
	0x00af9b000000ffffull, /* 0x08 kernel code, 64-bit */
	0x00cf93000000ffffull, /* 0x10 kernel data */
	0x00cff3000000ffffull, /* 0x18 user data, DPL 3 */
	0x00affb000000ffffull, /* 0x20 user code, 64-bit, DPL 3 */
	0,
	0, /* 0x28 the TSS, 16 bytes */
};

/* SDM Vol. 3A 8.2.3 (64-bit TSS descriptor), 3.4.5 (segment descriptors) */
void ring3_gdt_load(void)
{
	uint64_t base = (uint64_t) &tss, limit = sizeof(tss) - 1;
	struct desc_ptr d = { sizeof(gdt) - 1, (uint64_t) gdt };

	tss.rsp[0] = (uint64_t) (ring0_stack + sizeof(ring0_stack));
	tss.iomap_base = sizeof(tss); /* no I/O bitmap: ring 3 may not do I/O */
	gdt[5] = (limit & 0xffff) | (base & 0xffffff) << 16 | 0x89ull << 40 |
		 (limit >> 16 & 0xf) << 48 | (base >> 24 & 0xff) << 56;
	gdt[6] = base >> 32;
	/* clang-format off */
	__asm__ volatile("lgdt %0\n\t"
			 "pushq $" xstr(KERNEL_CS) "\n\t"
			 "lea 1f(%%rip), %%rax\n\t"
			 "push %%rax\n\t"
			 "lretq\n"
			 "1:\n\t"
			 "mov $" xstr(KERNEL_DS) ", %%eax\n\t"
			 "mov %%eax, %%ds\n\t"
			 "mov %%eax, %%es\n\t"
			 "mov %%eax, %%ss\n\t"
			 "mov $" xstr(TSS_SEL) ", %%eax\n\t"
			 "ltr %%ax"
			 :: "m"(d) : "rax", "memory");
	/* clang-format on */
}

/* A 64-bit interrupt gate (SDM Vol. 3A 6.14.1) with DPL 3, so INT from ring 3 may use it. */
void ring3_gate_install(unsigned int vector, const void *entry)
{
	struct desc_ptr d;
	uint64_t a = (uint64_t) entry, *g;

	__asm__ volatile("sidt %0" : "=m"(d));
	g = (uint64_t *) (d.base + 16 * vector);
	g[0] = (a & 0xffff) | (uint64_t) KERNEL_CS << 16 | 0xeeull << 40 | (a >> 16 & 0xffff) << 48;
	g[1] = a >> 32;
}

/* U on every level that maps va (the loader's PML4E/PDPTE/PDE, our own PTE). */
void ring3_make_user(uint64_t va)
{
	uint64_t *t = (uint64_t *) (read_cr3() & PTE_ADDR), *pte = pte_of(va);

	for (int level = 3; level >= 1; level--) {
		uint64_t *e = &t[(va >> (12 + 9 * level)) & 511];

		*e |= PTE_U;
		t = (uint64_t *) (*e & PTE_ADDR);
	}
	*pte |= PTE_U;
	write_cr3(read_cr3());
}
