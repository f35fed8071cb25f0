/* SPDX-License-Identifier: MIT */
/*
 * The PMU event filter: which guest events may reach a host counter, with
 * the semantics of KVM_SET_PMU_EVENT_FILTER (Linux
 * Documentation/virt/kvm/api.rst): an allow or deny list of event select +
 * unit mask entries, or of masked entries (KVM_PMU_EVENT_FLAG_MASKED_EVENTS),
 * and a fixed-counter bitmap. The text format and the default policy are
 * in docs/pmu-filter.md. A parsed filter is never written again, so any
 * number of vCPUs on any threads may share one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bits.h"
#include "filter.h"
#include "vpmu/msr.h"

/* Plain entries are kept as masked ones with mask 0xff, match = umask. */
struct filter_entry {
	uint8_t event;
	uint8_t mask;
	uint8_t match;
	bool exclude;
};

struct vpmu_filter {
	bool deny; /* action deny; else allow */
	uint32_t fixed_bitmap;
	uint16_t nr;
	uint16_t first[257]; /* event select e: entry[first[e] .. first[e + 1]) */
	struct filter_entry entry[];
};

/* OFFCORE_RESPONSE_0/1: they count what the uncore answers, other cores' traffic included */
#define EVENT_OFFCORE_RSP_0 0xb7
#define EVENT_OFFCORE_RSP_1 0xbb

/*
 * "In the filter" as api.rst defines it for masked entries (and plain ones,
 * which are masked entries with mask 0xff): the event select matches, the
 * unit mask matches an include entry, (umask & mask) == match, and no
 * exclude entry.
 */
static bool in_filter(const struct vpmu_filter *f, uint8_t event, uint8_t umask)
{
	bool included = false;

	for (unsigned int i = f->first[event]; i < f->first[event + 1]; i++) {
		const struct filter_entry *e = &f->entry[i];

		if ((umask & e->mask) != e->match)
			continue;
		if (e->exclude)
			return false;
		included = true;
	}
	return included;
}

bool vpmu_filter_allows_gp(const struct vpmu_filter *filter, uint64_t evtsel)
{
	uint8_t event = (uint8_t) FIELD_GET(ARCH_PERFMON_EVENTSEL_EVENT, evtsel);
	uint8_t umask = (uint8_t) FIELD_GET(ARCH_PERFMON_EVENTSEL_UMASK, evtsel);

	/* AnyThread counts the sibling thread too: never, filter or not */
	if (evtsel & ARCH_PERFMON_EVENTSEL_ANY)
		return false;
	/* an allow list is the whole policy: only what it names counts */
	if (filter && !filter->deny)
		return in_filter(filter, event, umask);
	/* the default policy; a deny list only adds to it */
	if (event == EVENT_OFFCORE_RSP_0 || event == EVENT_OFFCORE_RSP_1)
		return false;
	return !filter || !in_filter(filter, event, umask);
}

/*
 * api.rst: FixCtr[i] is allowed iff (action == ALLOW && bitmap & BIT(i)) ||
 * (action == DENY && !(bitmap & BIT(i))); the event list plays no part, even
 * where it names a fixed counter's event.
 */
bool vpmu_filter_allows_fixed(const struct vpmu_filter *filter, unsigned int idx)
{
	bool listed;

	if (!filter)
		return true;
	listed = idx < 32 && (filter->fixed_bitmap & (1u << idx));
	return filter->deny ? !listed : listed;
}

bool filter_allows_counter(const struct vpmu_filter *filter, unsigned int ctr, uint64_t evtsel,
			   uint64_t fixed_ctrl)
{
	if (ctr < 32)
		return vpmu_filter_allows_gp(filter, evtsel);
	if (fixed_ctrl & FIXED_CTRL_ANY(ctr - 32))
		return false;
	return vpmu_filter_allows_fixed(filter, ctr - 32);
}

void vpmu_filter_free(struct vpmu_filter *filter)
{
	free(filter);
}

/* ---- the text format ------------------------------------------------------ */

struct parser {
	const char *p, *end; /* what is left of the current line, comment cut off */
	unsigned int line;
	char *err;
	size_t err_size;
};

struct token {
	const char *s;
	size_t len; /* 0: end of line */
};

VPMU_PRINTF(2, 3)
static int fail(struct parser *ps, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (!ps->err || !ps->err_size)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(ps->err, ps->err_size, "line %u: %s", ps->line, msg);
	return -EINVAL;
}

