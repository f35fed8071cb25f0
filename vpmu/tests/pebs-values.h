/* SPDX-License-Identifier: MIT */
/*
 * Distinct, recognisable LBR and counter values for PEBS record tests,
 * shared by the builder tests (vpmu/tests) and the decoder tests
 * (host-tools/tests) so that both sides agree on what a record holds.
 */
#ifndef VPMU_TEST_PEBS_VALUES_H
#define VPMU_TEST_PEBS_VALUES_H

#include "vpmu/pebs.h"

#define PEBS_TEST_LBRS 64

static inline void pebs_test_values(struct pebs_lbr_entry lbrs[PEBS_TEST_LBRS],
				    struct pebs_counters *counters)
{
	for (unsigned int i = 0; i < PEBS_TEST_LBRS; i++) {
		lbrs[i].from = 0x4000000000000000ULL | (0x1000ULL * (i + 1));
		lbrs[i].to = 0x5000000000000000ULL | (0x1000ULL * (i + 1)) | 0x8;
		lbrs[i].info = 0x6000000000000000ULL | (i + 1);
	}
	for (unsigned int i = 0; i < 32; i++)
		counters->pmc[i] = 0x0000a10000000000ULL + i;
	for (unsigned int i = 0; i < 16; i++)
		counters->fixed[i] = 0x0000f10000000000ULL + i;
	counters->metrics_base = 0x0000b45e00000003ULL;
	counters->metrics = 0x1122334455667788ULL;
}

#endif
