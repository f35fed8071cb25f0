/* SPDX-License-Identifier: MIT */
/*
 * The CMOS real-time clock of a PC: a Motorola MC146818A behind index
 * port 70H and data port 71H, on the modelled clock. See rtc.c.
 */
#ifndef VMM_RTC_H
#define VMM_RTC_H

#include <stdbool.h>
#include <stdint.h>

#define PORT_RTC_INDEX 0x70
#define PORT_RTC_DATA  0x71

/* MC146818A registers (datasheet, "Address Map", Figure 3) */
#define RTC_SECONDS	  0x00
#define RTC_SECONDS_ALARM 0x01
#define RTC_MINUTES	  0x02
#define RTC_MINUTES_ALARM 0x03
#define RTC_HOURS	  0x04
#define RTC_HOURS_ALARM	  0x05
#define RTC_DAY_OF_WEEK	  0x06
#define RTC_DAY_OF_MONTH  0x07
#define RTC_MONTH	  0x08
#define RTC_YEAR	  0x09
#define RTC_REG_A	  0x0a
#define RTC_REG_B	  0x0b
#define RTC_REG_C	  0x0c
#define RTC_REG_D	  0x0d
#define RTC_CENTURY	  0x32 /* IBM PC/AT CMOS map; the FADT's CENTURY field names it */

#define RTC_A_UIP  0x80
#define RTC_B_SET  0x80
#define RTC_B_PIE  0x40
#define RTC_B_AIE  0x20
#define RTC_B_UIE  0x10
#define RTC_B_DM   0x04 /* 1: binary, 0: BCD */
#define RTC_B_24H  0x02
#define RTC_C_IRQF 0x80
#define RTC_C_PF   0x40
#define RTC_C_AF   0x20
#define RTC_C_UF   0x10
#define RTC_D_VRT  0x80

/* 2024-01-01 00:00:00 UTC: the clock's time at guest TSC 0 unless told otherwise */
#define RTC_DEFAULT_EPOCH 1704067200ll

struct rtc {
	uint64_t tsc_hz; /* 0: time stands still */
	uint8_t index;	 /* port 70H bits 6:0 */
	bool nmi_masked; /* port 70H bit 7 */
	uint8_t ram[128];
	int64_t base_secs; /* the time (Unix seconds) at guest TSC base_tsc... */
	uint64_t base_tsc;
	bool frozen;	     /* ...unless SET or a divider reset holds it at frozen_secs */
	int64_t frozen_secs; /* (the divider keeps base_tsc's phase while SET holds) */
	uint8_t dow_offset;  /* day of week as written, against the computed one (mod 7) */
	uint8_t flags;	     /* register C PF | AF | UF, latched until read */
	uint64_t flags_tsc;  /* flags are up to date to this TSC */
};

void rtc_init(struct rtc *r, uint64_t tsc_hz, int64_t epoch);

/* Port 70H or 71H at guest TSC `now`. */
uint8_t rtc_read(struct rtc *r, uint16_t port, uint64_t now);
void rtc_write(struct rtc *r, uint16_t port, uint8_t value, uint64_t now);

#endif
