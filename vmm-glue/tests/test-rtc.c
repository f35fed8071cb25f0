/* SPDX-License-Identifier: MIT */
/*
 * The MC146818A RTC (Motorola datasheet) on the modelled clock: a 2.1 GHz
 * guest TSC, so one second is 2 100 000 000 TSC cycles. Dates are checked
 * against calendar facts computed independently (Python's datetime):
 * 2024-01-01 was a Monday, 2024-02-29 a Thursday, 2100 is no leap year.
 */
#include <criterion/criterion.h>

#include "rtc.h"

#define HZ  2100000000ull
#define SEC HZ

static struct rtc r;

static uint8_t rd(uint8_t reg, uint64_t now)
{
	rtc_write(&r, PORT_RTC_INDEX, reg, now);
	return rtc_read(&r, PORT_RTC_DATA, now);
}

static void wr(uint8_t reg, uint8_t v, uint64_t now)
{
	rtc_write(&r, PORT_RTC_INDEX, reg, now);
	rtc_write(&r, PORT_RTC_DATA, v, now);
}

static void setup(void)
{
	rtc_init(&r, HZ, RTC_DEFAULT_EPOCH);
}

TestSuite(rtc, .init = setup);

static void expect_time(uint64_t now, const uint8_t want[8], const char *what)
{
	static const uint8_t regs[8] = { RTC_SECONDS,	   RTC_MINUTES, RTC_HOURS, RTC_DAY_OF_WEEK,
					 RTC_DAY_OF_MONTH, RTC_MONTH,	RTC_YEAR,  RTC_CENTURY };

	for (int i = 0; i < 8; i++)
		cr_expect_eq(rd(regs[i], now), want[i], "%s: register %#x = %#x, want %#x", what,
			     regs[i], rd(regs[i], now), want[i]);
}

Test(rtc, power_on_state)
{
	/* 2024-01-01 00:00:00, Monday (day 2; 1 = Sunday), BCD, 24-hour */
	static const uint8_t t0[8] = { 0x00, 0x00, 0x00, 0x02, 0x01, 0x01, 0x24, 0x20 };

	expect_time(0, t0, "epoch");
	cr_expect_eq(rd(RTC_REG_A, 0), 0x26, "32.768 kHz, 1024 Hz rate, UIP 0");
	cr_expect_eq(rd(RTC_REG_B, 0), RTC_B_24H);
	cr_expect_eq(rd(RTC_REG_C, 0), 0);
	cr_expect_eq(rd(RTC_REG_D, 0), RTC_D_VRT, "valid RAM and time");
	cr_expect_eq(rtc_read(&r, PORT_RTC_INDEX, 0), 0xff, "index port is write-only");
	for (unsigned int reg = 0; reg < 0x0e; reg++)
		cr_expect_neq(rd((uint8_t) reg, 0), 0xff, "register %#x must not read all ones",
			      reg);
}

Test(rtc, time_follows_the_tsc_in_bcd_and_binary)
{
	/* 2024-02-29 13:45:07, a Thursday (day 5): 59 days + 49507 s after the epoch */
	uint64_t now = (59 * 86400ull + 13 * 3600 + 45 * 60 + 7) * SEC;
	static const uint8_t bcd[8] = { 0x07, 0x45, 0x13, 0x05, 0x29, 0x02, 0x24, 0x20 };
	static const uint8_t bin[8] = { 7, 45, 13, 5, 29, 2, 24, 20 };
	static const uint8_t bcd12[8] = { 0x07, 0x45, 0x81, 0x05, 0x29, 0x02, 0x24, 0x20 };

	expect_time(now, bcd, "BCD");
	expect_time(now + SEC - 1, bcd, "one TSC cycle before the next second");
	cr_expect_eq(rd(RTC_SECONDS, now + SEC), 0x08);
	wr(RTC_REG_B, RTC_B_24H | RTC_B_DM, now);
	expect_time(now, bin, "binary");
	wr(RTC_REG_B, 0, now);
	expect_time(now, bcd12, "BCD, 12-hour: 1 PM = 81H");
	cr_expect_eq(rd(RTC_HOURS, 0), 0x12, "midnight is 12 AM");
	cr_expect_eq(rd(RTC_HOURS, 12 * 3600 * SEC), 0x92, "noon is 12 PM");
}

