/* SPDX-License-Identifier: MIT */
/*
 * The emulator vCPU of vpmu-vmm: Unicorn runs the guest, Capstone
 * classifies its instructions, and every retired instruction is fed to
 * the vPMU's exact backend. One vCPU, one block of RAM at guest-physical 0.
 */
#ifndef VMM_EMU_H
#define VMM_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loader.h"
#include "platform.h"
#include "vpmu/vpmu.h"

struct emu;
struct vpmu_vcpu;

enum emu_layout {
	EMU_LAYOUT_FLAT,  /* RAM from guest-physical 0 (3-4 GiB left free for MMIO) */
	EMU_LAYOUT_LINUX, /* the first MiB, then RAM from 16 MiB (emu.c: ram_layout) */
};

#define EMU_HOLE_START 0xc0000000ull /* RAM past 3 GiB continues at 4 GiB */

struct emu_config {
	const char *model;		      /* guest CPU model (vpmu model name) */
	uint64_t mem_size;		      /* bytes of RAM, a multiple of 4 KiB */
	bool pmu;			      /* attach the vPMU (false: no PMU, nothing counted) */
	FILE *serial_out;		      /* guest serial output */
	uint64_t max_instructions;	      /* stop with an error past this many; 0 = no limit */
	const struct vpmu_filter *pmu_filter; /* NULL: the default policy; outlives the emu */
	int pmu_backend;     /* VPMU_BACKEND_EXACT (default) or VPMU_BACKEND_TIME */
	int pmu_signo;	     /* the time backend's overflow signal (vpmu_config.signo); -1:
				none, the emulator looks for host overflows between blocks */
	vpmu_log_fn pmu_log; /* the vPMU's warnings and errors; NULL: none */
	void *pmu_log_data;
	enum emu_layout layout;
	/* the perfmon version the vPMU exposes (vpmu_config.version); 0: the model's */
	int pmu_version;
};

#define EMU_PMI_RECORD 8

struct emu_stats {
	uint64_t instructions;	 /* retired guest instructions */
	uint64_t cycles;	 /* modelled core cycles (= guest TSC ticks) */
	uint64_t blocks;	 /* translated-block entries counted in bulk */
	uint64_t stepped;	 /* instructions counted one by one */
	uint64_t step_entries;	 /* switches into single-step mode */
	uint64_t until_stops;	 /* overflows located by stopping after their instruction */
	uint64_t tb_flushes;	 /* every translation dropped */
	uint64_t tb_removals;	 /* one block's translations dropped (new hooks) */
	uint64_t windows;	 /* Unicorn regions over guest-linear ranges (emu-mmu.c) */
	uint64_t window_pages;	 /* pages mapped into them on first touch */
	uint64_t window_unmaps;	 /* pages dropped because the guest's paging changed */
	uint64_t window_flushes; /* every page dropped (too many mapped) */
	uint64_t resyncs;	 /* paging changes checked against the mapped pages */
	uint64_t smc_events;   /* writes to pages holding translated code through another mapping */
	uint64_t apic_aliases; /* linear pages the guest mapped onto the xAPIC page */
	uint64_t msr_exits, cpuid_exits, io_exits, rdpmc_exits;
	uint64_t interrupts, nmis, exceptions;
	uint64_t page_faults;		     /* #PF delivered to the guest */
	uint64_t by_vector[32];		     /* exceptions raised to the guest, by vector */
	uint64_t last_exc_rip, last_exc_cr2; /* where the last one was (CR2 for #PF) */
	uint32_t last_exc_vector, last_exc_error;
	uint64_t pmis;	/* PMIs delivered through the LVT */
	uint64_t halts; /* HLTs the modelled clock skipped to the next timer interrupt */
	uint64_t kicks; /* host-counter overflows that stopped the guest to poll the vPMU
			   (a signal, emu_kick, or a record found between blocks) */
	/* instructions retired when each of the first EMU_PMI_RECORD PMIs was raised (0: none) */
	uint64_t pmi_insns[EMU_PMI_RECORD];
};

void emu_config_init(struct emu_config *cfg);

/* -EINVAL (bad config, `err` says why), -ENOMEM, -EIO (Unicorn/Capstone). */
int emu_new(const struct emu_config *cfg, struct emu **ret, char *err, size_t errlen);
void emu_free(struct emu *emu);

/* Host mapping of guest-physical [0, size): RAM where emu_ram_ranges says, holes elsewhere. */
struct vmm_ram emu_ram(struct emu *emu);
/* The guest-physical RAM ranges (at most `max`); returns how many. */
unsigned int emu_ram_ranges(const struct emu *emu, uint64_t *ret_gpa, uint64_t *ret_size,
			    unsigned int max);
struct vpmu_vcpu *emu_vpmu(struct emu *emu);
/* The guest's paging registers now (CR0, CR3, CR4, EFER), for walks of its memory. */
void emu_paging(const struct emu *emu, uint64_t *ret_cr0, uint64_t *ret_cr3, uint64_t *ret_cr4,
		uint64_t *ret_efer);
