/* SPDX-License-Identifier: MIT */
/*
 * vpmu-pebs: decode a PEBS dump file (vpmu/pebs.h, written by
 * `vpmu-vmm --pebs-dump FILE`) into readable records.
 *
 *   vpmu-pebs [--json] FILE
 *
 * The header says how the records were written (PERF_CAPABILITIES:
 * PEBS_FMT 3, 4-6 adaptive, 0xF architectural; bit 17 timed PEBS). A
 * damaged header (bad magic, version, sizes that do not add up to the
 * file) is one line on stderr, nothing on stdout, exit 1. A damaged
 * record is decoded up to: the records before it are printed, then one
 * line on stderr says which record and offset stopped the decode and
 * why, and the exit status is 1 (in --json the document stays valid and
 * carries the same message under "error").
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pebs-decode.h"
#include "vpmu/bits.h"
#include "vpmu/msr.h"
#include "vpmu/pebs.h"

/*
 * The most bytes of records a dump holds: vpmu-vmm writes no more
 * (PEBS_DUMP_MAX in vmm-glue/pebs-dump.c), and this tool reads no more
 * (architectural PEBS buffers end at 4 KiB << 15 = 128 MiB).
 */
#define VPMU_PEBS_DUMP_MAX_RECORDS (256ull << 20)
/* The largest header_size this tool skips over (later versions may grow it). */
#define VPMU_PEBS_DUMP_MAX_HEADER 4096u

static const char *prog = "vpmu-pebs";

static const char *const gpr_names[PEBS_NR_GPRS] = {
	[PEBS_RAX] = "rax", [PEBS_RCX] = "rcx", [PEBS_RDX] = "rdx", [PEBS_RBX] = "rbx",
	[PEBS_RSP] = "rsp", [PEBS_RBP] = "rbp", [PEBS_RSI] = "rsi", [PEBS_RDI] = "rdi",
	[PEBS_R8] = "r8",   [PEBS_R9] = "r9",	[PEBS_R10] = "r10", [PEBS_R11] = "r11",
	[PEBS_R12] = "r12", [PEBS_R13] = "r13", [PEBS_R14] = "r14", [PEBS_R15] = "r15",
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [--json] FILE\n"
		"Decode a PEBS dump written by `vpmu-vmm --pebs-dump FILE`: formats 3,\n"
		"4-6 (adaptive, every group, timed PEBS retire latency) and architectural PEBS.\n"
		"\n"
		"  --json   one JSON document: the header and every record\n"
		"  --help   this text\n"
		"\n"
		"A damaged record stops the decode: the records before it are printed, one\n"
		"line on stderr says where and why, and the exit status is 1.\n",
		prog);
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < 8; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t) (le64(p) & 0xffffffffULL);
}

struct dump {
	const char *path;
	char model[sizeof(((struct vpmu_pebs_dump_header *) 0)->model)];
	uint32_t version, header_size;
	uint64_t perf_capabilities, pebs_enable, data_cfg, ds_area, pebs_base, pebs_index,
		pebs_threshold, records_len;
	struct pebs_decode_info info;
	const uint8_t *records;
};

#define HDR(field) offsetof(struct vpmu_pebs_dump_header, field)

/* Read exactly n bytes; how many came (less at the end of the file or on an error). */
static size_t read_n(FILE *f, uint8_t *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		size_t r = fread(buf + got, 1, n - got, f);

		if (r == 0)
			break;
		got += r;
	}
	return got;
}

/* The file opened, its type and size in *ret_st; NULL after the error line. */
static FILE *open_dump(const char *path, struct stat *ret_st)
{
	struct stat st;
	FILE *f = fopen(path, "rb");

	if (!f) {
		fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &st) < 0) {
		fprintf(stderr, "%s: cannot stat %s: %s\n", prog, path, strerror(errno));
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: %s is a directory, not a PEBS dump\n", prog, path);
		goto fail;
	}
	*ret_st = st;
	return f;
fail:
	fclose(f);
	return NULL;
}

/*
 * The fixed part of the header, checked: magic, version, sizes within
 * VPMU_PEBS_DUMP_MAX_*, and for a regular file the size it declares. The
 * dump's whole size in *ret_total; -1 after the error line.
 */
