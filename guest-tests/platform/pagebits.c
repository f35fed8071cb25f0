/* SPDX-License-Identifier: MIT */
/*
 * The page bits as hardware enforces them (SDM Vol. 3A 4.6, 4.7, 4.8),
 * from ring 0 and ring 3:
 * - a CPL-3 read or write of a supervisor page (U/S = 0) is #PF with
 *   error code P|U (5) or P|W|U (7), CR2 the address, RIP the access;
 *   the same page was read at CPL 0 just before, so a translation made
 *   then must not let CPL 3 through;
 * - a CPL-3 write to a read-only user page: P|W|U (7);
 * - with EFER.NXE, an instruction fetch from an XD page is #PF with
 *   P|I/D (0x11), CR2 = RIP = the target;
 * - Accessed is set on every paging-structure entry a walk uses and on
 *   the page; Dirty on the page at the first write, also when a read
 *   mapped it first (4.8);
 * - SYSCALL from ring 3 enters LSTAR at CPL 0 with RCX = the return
 *   address, R11 = RFLAGS, RFLAGS masked by IA32_FMASK, CS/SS from STAR;
 *   SYSRET comes back to ring 3 (SDM Vol. 2B SYSCALL, SYSRET);
 * - code modified through another linear mapping of its page, as Linux's
 *   text_poke does, runs as modified (SDM Vol. 3A 8.1.3: a processor
 *   detects writes to code by physical address; after the write the
 *   program executes the new code once it has serialized), and so does
 *   code modified through its own mapping.
 */
#include "guest.h"

#define USER_BACK  0x81 /* INT vector, DPL 3: back to ring 0 */
#define MSR_EFER   0xc0000080
#define MSR_STAR   0xc0000081
#define MSR_LSTAR  0xc0000082
#define MSR_FMASK  0xc0000084
#define EFER_SCE   (1ull << 0)
#define EFER_NXE   (1ull << 11)
#define PTE_A	   (1ull << 5)
#define PTE_D	   (1ull << 6)
#define PTE_XD	   (1ull << 63)
#define VA_SUP	   0x40000000ull /* a supervisor data page */
#define VA_USER_RO 0x40001000ull /* a read-only user page */
#define VA_NX	   0x40002000ull /* an XD code page */
#define VA_AD	   0x40003000ull /* fresh, for Accessed/Dirty */
#define VA_AD2	   0x40203000ull /* another PDE, fresh tables */
#define VA_CODE	   0x40400000ull /* code page, run from here */
#define VA_POKE	   0x40600000ull /* the same page, written through here */
#define VA_NOPAGE  0x40800000ull /* never mapped */

static uint8_t data_pages[5][4096] __attribute__((aligned(4096)));
uint64_t ring0_rsp, user_ret;
uint64_t sys_rcx, sys_r11, sys_cs, sys_ss, sys_rflags;

/*
 * user_call(fn, arg): run fn(arg) at CPL 3 (its code in the user page,
 * its stack user_stack) until it executes INT USER_BACK; returns its RAX.
 * The gate restores ring 0 (RSP, segments, callee-saved registers).
 */
uint64_t user_call(uint64_t fn, uint64_t arg);
extern char user_gate[], user_page[], u_read[], u_write[], u_write_ro[], u_syscall[],
	u_after_syscall[], u_bail[], k_syscall[];

