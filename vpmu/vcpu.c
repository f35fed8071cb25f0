/* SPDX-License-Identifier: MIT */
/* vCPU lifetime: creation from a (narrowed) model, reset, logging. */
#include <cpuid.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "bits.h"
#include "vpmu/msr.h"
#include "pmu.h"

VPMU_PRINTF(5, 0)
static void log_va(vpmu_log_fn fn, void *data, enum vpmu_log_level max, enum vpmu_log_level level,
		   const char *fmt, va_list ap)
{
	char buf[256];

	if (!fn || level > max)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	fn(data, level, buf);
}

void vpmu_logf(const struct vpmu_vcpu *vcpu, enum vpmu_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(vcpu->log, vcpu->log_data, vcpu->log_level, level, fmt, ap);
	va_end(ap);
}

/* The stats slot of a counter: GP i at i, fixed i at 8 + i. */
static unsigned int log_slot(unsigned int ctr)
{
	return ctr >= 32 ? 8 + (ctr - 32) : ctr;
}

void ctr_logf(struct vpmu_vcpu *vcpu, unsigned int ctr, int reason, enum vpmu_log_level level,
	      const char *fmt, ...)
{
	struct vpmu_log_seen *seen;
	va_list ap;

	if (!vcpu->log || level > vcpu->log_level || log_slot(ctr) >= VPMU_STATS_COUNTERS)
		return;
	seen = &vcpu->log_seen[log_slot(ctr)];
	for (unsigned int i = 0; i < seen->nr; i++) {
		if (seen->reason[i] == reason) {
			seen->repeats++;
			vcpu->stats_dirty = true;
			return;
		}
	}
	if (seen->nr == VPMU_LOG_REASONS) {
		/* as many lines as this counter will ever get: a guest cannot make more */
		seen->repeats++;
		vcpu->stats_dirty = true;
		return;
	}
	seen->reason[seen->nr++] = reason;
	va_start(ap, fmt);
	log_va(vcpu->log, vcpu->log_data, vcpu->log_level, level, fmt, ap);
	va_end(ap);
}

/* CPUID.(EAX=07H,ECX=0):EBX[4] HLE, [11] RTM (SDM Vol. 2A, CPUID) of the host. */
static bool host_cpuid_tsx(void)
{
	unsigned int a, b, c, d;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return b & (1u << 4 | 1u << 11);
}

bool (*vpmu_host_tsx)(void) = host_cpuid_tsx;

VPMU_PRINTF(3, 4)
static void cfg_logf(const struct vpmu_config *cfg, enum vpmu_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(cfg->log, cfg->log_data, cfg->log_level, level, fmt, ap);
	va_end(ap);
}

void vpmu_config_init_sized(struct vpmu_config *cfg, size_t size, size_t regs_size)
{
	struct vpmu_config c;

	memset(&c, 0, sizeof(c));
	c.size = size;
	c.model = "Skylake-Server";
	c.version = -1;
	c.nr_gp = -1;
	c.nr_fixed = -1;
	c.log_level = VPMU_LOG_INFO;
	c.signo = SIGRTMIN + 4;
	c.regs_size = regs_size;
	abi_copy_out(cfg, size, &c, sizeof(c));
}

void(vpmu_config_init)(struct vpmu_config *cfg)
{
	vpmu_config_init_sized(cfg, CONFIG_SIZE_V01, REGS_SIZE_V01);
}

/* The config's size and regs_size: what this library may read and the callback may write. */
static int config_sizes(const struct vpmu_config *cfg, size_t *ret_regs_size)
{
	size_t regs_size = REGS_SIZE_V01;

	if (cfg->size < CONFIG_SIZE_MIN)
		return -EINVAL;
	if (cfg->size > sizeof(*cfg) && !abi_tail_is_zero(cfg, sizeof(*cfg), cfg->size)) {
		cfg_logf(cfg, VPMU_LOG_ERR,
			 "struct vpmu_config has fields set past the %zu bytes this libvpmu knows: "
			 "it needs a newer libvpmu",
			 sizeof(*cfg));
		return -E2BIG;
	}
	if (ABI_HAS(struct vpmu_config, cfg->size, regs_size))
		regs_size = cfg->regs_size;
	if (regs_size < REGS_SIZE_V01 || regs_size > REGS_SIZE_MAX) {
		cfg_logf(cfg, VPMU_LOG_ERR,
			 "regs_size %zu: set it to sizeof(struct vpmu_guest_regs) "
			 "(vpmu_config_init does)",
			 regs_size);
		return -EINVAL;
	}
	*ret_regs_size = regs_size;
	return 0;
}

