/* SPDX-License-Identifier: MIT */
/* A tiny freestanding library for vpmu guest tests: serial, MSRs, IDT, x2APIC, report. */
#ifndef GUEST_H
#define GUEST_H

#include <stdbool.h>
#include <stdint.h>

#define MSR_IA32_PMC0		       0x0c1
#define MSR_IA32_PERFEVTSEL0	       0x186
#define MSR_IA32_DEBUGCTL	       0x1d9
#define MSR_CORE_PERF_FIXED_CTR0       0x309
#define MSR_CORE_PERF_FIXED_CTR_CTRL   0x38d
#define MSR_CORE_PERF_GLOBAL_STATUS    0x38e
#define MSR_CORE_PERF_GLOBAL_CTRL      0x38f
#define MSR_CORE_PERF_GLOBAL_OVF_CTRL  0x390
#define MSR_IA32_PMC0_FULL	       0x4c1
#define MSR_IA32_PERF_CAPABILITIES     0x345
#define MSR_IA32_PEBS_ENABLE	       0x3f1
#define MSR_PEBS_DATA_CFG	       0x3f2
#define MSR_IA32_DS_AREA	       0x600
#define MSR_LVT_PMI		       0x834 /* x2APIC LVT performance counter */
#define MSR_IA32_APIC_BASE	       0x01b
#define PERF_CAP_PEBS_FORMAT(cap)      (((cap) >> 8) & 0xf)
#define GLOBAL_STATUS_BUFFER_OVF       (1ull << 62)
#define DEBUGCTL_FREEZE_PERFMON_ON_PMI (1ull << 12)
#define EVTSEL_USR		       (1ull << 16)
#define EVTSEL_OS		       (1ull << 17)
#define EVTSEL_INT		       (1ull << 20)
#define EVTSEL_EN		       (1ull << 22)
#define EVTSEL_ADAPTIVE		       (1ull << 34) /* Adaptive_Record, PEBS format 4+ */

struct frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
	uint64_t rdi, rsi, rbp, rbx, rdx, rcx, rax;
	uint64_t vector, error;
	uint64_t rip, cs, rflags, rsp, ss;
};

typedef void (*handler_fn)(struct frame *f);

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port));
}
static inline void outw(uint16_t port, uint16_t v)
{
	__asm__ volatile("outw %0, %1" ::"a"(v), "Nd"(port));
}
static inline void outl(uint16_t port, uint32_t v)
{
	__asm__ volatile("outl %0, %1" ::"a"(v), "Nd"(port));
}
static inline uint8_t inb(uint16_t port)
{
	uint8_t v;
	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;

	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return (uint64_t) hi << 32 | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ volatile("wrmsr" ::"c"(msr), "a"((uint32_t) v), "d"((uint32_t) (v >> 32))
			 : "memory");
}

static inline uint64_t rdpmc(uint32_t c)
{
	uint32_t lo, hi;

	__asm__ volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(c));
	return (uint64_t) hi << 32 | lo;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t) hi << 32 | lo;
}

static inline void cpuid(uint32_t leaf, uint32_t sub, uint32_t *r)
{
	__asm__ volatile("cpuid"
			 : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
			 : "a"(leaf), "c"(sub));
}

static inline void sti(void)
{
	__asm__ volatile("sti" ::: "memory");
}
static inline void cli(void)
{
	__asm__ volatile("cli" ::: "memory");
}

void putc_serial(char c);
void puts_serial(const char *s);
void printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void exit(int code) __attribute__((noreturn));

void idt_init(void);
void set_handler(unsigned int vector, handler_fn fn);

void x2apic_enable(void);
void apic_eoi(void);

/*
 * Exception-safe MSR and counter access: 0 when the instruction completed,
 * otherwise the vector it raised (13 for #GP, 6 for #UD); *ret is then 0.
 */
int rdmsr_safe(uint32_t msr, uint64_t *ret);
int wrmsr_safe(uint32_t msr, uint64_t val);
int rdpmc_safe(uint32_t ecx, uint64_t *ret);

struct cpuid_regs {
	uint32_t a, b, c, d;
};

