/* SPDX-License-Identifier: MIT */
/*
 * vpmu-stat: read the stats endpoints of running VMMs (vpmu-vmm --stats
 * PATH, or any VMM serving vpmu_stats_to_json() snapshots) and print, per
 * VM, vCPU and counter, what the guest programmed and what backs it on
 * the host: as a table, JSON, Prometheus text exposition or libvirt-style
 * perf.* lines.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* VIR_PERF_PARAM_* live in libvirt-domain.h, which is only included through libvirt.h */
#include <libvirt/libvirt.h>

#include "vpmu/vpmu.h"

#define REPLY_MAX (16u << 20)
#define REPLY_MS  5000

/* ---- a small JSON reader ------------------------------------------------- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype type;
	bool b;
	bool integer; /* J_NUM: a non-negative integer that fits uint64_t */
	uint64_t u;
	double d;
	char *s;  /* J_STR */
	size_t n; /* J_ARR / J_OBJ */
	struct jv *items;
	char **keys; /* J_OBJ */
};

struct jparser {
	const char *p, *end;
	unsigned int depth;
};

static void jv_free(struct jv *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		jv_free(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->s);
	memset(v, 0, sizeof(*v));
}

static void skip_ws(struct jparser *jp)
{
	while (jp->p < jp->end &&
	       (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r'))
		jp->p++;
}

static int parse_value(struct jparser *jp, struct jv *v);

static int parse_string(struct jparser *jp, char **ret)
{
	size_t cap = 16, len = 0;
	char *s = malloc(cap);

	if (!s)
		return -ENOMEM;
	jp->p++; /* the opening quote */
	while (jp->p < jp->end && *jp->p != '"') {
		unsigned char c = (unsigned char) *jp->p++;

		if (c < 0x20)
			goto bad;
		if (c == '\\') {
			if (jp->p >= jp->end)
				goto bad;
			c = (unsigned char) *jp->p++;
			switch (c) {
			case '"':
			case '\\':
			case '/':
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'n':
				c = '\n';
				break;
			case 'r':
				c = '\r';
				break;
			case 't':
				c = '\t';
				break;
			case 'u': {
				unsigned int cp = 0;

				if (jp->end - jp->p < 4)
					goto bad;
				for (int i = 0; i < 4; i++) {
					char h = *jp->p++;

					cp <<= 4;
					if (h >= '0' && h <= '9')
						cp |= (unsigned int) (h - '0');
					else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f')
						cp |= (unsigned int) ((h | 0x20) - 'a' + 10);
					else
						goto bad;
				}
				/* names are ASCII; anything else is kept as '?' */
				c = cp < 0x80 && cp ? (unsigned char) cp : '?';
				break;
			}
			default:
				goto bad;
			}
		}
		if (len + 2 > cap) {
			char *ns = realloc(s, cap *= 2);

			if (!ns) {
				free(s);
				return -ENOMEM;
			}
			s = ns;
		}
		s[len++] = (char) c;
	}
	if (jp->p >= jp->end)
		goto bad;
	jp->p++;
	s[len] = '\0';
	*ret = s;
	return 0;
bad:
	free(s);
	return -EBADMSG;
}

static int parse_number(struct jparser *jp, struct jv *v)
{
	const char *start = jp->p;
	char text[64], *end;
	size_t len;

	/* a NUL byte is not part of a number (strchr would match the terminator) */
	while (jp->p < jp->end && *jp->p && strchr("+-0123456789.eE", *jp->p))
		jp->p++;
	len = (size_t) (jp->p - start);
	if (!len || len >= sizeof(text))
		return -EBADMSG;
	memcpy(text, start, len);
	text[len] = '\0';
	v->type = J_NUM;
	errno = 0;
	v->d = strtod(text, &end);
	if (*end || errno == EINVAL)
		return -EBADMSG;
	if (strspn(text, "0123456789") == len) {
		errno = 0;
		v->u = strtoull(text, &end, 10);
		v->integer = !errno;
	}
	return 0;
}

static int parse_container(struct jparser *jp, struct jv *v, bool obj)
{
	char close = obj ? '}' : ']';
	size_t cap = 0;
	int r;

	if (++jp->depth > 32)
		return -EBADMSG;
	v->type = obj ? J_OBJ : J_ARR;
	jp->p++;
	skip_ws(jp);
	if (jp->p < jp->end && *jp->p == close) {
		jp->p++;
		jp->depth--;
		return 0;
	}
	for (;;) {
		char *key = NULL;

		if (v->n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct jv *ni = realloc(v->items, ncap * sizeof(*ni));

			if (!ni)
				return -ENOMEM;
			v->items = ni;
			if (obj) {
				char **nk = realloc(v->keys, ncap * sizeof(*nk));

				if (!nk)
					return -ENOMEM;
				v->keys = nk;
			}
			cap = ncap;
		}
		skip_ws(jp);
		if (obj) {
			if (jp->p >= jp->end || *jp->p != '"')
				return -EBADMSG;
			r = parse_string(jp, &key);
			if (r < 0)
				return r;
			skip_ws(jp);
			if (jp->p >= jp->end || *jp->p != ':') {
				free(key);
				return -EBADMSG;
			}
			jp->p++;
			v->keys[v->n] = key;
		}
		memset(&v->items[v->n], 0, sizeof(v->items[0]));
		v->n++;
		r = parse_value(jp, &v->items[v->n - 1]);
		if (r < 0)
			return r;
		skip_ws(jp);
		if (jp->p >= jp->end)
			return -EBADMSG;
		if (*jp->p == close) {
			jp->p++;
			jp->depth--;
			return 0;
		}
		if (*jp->p++ != ',')
			return -EBADMSG;
	}
}

static int parse_value(struct jparser *jp, struct jv *v)
{
	skip_ws(jp);
	if (jp->p >= jp->end)
		return -EBADMSG;
	switch (*jp->p) {
	case '{':
		return parse_container(jp, v, true);
	case '[':
		return parse_container(jp, v, false);
	case '"':
		v->type = J_STR;
		return parse_string(jp, &v->s);
	}
	if (jp->end - jp->p >= 4 && !memcmp(jp->p, "null", 4)) {
		jp->p += 4;
		v->type = J_NULL;
		return 0;
	}
	if (jp->end - jp->p >= 4 && !memcmp(jp->p, "true", 4)) {
		jp->p += 4;
		v->type = J_BOOL;
		v->b = true;
		return 0;
	}
	if (jp->end - jp->p >= 5 && !memcmp(jp->p, "false", 5)) {
		jp->p += 5;
		v->type = J_BOOL;
		return 0;
	}
	return parse_number(jp, v);
}

static int json_parse(const char *text, size_t len, struct jv *ret)
{
	struct jparser jp = { .p = text, .end = text + len };
	struct jv v = { .type = J_NULL };
	int r = parse_value(&jp, &v);

	if (r == 0) {
		skip_ws(&jp);
		if (jp.p != jp.end)
			r = -EBADMSG;
	}
	if (r < 0) {
		jv_free(&v);
		return r;
	}
	*ret = v;
	return 0;
}

static const struct jv *jget(const struct jv *o, const char *key)
{
	if (!o || o->type != J_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return &o->items[i];
	return NULL;
}

/* ---- snapshots ----------------------------------------------------------- */

struct vm {
	const char *path;
	char *text; /* the document as served */
	size_t len;
	struct jv doc;
	double when; /* CLOCK_MONOTONIC seconds at the read */
};

static char errline[512];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/*
 * `s` for a terminal or a log: bytes outside printable ASCII as \xHH, so
 * that a server's strings cannot carry escape sequences to the reader's
 * terminal. Truncated to fit `size`.
 */
static const char *esc(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	for (; *s && n + 5 < size; s++) {
		unsigned char c = (unsigned char) *s;

		if (c < 0x20 || c >= 0x7f)
			n += (size_t) snprintf(buf + n, size - n, "\\x%02x", c);
		else
			buf[n++] = (char) c;
	}
	buf[n] = '\0';
	return buf;
}

/* The path as given, escaped (for error lines; one static buffer). */
static const char *esc_path(const char *path)
{
	static char buf[4 * sizeof(((struct sockaddr_un *) 0)->sun_path) + 8];

	return esc(path, buf, sizeof(buf));
}

/*
 * Only a server of this user or root is believed: another user could put
 * a socket where a VMM's used to be and serve anything.
 */
static int check_peer(int fd, const char *path)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred)) {
		snprintf(errline, sizeof(errline),
			 "%s: cannot tell who serves it (SO_PEERCRED: %s)", esc_path(path),
			 strerror(errno));
		return -EPERM;
	}
	if (cred.uid != geteuid() && cred.uid != 0) {
		snprintf(errline, sizeof(errline),
			 "%s: served by uid %u (pid %d), not by this user (uid %u) or root: "
			 "not reading it",
			 esc_path(path), (unsigned int) cred.uid, (int) cred.pid,
			 (unsigned int) geteuid());
		return -EPERM;
	}
	return 0;
}

