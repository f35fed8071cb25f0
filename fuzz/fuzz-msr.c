/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: arbitrary guest RDMSR/WRMSR/RDPMC/CPUID sequences,
 * interleaved with counting (exact-backend feeds), syncs and resets,
 * against every model and narrowing. Besides the sanitizers it checks the
 * contract: only the documented error codes, an MSR is readable iff it is
 * listed, a refused write changes nothing, and no register ever holds a
 * bit its model does not have.
 *
 * Input: [model][flags][nr_gp][nr_fixed][version] then 10-byte ops
 *        [op][sel][value: 8 bytes little-endian]. Flags bits 2:0 narrow
 *        the model, bit 3 picks backend NONE, bit 4 sets vpmu_config.tsx,
 *        bit 5 gives the host TSX.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pmu.h"
#include "fuzz.h"

static unsigned int pmis;
static bool host_tsx;

static bool fuzz_host_tsx(void)
{
	return host_tsx;
}

static void on_pmi(void *data, struct vpmu_vcpu *vcpu)
{
	struct vpmu_stats st;

	pmis++;
	/* what a PMI handler may call back: delivered, or merged by the APIC */
	if (pmis % 3)
		vpmu_pmi_delivered(vcpu);
	else
		vpmu_pmi_merged(vcpu);
	(void) vpmu_stats_read(vcpu, &st);
}

static uint32_t msrs[512];

static bool listed(size_t n, uint32_t msr)
{
	for (size_t i = 0; i < n; i++)
		if (msrs[i] == msr)
			return true;
	return false;
}

static void check_invariants(const struct vpmu_vcpu *v)
{
	const struct vpmu_masks *k = &v->mask;

	CHECK(!(v->global_status & ~k->global_status));
	CHECK(!(v->global_ctrl & ~k->global_ctrl));
	CHECK(!(v->fixed_ctrl & ~k->fixed_ctrl));
	CHECK(!(v->pebs_enable & ~k->pebs_enable));
	CHECK(!(v->data_cfg & ~k->data_cfg));
	CHECK(!(v->debugctl & ~k->debugctl));
	for (unsigned int i = 0; i < VPMU_MAX_GP; i++) {
		CHECK(!(v->gp[i].value & ~k->gp_width));
		CHECK(!(v->gp[i].evtsel & ~(k->evtsel | (i == 2 ? k->evtsel2_extra : 0))));
		CHECK(i < v->model.nr_gp || (!v->gp[i].value && !v->gp[i].evtsel));
	}
	for (unsigned int i = 0; i < VPMU_MAX_FIXED; i++)
		CHECK(!(v->fixed[i].value & ~k->fixed_width));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vpmu_config cfg;
	struct vpmu_vcpu *v;
	size_t n;

	if (size < 5)
		return 0;
	vpmu_config_init(&cfg);
	cfg.model = vpmu_model_name(data[0] % vpmu_model_count());
	cfg.flags = data[1] & 7;
	cfg.nr_gp = (int) (data[2] % 10) - 1;
	cfg.nr_fixed = (int) (data[3] % 6) - 1;
	cfg.version = (int) (data[4] % 8) - 1;
	cfg.backend = data[1] & 8 ? VPMU_BACKEND_NONE : VPMU_BACKEND_EXACT;
	cfg.pmi = on_pmi;
	cfg.tsx = data[1] & 16;
	host_tsx = data[1] & 32;
	vpmu_host_tsx = fuzz_host_tsx;
	if (vpmu_vcpu_new(&cfg, &v) < 0)
		return 0;
	n = vpmu_msr_list(v, msrs, 512);
	CHECK(n <= 512);
	data += 5;
	size -= 5;

	for (; size >= 10; data += 10, size -= 10) {
		uint64_t val, before = 0, after = 0;
		uint32_t msr;
		int r, rb;

		memcpy(&val, data + 2, 8);
		/* half the ops hit a listed MSR, half any address nearby */
		if (data[1] & 0x80)
			msr = msrs[data[1] % n];
		else
			msr = (uint32_t) (val >> 32) % 0x2000;

		switch (data[0] % 11) {
		case 0:
		case 1:
			r = vpmu_msr_read(v, msr, &val);
			CHECK(r == 0 || r == -ENOENT || r == -ENXIO);
			CHECK((r == 0) == listed(n, msr));
			break;
		case 2:
		case 3:
		case 4:
			rb = vpmu_msr_read(v, msr, &before);
			r = vpmu_msr_write(v, msr, val);
			CHECK(r == 0 || r == -EINVAL || r == -ENOENT || r == -ENXIO);
			CHECK((r == 0 || r == -EINVAL) == listed(n, msr));
			if (r == -EINVAL && rb == 0) {
				CHECK(vpmu_msr_read(v, msr, &after) == 0);
				CHECK(after == before);
			}
			break;
		case 5:
			r = vpmu_rdpmc(v, (uint32_t) val, &val);
			CHECK(r == 0 || r == -EINVAL);
			break;
		case 6: {
			struct vpmu_cpuid_entry e;

			r = vpmu_cpuid(v, (uint32_t) val & 0x3f, (uint32_t) (val >> 32) & 7, &e);
			CHECK(r == 0 || r == -ENOENT);
			break;
		}
		case 7:
			vpmu_vcpu_reset(v, data[1] & 1 ? VPMU_RESET_INIT : VPMU_RESET_POWER_ON);
			break;
		case 8: {
			/* a run of instructions; big values cross overflows */
			struct vpmu_exact_counts c = {
				.instructions = val >> (data[1] & 63),
				.cycles = val >> (data[1] & 31),
				.ref_cycles = val & 0xffffff,
				.branches = (val >> 8) & 0xffff,
				.cond_branches = (val >> 8) & 0xff,
				.cond_taken = (val >> 8) & 0xf,
				.near_calls = val & 0xf,
				.loads = val & 0xff,
				.mem_insts = val & 0x1ff,
				.cpl = data[1] & 3,
			};
			uint64_t head = vpmu_exact_headroom(v);

			r = vpmu_exact_feed(v, &c);
			CHECK(r == 0 || (r == -EOPNOTSUPP && head == UINT64_MAX));
			break;
		}
		case 9:
			CHECK(vpmu_vcpu_sync(v) == 0);
			break;
		case 10: {
			struct vpmu_stats st;

			CHECK(vpmu_stats_read(v, &st) == 0);
			CHECK(st.version == VPMU_STATS_VERSION);
			CHECK(st.pmis_requested >= st.pmis_delivered + st.pmis_merged);
			break;
		}
		}
		check_invariants(v);
	}
	vpmu_vcpu_free(v);
	return 0;
}
