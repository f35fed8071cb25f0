/* SPDX-License-Identifier: MIT */
/*
 * Internals of the emulator vCPU, shared by emu*.c. Private.
 *
 * Address spaces (emu-mmu.c): Unicorn 2.0.1 walks the guest's page tables
 * itself when its CR0.PG is set (permissions, Accessed/Dirty, #PF with
 * CR2 at the exact instruction), but then maps the linear address onto
 * the same number in its own address space ("identity"). So Unicorn's
 * address space holds guest RAM at its guest-physical addresses (where
 * its walker reads the tables, and where identity-mapped code runs), and
 * every other linear range the guest touches is a "window": a large
 * Unicorn region over host memory in which each 4 KiB page is the guest
 * page its tables map there, mapped from the RAM file on first touch
 * (a host SIGSEGV) and dropped when the guest's paging changes. Unicorn
 * regions therefore stay few, whatever the number of address spaces and
 * pages; Unicorn's TLB and translations stay valid across CR3 switches.
 *
 * Counting: per translated block in the common case (a block hook feeds
 * the previous block once it is known to have retired), one instruction at
 * a time near a counter overflow (a code hook over the block: "step mode").
 */
#ifndef VMM_EMU_PRIV_H
#define VMM_EMU_PRIV_H

#include <assert.h>
#include <signal.h>

#include <capstone/capstone.h>
#include <unicorn/unicorn.h>

#include "emu.h"
#include "lapic.h"
#include "vpmu/vpmu.h"
#include "vpmu/walk.h"

/* Modelled cost (documented in emu.c): 1 cycle per instruction, +1 for a taken branch. */
#define EMU_CYCLES_PER_INSN 1
#define EMU_CYCLES_TAKEN    1
#define EMU_CYCLES_MAX	    (EMU_CYCLES_PER_INSN + EMU_CYCLES_TAKEN)
/* host backends without signals: look for host overflow records every this many blocks */
#define EMU_POLL_BLOCKS 64

/* insn.flags */
#define IC_BRANCH (1u << 0) /* any branch (retires as one) */
#define IC_COND	  (1u << 1) /* Jcc, LOOP, JCXZ */
#define IC_CALL	  (1u << 2) /* near call */
#define IC_RET	  (1u << 3) /* near ret */
#define IC_IND	  (1u << 4) /* indirect near jmp/call */
#define IC_FAR	  (1u << 5) /* far branch: LJMP, LCALL, RETF, IRET, INT, SYSCALL... */
#define IC_LOAD	  (1u << 6)
#define IC_STORE  (1u << 7)
#define IC_REP	  (1u << 8) /* REP string instruction: one retirement, many iterations */
#define IC_UNCOND (1u << 9) /* always taken */

enum special {
	SP_NONE,
	SP_RDMSR,
	SP_WRMSR,
	SP_RDPMC,
	SP_RDTSC,
	SP_RDTSCP,
	SP_CPUID,
	SP_HLT,
	SP_MOV_TO_CR,
	SP_MOV_FROM_CR,
	SP_INVLPG,
	SP_STI,
	SP_POPF,
	SP_IRET,
};

enum dla_kind { DLA_NONE, DLA_MODRM, DLA_PUSH, DLA_POP, DLA_RSI, DLA_RDI };

struct insn {
	uint64_t addr;
	uint8_t len;
	uint8_t special; /* enum special */
	uint8_t dla;	 /* enum dla_kind: how to compute the data address */
	uint8_t scale;
	uint16_t flags;		   /* IC_* */
	uint16_t seg, base, index; /* capstone registers of the memory operand */
	int64_t disp;
	uint8_t crn;	/* MOV CR: the control register */
	int gpr;	/* MOV CR: Unicorn id of the general register */
	uint8_t opsize; /* stack operand size for PUSH/POP */
};

struct blk {
	uint64_t addr;
	uint32_t size;
	uint16_t n;
	bool cs64;
	bool hooked; /* its special instructions have code hooks */
	bool stale;  /* Unicorn translated this address again: decode it again */
	bool has_special;
	struct vpmu_exact_counts sum; /* all n instructions, none taken */
	struct insn *insns;
};

