/* SPDX-License-Identifier: MIT */
/*
 * An 8042-compatible keyboard controller (the IBM PC/AT Technical
 * Reference's keyboard controller: status register, command byte,
 * controller commands) with neither keyboard nor mouse attached.
 *
 * Status (64H read): OBF when the output buffer holds a byte (AUXDATA if
 * it came from the aux side), IBF always 0 (every byte is taken at once),
 * SYS set (self-test passed at power-on), A2 = last write was a command,
 * KEYLOCK set (not inhibited), TIMEOUT when the last byte sent to a
 * device found none.
 *
 * Commands (64H write):
 *   20H-3FH  read controller RAM (20H: the command byte)
 *   60H-7FH  write controller RAM from the next byte at 60H
 *   A7H/A8H  disable/enable the aux port (command byte bit 5)
 *   A9H      aux interface test: 00H (no fault on the lines)
 *   AAH      controller self-test: 55H
 *   ABH      keyboard interface test: 00H
 *   ADH/AEH  disable/enable the keyboard (command byte bit 4)
 *   D0H      read the output port; D1H writes it from the next byte (bit 0
 *            low drives the CPU reset line)
 *   D2H/D3H  put the next byte in the output buffer as keyboard/aux data
 *   D4H      send the next byte to the aux device: none, TIMEOUT
 *   F0H-FFH  pulse output port bits 3:0 low where the command has a 0;
 *            bit 0 is the reset line, so FEH resets the machine (Linux's
 *            reboot "kbd" method)
 * Other commands are ignored. A byte written to 60H with no command
 * waiting goes to the keyboard, which is absent: TIMEOUT, no reply.
 * Reading 60H returns the output buffer (the last byte again if empty)
 * and empties it. A reset request is latched in `reset` for the platform.
 * No IRQ 1/12 is delivered: the platform has no 8259.
 */
#include <string.h>

#include "i8042.h"

#define CMD_BYTE_KBD_INT  0x01
#define CMD_BYTE_SYS	  0x04
#define CMD_BYTE_KBD_OFF  0x10
#define CMD_BYTE_AUX_OFF  0x20
#define CMD_BYTE_XLATE	  0x40
#define OUTPORT_NOT_RESET 0x01
#define OUTPORT_A20	  0x02

void i8042_init(struct i8042 *k)
{
	memset(k, 0, sizeof(*k));
	k->status = I8042_STR_SYS | I8042_STR_KEYLOCK;
	k->ram[0] = CMD_BYTE_KBD_INT | CMD_BYTE_SYS | CMD_BYTE_XLATE | CMD_BYTE_AUX_OFF;
	k->outport = OUTPORT_NOT_RESET | OUTPORT_A20;
}

static void put(struct i8042 *k, uint8_t v, bool aux)
{
	k->out = v;
	k->status |= I8042_STR_OBF;
	if (aux)
		k->status |= I8042_STR_AUXDATA;
	else
		k->status &= (uint8_t) ~I8042_STR_AUXDATA;
}

static void write_outport(struct i8042 *k, uint8_t v)
{
	k->outport = v;
	if (!(v & OUTPORT_NOT_RESET))
		k->reset = true;
}

static void command(struct i8042 *k, uint8_t cmd)
{
	k->pending = 0;
	if (cmd >= 0x20 && cmd <= 0x3f) {
		put(k, k->ram[cmd & 0x1f], false);
		return;
	}
	if ((cmd >= 0x60 && cmd <= 0x7f) || (cmd >= 0xd1 && cmd <= 0xd4)) {
		k->pending = cmd;
		return;
	}
	if (cmd >= 0xf0) {
		if (!(cmd & 1))
			k->reset = true; /* pulse of the reset line */
		return;
	}
	switch (cmd) {
	case 0xa7:
		k->ram[0] |= CMD_BYTE_AUX_OFF;
		break;
	case 0xa8:
		k->ram[0] &= (uint8_t) ~CMD_BYTE_AUX_OFF;
		break;
	case 0xa9:
	case 0xab:
		put(k, 0x00, false);
		break;
	case 0xaa:
		k->status |= I8042_STR_SYS;
		put(k, 0x55, false);
		break;
	case 0xad:
		k->ram[0] |= CMD_BYTE_KBD_OFF;
		break;
	case 0xae:
		k->ram[0] &= (uint8_t) ~CMD_BYTE_KBD_OFF;
		break;
	case 0xd0:
		put(k, k->outport, false);
		break;
	default:
		break;
	}
}

static void data(struct i8042 *k, uint8_t v)
{
	uint8_t cmd = k->pending;

	k->pending = 0;
	if (cmd >= 0x60 && cmd <= 0x7f) {
		k->ram[cmd & 0x1f] = v;
		if (cmd == 0x60)
			k->status = (uint8_t) ((k->status & ~I8042_STR_SYS) | (v & CMD_BYTE_SYS));
		return;
	}
	switch (cmd) {
	case 0xd1:
		write_outport(k, v);
		break;
	case 0xd2:
		put(k, v, false);
		break;
	case 0xd3:
		put(k, v, true);
		break;
	default: /* D4H (to the aux device) or no command: to the keyboard; neither is there */
		k->status |= I8042_STR_TIMEOUT;
		break;
	}
}

uint8_t i8042_read(struct i8042 *k, uint16_t port)
{
	if (port == PORT_I8042_STATUS)
		return k->status;
	k->status &= (uint8_t) ~(I8042_STR_OBF | I8042_STR_AUXDATA);
	return k->out;
}

void i8042_write(struct i8042 *k, uint16_t port, uint8_t value)
{
	k->status &= (uint8_t) ~I8042_STR_TIMEOUT;
	if (port == PORT_I8042_STATUS) {
		k->status |= I8042_STR_CMD;
		command(k, value);
		return;
	}
	k->status &= (uint8_t) ~I8042_STR_CMD;
	data(k, value);
}
