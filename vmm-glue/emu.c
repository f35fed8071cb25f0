/* SPDX-License-Identifier: MIT */
/*
 * The emulator vCPU: setup, boot state, events and the run loop. Guest
 * memory is emu-mmu.c's, counting emu-count.c's, the instructions the VMM
 * executes itself emu-cpu.c's, event delivery emu-intr.c's.
 *
 * Unicorn runs the guest with the guest's own control registers and
 * EFER; exceptions it raises (#PF from its page walk with CR2 set, #GP,
 * #UD...) come to hook_intr at the faulting instruction, and the VMM
 * delivers them through the guest's IDT. HLT stops the modelled clock:
 * there is no timer.
 *
 * The run loop never waits silently: a run that retires nothing several
 * times in a row at the same place is reported and ends the run
 * (emu_run returns -EFAULT with one line naming RIP, CPL and mode);
 * --max-insns is checked at every block; a signal handler may stop the run
 * at any time (emu_interrupt: emu_run returns -EINTR).
 */
#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "emu-priv.h"
#include "vpmu/pebs.h" /* enum pebs_gpr: the order of vpmu_guest_regs.gpr */

#define RFLAGS_IF	(1ull << 9)
#define PMI_STORM_MIN	8      /* instructions between PMIs below this... */
#define PMI_STORM_COUNT 100000 /* ...this many times in a row: a storm */
#define NO_PROGRESS_MAX 64     /* runs in a row that retire nothing at one RIP: a hang */
#define EXC_STREAK_MAX	65536  /* exceptions in a row that retire nothing: a hang */
#define EFER_SCE	(1ull << 0)
#define EFER_LME	(1ull << 8)
#define EFER_LMA	(1ull << 10)
#define EFER_NXE	(1ull << 11)
#define MSR_EFER	0xc0000080
#define MSR_LSTAR	0xc0000082

void emu_config_init(struct emu_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->model = "Skylake-Server";
	cfg->mem_size = 128ull << 20;
	cfg->pmu = true;
	cfg->serial_out = stdout;
	cfg->pmu_backend = VPMU_BACKEND_EXACT;
	cfg->pmu_signo = SIGRTMIN + 4;
	cfg->layout = EMU_LAYOUT_FLAT;
}

void emu_fatal(struct emu *emu, const char *fmt, ...)
{
	va_list ap;

	if (emu->fatal)
		return;
	va_start(ap, fmt);
	vsnprintf(emu->fatal_msg, sizeof(emu->fatal_msg), fmt, ap);
	va_end(ap);
	emu->fatal = true;
	if (emu->in_run)
		uc_emu_stop(emu->uc);
}

uint64_t emu_reg(struct emu *emu, int reg)
{
	uint64_t v = 0;

	uc_reg_read(emu->uc, reg, &v);
	return v;
}

void emu_set_reg(struct emu *emu, int reg, uint64_t v)
{
	uc_reg_write(emu->uc, reg, &v);
}

uint64_t emu_tsc(const struct emu *emu)
{
	return emu->tsc_offset + emu->st.cycles + emu->idle_cycles;
}

/* The devices' clock (lapic.c, platform.c): the guest TSC now. */
static uint64_t clock_cb(void *data)
{
	return emu_tsc(data);
}

void emu_stop(struct emu *emu, uint64_t resume_rip)
{
	if (!emu_stopped(emu))
		emu_set_mode(emu, EMU_STOPPED);
	emu->resume_rip = resume_rip;
	uc_emu_stop(emu->uc);
}

/*
 * Run VMM code in Unicorn from `begin` (the boot stub, the ring-change
 * trampoline) until an exit or an exception stops it: no hook counts it
 * as the guest's. *ret_vector: that exception's vector, -1 for none.
 */
uc_err emu_run_vmm(struct emu *emu, uint64_t begin, int *ret_vector)
{
	uc_err ue;

	assert(!emu->in_run);
	emu->vmm_vector = -1;
	emu_set_mode(emu, EMU_VMM);
	emu->in_run = true;
	ue = uc_emu_start(emu->uc, begin, 0, 0, 0);
	emu->in_run = false;
	emu_set_mode(emu, EMU_BOUNDARY);
	*ret_vector = emu->vmm_vector;
	return ue;
}

void emu_raise(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip)
{
	emu->st.exceptions++;
	if (vector < 32) {
		emu->st.by_vector[vector]++;
		emu->st.last_exc_vector = vector;
		emu->st.last_exc_error = has_err ? err : 0;
		emu->st.last_exc_rip = rip;
		emu->st.last_exc_cr2 = vector == 14 ? emu_reg(emu, UC_X86_REG_CR2) : 0;
	}
	emu->pending_vector = (int) vector;
	emu->pending_has_err = has_err;
	emu->pending_err = err;
	emu->pending_rip = rip;
	emu_stop(emu, rip);
}

/* ---- exceptions Unicorn raises ------------------------------------------ */

/*
 * Unicorn 2.0.1 hands an exception to the UC_HOOK_INTR callback with its
 * vector only; the error code it computed (a #PF's P/W/U/RSVD/I bits, a
 * #GP's selector), whether an INT instruction raised it, and the
 * "exception in flight" it keeps for double-fault detection stay in its
 * CPU state, which uc_context_save copies out whole. Where in that copy
 * is found once per process by raising known exceptions in a scratch
 * Unicorn, each in a fresh one: page faults with error codes 2 (a write
 * to a not-present page), 3 (a write to a read-only page) and 9 (a read
 * through a reserved bit), SDM Vol. 3A 4.7, and an INT3. The one offset
 * that holds 2, 3 and 9 is the error code; the int after it must read 0
 * for the faults and 1 for INT3; and the exception in flight, 112 bytes
 * on (the CPU state's layout), 14 after each fault and -1 after INT3.
 * Unicorn never delivers through the guest's IDT, so it never clears
 * that last one: the VMM does after each exception, or the next #PF or
 * #GP would come as a double fault. Checked by test-unicorn; not
 * found (another Unicorn), the VMM derives what it can.
 */
#define OLD_EXCEPTION_OFF 112

static int calib_offset = -2;

static void calib_intr(uc_engine *uc, uint32_t intno, void *data)
{
	uc_emu_stop(uc);
}

