/* SPDX-License-Identifier: MIT */
#include <stdarg.h>

#include "guest.h"

#define COM1 0x3f8

void putc_serial(char c)
{
	while (!(inb(COM1 + 5) & 0x20))
		;
	outb(COM1, (uint8_t) c);
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
		case 's':
			puts_serial(va_arg(ap, const char *));
			break;
		case 'c':
			putc_serial((char) va_arg(ap, int));
			break;
		case 'd': {
			int64_t v = lng ? va_arg(ap, int64_t) : va_arg(ap, int);

			if (v < 0) {
				putc_serial('-');
				v = -v;
			}
			put_num((uint64_t) v, 10, width, pad);
			break;
		}
		case 'u':
			put_num(lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned int), 10, width,
				pad);
			break;
		case 'x':
			put_num(lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned int), 16, width,
				pad);
			break;
		case 'p':
			puts_serial("0x");
			put_num((uint64_t) va_arg(ap, void *), 16, width, pad);
			break;
		case '%':
			putc_serial('%');
			break;
		default:
			putc_serial('?');
			break;
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
	outl(0xf4, (uint32_t) code);
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

/*
 * The *_safe helpers list their one faulting instruction and where to
 * resume in .extable; a fault there resumes at the fixup and reports the
 * vector through fault_vector instead of reaching a handler.
 */
struct extable_entry {
	uint64_t insn, fixup;
};
extern const struct extable_entry __start_extable[], __stop_extable[];
static volatile int fault_vector;

static bool fixup_exception(struct frame *f)
{
	for (const struct extable_entry *e = __start_extable; e < __stop_extable; e++) {
		if (e->insn == f->rip) {
			fault_vector = (int) f->vector;
			f->rip = e->fixup;
			return true;
		}
	}
	return false;
}

#define SAFE_INSN(insn)                                                                            \
	"1: " insn "\n2:\n"                                                                        \
	".pushsection .extable, \"a\"\n"                                                           \
	".balign 8\n.quad 1b, 2b\n"                                                                \
	".popsection\n"

int rdmsr_safe(uint32_t msr, uint64_t *ret)
{
	uint32_t lo = 0, hi = 0;

	fault_vector = 0;
	__asm__ volatile(SAFE_INSN("rdmsr") : "+a"(lo), "+d"(hi) : "c"(msr) : "memory");
	*ret = fault_vector ? 0 : (uint64_t) hi << 32 | lo;
	return fault_vector;
}

int wrmsr_safe(uint32_t msr, uint64_t val)
{
	fault_vector = 0;
	/* clang-format off */
	__asm__ volatile(SAFE_INSN("wrmsr") :: "c"(msr), "a"((uint32_t)val),
			 "d"((uint32_t)(val >> 32)) : "memory");
	/* clang-format on */
	return fault_vector;
}

bool cpu_brand_has(const char *want)
{
	uint32_t w[13] = { 0 }; /* 48 bytes and a terminating zero */
	const char *s = (const char *) w;

	if (cpuid_regs(0x80000000, 0).a < 0x80000004)
		return false;
	for (uint32_t i = 0; i < 3; i++)
		cpuid(0x80000002 + i, 0, w + 4 * i);
	for (unsigned int i = 0; s[i]; i++) {
		unsigned int j = 0;

		while (want[j] && s[i + j] == want[j])
			j++;
		if (!want[j])
			return true;
	}
	return false;
}

int rdpmc_safe(uint32_t ecx, uint64_t *ret)
{
	uint32_t lo = 0, hi = 0;

	fault_vector = 0;
	__asm__ volatile(SAFE_INSN("rdpmc") : "+a"(lo), "+d"(hi) : "c"(ecx) : "memory");
	*ret = fault_vector ? 0 : (uint64_t) hi << 32 | lo;
	return fault_vector;
}

void isr_dispatch(struct frame *f);
void isr_dispatch(struct frame *f)
{
	if ((f->vector == 6 || f->vector == 13) && fixup_exception(f))
		return;
	if (handlers[f->vector]) {
		handlers[f->vector](f);
		return;
	}
	printf("unexpected exception %u (error %lx) at rip %lx\n", (unsigned int) f->vector,
	       f->error, f->rip);
	exit(0x7f);
}

void idt_init(void)
{
	struct {
		uint16_t limit;
		uint64_t base;
	} __attribute__((packed)) d = { sizeof(idt) - 1, (uint64_t) idt };
	uint16_t cs;

	__asm__ volatile("mov %%cs, %0" : "=r"(cs));
	for (int i = 0; i < 256; i++) {
		uint64_t a = isr_stubs[i];

		idt[i].off0 = (uint16_t) a;
		idt[i].sel = cs;
		idt[i].ist = 0;
		idt[i].type = 0x8e; /* present, DPL 0, 64-bit interrupt gate */
		idt[i].off1 = (uint16_t) (a >> 16);
		idt[i].off2 = (uint32_t) (a >> 32);
		idt[i].zero = 0;
	}
	__asm__ volatile("lidt %0" ::"m"(d));
}

