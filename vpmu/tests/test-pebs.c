/* SPDX-License-Identifier: MIT */
/*
 * The PEBS assist end to end: counters overflow, records land in a guest
 * DS buffer through real 4- and 5-level page tables, counters reload from
 * the DS reset slots, the threshold raises OvfBuffer and a PMI. Offsets
 * are the SDM's (Vol. 3B Figure 20-8, Figure 22-69, 22.9.2), written
 * here as literals.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpmu/vpmu.h"
#include "facts.h"

#define RAM_SIZE (16ULL << 20)
#define PROP_RAM (2ULL << 20) /* the property test's smaller guest */
#define PTE_P	 B(0)
#define PTE_RW	 B(1)
#define PTE_US	 B(2)
#define PTE_PS	 B(7)
#define CR0_PG	 B(31)
#define CR0_WP	 B(16)
#define CR4_PAE	 B(5)
#define CR4_LA57 B(12)
#define EFER_LME B(8)
#define EFER_LMA B(10)

/* the guest's virtual layout differs from its physical one */
#define DS_LA	0xffff888000100000ULL /* DS management area, 1 page */
#define DS_PA	0x200000ULL
#define BUF_LA	0xffffc90000000000ULL /* PEBS buffer: 2 pages, far apart physically */
#define BUF_PA0 0x300000ULL
#define BUF_PA1 0x250000ULL

static uint8_t *ram;
static uint64_t next_table;
static unsigned int levels;
static int pmis;
static int regs_fail;

static uint64_t rd64(uint64_t pa)
{
	uint64_t v;

	memcpy(&v, ram + pa, 8);
	return v;
}

static void wr64(uint64_t pa, uint64_t v)
{
	memcpy(ram + pa, &v, 8);
}

static uint64_t alloc_table(void)
{
	uint64_t pa = next_table;

	next_table += 0x1000;
	memset(ram + pa, 0, 0x1000);
	return pa;
}

/* Map one 4 KiB page (or a 2 MiB page with large) in the current tables. */
static void map(uint64_t cr3, uint64_t la, uint64_t pa, uint64_t flags, bool large)
{
	uint64_t table = cr3;
	unsigned int last = large ? 1 : 0;

	for (int level = (int) levels - 1; level > (int) last; level--) {
		unsigned int idx = (la >> (12 + 9 * level)) & 0x1ff;
		uint64_t e = rd64(table + 8 * idx);

		if (!(e & PTE_P)) {
			e = alloc_table() | PTE_P | PTE_RW;
			wr64(table + 8 * idx, e);
		}
		table = e & 0x000ffffffffff000ULL;
	}
	wr64(table + 8 * ((la >> (12 + 9 * last)) & 0x1ff), pa | flags | (large ? PTE_PS : 0));
}

struct guest {
	struct vpmu_vcpu *v;
	struct vpmu_guest_regs regs;
};

static struct guest g;

static void on_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	pmis++;
}

static int get_regs(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *ret)
{
	if (regs_fail)
		return -EAGAIN;
	*ret = g.regs;
	return 0;
}

static void setup(const char *model, unsigned int nlevels)
{
	struct vpmu_config cfg;
	struct vpmu_mem_region r;
	uint64_t cr3;

	if (!ram)
		ram = aligned_alloc(4096, RAM_SIZE);
	cr_assert_not_null(ram);
	memset(ram, 0, RAM_SIZE);
	levels = nlevels;
	next_table = 0x10000;
	cr3 = alloc_table();
	map(cr3, DS_LA, DS_PA, PTE_P | PTE_RW, false);
	map(cr3, BUF_LA, BUF_PA0, PTE_P | PTE_RW, false);
	map(cr3, BUF_LA + 0x1000, BUF_PA1, PTE_P | PTE_RW, false);

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.pmi = on_pmi;
	cfg.regs = get_regs;
	pmis = 0;
	regs_fail = 0;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &g.v), 0);
	r = (struct vpmu_mem_region){ .gpa = 0, .size = RAM_SIZE, .hva = ram };
	cr_assert_eq(vpmu_vcpu_set_memory(g.v, &r, 1), 0);

	memset(&g.regs, 0, sizeof(g.regs));
	g.regs.rip = 0x401005;
	g.regs.rflags = 0x246;
	for (unsigned int i = 0; i < 16; i++)
		g.regs.gpr[i] = 0x1111111100000000ULL * (i + 1) + i; /* RAX=0x..0, RCX=0x..1, ... */
	for (unsigned int i = 0; i < 16; i++)
		memset(g.regs.xmm[i], 0xa0 + i, 16);
	g.regs.cr0 = CR0_PG | CR0_WP | 1;
	g.regs.cr3 = cr3;
	g.regs.cr4 = CR4_PAE | (nlevels == 5 ? CR4_LA57 : 0);
	g.regs.efer = EFER_LME | EFER_LMA;
	g.regs.tsc = 0x123456789aULL;
	g.regs.long_mode = true;
	g.regs.sse = true;
}

