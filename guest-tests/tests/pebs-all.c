/* SPDX-License-Identifier: MIT */
/*
 * PEBS records field by field, for every record format the models have:
 * legacy format 3 (Skylake-Server), adaptive format 4 (Icelake-Server),
 * adaptive format 6 with the counters group and timed PEBS (LunarLake),
 * and architectural PEBS (arch-pebs). Checks:
 *  - several counters sampling into one buffer at once (instructions,
 *    branches, loads; GP and fixed): every record where the exact count
 *    puts it, EventingIP = the labelled instruction, the GPR group = the
 *    values loaded before it (RIP = the next instruction, RFLAGS = what the
 *    instruction left), the XMM group, Applicable Counters (two counters
 *    overflowing on one instruction share a record: SDM Vol. 3B 22.9.1),
 *    TSC within the run and monotonic across records, Record Size exact,
 *    the index advanced by exactly the records, nothing written past them;
 *  - counter reload from the DS reset slots, GP at 40H + 8n and fixed
 *    after the model's GP allocation (80H for format 4, 140H for 5/6:
 *    SDM Vol. 3B 22.6.2.4.2); every other slot holds a poison value, so a wrong
 *    slot shows in the counter's final value; arch PEBS reloads from
 *    CFG_C.RELOAD_VALUE 1-extended (22.10.2.1);
 *  - the threshold PMI: GLOBAL_STATUS.OvfBuffer (bit 62), alone, in the
 *    PMI that comes right after the record whose index crosses the
 *    threshold (20.4.9.5), and not before it;
 *  - formats 4 and 6: all 16 DATA_CFG group combinations (Memory Info,
 *    GPRs, XMMs, LBRs): Record Size and every group's offset exact
 *    (Tables 22-96..22-101: packed, no gaps), Record Format = DATA_CFG
 *    ([31:0] with timed PEBS, Table 22-108), the DLA of the sampled load,
 *    the LBR entries from TOS back; a counter without Adaptive_Record
 *    writes the Basic group only with Record Format 0, unless a counter
 *    overflowing with it has Adaptive_Record (Table 22-96);
 *  - the counters group: format 6 DATA_CFG bit 4 with Include_PMCx /
 *    Include_FIXED_CTRx (Table 22-103), arch PEBS CNTR_GP / CNTR_FIXED
 *    with CNTR_ALLOW: bit vectors, values of the included counters exact;
 *  - architectural PEBS: all 8 CFG_C combinations of the Aux, GPR and XER
 *    groups, record header (Record Size [15:0], group bits, 64-bit mode)
 *    and the 16-byte record granularity of IA32_PEBS_INDEX.WR;
 *  - DS save area and PEBS buffer at high canonical linear addresses, the
 *    DS area straddling two pages and the buffer spanning two physical
 *    pages that are not contiguous (in reverse order), a record
 *    straddling them (20.4.9.2: only linear contiguity is required).
 *
 * The sampled code is pebs_seq: it loads known XMM values (not counted),
 * enables counting with its first instruction, loads a distinctive value
 * into every GPR, then runs a 4-instruction loop LOOPS times:
 *   #1 wrmsr GLOBAL_CTRL   #2..#16 movabs into the 15 GPRs besides RSP
 *   iteration j (1-based): inc %rax (seq_loop), mov (%rsi),%rcx (seq_ld),
 *   cmp %rax,%rbx (seq_cmp), jne seq_loop (seq_jne)
 *   then 3 more instructions and the wrmsr that stops counting (not counted).
 * So the n-th counted instruction, the j-th load and the j-th branch are
 * known exactly, and a counter preset to -N overflows on its N-th event;
 * the record holds the state after that instruction (trap-like). Every
 * check needs those exact counts: elsewhere (KVM) the program skips.
 * Not covered: the Metrics part of the counters group, retire latency
 * values (timed PEBS: only masked out of Record Format), load latency.
 */
#include "guest.h"
#include "vpmu/pebs.h"

#define PMI_VECTOR 0xf0
#define LOOPS	   30
#define PRE	   16 /* wrmsr + 15 movabs */
#define PER	   4  /* instructions per iteration */
#define TOTAL	   (PRE + PER * LOOPS + 3)
#define MAX_RECS   32

#define V_RAX0	0xa0a0a0a0a0a00000
#define V_RBX	0xa0a0a0a0a0a0001e /* V_RAX0 + LOOPS: the loop's end */
#define V_RCX	0xc1c1c1c1c1c1c1c1 /* also what seq_ld loads */
#define V_RDX	0xd1d1d1d1d1d1d1d1
#define V_RDI	0xd7d7d7d7d7d7d7d7
#define V_RBP	0xb9b9b9b9b9b9b9b9
#define V_R8	0x0808080808080808
#define V_R9	0x0909090909090909
#define V_R10	0x1010101010101010
#define V_R11	0x1111111111111111
#define V_R12	0x1212121212121212
#define V_R13	0x1313131313131313
#define V_R14	0x1414141414141414
#define V_R15	0x1515151515151515
#define STR_(x) #x
#define STR(x)	STR_(x)
_Static_assert(V_RBX == V_RAX0 + LOOPS, "RBX ends the loop");

#define MSR_IA32_PEBS_BASE    0x3f4 /* architectural PEBS */
#define MSR_IA32_PEBS_INDEX   0x3f5
#define MSR_GP_CFG_C(n)	      (0x1903 + 4 * (n)) /* IA32_PMC_GPn_CFG_C */
#define MSR_FX_CFG_C(n)	      (0x1983 + 4 * (n)) /* IA32_PMC_FXn_CFG_C */
#define PERF_CAP_LBR_FMT(cap) ((cap) &0x3f)
#define PERF_CAP_TIMING_INFO  (1ull << 17)
#define DEBUGCTL_LBR	      (1ull << 0)

/* MSR_PEBS_DATA_CFG, Table 22-102 */
#define DC_MEM		  (1ull << 0)
#define DC_GPR		  (1ull << 1)
#define DC_XMM		  (1ull << 2)
#define DC_LBR		  (1ull << 3)
#define DC_CNTR		  (1ull << 4)
#define DC_LBR_ENTRIES(n) ((uint64_t) ((n) -1) << 24)
#define DC_PMC(x)	  (1ull << (32 + (x)))
#define DC_FIXED(x)	  (1ull << (48 + (x)))
#define NR_LBR		  3 /* LBR entries the LBR-group records ask for */

