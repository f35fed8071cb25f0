/* SPDX-License-Identifier: MIT */
/*
 * Snapshot and restore of one vCPU's PMU: everything the guest can
 * observe, as a blob that names what it holds (the format is in
 * vpmu/vpmu.h, "Snapshot and restore"). Little-endian whatever the host,
 * byte by byte. A restore checks the whole blob into a scratch copy of
 * the vCPU first and changes the vCPU only when all of it is good.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "filter.h"
#include "pmu.h"
#include "vpmu/msr.h"

#define SNAP_MAGIC	 "VPMUSNAP"
#define SNAP_HEADER_SIZE 64
#define SNAP_MAX_SIZE	 (1u << 20) /* far above any model's */

/* Header fields */
#define H_MAGIC	     0x00
#define H_FORMAT     0x08
#define H_HEADER_LEN 0x0c
#define H_TOTAL	     0x10
#define H_CRC	     0x18
#define H_RECORDS    0x1c
#define H_MODEL	     0x20
#define H_MODEL_LEN  32

/* Records: u16 tag, u16 flags, u32 payload length, payload padded to 8 bytes */
#define REC_HEADER   8
#define REC_OPTIONAL 0x0001 /* a reader that does not know the tag skips it */

enum snap_tag {
	TAG_IDENTITY = 1, /* the guest-visible PMU the vCPU was created with */
	TAG_MSRS = 2,	  /* every MSR of vpmu_msr_list(): address, value */
	TAG_PENDING = 3,  /* overflows whose PEBS record or PMI is still to come */
	TAG_FILTER = 4,	  /* the event filter's identity */
	TAG_BACKEND = 5,  /* the backend's own phase (optional) */
};

#define IDENTITY_LEN 64
#define MSR_ENTRY    16
#define PENDING_LEN  40
#define FILTER_LEN   8
#define BACKEND_LEN  24
#define BACKEND_NAME 16

/* ---- byte order ---------------------------------------------------------- */