static void wr(uint32_t msr, uint64_t val)
{
	cr_assert_eq(vpmu_msr_write(g.v, msr, val), 0, "wrmsr %#x %#llx", msr,
		     (unsigned long long) val);
}

static uint64_t rd(uint32_t msr)
{
	uint64_t val = 0;

	cr_assert_eq(vpmu_msr_read(g.v, msr, &val), 0, "rdmsr %#x", msr);
	return val;
}

/* DS area: PEBS base/index/max/threshold at 20H..38H, resets from 40H */
static void ds(uint64_t index_off, uint64_t max_off, uint64_t thresh_off)
{
	wr64(DS_PA + 0x20, BUF_LA);
	wr64(DS_PA + 0x28, BUF_LA + index_off);
	wr64(DS_PA + 0x30, BUF_LA + max_off);
	wr64(DS_PA + 0x38, BUF_LA + thresh_off);
	wr(0x600, DS_LA);
}

/* Guest linear address in the buffer -> physical, as mapped above. */
static uint64_t buf_pa(uint64_t off)
{
	return off < 0x1000 ? BUF_PA0 + off : BUF_PA1 + off - 0x1000;
}

static uint64_t buf64(uint64_t off)
{
	uint8_t b[8];

	for (unsigned int i = 0; i < 8; i++)
		b[i] = ram[buf_pa(off + i)];
	return rd64((uint64_t) (b - ram));
}

static void run(uint64_t n, uint64_t last_ip)
{
	struct vpmu_exact_counts c = {
		.instructions = n,
		.cycles = n,
		.ref_cycles = n,
		.last_ip = last_ip,
		.last_dla = 0x7fff0010,
	};

	cr_assert_eq(vpmu_exact_feed(g.v, &c), 0);
}

static struct vpmu_stats stats(void)
{
	struct vpmu_stats st;

	vpmu_vcpu_sync(g.v);
	cr_assert_eq(vpmu_stats_read(g.v, &st), 0);
	return st;
}

/* Format 3: the 200-byte record, legacy GPR order, reload from 40H. */
Test(pebs, format3_record_and_reload)
{
	setup("Skylake-Server", 4);
	ds(0, 0x1000, 0x1000);
	wr64(DS_PA + 0x40, 0xffffffffff38ULL); /* GP0 reset: -200 */
	wr(0x4c1, 0xffffffffff9cULL);	       /* -100 */
	wr(0x186, 0x4301c0);		       /* INST_RETIRED.PREC_DIST, USR OS EN */
	wr(0x3f1, 1);
	vpmu_vcpu_sync(g.v);
	run(99, 0x400000);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA, "no record before the overflow");
	run(1, 0x401000);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 200, "index advanced by one record");
	cr_expect_eq(buf64(0x00), 0x246, "RFLAGS");
	cr_expect_eq(buf64(0x08), 0x401005, "RIP: trap-like, the next instruction");
	/* legacy order RAX, RBX, RCX, RDX, RSI, RDI, RBP, RSP */
	cr_expect_eq(buf64(0x10), g.regs.gpr[0]);
	cr_expect_eq(buf64(0x18), g.regs.gpr[3]);
	cr_expect_eq(buf64(0x20), g.regs.gpr[1]);
	cr_expect_eq(buf64(0x28), g.regs.gpr[2]);
	cr_expect_eq(buf64(0x30), g.regs.gpr[6]);
	cr_expect_eq(buf64(0x38), g.regs.gpr[7]);
	cr_expect_eq(buf64(0x40), g.regs.gpr[5]);
	cr_expect_eq(buf64(0x48), g.regs.gpr[4]);
	cr_expect_eq(buf64(0x50), g.regs.gpr[8]);
	cr_expect_eq(buf64(0x88), g.regs.gpr[15]);
	cr_expect_eq(buf64(0x90), 1, "Applicable Counters");
	cr_expect_eq(buf64(0x98), 0x7fff0010, "data linear address");
	cr_expect_eq(buf64(0xb0), 0x401000, "EventingIP");
	cr_expect_eq(buf64(0xc0), 0x123456789aULL, "TSC");
	cr_expect_eq(buf64(0xc8), 0, "nothing past 200 bytes");
	cr_expect_eq(rd(0xc1), 0xffffffffff38ULL, "reloaded from the DS reset slot");
	cr_expect_eq(rd(0x38e), 0, "its overflow bit cleared");
	cr_expect_eq(pmis, 0, "below the threshold: no PMI");
	/* the next record comes 200 events later */
	run(199, 0x402000);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 200);
	run(1, 0x402004);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 400);
	cr_expect_eq(buf64(200 + 0xb0), 0x402004);
	cr_expect_eq(stats().pebs_records, 2);
	vpmu_vcpu_free(g.v);
}

