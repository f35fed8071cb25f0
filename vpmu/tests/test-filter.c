/* SPDX-License-Identifier: MIT */
/*
 * The PMU event filter: the text format (docs/pmu-filter.md), the
 * KVM_SET_PMU_EVENT_FILTER semantics (allow/deny, plain/masked entries,
 * the fixed-counter bitmap), the default policy, and a filtered counter
 * seen through a vCPU with the exact backend.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vpmu/vpmu.h"
#include "facts.h"
#include "filter.h"

#define EVTSEL	   0x186
#define PMC	   0xc1
#define A_PMC	   0x4c1
#define FIXED_CTR  0x309
#define FIXED_CTRL 0x38d
#define GCTRL	   0x38f

#define USR B(16)
#define OS  B(17)
#define ANY B(21) /* AnyThread, SDM Vol. 3B §21.2.3 */
#define EN  B(22)

#define INST_ANY_P    0x00c0 /* INST_RETIRED.ANY_P */
#define BR_ALL	      0x00c4 /* BR_INST_RETIRED.ALL_BRANCHES */
#define OFFCORE_RSP_0 0x01b7 /* OFFCORE_RESPONSE_0 */
#define OFFCORE_RSP_1 0x01bb /* OFFCORE_RESPONSE_1 */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct vpmu_filter *parse_ok(const char *text)
{
	struct vpmu_filter *f = NULL;
	char err[256] = "";

	cr_assert_eq(vpmu_filter_parse(text, &f, err, sizeof(err)), 0, "%s\n-- %s", text, err);
	cr_assert_not_null(f);
	return f;
}

/* ---- good files ------------------------------------------------------------- */

Test(filter_parse, comments_blank_lines_crlf_tabs_decimal)
{
	struct vpmu_filter *f = parse_ok("# a deny list\n"
					 "\n"
					 "action deny   # trailing comment\n"
					 "\t event\t0xC0 umask 0x00\r\n"
					 "event 196 umask 32\n"
					 "   \n"
					 "fixed 0, 2\n");

	cr_expect(!vpmu_filter_allows_gp(f, INST_ANY_P | USR | OS | EN), "0xc0/0x00 listed");
	cr_expect(!vpmu_filter_allows_gp(f, 0x20c4 | USR | EN), "196/32 = 0xc4/0x20 listed");
	cr_expect(vpmu_filter_allows_gp(f, 0x01c0 | USR | EN), "other umask: not listed");
	cr_expect(vpmu_filter_allows_gp(f, 0x00c4 | USR | EN));
	cr_expect(!vpmu_filter_allows_fixed(f, 0));
	cr_expect(vpmu_filter_allows_fixed(f, 1));
	cr_expect(!vpmu_filter_allows_fixed(f, 2));
	cr_expect(vpmu_filter_allows_fixed(f, 3));
	vpmu_filter_free(f);
}

Test(filter_parse, masked_and_fixed_none)
{
	struct vpmu_filter *f = parse_ok("action allow\n"
					 "masked event 0xc4 mask 0xf0 match 0x20\n"
					 "masked event 0xc4 mask 0xff match 0x24 exclude\n"
					 "fixed none\n");

	cr_expect(vpmu_filter_allows_gp(f, 0x2fc4 | OS | EN));
	cr_expect(!vpmu_filter_allows_gp(f, 0x24c4 | OS | EN), "excluded");
	cr_expect(!vpmu_filter_allows_gp(f, 0x30c4 | OS | EN));
	for (unsigned int i = 0; i < 32; i++)
		cr_expect(!vpmu_filter_allows_fixed(f, i), "fixed none: counter %u", i);
	vpmu_filter_free(f);
}

/* A filter with only the action: an empty allow list counts nothing, an empty deny list all. */
Test(filter_parse, action_only)
{
	struct vpmu_filter *a = parse_ok("action allow"), *d = parse_ok("action deny\n");

	cr_expect(!vpmu_filter_allows_gp(a, INST_ANY_P | USR | EN));
	cr_expect(!vpmu_filter_allows_fixed(a, 0));
	cr_expect(vpmu_filter_allows_gp(d, INST_ANY_P | USR | EN));
	cr_expect(vpmu_filter_allows_fixed(d, 0));
	vpmu_filter_free(a);
	vpmu_filter_free(d);
	vpmu_filter_free(NULL);
}

