/* SPDX-License-Identifier: MIT */
/*
 * Guest event -> host perf_event_attr, for every guest model on hosts
 * built by hand (Skylake-SP, Ice Lake-SP, Sapphire Rapids, Lunar Lake,
 * Zen 3, an Intel core libpfm4 does not know, a host that refuses raw
 * events, a PMU-less host, no perf at all), field by field.
 *
 * Architectural encodings: SDM Vol. 3B Table 21-1; generic perf events:
 * the Intel event map of Linux (arch/x86/events/intel/core.c). By-name
 * values are libpfm4 4.13's tables for icx and spr, checked against the
 * Intel perfmon lists for those cores (e.g. Sapphire Rapids moved
 * UOPS_ISSUED to AEH, INT_MISC to ADH and OFFCORE_REQUESTS to 21H).
 *
 * libpfm4 encodes only for PMUs present on this machine unless
 * LIBPFM_ENCODE_INACTIVE=1 is set before pfm_initialize() (see
 * hostmap.h): the suite sets it, then names the PMU ("icx::...").
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "events.h"
#include "hostmap.h"

/* enum perf_hw_id, spelled out so that a renumbering would show */
#define HW_CPU_CYCLES	       0
#define HW_INSTRUCTIONS	       1
#define HW_CACHE_REFERENCES    2
#define HW_CACHE_MISSES	       3
#define HW_BRANCH_INSTRUCTIONS 4
#define HW_BRANCH_MISSES       5
#define HW_BUS_CYCLES	       6
#define HW_REF_CPU_CYCLES      9
#define TYPE_HARDWARE	       0
#define TYPE_RAW	       4

#define UNBACKED UINT64_MAX

enum host_id {
	H_SKX,	     /* Skylake-SP: libpfm4 skx, vpmu model Skylake-Server */
	H_ICX,	     /* Ice Lake-SP: icx, Icelake-Server */
	H_SPR,	     /* Sapphire Rapids: spr, no vpmu model */
	H_LNL,	     /* Lunar Lake: unknown to libpfm4 4.13, model LunarLake */
	H_ZEN3,	     /* AMD Zen 3: amd64_fam19h_zen3 */
	H_INTEL_NEW, /* an Intel core neither libpfm4 nor vpmu knows */
	H_SKX_NORAW, /* Skylake-SP whose perf refuses PERF_TYPE_RAW */
	H_SW,	     /* no hardware PMU (a cloud VM) */
	H_NONE,	     /* no perf_event_open */
	NR_HOSTS,
};

static const char *const host_names[NR_HOSTS] = {
	"skx", "icx", "spr", "lnl", "zen3", "intel-new", "skx-noraw", "software", "none",
};

static struct host_pmu host(enum host_id id)
{
	static const struct {
		enum host_pmu_kind kind;
		bool raw_ok, intel;
		const char *pfm, *model;
	} h[NR_HOSTS] = {
		[H_SKX] = { HOST_PMU_HW, true, true, "skx", "Skylake-Server" },
		[H_ICX] = { HOST_PMU_HW, true, true, "icx", "Icelake-Server" },
		[H_SPR] = { HOST_PMU_HW, true, true, "spr", NULL },
		[H_LNL] = { HOST_PMU_HW, true, true, "", "LunarLake" },
		[H_ZEN3] = { HOST_PMU_HW, true, false, "amd64_fam19h_zen3", NULL },
		[H_INTEL_NEW] = { HOST_PMU_HW, true, true, "", NULL },
		[H_SKX_NORAW] = { HOST_PMU_HW, false, true, "skx", "Skylake-Server" },
		[H_SW] = { HOST_PMU_SOFTWARE, false, true, "", NULL },
		[H_NONE] = { HOST_PMU_NONE, false, true, "", NULL },
	};
	struct host_pmu p;

	memset(&p, 0, sizeof(p));
	p.kind = h[id].kind;
	p.raw_ok = h[id].raw_ok;
	p.intel = h[id].intel;
	snprintf(p.pfm_pmu, sizeof(p.pfm_pmu), "%s", h[id].pfm);
	p.model = h[id].model ? model_lookup(h[id].model) : NULL;
	if (h[id].model)
		cr_assert_not_null(p.model);
	snprintf(p.why, sizeof(p.why), "hand-built %s", host_names[id]);
	return p;
}

static const struct vpmu_model *guest(const char *name)
{
	const struct vpmu_model *m = model_lookup(name);

	cr_assert_not_null(m, "no model %s", name);
	return m;
}

static void setup(void)
{
	/* before the library's first pfm_initialize() in this process */
	setenv("LIBPFM_ENCODE_INACTIVE", "1", 1);
}

