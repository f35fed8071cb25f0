/* SPDX-License-Identifier: MIT */
/*
 * What PMU this host has: perf_event_open probes (a hardware event, a raw
 * one, a software clock), the CPU from CPUID, and the core PMU libpfm4
 * detected. Cloud VMs often have no PMU at all: hardware events fail with
 * ENOENT there while software events work.
 */
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostmap.h"

#include <perfmon/pfmlib_perf_event.h>

static pthread_once_t pfm_once = PTHREAD_ONCE_INIT;
static int pfm_ret;

static void pfm_init_once(void)
{
	pfm_ret = pfm_initialize();
}

int host_pfm_init(void)
{
	pthread_once(&pfm_once, pfm_init_once);
	return pfm_ret;
}

/* Open and close one counting event on this thread; 0 or -errno. */
static int probe(uint32_t type, uint64_t config)
{
	struct perf_event_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = type;
	attr.config = config;
	attr.disabled = 1;
	/* user-only: allowed at the default perf_event_paranoid = 2 */
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	close((int) fd);
	return 0;
}

struct host_cpu {
	char vendor[13];
	unsigned int family, model, stepping;
	bool hypervisor;
};

/* SDM Vol. 2A CPUID leaf 0 (vendor) and leaf 1 EAX (display family/model), ECX[31]. */
static void host_cpu(const struct host_probe *in, struct host_cpu *c)
{
	uint32_t a;

	memset(c, 0, sizeof(*c));
	if (!in->cpuid_ok)
		return;
	memcpy(c->vendor, &in->leaf0[1], 4);
	memcpy(c->vendor + 4, &in->leaf0[3], 4);
	memcpy(c->vendor + 8, &in->leaf0[2], 4);
	if (in->leaf0[0] < 1)
		return;
	a = in->leaf1[0];
	c->family = (a >> 8) & 0xf;
	c->model = (a >> 4) & 0xf;
	c->stepping = a & 0xf;
	if (c->family == 0x6 || c->family == 0xf)
		c->model |= ((a >> 16) & 0xf) << 4;
	if (c->family == 0xf)
		c->family += (a >> 20) & 0xff;
	c->hypervisor = in->leaf1[2] & (1u << 31);
}

/* The vpmu model whose core PMU this CPU has (event encodings included). */
static const struct vpmu_model *host_model(const struct host_cpu *c)
{
	if (strcmp(c->vendor, "GenuineIntel") || c->family != 6)
		return NULL;
	switch (c->model) {
	case 0x55: /* Skylake, Cascade Lake and Cooper Lake server: one core PMU */
		return model_lookup("Skylake-Server");
	case 0x6a:
	case 0x6c: /* Ice Lake server and Ice Lake-D */
		return model_lookup("Icelake-Server");
	case 0xbd: /* Lunar Lake (hybrid: the P-core PMU) */
		return model_lookup("LunarLake");
	}
	return NULL;
}

/* The first core PMU libpfm4 found present, other than its architectural fallback. */
static int pfm_core_pmu(char *name, size_t len, unsigned int *ret_more)
{
	unsigned int n = 0;

	*ret_more = 0;
	if (host_pfm_init() != PFM_SUCCESS)
		return -ENODEV;
	for (int p = PFM_PMU_NONE + 1; p < PFM_PMU_MAX; p++) {
		pfm_pmu_info_t info;

		memset(&info, 0, sizeof(info));
		info.size = sizeof(info);
		if (pfm_get_pmu_info((pfm_pmu_t) p, &info) != PFM_SUCCESS)
			continue;
		if (!info.is_present || info.type != PFM_PMU_TYPE_CORE || info.is_dfl)
			continue;
		if (n++ == 0)
			snprintf(name, len, "%s", info.name);
	}
	*ret_more = n > 1 ? n - 1 : 0;
	return n ? 0 : -ENOENT;
}

void host_pmu_probe(struct host_probe *ret)
{
	struct host_probe in;

	memset(&in, 0, sizeof(in));
	if (__get_cpuid(0, &in.leaf0[0], &in.leaf0[1], &in.leaf0[2], &in.leaf0[3])) {
		in.cpuid_ok = true;
		if (in.leaf0[0] >= 1)
			__get_cpuid(1, &in.leaf1[0], &in.leaf1[1], &in.leaf1[2], &in.leaf1[3]);
	}
	in.hw = probe(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS);
	/* 0xc0: instructions retired, on Intel and on AMD alike */
	in.raw = probe(PERF_TYPE_RAW, 0xc0);
	in.sw = probe(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
	in.pfm = pfm_core_pmu(in.pfm_pmu, sizeof(in.pfm_pmu), &in.pfm_more);
	*ret = in;
}

void host_pmu_decide(const struct host_probe *in, struct host_pmu *ret)
{
	struct host_pmu h;
	struct host_cpu c;
	char pmu[64] = "", probes[64];

	memset(&h, 0, sizeof(h));
	host_cpu(in, &c);
	h.intel = !strcmp(c.vendor, "GenuineIntel");

	if (!in->hw) {
		h.kind = HOST_PMU_HW;
		h.raw_ok = !in->raw;
		snprintf(probes, sizeof(probes), "hardware PMU%s",
			 h.raw_ok ? ", raw events" : ", raw events refused");
	} else {
		h.kind = in->sw ? HOST_PMU_NONE : HOST_PMU_SOFTWARE;
		if (in->sw)
			snprintf(probes, sizeof(probes), "no perf_event_open (%s)",
				 strerror(-in->sw));
		else
			snprintf(probes, sizeof(probes), "no hardware PMU (%s), task-clock ok",
				 strerror(-in->hw));
	}

	if (!in->pfm && in->pfm_pmu[0]) {
		snprintf(h.pfm_pmu, sizeof(h.pfm_pmu), "%.*s", (int) sizeof(h.pfm_pmu) - 1,
			 in->pfm_pmu);
		snprintf(pmu, sizeof(pmu), "libpfm4 %s%s", h.pfm_pmu,
			 in->pfm_more ? " (hybrid)" : "");
	} else {
		snprintf(pmu, sizeof(pmu), "libpfm4 knows no core PMU here");
	}
	h.model = host_model(&c);

	snprintf(h.why, sizeof(h.why), "%s; %s %02X_%02XH stepping %u%s; %s; model %s", probes,
		 c.vendor[0] ? c.vendor : "unknown CPU", c.family, c.model, c.stepping,
		 c.hypervisor ? " (VM)" : "", pmu, h.model ? h.model->name : "none");
	*ret = h;
}

int host_pmu_detect(struct host_pmu *ret)
{
	struct host_probe in;

	host_pmu_probe(&in);
	host_pmu_decide(&in, ret);
	return 0;
}