/* Architectural PEBS: CFG_C, PEBS_INDEX and the record header (Linux's struct arch_pebs_*) */
#define CFG_C_RELOAD	  0xffffffffull
#define CFG_C_ALLOW	  (1ull << 35)
#define CFG_C_CNTR_GP	  (1ull << 36)
#define CFG_C_CNTR_FX	  (1ull << 37)
#define CFG_C_XMM	  (1ull << 49)
#define CFG_C_GPR	  (1ull << 61)
#define CFG_C_AUX	  (1ull << 62)
#define CFG_C_EN	  (1ull << 63)
#define INDEX_WR	  0x7fffff0ull /* bits 26:4: byte offset, 16-byte units */
#define INDEX_FULL	  (1ull << 31)
#define INDEX_EN	  (1ull << 32)
#define INDEX_THRESH(off) ((uint64_t) ((off) >> 4) << 36) /* bits 58:36, 16-byte units */
#define AHDR_MODE64	  (1ull << 30)
#define AHDR_BASIC	  (1ull << 63)

/* DS save area, 64-bit layout (Fig 20-8), in qwords */
#define DS_QWORDS    64
#define POISON(slot) (0 - 0x10000ull - 0x100ull * (slot))

#define FILL	 0x5a5a5a5a5a5a5a5aull
#define FIXED(i) (32 + (i))

/* Linear addresses of our own making, in the top PML4 slot */
#define HI_DS  0xffffffffc0000000ull
#define HI_BUF 0xfffffffffffe0000ull

/* ---- the sampled sequence ---- */

void pebs_seq(uint64_t global_ctrl);
extern char seq_loop[], seq_ld[], seq_cmp[], seq_jne[], seq_end[];
/* not static: the sequence's asm names them */
uint64_t seq_rsp;
uint64_t seq_data = V_RCX;
uint64_t xmm_vals[16][2];

#define XMM(n) "movdqu xmm_vals+" #n "*16(%rip), %xmm" #n "\n\t"

/* clang-format off */
__asm__(".text\n"
	".globl pebs_seq\n"
	"pebs_seq:\n\t"
	"push %rbx\n\tpush %rbp\n\tpush %r12\n\tpush %r13\n\tpush %r14\n\tpush %r15\n\t"
	"mov %rsp, seq_rsp(%rip)\n\t"
	XMM(0) XMM(1) XMM(2) XMM(3) XMM(4) XMM(5) XMM(6) XMM(7)
	XMM(8) XMM(9) XMM(10) XMM(11) XMM(12) XMM(13) XMM(14) XMM(15)
	"mov %rdi, %rax\n\t"
	"mov %rdi, %rdx\n\t"
	"shr $32, %rdx\n\t"
	"mov $0x38f, %ecx\n\t"
	"wrmsr\n\t"
	"movabs $" STR(V_RAX0) ", %rax\n\t"
	"movabs $" STR(V_RBX) ", %rbx\n\t"
	"movabs $" STR(V_RCX) ", %rcx\n\t"
	"movabs $" STR(V_RDX) ", %rdx\n\t"
	"movabs $seq_data, %rsi\n\t"
	"movabs $" STR(V_RDI) ", %rdi\n\t"
	"movabs $" STR(V_RBP) ", %rbp\n\t"
	"movabs $" STR(V_R8) ", %r8\n\t"
	"movabs $" STR(V_R9) ", %r9\n\t"
	"movabs $" STR(V_R10) ", %r10\n\t"
	"movabs $" STR(V_R11) ", %r11\n\t"
	"movabs $" STR(V_R12) ", %r12\n\t"
	"movabs $" STR(V_R13) ", %r13\n\t"
	"movabs $" STR(V_R14) ", %r14\n\t"
	"movabs $" STR(V_R15) ", %r15\n"
	".globl seq_loop\n"
	"seq_loop:\n\t"
	"inc %rax\n"
	".globl seq_ld\n"
	"seq_ld:\n\t"
	"mov (%rsi), %rcx\n"
	".globl seq_cmp\n"
	"seq_cmp:\n\t"
	"cmp %rax, %rbx\n"
	".globl seq_jne\n"
	"seq_jne:\n\t"
	"jne seq_loop\n"
	".globl seq_end\n"
	"seq_end:\n\t"
	"mov $0x38f, %ecx\n\t"
	"xor %eax, %eax\n\t"
	"xor %edx, %edx\n\t"
	"wrmsr\n\t"
	"pop %r15\n\tpop %r14\n\tpop %r13\n\tpop %r12\n\tpop %rbp\n\tpop %rbx\n\t"
	"ret\n");
/* clang-format on */

enum kind { EV_INST, EV_LOAD, EV_BRANCH };
enum step { K_INC = 1, K_LD, K_CMP, K_JNE };

/* The counted instruction (1-based) that is event #e of kind k. */
static uint64_t event_insn(enum kind k, uint64_t e)
{
	switch (k) {
	case EV_LOAD:
		return PRE + PER * (e - 1) + K_LD;
	case EV_BRANCH:
		return PRE + PER * (e - 1) + K_JNE;
	default:
		return e;
	}
}

static uint64_t event_total(enum kind k)
{
	return k == EV_INST ? TOTAL : LOOPS;
}

/* Events of kind k among the first n counted instructions. */
static uint64_t events_upto(enum kind k, uint64_t n)
{
	uint64_t c = 0;

	for (uint64_t e = 1; e <= event_total(k); e++)
		c += event_insn(k, e) <= n;
	return c;
}

static unsigned int iter_of(uint64_t n)
{
	return (unsigned int) ((n - PRE - 1) / PER + 1);
}

static unsigned int step_of(uint64_t n)
{
	return (unsigned int) ((n - PRE - 1) % PER + 1);
}

static uint64_t ip_of(uint64_t n)
{
	static char *const at[] = { 0, seq_loop, seq_ld, seq_cmp, seq_jne };

	return (uint64_t) at[step_of(n)];
}

