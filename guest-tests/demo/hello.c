/* SPDX-License-Identifier: MIT */
/* Stage 1: print over COM1 and exit through isa-debug-exit with status (21 << 1) | 1 = 43. */
#include "guest.h"

int main(uint64_t arg)
{
	uint8_t sig[4];

	outw(0x510, 0); /* fw_cfg signature */
	for (int i = 0; i < 4; i++)
		sig[i] = inb(0x511);
	printf("hello from the guest, fw_cfg says %c%c%c%c\n", sig[0], sig[1], sig[2], sig[3]);
	exit(21);
}
