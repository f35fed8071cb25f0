/* SPDX-License-Identifier: MIT */
/*
 * Snapshot and restore (vpmu_vcpu_save / vpmu_vcpu_restore): a round trip
 * keeps every MSR on every model; a damaged, foreign or newer blob is
 * refused with one log line and the vCPU left as it was; and, as a
 * property, saving and restoring at random points of a counting + PEBS +
 * LBR + PMI scenario never changes what the guest sees (counter values,
 * PEBS buffer bytes, LBRs, PMIs). MSR numbers are the SDM's, written as
 * literals.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vpmu/vpmu.h"
#include "facts.h"

#define PMC(i)	     (0xc1 + (i))
#define EVTSEL(i)    (0x186 + (i))
#define A_PMC(i)     (0x4c1 + (i))
#define FIXED(i)     (0x309 + (i))
#define FIXED_CTRL   0x38d
#define STATUS	     0x38e
#define GCTRL	     0x38f
#define OVF_CTRL     0x390
#define DEBUGCTL     0x1d9
#define PEBS_ENABLE  0x3f1
#define DATA_CFG     0x3f2
#define PEBS_BASE    0x3f4
#define PEBS_INDEX   0x3f5
#define DS_AREA	     0x600
#define LBR_TOS	     0x1c9
#define LBR_FROM(i)  (0x680 + (i))
#define GP_CFG_C(i)  (0x1903 + 4 * (i))
#define USR	     B(16)
#define OS	     B(17)
#define INT	     B(20)
#define EN	     B(22)
#define ADAPTIVE     B(34)
#define MAX_LOG_LINE 256

/* ---- a log line, the refusals ------------------------------------------- */

static char last_log[MAX_LOG_LINE];
static unsigned int log_lines;

static void on_log(void *data, enum vpmu_log_level level, const char *msg)
{
	snprintf(last_log, sizeof(last_log), "%s", msg);
	log_lines++;
}

static struct vpmu_vcpu *vcpu_cfg(const char *model, int nr_gp, const struct vpmu_filter *f)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.nr_gp = nr_gp;
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.log = on_log;
	cfg.filter = f;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0, "vpmu_vcpu_new(%s)", model);
	return v;
}

/* A small deterministic generator (xorshift64*), independent of libc's. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static unsigned int rng_below(uint64_t *s, unsigned int n)
{
	return (unsigned int) (rng_next(s) % n);
}

/*
 * Every MSR the vCPU has to a value of its own: the bits a WRMSR takes
 * (each found by writing it alone), filled at random. Then some counting.
 */
static void scramble(struct vpmu_vcpu *v, uint64_t seed)
{
	uint32_t msrs[512];
	size_t n = vpmu_msr_list(v, msrs, 512);
	struct vpmu_exact_counts c = { .instructions = 1000, .cycles = 1500, .ref_cycles = 1200 };

	cr_assert(n <= 512);
	for (size_t i = 0; i < n; i++) {
		uint64_t ok = 0;

		if (msrs[i] == OVF_CTRL)
			continue; /* it would only clear what STATUS_SET sets */
		for (unsigned int b = 0; b < 64; b++)
			if (vpmu_msr_write(v, msrs[i], B(b)) == 0)
				ok |= B(b);
		if (ok)
			vpmu_msr_write(v, msrs[i], rng_next(&seed) & ok);
	}
	vpmu_vcpu_sync(v);
	c.branches = c.cond_branches = c.near_taken = 70;
	vpmu_exact_feed(v, &c);
}

static size_t save(struct vpmu_vcpu *v, uint8_t **ret)
{
	size_t len = 0, len2 = 0;

	cr_assert_eq(vpmu_vcpu_save(v, NULL, 0, &len), 0);
	*ret = malloc(len);
	cr_assert_not_null(*ret);
	cr_assert_eq(vpmu_vcpu_save(v, *ret, len - 1, &len2), -ENOSPC);
	cr_assert_eq(vpmu_vcpu_save(v, *ret, len, &len2), 0);
	cr_assert_eq(len2, len);
	return len;
}

