/* SPDX-License-Identifier: MIT */
/*
 * The PC/AT 8259A pair (Intel 8259A datasheet) as Linux drives it
 * (arch/x86/kernel/i8259.c): ICW1 11H, ICW2 30H/38H (vectors 30H-3FH),
 * ICW3 04H (slave on IR2) / 02H (slave ID 2), ICW4 01H (8086 mode, normal
 * EOI), specific EOIs 60H + level, ISR reads through OCW3 0BH and back to
 * IRR with 0AH.
 */
#include <criterion/criterion.h>

#include "pic.h"

static struct pic p;
static int intr_calls;
static bool intr_level;

static void intr(void *data, bool level)
{
	(void) data;
	intr_calls++;
	intr_level = level;
}

static void linux_init(void)
{
	pic_write(&p, 0x21, 0xff);
	pic_write(&p, 0xa1, 0xff);
	pic_write(&p, 0x20, 0x11);
	pic_write(&p, 0x21, 0x30);
	pic_write(&p, 0x21, 0x04);
	pic_write(&p, 0x21, 0x01);
	pic_write(&p, 0xa0, 0x11);
	pic_write(&p, 0xa1, 0x38);
	pic_write(&p, 0xa1, 0x02);
	pic_write(&p, 0xa1, 0x01);
	pic_write(&p, 0x21, 0x00);
	pic_write(&p, 0xa1, 0x00);
}

static uint8_t isr(uint16_t port)
{
	uint8_t v;

	pic_write(&p, port, 0x0b);
	v = pic_read(&p, port);
	pic_write(&p, port, 0x0a);
	return v;
}

static void setup(void)
{
	pic_init(&p);
	intr_calls = 0;
	intr_level = false;
	pic_connect(&p, intr, NULL);
}

TestSuite(pic, .init = setup);

Test(pic, power_on_raises_nothing)
{
	cr_expect_eq(pic_read(&p, 0x21), 0xff);
	cr_expect_eq(pic_read(&p, 0xa1), 0xff);
	pic_set_irq(&p, 4, true);
	cr_expect_not(pic_intr(&p));
	pic_write(&p, 0x21, 0x00); /* OCW1 before any ICW1: still no INT */
	cr_expect_not(pic_intr(&p));
	cr_expect_eq(intr_calls, 0);
}

Test(pic, linux_probe_reads_the_mask_back)
{
	/* probe_8259A: a controller is there if the mask reads back */
	pic_write(&p, 0xa1, 0xff);
	pic_write(&p, 0x21, 0xfb);
	cr_expect_eq(pic_read(&p, 0x21), 0xfb);
	cr_expect_eq(pic_read(&p, 0xa1), 0xff);
}

Test(pic, icw1_clears_the_mask)
{
	pic_write(&p, 0x20, 0x11);
	cr_expect_eq(pic_read(&p, 0x21), 0x00, "ICW1 clears IMR");
	pic_write(&p, 0x21, 0x30);
	pic_write(&p, 0x21, 0x04);
	pic_write(&p, 0x21, 0x01);
	pic_write(&p, 0x21, 0xa5); /* OCW1 now */
	cr_expect_eq(pic_read(&p, 0x21), 0xa5);
}

Test(pic, irq4_vector_0x34_isr_and_eoi)
{
	linux_init();
	cr_expect_not(pic_intr(&p));
	pic_set_irq(&p, 4, true);
	cr_expect(pic_intr(&p));
	cr_expect_eq(intr_calls, 1);
	cr_expect(intr_level);
	cr_expect_eq(pic_read(&p, 0x20), 0x10, "IRR after ICW1: OCW3 reads IRR");
	cr_expect_eq(isr(0x20), 0x00);
	cr_expect_eq(pic_ack(&p), 0x34);
	cr_expect_not(pic_intr(&p));
	cr_expect_eq(intr_calls, 2);
	cr_expect_eq(pic_read(&p, 0x20), 0x00, "IRR cleared by the acknowledge");
	cr_expect_eq(isr(0x20), 0x10);
	/* edge-triggered: the line still high requests nothing more after EOI */
	pic_write(&p, 0x20, 0x64); /* specific EOI, level 4 */
	cr_expect_eq(isr(0x20), 0x00);
	cr_expect_not(pic_intr(&p));
	/* a new edge does */
	pic_set_irq(&p, 4, false);
	pic_set_irq(&p, 4, true);
	cr_expect(pic_intr(&p));
	cr_expect_eq(pic_ack(&p), 0x34);
	pic_write(&p, 0x20, 0x20); /* non-specific EOI */
	cr_expect_eq(isr(0x20), 0x00);
}

