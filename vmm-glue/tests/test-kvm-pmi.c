/* SPDX-License-Identifier: MIT */
/*
 * PMI delivery on KVM (kvm-pmi.c) against a recorded fake of the ioctls
 * it makes, without /dev/kvm. The fake keeps a vCPU's local APIC the way
 * KVM does (a register page, the APIC base MSR, the x2APIC MSRs in
 * x2APIC mode only) and, between any two ioctls, receives an IPI from
 * another vCPU into its IRR, as a concurrent sender would. Checked: the
 * LVT entry is the only register written, and in x2APIC mode it is
 * masked as hardware masks it; no IPI is lost; the PMI goes to this
 * vCPU's own APIC ID; KVM_SIGNAL_MSI returning 0 counts as merged.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/kvm.h>
#include <string.h>

#include "kvm-pmi.h"

#define APIC_ID	   0x20
#define APIC_IRR   0x200
#define APIC_LVTPC 0x340
#define APICBASE   0xfee00000ull
#define EN	   (1ull << 11)
#define EXTD	   (1ull << 10)
#define MAX_CALLS  16

struct call {
	unsigned long req;
	bool vm;
	uint32_t nmsrs;
	struct kvm_msr_entry e[4];
	struct kvm_msi msi;
};

struct fake_apic {
	unsigned int vcpu;  /* its index: the APIC ID KVM gives it */
	uint64_t apic_base; /* IA32_APIC_BASE */
	uint8_t regs[KVM_APIC_REG_SIZE];
	int signal_msi_ret; /* what KVM_SIGNAL_MSI returns (1: delivered) */
	int fail_req_errno; /* the next ioctl of fail_req fails with this errno */
	unsigned long fail_req;
	unsigned int ipis; /* IPIs another vCPU sent into this APIC's IRR */
	struct call calls[MAX_CALLS];
	unsigned int nr_calls;
	/* MSIs that went to another APIC ID: where and which vector */
	unsigned int elsewhere, elsewhere_dest;
};

static uint32_t reg(const struct fake_apic *a, unsigned int off)
{
	uint32_t v;

	memcpy(&v, a->regs + off, 4);
	return v;
}

static void set_reg(struct fake_apic *a, unsigned int off, uint32_t v)
{
	memcpy(a->regs + off, &v, 4);
}

static void set_irr(struct fake_apic *a, unsigned int vector)
{
	set_reg(a, APIC_IRR + vector / 32 * 16,
		reg(a, APIC_IRR + vector / 32 * 16) | 1u << (vector % 32));
}

static bool irr(const struct fake_apic *a, unsigned int vector)
{
	return reg(a, APIC_IRR + vector / 32 * 16) >> (vector % 32) & 1;
}

/* Another vCPU's IPI lands, with vectors 0x30.. one after the other. */
static void concurrent_ipi(struct fake_apic *a)
{
	set_irr(a, 0x30 + a->ipis++);
}

static bool x2apic(const struct fake_apic *a)
{
	return (a->apic_base & (EN | EXTD)) == (EN | EXTD);
}

/* KVM_GET_MSRS / KVM_SET_MSRS: entries processed up to the first KVM refuses. */
static int msrs(struct fake_apic *a, struct kvm_msrs *m, bool write)
{
	for (uint32_t i = 0; i < m->nmsrs; i++) {
		struct kvm_msr_entry *e = &m->entries[i];

		if (e->index == 0x1b) {
			if (write)
				return (int) i; /* not needed here */
			e->data = a->apic_base;
		} else if (e->index >= 0x800 && e->index <= 0x8ff && x2apic(a)) {
			unsigned int off = (e->index - 0x800) * 16;

			if (write) {
				if (off != APIC_LVTPC)
					return (int) i; /* only the LVT entry may change */
				set_reg(a, off, (uint32_t) e->data & 0x117ff);
			} else {
				e->data = off == APIC_ID ? a->vcpu : reg(a, off);
			}
		} else {
			return (int) i;
		}
	}
	return (int) m->nmsrs;
}

