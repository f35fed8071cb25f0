/* SPDX-License-Identifier: MIT */
/*
 * A guest that does outrageous things to its vPMU: the guest may fail or
 * fault, the VMM must go on, write nothing outside guest RAM and stay
 * bounded. On every model:
 *  - IA32_DS_AREA: a non-canonical value is #GP on the WRMSR (SDM Vol. 3B
 *    20.4.9 "64-bit linear address"; Vol. 4 2.1: canonical checks on
 *    linear-address MSRs), a canonical one is taken as it is;
 *  - the DS save area (Fig 20-8) and the PEBS buffer it describes placed
 *    where no RAM is: unmapped linear addresses, the xAPIC page, guest-
 *    physical addresses past RAM through a PTE, a page table past RAM
 *    through a PDE, a record straddling the end of RAM, a self-referencing
 *    PML4 entry, and buffer fields that make no sense (index past the
 *    absolute maximum, maximum below the base, values near 2^64,
 *    threshold past the maximum). Each case makes a PEBS counter overflow
 *    N_OVF times; the vPMU's documented behaviour (vpmu/pebs.c) is to skip
 *    the record: nothing is written anywhere, the DS index does not move,
 *    the counter is reloaded from the reset slot when that slot is readable;
 *  - architectural PEBS (the arch-pebs model): IA32_PEBS_BASE/INDEX
 *    reserved bits #GP, a buffer past RAM, on the xAPIC page, straddling
 *    the end of RAM, at the top of the physical address space, and a write
 *    offset past the buffer's size (FULL, OvfBuffer, nothing written);
 *  - PMI storms: 10,000 PMIs from a counter re-armed at -1 by the handler
 *    (the main line making progress between them), 10,000 PMIs with the
 *    handler re-arming counting itself (each one delivered right after the
 *    IRET: SDM Vol. 3A 6.8.1), 1,000 such PMIs as NMIs (blocked until IRET,
 *    6.7.1), a handler that never EOIs and never unmasks the LVT (one PMI:
 *    the delivery sets the LVT mask bit, SDM Vol. 3B 21.8.? / Vol. 3A
 *    11.5.1), and one that unmasks but never EOIs (one PMI held in IRR
 *    behind the in-service vector, 11.8.3-11.8.4, delivered at the EOI).
 * At the end the guest prints what the VMM's --verbose statistics must say
 * ("outrageous: expect ..."), which vmm-glue/tests/test-outrageous.py checks.
 */
#include "guest.h"
#include "vpmu/pebs.h"

#define PMI_VECTOR 0xf0
#define N_OVF	   64 /* PEBS counter overflows per case */
#define STORM	   10000
#define NMI_STORM  1000
#define LOOPS	   1000

#define MSR_IA32_PMC0_LEGACY 0x0c1 /* a write sign-extends bit 31 (SDM 21.2.6) */
#define MSR_IA32_PEBS_BASE   0x3f4 /* architectural PEBS */
#define MSR_IA32_PEBS_INDEX  0x3f5
#define MSR_PMC_GP0_CFG_C    0x1903	  /* IA32_PMC_GP0_CFG_C */
#define ARCH_PEBS_EN	     (1ull << 63) /* CFG_C */
#define ARCH_INDEX_EN	     (1ull << 32) /* IA32_PEBS_INDEX */
#define ARCH_INDEX_FULL	     (1ull << 31)
#define ARCH_INDEX_WR	     0x7fffff0ull  /* bits 26:4, byte offset */
#define ARCH_BASE_SIZE(n)    (n)	   /* bits 3:0: 4 KiB << n */
#define ARCH_RELOAD	     0xfff0bdc0ull /* -1000000 in RELOAD_VALUE[31:0], 1-extended */
#define EV_INST		     0xc0	   /* INST_RETIRED.ANY_P */
#define EV_INST_PDIST	     0x1c0	   /* INST_RETIRED.PREC_DIST (Skylake) */
#define RESET_VALUE	     (0 - 1000000ull)
#define PTE_A		     (1ull << 5)
#define PTE_D		     (1ull << 6)

/* DS buffer management area, 64-bit layout (SDM Vol. 3B Fig 20-8) */

#define FILL 0x5a5a5a5a5a5a5a5aull

/* Linear addresses of our own making: PML4 slots the loader leaves empty */
#define WILD_A	    0x0000400000000000ull /* a 4 KiB page we point anywhere */
#define WILD_B	    (WILD_A + 0x1000)
#define WILD_PDE    (WILD_A + 0x200000) /* a PDE whose page table is past RAM */
#define UNMAPPED_LO 0x0000500000000000ull
#define UNMAPPED_HI 0xffff900000000000ull
#define LOOP_SLOT   0x100ull /* PML4[256] points at the PML4 */
#define LOOP_VA                                                                                    \
	(0xffff000000000000ull | LOOP_SLOT << 39 | LOOP_SLOT << 30 | LOOP_SLOT << 21 |             \
	 LOOP_SLOT << 12)
#define NONCANON  0x0000800000000000ull /* bit 47 without sign extension */
#define APIC_PAGE 0xfee00000ull

static uint8_t ds_page[4096] __attribute__((aligned(4096)));
static uint8_t pebs_pages[3][4096] __attribute__((aligned(4096)));

static unsigned int version, nr_gp, fmt, lin_bits;
static uint64_t gp_mask, ram_end, rec_size;
static bool has_ds, arch_pebs;