static int check_header(const char *path, const struct stat *st, const uint8_t *hdr,
			size_t *ret_total)
{
	const size_t fixed = sizeof(struct vpmu_pebs_dump_header);
	uint32_t version, header_size;
	uint64_t records_len;
	size_t total;

	if (memcmp(hdr + HDR(magic), VPMU_PEBS_DUMP_MAGIC, 8)) {
		fprintf(stderr, "%s: %s: not a PEBS dump (no %s magic)\n", prog, path,
			VPMU_PEBS_DUMP_MAGIC);
		return -1;
	}
	version = le32(hdr + HDR(version));
	if (version != VPMU_PEBS_DUMP_VERSION) {
		fprintf(stderr, "%s: %s: dump version %" PRIu32 ", this tool reads version %d\n",
			prog, path, version, VPMU_PEBS_DUMP_VERSION);
		return -1;
	}
	header_size = le32(hdr + HDR(header_size));
	if (header_size < fixed || header_size > VPMU_PEBS_DUMP_MAX_HEADER) {
		fprintf(stderr,
			"%s: %s: impossible header size %" PRIu32
			" (a header has %zu to %u bytes)\n",
			prog, path, header_size, fixed, VPMU_PEBS_DUMP_MAX_HEADER);
		return -1;
	}
	records_len = le64(hdr + HDR(records_len));
	if (records_len > VPMU_PEBS_DUMP_MAX_RECORDS) {
		fprintf(stderr,
			"%s: %s: header says %" PRIu64 " bytes of records, more than a dump holds "
			"(%llu MiB): damaged\n",
			prog, path, records_len, VPMU_PEBS_DUMP_MAX_RECORDS >> 20);
		return -1;
	}
	total = header_size + (size_t) records_len;
	if (S_ISREG(st->st_mode) && (uint64_t) st->st_size != total) {
		fprintf(stderr,
			"%s: %s: header says %" PRIu64 " bytes of records, the file has %lld after "
			"the header (truncated or damaged)\n",
			prog, path, records_len, (long long) st->st_size - (long long) header_size);
		return -1;
	}
	*ret_total = total;
	return 0;
}

/* The fixed part of the header into hdr, then check_header(); -1 after the error line. */
static int read_header(FILE *f, const char *path, const struct stat *st, uint8_t *hdr,
		       size_t *ret_total)
{
	const size_t fixed = sizeof(struct vpmu_pebs_dump_header);
	size_t got = read_n(f, hdr, fixed);

	if (ferror(f)) {
		fprintf(stderr, "%s: cannot read %s: %s\n", prog, path, strerror(errno));
		return -1;
	}
	if (got < fixed) {
		fprintf(stderr, "%s: %s: %zu bytes, shorter than the %zu-byte dump header\n", prog,
			path, got, fixed);
		return -1;
	}
	return check_header(path, st, hdr, ret_total);
}

/*
 * The whole dump, `total` bytes: the header already read into hdr, then
 * the rest of the file, which must be exactly that. NULL after the error
 * line.
 */
static uint8_t *read_rest(FILE *f, const char *path, const struct stat *st, const uint8_t *hdr,
			  size_t total)
{
	const size_t fixed = sizeof(struct vpmu_pebs_dump_header);
	uint64_t records_len = le64(hdr + HDR(records_len));
	uint8_t *buf;
	size_t got, cap;

	/*
	 * A regular file has the size the header says; from a pipe or a
	 * device the buffer grows with what really comes, never past `total`.
	 */
	cap = S_ISREG(st->st_mode) || total < 65536 ? total : 65536;
	buf = malloc(cap);
	if (!buf) {
		fprintf(stderr, "%s: %s: out of memory for %zu bytes\n", prog, path, cap);
		return NULL;
	}
	memcpy(buf, hdr, fixed);
	got = fixed;
	while (got < total) {
		size_t want, step;

		if (got == cap) {
			uint8_t *nb;

			cap = cap > total / 2 ? total : 2 * cap;
			nb = realloc(buf, cap);
			if (!nb) {
				fprintf(stderr, "%s: %s: out of memory for %zu bytes\n", prog, path,
					cap);
				goto fail;
			}
			buf = nb;
		}
		want = cap - got;
		step = read_n(f, buf + got, want);
		got += step;
		if (step < want)
			break; /* the end of the file, or an error */
	}
	if (ferror(f)) {
		fprintf(stderr, "%s: cannot read %s: %s\n", prog, path, strerror(errno));
		goto fail;
	}
	/* a pipe or a device: what it gives must be what the header says, no more, no less */
	if (got < total || fgetc(f) != EOF) {
		fprintf(stderr,
			"%s: %s: header says %" PRIu64 " bytes of records, the file has %s "
			"(truncated or damaged)\n",
			prog, path, records_len, got < total ? "fewer" : "more");
		goto fail;
	}
	return buf;
fail:
	free(buf);
	return NULL;
}