Test(rtc, century_and_leap_rollover)
{
	/* 2099-12-31 23:59:58 Thursday -> 2100-01-01 00:00:00 Friday */
	static const uint8_t before[8] = { 0x58, 0x59, 0x23, 0x05, 0x31, 0x12, 0x99, 0x20 };
	static const uint8_t after[8] = { 0x00, 0x00, 0x00, 0x06, 0x01, 0x01, 0x00, 0x21 };
	/* 2100-02-28 -> 2100-03-01 (Monday): 2100 is not a leap year */
	static const uint8_t mar1[8] = { 0x00, 0x00, 0x00, 0x02, 0x01, 0x03, 0x00, 0x21 };

	rtc_init(&r, HZ, 4102444798ll);
	expect_time(0, before, "2099-12-31");
	expect_time(2 * SEC, after, "2100-01-01");
	rtc_init(&r, HZ, 4107542400ll - 86400);
	cr_expect_eq(rd(RTC_DAY_OF_MONTH, 0), 0x28);
	expect_time(86400 * SEC, mar1, "2100-03-01");
}

/* UIP: 1 during the 244 us before each update, 244 us = 512400 TSC cycles at 2.1 GHz */
Test(rtc, update_in_progress_window)
{
	cr_expect_eq(rd(RTC_REG_A, 0) & RTC_A_UIP, 0);
	cr_expect_eq(rd(RTC_REG_A, SEC - 512401) & RTC_A_UIP, 0);
	cr_expect_eq(rd(RTC_REG_A, SEC - 512400) & RTC_A_UIP, RTC_A_UIP);
	cr_expect_eq(rd(RTC_REG_A, SEC - 1) & RTC_A_UIP, RTC_A_UIP);
	cr_expect_eq(rd(RTC_SECONDS, SEC - 1), 0x00, "no update before the boundary");
	cr_expect_eq(rd(RTC_REG_A, SEC) & RTC_A_UIP, 0);
	cr_expect_eq(rd(RTC_SECONDS, SEC), 0x01);
	/* SET holds the time and clears UIP */
	wr(RTC_REG_B, RTC_B_24H | RTC_B_SET, 2 * SEC - 100);
	cr_expect_eq(rd(RTC_REG_A, 2 * SEC - 100) & RTC_A_UIP, 0);
	cr_expect_eq(rd(RTC_SECONDS, 9 * SEC), 0x01, "held while SET");
}

Test(rtc, set_the_time)
{
	/* write 2031-07-04 09:08:07 under SET at TSC 5.5 s, then let it run */
	uint64_t t = 5 * SEC + SEC / 2;
	static const uint8_t set[8] = { 0x07, 0x08, 0x09, 0x06, 0x04, 0x07, 0x31, 0x20 };
	static const uint8_t run[8] = { 0x08, 0x08, 0x09, 0x06, 0x04, 0x07, 0x31, 0x20 };

	wr(RTC_REG_B, RTC_B_24H | RTC_B_SET | RTC_B_UIE, t);
	cr_expect_eq(rd(RTC_REG_B, t), RTC_B_24H | RTC_B_SET, "SET clears UIE");
	wr(RTC_YEAR, 0x31, t);
	wr(RTC_MONTH, 0x07, t);
	wr(RTC_DAY_OF_MONTH, 0x04, t);
	wr(RTC_HOURS, 0x09, t);
	wr(RTC_MINUTES, 0x08, t);
	wr(RTC_SECONDS, 0x07, t);
	wr(RTC_DAY_OF_WEEK, 0x06, t); /* 2031-07-04 is a Friday */
	expect_time(t + 3 * SEC, set, "held");
	wr(RTC_REG_B, RTC_B_24H, t + 3 * SEC);
	/* the divider kept its phase: the next update is at TSC 9 s */
	expect_time(9 * SEC - 1, set, "just before the update");
	expect_time(9 * SEC, run, "after the update");
	/* binary writes: 23 h in binary = 17H */
	wr(RTC_REG_B, RTC_B_24H | RTC_B_DM, 9 * SEC);
	wr(RTC_HOURS, 23, 9 * SEC);
	cr_expect_eq(rd(RTC_HOURS, 9 * SEC), 23);
	cr_expect_eq(rd(RTC_DAY_OF_MONTH, 10 * SEC + 3600 * SEC), 5, "the date rolls over");
	cr_expect_eq(rd(RTC_DAY_OF_WEEK, 10 * SEC + 3600 * SEC), 7, "Friday -> Saturday");
	/* the century byte */
	wr(RTC_CENTURY, 19, 10 * SEC);
	cr_expect_eq(rd(RTC_YEAR, 10 * SEC), 31);
	cr_expect_eq(rd(RTC_CENTURY, 10 * SEC), 19);
}