/* Every MSR of a and b reads the same. */
static void expect_same_msrs(struct vpmu_vcpu *a, struct vpmu_vcpu *b)
{
	uint32_t msrs[512];
	size_t n = vpmu_msr_list(a, msrs, 512);

	cr_assert_eq(n, vpmu_msr_list(b, NULL, 0));
	for (size_t i = 0; i < n; i++) {
		uint64_t va = 0, vb = 1;

		cr_assert_eq(vpmu_msr_read(a, msrs[i], &va), 0);
		cr_assert_eq(vpmu_msr_read(b, msrs[i], &vb), 0);
		cr_expect_eq(va, vb, "MSR %#x: %#llx restored as %#llx", msrs[i],
			     (unsigned long long) va, (unsigned long long) vb);
	}
}

ParameterizedTestParameters(snapshot, round_trip_every_msr)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, snapshot, round_trip_every_msr)
{
	const char *model = facts[*fi].name;
	struct vpmu_exact_counts c = { .instructions = 333, .cycles = 400, .ref_cycles = 377 };
	struct vpmu_vcpu *a = vcpu_cfg(model, -1, NULL), *b = vcpu_cfg(model, -1, NULL);
	uint8_t *blob, *blob2;
	size_t len;

	scramble(a, 0x1234 + *fi);
	len = save(a, &blob);
	cr_assert_eq(vpmu_vcpu_restore(b, blob, len), 0, "%s", last_log);
	expect_same_msrs(a, b);
	/* the restored vCPU saves the same blob: nothing lost, nothing added */
	cr_assert_eq(save(b, &blob2), len);
	cr_expect_eq(memcmp(blob, blob2, len), 0, "a second round trip is byte-identical");
	/* and both count on alike (host counters made anew at the sync) */
	vpmu_vcpu_sync(a);
	vpmu_vcpu_sync(b);
	cr_assert_eq(vpmu_exact_feed(a, &c), 0);
	cr_assert_eq(vpmu_exact_feed(b, &c), 0);
	vpmu_vcpu_sync(a);
	vpmu_vcpu_sync(b);
	expect_same_msrs(a, b);
	free(blob);
	free(blob2);
	vpmu_vcpu_free(a);
	vpmu_vcpu_free(b);
}