/*
 * The dump, header first: its fixed part is read and checked (magic,
 * version, sizes within VPMU_PEBS_DUMP_MAX_*) before anything else, then
 * exactly the bytes it declares, which must be all the file holds. So a
 * file that is no dump (/dev/zero, a disk image) costs one header read,
 * and a hostile header at most the declared limit. Returns NULL after
 * printing the one error line.
 */
static uint8_t *read_dump(const char *path, size_t *ret_len)
{
	uint8_t hdr[sizeof(struct vpmu_pebs_dump_header)], *buf = NULL;
	struct stat st;
	size_t total;
	FILE *f = open_dump(path, &st);

	if (!f)
		return NULL;
	if (read_header(f, path, &st, hdr, &total) == 0)
		buf = read_rest(f, path, &st, hdr, total);
	fclose(f);
	if (buf)
		*ret_len = total;
	return buf;
}

static int parse_header(struct dump *d, const uint8_t *buf, size_t len)
{
	const char *p = d->path;
	unsigned int fmt;

	if (len < sizeof(struct vpmu_pebs_dump_header)) {
		fprintf(stderr, "%s: %s: %zu bytes, shorter than the %zu-byte dump header\n", prog,
			p, len, sizeof(struct vpmu_pebs_dump_header));
		return -1;
	}
	if (memcmp(buf + HDR(magic), VPMU_PEBS_DUMP_MAGIC, 8)) {
		fprintf(stderr, "%s: %s: not a PEBS dump (no %s magic)\n", prog, p,
			VPMU_PEBS_DUMP_MAGIC);
		return -1;
	}
	d->version = le32(buf + HDR(version));
	if (d->version != VPMU_PEBS_DUMP_VERSION) {
		fprintf(stderr, "%s: %s: dump version %" PRIu32 ", this tool reads version %d\n",
			prog, p, d->version, VPMU_PEBS_DUMP_VERSION);
		return -1;
	}
	d->header_size = le32(buf + HDR(header_size));
	if (d->header_size < sizeof(struct vpmu_pebs_dump_header) || d->header_size > len) {
		fprintf(stderr, "%s: %s: impossible header size %" PRIu32 " (file: %zu bytes)\n",
			prog, p, d->header_size, len);
		return -1;
	}
	memcpy(d->model, buf + HDR(model), sizeof(d->model));
	if (!memchr(d->model, '\0', sizeof(d->model))) {
		fprintf(stderr, "%s: %s: model name in the header is not NUL-terminated\n", prog,
			p);
		return -1;
	}
	d->perf_capabilities = le64(buf + HDR(perf_capabilities));
	d->pebs_enable = le64(buf + HDR(pebs_enable));
	d->data_cfg = le64(buf + HDR(data_cfg));
	d->ds_area = le64(buf + HDR(ds_area));
	d->pebs_base = le64(buf + HDR(pebs_base));
	d->pebs_index = le64(buf + HDR(pebs_index));
	d->pebs_threshold = le64(buf + HDR(pebs_threshold));
	d->records_len = le64(buf + HDR(records_len));
	if (d->records_len != len - d->header_size) {
		fprintf(stderr,
			"%s: %s: header says %" PRIu64 " bytes of records, the file has %zu after "
			"the header (truncated or damaged)\n",
			prog, p, d->records_len, len - d->header_size);
		return -1;
	}
	fmt = (unsigned int) VPMU_FIELD_GET(PERF_CAP_PEBS_FORMAT, d->perf_capabilities);
	if (fmt < 3 || (fmt > 6 && fmt != PEBS_FMT_ARCH)) {
		fprintf(stderr,
			"%s: %s: PEBS format %u is not supported (decoded: 3, 4-6, 0xf "
			"architectural)\n",
			prog, p, fmt);
		return -1;
	}
	d->info.fmt = fmt;
	d->info.timed = fmt >= 4 && fmt <= 6 && (d->perf_capabilities & PERF_CAP_PEBS_TIMING_INFO);
	d->records = buf + d->header_size;
	return 0;
}

/* ---- text output ---- */

