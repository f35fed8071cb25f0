/*
 * callchain: a workload with a known call chain for LBR profiles
 * (perf record -b, perf record --call-graph lbr):
 *
 *   _start -> main -> a -> b -> c
 *
 * b calls c CALLS times; c runs a short loop and returns, so most samples
 * land in c with the stack c <- b <- a <- main <- _start, and the branch
 * records around them hold the calls b -> c and the returns c -> b.
 * Every function keeps the usual frame (push %rbp; mov %rsp, %rbp) so a
 * frame-pointer unwind names the same chain.
 */
	.set	CALLS, 1000000
	.set	INNER, 8

	.text
	.globl	_start, main, a, b, c
	.type	_start, @function
_start:
	xor	%ebp, %ebp
	call	main
	mov	%eax, %edi
	mov	$60, %eax		/* exit(main()) */
	syscall
	.size	_start, . - _start

	.type	main, @function
main:
	push	%rbp
	mov	%rsp, %rbp
	call	a
	xor	%eax, %eax
	pop	%rbp
	ret
	.size	main, . - main

	.type	a, @function
a:
	push	%rbp
	mov	%rsp, %rbp
	call	b
	pop	%rbp
	ret
	.size	a, . - a

	.type	b, @function
b:
	push	%rbp
	mov	%rsp, %rbp
	push	%rbx
	push	%rbx			/* keeps %rsp 16-byte aligned at each call */
	mov	$CALLS, %ebx
1:	call	c
	dec	%ebx
	jnz	1b
	pop	%rbx
	pop	%rbx
	pop	%rbp
	ret
	.size	b, . - b

	.type	c, @function
c:
	push	%rbp
	mov	%rsp, %rbp
	mov	$INNER, %ecx
1:	add	%rcx, %rax
	dec	%ecx
	jnz	1b
	pop	%rbp
	ret
	.size	c, . - c

	.section .note.GNU-stack, "", @progbits
