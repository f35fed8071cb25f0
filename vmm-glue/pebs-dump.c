/* SPDX-License-Identifier: MIT */
/*
 * --pebs-dump FILE (pebs-dump.h): the header from the vCPU's PEBS MSRs,
 * the records from guest RAM, through libvpmu's public page walk.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pebs-dump.h"
#include "vpmu/msr.h"
#include "vpmu/pebs.h"

#define PEBS_DUMP_MAX (256ull << 20) /* a larger "buffer" is a guest's mistake, not a dump */

/* What to write: the header, and the record bytes (copy: owned). */
struct dump {
	struct vpmu_pebs_dump_header h;
	const void *records;
	void *copy;
};

static uint64_t msr_or_zero(struct vpmu_vcpu *vcpu, uint32_t msr)
{
	uint64_t v = 0;

	return vpmu_msr_read(vcpu, msr, &v) < 0 ? 0 : v;
}

static void dump_header(struct vpmu_vcpu *vcpu, struct vpmu_pebs_dump_header *h)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, VPMU_PEBS_DUMP_MAGIC, sizeof(h->magic));
	h->version = VPMU_PEBS_DUMP_VERSION;
	h->header_size = sizeof(*h);
	snprintf(h->model, sizeof(h->model), "%s", vpmu_vcpu_model(vcpu));
	h->perf_capabilities = msr_or_zero(vcpu, MSR_IA32_PERF_CAPABILITIES);
	h->pebs_enable = msr_or_zero(vcpu, MSR_IA32_PEBS_ENABLE);
	h->data_cfg = msr_or_zero(vcpu, MSR_PEBS_DATA_CFG);
	h->ds_area = msr_or_zero(vcpu, MSR_IA32_DS_AREA);
}

/* Architectural PEBS: a guest-physical buffer, byte offsets in IA32_PEBS_INDEX. */
static int dump_arch(struct vpmu_vcpu *vcpu, const struct vpmu_guest_memory *mem, struct dump *d,
		     const char *path, char *err, size_t errlen)
{
	uint64_t base = msr_or_zero(vcpu, MSR_IA32_PEBS_BASE);
	uint64_t index = msr_or_zero(vcpu, MSR_IA32_PEBS_INDEX);

	d->h.pebs_base = base & ~0xfffull;
	d->h.pebs_index = index & ARCH_PEBS_INDEX_WR;
	d->h.pebs_threshold = VPMU_FIELD_GET(ARCH_PEBS_INDEX_THRESH, index) << 4;
	d->h.records_len = d->h.pebs_index;
	if (!d->h.records_len)
		return 0;
	d->records = vpmu_guest_memory_ptr(mem, d->h.pebs_base, d->h.records_len);
	if (!d->records) {
		snprintf(err, errlen,
			 "--pebs-dump %s: the PEBS buffer at %#llx (+%llu bytes) is outside guest "
			 "RAM",
			 path, (unsigned long long) d->h.pebs_base,
			 (unsigned long long) d->h.records_len);
		return -EFAULT;
	}
	return 0;
}

/* Legacy PEBS: base, index and threshold from the DS area, through the guest's page tables. */
static int dump_legacy(const struct vpmu_guest_memory *mem, const struct vpmu_paging *p,
		       struct dump *d, const char *path, char *err, size_t errlen)
{
	uint64_t ds = d->h.ds_area, v[3];
	int r;

	if (vpmu_walk_read(mem, p, ds + DS_PEBS_BASE, &v[0], 8, 0) < 0 ||
	    vpmu_walk_read(mem, p, ds + DS_PEBS_INDEX, &v[1], 8, 0) < 0 ||
	    vpmu_walk_read(mem, p, ds + DS_PEBS_THRESHOLD, &v[2], 8, 0) < 0) {
		snprintf(err, errlen,
			 "--pebs-dump %s: the DS area at %#llx is not mapped by the guest's page "
			 "tables at exit",
			 path, (unsigned long long) ds);
		return -EFAULT;
	}
	d->h.pebs_base = v[0];
	d->h.pebs_index = v[1];
	d->h.pebs_threshold = v[2];
	if (d->h.pebs_index <= d->h.pebs_base)
		return 0;
	d->h.records_len = d->h.pebs_index - d->h.pebs_base;
	if (d->h.records_len > PEBS_DUMP_MAX) {
		snprintf(err, errlen,
			 "--pebs-dump %s: PEBS index %#llx is %llu bytes past base %#llx: not a "
			 "buffer to dump",
			 path, (unsigned long long) d->h.pebs_index,
			 (unsigned long long) d->h.records_len,
			 (unsigned long long) d->h.pebs_base);
		return -EFBIG;
	}
	d->copy = malloc(d->h.records_len);
	if (!d->copy) {
		snprintf(err, errlen, "--pebs-dump %s: out of memory", path);
		return -ENOMEM;
	}
	r = vpmu_walk_read(mem, p, d->h.pebs_base, d->copy, d->h.records_len, 0);
	if (r < 0) {
		snprintf(err, errlen,
			 "--pebs-dump %s: the PEBS buffer %#llx..%#llx is not mapped by the "
			 "guest's page tables at exit",
			 path, (unsigned long long) d->h.pebs_base,
			 (unsigned long long) d->h.pebs_index);
		return r;
	}
	d->records = d->copy;
	return 0;
}

static int dump_file(const struct dump *d, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "wb");
	int r;

	if (!f) {
		r = -errno;
		snprintf(err, errlen, "--pebs-dump %s: cannot create: %s", path, strerror(errno));
		return r;
	}
	r = fwrite(&d->h, sizeof(d->h), 1, f) == 1 &&
			    (!d->h.records_len || fwrite(d->records, d->h.records_len, 1, f) == 1)
		    ? 0
		    : -EIO;
	if (fclose(f) != 0)
		r = -EIO;
	if (r < 0) {
		snprintf(err, errlen, "--pebs-dump %s: write failed (disk full?)", path);
		unlink(path);
	}
	return r;
}

int pebs_dump_write(struct vpmu_vcpu *vcpu, const struct vpmu_paging *paging, void *ram,
		    uint64_t ram_size, const char *path, char *err, size_t errlen)
{
	struct vpmu_mem_region region = { .gpa = 0, .size = ram_size, .hva = ram };
	struct vpmu_guest_memory *mem = NULL;
	struct dump d = { 0 };
	int r;

	if (!vcpu) {
		snprintf(err, errlen, "--pebs-dump %s: the guest has no vPMU", path);
		return -ENODEV;
	}
	r = vpmu_guest_memory_new(&region, 1, &mem);
	if (r < 0) {
		snprintf(err, errlen, "--pebs-dump %s: guest RAM: %s", path, strerror(-r));
		return r;
	}
	dump_header(vcpu, &d.h);
	if (VPMU_FIELD_GET(PERF_CAP_PEBS_FORMAT, d.h.perf_capabilities) == PEBS_FMT_ARCH)
		r = dump_arch(vcpu, mem, &d, path, err, errlen);
	else if (d.h.ds_area)
		r = dump_legacy(mem, paging, &d, path, err, errlen);
	if (r == 0)
		r = dump_file(&d, path, err, errlen);
	free(d.copy);
	vpmu_guest_memory_free(mem);
	return r;
}
