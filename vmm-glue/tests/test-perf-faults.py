#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Host-backend faults never stop vpmu-vmm (issue: real host counters).

The cycles guest programs fixed counter 1 and GP counter 0 on core cycles
and GP counter 1 on instructions, runs a loop and prints the counts. Under
--host-counters time on the emulator:

  * no fault: the two cycle counters count (the emulator thread's CPU time
    at the model's clock), GP 1 is unbacked (the time backend has no
    instructions), and vpmu-vmm says so;
  * perf_event_open failing with EMFILE, ENOENT, EOPNOTSUPP, EACCES, EBUSY
    (fault-perf.so, LD_PRELOAD): the guest still runs to its end and passes,
    reads 0 from every counter (nothing counts), the stats summary marks each
    counter unbacked with the errno's text, and the vPMU logs one warning
    line per counter naming the errno and what to do.

--kvm: --accel kvm --host-counters perf instead (a separate meson test,
skipped with exit 77 and one line where /dev/kvm is absent or this KVM
cannot run the guest): on a host without a hardware PMU (this project's
machines) the counters are unbacked with a line saying why and the guest
runs on; with one, they count.

Usage: test-perf-faults.py [--kvm] VPMU_VMM CYCLES_KERNEL [FAULT_PERF_SO]"""
import errno
import os
import re
import subprocess
import sys
import tempfile

ARGS = sys.argv[1:]
KVM = ARGS[:1] == ['--kvm']
VMM, KERNEL = ARGS[KVM:KVM + 2]
SHIM = None if KVM else ARGS[2]
SKIP = 77
failures = []


def check(cond, what):
    print(('PASS: ' if cond else 'FAIL: ') + what, flush=True)
    if not cond:
        failures.append(what)


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([VMM, '--verbose'] + args + [KERNEL], capture_output=True, text=True,
                       env=e, timeout=100)
    m = re.search(r'^cycles: fixed1 (\d+) gp0 (\d+) gp1 (\d+)$', p.stdout, re.M)
    counts = tuple(int(x) for x in m.groups()) if m else None
    summary = {}
    for c in re.finditer(r'^vpmu-vmm:   (\w+) config \S+ count (\d+) overflows \d+(.*)$',
                         p.stderr, re.M):
        summary[c.group(1)] = c.group(3).strip()
    warnings = re.findall(r'^vpmu-vmm: vpmu: (.*)$', p.stderr, re.M)
    return p, counts, summary, warnings


def guest_passed(p):
    return p.returncode == 1 and re.search(r'^SUMMARY: 2 passed, 0 failed', p.stdout, re.M)


def main():
    if KVM:
        return kvm_perf()
    # no fault: the baseline the faults are compared with
    p, counts, summary, warnings = run(['--accel', 'emu', '--host-counters', 'time'])
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    check(guest_passed(p), 'no fault: the guest passes')
    check(counts and counts[0] > 0 and counts[1] > 0 and counts[2] == 0,
          f'no fault: cycles count on fixed 1 and GP 0, GP 1 (instructions) does not: {counts}')
    check(summary.get('fixed1') == '' and summary.get('gp0') == '' and
          summary.get('gp1', '').startswith('(unbacked'),
          f'no fault: stats: fixed1 and gp0 backed, gp1 unbacked: {summary}')

    with tempfile.TemporaryDirectory() as tmp:
        hits = os.path.join(tmp, 'hits')
        asan = os.environ.get('ASAN_OPTIONS', '')
        for name in ('EMFILE', 'ENOENT', 'EOPNOTSUPP', 'EACCES', 'EBUSY'):
            err = getattr(errno, name)
            if os.path.exists(hits):
                os.unlink(hits)
            p, counts, summary, warnings = run(
                ['--accel', 'emu', '--host-counters', 'time'],
                {'LD_PRELOAD': os.path.abspath(SHIM), 'VPMU_FAULT_PERF_ERRNO': str(err),
                 'VPMU_FAULT_PERF_COUNT': hits,
                 # the shim comes before the sanitizer runtime in an ASan build
                 'ASAN_OPTIONS': (asan + ':' if asan else '') + 'verify_asan_link_order=0'})
            refused = open(hits).read().count('refused') if os.path.exists(hits) else 0
            print(f'{name}: vpmu-vmm exit {p.returncode}, counts {counts}, '
                  f'{refused} perf_event_open refused, summary {summary}')
            for w in warnings:
                print(f'  warning: {w}')
            check(refused >= 2, f'{name}: the fault was hit ({refused} refusals)')
            check(guest_passed(p), f'{name}: the VMM kept running and the guest passed')
            check(counts == (0, 0, 0), f'{name}: the guest sees counters that do not count')
            text = os.strerror(err)
            check(summary.get('fixed1') == f'(unbacked: {text})' and
                  summary.get('gp0') == f'(unbacked: {text})',
                  f'{name}: stats mark fixed1 and gp0 unbacked with "{text}"')
            named = [w for w in warnings if name in w and 'it does not count' in w]
            check(len(named) >= 2 and any('fixed1' in w for w in named) and
                  any('gp0' in w for w in named),
                  f'{name}: one warning line per counter names {name}')
            check(p.stderr.count('\n') < 40, f'{name}: no flood of messages')
    print(f'test-perf-faults: {len(failures)} failed')
    return 1 if failures else 0


def kvm_perf():
    """The perf backend on KVM."""
    if not os.access('/dev/kvm', os.R_OK | os.W_OK):
        print('SKIP: --accel kvm --host-counters perf: /dev/kvm is absent or not usable here')
        return SKIP
    p, counts, summary, warnings = run(['--accel', 'kvm', '--host-counters', 'perf'])
    m = re.search(r'^vpmu-vmm: --accel kvm: (.*)$', p.stderr, re.M)
    if p.returncode == 2 and m:
        print(f'SKIP: --accel kvm --host-counters perf: this KVM cannot run the guest: '
              f'{m.group(1)}')
        return SKIP
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if re.search(r'host has no hardware PMU', p.stderr):
        check(guest_passed(p), 'perf on KVM without a host PMU: the guest runs and passes')
        check(counts == (0, 0, 0), f'perf on KVM without a host PMU: nothing counts: {counts}')
        check(all(summary.get(c, '').startswith('(unbacked: ') for c in ('fixed1', 'gp0', 'gp1')),
              f'perf on KVM without a host PMU: stats mark the counters unbacked: {summary}')
        check(len([w for w in warnings if 'it does not count' in w]) == 3 and
              any('no hardware PMU' in w for w in warnings),
              'perf on KVM without a host PMU: a line says so, and one per counter')
    else:
        check(guest_passed(p) and counts and counts[0] > 0 and counts[1] > 0 and counts[2] > 0,
              f'perf on KVM with a host PMU: the counters count: {counts}')
    print(f'test-perf-faults: {len(failures)} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