TestSuite(hostmap, .init = setup);

static struct vpmu_host_event gp(uint64_t config, uint64_t aux, bool usr, bool os)
{
	struct vpmu_host_event ev = {
		.kind = HEV_GP,
		.usr = usr,
		.os = os,
		.config = config,
		.aux = aux,
	};
	return ev;
}

static struct vpmu_host_event fixed(unsigned int i, bool usr, bool os)
{
	struct vpmu_host_event ev = {
		.kind = HEV_FIXED, .fixed = (uint8_t) i, .usr = usr, .os = os
	};
	return ev;
}

/* Every field of a backed event's attr; what it says of itself on failure. */
static void expect_attr(const char *what, const struct vpmu_model *g, enum host_id hid,
			struct vpmu_host_event ev, uint32_t type, uint64_t config, uint64_t config1)
{
	struct host_pmu h = host(hid);
	struct perf_event_attr a;
	const char *why = NULL;
	int r;

	memset(&a, 0xa5, sizeof(a));
	r = hostmap_attr(g, &h, &ev, &a, &why);
	cr_assert_eq(r, 0, "%s, guest %s on %s: %d (%s)", what, g->name, host_names[hid], r,
		     why ? why : "no why");
	cr_assert_not_null(why);
	cr_expect_eq(a.type, type, "%s, %s on %s: type %u, want %u", what, g->name, host_names[hid],
		     a.type, type);
	cr_expect_eq(a.config, config, "%s, %s on %s: config %#llx, want %#llx", what, g->name,
		     host_names[hid], (unsigned long long) a.config, (unsigned long long) config);
	cr_expect_eq(a.config1, config1, "%s, %s on %s: config1 %#llx, want %#llx", what, g->name,
		     host_names[hid], (unsigned long long) a.config1, (unsigned long long) config1);
	cr_expect_eq(a.config2, 0);
	cr_expect_eq(a.size, sizeof(a));
	cr_expect_eq(a.exclude_user, !ev.usr, "%s: exclude_user", what);
	cr_expect_eq(a.exclude_kernel, !ev.os, "%s: exclude_kernel", what);
	cr_expect_eq(a.exclude_hv, 1);
	cr_expect_eq(a.exclude_host, 1, "%s on %s: exclude_host", what, host_names[hid]);
	cr_expect_eq(a.exclude_guest, 0, "%s on %s: exclude_guest", what, host_names[hid]);
	cr_expect_eq(a.pinned, 1);
	cr_expect_eq(a.precise_ip, 0, "%s on %s: host PEBS requested", what, host_names[hid]);
	/* left to the backend */
	cr_expect_eq(a.disabled, 0);
	cr_expect_eq(a.sample_period, 0);
	cr_expect_eq(a.sample_type, 0);
	cr_expect_eq(a.wakeup_events, 0);
	cr_expect_eq(a.read_format, 0);
	cr_expect_eq(a.inherit, 0);
	cr_expect_eq(a.exclude_idle, 0);
	cr_expect_eq(a.freq, 0);
}

static void expect_unbacked(const char *what, const struct vpmu_model *g, enum host_id hid,
			    struct vpmu_host_event ev, const char *why_has)
{
	struct host_pmu h = host(hid);
	struct perf_event_attr a, before;
	const char *why = NULL;
	int r;

	memset(&a, 0xa5, sizeof(a));
	before = a;
	r = hostmap_attr(g, &h, &ev, &a, &why);
	cr_assert_eq(r, -ENOENT, "%s, guest %s on %s: %d, want -ENOENT (type %u config %#llx)",
		     what, g->name, host_names[hid], r, a.type, (unsigned long long) a.config);
	cr_assert(!memcmp(&a, &before, sizeof(a)), "%s: attr written on failure", what);
	cr_assert_not_null(why, "%s: no why", what);
	cr_assert(strstr(why, why_has), "%s, %s on %s: why \"%s\", want \"%s\"", what, g->name,
		  host_names[hid], why, why_has);
}

static const char *unbacked_why(enum host_id hid, const char *otherwise)
{
	if (hid == H_SW)
		return "no hardware PMU";
	if (hid == H_NONE)
		return "perf_event_open is unusable";
	return otherwise;
}

/*
 * SDM Table 21-1 events and the generic perf event that Linux encodes as
 * exactly that event. 3CH/01H counts at the bus/crystal clock: perf's
 * bus-cycles (0x013c in Linux's Intel map), not ref-cycles (fixed 2).
 */
