/* SPDX-License-Identifier: MIT */
/*
 * Intel 8254 programmable interval timer (Intel 8254 datasheet, order
 * 231164) as a PC wires it: counters 0-2 at ports 40H-42H, the control
 * word register at 43H, a 1.193182 MHz input clock, gates 0 and 1 tied
 * high, gate 2 from port 61H bit 0. The clock is the modelled one: tick
 * t = floor(TSC * 1193182 / tsc_hz), never host time.
 *
 * A counter is kept as "e ticks elapsed since its count was loaded" and
 * its count and OUT are functions of e (datasheet "Operation", Figure 19
 * and the mode descriptions):
 * - Mode 0 (interrupt on terminal count): count N - e; OUT low from the
 *   control word, high from e = N on (N + 1 CLKs after the count write).
 *   Writing the first byte of a two-byte count stops counting and sets
 *   OUT low; the gate suspends counting.
 * - Mode 1 (hardware one-shot): a gate rising edge loads N; OUT low until
 *   the count reaches 0. Retriggerable.
 * - Mode 2 (rate generator): counts N .. 1 and reloads; OUT low for the
 *   one CLK at count 1. Gate low stops counting and forces OUT high; the
 *   rising edge reloads. A count written while counting takes effect at
 *   the end of the current period.
 * - Mode 3 (square wave): even N counts N, N-2 .. 2 twice per period, OUT
 *   high for N/2 CLKs then low for N/2; odd N counts N-1 .. 0 high for
 *   (N+1)/2 CLKs, N-1 .. 2 low for (N-1)/2. Gate as in mode 2. A new
 *   count takes effect at the end of the current period (the datasheet
 *   says the end of the current half-cycle; Linux never relies on it).
 * - Mode 4 (software strobe): count N - e; OUT low for the one CLK at
 *   count 0. Gate suspends counting. Mode 5: the same, triggered by the
 *   gate's rising edge.
 * Every count write loads on the next CLK; until then the status byte's
 * NULL COUNT is 1. A count of 0 is 65536 (10000 in BCD). Counter latch
 * and read-back (count and status) commands latch what they latch until
 * it is read; LSB/MSB reads and writes alternate with a flip-flop that a
 * control word resets. No interrupt is delivered: the platform has no
 * 8259 for IRQ 0 (Linux uses the local APIC timer).
 */
#include <string.h>

#include "pit.h"

__extension__ typedef unsigned __int128 u128;

#define NEVER UINT64_MAX

uint64_t pit_ticks(const struct pit *p, uint64_t now)
{
	if (!p->tsc_hz)
		return 0;
	return (uint64_t) ((u128) now * PIT_HZ / p->tsc_hz);
}

static unsigned int mode_of(const struct pit_channel *c)
{
	return c->mode >= 6 ? c->mode - 4u : c->mode; /* 110b, 111b: modes 2, 3 */
}

static uint32_t modulus(const struct pit_channel *c)
{
	return c->bcd ? 10000 : 65536;
}

/* A pending count of modes 2/3 takes over when its period has ended. */
static void settle(struct pit_channel *c, uint64_t t)
{
	if (c->switch_at && t >= c->switch_at) {
		c->cur = c->count;
		c->start = c->switch_at;
		c->e_base = 0;
		c->switch_at = 0;
	}
}

static uint64_t elapsed(const struct pit_channel *c, uint64_t t)
{
	if (!c->running || t < c->start)
		return c->e_base;
	return c->e_base + (t - c->start);
}

/* The counting element's value as a number (0 stands for 65536 / 10000). */
static uint32_t value(const struct pit_channel *c, uint64_t t)
{
	uint64_t e = elapsed(c, t), n = c->cur, p, hi;

	switch (mode_of(c)) {
	case 2:
		return (uint32_t) ((n - e % n) % modulus(c));
	case 3:
		p = e % n;
		if (!(n & 1))
			return (uint32_t) ((n - 2 * (p % (n / 2))) % modulus(c));
		hi = (n + 1) / 2;
		return (uint32_t) (p < hi ? n - 1 - 2 * p : n - 1 - 2 * (p - hi));
	default:
		return (uint32_t) ((n + modulus(c) - e % modulus(c)) % modulus(c));
	}
}