#define BLK_CACHE	  4096
#define MAX_SPECIAL_HOOKS 4096
#define MAX_STEP_HOOKS	  256

/* emu-mmu.c: windows and the pages mapped in them */
#define WIN_SIZE    (1ull << 30) /* a window covers at most this much linear space, aligned */
#define MAX_WINDOWS 512
#define POP_CAP	    (1u << 19) /* pages mapped in windows at once (a soft limit below) */
#define SMC_CAP	    256

#define WIN_HOLES 4

struct window {
	uint64_t la, size; /* its linear range */
	uint8_t *host;	   /* host reserve, PROT_NONE where nothing is mapped */
	uint32_t *pop;	   /* per 4 KiB page: index + 1 into mmu.pop, 0: not mapped */
	bool settle;	   /* mapped from inside a run: map it again from outside */
	/* pages the guest maps onto the local APIC: MMIO regions, not part of the window */
	uint64_t hole[WIN_HOLES];
	unsigned int nr_holes;
};

/* A window page mapped onto guest memory. */
struct pop {
	uint64_t la;	/* linear page */
	uint64_t gpa;	/* guest-physical page; POP_NO_RAM: a page of all ones */
	int32_t next;	/* next page of the same gpa (SMC bookkeeping), -1: none */
	uint32_t dense; /* index into mmu.used */
	uint16_t win;
	bool ro;     /* mapped read-only: its gpa holds translated code run through another page */
	bool exec;   /* translated code was fetched through this mapping */
	bool global; /* mapped by a global entry: survives MOV to CR3 as a TLB entry does */
};
#define POP_NO_RAM UINT64_MAX

struct emu_mmu {
	int memfd;
	uint64_t ram_top; /* bytes of the RAM file: guest-physical [0, ram_top) */
	struct vpmu_mem_region ram[4];
	unsigned int nr_ram;
	struct window win[MAX_WINDOWS];
	unsigned int nr_win;
	struct pop *pop; /* POP_CAP entries */
	uint32_t *used;	 /* dense list of pop indices in use */
	uint32_t nr_used;
	int32_t free_head; /* free list through pop[].next */
	int32_t *gpa_head; /* per RAM page: first pop of that gpa, -1 */
	uint8_t *code;	   /* per RAM page, 1 bit: translated code came from it */
	uint8_t *scratch;  /* VMM code and tables (boot stub, ring-change trampoline) */
	/* written from the SIGSEGV handler, read by the run loop */
	volatile sig_atomic_t smc_n, smc_overflow, pop_full, bad;
	uint64_t smc_gpa[SMC_CAP];
	uint8_t *smc_old; /* SMC_CAP pages: each smc_gpa page's bytes before the first write */
	uint64_t bad_la;  /* the first window page mapped onto no RAM (bad: 1; 2: the APIC) */
	uint64_t faults;  /* pages mapped on first touch */
	uint64_t resyncs, unmapped, tb_pages;
	bool pg_saved; /* mmu_pg_off() in effect */
	uint64_t cr0_saved;
};

/* VMM scratch memory: a Unicorn region at a non-canonical address, never a guest's */
#define SCRATCH_BASE 0x0000800000000000ull
#define SCRATCH_SIZE 0x10000ull

/*
 * What the hooks do with the code Unicorn runs: the one state the block
 * hook, the step hook and the exception hooks choose their work by.
 * Every change goes through emu_set_mode() (below), which knows the legal
 * ones. It outlives a run: the run loop reads how the last one ended.
 */
enum emu_mode {
	EMU_BOUNDARY, /* at a block boundary, or between runs: no block is being counted */
	EMU_FAST,     /* `cur` is fed whole when the next block starts; fed up to insns[fed] */
	EMU_STEP,     /* the current block is fed one instruction at a time (`prev`) */
	EMU_STOPPED,  /* a hook stopped the run: nothing more counts; it goes on at resume_rip */
	EMU_REARM,    /* stopped to run the block again from its start with `until` armed */
	EMU_VMM,      /* Unicorn runs VMM code (boot stub, ring change): none of it counts */
};