static void xmm_hex(const uint8_t x[16], char out[35])
{
	/* The register as a 128-bit little-endian number, most significant digit first. */
	out[0] = '0';
	out[1] = 'x';
	for (unsigned int i = 0; i < 16; i++)
		snprintf(out + 2 + 2 * i, 3, "%02x", x[15 - i]);
}

static void group_names(const struct pebs_decoded *r, char *out, size_t n)
{
	static const char *const names[] = {
		"basic", "meminfo", "gprs", "xmms", "lbrs", "counters"
	};
	size_t off = 0;

	out[0] = '\0';
	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (r->groups & (1u << i)) {
			int w = snprintf(out + off, n - off, "%s%s", off ? " " : "", names[i]);

			if (w < 0 || (size_t) w >= n - off)
				return;
			off += (size_t) w;
		}
}

static void print_text_record(const struct dump *d, size_t idx, size_t off,
			      const struct pebs_decoded *r)
{
	char groups[64], x[35];

	group_names(r, groups, sizeof(groups));
	printf("record %zu at +0x%zx: %zu bytes, groups: %s\n", idx, off, r->size, groups);
	if (d->info.fmt == PEBS_FMT_ARCH)
		printf("  header         0x%016" PRIx64 "%s\n", r->format_qword,
		       r->mode64 ? " (64-bit mode)" : "");
	else if (d->info.fmt >= 4)
		printf("  record format  0x%012" PRIx64 "\n", r->record_format);
	printf("  eventing ip    0x%016" PRIx64 "\n", r->eventing_ip);
	printf("  applicable     0x%016" PRIx64 "\n", r->applicable);
	printf("  tsc            0x%016" PRIx64 "\n", r->tsc);
	if (r->has_retire_latency) {
		if (r->retire_valid)
			printf("  retire latency %" PRIu64 " cycles\n", r->retire_latency);
		else
			printf("  retire latency not valid\n");
	}
	if (r->groups & PEBS_DEC_MEMINFO)
		printf("  memory         dla 0x%" PRIx64 " data_src 0x%" PRIx64
		       " latency 0x%" PRIx64 " tsx 0x%" PRIx64 "\n",
		       r->dla, r->data_src, r->latency, r->tsx);
	if (r->groups & PEBS_DEC_GPRS) {
		printf("  rip 0x%016" PRIx64 "  rflags 0x%016" PRIx64 "\n", r->ip, r->rflags);
		for (unsigned int i = 0; i < PEBS_NR_GPRS; i++)
			printf("%s%-3s 0x%016" PRIx64 "%s", i % 4 ? "  " : "  ", gpr_names[i],
			       r->gpr[i], i % 4 == 3 ? "\n" : "");
		if (d->info.fmt == PEBS_FMT_ARCH)
			printf("  ssp 0x%016" PRIx64 "\n", r->ssp);
	}
	if (r->groups & PEBS_DEC_XMMS) {
		if (d->info.fmt == PEBS_FMT_ARCH)
			printf("  xstate 0x%" PRIx64 "\n", r->xstate);
		for (unsigned int i = 0; i < 16; i++) {
			xmm_hex(r->xmm[i], x);
			printf("  xmm%-2u %s\n", i, x);
		}
	}
	if (r->groups & PEBS_DEC_LBRS) {
		if (d->info.fmt == PEBS_FMT_ARCH)
			printf("  lbr_ctl 0x%" PRIx64 "  ler from 0x%" PRIx64 " to 0x%" PRIx64
			       " info 0x%" PRIx64 "\n",
			       r->lbr_ctl, r->ler.from, r->ler.to, r->ler.info);
		for (unsigned int i = 0; i < r->nr_lbr; i++)
			printf("  lbr[%2u] from 0x%016" PRIx64 " to 0x%016" PRIx64
			       " info 0x%016" PRIx64 "\n",
			       i, r->lbr[i].from, r->lbr[i].to, r->lbr[i].info);
	}
	if (r->groups & PEBS_DEC_CNTR) {
		for (unsigned int i = 0; i < 32; i++)
			if (r->pmc_mask & (1U << i))
				printf("  pmc%-2u   0x%016" PRIx64 "\n", i, r->counters.pmc[i]);
		for (unsigned int i = 0; i < 16; i++)
			if (r->fixed_mask & (1U << i))
				printf("  fixed%-2u 0x%016" PRIx64 "\n", i, r->counters.fixed[i]);
		if (r->metrics_mask & 1U)
			printf("  metrics base 0x%016" PRIx64 "\n", r->counters.metrics_base);
		if (r->metrics_mask & 2U)
			printf("  perf metrics 0x%016" PRIx64 "\n", r->counters.metrics);
	}
}