static int record(struct fake_apic *a, unsigned long req, void *arg, bool vm)
{
	struct call *c = &a->calls[a->nr_calls < MAX_CALLS ? a->nr_calls++ : MAX_CALLS - 1];

	memset(c, 0, sizeof(*c));
	c->req = req;
	c->vm = vm;
	if (req == KVM_GET_MSRS || req == KVM_SET_MSRS) {
		const struct kvm_msrs *m = arg;

		c->nmsrs = m->nmsrs;
		memcpy(c->e, m->entries, (m->nmsrs < 4 ? m->nmsrs : 4) * sizeof(c->e[0]));
	}
	if (req == KVM_SIGNAL_MSI)
		c->msi = *(const struct kvm_msi *) arg;
	concurrent_ipi(a); /* before KVM looks: the worst moment */
	if (req == a->fail_req && a->fail_req_errno) {
		errno = a->fail_req_errno;
		return -1;
	}
	return 0;
}

static int fake_vcpu_ioctl(void *ctx, unsigned long req, void *arg)
{
	struct fake_apic *a = ctx;
	int r = record(a, req, arg, false);

	if (r < 0)
		return r;
	switch (req) {
	case KVM_GET_MSRS:
		return msrs(a, arg, false);
	case KVM_SET_MSRS:
		return msrs(a, arg, true);
	case KVM_GET_LAPIC:
		memcpy(((struct kvm_lapic_state *) arg)->regs, a->regs, sizeof(a->regs));
		return 0;
	case KVM_SET_LAPIC:
		/* as KVM: IRR, ISR, everything from the caller's copy */
		memcpy(a->regs, ((struct kvm_lapic_state *) arg)->regs, sizeof(a->regs));
		return 0;
	case KVM_NMI:
		return 0;
	}
	errno = ENOTTY;
	return -1;
}

static int fake_vm_ioctl(void *ctx, unsigned long req, void *arg)
{
	struct fake_apic *a = ctx;
	const struct kvm_msi *msi = arg;
	unsigned int dest;
	int r = record(a, req, arg, true);

	if (r < 0)
		return r;
	if (req != KVM_SIGNAL_MSI) {
		errno = ENOTTY;
		return -1;
	}
	dest = (msi->address_lo >> 12) & 0xff;
	if ((msi->address_lo & 0xfff00000u) != 0xfee00000u) {
		errno = EINVAL;
		return -1;
	}
	if (dest != a->vcpu) {
		a->elsewhere++;
		a->elsewhere_dest = dest;
		return 1;
	}
	if (a->signal_msi_ret > 0)
		set_irr(a, msi->data & 0xff);
	return a->signal_msi_ret;
}

static const struct kvm_pmi_ops fake_ops = { fake_vcpu_ioctl, fake_vm_ioctl };

/* vCPU `vcpu`'s APIC: enabled, in x2APIC mode or not, its LVT entry `lvt`. */
static void fake_init(struct fake_apic *a, unsigned int vcpu, bool x2, uint32_t lvt)
{
	memset(a, 0, sizeof(*a));
	a->vcpu = vcpu;
	a->apic_base = APICBASE | EN | (x2 ? EXTD : 0) | (vcpu ? 0 : 1ull << 8);
	set_reg(a, APIC_ID, vcpu << 24);
	set_reg(a, APIC_LVTPC, lvt);
	a->signal_msi_ret = 1;
}

static unsigned int count(const struct fake_apic *a, unsigned long req)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < a->nr_calls; i++)
		n += a->calls[i].req == req;
	return n;
}

/* Every IPI sent while the PMI went in is still pending: nothing lost. */
static void expect_no_ipi_lost(const struct fake_apic *a)
{
	cr_expect_gt(a->ipis, 0);
	for (unsigned int i = 0; i < a->ipis; i++)
		cr_expect(irr(a, 0x30 + i), "IPI %u (vector %#x) lost", i, 0x30 + i);
}

static struct vpmu_vcpu *new_pmu(void)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v = NULL;

	vpmu_config_init(&cfg);
	cr_assert_eq(vpmu_vcpu_new(&cfg, &v), 0);
	return v;
}

static struct vpmu_stats stats(struct vpmu_vcpu *v)
{
	struct vpmu_stats st;

	cr_assert_eq(vpmu_stats_read(v, &st), 0);
	return st;
}