Test(pebs, threshold_sets_ovfbuffer_and_pmi)
{
	setup("Skylake-Server", 4);
	ds(0, 0x1000, 400);
	wr64(DS_PA + 0x48, 0xfffffffffff6ULL); /* GP1 reset: -10 */
	wr(0x4c2, 0xfffffffffff6ULL);
	wr(0x187, 0x4300c0);
	wr(0x3f1, 2);
	wr(0x1d9, B(12)); /* freeze on PMI */
	vpmu_vcpu_sync(g.v);
	run(10, 0x1000);
	cr_expect_eq(pmis, 0);
	cr_expect_eq(rd(0x38e), 0);
	run(10, 0x2000);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 400);
	cr_expect_eq(pmis, 1, "index reached the threshold");
	cr_expect_eq(rd(0x38e), B(62) | B(59), "OvfBuffer, and CTR_Frz (freeze on PMI)");
	vpmu_vcpu_free(g.v);
}

Test(pebs, record_spans_a_page_boundary)
{
	setup("Skylake-Server", 5);
	ds(0x1000 - 100, 0x2000, 0x2000);
	wr64(DS_PA + 0x40, 0xffffffffff00ULL);
	wr(0x4c1, 0xffffffffffffULL);
	wr(0x186, 0x4300c0);
	wr(0x3f1, 1);
	vpmu_vcpu_sync(g.v);
	run(1, 0xabc);
	/* bytes 0..99 on the first page, 100..199 on the second, far away */
	cr_expect_eq(buf64(0x1000 - 100), 0x246, "RFLAGS at the end of page 0");
	cr_expect_eq(rd64(BUF_PA0 + 0x1000 - 100), 0x246);
	cr_expect_eq(rd64(BUF_PA1 + 100 - 100 + 0xb0 - 100), 0xabc, "EventingIP on page 1");
	cr_expect_eq(rd64(BUF_PA1 + 200 - 100 - 8), 0x123456789aULL, "TSC at the end");
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 0x1000 + 100);
	vpmu_vcpu_free(g.v);
}

Test(pebs, bounds_check_skips_the_whole_record)
{
	struct vpmu_stats st;

	setup("Skylake-Server", 4);
	ds(0, 150, 0x1000); /* absolute maximum below one record */
	wr64(DS_PA + 0x40, 0xfffffffffff0ULL);
	wr(0x4c1, 0xffffffffffffULL);
	wr(0x186, 0x4300c0);
	wr(0x3f1, 1);
	vpmu_vcpu_sync(g.v);
	run(1, 0x1234);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA, "index unchanged");
	cr_expect_eq(buf64(0), 0, "nothing written");
	cr_expect_eq(rd(0xc1), 0xfffffffffff0ULL, "the counter still reloads");
	st = stats();
	cr_expect_eq(st.pebs_skipped, 1);
	cr_expect_eq(st.pebs_records, 0);
	vpmu_vcpu_free(g.v);
}

