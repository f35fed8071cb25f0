/* SPDX-License-Identifier: MIT */
/*
 * The PC platform: port map, the devices too small for a file of their
 * own, and the policy for ports nothing decodes.
 *
 *   20H-21H, A0H-A1H  8259A interrupt controllers (pic.c), 4D0H-4D1H
 *                     their ELCR; or, with platform_set_irq, elsewhere
 *   40H-43H           8254 PIT (pit.c)
 *   60H, 64H          8042 keyboard controller, no keyboard (i8042.c)
 *   61H               NMI status and control ("system control port B")
 *   70H-71H           MC146818A RTC and CMOS RAM (rtc.c)
 *   80H               POST code / I/O delay: ignored
 *   F4H               isa-debug-exit (QEMU): exit (value << 1) | 1
 *   2E8H, 2F8H, 3E8H  COM4, COM2, COM3: absent (8 ports each read FFH)
 *   3F8H-3FFH         COM1, a 16550A
 *   510H-511H         fw_cfg, traditional I/O interface (QEMU)
 *   600H-60BH         ACPI PM1a event/control blocks, PM timer (acpi-pm.c)
 *   CF8H, CFCH-CFFH   PCI configuration mechanism #1, no devices
 *   CF9H              reset control
 *
 * Policy for every other port: reads return all ones, as an ISA bus with nothing on it does, writes
 * are dropped, and the access is recorded once per (port, direction,
 * size) so that `vpmu-vmm --verbose` lists what the guest touched that
 * nothing models. An unknown port is never fatal. Accesses wider than a
 * byte to byte-wide devices reach consecutive ports, as on the ISA bus.
 *
 * Port 61H (IBM PC/AT; Intel PCH datasheets' NMI_STS_CNT): bit 0 gates
 * PIT counter 2, bit 1 enables the speaker, bits 2-3 are the SERR#/IOCHK
 * NMI enables, all read back; bit 4 toggles with each DRAM refresh
 * request, every 18 PIT clocks (15.09 us; Linux's delay calibration may
 * poll it); bit 5 is PIT counter 2's OUT; bits 6-7 (NMI sources) read 0.
 *
 * PCI configuration mechanism #1 (PCI Local Bus Specification 3.0
 * §3.2.2.3.2): a doubleword access at CF8H reaches CONFIG_ADDRESS (bit
 * 31 enable, bits 30:24 and 1:0 read 0); CFCH-CFFH reach the function it
 * selects. There is no function on bus 0 or any other, so every
 * configuration read returns all ones (master abort) and writes vanish:
 * Linux finds no host bridge and no devices. Byte and word accesses to
 * CF8H-CFBH are ordinary I/O: CF9H is the reset control register, the
 * others decode nothing (configuration mechanism #2 is absent) and read
 * FFH.
 *
 * Reset control at CF9H (Intel PCH datasheets, RST_CNT): bits 3:1 read
 * back; a write that sets RST_CPU (bit 2) resets the machine. The FADT
 * names it as the ACPI reset register with value 06H.
 *
 * COM1: a 16550A (TI/NS PC16550D datasheet) that transmits at once and
 * receives nothing from outside. LSR always has THRE and TEMT; FCR bit 0
 * enables the FIFOs, shown in IIR bits 7:6; MCR LOOP turns the modem
 * control outputs into the MSR inputs (DTR->DSR, RTS->CTS, OUT1->RI,
 * OUT2->DCD) and sends transmitted bytes back to RBR, which is how
 * Linux's 8250 driver tests for a UART; outside loopback MSR shows DCD,
 * DSR and CTS asserted. MSR 3:0 record changes of those inputs (DCTS,
 * DDSR, TERI on RI's trailing edge, DDCD) until MSR is read. A byte looped
 * back onto an unread one with the FIFOs off is an overrun (LSR OE, until
 * LSR is read). Registers: RBR/THR and DLL/DLM (DLAB), IER (bits 3:0),
 * IIR/FCR, LCR, MCR (bits 4:0), LSR, MSR, SCR.
 *
 * COM1's interrupts (PC16550D, Table IV "Interrupt Control Functions"):
 * IIR names the enabled source of highest priority: receiver line status
 * (06H: OE; ELSI; reset by reading LSR), received data (04H, or with the
 * FIFOs on and a trigger level above one byte the character timeout 0CH,
 * since nothing more will arrive; ERBFI; reset by reading RBR),
 * transmitter holding register empty (02H; ETBEI; reset by reading IIR
 * when it is the source, or by writing THR), modem status (00H; EDSSI;
 * reset by reading MSR); 01H: none. THRE interrupts arise when ETBEI is
 * set while THR is empty and whenever THR empties: here at once after each
 * THR write, so a write clears the interrupt and raises it again (a new
 * edge on the line). The INTR output reaches ISA IRQ 4 through the gate
 * that the PC's serial port puts on it: only with MCR OUT2 set, and never
 * in loopback, where the OUT pins are forced inactive.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "platform.h"

#define UART_LCR_DLAB	     0x80
#define UART_LSR_DR	     0x01
#define UART_LSR_OE	     0x02
#define UART_LSR_THRE	     0x20
#define UART_LSR_TEMT	     0x40
#define UART_IER_ERBFI	     0x01
#define UART_IER_ETBEI	     0x02
#define UART_IER_ELSI	     0x04
#define UART_IER_EDSSI	     0x08
#define UART_IIR_NO_INT	     0x01
#define UART_IIR_MSI	     0x00
#define UART_IIR_THRI	     0x02
#define UART_IIR_RDI	     0x04
#define UART_IIR_RLSI	     0x06
#define UART_IIR_TIMEOUT     0x0c
#define UART_IIR_FIFO	     0xc0
#define UART_FCR_FIFO	     0x01
#define UART_FCR_CLEAR_RCVR  0x02
#define UART_FCR_TRIGGER     0xc0
#define UART_MCR_OUT2	     0x08
#define UART_MCR_LOOP	     0x10
#define UART_MSR_CTS	     0x10
#define UART_MSR_RI	     0x40
#define UART_MSR_DCD_DSR_CTS 0xb0

#define SYS_CTRL_B_RW	   0x0f
#define SYS_CTRL_B_REFRESH 0x10
#define SYS_CTRL_B_OUT2	   0x20
#define REFRESH_PIT_CLOCKS 18
#define PCI_ADDR_MASK	   0x80fffffcu
#define RST_CNT_RST_CPU	   0x04

void platform_init(struct platform *p, FILE *serial_out, uint64_t ram_size, uint16_t cpus)
{
	memset(p, 0, sizeof(*p));
	p->serial_out = serial_out;
	p->ram_size = ram_size;
	p->cpus = cpus;
	p->msr_in = UART_MSR_DCD_DSR_CTS;
	pic_init(&p->pic);
	platform_set_clock(p, 0, RTC_DEFAULT_EPOCH, NULL, NULL);
}

void platform_set_clock(struct platform *p, uint64_t tsc_hz, int64_t epoch, platform_clock_fn clock,
			void *clock_data)
{
	p->tsc_hz = tsc_hz;
	p->clock = clock;
	p->clock_data = clock_data;
	p->rtc_epoch = epoch;
	rtc_init(&p->rtc, tsc_hz, epoch);
	pit_init(&p->pit, tsc_hz);
	i8042_init(&p->kbc);
	acpi_pm_init(&p->pm, tsc_hz);
	p->sys_ctrl_b = 0;
}

void platform_set_irq(struct platform *p, platform_irq_fn irq, void *data)
{
	p->irq = irq;
	p->irq_data = data;
}

static void set_irq(struct platform *p, unsigned int line, bool level)
{
	if (p->irq)
		p->irq(p->irq_data, line, level);
	else
		pic_set_irq(&p->pic, line, level);
}

static uint64_t now(const struct platform *p)
{
	return p->clock ? p->clock(p->clock_data) : 0;
}

static void stop(struct platform *p, enum platform_stop why, int status)
{
	if (p->exited)
		return;
	p->exited = true;
	p->stop = why;
	p->exit_status = status;
}

/* MSR 7:4: the modem inputs, or in loopback the outputs wired to them */
static uint8_t uart_msr_in(const struct platform *p)
{
	uint8_t m = p->mcr;

	if (!(m & UART_MCR_LOOP))
		return UART_MSR_DCD_DSR_CTS;
	return (uint8_t) ((m & 1) << 5 | (m & 2) << 3 | (m & 4) << 4 | (m & 8) << 4);
}