Test(kvm_pmi, x2apic_masks_the_entry_alone)
{
	struct fake_apic a;
	struct vpmu_vcpu *pmu = new_pmu();

	fake_init(&a, 1, true, 0xf1);
	cr_assert_eq(kvm_pmi_deliver(&fake_ops, &a, pmu), KVM_PMI_DELIVERED);
	expect_no_ipi_lost(&a);
	cr_expect_eq(count(&a, KVM_SET_LAPIC), 0, "the APIC page rewritten");
	cr_expect_eq(reg(&a, APIC_LVTPC), 0x100f1);
	/* the sequence: APIC base; LVT entry and ID; the entry masked; the MSI */
	cr_assert_eq(a.nr_calls, 4);
	cr_expect_eq(a.calls[0].req, KVM_GET_MSRS);
	cr_expect(a.calls[0].nmsrs == 1 && a.calls[0].e[0].index == 0x1b);
	cr_expect_eq(a.calls[1].req, KVM_GET_MSRS);
	cr_expect(a.calls[1].nmsrs == 2 && a.calls[1].e[0].index == 0x834 &&
		  a.calls[1].e[1].index == 0x802);
	cr_expect_eq(a.calls[2].req, KVM_SET_MSRS);
	cr_expect_eq(a.calls[2].nmsrs, 1, "one register written");
	cr_expect_eq(a.calls[2].e[0].index, 0x834);
	cr_expect_eq(a.calls[2].e[0].data, 0x100f1, "the mask bit (16) set, as on delivery");
	cr_expect_eq(a.calls[3].req, KVM_SIGNAL_MSI);
	cr_expect(a.calls[3].vm);
	cr_expect_eq(a.calls[3].msi.address_lo, 0xfee01000u, "physical destination APIC ID 1");
	cr_expect_eq(a.calls[3].msi.data, 0xf1, "fixed, vector F1H, edge");
	cr_expect(irr(&a, 0xf1), "the PMI is pending");
	cr_expect_eq(stats(pmu).pmis_delivered, 1);
	cr_expect_eq(stats(pmu).pmis_merged, 0);
	vpmu_vcpu_free(pmu);
}

Test(kvm_pmi, x2apic_nmi)
{
	struct fake_apic a;

	fake_init(&a, 0, true, 4u << 8);
	cr_assert_eq(kvm_pmi_deliver(&fake_ops, &a, NULL), KVM_PMI_DELIVERED_NMI);
	cr_assert_eq(a.nr_calls, 4);
	cr_expect_eq(a.calls[2].req, KVM_SET_MSRS);
	cr_expect_eq(a.calls[2].e[0].data, 0x10400);
	cr_expect_eq(a.calls[3].req, KVM_NMI);
	cr_expect(!a.calls[3].vm, "KVM_NMI on the vCPU's own fd");
	cr_expect_eq(count(&a, KVM_SIGNAL_MSI), 0);
	expect_no_ipi_lost(&a);
}

/*
 * xAPIC mode: KVM cannot write one register of it, so nothing is written;
 * the entry stays as the guest left it (the documented difference).
 */
Test(kvm_pmi, xapic_writes_nothing)
{
	struct fake_apic a;

	fake_init(&a, 0, false, 0xf1);
	cr_assert_eq(kvm_pmi_deliver(&fake_ops, &a, NULL), KVM_PMI_DELIVERED);
	cr_assert_eq(a.nr_calls, 3);
	cr_expect_eq(a.calls[0].req, KVM_GET_MSRS);
	cr_expect_eq(a.calls[1].req, KVM_GET_LAPIC);
	cr_expect_eq(a.calls[2].req, KVM_SIGNAL_MSI);
	cr_expect_eq(count(&a, KVM_SET_LAPIC) + count(&a, KVM_SET_MSRS), 0);
	cr_expect_eq(reg(&a, APIC_LVTPC), 0xf1);
	cr_expect(irr(&a, 0xf1));
	expect_no_ipi_lost(&a);
}

