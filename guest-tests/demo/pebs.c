/* SPDX-License-Identifier: MIT */
/*
 * PEBS records as the guest sees them, field by field, for legacy format 3
 * (Skylake-Server) and adaptive format 4 (Icelake-Server). The sampled
 * code is pebs_seq below: it enables counting with its first instruction,
 * loads a distinctive value into every GPR, then runs a 3-instruction loop
 * LOOPS times, so the N-th counted instruction and the register state
 * after it are known exactly:
 *   #1 wrmsr GLOBAL_CTRL   #2..#16 movabs into the 15 GPRs besides RSP
 *   then per iteration j (1-based): inc %rax (seq_loop), cmp (seq_cmp), jne
 *   then 3 more instructions and the wrmsr that stops counting (not counted).
 * A counter preset to -OVF_AT overflows on iteration OVF_ITER's inc: the
 * record's EventingIP is seq_loop, its RIP seq_cmp (trap-like), RAX is
 * RAX0 + OVF_ITER. SDM Vol. 3B 20.4.9 (DS save area, Fig 20-8, Fig 20-10),
 * 22.9.2 (adaptive PEBS, Tables 22-96 and 22-99).
 */
#include "guest.h"
#include "vpmu/pebs.h"

#define PMI_VECTOR 0xf0

#define LOOPS	 100
#define OVF_ITER 50
#define PRE_LOOP 16 /* wrmsr + 15 movabs */
#define OVF_AT	 (PRE_LOOP + 3 * (OVF_ITER - 1) + 1)
#define TOTAL	 (PRE_LOOP + 3 * LOOPS + 3)
#define AFTER	 (TOTAL - OVF_AT) /* counted after the overflow */

#define V_RAX0	0xa0a0a0a0a0a00000
#define V_RBX	0xa0a0a0a0a0a00064 /* V_RAX0 + LOOPS: the loop's end */
#define V_RCX	0xc1c1c1c1c1c1c1c1
#define V_RDX	0xd1d1d1d1d1d1d1d1
#define V_RSI	0x5151515151515151
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
_Static_assert(OVF_AT == 164 && AFTER == 155, "instruction arithmetic");

/* DS save area, 64-bit layout (Fig 20-8; fixed reset slots at 80H for format 4) */

/* Format 3 (Fig 20-10 and its PEBS_FMT 3 extension) */
#define F3_RFLAGS      0x00
#define F3_RIP	       0x08
#define F3_APPLICABLE  0x90
#define F3_EVENTING_IP 0xb0
#define F3_TSC	       0xc0
#define F3_SIZE	       200
/* Adaptive (Tables 22-96, 22-99): Basic group then the GPR group */
#define A_FORMAT      0x00
#define A_EVENTING_IP 0x08
#define A_APPLICABLE  0x10
#define A_TSC	      0x18
#define A_BASIC_SIZE  32
#define A_GPRS	      A_BASIC_SIZE
#define A_GPRS_SIZE   144
#define DATA_CFG_GPRS (1ull << 1)

#define FILL 0x5a5a5a5a5a5a5a5aull

void pebs_seq(uint64_t global_ctrl);
extern char seq_loop[], seq_cmp[], seq_end[];
extern uint64_t seq_rsp;
uint64_t seq_rsp;

