/* SPDX-License-Identifier: MIT */
/*
 * vpmu-events: a guest model's event catalogue, and IA32_PERFEVTSELx
 * values both ways.
 *
 *   vpmu-events [--cpu MODEL] [--json] list [--desc] [PATTERN]
 *   vpmu-events [--cpu MODEL] [--json] decode VALUE...
 *   vpmu-events [--cpu MODEL] [--json] encode [--usr] [--os] [--int] [--edge] [--inv]
 *               [--cmask N] NAME...
 *   vpmu-events models
 *
 * Reserved bits are not guessed here: decode asks the library, writing
 * the value to IA32_PERFEVTSEL0 of a vCPU of the model (-EINVAL is what a
 * guest sees as #GP).
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evtsel.h"
#include "vpmu/msr.h"

#define FIELD(mask, v) ((unsigned int) VPMU_FIELD_GET(mask, v))

static const char *prog = "vpmu-events";

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [OPTIONS] COMMAND [ARGS]\n"
		"\n"
		"Commands:\n"
		"  list [PATTERN]    catalogue events whose name contains PATTERN "
		"(case-insensitive;\n"
		"                    a PATTERN with * ? [ is a glob on the whole name); exit 1 if\n"
		"                    none matches\n"
		"  decode VALUE...   the fields of IA32_PERFEVTSELx values, their catalogue event, "
		"and\n"
		"                    the bits the model reserves (a guest WRMSR of them gets #GP)\n"
		"  encode NAME...    the IA32_PERFEVTSELx value of catalogue events (default "
		"USR|OS|EN)\n"
		"  models            the guest CPU models and whether they have a catalogue\n"
		"\n"
		"Options:\n"
		"  --cpu MODEL       guest CPU model (default Skylake-Server)\n"
		"  --json            JSON: one document for list and models, one object per line\n"
		"                    per VALUE / NAME for decode and encode\n"
		"  --desc            list: show descriptions\n"
		"  --usr, --os       encode: count at CPL>0 / CPL 0 only (default: both)\n"
		"  --int, --edge, --inv   encode: set INT / Edge / Invert\n"
		"  --cmask N         encode: counter mask 0-255\n"
		"  --help            this text\n",
		prog);
}

static struct {
	const char *cpu;
	bool json, desc, any_mod;
	struct evtsel_mods mods;
} opt = { .cpu = "Skylake-Server", .mods = { .cmask = -1 } };

/* ---- output helpers ---- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char) *s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c); /* UTF-8 passes through */
	}
	putchar('"');
}

static const char *jbool(bool b)
{
	return b ? "true" : "false";
}

/* "21 (AnyThread), 32 (IN_TX), 40-47 (UMASK2), 63" */
static void bits_text(uint64_t mask, char *out, size_t n)
{
	size_t off = 0;

	out[0] = '\0';
	for (unsigned int b = 0; b < 64; b++) {
		const char *name;
		unsigned int e = b;
		int w;

		if (!(mask & VPMU_BIT_ULL(b)))
			continue;
		name = evtsel_bit_name(b);
		/* a run of bits with the same name (or none) prints as a range */
		while (e < 63 && (mask & VPMU_BIT_ULL(e + 1)) && evtsel_bit_name(e + 1) == name)
			e++;
		if (e == b)
			w = snprintf(out + off, n - off, "%s%u", off ? ", " : "", b);
		else
			w = snprintf(out + off, n - off, "%s%u-%u", off ? ", " : "", b, e);
		if (w < 0 || (size_t) w >= n - off)
			return;
		off += (size_t) w;
		if (name) {
			w = snprintf(out + off, n - off, " (%s)", name);
			if (w < 0 || (size_t) w >= n - off)
				return;
			off += (size_t) w;
		}
		b = e;
	}
}

/* ---- list ---- */

static bool matches(const char *pattern, const char *name)
{
	if (!pattern)
		return true;
	if (strpbrk(pattern, "*?["))
		return fnmatch(pattern, name, FNM_CASEFOLD) == 0;
	return strcasestr(name, pattern) != NULL;
}

static int no_catalogue(const struct evtsel_model *m)
{
	fprintf(stderr, "%s: model %s has no event catalogue (only Skylake-Server has one)\n", prog,
		m->name);
	return 1;
}