/* clang-format off */
__asm__(".pushsection .text\n"
	".globl user_call\n"
	"user_call:\n\t"
	"push %rbx\n\t"
	"push %rbp\n\t"
	"push %r12\n\t"
	"push %r13\n\t"
	"push %r14\n\t"
	"push %r15\n\t"
	"pushfq\n\t"
	"mov %rsp, ring0_rsp(%rip)\n\t"
	"mov $" xstr(USER_DS) ", %eax\n\t"
	"mov %eax, %ds\n\t"
	"mov %eax, %es\n\t"
	"pushq $" xstr(USER_DS) "\n\t"
	"lea user_stack+4096(%rip), %rax\n\t"
	"push %rax\n\t"
	"pushq $2\n\t"
	"pushq $" xstr(USER_CS) "\n\t"
	"push %rdi\n\t"
	"mov %rsi, %rdi\n\t"
	"iretq\n"

	".globl user_gate\n"
	"user_gate:\n\t"
	"mov %rax, user_ret(%rip)\n\t"
	"mov $" xstr(KERNEL_DS) ", %eax\n\t"
	"mov %eax, %ds\n\t"
	"mov %eax, %es\n\t"
	"mov %eax, %ss\n\t"
	"mov ring0_rsp(%rip), %rsp\n\t"
	"popfq\n\t"
	"pop %r15\n\t"
	"pop %r14\n\t"
	"pop %r13\n\t"
	"pop %r12\n\t"
	"pop %rbp\n\t"
	"pop %rbx\n\t"
	"mov user_ret(%rip), %rax\n\t"
	"ret\n"

	/* SYSCALL lands here at CPL 0, on the user's stack: record, add 1, SYSRET */
	".globl k_syscall\n"
	"k_syscall:\n\t"
	"mov %rcx, sys_rcx(%rip)\n\t"
	"mov %r11, sys_r11(%rip)\n\t"
	"mov %cs, %rdx\n\t"
	"mov %rdx, sys_cs(%rip)\n\t"
	"mov %ss, %rdx\n\t"
	"mov %rdx, sys_ss(%rip)\n\t"
	"pushfq\n\t"
	"pop %rdx\n\t"
	"mov %rdx, sys_rflags(%rip)\n\t"
	"add $1, %rax\n\t"
	"sysretq\n"
	".popsection\n"

	/* Ring-3 code, alone in its page: the only code page with U set */
	".pushsection .text.user, \"ax\"\n"
	".balign 4096\n"
	".globl user_page\n"
	"user_page:\n"
	".globl u_read\n"
	"u_read:\n\t"
	"mov (%rdi), %rax\n\t"
	"int $" xstr(USER_BACK) "\n"
	".globl u_write\n"
	"u_write:\n\t"
	"movq $7, (%rdi)\n\t"
	"xor %eax, %eax\n\t"
	"int $" xstr(USER_BACK) "\n"
	".globl u_syscall\n"
	"u_syscall:\n\t"
	"mov %rdi, %rax\n\t"
	"syscall\n"
	".globl u_after_syscall\n"
	"u_after_syscall:\n\t"
	"mov %cs, %rdx\n\t"
	"shl $32, %rdx\n\t"
	"or %rdx, %rax\n\t"
	"int $" xstr(USER_BACK) "\n"
	/* where a ring-3 fault resumes: RAX = -1 back to ring 0 */
	".globl u_bail\n"
	"u_bail:\n\t"
	"mov $-1, %rax\n\t"
	"int $" xstr(USER_BACK) "\n"
	".balign 4096\n"
	".popsection\n");
/* clang-format on */

static volatile uint64_t pf_err, pf_cr2, pf_rip, pfs;
static volatile uint64_t pfs_all; /* every #PF this program took */

static uint64_t read_cr2(void)
{
	uint64_t v;

	__asm__ volatile("mov %%cr2, %0" : "=r"(v));
	return v;
}

/*
 * A #PF from ring 3 goes back to ring 0 through u_bail; from ring 0 it
 * resumes at resume_at, popping the return address of a faulting CALL
 * target when pop_on_resume says so.
 */
static volatile uint64_t resume_at;
static volatile bool pop_on_resume;

static void on_pf(struct frame *f)
{
	pfs++;
	pfs_all++;
	pf_err = f->error;
	pf_cr2 = read_cr2();
	pf_rip = f->rip;
	if (f->cs & 3) {
		f->rip = (uint64_t) u_bail;
		return;
	}
	f->rip = resume_at;
	if (pop_on_resume)
		f->rsp += 8;
}