static uint64_t next_ip(uint64_t n)
{
	if (step_of(n) != K_JNE)
		return ip_of(n + 1);
	return (uint64_t) (iter_of(n) < LOOPS ? seq_loop : seq_end);
}

/* RFLAGS as the loop's instructions leave them: computed by running them */
static uint64_t flags_after(uint64_t n)
{
	uint64_t rax = V_RAX0 + iter_of(n), f;

	if (step_of(n) <= K_LD) {
		/* inc keeps CF: the previous iteration's cmp left it clear */
		rax--;
		__asm__ volatile("clc\n\tinc %0\n\tpushfq\n\tpop %1" : "+r"(rax), "=r"(f)::"cc");
	} else {
		/* clang-format off */
		__asm__ volatile("cmp %1, %2\n\tpushfq\n\tpop %0" : "=r"(f) : "r"(rax), "r"(V_RBX)
				 : "cc");
		/* clang-format on */
	}
	return f;
}

/* ---- the model ---- */

static unsigned int fmt, nr_gp, nr_fixed;
static uint64_t gp_mask, fixed_mask, perf_cap;
static bool arch_pebs, adaptive, timed, has_lbr, has_sse, arch_cntr;

static volatile uint64_t ds_mem[DS_QWORDS] __attribute__((aligned(64)));
static uint8_t pebs_buf[16384] __attribute__((aligned(4096)));
#define ARCH_BASE_SIZE 2 /* IA32_PEBS_BASE[3:0]: 4 KiB << 2, the whole pebs_buf */
static uint8_t pages[6][4096] __attribute__((aligned(4096)));

static volatile uint64_t *ds; /* the DS save area in use */
static uint8_t *buf;	      /* the PEBS buffer in use (linear) */
static uint64_t buf_len;
static uint64_t tsc0, tsc1;

static volatile unsigned int pmis;
static volatile uint64_t pmi_status, pmi_status_after, pmi_rip, pmi_index;

static uint64_t arch_index(void)
{
	return rdmsr(MSR_IA32_PEBS_INDEX);
}

static void on_pmi(struct frame *f)
{
	pmis++;
	pmi_rip = f->rip;
	pmi_index = arch_pebs ? arch_index() & INDEX_WR : ds[DS_PEBS_INDEX / 8];
	pmi_status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, pmi_status);
	pmi_status_after = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	apic_eoi();
}

static uint64_t rd64(const uint8_t *p)
{
	return *(const volatile uint64_t *) p;
}

static uint32_t rd32(const uint8_t *p)
{
	return *(const volatile uint32_t *) p;
}

static void fill(uint8_t *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 8)
		*(volatile uint64_t *) (p + i) = FILL;
}

static bool untouched(const uint8_t *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 8)
		if (rd64(p + i) != FILL)
			return false;
	return true;
}

static unsigned int fixed_slot(unsigned int n)
{
	return DS_PEBS_FIXED_RESET(fmt, n) / 8;
}

static void quiesce(void)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	if (fmt >= 3 && fmt <= 6)
		wrmsr(MSR_IA32_PEBS_ENABLE, 0);
	if (adaptive)
		wrmsr(MSR_PEBS_DATA_CFG, 0);
	if (arch_pebs) {
		for (unsigned int i = 0; i < nr_gp; i++)
			wrmsr(MSR_GP_CFG_C(i), 0);
		for (unsigned int i = 0; i < nr_fixed; i++)
			wrmsr(MSR_FX_CFG_C(i), 0);
		wrmsr(MSR_IA32_PEBS_INDEX, 0);
	}
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0);
	for (unsigned int i = 0; i < nr_gp; i++)
		wrmsr(MSR_IA32_PERFEVTSEL0 + i, 0);
	if (has_lbr)
		wrmsr(MSR_IA32_DEBUGCTL, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	pmis = 0;
	pmi_status = 0;
}

/* ---- scenarios ---- */

/* A PEBS counter: overflows on its event #first, then every step events. */
struct arm {
	unsigned int ctr; /* GP n, or FIXED(n) */
	enum kind kind;
	unsigned int first, step;
	bool adaptive; /* Adaptive_Record (formats 4+) */
};

/* A counter that only counts (for the counters group), from start. */
struct count {
	unsigned int ctr;
	enum kind kind;
	uint64_t start;
};

struct scen {
	const char *name;
	struct arm arm[6];
	unsigned int nr_arm;
	struct count cnt[4];
	unsigned int nr_cnt;
	uint64_t data_cfg; /* formats 4+ */
	uint64_t cfg_c;	   /* arch PEBS: groups of every PEBS counter */
	uint64_t thresh;   /* interrupt threshold, bytes from the start; 0 = none */
	bool lbr;	   /* DEBUGCTL.LBR on during the run */
};

/* Where the groups of a record are, as the configuration says they must be. */
struct layout {
	uint64_t size;
	int mem, gpr, xmm, lbr, cntr; /* offsets, -1 when absent */
	unsigned int nr_lbr;
	uint64_t fmt_word; /* qword 0 (adaptive, arch) */
	uint32_t pmc_vec, fixed_vec;
};

struct rec {
	uint64_t n;   /* the eventing instruction */
	uint64_t app; /* Applicable Counters */
};

static struct rec recs[MAX_RECS];
static unsigned int nr_recs;

static uint64_t ctr_bit(unsigned int ctr)
{
	return 1ull << ctr;
}

static uint64_t ctr_mask(unsigned int ctr)
{
	return ctr >= 32 ? fixed_mask : gp_mask;
}

static uint64_t event_code(enum kind k)
{
	switch (k) {
	case EV_LOAD:
		return 0x81d0; /* MEM_INST_RETIRED.ALL_LOADS */
	case EV_BRANCH:
		return fmt == 3 ? 0x4c4 : 0xc4; /* BR_INST_RETIRED.ALL_BRANCHES(_PEBS) */
	default:
		return fmt == 3 ? 0x1c0 : 0xc0; /* INST_RETIRED.PREC_DIST / ANY_P */
	}
}

static bool is_adaptive_app(const struct scen *s, uint64_t app)
{
	for (unsigned int i = 0; i < s->nr_arm; i++)
		if ((app & ctr_bit(s->arm[i].ctr)) && s->arm[i].adaptive)
			return true;
	return false;
}