static void list_one(const struct vpmu_catalog_event *ev, bool first)
{
	if (opt.json) {
		printf("%s\n{\"name\":", first ? "" : ",");
		json_str(ev->name);
		printf(",\"encoding\":\"0x%" PRIx64 "\",\"event\":%u,\"umask\":%u,"
		       "\"cmask\":%u,\"pebs\":%s",
		       ev->encoding, ev->event, ev->umask, ev->cmask,
		       jbool(ev->flags & VPMU_EV_PEBS));
		if (ev->fixed_idx >= 0)
			printf(",\"fixed_counter\":%d", (int) ev->fixed_idx);
		if (opt.desc && ev->desc) {
			printf(",\"desc\":");
			json_str(ev->desc);
		}
		printf("}");
	} else {
		printf("%-52s 0x%08" PRIx64 "%s\n", ev->name, ev->encoding,
		       ev->flags & VPMU_EV_PEBS ? " [PEBS]" : "");
		if (opt.desc && ev->desc)
			printf("    %s\n", ev->desc);
	}
}

static int cmd_list(struct evtsel_model *m, int argc, char **argv)
{
	const char *pattern = argc > 0 ? argv[0] : NULL;
	struct vpmu_catalog_event ev;
	size_t n = 0;

	if (argc > 1) {
		fprintf(stderr, "%s: list takes at most one PATTERN\n", prog);
		return 1;
	}
	if (!m->nr_events)
		return no_catalogue(m);
	if (opt.json) {
		printf("{\"model\":");
		json_str(m->name);
		printf(",\"events\":[");
	}
	for (size_t i = 0; evtsel_event(m, i, &ev) == 0; i++) {
		if (!matches(pattern, ev.name))
			continue;
		list_one(&ev, n == 0);
		n++;
	}
	if (opt.json)
		printf("\n],\"count\":%zu}\n", n);
	if (!n) {
		fprintf(stderr, "%s: no %s event matches '%s'\n", prog, m->name,
			pattern ? pattern : "");
		return 1;
	}
	return 0;
}

/* ---- decode ---- */