/* IIR bits 3:0: the enabled interrupt of highest priority */
static uint8_t uart_iid(const struct platform *p)
{
	if ((p->ier & UART_IER_ELSI) && p->lsr_err)
		return UART_IIR_RLSI;
	if ((p->ier & UART_IER_ERBFI) && p->rx_ready)
		return (p->fcr & UART_FCR_FIFO) && (p->fcr & UART_FCR_TRIGGER) ? UART_IIR_TIMEOUT
									       : UART_IIR_RDI;
	if ((p->ier & UART_IER_ETBEI) && p->thre_int)
		return UART_IIR_THRI;
	if ((p->ier & UART_IER_EDSSI) && p->msr_delta)
		return UART_IIR_MSI;
	return UART_IIR_NO_INT;
}

/* INTR, gated onto IRQ 4 by OUT2 (off in loopback) */
static void uart_update(struct platform *p)
{
	bool level = uart_iid(p) != UART_IIR_NO_INT && (p->mcr & UART_MCR_OUT2) &&
		     !(p->mcr & UART_MCR_LOOP);

	if (level == p->irq4)
		return;
	p->irq4 = level;
	set_irq(p, IRQ_COM1, level);
}

static void uart_modem_inputs(struct platform *p)
{
	uint8_t in = uart_msr_in(p), changed = in ^ p->msr_in;

	p->msr_delta |= (uint8_t) ((changed & 0xb0) >> 4); /* DCTS, DDSR, DDCD */
	if ((p->msr_in & UART_MSR_RI) && !(in & UART_MSR_RI))
		p->msr_delta |= UART_MSR_RI >> 4; /* TERI */
	p->msr_in = in;
}

