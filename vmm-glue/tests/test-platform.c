/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* the modelled clock: a 2.1 GHz guest TSC that each test moves by hand */
#define TSC_HZ 2100000000ull
static uint64_t now;

static uint64_t test_clock(void *data)
{
	return *(uint64_t *) data;
}

static void setup(void)
{
	now = 0;
	platform_init(&p, NULL, 128ull << 20, 1);
	platform_set_clock(&p, TSC_HZ, RTC_DEFAULT_EPOCH, test_clock, &now);
}

TestSuite(platform, .init = setup);

Test(platform, debug_exit_status)
{
	out(PORT_DEBUG_EXIT, 4, 0x21);
	cr_assert(p.exited);
	cr_assert_eq(p.exit_status, (0x21 << 1) | 1);
	cr_assert_eq(p.stop, PLATFORM_STOP_DEBUG_EXIT);
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

/* Policy: no device -> reads all ones (per size), writes dropped, recorded once each */
Test(platform, unknown_ports_read_all_ones_and_are_recorded_once)
{
	uint32_t v = 0;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	cr_expect_eq(platform_io(&p, 0x1234, 1, false, &v), PLATFORM_IO_NONE);
	cr_expect_eq(v, 0xff);
	cr_expect_eq(platform_io(&p, 0x1234, 2, false, &v), PLATFORM_IO_NONE);
	cr_expect_eq(v, 0xffff);
	cr_expect_eq(platform_io(&p, 0x1234, 4, false, &v), PLATFORM_IO_NONE);
	cr_expect_eq(v, 0xffffffffu);
	v = 0x55;
	cr_expect_eq(platform_io(&p, 0x1234, 1, true, &v), PLATFORM_IO_NONE);
	cr_expect_not(p.exited, "an unknown port is not fatal");
	for (int i = 0; i < 5; i++)
		cr_expect_eq(platform_io(&p, 0x1234, 1, false, &v), PLATFORM_IO_NONE);
	cr_expect_eq(p.nr_unknown, 4, "(port, direction, size) once each");
	cr_expect_eq(p.unknown_accesses, 9);
	cr_expect_eq(p.unknown[0].addr, 0x1234);
	cr_expect_eq(p.unknown[0].size, 1);
	cr_expect_not(p.unknown[0].write);
	cr_expect(p.unknown[3].write);
	platform_note_unknown_msr(&p, 0x8b, false);
	platform_note_unknown_msr(&p, 0x8b, false);
	cr_expect_eq(p.nr_unknown, 5);
	f = open_memstream(&text, &len);
	cr_assert(f);
	platform_print_unknown(&p, f);
	fclose(f);
	cr_expect_str_eq(text, "guest read I/O port 0x1234 (1 byte): no device, read all ones\n"
			       "guest read I/O port 0x1234 (2 bytes): no device, read all ones\n"
			       "guest read I/O port 0x1234 (4 bytes): no device, read all ones\n"
			       "guest wrote I/O port 0x1234 (1 byte): no device, write dropped\n"
			       "guest read MSR 0x8b, which is not modelled\n");
	free(text);
	/* past the table: counted, not stored */
	for (uint16_t port = 0x2000; port < 0x2000 + 2 * PLATFORM_UNKNOWN_MAX; port++)
		platform_io(&p, port, 1, false, &v);
	cr_expect_eq(p.nr_unknown, PLATFORM_UNKNOWN_MAX);
	cr_expect_eq(p.unknown_dropped, 2 * PLATFORM_UNKNOWN_MAX - (PLATFORM_UNKNOWN_MAX - 5));
}

Test(platform, pic_ignored)
{
	out(0x21, 1, 0xff);
	out(0xa1, 1, 0xff);
	cr_expect_eq(in(0x21, 1), 0xff);
	cr_expect_eq(in(0xa1, 1), 0xff);
	cr_expect_eq(in(0x20, 1), 0);
	out(0x80, 1, 0x12);
	cr_expect_eq(p.nr_unknown, 0);
}

/* Linux's 8250 autoconfig: IER reads back 0 after writing 0 and 0FH after 0FH, or no UART */
static bool uart_answers(uint16_t base)
{
	uint32_t v;

	out(base + 1, 1, 0);
	v = in(base + 1, 1) & 0x0f;
	out(base + 1, 1, 0x0f);
	return v == 0 && (in(base + 1, 1) & 0x0f) == 0x0f;
}

Test(platform, only_com1_is_a_uart)
{
	cr_expect(uart_answers(PORT_COM1));
	cr_expect_not(uart_answers(0x2f8));
	cr_expect_not(uart_answers(0x3e8));
	cr_expect_not(uart_answers(0x2e8));
	cr_expect_eq(in(0x2f8 + 7, 1), 0xff, "COM2 scratch");
	cr_expect_eq(in(0x3e8 + 5, 1), 0xff, "COM3 LSR");
	cr_expect_eq(p.nr_unknown, 0, "absent, not unknown");
}

Test(platform, uart_16550a_registers)
{
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x01, "FIFOs off, no interrupt");
	out(PORT_COM1 + 2, 1, 0x01);
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0xc1, "FIFOs enabled: IIR 7:6 = 11");
	cr_expect_eq(in(PORT_COM1 + 6, 1), 0xb0, "DCD DSR CTS");
	out(PORT_COM1 + 4, 1, 0xff);
	cr_expect_eq(in(PORT_COM1 + 4, 1), 0x1f);
	/* loopback (Linux's test: MCR = LOOP | OUT2 | RTS reads MSR 7:4 = 9) */
	out(PORT_COM1 + 4, 1, 0x1a);
	cr_expect_eq(in(PORT_COM1 + 6, 1) & 0xf0, 0x90);
	out(PORT_COM1 + 4, 1, 0x15); /* LOOP | OUT1 | DTR */
	cr_expect_eq(in(PORT_COM1 + 6, 1) & 0xf0, 0x60);
	out(PORT_COM1, 1, 'z');
	cr_expect_eq(p.serial_bytes, 0, "looped back, not sent");
	cr_expect_eq(in(PORT_COM1 + 5, 1), 0x61, "THRE TEMT DR");
	cr_expect_eq(in(PORT_COM1, 1), 'z');
	cr_expect_eq(in(PORT_COM1 + 5, 1), 0x60);
	out(PORT_COM1 + 7, 1, 0xa5);
	cr_expect_eq(in(PORT_COM1 + 7, 1), 0xa5);
	out(PORT_COM1 + 1, 1, 0xff);
	cr_expect_eq(in(PORT_COM1 + 1, 1), 0x0f);
}