/* 300 entries is KVM_PMU_EVENT_FILTER_MAX_EVENTS: accepted, one more is not. */
Test(filter_parse, max_entries)
{
	static char text[300 * 32 + 64];
	struct vpmu_filter *f = NULL;
	char err[256] = "";
	size_t n = (size_t) sprintf(text, "action allow\n");

	for (unsigned int i = 0; i < 300; i++)
		n += (size_t) sprintf(text + n, "event %#x umask %#x\n", i & 0xff, i >> 8);
	f = parse_ok(text);
	cr_expect(vpmu_filter_allows_gp(f, 0x00ff | EN), "entry 255 = 0xff/0x00");
	cr_expect(vpmu_filter_allows_gp(f, 0x012b | EN), "entry 299 = 0x2b/0x01");
	cr_expect(!vpmu_filter_allows_gp(f, 0x012c | EN), "0x2c/0x01 not listed");
	vpmu_filter_free(f);
	f = NULL;
	sprintf(text + n, "event 0x2c umask 1\n");
	cr_expect_eq(vpmu_filter_parse(text, &f, err, sizeof(err)), -EINVAL);
	cr_expect_str_eq(err, "line 302: more than 300 event entries (KVM's limit, "
			      "KVM_PMU_EVENT_FILTER_MAX_EVENTS)");
	cr_expect_null(f);
}

/* ---- bad files: the exact one-line message -------------------------------------- */

struct bad {
	const char *text;
	const char *err;
};

