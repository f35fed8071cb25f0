/* SPDX-License-Identifier: MIT */
/*
 * The PC's 8254 programmable interval timer at ports 40H-43H, clocked at
 * 1.193182 MHz of modelled time. See pit.c.
 */
#ifndef VMM_PIT_H
#define VMM_PIT_H

#include <stdbool.h>
#include <stdint.h>

#define PORT_PIT_CH0  0x40
#define PORT_PIT_MODE 0x43
#define PIT_HZ	      1193182ull /* 14.31818 MHz / 12 */

struct pit_channel {
	uint8_t mode; /* 0-5 */
	uint8_t rw;   /* 1 LSB, 2 MSB, 3 LSB then MSB */
	bool bcd;
	uint32_t count;	    /* programmed count, 1..65536 (BCD: 1..10000), as a number */
	uint32_t cur;	    /* the count the present cycle runs with */
	bool loaded;	    /* a count was written since the control word */
	bool write_msb;	    /* LSB/MSB: the next write is the MSB... */
	uint8_t write_lsb;  /* ...after this LSB */
	bool read_msb;	    /* LSB/MSB: the next read of the live count is the MSB */
	uint8_t latch_left; /* count latch bytes still to read: 0, 1 or 2 */
	uint16_t latch;
	bool status_latched;
	uint8_t status;
	bool gate;
	bool running;	    /* counting (loaded, gated and, in modes 1/5, triggered) */
	uint64_t start;	    /* PIT tick at which elapsed ticks were e_base */
	uint64_t e_base;    /* ticks counted before `start` (modes 0/4 hold them while gated off) */
	uint64_t load_at;   /* tick of the CLK that loads a new count (NULL COUNT before it) */
	uint64_t switch_at; /* modes 2/3: a new count takes over at this tick (0: none) */
};

struct pit {
	uint64_t tsc_hz; /* 0: time stands still */
	struct pit_channel ch[3];
};

/* As a PC BIOS leaves it: every channel mode 3, LSB/MSB, count 65536; channel 2 gated off. */
void pit_init(struct pit *p, uint64_t tsc_hz);

/* Ports 40H-43H at guest TSC `now`. */
uint8_t pit_read(struct pit *p, uint16_t port, uint64_t now);
void pit_write(struct pit *p, uint16_t port, uint8_t value, uint64_t now);

/* Channel 2's gate (port 61H bit 0) and its OUT (port 61H bit 5). */
void pit_set_gate(struct pit *p, unsigned int channel, bool level, uint64_t now);
bool pit_out(struct pit *p, unsigned int channel, uint64_t now);

/* 1.193182 MHz ticks since guest TSC 0. */
uint64_t pit_ticks(const struct pit *p, uint64_t now);

#endif
