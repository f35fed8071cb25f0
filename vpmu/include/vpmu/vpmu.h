/* SPDX-License-Identifier: MIT */
/*
 * libvpmu: a userspace virtual PMU for KVM-style VMMs (Intel architectural
 * performance monitoring).
 *
 * Error contract: int functions return 0 or a negative errno; ret_*
 * parameters come last and are left untouched on failure. The codes a VMM
 * must route are:
 *
 *   -ENOENT   not a PMU MSR / CPUID leaf: the VMM handles it itself.
 *   -ENXIO    a PMU MSR that this vCPU's model does not have: hardware
 *             raises #GP, the VMM injects #GP (kept apart from -EINVAL so
 *             that a VMM can log or route it).
 *   -EINVAL   the guest access is one hardware refuses (reserved bit, read-
 *             only MSR, bad RDPMC index): inject #GP(0).
 *
 * Any other negative errno is a failure of the VMM or the host, never of
 * the guest. The library never prints and never exits: it reports through
 * the log callback given in struct vpmu_config.
 *
 * Thread model: a struct vpmu_vcpu belongs to the thread that runs that
 * vCPU; calls on one vCPU are not reentrant.
 *
 * ABI: the shared library keeps its symbol versions (VPMU_0.1, VPMU_0.2,
 * ...): a program built against an older header runs on a newer library.
 * The structs a program and the library exchange grow at their end only,
 * and cross the boundary with their size, so either side may be the
 * newer one: struct vpmu_config and struct vpmu_guest_regs through
 * vpmu_config.size / .regs_size; struct vpmu_exact_counts, struct
 * vpmu_stats, struct vpmu_catalog_event and struct vpmu_walk_result
 * through a size argument. The names C programs call
 * (vpmu_config_init, vpmu_exact_feed, vpmu_exact_would_overflow,
 * vpmu_stats_read, vpmu_stats_to_json) are macros that pass sizeof of
 * the caller's struct to the *_sized function; the functions of the same
 * name are the VPMU_0.1 entry points, kept for programs built before.
 * A library reading a struct larger than it knows requires the bytes it
 * does not know to be zero (-E2BIG otherwise: a newer feature was asked
 * of an older library); one writing a struct larger than it knows zeroes
 * them. Frozen layouts, never grown (a change would be a new type):
 * struct vpmu_counter_stats (per-counter figures added later are arrays
 * indexed by slot at the end of struct vpmu_stats), vpmu_cpuid_entry
 * (CPUID's outputs), vpmu_mem_region, vpmu_lvt.
 */
#ifndef VPMU_VPMU_H
#define VPMU_VPMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VPMU_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define VPMU_API	  __attribute__((visibility("default")))
#else
#define VPMU_PRINTF(f, a)
#define VPMU_API
#endif

struct vpmu_vcpu;
struct vpmu_filter; /* a PMU event filter, see vpmu_filter_parse() */

enum vpmu_log_level {
	VPMU_LOG_ERR = 3,
	VPMU_LOG_WARNING = 4,
	VPMU_LOG_INFO = 6,
	VPMU_LOG_DEBUG = 7,
};

typedef void (*vpmu_log_fn)(void *data, enum vpmu_log_level level, const char *msg);

/* ---- guest CPU models --------------------------------------------------- */

/* Number of built-in guest CPU models. */
VPMU_API size_t vpmu_model_count(void);
/* Name of model `index` (0 <= index < vpmu_model_count()), or NULL. */
VPMU_API const char *vpmu_model_name(size_t index);
/* One-line description of model `index`, or NULL. */
VPMU_API const char *vpmu_model_description(size_t index);
/* Index of the model called `name` (case-insensitive), or -ENOENT. */
VPMU_API int vpmu_model_find(const char *name);

/* ---- guest event catalogues --------------------------------------------- */

/* vpmu_catalog_event.flags: what the model's event list says of an event */
#define VPMU_EV_INV	   (1u << 0)  /* Invert=1 */
#define VPMU_EV_EDGE	   (1u << 1)  /* EdgeDetect=1 */
#define VPMU_EV_ANY	   (1u << 2)  /* AnyThread=1 */
#define VPMU_EV_PEBS	   (1u << 3)  /* PEBS-capable */
#define VPMU_EV_PRECISE_IP (1u << 4)  /* PEBS PreciseEventingIP */
#define VPMU_EV_PRECISE	   (1u << 5)  /* PEBS Precise */
#define VPMU_EV_DLA	   (1u << 6)  /* PEBS DataLinearAddress */
#define VPMU_EV_LATENCY	   (1u << 7)  /* PEBS Latency */
#define VPMU_EV_ARCH	   (1u << 8)  /* architectural */
#define VPMU_EV_FIXED	   (1u << 9)  /* a fixed counter counts it */
#define VPMU_EV_DEPRECATED (1u << 10) /* deprecated */

