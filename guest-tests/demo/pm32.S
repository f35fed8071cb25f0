/* SPDX-License-Identifier: MIT */
/*
 * A multiboot kernel that stays in 32-bit protected mode: its own GDT and
 * a 32-bit IDT, #UD from ud2 and a software INT 0x40 through 32-bit
 * interrupt gates, then RDMSR of a PMU MSR, and exit status 1 via 0xf4.
 */
#define MB_MAGIC 0x1badb002
#define MB_FLAGS 0x00000003
	.text
	.code32
	.align 4
	.long MB_MAGIC, MB_FLAGS, -(MB_MAGIC + MB_FLAGS)
	.globl _start
_start:
	mov $stack_top, %esp
	lgdt gdt_desc
	ljmp $0x08, $1f
1:	mov $0x10, %ax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	/* IDT[6] = ud_handler, IDT[0x40] = int_handler: 32-bit interrupt gates */
	mov $ud_handler, %eax
	mov $idt + 6 * 8, %edi
	call set_gate
	mov $int_handler, %eax
	mov $idt + 0x40 * 8, %edi
	call set_gate
	lidt idt_desc
	mov $msg_start, %esi
	call puts
ud_here:
	ud2
	int $0x40
	mov $0x186, %ecx	/* IA32_PERFEVTSEL0 reads 0 after reset */
	rdmsr
	test %eax, %eax
	jnz fail
	mov $msg_done, %esi
	call puts
	mov $0, %eax
	out %eax, $0xf4
fail:
	mov $1, %eax
	out %eax, $0xf4
	hlt

set_gate:	/* eax = handler, edi = gate */
	mov %ax, (%edi)
	movw $0x08, 2(%edi)
	movw $0x8e00, 4(%edi)
	shr $16, %eax
	mov %ax, 6(%edi)
	ret

puts:
	lodsb
	test %al, %al
	jz 2f
	mov $0x3f8, %dx
	out %al, %dx
	jmp puts
2:	ret

puthex:	/* eax */
	mov $8, %ecx
3:	rol $4, %eax
	mov %eax, %ebx
	and $0xf, %eax
	movb hex(%eax), %al
	mov $0x3f8, %dx
	out %al, %dx
	mov %ebx, %eax
	loop 3b
	mov $'\n', %al
	out %al, %dx
	ret

ud_handler:
	mov $msg_ud, %esi
	call puts
	mov (%esp), %eax
	call puthex
	addl $2, (%esp)
	iret

int_handler:
	mov $msg_int, %esi
	call puts
	mov (%esp), %eax
	call puthex
	iret

	.data
hex:	.ascii "0123456789abcdef"
msg_start: .asciz "pm32: 32-bit protected mode\n"
msg_ud: .asciz "#UD at eip 0x"
msg_int: .asciz "int 0x40 at eip 0x"
msg_done: .asciz "pm32 done\n"
	.align 8
gdt:	.quad 0, 0x00cf9a000000ffff, 0x00cf92000000ffff
gdt_desc: .word 23
	.long gdt
idt_desc: .word 256 * 8 - 1
	.long idt
	.bss
	.align 8
idt:	.space 256 * 8
	.space 4096
stack_top:
	.section .note.GNU-stack,"",@progbits