/* One exception in a fresh Unicorn: its CPU state after it, in *ret (malloc'd). */
static int calib_run(uint64_t rip, uint8_t **ret, size_t *ret_size)
{
	static uint8_t mem[0x10000] __attribute__((aligned(4096)));
	static const uint8_t code[] = {
		0x88, 0x04, 0x25, 0x00, 0x60, 0x00, 0x00, /* 0x5000: mov %al, 0x6000 */
		0x88, 0x04, 0x25, 0x00, 0x70, 0x00, 0x00, /* 0x5007: mov %al, 0x7000 */
		0x8a, 0x04, 0x25, 0x00, 0x80, 0x00, 0x00, /* 0x500e: mov 0x8000, %al */
		0xcc,					  /* 0x5015: int3 */
	};
	uc_x86_msr efer = { MSR_EFER, EFER_LME | EFER_LMA | EFER_NXE };
	uint64_t cr3 = 0x1000, cr4 = 0x20, cr0 = 0x80010031, rsp = 0x9ff0, v;
	uint64_t *pt = (uint64_t *) (mem + 0x4000);
	uc_context *ctx = NULL;
	uc_engine *uc;
	uc_hook h;
	int r = -1;

	memset(mem, 0, sizeof(mem));
	v = 0x2003;
	memcpy(mem + 0x1000, &v, 8); /* PML4[0] -> PDPT */
	v = 0x3003;
	memcpy(mem + 0x2000, &v, 8); /* PDPT[0] -> PD */
	v = 0x4003;
	memcpy(mem + 0x3000, &v, 8); /* PD[0] -> PT */
	pt[5] = 0x5003;		     /* code */
	pt[9] = 0x9003;		     /* the stack */
	pt[7] = 0x7001;		     /* read-only */
	pt[8] = 0x8001 | 1ull << 51; /* a reserved bit */
	memcpy(mem + 0x5000, code, sizeof(code));
	if (uc_open(UC_ARCH_X86, UC_MODE_64, &uc) != UC_ERR_OK)
		return -1;
	if (uc_mem_map_ptr(uc, 0, sizeof(mem), UC_PROT_ALL, mem) == UC_ERR_OK &&
	    uc_hook_add(uc, &h, UC_HOOK_INTR, (void *) calib_intr, NULL, 1, 0) == UC_ERR_OK &&
	    uc_reg_write(uc, UC_X86_REG_MSR, &efer) == UC_ERR_OK &&
	    uc_reg_write(uc, UC_X86_REG_CR3, &cr3) == UC_ERR_OK &&
	    uc_reg_write(uc, UC_X86_REG_CR4, &cr4) == UC_ERR_OK &&
	    uc_reg_write(uc, UC_X86_REG_CR0, &cr0) == UC_ERR_OK &&
	    uc_reg_write(uc, UC_X86_REG_RSP, &rsp) == UC_ERR_OK &&
	    uc_emu_start(uc, rip, 0, 0, 1) == UC_ERR_OK &&
	    uc_context_alloc(uc, &ctx) == UC_ERR_OK && uc_context_save(uc, ctx) == UC_ERR_OK) {
		*ret_size = uc_context_size(uc);
		*ret = malloc(*ret_size);
		if (*ret) {
			memcpy(*ret, ctx, *ret_size);
			r = 0;
		}
	}
	if (ctx)
		uc_free(ctx);
	uc_close(uc);
	return r;
}

static int int_at(const uint8_t *p, size_t off)
{
	int v;

	memcpy(&v, p + off, 4);
	return v;
}

int emu_error_code_offset(void)
{
	static const uint64_t rips[4] = { 0x5000, 0x5007, 0x500e, 0x5015 };
	static const int want[3] = { 2, 3, 9 };
	uint8_t *st[4] = { NULL };
	size_t size = 0, sz;
	int found = -1;
	bool ok = true;

	if (calib_offset != -2)
		return calib_offset;
	for (int i = 0; i < 4 && ok; i++) {
		ok = calib_run(rips[i], &st[i], &sz) == 0 && (i == 0 || sz == size);
		size = sz;
	}
	for (size_t off = 0; ok && off + OLD_EXCEPTION_OFF + 4 <= size; off += 4) {
		bool match = true;

		for (int i = 0; i < 3 && match; i++)
			match = int_at(st[i], off) == want[i] && int_at(st[i], off + 4) == 0 &&
				int_at(st[i], off + OLD_EXCEPTION_OFF) == 14;
		match = match && int_at(st[3], off + 4) == 1 &&
			int_at(st[3], off + OLD_EXCEPTION_OFF) == -1;
		if (!match)
			continue;
		if (found >= 0) {
			found = -1; /* not one place: trust none */
			break;
		}
		found = (int) off;
	}
	for (int i = 0; i < 4; i++)
		free(st[i]);
	return calib_offset = found;
}

/*
 * IA32_EFER in the same CPU state. Unicorn 2.0.1's CPU lacks NX and
 * SYSCALL in its feature words, so a WRMSR drops EFER.NXE and EFER.SCE
 * (its walk then takes XD as a reserved bit, its SYSRET #UDs), while the
 * page walk and SYSRET themselves implement both. The VMM writes EFER
 * into the saved state whole. Found like the error code: the one 8-byte
 * field that holds what the register API reads back after LME was set,
 * cleared and set again (LMA stays as it was: WRMSR cannot change it).
 */
static int efer_offset = -2;

int emu_efer_offset(void)
{
	static const uint64_t vals[3] = { 0x100, 0, 0x100 };
	uint64_t rb[3];
	uint8_t *st[3] = { NULL };
	uc_context *ctx = NULL;
	uc_engine *uc = NULL;
	size_t size = 0;
	int found = -1;

	if (efer_offset != -2)
		return efer_offset;
	if (uc_open(UC_ARCH_X86, UC_MODE_64, &uc) == UC_ERR_OK &&
	    uc_context_alloc(uc, &ctx) == UC_ERR_OK) {
		size = uc_context_size(uc);
		for (int i = 0; i < 3; i++) {
			uc_x86_msr m = { MSR_EFER, vals[i] };

			st[i] = malloc(size);
			if (!st[i] || uc_reg_write(uc, UC_X86_REG_MSR, &m) != UC_ERR_OK ||
			    uc_reg_read(uc, UC_X86_REG_MSR, &m) != UC_ERR_OK ||
			    uc_context_save(uc, ctx) != UC_ERR_OK) {
				free(st[i]);
				st[i] = NULL;
				break;
			}
			rb[i] = m.value; /* LMA stays as it was: what is there, not what was written
					  */
			memcpy(st[i], ctx, size);
		}
	}
	for (size_t off = 0; st[2] && rb[0] != rb[1] && off + 8 <= size; off += 8) {
		uint64_t v[3];

		for (int i = 0; i < 3; i++)
			memcpy(&v[i], st[i] + off, 8);
		if (v[0] != rb[0] || v[1] != rb[1] || v[2] != rb[2])
			continue;
		if (found >= 0) {
			found = -1;
			break;
		}
		found = (int) off;
	}
	for (int i = 0; i < 3; i++)
		free(st[i]);
	if (ctx)
		uc_free(ctx);
	if (uc)
		uc_close(uc);
	return efer_offset = found;
}

/* Set Unicorn's EFER to exactly `efer` (the register API for LMA's mode bits, then the rest). */
void emu_write_efer(struct emu *emu, uint64_t efer)
{
	uc_x86_msr m = { .rid = MSR_EFER, .value = efer };
	uint64_t now;

	uc_reg_write(emu->uc, UC_X86_REG_MSR, &m);
	m.value = 0;
	uc_reg_read(emu->uc, UC_X86_REG_MSR, &m);
	if (m.value == efer || emu->efer_off < 0 || !emu->ctx ||
	    uc_context_save(emu->uc, emu->ctx) != UC_ERR_OK)
		return;
	memcpy(&now, (uint8_t *) emu->ctx + emu->efer_off, 8);
	if (now != m.value)
		return; /* not the field it was found to be: leave it */
	memcpy((uint8_t *) emu->ctx + emu->efer_off, &efer, 8);
	uc_context_restore(emu->uc, emu->ctx);
}

/*
 * The error code and INT-n flag of the exception Unicorn just raised;
 * and no exception is in flight any more (the VMM delivers it).
 */
static void exception_info(struct emu *emu, uint32_t *ret_err, bool *ret_is_int)
{
	uint8_t *st = (uint8_t *) emu->ctx;
	int e = 0, in = 0, none = -1;

	if (emu->err_offset >= 0 && emu->ctx && uc_context_save(emu->uc, emu->ctx) == UC_ERR_OK) {
		e = int_at(st, (size_t) emu->err_offset);
		in = int_at(st, (size_t) emu->err_offset + 4);
		if (int_at(st, (size_t) emu->err_offset + OLD_EXCEPTION_OFF) != -1) {
			memcpy(st + emu->err_offset + OLD_EXCEPTION_OFF, &none, 4);
			uc_context_restore(emu->uc, emu->ctx);
		}
	}
	*ret_err = (uint32_t) e;
	*ret_is_int = in != 0;
}