struct platform *emu_platform(struct emu *emu);

/* Put the vCPU in the state `boot` asks for; `arg` goes to RDI (ELF64) . */
int emu_boot(struct emu *emu, const struct vmm_boot *boot, uint64_t arg, char *err, size_t errlen);

/*
 * Load a Linux bzImage (an emu created with EMU_LAYOUT_LINUX), its
 * command line and initrd, and put the vCPU at its 64-bit entry.
 */
int emu_load_linux(struct emu *emu, const void *image, size_t size, const char *cmdline,
		   const void *initrd, size_t initrd_size, char *err, size_t errlen);

/*
 * After emu_load_linux: NULL where the VMM inflated the kernel itself
 * (bzimage_unpack in bzimage.c), else why the guest's decompressor runs.
 */
const char *emu_linux_unpack_note(const struct emu *emu);

/*
 * The Linux 64-bit boot protocol's entry state: paging on with `cr3`, CS
 * 0x10 and DS/ES/SS 0x18 from the GDT at `gdt`, RSI = the zero page.
 */
int emu_boot_linux64(struct emu *emu, uint64_t gdt, uint16_t gdt_limit, uint64_t cr3,
		     uint64_t entry, uint64_t zero_page, char *err, size_t errlen);

/*
 * Run until the guest writes the debug-exit port (0, *ret_status = its
 * exit status), reaches the stop point of emu_stop_at (EMU_RUN_STOP_POINT)
 * or fails (-EFAULT: the guest did something the VMM cannot go on from,
 * such as a triple fault; `err` holds one line).
 */
int emu_run(struct emu *emu, int *ret_status, char *err, size_t errlen);

/*
 * Make emu_run return EMU_RUN_STOP_POINT at the first block boundary where
 * `n` or more guest instructions have retired (0: before the first one),
 * once. The same guest stops at the same place every run: a point to save
 * it at (emu_save).
 */
#define EMU_RUN_STOP_POINT 1
void emu_stop_at(struct emu *emu, uint64_t n);

/*
 * Snapshots (emu-snapshot.c): the guest as it can observe itself -- CPU
 * state, the VMM's registers and pending events, the modelled clock,
 * LAPIC, platform devices, vPMU and RAM -- to go on in another process
 * exactly as it would have here. Take one when emu_run has returned
 * (EMU_RUN_STOP_POINT, or before the first run); restore it into a fresh
 * emu made with the same model, perfmon narrowing, RAM size, layout and
 * event filter, and with the same Unicorn, then call emu_run.
 */
#define EMU_SNAPSHOT_FORMAT 1

struct emu_snapshot_info {
	char model[32]; /* NUL-terminated */
	int pmu_version;
	uint64_t mem_size;
	enum emu_layout layout;
	bool pmu;
	uint64_t instructions; /* retired when it was taken */
};

/* 0, or a negative errno with one line in `err` (-EIO: writing `f` failed). */
int emu_save(struct emu *emu, FILE *f, char *err, size_t errlen);

/*
 * Read a snapshot from `f` and check it on its own (header, size, CRC,
 * sections): *ret_blob (free() it) and *ret_len for emu_restore, and what
 * guest it needs in *ret_info. -EBADMSG: not a snapshot or a damaged one;
 * -EPROTONOSUPPORT: another format; -EFBIG, -EIO, -ENOMEM. `err` says why.
 */
int emu_snapshot_read(FILE *f, void **ret_blob, size_t *ret_len, struct emu_snapshot_info *ret_info,
		      char *err, size_t errlen);

/*
 * Restore into a fresh `emu` (not run yet). Everything is checked before
 * anything changes: -EBADMSG (damaged), -EXDEV (another model, RAM size,
 * Unicorn or event filter), -EPROTONOSUPPORT, with one line in `err`.
 */
int emu_restore(struct emu *emu, const void *blob, size_t len, char *err, size_t errlen);

/*
 * From a signal handler or another thread (async-signal-safe): stop the
 * run at the next block boundary; emu_run then returns -EINTR with `err`
 * saying where the guest was. It can be resumed with emu_run.
 */
void emu_interrupt(struct emu *emu);

/* One line: RIP, CPL, mode and paging, instructions retired. */
void emu_describe(struct emu *emu, char *buf, size_t len);

/* Where Unicorn keeps an exception's error code, and IA32_EFER, in a uc_context (-1: not found). */
int emu_error_code_offset(void);
int emu_efer_offset(void);

void emu_get_stats(const struct emu *emu, struct emu_stats *ret);

/*
 * From the host backend's signal handler (async-signal-safe): stop the
 * guest at the next block boundary, so that the run loop polls the vPMU
 * (vpmu_vcpu_sync) and delivers the PMI of a host counter's overflow.
 */
void emu_kick(struct emu *emu);

#endif