/* Hardware drops a PMI the entry does not deliver: nothing is written, nothing sent. */
Test(kvm_pmi, dropped)
{
	static const uint32_t lvts[] = { 0x100f1, 0x10400, 0x2f1 /* SMI */, 0x7f1 /* ExtINT */,
					 0x0f /* vector 15 */ };
	struct fake_apic a;
	struct vpmu_vcpu *pmu = new_pmu();

	for (size_t i = 0; i < sizeof(lvts) / sizeof(lvts[0]); i++) {
		for (int x2 = 0; x2 < 2; x2++) {
			fake_init(&a, 0, x2, lvts[i]);
			cr_expect_eq(kvm_pmi_deliver(&fake_ops, &a, pmu), KVM_PMI_DROPPED,
				     "LVT %#x", lvts[i]);
			cr_expect_eq(count(&a, KVM_SET_MSRS) + count(&a, KVM_SET_LAPIC) +
					     count(&a, KVM_SIGNAL_MSI) + count(&a, KVM_NMI),
				     0, "LVT %#x", lvts[i]);
			cr_expect_eq(reg(&a, APIC_LVTPC), lvts[i]);
		}
	}
	/* a disabled local APIC (IA32_APIC_BASE.EN = 0) */
	fake_init(&a, 0, false, 0xf1);
	a.apic_base &= ~EN;
	cr_expect_eq(kvm_pmi_deliver(&fake_ops, &a, pmu), KVM_PMI_DROPPED);
	cr_expect_eq(a.nr_calls, 1);
	cr_expect_eq(stats(pmu).pmis_delivered + stats(pmu).pmis_merged, 0);
	vpmu_vcpu_free(pmu);
}

/* KVM_SIGNAL_MSI returning 0: not delivered as an interrupt of its own. */
Test(kvm_pmi, signal_msi_zero_is_merged)
{
	struct fake_apic a;
	struct vpmu_vcpu *pmu = new_pmu();

	for (int x2 = 0; x2 < 2; x2++) {
		fake_init(&a, 0, x2, 0xf1);
		a.signal_msi_ret = 0;
		cr_expect_eq(kvm_pmi_deliver(&fake_ops, &a, pmu), KVM_PMI_MERGED);
	}
	cr_expect_eq(stats(pmu).pmis_merged, 2);
	cr_expect_eq(stats(pmu).pmis_delivered, 0);
	vpmu_vcpu_free(pmu);
}

/* A failing ioctl: -errno, nothing counted, nothing sent after it. */
Test(kvm_pmi, ioctl_failures)
{
	static const unsigned long reqs[] = { KVM_GET_MSRS, KVM_GET_LAPIC, KVM_SET_MSRS,
					      KVM_SIGNAL_MSI };
	struct fake_apic a;
	struct vpmu_vcpu *pmu = new_pmu();

	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		fake_init(&a, 0, reqs[i] != KVM_GET_LAPIC, 0xf1);
		a.fail_req = reqs[i];
		a.fail_req_errno = EFAULT;
		cr_expect_eq(kvm_pmi_deliver(&fake_ops, &a, pmu), -EFAULT, "request %#lx", reqs[i]);
		cr_expect_eq(a.calls[a.nr_calls - 1].req, reqs[i], "stops at %#lx", reqs[i]);
	}
	cr_expect_eq(stats(pmu).pmis_delivered + stats(pmu).pmis_merged, 0);
	vpmu_vcpu_free(pmu);
}

/*
 * SMP: each vCPU's PMI goes to its own APIC ID, x2APIC (KVM's: the vCPU
 * index) and xAPIC (the guest may have changed it).
 */
Test(kvm_pmi, routed_to_own_apic_id)
{
	struct fake_apic a[4];

	for (unsigned int i = 0; i < 4; i++) {
		fake_init(&a[i], i, i % 2, 0xf1);
		cr_assert_eq(kvm_pmi_deliver(&fake_ops, &a[i], NULL), KVM_PMI_DELIVERED);
		cr_expect_eq(a[i].elsewhere, 0, "vCPU %u's PMI went to APIC ID %u", i,
			     a[i].elsewhere_dest);
		cr_expect(irr(&a[i], 0xf1), "vCPU %u has its PMI", i);
	}
	/* an xAPIC ID the guest wrote: vCPU 2 calls itself 7 */
	fake_init(&a[2], 7, false, 0xf1);
	cr_assert_eq(kvm_pmi_deliver(&fake_ops, &a[2], NULL), KVM_PMI_DELIVERED);
	cr_expect_eq(a[2].calls[a[2].nr_calls - 1].msi.address_lo, 0xfee07000u);
	cr_expect_eq(a[2].elsewhere, 0);
}
