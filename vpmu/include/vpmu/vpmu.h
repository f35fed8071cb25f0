/* SPDX-License-Identifier: MIT */
/*
 * libvpmu: a userspace virtual PMU for KVM-style VMMs (Intel architectural
 * performance monitoring).
 *
 * Error contract: int functions return 0 or a negative errno; ret_*
 * parameters come last and are left untouched on failure. The codes a VMM
 * must route are:
 *
 *   -ENOENT   not a PMU MSR / CPUID leaf: the VMM handles it itself.
 *   -ENXIO    a PMU MSR that this vCPU's model does not have: hardware
 *             raises #GP, the VMM injects #GP (kept apart from -EINVAL so
 *             that a VMM can log or route it).
 *   -EINVAL   the guest access is one hardware refuses (reserved bit, read-
 *             only MSR, bad RDPMC index): inject #GP(0).
 *
 * Any other negative errno is a failure of the VMM or the host, never of
 * the guest. The library never prints and never exits: it reports through
 * the log callback given in struct vpmu_config.
 *
 * Thread model: a struct vpmu_vcpu belongs to the thread that runs that
 * vCPU; calls on one vCPU are not reentrant.
 */
#ifndef VPMU_VPMU_H
#define VPMU_VPMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VPMU_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define VPMU_API __attribute__((visibility("default")))
#else
#define VPMU_PRINTF(f, a)
#define VPMU_API
#endif

struct vpmu_vcpu;

enum vpmu_log_level {
	VPMU_LOG_ERR = 3,
	VPMU_LOG_WARNING = 4,
	VPMU_LOG_INFO = 6,
	VPMU_LOG_DEBUG = 7,
};

typedef void (*vpmu_log_fn)(void *data, enum vpmu_log_level level, const char *msg);

/* ---- guest CPU models --------------------------------------------------- */

/* Number of built-in guest CPU models. */
VPMU_API size_t vpmu_model_count(void);
/* Name of model `index` (0 <= index < vpmu_model_count()), or NULL. */
VPMU_API const char *vpmu_model_name(size_t index);
/* One-line description of model `index`, or NULL. */
VPMU_API const char *vpmu_model_description(size_t index);
/* Index of the model called `name` (case-insensitive), or -ENOENT. */
VPMU_API int vpmu_model_find(const char *name);

/* ---- vCPU creation ------------------------------------------------------ */

/* Narrowing flags: a VMM may expose less than the model has, never more. */
#define VPMU_CONFIG_NO_PEBS	(1u << 0)	/* no PEBS of any kind, no DS area */
#define VPMU_CONFIG_NO_LBR	(1u << 1)	/* no LBR stack */
#define VPMU_CONFIG_NO_METRICS	(1u << 2)	/* no PERF_METRICS */

struct vpmu_config {
	size_t size;		/* sizeof(struct vpmu_config), set by vpmu_config_init() */
	const char *model;	/* model name, case-insensitive */
	int nr_gp;		/* GP counters to expose; -1 = the model's */
	int nr_fixed;		/* fixed counters to expose; -1 = the model's */
	unsigned int flags;	/* VPMU_CONFIG_* */
	vpmu_log_fn log;	/* may be NULL */
	void *log_data;
	enum vpmu_log_level log_level; /* most verbose level passed to log */
};

/* Fill *cfg with defaults: the model's full PMU, no log. */
VPMU_API void vpmu_config_init(struct vpmu_config *cfg);

/*
 * Create the PMU of one vCPU in its power-on state. -ENOENT: unknown model;
 * -EINVAL: inconsistent configuration (the log says which field);
 * -ENOMEM.
 */
VPMU_API int vpmu_vcpu_new(const struct vpmu_config *cfg, struct vpmu_vcpu **ret_vcpu);
VPMU_API void vpmu_vcpu_free(struct vpmu_vcpu *vcpu);

enum vpmu_reset_kind {
	VPMU_RESET_POWER_ON,	/* RESET#: every PMU MSR to its reset value */
	VPMU_RESET_INIT,	/* INIT: MSRs kept; the DS mechanism disabled */
};
VPMU_API void vpmu_vcpu_reset(struct vpmu_vcpu *vcpu, enum vpmu_reset_kind kind);

/* Model name this vCPU was created with (canonical spelling). */
VPMU_API const char *vpmu_vcpu_model(const struct vpmu_vcpu *vcpu);

/* ---- MSRs and RDPMC ----------------------------------------------------- */

/* Guest RDMSR / WRMSR. Codes as described at the top of this file. */
VPMU_API int vpmu_msr_read(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t *ret_value);
VPMU_API int vpmu_msr_write(struct vpmu_vcpu *vcpu, uint32_t msr, uint64_t value);

/*
 * Every MSR this vCPU implements, in ascending order (for MSR filters and
 * migration). Writes up to `n` entries to `msrs` (may be NULL when n is 0)
 * and returns the total count.
 */
VPMU_API size_t vpmu_msr_list(const struct vpmu_vcpu *vcpu, uint32_t *msrs, size_t n);

/*
 * Guest RDPMC with ECX = `ecx`: bit 30 selects fixed counters, bit 29 the
 * PERF_METRICS register, bit 31 (fast read) is not supported and faults.
 * -EINVAL: #GP. The VMM checks CR4.PCE and CPL before calling.
 */
VPMU_API int vpmu_rdpmc(struct vpmu_vcpu *vcpu, uint32_t ecx, uint64_t *ret_value);

/* ---- CPUID and IA32_MISC_ENABLE ----------------------------------------- */

struct vpmu_cpuid_entry {
	uint32_t function;
	uint32_t index;
	uint32_t eax, ebx, ecx, edx;
};

/*
 * The PMU view of CPUID leaf `function`/`index`. Leaves 0AH, 15H and 23H
 * are owned by the PMU and come back whole; for leaf 01H only the PMU bits
 * (ECX[2] DTES64, ECX[4] DS-CPL, ECX[15] PDCM, EDX[21] DS) are set and the
 * VMM merges them (see vpmu_cpuid_patch). -ENOENT for any other leaf.
 */
VPMU_API int vpmu_cpuid(const struct vpmu_vcpu *vcpu, uint32_t function, uint32_t index,
	       struct vpmu_cpuid_entry *ret_entry);

/*
 * Patch the PMU-related leaves of a VMM's CPUID table in place: replace
 * 0AH/15H/23H, set or clear the PMU bits of 01H, raise leaf 0's maximum
 * leaf if needed, and append missing PMU leaves while `*nr < capacity`.
 * -ENOSPC if entries did not fit (the ones that fit are patched).
 */
VPMU_API int vpmu_cpuid_patch(const struct vpmu_vcpu *vcpu, struct vpmu_cpuid_entry *entries,
		     size_t *nr, size_t capacity);

/*
 * IA32_MISC_ENABLE as this PMU needs it: `value` with bit 7 (perfmon
 * available), bit 11 (BTS unavailable) and bit 12 (PEBS unavailable) set
 * per the model. The VMM owns the rest of the MSR.
 */
VPMU_API uint64_t vpmu_misc_enable_patch(const struct vpmu_vcpu *vcpu, uint64_t value);

#ifdef __cplusplus
}
#endif

#endif
