#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run vpmu-vmm on a guest kernel; check its exit status and that every
pattern (a regular expression) matches a line of the guest's output."""
import re
import subprocess
import sys


def main():
    vmm, kernel, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
    patterns = sys.argv[4:]
    p = subprocess.run([vmm, '--accel', 'emu', '--verbose', '--max-insns', '2000000000', kernel],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=110)
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
