/* SPDX-License-Identifier: MIT */
/* vCPU lifetime: creation from a (narrowed) model, reset, logging. */
#include <cpuid.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "msr-index.h"
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

void vpmu_config_init(struct vpmu_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->model = "Skylake-Server";
	cfg->version = -1;
	cfg->nr_gp = -1;
	cfg->nr_fixed = -1;
	cfg->log_level = VPMU_LOG_INFO;
	cfg->signo = SIGRTMIN + 4;
}

int vpmu_vcpu_new(const struct vpmu_config *cfg, struct vpmu_vcpu **ret_vcpu)
{
	const struct vpmu_model *base;
	struct vpmu_vcpu *vcpu;
	const char *why = NULL;
	int r;

	/* configs from before `filter` was added stay valid (the default policy) */
	if (!cfg || !ret_vcpu || cfg->size < offsetof(struct vpmu_config, filter) ||
	    cfg->size > sizeof(*cfg))
		return -EINVAL;
	base = model_lookup(cfg->model);
	if (!base) {
		cfg_logf(cfg, VPMU_LOG_ERR, "unknown guest CPU model '%s'",
			 cfg->model ? cfg->model : "(null)");
		return -ENOENT;
	}
	vcpu = calloc(1, sizeof(*vcpu));
	if (!vcpu)
		return -ENOMEM;
	r = model_narrow(base, cfg, &vcpu->model, &why);
	if (r < 0) {
		cfg_logf(cfg, VPMU_LOG_ERR, "model %s: %s", base->name, why);
		free(vcpu);
		return r;
	}
	if (cfg->size >= offsetof(struct vpmu_config, linear_bits) + sizeof(cfg->linear_bits) &&
	    cfg->linear_bits) {
		if (cfg->linear_bits != 48 && cfg->linear_bits != 57) {
			cfg_logf(cfg, VPMU_LOG_ERR, "linear_bits %d: use 48, 57 or 0 (the model's)",
				 cfg->linear_bits);
			free(vcpu);
			return -EINVAL;
		}
		vcpu->model.linear_bits = (uint8_t) cfg->linear_bits;
	}
	if (cfg->size >= offsetof(struct vpmu_config, tsx) + sizeof(cfg->tsx) && cfg->tsx &&
	    vpmu_host_tsx())
		vcpu->model.features |= MODEL_F_TSX;
	model_derive(&vcpu->model, &vcpu->mask);
	msr_counts_init(vcpu);
	vcpu->log = cfg->log;
	vcpu->log_data = cfg->log_data;
	vcpu->log_level = cfg->log_level;
	vcpu->pmi = cfg->pmi;
	vcpu->pmi_data = cfg->pmi_data;
	vcpu->regs = cfg->regs;
	vcpu->regs_data = cfg->regs_data;
	if (cfg->size >= offsetof(struct vpmu_config, filter) + sizeof(cfg->filter))
		vcpu->filter = cfg->filter;

	vcpu->signo = SIGRTMIN + 4;
	if (cfg->size >= offsetof(struct vpmu_config, signo) + sizeof(cfg->signo))
		vcpu->signo = cfg->signo;

	switch (cfg->backend) {
	case VPMU_BACKEND_NONE:
		vcpu->backend = &vpmu_backend_none;
		break;
	case VPMU_BACKEND_EXACT:
		vcpu->backend = &vpmu_backend_exact;
		break;
	case VPMU_BACKEND_TIME:
		vcpu->backend = &vpmu_backend_time;
		break;
	case VPMU_BACKEND_PERF:
		vcpu->backend = &vpmu_backend_perf;
		break;
	default:
		cfg_logf(cfg, VPMU_LOG_ERR, "unknown host-counter backend %d", (int) cfg->backend);
		free(vcpu);
		return -EINVAL;
	}
	r = vcpu->backend->init(vcpu, &vcpu->backend_state);
	if (r < 0) {
		cfg_logf(cfg, VPMU_LOG_ERR, "backend %s: cannot start (%d)", vcpu->backend->name,
			 r);
		free(vcpu);
		return r;
	}
	vcpu->unavailable_events = counters_unavailable_events(vcpu);
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
	vcpu->backend->fini(vcpu->backend_state);
	free(vcpu->mem_regions);
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
		 * (SDM §20.4.9 notes, seed 004): BTS/TR and PEBS off.
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
