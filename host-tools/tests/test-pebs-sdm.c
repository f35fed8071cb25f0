/* SPDX-License-Identifier: MIT */
/*
 * pebs_decode_record() against records written out by hand from the SDM
 * tables, byte offset by byte offset, independent of vpmu/pebs-record.h:
 * no offset or size macro of it is used here, only the decoder's output
 * (struct pebs_decoded, with registers named by enum pebs_gpr). So a wrong
 * offset in pebs-record.h, which the decoder and the record builders
 * share, shows here even though builder -> decoder round trips agree.
 *
 * Every qword of a record holds a value that names its own offset
 * (Q(off)), so a field read from any other place is caught.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pebs-decode.h"

#define Q(off) (0x5d00c0de00000000ULL | (uint64_t) (off))

static uint8_t rec[4096];

static void put64(size_t off, uint64_t v)
{
	for (unsigned int i = 0; i < 8; i++)
		rec[off + i] = (uint8_t) (v >> (8 * i));
}

static void put32(size_t off, uint32_t v)
{
	for (unsigned int i = 0; i < 4; i++)
		rec[off + i] = (uint8_t) (v >> (8 * i));
}

/* Every qword from `from` to `to` (excluded) holds Q(its offset). */
static void fill(size_t from, size_t to)
{
	for (size_t off = from; off < to; off += 8)
		put64(off, Q(off));
}

/* XMMn at `off`: bytes n*16 + b, b = 0..15 (little-endian lanes). */
static void fill_xmms(size_t off)
{
	for (unsigned int n = 0; n < 16; n++)
		for (unsigned int b = 0; b < 16; b++)
			rec[off + 16 * n + b] = (uint8_t) (16 * n + b);
}

/* Decode `len` bytes from a heap copy of exactly that size (ASan sees any overread). */
static struct pebs_decoded decode(unsigned int fmt, bool timed, size_t len)
{
	struct pebs_decode_info info = { .fmt = fmt, .timed = timed };
	struct pebs_decoded d;
	const char *why = NULL;
	uint8_t *copy = malloc(len);
	int r;

	cr_assert_not_null(copy);
	memcpy(copy, rec, len);
	r = pebs_decode_record(&info, copy, len, &d, &why);
	free(copy);
	cr_assert_eq(r, 0, "format %#x: %d (%s)", fmt, r, why ? why : "");
	cr_expect_eq(d.size, len, "record size %zu, laid out %zu", d.size, len);
	return d;
}

/* The adaptive GPR group at `g` (Table 22-99: RFLAGS, RIP, RAX RCX RDX RBX RSP RBP RSI RDI,
 * R8-R15). */
static void expect_adaptive_gprs(const struct pebs_decoded *d, size_t g)
{
	cr_expect_eq(d->rflags, Q(g + 0x00));
	cr_expect_eq(d->ip, Q(g + 0x08));
	cr_expect_eq(d->gpr[PEBS_RAX], Q(g + 0x10));
	cr_expect_eq(d->gpr[PEBS_RCX], Q(g + 0x18), "RCX %#llx",
		     (unsigned long long) d->gpr[PEBS_RCX]);
	cr_expect_eq(d->gpr[PEBS_RDX], Q(g + 0x20), "RDX %#llx",
		     (unsigned long long) d->gpr[PEBS_RDX]);
	cr_expect_eq(d->gpr[PEBS_RBX], Q(g + 0x28), "RBX %#llx",
		     (unsigned long long) d->gpr[PEBS_RBX]);
	cr_expect_eq(d->gpr[PEBS_RSP], Q(g + 0x30));
	cr_expect_eq(d->gpr[PEBS_RBP], Q(g + 0x38));
	cr_expect_eq(d->gpr[PEBS_RSI], Q(g + 0x40));
	cr_expect_eq(d->gpr[PEBS_RDI], Q(g + 0x48));
	for (unsigned int i = 0; i < 8; i++)
		cr_expect_eq(d->gpr[PEBS_R8 + i], Q(g + 0x50 + 8 * i), "R%u", 8 + i);
}