static bool canonical(uint64_t v)
{
	return (uint64_t) ((int64_t) (v << 16) >> 16) == v;
}

/*
 * Unicorn's page walk raises #GP for every non-canonical address; an
 * access through the stack (RSP or RBP based, PUSH/POP, CALL/RET) takes
 * #SS(0) instead (SDM Vol. 3A 6.15, interrupt 12).
 */
static bool stack_fault(struct emu *emu, uint64_t rip)
{
	struct insn in;
	uint64_t a;

	if (!emu->cs64 || insn_decode(emu, rip, true, &in) < 0)
		return false;
	if (in.dla == DLA_PUSH || in.dla == DLA_POP) {
		a = count_data_address(emu, &in);
	} else if (in.dla == DLA_MODRM && (in.base == X86_REG_RSP || in.base == X86_REG_RBP ||
					   in.base == X86_REG_ESP || in.base == X86_REG_EBP)) {
		a = count_data_address(emu, &in);
	} else {
		return false;
	}
	return !canonical(a);
}

static bool has_error_code(unsigned int vector)
{
	/* SDM Vol. 3A Table 6-1 */
	return vector == 8 || (vector >= 10 && vector <= 14) || vector == 17 || vector == 21;
}

static void hook_intr(uc_engine *uc, uint32_t intno, void *data)
{
	struct emu *emu = data;
	uint64_t rip = emu_reg(emu, UC_X86_REG_RIP);
	uint32_t err = 0;
	bool is_int = false, trap;

	if (emu->mode == EMU_VMM) {
		emu->vmm_vector = (int) intno;
		uc_emu_stop(uc);
		return;
	}
	exception_info(emu, &err, &is_int);
	if (emu->err_offset < 0)
		is_int = intno == 3 || intno == 4 || intno >= 32;
	/* INT n, INT3, INTO: RIP is past the instruction, which retired */
	trap = is_int;
	count_retire_to(emu, rip, trap);
	/*
	 * The privilege level and mode the exception came from are Unicorn's
	 * now: a far transfer (IRETQ to ring 3) whose block never reached the
	 * next block hook, because the first instruction after it faulted,
	 * has not been seen by retire_cur. (What retired before counted at
	 * the level it ran at.)
	 */
	emu_refresh_mode(emu);
	if (intno == 14)
		emu->st.page_faults++;
	if (intno == 13 && !is_int && err == 0 && stack_fault(emu, rip))
		intno = 12;
	if (emu->trace)
		fprintf(stderr, "trace: exception %u error %#x%s at %#llx (CR2 %#llx)\n", intno,
			err, is_int ? " (INT n)" : "", (unsigned long long) rip,
			(unsigned long long) emu_reg(emu, UC_X86_REG_CR2));
	emu_raise(emu, intno, !is_int && has_error_code(intno), err, rip);
}

static bool hook_invalid(uc_engine *uc, void *data)
{
	struct emu *emu = data;
	uint64_t rip = emu_reg(emu, UC_X86_REG_RIP);

	if (emu->mode == EMU_VMM) {
		emu->vmm_vector = 6;
		uc_emu_stop(uc);
		return false;
	}
	count_retire_to(emu, rip, false);
	emu_refresh_mode(emu);		  /* as in hook_intr */
	emu_raise(emu, 6, false, 0, rip); /* #UD */
	return false;
}

/*
 * SYSCALL: Unicorn 2.0.1 only calls this hook and steps over the
 * instruction. The VMM completes it (SDM Vol. 2B SYSCALL) from the run
 * loop (intr_syscall), since the privilege change needs a run of its own.
 */
static void hook_syscall(uc_engine *uc, void *data)
{
	struct emu *emu = data;
	uint64_t rip = emu_reg(emu, UC_X86_REG_RIP);
	uc_x86_msr lstar = { .rid = MSR_LSTAR };

	if (emu->mode == EMU_VMM)
		return;
	/* #UD outside 64-bit mode (Intel) or with EFER.SCE clear */
	if (!(emu->efer & EFER_SCE) || !emu->cs64 || !(emu->efer & EFER_LMA)) {
		count_retire_to(emu, rip, false);
		emu_raise(emu, 6, false, 0, rip);
		return;
	}
	uc_reg_read(uc, UC_X86_REG_MSR, &lstar);
	emu->hook_rip = lstar.value;
	count_retire_through(emu, rip, lstar.value);
	emu->syscall_pending = true;
	emu->syscall_next = rip + 2;
	emu_stop(emu, rip + 2);
}

/* ---- I/O ports --------------------------------------------------------- */

/*
 * Every port goes to the platform (platform.c): a port with no device
 * reads as all ones and drops writes, like an empty ISA bus, and is
 * listed once by --verbose (platform_print_unknown).
 */
static uint32_t hook_in(uc_engine *uc, uint32_t port, int size, void *data)
{
	struct emu *emu = data;
	uint32_t v = 0;

	emu->st.io_exits++;
	if (emu->plat.exited || emu->fatal)
		return 0;
	platform_io(&emu->plat, (uint16_t) port, (unsigned int) size, false, &v);
	return v;
}

static void hook_out(uc_engine *uc, uint32_t port, int size, uint32_t value, void *data)
{
	struct emu *emu = data;

	emu->st.io_exits++;
	if (emu->plat.exited || emu->fatal)
		return;
	platform_io(&emu->plat, (uint16_t) port, (unsigned int) size, true, &value);
	if (emu->plat.exited) {
		emu->plat.serial_out = NULL; /* it has exited: nothing more is printed */
		uc_emu_stop(uc);
	}
}

/*
 * The 8259A's INT rose (a device's line, an unmask, an EOI): end the run
 * at the next block boundary, where take_event delivers it. Not
 * uc_emu_stop from an I/O hook: see request_stop in emu-mmu.c.
 */
static void pic_intr_cb(void *data, bool level)
{
	struct emu *emu = data;

	if (level)
		emu->want_stop = true;
}

/* ---- the vPMU's callbacks ---------------------------------------------- */

static void pmi_cb(void *data, struct vpmu_vcpu *vcpu)
{
	struct emu *emu = data;
	struct vpmu_lvt d;
	bool merged;

	vpmu_lvt_decode(lapic_lvtpc(&emu->apic), &d);
	if (d.action == VPMU_LVT_DROP || !(emu->apic.base & APIC_BASE_ENABLE)) {
		vpmu_pmi_dropped(vcpu); /* lost, as on hardware: not asked again after a restore */
		return;
	}
	lapic_set_lvtpc(&emu->apic, d.after);
	/* one already pending for the same vector (or NMI) takes this one in: merged */
	if (d.action == VPMU_LVT_NMI) {
		merged = emu->nmi_pending;
		emu->nmi_pending = true;
	} else {
		merged = d.vector >= 16 && (emu->apic.irr[d.vector / 32] >> (d.vector % 32) & 1);
		lapic_set_irr(&emu->apic, d.vector);
	}
	if (merged)
		vpmu_pmi_merged(vcpu);
	else
		vpmu_pmi_delivered(vcpu);
	if (emu->st.pmis < EMU_PMI_RECORD)
		emu->st.pmi_insns[emu->st.pmis] = emu->st.instructions;
	emu->st.pmis++;
	if (emu->st.instructions - emu->last_pmi_insns < PMI_STORM_MIN) {
		if (++emu->storm > PMI_STORM_COUNT)
			emu_fatal(emu,
				  "PMI storm: %u PMIs in a row fewer than %u instructions apart "
				  "(a counter re-armed too close to overflow?)",
				  PMI_STORM_COUNT, PMI_STORM_MIN);
	} else {
		emu->storm = 0;
	}
	emu->last_pmi_insns = emu->st.instructions;
	emu->want_stop = true;
}

