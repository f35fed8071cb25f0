/* SPDX-License-Identifier: MIT */
/*
 * PEBS record decoder, the inverse of vpmu/pebs-record.c. Records are
 * self-describing from format 4 on (adaptive Basic qword 0, the arch
 * PEBS header), so the decoder trusts the record, then checks that the
 * groups it announces add up to the size it claims: a size that does
 * not match is garbage, not a record.
 */
#include <errno.h>
#include <string.h>

#include "pebs-decode.h"
#include "vpmu/bits.h"
#include "vpmu/msr.h"

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < 8; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t) (get64(p) & 0xffffffffULL);
}

/* A cursor over one record: every take() is checked against its end. */
struct cursor {
	const uint8_t *p;
	size_t off, end;
};

static const uint8_t *take(struct cursor *c, size_t n)
{
	const uint8_t *p;

	if (n > c->end - c->off)
		return NULL;
	p = c->p + c->off;
	c->off += n;
	return p;
}

static void get_gprs(const uint8_t *g, struct pebs_decoded *d)
{
	d->rflags = get64(g + PEBS_GPRS_RFLAGS);
	d->ip = get64(g + PEBS_GPRS_RIP);
	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		d->gpr[r] = get64(g + PEBS_GPRS_REG(r));
}

static void get_xmms(const uint8_t *x, struct pebs_decoded *d)
{
	for (unsigned int n = 0; n < 16; n++)
		memcpy(d->xmm[n], x + PEBS_XMMS_REG(n), 16);
}

static void get_lbrs(const uint8_t *l, unsigned int n, struct pebs_decoded *d)
{
	d->nr_lbr = n;
	for (unsigned int i = 0; i < n; i++) {
		const uint8_t *e = l + (size_t) i * PEBS_LBR_ENTRY_SIZE;

		d->lbr[i].from = get64(e + PEBS_LBR_FROM);
		d->lbr[i].to = get64(e + PEBS_LBR_TO);
		d->lbr[i].info = get64(e + PEBS_LBR_INFO);
	}
}

/* Counters group, Table 22-103 (shared by adaptive and arch PEBS). */
static int get_cntr_group(struct cursor *c, struct pebs_decoded *d, const char **why)
{
	const uint8_t *h = take(c, PEBS_CNTR_HDR_SIZE), *v;
	unsigned int n;

	if (!h) {
		*why = "counters group header runs past the record size";
		return -EINVAL;
	}
	d->pmc_mask = get32(h + PEBS_CNTR_PMC_BITVEC);
	d->fixed_mask = get32(h + PEBS_CNTR_FIXED_BITVEC);
	d->metrics_mask = get32(h + PEBS_CNTR_METRICS_BITVEC);
	/* struct pebs_counters holds 16 fixed counters and two metrics values */
	if (d->fixed_mask & ~0xffffU) {
		*why = "counters group names a fixed counter above 15";
		return -EINVAL;
	}
	if (d->metrics_mask & ~(uint32_t) PEBS_CNTR_METRICS_ALL) {
		*why = "counters group metrics bit vector has reserved bits set";
		return -EINVAL;
	}
	n = (unsigned int) (__builtin_popcount(d->pmc_mask) + __builtin_popcount(d->fixed_mask) +
			    __builtin_popcount(d->metrics_mask));
	v = take(c, 8 * (size_t) n);
	if (!v) {
		*why = "counters group values run past the record size";
		return -EINVAL;
	}
	for (unsigned int i = 0; i < 32; i++)
		if (d->pmc_mask & (1U << i)) {
			d->counters.pmc[i] = get64(v);
			v += 8;
		}
	for (unsigned int i = 0; i < 16; i++)
		if (d->fixed_mask & (1U << i)) {
			d->counters.fixed[i] = get64(v);
			v += 8;
		}
	if (d->metrics_mask & 1U) {
		d->counters.metrics_base = get64(v);
		v += 8;
	}
	if (d->metrics_mask & 2U)
		d->counters.metrics = get64(v);
	d->groups |= PEBS_DEC_CNTR;
	return 0;
}

