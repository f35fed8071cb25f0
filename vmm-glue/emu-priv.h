/* SPDX-License-Identifier: MIT */
/*
 * Internals of the emulator vCPU, shared by emu*.c. Private.
 *
 * Address spaces: Unicorn 2.0.1 ignores guest paging (its "physical" space
 * is what the guest uses as linear addresses), so the VMM keeps the
 * guest's CR0/CR3/CR4/EFER itself (the shadow below), translates with
 * vpmu's page walker and maps aliases of guest RAM at the linear pages the
 * guest touches (emu-mmu.c). Unicorn itself always runs in IA-32e mode;
 * a guest in 32-bit protected mode runs in compatibility mode, which
 * executes the same way for the code such kernels contain.
 *
 * Counting: per translated block in the common case (a block hook feeds
 * the previous block once it is known to have retired), one instruction at
 * a time near a counter overflow (a global code hook: "step mode").
 */
#ifndef VMM_EMU_PRIV_H
#define VMM_EMU_PRIV_H

#include <signal.h>

#include <capstone/capstone.h>
#include <unicorn/unicorn.h>

#include "emu.h"
#include "lapic.h"
#include "walk.h"
#include "vpmu/vpmu.h"

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
	bool has_special;
	struct vpmu_exact_counts sum; /* all n instructions, none taken */
	struct insn *insns;
};

#define BLK_CACHE	  4096
#define MAX_SPECIAL_HOOKS 1024
#define MAX_STEP_HOOKS	  256
#define MAX_ALIASES	  3000

struct alias {
	uint64_t la, size;
	bool mmio;
	bool settle; /* RAM mapped from a hook: map it again from outside (mmu_settle) */
	uint32_t prot;
	uint8_t *hva;
};

struct emu {
	struct emu_config cfg;
	uc_engine *uc;
	csh csh64, csh32;
	uint8_t *ram;
	uint64_t ram_size;
	struct guest_region region;
	struct guest_mem mem;
	struct guest_region map_regions[2]; /* RAM and the APIC page, for mmu_map */
	struct guest_mem mem_map;
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
	bool paging_dirty;	      /* drop every alias and translation */
	int pending_vector;	      /* exception to deliver, or -1 */
	bool pending_has_err;
	uint32_t pending_err;
	uint64_t pending_rip; /* the frame's RIP for it */
	bool fatal;
	bool trace; /* VPMU_EMU_TRACE set: log hooks to stderr */
	char fatal_msg[256];

	/* run control */
	bool in_run;
	bool stopped; /* a hook stopped Unicorn: resume at resume_rip */
	uint64_t resume_rip;
	bool stepping;	     /* the current block is counted one instruction at a time */
	unsigned int window; /* step this many instructions, then check interrupts */
	uc_hook step_hooks[MAX_STEP_HOOKS]; /* code hooks over blocks that were stepped */
	uint64_t step_addr[MAX_STEP_HOOKS];
	unsigned int nr_step;
	uc_hook hooks[8];
	uc_hook special_hooks[MAX_SPECIAL_HOOKS];
	uint64_t special_addr[MAX_SPECIAL_HOOKS];
	unsigned int nr_special;
	uint64_t remove_cache_addr, remove_cache_end;
	bool remove_cache;

	/* fast-mode counting: `cur` has retired up to insns[fed] */
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

	/* a guest page fault seen by a memory hook: delivered once Unicorn has stopped */
	bool pf_pending;
	uint64_t pf_addr;
	uint32_t pf_err; /* #PF error code (SDM Vol. 3A 4.7) */
	bool pf_fetch;

	uint64_t until;	       /* stop address armed for the next run, 0: none */
	bool until_arming;     /* the stop that armed it: keep it for the rerun */
	uint64_t until_next;   /* after a stop before insns[k]: the stop after it */
	uint64_t until_dla_ip; /* insns[k] and the address it accesses */
	uint64_t until_dla;
	/* step-mode counting: `prev` executed, not yet fed */
	struct insn prev;
	bool prev_valid;
	uint64_t prev_dla;
	uint64_t hook_rip; /* the next instruction, as a hook saw it */
	int trampoline; /* >= 0: Unicorn runs intr_deliver's CPL change; the vector it stopped on */
	uint64_t lbr_cycles; /* cycles since the last recorded branch */
	/* INT n / INT3 / INT1 retired: its record is written at delivery, FROM it, if RIP is ret */
	uint64_t lbr_int_from, lbr_int_ret;
	uint64_t last_pmi_insns;
	unsigned int storm;

	struct vpmu_cpuid_entry cpuid[64];
	size_t nr_cpuid;

	struct blk blocks[BLK_CACHE];
	struct alias aliases[MAX_ALIASES + 16];
	unsigned int nr_aliases;
};

/* emu-insn.c */
int insn_decode(struct emu *emu, uint64_t addr, bool cs64, struct insn *ret);
void insn_count(const struct insn *in, bool taken, struct vpmu_exact_counts *c);
int insn_uc_reg(unsigned int csreg);
bool insn_is_gpr32(unsigned int csreg);
int blk_decode(struct emu *emu, uint64_t addr, uint32_t size, bool cs64, struct blk *b);
void blk_free(struct blk *b);

/* emu-mmu.c */
int mmu_read(struct emu *emu, uint64_t la, void *dst, size_t len);
int mmu_write(struct emu *emu, uint64_t la, const void *src, size_t len);
bool mmu_map(struct emu *emu, uint64_t la, bool write, bool fetch);
void mmu_flush(struct emu *emu);
void mmu_settle(struct emu *emu);
bool mmu_ensure(struct emu *emu, uint64_t la);
bool mmu_hook_unmapped(uc_engine *uc, uc_mem_type type, uint64_t addr, int size, int64_t value,
		       void *data);
bool mmu_hook_prot(uc_engine *uc, uc_mem_type type, uint64_t addr, int size, int64_t value,
		   void *data);

/* emu-intr.c */
int intr_deliver(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip);
void emu_refresh_mode(struct emu *emu);

/* emu-cpu.c: instructions the VMM emulates */
bool cpu_exec_special(struct emu *emu, const struct insn *in);
int cpu_cpuid_init(struct emu *emu);
int cpu_msr_read(struct emu *emu, uint32_t msr, uint64_t *ret);
int cpu_msr_write(struct emu *emu, uint32_t msr, uint64_t value);

/* emu.c */
void emu_fatal(struct emu *emu, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void emu_feed(struct emu *emu, struct vpmu_exact_counts *c);
void emu_feed_flush(struct emu *emu);
void emu_stop(struct emu *emu, uint64_t resume_rip);
void emu_raise(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip);
uint64_t emu_reg(struct emu *emu, int reg);
void emu_set_reg(struct emu *emu, int reg, uint64_t v);
uint64_t emu_tsc(const struct emu *emu);

#endif