static void user_supervisor(void)
{
	volatile uint64_t *sup = (volatile uint64_t *) VA_SUP;
	uint64_t r;

	map_page(VA_SUP, (uint64_t) data_pages[0], PTE_W); /* U = 0 */
	*sup = 0x1234;
	report(*sup == 0x1234, "ring 0 reads and writes the supervisor page");

	pfs = 0;
	r = user_call((uint64_t) u_read, VA_SUP);
	report(pfs == 1 && r == (uint64_t) -1, "CPL 3 read of a supervisor page faults (%lu #PF)",
	       (unsigned long) pfs);
	report(pf_err == 5, "  error code P|U = 5 (%lx)", pf_err);
	report(pf_cr2 == VA_SUP && pf_rip == (uint64_t) u_read, "  CR2 %lx, RIP %lx: the access",
	       pf_cr2, pf_rip);

	pfs = 0;
	r = user_call((uint64_t) u_write, VA_SUP);
	report(pfs == 1 && pf_err == 7 && pf_rip == (uint64_t) u_write && *sup == 0x1234,
	       "CPL 3 write to a supervisor page: #PF P|W|U = 7 (%lx), nothing written", pf_err);

	map_page(VA_USER_RO, (uint64_t) data_pages[1], PTE_U); /* user, read-only */
	*(volatile uint64_t *) data_pages[1] = 0x55;
	pfs = 0;
	r = user_call((uint64_t) u_read, VA_USER_RO);
	report(pfs == 0 && r == 0x55, "CPL 3 reads a read-only user page (%lx)", r);
	r = user_call((uint64_t) u_write, VA_USER_RO);
	report(pfs == 1 && pf_err == 7 && pf_cr2 == VA_USER_RO,
	       "CPL 3 write to a read-only user page: #PF P|W|U = 7 (%lx)", pf_err);
}