static inline struct cpuid_regs cpuid_regs(uint32_t leaf, uint32_t sub)
{
	uint32_t r[4];

	cpuid(leaf, sub, r);
	return (struct cpuid_regs){ r[0], r[1], r[2], r[3] };
}

/*
 * Whether the processor brand string (CPUID 80000002H-80000004H) contains
 * WANT: vpmu-vmm's emulator says "vpmu virtual CPU ... exact counting
 * emulator" there, so a test knows when counts are exact.
 */
bool cpu_brand_has(const char *want);

/*
 * The local APIC in whichever mode was enabled last: registers by their
 * xAPIC MMIO offset (SDM Vol. 3A Table 11-1); in x2APIC mode the MSR is
 * 0x800 + offset / 16 (Table 11-6).
 */
#define APIC_EOI	0x0b0
#define APIC_SVR	0x0f0
#define APIC_LVTPC	0x340
#define APIC_LVT_MASKED (1u << 16)
#define APIC_DM_NMI	(4u << 8)
#define XAPIC_BASE	0xfee00000ull
void xapic_enable(void); /* maps the xAPIC page uncached and enables it */
bool apic_x2apic_mode(void);
uint32_t apic_read(unsigned int reg);
void apic_write(unsigned int reg, uint32_t val);

/*
 * Page tables the test can change: the loader's 4-level tables (CR3) with
 * new tables taken from a static pool; a 2 MiB page is split on demand.
 */
#define PTE_P	 (1ull << 0)
#define PTE_W	 (1ull << 1)
#define PTE_U	 (1ull << 2)
#define PTE_PCD	 (1ull << 4)
#define PTE_PS	 (1ull << 7)
#define PTE_ADDR 0x000ffffffffff000ull

static inline uint64_t read_cr3(void)
{
	uint64_t v;

	__asm__ volatile("mov %%cr3, %0" : "=r"(v));
	return v;
}

static inline void write_cr3(uint64_t v)
{
	__asm__ volatile("mov %0, %%cr3" ::"r"(v) : "memory");
}
static inline void invlpg(uint64_t va)
{
	__asm__ volatile("invlpg (%0)" ::"r"(va) : "memory");
}

/* Map the 4 KiB page at va onto pa with flags (PTE_P is implied) and flush it. */
void map_page(uint64_t va, uint64_t pa, uint64_t flags);
/* The 4 KiB page-table entry for va (splitting a 2 MiB page), or NULL when unmapped. */
uint64_t *pte_of(uint64_t va);

/*
 * Ring 3 (ring3.c): our own GDT, the loader's kernel selectors kept where
 * they were, user segments and a TSS whose RSP0 interrupts from CPL 3 use.
 */
#define KERNEL_CS 0x08
#define KERNEL_DS 0x10
#define USER_DS	  (0x18 | 3)
#define USER_CS	  (0x20 | 3)
#define TSS_SEL	  0x28
#define str(x)	  #x
#define xstr(x)	  str(x) /* a selector into an asm string */

struct desc_ptr {
	uint16_t limit;
	uint64_t base;
} __attribute__((packed));

extern uint8_t user_stack[4096]; /* user code's stack: ring3_make_user() it */
/* Load that GDT, reload CS/DS/ES/SS and the task register. */
void ring3_gdt_load(void);
/* A DPL-3 interrupt gate at vector to entry, so INT vector from ring 3 reaches ring 0. */
void ring3_gate_install(unsigned int vector, const void *entry);
/* Set U on every paging level that maps va. */
void ring3_make_user(uint64_t va);

/* Command-line words (--append): the decimal in [s, end); false if it is not one or overflows. */
bool cmdline_num(const char *s, const char *end, uint64_t *ret);
/* "PROG: bad command-line word 'W': why", then exit status 2. */
void cmdline_bad_word(const char *prog, const char *s, const char *end, const char *why)
	__attribute__((noreturn));

void report(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void report_prefix(const char *p);
void report_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "SUMMARY: N passed, M failed, K skipped"; returns the exit code (1 when any failed). */
int report_summary(void);

int main(uint64_t arg);

#endif
