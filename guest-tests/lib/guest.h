/* SPDX-License-Identifier: MIT */
/* A tiny freestanding library for vpmu guest tests: serial, MSRs, IDT, x2APIC, report. */
#ifndef GUEST_H
#define GUEST_H

#include <stdbool.h>
#include <stdint.h>

#define MSR_IA32_PMC0			0x0c1
#define MSR_IA32_PERFEVTSEL0		0x186
#define MSR_IA32_DEBUGCTL		0x1d9
#define MSR_CORE_PERF_FIXED_CTR0	0x309
#define MSR_CORE_PERF_FIXED_CTR_CTRL	0x38d
#define MSR_CORE_PERF_GLOBAL_STATUS	0x38e
#define MSR_CORE_PERF_GLOBAL_CTRL	0x38f
#define MSR_CORE_PERF_GLOBAL_OVF_CTRL	0x390
#define MSR_IA32_PMC0_FULL		0x4c1
#define MSR_IA32_PERF_CAPABILITIES	0x345
#define MSR_IA32_PEBS_ENABLE		0x3f1
#define MSR_PEBS_DATA_CFG		0x3f2
#define MSR_IA32_DS_AREA		0x600
#define MSR_LVT_PMI			0x834	/* x2APIC LVT performance counter */
#define PERF_CAP_PEBS_FORMAT(cap)	(((cap) >> 8) & 0xf)
#define GLOBAL_STATUS_BUFFER_OVF	(1ull << 62)
#define DEBUGCTL_FREEZE_PERFMON_ON_PMI	(1ull << 12)
#define EVTSEL_USR	(1ull << 16)
#define EVTSEL_OS	(1ull << 17)
#define EVTSEL_INT	(1ull << 20)
#define EVTSEL_EN	(1ull << 22)
#define EVTSEL_ADAPTIVE	(1ull << 34)	/* Adaptive_Record, PEBS format 4+ */

struct frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
	uint64_t rdi, rsi, rbp, rbx, rdx, rcx, rax;
	uint64_t vector, error;
	uint64_t rip, cs, rflags, rsp, ss;
};

typedef void (*handler_fn)(struct frame *f);

static inline void outb(uint16_t port, uint8_t v) { __asm__ volatile("outb %0, %1" :: "a"(v), "Nd"(port)); }
static inline void outw(uint16_t port, uint16_t v) { __asm__ volatile("outw %0, %1" :: "a"(v), "Nd"(port)); }
static inline void outl(uint16_t port, uint32_t v) { __asm__ volatile("outl %0, %1" :: "a"(v), "Nd"(port)); }
static inline uint8_t inb(uint16_t port) { uint8_t v; __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port)); return v; }

static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;

	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return (uint64_t)hi << 32 | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ volatile("wrmsr" :: "c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)) : "memory");
}

static inline uint64_t rdpmc(uint32_t c)
{
	uint32_t lo, hi;

	__asm__ volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(c));
	return (uint64_t)hi << 32 | lo;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

static inline void cpuid(uint32_t leaf, uint32_t sub, uint32_t *r)
{
	__asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

static inline void sti(void) { __asm__ volatile("sti" ::: "memory"); }
static inline void cli(void) { __asm__ volatile("cli" ::: "memory"); }

void putc_serial(char c);
void puts_serial(const char *s);
void printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void exit(int code) __attribute__((noreturn));

void idt_init(void);
void set_handler(unsigned int vector, handler_fn fn);

void x2apic_enable(void);
void apic_eoi(void);

void report(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void report_prefix(const char *p);
int report_summary(void);

int main(uint64_t arg);

#endif