static int regs_cb(void *data, struct vpmu_vcpu *vcpu, struct vpmu_guest_regs *r)
{
	static const int gprs[PEBS_NR_GPRS] = {
		[PEBS_RAX] = UC_X86_REG_RAX, [PEBS_RCX] = UC_X86_REG_RCX,
		[PEBS_RDX] = UC_X86_REG_RDX, [PEBS_RBX] = UC_X86_REG_RBX,
		[PEBS_RSP] = UC_X86_REG_RSP, [PEBS_RBP] = UC_X86_REG_RBP,
		[PEBS_RSI] = UC_X86_REG_RSI, [PEBS_RDI] = UC_X86_REG_RDI,
		[PEBS_R8] = UC_X86_REG_R8,   [PEBS_R9] = UC_X86_REG_R9,
		[PEBS_R10] = UC_X86_REG_R10, [PEBS_R11] = UC_X86_REG_R11,
		[PEBS_R12] = UC_X86_REG_R12, [PEBS_R13] = UC_X86_REG_R13,
		[PEBS_R14] = UC_X86_REG_R14, [PEBS_R15] = UC_X86_REG_R15,
	};
	struct emu *emu = data;

	memset(r, 0, sizeof(*r));
	r->rip = emu->hook_rip;
	r->rflags = emu_reg(emu, UC_X86_REG_RFLAGS);
	for (int i = 0; i < 16; i++)
		r->gpr[i] = emu_reg(emu, gprs[i]);
	for (int i = 0; i < 16; i++)
		uc_reg_read(emu->uc, UC_X86_REG_XMM0 + i, r->xmm[i]);
	r->cr0 = emu->cr0;
	r->cr3 = emu->cr3;
	r->cr4 = emu->cr4;
	r->efer = emu->efer;
	r->tsc = emu_tsc(emu);
	r->cpl = emu->cpl;
	r->long_mode = emu->cs64 && (emu->efer & EFER_LMA);
	r->sse = emu->cr4 & (1ull << 9);
	return 0;
}

/* The vPMU's log: the embedder's, or the reason a snapshot restore reports (emu-snapshot.c). */
static void log_cb(void *data, enum vpmu_log_level level, const char *msg)
{
	struct emu *emu = data;

	if (emu->log_capture) {
		snprintf(emu->log_captured, sizeof(emu->log_captured), "%s", msg);
		return;
	}
	if (emu->cfg.pmu_log)
		emu->cfg.pmu_log(emu->cfg.pmu_log_data, level, msg);
}

/* ---- setup --------------------------------------------------------------- */

/*
 * Guest-physical RAM: one range from 0, with the usual hole from 3 GiB to
 * 4 GiB when it is larger (the local APIC and MMIO live there). Linux
 * layout: the first MiB, then RAM from 16 MiB: the linear addresses
 * between are where static Linux programs live, and on the emulator a
 * linear address inside RAM's physical range can only mean that physical
 * address (emu-mmu.c).
 */
static unsigned int ram_layout(const struct emu_config *cfg, struct vpmu_mem_region *r)
{
	uint64_t start = 0, size = cfg->mem_size;
	unsigned int n = 0;

	if (cfg->layout == EMU_LAYOUT_LINUX) {
		r[n++] = (struct vpmu_mem_region){ .gpa = 0, .size = 1ull << 20 };
		start = 16ull << 20;
		size -= 1ull << 20;
	}
	if (start + size > EMU_HOLE_START) {
		r[n++] = (struct vpmu_mem_region){ .gpa = start, .size = EMU_HOLE_START - start };
		size -= EMU_HOLE_START - start;
		start = 4ull << 30;
	}
	r[n++] = (struct vpmu_mem_region){ .gpa = start, .size = size };
	return n;
}

static int add_hooks(struct emu *emu)
{
	uc_err ue;

	ue = uc_hook_add(emu->uc, &emu->hooks[0], UC_HOOK_BLOCK, (void *) count_hook_block, emu, 1,
			 0);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[1], UC_HOOK_INTR, (void *) hook_intr, emu, 1,
				 0);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[2], UC_HOOK_INSN_INVALID,
				 (void *) hook_invalid, emu, 1, 0);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[3], UC_HOOK_INSN, (void *) hook_in, emu, 1, 0,
				 UC_X86_INS_IN);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[4], UC_HOOK_INSN, (void *) hook_out, emu, 1,
				 0, UC_X86_INS_OUT);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[5], UC_HOOK_MEM_UNMAPPED,
				 (void *) mmu_hook_unmapped, emu, 1, 0);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[6], UC_HOOK_INSN, (void *) hook_syscall, emu,
				 1, 0, UC_X86_INS_SYSCALL);
	if (ue == UC_ERR_OK)
		ue = uc_hook_add(emu->uc, &emu->hooks[7], UC_HOOK_EDGE_GENERATED,
				 (void *) count_hook_new_tb, emu, 1, 0);
	if (ue == UC_ERR_OK)
		ue = uc_ctl_exits_enable(emu->uc);
	return ue == UC_ERR_OK ? 0 : -EIO;
}

static int new_vpmu(struct emu *emu, const struct emu_config *cfg, char *err, size_t errlen)
{
	struct vpmu_mem_region regions[4];
	struct vpmu_config vc;
	int r;

	if (!cfg->pmu) {
		if (vpmu_model_find(cfg->model) >= 0)
			return 0;
		snprintf(err, errlen, "unknown CPU model '%s' (vpmu-vmm --help lists them)",
			 cfg->model);
		return -ENOENT;
	}
	vpmu_config_init(&vc);
	vc.model = cfg->model;
	vc.version = cfg->pmu_version ? cfg->pmu_version : -1;
	vc.backend = (enum vpmu_backend) cfg->pmu_backend;
	vc.signo = cfg->pmu_signo;
	vc.pmi = pmi_cb;
	vc.pmi_data = emu;
	vc.regs = regs_cb;
	vc.regs_data = emu;
	vc.filter = cfg->pmu_filter;
	vc.linear_bits = 48; /* Unicorn has no 5-level paging: CPUID.80000008H says 48 */
	/* errors come back as codes; vpmu-vmm prints its own line for them */
	vc.log = log_cb;
	vc.log_data = emu;
	vc.log_level = VPMU_LOG_WARNING;
	r = vpmu_vcpu_new(&vc, &emu->pmu);
	emu->host_poll = cfg->pmu_backend != VPMU_BACKEND_EXACT && cfg->pmu_signo == -1;
	if (r < 0) {
		snprintf(err, errlen,
			 r == -ENOENT ? "unknown CPU model '%s' (vpmu-vmm --help lists them)"
				      : "cannot create the vPMU for '%s'",
			 cfg->model);
		return r;
	}
	for (unsigned int i = 0; i < emu->mmu.nr_ram; i++)
		regions[i] = (struct vpmu_mem_region){ .gpa = emu->mmu.ram[i].gpa,
						       .size = emu->mmu.ram[i].size,
						       .hva = emu->mmu.ram[i].hva };
	vpmu_vcpu_set_memory(emu->pmu, regions, emu->mmu.nr_ram);
	return 0;
}

/*
 * The modelled clock drives the devices: the TSC counts at the model's
 * CPUID 15H rate (crystal x ratio), the LAPIC timer at the crystal (SDM
 * Vol. 3A 11.5.4), in TSC-deadline mode too (CPUID.01H:ECX[24]).
 */