Test(pebs, non_present_buffer_page_writes_nothing)
{
	struct vpmu_stats st;

	setup("Skylake-Server", 4);
	/* unmap the second buffer page: a record straddling it is skipped */
	map(g.regs.cr3, BUF_LA + 0x1000, BUF_PA1, 0, false);
	ds(0x1000 - 100, 0x2000, 0x2000);
	wr64(DS_PA + 0x40, 0xfffffffffff0ULL);
	wr(0x4c1, 0xffffffffffffULL);
	wr(0x186, 0x4300c0);
	wr(0x3f1, 1);
	vpmu_vcpu_sync(g.v);
	run(1, 0x1234);
	cr_expect_eq(rd64(BUF_PA0 + 0x1000 - 100), 0, "not even the first half");
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 0x1000 - 100);
	st = stats();
	cr_expect_eq(st.pebs_skipped, 1);
	cr_expect_eq(st.walk_faults, 1);
	vpmu_vcpu_free(g.v);
}

/* Counters overflowing on the same instruction share one record. */
Test(pebs, multi_counter_applicable)
{
	setup("Skylake-Server", 4);
	ds(0, 0x1000, 0x1000);
	wr64(DS_PA + 0x40, 0xffffffffff00ULL);
	wr64(DS_PA + 0x50, 0xfffffffff000ULL);
	wr(0x4c1, 0xfffffffffffbULL); /* -5 */
	wr(0x4c3, 0xfffffffffffbULL); /* -5 */
	wr(0x186, 0x4300c0);
	wr(0x188, 0x4300c0);
	wr(0x3f1, B(0) | B(2));
	vpmu_vcpu_sync(g.v);
	run(5, 0x5555);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 200, "one record");
	cr_expect_eq(buf64(0x90), B(0) | B(2));
	cr_expect_eq(rd(0xc1), 0xffffffffff00ULL);
	cr_expect_eq(rd(0xc3), 0xfffffffff000ULL);
	vpmu_vcpu_free(g.v);
}

/* Adaptive PEBS: Record Format = DATA_CFG only with Adaptive_Record. */
Test(pebs, adaptive_groups_and_fixed_reload)
{
	setup("Icelake-Server", 5);
	ds(0, 0x2000, 0x2000);
	wr64(DS_PA + 0x80, 0xffffffffff00ULL); /* FIXED0 reset at 80H (format 4) */
	wr64(DS_PA + 0x40, 0xffffffffff00ULL);
	wr(0x3f2, 0x3); /* Memory Info + GPRs */
	wr(0x309, 0xffffffffffffULL);
	wr(0x38d, 0x3 | B(32)); /* fixed 0 with Adaptive_Record */
	wr(0x4c1, 0xffffffffffffULL);
	wr(0x186, 0x4300c0); /* GP0 without Adaptive_Record */
	wr(0x38f, B(0) | B(32));
	wr(0x3f1, B(32));
	vpmu_vcpu_sync(g.v);
	run(1, 0x7000);
	/* fixed 0: 32 + 32 + 144 = 208 bytes, format 3 (data_cfg) */
	cr_expect_eq(buf64(0x00), (208ULL << 48) | 0x3);
	cr_expect_eq(buf64(0x08), 0x7000);
	cr_expect_eq(buf64(0x10), B(32));
	cr_expect_eq(buf64(0x18), 0x123456789aULL);
	cr_expect_eq(buf64(0x20), 0x7fff0010, "DLA");
	cr_expect_eq(buf64(0x40), 0x246, "GPR group: RFLAGS");
	cr_expect_eq(buf64(0x48), 0x401005, "GPR group: RIP");
	cr_expect_eq(buf64(0x50), g.regs.gpr[0], "adaptive order: RAX");
	cr_expect_eq(buf64(0x58), g.regs.gpr[1], "then RCX");
	cr_expect_eq(rd(0x309), 0xffffffffff00ULL, "fixed 0 reloaded from 80H");
	/* now GP0 alone: no Adaptive_Record -> 32-byte basic record, format 0 */
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 208);
	wr(0x3f1, B(0));
	wr(0x4c1, 0xffffffffffffULL);
	vpmu_vcpu_sync(g.v);
	run(1, 0x7004);
	cr_expect_eq(buf64(208), 32ULL << 48, "Record Format 0, size 32");
	cr_expect_eq(buf64(208 + 0x08), 0x7004);
	cr_expect_eq(buf64(208 + 0x10), B(0));
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 240);
	cr_expect_eq(rd(0xc1), 0xffffffffff00ULL, "GP0 reloaded from 40H");
	vpmu_vcpu_free(g.v);
}

