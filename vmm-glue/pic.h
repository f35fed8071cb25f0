/* SPDX-License-Identifier: MIT */
/*
 * The PC's two 8259A programmable interrupt controllers: the master at
 * ports 20H-21H, the slave at A0H-A1H cascaded on the master's IR2, and
 * the edge/level control registers (ELCR) at 4D0H-4D1H. See pic.c.
 */
#ifndef VMM_PIC_H
#define VMM_PIC_H

#include <stdbool.h>
#include <stdint.h>

#define PORT_PIC_MASTER 0x20
#define PORT_PIC_SLAVE	0xa0
#define PORT_PIC_ELCR	0x4d0 /* 4D0H master (IRQ 0-7), 4D1H slave (IRQ 8-15) */
#define PIC_CASCADE_IR	2

/* The master's INT output (to the CPU's INTR, LINT0 under an APIC) changed. */
typedef void (*pic_intr_fn)(void *data, bool level);

struct pic_chip {
	uint8_t irr, isr, imr;
	uint8_t lines; /* IR input levels */
	uint8_t elcr;  /* 1: level-triggered */
	uint8_t icw1, icw2, icw3, icw4;
	uint8_t init;	/* the next ICW expected (2, 3, 4), 0: initialised */
	uint8_t lowest; /* the IR with the lowest priority (rotation) */
	bool read_isr;	/* OCW3 RIS: a read at the even port returns ISR, not IRR */
	bool poll;	/* OCW3 P: the next even-port read is a poll */
	bool smm;	/* special mask mode */
	bool rotate_aeoi;
	bool out; /* INT output */
};

struct pic {
	struct pic_chip chip[2]; /* master, slave */
	pic_intr_fn intr;
	void *intr_data;
};

/* Power-on: neither chip initialised, every IR masked, all edge-triggered, no request. */
void pic_init(struct pic *p);

/* Where the master's INT goes (NULL: nowhere); called on each change of level. */
void pic_connect(struct pic *p, pic_intr_fn intr, void *data);

/* Ports 20H-21H, A0H-A1H, 4D0H-4D1H. */
bool pic_decodes(uint16_t port);
uint8_t pic_read(struct pic *p, uint16_t port);
void pic_write(struct pic *p, uint16_t port, uint8_t value);

/*
 * ISA interrupt line `irq` (0-15) at `level`. IRQ 2 is the cascade, the
 * slave's INT (on the AT bus the pin called IRQ 2 is IRQ 9): ignored.
 */
void pic_set_irq(struct pic *p, unsigned int irq, bool level);

/* The master's INT output: an unmasked request that the in-service levels let through. */
bool pic_intr(const struct pic *p);

/*
 * The interrupt acknowledge cycles: the vector (ICW2 base + IR), with the
 * request moved from IRR to ISR. With no request left (it went away since
 * INT rose) the chip answers IR7 of its base without setting ISR:
 * spurious IRQ 7, or IRQ 15 when the slave has none.
 */
uint8_t pic_ack(struct pic *p);

#endif