static const struct {
	const char *name;
	uint64_t code, generic;
} arch[] = {
	{ "UnHalted Core Cycles", 0x003c, HW_CPU_CYCLES },
	{ "Instructions Retired", 0x00c0, HW_INSTRUCTIONS },
	{ "UnHalted Reference Cycles", 0x013c, HW_BUS_CYCLES },
	{ "LLC Reference", 0x4f2e, HW_CACHE_REFERENCES },
	{ "LLC Misses", 0x412e, HW_CACHE_MISSES },
	{ "Branch Instructions Retired", 0x00c4, HW_BRANCH_INSTRUCTIONS },
	{ "Branch Misses Retired", 0x00c5, HW_BRANCH_MISSES },
	{ "Topdown Slots", 0x01a4, UNBACKED },
};

/* How a pair maps architectural events: identity, generic, unbacked. */
enum arch_mode { IDENT, GENERIC, NONE };

static const struct pair {
	const char *guest;
	enum host_id host;
	enum arch_mode mode;
} pairs[] = {
	{ "Skylake-Server", H_SKX, IDENT },
	{ "Skylake-Server", H_ICX, GENERIC },
	{ "Skylake-Server", H_SPR, GENERIC },
	{ "Skylake-Server", H_LNL, GENERIC },
	{ "Skylake-Server", H_ZEN3, GENERIC },
	{ "Skylake-Server", H_INTEL_NEW, GENERIC },
	{ "Skylake-Server", H_SKX_NORAW, GENERIC },
	{ "Skylake-Server", H_SW, NONE },
	{ "Skylake-Server", H_NONE, NONE },
	{ "Icelake-Server", H_SKX, GENERIC },
	{ "Icelake-Server", H_ICX, IDENT },
	{ "Icelake-Server", H_SPR, GENERIC },
	{ "Icelake-Server", H_LNL, GENERIC },
	{ "Icelake-Server", H_ZEN3, GENERIC },
	{ "Icelake-Server", H_INTEL_NEW, GENERIC },
	{ "Icelake-Server", H_SW, NONE },
	{ "LunarLake", H_SKX, GENERIC },
	{ "LunarLake", H_ICX, GENERIC },
	{ "LunarLake", H_SPR, GENERIC },
	{ "LunarLake", H_LNL, IDENT },
	{ "LunarLake", H_ZEN3, GENERIC },
	{ "LunarLake", H_NONE, NONE },
	{ "arch-pebs", H_SKX, GENERIC },
	{ "arch-pebs", H_ICX, GENERIC },
	{ "arch-pebs", H_SPR, GENERIC },
	{ "arch-pebs", H_LNL, GENERIC },
	{ "arch-pebs", H_ZEN3, GENERIC },
	{ "arch-pebs", H_INTEL_NEW, GENERIC },
	{ "arch-pebs", H_SKX_NORAW, GENERIC },
	{ "arch-pebs", H_SW, NONE },
};

/* Hosts with topdown slots (perfmon v5+ Intel cores that take raw events). */
static bool has_slots(enum host_id hid)
{
	return hid == H_ICX || hid == H_SPR || hid == H_LNL;
}

/* usr/os cycle through both, user only, kernel only */
static bool ring_usr(unsigned int j)
{
	return j % 3 != 2;
}
static bool ring_os(unsigned int j)
{
	return j % 3 != 1;
}

Test(hostmap, architectural_events_every_pair)
{
	for (size_t p = 0; p < ARRAY_SIZE(pairs); p++) {
		const struct vpmu_model *g = guest(pairs[p].guest);
		enum host_id hid = pairs[p].host;

		for (unsigned int j = 0; j < ARRAY_SIZE(arch); j++) {
			struct vpmu_host_event ev = gp(arch[j].code, 0, ring_usr(j), ring_os(j));
			char what[96];

			snprintf(what, sizeof(what), "arch %u %s", j, arch[j].name);
			if (j >= g->arch_events_len)
				continue; /* not architectural for this guest: below */
			if (pairs[p].mode == NONE)
				expect_unbacked(what, g, hid, ev, unbacked_why(hid, ""));
			else if (pairs[p].mode == IDENT)
				expect_attr(what, g, hid, ev, TYPE_RAW, arch[j].code, 0);
			else if (arch[j].generic != UNBACKED)
				expect_attr(what, g, hid, ev, TYPE_HARDWARE, arch[j].generic, 0);
			else if (has_slots(hid))
				expect_attr(what, g, hid, ev, TYPE_RAW, 0x01a4, 0);
			else
				expect_unbacked(what, g, hid, ev, "no slots event");
		}
	}
}

