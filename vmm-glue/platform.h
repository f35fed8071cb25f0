/* SPDX-License-Identifier: MIT */
/*
 * The minimal PC platform of vpmu-vmm, enough for test kernels written for
 * QEMU: COM1 (16550A registers at 3F8H), isa-debug-exit (F4H), fw_cfg
 * (510H selector / 511H data) and PIC ports that are accepted and ignored.
 */
#ifndef VMM_PLATFORM_H
#define VMM_PLATFORM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PORT_COM1	 0x3f8
#define PORT_DEBUG_EXIT	 0xf4
#define PORT_FW_CFG_SEL	 0x510
#define PORT_FW_CFG_DATA 0x511

/* fw_cfg keys (QEMU's docs/specs/fw_cfg.txt) */
#define FW_CFG_SIGNATURE 0x00
#define FW_CFG_ID	 0x01
#define FW_CFG_RAM_SIZE	 0x03
#define FW_CFG_NB_CPUS	 0x05
#define FW_CFG_MAX_CPUS	 0x0f
#define FW_CFG_FILE_DIR	 0x19

/* A port an embedder (a benchmark) handles itself. */
typedef int (*platform_port_fn)(void *data, uint16_t port, bool write, uint32_t *value);

struct platform {
	FILE *serial_out; /* guest serial output (stdout) */
	uint8_t lcr, mcr, ier, scr, dll, dlm;
	bool exited;
	int exit_status; /* (value << 1) | 1, as QEMU's isa-debug-exit */
	uint16_t fw_sel;
	uint32_t fw_off;
	uint64_t ram_size;
	uint16_t cpus;
	uint64_t serial_bytes;
	uint16_t user_port;
	platform_port_fn user_fn;
	void *user_data;
};

void platform_init(struct platform *p, FILE *serial_out, uint64_t ram_size, uint16_t cpus);

/*
 * A guest IN (write false) or OUT of `size` bytes. 0: handled (*value
 * holds an IN's result); -ENOENT: no device at this port.
 */
int platform_io(struct platform *p, uint16_t port, unsigned int size, bool write, uint32_t *value);

#endif