static int decode_fmt3(const uint8_t *buf, size_t len, struct pebs_decoded *d, const char **why)
{
	if (len < PEBS3_SIZE) {
		*why = "truncated format 3 record (200 bytes each)";
		return -EMSGSIZE;
	}
	d->size = PEBS3_SIZE;
	d->groups = PEBS_DEC_BASIC | PEBS_DEC_MEMINFO | PEBS_DEC_GPRS;
	d->rflags = get64(buf + PEBS3_RFLAGS);
	d->ip = get64(buf + PEBS3_RIP);
	/* Figure 20-10: the legacy register order */
	for (unsigned int r = 0; r < PEBS_NR_GPRS; r++)
		d->gpr[r] = get64(buf + pebs3_gpr_offset(r));
	d->applicable = get64(buf + PEBS3_APPLICABLE);
	d->dla = get64(buf + PEBS3_DLA);
	d->data_src = get64(buf + PEBS3_DATA_SRC);
	d->latency = get64(buf + PEBS3_LATENCY);
	d->eventing_ip = get64(buf + PEBS3_EVENTING_IP);
	d->tsx = get64(buf + PEBS3_TSX);
	d->tsc = get64(buf + PEBS3_TSC);
	return 0;
}

/* Record Format bits each adaptive format defines (MSR_PEBS_DATA_CFG's, §22.9.2.3). */
static uint64_t adaptive_format_bits(unsigned int fmt, bool timed)
{
	uint64_t bits = PEBS_DATACFG_MEMINFO | PEBS_DATACFG_GP | PEBS_DATACFG_XMMS |
			PEBS_DATACFG_LBRS | PEBS_DATACFG_LBR_ENTRIES;

	if (fmt >= 6)
		bits |= PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS | PEBS_DATACFG_INCLUDE_PMC;
	return bits & (timed ? PEBS_BASIC_TIMED_RECORD_FORMAT : PEBS_BASIC_RECORD_FORMAT);
}

static int decode_adaptive(const struct pebs_decode_info *info, const uint8_t *buf, size_t len,
			   struct pebs_decoded *d, const char **why)
{
	struct cursor c = { .p = buf, .off = 0 };
	const uint8_t *g;
	uint64_t q, rf;
	size_t size;

	if (len < PEBS_BASIC_SIZE) {
		*why = "truncated record: fewer bytes left than the 32-byte Basic group";
		return -EMSGSIZE;
	}
	q = get64(buf + PEBS_BASIC_FORMAT);
	size = (size_t) VPMU_FIELD_GET(PEBS_BASIC_RECORD_SIZE, q);
	if (size < PEBS_BASIC_SIZE) {
		*why = "Record Size is smaller than the Basic group";
		return -EINVAL;
	}
	if (size > len) {
		*why = "Record Size runs past the end of the buffer";
		return -EMSGSIZE;
	}
	rf = q & (info->timed ? PEBS_BASIC_TIMED_RECORD_FORMAT : PEBS_BASIC_RECORD_FORMAT);
	if (rf & ~adaptive_format_bits(info->fmt, info->timed)) {
		*why = "Record Format has bits this PEBS format does not define";
		return -EINVAL;
	}
	c.end = size;
	d->size = size;
	d->format_qword = q;
	d->record_format = rf;
	d->groups = PEBS_DEC_BASIC;
	if (info->timed) {
		d->has_retire_latency = true;
		d->retire_valid = true;
		d->retire_latency = VPMU_FIELD_GET(PEBS_BASIC_RETIRE_LATENCY, q);
	}
	g = take(&c, PEBS_BASIC_SIZE);
	d->eventing_ip = get64(g + PEBS_BASIC_IP);
	d->applicable = get64(g + PEBS_BASIC_APPLICABLE);
	d->tsc = get64(g + PEBS_BASIC_TSC);

	if (rf & PEBS_DATACFG_MEMINFO) {
		if (!(g = take(&c, PEBS_MEMINFO_SIZE)))
			goto short_record;
		d->dla = get64(g + PEBS_MEMINFO_DLA);
		d->data_src = get64(g + PEBS_MEMINFO_DATA_SRC);
		d->latency = get64(g + PEBS_MEMINFO_LATENCY);
		d->tsx = get64(g + PEBS_MEMINFO_TSX);
		d->groups |= PEBS_DEC_MEMINFO;
	}
	if (rf & PEBS_DATACFG_GP) {
		if (!(g = take(&c, PEBS_GPRS_SIZE)))
			goto short_record;
		get_gprs(g, d);
		d->groups |= PEBS_DEC_GPRS;
	}
	if (rf & PEBS_DATACFG_XMMS) {
		if (!(g = take(&c, PEBS_XMMS_SIZE)))
			goto short_record;
		get_xmms(g, d);
		d->groups |= PEBS_DEC_XMMS;
	}
	if (rf & PEBS_DATACFG_LBRS) {
		/* DATA_CFG[31:24] + 1 entries: at most 256, the format allows 32 */
		unsigned int n = (unsigned int) VPMU_FIELD_GET(PEBS_DATACFG_LBR_ENTRIES, rf) + 1;

		if (n > PEBS_LBR_MAX_ENTRIES) {
			*why = "LBR group with more than 32 entries";
			return -EINVAL;
		}
		if (!(g = take(&c, (size_t) n * PEBS_LBR_ENTRY_SIZE)))
			goto short_record;
		get_lbrs(g, n, d);
		d->groups |= PEBS_DEC_LBRS;
	}
	if (rf & (PEBS_DATACFG_CNTR | PEBS_DATACFG_METRICS)) {
		int r = get_cntr_group(&c, d, why);

		if (r < 0)
			return r;
	}
	if (c.off != size) {
		*why = "Record Size is larger than the groups its Record Format selects";
		return -EINVAL;
	}
	return 0;

short_record:
	*why = "Record Size is smaller than the groups its Record Format selects";
	return -EINVAL;
}

