/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the snapshot restore parser (vpmu_vcpu_restore). A
 * blob comes from disk or the network on migration: a damaged or hostile
 * one must be refused, never crash, and never half-apply. Byte 0 picks
 * the model (bits 1:0) and the model of a genuine blob (bits 3:2); the
 * rest is used twice:
 *   - as a blob itself, as it is, and again with its CRC fixed (so the
 *     fuzzer reaches past the checksum into the records);
 *   - as edits (offset, xor) to a genuine blob of a busy vCPU, resealed,
 *     so the parser sees nearly-valid records and values.
 * Contract checked: only 0, -EBADMSG, -EPROTONOSUPPORT, -EXDEV; a refused
 * restore leaves the vCPU's blob byte-identical; an accepted one gives a
 * vCPU whose own blob restores again into a fresh vCPU and reads the
 * same MSRs, and that keeps working (sync, feed, RDPMC).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vpmu/vpmu.h"
#include "fuzz.h"

#define MAX_BLOB 16384

static const char *const models[] = { "Skylake-Server", "Icelake-Server", "LunarLake",
				      "arch-pebs" };

static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
	uint32_t crc = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return ~crc;
}

/* The header's CRC-32 (at 18H, over the blob with it zeroed) made right. */
static void reseal(uint8_t *b, size_t n)
{
	uint32_t crc;

	if (n < 64)
		return;
	memset(b + 0x18, 0, 4);
	crc = crc32_ieee(b, n);
	for (int i = 0; i < 4; i++)
		b[0x18 + i] = (uint8_t) (crc >> (8 * i));
}

static void quiet(void *data, enum vpmu_log_level level, const char *msg)
{
	CHECK(msg && *msg && !strchr(msg, '\n'));
}

static struct vpmu_vcpu *make(const char *model)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.log = quiet;
	CHECK(vpmu_vcpu_new(&cfg, &v) == 0);
	return v;
}

static size_t save(struct vpmu_vcpu *v, uint8_t *buf)
{
	size_t len = 0;

	CHECK(vpmu_vcpu_save(v, buf, MAX_BLOB, &len) == 0);
	CHECK(len <= MAX_BLOB);
	return len;
}

/* A vCPU with something in every MSR it lets a guest write. */
static void busy(struct vpmu_vcpu *v)
{
	uint32_t msrs[512];
	size_t n = vpmu_msr_list(v, msrs, 512);
	struct vpmu_exact_counts c = { .instructions = 777, .cycles = 999, .ref_cycles = 800 };
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	for (size_t i = 0; i < n && i < 512; i++) {
		uint64_t ok = 0;

		for (unsigned int b = 0; b < 64; b++)
			if (vpmu_msr_write(v, msrs[i], 1ULL << b) == 0)
				ok |= 1ULL << b;
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		vpmu_msr_write(v, msrs[i], x & ok);
	}
	vpmu_vcpu_sync(v);
	vpmu_exact_feed(v, &c);
}

/* Restore `b` into a fresh vCPU and check the contract. */
static void try_restore(const char *model, const uint8_t *b, size_t n)
{
	static uint8_t before[MAX_BLOB], after[MAX_BLOB], again[MAX_BLOB];
	struct vpmu_vcpu *v = make(model), *w;
	struct vpmu_exact_counts c = { .instructions = 3, .cycles = 3, .ref_cycles = 3 };
	size_t lb = save(v, before), la;
	uint64_t x, y;
	int r = vpmu_vcpu_restore(v, b, n);

	CHECK(r == 0 || r == -EBADMSG || r == -EPROTONOSUPPORT || r == -EXDEV);
	la = save(v, after);
	if (r < 0) {
		CHECK(la == lb && !memcmp(before, after, la));
		vpmu_vcpu_free(v);
		return;
	}
	/* accepted: it round-trips and keeps counting */
	w = make(model);
	CHECK(vpmu_vcpu_restore(w, after, la) == 0);
	CHECK(save(w, again) == la && !memcmp(after, again, la));
	for (uint32_t i = 0; i < 2; i++) {
		CHECK(vpmu_rdpmc(v, i, &x) == 0 && vpmu_rdpmc(w, i, &y) == 0 && x == y);
	}
	vpmu_vcpu_sync(v);
	CHECK(vpmu_exact_feed(v, &c) == 0);
	vpmu_vcpu_sync(v);
	vpmu_vcpu_free(w);
	vpmu_vcpu_free(v);
}

/* A genuine blob of a busy vCPU of model `m`, made once. */
static size_t genuine(unsigned int m, uint8_t *out)
{
	static uint8_t blobs[4][MAX_BLOB];
	static size_t lens[4];

	if (!lens[m]) {
		struct vpmu_vcpu *src = make(models[m]);

		busy(src);
		lens[m] = save(src, blobs[m]);
		vpmu_vcpu_free(src);
	}
	memcpy(out, blobs[m], lens[m]);
	return lens[m];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t blob[MAX_BLOB];
	const char *model;
	size_t n;

	if (!size)
		return 0;
	model = models[data[0] % 4];
	/* the input as edits to a genuine blob, of another model when bits 3:2 say so */
	n = genuine((data[0] >> 2) % 4, blob);
	data++;
	size--;
	for (size_t i = 0; i + 3 <= size; i += 3) {
		size_t off = ((size_t) data[i] | (size_t) data[i + 1] << 8) % n;

		blob[off] ^= data[i + 2];
	}
	if (size % 7 == 1)
		n -= 8 * (1 + size % 5); /* truncated */
	reseal(blob, n);
	try_restore(model, blob, n);

	/* the input as a blob, raw and resealed */
	n = size < MAX_BLOB ? size : MAX_BLOB;
	memcpy(blob, data, n);
	try_restore(model, blob, n);
	reseal(blob, n);
	try_restore(model, blob, n);
	return 0;
}