/* Port 61H: gate 2 and OUT2 (Linux's pit_calibrate_tsc) and the refresh toggle */
Test(platform, system_control_port_b)
{
	/* 18 PIT clocks at 1.193182 MHz: 18 * 2.1e9 / 1193182 = 31679.995 TSC at 2.1 GHz */
	cr_expect_eq(in(PORT_SYS_CTRL_B, 1) & 0x10, 0);
	now = 31679;
	cr_expect_eq(in(PORT_SYS_CTRL_B, 1) & 0x10, 0);
	now = 31680;
	cr_expect_eq(in(PORT_SYS_CTRL_B, 1) & 0x10, 0x10);
	now = 63359;
	cr_expect_eq(in(PORT_SYS_CTRL_B, 1) & 0x10, 0x10);
	now = 63360; /* 36 PIT clocks */
	cr_expect_eq(in(PORT_SYS_CTRL_B, 1) & 0x10, 0);
	out(PORT_SYS_CTRL_B, 1, 0xfd);
	cr_expect_eq(in(PORT_SYS_CTRL_B, 1) & 0x0f, 0x0d, "bits 3:0 read back");
	out(PORT_SYS_CTRL_B, 1, 0x01); /* gate 2 on, speaker off */
	out(0x43, 1, 0xb0);	       /* counter 2, mode 0 */
	out(0x42, 1, 10);
	out(0x42, 1, 0);
	cr_expect_eq(in(PORT_SYS_CTRL_B, 1) & 0xe0, 0, "OUT2 low, no NMI sources");
	now += 11 * 1760 + 1760; /* 1760 TSC > one PIT clock */
	cr_expect_eq(in(PORT_SYS_CTRL_B, 1) & 0x20, 0x20, "OUT2 at terminal count");
}