struct emu {
	struct emu_config cfg;
	uc_engine *uc;
	csh csh64, csh32;
	uint8_t *ram;	   /* guest-physical 0 */
	uint64_t ram_size; /* bytes of RAM the guest was given */
	/* guest RAM for the page walks; mem_apic adds the local APIC's page (mmu_maps_apic) */
	struct vpmu_guest_memory *mem, *mem_apic;
	struct emu_mmu mmu;
	struct vpmu_vcpu *pmu;
	struct lapic apic;
	struct platform plat;
	struct emu_stats st;

	/* the guest's view of the control registers (Unicorn's differ) */
	uint64_t cr0, cr2, cr3, cr4, efer;
	uint64_t misc_enable, pat, tsc_offset;
	bool cs64; /* CS is a 64-bit code segment */
	unsigned int cpl;

	/* events */
	bool halted;
	bool nmi_pending, nmi_blocked;
	bool want_stop;		      /* stop at the next block boundary */
	volatile sig_atomic_t kicked; /* a host-counter signal (emu_kick): stop and poll */
	bool host_poll;		      /* no signals: look for host overflows between blocks */
	unsigned int poll_tick;	      /* blocks since the last look */
	bool flush_tlb;		      /* Unicorn's TLB holds entries a paging change made stale */
	volatile sig_atomic_t async_stop; /* stop at the next block (signal handler, emu-mmu.c) */
	int pending_vector;		  /* exception to deliver, or -1 */
	bool pending_has_err;
	uint32_t pending_err;
	uint64_t pending_rip; /* the frame's RIP for it */
	bool fatal;
	bool trace;	      /* VPMU_EMU_TRACE set: log hooks to stderr */
	uint64_t trace_after; /* ...once this many instructions retired */
	char fatal_msg[256];

	/* run control */
	bool in_run;			    /* inside uc_emu_start: uc_emu_stop is what ends it */
	enum emu_mode mode;		    /* emu_set_mode() */
	uint64_t resume_rip;		    /* where the next run starts */
	unsigned int window;		    /* step this many instructions, then check interrupts */
	uc_hook step_hooks[MAX_STEP_HOOKS]; /* code hooks over blocks that were stepped */
	uint64_t step_addr[MAX_STEP_HOOKS];
	unsigned int nr_step;
	uc_hook hooks[9];
	uc_hook special_hooks[MAX_SPECIAL_HOOKS];
	uint64_t special_addr[MAX_SPECIAL_HOOKS];
	unsigned int nr_special;
	uint64_t remove_cache_addr, remove_cache_end;
	bool remove_cache;
	bool evict_hooks;     /* a hook table is full: drop old hooks before the next run */
	bool syscall_pending; /* a SYSCALL retired: enter the kernel before the next run */
	uint64_t syscall_next;
	uint64_t progress_rip; /* runs that retired nothing here, in a row */
	uint64_t apic_alias;   /* a linear page the guest just mapped onto the xAPIC page */
	uint64_t native_once;  /* run the special instruction here natively, unlooked-at, once */
	unsigned int no_progress;
	unsigned int exc_streak;     /* exceptions in a row, with no instruction retired between */
	bool linux_unpacked;	     /* emu_load_linux: the VMM inflated the kernel */
	char linux_unpack_note[160]; /* ...or why not */

	/* EMU_FAST counting: `cur` has retired up to insns[fed]; NULL in any other mode */
	struct blk *cur;
	unsigned int fed;
	/*
	 * Precise stops without stepping: the overflow lands on insns[k] of a
	 * block, so the block runs again from its start with Unicorn's
	 * `until` at the instruction after it (a memory instruction first
	 * stops before itself, to take its data address).
	 */
	/*
	 * Batched feeding: counts that cannot overflow anything (fewer
	 * instructions than `budget`, from vpmu_exact_headroom) add up here
	 * and reach the vPMU in one feed before it is consulted again.
	 */
	struct vpmu_exact_counts acc;
	bool acc_valid;
	uint64_t budget; /* instructions that can be batched; 0: ask the vPMU */

