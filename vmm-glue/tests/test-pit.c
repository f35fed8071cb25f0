/* SPDX-License-Identifier: MIT */
/*
 * The 8254 PIT (Intel 8254 datasheet) on the modelled clock. A guest TSC
 * of 100 x 1.193182 MHz makes one PIT tick exactly 100 TSC cycles, so the
 * expected counts follow from the datasheet's mode descriptions by hand:
 * a count written during tick T is loaded on the CLK of tick T + 1 and
 * decrements on each CLK after it.
 */
#include <criterion/criterion.h>

#include "pit.h"

#define TSC_HZ (PIT_HZ * 100)
#define T(t)   ((uint64_t) (t) *100) /* TSC at the start of PIT tick t */

static struct pit p;

static void setup(void)
{
	pit_init(&p, TSC_HZ);
}

TestSuite(pit, .init = setup);

static uint16_t read16(uint16_t port, uint64_t now)
{
	uint16_t lo = pit_read(&p, port, now);

	return (uint16_t) (lo | pit_read(&p, port, now) << 8);
}

static uint16_t latched(unsigned int ch, uint64_t now)
{
	pit_write(&p, PORT_PIT_MODE, (uint8_t) (ch << 6), now); /* counter latch */
	return read16((uint16_t) (PORT_PIT_CH0 + ch), now);
}

Test(pit, clock_is_the_tsc)
{
	cr_expect_eq(pit_ticks(&p, T(1234)), 1234);
	cr_expect_eq(pit_ticks(&p, T(1234) - 1), 1233);
	pit_init(&p, 2100000000ull); /* 2.1 GHz: one second of TSC is PIT_HZ ticks */
	cr_expect_eq(pit_ticks(&p, 2100000000ull), 1193182);
	cr_expect_eq(pit_ticks(&p, 1759), 0); /* 1759 * 1193182 / 2.1e9 = 0.99943... */
	cr_expect_eq(pit_ticks(&p, 1760), 1); /* 1760 * 1193182 / 2.1e9 = 1.00000015 */
}

/* Linux's quick_pit_calibrate(): channel 2, mode 0, count FFFFH, polling the MSB */
Test(pit, mode0_channel2_msb_polling)
{
	pit_set_gate(&p, 2, true, T(10));
	pit_write(&p, PORT_PIT_MODE, 0xb0, T(10)); /* ch2, LSB/MSB, mode 0, binary */
	cr_expect_not(pit_out(&p, 2, T(10)), "mode 0: OUT low after the control word");
	pit_write(&p, 0x42, 0xff, T(10));
	pit_write(&p, 0x42, 0xff, T(10)); /* loaded on the CLK of tick 11 */
	cr_expect_eq(read16(0x42, T(11)), 0xffff);
	cr_expect_eq(read16(0x42, T(12)), 0xfffe);
	cr_expect_eq(read16(0x42, T(11 + 255)), 0xff00);
	cr_expect_eq(read16(0x42, T(11 + 256)), 0xfeff);
	/* LSB then MSB: a lone LSB read leaves the flip-flop on the MSB */
	cr_expect_eq(pit_read(&p, 0x42, T(11 + 256)), 0xff);
	cr_expect_eq(pit_read(&p, 0x42, T(11 + 300)), 0xfe, "MSB of 65535 - 300 = FED3H");
	cr_expect_not(pit_out(&p, 2, T(11 + 65534)));
	cr_expect(pit_out(&p, 2, T(11 + 65535)), "OUT high at terminal count");
	cr_expect_eq(read16(0x42, T(11 + 65536)), 0xffff, "and it keeps counting, wrapped");
	cr_expect(pit_out(&p, 2, T(11 + 70000)), "OUT stays high");
}

/* pit_calibrate_tsc(): mode 0 with a 10 ms count, OUT2 polled (port 61H bit 5) */
Test(pit, mode0_out_after_n_plus_one_clocks)
{
	pit_set_gate(&p, 2, true, 0);
	pit_write(&p, PORT_PIT_MODE, 0xb0, T(100));
	pit_write(&p, 0x42, 11931 & 0xff, T(100));
	pit_write(&p, 0x42, 11931 >> 8, T(100));
	cr_expect_not(pit_out(&p, 2, T(100 + 11931)));
	cr_expect(pit_out(&p, 2, T(100 + 11932)), "N + 1 CLKs after the write");
	/* the gate suspends counting in mode 0 */
	pit_write(&p, 0x42, 10, T(20000));
	pit_write(&p, 0x42, 0, T(20000));
	cr_expect_not(pit_out(&p, 2, T(20000)), "a new count sets OUT low");
	pit_set_gate(&p, 2, false, T(20005));
	cr_expect_eq(read16(0x42, T(30000)), 6, "held at 10 - 4 while gated off");
	pit_set_gate(&p, 2, true, T(30000));
	cr_expect_eq(read16(0x42, T(30004)), 2);
	cr_expect(pit_out(&p, 2, T(30006)));
}