/* ---- local APIC ---- */
static bool x2apic;

void x2apic_enable(void)
{
	wrmsr(MSR_IA32_APIC_BASE, rdmsr(MSR_IA32_APIC_BASE) | (1u << 11) | (1u << 10));
	x2apic = true;
	apic_write(APIC_SVR, 0x1ff); /* enabled, spurious vector 0xff */
}

/*
 * SDM Vol. 3A 11.12.5: x2APIC back to xAPIC goes through disabled
 * (EN = 0, EXTD = 0) first; a direct EXTD 1 -> 0 write is #GP.
 */
void xapic_enable(void)
{
	uint64_t base = rdmsr(MSR_IA32_APIC_BASE);

	if (base & (1u << 10))
		wrmsr(MSR_IA32_APIC_BASE, base & ~((1ull << 11) | (1ull << 10)));
	wrmsr(MSR_IA32_APIC_BASE, (base & ~(1ull << 10)) | (1u << 11));
	map_page(XAPIC_BASE, XAPIC_BASE, PTE_W | PTE_PCD);
	x2apic = false;
	apic_write(APIC_SVR, 0x1ff);
}

bool apic_x2apic_mode(void)
{
	return x2apic;
}

uint32_t apic_read(unsigned int reg)
{
	if (x2apic)
		return (uint32_t) rdmsr(0x800 + reg / 16);
	return *(volatile uint32_t *) (XAPIC_BASE + reg);
}

void apic_write(unsigned int reg, uint32_t val)
{
	if (x2apic)
		wrmsr(0x800 + reg / 16, val);
	else
		*(volatile uint32_t *) (XAPIC_BASE + reg) = val;
}

void apic_eoi(void)
{
	apic_write(APIC_EOI, 0);
}

/* ---- page tables ---- */
#define PT_POOL_PAGES 64
static uint64_t pt_pool[PT_POOL_PAGES][512] __attribute__((aligned(4096)));
static unsigned int pt_used;

static uint64_t *new_table(void)
{
	if (pt_used == PT_POOL_PAGES) {
		printf("guest lib: page-table pool exhausted\n");
		exit(0x7e);
	}
	return pt_pool[pt_used++];
}

/* The table the entry *e points to; a missing table is created, a large page split. */
static uint64_t *next_table(uint64_t *e, bool large_ok_here)
{
	uint64_t *t;

	if (!(*e & PTE_P)) {
		t = new_table();
		*e = (uint64_t) t | PTE_P | PTE_W | PTE_U;
		return t;
	}
	if (large_ok_here && (*e & PTE_PS)) {
		/* A 2 MiB page becomes 512 4 KiB pages with the same flags (PAT bit aside). */
		uint64_t base = *e & 0x000fffffffe00000ull, flags = *e & 0x1f & ~PTE_PS;

		t = new_table();
		for (int i = 0; i < 512; i++)
			t[i] = (base + (uint64_t) i * 4096) | flags | PTE_P;
		*e = (uint64_t) t | (*e & 0x1f);
		write_cr3(read_cr3());
		return t;
	}
	return (uint64_t *) (*e & PTE_ADDR);
}

static uint64_t *walk_to_pte(uint64_t va, bool create)
{
	uint64_t *t = (uint64_t *) (read_cr3() & PTE_ADDR);

	for (int level = 3; level >= 1; level--) {
		uint64_t *e = &t[(va >> (12 + 9 * level)) & 511];

		if (!create && !(*e & PTE_P))
			return 0;
		t = next_table(e, level == 1);
	}
	return &t[(va >> 12) & 511];
}

uint64_t *pte_of(uint64_t va)
{
	uint64_t *pte = walk_to_pte(va, false);

	return pte && (*pte & PTE_P) ? pte : 0;
}

void map_page(uint64_t va, uint64_t pa, uint64_t flags)
{
	uint64_t *pte = walk_to_pte(va, true);

	*pte = (pa & PTE_ADDR) | flags | PTE_P;
	invlpg(va);
}

/* ---- report ---- */
static unsigned int passed, failed, skipped;
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

void report_skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: %s", prefix);
	va_start(ap, fmt);
	vprintf_serial(fmt, ap);
	va_end(ap);
	putc_serial('\n');
	skipped++;
}

int report_summary(void)
{
	printf("SUMMARY: %u passed, %u failed, %u skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}

bool cmdline_num(const char *s, const char *end, uint64_t *ret)
{
	uint64_t v = 0;

	if (s == end)
		return false;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t) (*s - '0');
	}
	*ret = v;
	return true;
}

void cmdline_bad_word(const char *prog, const char *s, const char *end, const char *why)
{
	printf("%s: bad command-line word '", prog);
	while (s < end)
		putc_serial(*s++);
	printf("': %s\n", why);
	exit(2);
}
