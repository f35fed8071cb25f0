/* SPDX-License-Identifier: MIT */
/* ELF64 entry: the loader enters in 64-bit mode on identity page tables, RDI = argument. */
	.section .text.boot, "ax"
	.code64
	.globl _start
_start:
	lea stack_top(%rip), %rsp
	call main
	mov %eax, %edi
	call exit

	.section .bss
	.align 16
	.space 65536
stack_top:
	.section .note.GNU-stack,"",@progbits
