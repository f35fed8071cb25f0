/* SPDX-License-Identifier: MIT */
/*
 * The application processor's start: a SIPI starts it in real mode at
 * CS:IP = vector << 8 : 0 (SDM Vol. 3A 9.4.4.1). The BSP copies this
 * page to TRAMP_BASE (below 1 MiB, page-aligned) and fills in CR3, the
 * entry point and the stack. Real mode goes to 64-bit mode in one step:
 * PAE, CR3 and EFER.LME first, then CR0.PE and CR0.PG together, then a
 * far jump to a 64-bit code segment (the same selectors as the loader's
 * GDT: 08H 64-bit code, 10H data, so the shared IDT's gates fit).
 */
#define TRAMP_BASE 0x70000
#define ABS(sym)   (TRAMP_BASE + (sym) - tramp_start)

	.section .rodata
	.balign 4096
	.globl tramp_start, tramp_end, tramp_cr3, tramp_entry, tramp_stack
	.code16
tramp_start:
	cli
	movw %cs, %ax
	movw %ax, %ds
	lgdtl tramp_gdtr - tramp_start
	movl %cr4, %eax
	orl $0x20, %eax				/* PAE */
	movl %eax, %cr4
	movl tramp_cr3 - tramp_start, %eax
	movl %eax, %cr3
	movl $0xc0000080, %ecx			/* IA32_EFER */
	rdmsr
	orl $0x100, %eax			/* LME */
	wrmsr
	movl %cr0, %eax
	orl $0x80000001, %eax			/* PG | PE */
	movl %eax, %cr0
	ljmpl $0x08, $ABS(lm64)

	.code64
lm64:
	movl $0x10, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	movq ABS(tramp_stack), %rsp
	movq ABS(tramp_entry), %rax
	call *%rax
1:	cli
	hlt
	jmp 1b

	.balign 8
tramp_gdt:
	.quad 0
	.quad 0x00af9b000000ffff		/* 08H: 64-bit code */
	.quad 0x00cf93000000ffff		/* 10H: data */
tramp_gdtr:
	.word 3 * 8 - 1
	.long ABS(tramp_gdt)
	.balign 8
tramp_cr3:
	.quad 0
tramp_entry:
	.quad 0
tramp_stack:
	.quad 0
tramp_end:
	.section .note.GNU-stack,"",@progbits