/* Skylake-SP enumerates 7 architectural events: A4H/01H is no event of its. */
Test(hostmap, slots_is_not_architectural_on_skylake)
{
	const struct vpmu_model *g = guest("Skylake-Server");
	struct vpmu_host_event ev = gp(0x01a4, 0, true, true);

	cr_assert_eq(g->arch_events_len, 7);
	/* the same core: what A4H/01H does there, it does for the guest */
	expect_attr("A4H/01H", g, H_SKX, ev, TYPE_RAW, 0x01a4, 0);
	expect_unbacked("A4H/01H", g, H_ICX, ev, "no catalogue event");
	expect_unbacked("A4H/01H", g, H_SPR, ev, "no catalogue event");
}

/*
 * Fixed counters (SDM Table 21-2): 0 instructions, 1 core cycles, 2 TSC-
 * rate reference cycles (perf ref-cycles), 3 topdown slots: Linux's
 * pseudo-encoding 0x0400 (event 0, umask 4), Intel hosts with slots only.
 */
Test(hostmap, fixed_counters_every_pair)
{
	static const uint64_t want[3] = { HW_INSTRUCTIONS, HW_CPU_CYCLES, HW_REF_CPU_CYCLES };

	for (size_t p = 0; p < ARRAY_SIZE(pairs); p++) {
		const struct vpmu_model *g = guest(pairs[p].guest);
		enum host_id hid = pairs[p].host;

		for (unsigned int i = 0; i < 4; i++) {
			struct vpmu_host_event ev = fixed(i, ring_usr(i), ring_os(i));
			char what[32];

			snprintf(what, sizeof(what), "fixed %u", i);
			if (pairs[p].mode == NONE)
				expect_unbacked(what, g, hid, ev, unbacked_why(hid, ""));
			else if (i >= g->nr_fixed)
				expect_unbacked(what, g, hid, ev, "no such fixed counter");
			else if (i < 3)
				expect_attr(what, g, hid, ev, TYPE_HARDWARE, want[i], 0);
			else if (has_slots(hid))
				expect_attr(what, g, hid, ev, TYPE_RAW, 0x0400, 0);
			else
				expect_unbacked(what, g, hid, ev, "no slots event");
		}
	}
}

/*
 * Skylake-SP catalogue events (Intel's 06_55H list, vpmu/events/skylake-server.txt)
 * on a Skylake-SP host (identity), Ice Lake-SP and Sapphire Rapids (by
 * name). Raw configs: event | umask << 8 | edge 18 | inv 23 | cmask << 24.
 */
static const struct {
	const char *name;
	uint64_t sel, aux;  /* the guest's event select and extra MSR */
	uint64_t icx, icx1; /* icx config, config1; UNBACKED */
	uint64_t spr, spr1;
} skx_events[] = {
	{ "UOPS_ISSUED.ANY", 0x010e, 0, 0x010e, 0, 0x01ae, 0 },
	/* cmask 1, inv */
	{ "UOPS_ISSUED.STALL_CYCLES", 0x0180010e, 0, 0x0180010e, 0, 0x018001ae, 0 },
	/* cmask 4 */
	{ "CYCLE_ACTIVITY.STALLS_TOTAL", 0x040004a3, 0, 0x040004a3, 0, 0x040004a3, 0 },
	/* edge, cmask 1 */
	{ "CPU_CLK_UNHALTED.RING0_TRANS", 0x0104003c, 0, 0x0104003c, 0, 0x0104003c, 0 },
	{ "INT_MISC.CLEARS_COUNT", 0x0104010d, 0, 0x0104010d, 0, 0x010401ad, 0 },
	{ "MACHINE_CLEARS.COUNT", 0x010401c3, 0, 0x010401c3, 0, 0x010401c3, 0 },
	{ "MEM_LOAD_RETIRED.L3_MISS", 0x20d1, 0, 0x20d1, 0, 0x20d1, 0 },
	{ "MEM_INST_RETIRED.ALL_LOADS", 0x81d0, 0, 0x81d0, 0, 0x81d0, 0 },
	{ "BR_INST_RETIRED.NEAR_CALL", 0x02c4, 0, 0x02c4, 0, 0x02c4, 0 },
	/* the PEBS twin of ALL_BRANCHES (C4H/04H on Skylake) counts the same */
	{ "BR_INST_RETIRED.ALL_BRANCHES_PS", 0x04c4, 0, 0x00c4, 0, 0x00c4, 0 },
	{ "L2_RQSTS.DEMAND_DATA_RD_MISS", 0x2124, 0, 0x2124, 0, 0x2124, 0 },
	/* offcore requests: Sapphire Rapids moved them to 21H */
	{ "OFFCORE_REQUESTS.DEMAND_DATA_RD", 0x01b0, 0, 0x01b0, 0, 0x0121, 0 },
	{ "OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_DEMAND_DATA_RD", 0x01000160, 0, 0x01000160, 0,
	  UNBACKED, 0 },
	{ "ICACHE_64B.IFTAG_MISS", 0x0283, 0, 0x0283, 0, UNBACKED, 0 },
	/* MSR_PEBS_FRONTEND: the catalogue row with that value names it */
	{ "FRONTEND_RETIRED.DSB_MISS", 0x01c6, 0x11, 0x01c6, 0x11, 0x01c6, 0x11 },
	{ "FRONTEND_RETIRED.LATENCY_GE_16", 0x01c6, 0x401006, 0x01c6, 0x501006, 0x01c6, 0x601006 },
	/* cmask 16, inv: libpfm4 4.13 has neither name nor base umask name */
	{ "UOPS_RETIRED.TOTAL_CYCLES", 0x108002c2, 0, UNBACKED, 0, UNBACKED, 0 },
	/* MSR_PEBS_LD_LAT_THRESHOLD 4 */
	{ "MEM_TRANS_RETIRED.LOAD_LATENCY_GT_4", 0x01cd, 4, UNBACKED, 0, UNBACKED, 0 },
};