	/* where Unicorn keeps the error code of the exception it raised, in a uc_context */
	int err_offset; /* -1: not found, the VMM works it out itself */
	int efer_off;	/* IA32_EFER's offset there, -1: not found */
	uc_context *ctx;

	uint64_t until;	       /* stop address armed for the next run, 0: none */
	uint64_t exit_set;     /* the exit Unicorn has now (0: none) */
	uint64_t until_next;   /* after a stop before insns[k]: the stop after it */
	uint64_t until_dla_ip; /* insns[k] and the address it accesses */
	uint64_t until_dla;
	/* EMU_STEP counting: `prev` executed, not yet fed (a REP one: not yet retired) */
	struct insn prev;
	bool prev_valid;
	uint64_t prev_dla;
	uint64_t hook_rip;   /* the next instruction, as a hook saw it */
	int vmm_vector;	     /* EMU_VMM: the vector of the exception that stopped it, -1: none */
	uint64_t lbr_cycles; /* cycles since the last recorded branch */
	/* INT n / INT3 / INT1 retired: its record is written at delivery, FROM it, if RIP is ret */
	uint64_t lbr_int_from, lbr_int_ret;
	uint64_t last_pmi_insns;
	unsigned int storm;

	struct vpmu_cpuid_entry cpuid[64];
	size_t nr_cpuid;
	volatile sig_atomic_t interrupted; /* emu_interrupt: emu_run returns -EINTR */
	uint64_t tsc_hz;		   /* the model's CPUID 15H rate: what the TSC counts */
	uint64_t idle_cycles;		   /* TSC ticks spent halted (no instruction retired) */
	uint64_t timer_at; /* TSC of the LAPIC timer's next interrupt, UINT64_MAX: none */
	bool log_capture;  /* the vPMU's log lines go to log_captured (a restore's reason) */
	char log_captured[160];
	bool stop_armed; /* emu_stop_at: emu_run returns once stop_at instructions retired */
	uint64_t stop_at;

	struct blk blocks[BLK_CACHE];
};

/* emu-insn.c */
int insn_decode(struct emu *emu, uint64_t addr, bool cs64, struct insn *ret);
void insn_count(const struct insn *in, bool taken, struct vpmu_exact_counts *c);
int insn_uc_reg(unsigned int csreg);
bool insn_is_gpr32(unsigned int csreg);
int blk_decode(struct emu *emu, uint64_t addr, uint32_t size, bool cs64, struct blk *b);
void blk_free(struct blk *b);

/* emu-mmu.c */
int mmu_init(struct emu *emu, const struct vpmu_mem_region *ram, unsigned int nr, char *err,
	     size_t errlen);
int mmu_attach(struct emu *emu, char *err, size_t errlen);
void mmu_free(struct emu *emu);
int mmu_read(struct emu *emu, uint64_t la, void *dst, size_t len);
int mmu_write(struct emu *emu, uint64_t la, const void *src, size_t len);
bool mmu_hook_unmapped(uc_engine *uc, uc_mem_type type, uint64_t addr, int size, int64_t value,
		       void *data);
void mmu_pg_off(struct emu *emu);
void mmu_pg_on(struct emu *emu, bool flush);
void mmu_tlb_flush(struct emu *emu);
void mmu_tb_invalidate(struct emu *emu, uint64_t la, uint64_t len);
void mmu_resync(struct emu *emu, const struct vpmu_paging *next, uint64_t only);
void mmu_code_page(struct emu *emu, uint64_t la, uint64_t gpa);
void mmu_service(struct emu *emu);
bool mmu_smc_service(struct emu *emu, uint64_t at, uint32_t len);
int mmu_check_identity(struct emu *emu, const struct vpmu_paging *p, uint64_t *ret_la,
		       uint64_t *ret_gpa);
int mmu_check_identity_page(struct emu *emu, uint64_t la, uint64_t *ret_gpa);
bool mmu_maps_apic(struct emu *emu, uint64_t la);
int mmu_apic_alias(struct emu *emu, uint64_t la);

/* emu.c */
void emu_write_efer(struct emu *emu, uint64_t efer);