/* ---- JSON output ---- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char) *s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void jx(const char *key, uint64_t v, bool comma)
{
	printf("\"%s\":\"0x%" PRIx64 "\"%s", key, v, comma ? "," : "");
}

static void json_lbr(const struct pebs_lbr_entry *e)
{
	printf("{");
	jx("from", e->from, true);
	jx("to", e->to, true);
	jx("info", e->info, false);
	printf("}");
}

static void json_meminfo(const struct pebs_decoded *r)
{
	printf(",\"meminfo\":{");
	jx("dla", r->dla, true);
	jx("data_src", r->data_src, true);
	jx("latency", r->latency, true);
	jx("tsx", r->tsx, false);
	printf("}");
}

static void json_gprs(const struct dump *d, const struct pebs_decoded *r)
{
	printf(",\"gprs\":{");
	jx("rflags", r->rflags, true);
	jx("rip", r->ip, true);
	if (d->info.fmt == PEBS_FMT_ARCH)
		jx("ssp", r->ssp, true);
	for (unsigned int i = 0; i < PEBS_NR_GPRS; i++)
		jx(gpr_names[i], r->gpr[i], i + 1 < PEBS_NR_GPRS);
	printf("}");
}

static void json_xmms(const struct dump *d, const struct pebs_decoded *r)
{
	char x[35];

	printf(",\"xmms\":{");
	if (d->info.fmt == PEBS_FMT_ARCH)
		jx("xstate", r->xstate, true);
	printf("\"xmm\":[");
	for (unsigned int i = 0; i < 16; i++) {
		xmm_hex(r->xmm[i], x);
		printf("%s\"%s\"", i ? "," : "", x);
	}
	printf("]}");
}

static void json_lbrs(const struct dump *d, const struct pebs_decoded *r)
{
	printf(",\"lbrs\":{\"nr\":%u,", r->nr_lbr);
	if (d->info.fmt == PEBS_FMT_ARCH) {
		printf("\"selector\":%u,", r->lbr_sel);
		jx("lbr_ctl", r->lbr_ctl, true);
		printf("\"ler\":");
		json_lbr(&r->ler);
		printf(",");
	}
	printf("\"entries\":[");
	for (unsigned int i = 0; i < r->nr_lbr; i++) {
		printf("%s", i ? "," : "");
		json_lbr(&r->lbr[i]);
	}
	printf("]}");
}

/* {"0":"0x..",...}: the values whose bit is set in mask */
static void json_masked(uint32_t mask, unsigned int n, const uint64_t *v)
{
	bool first = true;

	printf("{");
	for (unsigned int i = 0; i < n; i++)
		if (mask & (1U << i)) {
			printf("%s\"%u\":\"0x%" PRIx64 "\"", first ? "" : ",", i, v[i]);
			first = false;
		}
	printf("}");
}

static void json_counters(const struct pebs_decoded *r)
{
	printf(",\"counters\":{");
	jx("pmc_mask", r->pmc_mask, true);
	jx("fixed_mask", r->fixed_mask, true);
	jx("metrics_mask", r->metrics_mask, true);
	printf("\"pmc\":");
	json_masked(r->pmc_mask, 32, r->counters.pmc);
	printf(",\"fixed\":");
	json_masked(r->fixed_mask, 16, r->counters.fixed);
	if (r->metrics_mask & 1U)
		printf(",\"metrics_base\":\"0x%" PRIx64 "\"", r->counters.metrics_base);
	if (r->metrics_mask & 2U)
		printf(",\"metrics\":\"0x%" PRIx64 "\"", r->counters.metrics);
	printf("}");
}