Test(hostmap, skylake_catalogue_events)
{
	const struct vpmu_model *g = guest("Skylake-Server");
	const struct vpmu_event_table *t = g->events;

	cr_assert_not_null(t);
	for (size_t i = 0; i < ARRAY_SIZE(skx_events); i++) {
		const struct vpmu_event_desc *d = vpmu_event_find(t, skx_events[i].name);
		struct vpmu_host_event ev =
			gp(skx_events[i].sel, skx_events[i].aux, ring_usr(i), ring_os(i));
		const char *what = skx_events[i].name;

		/* the table's encodings are the catalogue's */
		cr_assert_not_null(d, "%s not in the catalogue", what);
		cr_assert_eq(vpmu_event_encode(d), skx_events[i].sel, "%s", what);
		cr_assert_eq(d->aux_value, skx_events[i].aux, "%s", what);

		expect_attr(what, g, H_SKX, ev, TYPE_RAW, skx_events[i].sel, skx_events[i].aux);
		if (skx_events[i].icx == UNBACKED)
			expect_unbacked(what, g, H_ICX, ev, "libpfm4 has no event");
		else
			expect_attr(what, g, H_ICX, ev, TYPE_RAW, skx_events[i].icx,
				    skx_events[i].icx1);
		if (skx_events[i].spr == UNBACKED)
			expect_unbacked(what, g, H_SPR, ev, "libpfm4 has no event");
		else
			expect_attr(what, g, H_SPR, ev, TYPE_RAW, skx_events[i].spr,
				    skx_events[i].spr1);
		expect_unbacked(what, g, H_ZEN3, ev, "names are Intel's");
		expect_unbacked(what, g, H_LNL, ev, "libpfm4 does not know the host PMU");
		expect_unbacked(what, g, H_INTEL_NEW, ev, "libpfm4 does not know the host PMU");
		expect_unbacked(what, g, H_SKX_NORAW, ev, "refuses raw events");
		expect_unbacked(what, g, H_SW, ev, "no hardware PMU");
		expect_unbacked(what, g, H_NONE, ev, "perf_event_open is unusable");
	}
}

/*
 * OFFCORE_RESPONSE_0 (B7H/01H, MSR_OFFCORE_RSP_0 in config1): the same
 * core takes it as is; another core reads the request/response bits
 * differently and the catalogue has no name for it, so it is unbacked.
 */
Test(hostmap, offcore_response)
{
	const struct vpmu_model *skx = guest("Skylake-Server"), *icx = guest("Icelake-Server");
	/* DEMAND_DATA_RD (bit 0) | ANY_RESPONSE (bit 16) */
	struct vpmu_host_event ev = gp(0x01b7, 0x10001, true, true);
	struct vpmu_host_event ev1 = gp(0x01bb, 0x10002, true, false);

	expect_attr("OFFCORE_RESPONSE_0", skx, H_SKX, ev, TYPE_RAW, 0x01b7, 0x10001);
	expect_attr("OFFCORE_RESPONSE_1", skx, H_SKX, ev1, TYPE_RAW, 0x01bb, 0x10002);
	expect_attr("OFFCORE_RESPONSE_0", icx, H_ICX, ev, TYPE_RAW, 0x01b7, 0x10001);
	expect_unbacked("OFFCORE_RESPONSE_0", skx, H_ICX, ev, "no catalogue event");
	expect_unbacked("OFFCORE_RESPONSE_0", skx, H_SPR, ev, "no catalogue event");
	expect_unbacked("OFFCORE_RESPONSE_0", icx, H_SKX, ev, "no event catalogue");
	expect_unbacked("OFFCORE_RESPONSE_0", skx, H_ZEN3, ev, "names are Intel's");
}