static bool out(const struct pit_channel *c, uint64_t t)
{
	uint64_t e = elapsed(c, t), n = c->cur;

	switch (mode_of(c)) {
	case 0:
		return c->loaded && t >= c->load_at && e >= n;
	case 1:
		return !c->running || e >= n;
	case 2:
		return !c->running || e % n != n - 1;
	case 3:
		return !c->running || e % n < (n + 1) / 2;
	default: /* 4, 5 */
		return !(c->running && e == n);
	}
}

static uint16_t encode(const struct pit_channel *c, uint32_t v)
{
	if (!c->bcd)
		return (uint16_t) v;
	return (uint16_t) ((v / 1000 % 10) << 12 | (v / 100 % 10) << 8 | (v / 10 % 10) << 4 |
			   v % 10);
}

static uint32_t decode(const struct pit_channel *c, uint16_t v)
{
	uint32_t n = v;

	if (c->bcd)
		n = (v >> 12 & 0xf) * 1000u + (v >> 8 & 0xf) * 100u + (v >> 4 & 0xf) * 10u +
		    (v & 0xf);
	return n ? n : modulus(c);
}

static uint8_t status(const struct pit_channel *c, uint64_t t)
{
	bool null_count = t < c->load_at;

	return (uint8_t) ((out(c, t) ? 0x80 : 0) | (null_count ? 0x40 : 0) | c->rw << 4 |
			  c->mode << 1 | c->bcd);
}

static void start_count(struct pit_channel *c, uint64_t t)
{
	c->cur = c->count;
	c->start = t + 1; /* "loaded on the next CLK pulse" */
	c->load_at = t + 1;
	c->e_base = 0;
	c->switch_at = 0;
	c->running = true;
}

static void count_written(struct pit_channel *c, uint16_t raw, uint64_t t)
{
	unsigned int mode = mode_of(c);
	bool was_counting = c->loaded && c->running;

	c->count = decode(c, raw);
	c->loaded = true;
	switch (mode) {
	case 1:
	case 5:
		c->load_at = NEVER; /* loaded by the next trigger */
		break;
	case 2:
	case 3:
		if (was_counting) {
			uint64_t e = elapsed(c, t), end = (e / c->cur + 1) * c->cur;

			c->switch_at = c->start + (end - c->e_base);
			c->load_at = c->switch_at;
			break;
		}
		/* fall through */
	default:
		start_count(c, t);
		c->running = c->gate;
		if (!c->gate) {
			c->start = NEVER;
		}
		break;
	}
}

static void control_word(struct pit *p, uint8_t v, uint64_t t)
{
	unsigned int sc = v >> 6, rw = (v >> 4) & 3;
	struct pit_channel *c;

	if (sc == 3) {
		/* read-back: bit 5 = 0 latches counts, bit 4 = 0 statuses, bits 3:1 pick 2..0 */
		for (unsigned int i = 0; i < 3; i++) {
			c = &p->ch[i];
			if (!(v & (2u << i)))
				continue;
			settle(c, t);
			if (!(v & 0x20) && !c->latch_left) {
				c->latch = encode(c, value(c, t));
				c->latch_left = c->rw == 3 ? 2 : 1;
			}
			if (!(v & 0x10) && !c->status_latched) {
				c->status = status(c, t);
				c->status_latched = true;
			}
		}
		return;
	}
	c = &p->ch[sc];
	settle(c, t);
	if (!rw) { /* counter latch command */
		if (!c->latch_left) {
			c->latch = encode(c, value(c, t));
			c->latch_left = c->rw == 3 ? 2 : 1;
		}
		return;
	}
	c->e_base = elapsed(c, t);
	c->mode = (v >> 1) & 7;
	c->rw = (uint8_t) rw;
	c->bcd = v & 1;
	c->loaded = false;
	c->running = false;
	c->write_msb = false;
	c->read_msb = false;
	c->latch_left = 0;
	c->status_latched = false;
	c->switch_at = 0;
	c->load_at = NEVER;
}

