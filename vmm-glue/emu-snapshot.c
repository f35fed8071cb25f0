/* SPDX-License-Identifier: MIT */
/*
 * Snapshots of the emulator vCPU: everything the guest can observe, so
 * that a guest saved between two blocks goes on in another process
 * exactly as it would have gone on in this one (same instructions, same
 * counts, same output).
 *
 * What is saved: Unicorn's CPU state (uc_context_save: registers,
 * segment caches, FPU/SSE, MSRs Unicorn keeps, an exception in flight),
 * the VMM's own view of the control registers and its event state
 * (pending exception, NMI, HLT, interrupt shadow, a stop armed after an
 * overflowing instruction, the LBR bookkeeping of a software interrupt),
 * the modelled clock (the instructions and cycles retired and the idle
 * TSC ticks it is made of), the local APIC with its timer, the platform
 * devices (16550, CMOS RTC, 8254 PIT, i8042, ACPI PM, port 61H, PCI
 * address, fw_cfg position, isa-debug-exit), the vPMU (vpmu_vcpu_save),
 * guest RAM and the VMM scratch page range (the multiboot GDT and the
 * ring-change trampoline live there; GDTR may still point at it), and the
 * linear pages the guest mapped onto the xAPIC page. What is not: what
 * the host keeps to run the guest fast (windows and their mapped pages,
 * decoded blocks, hooks, Unicorn's translations and TLB): a restored
 * emulator starts without them and makes them again on first use.
 *
 * A snapshot is taken between runs of Unicorn (emu_run returned at the
 * stop point of emu_stop_at): no block is half counted then, nothing is
 * batched for the vPMU, and no hook is half way through.
 *
 * The file, little-endian: a 128-byte header
 *   0x00 "VPMU-EMU"   0x08 u32 format (EMU_SNAPSHOT_FORMAT)   0x0c u32 header size
 *   0x10 u64 file size   0x18 u32 CRC-32 of the whole file, this field as 0
 *   0x1c u32 sections   0x20 model name (32 bytes, NUL-padded)
 *   0x40 u64 RAM size   0x48 u32 layout   0x4c u32 perfmon narrowing (0: none)
 *   0x50 u32 vPMU attached   0x54 u32 uc_version()   0x58 u64 uc_context_size()
 *   0x60 u64 instructions retired   0x68..0x80 zero
 * then sections of a u32 tag, a u32 0, a u64 length and the payload,
 * padded to 8 bytes. Every section is required, once (the vPMU's only
 * with a vPMU). Unicorn's CPU state is a copy of its internal structure,
 * valid only for the same Unicorn: a file from another one is refused.
 * A restore checks the whole file (sizes, CRC, every value the devices
 * index or divide with) before it changes anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu-priv.h"

#define SNAP_MAGIC     "VPMU-EMU"
#define SNAP_HEADER    128
#define SNAP_MODEL_LEN 32
#define SNAP_CRC_OFF   0x18
#define SNAP_MAX_BYTES (64ull << 30) /* more than any RAM vpmu-vmm gives */
#define PAGE_SIZE_4K   4096u
#define DR_BREAKPOINTS 80 /* the breakpoint pointers, after the error code (emu.c) */
/* Unicorn 2.0.1's struct uc_context: size_t context_size, uc_mode, uc_arch, then the CPU state */
#define UC_CONTEXT_HEADER 16
#define DR7_ENABLES	  0xffu /* L0-L3, G0-G3 (SDM Vol. 3B 18.2.4) */
#define PIT_COUNT_MAX	  65536u
#define RTC_SECS_LIMIT	  (1ll << 40) /* far past any date; keeps the RTC's arithmetic in range */

enum snap_tag {
	TAG_CPU = 1,	  /* Unicorn's CPU state */
	TAG_VCPU = 2,	  /* the VMM's registers, events and modelled clock */
	TAG_LAPIC = 3,	  /* the local APIC and its timer */
	TAG_PLATFORM = 4, /* the legacy devices */
	TAG_PMU = 5,	  /* vpmu_vcpu_save() */
	TAG_RAM = 6,	  /* guest RAM, sparse */
	TAG_SCRATCH = 7,  /* VMM scratch memory, sparse */
	TAG_APIC_ALIAS = 8,
	TAG_COUNT = 9,
};

/* ---- bytes --------------------------------------------------------------- */

struct sbuf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};

static uint8_t *sbuf_grow(struct sbuf *b, size_t n)
{
	if (b->oom)
		return NULL;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 1 << 16;
		uint8_t *np;

		while (cap < b->len + n)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = true;
			return NULL;
		}
		b->p = np;
		b->cap = cap;
	}
	b->len += n;
	return b->p + b->len - n;
}