/* One event of a model's catalogue. Grows at its end: vpmu_catalog_event() takes its size. */
struct vpmu_catalog_event {
	const char *name;	  /* e.g. "BR_INST_RETIRED.NEAR_CALL"; static */
	const char *desc;	  /* UTF-8 prose; static */
	const char *errata;	  /* "SKL091, SKL044", or NULL */
	uint64_t encoding;	  /* IA32_PERFEVTSELx bits 31:0, without USR/OS/INT/EN */
	int32_t fixed_idx;	  /* -1, or n for IA32_FIXED_CTRn events */
	int32_t pdist_counter;	  /* -1, or the counter with PDist for it */
	uint32_t event;		  /* event select (0 for fixed-only events) */
	uint32_t umask;		  /* unit mask */
	uint32_t cmask;		  /* counter mask */
	uint32_t flags;		  /* VPMU_EV_* */
	uint32_t aux_msr;	  /* the extra MSR it needs (0, 3F6H or 3F7H) */
	uint32_t aux_value;	  /* ... and its value */
	uint32_t counters;	  /* GP counters that can count it, bit i = GP i */
	uint32_t counters_ht_off; /* ... with Hyper-Threading off */
};

/* Events in the catalogue of model `model` (an index); 0 if it has none. */
VPMU_API size_t vpmu_catalog_count(size_t model);
/*
 * Event `index` of model `model`'s catalogue into the `size` bytes at
 * *ret (sizeof(*ret)). -ENOENT: no such model or event.
 */
VPMU_API int vpmu_catalog_event(size_t model, size_t index, struct vpmu_catalog_event *ret,
				size_t size);
/* The index of the event called `name` (case-insensitive); -ENOENT. */
VPMU_API int vpmu_catalog_find(size_t model, const char *name, size_t *ret_index);
/*
 * The index of the first event (catalogue order: an alias gives the name
 * listed first) whose encoding is `evtsel`'s event select, unit mask,
 * edge, AnyThread, invert and counter mask (USR, OS, PC, INT, EN and
 * bits 63:32 are ignored); -ENOENT.
 */
VPMU_API int vpmu_catalog_decode(size_t model, uint64_t evtsel, size_t *ret_index);

/* ---- vCPU creation ------------------------------------------------------ */

/* Narrowing flags: a VMM may expose less than the model has, never more. */
#define VPMU_CONFIG_NO_PEBS    (1u << 0) /* no PEBS of any kind, no DS area */
#define VPMU_CONFIG_NO_LBR     (1u << 1) /* no LBR stack */
#define VPMU_CONFIG_NO_METRICS (1u << 2) /* no PERF_METRICS */

/* What backs the guest counters on the host. */
enum vpmu_backend {
	VPMU_BACKEND_NONE,  /* nothing: every counter is unbacked, never counts */
	VPMU_BACKEND_EXACT, /* counts fed by an emulator: vpmu_exact_feed() */
	VPMU_BACKEND_TIME,  /* cycles from the vCPU thread's CPU time (perf task-clock) */
	VPMU_BACKEND_PERF,  /* host hardware events, guest mode only (exclude_host) */
};

/*
 * The host backends (TIME, PERF) open one perf event per enabled guest
 * counter on the thread that calls vpmu_vcpu_sync() -- the vCPU thread,
 * which they count -- and have the kernel send that thread
 * vpmu_config.signo when a guest counter overflows. The library installs
 * no signal handler: the VMM installs one (doing nothing, or asking its
 * run loop to stop) for signo and for SIGIO (the kernel sends SIGIO
 * instead when the queue of real-time signals is full), without
 * SA_RESTART where it must interrupt KVM_RUN, and then calls
 * vpmu_vcpu_poll() or vpmu_vcpu_sync() before it enters the guest again.
 * A lost signal loses nothing: the overflow is in the event's ring buffer
 * for the next poll. Failures (EMFILE, EACCES, EBUSY, no such host event)
 * never stop the vCPU: the counter is unbacked, with the errno in its
 * stats and one log line, and does not count.
 */

/*
 * "A PMI is due on this vCPU." Called from inside vpmu calls on the vCPU
 * thread (an MSR access, a feed, a sync). The VMM delivers it the way the
 * guest's LVT performance-counter entry says (see vpmu_lvt_decode) and
 * then calls vpmu_pmi_delivered().
 */
typedef void (*vpmu_pmi_fn)(void *data, struct vpmu_vcpu *vcpu);

/*
 * The guest state a PEBS record reports, as it is after the sampled
 * instruction. Grows at its end only: vpmu_config.regs_size says how much
 * of it the VMM's callback fills.
 */
struct vpmu_guest_regs {
	uint64_t rip; /* the next instruction (PEBS records are trap-like) */
	uint64_t rflags;
	uint64_t gpr[16];	      /* RAX RCX RDX RBX RSP RBP RSI RDI R8..R15 */
	uint8_t xmm[16][16];	      /* XMM0..15, little-endian */
	uint64_t cr0, cr3, cr4, efer; /* for the walk to the DS area */
	uint64_t tsc;		      /* the guest's TSC now */
	unsigned int cpl;
	bool long_mode; /* 64-bit mode (not compatibility mode) */
	bool sse;	/* CR4.OSFXSR: the XMM group is zero without it */
};

