#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run vpmu-vmm on a guest kernel; check its exit status and that every
pattern (a regular expression) matches a line of the guest's output.

usage: run-guest.py [--accel emu|kvm] [--cpu MODEL] VMM KERNEL STATUS [PATTERN...]

With --accel kvm on a host without /dev/kvm the test is skipped (exit 77,
meson's skip code) with one line that says so."""
import os
import re
import subprocess
import sys

SKIP = 77


def main():
    args = sys.argv[1:]
    accel, extra = 'emu', []
    while args and args[0].startswith('--'):
        opt, val = args[0], args[1]
        args = args[2:]
        if opt == '--accel':
            accel = val
        elif opt == '--cpu':
            extra += ['--cpu', val]
        else:
            print(f'run-guest: unknown option {opt}')
            return 2
    vmm, kernel, status = args[0], args[1], int(args[2])
    patterns = args[3:]
    if accel == 'kvm' and not os.path.exists('/dev/kvm'):
        print('SKIP: /dev/kvm is absent on this host; the --accel kvm run of this guest test needs KVM')
        return SKIP
    cmd = [vmm, '--accel', accel] + extra + ['--verbose', '--max-insns', '2000000000', kernel]
    print('run-guest: ' + ' '.join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=110)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    ok = True
    if p.returncode != status:
        print(f'run-guest: exit status {p.returncode}, expected {status}')
        ok = False
    for pat in patterns:
        if not re.search(pat, p.stdout, re.M):
            print(f'run-guest: no output line matches {pat!r}')
            ok = False
    if re.search(r'^FAIL', p.stdout, re.M):
        print('run-guest: the guest reported failures')
        ok = False
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