/* no libgcc in the guest */
static uint64_t popcount(uint64_t v)
{
	uint64_t n = 0;

	for (; v; v &= v - 1)
		n++;
	return n;
}

static struct layout layout_for(const struct scen *s, uint64_t app)
{
	struct layout l = { .mem = -1, .gpr = -1, .xmm = -1, .lbr = -1, .cntr = -1 };
	uint64_t dc = s->data_cfg, c = s->cfg_c, off;

	if (fmt == 3) {
		l.gpr = 0;
		l.mem = 0x98;
		l.size = 200;
		return l;
	}
	if (arch_pebs) {
		off = 16 + 48;
		if (c & CFG_C_AUX) {
			l.mem = (int) off;
			off += 64;
		}
		if (c & CFG_C_GPR) {
			l.gpr = (int) off;
			off += 160;
		}
		if (c & CFG_C_XMM) {
			l.xmm = (int) off + 16; /* after the XER header */
			off += 16 + 256;
		}
		if (c & (CFG_C_CNTR_GP | CFG_C_CNTR_FX)) {
			for (unsigned int i = 0; i < s->nr_cnt; i++) {
				if (s->cnt[i].ctr < 32 && (c & CFG_C_CNTR_GP))
					l.pmc_vec |= 1u << s->cnt[i].ctr;
				if (s->cnt[i].ctr >= 32 && (c & CFG_C_CNTR_FX))
					l.fixed_vec |= 1u << (s->cnt[i].ctr - 32);
			}
			l.cntr = (int) off;
			off += 16 + 8 * popcount(l.pmc_vec | l.fixed_vec << 16);
		}
		/* IA32_PEBS_INDEX.WR bits 3:0 are reserved: records are 16-byte units */
		l.size = (off + 15) & ~15ull;
		l.fmt_word =
			l.size | AHDR_BASIC | AHDR_MODE64 |
			(c & (CFG_C_AUX | CFG_C_GPR | CFG_C_XMM | CFG_C_CNTR_GP | CFG_C_CNTR_FX));
		return l;
	}
	/* adaptive: Basic, then the DATA_CFG groups back to back, or Basic alone */
	if (!is_adaptive_app(s, app)) {
		l.size = 32;
		l.fmt_word = 32ull << 48;
		return l;
	}
	off = 32;
	if (dc & DC_MEM) {
		l.mem = (int) off;
		off += 32;
	}
	if (dc & DC_GPR) {
		l.gpr = (int) off;
		off += 144;
	}
	if (dc & DC_XMM) {
		l.xmm = (int) off;
		off += 256;
	}
	if (dc & DC_LBR) {
		l.lbr = (int) off;
		l.nr_lbr = (unsigned int) ((dc >> 24) & 0xff) + 1;
		off += 24 * l.nr_lbr;
	}
	if (dc & DC_CNTR) {
		l.pmc_vec = (uint32_t) ((dc >> 32) & 0xffff);
		l.fixed_vec = (uint32_t) ((dc >> 48) & 0xff);
		l.cntr = (int) off;
		off += 16 + 8 * popcount(l.pmc_vec | l.fixed_vec << 16);
	}
	l.size = off;
	l.fmt_word = (dc & (timed ? 0xffffffffull : 0xffffffffffffull)) | off << 48;
	return l;
}

/* The records the scenario must write, in order, and each counter's value at the end. */
static void expect(const struct scen *s)
{
	nr_recs = 0;
	for (unsigned int i = 0; i < s->nr_arm; i++) {
		const struct arm *a = &s->arm[i];

		for (uint64_t e = a->first; e <= event_total(a->kind); e += a->step) {
			uint64_t n = event_insn(a->kind, e);
			unsigned int k = 0;

			while (k < nr_recs && recs[k].n < n)
				k++;
			if (k < nr_recs && recs[k].n == n) {
				recs[k].app |= ctr_bit(a->ctr);
				continue;
			}
			if (nr_recs == MAX_RECS)
				break;
			for (unsigned int m = nr_recs; m > k; m--)
				recs[m] = recs[m - 1];
			recs[k] = (struct rec){ n, ctr_bit(a->ctr) };
			nr_recs++;
		}
	}
}

static uint64_t arm_final(const struct arm *a)
{
	uint64_t total = event_total(a->kind);
	uint64_t last = a->first + (total - a->first) / a->step * a->step;

	return (0 - (uint64_t) a->step + (total - last)) & ctr_mask(a->ctr);
}

static void set_fixed_ctrl(uint64_t *fc, unsigned int n, bool pmi, bool adaptive_rec)
{
	*fc |= (pmi ? 0xbull : 0x3ull) << (4 * n);
	if (adaptive_rec)
		*fc |= 1ull << (32 + 4 * n);
}