static const struct bad bad[] = {
	{ "", "no 'action allow' or 'action deny' line: a filter needs one" },
	{ "# only\n\nevent 0xc0 umask 0\n",
	  "no 'action allow' or 'action deny' line: a filter needs one" },
	{ "action allow\naction deny\n", "line 2: second 'action' line (the first is line 1)" },
	{ "action permit\n", "line 1: action: expected allow or deny, found 'permit'" },
	{ "action\n", "line 1: action: expected allow or deny at the end of the line" },
	{ "action ALLOW\n", "line 1: action: expected allow or deny, found 'ALLOW'" },
	{ "action allow now\n", "line 1: action: unexpected 'now' after the entry" },
	{ "action allow\nevnt 0xc0 umask 0\n",
	  "line 2: unknown keyword 'evnt': expected action, event, masked or fixed" },
	{ "action allow\r\nbogus\r\n",
	  "line 2: unknown keyword 'bogus': expected action, event, masked or fixed" },
	{ "action allow\n\x01z\n",
	  "line 2: unknown keyword '?z': expected action, event, masked or fixed" },
	{ "action allow\nabcdefghijklmnopqrstuvwxyz0123456789\n",
	  "line 2: unknown keyword 'abcdefghijklmnopqrstuvwxyz012345...': expected action, event, "
	  "masked or fixed" },
	{ "action allow\nevent 0xzz umask 0\n",
	  "line 2: event: expected event select, found '0xzz'" },
	{ "action allow\nevent 0x umask 0\n", "line 2: event: expected event select, found '0x'" },
	{ "action allow\nevent -1 umask 0\n", "line 2: event: expected event select, found '-1'" },
	{ "action allow\nevent\n", "line 2: event: expected event select at the end of the line" },
	{ "action allow\nevent 0x1c0 umask 0\n",
	  "line 2: event select '0x1c0' is out of range (at most 0xff)" },
	{ "action allow\nevent 0xffffffffffffffffffff umask 0\n",
	  "line 2: event select '0xffffffffffffffffffff' is out of range (at most 0xff)" },
	{ "action allow\nevent 0xc0\n", "line 2: event: expected 'umask' at the end of the line" },
	{ "action allow\nevent 0xc0 mask 0\n", "line 2: event: expected 'umask', found 'mask'" },
	{ "action allow\nevent 0xc0 umask\n",
	  "line 2: event: expected umask at the end of the line" },
	{ "action allow\nevent 0xc0 umask 256\n",
	  "line 2: umask '256' is out of range (at most 0xff)" },
	{ "action allow\nevent 0xc0 umask 0 exclude\n",
	  "line 2: event: unexpected 'exclude' after the entry" },
	{ "action deny\nmasked 0xc4 mask 0xff match 0\n",
	  "line 2: masked: expected 'event', found '0xc4'" },
	{ "action deny\nmasked event 0xc4 match 0\n",
	  "line 2: masked: expected 'mask', found 'match'" },
	{ "action deny\nmasked event 0xc4 mask 0xff\n",
	  "line 2: masked: expected 'match' at the end of the line" },
	{ "action deny\nmasked event 0xc4 mask 0x100 match 0\n",
	  "line 2: mask '0x100' is out of range (at most 0xff)" },
	{ "action deny\nmasked event 0xc4 mask 0xff match 0x1ff\n",
	  "line 2: match '0x1ff' is out of range (at most 0xff)" },
	{ "action deny\nmasked event 0xc4 mask 0xff match 0 excluded\n",
	  "line 2: masked: expected 'exclude' or the end of the line, found 'excluded'" },
	{ "action deny\nmasked event 0xc4 mask 0xff match 0 exclude 1\n",
	  "line 2: masked: unexpected '1' after the entry" },
	{ "action allow\nmasked event 0xc4 mask 0x0f match 0x30\n",
	  "line 2: match 0x30 has bits outside mask 0x0f: the entry can never match" },
	{ "action allow\nevent 0xc0 umask 0\n# x\nmasked event 0xc4 mask 0 match 0\n",
	  "line 4: 'masked' entry in a filter of plain 'event' entries (the first on line 2): a "
	  "filter is all plain or all masked, as in KVM" },
	{ "action allow\nmasked event 0xc4 mask 0 match 0\nevent 0xc0 umask 0\n",
	  "line 3: plain 'event' entry in a filter of 'masked' entries (the first on line 2): a "
	  "filter is all plain or all masked, as in KVM" },
	{ "action allow\nfixed 0,32\n", "line 2: fixed counter '32' is out of range (0 to 31)" },
	{ "action allow\nfixed\n",
	  "line 2: fixed: expected a fixed counter index list like 0,2 (or none) at the end of the "
	  "line" },
	{ "action allow\nfixed 0,,1\n",
	  "line 2: fixed: expected a fixed counter index list like 0,2 (or none), found ','" },
	{ "action allow\nfixed 0,\n",
	  "line 2: fixed: expected a fixed counter index list like 0,2 (or none) at the end of the "
	  "line" },
	{ "action allow\nfixed all\n",
	  "line 2: fixed: expected a fixed counter index list like 0,2 (or none), found 'all'" },
	{ "action allow\nfixed 0 1\n",
	  "line 2: fixed: unexpected '1' (separate indexes with commas)" },
	{ "action allow\nfixed none 1\n", "line 2: fixed: unexpected '1' after the entry" },
	{ "action allow\nfixed 0\nfixed 1\n", "line 3: second 'fixed' line (the first is line 2)" },
};

Test(filter_parse, bad_inputs_exact_message)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct vpmu_filter *f = (struct vpmu_filter *) &bad[i];
		char err[256];

		memset(err, 'X', sizeof(err));
		cr_expect_eq(vpmu_filter_parse(bad[i].text, &f, err, sizeof(err)), -EINVAL, "%zu",
			     i);
		cr_expect_str_eq(err, bad[i].err, "input %zu", i);
		cr_expect_eq(f, (struct vpmu_filter *) &bad[i], "ret_filter untouched on failure");
		/* without an error buffer, and with one too small: still one NUL-terminated line */
		cr_expect_eq(vpmu_filter_parse(bad[i].text, &f, NULL, 0), -EINVAL);
		memset(err, 'X', sizeof(err));
		cr_expect_eq(vpmu_filter_parse(bad[i].text, &f, err, 8), -EINVAL);
		cr_expect_eq(strlen(err), 7);
		cr_expect(!strncmp(err, bad[i].err, 7));
	}
}

Test(filter_parse, null_arguments)
{
	struct vpmu_filter *f = NULL;

	cr_expect_eq(vpmu_filter_parse(NULL, &f, NULL, 0), -EINVAL);
	cr_expect_eq(vpmu_filter_parse("action allow\n", NULL, NULL, 0), -EINVAL);
	cr_expect_eq(vpmu_filter_load(NULL, &f, NULL, 0), -EINVAL);
}

/* ---- vpmu_filter_load ------------------------------------------------------------- */

