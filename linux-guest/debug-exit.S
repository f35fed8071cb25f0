/*
 * debug-exit [DIGIT]: write DIGIT (0-9, default 0) to I/O port 0xF4, the
 * isa-debug-exit port that vpmu-vmm (and QEMU with -device isa-debug-exit)
 * turn into the exit status (DIGIT << 1) | 1. The guest's /init uses it to
 * end the run where it cannot power off. Exits 1 when ioperm() is refused,
 * 0 otherwise (a machine without the port simply ignores the write).
 */
	.set	SYS_ioperm, 173
	.set	SYS_exit, 60
	.set	PORT, 0xf4

	.text
	.globl	_start
_start:
	xor	%ebx, %ebx		/* value = 0 */
	cmpq	$2, (%rsp)		/* argc >= 2: value = argv[1][0] - '0' */
	jb	1f
	mov	16(%rsp), %rsi
	movzbl	(%rsi), %ebx
	sub	$'0', %ebx
	cmp	$9, %ebx
	jbe	1f
	mov	$2, %edi		/* not a digit */
	jmp	out
1:	mov	$SYS_ioperm, %eax
	mov	$PORT, %edi
	mov	$1, %esi
	mov	$1, %edx
	syscall
	mov	$1, %edi
	test	%rax, %rax
	jnz	out
	mov	%ebx, %eax
	mov	$PORT, %edx
	outb	%al, %dx
	xor	%edi, %edi
out:	mov	$SYS_exit, %eax
	syscall

	.section .note.GNU-stack, "", @progbits