/* The CRC-32 the format names (IEEE, reflected), table-driven: not the library's code. */
static uint32_t crc32_table_driven(const uint8_t *p, size_t n)
{
	static uint32_t t[256];
	uint32_t crc = 0xffffffffu;

	if (!t[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			t[i] = c;
		}
	for (size_t i = 0; i < n; i++)
		crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* Fix the header's CRC (offset 18H) after an edit, so only the edit is wrong. */
static void reseal(uint8_t *blob, size_t len)
{
	uint32_t crc;

	memset(blob + 0x18, 0, 4);
	crc = crc32_table_driven(blob, len);
	for (int i = 0; i < 4; i++)
		blob[0x18 + i] = (uint8_t) (crc >> (8 * i));
}

/* The first record with `tag`: its payload offset in the blob. */
static size_t record(const uint8_t *blob, size_t len, unsigned int tag)
{
	size_t off = 64;

	while (off + 8 <= len) {
		unsigned int t = blob[off] | blob[off + 1] << 8;
		size_t n = blob[off + 4] | blob[off + 5] << 8 | (size_t) blob[off + 6] << 16;

		if (t == tag)
			return off + 8;
		off += 8 + ((n + 7) & ~(size_t) 7);
	}
	cr_assert_fail("no record %u", tag);
	return 0;
}

/* `restore` is refused with `err` and one log line holding `why`; v unchanged. */
static void expect_refused(struct vpmu_vcpu *v, const uint8_t *blob, size_t len, int err,
			   const char *why)
{
	uint8_t *before, *after;
	size_t n = save(v, &before);

	log_lines = 0;
	last_log[0] = '\0';
	cr_expect_eq(vpmu_vcpu_restore(v, blob, len), err, "restore: %s", last_log);
	cr_expect_eq(log_lines, 1, "one log line");
	cr_expect(strstr(last_log, why), "'%s' says '%s'", last_log, why);
	cr_assert_eq(save(v, &after), n);
	cr_expect_eq(memcmp(before, after, n), 0, "the vCPU is untouched");
	free(before);
	free(after);
}

Test(snapshot, refuses_damaged_foreign_and_newer)
{
	struct vpmu_vcpu *skl = vcpu_cfg("Skylake-Server", -1, NULL);
	struct vpmu_vcpu *icx = vcpu_cfg("Icelake-Server", -1, NULL);
	struct vpmu_vcpu *icx4 = vcpu_cfg("Icelake-Server", 4, NULL);
	struct vpmu_vcpu *target = vcpu_cfg("Icelake-Server", -1, NULL);
	struct vpmu_filter *f = NULL;
	struct vpmu_vcpu *filtered;
	uint8_t *ok, *bad;
	size_t len, off;

	cr_assert_eq(vpmu_filter_parse("action deny\nevent 0xc4 umask 0x00\n", &f, NULL, 0), 0);
	filtered = vcpu_cfg("Icelake-Server", -1, f);
	scramble(skl, 1);
	scramble(icx, 2);
	scramble(icx4, 3);
	scramble(target, 4);
	scramble(filtered, 5);

	len = save(skl, &ok);
	expect_refused(target, ok, len, -EXDEV, "a Skylake-Server snapshot, this vCPU is Icelake");
	free(ok);
	len = save(icx4, &ok);
	expect_refused(target, ok, len, -EXDEV, "GP counters 0x4, this vCPU's 0x8");
	free(ok);
	len = save(filtered, &ok);
	expect_refused(target, ok, len, -EXDEV, "PMU event filter");
	free(ok);

	len = save(icx, &ok);
	bad = malloc(len);
	memcpy(bad, ok, len);
	bad[len / 2] ^= 0x40;
	expect_refused(target, bad, len, -EBADMSG, "checksum");
	expect_refused(target, ok, len - 8, -EBADMSG, "header says");
	expect_refused(target, ok, 10, -EBADMSG, "not a vpmu snapshot");
	memcpy(bad, ok, len);
	bad[8] = 2; /* format 2 */
	reseal(bad, len);
	expect_refused(target, bad, len, -EPROTONOSUPPORT, "format 2 is newer");
	/* a well-sealed blob whose GLOBAL_CTRL (38FH) has a bit the model lacks */
	memcpy(bad, ok, len);
	off = record(bad, len, 2);
	for (size_t i = off + 8; i < len; i += 16) {
		if ((bad[i] | bad[i + 1] << 8) == GCTRL) {
			bad[i + 8 + 5] |= 0x80; /* bit 47 */
			break;
		}
	}
	reseal(bad, len);
	expect_refused(target, bad, len, -EBADMSG, "MSR 0x38f");
	/* an unknown record: refused, unless it says it is optional */
	memcpy(bad, ok, len);
	off = record(bad, len, 5); /* the backend's phase */
	bad[off - 8] = 0x77;
	bad[off - 6] = 0;
	reseal(bad, len);
	expect_refused(target, bad, len, -EBADMSG, "unknown record 119");
	bad[off - 6] = 1;
	reseal(bad, len);
	cr_expect_eq(vpmu_vcpu_restore(target, bad, len), 0, "an optional record is skipped");
	/* a required record missing */
	memcpy(bad, ok, len);
	off = record(bad, len, 4);
	bad[off - 8] = 0x78;
	bad[off - 6] = 1;
	reseal(bad, len);
	expect_refused(target, bad, len, -EBADMSG, "record 4 missing");

	cr_expect_eq(vpmu_vcpu_restore(target, ok, len), 0, "the good one still restores");
	free(ok);
	free(bad);
	vpmu_vcpu_free(skl);
	vpmu_vcpu_free(icx);
	vpmu_vcpu_free(icx4);
	vpmu_vcpu_free(target);
	vpmu_vcpu_free(filtered);
	vpmu_filter_free(f);
}

/* A PMI asked for and not yet delivered when saved is asked for again after. */
static unsigned int pmi_calls;

static void count_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	pmi_calls++;
}

Test(snapshot, undelivered_pmi_asked_again)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *a = NULL, *b = NULL, *c = NULL;
	struct vpmu_exact_counts one = { .instructions = 1, .cycles = 1 };
	uint8_t *blob;
	size_t len;

	vpmu_config_init(&cfg);
	cfg.model = "Skylake-Server";
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.pmi = count_pmi;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &a), 0);
	cr_assert_eq(vpmu_vcpu_new(&cfg, &b), 0);
	cr_assert_eq(vpmu_vcpu_new(&cfg, &c), 0);
	test_wrmsr(a, A_PMC(0), 0xffffffffffffULL);
	test_wrmsr(a, EVTSEL(0), 0xc0 | USR | OS | EN | INT);
	vpmu_vcpu_sync(a);
	pmi_calls = 0;
	vpmu_exact_feed(a, &one);
	cr_assert_eq(pmi_calls, 1);
	len = save(a, &blob); /* the VMM has not delivered it yet */
	cr_assert_eq(vpmu_vcpu_restore(b, blob, len), 0);
	cr_expect_eq(pmi_calls, 1, "not from inside the restore");
	vpmu_vcpu_sync(b);
	cr_expect_eq(pmi_calls, 2, "asked again at the first sync");
	vpmu_vcpu_sync(b);
	cr_expect_eq(pmi_calls, 2, "once");
	free(blob);
	/* delivered before the save: nothing to ask again */
	vpmu_pmi_delivered(a);
	len = save(a, &blob);
	cr_assert_eq(vpmu_vcpu_restore(c, blob, len), 0);
	vpmu_vcpu_sync(c);
	cr_expect_eq(pmi_calls, 2);
	free(blob);
	vpmu_vcpu_free(a);
	vpmu_vcpu_free(b);
	vpmu_vcpu_free(c);
}