Test(platform, pci_mechanism_1_without_devices)
{
	out(PORT_PCI_ADDR, 4, 0x80000000u);
	cr_expect_eq(in(PORT_PCI_ADDR, 4), 0x80000000u, "Linux's pci_check_type1 reads it back");
	out(PORT_PCI_ADDR, 4, 0xffffffffu);
	cr_expect_eq(in(PORT_PCI_ADDR, 4), 0x80fffffcu, "bits 30:24 and 1:0 read 0");
	out(PORT_PCI_ADDR, 4, 0x80000000u); /* bus 0, device 0, vendor ID */
	cr_expect_eq(in(PORT_PCI_DATA, 4), 0xffffffffu);
	cr_expect_eq(in(PORT_PCI_DATA + 2, 2), 0xffff);
	cr_expect_eq(in(PORT_PCI_DATA + 3, 1), 0xff);
	out(PORT_PCI_DATA, 4, 0);
	cr_expect_eq(in(PORT_PCI_DATA, 4), 0xffffffffu);
	/* mechanism #2's byte registers are absent; CF9H is reset control */
	out(0xcfb, 1, 0);
	out(PORT_PCI_ADDR, 1, 0);
	cr_expect_eq(in(PORT_PCI_ADDR, 1), 0xff);
	cr_expect_eq(in(0xcfa, 1), 0xff);
	cr_expect_eq(in(PORT_PCI_ADDR, 4), 0x80000000u, "byte writes left CONFIG_ADDRESS");
	out(PORT_RST_CNT, 1, 0x02);
	cr_expect_eq(in(PORT_RST_CNT, 1), 0x02);
	cr_expect_not(p.exited);
	cr_expect_eq(p.nr_unknown, 0);
}

/* The FADT's reset register: 06H to CF9H (Linux's ACPI reboot) */
Test(platform, reset_control_resets)
{
	out(PORT_RST_CNT, 1, RST_CNT_RESET);
	cr_expect(p.exited);
	cr_expect_eq(p.stop, PLATFORM_STOP_RESET);
	cr_expect_eq(p.exit_status, 0);
}

/* Linux's "kbd" reboot: wait for IBF clear at 64H, then FEH */
Test(platform, keyboard_controller_reset)
{
	cr_expect_eq(in(PORT_I8042_STATUS, 1) & I8042_STR_IBF, 0);
	out(PORT_I8042_STATUS, 1, 0xaa);
	cr_expect_eq(in(PORT_I8042_DATA, 1), 0x55);
	cr_expect_not(p.exited);
	out(PORT_I8042_STATUS, 1, 0xfe);
	cr_expect(p.exited);
	cr_expect_eq(p.stop, PLATFORM_STOP_RESET);
}

/* ACPI S5 through PM1a_CNT as ACPICA writes it: SLP_TYP first, then SLP_EN, 16 bits */
Test(platform, acpi_poweroff)
{
	cr_expect_eq(in(PORT_ACPI_PM1A_CNT, 2), ACPI_PM1_SCI_EN);
	out(PORT_ACPI_PM1A_CNT, 2, ACPI_PM1_SCI_EN | ACPI_S5_SLP_TYP << 10);
	cr_expect_not(p.exited);
	out(PORT_ACPI_PM1A_CNT, 2, ACPI_PM1_SCI_EN | ACPI_S5_SLP_TYP << 10 | ACPI_PM1_SLP_EN);
	cr_expect(p.exited);
	cr_expect_eq(p.stop, PLATFORM_STOP_POWEROFF);
	cr_expect_eq(p.exit_status, 0);
}

/* The timed devices read the platform's clock */
Test(platform, devices_on_the_clock)
{
	out(PORT_RTC_INDEX, 1, RTC_SECONDS);
	now = 61 * TSC_HZ;
	cr_expect_eq(in(PORT_RTC_DATA, 1), 0x01, "00:01:01 in BCD");
	out(PORT_RTC_INDEX, 1, RTC_MINUTES);
	cr_expect_eq(in(PORT_RTC_DATA, 1), 0x01);
	/* PM timer: 3.579545 MHz, 24 bits; one second = 3579545 = 369E99H */
	now = TSC_HZ;
	cr_expect_eq(in(PORT_ACPI_PM_TMR, 4), 3579545);
	now = 5 * TSC_HZ; /* 17897725 = 1111A3DH: wrapped to 24 bits */
	cr_expect_eq(in(PORT_ACPI_PM_TMR, 4), 17897725 & 0xffffff);
	/* a word read of 70H reaches 70H and 71H: FFH (index) and the seconds */
	out(PORT_RTC_INDEX, 1, RTC_SECONDS);
	now = 7 * TSC_HZ;
	cr_expect_eq(in(PORT_RTC_INDEX, 2), 0x07ff);
}