static int parse_u64(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* Catalogue names sharing event `index`'s encoding, after the first. */
static void print_aliases(const struct evtsel_model *m, size_t index, uint64_t enc)
{
	struct vpmu_catalog_event o;
	bool first = true;

	for (size_t i = 0; evtsel_event(m, i, &o) == 0; i++) {
		if (i == index || o.encoding != enc)
			continue;
		if (opt.json) {
			printf("%s", first ? "" : ",");
			json_str(o.name);
		} else {
			printf("%s%s", first ? " (same encoding: " : ", ", o.name);
		}
		first = false;
	}
	if (!opt.json && !first)
		printf(")");
}

/* What decode found for one value. */
struct decoded {
	uint64_t v, reserved;
	bool gp, named;
	size_t index;
	struct vpmu_catalog_event ev;
};

static void decode_json(const struct evtsel_model *m, const struct decoded *d)
{
	uint64_t v = d->v;

	printf("{\"model\":");
	json_str(m->name);
	printf(",\"value\":\"0x%" PRIx64 "\",\"event\":%u,\"umask\":%u,\"usr\":%s,"
	       "\"os\":%s,\"edge\":%s,\"pc\":%s,\"int\":%s,\"any\":%s,\"en\":%s,"
	       "\"inv\":%s,\"cmask\":%u",
	       v, FIELD(ARCH_PERFMON_EVENTSEL_EVENT, v), FIELD(ARCH_PERFMON_EVENTSEL_UMASK, v),
	       jbool(v & ARCH_PERFMON_EVENTSEL_USR), jbool(v & ARCH_PERFMON_EVENTSEL_OS),
	       jbool(v & ARCH_PERFMON_EVENTSEL_EDGE), jbool(v & ARCH_PERFMON_EVENTSEL_PIN_CONTROL),
	       jbool(v & ARCH_PERFMON_EVENTSEL_INT), jbool(v & ARCH_PERFMON_EVENTSEL_ANY),
	       jbool(v & ARCH_PERFMON_EVENTSEL_ENABLE), jbool(v & ARCH_PERFMON_EVENTSEL_INV),
	       FIELD(ARCH_PERFMON_EVENTSEL_CMASK, v));
	if (m->adaptive)
		printf(",\"adaptive\":%s", jbool(v & ICL_EVENTSEL_ADAPTIVE));
	if (m->eq)
		printf(",\"eq\":%s", jbool(v & ARCH_PERFMON_EVENTSEL_EQ));
	if (m->umask2)
		printf(",\"umask2\":%u", FIELD(ARCH_PERFMON_EVENTSEL_UMASK2, v));
	printf(",\"catalogue\":%s,\"name\":", jbool(m->nr_events));
	if (d->named)
		json_str(d->ev.name);
	else
		printf("null");
	printf(",\"aliases\":[");
	if (d->named)
		print_aliases(m, d->index, d->ev.encoding);
	printf("],\"reserved_mask\":\"0x%" PRIx64 "\",\"reserved_bits\":[", d->reserved);
	for (unsigned int b = 0, first = 1; b < 64; b++)
		if (d->reserved & VPMU_BIT_ULL(b)) {
			printf("%s%u", first ? "" : ",", b);
			first = 0;
		}
	printf("],\"wrmsr_gp\":%s}\n", jbool(d->gp));
}

static void decode_text(const struct evtsel_model *m, const struct decoded *d)
{
	uint64_t v = d->v;
	char rtext[256];

	printf("0x%" PRIx64 " on %s:\n", v, m->name);
	printf("  event   0x%02x\n  umask   0x%02x\n", FIELD(ARCH_PERFMON_EVENTSEL_EVENT, v),
	       FIELD(ARCH_PERFMON_EVENTSEL_UMASK, v));
	printf("  usr %u  os %u  edge %u  pc %u  int %u  any %u  en %u  inv %u\n",
	       !!(v & ARCH_PERFMON_EVENTSEL_USR), !!(v & ARCH_PERFMON_EVENTSEL_OS),
	       !!(v & ARCH_PERFMON_EVENTSEL_EDGE), !!(v & ARCH_PERFMON_EVENTSEL_PIN_CONTROL),
	       !!(v & ARCH_PERFMON_EVENTSEL_INT), !!(v & ARCH_PERFMON_EVENTSEL_ANY),
	       !!(v & ARCH_PERFMON_EVENTSEL_ENABLE), !!(v & ARCH_PERFMON_EVENTSEL_INV));
	printf("  cmask   %u\n", FIELD(ARCH_PERFMON_EVENTSEL_CMASK, v));
	if (m->adaptive)
		printf("  adaptive %u\n", !!(v & ICL_EVENTSEL_ADAPTIVE));
	if (m->eq)
		printf("  eq      %u\n", !!(v & ARCH_PERFMON_EVENTSEL_EQ));
	if (m->umask2)
		printf("  umask2  0x%02x\n", FIELD(ARCH_PERFMON_EVENTSEL_UMASK2, v));
	if (!m->nr_events) {
		printf("  name    (%s has no event catalogue)\n", m->name);
	} else if (!d->named) {
		printf("  name    (no %s catalogue event has this encoding)\n", m->name);
	} else {
		printf("  name    %s", d->ev.name);
		print_aliases(m, d->index, d->ev.encoding);
		printf("\n");
	}
	bits_text(d->reserved, rtext, sizeof(rtext));
	if (d->reserved)
		printf("  RESERVED bits %s are set: %s refuses them, a guest WRMSR of this value "
		       "to IA32_PERFEVTSELx gets #GP\n",
		       rtext, m->name);
	else if (d->gp)
		printf("  a guest WRMSR of this value gets #GP\n");
}

static int decode_one(struct evtsel_model *m, const char *arg)
{
	struct decoded d = { 0 };
	int r;

	if (parse_u64(arg, &d.v) < 0) {
		fprintf(stderr, "%s: '%s' is not a 64-bit number (e.g. 0x5300c0)\n", prog, arg);
		return 1;
	}
	r = evtsel_reserved(m, d.v, &d.reserved, &d.gp);
	if (r < 0) {
		fprintf(stderr, "%s: the library refused a probe write of 0x%" PRIx64 ": %s\n",
			prog, d.v, strerror(-r));
		return 1;
	}
	d.named = evtsel_decode(m, d.v, &d.ev, &d.index) == 0;
	if (opt.json)
		decode_json(m, &d);
	else
		decode_text(m, &d);
	return 0;
}

static int cmd_decode(struct evtsel_model *m, int argc, char **argv)
{
	if (argc < 1) {
		fprintf(stderr, "%s: decode needs a VALUE (e.g. 0x5300c0)\n", prog);
		return 1;
	}
	/* Check every value first: output is all or nothing. */
	for (int i = 0; i < argc; i++) {
		uint64_t v;

		if (parse_u64(argv[i], &v) < 0) {
			fprintf(stderr, "%s: '%s' is not a 64-bit number (e.g. 0x5300c0)\n", prog,
				argv[i]);
			return 1;
		}
	}
	for (int i = 0; i < argc; i++) {
		int r = decode_one(m, argv[i]);

		if (r)
			return r;
	}
	return 0;
}

/* ---- encode ---- */

static void encode_json(const struct evtsel_model *m, const struct vpmu_catalog_event *ev,
			uint64_t v, uint64_t reserved, bool gp)
{
	printf("{\"model\":");
	json_str(m->name);
	printf(",\"name\":");
	json_str(ev->name);
	printf(",\"value\":\"0x%" PRIx64 "\"", v);
	if (ev->fixed_idx >= 0)
		printf(",\"fixed_counter\":%d", (int) ev->fixed_idx);
	if (ev->aux_msr)
		printf(",\"aux_msr\":\"0x%x\",\"aux_value\":\"0x%" PRIx32 "\"", ev->aux_msr,
		       ev->aux_value);
	printf(",\"reserved_mask\":\"0x%" PRIx64 "\",\"wrmsr_gp\":%s}\n", reserved, jbool(gp));
}

static void encode_text(const struct evtsel_model *m, const struct vpmu_catalog_event *ev,
			uint64_t v, uint64_t reserved)
{
	char rtext[256];

	printf("%s 0x%" PRIx64 "\n", ev->name, v);
	if (ev->fixed_idx >= 0 && ev->event == 0)
		printf("  fixed counter IA32_FIXED_CTR%d only: the value is its "
		       "pseudo-encoding\n",
		       (int) ev->fixed_idx);
	if (ev->aux_msr)
		printf("  also write MSR 0x%x = 0x%" PRIx32 " (%s)\n", ev->aux_msr, ev->aux_value,
		       ev->aux_msr == MSR_PEBS_LD_LAT_THRESHOLD ? "MSR_PEBS_LD_LAT_THRESHOLD"
								: "MSR_PEBS_FRONTEND");
	if (reserved) {
		bits_text(reserved, rtext, sizeof(rtext));
		printf("  RESERVED bits %s on %s: a guest WRMSR of this value gets #GP\n", rtext,
		       m->name);
	}
}

static int cmd_encode(struct evtsel_model *m, int argc, char **argv)
{
	struct vpmu_catalog_event ev;
	size_t index;

	if (argc < 1) {
		fprintf(stderr, "%s: encode needs an event NAME (see: %s list)\n", prog, prog);
		return 1;
	}
	if (!m->nr_events)
		return no_catalogue(m);
	/* Check every name first: output is all or nothing. */
	for (int i = 0; i < argc; i++)
		if (evtsel_find(m, argv[i], &ev, &index) < 0) {
			fprintf(stderr, "%s: no event '%s' in the %s catalogue (try: %s list %s)\n",
				prog, argv[i], m->name, prog, argv[i]);
			return 1;
		}
	for (int i = 0; i < argc; i++) {
		uint64_t v, reserved;
		bool gp;
		int r;

		evtsel_find(m, argv[i], &ev, &index);
		v = evtsel_encode(&ev, &opt.mods);
		r = evtsel_reserved(m, v, &reserved, &gp);
		if (r < 0) {
			fprintf(stderr,
				"%s: the library refused a probe write of 0x%" PRIx64 ": %s\n",
				prog, v, strerror(-r));
			return 1;
		}
		if (opt.json)
			encode_json(m, &ev, v, reserved, gp);
		else
			encode_text(m, &ev, v, reserved);
	}
	return 0;
}

/* ---- models ---- */

static int cmd_models(void)
{
	if (opt.json)
		printf("{\"models\":[");
	for (size_t i = 0; i < vpmu_model_count(); i++) {
		size_t n = vpmu_catalog_count(i);

		if (opt.json) {
			printf("%s{\"name\":", i ? "," : "");
			json_str(vpmu_model_name(i));
			printf(",\"catalogue\":%s,\"events\":%zu}", jbool(n), n);
		} else {
			printf("%-16s %s\n", vpmu_model_name(i),
			       n ? "event catalogue" : "no event catalogue");
		}
	}
	if (opt.json)
		printf("]}\n");
	return 0;
}

static void list_models(char *out, size_t n)
{
	size_t off = 0;

	out[0] = '\0';
	for (size_t i = 0; i < vpmu_model_count(); i++) {
		int w = snprintf(out + off, n - off, "%s%s", i ? ", " : "", vpmu_model_name(i));

		if (w < 0 || (size_t) w >= n - off)
			return;
		off += (size_t) w;
	}
}

/* A modifier of encode: --usr and the like. */
static void add_mod(unsigned int flag)
{
	opt.mods.flags |= flag;
	opt.any_mod = true;
}

/*
 * The options into `opt`. 0 to go on, 1 after an error (one line said
 * it), -1 after --help.
 */
static int parse_options(int argc, char **argv)
{
	enum { O_CPU = 256, O_JSON, O_DESC, O_USR, O_OS, O_INT, O_EDGE, O_INV, O_CMASK };
	static const struct option opts[] = {
		{ "cpu", required_argument, NULL, O_CPU },
		{ "json", no_argument, NULL, O_JSON },
		{ "desc", no_argument, NULL, O_DESC },
		{ "usr", no_argument, NULL, O_USR },
		{ "os", no_argument, NULL, O_OS },
		{ "int", no_argument, NULL, O_INT },
		{ "edge", no_argument, NULL, O_EDGE },
		{ "inv", no_argument, NULL, O_INV },
		{ "cmask", required_argument, NULL, O_CMASK },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t cmask;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case O_CPU:
			opt.cpu = optarg;
			break;
		case O_JSON:
			opt.json = true;
			break;
		case O_DESC:
			opt.desc = true;
			break;
		case O_USR:
			add_mod(EVTSEL_MOD_USR);
			break;
		case O_OS:
			add_mod(EVTSEL_MOD_OS);
			break;
		case O_INT:
			add_mod(EVTSEL_MOD_INT);
			break;
		case O_EDGE:
			add_mod(EVTSEL_MOD_EDGE);
			break;
		case O_INV:
			add_mod(EVTSEL_MOD_INV);
			break;
		case O_CMASK:
			if (parse_u64(optarg, &cmask) < 0 || cmask > 255) {
				fprintf(stderr,
					"%s: --cmask takes a number from 0 to 255, not '%s'\n",
					prog, optarg);
				return 1;
			}
			opt.mods.cmask = (int) cmask;
			opt.any_mod = true;
			break;
		case 'h':
			usage(stdout);
			return -1;
		case ':':
			fprintf(stderr, "%s: option '%s' needs a value\n", prog, argv[optind - 1]);
			return 1;
		default:
			fprintf(stderr, "%s: unknown option '%s' (try --help)\n", prog,
				argv[optind - 1]);
			return 1;
		}
	}
	return 0;
}