/* Format 6: counters group; fixed reset slots after 32 GP slots (140H). */
Test(pebs, format6_counters_group)
{
	setup("LunarLake", 4);
	ds(0, 0x2000, 0x2000);
	wr64(DS_PA + 0x140 + 8, 0xfffffffff000ULL); /* FIXED1 reset */
	wr(0x3f2, B(4) | B(32 + 2) | B(48 + 1));    /* counters: PMC2, FIXED1 */
	wr(0x4c3, 0x1234);
	wr(0x188, 0x4300c4); /* GP2: branches, just counting */
	wr(0x30a, 0xffffffffffffULL);
	wr(0x38d, (0x3ULL << 4) | B(36)); /* fixed 1 (cycles), adaptive */
	wr(0x38f, B(2) | B(33));
	wr(0x3f1, B(33));
	vpmu_vcpu_sync(g.v);
	run(1, 0x9000);
	/* 32 basic + 16 header + 2 values = 64 bytes */
	cr_expect_eq(buf64(0x00) >> 48, 64);
	cr_expect_eq(buf64(0x00) & 0xffffffff, (uint32_t) (B(4) | B(32 + 2) | B(48 + 1)));
	cr_expect_eq(buf64(0x20) & 0xffffffff, B(2), "PMC bitvector");
	cr_expect_eq(buf64(0x20) >> 32, B(1), "FIXED bitvector");
	cr_expect_eq(buf64(0x30), 0x1234, "PMC2 value");
	cr_expect_eq(buf64(0x38), 0, "FIXED1 value: just wrapped");
	cr_expect_eq(rd(0x30a), 0xfffffffff000ULL, "reloaded from 148H");
	vpmu_vcpu_free(g.v);
}

/* Architectural PEBS: a physically addressed buffer, reload 1-extended. */
Test(pebs, arch_pebs_buffer)
{
	struct vpmu_stats st;

	setup("arch-pebs", 4);
	wr(0x3f4, 0x400000);			   /* 4 KiB at 4 MiB */
	wr(0x3f5, B(32) | (0x100ULL << 36));	   /* EN, threshold 0x1000 */
	wr(0x1903, B(63) | B(61) | 0xfffffc00ULL); /* GP0: EN, GPRs, reload -1024 */
	wr(0x4c1, 0xffffffffffffULL);
	wr(0x186, 0x4300c0);
	vpmu_vcpu_sync(g.v);
	run(1, 0xb000);
	/* header 16 + basic 48 + GPRs 160 = 224 bytes */
	cr_expect_eq(rd64(0x400000) & 0xffff, 224, "record size in the header");
	cr_expect(rd64(0x400000) & B(63), "basic group present");
	cr_expect(rd64(0x400000) & B(61), "GPR group present");
	cr_expect_eq(rd64(0x400000 + 16), 0xb000, "IP");
	cr_expect_eq(rd64(0x400000 + 16 + 8), B(0), "applicable counters");
	cr_expect_eq(rd(0x3f5) & 0x7fffff0, 224, "WR advanced");
	cr_expect_eq(rd(0xc1), 0xfffffffffc00ULL, "RELOAD 1-extended to 48 bits");
	st = stats();
	cr_expect_eq(st.pebs_records, 1);
	cr_expect_eq(st.pebs_bytes, 224);
	vpmu_vcpu_free(g.v);
}

/* No registers now: the record waits for the next sync, never lost. */
Test(pebs, deferred_not_dropped)
{
	struct vpmu_stats st;

	setup("Skylake-Server", 4);
	ds(0, 0x1000, 0x1000);
	wr64(DS_PA + 0x40, 0xffffffffff00ULL);
	wr(0x4c1, 0xffffffffffffULL);
	wr(0x186, 0x4300c0);
	wr(0x3f1, 1);
	vpmu_vcpu_sync(g.v);
	regs_fail = 1;
	run(1, 0xdef0);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA);
	regs_fail = 0;
	vpmu_vcpu_sync(g.v);
	cr_expect_eq(rd64(DS_PA + 0x28), BUF_LA + 200);
	cr_expect_eq(buf64(0xb0), 0xdef0);
	st = stats();
	cr_expect_eq(st.pebs_deferred, 1);
	cr_expect_eq(st.pebs_records, 1);
	vpmu_vcpu_free(g.v);
}

/*
 * Property: for random page tables and DS contents, a PEBS assist never
 * writes outside guest RAM, and inside RAM changes nothing but the record
 * bytes, the DS index and paging-entry A/D bits.
 */
