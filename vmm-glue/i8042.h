/* SPDX-License-Identifier: MIT */
/*
 * The PC's 8042 keyboard controller at ports 60H/64H, with no keyboard
 * and no mouse behind it: what a reboot needs (the reset line) and what a
 * driver's probe asks. See i8042.c.
 */
#ifndef VMM_I8042_H
#define VMM_I8042_H

#include <stdbool.h>
#include <stdint.h>

#define PORT_I8042_DATA	  0x60
#define PORT_I8042_STATUS 0x64 /* read: status; write: command */

#define I8042_STR_OBF	  0x01
#define I8042_STR_IBF	  0x02
#define I8042_STR_SYS	  0x04
#define I8042_STR_CMD	  0x08 /* A2: the last write was a command */
#define I8042_STR_KEYLOCK 0x10 /* 1: keyboard not inhibited */
#define I8042_STR_AUXDATA 0x20
#define I8042_STR_TIMEOUT 0x40

struct i8042 {
	uint8_t status;
	uint8_t ram[32]; /* controller RAM; byte 0 is the command byte */
	uint8_t out;	 /* output buffer */
	uint8_t outport; /* output port P2: bit 0 = not in reset, bit 1 = A20 */
	uint8_t pending; /* a command that waits for its data byte at 60H, or 0 */
	bool reset;	 /* the guest pulsed or drove the reset line */
};

void i8042_init(struct i8042 *k);
uint8_t i8042_read(struct i8042 *k, uint16_t port);
void i8042_write(struct i8042 *k, uint16_t port, uint8_t value);

#endif