static const struct vpmu_backend_ops *backend_of(enum vpmu_backend b)
{
	switch (b) {
	case VPMU_BACKEND_NONE:
		return &vpmu_backend_none;
	case VPMU_BACKEND_EXACT:
		return &vpmu_backend_exact;
	case VPMU_BACKEND_TIME:
		return &vpmu_backend_time;
	case VPMU_BACKEND_PERF:
		return &vpmu_backend_perf;
	}
	return NULL;
}

/* The narrowed model, its masks and MSR table, and the guest's linear-address width. */
static int vcpu_model(struct vpmu_vcpu *vcpu, const struct vpmu_model *base,
		      const struct vpmu_config *cfg)
{
	const char *why = NULL;
	int r = model_narrow(base, cfg, &vcpu->model, &why);

	if (r < 0) {
		cfg_logf(cfg, VPMU_LOG_ERR, "model %s: %s", base->name, why);
		return r;
	}
	if (ABI_HAS(struct vpmu_config, cfg->size, linear_bits) && cfg->linear_bits) {
		if (cfg->linear_bits != 48 && cfg->linear_bits != 57) {
			cfg_logf(cfg, VPMU_LOG_ERR, "linear_bits %d: use 48, 57 or 0 (the model's)",
				 cfg->linear_bits);
			return -EINVAL;
		}
		vcpu->model.linear_bits = (uint8_t) cfg->linear_bits;
	}
	if (ABI_HAS(struct vpmu_config, cfg->size, tsx) && cfg->tsx && vpmu_host_tsx())
		vcpu->model.features |= MODEL_F_TSX;
	model_derive(&vcpu->model, &vcpu->mask);
	msr_counts_init(vcpu);
	return 0;
}

/* Callbacks, filter and signal: fields that older configs may not have. */
static void vcpu_callbacks(struct vpmu_vcpu *vcpu, const struct vpmu_config *cfg)
{
	vcpu->log = cfg->log;
	vcpu->log_data = cfg->log_data;
	vcpu->log_level = cfg->log_level;
	vcpu->pmi = cfg->pmi;
	vcpu->pmi_data = cfg->pmi_data;
	vcpu->regs = cfg->regs;
	vcpu->regs_data = cfg->regs_data;
	if (ABI_HAS(struct vpmu_config, cfg->size, filter))
		vcpu->filter = cfg->filter;
	vcpu->signo = SIGRTMIN + 4;
	if (ABI_HAS(struct vpmu_config, cfg->size, signo))
		vcpu->signo = cfg->signo;
}

static int vcpu_backend(struct vpmu_vcpu *vcpu, const struct vpmu_config *cfg)
{
	int r;

	vcpu->backend = backend_of(cfg->backend);
	if (!vcpu->backend) {
		cfg_logf(cfg, VPMU_LOG_ERR, "unknown host-counter backend %d", (int) cfg->backend);
		return -EINVAL;
	}
	r = vcpu->backend->init(vcpu, &vcpu->backend_state);
	if (r < 0) {
		cfg_logf(cfg, VPMU_LOG_ERR, "backend %s: cannot start (%d)", vcpu->backend->name,
			 r);
		vcpu->backend = NULL;
		return r;
	}
	vcpu->unavailable_events = counters_unavailable_events(vcpu);
	return 0;
}