static void program(const struct scen *s, uint64_t start)
{
	uint64_t global = 0, pebs = 0, fc = 0;

	if (!arch_pebs) {
		uint64_t base = (uint64_t) buf;

		for (unsigned int i = 0; i < DS_QWORDS; i++)
			ds[i] = POISON(i);
		for (unsigned int i = 0; i < 4; i++)
			ds[i] = 0;
		ds[DS_PEBS_BASE / 8] = base;
		ds[DS_PEBS_INDEX / 8] = base + start;
		ds[DS_PEBS_ABS_MAX / 8] = base + buf_len;
		ds[DS_PEBS_THRESHOLD / 8] =
			s->thresh ? base + start + s->thresh : base + buf_len + 1;
		wrmsr(MSR_IA32_DS_AREA, (uint64_t) ds);
		if (adaptive)
			wrmsr(MSR_PEBS_DATA_CFG, s->data_cfg);
	} else {
		wrmsr(MSR_IA32_PEBS_BASE, (uint64_t) buf | ARCH_BASE_SIZE); /* identity map */
		wrmsr(MSR_IA32_PEBS_INDEX,
		      start | INDEX_EN | INDEX_THRESH(s->thresh ? start + s->thresh : 0x7fffff0));
	}
	for (unsigned int i = 0; i < s->nr_arm; i++) {
		const struct arm *a = &s->arm[i];
		uint64_t reset = (0 - (uint64_t) a->step) & ctr_mask(a->ctr);
		uint64_t init = (0 - (uint64_t) a->first) & ctr_mask(a->ctr);

		if (a->ctr >= 32) {
			unsigned int n = a->ctr - 32;

			wrmsr(MSR_CORE_PERF_FIXED_CTR0 + n, init);
			set_fixed_ctrl(&fc, n, true, adaptive && a->adaptive);
			if (arch_pebs)
				wrmsr(MSR_FX_CFG_C(n),
				      CFG_C_EN | s->cfg_c | (reset & CFG_C_RELOAD));
			else
				ds[fixed_slot(n)] = reset;
		} else {
			wrmsr(MSR_IA32_PMC0_FULL + a->ctr, init);
			if (arch_pebs)
				wrmsr(MSR_GP_CFG_C(a->ctr),
				      CFG_C_EN | s->cfg_c | (reset & CFG_C_RELOAD));
			else
				ds[DS_PEBS_GP_RESET(a->ctr) / 8] = reset;
			wrmsr(MSR_IA32_PERFEVTSEL0 + a->ctr,
			      event_code(a->kind) | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT |
				      EVTSEL_EN | (adaptive && a->adaptive ? EVTSEL_ADAPTIVE : 0));
		}
		pebs |= ctr_bit(a->ctr);
	}
	for (unsigned int i = 0; i < s->nr_cnt; i++) {
		const struct count *c = &s->cnt[i];

		if (c->ctr >= 32) {
			wrmsr(MSR_CORE_PERF_FIXED_CTR0 + c->ctr - 32, c->start);
			set_fixed_ctrl(&fc, c->ctr - 32, false, false);
			if (arch_pebs)
				wrmsr(MSR_FX_CFG_C(c->ctr - 32), CFG_C_ALLOW);
		} else {
			wrmsr(MSR_IA32_PMC0_FULL + c->ctr, c->start);
			wrmsr(MSR_IA32_PERFEVTSEL0 + c->ctr,
			      event_code(c->kind) | EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
			if (arch_pebs)
				wrmsr(MSR_GP_CFG_C(c->ctr), CFG_C_ALLOW);
		}
		global |= ctr_bit(c->ctr);
	}
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, fc);
	if (s->lbr && has_lbr)
		wrmsr(MSR_IA32_DEBUGCTL, DEBUGCTL_LBR);
	if (!arch_pebs)
		wrmsr(MSR_IA32_PEBS_ENABLE, pebs);
	global |= pebs;
	tsc0 = rdtsc();
	pebs_seq(global);
	tsc1 = rdtsc();
}

/* ---- record checks ---- */

static unsigned int bad;

static void want(const char *what, uint64_t off, uint64_t got, uint64_t exp)
{
	if (got == exp)
		return;
	printf("  mismatch: %s at +%lx: %lx, want %lx\n", what, off, got, exp);
	bad++;
}

static const char *const gpr_names[16] = {
	"RAX", "RCX", "RDX", "RBX", "RSP", "RBP", "RSI", "RDI",
	"R8",  "R9",  "R10", "R11", "R12", "R13", "R14", "R15",
};

/* Format 3 keeps the registers in the legacy order (Fig 20-10), by register number here */
static const uint8_t f3_gpr_off[16] = {
	0x10, 0x20, 0x28, 0x18, 0x48, 0x40, 0x30, 0x38,
	0x50, 0x58, 0x60, 0x68, 0x70, 0x78, 0x80, 0x88,
};

static void check_gprs(const uint8_t *r, int g, uint64_t n)
{
	const uint64_t exp[16] = {
		V_RAX0 + iter_of(n),
		V_RCX,
		V_RDX,
		V_RBX,
		seq_rsp,
		V_RBP,
		(uint64_t) &seq_data,
		V_RDI,
		V_R8,
		V_R9,
		V_R10,
		V_R11,
		V_R12,
		V_R13,
		V_R14,
		V_R15,
	};

	for (unsigned int i = 0; i < 16; i++) {
		uint64_t off = fmt == 3 ? f3_gpr_off[i] : (uint64_t) g + 0x10 + 8 * i;

		want(gpr_names[i], off, rd64(r + off), exp[i]);
	}
	want("RFLAGS", (uint64_t) g, rd64(r + g), flags_after(n));
	want("RIP (the next instruction)", (uint64_t) g + 8, rd64(r + g + 8), next_ip(n));
}

static uint64_t count_at(const struct count *c, uint64_t n)
{
	return (c->start + events_upto(c->kind, n)) & ctr_mask(c->ctr);
}

static void check_cntr(const struct scen *s, const uint8_t *r, const struct layout *l, uint64_t n)
{
	uint64_t off = (uint64_t) l->cntr;

	want("counters group PMC BitVector", off, rd32(r + off), l->pmc_vec);
	want("counters group FIXED_CTR BitVector", off + 4, rd32(r + off + 4), l->fixed_vec);
	want("counters group Metrics BitVector", off + 8, rd32(r + off + 8), 0);
	want("counters group reserved dword", off + 12, rd32(r + off + 12), 0);
	off += 16;
	/* the PMCs in bit order, then the fixed counters */
	for (unsigned int pass = 0; pass < 2; pass++)
		for (unsigned int b = 0; b < 32; b++) {
			unsigned int ctr = pass ? FIXED(b) : b;
			uint32_t vec = pass ? l->fixed_vec : l->pmc_vec;

			if (!(vec & (1u << b)))
				continue;
			for (unsigned int i = 0; i < s->nr_cnt; i++)
				if (s->cnt[i].ctr == ctr)
					want(pass ? "counters group FIXED_CTR value"
						  : "counters group PMC value",
					     off, rd64(r + off), count_at(&s->cnt[i], n));
			off += 8;
		}
}

static bool counts_loads(const struct scen *s, uint64_t app)
{
	for (unsigned int i = 0; i < s->nr_arm; i++)
		if ((app & ctr_bit(s->arm[i].ctr)) && s->arm[i].kind == EV_LOAD)
			return true;
	return false;
}