/*
 * A PMI the VMM merged into a pending interrupt, or dropped (a masked LVT
 * entry loses it, SDM Vol. 3A 11.5.1), is answered: a restore does not ask
 * for it again, which would give the guest an interrupt hardware never
 * raised.
 */
Test(snapshot, merged_or_dropped_pmi_not_asked_again)
{
	void (*const answer[3])(struct vpmu_vcpu *) = { vpmu_pmi_merged, vpmu_pmi_dropped,
							vpmu_pmi_delivered };
	struct vpmu_exact_counts one = { .instructions = 1, .cycles = 1 };
	struct vpmu_config cfg;

	vpmu_config_init(&cfg);
	cfg.model = "Skylake-Server";
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.pmi = count_pmi;
	for (int i = 0; i < 3; i++) {
		struct vpmu_vcpu *a = NULL, *b = NULL;
		uint8_t *blob;
		size_t len;

		cr_assert_eq(vpmu_vcpu_new(&cfg, &a), 0);
		cr_assert_eq(vpmu_vcpu_new(&cfg, &b), 0);
		test_wrmsr(a, A_PMC(0), 0xffffffffffffULL);
		test_wrmsr(a, EVTSEL(0), 0xc0 | USR | OS | EN | INT);
		vpmu_vcpu_sync(a);
		pmi_calls = 0;
		vpmu_exact_feed(a, &one);
		cr_assert_eq(pmi_calls, 1);
		answer[i](a);
		len = save(a, &blob);
		cr_assert_eq(vpmu_vcpu_restore(b, blob, len), 0);
		vpmu_vcpu_sync(b);
		cr_expect_eq(pmi_calls, 1, "answer %d: the restored vCPU asks for no PMI", i);
		free(blob);
		vpmu_vcpu_free(a);
		vpmu_vcpu_free(b);
	}
}

/*
 * CPU_CLK_THREAD_UNHALTED.REF_XCLK counts the crystal clock, a fraction
 * of the reference cycles fed: where its next tick falls is the exact
 * backend's phase, and it must travel with the snapshot.
 */