/*
 * Fill *ret with the vCPU's current guest registers. Called on the vCPU
 * thread when a PEBS record is written. Return 0, or a negative errno:
 * the record is then deferred to the next sync, never dropped.
 */
typedef int (*vpmu_regs_fn)(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *ret);

struct vpmu_config {
	size_t size;	    /* sizeof(struct vpmu_config), set by vpmu_config_init() */
	const char *model;  /* model name, case-insensitive */
	int version;	    /* perfmon version to expose (2..model's); -1 = the model's */
	int nr_gp;	    /* GP counters to expose; -1 = the model's */
	int nr_fixed;	    /* fixed counters to expose; -1 = the model's */
	unsigned int flags; /* VPMU_CONFIG_* */
	enum vpmu_backend backend;
	vpmu_pmi_fn pmi; /* may be NULL: PMIs are then only counted */
	void *pmi_data;
	vpmu_regs_fn regs; /* needed for PEBS; may be NULL without it */
	void *regs_data;
	vpmu_log_fn log; /* may be NULL */
	void *log_data;
	enum vpmu_log_level log_level; /* most verbose level passed to log */
	/*
	 * The PMU event filter; NULL: the default policy. The vCPU keeps the
	 * pointer: the filter must outlive every vCPU created with it (one
	 * filter may serve all vCPUs of a VM, as KVM's is per VM). Configs
	 * whose size ends before this field get the default policy.
	 */
	const struct vpmu_filter *filter;
	/*
	 * The signal the host backends send to the vCPU thread when a guest
	 * counter overflows; vpmu_config_init() sets SIGRTMIN + 4. 0: SIGIO;
	 * -1: none (overflows are then found only when the VMM polls).
	 * Configs whose size ends before this field get SIGRTMIN + 4.
	 */
	int signo;
	/*
	 * The guest's linear-address width as the VMM's CPUID enumerates it
	 * (CPUID.80000008H:EAX[15:8]): 48, or 57 where the vCPU has 5-level
	 * paging. WRMSR IA32_DS_AREA is #GP unless canonical at this width.
	 * 0: the model's (57 for models with LA57). Configs whose size ends
	 * before this field get the model's.
	 */
	int linear_bits;
	/*
	 * sizeof(struct vpmu_guest_regs) as the VMM was built with: the regs
	 * callback may write that many bytes, fields past them read 0.
	 * vpmu_config_init() sets it. Configs whose size ends before this
	 * field get the VPMU_0.1 size.
	 */
	size_t regs_size;
	/*
	 * The VMM's CPUID tells the guest of Intel TSX: HLE or RTM,
	 * CPUID.(EAX=07H,ECX=0):EBX[4] or [11]. Then, where the host has TSX
	 * too (its own CPUID), IN_TX (IA32_PERFEVTSELx bit 32) is writable on
	 * every GP counter and IN_TXCP (bit 33) on IA32_PERFEVTSEL2 only (SDM
	 * Vol. 3B 22.3.6.5), as KVM does; otherwise both bits are reserved
	 * (#GP). A backend that cannot count an event with them leaves the
	 * counter unbacked. false, and configs whose size ends before this
	 * field: reserved.
	 */
	bool tsx;
};

/*
 * Fill *cfg with defaults: Skylake-Server's full PMU, backend NONE, no
 * log. `size` is sizeof(*cfg) and `regs_size` sizeof(struct
 * vpmu_guest_regs) as the caller knows them: call it as
 * vpmu_config_init(cfg).
 */
VPMU_API void vpmu_config_init_sized(struct vpmu_config *cfg, size_t size, size_t regs_size);
/* VPMU_0.1 entry point: the VPMU_0.1 struct vpmu_config. */
VPMU_API void vpmu_config_init(struct vpmu_config *cfg);
#define vpmu_config_init(cfg)                                                                      \
	vpmu_config_init_sized((cfg), sizeof(*(cfg)), sizeof(struct vpmu_guest_regs))

/*
 * Create the PMU of one vCPU in its power-on state. -ENOENT: unknown model;
 * -EINVAL: inconsistent configuration (the log says which field);
 * -E2BIG: a config field this library does not know is set; -ENOMEM.
 */
VPMU_API int vpmu_vcpu_new(const struct vpmu_config *cfg, struct vpmu_vcpu **ret_vcpu);
VPMU_API void vpmu_vcpu_free(struct vpmu_vcpu *vcpu);

enum vpmu_reset_kind {
	VPMU_RESET_POWER_ON, /* RESET#: every PMU MSR to its reset value */
	VPMU_RESET_INIT,     /* INIT: MSRs kept; the DS mechanism disabled */
};
VPMU_API void vpmu_vcpu_reset(struct vpmu_vcpu *vcpu, enum vpmu_reset_kind kind);

/* Model name this vCPU was created with (canonical spelling). */
VPMU_API const char *vpmu_vcpu_model(const struct vpmu_vcpu *vcpu);