/* One record, every field the configuration makes known. */
static void check_record(const struct scen *s, unsigned int idx, const uint8_t *r,
			 const struct layout *l, uint64_t *prev_tsc)
{
	const struct rec *e = &recs[idx];
	uint64_t b = arch_pebs ? 16 : 0; /* the Basic group */
	uint64_t eip_off = fmt == 3 ? 0xb0 : b + 8 * !arch_pebs;
	uint64_t app_off = fmt == 3 ? 0x90 : eip_off + 8;
	uint64_t tsc_off = fmt == 3 ? 0xc0 : eip_off + 16;
	uint64_t tsc = rd64(r + tsc_off);

	bad = 0;
	if (arch_pebs) {
		want("header (size, groups, 64-bit mode)", 0, rd64(r), l->fmt_word);
		want("header reserved qword", 8, rd64(r + 8), 0);
	} else if (fmt != 3) {
		want("Basic[0] (format, size)", 0, rd64(r) & ~(timed ? 0xffff00000000ull : 0),
		     l->fmt_word);
	}
	want("EventingIP", eip_off, rd64(r + eip_off), ip_of(e->n));
	want("Applicable Counters", app_off, rd64(r + app_off), e->app);
	if (tsc < *prev_tsc || tsc < tsc0 || tsc > tsc1) {
		printf("  mismatch: TSC %lx: previous record %lx, run [%lx, %lx]\n", tsc, *prev_tsc,
		       tsc0, tsc1);
		bad++;
	}
	*prev_tsc = tsc;
	if (l->gpr >= 0)
		check_gprs(r, l->gpr, e->n);
	/* a load event's record has the load's address (Table 22-97; 98H in format 3) */
	if (l->mem >= 0 && counts_loads(s, e->app))
		want("Memory Access Address (DLA)", (uint64_t) l->mem, rd64(r + l->mem),
		     (uint64_t) &seq_data);
	if (l->xmm >= 0)
		for (unsigned int x = 0; x < 16; x++) {
			uint64_t off = (uint64_t) l->xmm + 16 * x;

			want("XMM low", off, rd64(r + off), has_sse ? xmm_vals[x][0] : 0);
			want("XMM high", off + 8, rd64(r + off + 8), has_sse ? xmm_vals[x][1] : 0);
		}
	if (l->lbr >= 0)
		for (unsigned int i = 0; i < l->nr_lbr; i++) {
			uint64_t off = (uint64_t) l->lbr + 24 * i;

			/* from TOS back: the loop's jne, taken, in every recent entry */
			want("LBR FROM", off, rd64(r + off), has_lbr ? (uint64_t) seq_jne : 0);
			want("LBR TO", off + 8, rd64(r + off + 8),
			     has_lbr ? (uint64_t) seq_loop : 0);
		}
	if (l->cntr >= 0)
		check_cntr(s, r, l, e->n);
	report(bad == 0,
	       "record %u (+%lx, %lu bytes): instruction #%lu (iteration %u, %s), "
	       "applicable %lx",
	       idx, (uint64_t) (r - buf), l->size, e->n, iter_of(e->n),
	       (const char *[]){ "", "inc", "load", "cmp", "jne" }[step_of(e->n)], e->app);
}

static uint64_t index_now(void)
{
	return arch_pebs ? arch_index() & INDEX_WR : ds[DS_PEBS_INDEX / 8] - (uint64_t) buf;
}

static uint64_t read_ctr(unsigned int ctr)
{
	return ctr >= 32 ? rdmsr(MSR_CORE_PERF_FIXED_CTR0 + ctr - 32)
			 : rdmsr(MSR_IA32_PMC0_FULL + ctr);
}

/*
 * Run scenario s with the buffer at buf (buf_len bytes), records from
 * start on; check every record, the index, the space after, the reloads.
 * upto: check only the first upto records (0: all).
 */
static void run_check(const struct scen *s, uint64_t start, unsigned int upto)
{
	uint64_t off = start, prev_tsc = 0, status, pebs = 0, idx;
	unsigned int n;

	report_prefix(s->name);
	quiesce();
	fill(buf, buf_len);
	expect(s);
	program(s, start);
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	idx = index_now();
	n = upto ? upto : nr_recs;
	for (unsigned int i = 0; i < n; i++) {
		struct layout l = layout_for(s, recs[i].app);

		if (off + l.size > buf_len) {
			report(false, "record %u does not fit the buffer", i);
			break;
		}
		check_record(s, i, buf + off, &l, &prev_tsc);
		off += l.size;
	}
	report(idx == off, "index advanced by exactly %u records: %lx bytes (want %lx)", n, idx,
	       off);
	report(untouched(buf, start) && untouched(buf + off, buf_len - off),
	       "nothing written before the first record or after the last");
	for (unsigned int i = 0; i < s->nr_arm; i++)
		pebs |= ctr_bit(s->arm[i].ctr);
	if (upto)
		return;
	report(!(status & (pebs | GLOBAL_STATUS_BUFFER_OVF)) && pmis == 0,
	       "GLOBAL_STATUS %lx: no PEBS counter overflow bit, no OvfBuffer, no PMI (%u)", status,
	       pmis);
	for (unsigned int i = 0; i < s->nr_arm; i++) {
		const struct arm *a = &s->arm[i];
		uint64_t got = read_ctr(a->ctr);

		report(got == arm_final(a), "%s %u reloaded from %s: %lx (want %lx)",
		       a->ctr >= 32 ? "fixed" : "GP", a->ctr % 32,
		       arch_pebs ? "CFG_C.RELOAD_VALUE" : "its DS reset slot", got, arm_final(a));
	}
}

/* ---- the scenarios ---- */

static void several_counters(void)
{
	/*
	 * GP0 instructions: the load of iterations 5, 11, 17, 23, 29;
	 * GP1 branches: iterations 7, 13, 19, 25; GP2 loads: iteration 11,
	 * with GP0 (DS formats: one record for both), iteration 9 on arch
	 * PEBS, where the SDM does not say; fixed 0: the cmp of 3, 12, 21, 30.
	 */
	struct scen s = {
		.name = "several counters: ",
		.arm = {
			{ 0, EV_INST, PRE + PER * 4 + K_LD, PER * 6, true },
			{ 1, EV_BRANCH, 7, 6, true },
			{ 2, EV_LOAD, arch_pebs ? 9 : 11, 1000, true },
			{ FIXED(0), EV_INST, PRE + PER * 2 + K_CMP, PER * 9, true },
		},
		.nr_arm = fmt == 3 ? 3 : 4,
		.data_cfg = DC_GPR | DC_XMM,
		.cfg_c = CFG_C_GPR | CFG_C_XMM,
	};

	buf = pebs_buf;
	buf_len = sizeof(pebs_buf);
	ds = ds_mem;
	run_check(&s, 0, 0);
}