/* A frontend value no catalogue row has: nothing names the event. */
Test(hostmap, frontend_value_not_in_catalogue)
{
	const struct vpmu_model *g = guest("Skylake-Server");
	struct vpmu_host_event ev = gp(0x01c6, 0x16, true, true);

	expect_attr("FRONTEND_RETIRED 0x16", g, H_SKX, ev, TYPE_RAW, 0x01c6, 0x16);
	expect_unbacked("FRONTEND_RETIRED 0x16", g, H_ICX, ev, "extra MSR value");
}

/*
 * Modifiers a catalogue row lacks are carried: UOPS_ISSUED.ANY with cmask
 * 2 and edge has no name of its own, UOPS_ISSUED.ANY does.
 */
Test(hostmap, modifiers_carried_by_name)
{
	const struct vpmu_model *g = guest("Skylake-Server");
	struct vpmu_host_event ev = gp(0x0204010e, 0, true, true);

	cr_assert_null(vpmu_event_decode(g->events, 0x0204010e));
	expect_attr("UOPS_ISSUED.ANY e c=2", g, H_SKX, ev, TYPE_RAW, 0x0204010e, 0);
	expect_attr("UOPS_ISSUED.ANY e c=2", g, H_ICX, ev, TYPE_RAW, 0x0204010e, 0);
	expect_attr("UOPS_ISSUED.ANY e c=2", g, H_SPR, ev, TYPE_RAW, 0x020401ae, 0);
	/* an architectural event with a modifier is no longer the generic one */
	ev = gp(0x0180003c, 0, true, true);
	expect_attr("cycles c=1 inv", g, H_ICX, ev, TYPE_RAW, 0x0180003c, 0);
	expect_unbacked("cycles c=1 inv", g, H_ZEN3, ev, "names are Intel's");
}

/* Nothing that counts another thread, nothing the host would misread. */
Test(hostmap, refused_selects)
{
	const struct vpmu_model *skx = guest("Skylake-Server"), *lnl = guest("LunarLake");
	/* CPU_CLK_UNHALTED.THREAD_P_ANY: AnyThread */
	struct vpmu_host_event any = gp(0x0020003c, 0, true, true);
	/* CPU_CLK_UNHALTED.REF_TSC's pseudo-encoding on a GP counter */
	struct vpmu_host_event pseudo = gp(0x0300, 0, true, true);
	/* IN_TX (bit 32): not a bit the guest model lets through */
	struct vpmu_host_event intx = gp(BIT_ULL(32) | 0x00c0, 0, true, true);

	expect_unbacked("AnyThread", skx, H_SKX, any, "AnyThread");
	expect_unbacked("AnyThread", skx, H_ICX, any, "AnyThread");
	expect_unbacked("event 0", skx, H_SKX, pseudo, "pseudo-encoding");
	expect_unbacked("event 0", skx, H_ICX, pseudo, "pseudo-encoding");
	expect_unbacked("IN_TX", skx, H_SKX, intx, "cannot carry");
	expect_unbacked("IN_TX", skx, H_ICX, intx, "above 31");
	expect_unbacked("IN_TX", lnl, H_LNL, intx, "cannot carry");
}

/* Perfmon v6 UMASK2 (47:40) and EQ (36) go through on the same model only. */
Test(hostmap, umask2_and_eq_identity)
{
	const struct vpmu_model *lnl = guest("LunarLake"), *icx = guest("Icelake-Server");
	uint64_t sel = BIT_ULL(40) | BIT_ULL(36) | 0x01d0;
	struct vpmu_host_event ev = gp(sel, 0, true, true);

	expect_attr("umask2+eq", lnl, H_LNL, ev, TYPE_RAW, 0x110000001d0ULL, 0);
	expect_unbacked("umask2+eq", lnl, H_ICX, ev, "above 31");
	/* Ice Lake has neither field */
	expect_unbacked("umask2+eq", icx, H_ICX, ev, "cannot carry");
}

/*
 * Identity is by model name: a narrowed copy is the same core. (An
 * offcore response has no name to go by: only identity backs it.)
 */
Test(hostmap, narrowed_copy_is_same_model)
{
	struct vpmu_model copy = *guest("Skylake-Server");
	struct vpmu_host_event ev = gp(0x01b7, 0x10001, true, true);
	struct host_pmu h = host(H_SKX);
	struct perf_event_attr a;
	const char *why = NULL;

	copy.nr_gp = 2;
	expect_attr("narrowed", &copy, H_SKX, ev, TYPE_RAW, 0x01b7, 0x10001);
	cr_assert_eq(hostmap_attr(&copy, &h, &ev, &a, &why), 0);
	cr_assert(strstr(why, "identity"), "%s", why);
}