Test(pebs, random_tables_never_write_outside)
{
	static uint8_t *before;
	unsigned int seed = 12345, writes = 0, cases = 600;
	uint8_t *guard_lo, *guard_hi;
	uint8_t *block;

	/* RAM with guard bytes on both sides */
	block = malloc(PROP_RAM + 2 * 4096);
	before = malloc(PROP_RAM);
	cr_assert(block && before);
	guard_lo = block;
	guard_hi = block + 4096 + PROP_RAM;
	for (unsigned int c = 0; c < cases; c++) {
		struct vpmu_config cfg;
		struct vpmu_mem_region r;
		uint64_t ds_pa, pa0, pa1, arch_base = 0, arch_size = 0, changed = 0, v;
		bool large;

		memset(guard_lo, 0x5a, 4096);
		memset(guard_hi, 0x5a, 4096);
		ram = block + 4096;
		/* random RAM: DS area contents, reset slots, stray table entries */
		for (uint64_t i = 0; i < PROP_RAM / 8; i += 1 + (rand_r(&seed) & 7))
			((uint64_t *) ram)[i] = ((uint64_t) rand_r(&seed) << 33) ^
						((uint64_t) rand_r(&seed) << 12) ^
						(uint64_t) rand_r(&seed);
		/* the mappings: pages anywhere in RAM or up to 8 pages past it */
		levels = rand_r(&seed) & 1 ? 5 : 4;
		next_table = 0x10000 + (uint64_t) (rand_r(&seed) % 64) * 0x1000;
		g.regs.cr3 = alloc_table();
		ds_pa = (uint64_t) (rand_r(&seed) % (PROP_RAM / 4096 + 8)) * 4096;
		pa0 = (uint64_t) (rand_r(&seed) % (PROP_RAM / 4096 + 8)) * 4096;
		pa1 = (uint64_t) (rand_r(&seed) % (PROP_RAM / 4096 + 8)) * 4096;
		large = rand_r(&seed) % 4 == 0;
		if (large)
			pa0 &= ~0x1fffffULL;
		map(g.regs.cr3, DS_LA, ds_pa, PTE_P | PTE_RW | (rand_r(&seed) & 1 ? PTE_US : 0),
		    false);
		map(g.regs.cr3, BUF_LA, pa0, PTE_P | PTE_RW, large);
		if (!large)
			map(g.regs.cr3, BUF_LA + 0x1000, pa1,
			    PTE_P | (rand_r(&seed) & 1 ? PTE_RW : 0), false);
		memcpy(before, ram, PROP_RAM);

		vpmu_config_init(&cfg);
		cfg.model = vpmu_model_name(c % vpmu_model_count());
		cfg.backend = VPMU_BACKEND_EXACT;
		cfg.regs = get_regs;
		cr_assert_eq(vpmu_vcpu_new(&cfg, &g.v), 0);
		r = (struct vpmu_mem_region){ .gpa = 0, .size = PROP_RAM, .hva = ram };
		cr_assert_eq(vpmu_vcpu_set_memory(g.v, &r, 1), 0);
		g.regs.cr0 = CR0_PG | (rand_r(&seed) & 1 ? CR0_WP : 0) | 1;
		g.regs.cr4 =
			CR4_PAE | (levels == 5 ? CR4_LA57 : 0) | (rand_r(&seed) & 1 ? B(21) : 0);
		g.regs.efer = EFER_LME | EFER_LMA;
		regs_fail = 0;
		/* random MSR state; what the model refuses is simply refused */
		vpmu_msr_write(g.v, 0x600,
			       rand_r(&seed) & 1 ? DS_LA : ((uint64_t) rand_r(&seed) << 20));
		vpmu_msr_write(g.v, 0x3f1, (uint64_t) rand_r(&seed) & 0xff);
		vpmu_msr_write(g.v, 0x3f2, (uint64_t) rand_r(&seed) & 0xff00000f);
		vpmu_msr_write(g.v, 0x3f4,
			       ((uint64_t) rand_r(&seed) % (PROP_RAM / 4096 + 8)) << 12 |
				       (rand_r(&seed) & 3));
		vpmu_msr_write(g.v, 0x3f5,
			       B(32) | ((uint64_t) rand_r(&seed) & 0x7fffff0) |
				       ((uint64_t) rand_r(&seed) & 0x7fffff) << 36);
		for (unsigned int i = 0; i < 4; i++) {
			vpmu_msr_write(g.v, 0x1903 + 4 * i,
				       B(63) | (rand_r(&seed) & 1 ? B(61) | B(62) : 0) | B(49) |
					       (rand_r(&seed) & 0xffff));
			vpmu_msr_write(g.v, 0x4c1 + i, 0xfffffffffff0ULL | (rand_r(&seed) & 0xf));
			vpmu_msr_write(g.v, 0x186 + i, 0x4300c0 | (rand_r(&seed) & 1 ? B(34) : 0));
		}
		if (vpmu_msr_read(g.v, 0x3f4, &v) == 0) {
			arch_base = v & ~0xfffULL;
			arch_size = 4096ULL << (v & 0xf);
		}
		vpmu_vcpu_sync(g.v);
		for (unsigned int k = 0; k < 3; k++)
			run(16, 0x1000 + k);
		vpmu_vcpu_free(g.v);

		for (unsigned int i = 0; i < 4096; i++)
			if (guard_lo[i] != 0x5a || guard_hi[i] != 0x5a)
				cr_assert_fail("case %u: a write landed outside guest RAM", c);
		/* inside RAM every changed byte is a record, the DS index or an A/D bit */
		for (uint64_t i = 0; i < PROP_RAM; i++) {
			bool in_buf = (i >= pa0 && i < pa0 + (large ? 0x200000 : 0x1000)) ||
				      (!large && i >= pa1 && i < pa1 + 0x1000);
			bool in_index = i >= ds_pa + 0x28 && i < ds_pa + 0x30;
			bool in_arch = i >= arch_base && i < arch_base + arch_size;
			uint64_t q = i & ~7ULL;
			uint64_t was, now;

			if (ram[i] == before[i])
				continue;
			changed++;
			if (in_buf || in_index || in_arch)
				continue;
			memcpy(&was, before + q, 8);
			memcpy(&now, ram + q, 8);
			if (!((was ^ now) & ~0x60ULL) && (now & PTE_P))
				continue; /* Accessed/Dirty set in a paging entry */
			cr_assert_fail("case %u (%s): byte %#llx changed outside the PEBS buffer",
				       c, vpmu_model_name(c % vpmu_model_count()),
				       (unsigned long long) i);
		}
		writes += changed != 0;
	}
	fprintf(stderr,
		"pebs: %u random guests, %u of them got records written, none outside RAM\n", cases,
		writes);
	free(block);
	free(before);
	ram = NULL;
}

