/* SPDX-License-Identifier: MIT */
/*
 * vpmu-replay: play a guest's PMU programming against a vpmu vCPU and show
 * what the vPMU answers. A script is one command per line:
 *
 *   model NAME [version=N] [gp=N] [fixed=N] [nopebs] [nolbr] [nometrics]
 *   wrmsr MSR VALUE            (MSR: a number or a name, e.g. IA32_PMC0)
 *   rdmsr MSR
 *   rdpmc ECX
 *   cpuid LEAF [SUBLEAF]
 *   retire N [cpl=C] [cycles=N] [branches=N] [calls=N] [returns=N]
 *            [cond=N] [taken=N] [loads=N] [stores=N]
 *   sync
 *   expect MSR VALUE           (exits 1 on a mismatch)
 *   expect-pmis N
 *   stats
 *   echo TEXT
 *   # comment
 *
 * The guest's PMI handler is not simulated: a script writes its MSR
 * accesses out. PMIs the vPMU requests are printed as they happen.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vpmu/vpmu.h"

static const struct msr_name {
	const char *name;
	uint32_t msr;
	unsigned int count; /* a numbered family: NAME0..NAME(count-1) */
} msr_names[] = {
	{ "IA32_PMC", 0xc1, 8 },
	{ "IA32_PERFEVTSEL", 0x186, 8 },
	{ "IA32_A_PMC", 0x4c1, 8 },
	{ "IA32_FIXED_CTR_CTRL", 0x38d, 0 },
	{ "IA32_FIXED_CTR", 0x309, 4 },
	{ "IA32_PERF_GLOBAL_STATUS_RESET", 0x390, 0 },
	{ "IA32_PERF_GLOBAL_STATUS_SET", 0x391, 0 },
	{ "IA32_PERF_GLOBAL_STATUS", 0x38e, 0 },
	{ "IA32_PERF_GLOBAL_CTRL", 0x38f, 0 },
	{ "IA32_PERF_GLOBAL_OVF_CTRL", 0x390, 0 },
	{ "IA32_PERF_GLOBAL_INUSE", 0x392, 0 },
	{ "IA32_PERF_CAPABILITIES", 0x345, 0 },
	{ "IA32_DEBUGCTL", 0x1d9, 0 },
	{ "IA32_PEBS_ENABLE", 0x3f1, 0 },
	{ "MSR_PEBS_DATA_CFG", 0x3f2, 0 },
	{ "IA32_DS_AREA", 0x600, 0 },
	{ "MSR_PERF_METRICS", 0x329, 0 },
};

static unsigned int pmis;
static const char *script = "-";
static unsigned int lineno;

static void on_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	struct vpmu_stats st;

	pmis++;
	vpmu_stats_read(vcpu, &st);
	printf("  >> PMI requested (#%u), GLOBAL_STATUS = %#" PRIx64 "\n", pmis, st.global_status);
	vpmu_pmi_delivered(vcpu);
}

static void on_log(void *data, enum vpmu_log_level level, const char *msg)
{
	fprintf(stderr, "vpmu: %s\n", msg);
}

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "vpmu-replay: %s:%u: ", script, lineno);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

static uint64_t parse_num(const char *s)
{
	char *end;
	uint64_t v;

	if (!s)
		die("missing number%s", "");
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || end == s)
		die("'%s' is not a number", s);
	return v;
}

static uint32_t parse_msr(const char *s)
{
	if (!s)
		die("missing MSR%s", "");
	for (size_t i = 0; i < sizeof(msr_names) / sizeof(msr_names[0]); i++) {
		const struct msr_name *n = &msr_names[i];
		size_t len = strlen(n->name);

		if (strncasecmp(s, n->name, len))
			continue;
		if (!n->count && !s[len])
			return n->msr;
		if (n->count && s[len] >= '0' && s[len] <= '9' && !s[len + 1] &&
		    (unsigned int) (s[len] - '0') < n->count)
			return n->msr + (uint32_t) (s[len] - '0');
	}
	return (uint32_t) parse_num(s);
}

static const char *msr_label(uint32_t msr, char *buf, size_t size)
{
	for (size_t i = 0; i < sizeof(msr_names) / sizeof(msr_names[0]); i++) {
		const struct msr_name *n = &msr_names[i];

		if (!n->count && n->msr == msr) {
			snprintf(buf, size, "%s", n->name);
			return buf;
		}
		if (n->count && msr >= n->msr && msr < n->msr + n->count) {
			snprintf(buf, size, "%s%u", n->name, msr - n->msr);
			return buf;
		}
	}
	snprintf(buf, size, "MSR %#x", msr);
	return buf;
}