/* What the VMM's statistics must show once the guest is done */
static uint64_t want_records, want_skipped, want_faults;

/* ---- PMIs ---- */
enum pmi_mode {
	PMI_ACK,
	PMI_STORM_MAIN,
	PMI_STORM_SELF,
	PMI_NMI_SELF,
	PMI_NO_EOI_NO_UNMASK,
	PMI_UNMASK_NO_EOI
};
static volatile enum pmi_mode pmi_mode;
static volatile unsigned int pmis, pmis_total, bad_rip, status_hits;
static volatile uint64_t pmi_status_or, want_rip;

static void arm_minus_one(void)
{
	wrmsr(MSR_IA32_PMC0_LEGACY, 0xffffffffull); /* all ones in the counter width */
}

static void on_pmi(struct frame *f)
{
	uint64_t st = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);

	pmis++;
	pmis_total++;
	pmi_status_or |= st;
	if (st & 1)
		status_hits++;
	if (want_rip && f->rip != want_rip)
		bad_rip++;
	switch (pmi_mode) {
	case PMI_ACK:
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, st);
		apic_write(APIC_LVTPC, PMI_VECTOR);
		apic_eoi();
		break;
	case PMI_STORM_MAIN:
		/* the main line enables counting again; the next WRMSR overflows */
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, st);
		arm_minus_one();
		apic_write(APIC_LVTPC, PMI_VECTOR);
		apic_eoi();
		break;
	case PMI_STORM_SELF:
	case PMI_NMI_SELF:
		wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
		wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, st);
		if (pmi_mode == PMI_NMI_SELF) {
			apic_write(APIC_LVTPC, APIC_DM_NMI);
		} else {
			apic_write(APIC_LVTPC, PMI_VECTOR);
			apic_eoi();
		}
		if (pmis < (pmi_mode == PMI_NMI_SELF ? NMI_STORM : STORM)) {
			arm_minus_one();
			/* counted: overflows here, the PMI waits for IF / the IRET */
			wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
		}
		break;
	case PMI_NO_EOI_NO_UNMASK:
		break;
	case PMI_UNMASK_NO_EOI:
		apic_write(APIC_LVTPC, PMI_VECTOR);
		break;
	}
}

/* ---- helpers ---- */

/* Where the loader's identity map of RAM ends: 2 MiB pages from 0. */
static uint64_t find_ram_end(void)
{
	uint64_t *pml4 = (uint64_t *) (read_cr3() & PTE_ADDR), *pdpt, end = 0;

	if (!(pml4[0] & PTE_P))
		return 0;
	pdpt = (uint64_t *) (pml4[0] & PTE_ADDR);
	for (unsigned int i = 0; i < 512; i++) {
		uint64_t *pd;

		if (!(pdpt[i] & PTE_P) || (pdpt[i] & PTE_PS))
			return end;
		pd = (uint64_t *) (pdpt[i] & PTE_ADDR);
		for (unsigned int j = 0; j < 512; j++) {
			if (!(pd[j] & PTE_P) || !(pd[j] & PTE_PS) ||
			    (pd[j] & 0x000fffffffe00000ull) != end)
				return end;
			end += 2ull << 20;
		}
	}
	return end;
}

static uint64_t *pml4_table(void)
{
	return (uint64_t *) (read_cr3() & PTE_ADDR);
}

/* The PDE of va (its tables exist: map_page made them). */
static uint64_t *pde_of(uint64_t va)
{
	uint64_t *t = pml4_table();

	t = (uint64_t *) (t[(va >> 39) & 511] & PTE_ADDR);
	t = (uint64_t *) (t[(va >> 30) & 511] & PTE_ADDR);
	return &t[(va >> 21) & 511];
}

static void unmap_page(uint64_t va)
{
	uint64_t *pte = pte_of(va);

	if (pte)
		*pte = 0;
	invlpg(va);
}

static void fill(void *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 8)
		*(volatile uint64_t *) ((uint8_t *) p + i) = FILL;
}

/* qwords of [p, p + len) that are not the pattern any more */
static unsigned int dirty(const void *p, uint64_t len)
{
	unsigned int n = 0;

	for (uint64_t i = 0; i < len; i += 8)
		n += *(volatile const uint64_t *) ((const uint8_t *) p + i) != FILL;
	return n;
}

static uint64_t ds_get(unsigned int off)
{
	return *(volatile uint64_t *) (ds_page + off);
}

static void ds_set(unsigned int off, uint64_t v)
{
	*(volatile uint64_t *) (ds_page + off) = v;
}

static uint64_t pml4_snap[512];

static void snap_pml4(void)
{
	for (unsigned int i = 0; i < 512; i++)
		pml4_snap[i] = pml4_table()[i];
}

/* PML4 entries changed other than by the accessed/dirty flags a walk may set (SDM 4.8) */
static unsigned int pml4_changed(void)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < 512; i++)
		n += ((pml4_table()[i] ^ pml4_snap[i]) & ~(PTE_A | PTE_D)) != 0;
	return n;
}

static void quiesce(void)
{
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
	if (fmt >= 1 && fmt <= 6)
		wrmsr(MSR_IA32_PEBS_ENABLE, 0);
	if (arch_pebs) {
		wrmsr(MSR_PMC_GP0_CFG_C, 0);
		wrmsr(MSR_IA32_PEBS_INDEX, 0);
	}
	wrmsr(MSR_IA32_PERFEVTSEL0, 0);
	wrmsr(MSR_IA32_PMC0_LEGACY, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_OVF_CTRL, rdmsr(MSR_CORE_PERF_GLOBAL_STATUS));
	pmi_mode = PMI_ACK;
	want_rip = 0;
	apic_write(APIC_LVTPC, PMI_VECTOR);
	pmis = 0;
	pmi_status_or = 0;
	bad_rip = 0;
	status_hits = 0;
}