static void threshold(void)
{
	struct scen s = {
		.name = "threshold PMI: ",
		/* the loads of iterations 5 and 11; nothing in the PMI handler */
		.arm = { { 1, EV_INST, PRE + PER * 4 + K_LD, 100000, true },
			 { 2, EV_LOAD, 11, 100000, true } },
		.nr_arm = 2,
		.data_cfg = DC_GPR,
		.cfg_c = CFG_C_GPR,
	};
	struct layout l = layout_for(&s, 4);

	/* crossed, not met exactly, by the second record */
	s.thresh = l.size + 16;
	buf = pebs_buf;
	buf_len = sizeof(pebs_buf);
	ds = ds_mem;
	run_check(&s, 0, 2);
	printf("threshold at +%lx: %u PMI(s), frame RIP %lx, GLOBAL_STATUS %lx, index %lx\n",
	       s.thresh, pmis, pmi_rip, pmi_status, pmi_index);
	report(pmis == 1, "exactly one PMI (%u)", pmis);
	report(pmi_status == GLOBAL_STATUS_BUFFER_OVF,
	       "GLOBAL_STATUS %lx in the PMI: OvfBuffer (bit 62) alone, the counter's bit cleared",
	       pmi_status);
	report(pmi_index - (arch_pebs ? 0 : (uint64_t) buf) == 2 * l.size,
	       "the PMI comes with the second record in the buffer, not the first");
	report(pmi_rip == next_ip(recs[1].n),
	       "PMI right after the eventing instruction: %lx (want %lx)", pmi_rip,
	       next_ip(recs[1].n));
	report(pmi_status_after == 0, "GLOBAL_STATUS_RESET bit 62 clears it: %lx",
	       pmi_status_after);
}

static void combinations(void)
{
	char name[] = "DATA_CFG xx: ";
	bool lbr_group;

	quiesce();
	lbr_group = wrmsr_safe(MSR_PEBS_DATA_CFG, DC_LBR | DC_LBR_ENTRIES(NR_LBR)) == 0;
	printf("DATA_CFG LBRs: %s; LBR values %s\n", lbr_group ? "writable" : "#GP",
	       has_lbr ? "from the LBR stack (DEBUGCTL.LBR)" : "none (zero entries)");
	/* vpmu's policy: the LBR group exists exactly when the model has LBRs to put in it */
	report_prefix("DATA_CFG: ");
	report(lbr_group == has_lbr,
	       "LBRs (bit 3, entries 31:24) writable exactly when "
	       "PERF_CAPABILITIES.LBR_FMT is non-zero: %s, LBR_FMT %lu",
	       lbr_group ? "writable" : "#GP", (unsigned long) PERF_CAP_LBR_FMT(perf_cap));
	if (!lbr_group)
		report_skip("the 8 combinations with LBRs: no LBRs on this model");

	for (unsigned int g = 0; g < 16; g++) {
		struct scen s = {
			.name = name,
			/* the loads of iterations 6, 15, 24 */
			.arm = { { 0, EV_LOAD, 6, 9, true } },
			.nr_arm = 1,
			.data_cfg = g | (g & DC_LBR ? DC_LBR_ENTRIES(NR_LBR) : 0),
		};

		name[9] = "0123456789abcdef"[g >> 4];
		name[10] = "0123456789abcdef"[g & 15];
		buf = pebs_buf;
		buf_len = sizeof(pebs_buf);
		ds = ds_mem;
		if ((g & DC_LBR) && !lbr_group)
			continue;
		s.lbr = true;
		run_check(&s, 0, 0);
	}
}

/* Architectural PEBS: each counter selects its groups in CFG_C; all 8 of Aux, GPRs, XER */
static void arch_combinations(void)
{
	static const uint64_t sel[3] = { CFG_C_AUX, CFG_C_GPR, CFG_C_XMM };
	char name[] = "CFG_C groups x: ";

	for (unsigned int g = 0; g < 8; g++) {
		struct scen s = {
			.name = name,
			.arm = { { 0, EV_LOAD, 6, 9, true } },
			.nr_arm = 1,
		};

		for (unsigned int i = 0; i < 3; i++)
			if (g & (1u << i))
				s.cfg_c |= sel[i];
		name[13] = (char) ('0' + g);
		buf = pebs_buf;
		buf_len = sizeof(pebs_buf);
		run_check(&s, 0, 0);
	}
}

static void non_adaptive(void)
{
	struct scen basic = {
		.name = "no Adaptive_Record: ",
		.arm = { { 3, EV_LOAD, 6, 9, false }, { FIXED(0), EV_INST, 30, 40, false } },
		.nr_arm = 2,
		.data_cfg = DC_MEM | DC_GPR | DC_XMM,
	};
	struct scen mixed = {
		.name = "one of two with Adaptive_Record: ",
		/* GP0 and GP3 on the same loads; GP3 alone on the load of 20 */
		.arm = { { 0, EV_LOAD, 6, 9, true }, { 3, EV_LOAD, 6, 14, false } },
		.nr_arm = 2,
		.data_cfg = DC_MEM | DC_GPR,
	};

	buf = pebs_buf;
	buf_len = sizeof(pebs_buf);
	ds = ds_mem;
	run_check(&basic, 0, 0);
	run_check(&mixed, 0, 0);
}