/*
 * Apply every PMU MSR write since the last sync to the host counters, in
 * one batch: an unchanged event is kept (only enable/period change), only a
 * changed event is recreated. Call it before every guest entry; writes take
 * effect there (the guest does not run in between, so counts stay exact).
 */
VPMU_API int vpmu_vcpu_sync(struct vpmu_vcpu *vcpu);

/*
 * Host backends: take the overflows the host counters reported since the
 * last poll (their ring buffers; a read() only if one looks lost), set
 * GLOBAL_STATUS and request the PMIs they call for, then apply pending
 * writes as vpmu_vcpu_sync() does. Call it after the overflow signal
 * interrupted the guest, or at any exit; vpmu_vcpu_sync() polls too.
 * Costs no syscall when nothing is lost. Returns how many guest counters
 * overflowed (0 for the exact and none backends).
 */
VPMU_API int vpmu_vcpu_poll(struct vpmu_vcpu *vcpu);

/*
 * Whether vpmu_vcpu_poll() or vpmu_vcpu_sync() has work to do: a host
 * counter reported an overflow that poll has not taken yet (read from
 * the event's ring buffer: two loads a counter, no syscall), or a PMI
 * or PEBS record waits for the next sync (a guest read found a counter
 * wrapped, the regs callback could not give the registers yet, a
 * restored snapshot owes one). For a VMM that runs guest code on the vCPU thread itself,
 * as an emulator does: with vpmu_config.signo = -1 it asks this every
 * few translated blocks instead of taking a signal per overflow (whose
 * handler costs an rt_sigreturn), and polls when it says true.
 */
VPMU_API bool vpmu_vcpu_pending(const struct vpmu_vcpu *vcpu);

/* ---- the exact backend (emulators) ------------------------------------- */

/*
 * What a run of retired guest instructions did, all at one CPL. Branch
 * kinds overlap as on hardware: a taken conditional branch is counted in
 * branches, cond_branches, cond_taken and near_taken. Grows at its end
 * only: vpmu_exact_feed() passes its size.
 */
struct vpmu_exact_counts {
	uint64_t instructions;	/* retired instructions (a REP string op is one) */
	uint64_t cycles;	/* modelled unhalted core cycles */
	uint64_t ref_cycles;	/* unhalted reference cycles at the TSC rate */
	uint64_t branches;	/* all retired branches, far ones included */
	uint64_t cond_branches; /* conditional (Jcc, LOOP, JCXZ) */
	uint64_t cond_taken;	/* ... of which taken */
	uint64_t near_calls;	/* near CALL, direct and indirect */
	uint64_t near_returns;	/* near RET */
	uint64_t near_taken;	/* taken near branches of any kind */
	uint64_t far_branches;	/* far CALL/JMP/RET, IRET, INT, SYSCALL... */
	uint64_t branch_misses; /* mispredicted branches, if the feeder models them */
	uint64_t loads;		/* instructions that read memory */
	uint64_t stores;	/* instructions that write memory */
	uint64_t mem_insts;	/* instructions that read or write memory */
	unsigned int cpl;	/* guest CPL while they ran: USR/OS filtering */
	/*
	 * The last instruction of the run, for PEBS: its address, and the
	 * linear address it loaded from / stored to (0 if none). An
	 * emulator single-steps near an overflow (vpmu_exact_headroom), so
	 * the overflowing instruction is the last one of its run.
	 */
	uint64_t last_ip;
	uint64_t last_dla;
};

/*
 * Count `c` on every running counter whose event it covers; overflows,
 * GLOBAL_STATUS, freeze and PMI happen here. -EOPNOTSUPP if the vCPU's
 * backend is not VPMU_BACKEND_EXACT; -E2BIG if a field this library does
 * not know is non-zero. `size` is sizeof(*c): call it as
 * vpmu_exact_feed(vcpu, c).
 */
VPMU_API int vpmu_exact_feed_sized(struct vpmu_vcpu *vcpu, const struct vpmu_exact_counts *c,
				   size_t size);
VPMU_API int vpmu_exact_feed(struct vpmu_vcpu *vcpu, const struct vpmu_exact_counts *c);
#define vpmu_exact_feed(vcpu, c) vpmu_exact_feed_sized((vcpu), (c), sizeof(*(c)))

/*
 * Events left before the nearest overflow of any running counter, in that
 * counter's own unit; UINT64_MAX when nothing can overflow. Every field of
 * vpmu_exact_counts but the two cycle counts grows by at most 1 per
 * instruction, so an emulator can run this many instructions (divided by
 * its largest per-instruction cycle cost) before it must single-step.
 */
VPMU_API uint64_t vpmu_exact_headroom(const struct vpmu_vcpu *vcpu);

/*
 * Whether vpmu_exact_feed(vcpu, c) now would overflow a running counter
 * (and so raise its PMI or PEBS assist), changing nothing. An emulator
 * asks it for the prefixes of a block to find the instruction an overflow
 * lands on, and stops right after it instead of single-stepping.
 */