static void start_clocks(struct emu *emu)
{
	uint32_t l15[4];
	uint64_t crystal = 25000000;

	cpu_cpuid_leaf(emu, 0x15, 0, l15);
	if (l15[0] && l15[1] && l15[2])
		crystal = l15[2];
	emu->tsc_hz = l15[0] && l15[1] ? crystal * l15[1] / l15[0] : 2100000000ull;
	lapic_timer_config(&emu->apic, emu->tsc_hz, crystal, true, clock_cb, emu);
	platform_set_clock(&emu->plat, emu->tsc_hz, RTC_DEFAULT_EPOCH, clock_cb, emu);
	emu->timer_at = UINT64_MAX;
}

int emu_new(const struct emu_config *cfg, struct emu **ret, char *err, size_t errlen)
{
	struct vpmu_mem_region ranges[4];
	unsigned int nr;
	struct emu *emu;
	uc_err ue;
	int r;

	if (!cfg->mem_size || cfg->mem_size & 0xfff || cfg->mem_size > (64ull << 30)) {
		snprintf(err, errlen,
			 "RAM size must be a multiple of 4 KiB between 4 KiB and 64 GiB");
		return -EINVAL;
	}
	if (cfg->layout == EMU_LAYOUT_LINUX && cfg->mem_size < (32ull << 20)) {
		snprintf(err, errlen, "a Linux guest needs at least 32 MiB of RAM (--mem)");
		return -EINVAL;
	}
	emu = calloc(1, sizeof(*emu));
	if (!emu) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	emu->cfg = *cfg;
	/* VPMU_EMU_TRACE=N: log hooks and runs to stderr once N instructions retired */
	if (getenv("VPMU_EMU_TRACE")) {
		emu->trace_after = strtoull(getenv("VPMU_EMU_TRACE"), NULL, 0);
		emu->trace = !emu->trace_after;
	}
	emu->pending_vector = -1;
	emu->vmm_vector = -1;
	emu->ram_size = cfg->mem_size;
	nr = ram_layout(cfg, ranges);
	r = mmu_init(emu, ranges, nr, err, errlen);
	if (r < 0) {
		emu_free(emu);
		return r;
	}
	lapic_reset(&emu->apic, 0);
	platform_init(&emu->plat, cfg->serial_out, cfg->mem_size, 1);
	pic_connect(&emu->plat.pic, pic_intr_cb, emu);
	emu->pat = 0x0007040600070406ull;
	emu->misc_enable = 1; /* fast strings */
	r = new_vpmu(emu, cfg, err, errlen);
	if (r == 0 && cpu_cpuid_init(emu) < 0) {
		snprintf(err, errlen, "CPUID table too small for the PMU leaves");
		r = -ENOSPC;
	}
	if (r < 0) {
		emu_free(emu);
		return r;
	}
	start_clocks(emu);

	ue = uc_open(UC_ARCH_X86, UC_MODE_64, &emu->uc);
	if (ue != UC_ERR_OK) {
		emu->uc = NULL;
		snprintf(err, errlen, "cannot start Unicorn: %s", uc_strerror(ue));
		emu_free(emu);
		return -EIO;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &emu->csh64) != CS_ERR_OK ||
	    cs_open(CS_ARCH_X86, CS_MODE_32, &emu->csh32) != CS_ERR_OK) {
		snprintf(err, errlen, "cannot start Capstone");
		emu_free(emu);
		return -EIO;
	}
	cs_option(emu->csh64, CS_OPT_DETAIL, CS_OPT_ON);
	cs_option(emu->csh32, CS_OPT_DETAIL, CS_OPT_ON);
	r = mmu_attach(emu, err, errlen);
	if (r == 0 && add_hooks(emu) < 0) {
		snprintf(err, errlen, "cannot hook Unicorn");
		r = -EIO;
	}
	emu->err_offset = emu_error_code_offset();
	emu->efer_off = emu_efer_offset();
	if (r == 0 && uc_context_alloc(emu->uc, &emu->ctx) != UC_ERR_OK) {
		emu->err_offset = -1;
		emu->efer_off = -1;
	}
	if (r < 0) {
		emu_free(emu);
		return r;
	}
	*ret = emu;
	return 0;
}

void emu_free(struct emu *emu)
{
	if (!emu)
		return;
	for (unsigned int i = 0; i < BLK_CACHE; i++)
		blk_free(&emu->blocks[i]);
	if (emu->ctx)
		uc_free(emu->ctx);
	if (emu->uc)
		uc_close(emu->uc);
	if (emu->csh64)
		cs_close(&emu->csh64);
	if (emu->csh32)
		cs_close(&emu->csh32);
	vpmu_vcpu_free(emu->pmu);
	mmu_free(emu);
	free(emu);
}

struct vmm_ram emu_ram(struct emu *emu)
{
	struct vmm_ram r = { emu->ram, emu->mmu.ram_top };

	return r;
}

unsigned int emu_ram_ranges(const struct emu *emu, uint64_t *ret_gpa, uint64_t *ret_size,
			    unsigned int max)
{
	unsigned int n = emu->mmu.nr_ram < max ? emu->mmu.nr_ram : max;

	for (unsigned int i = 0; i < n; i++) {
		ret_gpa[i] = emu->mmu.ram[i].gpa;
		ret_size[i] = emu->mmu.ram[i].size;
	}
	return n;
}

void emu_paging(const struct emu *emu, uint64_t *ret_cr0, uint64_t *ret_cr3, uint64_t *ret_cr4,
		uint64_t *ret_efer)
{
	*ret_cr0 = emu->cr0;
	*ret_cr3 = emu->cr3;
	*ret_cr4 = emu->cr4;
	*ret_efer = emu->efer;
}

struct vpmu_vcpu *emu_vpmu(struct emu *emu)
{
	return emu->pmu;
}

struct platform *emu_platform(struct emu *emu)
{
	return &emu->plat;
}

void emu_stop_at(struct emu *emu, uint64_t n)
{
	emu->stop_armed = true;
	emu->stop_at = n;
}

void emu_kick(struct emu *emu)
{
	emu->kicked = 1;
}

/* From a signal handler: the block hook stops at the next block (see request_stop in emu-mmu.c). */
void emu_interrupt(struct emu *emu)
{
	emu->interrupted = 1;
	emu->async_stop = 1;
}

void emu_get_stats(const struct emu *emu, struct emu_stats *ret)
{
	*ret = emu->st;
	ret->window_pages = emu->mmu.faults;
	ret->window_unmaps = emu->mmu.unmapped;
	ret->resyncs = emu->mmu.resyncs;
}

void emu_describe(struct emu *emu, char *buf, size_t len)
{
	uint64_t rip = emu->in_run ? emu->hook_rip : emu_reg(emu, UC_X86_REG_RIP);
	const char *mode = !(emu->efer & EFER_LMA) ? "32-bit protected mode"
			   : emu->cs64		   ? "64-bit mode"
						   : "compatibility mode";

	snprintf(buf, len, "RIP %#llx, CPL %u, %s, paging %s, after %llu instructions",
		 (unsigned long long) rip, emu->cpl, mode, (emu->cr0 >> 31) ? "on" : "off",
		 (unsigned long long) emu->st.instructions);
}

/* ---- boot ---------------------------------------------------------------- */

#define STUB_OFF 0x2000 /* in the scratch page range: the boot stub */
#define GDT_OFF	 0x3000 /* the multiboot boot GDT */

/*
 * Unicorn 2.0.1's 64-bit register API sets CS, DS, ES and SS selectors
 * without their descriptor caches, so a boot stub (VMM code in the
 * scratch range, not counted as the guest's) loads them the way the CPU
 * does, from the boot GDT: the data segments with MOV, CS with a far
 * JMP to the entry point, where a Unicorn exit stops it.
 */
