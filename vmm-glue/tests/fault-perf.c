/* SPDX-License-Identifier: MIT */
/*
 * Fault injection for the host backends, loaded with LD_PRELOAD into
 * vpmu-vmm by test-perf-faults.py: perf_event_open(2) fails with the errno
 * in VPMU_FAULT_PERF_ERRNO (a number), as it does on a host out of file
 * descriptors (EMFILE), without the event (ENOENT), whose PMU cannot do it
 * (EOPNOTSUPP), that forbids it (EACCES) or whose PMU is taken (EBUSY).
 * Every other syscall goes through. libvpmu reaches perf_event_open only
 * through syscall(3), which this interposes; it counts its refusals in
 * VPMU_FAULT_PERF_COUNT's file, so the test knows the fault was hit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long nr, ...);

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	const char *inject = getenv("VPMU_FAULT_PERF_ERRNO");
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long); /* the kernel ABI: six register arguments */
	va_end(ap);
	if (nr == SYS_perf_event_open && inject) {
		const char *count = getenv("VPMU_FAULT_PERF_COUNT");
		FILE *f = count ? fopen(count, "a") : NULL;

		if (f) {
			fputs("refused\n", f);
			fclose(f);
		}
		errno = atoi(inject);
		return -1;
	}
	if (!real)
		real = (long (*)(long, ...)) dlsym(RTLD_NEXT, "syscall");
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