static void expect_xmms(const struct pebs_decoded *d)
{
	for (unsigned int n = 0; n < 16; n++)
		for (unsigned int b = 0; b < 16; b++)
			cr_expect_eq(d->xmm[n][b], 16 * n + b, "XMM%u byte %u", n, b);
}

/* `n` LBR entries at `l`, FROM/TO/INFO each (Table 22-101), from TOS backwards. */
static void expect_lbrs(const struct pebs_decoded *d, size_t l, unsigned int n)
{
	cr_expect_eq(d->nr_lbr, n);
	for (unsigned int i = 0; i < n; i++) {
		cr_expect_eq(d->lbr[i].from, Q(l + 24 * i), "LBR[TOS-%u].FROM", i);
		cr_expect_eq(d->lbr[i].to, Q(l + 24 * i + 8), "LBR[TOS-%u].TO", i);
		cr_expect_eq(d->lbr[i].info, Q(l + 24 * i + 16), "LBR[TOS-%u].INFO", i);
	}
}

/*
 * PEBS_FMT 3, 200 bytes: the 64-bit legacy block of SDM Vol. 3B Figure
 * 20-10 (RFLAGS, RIP, RAX, RBX, RCX, RDX, RSI, RDI, RBP, RSP, R8-R15:
 * the legacy order, not the adaptive one), then 90H Applicable Counters
 * (§22.3.8.1.1), 98H data linear address, A0H data source, A8H latency
 * (the load latency record, §22.3.1.1), B0H EventingIP, B8H TSX info
 * (§22.3.6.2), C0H TSC.
 */
Test(pebs_sdm, format3_legacy_layout)
{
	struct pebs_decoded d;

	memset(rec, 0, sizeof(rec));
	fill(0, 0xc8);
	d = decode(3, false, 0xc8);
	cr_expect_eq(d.rflags, Q(0x00));
	cr_expect_eq(d.ip, Q(0x08));
	cr_expect_eq(d.gpr[PEBS_RAX], Q(0x10));
	cr_expect_eq(d.gpr[PEBS_RBX], Q(0x18), "RBX %#llx", (unsigned long long) d.gpr[PEBS_RBX]);
	cr_expect_eq(d.gpr[PEBS_RCX], Q(0x20), "RCX %#llx", (unsigned long long) d.gpr[PEBS_RCX]);
	cr_expect_eq(d.gpr[PEBS_RDX], Q(0x28), "RDX %#llx", (unsigned long long) d.gpr[PEBS_RDX]);
	cr_expect_eq(d.gpr[PEBS_RSI], Q(0x30), "RSI %#llx", (unsigned long long) d.gpr[PEBS_RSI]);
	cr_expect_eq(d.gpr[PEBS_RDI], Q(0x38), "RDI %#llx", (unsigned long long) d.gpr[PEBS_RDI]);
	cr_expect_eq(d.gpr[PEBS_RBP], Q(0x40));
	cr_expect_eq(d.gpr[PEBS_RSP], Q(0x48));
	for (unsigned int i = 0; i < 8; i++)
		cr_expect_eq(d.gpr[PEBS_R8 + i], Q(0x50 + 8 * i), "R%u", 8 + i);
	cr_expect_eq(d.applicable, Q(0x90));
	cr_expect_eq(d.dla, Q(0x98));
	cr_expect_eq(d.data_src, Q(0xa0));
	cr_expect_eq(d.latency, Q(0xa8));
	cr_expect_eq(d.eventing_ip, Q(0xb0));
	cr_expect_eq(d.tsx, Q(0xb8));
	cr_expect_eq(d.tsc, Q(0xc0));
}

/*
 * Adaptive PEBS, no counter had Adaptive_Record: Record Format 0, the
 * Basic group alone (Table 22-96): qword 0 = Record Format [47:0], Record
 * Size [63:48]; 08H EventingIP, 10H Applicable Counters, 18H TSC.
 */
