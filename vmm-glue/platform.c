/* SPDX-License-Identifier: MIT */
/*
 * COM1 as a 16550A that is always ready to transmit and never receives,
 * isa-debug-exit, fw_cfg in its traditional I/O form, and the 8259 PIC
 * ports (accepted and ignored: the emulator has no legacy interrupts).
 */
#include <errno.h>
#include <string.h>

#include "platform.h"

#define UART_LCR_DLAB	     0x80
#define UART_LSR_THRE	     0x20
#define UART_LSR_TEMT	     0x40
#define UART_IIR_NO_INT	     0x01
#define UART_MSR_DCD_DSR_CTS 0xb0

void platform_init(struct platform *p, FILE *serial_out, uint64_t ram_size, uint16_t cpus)
{
	memset(p, 0, sizeof(*p));
	p->serial_out = serial_out;
	p->ram_size = ram_size;
	p->cpus = cpus;
}

static int serial_io(struct platform *p, unsigned int reg, bool write, uint32_t *value)
{
	uint8_t v = (uint8_t) *value;
	bool dlab = p->lcr & UART_LCR_DLAB;

	if (write) {
		switch (reg) {
		case 0:
			if (dlab) {
				p->dll = v;
			} else {
				p->serial_bytes++;
				if (p->serial_out) {
					fputc(v, p->serial_out);
					if (v == '\n')
						fflush(p->serial_out);
				}
			}
			break;
		case 1:
			if (dlab)
				p->dlm = v;
			else
				p->ier = v & 0x0f;
			break;
		case 3:
			p->lcr = v;
			break;
		case 4:
			p->mcr = v & 0x1f;
			break;
		case 7:
			p->scr = v;
			break;
		default:
			break; /* FCR, LSR, MSR writes: nothing to model */
		}
		return 0;
	}
	switch (reg) {
	case 0:
		*value = dlab ? p->dll : 0;
		break;
	case 1:
		*value = dlab ? p->dlm : p->ier;
		break;
	case 2:
		*value = UART_IIR_NO_INT;
		break;
	case 3:
		*value = p->lcr;
		break;
	case 4:
		*value = p->mcr;
		break;
	case 5:
		*value = UART_LSR_THRE | UART_LSR_TEMT;
		break;
	case 6:
		*value = UART_MSR_DCD_DSR_CTS;
		break;
	default:
		*value = p->scr;
		break;
	}
	return 0;
}

/* The bytes of fw_cfg item `key` at `off`; -1 past its end. */
static int fw_cfg_byte(const struct platform *p, uint16_t key, uint32_t off)
{
	uint8_t buf[8];
	uint32_t len = 0;

	switch (key) {
	case FW_CFG_SIGNATURE:
		memcpy(buf, "QEMU", 4);
		len = 4;
		break;
	case FW_CFG_ID:
		buf[0] = 1; /* traditional interface, no DMA */
		memset(buf + 1, 0, 3);
		len = 4;
		break;
	case FW_CFG_RAM_SIZE:
		for (int i = 0; i < 8; i++)
			buf[i] = (uint8_t) (p->ram_size >> (8 * i));
		len = 8;
		break;
	case FW_CFG_NB_CPUS:
	case FW_CFG_MAX_CPUS:
		buf[0] = (uint8_t) p->cpus;
		buf[1] = (uint8_t) (p->cpus >> 8);
		len = 2;
		break;
	case FW_CFG_FILE_DIR:
		memset(buf, 0, 4); /* big-endian count: no files */
		len = 4;
		break;
	default:
		break;
	}
	return off < len ? buf[off] : -1;
}

int platform_io(struct platform *p, uint16_t port, unsigned int size, bool write, uint32_t *value)
{
	if (p->user_fn && port == p->user_port)
		return p->user_fn(p->user_data, port, write, value);
	if (port >= PORT_COM1 && port < PORT_COM1 + 8)
		return serial_io(p, port - PORT_COM1, write, value);
	switch (port) {
	case PORT_DEBUG_EXIT:
		if (write) {
			p->exited = true;
			p->exit_status = (int) ((*value << 1) | 1);
		} else {
			*value = 0;
		}
		return 0;
	case PORT_FW_CFG_SEL:
		if (write) {
			p->fw_sel = (uint16_t) *value;
			p->fw_off = 0;
		} else {
			*value = p->fw_sel;
		}
		return 0;
	case PORT_FW_CFG_DATA:
		if (!write) {
			uint32_t v = 0;

			for (unsigned int i = 0; i < size; i++) {
				int b = fw_cfg_byte(p, p->fw_sel, p->fw_off++);

				v |= (uint32_t) (b < 0 ? 0 : b) << (8 * i);
			}
			*value = v;
		}
		return 0;
	case 0x20:
	case 0x21:
	case 0xa0:
	case 0xa1: /* 8259 PICs: masked, ignored */
	case 0x80: /* POST code / I/O delay */
		if (!write)
			*value = port == 0x21 || port == 0xa1 ? 0xff : 0;
		return 0;
	default:
		return -ENOENT;
	}
}