/* Linux's periodic PIT clockevent: channel 0, control word 34H, LATCH = 1193 for HZ = 1000 */
Test(pit, mode2_rate_generator)
{
	pit_write(&p, PORT_PIT_MODE, 0x34, T(7));
	pit_write(&p, PORT_PIT_CH0, 1193 & 0xff, T(7));
	pit_write(&p, PORT_PIT_CH0, 1193 >> 8, T(7));
	cr_expect_eq(latched(0, T(8)), 1193);
	cr_expect_eq(latched(0, T(8 + 1191)), 2);
	cr_expect_eq(latched(0, T(8 + 1192)), 1);
	cr_expect_not(pit_out(&p, 0, T(8 + 1192)), "OUT low for the CLK at count 1");
	cr_expect(pit_out(&p, 0, T(8 + 1191)));
	cr_expect_eq(latched(0, T(8 + 1193)), 1193, "reloaded");
	cr_expect(pit_out(&p, 0, T(8 + 1193)));
	cr_expect_not(pit_out(&p, 0, T(8 + 10 * 1193 - 1)));
	/* a new count takes effect at the end of the current period */
	pit_write(&p, PORT_PIT_CH0, 100, T(8 + 1193 + 500));
	pit_write(&p, PORT_PIT_CH0, 0, T(8 + 1193 + 500));
	cr_expect_eq(latched(0, T(8 + 1193 + 501)), 1193 - 501);
	cr_expect_eq(latched(0, T(8 + 2 * 1193)), 100);
	cr_expect_eq(latched(0, T(8 + 2 * 1193 + 99)), 1);
	cr_expect_eq(latched(0, T(8 + 2 * 1193 + 100)), 100);
}

Test(pit, mode3_square_wave_even_and_odd)
{
	static const uint16_t even[10] = { 10, 8, 6, 4, 2, 10, 8, 6, 4, 2 };
	static const bool even_out[10] = { 1, 1, 1, 1, 1, 0, 0, 0, 0, 0 };
	static const uint16_t odd[5] = { 4, 2, 0, 4, 2 };
	static const bool odd_out[5] = { 1, 1, 1, 0, 0 };

	pit_write(&p, PORT_PIT_MODE, 0x36, T(0)); /* ch0, LSB/MSB, mode 3 */
	pit_write(&p, PORT_PIT_CH0, 10, T(0));
	pit_write(&p, PORT_PIT_CH0, 0, T(0));
	for (int i = 0; i < 20; i++) {
		cr_expect_eq(latched(0, T(1 + i)), even[i % 10], "N=10, CLK %d", i);
		cr_expect_eq(pit_out(&p, 0, T(1 + i)), even_out[i % 10], "N=10 OUT, CLK %d", i);
	}
	pit_write(&p, PORT_PIT_MODE, 0x36, T(100));
	pit_write(&p, PORT_PIT_CH0, 5, T(100));
	pit_write(&p, PORT_PIT_CH0, 0, T(100));
	for (int i = 0; i < 10; i++) {
		cr_expect_eq(latched(0, T(101 + i)), odd[i % 5], "N=5, CLK %d", i);
		cr_expect_eq(pit_out(&p, 0, T(101 + i)), odd_out[i % 5], "N=5 OUT, CLK %d", i);
	}
}

/* Read-back (Figure 9): 0C2H latches channel 0's status and count; status first */
Test(pit, read_back_status_and_null_count)
{
	pit_write(&p, PORT_PIT_MODE, 0x34, T(50));
	pit_write(&p, PORT_PIT_CH0, 0x00, T(50));
	pit_write(&p, PORT_PIT_CH0, 0x10, T(50));
	pit_write(&p, PORT_PIT_MODE, 0xc2, T(50));
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(60)), 0xf4,
		     "OUT 1, NULL COUNT 1 before the load, LSB/MSB, mode 2, binary");
	cr_expect_eq(read16(PORT_PIT_CH0, T(60)), 0x1000, "the count latched at tick 50");
	pit_write(&p, PORT_PIT_MODE, 0xe2, T(51));
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(51)), 0xb4, "loaded on the CLK of tick 51");
	pit_write(&p, PORT_PIT_MODE, 0xc2, T(61));
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(61)), 0xb4, "NULL COUNT 0 once loaded");
	cr_expect_eq(read16(PORT_PIT_CH0, T(61)), 0x1000 - 10);
	/* status only (bit 5 set): then the live count */
	pit_write(&p, PORT_PIT_MODE, 0xe2, T(62));
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(62)), 0xb4);
	cr_expect_eq(read16(PORT_PIT_CH0, T(63)), 0x1000 - 12);
	/* a second latch before the first is read changes nothing */
	pit_write(&p, PORT_PIT_MODE, 0x00, T(70));
	pit_write(&p, PORT_PIT_MODE, 0x00, T(80));
	cr_expect_eq(read16(PORT_PIT_CH0, T(90)), 0x1000 - 19);
	cr_expect_eq(pit_read(&p, PORT_PIT_MODE, T(90)), 0xff, "43H is write-only");
}

