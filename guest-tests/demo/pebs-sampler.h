/* SPDX-License-Identifier: MIT */
/*
 * PEBS sampling on GP0 as perf samples by default, for the speed guests
 * (bench.c, peer.c): a record every SAMPLER_PERIOD events into a 64 KiB
 * buffer with the threshold one record below its end, so a PMI comes each
 * time the buffer fills; the handler counts the records and empties it.
 * The includer defines PMI_VECTOR and installs sampler_on_pmi there.
 */
#ifndef GUEST_PEBS_SAMPLER_H
#define GUEST_PEBS_SAMPLER_H

#include "guest.h"
#include "vpmu/pebs.h" /* the DS save area layout */

#define SAMPLER_PERIOD	 10000
#define SAMPLER_BUF_SIZE 65536

/* DS save area, 64-bit layout (SDM Vol. 3B Figure 20-8), as qwords */
#define DS(off) sampler_ds[(off) / 8]
static volatile uint64_t sampler_ds[16] __attribute__((aligned(64)));
static uint8_t sampler_buf[SAMPLER_BUF_SIZE] __attribute__((aligned(4096)));
static volatile uint64_t sampler_pmis, sampler_records;
static uint64_t sampler_record_size;

/* Count what the buffer holds and empty it. */
static void sampler_drain(void)
{
	sampler_records += (DS(DS_PEBS_INDEX) - DS(DS_PEBS_BASE)) / sampler_record_size;
	DS(DS_PEBS_INDEX) = DS(DS_PEBS_BASE);
}

static void sampler_on_pmi(struct frame *f)
{
	sampler_pmis++;
	sampler_drain();
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	apic_eoi();
}

/* GP0 counts `event` (EVTSEL bits 15:0) with PEBS, from -SAMPLER_PERIOD. */
static void sampler_start(uint16_t event)
{
	uint64_t base = (uint64_t) sampler_buf;
	uint32_t r[4];

	cpuid(1, 0, r);
	/* format 3: 200 bytes; adaptive without Adaptive_Record: the 32-byte Basic group */
	sampler_record_size =
		r[2] & (1u << 15) && PERF_CAP_PEBS_FORMAT(rdmsr(MSR_IA32_PERF_CAPABILITIES)) == 3
			? 200
			: 32;
	DS(DS_PEBS_BASE) = base;
	DS(DS_PEBS_INDEX) = base;
	DS(DS_PEBS_ABS_MAX) = base + SAMPLER_BUF_SIZE / sampler_record_size * sampler_record_size;
	DS(DS_PEBS_THRESHOLD) = DS(DS_PEBS_ABS_MAX) - sampler_record_size;
	DS(DS_PEBS_GP_RESET(0)) = (1ull << 48) - SAMPLER_PERIOD;
	wrmsr(MSR_IA32_DS_AREA, (uint64_t) sampler_ds);
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	wrmsr(MSR_IA32_PMC0_FULL, (1ull << 48) - SAMPLER_PERIOD);
	wrmsr(MSR_IA32_PERFEVTSEL0, event | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
	wrmsr(MSR_IA32_PEBS_ENABLE, 1);
}

#endif
