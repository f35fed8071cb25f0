/* SPDX-License-Identifier: MIT */
/*
 * The PC platform of vpmu-vmm: what test kernels written for QEMU use
 * (COM1, isa-debug-exit, fw_cfg) and what an unmodified Linux kernel
 * probes at boot (CMOS RTC, PIT, port 61H, i8042, PCI configuration
 * mechanism #1, ACPI PM registers, the other COM ports), on the modelled
 * clock. See platform.c for the port map and the policy for ports no
 * device decodes.
 */
#ifndef VMM_PLATFORM_H
#define VMM_PLATFORM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "acpi-pm.h"
#include "i8042.h"
#include "pic.h"
#include "pit.h"
#include "rtc.h"

#define PORT_COM1	 0x3f8
#define PORT_DEBUG_EXIT	 0xf4
#define PORT_FW_CFG_SEL	 0x510
#define PORT_FW_CFG_DATA 0x511
#define PORT_SYS_CTRL_B	 0x61 /* NMI status and control: PIT gate 2, speaker, refresh */
#define PORT_PCI_ADDR	 0xcf8
#define PORT_PCI_DATA	 0xcfc
#define PORT_RST_CNT	 0xcf9 /* reset control; the FADT's RESET_REG */
#define RST_CNT_RESET	 0x06  /* SYS_RST | RST_CPU: the FADT's RESET_VALUE */
#define IRQ_COM1	 4     /* ISA IRQ of COM1 */

/* fw_cfg keys (QEMU's docs/specs/fw_cfg.txt) */
#define FW_CFG_SIGNATURE 0x00
#define FW_CFG_ID	 0x01
#define FW_CFG_RAM_SIZE	 0x03
#define FW_CFG_NB_CPUS	 0x05
#define FW_CFG_MAX_CPUS	 0x0f
#define FW_CFG_FILE_DIR	 0x19

/* platform_io: the access reached a device (0) or no device (this). */
#define PLATFORM_IO_NONE 1

#define PLATFORM_UNKNOWN_MAX 64

/* A port an embedder (a benchmark) handles itself. */
typedef int (*platform_port_fn)(void *data, uint16_t port, bool write, uint32_t *value);
/* ISA interrupt line `line` (0-15) now at `level` (high: requesting). */
typedef void (*platform_irq_fn)(void *data, unsigned int line, bool level);
/* The guest TSC now (the modelled clock). */
typedef uint64_t (*platform_clock_fn)(void *data);

/* Why the guest stopped (exited is set for each). */
enum platform_stop {
	PLATFORM_RUNNING,
	PLATFORM_STOP_DEBUG_EXIT, /* isa-debug-exit: exit_status = (value << 1) | 1 */
	PLATFORM_STOP_POWEROFF,	  /* ACPI S5 (Linux `poweroff`): exit_status 0 */
	PLATFORM_STOP_RESET,	  /* i8042 or reset-control reset (`reboot`): exit_status 0 */
};

/* Something the guest touched that nothing models, recorded once. */
struct platform_unknown {
	uint32_t addr; /* I/O port or MSR */
	uint8_t size;  /* bytes of an I/O access; 0 for an MSR */
	bool write;
	bool msr;
};

struct platform {
	FILE *serial_out; /* guest serial output (stdout) */
	uint8_t lcr, mcr, ier, scr, dll, dlm, fcr, rbr;
	bool rx_ready;	   /* loopback mode: a byte came back to RBR */
	uint8_t lsr_err;   /* LSR error bits (overrun) until LSR is read */
	uint8_t msr_in;	   /* MSR 7:4, the modem inputs as last seen */
	uint8_t msr_delta; /* MSR 3:0, changes since MSR was read */
	bool thre_int;	   /* a THR empty interrupt is pending (until IIR read or THR write) */
	bool irq4;	   /* COM1's interrupt line as last driven */
	bool exited;
	int exit_status;
	enum platform_stop stop;
	uint16_t fw_sel;
	uint32_t fw_off;
	uint64_t ram_size;
	uint16_t cpus;
	uint64_t serial_bytes;
	uint16_t user_port;
	platform_port_fn user_fn;
	void *user_data;
	/* the modelled clock */
	uint64_t tsc_hz;
	platform_clock_fn clock;
	void *clock_data;
	int64_t rtc_epoch;
	/* legacy devices */
	struct rtc rtc;
	struct pit pit;
	struct i8042 kbc;
	struct acpi_pm pm;
	uint8_t sys_ctrl_b; /* port 61H bits 3:0 */
	uint32_t pci_addr;  /* CONFIG_ADDRESS */
	uint8_t rst_cnt;
	/* interrupts: the ISA lines go to `irq`, or to the platform's own 8259s if NULL */
	platform_irq_fn irq;
	void *irq_data;
	struct pic pic;
	/* what nothing models */
	struct platform_unknown unknown[PLATFORM_UNKNOWN_MAX];
	unsigned int nr_unknown;
	uint64_t unknown_dropped;  /* distinct ones past PLATFORM_UNKNOWN_MAX */
	uint64_t unknown_accesses; /* all accesses to them */
};

/*
 * Until platform_set_clock there is no clock: the devices that count time
 * (PIT, port 61H, PM timer) are absent, their ports read all ones and are
 * recorded as unknown, as before they were modelled (a PIT frozen in time
 * would hang Linux's PIT calibration, which polls port 61H for OUT2), and
 * the RTC reads RTC_DEFAULT_EPOCH without advancing.
 */
void platform_init(struct platform *p, FILE *serial_out, uint64_t ram_size, uint16_t cpus);

/*
 * The modelled clock: the guest TSC runs at tsc_hz (for Skylake-Server
 * 2.1 GHz, CPUID 15H crystal * ratio) and `clock` tells it when a timed
 * device is accessed. Call before the guest runs: it resets the RTC, PIT
 * and PM timer to their power-on state at TSC 0. No device reads host
 * time. `epoch` is what the RTC reads at TSC 0 (Unix seconds, UTC; e.g.
 * RTC_DEFAULT_EPOCH, which platform_init uses).
 */
void platform_set_clock(struct platform *p, uint64_t tsc_hz, int64_t epoch, platform_clock_fn clock,
			void *clock_data);

/*
 * Where the devices' ISA interrupt lines go: `irq` is called on each
 * change of a line's level. NULL (platform_init's choice) drives the
 * platform's own 8259A pair (`pic`, ports 20H-21H, A0H-A1H, 4D0H-4D1H),
 * whose INT the vCPU takes through pic_connect/pic_ack; a VMM with an
 * interrupt controller elsewhere (KVM's in-kernel irqchip) routes the
 * lines there instead.
 */
void platform_set_irq(struct platform *p, platform_irq_fn irq, void *data);

/*
 * A guest IN (write false) or OUT of `size` (1, 2 or 4) bytes. Returns 0
 * when a device took it (*value holds an IN's result), or
 * PLATFORM_IO_NONE when no device decodes the port: then, as on an empty
 * ISA bus, a read returns all ones and a write is dropped, and the access
 * is recorded in `unknown` (once per port, direction and size). Never
 * fails: unknown ports are not fatal.
 */
int platform_io(struct platform *p, uint16_t port, unsigned int size, bool write, uint32_t *value);

/* Record an MSR the vCPU backend does not model (once per MSR and direction). */
void platform_note_unknown_msr(struct platform *p, uint32_t msr, bool write);

/* One line per recorded unknown port or MSR, for --verbose. */
void platform_print_unknown(const struct platform *p, FILE *f);

#endif
