/*
 * known-count: a user-mode workload whose retired-instruction count follows
 * from this source alone, so `perf stat -e instructions:u` inside the guest
 * can be checked against an exact number.
 *
 * A static ELF with no interpreter and no libc: the kernel enters _start
 * directly after execve(), and the program leaves through exit(0) without
 * ever returning to user mode. Every user-mode instruction it retires is
 * written below:
 *
 *   _start        1 instruction                       (mov)
 *   loop          K = 4 instructions, run N times     (add, xor, dec, jnz)
 *   done          3 instructions                      (mov, xor, syscall)
 *
 *   instructions:u = 1 + K*N + 3 = 1 + 4 * 1000000 + 3 = 4000004
 *
 * The jnz is taken N-1 times and falls through once, so the loop retires
 * exactly N iterations of K instructions. SYSCALL is counted: it begins at
 * CPL 3, and an event select with USR=1, OS=0 counts what retires at
 * CPL > 0 (SDM Vol. 3B 21.2.1.1, IA32_PERFEVTSELx USR/OS flags); the kernel
 * code it enters is CPL 0 and not counted. Page faults and interrupts taken
 * inside the loop do not retire the interrupted instruction, so they add
 * nothing. The program touches no data and no stack: only the one text page
 * faults in.
 *
 * tools/linux-guest reads KNOWN_N and KNOWN_K from the symbols below (nm)
 * and recomputes the sum, so changing N here changes the expectation.
 */
	.set	N, 1000000
	.set	K, 4
	.globl	KNOWN_N, KNOWN_K
	.set	KNOWN_N, N
	.set	KNOWN_K, K

	.text
	.globl	_start
_start:
	mov	$N, %ecx		/* 1 */
loop:
	add	%rcx, %rax		/* K = 4 per iteration */
	xor	%rdx, %rax
	dec	%ecx
	jnz	loop
done:
	mov	$60, %eax		/* exit(0): 3 */
	xor	%edi, %edi
	syscall
	.globl	known_count_end
known_count_end:

	.section .note.GNU-stack, "", @progbits