/* Without a clock the timers are absent (all ones, recorded); the rest works */
Test(platform, no_clock_no_timers)
{
	uint32_t v = 0;

	platform_init(&p, NULL, 128ull << 20, 1);
	cr_expect_eq(platform_io(&p, PORT_SYS_CTRL_B, 1, false, &v), PLATFORM_IO_NONE);
	cr_expect_eq(v, 0xff, "OUT2 reads high: Linux's calibration loop ends");
	cr_expect_eq(platform_io(&p, 0x42, 1, false, &v), PLATFORM_IO_NONE);
	cr_expect_eq(platform_io(&p, PORT_ACPI_PM_TMR, 4, false, &v), PLATFORM_IO_NONE);
	cr_expect_eq(v, 0xffffffffu);
	cr_expect_eq(p.nr_unknown, 3);
	out(PORT_RTC_INDEX, 1, RTC_YEAR);
	cr_expect_eq(in(PORT_RTC_DATA, 1), 0x24, "the RTC reads its epoch, 2024");
	cr_expect_eq(in(PORT_ACPI_PM1A_CNT, 2), ACPI_PM1_SCI_EN);
}

/* COM1's interrupt line as the platform drives it: every change, in order */
static bool irq_log[16];
static unsigned int irq_n, irq_line_seen;

static void record_irq(void *data, unsigned int line, bool level)
{
	(void) data;
	irq_line_seen = line;
	if (irq_n < 16)
		irq_log[irq_n] = level;
	irq_n++;
}

static void record_setup(void)
{
	setup();
	irq_n = 0;
	irq_line_seen = 99;
	platform_set_irq(&p, record_irq, NULL);
}

/*
 * THR empty (PC16550D Table IV): IIR 02H while ETBEI is set and THR empty,
 * reset by reading IIR; enabling ETBEI with THR empty raises it again
 * (Linux's UART_BUG_THRE test reads IIR = C2H twice); a THR write clears
 * it and, sent at once, raises it again: a new edge.
 */
Test(platform, uart_thre_interrupt, .init = record_setup)
{
	out(PORT_COM1 + 2, 1, 0x01); /* FIFOs on */
	out(PORT_COM1 + 4, 1, 0x0b); /* DTR RTS OUT2 */
	cr_expect_eq(irq_n, 0);
	out(PORT_COM1 + 1, 1, 0x02); /* ETBEI */
	cr_expect_eq(irq_n, 1);
	cr_expect_eq(irq_line_seen, 4, "COM1 is ISA IRQ 4");
	cr_expect(irq_log[0]);
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0xc2, "THRE interrupt, FIFOs on");
	cr_expect_eq(irq_n, 2);
	cr_expect_not(irq_log[1], "reading IIR reset it");
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0xc1);
	out(PORT_COM1 + 1, 1, 0x00);
	out(PORT_COM1 + 1, 1, 0x02);
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0xc2, "re-enabling ETBEI reasserts it");
	cr_expect_eq(irq_n, 4);
	out(PORT_COM1, 1, 'a');
	cr_expect_eq(irq_n, 5, "the write raises it again");
	cr_expect(irq_log[4]);
	out(PORT_COM1, 1, 'b');
	cr_expect_eq(irq_n, 7, "THR write: low, then high again");
	cr_expect_not(irq_log[5]);
	cr_expect(irq_log[6]);
	out(PORT_COM1 + 1, 1, 0x00);
	cr_expect_eq(irq_n, 8);
	cr_expect_not(irq_log[7], "ETBEI off: no interrupt");
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0xc1);
}