Test(hostmap, bad_arguments)
{
	const struct vpmu_model *g = guest("Skylake-Server");
	struct host_pmu h = host(H_SKX);
	struct vpmu_host_event ev = gp(0x00c0, 0, true, true), none = { .kind = HEV_NONE };
	struct perf_event_attr a;
	const char *why;

	cr_assert_eq(hostmap_attr(NULL, &h, &ev, &a, &why), -EINVAL);
	cr_assert_eq(hostmap_attr(g, NULL, &ev, &a, &why), -EINVAL);
	cr_assert_eq(hostmap_attr(g, &h, NULL, &a, &why), -EINVAL);
	cr_assert_eq(hostmap_attr(g, &h, &ev, NULL, &why), -EINVAL);
	cr_assert_eq(hostmap_attr(g, &h, &none, &a, &why), -EINVAL);
	/* why is optional */
	cr_assert_eq(hostmap_attr(g, &h, &ev, &a, NULL), 0);
	cr_assert_eq(a.config, 0x00c0);
}

/* ---- host detection on recorded inputs ------------------------------------ */

/* CPUID leaf 0 EBX, EDX, ECX: the vendor string (SDM Vol. 2A, CPUID leaf 0) */
#define INTEL 0x756e6547, 0x6c65746e, 0x49656e69 /* "Genu", "ntel", "ineI" (EBX ECX EDX) */
#define AMD   0x68747541, 0x444d4163, 0x69746e65 /* "Auth", "cAMD", "enti" */

struct recorded {
	const char *name;
	struct host_probe in;
	enum host_pmu_kind kind;
	bool raw_ok, intel;
	const char *pfm, *model, *why;
};

/*
 * Hosts as host_pmu_probe() reads them. CPUID.01H:EAX is stepping [3:0],
 * model [7:4], family [11:8], extended model [19:16], extended family
 * [27:20]; the display model takes the extended model for families 6 and
 * 0FH, the display family adds the extended family for 0FH (SDM Vol. 2A,
 * CPUID, "Version Information"). ECX[31]: a hypervisor is present.
 */
static const struct recorded recorded[] = {
	{ "Skylake-SP, perf with a PMU",
	  { true, { 0x16, INTEL }, { 0x00050654, 0, 0x7ffefbff, 0 }, 0, 0, 0, 0, "skx", 0 },
	  HOST_PMU_HW,
	  true,
	  true,
	  "skx",
	  "Skylake-Server",
	  "hardware PMU, raw events; GenuineIntel 06_55H stepping 4; libpfm4 skx; "
	  "model Skylake-Server" },
	{ "Ice Lake-SP whose perf refuses raw events",
	  { true,
	    { 0x1b, INTEL },
	    { 0x000606a6, 0, 0x7ffefbff, 0 },
	    0,
	    -EOPNOTSUPP,
	    0,
	    0,
	    "icx",
	    0 },
	  HOST_PMU_HW,
	  false,
	  true,
	  "icx",
	  "Icelake-Server",
	  "hardware PMU, raw events refused; GenuineIntel 06_6AH stepping 6; libpfm4 icx; "
	  "model Icelake-Server" },
	{ "Alder Lake, hybrid: two core PMUs",
	  { true, { 0x20, INTEL }, { 0x00090672, 0, 0x7ffafbff, 0 }, 0, 0, 0, 0, "adl_glc", 1 },
	  HOST_PMU_HW,
	  true,
	  true,
	  "adl_glc",
	  NULL,
	  "hardware PMU, raw events; GenuineIntel 06_97H stepping 2; libpfm4 adl_glc (hybrid); "
	  "model none" },
	{ "Lunar Lake, unknown to libpfm4",
	  { true, { 0x23, INTEL }, { 0x000b06d1, 0, 0x7ffafbff, 0 }, 0, 0, 0, -ENOENT, "", 0 },
	  HOST_PMU_HW,
	  true,
	  true,
	  "",
	  "LunarLake",
	  "hardware PMU, raw events; GenuineIntel 06_BDH stepping 1; libpfm4 knows no core PMU "
	  "here; model LunarLake" },
	{ "this project's cloud VM: no PMU, task-clock works (recorded)",
	  { true,
	    { 0x24, INTEL },
	    { 0x000a0671, 0x00020800, 0xfffa3203, 0x1f8bfbff },
	    -ENOENT,
	    -ENOENT,
	    0,
	    0,
	    "icl",
	    0 },
	  HOST_PMU_SOFTWARE,
	  false,
	  true,
	  "icl",
	  NULL,
	  "no hardware PMU (No such file or directory), task-clock ok; GenuineIntel 06_A7H "
	  "stepping 1 (VM); libpfm4 icl; model none" },
	{ "AMD Zen 3",
	  { true,
	    { 0x10, AMD },
	    { 0x00a20f10, 0, 0x7ef8320b, 0 },
	    0,
	    0,
	    0,
	    0,
	    "amd64_fam19h_zen3",
	    0 },
	  HOST_PMU_HW,
	  true,
	  false,
	  "amd64_fam19h_zen3",
	  NULL,
	  "hardware PMU, raw events; AuthenticAMD 19_21H stepping 0; libpfm4 amd64_fam19h_zen3; "
	  "model none" },
	{ "perf_event_open missing (seccomp)",
	  { true,
	    { 0x16, INTEL },
	    { 0x00050654, 0, 0xfffa3203, 0 },
	    -ENOSYS,
	    -ENOSYS,
	    -ENOSYS,
	    -ENODEV,
	    "",
	    0 },
	  HOST_PMU_NONE,
	  false,
	  true,
	  "",
	  "Skylake-Server",
	  "no perf_event_open (Function not implemented); GenuineIntel 06_55H stepping 4 (VM); "
	  "libpfm4 knows no core PMU here; model Skylake-Server" },
	{ "no CPUID, perf refused",
	  { false, { 0 }, { 0 }, -EACCES, -EACCES, -EACCES, -ENOENT, "", 0 },
	  HOST_PMU_NONE,
	  false,
	  false,
	  "",
	  NULL,
	  "no perf_event_open (Permission denied); unknown CPU 00_00H stepping 0; libpfm4 knows "
	  "no core PMU here; model none" },
};