uint8_t pit_read(struct pit *p, uint16_t port, uint64_t now)
{
	uint64_t t = pit_ticks(p, now);
	struct pit_channel *c;
	uint16_t v;

	if (port < PORT_PIT_CH0 || port >= PORT_PIT_MODE)
		return 0xff; /* the control word register cannot be read */
	c = &p->ch[port - PORT_PIT_CH0];
	settle(c, t);
	if (c->status_latched) {
		c->status_latched = false;
		return c->status;
	}
	if (c->latch_left) {
		v = c->latch;
		if (c->rw == 3 && c->latch_left == 2) {
			c->latch_left = 1;
			return (uint8_t) v;
		}
		c->latch_left = 0;
		return (uint8_t) (c->rw == 2 || c->rw == 3 ? v >> 8 : v);
	}
	v = encode(c, value(c, t));
	if (c->rw == 3) {
		c->read_msb = !c->read_msb;
		return (uint8_t) (c->read_msb ? v : v >> 8);
	}
	return (uint8_t) (c->rw == 2 ? v >> 8 : v);
}

void pit_write(struct pit *p, uint16_t port, uint8_t value, uint64_t now)
{
	uint64_t t = pit_ticks(p, now);
	struct pit_channel *c;

	if (port == PORT_PIT_MODE) {
		control_word(p, value, t);
		return;
	}
	if (port < PORT_PIT_CH0 || port > PORT_PIT_MODE)
		return;
	c = &p->ch[port - PORT_PIT_CH0];
	settle(c, t);
	switch (c->rw) {
	case 1:
		count_written(c, value, t);
		break;
	case 2:
		count_written(c, (uint16_t) (value << 8), t);
		break;
	default:
		if (!c->write_msb) {
			c->write_lsb = value;
			c->write_msb = true;
			if (mode_of(c) == 0) {
				/* the first byte stops counting, OUT low at once */
				c->e_base = elapsed(c, t);
				c->running = false;
				c->loaded = false;
			}
			break;
		}
		c->write_msb = false;
		count_written(c, (uint16_t) (c->write_lsb | value << 8), t);
		break;
	}
}

void pit_set_gate(struct pit *p, unsigned int channel, bool level, uint64_t now)
{
	uint64_t t = pit_ticks(p, now);
	struct pit_channel *c = &p->ch[channel % 3];
	bool rising = level && !c->gate;

	settle(c, t);
	c->gate = level;
	switch (mode_of(c)) {
	case 0:
	case 4: /* the gate enables counting */
		if (!c->loaded)
			break;
		if (!level && c->running) {
			c->e_base = elapsed(c, t);
			c->running = false;
		} else if (level && !c->running) {
			c->start = t < c->load_at ? c->load_at : t;
			c->running = true;
		}
		break;
	case 2:
	case 3: /* gate low stops counting; the rising edge reloads */
		if (!level && c->running) {
			c->e_base = elapsed(c, t);
			c->running = false;
		} else if (rising && c->loaded) {
			start_count(c, t);
		}
		break;
	default: /* 1, 5: the rising edge triggers */
		if (rising && c->loaded)
			start_count(c, t);
		break;
	}
}

bool pit_out(struct pit *p, unsigned int channel, uint64_t now)
{
	uint64_t t = pit_ticks(p, now);
	struct pit_channel *c = &p->ch[channel % 3];

	settle(c, t);
	return out(c, t);
}

void pit_init(struct pit *p, uint64_t tsc_hz)
{
	memset(p, 0, sizeof(*p));
	p->tsc_hz = tsc_hz;
	for (unsigned int i = 0; i < 3; i++) {
		struct pit_channel *c = &p->ch[i];

		c->mode = 3;
		c->rw = 3;
		c->count = c->cur = 65536;
		c->loaded = true;
		c->gate = i != 2;
		c->running = c->gate;
		c->start = 0;
		c->load_at = 0;
	}
}