Test(snapshot, crystal_clock_phase)
{
	struct vpmu_vcpu *a = vcpu_cfg("Skylake-Server", -1, NULL);
	struct vpmu_vcpu *b = vcpu_cfg("Skylake-Server", -1, NULL);
	struct vpmu_vcpu *c;
	struct vpmu_exact_counts e = { .instructions = 1, .cycles = 37, .ref_cycles = 37 };
	uint8_t *blob;
	size_t len;

	test_wrmsr(a, EVTSEL(0), 0x013c | USR | OS | EN);
	test_wrmsr(b, EVTSEL(0), 0x013c | USR | OS | EN);
	vpmu_vcpu_sync(a);
	vpmu_vcpu_sync(b);
	for (int i = 0; i < 5; i++) {
		vpmu_exact_feed(a, &e);
		vpmu_exact_feed(b, &e);
	}
	len = save(b, &blob);
	vpmu_vcpu_free(b);
	c = vcpu_cfg("Skylake-Server", -1, NULL);
	cr_assert_eq(vpmu_vcpu_restore(c, blob, len), 0);
	for (int i = 0; i < 300; i++) {
		vpmu_exact_feed(a, &e);
		vpmu_exact_feed(c, &e);
		cr_assert_eq(test_rdmsr(c, PMC(0)), test_rdmsr(a, PMC(0)), "after %d feeds", i + 1);
	}
	cr_expect_gt(test_rdmsr(a, PMC(0)), 0);
	free(blob);
	vpmu_vcpu_free(a);
	vpmu_vcpu_free(c);
}

/* ---- the property: a counting + PEBS + LBR + PMI guest ------------------- */

#define RAM	(2u << 20)
#define CR3	0x10000ULL
#define DS_LA	0xffff888000100000ULL
#define DS_PA	0x100000ULL
#define BUF_LA	0xffffc90000000000ULL
#define BUF_PA	0x110000ULL /* 64 KiB */
#define BUF_LEN 0x10000ULL
#define ARCH_PA 0x180000ULL /* 16 KiB: IA32_PEBS_BASE[3:0] = 2 */
#define STEPS	300
#define LOG_MAX (1u << 20)

struct vmm {
	struct vpmu_vcpu *v;
	uint8_t *ram;
	bool pmi_pending; /* the VMM's own flag: not saved (the library asks again) */
	unsigned int step;
	bool regs_fail;
	uint8_t *log; /* everything the guest saw, in order */
	size_t log_len;
	uint64_t pebs_records, pebs_deferred; /* the scenario's, from the stats */
	const struct model_facts *m;
};

static void logv(struct vmm *x, uint64_t v)
{
	cr_assert_lt(x->log_len + 8, LOG_MAX);
	memcpy(x->log + x->log_len, &v, 8);
	x->log_len += 8;
}

static void vmm_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	((struct vmm *) data)->pmi_pending = true;
}

/* The guest's registers after the instruction of this step. */
static int vmm_regs(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *r)
{
	struct vmm *x = data;

	if (x->regs_fail)
		return -EAGAIN;
	memset(r, 0, sizeof(*r));
	r->rip = 0x400000 + 16ULL * x->step + 5;
	r->rflags = 0x202 | (x->step & 1) << 6;
	for (unsigned int i = 0; i < 16; i++)
		r->gpr[i] = 0x1000ULL * x->step + i;
	for (unsigned int i = 0; i < 16; i++)
		memset(r->xmm[i], (int) (x->step + i), 16);
	r->cr0 = B(31) | B(16) | 1;
	r->cr3 = CR3;
	r->cr4 = B(5);
	r->efer = B(8) | B(10);
	r->tsc = 1000ULL * x->step;
	r->long_mode = r->sse = true;
	return 0;
}

static void wr64(uint8_t *ram, uint64_t pa, uint64_t v)
{
	memcpy(ram + pa, &v, 8);
}

static uint64_t rd64(const uint8_t *ram, uint64_t pa)
{
	uint64_t v;

	memcpy(&v, ram + pa, 8);
	return v;
}