static const char *result(int r)
{
	switch (r) {
	case 0:
		return "ok";
	case -EINVAL:
		return "#GP (refused by the model)";
	case -ENXIO:
		return "#GP (the model has no such MSR)";
	case -ENOENT:
		return "not a PMU MSR";
	}
	return strerror(-r);
}

static struct vpmu_vcpu *make_vcpu(char **tok, int n)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v;
	int r;

	vpmu_config_init(&cfg);
	cfg.backend = VPMU_BACKEND_EXACT;
	cfg.pmi = on_pmi;
	cfg.log = on_log;
	cfg.model = tok[1];
	for (int i = 2; i < n; i++) {
		if (!strncmp(tok[i], "version=", 8))
			cfg.version = (int) parse_num(tok[i] + 8);
		else if (!strncmp(tok[i], "gp=", 3))
			cfg.nr_gp = (int) parse_num(tok[i] + 3);
		else if (!strncmp(tok[i], "fixed=", 6))
			cfg.nr_fixed = (int) parse_num(tok[i] + 6);
		else if (!strcmp(tok[i], "nopebs"))
			cfg.flags |= VPMU_CONFIG_NO_PEBS;
		else if (!strcmp(tok[i], "nolbr"))
			cfg.flags |= VPMU_CONFIG_NO_LBR;
		else if (!strcmp(tok[i], "nometrics"))
			cfg.flags |= VPMU_CONFIG_NO_METRICS;
		else
			die("unknown model option '%s'", tok[i]);
	}
	r = vpmu_vcpu_new(&cfg, &v);
	if (r < 0)
		die("cannot create a vCPU of model '%s' (see the vpmu: line above)", tok[1]);
	printf("model %s, exact counting\n", vpmu_vcpu_model(v));
	return v;
}

static void retire(struct vpmu_vcpu *v, char **tok, int n)
{
	struct vpmu_exact_counts c = { 0 };
	bool cycles_given = false;

	c.instructions = parse_num(tok[1]);
	for (int i = 2; i < n; i++) {
		char *eq = strchr(tok[i], '=');
		uint64_t val;

		if (!eq)
			die("expected key=value, got '%s'", tok[i]);
		*eq = 0;
		val = parse_num(eq + 1);
		if (!strcmp(tok[i], "cpl"))
			c.cpl = (unsigned int) val;
		else if (!strcmp(tok[i], "cycles"))
			c.cycles = val, cycles_given = true;
		else if (!strcmp(tok[i], "branches"))
			c.branches = val;
		else if (!strcmp(tok[i], "cond"))
			c.cond_branches = val;
		else if (!strcmp(tok[i], "taken"))
			c.near_taken = val;
		else if (!strcmp(tok[i], "calls"))
			c.near_calls = val;
		else if (!strcmp(tok[i], "returns"))
			c.near_returns = val;
		else if (!strcmp(tok[i], "loads"))
			c.loads = val;
		else if (!strcmp(tok[i], "stores"))
			c.stores = val;
		else
			die("unknown retire field '%s'", tok[i]);
	}
	if (!cycles_given)
		c.cycles = c.instructions;
	c.ref_cycles = c.cycles;
	c.mem_insts = c.loads + c.stores;
	printf("retire %" PRIu64 " instructions at CPL %u\n", c.instructions, c.cpl);
	vpmu_exact_feed(v, &c);
}

/* The guest's accesses: wrmsr, rdmsr, rdpmc, cpuid. True if `tok` was one. */
static bool guest_access(struct vpmu_vcpu *v, char **tok, int n)
{
	char label[48];
	uint64_t val = 0;
	int r;

	if (!strcmp(tok[0], "wrmsr") && n == 3) {
		uint32_t msr = parse_msr(tok[1]);

		val = parse_num(tok[2]);
		r = vpmu_msr_write(v, msr, val);
		printf("wrmsr %-28s <- %#18" PRIx64 "  %s\n", msr_label(msr, label, sizeof(label)),
		       val, result(r));
	} else if (!strcmp(tok[0], "rdmsr") && n == 2) {
		uint32_t msr = parse_msr(tok[1]);

		r = vpmu_msr_read(v, msr, &val);
		printf("rdmsr %-28s -> %#18" PRIx64 "  %s\n", msr_label(msr, label, sizeof(label)),
		       val, result(r));
	} else if (!strcmp(tok[0], "rdpmc") && n == 2) {
		uint32_t ecx = (uint32_t) parse_num(tok[1]);

		r = vpmu_rdpmc(v, ecx, &val);
		printf("rdpmc ECX=%#-24x -> %#18" PRIx64 "  %s\n", ecx, val, r ? "#GP" : "ok");
	} else if (!strcmp(tok[0], "cpuid") && (n == 2 || n == 3)) {
		struct vpmu_cpuid_entry e;
		uint32_t leaf = (uint32_t) parse_num(tok[1]);
		uint32_t sub = n == 3 ? (uint32_t) parse_num(tok[2]) : 0;

		if (vpmu_cpuid(v, leaf, sub, &e) < 0)
			printf("cpuid %#x.%u: not a PMU leaf\n", leaf, sub);
		else
			printf("cpuid %#x.%u: eax=%08x ebx=%08x ecx=%08x edx=%08x\n", leaf, sub,
			       e.eax, e.ebx, e.ecx, e.edx);
	} else {
		return false;
	}
	return true;
}