Test(pebs_sdm, format4_basic_only)
{
	struct pebs_decoded d;

	memset(rec, 0, sizeof(rec));
	fill(0, 0x20);
	put64(0x00, 0x20ULL << 48);
	d = decode(4, false, 0x20);
	cr_expect_eq(d.groups, PEBS_DEC_BASIC);
	cr_expect_eq(d.record_format, 0);
	cr_expect_eq(d.eventing_ip, Q(0x08));
	cr_expect_eq(d.applicable, Q(0x10));
	cr_expect_eq(d.tsc, Q(0x18));
}

/*
 * Table 22-104 (PEBS Record Example 1) with 3 LBR entries: every group,
 * back to back. Basic 00H, Memory Info 20H (DLA, Memory Auxiliary Info,
 * latency, TSX; Table 22-97), GPRs 40H (Table 22-99: RFLAGS 40H, RIP
 * 48H, RAX 50H ... RDI 88H, R8 90H ... R15 C8H), XMM0 D0H ... XMM15 1C0H,
 * LBR[TOS] 1D0H. Record Format = MSR_PEBS_DATA_CFG (Table 22-102): Memory
 * Info, GPRs, XMMs, LBRs (bits 0-3), LBR_entries [31:24] = 2.
 */
Test(pebs_sdm, format4_example1_all_groups)
{
	uint64_t rf = 0x0200000fULL;
	struct pebs_decoded d;

	memset(rec, 0, sizeof(rec));
	fill(0, 0xd0);
	fill_xmms(0xd0);
	fill(0x1d0, 0x218);
	put64(0x00, 0x218ULL << 48 | rf);
	d = decode(4, false, 0x218);
	cr_expect_eq(d.groups, PEBS_DEC_BASIC | PEBS_DEC_MEMINFO | PEBS_DEC_GPRS | PEBS_DEC_XMMS |
				       PEBS_DEC_LBRS);
	cr_expect_eq(d.record_format, rf);
	cr_expect_eq(d.eventing_ip, Q(0x08));
	cr_expect_eq(d.applicable, Q(0x10));
	cr_expect_eq(d.tsc, Q(0x18));
	cr_expect_eq(d.dla, Q(0x20));
	cr_expect_eq(d.data_src, Q(0x28));
	cr_expect_eq(d.latency, Q(0x30));
	cr_expect_eq(d.tsx, Q(0x38));
	expect_adaptive_gprs(&d, 0x40);
	expect_xmms(&d);
	expect_lbrs(&d, 0x1d0, 3);
}

/*
 * Table 22-105 (PEBS Record Example 2): Basic, GPRs and 3 LBR entries, on
 * PEBS_FMT 5 (the same record as 4): GPRs at 20H (RFLAGS 20H, RIP 28H,
 * RAX 30H ... RDI 68H, R8 70H ... R15 A8H), LBR[TOS] at B0H.
 */
Test(pebs_sdm, format5_example2_gprs_lbrs)
{
	uint64_t rf = 0x0200000aULL;
	struct pebs_decoded d;

	memset(rec, 0, sizeof(rec));
	fill(0, 0xf8);
	put64(0x00, 0xf8ULL << 48 | rf);
	d = decode(5, false, 0xf8);
	cr_expect_eq(d.groups, PEBS_DEC_BASIC | PEBS_DEC_GPRS | PEBS_DEC_LBRS);
	cr_expect_eq(d.eventing_ip, Q(0x08));
	expect_adaptive_gprs(&d, 0x20);
	expect_lbrs(&d, 0xb0, 3);
}

/*
 * PEBS_FMT 6, the Counters group (§22.9.2.3.1, Table 22-103) after Memory
 * Info: a 128-bit header of dwords (PMC BitVector, FIXED_CTR BitVector,
 * Metrics BitVector, reserved), then the values: the PMCs in bit order,
 * the fixed counters in bit order, Metrics Base, Metrics Data; 16 +
 * popcount * 8 bytes. Record Format: Memory Info, Counters, Metrics
 * (bits 0, 4, 5), Include_PMC0 and 2 (bits 32, 34).
 */