/*
 * A connected socket to the stats endpoint at `path` in *ret_fd. On a Unix
 * socket EAGAIN is not "in progress": the server's backlog is full and
 * nothing connected. A busy VMM catches up: retry until the deadline.
 */
static int connect_stats(const char *path, double deadline, int *ret_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(errline, sizeof(errline), "%s: socket path too long (at most %zu bytes)",
			 path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(errline, sizeof(errline), "socket: %s", strerror(errno));
		return -errno;
	}
	while (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		if (errno == EAGAIN && now_s() < deadline) {
			poll(NULL, 0, 10);
			continue;
		}
		r = -errno;
		snprintf(errline, sizeof(errline),
			 "cannot connect to %s: %s (is a VMM running with "
			 "--stats %s, as this user?)",
			 path, strerror(errno), path);
		close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

/*
 * Everything the server sends until it closes, by the deadline and within
 * REPLY_MAX. The buffer has a byte to spare for the terminating NUL.
 */
static int read_reply(int fd, const char *path, double deadline, char **ret_buf, size_t *ret_len)
{
	size_t cap = 0, len = 0;
	char *buf = NULL;
	int r;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		double left = deadline - now_s();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int) (left * 1000) + 1) == 0) {
			r = -ETIMEDOUT;
			snprintf(errline, sizeof(errline),
				 "%s: no snapshot within %u ms: the VMM is not "
				 "serving stats (stuck?)",
				 path, REPLY_MS);
			goto fail;
		}
		if (len + 4096 > cap) {
			char *nb;

			if (cap >= REPLY_MAX) {
				r = -EFBIG;
				snprintf(errline, sizeof(errline),
					 "%s: malformed reply: more than %u bytes", path,
					 REPLY_MAX);
				goto fail;
			}
			cap = cap ? cap * 2 : 65536;
			nb = realloc(buf, cap);
			if (!nb) {
				r = -ENOMEM;
				snprintf(errline, sizeof(errline), "out of memory");
				goto fail;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			r = -errno;
			snprintf(errline, sizeof(errline), "%s: read: %s", path, strerror(errno));
			goto fail;
		}
		len += (size_t) n;
	}
	*ret_buf = buf;
	*ret_len = len;
	return 0;