static void put_le(uint8_t *p, uint64_t v, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < n; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

/* CRC-32 (IEEE 802.3, reflected 0xEDB88320), by table: RAM is megabytes. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
	static uint32_t table[256];

	if (!table[1]) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (unsigned int b = 0; b < 8; b++)
				c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
			table[i] = c;
		}
	}
	for (size_t i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return crc;
}

/* The file's CRC: every byte, with the CRC field read as zeros. */
static uint32_t file_crc(const uint8_t *p, size_t len)
{
	static const uint8_t zero[4];
	uint32_t crc = 0xffffffffu;

	crc = crc32_update(crc, p, SNAP_CRC_OFF);
	crc = crc32_update(crc, zero, 4);
	crc = crc32_update(crc, p + SNAP_CRC_OFF + 4, len - SNAP_CRC_OFF - 4);
	return ~crc;
}

/* ---- one walk over the state for both directions ----------------------- */

/*
 * Saving writes each field; loading reads it back into the same place,
 * refusing a bool that is neither 0 nor 1 and a payload of another size.
 * The same function describes a structure both ways, so the two cannot
 * drift apart.
 */
struct sio {
	bool load;
	struct sbuf *out;  /* saving */
	const uint8_t *in; /* loading: the section's payload */
	size_t len, off;
	const char *bad; /* loading: what was wrong, NULL: nothing */
};

static void io_le(struct sio *io, uint64_t *v, unsigned int n)
{
	uint8_t *p;

	if (!io->load) {
		p = sbuf_grow(io->out, n);
		if (p)
			put_le(p, *v, n);
		return;
	}
	if (io->bad)
		return;
	if (io->len - io->off < n) {
		io->bad = "a section is shorter than its contents";
		return;
	}
	*v = get_le(io->in + io->off, n);
	io->off += n;
}

#define IO_FIELD(io, field, n)                                                                     \
	do {                                                                                       \
		uint64_t v_ = (uint64_t) (field);                                                  \
		io_le((io), &v_, (n));                                                             \
		if ((io)->load && !(io)->bad)                                                      \
			(field) = (__typeof__(field)) v_;                                          \
	} while (0)

#define IO_U64(io, f) IO_FIELD(io, f, 8)
#define IO_U32(io, f) IO_FIELD(io, f, 4)
#define IO_U16(io, f) IO_FIELD(io, f, 2)
#define IO_U8(io, f)  IO_FIELD(io, f, 1)

static void io_bool(struct sio *io, bool *b)
{
	uint64_t v = *b;

	io_le(io, &v, 1);
	if (!io->load || io->bad)
		return;
	if (v > 1)
		io->bad = "a flag that is neither 0 nor 1";
	else
		*b = v;
}

static void io_check(struct sio *io, bool ok, const char *why)
{
	if (io->load && !io->bad && !ok)
		io->bad = why;
}

/* ---- the VMM's vCPU state ------------------------------------------------ */

static void io_stats(struct sio *io, struct emu_stats *s)
{
	/* what the guest did; what the host did to run it (blocks, windows...) starts anew */
	IO_U64(io, s->instructions);
	IO_U64(io, s->cycles);
	IO_U64(io, s->msr_exits);
	IO_U64(io, s->cpuid_exits);
	IO_U64(io, s->io_exits);
	IO_U64(io, s->rdpmc_exits);
	IO_U64(io, s->interrupts);
	IO_U64(io, s->nmis);
	IO_U64(io, s->exceptions);
	IO_U64(io, s->page_faults);
	for (unsigned int i = 0; i < 32; i++)
		IO_U64(io, s->by_vector[i]);
	IO_U64(io, s->last_exc_rip);
	IO_U64(io, s->last_exc_cr2);
	IO_U32(io, s->last_exc_vector);
	IO_U32(io, s->last_exc_error);
	IO_U64(io, s->pmis);
	IO_U64(io, s->halts);
	for (unsigned int i = 0; i < EMU_PMI_RECORD; i++)
		IO_U64(io, s->pmi_insns[i]);
}

static void io_vcpu(struct sio *io, struct emu *emu)
{
	uint64_t vec = (uint64_t) (int64_t) emu->pending_vector;

	IO_U64(io, emu->cr0);
	IO_U64(io, emu->cr2);
	IO_U64(io, emu->cr3);
	IO_U64(io, emu->cr4);
	IO_U64(io, emu->efer);
	IO_U64(io, emu->misc_enable);
	IO_U64(io, emu->pat);
	IO_U64(io, emu->tsc_offset);
	io_bool(io, &emu->cs64);
	IO_U32(io, emu->cpl);
	io_check(io, emu->cpl <= 3, "a CPL above 3");
	io_bool(io, &emu->halted);
	io_bool(io, &emu->nmi_pending);
	io_bool(io, &emu->nmi_blocked);
	/* an exception, interrupt or SYSCALL the VMM still owes the guest */
	IO_U64(io, vec);
	io_check(io, (int64_t) vec >= -1 && (int64_t) vec < 256, "an exception vector past 255");
	if (io->load && !io->bad)
		emu->pending_vector = (int) (int64_t) vec;
	io_bool(io, &emu->pending_has_err);
	IO_U32(io, emu->pending_err);
	IO_U64(io, emu->pending_rip);
	io_bool(io, &emu->syscall_pending);
	IO_U64(io, emu->syscall_next);
	/* where the next run starts, and the stops the counting armed for it */
	IO_U64(io, emu->resume_rip);
	IO_U64(io, emu->hook_rip);
	IO_U64(io, emu->native_once);
	IO_U32(io, emu->window);
	io_check(io, emu->window <= 2, "an interrupt shadow longer than 2 instructions");
	IO_U64(io, emu->until);
	IO_U64(io, emu->until_next);
	IO_U64(io, emu->until_dla_ip);
	IO_U64(io, emu->until_dla);
	/* LBR and PMI bookkeeping */
	IO_U64(io, emu->lbr_cycles);
	IO_U64(io, emu->lbr_int_from);
	IO_U64(io, emu->lbr_int_ret);
	IO_U64(io, emu->last_pmi_insns);
	IO_U32(io, emu->storm);
	/* the hang detectors' counts, so that a restored hang is found where it would be */
	IO_U64(io, emu->progress_rip);
	IO_U32(io, emu->no_progress);
	IO_U32(io, emu->exc_streak);
	/* the modelled clock: emu_tsc() = tsc_offset + st.cycles + idle_cycles */
	IO_U64(io, emu->idle_cycles);
	io_stats(io, &emu->st);
}

/* ---- the local APIC ------------------------------------------------------ */

/* Its registers and timer state; its clocks are the restoring emulator's (the same model). */
static void io_lapic(struct sio *io, struct lapic *l)
{
	IO_U64(io, l->base);
	IO_U32(io, l->id);
	IO_U32(io, l->tpr);
	IO_U32(io, l->ldr);
	IO_U32(io, l->dfr);
	IO_U32(io, l->svr);
	IO_U32(io, l->esr);
	IO_U32(io, l->icr_lo);
	IO_U32(io, l->icr_hi);
	for (unsigned int i = 0; i < 7; i++)
		IO_U32(io, l->lvt[i]);
	IO_U32(io, l->tmict);
	IO_U32(io, l->tdcr);
	for (unsigned int i = 0; i < 8; i++) {
		IO_U32(io, l->irr[i]);
		IO_U32(io, l->isr[i]);
		IO_U32(io, l->tmr[i]);
	}
	IO_U64(io, l->eois);
	IO_U64(io, l->self_ipis);
	io_bool(io, &l->timer_armed);
	IO_U64(io, l->timer_t0);
	IO_U32(io, l->timer_c0);
	IO_U64(io, l->timer_fired);
	IO_U64(io, l->tsc_deadline);
	IO_U64(io, l->timer_irqs);
}

/* ---- the platform devices ------------------------------------------------ */

static void io_rtc(struct sio *io, struct rtc *r)
{
	IO_U8(io, r->index);
	io_check(io, r->index < sizeof(r->ram), "an RTC index past its 128 bytes");
	io_bool(io, &r->nmi_masked);
	for (unsigned int i = 0; i < sizeof(r->ram); i++)
		IO_U8(io, r->ram[i]);
	IO_U64(io, r->base_secs);
	IO_U64(io, r->base_tsc);
	io_bool(io, &r->frozen);
	IO_U64(io, r->frozen_secs);
	io_check(io,
		 r->base_secs > -RTC_SECS_LIMIT && r->base_secs < RTC_SECS_LIMIT &&
			 r->frozen_secs > -RTC_SECS_LIMIT && r->frozen_secs < RTC_SECS_LIMIT,
		 "an RTC time out of range");
	IO_U8(io, r->dow_offset);
	io_check(io, r->dow_offset < 7, "an RTC day-of-week offset past 6");
	IO_U8(io, r->flags);
	IO_U64(io, r->flags_tsc);
}

static void io_pit(struct sio *io, struct pit *p)
{
	for (unsigned int i = 0; i < 3; i++) {
		struct pit_channel *c = &p->ch[i];

		IO_U8(io, c->mode);
		IO_U8(io, c->rw);
		io_bool(io, &c->bcd);
		IO_U32(io, c->count);
		IO_U32(io, c->cur);
		io_check(io,
			 c->mode <= 7 && c->rw >= 1 && c->rw <= 3 && c->count >= 1 &&
				 c->count <= PIT_COUNT_MAX && c->cur >= 1 &&
				 c->cur <= PIT_COUNT_MAX,
			 "a PIT channel in a state the 8254 cannot be in");
		io_bool(io, &c->loaded);
		io_bool(io, &c->write_msb);
		IO_U8(io, c->write_lsb);
		io_bool(io, &c->read_msb);
		IO_U8(io, c->latch_left);
		io_check(io, c->latch_left <= 2, "a PIT latch of more than 2 bytes");
		IO_U16(io, c->latch);
		io_bool(io, &c->status_latched);
		IO_U8(io, c->status);
		io_bool(io, &c->gate);
		io_bool(io, &c->running);
		IO_U64(io, c->start);
		IO_U64(io, c->e_base);
		IO_U64(io, c->load_at);
		IO_U64(io, c->switch_at);
	}
}

static void io_i8042(struct sio *io, struct i8042 *k)
{
	IO_U8(io, k->status);
	for (unsigned int i = 0; i < sizeof(k->ram); i++)
		IO_U8(io, k->ram[i]);
	IO_U8(io, k->out);
	IO_U8(io, k->outport);
	IO_U8(io, k->pending);
	io_bool(io, &k->reset);
}

static void io_acpi_pm(struct sio *io, struct acpi_pm *pm)
{
	IO_U16(io, pm->en);
	IO_U16(io, pm->cnt);
	IO_U64(io, pm->tmr_epoch);
	io_bool(io, &pm->poweroff);
	IO_U16(io, pm->sleep_ignored);
}

static void io_pic(struct sio *io, struct pic *p)
{
	for (int i = 0; i < 2; i++) {
		struct pic_chip *c = &p->chip[i];

		IO_U8(io, c->irr);
		IO_U8(io, c->isr);
		IO_U8(io, c->imr);
		IO_U8(io, c->lines);
		IO_U8(io, c->elcr);
		IO_U8(io, c->icw1);
		IO_U8(io, c->icw2);
		IO_U8(io, c->icw3);
		IO_U8(io, c->icw4);
		IO_U8(io, c->init);
		IO_U8(io, c->lowest);
		io_bool(io, &c->read_isr);
		io_bool(io, &c->poll);
		io_bool(io, &c->smm);
		io_bool(io, &c->rotate_aeoi);
		io_bool(io, &c->out);
		io_check(io, c->init == 0 || (c->init >= 2 && c->init <= 4),
			 "an 8259A between ICWs it has no state for");
		io_check(io, c->lowest <= 7, "an 8259A priority past IR 7");
	}
}

/* The devices' registers; the serial output, clocks, RAM size and CPU count are the restorer's. */
static void io_platform(struct sio *io, struct platform *p)
{
	uint64_t stop = p->stop;

	IO_U8(io, p->lcr);
	IO_U8(io, p->mcr);
	IO_U8(io, p->ier);
	IO_U8(io, p->scr);
	IO_U8(io, p->dll);
	IO_U8(io, p->dlm);
	IO_U8(io, p->fcr);
	IO_U8(io, p->rbr);
	io_bool(io, &p->rx_ready);
	IO_U8(io, p->lsr_err);
	IO_U8(io, p->msr_in);
	IO_U8(io, p->msr_delta);
	io_bool(io, &p->thre_int);
	io_bool(io, &p->irq4);
	io_bool(io, &p->exited);
	IO_U32(io, p->exit_status);
	IO_U32(io, stop);
	io_check(io, stop <= PLATFORM_STOP_RESET, "an unknown platform stop");
	if (io->load && !io->bad)
		p->stop = (enum platform_stop) stop;
	IO_U16(io, p->fw_sel);
	IO_U32(io, p->fw_off);
	IO_U64(io, p->serial_bytes);
	IO_U8(io, p->sys_ctrl_b);
	IO_U32(io, p->pci_addr);
	IO_U8(io, p->rst_cnt);
	io_rtc(io, &p->rtc);
	io_pit(io, &p->pit);
	io_i8042(io, &p->kbc);
	io_acpi_pm(io, &p->pm);
	io_pic(io, &p->pic);
}

/* ---- memory: sparse, page by page ---------------------------------------- */

static bool page_zero(const uint8_t *p)
{
	static const uint8_t zero[PAGE_SIZE_4K];

	return !memcmp(p, zero, PAGE_SIZE_4K);
}

/*
 * Whether page i of `mem` may hold data: the RAM file's holes (never
 * written) are zeros without a look, which would fault each one in.
 */
static bool page_maybe_data(int fd, uint64_t i, uint64_t *data, uint64_t *hole)
{
	off_t off = (off_t) (i * PAGE_SIZE_4K), d, h;

	if (fd < 0)
		return true;
	if (off >= (off_t) *data && off < (off_t) *hole)
		return true;
	if (off < (off_t) *data)
		return false;
	d = lseek(fd, off, SEEK_DATA);
	if (d < 0) {
		/* ENXIO: no data past here; another error: look at every page */
		*data = *hole = errno == ENXIO ? UINT64_MAX : 0;
		return errno != ENXIO;
	}
	h = lseek(fd, d, SEEK_HOLE);
	*data = (uint64_t) d;
	*hole = h < 0 ? UINT64_MAX : (uint64_t) h;
	return off >= d && off < (off_t) *hole;
}

/* u64 size, a bitmap of the pages that are not all zeros, then those pages. */
static void mem_save(struct sbuf *b, const uint8_t *mem, uint64_t size, int fd)
{
	uint64_t pages = size / PAGE_SIZE_4K, data = 0, hole = 0;
	uint8_t *p = sbuf_grow(b, 8);
	size_t map_off;

	if (p)
		put_le(p, size, 8);
	map_off = b->len;
	p = sbuf_grow(b, (pages + 7) / 8);
	if (!p)
		return;
	memset(p, 0, (pages + 7) / 8);
	for (uint64_t i = 0; i < pages; i++) {
		if (!page_maybe_data(fd, i, &data, &hole) || page_zero(mem + i * PAGE_SIZE_4K))
			continue;
		b->p[map_off + i / 8] |= (uint8_t) (1u << (i % 8));
		p = sbuf_grow(b, PAGE_SIZE_4K);
		if (!p)
			return;
		memcpy(p, mem + i * PAGE_SIZE_4K, PAGE_SIZE_4K);
	}
}

/*
 * Check a mem_save() payload for `size` bytes; copy it into `mem` if not
 * NULL, which is all zeros (a fresh emulator's, or made so).
 */
static const char *mem_load(const uint8_t *in, uint64_t len, uint8_t *mem, uint64_t size)
{
	uint64_t pages = size / PAGE_SIZE_4K, map = (pages + 7) / 8, set = 0, at;

	if (len < 8 || get_le(in, 8) != size)
		return "its memory is not the size this guest has";
	if (len - 8 < map)
		return "a memory section shorter than its page map";
	for (uint64_t i = 0; i < pages; i++)
		set += in[8 + i / 8] >> (i % 8) & 1;
	for (uint64_t i = pages; i < map * 8; i++)
		if (in[8 + i / 8] >> (i % 8) & 1)
			return "a memory page map with pages past the end";
	if ((len - 8 - map) / PAGE_SIZE_4K != set || (len - 8 - map) % PAGE_SIZE_4K)
		return "a memory section whose pages do not match its page map";
	if (!mem)
		return NULL;
	at = 8 + map;
	for (uint64_t i = 0; i < pages; i++) {
		uint8_t *dst = mem + i * PAGE_SIZE_4K;

		if (in[8 + i / 8] >> (i % 8) & 1) {
			memcpy(dst, in + at, PAGE_SIZE_4K);
			at += PAGE_SIZE_4K;
		}
	}
	return NULL;
}

/* ---- the APIC aliases ---------------------------------------------------- */

static void aliases_save(struct sbuf *b, const struct emu *emu)
{
	uint32_t n = 0;
	uint8_t *p;

	for (unsigned int i = 0; i < emu->mmu.nr_win; i++)
		n += emu->mmu.win[i].nr_holes;
	p = sbuf_grow(b, 4);
	if (p)
		put_le(p, n, 4);
	for (unsigned int i = 0; i < emu->mmu.nr_win; i++) {
		for (unsigned int h = 0; h < emu->mmu.win[i].nr_holes; h++) {
			p = sbuf_grow(b, 8);
			if (p)
				put_le(p, emu->mmu.win[i].hole[h], 8);
		}
	}
}

static const char *aliases_check(const uint8_t *in, uint64_t len)
{
	uint64_t n;

	if (len < 4)
		return "an APIC alias section shorter than its count";
	n = get_le(in, 4);
	if (n > (uint64_t) MAX_WINDOWS * WIN_HOLES || len != 4 + 8 * n)
		return "an APIC alias section of the wrong size";
	for (uint64_t i = 0; i < n; i++)
		if (get_le(in + 4 + 8 * i, 8) & (PAGE_SIZE_4K - 1))
			return "an APIC alias that is not a page";
	return NULL;
}

/* ---- saving ---------------------------------------------------------------- */

static void section_begin(struct sbuf *b, enum snap_tag tag, size_t *ret_at)
{
	uint8_t *p = sbuf_grow(b, 16);

	*ret_at = b->len;
	if (p) {
		memset(p, 0, 16);
		put_le(p, tag, 4);
	}
}

static void section_end(struct sbuf *b, size_t at, unsigned int *count)
{
	size_t len = b->len - at, pad = (8 - len % 8) % 8;
	uint8_t *p;

	if (b->oom)
		return;
	put_le(b->p + at - 8, len, 8);
	p = sbuf_grow(b, pad);
	if (p)
		memset(p, 0, pad);
	(*count)++;
}

static void header_put(struct emu *emu, uint8_t *h, uint64_t total, unsigned int sections)
{
	unsigned int major, minor;

	memset(h, 0, SNAP_HEADER);
	memcpy(h, SNAP_MAGIC, 8);
	put_le(h + 0x08, EMU_SNAPSHOT_FORMAT, 4);
	put_le(h + 0x0c, SNAP_HEADER, 4);
	put_le(h + 0x10, total, 8);
	put_le(h + 0x1c, sections, 4);
	strncpy((char *) h + 0x20, emu->cfg.model, SNAP_MODEL_LEN - 1);
	put_le(h + 0x40, emu->cfg.mem_size, 8);
	put_le(h + 0x48, (uint64_t) emu->cfg.layout, 4);
	put_le(h + 0x4c, (uint64_t) emu->cfg.pmu_version, 4);
	put_le(h + 0x50, emu->pmu != NULL, 4);
	put_le(h + 0x54, uc_version(&major, &minor), 4);
	put_le(h + 0x58, uc_context_size(emu->uc), 8);
	put_le(h + 0x60, emu->st.instructions, 8);
}

/* Unicorn's CPU state now, with no hardware breakpoint (their host pointers would travel). */
static int cpu_save(struct emu *emu, struct sbuf *b, char *err, size_t errlen)
{
	size_t size = uc_context_size(emu->uc);
	uint64_t dr7 = 0;
	uint8_t *p;

	if (!emu->ctx || uc_context_save(emu->uc, emu->ctx) != UC_ERR_OK) {
		snprintf(err, errlen, "cannot read Unicorn's CPU state");
		return -EIO;
	}
	uc_context_reg_read(emu->ctx, UC_X86_REG_DR7, &dr7);
	if (dr7 & DR7_ENABLES) {
		snprintf(err, errlen,
			 "the guest has hardware breakpoints armed (DR7 %#llx): the emulator "
			 "cannot save them",
			 (unsigned long long) dr7);
		return -EOPNOTSUPP;
	}
	p = sbuf_grow(b, size);
	if (p)
		memcpy(p, emu->ctx, size);
	return 0;
}

static int build(struct emu *emu, struct sbuf *b, char *err, size_t errlen)
{
	unsigned int n = 0;
	size_t at;
	struct sio io = { .load = false, .out = b };
	int r;

	sbuf_grow(b, SNAP_HEADER);
	section_begin(b, TAG_CPU, &at);
	r = cpu_save(emu, b, err, errlen);
	if (r < 0)
		return r;
	section_end(b, at, &n);
	section_begin(b, TAG_VCPU, &at);
	io_vcpu(&io, emu);
	section_end(b, at, &n);
	section_begin(b, TAG_LAPIC, &at);
	io_lapic(&io, &emu->apic);
	section_end(b, at, &n);
	section_begin(b, TAG_PLATFORM, &at);
	io_platform(&io, &emu->plat);
	section_end(b, at, &n);
	if (emu->pmu) {
		size_t len = 0;
		uint8_t *p;

		section_begin(b, TAG_PMU, &at);
		r = vpmu_vcpu_save(emu->pmu, NULL, 0, &len);
		p = r == 0 ? sbuf_grow(b, len) : NULL;
		if (p)
			r = vpmu_vcpu_save(emu->pmu, p, len, &len);
		if (r < 0) {
			snprintf(err, errlen, "cannot save the vPMU: %s", strerror(-r));
			return r;
		}
		section_end(b, at, &n);
	}
	section_begin(b, TAG_RAM, &at);
	mem_save(b, emu->ram, emu->mmu.ram_top, emu->mmu.memfd);
	section_end(b, at, &n);
	section_begin(b, TAG_SCRATCH, &at);
	mem_save(b, emu->mmu.scratch, SCRATCH_SIZE, -1);
	section_end(b, at, &n);
	section_begin(b, TAG_APIC_ALIAS, &at);
	aliases_save(b, emu);
	section_end(b, at, &n);
	if (b->oom) {
		snprintf(err, errlen, "out of memory for the snapshot");
		return -ENOMEM;
	}
	header_put(emu, b->p, b->len, n);
	put_le(b->p + SNAP_CRC_OFF, file_crc(b->p, b->len), 4);
	return 0;
}

int emu_save(struct emu *emu, FILE *f, char *err, size_t errlen)
{
	struct sbuf b = { 0 };
	int r;

	if (emu->in_run) {
		snprintf(err, errlen, "internal: a snapshot from inside a run");
		return -EBUSY;
	}
	if (emu->pmu)
		emu_feed_flush(emu); /* the vPMU has every retired instruction */
	r = build(emu, &b, err, errlen);
	if (r == 0 && (fwrite(b.p, 1, b.len, f) != b.len || fflush(f) != 0)) {
		snprintf(err, errlen, "cannot write the snapshot: %s", strerror(errno));
		r = -EIO;
	}
	free(b.p);
	return r;
}

/* ---- reading and checking -------------------------------------------------- */

struct section {
	const uint8_t *p;
	uint64_t len;
};

/* The header's promises, checked against the file itself. */
static int header_check(const uint8_t *p, size_t len, char *err, size_t errlen)
{
	uint64_t total;

	if (len >= 8 && len < SNAP_HEADER && !memcmp(p, SNAP_MAGIC, 8)) {
		snprintf(err, errlen, "a damaged snapshot: only %zu bytes, cut off in its header",
			 len);
		return -EBADMSG;
	}
	if (len < SNAP_HEADER || memcmp(p, SNAP_MAGIC, 8)) {
		snprintf(err, errlen, "not an emulator snapshot (no \"%s\" header)", SNAP_MAGIC);
		return -EBADMSG;
	}
	if (get_le(p + 0x08, 4) != EMU_SNAPSHOT_FORMAT) {
		snprintf(err, errlen, "a snapshot in format %llu; this vpmu-vmm reads format %d",
			 (unsigned long long) get_le(p + 0x08, 4), EMU_SNAPSHOT_FORMAT);
		return -EPROTONOSUPPORT;
	}
	total = get_le(p + 0x10, 8);
	if (get_le(p + 0x0c, 4) != SNAP_HEADER || total != len) {
		snprintf(err, errlen,
			 "a damaged snapshot: it says %llu bytes and has %zu (truncated or "
			 "extended)",
			 (unsigned long long) total, len);
		return -EBADMSG;
	}
	if (get_le(p + SNAP_CRC_OFF, 4) != file_crc(p, len)) {
		snprintf(err, errlen, "a damaged snapshot: its CRC-32 does not match its contents");
		return -EBADMSG;
	}
	for (size_t i = 0x68; i < SNAP_HEADER; i++)
		if (p[i]) {
			snprintf(err, errlen, "a damaged snapshot: reserved header bytes are set");
			return -EBADMSG;
		}
	if (memchr(p + 0x20, 0, SNAP_MODEL_LEN) == NULL) {
		snprintf(err, errlen, "a damaged snapshot: its model name has no end");
		return -EBADMSG;
	}
	return 0;
}

static int sections_split(const uint8_t *p, size_t len, struct section *sec, char *err,
			  size_t errlen)
{
	uint64_t at = SNAP_HEADER, n = get_le(p + 0x1c, 4);

	memset(sec, 0, sizeof(*sec) * TAG_COUNT);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t tag, plen, padded;

		if (len - at < 16) {
			snprintf(err, errlen, "a damaged snapshot: section %llu is cut off",
				 (unsigned long long) i);
			return -EBADMSG;
		}
		tag = get_le(p + at, 4);
		plen = get_le(p + at + 8, 8);
		padded = plen + (8 - plen % 8) % 8;
		if (get_le(p + at + 4, 4) || tag == 0 || tag >= TAG_COUNT || sec[tag].p ||
		    plen > len - at - 16 || padded > len - at - 16) {
			snprintf(err, errlen,
				 "a damaged snapshot: section %llu (tag %llu, %llu bytes) is "
				 "unknown, "
				 "repeated or longer than the file",
				 (unsigned long long) i, (unsigned long long) tag,
				 (unsigned long long) plen);
			return -EBADMSG;
		}
		sec[tag].p = p + at + 16;
		sec[tag].len = plen;
		at += 16 + padded;
	}
	if (at != len) {
		snprintf(err, errlen, "a damaged snapshot: %llu bytes after its last section",
			 (unsigned long long) (len - at));
		return -EBADMSG;
	}
	return 0;
}

