/* SPDX-License-Identifier: MIT */
/*
 * The 8042 keyboard controller without keyboard or mouse: status bits,
 * the controller commands Linux's i8042 driver and its reboot path use
 * (IBM PC/AT Technical Reference, keyboard controller commands).
 */
#include <criterion/criterion.h>

#include "i8042.h"

static struct i8042 k;

static void setup(void)
{
	i8042_init(&k);
}

TestSuite(i8042, .init = setup);

static uint8_t status(void)
{
	return i8042_read(&k, PORT_I8042_STATUS);
}

Test(i8042, power_on_status_and_command_byte)
{
	cr_expect_eq(status(), I8042_STR_SYS | I8042_STR_KEYLOCK, "14H: empty, not busy");
	i8042_write(&k, PORT_I8042_STATUS, 0x20);
	cr_expect_eq(status(), I8042_STR_OBF | I8042_STR_SYS | I8042_STR_CMD | I8042_STR_KEYLOCK);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x65,
		     "command byte: KBD IRQ, SYS, aux disabled, translate");
	cr_expect_eq(status() & I8042_STR_OBF, 0, "read empties the buffer");
	/* write the command byte; SYS follows its bit 2 */
	i8042_write(&k, PORT_I8042_STATUS, 0x60);
	i8042_write(&k, PORT_I8042_DATA, 0x30);
	cr_expect_eq(status() & (I8042_STR_SYS | I8042_STR_CMD), 0);
	i8042_write(&k, PORT_I8042_STATUS, 0x20);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x30);
	i8042_write(&k, PORT_I8042_STATUS, 0xae); /* enable keyboard: clears bit 4 */
	i8042_write(&k, PORT_I8042_STATUS, 0xa8); /* enable aux: clears bit 5 */
	i8042_write(&k, PORT_I8042_STATUS, 0x20);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x00);
	i8042_write(&k, PORT_I8042_STATUS, 0xad);
	i8042_write(&k, PORT_I8042_STATUS, 0xa7);
	i8042_write(&k, PORT_I8042_STATUS, 0x20);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x30);
}

Test(i8042, self_tests)
{
	i8042_write(&k, PORT_I8042_STATUS, 0xaa);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x55, "controller OK");
	i8042_write(&k, PORT_I8042_STATUS, 0xab);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x00, "keyboard interface OK");
	i8042_write(&k, PORT_I8042_STATUS, 0xa9);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x00, "aux interface OK");
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x00, "empty: the last byte again");
}

Test(i8042, no_devices_time_out)
{
	i8042_write(&k, PORT_I8042_DATA, 0xff); /* keyboard reset: nobody there */
	cr_expect_eq(status() & (I8042_STR_TIMEOUT | I8042_STR_OBF), I8042_STR_TIMEOUT);
	i8042_write(&k, PORT_I8042_STATUS, 0xd4);
	cr_expect_eq(status() & I8042_STR_TIMEOUT, 0, "a new command clears it");
	i8042_write(&k, PORT_I8042_DATA, 0xf2); /* to the mouse */
	cr_expect_eq(status() & (I8042_STR_TIMEOUT | I8042_STR_OBF), I8042_STR_TIMEOUT);
	/* loopback of the output buffer (Linux's aux probe uses D3H) */
	i8042_write(&k, PORT_I8042_STATUS, 0xd3);
	i8042_write(&k, PORT_I8042_DATA, 0x5a);
	cr_expect_eq(status() & (I8042_STR_OBF | I8042_STR_AUXDATA),
		     I8042_STR_OBF | I8042_STR_AUXDATA);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x5a);
	i8042_write(&k, PORT_I8042_STATUS, 0xd2);
	i8042_write(&k, PORT_I8042_DATA, 0xa5);
	cr_expect_eq(status() & (I8042_STR_OBF | I8042_STR_AUXDATA), I8042_STR_OBF);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0xa5);
	cr_expect_not(k.reset);
}

Test(i8042, pulse_reset_line)
{
	i8042_write(&k, PORT_I8042_STATUS, 0xff); /* pulses nothing */
	cr_expect_not(k.reset);
	i8042_write(&k, PORT_I8042_STATUS, 0xfd); /* bit 1 (A20) only */
	cr_expect_not(k.reset);
	i8042_write(&k, PORT_I8042_STATUS, 0xfe);
	cr_expect(k.reset);
}

Test(i8042, output_port_reset)
{
	i8042_write(&k, PORT_I8042_STATUS, 0xd0);
	cr_expect_eq(i8042_read(&k, PORT_I8042_DATA), 0x03, "not in reset, A20 on");
	i8042_write(&k, PORT_I8042_STATUS, 0xd1);
	i8042_write(&k, PORT_I8042_DATA, 0x03);
	cr_expect_not(k.reset);
	i8042_write(&k, PORT_I8042_STATUS, 0xd1);
	i8042_write(&k, PORT_I8042_DATA, 0x02);
	cr_expect(k.reset, "bit 0 low drives reset");
}