static int run_stub(struct emu *emu, const uint8_t *code, size_t len, uint64_t entry)
{
	uint8_t *at = emu->mmu.scratch + STUB_OFF;
	uc_err ue;
	uint64_t rip;
	int vector;

	memcpy(at, code, len);
	if (uc_ctl_set_exits(emu->uc, &entry, 1) != UC_ERR_OK)
		return -EIO;
	emu->exit_set = entry;
	mmu_pg_off(emu);
	ue = emu_run_vmm(emu, SCRATCH_BASE + STUB_OFF, &vector);
	/*
	 * The exit is a translation of its own at `entry`, kept in Unicorn's
	 * cache after the exits are cleared: the guest's first run would stop
	 * there again and again. Drop it.
	 */
	uc_ctl_remove_cache(emu->uc, entry, entry + 1);
	mmu_pg_on(emu, true);
	uc_ctl_set_exits(emu->uc, NULL, 0);
	emu->exit_set = 0;
	rip = emu_reg(emu, UC_X86_REG_RIP);
	if (ue != UC_ERR_OK || rip != entry || vector >= 0)
		return -EFAULT;
	return 0;
}

/* mov $ds, %eax; mov %eax, %ds/%es/%fs/%gs/%ss; ljmp *far(%rip) with far = entry:cs */
static size_t stub_code(uint8_t *c, uint16_t cs, uint16_t ds, uint64_t entry, bool far64)
{
	static const uint8_t movs[] = {
		0x8e, 0xd8, 0x8e, 0xc0, 0x8e, 0xe0, 0x8e, 0xe8, 0x8e, 0xd0
	};
	size_t n = 0;
	int32_t rel;

	c[n++] = 0xb8;
	memcpy(c + n, &(uint32_t){ ds }, 4);
	n += 4;
	memcpy(c + n, movs, sizeof(movs));
	n += sizeof(movs);
	if (far64)
		c[n++] = 0x48; /* REX.W: m16:64 */
	c[n++] = 0xff;
	c[n++] = 0x2d;
	rel = 0;
	memcpy(c + n, &rel, 4);
	n += 4;
	if (far64) {
		memcpy(c + n, &entry, 8);
		memcpy(c + n + 8, &cs, 2);
		return n + 10;
	}
	memcpy(c + n, &(uint32_t){ (uint32_t) entry }, 4);
	memcpy(c + n + 4, &cs, 2);
	return n + 6;
}

static void set_efer(struct emu *emu, uint64_t efer)
{
	emu->efer = efer;
	emu_write_efer(emu, efer);
}

/*
 * 64-bit entry: paging on with the caller's CR3; CS and DS from the GDT
 * at `gdt` (long-mode code, flat data: the ELF64 loader's, or a Linux
 * boot GDT with __BOOT_CS/__BOOT_DS, Documentation/x86/boot.rst "64-bit
 * Boot Protocol"); interrupts off.
 */
static int boot64(struct emu *emu, uint64_t gdt, uint16_t limit, uint16_t cs, uint16_t ds,
		  uint64_t cr3, uint64_t entry)
{
	uc_x86_mmr g = { 0, gdt, limit, 0 };
	uint8_t code[64];
	size_t n;

	emu->cr0 = 0x80050033; /* PG AM WP NE ET MP PE */
	emu->cr3 = cr3;
	emu->cr4 = 0x620; /* OSXMMEXCPT OSFXSR PAE */
	set_efer(emu, EFER_LME | EFER_LMA);
	emu_set_reg(emu, UC_X86_REG_CR3, emu->cr3);
	emu_set_reg(emu, UC_X86_REG_CR4, emu->cr4);
	emu_set_reg(emu, UC_X86_REG_CR0, emu->cr0);
	uc_reg_write(emu->uc, UC_X86_REG_GDTR, &g);
	n = stub_code(code, cs, ds, entry, true);
	/* the far pointer follows the JMP: disp32 is 0 */
	if (run_stub(emu, code, n, entry) < 0)
		return -EFAULT;
	emu->cs64 = true;
	emu->cpl = 0;
	return 0;
}

/*
 * Multiboot v1 (Multiboot Specification 0.6.96 3.2, "Machine state"): 32-bit
 * protected mode, paging off, CS a flat 32-bit read/execute segment, DS ES
 * FS GS SS flat 32-bit read/write segments, EAX = 0x2BADB002, EBX = the
 * info block, interrupts off. The boot GDT lives in VMM scratch memory
 * (the spec lets GDTR be invalid once the kernel runs: it loads its own).
 */
static int boot_multiboot(struct emu *emu, const struct vmm_boot *boot)
{
	static const uint64_t gdt[3] = { 0, 0x00cf9a000000ffffull, 0x00cf92000000ffffull };
	uc_x86_mmr g = { 0, SCRATCH_BASE + GDT_OFF, sizeof(gdt) - 1, 0 };
	uint8_t code[64];
	size_t n;

	memcpy(emu->mmu.scratch + GDT_OFF, gdt, sizeof(gdt));
	uc_reg_write(emu->uc, UC_X86_REG_GDTR, &g);
	emu->cr0 = 0x11; /* ET PE */
	emu->cr3 = 0;
	emu->cr4 = 0;
	emu_set_reg(emu, UC_X86_REG_CR0, emu->cr0);
	emu_set_reg(emu, UC_X86_REG_CR4, 0);
	set_efer(emu, 0); /* leaves long mode: the far JMP then loads a 32-bit CS */
	n = stub_code(code, 0x08, 0x10, boot->entry, false);
	if (run_stub(emu, code, n, (uint32_t) boot->entry) < 0)
		return -EFAULT;
	emu->cs64 = false;
	emu->cpl = 0;
	emu_set_reg(emu, UC_X86_REG_RAX, 0x2badb002);
	emu_set_reg(emu, UC_X86_REG_RBX, boot->mb_info);
	return 0;
}

int emu_boot(struct emu *emu, const struct vmm_boot *boot, uint64_t arg, char *err, size_t errlen)
{
	uc_x86_mmr idtr = { 0, 0, 0, 0 };
	int r;

	uc_reg_write(emu->uc, UC_X86_REG_IDTR, &idtr);
	emu_set_reg(emu, UC_X86_REG_RFLAGS, 2);
	if (boot->kind == VMM_BOOT_ELF64) {
		r = boot64(emu, boot->gdt, 23, 0x08, 0x10, boot->cr3, boot->entry);
		emu_set_reg(emu, UC_X86_REG_RSP, boot->stack);
		emu_set_reg(emu, UC_X86_REG_RDI, arg);
	} else {
		r = boot_multiboot(emu, boot);
	}
	if (r < 0) {
		snprintf(err, errlen, "%s",
			 emu->fatal
				 ? emu->fatal_msg
				 : "cannot load the boot segments (the boot GDT is not readable?)");
		return -EFAULT;
	}
	emu_set_reg(emu, UC_X86_REG_RFLAGS, 2);
	emu->resume_rip = boot->entry;
	emu_set_reg(emu, UC_X86_REG_RIP, boot->entry);
	emu_refresh_mode(emu);
	if (emu->fatal) {
		snprintf(err, errlen, "%s", emu->fatal_msg);
		return -EFAULT;
	}
	return 0;
}