Test(pic, fully_nested_priority)
{
	linux_init();
	pic_set_irq(&p, 4, true);
	cr_expect_eq(pic_ack(&p), 0x34);
	pic_set_irq(&p, 5, true);
	cr_expect_not(pic_intr(&p), "IRQ 5 waits for IRQ 4's EOI");
	pic_set_irq(&p, 3, true);
	cr_expect(pic_intr(&p), "IRQ 3 nests");
	cr_expect_eq(pic_ack(&p), 0x33);
	cr_expect_eq(isr(0x20), 0x18);
	cr_expect_not(pic_intr(&p));
	pic_write(&p, 0x20, 0x20); /* non-specific: the highest, IRQ 3 */
	cr_expect_eq(isr(0x20), 0x10);
	cr_expect_not(pic_intr(&p));
	pic_write(&p, 0x20, 0x20);
	cr_expect_eq(isr(0x20), 0x00);
	cr_expect(pic_intr(&p));
	cr_expect_eq(pic_ack(&p), 0x35);
}

Test(pic, mask_holds_the_request)
{
	linux_init();
	pic_write(&p, 0x21, 0x10);
	pic_set_irq(&p, 4, true);
	cr_expect_eq(pic_read(&p, 0x20), 0x10, "latched in IRR");
	cr_expect_not(pic_intr(&p));
	cr_expect_eq(intr_calls, 0);
	pic_write(&p, 0x21, 0x00);
	cr_expect(pic_intr(&p));
	cr_expect_eq(pic_ack(&p), 0x34);
}

Test(pic, cascade_irq12)
{
	linux_init();
	pic_set_irq(&p, 12, true);
	cr_expect(pic_intr(&p));
	cr_expect_eq(pic_read(&p, 0xa0), 0x10, "slave IRR");
	cr_expect_eq(pic_read(&p, 0x20), 0x04, "master IRR: IR2");
	cr_expect_eq(pic_ack(&p), 0x3c);
	cr_expect_eq(isr(0xa0), 0x10);
	cr_expect_eq(isr(0x20), 0x04);
	/* IRQ 9 (higher on the slave) waits for the master's IR2 EOI in fully nested mode */
	pic_set_irq(&p, 9, true);
	cr_expect_not(pic_intr(&p));
	pic_write(&p, 0xa0, 0x64); /* Linux: specific EOI to the slave, then to master IR2 */
	pic_write(&p, 0x20, 0x62);
	cr_expect_eq(isr(0xa0), 0x00);
	cr_expect_eq(isr(0x20), 0x00);
	cr_expect(pic_intr(&p));
	cr_expect_eq(pic_ack(&p), 0x39);
	/* slave masking */
	pic_write(&p, 0xa0, 0x61);
	pic_write(&p, 0x20, 0x62);
	pic_write(&p, 0xa1, 0x80);
	pic_set_irq(&p, 15, true);
	cr_expect_not(pic_intr(&p));
	cr_expect_eq(pic_read(&p, 0x20), 0x00, "masked on the slave: no INT to IR2");
	pic_write(&p, 0xa1, 0x00);
	cr_expect_eq(pic_ack(&p), 0x3f);
}

Test(pic, spurious_irq7_when_the_request_went_away)
{
	linux_init();
	pic_set_irq(&p, 4, true);
	cr_expect(pic_intr(&p));
	pic_set_irq(&p, 4, false);
	cr_expect_not(pic_intr(&p));
	cr_expect_eq(pic_read(&p, 0x20), 0x00);
	cr_expect_eq(pic_ack(&p), 0x37);
	cr_expect_eq(isr(0x20), 0x00, "a spurious IRQ 7 sets no ISR bit");
}

