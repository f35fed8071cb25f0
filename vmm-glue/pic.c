/* SPDX-License-Identifier: MIT */
/*
 * The PC/AT's interrupt controllers: two Intel 8259A (8259A datasheet,
 * "Programmable Interrupt Controller", order no. 231468), the master at
 * 20H-21H with the slave's INT wired to its IR2, the slave at A0H-A1H, and
 * the edge/level control registers of the PIIX/ICH/PCH south bridges at
 * 4D0H (IRQ 0-7) and 4D1H (IRQ 8-15).
 *
 * - Initialisation: a write to the even port with D4 = 1 is ICW1 (D0 IC4,
 *   D1 SNGL); it resets the edge sense (an edge-triggered line must rise
 *   again to request), clears IMR and ISR, gives IR7 the lowest priority,
 *   clears special mask mode, selects IRR for status reads, and clears
 *   ICW4 when IC4 = 0. ICW2 (vector base, bits 7:3), ICW3 (unless SNGL:
 *   the master's bitmap of slaves, the slave's ID) and ICW4 (if IC4: D1
 *   AEOI, D4 SFNM) follow at the odd port. 8086 mode is assumed (ICW4 D0):
 *   the acknowledge returns the vector byte.
 * - OCW1 (odd port once initialised): IMR, read back at the odd port.
 * - OCW2 (even port, D4:D3 = 00), R SL EOI in bits 7:5: 001 non-specific
 *   EOI (the highest-priority ISR bit), 011 specific EOI (L2:L0), 101 and
 *   111 the same with rotation (the level cleared becomes the lowest),
 *   100/000 set/clear rotate in automatic EOI mode, 110 set priority (L2:L0
 *   the lowest), 010 nothing.
 * - OCW3 (even port, D4:D3 = 01): D1 RR with D0 RIS selects IRR or ISR for
 *   reads of the even port; D2 P makes the next read a poll (an
 *   acknowledge without a vector: I in bit 7, the level in bits 2:0); D6
 *   ESMM with D5 SMM sets or clears special mask mode.
 * - Requests: an edge-triggered IR requests from a rising edge until the
 *   acknowledge, and only while it stays high (the datasheet: it must stay
 *   high until the first INTA, else the chip answers IR7); a
 *   level-triggered IR requests while high, and its IRR bit follows the
 *   line. The south bridges ignore ICW1's LTIM: ELCR selects the trigger
 *   per line, and IRQ 0, 1, 2, 8 and 13 are edge-only (ELCR bits that read
 *   0).
 * - Priority (fully nested mode): the unmasked request of the highest
 *   priority wins if no in-service level is of equal or higher priority; in
 *   special mask mode masked ISR bits inhibit nothing; in special fully
 *   nested mode the master's cascade levels do not inhibit themselves.
 * - Acknowledge: IRR to ISR (AEOI: ISR is left clear, and with rotate in
 *   AEOI the level becomes the lowest); a cascade level on the master is
 *   acknowledged by the slave whose ID it is, which supplies the vector.
 *   No request: the vector of IR7, ISR unchanged (spurious IRQ 7 or 15).
 *
 * Before ICW1 (and while the ICWs are being written) a chip raises no INT.
 */
#include <string.h>

#include "pic.h"

#define ICW1_IC4   0x01
#define ICW1_SNGL  0x02
#define ICW1_INIT  0x10
#define OCW3_SEL   0x08
#define OCW3_RIS   0x01
#define OCW3_RR	   0x02
#define OCW3_P	   0x04
#define OCW3_SMM   0x20
#define OCW3_ESMM  0x40
#define ICW4_AEOI  0x02
#define ICW4_SFNM  0x10
#define ELCR0_MASK 0xf8 /* IRQ 0-2 edge only */
#define ELCR1_MASK 0xde /* IRQ 8 and 13 edge only */

void pic_init(struct pic *p)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 2; i++) {
		p->chip[i].imr = 0xff;
		p->chip[i].lowest = 7;
	}
}

void pic_connect(struct pic *p, pic_intr_fn intr, void *data)
{
	p->intr = intr;
	p->intr_data = data;
}

static bool ready(const struct pic_chip *c)
{
	return c->icw1 && !c->init;
}