/* A token for an error message: at most 32 bytes, unprintable bytes as '?'. */
static const char *quote(struct token t, char buf[36])
{
	size_t n = t.len > 32 ? 32 : t.len;

	for (size_t i = 0; i < n; i++)
		buf[i] = t.s[i] > ' ' && t.s[i] < 0x7f ? t.s[i] : '?';
	strcpy(buf + n, t.len > 32 ? "..." : "");
	return buf;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static void skip_space(struct parser *ps)
{
	while (ps->p < ps->end && is_space(*ps->p))
		ps->p++;
}

static struct token next(struct parser *ps)
{
	struct token t;

	skip_space(ps);
	t.s = ps->p;
	while (ps->p < ps->end && !is_space(*ps->p))
		ps->p++;
	t.len = (size_t) (ps->p - t.s);
	return t;
}

static bool is(struct token t, const char *word)
{
	return t.len == strlen(word) && !memcmp(t.s, word, t.len);
}

/* "expected WHAT, found 'X'" or "expected WHAT at the end of the line" */
static int expected(struct parser *ps, const char *ctx, const char *what, struct token t)
{
	char q[36];

	if (!t.len)
		return fail(ps, "%s: expected %s at the end of the line", ctx, what);
	return fail(ps, "%s: expected %s, found '%s'", ctx, what, quote(t, q));
}

/* 0x-prefixed hex or decimal; false if not a number. Saturates at UINT64_MAX. */
static bool number(struct token t, uint64_t *ret)
{
	unsigned int base = 10;
	size_t i = 0;
	uint64_t v = 0;

	if (t.len > 2 && t.s[0] == '0' && (t.s[1] == 'x' || t.s[1] == 'X')) {
		base = 16;
		i = 2;
	}
	if (i == t.len)
		return false;
	for (; i < t.len; i++) {
		char c = t.s[i];
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = (unsigned int) (c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned int) (c - 'a' + 10);
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = (unsigned int) (c - 'A' + 10);
		else
			return false;
		v = v > (UINT64_MAX - d) / base ? UINT64_MAX : v * base + d;
	}
	*ret = v;
	return true;
}

/* The next token, a number in 0..0xff; `what` names it in errors. */
static int byte_arg(struct parser *ps, const char *ctx, const char *what, uint8_t *ret)
{
	struct token t = next(ps);
	char q[36];
	uint64_t v;

	if (!t.len || !number(t, &v))
		return expected(ps, ctx, what, t);
	if (v > 0xff)
		return fail(ps, "%s '%s' is out of range (at most 0xff)", what, quote(t, q));
	*ret = (uint8_t) v;
	return 0;
}

/* The next token must be the keyword `word`. */
static int keyword(struct parser *ps, const char *ctx, const char *word)
{
	struct token t = next(ps);
	char what[24];

	if (is(t, word))
		return 0;
	snprintf(what, sizeof(what), "'%s'", word);
	return expected(ps, ctx, what, t);
}

static int end_of_entry(struct parser *ps, const char *ctx)
{
	struct token t = next(ps);
	char q[36];

	if (!t.len)
		return 0;
	return fail(ps, "%s: unexpected '%s' after the entry", ctx, quote(t, q));
}

/* The next item of a comma-separated list: up to a space or a comma (a stray comma itself). */
static struct token next_item(struct parser *ps)
{
	struct token t;

	skip_space(ps);
	t.s = ps->p;
	while (ps->p < ps->end && !is_space(*ps->p) && *ps->p != ',')
		ps->p++;
	t.len = (size_t) (ps->p - t.s);
	if (!t.len && ps->p < ps->end)
		t.len = 1;
	return t;
}

/* fixed: "none", or indexes separated by commas ("0,2", "0, 2"). */
static int fixed_list(struct parser *ps, uint32_t *ret)
{
	const char *what = "a fixed counter index list like 0,2 (or none)";
	struct token t = next_item(ps);
	uint32_t bitmap = 0;
	char q[36];

	if (is(t, "none")) {
		*ret = 0;
		return end_of_entry(ps, "fixed");
	}
	for (;;) {
		uint64_t v;

		if (!t.len || !number(t, &v))
			return expected(ps, "fixed", what, t);
		if (v > 31)
			return fail(ps, "fixed counter '%s' is out of range (0 to 31)",
				    quote(t, q));
		bitmap |= 1u << v;
		skip_space(ps);
		if (ps->p == ps->end)
			break;
		if (*ps->p != ',') {
			t = next(ps);
			return fail(ps, "fixed: unexpected '%s' (separate indexes with commas)",
				    quote(t, q));
		}
		ps->p++;
		t = next_item(ps);
	}
	*ret = bitmap;
	return 0;
}

struct parse_state {
	unsigned int action_line, fixed_line, plain_line, masked_line;
	bool deny;
	uint32_t fixed_bitmap;
	unsigned int nr;
	struct filter_entry entry[FILTER_MAX_EVENTS];
};

static int add_entry(struct parser *ps, struct parse_state *st, bool masked,
		     const struct filter_entry *e)
{
	if (masked && st->plain_line)
		return fail(
			ps,
			"'masked' entry in a filter of plain 'event' entries (the first on line "
			"%u): a filter is all plain or all masked, as in KVM",
			st->plain_line);
	if (!masked && st->masked_line)
		return fail(
			ps,
			"plain 'event' entry in a filter of 'masked' entries (the first on line "
			"%u): a filter is all plain or all masked, as in KVM",
			st->masked_line);
	if (st->nr == FILTER_MAX_EVENTS)
		return fail(ps,
			    "more than %u event entries (KVM's limit, "
			    "KVM_PMU_EVENT_FILTER_MAX_EVENTS)",
			    FILTER_MAX_EVENTS);
	if (masked && !st->masked_line)
		st->masked_line = ps->line;
	if (!masked && !st->plain_line)
		st->plain_line = ps->line;
	st->entry[st->nr++] = *e;
	return 0;
}

static int parse_line(struct parser *ps, struct parse_state *st)
{
	struct token kw = next(ps), t;
	struct filter_entry e = { 0 };
	char q[36];
	int r;

	if (!kw.len)
		return 0;
	if (is(kw, "action")) {
		if (st->action_line)
			return fail(ps, "second 'action' line (the first is line %u)",
				    st->action_line);
		t = next(ps);
		if (is(t, "allow"))
			st->deny = false;
		else if (is(t, "deny"))
			st->deny = true;
		else
			return expected(ps, "action", "allow or deny", t);
		st->action_line = ps->line;
		return end_of_entry(ps, "action");
	}
	if (is(kw, "event")) {
		if ((r = byte_arg(ps, "event", "event select", &e.event)) < 0 ||
		    (r = keyword(ps, "event", "umask")) < 0 ||
		    (r = byte_arg(ps, "event", "umask", &e.match)) < 0 ||
		    (r = end_of_entry(ps, "event")) < 0)
			return r;
		e.mask = 0xff;
		return add_entry(ps, st, false, &e);
	}
	if (is(kw, "masked")) {
		if ((r = keyword(ps, "masked", "event")) < 0 ||
		    (r = byte_arg(ps, "masked", "event select", &e.event)) < 0 ||
		    (r = keyword(ps, "masked", "mask")) < 0 ||
		    (r = byte_arg(ps, "masked", "mask", &e.mask)) < 0 ||
		    (r = keyword(ps, "masked", "match")) < 0 ||
		    (r = byte_arg(ps, "masked", "match", &e.match)) < 0)
			return r;
		t = next(ps);
		if (is(t, "exclude"))
			e.exclude = true;
		else if (t.len)
			return expected(ps, "masked", "'exclude' or the end of the line", t);
		if ((r = end_of_entry(ps, "masked")) < 0)
			return r;
		if (e.match & ~e.mask)
			return fail(
				ps,
				"match 0x%02x has bits outside mask 0x%02x: the entry can never "
				"match",
				e.match, e.mask);
		return add_entry(ps, st, true, &e);
	}
	if (is(kw, "fixed")) {
		if (st->fixed_line)
			return fail(ps, "second 'fixed' line (the first is line %u)",
				    st->fixed_line);
		st->fixed_line = ps->line;
		return fixed_list(ps, &st->fixed_bitmap);
	}
	return fail(ps, "unknown keyword '%s': expected action, event, masked or fixed",
		    quote(kw, q));
}

/* Every field: one order for the same entries, whatever the file's (filter_digest). */
static int entry_cmp(const void *a, const void *b)
{
	const struct filter_entry *x = a, *y = b;

	if (x->event != y->event)
		return (int) x->event - (int) y->event;
	if (x->mask != y->mask)
		return (int) x->mask - (int) y->mask;
	if (x->match != y->match)
		return (int) x->match - (int) y->match;
	return (int) x->exclude - (int) y->exclude;
}

/* FNV-1a, 64-bit: a digest, not a defence against a chosen collision. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

uint64_t filter_digest(const struct vpmu_filter *f)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	uint8_t head[7];

	if (!f)
		return 0;
	/* little-endian, whatever the host: a snapshot may move between hosts */
	head[0] = f->deny;
	for (unsigned int i = 0; i < 4; i++)
		head[1 + i] = (uint8_t) (f->fixed_bitmap >> (8 * i));
	head[5] = (uint8_t) f->nr;
	head[6] = (uint8_t) (f->nr >> 8);
	h = fnv1a(h, head, sizeof(head));
	for (unsigned int i = 0; i < f->nr; i++) {
		const struct filter_entry *e = &f->entry[i];
		uint8_t b[4] = { e->event, e->mask, e->match, e->exclude };

		h = fnv1a(h, b, sizeof(b));
	}
	return h ? h : 1; /* 0 is the default policy's */
}

