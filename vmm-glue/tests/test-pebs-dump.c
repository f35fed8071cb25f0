/* SPDX-License-Identifier: MIT */
/*
 * vpmu-vmm --pebs-dump (pebs-dump.c): a vCPU writes PEBS records into
 * guest RAM (legacy through the DS area and 4-level page tables,
 * architectural at a physical base), the dump holds the header the
 * PEBS MSRs give and exactly the record bytes; and the errors a guest
 * can cause give one line. DS offsets are the SDM's (Vol. 3B Figure
 * 20-8), written as literals.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pebs-dump.h"
#include "vpmu/pebs.h"

#define RAM_SIZE (4u << 20)
#define CR3	 0x10000ULL
#define DS_LA	 0xffff888000100000ULL
#define DS_PA	 0x100000ULL
#define BUF_LA	 0xffffc90000000000ULL
#define BUF_PA	 0x200000ULL

static uint8_t *ram;
static char path[64];
static char err[256];

static void wr64(uint64_t pa, uint64_t v)
{
	memcpy(ram + pa, &v, 8);
}

static uint64_t rd64(uint64_t pa)
{
	uint64_t v;

	memcpy(&v, ram + pa, 8);
	return v;
}

static void map(uint64_t *next, uint64_t la, uint64_t pa)
{
	uint64_t table = CR3;

	for (int level = 3; level > 0; level--) {
		unsigned int idx = (la >> (12 + 9 * level)) & 0x1ff;
		uint64_t e = rd64(table + 8 * idx);

		if (!(e & 1)) {
			e = *next | 3;
			*next += 4096;
			wr64(table + 8 * idx, e);
		}
		table = e & 0x000ffffffffff000ULL;
	}
	wr64(table + 8 * ((la >> 12) & 0x1ff), pa | 3);
}

static const struct vpmu_paging paging = {
	.cr0 = (1ULL << 31) | 1, .cr3 = CR3, .cr4 = 1ULL << 5, .efer = (1ULL << 8) | (1ULL << 10)
};

static int regs(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *r)
{
	memset(r, 0, sizeof(*r));
	r->rip = 0x401000;
	r->cr0 = paging.cr0;
	r->cr3 = paging.cr3;
	r->cr4 = paging.cr4;
	r->efer = paging.efer;
	r->long_mode = true;
	return 0;
}

static struct vpmu_vcpu *vcpu(const char *model)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_mem_region r = { .gpa = 0, .size = RAM_SIZE, .hva = ram };

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.regs = regs;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	cr_assert_eq(vpmu_vcpu_set_memory(v, &r, 1), 0);
	return v;
}

static void wr(struct vpmu_vcpu *v, uint32_t msr, uint64_t val)
{
	cr_assert_eq(vpmu_msr_write(v, msr, val), 0, "wrmsr %#x", msr);
}

/* n overflows of GP0 (INST_RETIRED.PREC_DIST, reloaded to -1 from the DS / CFG_C). */
static void overflow(struct vpmu_vcpu *v, int n)
{
	struct vpmu_exact_counts c = { .instructions = 1, .cycles = 1, .last_ip = 0x401000 };

	vpmu_vcpu_sync(v);
	for (int i = 0; i < n; i++)
		cr_assert_eq(vpmu_exact_feed(v, &c), 0);
}