Test(pebs_sdm, format6_counters_group)
{
	uint64_t rf = 0x31ULL | 1ULL << 32 | 1ULL << 34;
	struct pebs_decoded d;

	memset(rec, 0, sizeof(rec));
	fill(0, 0x40);
	put32(0x40, 0x5); /* PMC0, PMC2 */
	put32(0x44, 0x9); /* FIXED_CTR0, FIXED_CTR3 */
	put32(0x48, 0x3); /* Metrics Base, Metrics Data */
	put32(0x4c, 0);
	fill(0x50, 0x80);
	put64(0x00, 0x80ULL << 48 | rf);
	d = decode(6, false, 0x80);
	cr_expect_eq(d.groups, PEBS_DEC_BASIC | PEBS_DEC_MEMINFO | PEBS_DEC_CNTR);
	cr_expect_eq(d.dla, Q(0x20));
	cr_expect_eq(d.tsx, Q(0x38));
	cr_expect_eq(d.pmc_mask, 0x5);
	cr_expect_eq(d.fixed_mask, 0x9);
	cr_expect_eq(d.metrics_mask, 0x3);
	cr_expect_eq(d.counters.pmc[0], Q(0x50));
	cr_expect_eq(d.counters.pmc[2], Q(0x58));
	cr_expect_eq(d.counters.fixed[0], Q(0x60));
	cr_expect_eq(d.counters.fixed[3], Q(0x68));
	cr_expect_eq(d.counters.metrics_base, Q(0x70));
	cr_expect_eq(d.counters.metrics, Q(0x78));
}

/*
 * Timed PEBS (§22.9.9, Table 22-108): Basic qword 0 is Record Format
 * [31:0], Retire Latency [47:32], Record Size [63:48]. PEBS_FMT 6 with
 * PERF_CAPABILITIES[17], Memory Info and a counters group of PMC1 alone.
 */
Test(pebs_sdm, timed_basic_group)
{
	struct pebs_decoded d;

	memset(rec, 0, sizeof(rec));
	fill(0, 0x40);
	put32(0x40, 0x2); /* PMC1 */
	put32(0x44, 0);
	put32(0x48, 0);
	put32(0x4c, 0);
	fill(0x50, 0x58);
	put64(0x00, 0x58ULL << 48 | 0xbeefULL << 32 | 0x11);
	d = decode(6, true, 0x58);
	cr_expect_eq(d.record_format, 0x11);
	cr_expect(d.has_retire_latency);
	cr_expect_eq(d.retire_latency, 0xbeef);
	cr_expect_eq(d.eventing_ip, Q(0x08));
	cr_expect_eq(d.applicable, Q(0x10));
	cr_expect_eq(d.tsc, Q(0x18));
	cr_expect_eq(d.dla, Q(0x20));
	cr_expect_eq(d.pmc_mask, 0x2);
	cr_expect_eq(d.counters.pmc[1], Q(0x50));
}

/*
 * Architectural PEBS (SDM Vol. 3B §22.10, the record of CPUID leaf 23H
 * processors): a 16-byte header whose qword 0 is the record size [15:0],
 * 64-bit mode [30], continued [31], the counters group selects [39:35]
 * (GP 36, fixed 37, metrics 38), the LBR depth selector [41:40] (1: 8
 * entries), XMM [49], GPR [61], AUX [62], Basic [63]; then, present ones
 * only and in this order: Basic 48 bytes (EventingIP, Applicable
 * Counters, TSC, Retire Latency [15:0] with valid [16], 2 reserved);
 * Aux 64 (DLA, 4 reserved, Memory Auxiliary Info, latency, TSX);
 * GPRs 160 (RFLAGS, RIP, RAX RCX RDX RBX RSP RBP RSI RDI, R8-R15, SSP,
 * reserved); XER 16 + 256 (XSTATE_BV, reserved, XMM0-15); LBR 48 + 24 per
 * entry (reserved, LBR_CTL, depth, LER FROM/TO/INFO, then FROM/TO/INFO
 * from the newest); Counters as Table 22-103; zero padding to 16 bytes.
 */
