/* SPDX-License-Identifier: MIT */
/*
 * bench/bench-emu's guest: a loop of a known instruction count, run in the
 * mode the host passes in RDI: 0 no counters, 1 every counter counting
 * with no overflow near, 2 GP0 a PEBS counter on INST_RETIRED.PREC_DIST
 * with a period of 10 000 (counter and DS reset slot at -10 000), a
 * 64 KiB buffer as perf's default, the threshold one record below its end:
 * a PMI each time the buffer fills, which empties it.
 */
#include "guest.h"
#include "vpmu/pebs.h" /* the DS save area layout */

#define PMI_VECTOR 0xf0
#define PERIOD	   10000
#define ITERATIONS 25000000ull /* 4 instructions each: 100M, so setup is noise */
#define BUF_SIZE   65536

/* DS save area, 64-bit layout (SDM Vol. 3B Figure 20-8), as qwords */
#define DS(off) ds_area[(off) / 8]
static volatile uint64_t ds_area[16] __attribute__((aligned(64)));
static uint8_t pebs_buf[BUF_SIZE] __attribute__((aligned(4096)));
static volatile uint64_t pmis, records;
static uint64_t record_size;

static void on_pmi(struct frame *f)
{
	pmis++;
	records += (DS(DS_PEBS_INDEX) - DS(DS_PEBS_BASE)) / record_size;
	DS(DS_PEBS_INDEX) = DS(DS_PEBS_BASE);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	apic_eoi();
}

static void pebs_setup(void)
{
	uint64_t base = (uint64_t) pebs_buf;
	uint32_t r[4];

	cpuid(1, 0, r);
	/* format 3: 200 bytes; adaptive without Adaptive_Record: the 32-byte Basic group */
	record_size =
		r[2] & (1u << 15) && PERF_CAP_PEBS_FORMAT(rdmsr(MSR_IA32_PERF_CAPABILITIES)) == 3
			? 200
			: 32;
	DS(DS_PEBS_BASE) = base;
	DS(DS_PEBS_INDEX) = base;
	DS(DS_PEBS_ABS_MAX) = base + BUF_SIZE / record_size * record_size;
	DS(DS_PEBS_THRESHOLD) = DS(DS_PEBS_ABS_MAX) - record_size;
	DS(DS_PEBS_GP_RESET(0)) = (1ull << 48) - PERIOD;
	wrmsr(MSR_IA32_DS_AREA, (uint64_t) ds_area);
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	wrmsr(MSR_IA32_PMC0_FULL, (1ull << 48) - PERIOD);
	wrmsr(MSR_IA32_PERFEVTSEL0, 0x1c0 | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
	wrmsr(MSR_IA32_PEBS_ENABLE, 1);
}

int main(uint64_t mode)
{
	uint64_t n = ITERATIONS, acc = 0;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	sti();
	if (mode == 1) {
		for (int i = 0; i < 4; i++) {
			wrmsr(MSR_IA32_PMC0_FULL + i, 0);
			wrmsr(MSR_IA32_PERFEVTSEL0 + i, (i == 0	  ? 0xc0
							 : i == 1 ? 0xc4
							 : i == 2 ? 0x81d0
								  : 0x3c) |
								EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
		}
		wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x333);
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0x70000000full);
	} else if (mode == 2) {
		pebs_setup();
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
	}
	__asm__ volatile("1:\n\t"
			 "add %1, %0\n\t"
			 "xor $5, %0\n\t"
			 "dec %1\n\t"
			 "jnz 1b"
			 : "+r"(acc), "+r"(n));
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	if (mode == 2)
		records += (DS(DS_PEBS_INDEX) - DS(DS_PEBS_BASE)) / record_size;
	printf("bench mode %lu: %llu loop instructions, %lu PMIs, %lu PEBS records, acc %lx\n",
	       mode, ITERATIONS * 4, pmis, records, acc);
	exit(0);
}