static void no_execute(void)
{
	static const uint8_t ret1[] = { 0xb8, 1, 0, 0, 0, 0xc3 }; /* mov $1, %eax; ret */
	int (*fn)(void) = (int (*)(void)) VA_NX;
	extern char nx_back[];
	int v = 0;

	wrmsr(MSR_EFER, rdmsr(MSR_EFER) | EFER_NXE);
	for (unsigned int i = 0; i < sizeof(ret1); i++)
		data_pages[2][i] = ret1[i];
	map_page(VA_NX, (uint64_t) data_pages[2], PTE_W);
	report(fn() == 1, "code runs from the page while XD is clear");
	*pte_of(VA_NX) |= PTE_XD;
	invlpg(VA_NX);
	pfs = 0;
	resume_at = (uint64_t) nx_back;
	pop_on_resume = true; /* the CALL pushed its return address before the fetch faulted */
	__asm__ volatile("call *%1\n"
			 ".globl nx_back\n"
			 "nx_back:\n"
			 : "+a"(v)
			 : "r"(fn)
			 : "memory", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11");
	pop_on_resume = false;
	report(pfs == 1 && pf_err == 0x11, "fetch from an XD page: #PF P|I/D = 0x11 (%lx)", pf_err);
	report(pf_cr2 == VA_NX && pf_rip == VA_NX, "  CR2 = RIP = the target (%lx, %lx)", pf_cr2,
	       pf_rip);
}

static uint64_t *entry_at(uint64_t va, int level)
{
	uint64_t *t = (uint64_t *) (read_cr3() & PTE_ADDR);

	for (int l = 3; l > level; l--)
		t = (uint64_t *) (t[(va >> (12 + 9 * l)) & 511] & PTE_ADDR);
	return &t[(va >> (12 + 9 * level)) & 511];
}

static void accessed_dirty(void)
{
	volatile uint64_t *p = (volatile uint64_t *) VA_AD, *q = (volatile uint64_t *) VA_AD2;
	volatile uint64_t *pte, *pde; /* the CPU writes them: read them after each access */
	uint64_t v;

	map_page(VA_AD, (uint64_t) data_pages[3], PTE_W);
	pte = pte_of(VA_AD);
	*pte &= ~(PTE_A | PTE_D);
	invlpg(VA_AD);
	v = *p;
	report((*pte & PTE_A) && !(*pte & PTE_D), "a read sets Accessed, not Dirty (PTE %lx)",
	       *pte);
	*p = v + 1;
	report(*pte & PTE_D, "the first write sets Dirty, though a read mapped the page (PTE %lx)",
	       *pte);

	/* a fresh page table: every entry of the walk gets Accessed */
	map_page(VA_AD2, (uint64_t) data_pages[3], PTE_W);
	pde = entry_at(VA_AD2, 1);
	pte = pte_of(VA_AD2);
	*pde &= ~PTE_A;
	*pte &= ~(PTE_A | PTE_D);
	write_cr3(read_cr3());
	*q = 3;
	report((*pde & PTE_A) && (*pte & PTE_A) && (*pte & PTE_D),
	       "a write sets Accessed on the PDE and PTE it used and Dirty on the PTE (%lx, %lx)",
	       *pde, *pte);
}

static void syscall_sysret(void)
{
	uint64_t r;

	wrmsr(MSR_EFER, rdmsr(MSR_EFER) | EFER_SCE);
	/* STAR[47:32]: SYSCALL CS (SS = +8); STAR[63:48]: SYSRET base (SS +8, CS +16) */
	wrmsr(MSR_STAR, (uint64_t) KERNEL_CS << 32 | (uint64_t) 0x10 << 48);
	wrmsr(MSR_LSTAR, (uint64_t) k_syscall);
	wrmsr(MSR_FMASK, 0x400); /* DF */
	r = user_call((uint64_t) u_syscall, 41);
	report((uint32_t) r == 42, "SYSCALL from ring 3 runs LSTAR and SYSRET returns (RAX %lx)",
	       r & 0xffffffff);
	report((r >> 32) == USER_CS, "  back at CPL 3: CS %lx after SYSRET", r >> 32);
	report(sys_cs == KERNEL_CS && sys_ss == KERNEL_DS, "  at LSTAR: CS %lx, SS %lx from STAR",
	       sys_cs, sys_ss);
	report(sys_rcx == (uint64_t) u_after_syscall, "  RCX = the instruction after SYSCALL (%lx)",
	       sys_rcx);
	report(sys_r11 == 2 && sys_rflags == 2, "  R11 = RFLAGS (%lx), RFLAGS masked (%lx)",
	       sys_r11, sys_rflags);
}

/*
 * IRETQ to ring 3 at a page that is not there: the fetch of the first user
 * instruction faults, from CPL 3 (SDM Vol. 3A 4.7: error code U|I/D =
 * 0x14 with EFER.NXE set; 6.12.1: the handler runs at CPL 0 on RSP0).
 */
static void user_fetch_fault(void)
{
	uint64_t r;

	pfs = 0;
	r = user_call(VA_NOPAGE, 0);
	report(pfs == 1 && r == (uint64_t) -1,
	       "IRETQ to ring 3 at a missing page: one #PF, handled in ring 0 (%lu)",
	       (unsigned long) pfs);
	report(pf_err == 0x14 && pf_cr2 == VA_NOPAGE && pf_rip == VA_NOPAGE,
	       "  error code U|I/D = 0x14 (%lx), CR2 = RIP = the target (%lx, %lx)", pf_err, pf_cr2,
	       pf_rip);
}

/* mov $v, %eax; ret, written through `at` */
static void poke_ret(uint64_t at, uint8_t v)
{
	static const uint8_t code[] = { 0xb8, 0, 0, 0, 0, 0xc3 };
	volatile uint8_t *p = (volatile uint8_t *) at;

	for (unsigned int i = 0; i < sizeof(code); i++)
		p[i] = i == 1 ? v : code[i];
}

static void cross_modified_code(void)
{
	int (*fn)(void) = (int (*)(void)) VA_CODE;
	int r1, r2, r3, r4;

	map_page(VA_CODE, (uint64_t) data_pages[4], PTE_W);
	map_page(VA_POKE, (uint64_t) data_pages[4], PTE_W);
	poke_ret(VA_POKE, 1);
	r1 = fn();
	poke_ret(VA_POKE, 2); /* through the other mapping, nothing in between */
	r2 = fn();
	poke_ret(VA_POKE, 3);
	__asm__ volatile("cpuid" ::"a"(0), "c"(0) : "rbx", "rdx", "memory"); /* serialize */
	r3 = fn();
	poke_ret(VA_CODE, 4); /* through the mapping it runs from */
	r4 = fn();
	report(r1 == 1, "code written through another mapping runs (%d)", r1);
	report(r2 == 2, "rewritten through that mapping, it runs as rewritten (%d)", r2);
	report(r3 == 3, "  and after a serializing CPUID (%d)", r3);
	report(r4 == 4, "rewritten through its own mapping, it runs as rewritten (%d)", r4);
}

/*
 * Code that writes its own page through another mapping: Linux's
 * text_poke patching a site on the page of the memcpy it patches with.
 * The copy is `mov %edx, %ecx; rep movsb; ret` at VA_CODE + 0x100; it
 * writes VA_POKE + 0x800, which is VA_CODE + 0x800.
 */
static void self_poking_code(void)
{
	static const uint8_t copy[] = { 0x89, 0xd1, 0xf3, 0xa4, 0xc3 };
	static uint8_t src[64];
	void (*fn)(uint64_t, const void *, uint32_t) =
		(void (*)(uint64_t, const void *, uint32_t))(VA_CODE + 0x100);
	volatile uint8_t *run = (volatile uint8_t *) VA_CODE, *poke = (volatile uint8_t *) VA_POKE;
	unsigned int same = 0;

	for (unsigned int i = 0; i < sizeof(copy); i++)
		poke[0x100 + i] = copy[i];
	for (unsigned int i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t) (0x90 + i);
	fn(VA_POKE + 0x800, src, 1);
	fn(VA_POKE + 0x801, src + 1, sizeof(src) - 1);
	for (unsigned int i = 0; i < sizeof(src); i++)
		same += run[0x800 + i] == src[i];
	report(same == sizeof(src),
	       "code that copies into its own page through another mapping "
	       "finishes the copy (%u of %u bytes)",
	       same, (unsigned int) sizeof(src));
}

/*
 * A block that writes its code page through another mapping runs once:
 * `inc %rsi; movb $0x90, (%rdi); inc %rsi; mov %rsi, %rax; ret` at
 * VA_CODE + 0x200 writes VA_POKE + 0x840 and returns its argument + 2.
 */
static void writing_block_runs_once(void)
{
	static const uint8_t code[] = { 0x48, 0xff, 0xc6, 0xc6, 0x07, 0x90, 0x48,
					0xff, 0xc6, 0x48, 0x89, 0xf0, 0xc3 };
	uint64_t (*fn)(uint64_t, uint64_t) = (uint64_t(*)(uint64_t, uint64_t))(VA_CODE + 0x200);
	volatile uint8_t *poke = (volatile uint8_t *) VA_POKE;
	uint64_t r1, r2;

	for (unsigned int i = 0; i < sizeof(code); i++)
		poke[0x200 + i] = code[i];
	r1 = fn(VA_POKE + 0x840, 10);
	r2 = fn(VA_POKE + 0x840, 20);
	report(r1 == 12 && r2 == 22,
	       "a block that writes its own page through another mapping runs once (%llu, %llu)",
	       (unsigned long long) r1, (unsigned long long) r2);
}

/*
 * Instructions retired by one indirect call of `fn` (IA32_FIXED_CTR0,
 * INST_RETIRED.ANY, ring 0; SDM Vol. 3B 20.2.2): the call, its body and the
 * RET, plus the same fixed overhead around it every time.
 */
static uint64_t insns_of_call(int (*fn)(void))
{
	uint64_t before, after;

	wrmsr(MSR_CORE_PERF_FIXED_CTR0, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x1); /* fixed counter 0, OS */
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1ull << 32);
	before = rdpmc(1u << 30);
	__asm__ volatile("call *%0" ::"r"(fn)
			 : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory");
	after = rdpmc(1u << 30);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	return after - before;
}

/*
 * Code rewritten through the mapping it runs from, to different
 * instructions of the same length, counts as rewritten: `mov $1, %eax;
 * ret` (2 instructions) becomes `xor %eax, %eax; inc %eax; nop; ret`
 * (4), both 6 bytes, reached by an indirect call each time.
 */
static void rewritten_code_counts(void)
{
	static const uint8_t two[] = { 0xb8, 1, 0, 0, 0, 0xc3 };
	static const uint8_t four[] = { 0x31, 0xc0, 0xff, 0xc0, 0x90, 0xc3 };
	int (*fn)(void) = (int (*)(void))(VA_CODE + 0x300);
	volatile uint8_t *code = (volatile uint8_t *) (VA_CODE + 0x300);
	uint64_t n2, n2b, n4;

	for (unsigned int i = 0; i < sizeof(two); i++)
		code[i] = two[i];
	n2 = insns_of_call(fn);
	n2b = insns_of_call(fn);
	for (unsigned int i = 0; i < sizeof(four); i++)
		code[i] = four[i];
	n4 = insns_of_call(fn);
	report(n2 == n2b && n4 == n2 + 2,
	       "code rewritten in place to 2 more instructions counts 2 more (%lu, %lu, then %lu)",
	       (unsigned long) n2, (unsigned long) n2b, (unsigned long) n4);
}

/* Instructions retired by one INT3 whose #BP gate is `handler` (as insns_of_call). */
static uint64_t insns_of_int3(void)
{
	uint64_t before, after;

	wrmsr(MSR_CORE_PERF_FIXED_CTR0, 0);
	wrmsr(MSR_CORE_PERF_FIXED_CTR_CTRL, 0x1);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1ull << 32);
	before = rdpmc(1u << 30);
	__asm__ volatile("int3" ::: "rax", "memory");
	after = rdpmc(1u << 30);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	return after - before;
}

