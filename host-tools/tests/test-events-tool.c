/* SPDX-License-Identifier: MIT */
/*
 * vpmu-events' helpers called directly: every Skylake-Server catalogue
 * event encodes and decodes back to an event of the same encoding, and
 * the reserved-bit probe reports what the models refuse.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "evtsel.h"

#define B(n) (1ULL << (n))

static struct evtsel_model open_model(const char *name)
{
	struct evtsel_model m;

	cr_assert_eq(evtsel_model_open(name, &m), 0, "open %s", name);
	return m;
}

Test(events_tool, roundtrip_every_skylake_event)
{
	struct evtsel_model m = open_model("skylake-server");
	const struct evtsel_mods mods = { .flags = 0, .cmask = -1 };
	struct vpmu_catalog_event ev, back, found;
	size_t same = 0, i, bi, fi;

	cr_assert_eq(m.nr_events, 372);
	for (i = 0; evtsel_event(&m, i, &ev) == 0; i++) {
		uint64_t v = evtsel_encode(&ev, &mods);

		cr_assert_eq(v & (B(16) | B(17) | B(22)), B(16) | B(17) | B(22), "%s: USR|OS|EN",
			     ev.name);
		cr_assert_eq(evtsel_decode(&m, v, &back, &bi), 0, "%s (0x%llx) decodes to nothing",
			     ev.name, (unsigned long long) v);
		cr_assert_eq(back.encoding, ev.encoding, "%s decodes to %s", ev.name, back.name);
		cr_assert_eq(evtsel_find(&m, ev.name, &found, &fi), 0);
		cr_assert_eq(fi, i);
		same += bi == i;
	}
	cr_assert_eq(i, 372, "every event, then -ENOENT");
	/* The event list has aliases: not every name is its encoding's first. */
	cr_expect_lt(same, m.nr_events);
	cr_expect_gt(same, m.nr_events / 2);
	evtsel_model_close(&m);
}

Test(events_tool, documented_aliases)
{
	struct evtsel_model m = open_model("Skylake-Server");
	static const char *const pairs[][2] = {
		{ "CPU_CLK_UNHALTED.REF_XCLK", "CPU_CLK_THREAD_UNHALTED.REF_XCLK" },
		{ "BR_INST_RETIRED.NOT_TAKEN", "BR_INST_RETIRED.COND_NTAKEN" },
	};

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		struct vpmu_catalog_event a, b;
		size_t ia, ib;

		cr_assert(evtsel_find(&m, pairs[i][0], &a, &ia) == 0 &&
				  evtsel_find(&m, pairs[i][1], &b, &ib) == 0,
			  "%s / %s in the catalogue", pairs[i][0], pairs[i][1]);
		cr_expect_eq(a.encoding, b.encoding);
		cr_expect_neq(ia, ib);
	}
	evtsel_model_close(&m);
}

Test(events_tool, encode_modifiers)
{
	struct evtsel_model m = open_model("Skylake-Server");
	struct vpmu_catalog_event ev;
	struct evtsel_mods mods = { .cmask = -1 };
	size_t i;

	cr_assert_eq(evtsel_find(&m, "inst_retired.any_p", &ev, &i), 0);
	cr_expect_eq(evtsel_encode(&ev, &mods), 0x4300c0);
	mods.flags = EVTSEL_MOD_INT;
	cr_expect_eq(evtsel_encode(&ev, &mods), 0x5300c0);
	mods.flags = EVTSEL_MOD_USR | EVTSEL_MOD_INT;
	mods.cmask = 2;
	cr_expect_eq(evtsel_encode(&ev, &mods), 0x25100c0);
	mods = (struct evtsel_mods){ .flags = EVTSEL_MOD_OS | EVTSEL_MOD_EDGE | EVTSEL_MOD_INV,
				     .cmask = -1 };
	cr_expect_eq(evtsel_encode(&ev, &mods), 0xc600c0);
	evtsel_model_close(&m);
}

static void expect_reserved(struct evtsel_model *m, uint64_t v, uint64_t want)
{
	uint64_t mask = ~0ULL;
	bool gp = false;

	cr_assert_eq(evtsel_reserved(m, v, &mask, &gp), 0);
	cr_expect_eq(mask, want, "%s 0x%llx: reserved 0x%llx, want 0x%llx", m->name,
		     (unsigned long long) v, (unsigned long long) mask, (unsigned long long) want);
	cr_expect_eq(gp, want != 0, "%s 0x%llx: #GP", m->name, (unsigned long long) v);
}

Test(events_tool, reserved_bits)
{
	struct evtsel_model skx = open_model("Skylake-Server");
	struct evtsel_model icx = open_model("Icelake-Server");
	struct evtsel_model lnl = open_model("LunarLake");

	expect_reserved(&skx, 0x5300c0, 0);
	expect_reserved(&skx, 0x5300c0 | B(21), B(21)); /* AnyThread: refused */
	expect_reserved(&skx, 0x5300c0 | B(34), B(34)); /* no adaptive PEBS */
	expect_reserved(&skx, 0xffffffff005300c0ULL, 0xffffffff00000000ULL);
	expect_reserved(&skx, 0x5300c0 | B(19), 0); /* PC accepted */
	expect_reserved(&icx, 0x5300c0 | B(34), 0);
	expect_reserved(&icx, 0x5300c0 | B(36), B(36));
	expect_reserved(&lnl, 0x5300c0 | B(34) | B(36) | (0xffULL << 40), 0);
	expect_reserved(&lnl, 0x5300c0 | B(21) | B(35) | B(63), B(21) | B(35) | B(63));
	cr_expect(skx.nr_events && !icx.nr_events && !lnl.nr_events);
	cr_expect(!skx.adaptive && icx.adaptive && lnl.adaptive);
	cr_expect(!icx.eq && !icx.umask2 && lnl.eq && lnl.umask2);
	evtsel_model_close(&skx);
	evtsel_model_close(&icx);
	evtsel_model_close(&lnl);
	evtsel_model_close(NULL);
}

Test(events_tool, unknown_model)
{
	struct evtsel_model m;

	memset(&m, 0x5a, sizeof(m));
	cr_expect_eq(evtsel_model_open("Pentium", &m), -ENOENT);
	cr_expect_eq(evtsel_bit_name(21)[0], 'A');
	cr_expect_str_eq(evtsel_bit_name(45), "UMASK2");
	cr_expect_null(evtsel_bit_name(63));
}
