/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>

#include "platform.h"

static struct platform p;

static uint32_t in(uint16_t port, unsigned int size)
{
	uint32_t v = 0xdeadbeef;

	cr_assert_eq(platform_io(&p, port, size, false, &v), 0);
	return v;
}

static void out(uint16_t port, unsigned int size, uint32_t v)
{
	cr_assert_eq(platform_io(&p, port, size, true, &v), 0);
}

static void setup(void)
{
	platform_init(&p, NULL, 128ull << 20, 1);
}

TestSuite(platform, .init = setup);

Test(platform, debug_exit_status)
{
	out(PORT_DEBUG_EXIT, 4, 0x21);
	cr_assert(p.exited);
	cr_assert_eq(p.exit_status, (0x21 << 1) | 1);
}

Test(platform, serial_ready_and_dlab)
{
	cr_assert_eq(in(PORT_COM1 + 5, 1) & 0x60, 0x60); /* THRE | TEMT */
	cr_assert_eq(in(PORT_COM1 + 2, 1), 0x01);	 /* no interrupt pending */
	out(PORT_COM1 + 3, 1, 0x80);
	out(PORT_COM1, 1, 0x0c);
	out(PORT_COM1 + 1, 1, 0x00);
	cr_assert_eq(in(PORT_COM1, 1), 0x0c);
	out(PORT_COM1 + 3, 1, 0x03);
	out(PORT_COM1, 1, 'x');
	cr_assert_eq(p.serial_bytes, 1);
}

Test(platform, fw_cfg)
{
	uint64_t ram = 0;

	out(PORT_FW_CFG_SEL, 2, FW_CFG_SIGNATURE);
	cr_assert_eq(in(PORT_FW_CFG_DATA, 1), 'Q');
	cr_assert_eq(in(PORT_FW_CFG_DATA, 1), 'E');
	cr_assert_eq(in(PORT_FW_CFG_DATA, 1), 'M');
	cr_assert_eq(in(PORT_FW_CFG_DATA, 1), 'U');
	out(PORT_FW_CFG_SEL, 2, FW_CFG_RAM_SIZE);
	for (int i = 0; i < 8; i++)
		ram |= (uint64_t) in(PORT_FW_CFG_DATA, 1) << (8 * i);
	cr_assert_eq(ram, 128ull << 20);
	out(PORT_FW_CFG_SEL, 2, FW_CFG_NB_CPUS);
	cr_assert_eq(in(PORT_FW_CFG_DATA, 1), 1);
	cr_assert_eq(in(PORT_FW_CFG_DATA, 1), 0);
}

Test(platform, pic_ignored_unknown_refused)
{
	uint32_t v = 0;

	out(0x21, 1, 0xff);
	out(0xa1, 1, 0xff);
	cr_assert_eq(in(0x21, 1), 0xff);
	cr_assert_eq(platform_io(&p, 0x1234, 1, false, &v), -ENOENT);
	cr_assert_eq(platform_io(&p, 0x2f8, 1, true, &v), -ENOENT);
}
