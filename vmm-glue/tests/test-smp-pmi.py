#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PMIs on KVM during an IPI storm, on two vCPUs (guest-tests/demo/
smp-pmi.c): the AP keeps 192 IPIs on their way to the BSP while both take
PMIs from the time backend (any host: no hardware PMU needed). No IPI may
be lost to the PMI delivery (a VMM that rewrites the APIC page to mask the
LVT entry loses some), and each vCPU's PMIs reach its own APIC: its
handler finds its own GLOBAL_STATUS set. The vPMU's figures agree with
the guest's: each vCPU's PMIs delivered are the interrupts its guest CPU
took, give or take the last ones in flight when the guest stopped.
Skipped (77) where /dev/kvm is absent or unusable.

usage: test-smp-pmi.py VPMU_VMM SMP_PMI_KERNEL"""
import os
import re
import subprocess
import sys

VMM, KERNEL = sys.argv[1:3]
failures = []


def check(cond, what):
    print(('PASS: ' if cond else 'FAIL: ') + what, flush=True)
    if not cond:
        failures.append(what)


def main():
    if not os.access('/dev/kvm', os.R_OK | os.W_OK):
        print('SKIP: /dev/kvm is absent or not usable here; this test runs two vCPUs on KVM')
        return 77
    cmd = [VMM, '--accel', 'kvm', '--smp', '2', '--host-counters', 'time', '--verbose', KERNEL]
    print('test-smp-pmi: ' + ' '.join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=170)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    m = re.search(r'^vpmu-vmm: --accel kvm: (.*)$', p.stderr, re.M)
    if p.returncode == 2 and m:
        print(f'SKIP: vpmu-vmm cannot use KVM on this host: {m.group(1)}')
        return 77
    check(p.returncode == 1 and re.search(r'^SUMMARY: 7 passed, 0 failed, 0 skipped$', p.stdout, re.M),
          f'the guest passes every check (exit {p.returncode})')
    check(re.search(r'^PASS: no IPI lost during PMIs', p.stdout, re.M),
          'no IPI lost while PMIs were delivered')
    guest = {int(c): int(n) for c, n in
             re.findall(r'^smp-pmi: cpu(\d): (\d+) PMI interrupts', p.stdout, re.M)}
    vpmu = [tuple(int(x) for x in t) for t in
            re.findall(r'^vpmu-vmm: vpmu \S+: .* (\d+) PMIs requested, (\d+) delivered, '
                       r'(\d+) merged$', p.stderr, re.M)]
    check(len(vpmu) == 2 and len(guest) == 2, f'figures of both vCPUs: {vpmu}, guest {guest}')
    for cpu, (req, dlv, mrg) in enumerate(vpmu):
        took = guest.get(cpu, -1)
        check(dlv > 0 and req >= dlv + mrg,
              f'vCPU {cpu}: {req} requested >= {dlv} delivered + {mrg} merged, some delivered')
        check(0 <= dlv - took <= 3,
              f'vCPU {cpu}: {dlv} delivered, its guest CPU took {took} (at most the last 3 '
              'still in flight when it stopped counting)')
    print(f'{len(failures)} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