/*
 * n times: PMC0 = -4, then 11 more counted instructions: exactly one
 * overflow per iteration whether or not the assist reloads the counter
 * (from RESET_VALUE it cannot overflow again; unreloaded it counts up from 0).
 */
static void overflow_loop(unsigned int n)
{
	wrmsr(MSR_IA32_PMC0_LEGACY, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
	/* clang-format off */
	__asm__ volatile("1:\n\t"
			 "mov $0xc1, %%ecx\n\t"
			 "mov $0xfffffffc, %%eax\n\t"
			 "xor %%edx, %%edx\n\t"
			 "wrmsr\n\t"
			 "nop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\t"
			 "dec %%esi\n\t"
			 "jnz 1b\n\t"
			 : "+S"(n) : : "eax", "ecx", "edx", "memory");
	/* clang-format on */
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
}

/* ---- IA32_DS_AREA ---- */

static void ds_area_msr(void)
{
	uint64_t before;
	int vec;

	report_prefix("DS_AREA: ");
	if (!has_ds) {
		vec = wrmsr_safe(MSR_IA32_DS_AREA, (uint64_t) ds_page);
		report(vec == 13,
		       "no DS (CPUID.01H:EDX[21] = 0): WRMSR IA32_DS_AREA is #GP (vector %d)", vec);
		return;
	}
	wrmsr(MSR_IA32_DS_AREA, (uint64_t) ds_page);
	before = rdmsr(MSR_IA32_DS_AREA);
	vec = wrmsr_safe(MSR_IA32_DS_AREA, 0x8000000000000000ull);
	report(vec == 13 && rdmsr(MSR_IA32_DS_AREA) == before,
	       "8000000000000000 (non-canonical at any width): #GP (vector %d), value kept", vec);
	vec = wrmsr_safe(MSR_IA32_DS_AREA, 0x0100000000000000ull);
	report(vec == 13 && rdmsr(MSR_IA32_DS_AREA) == before,
	       "0100000000000000 (non-canonical at 48 and 57 bits): #GP (vector %d)", vec);
	vec = wrmsr_safe(MSR_IA32_DS_AREA, NONCANON);
	printf("DS_AREA %llx with %u linear-address bits (CPUID.80000008H:EAX[15:8]): vector %d\n",
	       NONCANON, lin_bits, vec);
	if (lin_bits == 48)
		report(vec == 13 && rdmsr(MSR_IA32_DS_AREA) == before,
		       "%llx non-canonical with 48 linear-address bits: #GP (vector %d)", NONCANON,
		       vec);
	else
		report(vec == 0, "%llx canonical with %u linear-address bits: accepted", NONCANON,
		       lin_bits);
	vec = wrmsr_safe(MSR_IA32_DS_AREA, UNMAPPED_HI);
	report(vec == 0 && rdmsr(MSR_IA32_DS_AREA) == UNMAPPED_HI,
	       "%llx (canonical, unmapped): accepted, reads back", UNMAPPED_HI);
	vec = wrmsr_safe(MSR_IA32_DS_AREA, 0xfffffffffffffff8ull);
	report(vec == 0, "fffffffffffffff8 (canonical, 8 bytes below 2^64): accepted");
	wrmsr(MSR_IA32_DS_AREA, before);
}

/* ---- legacy PEBS cases ---- */

enum want {
	W_ONE,	     /* calibration: one record written */
	W_DS_FAULT,  /* the DS area itself unreadable */
	W_BUF_FAULT, /* DS fine, the record's address faults */
	W_BOUNDS,    /* DS fine, the bounds check skips */
	W_LOOP_DS,   /* DS read through the PML4 loop: zeros, bounds skip, reload 0 */
	W_TWO,	     /* room for two records, threshold past the maximum */
};

static void legacy_arm(uint64_t ds)
{
	wrmsr(MSR_IA32_DS_AREA, ds);
	wrmsr(MSR_IA32_PERFEVTSEL0,
	      (fmt == 3 ? EV_INST_PDIST : EV_INST) | EVTSEL_OS | EVTSEL_USR | EVTSEL_EN);
	wrmsr(MSR_IA32_PEBS_ENABLE, 1);
}

static void fill_all(void)
{
	fill(pebs_pages, sizeof(pebs_pages));
	fill((void *) (ram_end - 4096), 4096);
	fill(ds_page, sizeof(ds_page));
}

/*
 * ds: IA32_DS_AREA. With ds == ds_page, hdr[4] are base, index, absolute
 * maximum and threshold and the GP0 reset slot is RESET_VALUE.
 */
static void legacy_case(const char *name, uint64_t ds, const uint64_t *hdr, enum want w,
			unsigned int n)
{
	bool own = ds == (uint64_t) ds_page;
	uint64_t ctr, since_reset;
	unsigned int pebs_dirty, ds_dirty, last_dirty;

	report_prefix(name);
	quiesce();
	fill_all();
	if (own) {
		ds_set(DS_PEBS_BASE, hdr[0]);
		ds_set(DS_PEBS_INDEX, hdr[1]);
		ds_set(DS_PEBS_ABS_MAX, hdr[2]);
		ds_set(DS_PEBS_THRESHOLD, hdr[3]);
		ds_set(DS_PEBS_GP_RESET(0), RESET_VALUE & gp_mask);
	}
	snap_pml4();
	legacy_arm(ds);
	overflow_loop(n);
	ctr = rdmsr(MSR_IA32_PMC0_LEGACY) & gp_mask;
	since_reset = (ctr - (RESET_VALUE & gp_mask)) & gp_mask;
	wrmsr(MSR_IA32_PEBS_ENABLE, 0);
	pebs_dirty = dirty(pebs_pages, sizeof(pebs_pages));
	last_dirty = dirty((void *) (ram_end - 4096), 4096);
	/* the DS page but for the header we wrote */
	ds_dirty = dirty(ds_page, DS_PEBS_BASE) + dirty(ds_page + 0x48, sizeof(ds_page) - 0x48);
	printf("%sDS_AREA %lx: %u overflows, counter %lx, index %lx, GLOBAL_STATUS seen %lx, "
	       "%u PMIs, changed qwords: PEBS pages %u, last RAM page %u, DS page %u\n",
	       name, ds, n, ctr, own ? ds_get(DS_PEBS_INDEX) : 0,
	       rdmsr(MSR_CORE_PERF_GLOBAL_STATUS), pmis, pebs_dirty, last_dirty, ds_dirty);

	report(pml4_changed() == 0, "the PML4 is as the guest left it");
	report(last_dirty == 0, "the last page of RAM is untouched");
	switch (w) {
	case W_ONE:
		rec_size = ds_get(DS_PEBS_INDEX) - hdr[1];
		if (fmt >= 4)
			report(rec_size == *(uint64_t *) pebs_pages[0] >> 48,
			       "one record of %lu bytes (Basic group size field %lu)", rec_size,
			       *(uint64_t *) pebs_pages[0] >> 48);
		else
			report(rec_size == 200, "one record of %lu bytes (want 200, format 3)",
			       rec_size);
		report(dirty(pebs_pages[0] + rec_size, 4096 - rec_size) == 0 &&
			       dirty(pebs_pages[1], 8192) == 0,
		       "nothing written past it");
		want_records += 1;
		break;
	case W_TWO:
		report(ds_get(DS_PEBS_INDEX) == hdr[1] + 2 * rec_size,
		       "index advanced by two records of %lu bytes, then stopped at the maximum",
		       rec_size);
		report(dirty(pebs_pages[0] + 2 * rec_size, 4096 - 2 * rec_size) == 0 &&
			       dirty(pebs_pages[1], 8192) == 0,
		       "nothing written past the absolute maximum");
		report(since_reset < 1000, "counter reloaded from the reset slot: %lx", ctr);
		want_records += 2;
		want_skipped += n - 2;
		break;
	case W_DS_FAULT:
		report(pebs_dirty == 0 && ds_dirty == 0 && dirty(ds_page + 0x20, 0x28) == 0,
		       "no PEBS page, no DS page changed");
		report(ctr < 1000, "no reset slot to reload from: the counter wrapped to %lx", ctr);
		want_skipped += n;
		want_faults += n;
		break;
	case W_LOOP_DS:
		report(pebs_dirty == 0 && ds_dirty == 0, "no PEBS page, no DS page changed");
		report(ctr < 1000, "reloaded from PML4 entry 8 (0): counter %lx", ctr);
		want_skipped += n;
		break;
	case W_BUF_FAULT:
	case W_BOUNDS:
		report(ds_get(DS_PEBS_INDEX) == hdr[1], "DS index did not move: %lx",
		       ds_get(DS_PEBS_INDEX));
		report(pebs_dirty == 0 && ds_dirty == 0, "no PEBS page, no other DS byte changed");
		report(since_reset < 1000,
		       "the assist ran: counter reloaded from the reset slot (%lx)", ctr);
		want_skipped += n;
		if (w == W_BUF_FAULT)
			want_faults += n;
		break;
	}
	report(pmis == 0 && !(pmi_status_or & GLOBAL_STATUS_BUFFER_OVF) &&
		       !(rdmsr(MSR_CORE_PERF_GLOBAL_STATUS) & GLOBAL_STATUS_BUFFER_OVF),
	       "no PMI, no OvfBuffer (the threshold was never reached)");
	wrmsr(MSR_IA32_DS_AREA, 0);
}

static void hdr4(uint64_t *h, uint64_t base, uint64_t index, uint64_t max, uint64_t thresh)
{
	h[0] = base;
	h[1] = index;
	h[2] = max;
	h[3] = thresh;
}

static void legacy_pebs(void)
{
	uint64_t p0 = (uint64_t) pebs_pages[0], ds = (uint64_t) ds_page, h[4], *pml4 = pml4_table();
	uint64_t beyond = ram_end + (16ull << 20);

	if (!has_ds || fmt < 3 || fmt > 6) {
		report_prefix("legacy PEBS: ");
		report_skip("no DS save area PEBS on this model (format %u)", fmt);
		return;
	}

	hdr4(h, p0, p0, p0 + 4096, p0 + 4096);
	legacy_case("calibrate: ", ds, h, W_ONE, 1);

	/* the DS area where no RAM is */
	legacy_case("DS unmapped (lower half): ", UNMAPPED_LO, 0, W_DS_FAULT, N_OVF);
	legacy_case("DS unmapped (upper half): ", UNMAPPED_HI, 0, W_DS_FAULT, N_OVF);
	map_page(WILD_A, APIC_PAGE, PTE_W | PTE_PCD);
	legacy_case("DS on the xAPIC page: ", WILD_A + 0x100, 0, W_DS_FAULT, N_OVF);
	map_page(WILD_A, ram_end, PTE_W);
	legacy_case("DS just past RAM: ", WILD_A, 0, W_DS_FAULT, N_OVF);
	map_page(WILD_A, 1ull << 32, PTE_W);
	legacy_case("DS at 4 GiB physical: ", WILD_A, 0, W_DS_FAULT, N_OVF);
	map_page(WILD_A, (1ull << 52) - 4096, PTE_W);
	legacy_case("DS at the top of physical space: ", WILD_A, 0, W_DS_FAULT, N_OVF);
	map_page(WILD_PDE, ds, PTE_W); /* makes the page table, then point the PDE past RAM */
	*pde_of(WILD_PDE) = beyond | PTE_P | PTE_W;
	invlpg(WILD_PDE);
	legacy_case("DS through a page table past RAM: ", WILD_PDE, 0, W_DS_FAULT, N_OVF);
	map_page(WILD_A, ds, PTE_W);
	unmap_page(WILD_B);
	legacy_case("DS straddling into an unmapped page: ", WILD_B - 0x30, 0, W_DS_FAULT, N_OVF);

	/* a self-referencing PML4 entry, read-only (CR0.WP: SDM 4.6.1) */
	if (pml4[LOOP_SLOT] || pml4[4] || pml4[5] || pml4[6] || pml4[7] || pml4[8]) {
		report_prefix("PML4 loop: ");
		report_skip("PML4 entries 4-8 or %llu in use", LOOP_SLOT);
	} else {
		pml4[LOOP_SLOT] = ((uint64_t) pml4 & PTE_ADDR) | PTE_P;
		write_cr3(read_cr3());
		legacy_case("DS through a PML4 loop: ", LOOP_VA, 0, W_LOOP_DS, N_OVF);
		hdr4(h, LOOP_VA, LOOP_VA, LOOP_VA + 4096, LOOP_VA + 4096);
		legacy_case("buffer through a read-only PML4 loop: ", ds, h, W_BUF_FAULT, N_OVF);
		pml4[LOOP_SLOT] = 0;
		write_cr3(read_cr3());
	}

	/* the DS area fine, the PEBS buffer where no RAM is */
	map_page(WILD_A, APIC_PAGE, PTE_W | PTE_PCD);
	hdr4(h, WILD_A, WILD_A, WILD_A + 4096, WILD_A + 4096);
	legacy_case("buffer on the xAPIC page: ", ds, h, W_BUF_FAULT, N_OVF);
	map_page(WILD_A, beyond, PTE_W);
	legacy_case("buffer past RAM: ", ds, h, W_BUF_FAULT, N_OVF);
	hdr4(h, WILD_PDE, WILD_PDE, WILD_PDE + 4096, WILD_PDE + 4096);
	legacy_case("buffer through a page table past RAM: ", ds, h, W_BUF_FAULT, N_OVF);
	map_page(WILD_A, ram_end - 4096, PTE_W);
	map_page(WILD_B, ram_end, PTE_W);
	hdr4(h, WILD_A, WILD_B - 16, WILD_B + 4096, WILD_B + 4096);
	legacy_case("record straddling the end of RAM: ", ds, h, W_BUF_FAULT, N_OVF);
	map_page(WILD_A, beyond, PTE_W);
	map_page(WILD_B, (uint64_t) pebs_pages[1], PTE_W);
	legacy_case("record from past RAM into RAM: ", ds, h, W_BUF_FAULT, N_OVF);
	hdr4(h, UNMAPPED_LO, UNMAPPED_LO, UNMAPPED_LO + 4096, UNMAPPED_LO + 4096);
	legacy_case("buffer unmapped: ", ds, h, W_BUF_FAULT, N_OVF);
	hdr4(h, NONCANON, NONCANON, NONCANON + 4096, NONCANON + 4096);
	legacy_case("buffer non-canonical: ", ds, h, W_BUF_FAULT, N_OVF);
	hdr4(h, 0xfffffffffffff000ull, 0xfffffffffffff000ull, ~0ull, ~0ull);
	legacy_case("buffer in the last page below 2^64: ", ds, h, W_BUF_FAULT, N_OVF);

	/* buffer fields that make no sense */
	hdr4(h, 0xfffffffffffffff8ull, 0xfffffffffffffff8ull, ~0ull, ~0ull);
	legacy_case("index 8 bytes below 2^64: ", ds, h, W_BOUNDS, N_OVF);
	hdr4(h, p0, p0 + 4096 + 8, p0 + 4096, p0 + 4096);
	legacy_case("index past the absolute maximum: ", ds, h, W_BOUNDS, N_OVF);
	hdr4(h, p0, p0, p0 - 8, p0 + 4096);
	legacy_case("absolute maximum below the base: ", ds, h, W_BOUNDS, N_OVF);
	hdr4(h, p0, p0 + 64, p0 + 64, p0 + 64);
	legacy_case("no room (index = maximum): ", ds, h, W_BOUNDS, N_OVF);
	hdr4(h, p0, p0, p0 + 2 * rec_size, ~0ull);
	legacy_case("threshold past the maximum: ", ds, h, W_TWO, N_OVF);

	unmap_page(WILD_A);
	unmap_page(WILD_B);
	quiesce();
}

/* ---- architectural PEBS ---- */

enum arch_want { A_ONE, A_FAULT, A_FULL };

static void arch_case(const char *name, uint64_t base, uint64_t wr, enum arch_want w)
{
	uint64_t index, ctr;
	unsigned int pebs_dirty, last_dirty;
	unsigned int n = w == A_ONE ? 1 : N_OVF;

	report_prefix(name);
	quiesce();
	fill_all();
	wrmsr(MSR_IA32_PEBS_BASE, base);
	wrmsr(MSR_IA32_PEBS_INDEX, wr | ARCH_INDEX_EN);
	wrmsr(MSR_IA32_PERFEVTSEL0, EV_INST | EVTSEL_OS | EVTSEL_USR | EVTSEL_EN);
	wrmsr(MSR_PMC_GP0_CFG_C, ARCH_PEBS_EN | ARCH_RELOAD);
	overflow_loop(n);
	wrmsr(MSR_PMC_GP0_CFG_C, 0);
	index = rdmsr(MSR_IA32_PEBS_INDEX);
	ctr = rdmsr(MSR_IA32_PMC0_LEGACY) & gp_mask;
	pebs_dirty = dirty(pebs_pages, sizeof(pebs_pages));
	last_dirty = dirty((void *) (ram_end - 4096), 4096);
	printf("%sPEBS_BASE %lx, write offset %lx: %u overflows, PEBS_INDEX %lx, counter %lx, "
	       "%u PMIs (status %lx), changed qwords: PEBS pages %u, last RAM page %u\n",
	       name, base, wr, n, index, ctr, pmis, pmi_status_or, pebs_dirty, last_dirty);
	report(last_dirty == 0, "the last page of RAM is untouched");
	report(((ctr - (ARCH_RELOAD | ~0xffffffffull)) & gp_mask) < 1000,
	       "counter reloaded from RELOAD_VALUE: %lx", ctr);
	switch (w) {
	case A_ONE:
		rec_size = index & ARCH_INDEX_WR;
		/* arch PEBS record header: Record Size in [15:0] (not [63:48] as in format 4) */
		report(rec_size && rec_size == (*(uint64_t *) pebs_pages[0] & 0xffff) &&
			       !(rec_size & 15),
		       "one record of %lu bytes (header size field %lu)", rec_size,
		       *(uint64_t *) pebs_pages[0] & 0xffff);
		report(dirty(pebs_pages[0] + rec_size, 4096 - rec_size) == 0 &&
			       dirty(pebs_pages[1], 8192) == 0,
		       "nothing written past it");
		want_records += 1;
		break;
	case A_FAULT:
		report((index & (ARCH_INDEX_WR | ARCH_INDEX_FULL)) == wr,
		       "write offset did not move, FULL clear: %lx", index);
		report(pebs_dirty == 0, "no PEBS page changed");
		report(pmis == 0, "no PMI");
		want_skipped += n;
		want_faults += n;
		break;
	case A_FULL:
		report((index & ARCH_INDEX_WR) == wr && (index & ARCH_INDEX_FULL),
		       "write offset did not move, FULL set: %lx", index);
		report(pebs_dirty == 0, "nothing written (%lx is RAM: the next pages)", base + wr);
		report(pmis >= 1 && (pmi_status_or & GLOBAL_STATUS_BUFFER_OVF),
		       "a PMI with OvfBuffer tells the guest (%u PMIs)", pmis);
		want_skipped += n;
		break;
	}
	wrmsr(MSR_IA32_PEBS_INDEX, 0);
	wrmsr(MSR_IA32_PEBS_BASE, 0);
}

static void arch_pebs_cases(void)
{
	uint64_t p0 = (uint64_t) pebs_pages[0];
	int vec;

	report_prefix("arch PEBS: ");
	if (!arch_pebs) {
		vec = wrmsr_safe(MSR_IA32_PEBS_BASE, p0);
		report(vec == 13, "no architectural PEBS: WRMSR IA32_PEBS_BASE is #GP (vector %d)",
		       vec);
		return;
	}
	wrmsr(MSR_IA32_PEBS_BASE, p0);
	vec = wrmsr_safe(MSR_IA32_PEBS_BASE, 1ull << 63);
	report(vec == 13 && rdmsr(MSR_IA32_PEBS_BASE) == p0,
	       "PEBS_BASE bit 63: #GP (vector %d), value kept", vec);
	vec = wrmsr_safe(MSR_IA32_PEBS_BASE, 1ull << 52);
	report(vec == 13, "PEBS_BASE bit 52 (past any MAXPHYADDR): #GP (vector %d)", vec);
	vec = wrmsr_safe(MSR_IA32_PEBS_BASE, p0 | 0x10);
	report(vec == 13, "PEBS_BASE bit 4 (reserved): #GP (vector %d)", vec);
	vec = wrmsr_safe(MSR_IA32_PEBS_INDEX, 8);
	report(vec == 13, "PEBS_INDEX bit 3 (write offset is 16-byte aligned): #GP (vector %d)",
	       vec);
	vec = wrmsr_safe(MSR_IA32_PEBS_INDEX, 1ull << 63);
	report(vec == 13, "PEBS_INDEX bit 63: #GP (vector %d)", vec);
	wrmsr(MSR_IA32_PEBS_BASE, 0);

	arch_case("arch calibrate: ", p0 | ARCH_BASE_SIZE(0), 0, A_ONE);
	arch_case("arch buffer past RAM: ", (ram_end + (16ull << 20)) | ARCH_BASE_SIZE(0), 0,
		  A_FAULT);
	arch_case("arch buffer on the xAPIC page: ", APIC_PAGE | ARCH_BASE_SIZE(0), 0x100, A_FAULT);
	arch_case("arch record straddling the end of RAM: ", (ram_end - 4096) | ARCH_BASE_SIZE(1),
		  4096 - 16, A_FAULT);
	arch_case("arch 128 MiB buffer in the last RAM page: ",
		  (ram_end - 4096) | ARCH_BASE_SIZE(15), 0x100000, A_FAULT);
	arch_case("arch buffer at the top of physical space: ",
		  ((1ull << 52) - 4096) | ARCH_BASE_SIZE(15), 0x7fffff0 & ~0xfffull, A_FAULT);
	arch_case("arch write offset past the buffer: ", p0 | ARCH_BASE_SIZE(0), 0x2000, A_FULL);
	quiesce();
}

/* ---- PMI storms ---- */

extern char storm_main_after[], storm_self_after[];

static void storm_main(void)
{
	unsigned int n = STORM;

	report_prefix("PMI storm, main re-enables: ");
	quiesce();
	pmi_mode = PMI_STORM_MAIN;
	want_rip = (uint64_t) storm_main_after;
	arm_minus_one();
	wrmsr(MSR_IA32_PERFEVTSEL0, EV_INST | EVTSEL_OS | EVTSEL_USR | EVTSEL_INT | EVTSEL_EN);
	/* each iteration: the WRMSR of GLOBAL_CTRL counts, overflows, PMI right after it */
	/* clang-format off */
	__asm__ volatile("1:\n\t"
			 "mov $0x38f, %%ecx\n\t"
			 "mov $1, %%eax\n\t"
			 "xor %%edx, %%edx\n\t"
			 "wrmsr\n"
			 ".globl storm_main_after\n"
			 "storm_main_after:\n\t"
			 "nop\n\t"
			 "dec %%esi\n\t"
			 "jnz 1b\n\t"
			 : "+S"(n) : : "eax", "ecx", "edx", "memory");
	/* clang-format on */
	printf("PMI storm (main): %u iterations, %u PMIs, %u with GLOBAL_STATUS.PMC0, %u at "
	       "another "
	       "RIP than %p\n",
	       STORM, pmis, status_hits, bad_rip, (void *) storm_main_after);
	report(pmis == STORM, "one PMI per iteration: %u (want %u)", pmis, STORM);
	report(status_hits == STORM, "GLOBAL_STATUS.PMC0 in each: %u", status_hits);
	report(bad_rip == 0, "each right after the overflowing WRMSR (%u elsewhere)", bad_rip);
	quiesce();
}

static void storm_self(bool nmi)
{
	unsigned int want = nmi ? NMI_STORM : STORM;

	report_prefix(nmi ? "NMI storm, handler re-arms: " : "PMI storm, handler re-arms: ");
	quiesce();
	pmi_mode = nmi ? PMI_NMI_SELF : PMI_STORM_SELF;
	want_rip = (uint64_t) storm_self_after;
	apic_write(APIC_LVTPC, nmi ? APIC_DM_NMI : PMI_VECTOR);
	arm_minus_one();
	wrmsr(MSR_IA32_PERFEVTSEL0, EV_INST | EVTSEL_OS | EVTSEL_USR | EVTSEL_INT | EVTSEL_EN);
	/* the handler re-arms before its IRET: the main line waits here until it gives up */
	/* clang-format off */
	__asm__ volatile("mov $0x38f, %%ecx\n\t"
			 "mov $1, %%eax\n\t"
			 "xor %%edx, %%edx\n\t"
			 "wrmsr\n"
			 ".globl storm_self_after\n"
			 "storm_self_after:\n\t"
			 "nop\n\t"
			 : : : "eax", "ecx", "edx", "memory");
	/* clang-format on */
	want_rip = 0;
	printf("%s storm (handler): %u PMIs, %u with GLOBAL_STATUS.PMC0, %u not at %p\n",
	       nmi ? "NMI" : "PMI", pmis, status_hits, bad_rip, (void *) storm_self_after);
	report(pmis == want, "the handler's %u re-arms, then the main line goes on: %u PMIs",
	       want - 1, pmis);
	report(status_hits == want, "GLOBAL_STATUS.PMC0 in each: %u", status_hits);
	report(bad_rip == 0,
	       "each delivered right after the IRET, before the next instruction "
	       "(%u elsewhere)",
	       bad_rip);
	quiesce();
}

/* n overflows of PMC0 with INT, counting on throughout */
static void overflow_int_loop(unsigned int n)
{
	wrmsr(MSR_IA32_PERFEVTSEL0, EV_INST | EVTSEL_OS | EVTSEL_USR | EVTSEL_INT | EVTSEL_EN);
	wrmsr(MSR_IA32_PMC0_LEGACY, 0);
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 1);
	/* clang-format off */
	__asm__ volatile("1:\n\t"
			 "mov $0xc1, %%ecx\n\t"
			 "mov $0xfffffffe, %%eax\n\t"
			 "xor %%edx, %%edx\n\t"
			 "wrmsr\n\t"
			 "nop\n\tnop\n\tnop\n\tnop\n\t"
			 "dec %%esi\n\t"
			 "jnz 1b\n\t"
			 : "+S"(n) : : "eax", "ecx", "edx", "memory");
	/* clang-format on */
	wrmsr(MSR_CORE_PERF_GLOBAL_CTRL, 0);
}

