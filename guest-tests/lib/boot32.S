/* SPDX-License-Identifier: MIT */
/*
 * Multiboot v1 entry: 32-bit protected mode, paging off. Builds an identity
 * map of the first 1 GiB with 2 MiB pages, enables PAE, EFER.LME and
 * paging, and far-jumps into 64-bit mode, then calls main(mb_info).
 */
#define MB_MAGIC 0x1badb002
#define MB_FLAGS 0x00000003

	.section .multiboot, "a"
	.align 4
	.long MB_MAGIC
	.long MB_FLAGS
	.long -(MB_MAGIC + MB_FLAGS)

	.section .text.boot, "ax"
	.code32
	.globl _start
_start:
	cli
	mov $stack_top, %esp
	mov %ebx, mb_info
	/* PML4[0] -> PDPT, PDPT[0] -> PD, PD[i] = i * 2 MiB | PS | RW | P */
	mov $pdpt, %eax
	or $3, %eax
	mov %eax, pml4
	mov $pd, %eax
	or $3, %eax
	mov %eax, pdpt
	xor %ecx, %ecx
1:	mov %ecx, %eax
	shl $21, %eax
	or $0x83, %eax
	mov %eax, pd(, %ecx, 8)
	movl $0, pd + 4(, %ecx, 8)
	inc %ecx
	cmp $512, %ecx
	jne 1b
	mov $pml4, %eax
	mov %eax, %cr3
	mov %cr4, %eax
	or $0x620, %eax		/* PAE, OSFXSR, OSXMMEXCPT */
	mov %eax, %cr4
	mov $0xc0000080, %ecx
	rdmsr
	or $0x100, %eax		/* LME */
	wrmsr
	mov %cr0, %eax
	or $0x80000001, %eax	/* PG, PE */
	mov %eax, %cr0
	lgdt gdt_desc
	ljmp $0x08, $start64

	.code64
start64:
	mov $0x10, %ax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	mov $stack_top, %rsp
	mov mb_info, %edi
	call main
	mov %eax, %edi
	call exit

	.section .rodata
	.align 8
gdt:
	.quad 0
	.quad 0x00af9a000000ffff	/* 0x08: 64-bit code */
	.quad 0x00cf92000000ffff	/* 0x10: data */
gdt_desc:
	.word gdt_desc - gdt - 1
	.long gdt

	.section .bss
	.align 4096
pml4:	.space 4096
pdpt:	.space 4096
pd:	.space 4096
mb_info: .long 0
	.align 16
	.space 65536
stack_top:
	.section .note.GNU-stack,"",@progbits