/* 4-level tables mapping `pages` pages at la to pa, tables from `*next`. */
static void map(uint8_t *ram, uint64_t *next, uint64_t la, uint64_t pa, unsigned int pages)
{
	for (unsigned int p = 0; p < pages; p++, la += 4096, pa += 4096) {
		uint64_t table = CR3;

		for (int level = 3; level > 0; level--) {
			unsigned int idx = (la >> (12 + 9 * level)) & 0x1ff;
			uint64_t e = rd64(ram, table + 8 * idx);

			if (!(e & 1)) {
				e = *next | 3;
				*next += 4096;
				wr64(ram, table + 8 * idx, e);
			}
			table = e & 0x000ffffffffff000ULL;
		}
		wr64(ram, table + 8 * ((la >> 12) & 0x1ff), pa | 3);
	}
}

static struct vpmu_vcpu *vmm_vcpu(struct vmm *x)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;
	struct vpmu_mem_region r = { .gpa = 0, .size = RAM, .hva = x->ram };

	vpmu_config_init(&cfg);
	cfg.model = x->m->name;
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.pmi = vmm_pmi;
	cfg.pmi_data = x;
	cfg.regs = vmm_regs;
	cfg.regs_data = x;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	cr_assert_eq(vpmu_vcpu_set_memory(v, &r, 1), 0);
	return v;
}

/* What the guest's perf would program: PEBS on GP0, PMIs on GP1 and fixed 1, LBRs. */
static void program(struct vmm *x)
{
	const struct model_facts *m = x->m;
	uint64_t pebs_sel = 0x01c0 | USR | OS | EN; /* INST_RETIRED.PREC_DIST */

	if (m->legacy_pebs) {
		uint64_t next = CR3 + 4096;

		map(x->ram, &next, DS_LA, DS_PA, 1);
		map(x->ram, &next, BUF_LA, BUF_PA, (unsigned int) (BUF_LEN / 4096));
		wr64(x->ram, DS_PA + 0x20, BUF_LA);
		wr64(x->ram, DS_PA + 0x28, BUF_LA);
		wr64(x->ram, DS_PA + 0x30, BUF_LA + BUF_LEN);
		wr64(x->ram, DS_PA + 0x38, BUF_LA + BUF_LEN / 8);
		wr64(x->ram, DS_PA + 0x40, (0 - 37ULL) & LOW(m->width)); /* GP0 reset */
		test_wrmsr(x->v, DS_AREA, DS_LA);
		if (m->adaptive || m->fmt6) {
			uint64_t cfg = B(0) | B(1) | B(2); /* Memory Info, GPRs, XMMs */

			if (m->lbr_depth)
				cfg |= B(3) | (7ULL << 24); /* 8 LBRs */
			if (m->fmt6)
				cfg |= B(4) | B(32 + 1) | B(48 + 1); /* counters: GP1, fixed 1 */
			test_wrmsr(x->v, DATA_CFG, cfg);
			pebs_sel |= ADAPTIVE;
		}
		test_wrmsr(x->v, PEBS_ENABLE, 1);
	} else {
		test_wrmsr(x->v, PEBS_BASE, ARCH_PA | 2);
		test_wrmsr(x->v, PEBS_INDEX, B(32) | ((0x2000ULL >> 4) << 36));
		/* EN, GPRs, AUX, counters of GP1; reload -41 */
		test_wrmsr(x->v, GP_CFG_C(0), B(63) | B(61) | B(62) | B(36) | (0 - 41ULL) % B(32));
		test_wrmsr(x->v, GP_CFG_C(1), B(35));
	}
	test_wrmsr(x->v, A_PMC(0), (0 - 37ULL) & LOW(m->width));
	test_wrmsr(x->v, EVTSEL(0), pebs_sel);
	test_wrmsr(x->v, A_PMC(1), (0 - 50ULL) & LOW(m->width));
	test_wrmsr(x->v, EVTSEL(1), 0x00c4 | USR | OS | EN | INT); /* branches */
	test_wrmsr(x->v, FIXED(1), (0 - 500ULL) & LOW(m->width));
	test_wrmsr(x->v, FIXED_CTRL, 0x3 | (0xbULL << 4)); /* fixed 0; fixed 1 with PMI */
	test_wrmsr(x->v, GCTRL, B(0) | B(1) | B(2) | B(32) | B(33));
	/* freeze on PMI; LBRs where the model has them */
	test_wrmsr(x->v, DEBUGCTL, B(12) | (m->lbr_depth ? B(11) | B(0) : 0));
}