VPMU_API bool vpmu_exact_would_overflow_sized(const struct vpmu_vcpu *vcpu,
					      const struct vpmu_exact_counts *c, size_t size);
VPMU_API bool vpmu_exact_would_overflow(const struct vpmu_vcpu *vcpu,
					const struct vpmu_exact_counts *c);
#define vpmu_exact_would_overflow(vcpu, c)                                                         \
	vpmu_exact_would_overflow_sized((vcpu), (c), sizeof(*(c)))

/* ---- guest memory and LBRs ----------------------------------------------- */

struct vpmu_mem_region {
	uint64_t gpa;
	uint64_t size;
	void *hva;
};

/*
 * The guest RAM vpmu may write PEBS records to (copied; regions must not
 * overlap). Records go through the guest's page tables into these
 * regions and nowhere else. -EINVAL on overlapping or wrapping regions.
 */
VPMU_API int vpmu_vcpu_set_memory(struct vpmu_vcpu *vcpu, const struct vpmu_mem_region *regions,
				  size_t nr);

enum vpmu_branch_kind {
	VPMU_BR_COND,	  /* Jcc, LOOP, JCXZ (taken) */
	VPMU_BR_JMP,	  /* near relative JMP */
	VPMU_BR_JMP_IND,  /* near indirect JMP */
	VPMU_BR_CALL,	  /* near relative CALL */
	VPMU_BR_CALL_IND, /* near indirect CALL */
	VPMU_BR_RET,	  /* near RET */
	VPMU_BR_FAR,	  /* far branches, interrupts, exceptions, IRET, SYSCALL/SYSRET */
};

/* Whether branches should be reported now: DEBUGCTL.LBR set, LBRs not frozen. */
VPMU_API bool vpmu_lbr_active(const struct vpmu_vcpu *vcpu);

/*
 * A taken branch retired: record it in the LBR stack (TOS advances,
 * FROM/TO/INFO written) unless LBR_SELECT filters it out. `cpl` is the
 * CPL the branch was taken at; `cycles` the core cycles since the last
 * recorded branch (LBR_INFO[15:0], saturating).
 */
VPMU_API void vpmu_lbr_branch(struct vpmu_vcpu *vcpu, uint64_t from, uint64_t to,
			      enum vpmu_branch_kind kind, unsigned int cpl, uint64_t cycles);

/* ---- PMI delivery -------------------------------------------------------- */

enum vpmu_lvt_action {
	VPMU_LVT_DROP,	/* masked, or a mode/vector hardware would not deliver */
	VPMU_LVT_FIXED, /* interrupt with `vector` */
	VPMU_LVT_NMI,	/* NMI */
};

struct vpmu_lvt {
	enum vpmu_lvt_action action;
	uint8_t vector;
	uint32_t after; /* the LVT value after delivery: mask bit (16) set */
};

/*
 * Decode the local APIC LVT performance-counter register (offset 340H /
 * x2APIC MSR 834H): bits 7:0 vector, 10:8 delivery mode, 16 mask.
 */
VPMU_API void vpmu_lvt_decode(uint32_t lvt, struct vpmu_lvt *ret);

/*
 * The VMM delivered the PMI it was asked for: the guest gets an interrupt
 * (or NMI) of its own for it (pmis_delivered in the stats).
 */
VPMU_API void vpmu_pmi_delivered(struct vpmu_vcpu *vcpu);

/*
 * The VMM handed the PMI to the guest's local APIC, which merged it with
 * an interrupt of the same vector still pending in its IRR: the guest
 * takes one interrupt for both (SDM Vol. 3A 11.8.4, "Interrupt Acceptance
 * for Fixed Interrupts"). Called instead of vpmu_pmi_delivered(); counted
 * in pmis_merged. A KVM VMM calls it when KVM_SIGNAL_MSI returns 0.
 * Thereby: guest PMI interrupts == pmis_delivered, and pmis_requested -
 * pmis_delivered - pmis_merged PMIs were dropped (a masked LVT entry).
 */
VPMU_API void vpmu_pmi_merged(struct vpmu_vcpu *vcpu);

/*
 * The VMM dropped the PMI it was asked for, as the local APIC does: the
 * LVT performance-counter entry is masked or names a delivery mode that
 * delivers nothing (vpmu_lvt_decode: VPMU_LVT_DROP), or the APIC is
 * disabled (SDM Vol. 3A 11.5.1). Called instead of vpmu_pmi_delivered().
 * Each of the three ends the request: a snapshot taken after it does not
 * ask for the PMI again (vpmu_vcpu_restore), as it does for one the VMM
 * has not answered yet.
 */
VPMU_API void vpmu_pmi_dropped(struct vpmu_vcpu *vcpu);

/* ---- statistics ---------------------------------------------------------- */

/* 2: host times per counter; 3: time_discarded; 4: pmis_merged, log_repeats */
#define VPMU_STATS_VERSION  4
#define VPMU_STATS_COUNTERS 16 /* slots: GP i at i, fixed i at 8 + i */