static void print_json_record(const struct dump *d, size_t idx, size_t off,
			      const struct pebs_decoded *r)
{
	static const char *const names[] = {
		"basic", "meminfo", "gprs", "xmms", "lbrs", "counters"
	};
	bool first = true;

	printf("%s{\"index\":%zu,\"offset\":%zu,\"size\":%zu,\"groups\":[", idx ? "," : "", idx,
	       off, r->size);
	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (r->groups & (1u << i)) {
			printf("%s\"%s\"", first ? "" : ",", names[i]);
			first = false;
		}
	printf("],");
	if (d->info.fmt == PEBS_FMT_ARCH) {
		jx("header", r->format_qword, true);
		printf("\"mode64\":%s,", r->mode64 ? "true" : "false");
	} else if (d->info.fmt >= 4) {
		jx("record_format", r->record_format, true);
	}
	jx("eventing_ip", r->eventing_ip, true);
	jx("applicable", r->applicable, true);
	jx("tsc", r->tsc, false);
	if (r->has_retire_latency)
		printf(",\"retire_latency\":%" PRIu64 ",\"retire_valid\":%s", r->retire_latency,
		       r->retire_valid ? "true" : "false");
	if (r->groups & PEBS_DEC_MEMINFO)
		json_meminfo(r);
	if (r->groups & PEBS_DEC_GPRS)
		json_gprs(d, r);
	if (r->groups & PEBS_DEC_XMMS)
		json_xmms(d, r);
	if (r->groups & PEBS_DEC_LBRS)
		json_lbrs(d, r);
	if (r->groups & PEBS_DEC_CNTR)
		json_counters(r);
	printf("}\n");
}

static void print_header(const struct dump *d, bool json)
{
	if (!json) {
		printf("%s: model %s, PEBS format %s%s, %" PRIu64 " bytes of records\n", d->path,
		       d->model[0] ? d->model : "(unnamed)", pebs_decode_format_name(d->info.fmt),
		       d->info.timed ? ", timed" : "", d->records_len);
		printf("perf_capabilities 0x%" PRIx64 " pebs_enable 0x%" PRIx64
		       " data_cfg 0x%" PRIx64 " ds_area 0x%" PRIx64 "\n",
		       d->perf_capabilities, d->pebs_enable, d->data_cfg, d->ds_area);
		printf("pebs_base 0x%" PRIx64 " pebs_index 0x%" PRIx64 " pebs_threshold 0x%" PRIx64
		       "\n",
		       d->pebs_base, d->pebs_index, d->pebs_threshold);
		return;
	}
	printf("{\"file\":");
	json_str(d->path);
	printf(",\"model\":");
	json_str(d->model);
	printf(",\"format\":%u,\"timed\":%s,", d->info.fmt, d->info.timed ? "true" : "false");
	jx("perf_capabilities", d->perf_capabilities, true);
	jx("pebs_enable", d->pebs_enable, true);
	jx("data_cfg", d->data_cfg, true);
	jx("ds_area", d->ds_area, true);
	jx("pebs_base", d->pebs_base, true);
	jx("pebs_index", d->pebs_index, true);
	jx("pebs_threshold", d->pebs_threshold, true);
	printf("\"records_len\":%" PRIu64 ",\n\"records\":[\n", d->records_len);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dump d = { 0 };
	struct pebs_decoded *rec;
	const char *why = NULL;
	bool json = false;
	size_t len, off = 0, idx = 0;
	uint8_t *buf;
	int c, r = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "%s: unknown option '%s' (try --help)\n", prog,
				argv[optind - 1]);
			return 1;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "%s: expected exactly one dump FILE (try --help)\n", prog);
		return 1;
	}
	d.path = argv[optind];
	buf = read_dump(d.path, &len);
	if (!buf)
		return 1;
	if (parse_header(&d, buf, len) < 0) {
		free(buf);
		return 1;
	}
	rec = malloc(sizeof(*rec));
	if (!rec) {
		fprintf(stderr, "%s: out of memory\n", prog);
		free(buf);
		return 1;
	}
	print_header(&d, json);
	while (off < d.records_len) {
		r = pebs_decode_record(&d.info, d.records + off, (size_t) d.records_len - off, rec,
				       &why);
		if (r < 0)
			break;
		if (json)
			print_json_record(&d, idx, off, rec);
		else
			print_text_record(&d, idx, off, rec);
		off += rec->size;
		idx++;
	}
	if (json) {
		printf("],\"decoded\":%zu,\"error\":", idx);
		if (r < 0) {
			printf("{\"record\":%zu,\"offset\":%zu,\"message\":", idx, off);
			json_str(why);
			printf("}");
		} else {
			printf("null");
		}
		printf("}\n");
	} else if (r >= 0) {
		printf("%zu records\n", idx);
	}
	fflush(stdout);
	if (r < 0)
		fprintf(stderr,
			"%s: %s: record %zu at +0x%zx: %s; stopped after %zu records, %zu bytes "
			"not decoded\n",
			prog, d.path, idx, off, why, idx, (size_t) d.records_len - off);
	free(rec);
	free(buf);
	return r < 0 ? 1 : 0;
}
