/* SPDX-License-Identifier: MIT */
/*
 * The cheapest MSR emulation there is: a bounds check and an array slot,
 * built as a shared library like libvpmu so that the benchmark compares
 * emulation work with emulation work, the call through the PLT included.
 */
#include <stdint.h>

#include "baseline-regs.h"

int baseline_msr_read(struct baseline_regs *r, uint32_t msr, uint64_t *ret_value)
{
	if (msr >= BASELINE_NR_MSRS)
		return -1;
	*ret_value = r->regs[msr];
	return 0;
}

int baseline_msr_write(struct baseline_regs *r, uint32_t msr, uint64_t value)
{
	if (msr >= BASELINE_NR_MSRS)
		return -1;
	r->regs[msr] = value;
	return 0;
}
