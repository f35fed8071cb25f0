/* SPDX-License-Identifier: MIT */
/*
 * MC146818A real-time clock plus RAM (Motorola MC146818A datasheet) as a
 * PC wires it: index port 70H (bit 7 masks NMI on a PC; the index is
 * write-only here and reads as FFH), data port 71H, 128 bytes of CMOS.
 *
 * Time is the modelled clock, never the host's: the clock reads `epoch`
 * (Unix seconds, UTC) at guest TSC 0 and advances one second per tsc_hz
 * guest TSC cycles, so every run of a guest reads the same dates.
 *
 * Registers (datasheet "Register A/B/C/D"):
 * - 0-9: seconds, alarm, minutes, alarm, hours, alarm, day of week
 *   (1 = Sunday), day of month, month, year, in BCD or binary per B.DM
 *   and in 24- or 12-hour form per B.24/12 (12-hour: bit 7 = PM). The
 *   time is kept as a number, so a format change changes how it reads
 *   (on the chip software must rewrite the registers; Linux never
 *   changes the format). Writes set the field; the day of week is its
 *   own counter, as on the chip, and keeps what was written.
 * - A: UIP (read-only), DV2-0 (010 = 32.768 kHz time base, 11x holds the
 *   divider in reset), RS3-0 (periodic rate). UIP is 1 during the 244 us
 *   before each update ("the update cycle is in progress or will soon
 *   begin"; 0 means no update for at least 244 us). The update itself is
 *   instantaneous at the second boundary here: a read never sees a time
 *   half updated. Releasing the divider from reset puts the first update
 *   half a second later, as the datasheet says. Any DV value other than
 *   11x runs at the PC's 32.768 kHz.
 * - B: SET holds the time (no update, UIP 0) while software writes it and
 *   clears UIE; PIE, AIE, UIE, SQWE, DM, 24/12 as written; DSE is stored
 *   but no daylight saving is applied.
 * - C: IRQF, PF, AF, UF, latched since the last read of C and cleared by
 *   it. UF at every update, AF when an update lands on the alarm time
 *   (alarm bytes C0H-FFH match anything), PF at the rate RS selects,
 *   whatever the enable bits; IRQF when a flag is set whose enable is.
 *   No interrupt is delivered (the platform has no interrupt controller
 *   for IRQ 8).
 * - D: VRT = 1 (valid RAM and time), read-only.
 * - 0EH-7FH: battery-backed RAM, zero at power-on, except 32H (century,
 *   IBM PC/AT map) which follows the clock in BCD or binary like the year.
 */
#include <string.h>

#include "rtc.h"

#define DV_RESET 0x60	   /* DV2 = DV1 = 1: divider chain held in reset */
#define UIP_NS	 244000ull /* tBUC, Table 6: UIP rises 244 us before the update */
#define TIME_HZ	 32768ull  /* the PC's time base */
#define DAY	 86400ll

__extension__ typedef unsigned __int128 u128;