static void no_eoi_no_unmask(void)
{
	uint32_t lvt;
	uint64_t st;

	report_prefix("handler without EOI or unmask: ");
	quiesce();
	pmi_mode = PMI_NO_EOI_NO_UNMASK;
	overflow_int_loop(LOOPS);
	lvt = apic_read(APIC_LVTPC);
	st = rdmsr(MSR_CORE_PERF_GLOBAL_STATUS);
	printf("no EOI, no unmask: %u overflows, %u PMIs, LVT %x, GLOBAL_STATUS %lx\n", LOOPS, pmis,
	       lvt, st);
	report(pmis == 1, "one PMI for %u overflows: %u", LOOPS, pmis);
	report(lvt & APIC_LVT_MASKED, "the delivery masked the LVT: %x", lvt);
	report(st & 1, "GLOBAL_STATUS.PMC0 stays set (never cleared)");
	/* the main line cleans up: no PMI was held back */
	apic_eoi();
	apic_write(APIC_LVTPC, PMI_VECTOR);
	__asm__ volatile("nop\n\tnop\n\tnop" ::: "memory");
	report(pmis == 1, "EOI and unmask later: no PMI was pending (%u)", pmis);
	quiesce();
}

static void unmask_no_eoi(void)
{
	uint32_t lvt;
	unsigned int during;

	report_prefix("handler unmasks, never EOIs: ");
	quiesce();
	pmi_mode = PMI_UNMASK_NO_EOI;
	overflow_int_loop(LOOPS);
	lvt = apic_read(APIC_LVTPC);
	during = pmis;
	printf("unmask, no EOI: %u overflows, %u PMIs, LVT after %x\n", LOOPS, during, lvt);
	report(during == 1, "one PMI while its vector is in service: %u", during);
	report(lvt & APIC_LVT_MASKED, "the second overflow went to IRR and masked the LVT: %x",
	       lvt);
	apic_eoi(); /* the held PMI comes now; its handler does not EOI either */
	__asm__ volatile("nop\n\tnop\n\tnop" ::: "memory");
	report(pmis == 2, "the EOI releases exactly the one held PMI: %u", pmis);
	apic_eoi();
	__asm__ volatile("nop\n\tnop\n\tnop" ::: "memory");
	report(pmis == 2, "a second EOI: nothing more (%u)", pmis);
	quiesce();
}

