/* SPDX-License-Identifier: MIT */
/*
 * Multiboot entry state (Multiboot Specification 0.6.96, 3.2 "Machine
 * state"): SS is a flat 32-bit read/write segment at entry, like DS. So a
 * kernel may set ESP and CALL before it loads segment registers of its
 * own, with its stack above 64 KiB: the return address goes to [ESP - 4]
 * as a 32-bit stack pushes it (SDM Vol. 1 6.2.3: the stack-address size
 * is SS's B flag). This kernel does exactly that, checks where the push
 * landed through ESP-relative and absolute loads, and that RET comes
 * back; then it reports like the other guest tests and exits through
 * isa-debug-exit (0 when everything passed).
 */
#define MB_MAGIC 0x1badb002
#define MB_FLAGS 0x00000003
	.text
	.code32
	.align 4
	.long MB_MAGIC, MB_FLAGS, -(MB_MAGIC + MB_FLAGS)
	.globl _start
_start:
	mov $stack_top, %esp	/* 1 MiB and up: far above 64 KiB */
	call probe		/* pushes after_call at SS:[ESP - 4] */
after_call:
	movl $1, returned
	mov stack_top - 4, %eax	/* what the push left in memory, before any other call */
	mov %eax, mem_seen
	/* every check below still uses the SS the loader gave */
	mov $stack_top - 4, %eax
	cmp %eax, esp_in_call
	jne 1f
	mov $msg_esp_ok, %esi
	call pass
	jmp 2f
1:	mov $msg_esp_bad, %esi
	call fail
2:	cmpl $after_call, ret_seen
	jne 1f
	mov $msg_ret_ok, %esi
	call pass
	jmp 2f
1:	mov $msg_ret_bad, %esi
	call fail
2:	cmpl $after_call, mem_seen
	jne 1f
	mov $msg_mem_ok, %esi
	call pass
	jmp 2f
1:	mov $msg_mem_bad, %esi
	call fail
2:	cmpl $1, returned
	jne 1f
	mov $msg_back_ok, %esi
	call pass
	jmp 2f
1:	mov $msg_back_bad, %esi
	call fail
2:	/* SUMMARY: P passed, F failed, 0 skipped */
	mov $msg_sum1, %esi
	call puts
	mov passed, %eax
	call putdigit
	mov $msg_sum2, %esi
	call puts
	mov failed, %eax
	call putdigit
	mov $msg_sum3, %esi
	call puts
	mov failed, %eax
	test %eax, %eax
	setnz %al
	movzbl %al, %eax
	out %eax, $0xf4
	hlt

probe:
	mov %esp, esp_in_call	/* ESP as the CALL left it */
	mov (%esp), %eax	/* the return address, read back through ESP */
	mov %eax, ret_seen
	ret

pass:	incl passed
	push %esi
	mov $msg_pass, %esi
	call puts
	pop %esi
	jmp puts
fail:	incl failed
	push %esi
	mov $msg_fail, %esi
	call puts
	pop %esi
	jmp puts

putdigit:	/* eax < 10 */
	add $'0', %al
	mov $0x3f8, %dx
	out %al, %dx
	ret

puts:
	lodsb
	test %al, %al
	jz 1f
	mov $0x3f8, %dx
	out %al, %dx
	jmp puts
1:	ret

	.data
msg_pass:	.asciz "PASS: mbstack: "
msg_fail:	.asciz "FAIL: mbstack: "
msg_esp_ok:	.asciz "CALL before loading SS: ESP - 4 afterwards (32-bit stack)\n"
msg_esp_bad:	.asciz "CALL before loading SS: ESP is not ESP - 4 afterwards (a 16-bit SS?)\n"
msg_ret_ok:	.asciz "the return address reads back at (%esp)\n"
msg_ret_bad:	.asciz "the return address is not at (%esp)\n"
msg_mem_ok:	.asciz "the return address is in memory at stack_top - 4\n"
msg_mem_bad:	.asciz "nothing at stack_top - 4: the push went elsewhere\n"
msg_back_ok:	.asciz "RET came back to the instruction after the CALL\n"
msg_back_bad:	.asciz "RET did not come back\n"
msg_sum1:	.asciz "SUMMARY: "
msg_sum2:	.asciz " passed, "
msg_sum3:	.asciz " failed, 0 skipped\n"
	.align 4
passed:		.long 0
failed:		.long 0
returned:	.long 0
esp_in_call:	.long 0
ret_seen:	.long 0
mem_seen:	.long 0
	.bss
	.align 16
	.space 8192
stack_top:
	.section .note.GNU-stack,"",@progbits