/* emu-count.c */
void count_hook_block(uc_engine *uc, uint64_t addr, uint32_t size, void *data);
void count_hook_new_tb(uc_engine *uc, uc_tb *cur, uc_tb *prev, void *data);
void count_retire_to(struct emu *emu, uint64_t rip, bool trap);
uint64_t count_data_address(struct emu *emu, const struct insn *in);
void count_retire_through(struct emu *emu, uint64_t rip, uint64_t to);

/* emu-intr.c */
int intr_deliver(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip);
int intr_enter_ring0(struct emu *emu, uint16_t sel);
int intr_syscall(struct emu *emu, uint64_t next);
void emu_refresh_mode(struct emu *emu);

/* emu-cpu.c: instructions the VMM emulates */
/* SPECIAL_FAULT also: stopped before it, to run it again (emu->native_once) */
enum { SPECIAL_FAULT, SPECIAL_DONE, SPECIAL_NATIVE };
int cpu_exec_special(struct emu *emu, const struct insn *in);
int cpu_cpuid_init(struct emu *emu);
void cpu_cpuid_leaf(struct emu *emu, uint32_t fn, uint32_t idx, uint32_t *r);
int cpu_msr_read(struct emu *emu, uint32_t msr, uint64_t *ret);
int cpu_msr_write(struct emu *emu, uint32_t msr, uint64_t value);

/* emu.c */
void emu_fatal(struct emu *emu, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void emu_feed(struct emu *emu, struct vpmu_exact_counts *c);
void emu_feed_flush(struct emu *emu);
#define MODE(m) (1u << (m))

/*
 * The one place the hooks' mode changes (enum emu_mode; inline: the block
 * hook changes it for every block). The legal changes:
 *  - a guest run starts (run_slice, a restore):  any mode -> BOUNDARY
 *  - the block hook counts a block:              BOUNDARY -> FAST or STEP
 *  - the block retired (next block, exception):  FAST, STEP -> BOUNDARY
 *  - the block hook arms a stop (arm_until):     BOUNDARY -> REARM
 *  - a hook stops the run (emu_stop):            BOUNDARY, FAST, STEP -> STOPPED;
 *                                                STOPPED and REARM stay as they are
 *  - VMM code runs between runs (emu_run_vmm):   any but VMM -> VMM -> BOUNDARY
 * Leaving FAST drops `cur`: only that mode has a block being fed whole.
 */
static inline void emu_set_mode(struct emu *emu, enum emu_mode mode)
{
	static const unsigned int legal[] = {
		[EMU_BOUNDARY] = MODE(EMU_BOUNDARY) | MODE(EMU_FAST) | MODE(EMU_STEP) |
				 MODE(EMU_STOPPED) | MODE(EMU_REARM) | MODE(EMU_VMM),
		[EMU_FAST] = MODE(EMU_BOUNDARY) | MODE(EMU_STOPPED) | MODE(EMU_VMM),
		[EMU_STEP] = MODE(EMU_BOUNDARY) | MODE(EMU_STOPPED) | MODE(EMU_VMM),
		[EMU_STOPPED] = MODE(EMU_BOUNDARY) | MODE(EMU_STOPPED) | MODE(EMU_VMM),
		[EMU_REARM] = MODE(EMU_BOUNDARY) | MODE(EMU_REARM) | MODE(EMU_VMM),
		[EMU_VMM] = MODE(EMU_BOUNDARY),
	};

	assert(legal[emu->mode] & MODE(mode));
	if (mode != EMU_FAST)
		emu->cur = NULL;
	emu->mode = mode;
}

/* A hook stopped the run (for whatever reason): what Unicorn still runs is not the guest's. */
static inline bool emu_stopped(const struct emu *emu)
{
	return emu->mode == EMU_STOPPED || emu->mode == EMU_REARM;
}

void emu_stop(struct emu *emu, uint64_t resume_rip);
uc_err emu_run_vmm(struct emu *emu, uint64_t begin, int *ret_vector);
void emu_raise(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip);
uint64_t emu_reg(struct emu *emu, int reg);
void emu_set_reg(struct emu *emu, int reg, uint64_t v);
uint64_t emu_tsc(const struct emu *emu);

#endif