/* vpmu_counter_stats.flags */
#define VPMU_CTR_IMPLEMENTED (1u << 0) /* the model has this counter */
#define VPMU_CTR_PROGRAMMED  (1u << 1) /* locally enabled with an event */
#define VPMU_CTR_RUNNING     (1u << 2) /* counting now (global enable, not frozen) */
#define VPMU_CTR_BACKED	     (1u << 3) /* a host counter counts it */
#define VPMU_CTR_UNBACKED    (1u << 4) /* the backend cannot count this event */
#define VPMU_CTR_FILTERED    (1u << 5) /* programmed, but the event filter denies it */
#define VPMU_CTR_DEGRADED                                                                          \
	(1u << 6) /* backed, but not counting all the time, or                                     \
		     overflows may come late (error says why) */

struct vpmu_counter_stats {
	uint64_t config; /* IA32_PERFEVTSELx, or the FIXED_CTR_CTRL nibble */
	uint64_t count;	 /* counter value at publication */
	uint64_t overflows;
	uint64_t creates;      /* host events (re)created */
	uint64_t updates;      /* backend operations on this counter */
	uint32_t flags;	       /* VPMU_CTR_* */
	int32_t error;	       /* why unbacked or degraded: negative errno, else 0 */
	uint64_t time_enabled; /* host backends: ns the host event was enabled */
	uint64_t time_running; /* ... and counting (less: multiplexed or not scheduled) */
};

/*
 * Grows at its end only (vpmu_stats_read's size argument says how much
 * the caller has); a field past what the library knows reads 0.
 */
struct vpmu_stats {
	uint32_t version; /* VPMU_STATS_VERSION */
	uint32_t seq;	  /* publication number */
	uint64_t msr_reads;
	uint64_t msr_writes;
	uint64_t msr_faults; /* accesses answered with #GP */
	uint64_t rdpmcs;
	uint64_t syncs;
	uint64_t backend_ops;	/* update operations, all counters */
	uint64_t backend_reads; /* reads to fold a count (guest RDMSR/RDPMC) */
	uint64_t creates;
	uint64_t overflows;
	uint64_t pmis_requested;
	uint64_t pmis_delivered;
	uint64_t global_status;
	uint64_t global_ctrl;
	uint64_t pebs_records; /* PEBS records written into the guest */
	uint64_t pebs_bytes;
	uint64_t pebs_skipped;	/* records the bounds check or a guest page fault skipped */
	uint64_t pebs_deferred; /* times a record waited for guest registers */
	uint64_t walk_faults;	/* guest page walks to the DS area that failed */
	char model[32];
	char backend[16];
	struct vpmu_counter_stats counters[VPMU_STATS_COUNTERS];
	/*
	 * Per counter slot (as counters[]), time backend: ns of the host
	 * event's time_running that it counted and a guest write of the
	 * counter (a reload) discarded before they reached the counter
	 * value. A reload that keeps the host's sampling grid discards
	 * nothing; one that comes later than the grid allows (the guest's
	 * handler took longer than a period) starts the new period at the
	 * reload and discards the time since the last fold. So for a guest
	 * that samples with period P and reloads at each overflow,
	 * time_running - time_discarded is overflows x P plus the partial
	 * last period. 0 for other backends.
	 */
	uint64_t time_discarded[VPMU_STATS_COUNTERS];
	uint64_t pmis_merged; /* PMIs merged into a pending interrupt (vpmu_pmi_merged) */
	/*
	 * Per counter slot (as counters[]): warnings about the counter not
	 * logged. The library logs one line per counter and reason for the
	 * life of the vCPU and counts the repeats here, so a guest toggling
	 * an event the host cannot back cannot flood the log.
	 */
	uint64_t log_repeats[VPMU_STATS_COUNTERS];
};

/*
 * A consistent copy of the vCPU's published figures into the `size` bytes
 * at `ret` (call it as vpmu_stats_read(vcpu, ret)): bytes past the
 * library's struct are zeroed. Safe from any thread while the vCPU runs:
 * it never blocks the vCPU and never returns a torn value. Published at
 * every sync and overflow. -EINVAL: NULL arguments, or `size` shorter
 * than the VPMU_0.1 struct.
 */
VPMU_API int vpmu_stats_read_sized(const struct vpmu_vcpu *vcpu, struct vpmu_stats *ret,
				   size_t size);
VPMU_API int vpmu_stats_read(const struct vpmu_vcpu *vcpu, struct vpmu_stats *ret);
#define vpmu_stats_read(vcpu, ret) vpmu_stats_read_sized((vcpu), (ret), sizeof(*(ret)))