#define ARCH_HDR_KNOWN                                                                             \
	(ARCH_PEBS_HDR_RECORD_SIZE | ARCH_PEBS_HDR_64BIT_MODE | ARCH_PEBS_HDR_CONTINUED |          \
	 ARCH_PEBS_CNTR_GP | ARCH_PEBS_CNTR_FIXED | ARCH_PEBS_CNTR_METRICS | ARCH_PEBS_HDR_LBR |   \
	 ARCH_PEBS_HDR_XMM | ARCH_PEBS_HDR_GPR | ARCH_PEBS_HDR_AUX | ARCH_PEBS_HDR_BASIC)

/* The architectural PEBS header: the record's size and the groups that follow. */
static int arch_header(const uint8_t *buf, size_t len, struct pebs_decoded *d, const char **why)
{
	uint64_t h;
	size_t size;

	if (len < ARCH_PEBS_HDR_SIZE) {
		*why = "truncated record: fewer bytes left than the 16-byte header";
		return -EMSGSIZE;
	}
	h = get64(buf + ARCH_PEBS_HDR_FORMAT);
	size = (size_t) VPMU_FIELD_GET(ARCH_PEBS_HDR_RECORD_SIZE, h);
	if (size < ARCH_PEBS_HDR_SIZE || size % ARCH_PEBS_ALIGN) {
		*why = "header record size is not a multiple of 16 of at least 16";
		return -EINVAL;
	}
	if (size > len) {
		*why = "header record size runs past the end of the buffer";
		return -EMSGSIZE;
	}
	if (h & ~ARCH_HDR_KNOWN) {
		*why = "header has reserved bits set";
		return -EINVAL;
	}
	if (h & ARCH_PEBS_HDR_CONTINUED) {
		/* Fragments: the builder never writes them, and neither do we join them. */
		*why = "continued (fragmented) records are not supported";
		return -EOPNOTSUPP;
	}
	d->size = size;
	d->format_qword = h;
	d->mode64 = h & ARCH_PEBS_HDR_64BIT_MODE;
	return 0;
}

/* The Basic and Aux groups; false if the record is too short for them. */
static bool arch_basic_aux(struct cursor *c, uint64_t h, struct pebs_decoded *d)
{
	const uint8_t *g;

	if (h & ARCH_PEBS_HDR_BASIC) {
		uint64_t r;

		if (!(g = take(c, ARCH_PEBS_BASIC_SIZE)))
			return false;
		d->eventing_ip = get64(g + ARCH_PEBS_BASIC_IP);
		d->applicable = get64(g + ARCH_PEBS_BASIC_APPLICABLE);
		d->tsc = get64(g + ARCH_PEBS_BASIC_TSC);
		r = get64(g + ARCH_PEBS_BASIC_RETIRE);
		d->has_retire_latency = true;
		d->retire_valid = r & ARCH_PEBS_BASIC_RETIRE_VALID;
		d->retire_latency = VPMU_FIELD_GET(ARCH_PEBS_BASIC_RETIRE_LATENCY, r);
		d->groups |= PEBS_DEC_BASIC;
	}
	if (h & ARCH_PEBS_HDR_AUX) {
		if (!(g = take(c, ARCH_PEBS_AUX_SIZE)))
			return false;
		d->dla = get64(g + ARCH_PEBS_AUX_DLA);
		d->data_src = get64(g + ARCH_PEBS_AUX_DATA_SRC);
		d->latency = get64(g + ARCH_PEBS_AUX_LATENCY);
		d->tsx = get64(g + ARCH_PEBS_AUX_TSX);
		d->groups |= PEBS_DEC_MEMINFO;
	}
	return true;
}