Test(pebs_sdm, arch_pebs_every_group)
{
	uint64_t hdr = 0x350 | 1ULL << 30 | 1ULL << 36 | 1ULL << 37 | 1ULL << 40 | 1ULL << 49 |
		       1ULL << 61 | 1ULL << 62 | 1ULL << 63;
	struct pebs_decoded d;

	memset(rec, 0, sizeof(rec));
	put64(0x00, hdr);
	fill(0x10, 0x28);		  /* Basic: IP, Applicable Counters, TSC */
	put64(0x28, 1ULL << 16 | 0x1234); /* Retire Latency, valid */
	fill(0x40, 0x48);		  /* Aux: DLA */
	fill(0x68, 0x80);		  /* Memory Auxiliary Info, latency, TSX */
	fill(0x80, 0x118);		  /* GPRs, SSP at 110H */
	put64(0x120, 0x2);		  /* XER: XSTATE_BV = SSE */
	fill_xmms(0x130);		  /* XMM0 at 130H */
	put64(0x238, Q(0x238));		  /* LBR header: LBR_CTL */
	put64(0x240, 8);		  /* depth */
	fill(0x248, 0x260);		  /* LER FROM/TO/INFO */
	fill(0x260, 0x320);		  /* 8 entries */
	put32(0x320, 0x3);		  /* Counters: PMC0, PMC1 */
	put32(0x324, 0x2);		  /* FIXED_CTR1 */
	fill(0x330, 0x348);		  /* values, then 8 bytes of padding */
	d = decode(0xf, false, 0x350);
	cr_expect_eq(d.groups, PEBS_DEC_BASIC | PEBS_DEC_MEMINFO | PEBS_DEC_GPRS | PEBS_DEC_XMMS |
				       PEBS_DEC_LBRS | PEBS_DEC_CNTR);
	cr_expect_eq(d.format_qword, hdr);
	cr_expect(d.mode64);
	cr_expect_eq(d.eventing_ip, Q(0x10));
	cr_expect_eq(d.applicable, Q(0x18));
	cr_expect_eq(d.tsc, Q(0x20));
	cr_expect(d.has_retire_latency && d.retire_valid);
	cr_expect_eq(d.retire_latency, 0x1234);
	cr_expect_eq(d.dla, Q(0x40));
	cr_expect_eq(d.data_src, Q(0x68));
	cr_expect_eq(d.latency, Q(0x70));
	cr_expect_eq(d.tsx, Q(0x78));
	expect_adaptive_gprs(&d, 0x80);
	cr_expect_eq(d.ssp, Q(0x110));
	cr_expect_eq(d.xstate, 0x2);
	expect_xmms(&d);
	cr_expect_eq(d.lbr_sel, 1);
	cr_expect_eq(d.lbr_ctl, Q(0x238));
	cr_expect_eq(d.ler.from, Q(0x248));
	cr_expect_eq(d.ler.to, Q(0x250));
	cr_expect_eq(d.ler.info, Q(0x258));
	expect_lbrs(&d, 0x260, 8);
	cr_expect_eq(d.pmc_mask, 0x3);
	cr_expect_eq(d.fixed_mask, 0x2);
	cr_expect_eq(d.counters.pmc[0], Q(0x330));
	cr_expect_eq(d.counters.pmc[1], Q(0x338));
	cr_expect_eq(d.counters.fixed[1], Q(0x340));
}

/* Architectural PEBS, Basic alone in 32-bit mode: header and 48 bytes, no padding. */
Test(pebs_sdm, arch_pebs_basic_only)
{
	struct pebs_decoded d;

	memset(rec, 0, sizeof(rec));
	put64(0x00, 0x40 | 1ULL << 63);
	fill(0x10, 0x28);
	put64(0x28, 0xffff); /* latency without the valid bit */
	d = decode(0xf, false, 0x40);
	cr_expect_eq(d.groups, PEBS_DEC_BASIC);
	cr_expect_not(d.mode64);
	cr_expect_eq(d.eventing_ip, Q(0x10));
	cr_expect_eq(d.tsc, Q(0x20));
	cr_expect_not(d.retire_valid);
}