int emu_boot_linux64(struct emu *emu, uint64_t gdt, uint16_t gdt_limit, uint64_t cr3,
		     uint64_t entry, uint64_t zero_page, char *err, size_t errlen)
{
	uc_x86_mmr idtr = { 0, 0, 0, 0 };

	uc_reg_write(emu->uc, UC_X86_REG_IDTR, &idtr);
	emu_set_reg(emu, UC_X86_REG_RFLAGS, 2);
	/* __BOOT_CS 0x10, __BOOT_DS 0x18 (Documentation/x86/boot.rst) */
	if (boot64(emu, gdt, gdt_limit, 0x10, 0x18, cr3, entry) < 0) {
		snprintf(err, errlen, "cannot load the Linux boot segments from the GDT at %#llx",
			 (unsigned long long) gdt);
		return -EFAULT;
	}
	emu_set_reg(emu, UC_X86_REG_RFLAGS, 2);
	emu_set_reg(emu, UC_X86_REG_RSI, zero_page);
	emu->resume_rip = entry;
	emu_set_reg(emu, UC_X86_REG_RIP, entry);
	emu_refresh_mode(emu);
	return 0;
}

/* ---- the run loop ---------------------------------------------------------- */

/* Deliver an exception or interrupt; a failing delivery escalates to #DF, then a triple fault. */
static void deliver(struct emu *emu, unsigned int vector, bool has_err, uint32_t err, uint64_t rip)
{
	char where[192];

	if (intr_deliver(emu, vector, has_err, err, rip) == 0)
		return;
	if (vector != 8 && intr_deliver(emu, 8, true, 0, rip) == 0)
		return;
	emu_describe(emu, where, sizeof(where)); /* CPL, mode and count; its RIP is rip */
	emu_fatal(emu,
		  "guest triple fault: delivering vector %u failed, and so did #DF (no valid IDT "
		  "entry or stack?): %s",
		  vector, where);
}

/* Hooks are compiled into Unicorn's translations: drop the oldest, and what holds them. */
static void evict_hooks(struct emu *emu)
{
	mmu_pg_off(emu);
	if (emu->nr_step == MAX_STEP_HOOKS) {
		for (unsigned int i = 0; i < MAX_STEP_HOOKS / 2; i++) {
			uc_hook_del(emu->uc, emu->step_hooks[i]);
			uc_ctl_remove_cache(emu->uc, emu->step_addr[i], emu->step_addr[i] + 1);
		}
		memmove(emu->step_hooks, emu->step_hooks + MAX_STEP_HOOKS / 2,
			sizeof(emu->step_hooks) / 2);
		memmove(emu->step_addr, emu->step_addr + MAX_STEP_HOOKS / 2,
			sizeof(emu->step_addr) / 2);
		emu->nr_step = MAX_STEP_HOOKS / 2;
	}
	if (emu->nr_special == MAX_SPECIAL_HOOKS) {
		for (unsigned int i = 0; i < emu->nr_special; i++)
			uc_hook_del(emu->uc, emu->special_hooks[i]);
		emu->nr_special = 0;
		for (unsigned int i = 0; i < BLK_CACHE; i++)
			emu->blocks[i].hooked = false;
		uc_ctl_flush_tlb(emu->uc); /* every translation: they all may call a gone hook */
		emu->st.tb_flushes++;
	}
	mmu_pg_on(emu, true);
	emu->evict_hooks = false;
}

/* Before a run: what the last one left to do. */
static void prepare_run(struct emu *emu)
{
	if (emu->apic_alias) {
		int r = mmu_apic_alias(emu, emu->apic_alias);

		if (r < 0)
			emu_fatal(emu, "cannot map the local APIC at linear %#llx: %s",
				  (unsigned long long) emu->apic_alias, strerror(-r));
		emu->apic_alias = 0;
	}
	mmu_service(emu);
	if (emu->evict_hooks)
		evict_hooks(emu);
	if (emu->remove_cache) {
		/* retranslate the block that got hooks: only it, not every translation */
		mmu_tb_invalidate(emu, emu->remove_cache_addr,
				  emu->remove_cache_end - emu->remove_cache_addr);
		emu->st.tb_removals++;
		emu->remove_cache = false;
	}
}

/*
 * Before a HLT the 8259A's interrupt waits for the HLT to run: this
 * boundary may be inside the shadow of an STI just before it (SDM Vol. 2B
 * STI: "STI; HLT" wakes from the halt), which the emulator only tracks
 * for interrupts pending at the STI. Taking it in the halt is what
 * hardware may do anyway.
 */
static bool before_hlt(struct emu *emu)
{
	struct insn in;

	return !emu->halted && insn_decode(emu, emu->resume_rip, emu->cs64, &in) == 0 &&
	       in.special == SP_HLT;
}

/* Take an interrupt or NMI if one can be delivered now. */
static bool take_event(struct emu *emu, uint64_t rflags)
{
	int v;

	if (emu->window)
		return false;
	if (emu->nmi_pending && !emu->nmi_blocked) {
		emu->nmi_pending = false;
		emu->nmi_blocked = true;
		emu->halted = false;
		emu->st.nmis++;
		deliver(emu, 2, false, 0, emu->resume_rip);
		return true;
	}
	if ((rflags & RFLAGS_IF) && (v = lapic_pending(&emu->apic)) >= 0) {
		lapic_ack(&emu->apic, (uint8_t) v);
		emu->halted = false;
		emu->st.interrupts++;
		deliver(emu, (unsigned int) v, false, 0, emu->resume_rip);
		return true;
	}
	/* ExtINT through LINT0: the 8259A's acknowledge gives the vector (lapic.h) */
	if ((rflags & RFLAGS_IF) && lapic_extint(&emu->apic) && pic_intr(&emu->plat.pic) &&
	    !before_hlt(emu)) {
		v = pic_ack(&emu->plat.pic);
		emu->halted = false;
		emu->st.interrupts++;
		deliver(emu, (unsigned int) v, false, 0, emu->resume_rip);
		return true;
	}
	return false;
}

/*
 * HLT: the modelled clock jumps to the LAPIC timer's next interrupt (an
 * idle guest costs nothing; take_event has already woken it for any
 * interrupt pending now, the LAPIC's or the 8259A's through LINT0); the
 * TSC moves on, the cycle counters do not (they count unhalted cycles,
 * SDM Vol. 3B Table 21-1). Nothing that can wake it: say so and stop.
 */
static void halt(struct emu *emu, uint64_t rflags)
{
	uint64_t now = emu_tsc(emu), next = lapic_timer_next(&emu->apic);

	if (next != UINT64_MAX && (rflags & RFLAGS_IF)) {
		if (next > now)
			emu->idle_cycles += next - now;
		lapic_timer_advance(&emu->apic, emu_tsc(emu));
		emu->st.halts++;
		return;
	}
	emu_fatal(emu, "guest halted at rip %#llx with nothing that can wake it (%s)",
		  (unsigned long long) emu->resume_rip,
		  !(rflags & RFLAGS_IF) ? "interrupts disabled"
					: "no interrupt pending and no timer armed");
}

/* After Unicorn returned by itself: at an armed exit, or stopped from outside. */
static void returned(struct emu *emu)
{
	uint64_t rip = emu_reg(emu, UC_X86_REG_RIP);
	bool at_until = emu->until && rip == emu->until;

	emu->resume_rip = rip;
	emu->hook_rip = rip; /* PEBS records report the state here */
	count_retire_to(emu, rip, false);
	if (at_until && emu->until_next) {
		/* before the overflowing memory instruction: take its address */
		struct insn in;

		if (insn_decode(emu, rip, emu->cs64, &in) == 0) {
			emu->until_dla_ip = rip;
			emu->until_dla = count_data_address(emu, &in);
		}
		emu->until = emu->until_next;
		emu->until_next = 0;
	} else if (at_until) {
		emu->until = 0;
		emu->until_dla_ip = 0;
	}
}