/* 0 for the highest priority, 7 for the lowest */
static int rank(const struct pic_chip *c, int ir)
{
	return (ir - c->lowest - 1) & 7;
}

/* The IR of highest priority among `bits`, or -1. */
static int highest(const struct pic_chip *c, uint8_t bits)
{
	for (int i = 1; i <= 8; i++) {
		int ir = (c->lowest + i) & 7;

		if (bits >> ir & 1)
			return ir;
	}
	return -1;
}

static bool cascaded(const struct pic_chip *m, int ir)
{
	return !(m->icw1 & ICW1_SNGL) && (m->icw3 >> ir & 1);
}

/* The request the chip would signal on INT now, or -1. */
static int request(const struct pic_chip *c, bool master)
{
	uint8_t busy = c->isr;
	int r, b;

	if (!ready(c))
		return -1;
	r = highest(c, c->irr & ~c->imr);
	if (r < 0)
		return -1;
	if (c->smm)
		busy &= (uint8_t) ~c->imr;
	if (master && (c->icw4 & ICW4_SFNM) && !(c->icw1 & ICW1_SNGL))
		busy &= (uint8_t) ~c->icw3;
	b = highest(c, busy);
	if (b >= 0 && rank(c, b) <= rank(c, r))
		return -1;
	return r;
}

static void set_line(struct pic_chip *c, int ir, bool level)
{
	uint8_t bit = (uint8_t) (1u << ir);

	if (level) {
		if (!(c->lines & bit) || (c->elcr & bit))
			c->irr |= bit;
		c->lines |= bit;
	} else {
		c->lines &= (uint8_t) ~bit;
		c->irr &= (uint8_t) ~bit;
	}
}

/* The slave's INT drives the master's IR2; the master's INT goes out. */
static void update(struct pic *p)
{
	struct pic_chip *m = &p->chip[0], *s = &p->chip[1];
	bool out;

	s->out = request(s, false) >= 0;
	set_line(m, PIC_CASCADE_IR, s->out);
	out = request(m, true) >= 0;
	if (out != m->out) {
		m->out = out;
		if (p->intr)
			p->intr(p->intr_data, out);
	}
}

static void ack_level(struct pic_chip *c, int ir)
{
	uint8_t bit = (uint8_t) (1u << ir);

	if (!(c->elcr & bit))
		c->irr &= (uint8_t) ~bit;
	if (!(c->icw4 & ICW4_AEOI))
		c->isr |= bit;
	else if (c->rotate_aeoi)
		c->lowest = (uint8_t) ir;
}

uint8_t pic_ack(struct pic *p)
{
	struct pic_chip *m = &p->chip[0], *s = &p->chip[1];
	int ir = request(m, true), sir;
	uint8_t v;

	if (ir < 0) {
		v = m->icw2 | 7;
	} else {
		ack_level(m, ir);
		if (!cascaded(m, ir)) {
			v = (uint8_t) (m->icw2 | ir);
		} else if ((s->icw1 & ICW1_SNGL) || (s->icw3 & 7) != ir) {
			v = 0xff; /* no slave answers to this ID: the bus floats */
		} else if ((sir = request(s, false)) < 0) {
			v = s->icw2 | 7;
		} else {
			ack_level(s, sir);
			v = (uint8_t) (s->icw2 | sir);
		}
	}
	update(p);
	return v;
}

bool pic_intr(const struct pic *p)
{
	return p->chip[0].out;
}

void pic_set_irq(struct pic *p, unsigned int irq, bool level)
{
	if (irq >= 16 || irq == PIC_CASCADE_IR)
		return;
	set_line(&p->chip[irq / 8], (int) (irq % 8), level);
	update(p);
}

bool pic_decodes(uint16_t port)
{
	return port == PORT_PIC_MASTER || port == PORT_PIC_MASTER + 1 || port == PORT_PIC_SLAVE ||
	       port == PORT_PIC_SLAVE + 1 || port == PORT_PIC_ELCR || port == PORT_PIC_ELCR + 1;
}

