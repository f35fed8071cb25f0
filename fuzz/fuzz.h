/* SPDX-License-Identifier: MIT */
/* Shared by the libFuzzer targets. */
#ifndef VPMU_FUZZ_H
#define VPMU_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken contract is a finding: abort, which libFuzzer reports with the input. */
#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)

#endif