/* A run that retires nothing, again and again at the same place, is a hang: say where. */
static void check_progress(struct emu *emu, uint64_t insns_before)
{
	if (emu->st.instructions != insns_before || emu->resume_rip != emu->progress_rip) {
		emu->progress_rip = emu->resume_rip;
		emu->no_progress = 0;
		return;
	}
	if (++emu->no_progress < NO_PROGRESS_MAX)
		return;
	{
		char where[160];

		emu_describe(emu, where, sizeof(where));
		emu_fatal(emu,
			  "the guest makes no progress: %d runs in a row retired nothing at %s",
			  NO_PROGRESS_MAX, where);
	}
}

/*
 * Exceptions raised one after the other with no instruction retired in
 * between: each one's handler faults before its first instruction
 * completes. Hardware would stack frames until a double fault and a
 * shutdown; the emulator's deliveries do not always descend, so it would
 * spin forever. Say where instead.
 */
static void check_exception_loop(struct emu *emu, uint64_t insns_before)
{
	char where[160];

	if (emu->st.instructions != insns_before) {
		emu->exc_streak = 0;
		return;
	}
	if (++emu->exc_streak < EXC_STREAK_MAX)
		return;
	emu_describe(emu, where, sizeof(where));
	emu_fatal(emu,
		  "the guest takes exceptions without end: %d in a row retired no instruction; "
		  "the last, vector %d error code %#x, at %s",
		  EXC_STREAK_MAX, emu->pending_vector, emu->pending_err, where);
}

/*
 * Whether emu_run is over: the guest exited, the VMM failed, or
 * emu_interrupt asked. *ret is what emu_run returns then.
 */
static bool run_ended(struct emu *emu, char *err, size_t errlen, int *ret_status, int *ret)
{
	if (!emu->plat.exited && !emu->fatal && !emu->interrupted)
		return false;
	if (emu->pmu)
		emu_feed_flush(emu);
	if (emu->plat.exited) {
		*ret_status = emu->plat.exit_status;
		*ret = 0;
	} else if (emu->fatal) {
		snprintf(err, errlen, "%s", emu->fatal_msg);
		*ret = -EFAULT;
	} else {
		emu->interrupted = 0;
		emu_describe(emu, err, errlen);
		*ret = -EINTR;
	}
	return true;
}

/* What a run left owed: the rest of a SYSCALL, an exception. True if it did something. */
static bool complete_owed(struct emu *emu)
{
	if (emu->syscall_pending) {
		emu->syscall_pending = false;
		if (intr_syscall(emu, emu->syscall_next) < 0)
			emu_fatal(emu, "cannot enter the guest kernel for SYSCALL at %#llx",
				  (unsigned long long) emu->syscall_next - 2);
		return true;
	}
	if (emu->pending_vector >= 0) {
		unsigned int vec = (unsigned int) emu->pending_vector;

		emu->pending_vector = -1;
		deliver(emu, vec, emu->pending_has_err, emu->pending_err, emu->pending_rip);
		return true;
	}
	return false;
}

/* Interrupts, NMIs and the halted state, on the modelled clock. True if it did something. */
static bool take_events(struct emu *emu)
{
	uint64_t rflags = emu_reg(emu, UC_X86_REG_RFLAGS);

	lapic_timer_advance(&emu->apic, emu_tsc(emu));
	emu->timer_at = lapic_timer_next(&emu->apic);
	if (emu->halted)
		emu->window = 0;
	if (take_event(emu, rflags))
		return true;
	if (emu->halted) {
		halt(emu, rflags);
		return true;
	}
	return false;
}

/* Everything the guest's next run needs, the vPMU synced; false: look at events again. */
static bool ready_to_run(struct emu *emu)
{
	prepare_run(emu);
	emu->want_stop = false;
	if (emu->pmu) {
		if (emu->kicked) {
			emu->kicked = 0;
			emu->st.kicks++;
		}
		emu_feed_flush(emu);
		vpmu_vcpu_sync(emu->pmu); /* polls the host counters too */
		if (emu->want_stop)
			return false; /* it raised a PMI: deliver it before running on */
	}
	return !emu->fatal;
}

/* Run the guest from resume_rip until a hook stops it, or Unicorn stops by itself. */
static uc_err run_slice(struct emu *emu)
{
	uint64_t exits[1];
	uc_err ue;

	emu_set_mode(emu, EMU_BOUNDARY);
	emu->async_stop = 0;
	emu->prev_valid = false;
	if (emu->trace_after && emu->st.instructions >= emu->trace_after)
		emu->trace = true;
	if (emu->trace)
		fprintf(stderr, "trace: run at %#llx until %#llx\n",
			(unsigned long long) emu->resume_rip, (unsigned long long) emu->until);
	/*
	 * A translated block that holds the exit address runs past it:
	 * drop the translations from here to it.
	 */
	if (emu->until && emu->until > emu->resume_rip)
		mmu_tb_invalidate(emu, emu->resume_rip, emu->until + 1 - emu->resume_rip);
	if (emu->until != emu->exit_set) {
		/* Unicorn rebuilds its exit set on every call: only when it changes */
		exits[0] = emu->until;
		uc_ctl_set_exits(emu->uc, exits, emu->until ? 1 : 0);
		emu->exit_set = emu->until;
	}
	emu->in_run = true;
	ue = uc_emu_start(emu->uc, emu->resume_rip, 0, 0, 0);
	emu->in_run = false;
	if (emu->trace)
		fprintf(stderr,
			"trace: back at %#llx rcx %#llx rdi %#llx (%s): stopped %d async %d "
			"vector %d smc %d\n",
			(unsigned long long) emu_reg(emu, UC_X86_REG_RIP),
			(unsigned long long) emu_reg(emu, UC_X86_REG_RCX),
			(unsigned long long) emu_reg(emu, UC_X86_REG_RDI), uc_strerror(ue),
			emu_stopped(emu), (int) emu->async_stop, emu->pending_vector,
			(int) emu->mmu.smc_n);
	return ue;
}

/* Why the run that began with `insns_before` retired ended, and what that leaves to do. */
static void slice_ended(struct emu *emu, uc_err ue, uint64_t insns_before)
{
	bool events = emu_stopped(emu) || emu->fatal || emu->plat.exited ||
		      emu->pending_vector >= 0 || emu->syscall_pending;

	/* a stop armed in this run is for the rerun; any other stop drops the old one */
	if (emu->mode != EMU_REARM && events)
		emu->until = 0;
	if (emu->fatal || emu->plat.exited || emu->pending_vector >= 0) {
		emu->no_progress = 0;
		if (emu->pending_vector >= 0)
			check_exception_loop(emu, insns_before);
		return;
	}
	if (ue != UC_ERR_OK) {
		char where[160];

		emu_describe(emu, where, sizeof(where));
		emu_fatal(emu, "emulation stopped (%s) at %s", uc_strerror(ue), where);
		return;
	}
	if (!emu_stopped(emu))
		returned(emu);
	if (emu->pending_vector < 0 && !emu->syscall_pending)
		check_progress(emu, insns_before);
}

int emu_run(struct emu *emu, int *ret_status, char *err, size_t errlen)
{
	for (;;) {
		uint64_t insns_before;
		uc_err ue;
		int r;

		if (run_ended(emu, err, errlen, ret_status, &r))
			return r;
		if (complete_owed(emu) || take_events(emu) || !ready_to_run(emu))
			continue;
		if (emu->stop_armed && emu->st.instructions >= emu->stop_at) {
			emu->stop_armed = false; /* emu_stop_at: between blocks, nothing owed */
			return EMU_RUN_STOP_POINT;
		}
		insns_before = emu->st.instructions;
		ue = run_slice(emu);
		slice_ended(emu, ue, insns_before);
	}
}