/* The script's checks: expect, expect-pmis, stats. Failures counted in *failures. */
static bool check(struct vpmu_vcpu *v, char **tok, int n, int *failures)
{
	char label[48];

	if (!strcmp(tok[0], "expect") && n == 3) {
		uint32_t msr = parse_msr(tok[1]);
		uint64_t want = parse_num(tok[2]), val = 0;
		int r = vpmu_msr_read(v, msr, &val);

		if (r || val != want) {
			printf("FAIL %s:%u: %s = %#" PRIx64 ", expected %#" PRIx64 "\n", script,
			       lineno, msr_label(msr, label, sizeof(label)), val, want);
			(*failures)++;
		}
	} else if (!strcmp(tok[0], "expect-pmis") && n == 2) {
		if (pmis != parse_num(tok[1])) {
			printf("FAIL %s:%u: %u PMIs, expected %s\n", script, lineno, pmis, tok[1]);
			(*failures)++;
		}
	} else if (!strcmp(tok[0], "stats") && n == 1) {
		struct vpmu_stats st;

		/* figures are published at syncs, as before a guest entry */
		vpmu_vcpu_sync(v);
		vpmu_stats_read(v, &st);
		printf("stats: %" PRIu64 " MSR reads, %" PRIu64 " writes, %" PRIu64 " #GP, %" PRIu64
		       " syncs, %" PRIu64 " backend ops, %" PRIu64 " overflows, %" PRIu64 " PMIs\n",
		       st.msr_reads, st.msr_writes, st.msr_faults, st.syncs, st.backend_ops,
		       st.overflows, st.pmis_requested);
	} else {
		return false;
	}
	return true;
}

/* A script line split into at most 16 words; how many. */
static int split(char *line, char **tok)
{
	char *save = NULL;
	int n = 0;

	for (char *t = strtok_r(line, " \t\n", &save); t && n < 16;
	     t = strtok_r(NULL, " \t\n", &save))
		tok[n++] = t;
	return n;
}

static int play(FILE *in)
{
	struct vpmu_vcpu *v = NULL;
	char line[512];
	int failures = 0;

	while (fgets(line, sizeof(line), in)) {
		char *tok[16];
		int n;

		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (!strncmp(line, "echo", 4)) {
			printf("%s", line + (line[4] == ' ' ? 5 : 4));
			continue;
		}
		n = split(line, tok);
		if (!n)
			continue;
		if (!strcmp(tok[0], "model")) {
			if (n < 2)
				die("model needs a name%s", "");
			vpmu_vcpu_free(v);
			v = make_vcpu(tok, n);
			continue;
		}
		if (!v)
			die("'%s' before any 'model' line", tok[0]);
		if (guest_access(v, tok, n) || check(v, tok, n, &failures))
			continue;
		if (!strcmp(tok[0], "retire") && n >= 2)
			retire(v, tok, n);
		else if (!strcmp(tok[0], "sync") && n == 1)
			vpmu_vcpu_sync(v);
		else
			die("cannot parse '%s' (see vpmu-replay --help)", tok[0]);
	}
	vpmu_vcpu_free(v);
	if (failures)
		printf("%d expectation(s) failed\n", failures);
	return failures ? 1 : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: vpmu-replay [--list-models] [SCRIPT]\n"
		   "Plays a guest's PMU MSR/RDPMC/CPUID accesses and retired instructions\n"
		   "against a vpmu vCPU and prints what it answers. SCRIPT defaults to stdin;\n"
		   "the commands are listed at the top of host-tools/vpmu-replay.c.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "list-models", no_argument, NULL, 'l' },
		{ 0 },
	};
	FILE *in = stdin;
	int c;

	while ((c = getopt_long(argc, argv, "hl", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'l':
			for (size_t i = 0; i < vpmu_model_count(); i++)
				printf("%-16s %s\n", vpmu_model_name(i), vpmu_model_description(i));
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		script = argv[optind];
		in = fopen(script, "r");
		if (!in) {
			fprintf(stderr, "vpmu-replay: cannot open %s: %s\n", script,
				strerror(errno));
			return 2;
		}
	}
	c = play(in);
	if (in != stdin)
		fclose(in);
	return c;
}
