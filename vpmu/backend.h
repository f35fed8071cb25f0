/* SPDX-License-Identifier: MIT */
/*
 * The host-counter backend interface. One backend instance per vCPU.
 * Counters are numbered as GLOBAL_CTRL numbers them: GP i = i, fixed i =
 * 32 + i.
 */
#ifndef VPMU_BACKEND_H
#define VPMU_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

struct vpmu_vcpu;

enum vpmu_hev_kind {
	HEV_NONE,  /* not programmed: release any host event */
	HEV_GP,	   /* IA32_PERFEVTSELx-style event */
	HEV_FIXED, /* a fixed counter's event */
};

/* What a guest counter asks the host to count. Compared with memcmp. */
struct vpmu_host_event {
	uint8_t kind;	 /* enum vpmu_hev_kind */
	uint8_t fixed;	 /* HEV_FIXED: which fixed counter */
	uint8_t usr, os; /* count at CPL > 0 / CPL 0 */
	uint32_t pad;
	uint64_t config; /* HEV_GP: event select bits, minus EN/INT/USR/OS */
	uint64_t aux;	 /* the value of the extra MSR the event uses */
};

/* The state a backend must bring one host counter to. */
struct vpmu_hw_want {
	struct vpmu_host_event ev;
	bool enabled;  /* count now (global enable, not frozen) */
	bool discard;  /* drop what was counted so far: guest rewrote the value */
	uint64_t base; /* guest value that the pending delta adds to */
	uint64_t mask; /* counter width */
};

/* What a backend knows of one host counter, for the stats. */
struct vpmu_backend_info {
	uint64_t time_enabled;	 /* ns the host event was enabled, as perf reports it */
	uint64_t time_running;	 /* ns it was on a hardware counter (less: multiplexed) */
	uint64_t time_discarded; /* ns counted, then dropped by a guest write (time backend) */
	bool degraded;		 /* counts, but not all the time, or overflows may come late */
	int error;		 /* why degraded: negative errno, else 0 */
};

struct vpmu_backend_ops {
	const char *name;
	bool cheap_read; /* read() costs no syscall: fold before publishing stats */
	int (*init)(struct vpmu_vcpu *vcpu, void **ret_state);
	void (*fini)(void *state);
	/* Whether `ev` can be counted at all (CPUID 0AH EBX, stats). */
	bool (*can_count)(void *state, const struct vpmu_host_event *ev);
	/*
	 * One backend operation: bring counter `ctr` to `want` and return in
	 * *ret_delta what it counted since the previous update or read (0
	 * when want->discard). Arms the next overflow at (mask + 1) - ((base
	 * + delta) & mask) events. Returns 1 if a host event was created,
	 * 0 if the existing one was reused, or a negative errno: the event
	 * is unbacked and the counter does not count.
	 */
	int (*update)(void *state, unsigned int ctr, const struct vpmu_hw_want *want,
		      uint64_t *ret_delta);
	/*
	 * Events counted since the previous update or read. `discard`: the
	 * core drops them (the guest wrote the counter since), for the
	 * backend's account of discarded time.
	 */
	uint64_t (*read)(void *state, unsigned int ctr, bool discard);
	/*
	 * Optional (host backends): take the host overflows that arrived
	 * since the last poll; returns the counters that wrapped, for the
	 * core to fold with an update (vpmu_vcpu_poll).
	 */
	uint64_t (*poll)(void *state);
	/* Optional (host backends): whether poll would find something; no syscall. */
	bool (*pending)(const void *state);
	/* Optional: what the stats show of counter `ctr`'s host event. */
	void (*info)(void *state, unsigned int ctr, struct vpmu_backend_info *ret);
	/*
	 * Optional: state of the backend's own that decides future counts
	 * and lies in no counter value (the exact backend's crystal-clock
	 * phase), for a snapshot; restored onto the same backend only.
	 */
	uint64_t (*phase)(const void *state);
	void (*set_phase)(void *state, uint64_t phase);
};

extern const struct vpmu_backend_ops vpmu_backend_none;
extern const struct vpmu_backend_ops vpmu_backend_exact;
extern const struct vpmu_backend_ops vpmu_backend_time;
extern const struct vpmu_backend_ops vpmu_backend_perf;

/* Core entry for backends: these counters (bit mask) may have overflowed. */
void counters_overflowed(struct vpmu_vcpu *vcpu, uint64_t ctr_mask);

#endif