int main(uint64_t arg)
{
	struct cpuid_regs r;
	uint64_t cap = 0, cr0;

	idt_init();
	set_handler(PMI_VECTOR, on_pmi);
	set_handler(2, on_pmi);
	x2apic_enable();
	report_prefix("outrageous: ");

	r = cpuid_regs(0xa, 0);
	version = r.a & 0xff;
	nr_gp = (r.a >> 8) & 0xff;
	gp_mask = (1ull << ((r.a >> 16) & 0xff)) - 1;
	r = cpuid_regs(1, 0);
	has_ds = r.d & (1u << 21);
	if (r.c & (1u << 15))
		cap = rdmsr(MSR_IA32_PERF_CAPABILITIES);
	fmt = PERF_CAP_PEBS_FORMAT(cap);
	lin_bits = 48;
	if (cpuid_regs(0x80000000, 0).a >= 0x80000008)
		lin_bits = (cpuid_regs(0x80000008, 0).a >> 8) & 0xff;
	if (cpuid_regs(0, 0).a >= 0x23 && version >= 6)
		arch_pebs = (cpuid_regs(0x23, 0).a & 0x30) == 0x30;
	ram_end = find_ram_end();
	__asm__ volatile("mov %%cr0, %0" : "=r"(cr0));
	printf("perfmon v%u, %u GP counters (mask %lx), DS %d, PEBS format %u, arch PEBS %d, "
	       "%u linear-address bits, RAM ends at %lx, CR0 %lx\n",
	       version, nr_gp, gp_mask, has_ds, fmt, arch_pebs, lin_bits, ram_end, cr0);
	report(version >= 2 && nr_gp >= 1, "architectural perfmon with a GP counter");
	report(ram_end >= (16ull << 20) && (uint64_t) pebs_pages[2] + 4096 <= ram_end,
	       "RAM (identity-mapped) ends at %lx, past our pages", ram_end);
	if (version < 2 || !nr_gp || ram_end < (16ull << 20))
		return report_summary();
	if (!(cr0 & (1ull << 16))) {
		cr0 |= 1ull << 16; /* the PML4-loop case relies on write protection */
		__asm__ volatile("mov %0, %%cr0" ::"r"(cr0) : "memory");
	}
	sti();

	ds_area_msr();
	legacy_pebs();
	arch_pebs_cases();
	storm_main();
	storm_self(false);
	storm_self(true);
	no_eoi_no_unmask();
	unmask_no_eoi();

	quiesce();
	apic_write(APIC_LVTPC, PMI_VECTOR | APIC_LVT_MASKED);
	report_prefix("");
	printf("outrageous: expect pebs records %lu, skipped %lu, walk faults %lu; PMIs %u\n",
	       want_records, want_skipped, want_faults, pmis_total);
	return report_summary();
}