fail:
	free(buf);
	return r;
}

static int check_reply(const char *path, const char *buf, size_t len)
{
	if (!len) {
		snprintf(errline, sizeof(errline),
			 "%s: the server closed without a snapshot (refused: "
			 "another user's VMM?)",
			 path);
		return -EBADMSG;
	}
	/*
	 * vpmu_stats_to_json() writes printable ASCII and escapes the rest:
	 * a raw control byte (NUL included) or non-ASCII byte is not from it.
	 */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char) buf[i];

		if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c >= 0x7f) {
			snprintf(errline, sizeof(errline),
				 "%s: malformed reply: byte 0x%02x at offset %zu (a snapshot is "
				 "printable ASCII)",
				 esc_path(path), c, i);
			return -EBADMSG;
		}
	}
	return 0;
}

/* One snapshot from vm->path into vm->text; errline says why not. */
static int fetch(struct vm *vm)
{
	double deadline = now_s() + REPLY_MS / 1000.0;
	size_t len = 0;
	char *buf = NULL;
	int fd = -1, r;

	r = connect_stats(vm->path, deadline, &fd);
	if (r < 0)
		return r;
	r = check_peer(fd, vm->path);
	if (r < 0)
		goto out;
	r = read_reply(fd, vm->path, deadline, &buf, &len);
	if (r < 0)
		goto out;
	r = check_reply(vm->path, buf, len);
	if (r < 0)
		goto out;
	buf[len] = '\0';
	vm->when = now_s();
	free(vm->text);
	vm->text = buf;
	vm->len = len;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

static bool is_uint(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_NUM && v->integer;
}

static uint64_t num(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_NUM && v->integer ? v->u : 0;
}

static const char *str(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_STR ? v->s : NULL;
}

/* For fields validate() has checked: never NULL. */
static const char *sstr(const struct jv *o, const char *key)
{
	const char *s = str(o, key);

	return s ? s : "?";
}

static const char *const vcpu_fields[] = {
	"index",	  "version",	    "seq",	     "msr_reads",
	"msr_writes",	  "msr_faults",	    "rdpmcs",	     "syncs",
	"backend_ops",	  "backend_reads",  "creates",	     "overflows",
	"pmis_requested", "pmis_delivered", "global_status", "global_ctrl",
	"pebs_records",	  "pebs_bytes",	    "pebs_skipped",  "pebs_deferred",
	"walk_faults",
};
static const char *const counter_fields[] = {
	"slot", "index", "config", "count", "overflows", "creates", "updates",
};

/* Check the document's shape once, so the printers need no error paths. */
static const char *validate(const struct jv *doc)
{
	const struct jv *vcpus = jget(doc, "vcpus");

	if (!doc || doc->type != J_OBJ)
		return "not a JSON object";
	if (num(doc, "version") != 1)
		return "unknown snapshot version (this vpmu-stat reads version 1)";
	if (!vcpus || vcpus->type != J_ARR)
		return "no \"vcpus\" array";
	for (size_t i = 0; i < vcpus->n; i++) {
		const struct jv *v = &vcpus->items[i], *ctrs = jget(v, "counters");

		for (size_t f = 0; f < sizeof(vcpu_fields) / sizeof(vcpu_fields[0]); f++)
			if (!is_uint(v, vcpu_fields[f]))
				return "a vCPU lacks a numeric field";
		if (!str(v, "model") || !str(v, "backend"))
			return "a vCPU lacks its model or backend";
		if (!ctrs || ctrs->type != J_ARR)
			return "a vCPU has no \"counters\" array";
		for (size_t c = 0; c < ctrs->n; c++) {
			const struct jv *ct = &ctrs->items[c], *ev = jget(ct, "event");

			for (size_t f = 0; f < sizeof(counter_fields) / sizeof(counter_fields[0]);
			     f++)
				if (!is_uint(ct, counter_fields[f]))
					return "a counter lacks a numeric field";
			if (!str(ct, "kind") || !str(ct, "state") || !ev ||
			    (ev->type != J_STR && ev->type != J_NULL))
				return "a counter lacks its kind, state or event";
			if (num(ct, "slot") >= VPMU_STATS_COUNTERS)
				return "a counter slot is out of range";
		}
	}
	return NULL;
}

static int load(struct vm *vm)
{
	struct jv doc;
	const char *why;
	int r = fetch(vm);

	if (r < 0)
		return r;
	r = json_parse(vm->text, vm->len, &doc);
	if (r < 0) {
		snprintf(errline, sizeof(errline),
			 "%s: malformed reply: not JSON (is this a vpmu stats "
			 "socket?)",
			 vm->path);
		return r;
	}
	why = validate(&doc);
	if (why) {
		snprintf(errline, sizeof(errline), "%s: malformed reply: %s", vm->path, why);
		jv_free(&doc);
		return -EBADMSG;
	}
	jv_free(&vm->doc);
	vm->doc = doc;
	return 0;
}

/* ---- what a counter counts ----------------------------------------------- */

static const char *counter_event(const struct jv *vcpu, const struct jv *c)
{
	const char *name = str(c, "event");
	const char *model = str(vcpu, "model");
	uint64_t config = num(c, "config"), evtsel;
	struct vpmu_catalog_event ev;
	size_t idx;
	int m;

	if (name || !model || (m = vpmu_model_find(model)) < 0)
		return name;
	/* an older server without names: the catalogue of the libvpmu this tool runs with */
	if (!strcmp(sstr(c, "kind"), "fixed"))
		evtsel = config & 3 ? (num(c, "index") + 1) << 8 : 0;
	else
		evtsel = config & 0xffff ? config : 0;
	if (!evtsel || vpmu_catalog_decode((size_t) m, evtsel, &idx) < 0 ||
	    vpmu_catalog_event((size_t) m, idx, &ev, sizeof(ev)) < 0)
		return NULL;
	return ev.name;
}

static bool counter_shown(const struct jv *c)
{
	const struct jv *flags = jget(c, "flags");

	if (num(c, "count") || num(c, "overflows"))
		return true;
	for (size_t i = 0; flags && flags->type == J_ARR && i < flags->n; i++)
		if (flags->items[i].type == J_STR && !strcmp(flags->items[i].s, "programmed"))
			return true;
	return false;
}

/*
 * libvirt's perf event for what a counter counts: the fixed counters and
 * the architectural events (SDM Vol. 3B 21.2.1.2, Table 21-1) with no
 * CMASK/INV/EDGE, as libvirt's perf events are the kernel's generic ones.
 */
static const char *libvirt_name(const struct jv *c)
{
	static const struct {
		uint16_t code; /* umask << 8 | event */
		const char *name;
	} arch[] = {
		{ 0x003c, VIR_PERF_PARAM_CPU_CYCLES },
		{ 0x00c0, VIR_PERF_PARAM_INSTRUCTIONS },
		{ 0x013c, VIR_PERF_PARAM_REF_CPU_CYCLES },
		{ 0x4f2e, VIR_PERF_PARAM_CACHE_REFERENCES },
		{ 0x412e, VIR_PERF_PARAM_CACHE_MISSES },
		{ 0x00c4, VIR_PERF_PARAM_BRANCH_INSTRUCTIONS },
		{ 0x00c5, VIR_PERF_PARAM_BRANCH_MISSES },
	};
	static const char *const fixed[] = {
		VIR_PERF_PARAM_INSTRUCTIONS,
		VIR_PERF_PARAM_CPU_CYCLES,
		VIR_PERF_PARAM_REF_CPU_CYCLES,
	};
	uint64_t config = num(c, "config");

	if (!counter_shown(c))
		return NULL;
	if (!strcmp(sstr(c, "kind"), "fixed")) {
		uint64_t i = num(c, "index");

		return config & 3 && i < 3 ? fixed[i] : NULL;
	}
	/* EDGE (18), INV (23), CMASK (31:24) change what is counted */
	if (config & (0xff800000ull | (1ull << 18)))
		return NULL;
	for (size_t i = 0; i < sizeof(arch) / sizeof(arch[0]); i++)
		if ((config & 0xffff) == arch[i].code)
			return arch[i].name;
	return NULL;
}

/* ---- printers ------------------------------------------------------------- */

#define FOR_EACH_VCPU(vm, v)                                                                       \
	for (const struct jv *_a = jget(&(vm)->doc, "vcpus"), *v = _a->items;                      \
	     v < _a->items + _a->n; v++)
#define FOR_EACH_COUNTER(vcpu, c)                                                                  \
	for (const struct jv *_c = jget(vcpu, "counters"), *c = _c->items; c < _c->items + _c->n;  \
	     c++)

/* The same counter in the previous snapshot of the same VM, for rates. */
static const struct jv *prev_counter(const struct vm *prev, uint64_t vcpu, uint64_t slot)
{
	if (!prev || prev->doc.type != J_OBJ)
		return NULL;
	FOR_EACH_VCPU(prev, v)
	{
		if (num(v, "index") != vcpu)
			continue;
		FOR_EACH_COUNTER(v, c)
		if (num(c, "slot") == slot)
			return c;
	}
	return NULL;
}

static const struct jv *prev_vcpu(const struct vm *prev, uint64_t vcpu)
{
	if (!prev || prev->doc.type != J_OBJ)
		return NULL;
	FOR_EACH_VCPU(prev, v)
	if (num(v, "index") == vcpu)
		return v;
	return NULL;
}

static double rate(uint64_t now, uint64_t before, double dt)
{
	return now >= before && dt > 0 ? (double) (now - before) / dt : NAN;
}

static void print_table(const struct vm *vm, const struct vm *prev)
{
	double dt = prev ? vm->when - prev->when : 0;
	/* every string from the server escaped (esc): it may hold terminal escapes */
	char e1[160], e2[160];

	printf("VM %s (%s pid %" PRIu64 ")\n", esc(vm->path, e1, sizeof(e1)),
	       esc(str(&vm->doc, "vmm") ? str(&vm->doc, "vmm") : "?", e2, sizeof(e2)),
	       num(&vm->doc, "pid"));
	FOR_EACH_VCPU(vm, v)
	{
		const struct jv *pv = prev_vcpu(prev, num(v, "index"));
		unsigned int hidden = 0;

		printf("  vCPU %" PRIu64 ": model %s, backend %s, snapshot %" PRIu64 "\n",
		       num(v, "index"), esc(sstr(v, "model"), e1, sizeof(e1)),
		       esc(sstr(v, "backend"), e2, sizeof(e2)), num(v, "seq"));
		printf("    MSR accesses: %" PRIu64 " reads, %" PRIu64 " writes, %" PRIu64
		       " #GP; %" PRIu64 " RDPMC\n",
		       num(v, "msr_reads"), num(v, "msr_writes"), num(v, "msr_faults"),
		       num(v, "rdpmcs"));
		printf("    syncs %" PRIu64 "; backend: %" PRIu64 " ops, %" PRIu64
		       " reads, %" PRIu64 " creates\n",
		       num(v, "syncs"), num(v, "backend_ops"), num(v, "backend_reads"),
		       num(v, "creates"));
		printf("    overflows %" PRIu64 "; PMIs: %" PRIu64 " requested, %" PRIu64
		       " delivered",
		       num(v, "overflows"), num(v, "pmis_requested"), num(v, "pmis_delivered"));
		if (pv)
			printf(" (%.1f/s)",
			       rate(num(v, "pmis_delivered"), num(pv, "pmis_delivered"), dt));
		printf(", %" PRIu64 " merged", num(v, "pmis_merged"));
		printf("\n    PEBS records: %" PRIu64 " written (%" PRIu64 " bytes), %" PRIu64
		       " skipped, %" PRIu64 " deferred; DS walk faults %" PRIu64 "\n",
		       num(v, "pebs_records"), num(v, "pebs_bytes"), num(v, "pebs_skipped"),
		       num(v, "pebs_deferred"), num(v, "walk_faults"));
		printf("    %-8s %-34s %-12s %-16s %20s %10s %8s %8s%s\n", "COUNTER", "GUEST EVENT",
		       "ENCODING", "HOST BACKING", "COUNT", "OVERFLOWS", "CREATES", "UPDATES",
		       prev ? "         RATE/s" : "");
		FOR_EACH_COUNTER(v, c)
		{
			const struct jv *pc = prev_counter(prev, num(v, "index"), num(c, "slot"));
			const char *ev = counter_event(v, c);
			char name[48], enc[24], backing[96], e3[160];

			if (!counter_shown(c)) {
				hidden++;
				continue;
			}
			snprintf(name, sizeof(name), "%.40s%" PRIu64, esc(sstr(c, "kind"), e1, 40),
				 num(c, "index"));
			snprintf(enc, sizeof(enc), "%#" PRIx64, num(c, "config"));
			snprintf(backing, sizeof(backing), "%.47s/%.47s",
				 esc(sstr(v, "backend"), e1, 47), esc(sstr(c, "state"), e2, 47));
			printf("    %-8s %-34s %-12s %-16s %20" PRIu64 " %10" PRIu64 " %8" PRIu64
			       " %8" PRIu64,
			       name, ev ? esc(ev, e3, sizeof(e3)) : "(unknown event)", enc, backing,
			       num(c, "count"), num(c, "overflows"), num(c, "creates"),
			       num(c, "updates"));
			if (pc)
				printf(" %15.1f", rate(num(c, "count"), num(pc, "count"), dt));
			else if (prev)
				printf(" %15s", "-");
			if (num(c, "error"))
				printf("  (unbacked: error %" PRIu64 ")", num(c, "error"));
			printf("\n");
		}
		if (hidden)
			printf("    (%u idle counters not shown)\n", hidden);
	}
}

/*
 * A Prometheus label value: backslash, double quote and newline escaped as
 * the format says; any other byte outside printable ASCII (a server's
 * terminal escape) written as the text \xHH, its backslash escaped.
 */
static void label(const char *name, const char *value, bool comma)
{
	printf("%s=\"", name);
	for (const char *p = value; *p; p++) {
		unsigned char c = (unsigned char) *p;

		if (c == '\\' || c == '"')
			printf("\\%c", c);
		else if (c == '\n')
			printf("\\n");
		else if (c < 0x20 || c >= 0x7f)
			printf("\\\\x%02x", c);
		else
			putchar(c);
	}
	printf("\"%s", comma ? "," : "");
}

static void prom_family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void print_prometheus(const struct vm *vms, size_t nr)
{
	static const struct {
		const char *metric, *field, *help;
	} vcpu_metrics[] = {
		{ "vpmu_msr_reads_total", "msr_reads", "Guest RDMSRs of PMU MSRs." },
		{ "vpmu_msr_writes_total", "msr_writes", "Guest WRMSRs of PMU MSRs." },
		{ "vpmu_msr_faults_total", "msr_faults", "PMU MSR accesses answered with #GP." },
		{ "vpmu_rdpmc_total", "rdpmcs", "Guest RDPMC instructions." },
		{ "vpmu_syncs_total", "syncs", "vPMU syncs (batches applied before guest entry)." },
		{ "vpmu_backend_ops_total", "backend_ops", "Host backend update operations." },
		{ "vpmu_backend_reads_total", "backend_reads",
		  "Host backend reads to fold a count." },
		{ "vpmu_backend_creates_total", "creates", "Host events created or recreated." },
		{ "vpmu_overflows_total", "overflows", "Guest counter overflows." },
		{ "vpmu_pmis_requested_total", "pmis_requested",
		  "PMIs the vPMU asked the VMM for." },
		{ "vpmu_pmis_delivered_total", "pmis_delivered",
		  "PMIs the VMM delivered to the guest." },
		{ "vpmu_pmis_merged_total", "pmis_merged",
		  "PMIs merged into an interrupt still pending in the guest's APIC." },
		{ "vpmu_pebs_records_total", "pebs_records",
		  "PEBS records written into the guest." },
		{ "vpmu_pebs_bytes_total", "pebs_bytes", "Bytes of PEBS records written." },
		{ "vpmu_pebs_skipped_total", "pebs_skipped",
		  "PEBS records skipped (bounds, faults)." },
		{ "vpmu_pebs_deferred_total", "pebs_deferred",
		  "PEBS records that waited for registers." },
		{ "vpmu_walk_faults_total", "walk_faults",
		  "Failed guest page walks to the DS area." },
	};
	static const struct {
		const char *metric, *field, *type, *help;
	} counter_metrics[] = {
		{ "vpmu_counter_events_total", "count", "counter",
		  "Guest counter value (events counted)." },
		{ "vpmu_counter_overflows_total", "overflows", "counter",
		  "Overflows of this guest counter." },
		{ "vpmu_counter_creates_total", "creates", "counter",
		  "Host events (re)created for it." },
		{ "vpmu_counter_updates_total", "updates", "counter", "Backend operations on it." },
		{ "vpmu_counter_backed", NULL, "gauge",
		  "1 if a host counter backs it, 0 otherwise." },
	};
	char buf[32];

	prom_family("vpmu_vcpu_info", "gauge", "The guest CPU model and host backend of a vCPU.");
	for (size_t i = 0; i < nr; i++)
		FOR_EACH_VCPU(&vms[i], v)
		{
			snprintf(buf, sizeof(buf), "%" PRIu64, num(v, "index"));
			printf("vpmu_vcpu_info{");
			label("vm", vms[i].path, true);
			label("vcpu", buf, true);
			label("model", sstr(v, "model"), true);
			label("backend", sstr(v, "backend"), false);
			printf("} 1\n");
		}
	for (size_t m = 0; m < sizeof(vcpu_metrics) / sizeof(vcpu_metrics[0]); m++) {
		prom_family(vcpu_metrics[m].metric, "counter", vcpu_metrics[m].help);
		for (size_t i = 0; i < nr; i++)
			FOR_EACH_VCPU(&vms[i], v)
			{
				snprintf(buf, sizeof(buf), "%" PRIu64, num(v, "index"));
				printf("%s{", vcpu_metrics[m].metric);
				label("vm", vms[i].path, true);
				label("vcpu", buf, false);
				printf("} %" PRIu64 "\n", num(v, vcpu_metrics[m].field));
			}
	}
	for (size_t m = 0; m < sizeof(counter_metrics) / sizeof(counter_metrics[0]); m++) {
		prom_family(counter_metrics[m].metric, counter_metrics[m].type,
			    counter_metrics[m].help);
		for (size_t i = 0; i < nr; i++)
			FOR_EACH_VCPU(&vms[i], v)
		FOR_EACH_COUNTER(v, c)
		{
			const char *ev = counter_event(v, c);
			char name[16], enc[24];
			uint64_t value;

			if (!counter_shown(c))
				continue;
			snprintf(buf, sizeof(buf), "%" PRIu64, num(v, "index"));
			snprintf(name, sizeof(name), "%s%" PRIu64, sstr(c, "kind"),
				 num(c, "index"));
			snprintf(enc, sizeof(enc), "%#" PRIx64, num(c, "config"));
			value = counter_metrics[m].field ? num(c, counter_metrics[m].field)
							 : !strcmp(sstr(c, "state"), "backed");
			printf("%s{", counter_metrics[m].metric);
			label("vm", vms[i].path, true);
			label("vcpu", buf, true);
			label("counter", name, true);
			label("event", ev ? ev : enc, false);
			printf("} %" PRIu64 "\n", value);
		}
	}
}

static void print_libvirt(const struct vm *vm)
{
	static const char *const order[] = {
		VIR_PERF_PARAM_CPU_CYCLES,     VIR_PERF_PARAM_INSTRUCTIONS,
		VIR_PERF_PARAM_REF_CPU_CYCLES, VIR_PERF_PARAM_CACHE_REFERENCES,
		VIR_PERF_PARAM_CACHE_MISSES,   VIR_PERF_PARAM_BRANCH_INSTRUCTIONS,
		VIR_PERF_PARAM_BRANCH_MISSES,
	};
	uint64_t sum[sizeof(order) / sizeof(order[0])] = { 0 };
	bool seen[sizeof(order) / sizeof(order[0])] = { false };

	FOR_EACH_VCPU(vm, v)
	{
		/* one counter per event and vCPU: a second one counts the same events again */
		bool here[sizeof(order) / sizeof(order[0])] = { false };

		/* fixed counters first: they are the ones perf itself would use */
		for (int fixed = 1; fixed >= 0; fixed--)
			FOR_EACH_COUNTER(v, c)
			{
				const char *name = libvirt_name(c);

				if ((strcmp(sstr(c, "kind"), "fixed") == 0) != fixed)
					continue;
				for (size_t i = 0; name && i < sizeof(order) / sizeof(order[0]);
				     i++) {
					if (strcmp(name, order[i]) || here[i])
						continue;
					here[i] = seen[i] = true;
					sum[i] += num(c, "count");
				}
			}
	}
	printf("Domain: '%s'\n", vm->path);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (seen[i])
			printf("  perf.%s=%" PRIu64 "\n", order[i], sum[i]);
}

static void print_json(const struct vm *vms, size_t nr)
{
	printf("[");
	for (size_t i = 0; i < nr; i++) {
		size_t len = vms[i].len;

		while (len && (vms[i].text[len - 1] == '\n' || vms[i].text[len - 1] == ' '))
			len--;
		printf("%s%.*s", i ? ",\n" : "", (int) len, vms[i].text);
	}
	printf("]\n");
}

/* ---- main ---------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vpmu-stat [OPTIONS] PATH...\n"
		"Print the virtual PMU statistics a VMM serves on the Unix socket PATH\n"
		"(vpmu-vmm --stats PATH): per VM, vCPU and counter, the guest event (catalogue\n"
		"name and raw encoding), its host backing, count, overflows, PMIs, PEBS records,\n"
		"syncs, backend operations and MSR accesses.\n\n"
		"  --json              a JSON array of the VMs' snapshot documents\n"
		"  --prometheus        Prometheus text exposition format 0.0.4\n"
		"  --libvirt           perf.<event>=N lines (libvirt's names), summed over vCPUs\n"
		"  --watch SECONDS     repeat every SECONDS; the table shows per-second rates\n"
		"  --count N           with --watch: stop after N reads (default: until "
		"interrupted)\n"
		"  -h, --help          this text\n\n"
		"Exit status: 0, or 1 with one line on stderr (bad option, unreachable socket,\n"
		"malformed reply).\n");
}

enum format { FMT_TABLE, FMT_JSON, FMT_PROMETHEUS, FMT_LIBVIRT };

struct options {
	enum format fmt;
	double interval;	  /* --watch; 0 without */
	unsigned long long count; /* --count; 0 without */
	bool help;		  /* --help: the usage is printed, nothing else to do */
	int first_path;		  /* argv index of the first PATH */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static int parse_interval(const char *arg, double *ret)
{
	double interval;
	char *end;

	errno = 0;
	interval = strtod(arg, &end);
	if (errno || end == arg || *end || !(interval > 0) || interval > 86400) {
		fprintf(stderr,
			"vpmu-stat: --watch %s: not a number of seconds between 0 and 86400\n",
			arg);
		return -EINVAL;
	}
	*ret = interval;
	return 0;
}

static int parse_count(const char *arg, unsigned long long *ret)
{
	unsigned long long count;
	char *end;

	errno = 0;
	count = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || !count || arg[0] == '-') {
		fprintf(stderr, "vpmu-stat: --count %s: not a positive number\n", arg);
		return -EINVAL;
	}
	*ret = count;
	return 0;
}

