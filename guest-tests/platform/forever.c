/* SPDX-License-Identifier: MIT */
/* A guest that never exits: for stopping vpmu-vmm from outside (signals, --timeout). */
#include "guest.h"

int main(uint64_t arg)
{
	printf("forever: spinning\n");
	for (;;)
		__asm__ volatile("pause");
	return 0;
}