/* The adaptive LBR group reads the LBR stack from TOS backwards (Table 22-101). */
Test(pebs, adaptive_lbr_group)
{
	setup("Icelake-Server", 4);
	ds(0, 0x1000, 0x1000);
	wr(0x1d9, B(0)); /* DEBUGCTL.LBR */
	vpmu_lbr_branch(g.v, 0x1000, 0x1100, VPMU_BR_JMP, 0, 3);
	vpmu_lbr_branch(g.v, 0x2000, 0x2200, VPMU_BR_CALL, 0, 4);
	vpmu_lbr_branch(g.v, 0x3000, 0x3300, VPMU_BR_RET, 0, 5);
	wr(0x3f2, B(3) | (2ULL << 24)); /* LBRs, 3 entries */
	wr(0x4c1, 0xffffffffffffULL);
	wr(0x186, 0x4300c0 | B(34)); /* Adaptive_Record */
	wr(0x3f1, 1);
	vpmu_vcpu_sync(g.v);
	run(1, 0x4000);
	cr_expect_eq(buf64(0x00), (104ULL << 48) | B(3) | (2ULL << 24), "32 + 3 x 24 bytes");
	cr_expect_eq(buf64(0x20), 0x3000, "LBR[TOS].FROM");
	cr_expect_eq(buf64(0x28), 0x3300, "LBR[TOS].TO");
	cr_expect_eq(buf64(0x30), 5, "LBR[TOS].INFO");
	cr_expect_eq(buf64(0x38), 0x2000, "LBR[TOS-1].FROM");
	cr_expect_eq(buf64(0x50), 0x1000, "LBR[TOS-2].FROM");
	cr_expect_eq(buf64(0x60), 3, "LBR[TOS-2].INFO");
	cr_expect_eq(buf64(0x68), 0, "nothing past the record");
	vpmu_vcpu_free(g.v);
}