Test(pit, bcd_and_single_byte_access)
{
	pit_write(&p, PORT_PIT_MODE, 0x35, T(0)); /* mode 2, BCD */
	pit_write(&p, PORT_PIT_CH0, 0x00, T(0));
	pit_write(&p, PORT_PIT_CH0, 0x10, T(0)); /* 1000 decimal */
	cr_expect_eq(latched(0, T(2)), 0x0999);
	cr_expect_eq(latched(0, T(1 + 999)), 0x0001);
	cr_expect_eq(latched(0, T(1 + 1000)), 0x1000);
	/* LSB only (10H) and MSB only (20H) */
	pit_write(&p, PORT_PIT_MODE, 0x10, T(10));
	pit_write(&p, PORT_PIT_CH0, 0x80, T(10));
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(11)), 0x80);
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(12)), 0x7f);
	pit_write(&p, PORT_PIT_MODE, 0x20, T(20));
	pit_write(&p, PORT_PIT_CH0, 0x02, T(20)); /* count 200H */
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(21)), 0x02);
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(22)), 0x01, "MSB of 1FFH");
	/* count 0 is 65536 in binary */
	pit_write(&p, PORT_PIT_MODE, 0x30, T(30));
	pit_write(&p, PORT_PIT_CH0, 0, T(30));
	pit_write(&p, PORT_PIT_CH0, 0, T(30));
	cr_expect_eq(latched(0, T(31)), 0);
	cr_expect_eq(latched(0, T(32)), 0xffff);
	cr_expect_not(pit_out(&p, 0, T(31 + 65535)));
	cr_expect(pit_out(&p, 0, T(31 + 65536)));
}

Test(pit, mode4_strobe_and_gated_modes)
{
	pit_write(&p, PORT_PIT_MODE, 0x38, T(0)); /* ch0, mode 4 */
	pit_write(&p, PORT_PIT_CH0, 5, T(0));
	pit_write(&p, PORT_PIT_CH0, 0, T(0));
	cr_expect(pit_out(&p, 0, T(5)));
	cr_expect_not(pit_out(&p, 0, T(6)), "low for the CLK at count 0");
	cr_expect(pit_out(&p, 0, T(7)));
	cr_expect_eq(latched(0, T(7)), 0xffff, "no reload: it wraps");
	/* channel 2, mode 2: gate low stops and forces OUT high, the rising edge reloads */
	pit_write(&p, PORT_PIT_MODE, 0xb4, T(10));
	pit_write(&p, 0x42, 20, T(10));
	pit_write(&p, 0x42, 0, T(10));
	cr_expect_eq(latched(2, T(50)), 20, "gate 2 is low at power-on: no counting");
	pit_set_gate(&p, 2, true, T(50));
	cr_expect_eq(latched(2, T(52)), 19);
	pit_set_gate(&p, 2, false, T(60));
	cr_expect_eq(latched(2, T(70)), 11);
	cr_expect(pit_out(&p, 2, T(70)));
	pit_set_gate(&p, 2, true, T(80));
	cr_expect_eq(latched(2, T(81)), 20, "reloaded by the rising edge");
	/* mode 1: the rising edge triggers a one-shot, OUT low while counting */
	pit_write(&p, PORT_PIT_MODE, 0xb2, T(100));
	pit_write(&p, 0x42, 3, T(100));
	pit_write(&p, 0x42, 0, T(100));
	cr_expect(pit_out(&p, 2, T(110)), "waits for a trigger");
	pit_set_gate(&p, 2, false, T(110));
	pit_set_gate(&p, 2, true, T(111));
	cr_expect_not(pit_out(&p, 2, T(112)));
	cr_expect_eq(latched(2, T(113)), 2);
	cr_expect(pit_out(&p, 2, T(115)));
}

Test(pit, power_on_state)
{
	/* as a BIOS leaves it: channel 0 mode 3 with count 65536 (18.2 Hz) */
	pit_write(&p, PORT_PIT_MODE, 0xc2, T(5));
	cr_expect_eq(pit_read(&p, PORT_PIT_CH0, T(5)), 0xb6, "OUT high, LSB/MSB, mode 3");
	cr_expect_eq(read16(PORT_PIT_CH0, T(5)), (uint16_t) (65536 - 10));
	cr_expect(pit_out(&p, 0, T(32767)));
	cr_expect_not(pit_out(&p, 0, T(32768)));
	cr_expect(pit_out(&p, 2, T(5)), "channel 2 gated off: OUT high");
}