/* A file holding `data`, in $TMPDIR (or /tmp); the caller unlinks it before asserting. */
static char *temp_file(const char *data, size_t len)
{
	static char path[4096];
	const char *dir = getenv("TMPDIR");
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/vpmu-test-filter-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	cr_assert(fd >= 0, "mkstemp %s", path);
	n = write(fd, data, len);
	close(fd);
	if (n != (ssize_t) len)
		unlink(path);
	cr_assert_eq(n, (ssize_t) len);
	return path;
}

Test(filter_load, files)
{
	static const char good[] = "action allow\nevent 0xc0 umask 0\nfixed 1\n";
	static const char nul[] = "action allow\nevent 0xc0\0 umask 0\n";
	struct vpmu_filter *f = NULL;
	char err[256] = "", *path;
	int r;

	cr_expect_eq(vpmu_filter_load("/nonexistent/filter", &f, err, sizeof(err)), -ENOENT);
	cr_expect_str_eq(err, "cannot open: No such file or directory");
	cr_expect_eq(vpmu_filter_load("/tmp", &f, err, sizeof(err)), -EISDIR);
	cr_expect_str_eq(err, "cannot read: Is a directory");
	cr_expect_null(f);

	path = temp_file(nul, sizeof(nul) - 1);
	r = vpmu_filter_load(path, &f, err, sizeof(err));
	unlink(path);
	cr_expect_eq(r, -EINVAL);
	cr_expect_str_eq(err, "line 2: NUL byte: not a text file");

	path = temp_file(good, sizeof(good) - 1);
	r = vpmu_filter_load(path, &f, err, sizeof(err));
	unlink(path); /* before any assertion, which ends the test */
	cr_assert_eq(r, 0, "%s", err);
	cr_expect(vpmu_filter_allows_gp(f, INST_ANY_P | USR | EN));
	cr_expect(!vpmu_filter_allows_gp(f, BR_ALL | USR | EN));
	cr_expect(!vpmu_filter_allows_fixed(f, 0));
	cr_expect(vpmu_filter_allows_fixed(f, 1));
	vpmu_filter_free(f);
}

Test(filter_load, too_large)
{
	size_t len = (1u << 20) + 1;
	char *big = malloc(len), err[256] = "", *path;
	struct vpmu_filter *f = NULL;

	cr_assert_not_null(big);
	memset(big, '\n', len);
	path = temp_file(big, len);
	free(big);
	cr_expect_eq(vpmu_filter_load(path, &f, err, sizeof(err)), -EFBIG);
	unlink(path);
	cr_expect_str_eq(err, "larger than 1048576 bytes: not a PMU filter file");
	cr_expect_null(f);
}

/* ---- semantics, table-driven ------------------------------------------------------ */

/*
 * The same membership question through four filters. PLAIN lists
 * 0xc0/0x00 and 0xc4/0x20; MASKED includes 0xc4 with umask 0x2? (mask
 * 0xf0, match 0x20) except 0x24, and 0x3c with any umask (mask 0).
 */
#define PLAIN "event 0xc0 umask 0x00\nevent 0xc4 umask 0x20\n"
#define MASKED                                                                                     \
	"masked event 0xc4 mask 0xf0 match 0x20\n"                                                 \
	"masked event 0xc4 mask 0xff match 0x24 exclude\n"                                         \
	"masked event 0x3c mask 0x00 match 0x00\n"

static const struct {
	uint64_t evtsel;
	bool in_plain, in_masked;
} members[] = {
	{ 0x00c0, true, false },
	{ 0x01c0, false, false }, /* same event select, other umask */
	{ 0x20c4, true, true },
	{ 0x21c4, false, true }, /* masked: 0x21 & 0xf0 == 0x20 */
	{ 0x2fc4, false, true },
	{ 0x24c4, false, false }, /* masked: include and exclude match: not in */
	{ 0x10c4, false, false },
	{ 0x003c, false, true }, /* mask 0: every umask */
	{ 0xff3c, false, true },
	{ 0x00c5, false, false },
	/* only event select and umask are compared: CMASK, INV, EDGE, INT are not */
	{ 0x20c4 | B(18) | B(20) | B(23) | (5ull << 24), true, true },
	{ 0x24c4 | B(18) | B(20) | B(23) | (5ull << 24), false, false },
};

