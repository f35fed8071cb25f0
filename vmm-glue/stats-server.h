/* SPDX-License-Identifier: MIT */
/*
 * The stats endpoint of vpmu-vmm (--stats PATH): a Unix stream socket,
 * mode 0600, served by its own thread; each accepted peer of our
 * effective uid gets one JSON snapshot of the vCPUs' figures
 * (vpmu_stats_to_json) and is closed. Nothing waits on a client, and
 * vpmu_stats_read() never stops a vCPU.
 *
 * The socket path: a stale socket (nobody listening) is replaced. A
 * directory another user can write to is refused, unless it is sticky
 * (like /tmp) and the path is new or a socket of ours: there nobody else
 * can remove or rename our entry between the check and the unlink, and
 * we never remove another user's file. The socket is created 0600 with
 * fchmod() before bind(); the process umask is not touched.
 */
#ifndef VMM_STATS_SERVER_H
#define VMM_STATS_SERVER_H

#include <stddef.h>

#include "vpmu/vpmu.h"

#define STATS_MAX_VCPUS 64 /* as many as vpmu-vmm runs (KVM_VM_MAX_VCPUS) */

struct stats_server;

/*
 * Listen on `path` and serve the `nr` vCPUs (the array is copied; the
 * vCPUs must outlive the server). One server per process. On failure, a
 * negative errno and one line in `err` that says what to do.
 */
int stats_server_start(const char *path, struct vpmu_vcpu *const *vcpus, unsigned int nr,
		       struct stats_server **ret, char *err, size_t errlen);

/* Stop the thread, close the socket and remove its path. NULL is fine. */
void stats_server_stop(struct stats_server *srv);

/*
 * Remove the socket path, if a server made one: async-signal-safe, for a
 * SIGINT/SIGTERM handler (the path is recorded when the socket is bound).
 */
void stats_server_unlink_path(void);

#endif