static size_t read_dump(uint8_t *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	cr_assert_not_null(f, "%s written", path);
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

static void setup(void)
{
	ram = aligned_alloc(4096, RAM_SIZE);
	cr_assert_not_null(ram);
	memset(ram, 0, RAM_SIZE);
	snprintf(path, sizeof(path), "/tmp/vpmu-pebs-dump-%d", (int) getpid());
	err[0] = '\0';
}

static void teardown(void)
{
	unlink(path);
	free(ram);
}

TestSuite(pebs_dump, .init = setup, .fini = teardown);

Test(pebs_dump, legacy_through_the_ds_area)
{
	struct vpmu_vcpu *v = vcpu("Skylake-Server");
	uint64_t next = CR3 + 4096;
	static uint8_t out[4096];
	struct vpmu_pebs_dump_header h;
	size_t n;

	map(&next, DS_LA, DS_PA);
	map(&next, BUF_LA, BUF_PA);
	wr64(DS_PA + 0x20, BUF_LA);	   /* PEBS buffer base */
	wr64(DS_PA + 0x28, BUF_LA);	   /* PEBS index */
	wr64(DS_PA + 0x30, BUF_LA + 4096); /* absolute maximum */
	wr64(DS_PA + 0x38, BUF_LA + 2048); /* interrupt threshold */
	wr64(DS_PA + 0x40, 0xffffffffffffULL);
	wr(v, 0x600, DS_LA);
	wr(v, 0x4c1, 0xffffffffffffULL);
	wr(v, 0x186, 0x4301c0);
	wr(v, 0x3f1, 1);
	overflow(v, 2);
	cr_assert_eq(rd64(DS_PA + 0x28), BUF_LA + 400, "two 200-byte format 3 records");

	cr_assert_eq(pebs_dump_write(v, &paging, ram, RAM_SIZE, path, err, sizeof(err)), 0, "%s",
		     err);
	n = read_dump(out, sizeof(out));
	cr_assert_eq(n, sizeof(h) + 400);
	memcpy(&h, out, sizeof(h));
	cr_expect_eq(memcmp(h.magic, "VPMUPEBS", 8), 0);
	cr_expect_eq(h.version, 1);
	cr_expect_eq(h.header_size, sizeof(h));
	cr_expect_str_eq(h.model, "Skylake-Server");
	cr_expect_eq(h.perf_capabilities, 0x33c5, "IA32_PERF_CAPABILITIES of Skylake-Server");
	cr_expect_eq(h.pebs_enable, 1);
	cr_expect_eq(h.ds_area, DS_LA);
	cr_expect_eq(h.pebs_base, BUF_LA);
	cr_expect_eq(h.pebs_index, BUF_LA + 400);
	cr_expect_eq(h.pebs_threshold, BUF_LA + 2048);
	cr_expect_eq(h.records_len, 400);
	cr_expect_eq(memcmp(out + sizeof(h), ram + BUF_PA, 400), 0, "the records, byte for byte");

	/* the guest's mistakes: one line each, no file left */
	wr64(DS_PA + 0x28, BUF_LA + (1ULL << 30));
	cr_expect_eq(pebs_dump_write(v, &paging, ram, RAM_SIZE, path, err, sizeof(err)), -EFBIG);
	cr_expect(strstr(err, "not a buffer to dump") && !strchr(err, '\n'), "%s", err);
	wr(v, 0x600, DS_LA + 0x200000); /* not mapped */
	cr_expect_eq(pebs_dump_write(v, &paging, ram, RAM_SIZE, path, err, sizeof(err)), -EFAULT);
	cr_expect(strstr(err, "is not mapped by the guest's page tables"), "%s", err);
	vpmu_vcpu_free(v);
}

Test(pebs_dump, architectural_at_its_physical_base)
{
	struct vpmu_vcpu *v = vcpu("arch-pebs");
	static uint8_t out[4096];
	struct vpmu_pebs_dump_header h;

	wr(v, 0x3f4, 0x300000);			      /* 4 KiB at 3 MiB */
	wr(v, 0x3f5, (1ULL << 32) | (0x80ULL << 36)); /* EN, threshold 0x800 */
	wr(v, 0x1903, (1ULL << 63) | 0xffffffffULL);  /* EN, reload -1 */
	wr(v, 0x4c1, 0xffffffffffffULL);
	wr(v, 0x186, 0x4300c0);
	overflow(v, 3);
	cr_assert_eq(pebs_dump_write(v, &paging, ram, RAM_SIZE, path, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(read_dump(out, sizeof(out)), sizeof(h) + 3 * 64, "three 64-byte records");
	memcpy(&h, out, sizeof(h));
	cr_expect_eq(h.pebs_base, 0x300000);
	cr_expect_eq(h.pebs_index, 3 * 64);
	cr_expect_eq(h.pebs_threshold, 0x800);
	cr_expect_eq(h.records_len, 3 * 64);
	cr_expect_eq(memcmp(out + sizeof(h), ram + 0x300000, 3 * 64), 0);

	/* a buffer outside guest RAM */
	unlink(path);
	wr(v, 0x3f4, 0x3ff000);
	cr_expect_eq(pebs_dump_write(v, &paging, ram, 0x3ff000 + 64, path, err, sizeof(err)),
		     -EFAULT);
	cr_expect(strstr(err, "outside guest RAM"), "%s", err);
	cr_expect_eq(access(path, F_OK), -1, "no file for a refused dump");
	vpmu_vcpu_free(v);
}

Test(pebs_dump, host_mistakes)
{
	struct vpmu_vcpu *v = vcpu("Icelake-Server");

	cr_expect_eq(pebs_dump_write(NULL, &paging, ram, RAM_SIZE, path, err, sizeof(err)),
		     -ENODEV);
	cr_expect(strstr(err, "no vPMU"), "%s", err);
	cr_expect_eq(
		pebs_dump_write(v, &paging, ram, RAM_SIZE, "/nonexistent/dir/f", err, sizeof(err)),
		-ENOENT);
	cr_expect(strstr(err, "cannot create"), "%s", err);
	vpmu_vcpu_free(v);
}