Test(filter_semantics, allow_deny_plain_masked)
{
	static const char *const texts[4] = {
		"action allow\n" PLAIN,
		"action deny\n" PLAIN,
		"action allow\n" MASKED,
		"action deny\n" MASKED,
	};

	for (unsigned int k = 0; k < 4; k++) {
		struct vpmu_filter *f = parse_ok(texts[k]);
		bool deny = k & 1, masked = k >= 2;

		for (size_t i = 0; i < ARRAY_SIZE(members); i++) {
			uint64_t sel = members[i].evtsel | USR | OS | EN;
			bool in = masked ? members[i].in_masked : members[i].in_plain;

			cr_expect_eq(vpmu_filter_allows_gp(f, sel), deny ? !in : in,
				     "%s %s: evtsel %#llx", deny ? "deny" : "allow",
				     masked ? "masked" : "plain", (unsigned long long) sel);
		}
		vpmu_filter_free(f);
	}
}

/*
 * api.rst: FixCtr[i]_is_allowed = (action == ALLOW) && (bitmap & BIT(i)) ||
 * (action == DENY) && !(bitmap & BIT(i)). Every bitmap of 4 counters.
 */
Test(filter_semantics, fixed_bitmap)
{
	for (unsigned int action = 0; action < 2; action++) {
		for (unsigned int bitmap = 0; bitmap < 16; bitmap++) {
			char text[128];
			size_t n = (size_t) snprintf(text, sizeof(text), "action %s\n",
						     action ? "deny" : "allow");
			struct vpmu_filter *f;

			if (bitmap) {
				n += (size_t) snprintf(text + n, sizeof(text) - n, "fixed ");
				for (unsigned int i = 0; i < 4; i++)
					if (bitmap & (1u << i))
						n += (size_t) snprintf(text + n, sizeof(text) - n,
								       "%u,", i);
				text[n - 1] = '\n'; /* the last comma */
			}
			f = parse_ok(text);
			for (unsigned int i = 0; i < 4; i++) {
				bool set = bitmap & (1u << i);

				cr_expect_eq(vpmu_filter_allows_fixed(f, i), action ? !set : set,
					     "%s bitmap %#x counter %u", action ? "deny" : "allow",
					     bitmap, i);
			}
			vpmu_filter_free(f);
		}
	}
}

/* The event list does not decide for fixed counters, even where it names their events. */
Test(filter_semantics, fixed_ignores_event_list)
{
	struct vpmu_filter *a = parse_ok("action allow\nevent 0xc0 umask 0\nevent 0x3c umask 0\n");
	struct vpmu_filter *d = parse_ok("action deny\nevent 0xc0 umask 0\nfixed 1\n");

	cr_expect(!vpmu_filter_allows_fixed(a, 0), "INST_RETIRED.ANY allowed on GP, not fixed 0");
	cr_expect(!vpmu_filter_allows_fixed(a, 1));
	cr_expect(vpmu_filter_allows_fixed(d, 0), "denied on GP, not on fixed 0");
	cr_expect(!vpmu_filter_allows_fixed(d, 1));
	vpmu_filter_free(a);
	vpmu_filter_free(d);
}

/* ---- the default policy ------------------------------------------------------------ */

Test(filter_default, null_filter)
{
	cr_expect(vpmu_filter_allows_gp(NULL, INST_ANY_P | USR | OS | EN));
	cr_expect(vpmu_filter_allows_gp(NULL, BR_ALL | USR | EN));
	cr_expect(vpmu_filter_allows_gp(NULL, 0x4f2e | OS | EN), "LLC references: this core's");
	cr_expect(!vpmu_filter_allows_gp(NULL, INST_ANY_P | ANY | USR | EN), "AnyThread");
	cr_expect(!vpmu_filter_allows_gp(NULL, OFFCORE_RSP_0 | USR | EN));
	cr_expect(!vpmu_filter_allows_gp(NULL, OFFCORE_RSP_1 | USR | EN));
	cr_expect(!vpmu_filter_allows_gp(NULL, 0x10b7 | OS | EN), "any umask of 0xb7");
	cr_expect(vpmu_filter_allows_gp(NULL, 0x01b6 | OS | EN));
	for (unsigned int i = 0; i < 32; i++)
		cr_expect(vpmu_filter_allows_fixed(NULL, i));
}