ParameterizedTestParameters(hostmap, detect_recorded)
{
	static unsigned int idx[ARRAY_SIZE(recorded)];

	for (unsigned int i = 0; i < ARRAY_SIZE(recorded); i++)
		idx[i] = i;
	return cr_make_param_array(unsigned int, idx, ARRAY_SIZE(idx));
}

ParameterizedTest(unsigned int *i, hostmap, detect_recorded)
{
	const struct recorded *r = &recorded[*i];
	struct host_pmu h;

	memset(&h, 0x5a, sizeof(h));
	host_pmu_decide(&r->in, &h);
	cr_expect_eq(h.kind, r->kind, "%s: kind %d", r->name, h.kind);
	cr_expect_eq(h.raw_ok, r->raw_ok, "%s: raw_ok %d", r->name, h.raw_ok);
	cr_expect_eq(h.intel, r->intel, "%s: intel %d", r->name, h.intel);
	cr_expect_str_eq(h.pfm_pmu, r->pfm, "%s", r->name);
	cr_expect_eq(h.model, r->model ? model_lookup(r->model) : NULL, "%s: model %s", r->name,
		     h.model ? h.model->name : "none");
	cr_expect_str_eq(h.why, r->why, "%s", r->name);
}

/*
 * This machine, whatever it has: host_pmu_detect() is the decision on
 * what host_pmu_probe() reads here, in one line. The probe's inputs are
 * printed as a row for the table above.
 */
Test(hostmap, detect_this_host)
{
	struct host_pmu h, want;
	struct host_probe in;

	memset(&h, 0x5a, sizeof(h));
	cr_assert_eq(host_pmu_detect(&h), 0);
	host_pmu_probe(&in);
	memset(&want, 0x5a, sizeof(want));
	host_pmu_decide(&in, &want);
	cr_log_info(
		"{ true, { %#x, %#x, %#x, %#x }, { %#x, %#x, %#x, %#x }, %d, %d, %d, %d, \"%s\", "
		"%u }: %s\n",
		in.leaf0[0], in.leaf0[1], in.leaf0[2], in.leaf0[3], in.leaf1[0], in.leaf1[1],
		in.leaf1[2], in.leaf1[3], in.hw, in.raw, in.sw, in.pfm, in.pfm_pmu, in.pfm_more,
		h.why);
	cr_expect_eq(h.kind, want.kind);
	cr_expect_eq(h.raw_ok, want.raw_ok);
	cr_expect_eq(h.intel, want.intel);
	cr_expect_eq(h.model, want.model);
	cr_expect_str_eq(h.pfm_pmu, want.pfm_pmu);
	cr_expect_str_eq(h.why, want.why);
	cr_expect(h.why[0] && !strchr(h.why, '\n'), "why must be one line: \"%s\"", h.why);
}
