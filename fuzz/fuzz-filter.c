/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: arbitrary text as a PMU event filter file
 * (vpmu_filter_parse, docs/pmu-filter.md). The file is the host user's,
 * not the guest's, but a bad one must still never crash the VMM: it gets
 * one line saying what is wrong. The last byte picks the error buffer's
 * size (0 included). Besides the sanitizers it checks the contract:
 * only 0, -EINVAL or -ENOMEM; on -EINVAL no filter and, with room for
 * it, a non-empty single line NUL-terminated inside the buffer; on
 * success, a filter that never lets AnyThread count (PERFEVTSEL bit 21,
 * under every filter), answers every event select and fixed counter,
 * and frees cleanly.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vpmu/vpmu.h"
#include "fuzz.h"

#define ERR_MAX	  256
#define ANYTHREAD (1ull << 21)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vpmu_filter *f = (struct vpmu_filter *) &f; /* not NULL: must be reset */
	char err[ERR_MAX + 1];
	size_t err_size = size ? data[size - 1] % (ERR_MAX + 1) : 0;
	char *text = malloc(size + 1);
	int r;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(err, 'X', sizeof(err));
	r = vpmu_filter_parse(text, &f, err_size ? err : NULL, err_size);
	CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
	if (r < 0) {
		if (err_size) {
			size_t len = strnlen(err, err_size);

			CHECK(len < err_size);
			CHECK(len > 0 || err_size == 1);
			CHECK(!memchr(err, '\n', len));
		}
		CHECK(err[err_size] == 'X' || !err_size); /* nothing past the buffer */
	} else {
		CHECK(f != NULL);
		for (uint64_t ev = 0; ev < 0x10000; ev += 0x0101) {
			uint64_t sel = ev | 3ull << 16 | 1ull << 22; /* USR OS EN */

			(void) vpmu_filter_allows_gp(f, sel);
			CHECK(!vpmu_filter_allows_gp(f, sel | ANYTHREAD));
		}
		for (unsigned int i = 0; i < 64; i++)
			(void) vpmu_filter_allows_fixed(f, i);
		vpmu_filter_free(f);
	}
	free(text);
	return 0;
}