static int parse(const char *text, size_t len, struct vpmu_filter **ret_filter, char *err,
		 size_t err_size)
{
	struct parser ps = { .err = err, .err_size = err_size };
	struct parse_state *st;
	struct vpmu_filter *f;
	const char *p = text, *end = text + len;
	int r = 0;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	while (p < end && r == 0) {
		const char *eol = memchr(p, '\n', (size_t) (end - p)), *hash;

		if (!eol)
			eol = end;
		ps.line++;
		hash = memchr(p, '#', (size_t) (eol - p));
		ps.p = p;
		ps.end = hash ? hash : eol;
		if (memchr(p, '\0', (size_t) (eol - p)))
			r = fail(&ps, "NUL byte: not a text file");
		else
			r = parse_line(&ps, st);
		p = eol + (eol < end);
	}
	if (r == 0 && !st->action_line) {
		if (err && err_size)
			snprintf(err, err_size,
				 "no 'action allow' or 'action deny' line: a filter "
				 "needs one");
		r = -EINVAL;
	}
	if (r < 0) {
		free(st);
		return r;
	}
	f = calloc(1, sizeof(*f) + st->nr * sizeof(f->entry[0]));
	if (!f) {
		free(st);
		return -ENOMEM;
	}
	f->deny = st->deny;
	f->fixed_bitmap = st->fixed_bitmap;
	f->nr = (uint16_t) st->nr;
	memcpy(f->entry, st->entry, st->nr * sizeof(f->entry[0]));
	qsort(f->entry, f->nr, sizeof(f->entry[0]), entry_cmp);
	for (unsigned int e = 0, i = 0; e <= 256; e++) {
		while (i < f->nr && f->entry[i].event < e)
			i++;
		f->first[e] = (uint16_t) i;
	}
	free(st);
	*ret_filter = f;
	return 0;
}

int vpmu_filter_parse(const char *text, struct vpmu_filter **ret_filter, char *err, size_t err_size)
{
	if (!text || !ret_filter)
		return -EINVAL;
	return parse(text, strlen(text), ret_filter, err, err_size);
}

#define FILTER_FILE_MAX (1u << 20)

int vpmu_filter_load(const char *path, struct vpmu_filter **ret_filter, char *err, size_t err_size)
{
	char *buf;
	size_t len = 0;
	int fd, r;

	if (!path || !ret_filter)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (err && err_size)
			snprintf(err, err_size, "cannot open: %s", strerror(-r));
		return r;
	}
	buf = malloc(FILTER_FILE_MAX + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, FILTER_FILE_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			if (err && err_size)
				snprintf(err, err_size, "cannot read: %s", strerror(-r));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t) n;
		if (len > FILTER_FILE_MAX) {
			r = -EFBIG;
			if (err && err_size)
				snprintf(err, err_size,
					 "larger than %u bytes: not a PMU filter file",
					 FILTER_FILE_MAX);
			goto out;
		}
	}
	r = parse(buf, len, ret_filter, err, err_size);
out:
	free(buf);
	close(fd);
	return r;
}
