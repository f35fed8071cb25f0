#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run vpmu-vmm on a guest kernel; check its exit status and that every
pattern (a regular expression) matches a line of the guest's output.

usage: run-guest.py [--accel emu|kvm] [--cpu MODEL] [--mem SIZE] [--needs-host-pmu 1] [--skips N]
                    [--stderr PATTERN]... VMM KERNEL STATUS [PATTERN...]

--stderr PATTERN: a line of vpmu-vmm's own output (stderr, with --verbose's
summary) must match it too.

--skips N: the guest's closing line "SUMMARY: P passed, F failed, K
skipped" must be there with K = N, so that a change that turns checks into
skips (or skips into checks) does not pass unnoticed.

With --accel kvm the test is skipped (exit 77, meson's skip code) with one
line that says why where it cannot mean anything: no /dev/kvm, a KVM that
vpmu-vmm cannot use, or (--needs-host-pmu 1, for programs whose checks
need guest counters to count) a host without a hardware PMU, where guest
counters under KVM have nothing to count with and KVM's RDPMC faults."""
import ctypes
import os
import re
import subprocess
import sys

SKIP = 77
PERF_EVENT_OPEN = 298  # x86-64


def host_has_pmu():
    """perf_event_open of hardware instructions for this thread, as `perf stat -e instructions`."""
    attr = (ctypes.c_uint8 * 128)()
    ctypes.c_uint32.from_buffer(attr, 0).value = 0   # PERF_TYPE_HARDWARE
    ctypes.c_uint32.from_buffer(attr, 4).value = 128  # size
    ctypes.c_uint64.from_buffer(attr, 8).value = 1   # PERF_COUNT_HW_INSTRUCTIONS
    ctypes.c_uint64.from_buffer(attr, 40).value = 1 | 1 << 5 | 1 << 6  # disabled, excl kernel, hv
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(PERF_EVENT_OPEN, attr, 0, -1, -1, 0)
    if fd < 0:
        return False
    os.close(fd)
    return True


def main():
    args = sys.argv[1:]
    accel, extra, needs_pmu, skips, err_patterns = 'emu', [], False, None, []
    while args and args[0].startswith('--'):
        opt, val = args[0], args[1]
        args = args[2:]
        if opt == '--accel':
            accel = val
        elif opt == '--cpu':
            extra += ['--cpu', val]
        elif opt == '--mem':
            extra += ['--mem', val]
        elif opt == '--needs-host-pmu':
            needs_pmu = val == '1'
        elif opt == '--skips':
            skips = int(val)
        elif opt == '--stderr':
            err_patterns.append(val)
        else:
            print(f'run-guest: unknown option {opt}')
            return 2
    vmm, kernel, status = args[0], args[1], int(args[2])
    patterns = args[3:]
    if accel == 'kvm' and not os.path.exists('/dev/kvm'):
        print('SKIP: /dev/kvm is absent on this host; the --accel kvm run of this guest test needs KVM')
        return SKIP
    if accel == 'kvm' and needs_pmu and not host_has_pmu():
        print('SKIP: the host has no hardware PMU (perf cannot count instructions): under KVM the '
              'guest counters this test checks would have nothing to count with')
        return SKIP
    cmd = [vmm, '--accel', accel] + extra + ['--verbose', '--max-insns', '2000000000', kernel]
    print('run-guest: ' + ' '.join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=110)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    m = re.search(r'^vpmu-vmm: --accel kvm: (.*)$', p.stderr, re.M)
    if accel == 'kvm' and p.returncode == 2 and m:
        print(f'SKIP: vpmu-vmm cannot use KVM on this host: {m.group(1)}')
        return SKIP
    ok = True
    if p.returncode != status:
        print(f'run-guest: exit status {p.returncode}, expected {status}')
        ok = False
    for pat in patterns:
        if not re.search(pat, p.stdout, re.M):
            print(f'run-guest: no output line matches {pat!r}')
            ok = False
    for pat in err_patterns:
        if not re.search(pat, p.stderr, re.M):
            print(f'run-guest: no line of vpmu-vmm\'s own output matches {pat!r}')
            ok = False
    if re.search(r'^FAIL', p.stdout, re.M):
        print('run-guest: the guest reported failures')
        ok = False
    if skips is not None:
        m = re.findall(r'^SUMMARY: \d+ passed, \d+ failed, (\d+) skipped$', p.stdout, re.M)
        if len(m) != 1:
            print(f'run-guest: expected one SUMMARY line with {skips} skipped, found {len(m)}')
            ok = False
        elif int(m[0]) != skips:
            print(f'run-guest: the guest skipped {m[0]} checks, expected exactly {skips} '
                  f'(the pinned count in guest-tests/meson.build)')
            ok = False
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