/*
 * The same for a handler: its first block starts a run of the emulator
 * (an exception is delivered between runs). `mov $1, %eax; iretq` (2
 * instructions) becomes `xor %eax, %eax; inc %eax; nop; iretq` (4), both 7
 * bytes, rewritten through its own mapping between two INT3s.
 */
static void rewritten_handler_counts(void)
{
	static const uint8_t two[] = { 0xb8, 1, 0, 0, 0, 0x48, 0xcf };
	static const uint8_t four[] = { 0x31, 0xc0, 0xff, 0xc0, 0x90, 0x48, 0xcf };
	volatile uint8_t *code = (volatile uint8_t *) (VA_CODE + 0x400);
	uint64_t a = VA_CODE + 0x400, *g, saved[2], n2, n2b, n4;
	struct desc_ptr d;

	for (unsigned int i = 0; i < sizeof(two); i++)
		code[i] = two[i];
	__asm__ volatile("sidt %0" : "=m"(d));
	g = (uint64_t *) (d.base + 16 * 3);
	saved[0] = g[0];
	saved[1] = g[1];
	g[0] = (a & 0xffff) | (uint64_t) KERNEL_CS << 16 | 0x8eull << 40 | (a >> 16 & 0xffff) << 48;
	g[1] = a >> 32;
	n2 = insns_of_int3();
	n2b = insns_of_int3();
	for (unsigned int i = 0; i < sizeof(four); i++)
		code[i] = four[i];
	n4 = insns_of_int3();
	g[0] = saved[0];
	g[1] = saved[1];
	report(n2 == n2b && n4 == n2 + 2,
	       "a handler rewritten in place to 2 more instructions counts 2 more (%lu, %lu, then "
	       "%lu)",
	       (unsigned long) n2, (unsigned long) n2b, (unsigned long) n4);
}

int main(uint64_t arg)
{
	report_prefix("pagebits: ");
	printf("pagebits: test pages at %lx\n", (unsigned long) VA_SUP);
	idt_init();
	set_handler(14, on_pf);
	ring3_gdt_load();
	ring3_gate_install(USER_BACK, user_gate);
	ring3_make_user((uint64_t) user_page);
	ring3_make_user((uint64_t) user_stack);
	user_supervisor();
	no_execute();
	accessed_dirty();
	syscall_sysret();
	user_fetch_fault();
	cross_modified_code();
	self_poking_code();
	writing_block_runs_once();
	rewritten_code_counts();
	rewritten_handler_counts();
	/* the VMM's --verbose summary must count the same (exception vector 14) */
	printf("pagebits: %lu page faults taken\n", (unsigned long) pfs_all);
	return report_summary();
}