/* The command line into *ret; -EINVAL after the one error line. */
static int parse_options(int argc, char **argv, struct options *ret)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "libvirt", no_argument, NULL, 'l' },
		{ "watch", required_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct options o = { .fmt = FMT_TABLE };
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.fmt = FMT_JSON;
			break;
		case 'p':
			o.fmt = FMT_PROMETHEUS;
			break;
		case 'l':
			o.fmt = FMT_LIBVIRT;
			break;
		case 'w':
			if (parse_interval(optarg, &o.interval) < 0)
				return -EINVAL;
			break;
		case 'c':
			if (parse_count(optarg, &o.count) < 0)
				return -EINVAL;
			break;
		case 'h':
			usage(stdout);
			o.help = true;
			*ret = o;
			return 0;
		default:
			if (optopt)
				fprintf(stderr, "vpmu-stat: option -%c %s (see vpmu-stat --help)\n",
					optopt,
					strchr("wc", optopt) ? "needs an argument" : "is unknown");
			else
				fprintf(stderr,
					"vpmu-stat: option %s is unknown or needs an argument (see "
					"vpmu-stat --help)\n",
					argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "vpmu-stat: no socket PATH given (see vpmu-stat --help)\n");
		return -EINVAL;
	}
	if (o.count && !o.interval) {
		fprintf(stderr, "vpmu-stat: --count needs --watch SECONDS\n");
		return -EINVAL;
	}
	o.first_path = optind;
	*ret = o;
	return 0;
}