/* The GPR and XER (XMM) groups; false if the record is too short for them. */
static bool arch_regs(struct cursor *c, uint64_t h, struct pebs_decoded *d)
{
	const uint8_t *g;

	if (h & ARCH_PEBS_HDR_GPR) {
		if (!(g = take(c, ARCH_PEBS_GPRS_SIZE)))
			return false;
		get_gprs(g, d);
		d->ssp = get64(g + ARCH_PEBS_GPRS_SSP);
		d->groups |= PEBS_DEC_GPRS;
	}
	if (h & ARCH_PEBS_HDR_XMM) {
		if (!(g = take(c, ARCH_PEBS_XER_SIZE)))
			return false;
		d->xstate = get64(g + ARCH_PEBS_XER_XSTATE);
		get_xmms(g + ARCH_PEBS_XER_HDR_SIZE, d);
		d->groups |= PEBS_DEC_XMMS;
	}
	return true;
}

/* The LBR group: its header, then as many entries as its depth says. */
static int arch_lbrs(struct cursor *c, uint64_t h, struct pebs_decoded *d, const char **why)
{
	unsigned int sel = (unsigned int) VPMU_FIELD_GET(ARCH_PEBS_HDR_LBR, h);
	const uint8_t *g;
	uint64_t depth;

	if (!(g = take(c, ARCH_PEBS_LBR_HDR_SIZE)))
		return -EMSGSIZE;
	depth = get64(g + ARCH_PEBS_LBR_DEPTH);
	if (depth > ARCH_PEBS_LBR_MAX_DEPTH ||
	    (sel != ARCH_PEBS_LBR_SEL_VAR && depth != 8ULL * sel) ||
	    (sel == ARCH_PEBS_LBR_SEL_VAR && depth == 0)) {
		*why = "LBR header depth does not match the header's LBR selector";
		return -EINVAL;
	}
	d->lbr_sel = sel;
	d->lbr_ctl = get64(g + ARCH_PEBS_LBR_CTL);
	d->ler.from = get64(g + ARCH_PEBS_LBR_LER_FROM);
	d->ler.to = get64(g + ARCH_PEBS_LBR_LER_TO);
	d->ler.info = get64(g + ARCH_PEBS_LBR_LER_INFO);
	if (!(g = take(c, (size_t) depth * PEBS_LBR_ENTRY_SIZE)))
		return -EMSGSIZE;
	get_lbrs(g, (unsigned int) depth, d);
	d->groups |= PEBS_DEC_LBRS;
	return 0;
}

static int decode_arch(const uint8_t *buf, size_t len, struct pebs_decoded *d, const char **why)
{
	struct cursor c = { .p = buf, .off = 0 };
	uint64_t h;
	int r = arch_header(buf, len, d, why);

	if (r < 0)
		return r;
	h = d->format_qword;
	c.end = d->size;
	take(&c, ARCH_PEBS_HDR_SIZE);
	if (!arch_basic_aux(&c, h, d) || !arch_regs(&c, h, d))
		goto short_record;
	if (h & ARCH_PEBS_HDR_LBR) {
		r = arch_lbrs(&c, h, d, why);
		if (r == -EMSGSIZE)
			goto short_record;
		if (r < 0)
			return r;
	}
	if (h & ARCH_PEBS_HDR_CNTR) {
		r = get_cntr_group(&c, d, why);
		if (r < 0)
			return r;
	}
	/* The size counts the zero padding to the next 16-byte boundary. */
	if (d->size - c.off >= ARCH_PEBS_ALIGN) {
		*why = "header record size is larger than its groups plus padding";
		return -EINVAL;
	}
	return 0;

short_record:
	*why = "header record size is smaller than the groups it announces";
	return -EINVAL;
}

int pebs_decode_record(const struct pebs_decode_info *info, const uint8_t *buf, size_t len,
		       struct pebs_decoded *ret, const char **why)
{
	/* Built aside so that *ret stays untouched on failure. */
	struct pebs_decoded d;
	int r;

	memset(&d, 0, sizeof(d));
	d.fmt = info->fmt;
	switch (info->fmt) {
	case 3:
		r = decode_fmt3(buf, len, &d, why);
		break;
	case 4:
	case 5:
	case 6:
		r = decode_adaptive(info, buf, len, &d, why);
		break;
	case PEBS_FMT_ARCH:
		r = decode_arch(buf, len, &d, why);
		break;
	default:
		*why = "unsupported PEBS format (decoded: 3, 4-6 adaptive, 0xf architectural)";
		return -EOPNOTSUPP;
	}
	if (r < 0)
		return r;
	*ret = d;
	return 0;
}

const char *pebs_decode_format_name(unsigned int fmt)
{
	switch (fmt) {
	case 3:
		return "3";
	case 4:
		return "4 (adaptive)";
	case 5:
		return "5 (adaptive)";
	case 6:
		return "6 (adaptive)";
	case PEBS_FMT_ARCH:
		return "architectural";
	default:
		return "unsupported";
	}
}
