/* SPDX-License-Identifier: MIT */
/*
 * A guest gone wrong: no IDT, then a jump to linear address 0. It runs
 * the zeros there (ADD [RAX], AL) up to the end of its RAM, where the
 * first exception cannot be delivered: a triple fault. vpmu-vmm must end
 * it with one line and exit status 2, not spin (address 0 must not read
 * as "stop here" to the emulator). Run it with a small --mem.
 */
#include "guest.h"

int main(uint64_t arg)
{
	struct {
		uint16_t limit;
		uint64_t base;
	} __attribute__((packed)) no_idt = { 0, 0 };

	printf("jump0: no IDT, jumping to 0\n");
	__asm__ volatile("lidt %0\n\t"
			 "xor %%eax, %%eax\n\t"
			 "jmp *%%rax" ::"m"(no_idt)
			 : "memory");
	return 1;
}