/*
 * AnyThread of a fixed counter is FIXED_CTR_CTRL bit 4i+2 (SDM Vol. 3B
 * §21.2.3); the counter hook checks it, any filter or none. (The models
 * refuse the bit with #GP, so no guest gets this far.)
 */
Test(filter_default, fixed_anythread)
{
	struct vpmu_filter *d = parse_ok("action deny\n");

	cr_expect(filter_allows_counter(NULL, 33, 0, 0x33));
	cr_expect(!filter_allows_counter(NULL, 33, 0, 0x73), "fixed 1 with AnyThread (bit 6)");
	cr_expect(filter_allows_counter(NULL, 32, 0, 0x73), "fixed 0: bit 6 is fixed 1's");
	cr_expect(!filter_allows_counter(d, 33, 0, 0x73));
	cr_expect(filter_allows_counter(d, 33, 0, 0x33));
	cr_expect(!filter_allows_counter(d, 1, INST_ANY_P | ANY | USR | EN, 0));
	cr_expect(filter_allows_counter(d, 1, INST_ANY_P | USR | EN, 0x44));
	vpmu_filter_free(d);
}

/* A deny list adds to the default policy; an allow list replaces it; AnyThread never counts. */
Test(filter_default, with_filters)
{
	struct vpmu_filter *d = parse_ok("action deny\nevent 0xc4 umask 0\n");
	struct vpmu_filter *a = parse_ok("action allow\nevent 0xb7 umask 1\nevent 0xc0 umask 0\n");
	struct vpmu_filter *m = parse_ok("action allow\nmasked event 0xbb mask 0 match 0\n");

	cr_expect(!vpmu_filter_allows_gp(d, OFFCORE_RSP_0 | USR | EN), "deny list: still filtered");
	cr_expect(!vpmu_filter_allows_gp(d, OFFCORE_RSP_1 | USR | EN));
	cr_expect(!vpmu_filter_allows_gp(d, INST_ANY_P | ANY | USR | EN));
	cr_expect(vpmu_filter_allows_gp(d, INST_ANY_P | USR | EN));
	cr_expect(vpmu_filter_allows_gp(a, OFFCORE_RSP_0 | USR | EN), "named by an allow list");
	cr_expect(!vpmu_filter_allows_gp(a, OFFCORE_RSP_1 | USR | EN));
	cr_expect(!vpmu_filter_allows_gp(a, INST_ANY_P | ANY | USR | EN), "AnyThread: never");
	cr_expect(vpmu_filter_allows_gp(m, OFFCORE_RSP_1 | USR | EN));
	cr_expect(!vpmu_filter_allows_gp(m, OFFCORE_RSP_0 | USR | EN));
	vpmu_filter_free(d);
	vpmu_filter_free(a);
	vpmu_filter_free(m);
}

/* ---- through a vCPU with the exact backend --------------------------------------- */

static struct vpmu_vcpu *filtered_vcpu(const char *model, const struct vpmu_filter *f)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cfg.model = model;
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.filter = f;
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	return v;
}

static void run(struct vpmu_vcpu *v, uint64_t n, uint64_t branches)
{
	struct vpmu_exact_counts c = {
		.instructions = n,
		.cycles = n,
		.ref_cycles = n,
		.branches = branches,
	};

	cr_assert_eq(vpmu_exact_feed(v, &c), 0);
}

#define FLAGS_COUNTING                                                                             \
	(VPMU_CTR_IMPLEMENTED | VPMU_CTR_PROGRAMMED | VPMU_CTR_BACKED | VPMU_CTR_RUNNING)
#define FLAGS_FILTERED (VPMU_CTR_IMPLEMENTED | VPMU_CTR_PROGRAMMED | VPMU_CTR_FILTERED)

ParameterizedTestParameters(filter_vcpu, denied_stays_allowed_counts)
{
	return cr_make_param_array(unsigned int, fact_index, NR_FACTS);
}

/*
 * Allow INST_RETIRED.ANY_P and fixed counter 0 only: GP0 (instructions)
 * and fixed 0 count exactly; GP1 (branches) and fixed 1 keep the value the
 * guest wrote, have no host event, and say FILTERED in the stats.
 */