/* A snapshot of every VM; the first that fails is one line on stderr. */
static int load_all(struct vm *vms, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		int r = load(&vms[i]);

		if (r < 0) {
			fprintf(stderr, "vpmu-stat: %s\n", errline);
			return r;
		}
	}
	return 0;
}

/* One read of every VM in the chosen format; prev is the last round's, or NULL. */
static void print_round(const struct options *o, const struct vm *vms, const struct vm *prev,
			size_t nr, unsigned long long round)
{
	if (o->interval && o->fmt == FMT_TABLE)
		printf("--- %s", round ? "" : "(rates from the next read on)");
	if (o->interval && o->fmt == FMT_TABLE)
		printf("\n");
	for (size_t i = 0; i < nr; i++) {
		if (o->fmt == FMT_TABLE)
			print_table(&vms[i], prev ? &prev[i] : NULL);
		else if (o->fmt == FMT_LIBVIRT)
			print_libvirt(&vms[i]);
	}
	if (o->fmt == FMT_JSON)
		print_json(vms, nr);
	else if (o->fmt == FMT_PROMETHEUS)
		print_prometheus(vms, nr);
}

static void sleep_interval(double interval)
{
	struct timespec ts = { .tv_sec = (time_t) interval,
			       .tv_nsec = (long) ((interval - (double) (time_t) interval) * 1e9) };

	while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void free_vms(struct vm *vms, size_t nr)
{
	if (!vms)
		return;
	for (size_t i = 0; i < nr; i++) {
		jv_free(&vms[i].doc);
		free(vms[i].text);
	}
	free(vms);
}

int main(int argc, char **argv)
{
	struct options o;
	struct vm *vms, *prev;
	size_t nr;
	int status = 0;

	if (parse_options(argc, argv, &o) < 0)
		return 1;
	if (o.help)
		return 0;
	nr = (size_t) (argc - o.first_path);
	vms = calloc(nr, sizeof(*vms));
	prev = calloc(nr, sizeof(*prev));
	if (!vms || !prev) {
		fprintf(stderr, "vpmu-stat: out of memory\n");
		free(vms);
		free(prev);
		return 1;
	}
	for (size_t i = 0; i < nr; i++)
		vms[i].path = prev[i].path = argv[o.first_path + i];
	if (o.interval) {
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
	}

	for (unsigned long long round = 0; !stop; round++) {
		if (load_all(vms, nr) < 0) {
			status = 1;
			break;
		}
		print_round(&o, vms, round ? prev : NULL, nr, round);
		fflush(stdout);
		if (!o.interval || (o.count && round + 1 >= o.count))
			break;
		for (size_t i = 0; i < nr; i++) {
			/* keep this read for the next round's rates */
			struct vm t = prev[i];

			prev[i] = vms[i];
			vms[i] = t;
		}
		sleep_interval(o.interval);
	}
	free_vms(vms, nr);
	free_vms(prev, nr);
	return status;
}