/* The PC's serial port gates INTR onto IRQ 4 with OUT2; loopback forces OUT2 inactive */
Test(platform, uart_irq_gated_by_out2, .init = record_setup)
{
	out(PORT_COM1 + 1, 1, 0x02);
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x02, "FIFOs off: bits 7:6 clear");
	out(PORT_COM1 + 1, 1, 0x00);
	out(PORT_COM1 + 1, 1, 0x02);
	cr_expect_eq(irq_n, 0, "OUT2 clear: IRQ 4 stays low");
	out(PORT_COM1 + 4, 1, 0x08);
	cr_expect_eq(irq_n, 1);
	cr_expect(irq_log[0]);
	out(PORT_COM1 + 4, 1, 0x18);
	cr_expect_eq(irq_n, 2);
	cr_expect_not(irq_log[1], "loopback: gated off");
}

/*
 * Priorities in loopback, ERBFI | ETBEI | ELSI | EDSSI: line status (06H)
 * over received data (04H) over THR empty (02H) over modem status (00H).
 */
Test(platform, uart_iir_priority, .init = record_setup)
{
	out(PORT_COM1 + 4, 1, 0x10); /* LOOP: DCD, DSR, CTS drop (DDCD DDSR DCTS) */
	out(PORT_COM1 + 1, 1, 0x0f);
	out(PORT_COM1, 1, 'x');
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x04, "received data");
	out(PORT_COM1, 1, 'y'); /* FIFOs off: overrun */
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x06, "line status: overrun");
	cr_expect_eq(in(PORT_COM1 + 5, 1), 0x63, "TEMT THRE OE DR");
	cr_expect_eq(in(PORT_COM1 + 5, 1), 0x61, "OE reset by the read");
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x04);
	cr_expect_eq(in(PORT_COM1, 1), 'y');
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x02, "THR empty");
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x00, "modem status");
	cr_expect_eq(in(PORT_COM1 + 6, 1), 0x0b, "DDCD DDSR DCTS, inputs all low");
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x01, "none left");
	out(PORT_COM1 + 4, 1, 0x14); /* OUT1 -> RI */
	out(PORT_COM1 + 4, 1, 0x10);
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x00);
	cr_expect_eq(in(PORT_COM1 + 6, 1), 0x04, "TERI: RI's trailing edge");
	/* FIFOs on, trigger 14 bytes: one byte shows as a character timeout */
	out(PORT_COM1 + 2, 1, 0xc1);
	out(PORT_COM1 + 1, 1, 0x01);
	out(PORT_COM1, 1, 'z');
	out(PORT_COM1, 1, 'w');
	cr_expect_eq(in(PORT_COM1 + 5, 1), 0x61, "FIFOs on: no overrun");
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0xcc);
	out(PORT_COM1 + 2, 1, 0x01); /* trigger 1 byte */
	out(PORT_COM1, 1, 'v');
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0xc4);
	cr_expect_eq(irq_n, 0, "loopback: nothing on IRQ 4");
}

/* Without platform_set_irq, IRQ 4 reaches the platform's own 8259A: vector 34H */
Test(platform, uart_irq4_through_the_8259)
{
	static const uint8_t linux_init[][2] = {
		{ 0x20, 0x11 }, { 0x21, 0x30 }, { 0x21, 0x04 }, { 0x21, 0x01 }, { 0xa0, 0x11 },
		{ 0xa1, 0x38 }, { 0xa1, 0x02 }, { 0xa1, 0x01 }, { 0x21, 0xef }, /* IRQ 4 only */
	};

	for (unsigned int i = 0; i < sizeof(linux_init) / sizeof(linux_init[0]); i++)
		out(linux_init[i][0], 1, linux_init[i][1]);
	cr_expect_eq(in(0x21, 1), 0xef);
	out(PORT_COM1 + 4, 1, 0x08);
	out(PORT_COM1 + 1, 1, 0x02);
	cr_expect(pic_intr(&p.pic));
	cr_expect_eq(in(0x20, 1), 0x10, "IRR: IRQ 4");
	cr_expect_eq(pic_ack(&p.pic), 0x34);
	out(0x20, 1, 0x64);
	cr_expect_eq(in(PORT_COM1 + 2, 1), 0x02);
	out(PORT_COM1, 1, 'x');
	cr_expect(pic_intr(&p.pic), "the THR write is a new edge");
	out(0x4d0, 1, 0xff);
	cr_expect_eq(in(0x4d0, 1), 0xf8, "ELCR is decoded");
	cr_expect_eq(p.nr_unknown, 0);
}