struct rtc_time {
	int64_t year;
	unsigned int mon, mday, hour, min, sec, wday; /* wday 0 = Sunday */
};

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Proleptic Gregorian calendar: days since 1970-01-01 <-> year, month, day (March-based years). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	int64_t era, yoe, doy, doe;

	y += floor_div(m - 1, 12); /* months outside 1..12 carry into the year */
	m -= 12 * floor_div(m - 1, 12);
	if (m <= 2)
		y--;
	era = floor_div(y, 400);
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t days, struct rtc_time *t)
{
	int64_t z = days + 719468, era = floor_div(z, 146097), doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;

	t->mday = (unsigned int) (doy - (153 * mp + 2) / 5 + 1);
	t->mon = (unsigned int) (mp < 10 ? mp + 3 : mp - 9);
	t->year = yoe + era * 400 + (t->mon <= 2);
	t->wday = (unsigned int) (((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday */
}

static void split(int64_t secs, struct rtc_time *t)
{
	int64_t days = floor_div(secs, DAY), sod = secs - days * DAY;

	civil_from_days(days, t);
	t->hour = (unsigned int) (sod / 3600);
	t->min = (unsigned int) (sod / 60 % 60);
	t->sec = (unsigned int) (sod % 60);
}

static int64_t join(const struct rtc_time *t)
{
	return days_from_civil(t->year, t->mon, t->mday) * DAY + t->hour * 3600ll + t->min * 60ll +
	       t->sec;
}

static bool binary(const struct rtc *r)
{
	return r->ram[RTC_REG_B] & RTC_B_DM;
}

static uint8_t enc(const struct rtc *r, unsigned int v)
{
	v %= 100;
	return (uint8_t) (binary(r) ? v : (v / 10) << 4 | v % 10);
}

static unsigned int dec(const struct rtc *r, uint8_t v)
{
	return binary(r) ? v : (v >> 4) * 10u + (v & 0xf);
}

static uint8_t enc_hour(const struct rtc *r, unsigned int h)
{
	unsigned int h12 = h % 12 ? h % 12 : 12;

	if (r->ram[RTC_REG_B] & RTC_B_24H)
		return enc(r, h);
	return (uint8_t) (enc(r, h12) | (h >= 12 ? 0x80 : 0));
}

static unsigned int dec_hour(const struct rtc *r, uint8_t v)
{
	if (r->ram[RTC_REG_B] & RTC_B_24H)
		return dec(r, v);
	return dec(r, v & 0x7f) % 12 + (v & 0x80 ? 12 : 0);
}

static bool divider_reset(uint8_t reg_a)
{
	return (reg_a & DV_RESET) == DV_RESET;
}

static bool held(const struct rtc *r)
{
	return (r->ram[RTC_REG_B] & RTC_B_SET) || divider_reset(r->ram[RTC_REG_A]);
}

/* Guest TSC cycles since the last second boundary. */
static uint64_t phase(const struct rtc *r, uint64_t now)
{
	if (!r->tsc_hz || now < r->base_tsc)
		return 0;
	return (now - r->base_tsc) % r->tsc_hz;
}

static int64_t secs_at(const struct rtc *r, uint64_t now)
{
	if (r->frozen)
		return r->frozen_secs;
	if (!r->tsc_hz || now < r->base_tsc)
		return r->base_secs;
	return r->base_secs + (int64_t) ((now - r->base_tsc) / r->tsc_hz);
}

static bool uip(const struct rtc *r, uint64_t now)
{
	uint64_t window;

	if (r->frozen || !r->tsc_hz)
		return false;
	window = (uint64_t) (((u128) UIP_NS * r->tsc_hz + 999999999) / 1000000000);
	return phase(r, now) >= r->tsc_hz - window;
}

/* Register A RS3-0: the periodic rate as a period in 32.768 kHz cycles (Table 5), 0 = none. */
static uint64_t periodic_cycles(uint8_t reg_a)
{
	unsigned int rs = reg_a & 0xf;

	if (!rs)
		return 0;
	if (rs <= 2)
		return rs == 1 ? 128 : 256; /* 256 Hz and 128 Hz with a 32.768 kHz base */
	return 1ull << (rs - 1);
}

static bool alarm_match(const struct rtc *r, int64_t secs)
{
	struct rtc_time t;
	uint8_t want[3] = { r->ram[RTC_SECONDS_ALARM], r->ram[RTC_MINUTES_ALARM],
			    r->ram[RTC_HOURS_ALARM] };
	uint8_t have[3];

	split(secs, &t);
	have[0] = enc(r, t.sec);
	have[1] = enc(r, t.min);
	have[2] = enc_hour(r, t.hour);
	for (int i = 0; i < 3; i++)
		if (want[i] < 0xc0 && want[i] != have[i])
			return false;
	return true;
}

/* Latch register C's flags for what happened between flags_tsc and now. */
static void sync_flags(struct rtc *r, uint64_t now)
{
	uint64_t period = periodic_cycles(r->ram[RTC_REG_A]);

	if (now <= r->flags_tsc)
		return;
	if (period && r->tsc_hz && !divider_reset(r->ram[RTC_REG_A])) {
		u128 div = (u128) r->tsc_hz * period;

		if ((u128) now * TIME_HZ / div > (u128) r->flags_tsc * TIME_HZ / div)
			r->flags |= RTC_C_PF;
	}
	if (!r->frozen) {
		int64_t s0 = secs_at(r, r->flags_tsc), s1 = secs_at(r, now);

		if (s1 > s0) {
			r->flags |= RTC_C_UF;
			/* a day of updates holds every alarm time there is */
			for (int64_t s = s1 - s0 > DAY ? s1 - DAY + 1 : s0 + 1; s <= s1; s++)
				if (alarm_match(r, s)) {
					r->flags |= RTC_C_AF;
					break;
				}
		}
	}
	r->flags_tsc = now;
}

void rtc_init(struct rtc *r, uint64_t tsc_hz, int64_t epoch)
{
	memset(r, 0, sizeof(*r));
	r->tsc_hz = tsc_hz;
	r->base_secs = epoch;
	r->ram[RTC_REG_A] = 0x26; /* 32.768 kHz time base, 1024 Hz periodic rate */
	r->ram[RTC_REG_B] = RTC_B_24H;
}

/* SET or a divider reset starts or ends holding the time. */
static void update_hold(struct rtc *r, uint64_t now, uint8_t old_a)
{
	bool hold = held(r);
	uint64_t ph;

	if (hold == r->frozen)
		return;
	if (hold) {
		r->frozen_secs = secs_at(r, now);
		r->frozen = true;
		return;
	}
	r->frozen = false;
	r->base_secs = r->frozen_secs;
	if (divider_reset(old_a)) {
		/* "the first update cycle begins one-half second later" */
		if (now >= r->tsc_hz / 2) {
			r->base_tsc = now - r->tsc_hz / 2;
		} else {
			r->base_secs--;
			r->base_tsc = now + (r->tsc_hz - r->tsc_hz / 2);
		}
		return;
	}
	ph = phase(r, now); /* SET does not stop the divider: same phase */
	r->base_tsc = now - ph;
}

static void set_time(struct rtc *r, uint64_t now, uint8_t reg, uint8_t v)
{
	int64_t cur = secs_at(r, now), next;
	struct rtc_time t, n;
	unsigned int shown;

	split(cur, &t);
	shown = (t.wday + r->dow_offset) % 7;
	switch (reg) {
	case RTC_SECONDS:
		t.sec = dec(r, v);
		break;
	case RTC_MINUTES:
		t.min = dec(r, v);
		break;
	case RTC_HOURS:
		t.hour = dec_hour(r, v);
		break;
	case RTC_DAY_OF_WEEK:
		shown = (dec(r, v) + 6) % 7; /* 1 = Sunday */
		break;
	case RTC_DAY_OF_MONTH:
		t.mday = dec(r, v);
		break;
	case RTC_MONTH:
		t.mon = dec(r, v);
		break;
	case RTC_YEAR:
		t.year = floor_div(t.year, 100) * 100 + dec(r, v);
		break;
	default: /* RTC_CENTURY */
		t.year = (int64_t) dec(r, v) * 100 + (t.year - floor_div(t.year, 100) * 100);
		break;
	}
	next = join(&t);
	if (r->frozen)
		r->frozen_secs = next;
	else
		r->base_secs += next - cur;
	split(next, &n);
	r->dow_offset = (uint8_t) ((shown + 7 - n.wday) % 7);
}

static bool is_time(uint8_t reg)
{
	return reg == RTC_SECONDS || reg == RTC_MINUTES || reg == RTC_HOURS ||
	       (reg >= RTC_DAY_OF_WEEK && reg <= RTC_YEAR) || reg == RTC_CENTURY;
}

uint8_t rtc_read(struct rtc *r, uint16_t port, uint64_t now)
{
	struct rtc_time t;
	uint8_t reg = r->index, v;

	if (port != PORT_RTC_DATA)
		return 0xff; /* the index register is write-only */
	sync_flags(r, now);
	split(secs_at(r, now), &t);
	switch (reg) {
	case RTC_SECONDS:
		return enc(r, t.sec);
	case RTC_MINUTES:
		return enc(r, t.min);
	case RTC_HOURS:
		return enc_hour(r, t.hour);
	case RTC_DAY_OF_WEEK:
		return enc(r, (t.wday + r->dow_offset) % 7 + 1);
	case RTC_DAY_OF_MONTH:
		return enc(r, t.mday);
	case RTC_MONTH:
		return enc(r, t.mon);
	case RTC_YEAR:
		return enc(r, (unsigned int) (t.year - floor_div(t.year, 100) * 100));
	case RTC_CENTURY:
		return enc(r, (unsigned int) (floor_div(t.year, 100) % 100));
	case RTC_REG_A:
		return (uint8_t) ((r->ram[RTC_REG_A] & 0x7f) | (uip(r, now) ? RTC_A_UIP : 0));
	case RTC_REG_C:
		v = r->flags;
		if (v & r->ram[RTC_REG_B] & (RTC_B_PIE | RTC_B_AIE | RTC_B_UIE))
			v |= RTC_C_IRQF; /* PF/AF/UF sit at the same bits as PIE/AIE/UIE */
		r->flags = 0;
		return v;
	case RTC_REG_D:
		return RTC_D_VRT;
	default:
		return r->ram[reg];
	}
}

void rtc_write(struct rtc *r, uint16_t port, uint8_t value, uint64_t now)
{
	uint8_t reg = r->index, old_a = r->ram[RTC_REG_A];

	if (port == PORT_RTC_INDEX) {
		r->index = value & 0x7f;
		r->nmi_masked = value & 0x80;
		return;
	}
	if (port != PORT_RTC_DATA)
		return;
	sync_flags(r, now);
	if (is_time(reg)) {
		set_time(r, now, reg, value);
		return;
	}
	switch (reg) {
	case RTC_REG_A:
		r->ram[RTC_REG_A] = value & 0x7f; /* UIP is read-only */
		update_hold(r, now, old_a);
		break;
	case RTC_REG_B:
		if (value & RTC_B_SET)
			value &= (uint8_t) ~RTC_B_UIE; /* "UIE is cleared when SET goes to 1" */
		r->ram[RTC_REG_B] = value;
		update_hold(r, now, old_a);
		break;
	case RTC_REG_C:
	case RTC_REG_D:
		break; /* read-only */
	default:
		r->ram[reg] = value;
		break;
	}
}