/* The command, and whether the options given apply to it; NULL after one line saying why not. */
static const char *command(int argc, char **argv)
{
	const char *cmd;

	if (optind >= argc) {
		fprintf(stderr,
			"%s: missing command: list, decode, encode or models (try --help)\n", prog);
		return NULL;
	}
	cmd = argv[optind++];
	if (strcmp(cmd, "list") && strcmp(cmd, "decode") && strcmp(cmd, "encode") &&
	    strcmp(cmd, "models")) {
		fprintf(stderr, "%s: unknown command '%s': list, decode, encode or models\n", prog,
			cmd);
		return NULL;
	}
	if (opt.any_mod && strcmp(cmd, "encode")) {
		fprintf(stderr, "%s: --usr/--os/--int/--edge/--inv/--cmask only apply to encode\n",
			prog);
		return NULL;
	}
	if (opt.desc && strcmp(cmd, "list")) {
		fprintf(stderr, "%s: --desc only applies to list\n", prog);
		return NULL;
	}
	return cmd;
}

int main(int argc, char **argv)
{
	struct evtsel_model m;
	const char *cmd;
	char names[128];
	int r = parse_options(argc, argv);

	if (r)
		return r < 0 ? 0 : r;
	cmd = command(argc, argv);
	if (!cmd)
		return 1;
	if (!strcmp(cmd, "models"))
		return cmd_models();

	r = evtsel_model_open(opt.cpu, &m);
	if (r == -ENOENT) {
		list_models(names, sizeof(names));
		fprintf(stderr, "%s: unknown model '%s' (models: %s)\n", prog, opt.cpu, names);
		return 1;
	} else if (r < 0) {
		fprintf(stderr, "%s: cannot create a %s vCPU: %s\n", prog, opt.cpu, strerror(-r));
		return 1;
	}
	if (!strcmp(cmd, "list"))
		r = cmd_list(&m, argc - optind, argv + optind);
	else if (!strcmp(cmd, "decode"))
		r = cmd_decode(&m, argc - optind, argv + optind);
	else
		r = cmd_encode(&m, argc - optind, argv + optind);
	evtsel_model_close(&m);
	return r;
}