static void ocw2(struct pic_chip *c, uint8_t v)
{
	int l = v & 7, ir;

	switch (v >> 5) {
	case 1: /* non-specific EOI */
	case 5: /* rotate on non-specific EOI */
		ir = highest(c, c->isr);
		if (ir < 0)
			break;
		c->isr &= (uint8_t) ~(1u << ir);
		if (v >> 5 == 5)
			c->lowest = (uint8_t) ir;
		break;
	case 3: /* specific EOI */
	case 7: /* rotate on specific EOI */
		c->isr &= (uint8_t) ~(1u << l);
		if (v >> 5 == 7)
			c->lowest = (uint8_t) l;
		break;
	case 4:
	case 0:
		c->rotate_aeoi = v >> 5 == 4;
		break;
	case 6: /* set priority */
		c->lowest = (uint8_t) l;
		break;
	default: /* 2: no operation */
		break;
	}
}

static void write_even(struct pic_chip *c, uint8_t v)
{
	if (v & ICW1_INIT) {
		c->icw1 = v;
		c->init = 2;
		c->imr = 0;
		c->isr = 0;
		c->irr = c->lines & c->elcr; /* edge sense reset: only levels still request */
		c->lowest = 7;
		c->read_isr = false;
		c->poll = false;
		c->smm = false;
		c->rotate_aeoi = false;
		if (!(v & ICW1_IC4))
			c->icw4 = 0;
	} else if (v & OCW3_SEL) {
		if (v & OCW3_P)
			c->poll = true;
		if (v & OCW3_RR)
			c->read_isr = v & OCW3_RIS;
		if (v & OCW3_ESMM)
			c->smm = v & OCW3_SMM;
	} else {
		ocw2(c, v);
	}
}

static void write_odd(struct pic_chip *c, uint8_t v)
{
	switch (c->init) {
	case 2:
		c->icw2 = v & 0xf8;
		c->init = !(c->icw1 & ICW1_SNGL) ? 3 : (c->icw1 & ICW1_IC4) ? 4 : 0;
		break;
	case 3:
		c->icw3 = v;
		c->init = (c->icw1 & ICW1_IC4) ? 4 : 0;
		break;
	case 4:
		c->icw4 = v & 0x1f;
		c->init = 0;
		break;
	default:
		c->imr = v;
		break;
	}
}

static void write_elcr(struct pic_chip *c, uint8_t v)
{
	c->elcr = v;
	c->irr |= c->lines & c->elcr; /* a high line that became level-triggered requests */
}

void pic_write(struct pic *p, uint16_t port, uint8_t value)
{
	switch (port) {
	case PORT_PIC_MASTER:
	case PORT_PIC_SLAVE:
		write_even(&p->chip[port == PORT_PIC_SLAVE], value);
		break;
	case PORT_PIC_MASTER + 1:
	case PORT_PIC_SLAVE + 1:
		write_odd(&p->chip[port == PORT_PIC_SLAVE + 1], value);
		break;
	case PORT_PIC_ELCR:
		write_elcr(&p->chip[0], value & ELCR0_MASK);
		break;
	case PORT_PIC_ELCR + 1:
		write_elcr(&p->chip[1], value & ELCR1_MASK);
		break;
	default:
		return;
	}
	update(p);
}

/* OCW3 poll: an acknowledge that reads the level instead of a vector. */
static uint8_t poll(struct pic *p, struct pic_chip *c)
{
	int ir = request(c, c == &p->chip[0]);

	c->poll = false;
	if (ir < 0)
		return 0;
	ack_level(c, ir);
	update(p);
	return (uint8_t) (0x80 | ir);
}

uint8_t pic_read(struct pic *p, uint16_t port)
{
	struct pic_chip *c;

	switch (port) {
	case PORT_PIC_MASTER:
	case PORT_PIC_SLAVE:
		c = &p->chip[port == PORT_PIC_SLAVE];
		if (c->poll)
			return poll(p, c);
		return c->read_isr ? c->isr : c->irr;
	case PORT_PIC_MASTER + 1:
	case PORT_PIC_SLAVE + 1:
		return p->chip[port == PORT_PIC_SLAVE + 1].imr;
	case PORT_PIC_ELCR:
	case PORT_PIC_ELCR + 1:
		return p->chip[port - PORT_PIC_ELCR].elcr;
	default:
		return 0xff;
	}
}