ParameterizedTest(unsigned int *fi, filter_vcpu, denied_stays_allowed_counts)
{
	const struct model_facts *fa = &facts[*fi];
	struct vpmu_filter *f = parse_ok("action allow\nevent 0xc0 umask 0x00\nfixed 0\n");
	struct vpmu_vcpu *v = filtered_vcpu(fa->name, f);
	struct vpmu_stats st;

	test_wrmsr(v, A_PMC + 0, 100);
	test_wrmsr(v, A_PMC + 1, 5000);
	test_wrmsr(v, FIXED_CTR + 0, 7);
	test_wrmsr(v, FIXED_CTR + 1, 9000);
	test_wrmsr(v, EVTSEL + 0, INST_ANY_P | USR | OS | EN);
	test_wrmsr(v, EVTSEL + 1, BR_ALL | USR | OS | EN);
	test_wrmsr(v, FIXED_CTRL, 0x33); /* fixed 0 and 1, OS + USR */
	test_wrmsr(v, GCTRL, B(0) | B(1) | B(32) | B(33));
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	run(v, 1000, 300);
	run(v, 234, 66);
	cr_expect_eq(test_rdmsr(v, PMC + 0), 100 + 1234);
	cr_expect_eq(test_rdmsr(v, PMC + 1), 5000, "denied: the written value");
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 0), 7 + 1234);
	cr_expect_eq(test_rdmsr(v, FIXED_CTR + 1), 9000, "denied: the written value");
	cr_expect_eq(vpmu_exact_headroom(v), B(fa->width) - 100 - 1234,
		     "the nearest overflow is GP0's: a filtered counter never overflows");

	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.counters[0].flags, FLAGS_COUNTING);
	cr_expect_eq(st.counters[0].creates, 1);
	cr_expect_eq(st.counters[1].flags, FLAGS_FILTERED);
	cr_expect_eq(st.counters[1].creates, 0, "no host event");
	cr_expect_eq(st.counters[1].count, 5000);
	cr_expect_eq(st.counters[1].error, 0);
	cr_expect_eq(st.counters[8].flags, FLAGS_COUNTING);
	cr_expect_eq(st.counters[9].flags, FLAGS_FILTERED);
	cr_expect_eq(st.counters[9].creates, 0);
	cr_expect_eq(st.creates, 2, "two host events: GP0 and fixed 0");

	/* reprogrammed to an allowed event: counts from the value it has */
	test_wrmsr(v, EVTSEL + 1, INST_ANY_P | USR | OS | EN);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	run(v, 10, 0);
	cr_expect_eq(test_rdmsr(v, PMC + 1), 5010);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.counters[1].flags, FLAGS_COUNTING);
	/* and back to a denied one: it stops where it was, the host event goes */
	test_wrmsr(v, EVTSEL + 1, BR_ALL | USR | OS | EN);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	run(v, 10, 10);
	cr_expect_eq(test_rdmsr(v, PMC + 1), 5010);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.counters[1].flags, FLAGS_FILTERED);
	/* disabled: not programmed, so not filtered either */
	test_wrmsr(v, EVTSEL + 1, BR_ALL | USR | OS);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.counters[1].flags, VPMU_CTR_IMPLEMENTED);
	cr_expect_eq(test_rdmsr(v, PMC + 0), 100 + 1254);
	vpmu_vcpu_free(v);
	vpmu_filter_free(f);
}

/* The default policy in a vCPU: OFFCORE_RESPONSE is FILTERED, not merely unbacked. */
Test(filter_vcpu, default_policy_offcore)
{
	struct vpmu_vcpu *v = filtered_vcpu("Skylake-Server", NULL);
	struct vpmu_stats st;

	test_wrmsr(v, A_PMC + 2, 42);
	test_wrmsr(v, EVTSEL + 2, OFFCORE_RSP_0 | USR | OS | EN);
	test_wrmsr(v, EVTSEL + 3, INST_ANY_P | USR | OS | EN);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	run(v, 50, 0);
	cr_expect_eq(test_rdmsr(v, PMC + 2), 42);
	cr_expect_eq(test_rdmsr(v, PMC + 3), 50);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_expect_eq(st.counters[2].flags, FLAGS_FILTERED);
	cr_expect_eq(st.counters[2].error, 0);
	cr_expect_eq(st.counters[2].updates, 0, "no backend call at all");
	cr_expect_eq(st.counters[3].flags, FLAGS_COUNTING);
	vpmu_vcpu_free(v);
}