Test(pic, elcr_level_lines)
{
	linux_init();
	pic_write(&p, 0x4d0, 0xff);
	pic_write(&p, 0x4d1, 0xff);
	cr_expect_eq(pic_read(&p, 0x4d0), 0xf8, "IRQ 0-2 edge only");
	cr_expect_eq(pic_read(&p, 0x4d1), 0xde, "IRQ 8 and 13 edge only");
	pic_write(&p, 0x4d0, 0x00);
	pic_write(&p, 0x4d1, 0x02); /* IRQ 9 level, as Linux sets the ACPI SCI */
	pic_set_irq(&p, 9, true);
	cr_expect_eq(pic_ack(&p), 0x39);
	cr_expect_eq(pic_read(&p, 0xa0), 0x02, "a level request stays in IRR while high");
	pic_write(&p, 0xa0, 0x20);
	pic_write(&p, 0x20, 0x20);
	cr_expect(pic_intr(&p), "still high after EOI: requests again");
	cr_expect_eq(pic_ack(&p), 0x39);
	pic_set_irq(&p, 9, false);
	pic_write(&p, 0xa0, 0x20);
	pic_write(&p, 0x20, 0x20);
	cr_expect_not(pic_intr(&p));
}

Test(pic, poll_command)
{
	linux_init();
	pic_write(&p, 0x21, 0xff); /* polled, not interrupting */
	pic_set_irq(&p, 6, true);
	cr_expect_not(pic_intr(&p));
	pic_write(&p, 0x20, 0x0c); /* OCW3 P */
	cr_expect_eq(pic_read(&p, 0x20), 0x00, "masked: no request");
	pic_write(&p, 0x21, 0xbf);
	cr_expect(pic_intr(&p));
	pic_write(&p, 0x20, 0x0c);
	cr_expect_eq(pic_read(&p, 0x20), 0x86, "I | level 6");
	cr_expect_eq(isr(0x20), 0x40, "the poll acknowledges");
	cr_expect_not(pic_intr(&p));
}

Test(pic, rotation_and_auto_eoi)
{
	linux_init();
	pic_write(&p, 0x20, 0xc3); /* set priority: IR3 lowest, IR4 highest */
	pic_set_irq(&p, 3, true);
	pic_set_irq(&p, 4, true);
	cr_expect_eq(pic_ack(&p), 0x34);
	cr_expect_not(pic_intr(&p), "IR3 is below IR4 now");
	pic_write(&p, 0x20, 0xe4); /* rotate on specific EOI 4: IR5 highest, IR4 lowest */
	pic_set_irq(&p, 4, false);
	pic_set_irq(&p, 4, true);
	pic_set_irq(&p, 5, true);
	cr_expect_eq(pic_ack(&p), 0x35);
	pic_write(&p, 0x20, 0x20);
	cr_expect_eq(pic_ack(&p), 0x33, "IR3 before IR4 now");
	/* ICW4 AEOI (03H): no ISR bit stays set */
	pic_write(&p, 0x20, 0x11);
	pic_write(&p, 0x21, 0x30);
	pic_write(&p, 0x21, 0x04);
	pic_write(&p, 0x21, 0x03);
	pic_set_irq(&p, 0, true);
	cr_expect_eq(pic_ack(&p), 0x30);
	cr_expect_eq(isr(0x20), 0x00);
}

Test(pic, special_mask_mode)
{
	linux_init();
	pic_set_irq(&p, 3, true);
	cr_expect_eq(pic_ack(&p), 0x33);
	pic_set_irq(&p, 5, true);
	cr_expect_not(pic_intr(&p));
	pic_write(&p, 0x21, 0x08); /* mask the level in service... */
	pic_write(&p, 0x20, 0x68); /* ...and set special mask mode (ESMM | SMM) */
	cr_expect(pic_intr(&p), "SMM: lower levels go through");
	cr_expect_eq(pic_ack(&p), 0x35);
	pic_write(&p, 0x20, 0x48); /* clear special mask mode */
	pic_set_irq(&p, 6, true);
	cr_expect_not(pic_intr(&p));
}