static void serial_thr(struct platform *p, uint8_t v)
{
	if (p->mcr & UART_MCR_LOOP) {
		if (p->rx_ready && !(p->fcr & UART_FCR_FIFO))
			p->lsr_err |= UART_LSR_OE;
		p->rbr = v;
		p->rx_ready = true;
	} else {
		p->serial_bytes++;
		if (p->serial_out) {
			fputc(v, p->serial_out);
			if (v == '\n')
				fflush(p->serial_out);
		}
	}
	/* THR written: its interrupt clears; sent at once: THR is empty again */
	p->thre_int = false;
	uart_update(p);
	p->thre_int = true;
}

static void serial_write(struct platform *p, unsigned int reg, uint8_t v)
{
	bool dlab = p->lcr & UART_LCR_DLAB;

	switch (reg) {
	case 0:
		if (dlab)
			p->dll = v;
		else
			serial_thr(p, v);
		break;
	case 1:
		if (dlab) {
			p->dlm = v;
			break;
		}
		if ((v & UART_IER_ETBEI) && !(p->ier & UART_IER_ETBEI))
			p->thre_int = true; /* enabled with THR empty */
		p->ier = v & 0x0f;
		break;
	case 2:
		if (((v ^ p->fcr) & UART_FCR_FIFO) ||
		    ((v & UART_FCR_FIFO) && (v & UART_FCR_CLEAR_RCVR)))
			p->rx_ready = false; /* the receiver FIFO is cleared */
		p->fcr = v;
		break;
	case 3:
		p->lcr = v;
		break;
	case 4:
		p->mcr = v & 0x1f;
		uart_modem_inputs(p);
		break;
	case 7:
		p->scr = v;
		break;
	default:
		break; /* LSR, MSR: writes change nothing here */
	}
}

static uint8_t serial_read(struct platform *p, unsigned int reg)
{
	bool dlab = p->lcr & UART_LCR_DLAB;
	uint8_t v;

	switch (reg) {
	case 0:
		if (dlab)
			return p->dll;
		p->rx_ready = false;
		return p->rbr;
	case 1:
		return dlab ? p->dlm : p->ier;
	case 2:
		v = uart_iid(p);
		if (v == UART_IIR_THRI)
			p->thre_int = false;
		return (uint8_t) (v | (p->fcr & UART_FCR_FIFO ? UART_IIR_FIFO : 0));
	case 3:
		return p->lcr;
	case 4:
		return p->mcr;
	case 5:
		v = (uint8_t) (UART_LSR_THRE | UART_LSR_TEMT | p->lsr_err |
			       (p->rx_ready ? UART_LSR_DR : 0));
		p->lsr_err = 0;
		return v;
	case 6:
		v = p->msr_in | p->msr_delta;
		p->msr_delta = 0;
		return v;
	default:
		return p->scr;
	}
}

