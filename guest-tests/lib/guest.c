/* SPDX-License-Identifier: MIT */
#include <stdarg.h>

#include "guest.h"

#define COM1 0x3f8

void putc_serial(char c)
{
	while (!(inb(COM1 + 5) & 0x20))
		;
	outb(COM1, (uint8_t)c);
}

void puts_serial(const char *s)
{
	while (*s)
		putc_serial(*s++);
}

static void put_num(uint64_t v, unsigned int base, int width, char pad)
{
	char buf[24];
	int n = 0;

	do {
		buf[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (n < width--)
		putc_serial(pad);
	while (n)
		putc_serial(buf[--n]);
}

static void vprintf_serial(const char *fmt, va_list ap)
{
	for (; *fmt; fmt++) {
		int width = 0, lng = 0;
		char pad = ' ';

		if (*fmt != '%') {
			putc_serial(*fmt);
			continue;
		}
		fmt++;
		if (*fmt == '0')
			pad = '0';
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l')
			lng++, fmt++;
		switch (*fmt) {
		case 's': puts_serial(va_arg(ap, const char *)); break;
		case 'c': putc_serial((char)va_arg(ap, int)); break;
		case 'd': {
			int64_t v = lng ? va_arg(ap, int64_t) : va_arg(ap, int);

			if (v < 0) {
				putc_serial('-');
				v = -v;
			}
			put_num((uint64_t)v, 10, width, pad);
			break;
		}
		case 'u': put_num(lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned int), 10, width, pad); break;
		case 'x': put_num(lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned int), 16, width, pad); break;
		case 'p': puts_serial("0x"); put_num((uint64_t)va_arg(ap, void *), 16, width, pad); break;
		case '%': putc_serial('%'); break;
		default: putc_serial('?'); break;
		}
	}
}

void printf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf_serial(fmt, ap);
	va_end(ap);
}

void exit(int code)
{
	outl(0xf4, (uint32_t)code);
	for (;;)
		__asm__ volatile("cli; hlt");
}

/* ---- IDT ---- */
struct gate {
	uint16_t off0, sel;
	uint8_t ist, type;
	uint16_t off1;
	uint32_t off2, zero;
} __attribute__((packed));

static struct gate idt[256] __attribute__((aligned(16)));
static handler_fn handlers[256];
extern const uint64_t isr_stubs[256];

void set_handler(unsigned int vector, handler_fn fn)
{
	handlers[vector] = fn;
}

void isr_dispatch(struct frame *f);
void isr_dispatch(struct frame *f)
{
	if (handlers[f->vector]) {
		handlers[f->vector](f);
		return;
	}
	printf("unexpected exception %u (error %lx) at rip %lx\n", (unsigned int)f->vector, f->error,
	       f->rip);
	exit(0x7f);
}

void idt_init(void)
{
	struct {
		uint16_t limit;
		uint64_t base;
	} __attribute__((packed)) d = { sizeof(idt) - 1, (uint64_t)idt };
	uint16_t cs;

	__asm__ volatile("mov %%cs, %0" : "=r"(cs));
	for (int i = 0; i < 256; i++) {
		uint64_t a = isr_stubs[i];

		idt[i].off0 = (uint16_t)a;
		idt[i].sel = cs;
		idt[i].ist = 0;
		idt[i].type = 0x8e;	/* present, DPL 0, 64-bit interrupt gate */
		idt[i].off1 = (uint16_t)(a >> 16);
		idt[i].off2 = (uint32_t)(a >> 32);
		idt[i].zero = 0;
	}
	__asm__ volatile("lidt %0" :: "m"(d));
}

/* ---- x2APIC ---- */
void x2apic_enable(void)
{
	wrmsr(0x1b, rdmsr(0x1b) | (1u << 11) | (1u << 10));
	wrmsr(0x80f, 0x1ff);	/* SVR: enabled, spurious vector 0xff */
}

void apic_eoi(void)
{
	wrmsr(0x80b, 0);
}

/* ---- report ---- */
static unsigned int passed, failed;
static const char *prefix = "";

void report_prefix(const char *p)
{
	prefix = p;
}

void report(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s: %s", ok ? "PASS" : "FAIL", prefix);
	va_start(ap, fmt);
	vprintf_serial(fmt, ap);
	va_end(ap);
	putc_serial('\n');
	if (ok)
		passed++;
	else
		failed++;
}

int report_summary(void)
{
	printf("SUMMARY: %u passed, %u failed, 0 skipped\n", passed, failed);
	return failed ? 1 : 0;
}