/* The guest's PMI handler: what it reads, then it re-arms and unfreezes. */
static void pmi_handler(struct vmm *x)
{
	uint64_t status = test_rdmsr(x->v, STATUS), v;

	logv(x, 0x9e1ULL << 40 | x->step);
	logv(x, status);
	for (unsigned int i = 0; i < 3; i++)
		if (vpmu_rdpmc(x->v, i, &v) == 0)
			logv(x, v);
	if (status & B(1))
		test_wrmsr(x->v, A_PMC(1), (0 - (50ULL + x->step % 7)) & LOW(x->m->width));
	if (status & B(33))
		test_wrmsr(x->v, FIXED(1), (0 - 500ULL) & LOW(x->m->width));
	if (status & B(62)) {
		/* the buffer reached its threshold: perf drains it */
		if (x->m->legacy_pebs) {
			logv(x, rd64(x->ram, DS_PA + 0x28));
			wr64(x->ram, DS_PA + 0x28, BUF_LA);
		} else {
			logv(x, test_rdmsr(x->v, PEBS_INDEX));
			test_wrmsr(x->v, PEBS_INDEX, B(32) | ((0x2000ULL >> 4) << 36));
		}
	}
	test_wrmsr(x->v, OVF_CTRL, status);
	vpmu_pmi_delivered(x->v);
}

/* One step of the guest: some instructions, a branch, a read, a reprogramming. */
static void step(struct vmm *x, uint64_t *rng)
{
	unsigned int what = rng_below(rng, 100);

	x->regs_fail = rng_below(rng, 10) == 0;
	vpmu_vcpu_sync(x->v); /* before every guest entry */
	if (x->pmi_pending) {
		x->pmi_pending = false;
		pmi_handler(x);
	}
	if (what < 60) {
		unsigned int n = 1 + rng_below(rng, 40), br = rng_below(rng, n + 1);
		struct vpmu_exact_counts c = {
			.instructions = n,
			.cycles = n + rng_below(rng, 20),
			.ref_cycles = n,
			.branches = br,
			.cond_branches = br / 2,
			.cond_taken = br / 4,
			.near_taken = br / 2,
			.loads = n / 3,
			.stores = n / 5,
			.mem_insts = n / 3 + n / 5,
			.cpl = rng_below(rng, 2) ? 3 : 0,
			.last_ip = 0x400000 + 16ULL * x->step,
			.last_dla = 0x7f0000 + 8ULL * x->step,
		};

		cr_assert_eq(vpmu_exact_feed(x->v, &c), 0);
	} else if (what < 80) {
		if (vpmu_lbr_active(x->v))
			vpmu_lbr_branch(x->v, 0x400000 + 16ULL * x->step, 0x500000 + x->step,
					(enum vpmu_branch_kind) rng_below(rng, 7),
					rng_below(rng, 2) ? 3 : 0, rng_below(rng, 100));
	} else if (what < 92) {
		uint64_t v;

		for (unsigned int i = 0; i < 3; i++)
			if (vpmu_rdpmc(x->v, i, &v) == 0)
				logv(x, v);
		if (vpmu_rdpmc(x->v, B(30) | 1, &v) == 0)
			logv(x, v);
	} else {
		/* perf rotates the event on GP2 */
		static const uint16_t ev[] = { 0x00c0, 0x003c, 0x02c4, 0x81d0 };

		test_wrmsr(x->v, EVTSEL(2), ev[rng_below(rng, 4)] | USR | OS | EN);
	}
}