/* The stats JSON names the flag and the state. */
Test(filter_vcpu, stats_json)
{
	struct vpmu_filter *f = parse_ok("action deny\nevent 0xc0 umask 0\n");
	struct vpmu_vcpu *v = filtered_vcpu("Skylake-Server", f);
	struct vpmu_stats st;
	char buf[8192];
	size_t len;

	test_wrmsr(v, EVTSEL + 0, INST_ANY_P | USR | OS | EN);
	cr_assert_eq(vpmu_vcpu_sync(v), 0);
	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	cr_assert_eq(vpmu_stats_to_json(&st, 0, buf, sizeof(buf), &len), 0);
	cr_expect(strstr(buf, "{\"slot\":0,\"kind\":\"gp\",\"index\":0,\"config\":4391104,"), "%s",
		  buf);
	cr_expect(strstr(buf, "\"creates\":0,\"updates\":0,\"flags\":[\"implemented\","
			      "\"programmed\",\"filtered\"],\"state\":\"filtered\",\"error\":0,"
			      "\"log_repeats\":0}"),
		  "%s", buf);
	vpmu_vcpu_free(v);
	vpmu_filter_free(f);
}

/* One filter, many vCPUs; a config from before `filter` existed gets the default policy. */
Test(filter_vcpu, shared_and_old_config_size)
{
	struct vpmu_filter *f = parse_ok("action allow\n");
	struct vpmu_vcpu *a = filtered_vcpu("Icelake-Server", f);
	struct vpmu_vcpu *b = filtered_vcpu("LunarLake", f);
	struct vpmu_vcpu *old = NULL, *x = NULL;
	struct vpmu_config cfg;
	struct {
		struct vpmu_config cfg;
		uint64_t extra;
	} newer;
	struct vpmu_stats st;

	vpmu_config_init(&cfg);
	cr_expect_eq(cfg.size, sizeof(cfg));
	cr_expect_null(cfg.filter, "the default policy by default");
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.filter = f; /* beyond the old size: must not be read */
	cfg.size = offsetof(struct vpmu_config, filter);
	cr_assert_eq(vpmu_vcpu_new(&cfg, &old), 0);
	/* a newer program's larger config: fine while the fields we do not know are 0 */
	newer.cfg = cfg;
	newer.cfg.size = sizeof(newer);
	newer.extra = 0;
	cr_assert_eq(vpmu_vcpu_new(&newer.cfg, &x), 0, "a newer, larger config");
	vpmu_vcpu_free(x);
	x = NULL;
	newer.extra = 1;
	cr_expect_eq(vpmu_vcpu_new(&newer.cfg, &x), -E2BIG, "a newer feature asked of us");
	cfg.size = offsetof(struct vpmu_config, filter) - 8;
	cr_expect_eq(vpmu_vcpu_new(&cfg, &x), -EINVAL);
	cr_expect_null(x);

	test_wrmsr(a, EVTSEL, INST_ANY_P | USR | OS | EN);
	test_wrmsr(b, EVTSEL, INST_ANY_P | USR | OS | EN);
	test_wrmsr(old, EVTSEL, INST_ANY_P | USR | OS | EN);
	vpmu_vcpu_sync(a);
	vpmu_vcpu_sync(b);
	vpmu_vcpu_sync(old);
	run(a, 10, 0);
	run(b, 10, 0);
	run(old, 10, 0);
	cr_expect_eq(test_rdmsr(a, PMC), 0, "empty allow list");
	cr_expect_eq(test_rdmsr(b, PMC), 0);
	cr_expect_eq(test_rdmsr(old, PMC), 10, "old-size config: default policy");
	cr_assert_eq(vpmu_stats_read(a, &st), 0);
	cr_expect_eq(st.counters[0].flags, FLAGS_FILTERED);
	cr_assert_eq(vpmu_stats_read(old, &st), 0);
	cr_expect_eq(st.counters[0].flags, FLAGS_COUNTING);
	vpmu_vcpu_free(a);
	vpmu_vcpu_free(b);
	vpmu_vcpu_free(old);
	vpmu_filter_free(f);
}