static void put_le(uint8_t *p, uint64_t v, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < n; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

/* CRC-32 (IEEE 802.3, reflected 0xEDB88320), bit by bit: a blob is a few KiB. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (unsigned int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return crc;
}

/* The blob's checksum: CRC-32 of every byte, the CRC field read as 0. */
static uint32_t blob_crc(const uint8_t *p, size_t n)
{
	static const uint8_t zero[4];
	uint32_t crc = 0xffffffffu;

	crc = crc32_update(crc, p, H_CRC);
	crc = crc32_update(crc, zero, sizeof(zero));
	crc = crc32_update(crc, p + H_CRC + 4, n - H_CRC - 4);
	return ~crc;
}

/* ---- writing ------------------------------------------------------------- */

/* A writer that only counts once the buffer is full (the size query). */
struct wbuf {
	uint8_t *p;
	size_t cap, len;
	unsigned int records;
	bool nomem;
};

static uint8_t *wreserve(struct wbuf *w, size_t n)
{
	uint8_t *at = w->p && w->len + n <= w->cap ? w->p + w->len : NULL;

	if (at)
		memset(at, 0, n);
	w->len += n;
	return at;
}

/* Start a record of `len` payload bytes; NULL while only counting. */
static uint8_t *wrecord(struct wbuf *w, enum snap_tag tag, unsigned int flags, size_t len)
{
	uint8_t *h = wreserve(w, REC_HEADER + ((len + 7) & ~(size_t) 7));

	w->records++;
	if (!h)
		return NULL;
	put_le(h, tag, 2);
	put_le(h + 2, flags, 2);
	put_le(h + 4, len, 4);
	return h + REC_HEADER;
}

static void save_identity(const struct vpmu_vcpu *vcpu, struct wbuf *w)
{
	const struct vpmu_model *m = &vcpu->model;
	uint8_t *p = wrecord(w, TAG_IDENTITY, 0, IDENTITY_LEN);
	const uint8_t bytes[] = { m->version,	m->nr_gp,	m->nr_fixed,
				  m->gp_width,	m->fixed_width, m->arch_events_len,
				  m->lbr_depth, m->linear_bits, m->phys_bits };

	if (!p)
		return;
	memcpy(p, bytes, sizeof(bytes));
	put_le(p + 12, m->features, 4);
	put_le(p + 16, m->perf_capabilities, 8);
	put_le(p + 24, m->pdist_counters, 8);
	put_le(p + 32, m->offcore_rsp_valid, 8);
	put_le(p + 40, m->frontend_valid, 8);
	put_le(p + 48, m->tsc_crystal_hz, 4);
	put_le(p + 52, m->tsc_ratio_num, 4);
	put_le(p + 56, m->tsc_ratio_den, 4);
}

static void save_msrs(struct vpmu_vcpu *vcpu, struct wbuf *w)
{
	size_t n = vpmu_msr_list(vcpu, NULL, 0);
	uint32_t *msrs = calloc(n ? n : 1, sizeof(*msrs));
	uint8_t *p = wrecord(w, TAG_MSRS, 0, 8 + n * MSR_ENTRY);

	if (!msrs) {
		w->nomem = true;
		return;
	}
	vpmu_msr_list(vcpu, msrs, n);
	if (p) {
		put_le(p, n, 4);
		for (size_t i = 0; i < n; i++) {
			uint64_t v = 0;

			/* as RDMSR: what the host counted folded in, a wrap only queued */
			msr_get(vcpu, msrs[i], &v);
			put_le(p + 8 + i * MSR_ENTRY, msrs[i], 4);
			put_le(p + 8 + i * MSR_ENTRY + 8, v, 8);
		}
	}
	free(msrs);
}

static void save_pending(const struct vpmu_vcpu *vcpu, struct wbuf *w)
{
	uint8_t *p = wrecord(w, TAG_PENDING, 0, PENDING_LEN);

	if (!p)
		return;
	put_le(p, vcpu->pebs_pending, 8);
	put_le(p + 8, vcpu->last_ip, 8);
	put_le(p + 16, vcpu->last_dla, 8);
	put_le(p + 24, vcpu->last_latency, 8);
	p[32] = vcpu->pmi_due;
	/* asked for and not delivered, or to be asked again after a restore */
	p[33] = vcpu->pmi_outstanding || vcpu->pmi_restore;
}

static void save_backend(const struct vpmu_vcpu *vcpu, struct wbuf *w)
{
	uint8_t *p;

	if (!vcpu->backend->phase)
		return;
	p = wrecord(w, TAG_BACKEND, REC_OPTIONAL, BACKEND_LEN);
	if (!p)
		return;
	strncpy((char *) p, vcpu->backend->name, BACKEND_NAME);
	put_le(p + BACKEND_NAME, vcpu->backend->phase(vcpu->backend_state), 8);
}

int vpmu_vcpu_save(struct vpmu_vcpu *vcpu, void *buf, size_t size, size_t *ret_len)
{
	struct wbuf w = { .p = buf, .cap = size };
	uint8_t *h, *p;

	if (!vcpu || !ret_len || (!buf && size))
		return -EINVAL;
	h = wreserve(&w, SNAP_HEADER_SIZE);
	save_identity(vcpu, &w);
	save_msrs(vcpu, &w);
	save_pending(vcpu, &w);
	p = wrecord(&w, TAG_FILTER, 0, FILTER_LEN);
	if (p)
		put_le(p, filter_digest(vcpu->filter), 8);
	save_backend(vcpu, &w);
	if (w.nomem)
		return -ENOMEM;
	if (!buf) {
		*ret_len = w.len;
		return 0;
	}
	if (w.len > size)
		return -ENOSPC;
	memcpy(h + H_MAGIC, SNAP_MAGIC, 8);
	put_le(h + H_FORMAT, VPMU_SNAPSHOT_FORMAT, 4);
	put_le(h + H_HEADER_LEN, SNAP_HEADER_SIZE, 4);
	put_le(h + H_TOTAL, w.len, 8);
	put_le(h + H_RECORDS, w.records, 4);
	strncpy((char *) h + H_MODEL, vcpu->model.name, H_MODEL_LEN - 1);
	put_le(h + H_CRC, blob_crc(buf, w.len), 4);
	*ret_len = w.len;
	return 0;
}

/* ---- reading ------------------------------------------------------------- */

struct rec {
	unsigned int tag, flags;
	const uint8_t *p;
	size_t len;
};

/* What a restore reports: one log line, the errno. */
VPMU_PRINTF(3, 4)
static int refuse(const struct vpmu_vcpu *vcpu, int err, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	vpmu_logf(vcpu, VPMU_LOG_ERR, "snapshot refused: %s", msg);
	return err;
}

/* The header: magic, format, size, checksum, model. */
static int check_header(const struct vpmu_vcpu *vcpu, const uint8_t *b, size_t len)
{
	char model[H_MODEL_LEN + 1];
	uint64_t format, total;

	if (len < SNAP_HEADER_SIZE || memcmp(b + H_MAGIC, SNAP_MAGIC, 8))
		return refuse(vcpu, -EBADMSG, "not a vpmu snapshot (no VPMUSNAP header)");
	format = get_le(b + H_FORMAT, 4);
	if (format > VPMU_SNAPSHOT_FORMAT)
		return refuse(vcpu, -EPROTONOSUPPORT,
			      "format %llu is newer than this libvpmu reads (%d): restore it with "
			      "a newer libvpmu",
			      (unsigned long long) format, VPMU_SNAPSHOT_FORMAT);
	total = get_le(b + H_TOTAL, 8);
	if (format < 1 || get_le(b + H_HEADER_LEN, 4) != SNAP_HEADER_SIZE || total != len ||
	    total > SNAP_MAX_SIZE)
		return refuse(vcpu, -EBADMSG, "damaged: header says %llu bytes, %zu given",
			      (unsigned long long) total, len);
	if (get_le(b + H_CRC, 4) != blob_crc(b, len))
		return refuse(vcpu, -EBADMSG, "damaged: checksum mismatch");
	memcpy(model, b + H_MODEL, H_MODEL_LEN);
	model[H_MODEL_LEN] = '\0';
	/* the name goes into a log line: nothing but printable ASCII from a blob */
	for (char *c = model; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	if (strcmp(model, vcpu->model.name))
		return refuse(vcpu, -EXDEV, "a %.32s snapshot, this vCPU is %s", model,
			      vcpu->model.name);
	return 0;
}

/* The record at `*off`, and `*off` moved past it; -EBADMSG if it does not fit. */
static int next_record(const uint8_t *b, size_t len, size_t *off, struct rec *r)
{
	size_t padded;

	if (len - *off < REC_HEADER)
		return -EBADMSG;
	r->tag = (unsigned int) get_le(b + *off, 2);
	r->flags = (unsigned int) get_le(b + *off + 2, 2);
	r->len = (size_t) get_le(b + *off + 4, 4);
	padded = (r->len + 7) & ~(size_t) 7;
	if (r->len > len - *off - REC_HEADER || padded > len - *off - REC_HEADER)
		return -EBADMSG;
	r->p = b + *off + REC_HEADER;
	*off += REC_HEADER + padded;
	return 0;
}

static int check_identity(const struct vpmu_vcpu *vcpu, const struct rec *r)
{
	const struct vpmu_model *m = &vcpu->model;
	const struct {
		const char *what;
		uint64_t saved, here;
	} f[] = {
		{ "perfmon version", r->p[0], m->version },
		{ "GP counters", r->p[1], m->nr_gp },
		{ "fixed counters", r->p[2], m->nr_fixed },
		{ "GP counter width", r->p[3], m->gp_width },
		{ "fixed counter width", r->p[4], m->fixed_width },
		{ "architectural events", r->p[5], m->arch_events_len },
		{ "LBR depth", r->p[6], m->lbr_depth },
		{ "linear-address width", r->p[7], m->linear_bits },
		{ "physical-address width", r->p[8], m->phys_bits },
		{ "features", get_le(r->p + 12, 4), m->features },
		{ "IA32_PERF_CAPABILITIES", get_le(r->p + 16, 8), m->perf_capabilities },
		{ "PDist counters", get_le(r->p + 24, 8), m->pdist_counters },
		{ "OFFCORE_RSP bits", get_le(r->p + 32, 8), m->offcore_rsp_valid },
		{ "PEBS_FRONTEND bits", get_le(r->p + 40, 8), m->frontend_valid },
		{ "crystal clock", get_le(r->p + 48, 4), m->tsc_crystal_hz },
		{ "TSC ratio numerator", get_le(r->p + 52, 4), m->tsc_ratio_num },
		{ "TSC ratio denominator", get_le(r->p + 56, 4), m->tsc_ratio_den },
	};

	if (r->len != IDENTITY_LEN)
		return refuse(vcpu, -EBADMSG, "damaged: identity record of %zu bytes", r->len);
	for (size_t i = 0; i < ARRAY_SIZE(f); i++)
		if (f[i].saved != f[i].here)
			return refuse(vcpu, -EXDEV,
				      "the snapshot's %s PMU has %s %#llx, this vCPU's %#llx: "
				      "create it with the same narrowing",
				      m->name, f[i].what, (unsigned long long) f[i].saved,
				      (unsigned long long) f[i].here);
	return 0;
}

/* Every MSR of this vCPU, once each, with a value it can hold. */
static int restore_msrs(const struct vpmu_vcpu *vcpu, struct vpmu_vcpu *tmp, const struct rec *r)
{
	size_t n = r->len >= 8 ? (size_t) get_le(r->p, 4) : 0;
	uint64_t inuse = 0, got;
	int err;

	if (r->len < 8 || r->len != 8 + n * MSR_ENTRY)
		return refuse(vcpu, -EBADMSG, "damaged: MSR record of %zu bytes", r->len);
	if (n != vpmu_msr_list(vcpu, NULL, 0))
		return refuse(vcpu, -EBADMSG, "damaged: %zu MSRs, this vCPU has %zu", n,
			      vpmu_msr_list(vcpu, NULL, 0));
	for (size_t i = 0; i < n; i++) {
		uint32_t msr = (uint32_t) get_le(r->p + 8 + i * MSR_ENTRY, 4);
		uint64_t v = get_le(r->p + 8 + i * MSR_ENTRY + 8, 8);
		uint32_t prev = i ? (uint32_t) get_le(r->p + 8 + (i - 1) * MSR_ENTRY, 4) : 0;

		if ((i && msr <= prev) || get_le(r->p + 8 + i * MSR_ENTRY + 4, 4))
			return refuse(vcpu, -EBADMSG, "damaged: MSR %#x out of order", msr);
		err = msr_restore(tmp, msr, v);
		if (err == -ENOENT || err == -ENXIO)
			return refuse(vcpu, -EBADMSG, "damaged: MSR %#x is not one this vCPU has",
				      msr);
		if (err < 0)
			return refuse(vcpu, -EBADMSG, "damaged: MSR %#x = %#llx, which %s refuses",
				      msr, (unsigned long long) v, vcpu->model.name);
		if (msr == MSR_CORE_PERF_GLOBAL_INUSE)
			inuse = v;
	}
	/* derived from the event selects: what they say now */
	if (msr_get(tmp, MSR_CORE_PERF_GLOBAL_INUSE, &got) == 0 && got != inuse)
		return refuse(vcpu, -EBADMSG,
			      "damaged: GLOBAL_INUSE %#llx, the event selects say %#llx",
			      (unsigned long long) inuse, (unsigned long long) got);
	return 0;
}

static int restore_pending(const struct vpmu_vcpu *vcpu, struct vpmu_vcpu *tmp, const struct rec *r)
{
	uint64_t ctrs = vcpu->mask.gp | vcpu->mask.fixed << 32;

	if (r->len != PENDING_LEN || r->p[32] > 1 || r->p[33] > 1 || get_le(r->p + 34, 6))
		return refuse(vcpu, -EBADMSG, "damaged: pending record");
	tmp->pebs_pending = get_le(r->p, 8);
	if (tmp->pebs_pending & ~ctrs)
		return refuse(vcpu, -EBADMSG, "damaged: PEBS pending on counters %#llx",
			      (unsigned long long) (tmp->pebs_pending & ~ctrs));
	tmp->last_ip = get_le(r->p + 8, 8);
	tmp->last_dla = get_le(r->p + 16, 8);
	tmp->last_latency = get_le(r->p + 24, 8);
	tmp->pmi_due = r->p[32];
	tmp->pmi_restore = r->p[33];
	return 0;
}

static int restore_record(const struct vpmu_vcpu *vcpu, struct vpmu_vcpu *tmp, const struct rec *r,
			  uint64_t *ret_phase, bool *ret_has_phase)
{
	switch (r->tag) {
	case TAG_IDENTITY:
		return 0; /* checked first */
	case TAG_MSRS:
		return restore_msrs(vcpu, tmp, r);
	case TAG_PENDING:
		return restore_pending(vcpu, tmp, r);
	case TAG_FILTER:
		if (r->len != FILTER_LEN)
			return refuse(vcpu, -EBADMSG, "damaged: filter record");
		if (get_le(r->p, 8) != filter_digest(vcpu->filter))
			return refuse(vcpu, -EXDEV,
				      "taken under %s PMU event filter than this vCPU's: give it "
				      "the same filter",
				      get_le(r->p, 8) ? "another"
						      : "the default policy, not the same");
		return 0;
	case TAG_BACKEND:
		if (r->len != BACKEND_LEN || r->p[BACKEND_NAME - 1])
			return refuse(vcpu, -EBADMSG, "damaged: backend record");
		/* the phase means something to the same backend only */
		if (vcpu->backend->set_phase && !strcmp((const char *) r->p, vcpu->backend->name)) {
			*ret_phase = get_le(r->p + BACKEND_NAME, 8);
			*ret_has_phase = true;
		}
		return 0;
	}
	if (r->flags & REC_OPTIONAL)
		return 0;
	return refuse(vcpu, -EBADMSG, "damaged: unknown record %u", r->tag);
}

/* The guest's state from the checked scratch copy; the host counters are made again. */
static void commit(struct vpmu_vcpu *vcpu, const struct vpmu_vcpu *tmp)
{
	for (unsigned int i = 0; i < VPMU_MAX_GP; i++) {
		vcpu->gp[i].evtsel = tmp->gp[i].evtsel;
		vcpu->gp[i].value = tmp->gp[i].value;
		vcpu->gp[i].cfg_c = tmp->gp[i].cfg_c;
	}
	for (unsigned int i = 0; i < VPMU_MAX_FIXED; i++) {
		vcpu->fixed[i].value = tmp->fixed[i].value;
		vcpu->fixed[i].cfg_c = tmp->fixed[i].cfg_c;
	}
	vcpu->fixed_ctrl = tmp->fixed_ctrl;
	vcpu->global_ctrl = tmp->global_ctrl;
	vcpu->global_status = tmp->global_status;
	vcpu->perf_metrics = tmp->perf_metrics;
	vcpu->debugctl = tmp->debugctl;
	vcpu->pebs_enable = tmp->pebs_enable;
	vcpu->data_cfg = tmp->data_cfg;
	vcpu->ld_lat = tmp->ld_lat;
	vcpu->frontend = tmp->frontend;
	memcpy(vcpu->offcore_rsp, tmp->offcore_rsp, sizeof(vcpu->offcore_rsp));
	vcpu->ds_area = tmp->ds_area;
	vcpu->pebs_base = tmp->pebs_base;
	vcpu->pebs_index = tmp->pebs_index;
	vcpu->lbr_select = tmp->lbr_select;
	vcpu->lbr_tos = tmp->lbr_tos;
	memcpy(vcpu->lbr_from, tmp->lbr_from, sizeof(vcpu->lbr_from));
	memcpy(vcpu->lbr_to, tmp->lbr_to, sizeof(vcpu->lbr_to));
	memcpy(vcpu->lbr_info, tmp->lbr_info, sizeof(vcpu->lbr_info));
	vcpu->pebs_pending = tmp->pebs_pending;
	vcpu->last_ip = tmp->last_ip;
	vcpu->last_dla = tmp->last_dla;
	vcpu->last_latency = tmp->last_latency;
	vcpu->pmi_due = tmp->pmi_due;
	vcpu->pmi_restore = tmp->pmi_restore;
	vcpu->pmi_outstanding = false;
	/* what the host counted before is not this guest's: every counter anew at the sync */
	counters_reset(vcpu);
	walk_cache_reset(&vcpu->walk_cache);
	vcpu->stats_dirty = true;
}

/* Every record in bounds, each known one once, the required ones there; the identity's. */
static int scan(const struct vpmu_vcpu *vcpu, const uint8_t *b, size_t len, struct rec *identity)
{
	unsigned int seen = 0, nr = (unsigned int) get_le(b + H_RECORDS, 4), count = 0;
	size_t off = SNAP_HEADER_SIZE;
	struct rec r;

	while (off < len) {
		if (next_record(b, len, &off, &r) < 0)
			return refuse(vcpu, -EBADMSG, "damaged: record %u runs past the end",
				      count);
		count++;
		if (r.tag >= 1 && r.tag <= TAG_BACKEND) {
			if (seen & (1u << r.tag))
				return refuse(vcpu, -EBADMSG, "damaged: record %u twice", r.tag);
			seen |= 1u << r.tag;
		}
		if (r.tag == TAG_IDENTITY)
			*identity = r;
	}
	if (count != nr)
		return refuse(vcpu, -EBADMSG, "damaged: %u records, the header says %u", count, nr);
	for (unsigned int t = TAG_IDENTITY; t <= TAG_FILTER; t++)
		if (!(seen & (1u << t)))
			return refuse(vcpu, -EBADMSG, "damaged: record %u missing", t);
	return 0;
}

int vpmu_vcpu_restore(struct vpmu_vcpu *vcpu, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	struct vpmu_vcpu *tmp;
	uint64_t phase = 0;
	bool has_phase = false;
	struct rec r, identity = { 0 };
	size_t off = SNAP_HEADER_SIZE;
	int err;

	if (!vcpu || (!buf && len))
		return -EINVAL;
	err = check_header(vcpu, b, len);
	if (err == 0)
		err = scan(vcpu, b, len, &identity);
	if (err == 0)
		err = check_identity(vcpu, &identity);
	if (err < 0)
		return err;
	tmp = malloc(sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, vcpu, sizeof(*tmp));
	while (err == 0 && off < len) {
		next_record(b, len, &off, &r);
		err = restore_record(vcpu, tmp, &r, &phase, &has_phase);
	}
	if (err == 0) {
		commit(vcpu, tmp);
		if (has_phase)
			vcpu->backend->set_phase(vcpu->backend_state, phase);
	}
	free(tmp);
	return err;
}
