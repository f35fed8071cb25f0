/* SPDX-License-Identifier: MIT */
/*
 * COM1's interrupt through the 8259A pair, programmed as Linux programs
 * it (arch/x86/kernel/i8259.c: ICW1 11H, ICW2 30H/38H, ICW3 04H/02H, ICW4
 * 01H), with the local APIC in virtual wire mode: LVT LINT0 = ExtINT
 * (700H, SDM Vol. 3A 11.5.1), so the 8259A supplies the vector.
 * - With ETBEI set and OUT2 gating INTR onto IRQ 4 (the PC's serial port),
 *   IRR bit 4 sets; "STI; HLT" wakes at vector 34H (30H + 4); in the
 *   handler ISR reads 10H and IIR C2H (THR empty, FIFOs on: PC16550D
 *   Table IV), which resets it; after a non-specific EOI (20H to port 20H)
 *   ISR reads 0 and IIR C1H.
 * - With IF set: enabling ETBEI, a THR write (THR empties again) and an
 *   IMR unmask of a request latched while masked each interrupt once.
 * - LVT LINT0 masked: nothing reaches the core; unmasked, HLT wakes.
 */
#include "guest.h"

#define COM1	   0x3f8
#define PIC_M	   0x20
#define PIC_S	   0xa0
#define APIC_LVT0  0x350
#define LVT_EXTINT (7u << 8)
#define VEC_BASE   0x30
#define VEC_COM1   (VEC_BASE + 4)

static volatile unsigned int irqs, wrong;
static volatile uint64_t wrong_vector;
static volatile uint8_t isr_in_handler, iir_in_handler;

/* OCW3: read ISR (0BH), then back to IRR (0AH) */
static uint8_t pic_isr(uint16_t port)
{
	uint8_t v;

	outb(port, 0x0b);
	v = inb(port);
	outb(port, 0x0a);
	return v;
}

static void com1_isr(struct frame *f)
{
	(void) f;
	isr_in_handler = pic_isr(PIC_M);
	iir_in_handler = inb(COM1 + 2);
	outb(PIC_M, 0x20); /* non-specific EOI */
	irqs++;
}

static void other_isr(struct frame *f)
{
	wrong++;
	wrong_vector = f->vector;
}

/* With IF set: wait (boundedly) for the interrupt count to reach n. */
static bool wait_irqs(unsigned int n)
{
	for (unsigned int i = 0; i < 100000 && irqs < n; i++)
		__asm__ volatile("pause");
	return irqs == n;
}

static void safe_halt(void)
{
	__asm__ volatile("sti; hlt; cli" ::: "memory");
}

int main(uint64_t arg)
{
	uint8_t imr, irr, iir_before, iir_after, isr_after, irr_masked;
	bool hlt_woke, ier_irq, thr_irq, unmask_irq, masked_none, lint0_none, lint0_woke;

	(void) arg;
	idt_init();
	x2apic_enable();
	for (unsigned int v = VEC_BASE; v < VEC_BASE + 16; v++)
		set_handler(v, v == VEC_COM1 ? com1_isr : other_isr);
	cli();
	apic_write(APIC_LVT0, LVT_EXTINT);
	/* Linux's init_8259A, then only IRQ 4 unmasked */
	outb(PIC_M + 1, 0xff);
	outb(PIC_S + 1, 0xff);
	outb(PIC_M, 0x11);
	outb(PIC_M + 1, VEC_BASE);
	outb(PIC_M + 1, 0x04);
	outb(PIC_M + 1, 0x01);
	outb(PIC_S, 0x11);
	outb(PIC_S + 1, VEC_BASE + 8);
	outb(PIC_S + 1, 0x02);
	outb(PIC_S + 1, 0x01);
	outb(PIC_M + 1, 0xef);
	imr = inb(PIC_M + 1);

	outb(COM1 + 2, 0x01); /* FIFOs on */
	outb(COM1 + 4, 0x0b); /* DTR RTS OUT2 */
	iir_before = inb(COM1 + 2);
	outb(COM1 + 1, 0x02); /* ETBEI */
	irr = inb(PIC_M);     /* OCW3 after ICW1 selects IRR */
	safe_halt();
	hlt_woke = irqs == 1;
	isr_after = pic_isr(PIC_M);
	iir_after = inb(COM1 + 2);

	outb(COM1 + 1, 0x00);
	sti();
	outb(COM1 + 1, 0x02);
	ier_irq = wait_irqs(2);
	outb(COM1, '\n');
	thr_irq = wait_irqs(3);
	cli();

	outb(PIC_M + 1, 0xff);
	outb(COM1 + 1, 0x00);
	sti();
	outb(COM1 + 1, 0x02);
	masked_none = !wait_irqs(4);
	cli();
	irr_masked = inb(PIC_M);
	sti();
	outb(PIC_M + 1, 0xef);
	unmask_irq = wait_irqs(4);
	cli();

	apic_write(APIC_LVT0, APIC_LVT_MASKED | LVT_EXTINT);
	outb(COM1 + 1, 0x00);
	outb(COM1 + 1, 0x02);
	sti();
	lint0_none = !wait_irqs(5);
	cli();
	apic_write(APIC_LVT0, LVT_EXTINT);
	safe_halt();
	lint0_woke = irqs == 5;
	outb(COM1 + 1, 0x00); /* printing from here on raises nothing */

	report(imr == 0xef, "IMR reads back %x", imr);
	report(iir_before == 0xc1, "IIR before ETBEI: %x", iir_before);
	report(irr == 0x10, "ETBEI with OUT2: IRR %x (IRQ 4)", irr);
	report(hlt_woke, "STI; HLT woke at vector 34H");
	report(isr_in_handler == 0x10, "ISR in the handler: %x", isr_in_handler);
	report(iir_in_handler == 0xc2, "IIR in the handler: %x (THR empty)", iir_in_handler);
	report(isr_after == 0, "ISR after EOI: %x", isr_after);
	report(iir_after == 0xc1, "IIR after the handler read it: %x", iir_after);
	report(ier_irq, "ETBEI set with IF=1 interrupts");
	report(thr_irq, "a THR write interrupts again");
	report(masked_none, "IMR bit 4 set: no interrupt");
	report(irr_masked == 0x10, "masked: IRR %x holds it", irr_masked);
	report(unmask_irq, "unmasking delivers it");
	report(lint0_none, "LVT LINT0 masked: no interrupt");
	report(lint0_woke, "LVT LINT0 unmasked: HLT woke");
	report(wrong == 0, "no other vector (%u, last %lx)", wrong, wrong_vector);
	return report_summary();
}