/* clang-format off */
__asm__(".text\n"
	".globl pebs_seq\n"
	"pebs_seq:\n\t"
	"push %rbx\n\tpush %rbp\n\tpush %r12\n\tpush %r13\n\tpush %r14\n\tpush %r15\n\t"
	"mov %rsp, seq_rsp(%rip)\n\t"
	"mov %rdi, %rax\n\t"
	"mov %rdi, %rdx\n\t"
	"shr $32, %rdx\n\t"
	"mov $0x38f, %ecx\n\t"
	"wrmsr\n\t"
	"movabs $" STR(V_RAX0) ", %rax\n\t"
	"movabs $" STR(V_RBX) ", %rbx\n\t"
	"movabs $" STR(V_RCX) ", %rcx\n\t"
	"movabs $" STR(V_RDX) ", %rdx\n\t"
	"movabs $" STR(V_RSI) ", %rsi\n\t"
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
	".globl seq_cmp\n"
	"seq_cmp:\n\t"
	"cmp %rax, %rbx\n\t"
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

static volatile uint64_t ds_area[32] __attribute__((aligned(64)));
static volatile uint8_t pebs_buf[4096] __attribute__((aligned(4096)));

static unsigned int fmt;
static uint64_t gp_mask, fixed_mask;
static uint64_t tsc0, tsc1;

static volatile unsigned int pmis;
static volatile uint64_t pmi_status, pmi_status_after, pmi_rip, pmi_index;

static void on_pmi(struct frame *f)
{
	pmis++;
	pmi_rip = f->rip;
	pmi_index = ds_area[DS_PEBS_INDEX / 8];
	pmi_status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, pmi_status);
	pmi_status_after = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	apic_eoi();
}

static uint64_t rec64(uint64_t off)
{
	return *(volatile uint64_t *) (pebs_buf + off);
}

/* An empty (pattern-filled) 4 KiB buffer, the threshold `thresh` bytes in. */
static void ds_setup(uint64_t thresh)
{
	uint64_t base = (uint64_t) pebs_buf;

	for (unsigned int i = 0; i < sizeof(pebs_buf); i += 8)
		*(volatile uint64_t *) (pebs_buf + i) = FILL;
	for (unsigned int i = 0; i < 32; i++)
		ds_area[i] = 0;
	ds_area[DS_PEBS_BASE / 8] = base;
	ds_area[DS_PEBS_INDEX / 8] = base;
	ds_area[DS_PEBS_ABS_MAX / 8] = base + sizeof(pebs_buf);
	ds_area[DS_PEBS_THRESHOLD / 8] = base + thresh;
	wrmsr(MSR_IA32_DS_AREA, (uint64_t) ds_area);
}

static void quiesce(void)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	wrmsr(MSR_IA32_PEBS_ENABLE, 0);
	if (fmt >= 4)
		wrmsr(MSR_PEBS_DATA_CFG, 0); /* no such MSR before format 4: #GP */
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0);
	for (unsigned int i = 0; i < 4; i++)
		wrmsr(MSR_IA32_PERFEVTSEL0 + i, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
	wrmsr(MSR_LVT_PMI, PMI_VECTOR);
	pmis = 0;
}

/* GP counter `ctr` overflows on instruction OVF_AT, then reloads `reset`. */
static void arm_gp(unsigned int ctr, uint64_t event, uint64_t reset)
{
	wrmsr(MSR_IA32_PMC0_FULL + ctr, (0 - (uint64_t) OVF_AT) & gp_mask);
	ds_area[DS_PEBS_GP_RESET(ctr) / 8] = reset & gp_mask;
	wrmsr(MSR_IA32_PERFEVTSEL0 + ctr, event | EVTSEL_USR | EVTSEL_OS | EVTSEL_INT | EVTSEL_EN);
}

static void run(uint64_t global_ctrl)
{
	tsc0 = rdtsc();
	pebs_seq(global_ctrl);
	tsc1 = rdtsc();
}

/* RFLAGS after iteration j's inc: SF, PF, AF from the result; CF 0 from the last cmp; IF. */
static uint64_t rflags_after_inc(uint64_t rax)
{
	uint64_t f = 0x202 | 0x80;
	uint8_t low = (uint8_t) rax;

	if (!(__builtin_popcount(low) & 1))
		f |= 0x4;
	if (((rax - 1) ^ rax) & 0x10)
		f |= 0x10;
	return f;
}

static const char *const gpr_names[16] = {
	"RAX", "RCX", "RDX", "RBX", "RSP", "RBP", "RSI", "RDI",
	"R8",  "R9",  "R10", "R11", "R12", "R13", "R14", "R15",
};