/*
 * `st` (one vCPU's figures, index `index` in its VM) as one JSON object,
 * the element of a snapshot's "vcpus" array: {"index", "model", "backend",
 * every scalar field of struct vpmu_stats, "counters": [{"slot", "kind" ("gp" or
 * "fixed"), "index", "config", "event" (catalogue name or null), "count",
 * "time_enabled", "time_running", "time_discarded", "overflows", "creates", "updates",
 * "flags", "state" ("backed", "unbacked", "filtered" or "idle"), "error",
 * "log_repeats"}, ...]} for each implemented counter.
 * Written NUL-terminated to `buf`; *ret_len is its length without the NUL.
 * With buf NULL and size 0, only *ret_len is set: the length needed (add
 * one for the NUL). `st_size` is sizeof(*st): fields past it are left
 * out (call it as vpmu_stats_to_json(st, index, buf, size, ret_len)).
 * -ENOSPC: `buf` is too small; -EPROTO: st->version is not
 * VPMU_STATS_VERSION; -EINVAL: NULL arguments, or `st_size` shorter than
 * the VPMU_0.1 struct. Allocates nothing and is safe from any thread.
 */
VPMU_API int vpmu_stats_to_json_sized(const struct vpmu_stats *st, size_t st_size,
				      unsigned int index, char *buf, size_t size, size_t *ret_len);
VPMU_API int vpmu_stats_to_json(const struct vpmu_stats *st, unsigned int index, char *buf,
				size_t size, size_t *ret_len);
#define vpmu_stats_to_json(st, index, buf, size, ret_len)                                          \
	vpmu_stats_to_json_sized((st), sizeof(*(st)), (index), (buf), (size), (ret_len))

/* ---- snapshot and restore ----------------------------------------------- */

/*
 * A vCPU's PMU as the guest can observe it, for snapshots and live
 * migration: every PMU MSR (counter values with what the host counted
 * folded in, overflow and freeze bits in GLOBAL_STATUS, the LBR stack and
 * TOS, the PEBS and DS MSRs), PEBS records still to be written, a PMI due
 * or asked for and not yet delivered, the event filter's identity, and
 * the exact backend's crystal-clock phase. Not in it: the guest's RAM
 * (the DS area and PEBS buffer live there), its LAPIC (the LVT entry), the
 * host's counters and the statistics: the VMM saves the first two, the
 * restored vCPU makes the third anew and keeps its own figures.
 *
 * The blob is little-endian whatever the host, and says what it holds:
 * a 64-byte header ("VPMUSNAP", format VPMU_SNAPSHOT_FORMAT, header size,
 * total size, CRC-32 of the blob, record count, model name), then records
 * of a 16-bit tag, 16-bit flags (bit 0: optional, a reader may skip it),
 * a 32-bit payload length and the payload padded to 8 bytes: the PMU's
 * identity (perfmon version, counters and widths, LBR depth, address
 * widths, PERF_CAPABILITIES and the model's other guest-visible
 * features), every MSR of vpmu_msr_list() as (address, value) pairs in
 * ascending order, the pending state, the filter digest, and (optional)
 * the backend's name and phase. A later format that only adds optional
 * records keeps the format number; one an older library could misread
 * raises it.
 */
#define VPMU_SNAPSHOT_FORMAT 1

/*
 * Save into `buf` (`size` bytes); *ret_len is the blob's length. With buf
 * NULL and size 0, only *ret_len is set: the size needed. Call it on the
 * vCPU thread between guest instructions (after the VMM's last feed):
 * it folds what the host counters counted, and nothing else changes.
 * -ENOSPC: `buf` is too small; -EINVAL: NULL arguments; -ENOMEM.
 */
VPMU_API int vpmu_vcpu_save(struct vpmu_vcpu *vcpu, void *buf, size_t size, size_t *ret_len);

/*
 * Restore a blob from vpmu_vcpu_save() into `vcpu`, normally a fresh one
 * created with the same model, narrowing and event filter, on this host
 * or another, with any backend. The host counters are made anew at the
 * next vpmu_vcpu_sync(); a PEBS record or PMI the source still owed comes
 * then too (a PMI the VMM was asked for and had not answered with
 * vpmu_pmi_delivered(), _merged() or _dropped() is asked for again, so a VMM need not save that
 * request itself). Give the vCPU its guest RAM (vpmu_vcpu_set_memory)
 * before that sync. The vCPU is left untouched on any error, with one log
 * line saying why: -EBADMSG: not a snapshot, or a damaged one (checksum,
 * truncation, a record or value this vCPU cannot hold); -EPROTONOSUPPORT:
 * a newer format than this library reads; -EXDEV: another model, another
 * narrowing or another event filter; -EINVAL: NULL arguments; -ENOMEM.
 */
VPMU_API int vpmu_vcpu_restore(struct vpmu_vcpu *vcpu, const void *buf, size_t len);

/* ---- MSRs and RDPMC ----------------------------------------------------- */

/* Guest RDMSR / WRMSR. Codes as described at the top of this file. */
VPMU_API int vpmu_msr_read(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t *ret_value);
VPMU_API int vpmu_msr_write(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t value);

/*
 * Every MSR this vCPU implements, in ascending order (for MSR filters and
 * migration). Writes up to `n` entries to `msrs` (may be NULL when n is 0)
 * and returns the total count.
 */
VPMU_API size_t vpmu_msr_list(const struct vpmu_vcpu *vcpu, uint32_t *msrs, size_t n);