int vpmu_vcpu_new(const struct vpmu_config *cfg, struct vpmu_vcpu **ret_vcpu)
{
	const struct vpmu_model *base;
	struct vpmu_vcpu *vcpu;
	size_t regs_size;
	int r;

	if (!cfg || !ret_vcpu)
		return -EINVAL;
	r = config_sizes(cfg, &regs_size);
	if (r < 0)
		return r;
	base = model_lookup(cfg->model);
	if (!base) {
		cfg_logf(cfg, VPMU_LOG_ERR, "unknown guest CPU model '%s'",
			 cfg->model ? cfg->model : "(null)");
		return -ENOENT;
	}
	vcpu = calloc(1, sizeof(*vcpu));
	if (!vcpu)
		return -ENOMEM;
	/* what the regs callback writes: the VMM's struct, which may be the larger one */
	vcpu->regs_buf_size = regs_size > sizeof(struct vpmu_guest_regs)
				      ? regs_size
				      : sizeof(struct vpmu_guest_regs);
	vcpu->regs_buf = calloc(1, vcpu->regs_buf_size);
	r = vcpu->regs_buf ? vcpu_model(vcpu, base, cfg) : -ENOMEM;
	if (r >= 0) {
		vcpu_callbacks(vcpu, cfg);
		r = vcpu_backend(vcpu, cfg);
	}
	if (r < 0) {
		vpmu_vcpu_free(vcpu);
		return r;
	}
	vcpu->stats.version = VPMU_STATS_VERSION;
	snprintf(vcpu->stats.model, sizeof(vcpu->stats.model), "%s", vcpu->model.name);
	snprintf(vcpu->stats.backend, sizeof(vcpu->stats.backend), "%s", vcpu->backend->name);
	vpmu_vcpu_reset(vcpu, VPMU_RESET_POWER_ON);
	stats_publish(vcpu);
	*ret_vcpu = vcpu;
	return 0;
}

void vpmu_vcpu_free(struct vpmu_vcpu *vcpu)
{
	if (!vcpu)
		return;
	if (vcpu->backend)
		vcpu->backend->fini(vcpu->backend_state);
	free(vcpu->mem_regions);
	free(vcpu->regs_buf);
	free(vcpu);
}

const char *vpmu_vcpu_model(const struct vpmu_vcpu *vcpu)
{
	return vcpu->model.name;
}

void vpmu_vcpu_reset(struct vpmu_vcpu *vcpu, enum vpmu_reset_kind kind)
{
	if (kind == VPMU_RESET_INIT) {
		/*
		 * INIT leaves MSRs alone but disables the DS mechanism
		 * (SDM Vol. 3B 20.4.9, notes): BTS/TR and PEBS off.
		 */
		vcpu->debugctl &= ~(DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS | DEBUGCTLMSR_BTINT);
		vcpu->pebs_enable = 0;
		vcpu->pebs_index &= ~ARCH_PEBS_INDEX_EN;
		vcpu->pebs_pending = 0;
		return;
	}
	/*
	 * Power-on: counters are undefined after RESET (§22.6.2 note); vpmu
	 * picks 0 so guests are deterministic. Everything else resets to 0
	 * except GLOBAL_CTRL, whose GP enable bits are set at RESET for v1
	 * software (SDM Vol. 3B §21.2.2; KVM does the same).
	 */
	memset(vcpu->gp, 0, sizeof(vcpu->gp));
	memset(vcpu->fixed, 0, sizeof(vcpu->fixed));
	vcpu->fixed_ctrl = 0;
	vcpu->global_ctrl = vcpu->model.version >= 2 ? vcpu->mask.gp : 0;
	vcpu->global_status = 0;
	vcpu->pebs_pending = 0;
	vcpu->pmi_due = vcpu->pmi_outstanding = vcpu->pmi_restore = false;
	vcpu->perf_metrics = 0;
	vcpu->debugctl = 0;
	vcpu->pebs_enable = 0;
	vcpu->data_cfg = 0;
	vcpu->ld_lat = 0;
	vcpu->frontend = 0;
	vcpu->offcore_rsp[0] = vcpu->offcore_rsp[1] = 0;
	vcpu->ds_area = 0;
	vcpu->pebs_base = 0;
	vcpu->pebs_index = 0;
	vcpu->lbr_select = 0;
	vcpu->lbr_tos = 0;
	memset(vcpu->lbr_from, 0, sizeof(vcpu->lbr_from));
	memset(vcpu->lbr_to, 0, sizeof(vcpu->lbr_to));
	memset(vcpu->lbr_info, 0, sizeof(vcpu->lbr_info));
	counters_reset(vcpu);
}
