/* SPDX-License-Identifier: MIT */
/* 256 interrupt stubs: push a dummy error code where the CPU pushes none, the vector, then
 * every GPR, and call isr_dispatch(struct frame *). */
	.text
	.code64
.macro stub n
	.align 16
isr\n:
	.if (\n == 8) || (\n >= 10 && \n <= 14) || (\n == 17) || (\n == 21)
	.else
	pushq $0
	.endif
	pushq $\n
	jmp isr_common
.endm

	.altmacro
	.set i, 0
	.rept 256
	stub %i
	.set i, i + 1
	.endr

isr_common:
	push %rax
	push %rcx
	push %rdx
	push %rbx
	push %rbp
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
	push %r11
	push %r12
	push %r13
	push %r14
	push %r15
	mov %rsp, %rdi
	cld
	call isr_dispatch
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rbp
	pop %rbx
	pop %rdx
	pop %rcx
	pop %rax
	add $16, %rsp
	iretq

.macro addr n
	.quad isr\n
.endm
	.section .rodata
	.globl isr_stubs
	.align 8
isr_stubs:
	.set i, 0
	.rept 256
	addr %i
	.set i, i + 1
	.endr
	.section .note.GNU-stack,"",@progbits