Test(rtc, divider_reset_holds_and_restarts_half_a_second_later)
{
	wr(RTC_REG_A, 0x70, 3 * SEC + 7); /* DV = 111: divider held in reset */
	cr_expect_eq(rd(RTC_SECONDS, 10 * SEC), 0x03);
	wr(RTC_REG_A, 0x26, 10 * SEC);
	cr_expect_eq(rd(RTC_SECONDS, 10 * SEC + SEC / 2 - 1), 0x03);
	cr_expect_eq(rd(RTC_SECONDS, 10 * SEC + SEC / 2), 0x04);
}

Test(rtc, register_c_flags)
{
	/* UF at every update, IRQF only with UIE; reading C clears it */
	cr_expect_eq(rd(RTC_REG_C, SEC - 1), 0x40, "PF: 1024 Hz periodic edges passed");
	cr_expect_eq(rd(RTC_REG_C, SEC + 1), RTC_C_UF | RTC_C_PF);
	cr_expect_eq(rd(RTC_REG_C, SEC + 2), 0, "cleared by the read");
	wr(RTC_REG_B, RTC_B_24H | RTC_B_UIE, SEC + 3);
	cr_expect_eq(rd(RTC_REG_C, 2 * SEC), RTC_C_IRQF | RTC_C_UF | RTC_C_PF);
	/* PF at 1024 Hz: a period is 2 100 000 000 / 1024 = 2050781.25 TSC cycles */
	wr(RTC_REG_B, RTC_B_24H, 0);
	rtc_init(&r, HZ, RTC_DEFAULT_EPOCH);
	cr_expect_eq(rd(RTC_REG_C, 2050781), 0);
	cr_expect_eq(rd(RTC_REG_C, 2050782), RTC_C_PF);
	wr(RTC_REG_A, 0x20, 2050782); /* RS = 0: no periodic flag */
	cr_expect_eq(rd(RTC_REG_C, 3 * 2050782) & RTC_C_PF, 0);
	/* alarm at 00:00:05 (BCD), hours "don't care" */
	wr(RTC_SECONDS_ALARM, 0x05, 0);
	wr(RTC_MINUTES_ALARM, 0x00, 0);
	wr(RTC_HOURS_ALARM, 0xc0, 0);
	cr_expect_eq(rd(RTC_REG_C, 4 * SEC), RTC_C_UF);
	cr_expect_eq(rd(RTC_REG_C, 5 * SEC), RTC_C_UF | RTC_C_AF);
	cr_expect_eq(rd(RTC_REG_C, 6 * SEC), RTC_C_UF);
	/* skipped over: still latched */
	wr(RTC_REG_B, RTC_B_24H | RTC_B_AIE, 6 * SEC);
	cr_expect_eq(rd(RTC_REG_C, 3605 * SEC + 9), RTC_C_IRQF | RTC_C_UF | RTC_C_AF);
	cr_expect_eq(rd(RTC_REG_C, 3606 * SEC), RTC_C_UF);
}

Test(rtc, ram_and_read_only_registers)
{
	wr(0x40, 0x5a, 0);
	cr_expect_eq(rd(0x40, 0), 0x5a);
	cr_expect_eq(rd(0x7f, 0), 0);
	wr(RTC_REG_D, 0, 0);
	cr_expect_eq(rd(RTC_REG_D, 0), RTC_D_VRT);
	wr(RTC_REG_A, 0xa6, 0);
	cr_expect_eq(rd(RTC_REG_A, 0), 0x26, "UIP is read-only");
	rtc_write(&r, PORT_RTC_INDEX, 0x80 | RTC_MONTH, 0);
	cr_expect(r.nmi_masked);
	cr_expect_eq(rtc_read(&r, PORT_RTC_DATA, 0), 0x01, "bit 7 of the index masks NMI only");
}
