/* SPDX-License-Identifier: MIT */
#ifndef BENCH_BASELINE_REGS_H
#define BENCH_BASELINE_REGS_H

#include <stdint.h>

#define BASELINE_NR_MSRS 0x800

struct baseline_regs {
	uint64_t regs[BASELINE_NR_MSRS];
};

int baseline_msr_read(struct baseline_regs *r, uint32_t msr, uint64_t *ret_value);
int baseline_msr_write(struct baseline_regs *r, uint32_t msr, uint64_t value);

#endif