int emu_snapshot_read(FILE *f, void **ret_blob, size_t *ret_len, struct emu_snapshot_info *ret,
		      char *err, size_t errlen)
{
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0, got;
	struct section sec[TAG_COUNT];
	int r;

	do {
		if (n == cap) {
			uint8_t *nb;

			cap = cap ? cap * 2 : 1 << 20;
			if (cap > SNAP_MAX_BYTES || !(nb = realloc(buf, cap))) {
				free(buf);
				snprintf(err, errlen, "too large for a snapshot");
				return -EFBIG;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got);
	if (ferror(f)) {
		snprintf(err, errlen, "cannot read it: %s", strerror(errno));
		free(buf);
		return -EIO;
	}
	r = header_check(buf, n, err, errlen);
	if (r == 0)
		r = sections_split(buf, n, sec, err, errlen);
	if (r < 0) {
		free(buf);
		return r;
	}
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->model, buf + 0x20, SNAP_MODEL_LEN);
	ret->mem_size = get_le(buf + 0x40, 8);
	ret->layout = get_le(buf + 0x48, 4) ? EMU_LAYOUT_LINUX : EMU_LAYOUT_FLAT;
	ret->pmu_version = (int) (get_le(buf + 0x4c, 4) & 0xff);
	ret->pmu = get_le(buf + 0x50, 4) != 0;
	ret->instructions = get_le(buf + 0x60, 8);
	*ret_blob = buf;
	*ret_len = n;
	return 0;
}

/* ---- restoring --------------------------------------------------------------- */

/* The snapshot is of a guest this emulator was made for: model, RAM, Unicorn. */
static int identity_check(struct emu *emu, const uint8_t *p, char *err, size_t errlen)
{
	unsigned int major, minor, ver = uc_version(&major, &minor);

	if (strncmp((const char *) p + 0x20, emu->cfg.model, SNAP_MODEL_LEN) ||
	    get_le(p + 0x4c, 4) != (uint64_t) emu->cfg.pmu_version) {
		snprintf(err, errlen, "a snapshot of a %.32s guest%s; this one is %s",
			 (const char *) p + 0x20, get_le(p + 0x4c, 4) ? " (narrowed)" : "",
			 emu->cfg.model);
		return -EXDEV;
	}
	if (get_le(p + 0x40, 8) != emu->cfg.mem_size ||
	    get_le(p + 0x48, 4) != (uint64_t) emu->cfg.layout) {
		snprintf(err, errlen,
			 "a snapshot of a guest with %llu MiB of RAM%s; this one has %llu",
			 (unsigned long long) (get_le(p + 0x40, 8) >> 20),
			 get_le(p + 0x48, 4) ? " (Linux layout)" : "",
			 (unsigned long long) (emu->cfg.mem_size >> 20));
		return -EXDEV;
	}
	if (get_le(p + 0x54, 4) != ver || get_le(p + 0x58, 8) != uc_context_size(emu->uc)) {
		snprintf(err, errlen,
			 "a snapshot made with another Unicorn (version %#llx, CPU state %llu "
			 "bytes; this one: %#x, %zu): Unicorn's CPU state is only valid for the "
			 "same library",
			 (unsigned long long) get_le(p + 0x54, 4),
			 (unsigned long long) get_le(p + 0x58, 8), ver, uc_context_size(emu->uc));
		return -EXDEV;
	}
	if ((get_le(p + 0x50, 4) != 0) != (emu->pmu != NULL)) {
		snprintf(err, errlen, "a snapshot of a guest %s a vPMU; this one %s",
			 get_le(p + 0x50, 4) ? "with" : "without",
			 emu->pmu ? "has one" : "has none");
		return -EXDEV;
	}
	return 0;
}

/* The VMM's state sections into `emu` (a scratch copy first: all or nothing). */
static const char *state_load(struct emu *emu, const struct section *sec)
{
	struct sio io = { .load = true };
	const struct section *s[3] = { &sec[TAG_VCPU], &sec[TAG_LAPIC], &sec[TAG_PLATFORM] };

	for (int i = 0; i < 3 && !io.bad; i++) {
		io.in = s[i]->p;
		io.len = s[i]->len;
		io.off = 0;
		if (i == 0)
			io_vcpu(&io, emu);
		else if (i == 1)
			io_lapic(&io, &emu->apic);
		else
			io_platform(&io, &emu->plat);
		if (!io.bad && io.off != io.len)
			io.bad = "a state section longer than its contents";
	}
	return io.bad;
}

static const char *sections_check(struct emu *emu, const struct section *sec)
{
	struct emu *tmp;
	const char *why;

	for (int t = TAG_CPU; t < TAG_COUNT; t++)
		if (!sec[t].p && (t != TAG_PMU || emu->pmu))
			return "a section is missing";
	if (sec[TAG_PMU].p && !emu->pmu)
		return "a vPMU section in a snapshot of a guest without one";
	if (sec[TAG_CPU].len != uc_context_size(emu->uc))
		return "Unicorn's CPU state is not the size this Unicorn's is";
	why = mem_load(sec[TAG_RAM].p, sec[TAG_RAM].len, NULL, emu->mmu.ram_top);
	if (!why)
		why = mem_load(sec[TAG_SCRATCH].p, sec[TAG_SCRATCH].len, NULL, SCRATCH_SIZE);
	if (!why)
		why = aliases_check(sec[TAG_APIC_ALIAS].p, sec[TAG_APIC_ALIAS].len);
	if (why)
		return why;
	tmp = malloc(sizeof(*tmp));
	if (!tmp)
		return "out of memory";
	memcpy(tmp, emu, sizeof(*tmp));
	why = state_load(tmp, sec);
	free(tmp);
	return why;
}

/* Unicorn's CPU state from the file, with its breakpoint pointers those of no breakpoint. */
static int cpu_restore(struct emu *emu, const struct section *s, char *err, size_t errlen)
{
	uint64_t dr7 = 0;

	if (!emu->ctx) {
		snprintf(err, errlen, "internal: no Unicorn context to restore into");
		return -EIO;
	}
	/* the context's own header (its size, mode, arch) stays this process's */
	memcpy((uint8_t *) emu->ctx + UC_CONTEXT_HEADER, s->p + UC_CONTEXT_HEADER,
	       s->len - UC_CONTEXT_HEADER);
	uc_context_reg_read(emu->ctx, UC_X86_REG_DR7, &dr7);
	if (dr7 & DR7_ENABLES) {
		snprintf(err, errlen, "a damaged snapshot: hardware breakpoints armed (DR7 %#llx)",
			 (unsigned long long) dr7);
		return -EBADMSG;
	}
	if (emu->err_offset >= 0)
		memset((uint8_t *) emu->ctx + emu->err_offset + DR_BREAKPOINTS, 0,
		       4 * sizeof(void *));
	/*
	 * A fresh engine has run nothing: no TLB entry or translation to drop
	 * (Unicorn 2.0.1's TLB flush control drops every translation, and
	 * clears its whole code buffer doing so: a gigabyte).
	 */
	if (uc_context_restore(emu->uc, emu->ctx) != UC_ERR_OK) {
		snprintf(err, errlen, "Unicorn refused the saved CPU state");
		return -EIO;
	}
	return 0;
}

static int aliases_restore(struct emu *emu, const struct section *s, char *err, size_t errlen)
{
	uint64_t n = get_le(s->p, 4);

	for (uint64_t i = 0; i < n; i++) {
		uint64_t la = get_le(s->p + 4 + 8 * i, 8);
		int r = mmu_apic_alias(emu, la);

		if (r < 0) {
			snprintf(err, errlen, "cannot map the local APIC at linear %#llx again: %s",
				 (unsigned long long) la, strerror(-r));
			return r;
		}
	}
	return 0;
}

int emu_restore(struct emu *emu, const void *blob, size_t len, char *err, size_t errlen)
{
	const uint8_t *p = blob;
	struct section sec[TAG_COUNT];
	const char *why;
	int r;

	r = header_check(p, len, err, errlen);
	if (r == 0)
		r = identity_check(emu, p, err, errlen);
	if (r == 0)
		r = sections_split(p, len, sec, err, errlen);
	if (r < 0)
		return r;
	why = sections_check(emu, sec);
	if (why) {
		snprintf(err, errlen, "a damaged snapshot: %s", why);
		return -EBADMSG;
	}
	/* first what can refuse: the vPMU checks its blob whole before it changes anything */
	if (emu->pmu) {
		/* its log line says why it refuses: it becomes the one line of `err` */
		emu->log_capture = true;
		emu->log_captured[0] = '\0';
		r = vpmu_vcpu_restore(emu->pmu, sec[TAG_PMU].p, sec[TAG_PMU].len);
		emu->log_capture = false;
		if (r < 0) {
			snprintf(err, errlen, "the vPMU refused its part of the snapshot: %s",
				 emu->log_captured[0] ? emu->log_captured : strerror(-r));
			return r;
		}
	}
	r = cpu_restore(emu, &sec[TAG_CPU], err, errlen);
	if (r < 0)
		return r;
	state_load(emu, sec);
	/* RAM and scratch all zeros (a hole punched in the RAM file), then the saved pages */
	if (fallocate(emu->mmu.memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		      (off_t) emu->mmu.ram_top) < 0)
		memset(emu->ram, 0, emu->mmu.ram_top);
	memset(emu->mmu.scratch, 0, SCRATCH_SIZE);
	mem_load(sec[TAG_RAM].p, sec[TAG_RAM].len, emu->ram, emu->mmu.ram_top);
	mem_load(sec[TAG_SCRATCH].p, sec[TAG_SCRATCH].len, emu->mmu.scratch, SCRATCH_SIZE);
	/* nothing of the last run is left to finish: the next starts afresh at resume_rip */
	emu_set_mode(emu, EMU_BOUNDARY);
	emu->prev_valid = false;
	emu->want_stop = false;
	emu->budget = 0;
	emu->acc_valid = false;
	emu->timer_at = lapic_timer_next(&emu->apic);
	emu_set_reg(emu, UC_X86_REG_RIP, emu->resume_rip);
	return aliases_restore(emu, &sec[TAG_APIC_ALIAS], err, errlen);
}