static void counters_group(void)
{
	struct scen s = {
		.name = "counters group: ",
		.arm = { { 0, EV_LOAD, 6, 9, true } },
		.nr_arm = 1,
		.cnt = {
			{ 1, EV_INST, 0x100000 },
			{ 2, EV_BRANCH, 0x200000 },
			{ FIXED(0), EV_INST, 0x300000 },
		},
		.nr_cnt = 3,
		.data_cfg = DC_GPR | DC_CNTR | DC_PMC(1) | DC_PMC(2) | DC_FIXED(0),
		.cfg_c = CFG_C_GPR | CFG_C_CNTR_GP | CFG_C_CNTR_FX,
	};

	buf = pebs_buf;
	buf_len = sizeof(pebs_buf);
	ds = ds_mem;
	run_check(&s, 0, 0);
}

/*
 * The DS area at HI_DS + 0xfd0 over two pages (header on one, reset slots
 * on the next), the buffer at HI_BUF over two pages mapped in reverse
 * physical order; records start so that the third one straddles them.
 */
static void unusual_addresses(void)
{
	struct scen s = {
		.name = "high, split DS and buffer: ",
		.arm = {
			{ 0, EV_INST, PRE + PER * 4 + K_LD, PER * 6, true },
			{ 1, EV_BRANCH, 7, 6, true },
			{ 2, EV_LOAD, 11, 1000, true },
			{ FIXED(0), EV_INST, PRE + PER * 2 + K_CMP, PER * 9, true },
		},
		.nr_arm = fmt == 3 ? 3 : 4,
		.data_cfg = DC_GPR,
	};
	struct layout l = layout_for(&s, 1);
	uint64_t start = (0x1000 - 5 * l.size / 2) & ~7ull;

	map_page(HI_DS, (uint64_t) pages[2], PTE_W);
	map_page(HI_DS + 0x1000, (uint64_t) pages[0], PTE_W);
	map_page(HI_BUF, (uint64_t) pages[4], PTE_W);
	map_page(HI_BUF + 0x1000, (uint64_t) pages[1], PTE_W);
	for (unsigned int i = 0; i < 6; i++)
		fill(pages[i], 4096);
	ds = (volatile uint64_t *) (HI_DS + 0x1000 - 0x30);
	buf = (uint8_t *) HI_BUF;
	buf_len = 0x2000;
	printf("DS area at %p, PEBS buffer at %p (pages at %p and %p), first record at +%lx\n",
	       (void *) ds, (void *) buf, (void *) pages[4], (void *) pages[1], start);
	run_check(&s, start, 0);
	report(untouched(pages[3], 4096) && untouched(pages[5], 4096),
	       "the pages physically after the buffer's are untouched");
	report(rd64(pages[4] + 0xff8) != FILL && rd64(pages[1]) != FILL,
	       "the straddling record's bytes are on both physical pages");
	ds = ds_mem;
	buf = pebs_buf;
	wrmsr(MSR_IA32_DS_AREA, (uint64_t) ds_mem);
}

/* The emulator says so in its brand string. */
static bool on_exact_emulator(void)
{
	return cpu_brand_has("exact counting emulator");
}

int main(uint64_t arg)
{
	struct cpuid_regs r;
	uint64_t cr4;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	report_prefix("pebs-all: ");
	r = cpuid_regs(0xa, 0);
	nr_gp = (r.a >> 8) & 0xff;
	gp_mask = (1ull << ((r.a >> 16) & 0xff)) - 1;
	nr_fixed = r.d & 0x1f;
	fixed_mask = (1ull << ((r.d >> 5) & 0xff)) - 1;
	if (cpuid_regs(1, 0).c & (1u << 15))
		perf_cap = rdmsr(MSR_IA32_PERF_CAPABILITIES);
	fmt = PERF_CAP_PEBS_FORMAT(perf_cap);
	if (cpuid_regs(0, 0).a >= 0x23 && (r.a & 0xff) >= 6) {
		arch_pebs = (cpuid_regs(0x23, 0).a & 0x30) == 0x30;
		/* CPUID.23H.04H:EBX = the CFG_C bits 63:32 accepted: CNTR_GP, CNTR_FIXED */
		arch_cntr = arch_pebs && (cpuid_regs(0x23, 4).b & 0x30) == 0x30;
	}
	adaptive = fmt >= 4 && fmt <= 6;
	timed = perf_cap & PERF_CAP_TIMING_INFO;
	has_lbr = !arch_pebs && PERF_CAP_LBR_FMT(perf_cap) != 0;
	__asm__ volatile("mov %%cr4, %0" : "=r"(cr4));
	has_sse = cr4 & (1ull << 9); /* OSFXSR: else the XMM group reads 0 (Table 22-100) */
	for (unsigned int i = 0; i < 16; i++) {
		xmm_vals[i][0] = 0x0123456789abcd00ull | i;
		xmm_vals[i][1] = 0xfedcba9876543200ull | i << 4;
	}
	printf("PERF_CAPABILITIES %lx: PEBS format %u, arch PEBS %d (counters group %d), timed %d, "
	       "LBRs %d; %u GP (%lx), %u fixed (%lx); loop at %p\n",
	       perf_cap, fmt, arch_pebs, arch_cntr, timed, has_lbr, nr_gp, gp_mask, nr_fixed,
	       fixed_mask, (void *) seq_loop);
	if (!arch_pebs && (fmt < 3 || fmt > 6)) {
		report_skip("no PEBS format this program knows (%u)", fmt);
		return report_summary();
	}
	report(nr_gp >= 4 && nr_fixed >= 1, "at least 4 GP and 1 fixed counter");
	if (!on_exact_emulator()) {
		/* with skid (KVM: §22.9.5) the records are not where the counts put them */
		report_skip("not the exact-counting emulator: every check here needs exact counts");
		return report_summary();
	}
	sti();

	several_counters();
	threshold();
	report_prefix("groups: ");
	if (adaptive) {
		combinations();
		non_adaptive();
	} else if (arch_pebs) {
		arch_combinations();
	} else {
		report_skip("PEBS format 3: no DATA_CFG groups");
	}
	report_prefix("counters group: ");
	if (fmt == 6 || arch_cntr)
		counters_group();
	else
		report_skip("PEBS format %u has no counters group", fmt);
	report_prefix("unusual addresses: ");
	if (!arch_pebs)
		unusual_addresses();
	else
		report_skip("architectural PEBS has no DS area: the buffer is physical");
	quiesce();
	report_prefix("");
	return report_summary();
}