/* What the guest can see at the end: every MSR, the DS area, the PEBS buffer. */
static void final_state(struct vmm *x)
{
	uint32_t msrs[512];
	size_t n = vpmu_msr_list(x->v, msrs, 512);
	uint64_t v;

	vpmu_vcpu_sync(x->v);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(vpmu_msr_read(x->v, msrs[i], &v), 0);
		logv(x, v);
	}
	for (uint64_t pa = DS_PA; pa < DS_PA + 0x200; pa += 8)
		logv(x, rd64(x->ram, pa));
	for (uint64_t pa = BUF_PA; pa < BUF_PA + BUF_LEN; pa += 8)
		logv(x, rd64(x->ram, pa));
	for (uint64_t pa = ARCH_PA; pa < ARCH_PA + 0x4000; pa += 8)
		logv(x, rd64(x->ram, pa));
}

/* The VMM moves to a new process: vPMU blob and RAM copied, its own flags lost. */
static void migrate(struct vmm *x)
{
	uint8_t *blob, *ram = aligned_alloc(4096, RAM);
	size_t len = save(x->v, &blob);

	cr_assert_not_null(ram);
	memcpy(ram, x->ram, RAM);
	memset(x->ram, 0xdb, RAM); /* the old process's memory is gone */
	free(x->ram);
	vpmu_vcpu_free(x->v);
	x->ram = ram;
	x->pmi_pending = false;
	x->v = vmm_vcpu(x);
	cr_assert_eq(vpmu_vcpu_restore(x->v, blob, len), 0, "%s", last_log);
	free(blob);
}

/* Run the scenario of `seed`, migrating before the steps in `at` (bit per step). */
static void scenario(struct vmm *x, const struct model_facts *m, uint64_t seed, const bool *at)
{
	uint64_t rng = seed;
	struct vpmu_stats st;

	memset(x, 0, sizeof(*x));
	x->m = m;
	x->ram = aligned_alloc(4096, RAM);
	x->log = malloc(LOG_MAX);
	cr_assert(x->ram && x->log);
	memset(x->ram, 0, RAM);
	x->v = vmm_vcpu(x);
	program(x);
	for (x->step = 0; x->step < STEPS; x->step++) {
		if (at && at[x->step])
			migrate(x);
		step(x, &rng);
	}
	final_state(x);
	cr_assert_eq(vpmu_stats_read(x->v, &st), 0);
	x->pebs_records = st.pebs_records;
	x->pebs_deferred = st.pebs_deferred;
	vpmu_vcpu_free(x->v);
	free(x->ram);
}

ParameterizedTestParameters(snapshot, restore_anywhere_changes_nothing)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

ParameterizedTest(unsigned int *fi, snapshot, restore_anywhere_changes_nothing)
{
	static struct vmm plain, moved;
	uint64_t pick = 0x5eed0000ULL + *fi;

	for (uint64_t seed = 1; seed <= 12; seed++) {
		bool at[STEPS] = { false };
		unsigned int pmis = 0;

		for (int k = 0; k < 3; k++)
			at[1 + rng_below(&pick, STEPS - 1)] = true;
		scenario(&plain, &facts[*fi], seed * 0x9e3779b97f4a7c15ULL, NULL);
		scenario(&moved, &facts[*fi], seed * 0x9e3779b97f4a7c15ULL, at);
		for (size_t i = 0; i + 8 <= plain.log_len; i += 8)
			pmis += rd64(plain.log, i) >> 40 == 0x9e1;
		cr_assert_gt(pmis, 2, "the scenario raises PMIs (%u)", pmis);
		cr_assert_gt(plain.pebs_records, 10, "and writes PEBS records (%llu)",
			     (unsigned long long) plain.pebs_records);
		cr_assert_gt(plain.pebs_deferred, 0, "some of them deferred");
		cr_assert_eq(moved.log_len, plain.log_len, "seed %llu", (unsigned long long) seed);
		for (size_t i = 0; i < plain.log_len; i += 8)
			cr_assert_eq(
				rd64(moved.log, i), rd64(plain.log, i),
				"seed %llu, what the guest saw, qword %zu: %#llx, restored %#llx",
				(unsigned long long) seed, i / 8,
				(unsigned long long) rd64(plain.log, i),
				(unsigned long long) rd64(moved.log, i));
		free(plain.log);
		free(moved.log);
	}
}