static void check_gprs(uint64_t rec)
{
	const uint64_t want[16] = {
		V_RAX0 + OVF_ITER,
		V_RCX,
		V_RDX,
		V_RBX,
		seq_rsp,
		V_RBP,
		V_RSI,
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
	uint64_t base = fmt == 3 ? 0 : A_GPRS;

	for (unsigned int r = 0; r < 16; r++) {
		uint64_t off = rec + (fmt == 3 ? pebs3_gpr_offset(r) : base + 0x10 + 8 * r);
		uint64_t got = rec64(off);

		report(got == want[r], "%s at +%lx: %lx (want %lx)", gpr_names[r], off - rec, got,
		       want[r]);
	}
	report(rec64(rec + (fmt == 3 ? F3_RFLAGS : A_GPRS)) == rflags_after_inc(V_RAX0 + OVF_ITER),
	       "RFLAGS after the eventing instruction: %lx (want %lx)",
	       rec64(rec + (fmt == 3 ? F3_RFLAGS : A_GPRS)), rflags_after_inc(V_RAX0 + OVF_ITER));
	report(rec64(rec + (fmt == 3 ? F3_RIP : A_GPRS + 8)) == (uint64_t) seq_cmp,
	       "RIP = the next instruction (seq_cmp %p): %lx", (void *) seq_cmp,
	       rec64(rec + (fmt == 3 ? F3_RIP : A_GPRS + 8)));
}

static uint64_t size_with_gprs(void)
{
	return fmt == 3 ? F3_SIZE : A_BASIC_SIZE + A_GPRS_SIZE;
}

/* The fields every format has: EventingIP, Applicable Counters, TSC. */
static void check_basic(uint64_t rec, uint64_t applicable)
{
	uint64_t eip = rec64(rec + (fmt == 3 ? F3_EVENTING_IP : A_EVENTING_IP));
	uint64_t app = rec64(rec + (fmt == 3 ? F3_APPLICABLE : A_APPLICABLE));
	uint64_t tsc = rec64(rec + (fmt == 3 ? F3_TSC : A_TSC));

	report(eip == (uint64_t) seq_loop, "EventingIP = the overflowing inc (seq_loop %p): %lx",
	       (void *) seq_loop, eip);
	report(app == applicable, "Applicable Counters %lx (want %lx)", app, applicable);
	report(tsc >= tsc0 && tsc <= tsc1, "TSC %lx within the run [%lx, %lx]", tsc, tsc0, tsc1);
}

static void check_index(uint64_t size)
{
	uint64_t adv = ds_area[DS_PEBS_INDEX / 8] - (uint64_t) pebs_buf;

	report(adv == size, "PEBS index advanced by one record: %lu bytes (want %lu)", adv, size);
	report(rec64(size) == FILL, "nothing written past the record");
}

static void one_counter(void)
{
	uint64_t reset = 0 - 1000ull, status, ctr;

	report_prefix(fmt == 3 ? "fmt3 one counter: " : "fmt4 one counter: ");
	quiesce();
	ds_setup(sizeof(pebs_buf));
	if (fmt == 3) {
		arm_gp(0, 0x1c0, reset); /* INST_RETIRED.PREC_DIST */
	} else {
		wrmsr(MSR_PEBS_DATA_CFG, DATA_CFG_GPRS);
		arm_gp(0, 0xc0 | EVTSEL_ADAPTIVE, reset); /* INST_RETIRED.ANY_P */
	}
	wrmsr(MSR_IA32_PEBS_ENABLE, 1);
	run(1);
	ctr = rdmsr(MSR_IA32_PMC0_FULL);
	status = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	printf("%s record at %p: EventingIP %lx, RIP %lx, RAX %lx, counter after %lx\n",
	       fmt == 3 ? "format 3" : "format 4", (void *) pebs_buf,
	       rec64(fmt == 3 ? F3_EVENTING_IP : A_EVENTING_IP),
	       rec64(fmt == 3 ? F3_RIP : A_GPRS + 8), rec64(fmt == 3 ? 0x10 : A_GPRS + 0x10), ctr);
	check_index(size_with_gprs());
	if (fmt != 3)
		report(rec64(A_FORMAT) == (DATA_CFG_GPRS | (size_with_gprs() << 48)),
		       "Basic[0]: format %lx size %lu (want format 2, size 176)",
		       rec64(A_FORMAT) & ((1ul << 48) - 1), rec64(A_FORMAT) >> 48);
	check_basic(0, 1);
	check_gprs(0);
	report(ctr == ((reset + AFTER) & gp_mask),
	       "counter reloaded from the DS reset slot: %lx (want -1000 + %u = %lx)", ctr, AFTER,
	       (reset + AFTER) & gp_mask);
	report(!(status & (1 | GLOBAL_STATUS_BUFFER_OVF)),
	       "GLOBAL_STATUS %lx: no overflow bit, no OvfBuffer below the threshold", status);
	report(pmis == 0, "no PMI below the threshold");
}

static void two_counters(void)
{
	uint64_t ev = fmt == 3 ? 0x1c0 : 0xc0 | EVTSEL_ADAPTIVE;
	uint64_t c0, c2;

	report_prefix(fmt == 3 ? "fmt3 two counters: " : "fmt4 two counters: ");
	quiesce();
	ds_setup(sizeof(pebs_buf));
	if (fmt != 3)
		wrmsr(MSR_PEBS_DATA_CFG, DATA_CFG_GPRS);
	arm_gp(0, ev, 0 - 1000ull);
	arm_gp(2, ev, 0 - 2000ull);
	wrmsr(MSR_IA32_PEBS_ENABLE, 1 | 4);
	run(1 | 4);
	c0 = rdmsr(MSR_IA32_PMC0_FULL);
	c2 = rdmsr(MSR_IA32_PMC0_FULL + 2);
	check_index(size_with_gprs());
	check_basic(0, 1 | 4);
	report(c0 == ((0 - 1000ull + AFTER) & gp_mask), "GP0 reloaded from 40H: %lx", c0);
	report(c2 == ((0 - 2000ull + AFTER) & gp_mask), "GP2 reloaded from 50H: %lx", c2);
}

static void threshold_pmi(void)
{
	uint64_t size = size_with_gprs();

	report_prefix(fmt == 3 ? "fmt3 threshold: " : "fmt4 threshold: ");
	quiesce();
	ds_setup(size); /* the first record reaches the threshold */
	if (fmt != 3)
		wrmsr(MSR_PEBS_DATA_CFG, DATA_CFG_GPRS);
	arm_gp(1, fmt == 3 ? 0x1c0 : 0xc0 | EVTSEL_ADAPTIVE, 0 - 1000ull);
	wrmsr(MSR_IA32_PEBS_ENABLE, 2);
	run(2);
	printf("threshold PMI: %u PMI(s), frame RIP %lx, GLOBAL_STATUS %lx, after reset %lx\n",
	       pmis, pmi_rip, pmi_status, pmi_status_after);
	report(pmis == 1, "exactly one PMI");
	report(pmi_status & GLOBAL_STATUS_BUFFER_OVF,
	       "GLOBAL_STATUS.OvfBuffer (bit 62) in the PMI");
	report(pmi_index == (uint64_t) pebs_buf + size,
	       "the record is in the buffer when the PMI comes");
	report(pmi_rip > (uint64_t) seq_loop && pmi_rip <= (uint64_t) seq_end,
	       "PMI after the eventing instruction, inside the sequence");
	report(pmi_status_after == 0, "GLOBAL_STATUS_RESET with bit 62 clears GLOBAL_STATUS");
	report(rec64(fmt == 3 ? F3_EVENTING_IP : A_EVENTING_IP) == (uint64_t) seq_loop,
	       "EventingIP of the record");
	report(rec64(fmt == 3 ? F3_APPLICABLE : A_APPLICABLE) == 2, "Applicable Counters = GP1");
}

static void basic_only(void)
{
	report_prefix("fmt4 basic only: ");
	quiesce();
	ds_setup(sizeof(pebs_buf));
	/* DATA_CFG asks for GPRs, but the counter has no Adaptive_Record */
	wrmsr(MSR_PEBS_DATA_CFG, DATA_CFG_GPRS);
	arm_gp(0, 0xc0, 0 - 1000ull);
	wrmsr(MSR_IA32_PEBS_ENABLE, 1);
	run(1);
	report(rec64(A_FORMAT) == (uint64_t) A_BASIC_SIZE << 48,
	       "Basic[0] = %lx: format 0, size 32", rec64(A_FORMAT));
	check_index(A_BASIC_SIZE);
	check_basic(0, 1);
}

static void fixed0(void)
{
	uint64_t reset = 0 - 3000ull, ctr;

	report_prefix("fmt4 fixed 0: ");
	quiesce();
	ds_setup(sizeof(pebs_buf));
	wrmsr(MSR_PEBS_DATA_CFG, DATA_CFG_GPRS);
	wrmsr(MSR_CORE_PERF_FIXED_CTR0, (0 - (uint64_t) OVF_AT) & fixed_mask);
	ds_area[DS_PEBS_FIXED_RESET(fmt, 0) / 8] = reset & fixed_mask;
	/* OS + USR + PMI, Adaptive_Record (bit 32) */
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0xb | (1ull << 32));
	wrmsr(MSR_IA32_PEBS_ENABLE, 1ull << 32);
	run(1ull << 32);
	ctr = rdmsr(MSR_CORE_PERF_FIXED_CTR0);
	check_index(size_with_gprs());
	report(rec64(A_FORMAT) == (DATA_CFG_GPRS | (size_with_gprs() << 48)),
	       "Basic[0] = %lx: format 2, size 176", rec64(A_FORMAT));
	check_basic(0, 1ull << 32);
	report(rec64(A_GPRS + 8) == (uint64_t) seq_cmp, "GPR group RIP = seq_cmp: %lx",
	       rec64(A_GPRS + 8));
	report(rec64(A_GPRS + 0x10) == V_RAX0 + OVF_ITER, "GPR group RAX: %lx",
	       rec64(A_GPRS + 0x10));
	report(ctr == ((reset + AFTER) & fixed_mask),
	       "fixed counter 0 reloaded from 80H: %lx (want -3000 + %u = %lx)", ctr, AFTER,
	       (reset + AFTER) & fixed_mask);
}

int main(uint64_t arg)
{
	uint32_t r[4];
	uint64_t cap;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	x2apic_enable();
	cpuid(0xa, 0, r);
	gp_mask = (1ull << ((r[0] >> 16) & 0xff)) - 1;
	fixed_mask = (1ull << ((r[3] >> 5) & 0xff)) - 1;
	cpuid(1, 0, r);
	cap = r[2] & (1u << 15) ? rdmsr(MSR_IA32_PERF_CAPABILITIES) : 0;
	fmt = PERF_CAP_PEBS_FORMAT(cap);
	printf("PERF_CAPABILITIES %lx: PEBS format %u; GP counters %lx, fixed %lx; sequence at "
	       "%p\n",
	       cap, fmt, gp_mask, fixed_mask, (void *) pebs_seq);
	report(fmt == 3 || fmt == 4, "PEBS format 3 or 4");
	if (fmt != 3 && fmt != 4)
		return report_summary();
	sti();

	one_counter();
	two_counters();
	threshold_pmi();
	if (fmt == 4) {
		basic_only();
		fixed0();
	}
	quiesce();
	report_prefix("");
	return report_summary();
}