static void serial_io(struct platform *p, unsigned int reg, bool write, uint8_t *v)
{
	if (write)
		serial_write(p, reg, *v);
	else
		*v = serial_read(p, reg);
	uart_update(p);
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

static bool absent_uart(uint16_t port)
{
	uint16_t base = port & ~7u;

	return base == 0x2f8 || base == 0x3e8 || base == 0x2e8;
}

static uint8_t sys_ctrl_b(struct platform *p, uint64_t t)
{
	uint64_t refresh = pit_ticks(&p->pit, t) / REFRESH_PIT_CLOCKS;

	return (uint8_t) ((p->sys_ctrl_b & SYS_CTRL_B_RW) | (refresh & 1 ? SYS_CTRL_B_REFRESH : 0) |
			  (pit_out(&p->pit, 2, t) ? SYS_CTRL_B_OUT2 : 0));
}

static void after_write(struct platform *p)
{
	if (p->kbc.reset)
		stop(p, PLATFORM_STOP_RESET, 0);
	if (p->pm.poweroff)
		stop(p, PLATFORM_STOP_POWEROFF, 0);
}

/* Ports of the devices that count time: the PIT, port 61H, the PM timer. */
static bool timed_port(uint16_t port)
{
	return (port >= 0x40 && port <= 0x43) || port == PORT_SYS_CTRL_B ||
	       (port >= PORT_ACPI_PM_TMR && port < PORT_ACPI_PM_TMR + ACPI_PM_TMR_LEN);
}

/* One byte of a byte-wide device; false if nothing decodes `port`. */
static bool byte_io(struct platform *p, uint16_t port, bool write, uint8_t *v, uint64_t t)
{
	if (port >= PORT_COM1 && port < PORT_COM1 + 8) {
		serial_io(p, port - PORT_COM1, write, v);
		return true;
	}
	if (absent_uart(port) || port == PORT_PCI_ADDR || port == PORT_PCI_ADDR + 2 ||
	    port == PORT_PCI_ADDR + 3) {
		if (!write)
			*v = 0xff;
		return true;
	}
	if (!p->tsc_hz && timed_port(port))
		return false; /* no clock: no timers (see platform.h) */
	if (acpi_pm_decodes(port)) {
		if (write)
			acpi_pm_write(&p->pm, port, *v, t);
		else
			*v = acpi_pm_read(&p->pm, port, t);
		return true;
	}
	switch (port) {
	case PORT_PIC_MASTER:
	case PORT_PIC_MASTER + 1:
	case PORT_PIC_SLAVE:
	case PORT_PIC_SLAVE + 1:
	case PORT_PIC_ELCR:
	case PORT_PIC_ELCR + 1:
		if (write)
			pic_write(&p->pic, port, *v);
		else
			*v = pic_read(&p->pic, port);
		return true;
	case 0x80: /* POST code / I/O delay */
		if (!write)
			*v = 0;
		return true;
	case 0x40:
	case 0x41:
	case 0x42:
	case 0x43:
		if (write)
			pit_write(&p->pit, port, *v, t);
		else
			*v = pit_read(&p->pit, port, t);
		return true;
	case PORT_SYS_CTRL_B:
		if (write) {
			p->sys_ctrl_b = *v & SYS_CTRL_B_RW;
			pit_set_gate(&p->pit, 2, *v & 1, t);
		} else {
			*v = sys_ctrl_b(p, t);
		}
		return true;
	case PORT_I8042_DATA:
	case PORT_I8042_STATUS:
		if (write)
			i8042_write(&p->kbc, port, *v);
		else
			*v = i8042_read(&p->kbc, port);
		return true;
	case PORT_RTC_INDEX:
	case PORT_RTC_DATA:
		if (write)
			rtc_write(&p->rtc, port, *v, t);
		else
			*v = rtc_read(&p->rtc, port, t);
		return true;
	case PORT_RST_CNT:
		if (write) {
			if ((*v & RST_CNT_RST_CPU) && !(p->rst_cnt & RST_CNT_RST_CPU))
				stop(p, PLATFORM_STOP_RESET, 0);
			p->rst_cnt = *v & 0x0e;
		} else {
			*v = p->rst_cnt;
		}
		return true;
	default:
		return false;
	}
}

static void note_unknown(struct platform *p, uint32_t addr, uint8_t size, bool write, bool msr)
{
	p->unknown_accesses++;
	for (unsigned int i = 0; i < p->nr_unknown; i++) {
		struct platform_unknown *u = &p->unknown[i];

		if (u->addr == addr && u->size == size && u->write == write && u->msr == msr)
			return;
	}
	if (p->nr_unknown == PLATFORM_UNKNOWN_MAX) {
		p->unknown_dropped++;
		return;
	}
	p->unknown[p->nr_unknown++] =
		(struct platform_unknown){ .addr = addr, .size = size, .write = write, .msr = msr };
}

void platform_note_unknown_msr(struct platform *p, uint32_t msr, bool write)
{
	note_unknown(p, msr, 0, write, true);
}

void platform_print_unknown(const struct platform *p, FILE *f)
{
	for (unsigned int i = 0; i < p->nr_unknown; i++) {
		const struct platform_unknown *u = &p->unknown[i];

		if (u->msr)
			fprintf(f, "guest %s MSR %#x, which is not modelled\n",
				u->write ? "wrote" : "read", u->addr);
		else
			fprintf(f, "guest %s I/O port %#x (%u byte%s): no device, %s\n",
				u->write ? "wrote" : "read", u->addr, u->size,
				u->size == 1 ? "" : "s",
				u->write ? "write dropped" : "read all ones");
	}
	if (p->unknown_dropped)
		fprintf(f, "... and %" PRIu64 " more unmodelled ports or MSRs\n",
			p->unknown_dropped);
}

/* Ports that take the whole access rather than a byte at a time. */
static bool wide_io(struct platform *p, uint16_t port, unsigned int size, bool write,
		    uint32_t *value)
{
	switch (port) {
	case PORT_DEBUG_EXIT:
		if (write)
			stop(p, PLATFORM_STOP_DEBUG_EXIT, (int) ((*value << 1) | 1));
		else
			*value = 0;
		return true;
	case PORT_FW_CFG_SEL:
		if (write) {
			p->fw_sel = (uint16_t) *value;
			p->fw_off = 0;
		} else {
			*value = p->fw_sel;
		}
		return true;
	case PORT_FW_CFG_DATA:
		if (!write) {
			uint32_t v = 0;

			for (unsigned int i = 0; i < size; i++) {
				int b = fw_cfg_byte(p, p->fw_sel, p->fw_off++);

				v |= (uint32_t) (b < 0 ? 0 : b) << (8 * i);
			}
			*value = v;
		}
		return true;
	case PORT_PCI_ADDR:
		if (size != 4)
			return false; /* byte and word accesses are ordinary I/O */
		if (write)
			p->pci_addr = *value & PCI_ADDR_MASK;
		else
			*value = p->pci_addr;
		return true;
	case PORT_PCI_DATA:
	case PORT_PCI_DATA + 1:
	case PORT_PCI_DATA + 2:
	case PORT_PCI_DATA + 3:
		if (!write)
			*value = 0xffffffffu; /* no function answers: master abort */
		return true;
	default:
		return false;
	}
}

int platform_io(struct platform *p, uint16_t port, unsigned int size, bool write, uint32_t *value)
{
	uint32_t v = 0, mask = size >= 4 ? 0xffffffffu : (1u << (8 * size)) - 1;
	uint64_t t;
	bool known = true;

	if (p->user_fn && port == p->user_port)
		return p->user_fn(p->user_data, port, write, value);
	if (size != 1 && size != 2 && size != 4)
		size = size < 1 ? 1 : 4;
	if (wide_io(p, port, size, write, value)) {
		if (!write)
			*value &= mask;
		return 0;
	}
	t = now(p);
	for (unsigned int i = 0; i < size; i++) {
		uint8_t b = (uint8_t) (*value >> (8 * i));

		if (!byte_io(p, (uint16_t) (port + i), write, &b, t)) {
			known = false;
			b = 0xff;
		}
		v |= (uint32_t) b << (8 * i);
	}
	if (!write)
		*value = v;
	else
		after_write(p);
	if (known)
		return 0;
	note_unknown(p, port, (uint8_t) size, write, false);
	return PLATFORM_IO_NONE;
}