/*
 * Guest RDPMC with ECX = `ecx`: bit 30 selects fixed counters, bit 29 the
 * PERF_METRICS register, bit 31 (fast read) is not supported and faults.
 * -EINVAL: #GP. The VMM checks CR4.PCE and CPL before calling.
 */
VPMU_API int vpmu_rdpmc(struct vpmu_vcpu *vcpu, uint32_t ecx, uint64_t *ret_value);

/*
 * What a guest RDPMC with ECX = `ecx` would return now, for the VMM's own
 * use (e.g. KVM's RDPMC shadow): not counted as a guest access.
 */
VPMU_API int vpmu_rdpmc_peek(struct vpmu_vcpu *vcpu, uint32_t ecx, uint64_t *ret_value);

/* ---- CPUID and IA32_MISC_ENABLE ----------------------------------------- */

struct vpmu_cpuid_entry {
	uint32_t function;
	uint32_t index;
	uint32_t eax, ebx, ecx, edx;
};

/*
 * The PMU view of CPUID leaf `function`/`index`. Leaves 0AH, 15H and 23H
 * are owned by the PMU and come back whole; for leaf 01H only the PMU bits
 * (ECX[2] DTES64, ECX[4] DS-CPL, ECX[15] PDCM, EDX[21] DS) are set and the
 * VMM merges them (see vpmu_cpuid_patch). -ENOENT for any other leaf.
 */
VPMU_API int vpmu_cpuid(const struct vpmu_vcpu *vcpu, uint32_t function, uint32_t index,
			struct vpmu_cpuid_entry *ret_entry);

/*
 * Patch the PMU-related leaves of a VMM's CPUID table in place: replace
 * 0AH/15H/23H, set or clear the PMU bits of 01H, raise leaf 0's maximum
 * leaf if needed, and append missing PMU leaves while `*nr < capacity`.
 * -ENOSPC if entries did not fit (the ones that fit are patched).
 */
VPMU_API int vpmu_cpuid_patch(const struct vpmu_vcpu *vcpu, struct vpmu_cpuid_entry *entries,
			      size_t *nr, size_t capacity);

/*
 * IA32_MISC_ENABLE as this PMU needs it: `value` with bit 7 (perfmon
 * available), bit 11 (BTS unavailable) and bit 12 (PEBS unavailable) set
 * per the model. The VMM owns the rest of the MSR.
 */
VPMU_API uint64_t vpmu_misc_enable_patch(const struct vpmu_vcpu *vcpu, uint64_t value);

/* ---- the PMU event filter ---------------------------------------------- */

/*
 * Which guest events may reach a host counter, with the semantics of KVM's
 * KVM_SET_PMU_EVENT_FILTER: an allow or deny list of event select + unit
 * mask entries, or of masked entries (event select, mask, match, exclude:
 * an event is in the list when (umask & mask) == match for an include
 * entry of its event select and for no exclude entry), and a fixed-counter
 * bitmap (fixed counter i counts iff: allow and bit i set, or deny and bit
 * i clear). A filtered counter does not count: no host event is created
 * and the guest reads the value it wrote; its stats carry
 * VPMU_CTR_FILTERED. The text format is in docs/pmu-filter.md.
 *
 * Default policy (no filter): nothing that counts another thread or the
 * rest of the host reaches it: AnyThread (PERFEVTSEL bit 21, FIXED_CTR_CTRL
 * bit 4i+2) and OFFCORE_RESPONSE (event select 0xB7, 0xBB) are filtered,
 * everything else is allowed. AnyThread is filtered under every filter; a
 * deny list adds to the default policy (OFFCORE_RESPONSE stays filtered);
 * an allow list replaces it (only what it names counts).
 *
 * A filter is immutable: share it between vCPUs and threads freely.
 */

/*
 * Parse the text of a filter file. -EINVAL: `err` (if not NULL) gets one
 * line, "line N: what is wrong" (a missing action line has no number);
 * -ENOMEM.
 */
VPMU_API int vpmu_filter_parse(const char *text, struct vpmu_filter **ret_filter, char *err,
			       size_t err_size);
/*
 * vpmu_filter_parse() of the file at `path`. Also -errno when it cannot be
 * read (`err`: "cannot open: <reason>"; the path is not repeated) and
 * -EFBIG past 1 MiB.
 */
VPMU_API int vpmu_filter_load(const char *path, struct vpmu_filter **ret_filter, char *err,
			      size_t err_size);
VPMU_API void vpmu_filter_free(struct vpmu_filter *filter);
/* Whether a GP counter programmed with `evtsel` counts (NULL: the default policy). */
VPMU_API bool vpmu_filter_allows_gp(const struct vpmu_filter *filter, uint64_t evtsel);
/* Whether fixed counter `idx` counts (NULL: the default policy). */
VPMU_API bool vpmu_filter_allows_fixed(const struct vpmu_filter *filter, unsigned int idx);

#ifdef __cplusplus
}
#endif

#endif
