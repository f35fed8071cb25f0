#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A guest cannot flood the VMM's log: the toggle guest flips the enable
bit of a counter 100 000 times while the host refuses every host event
for it (perf_event_open failing with EMFILE through the fault-perf shim,
under the emulator and the time backend, so it runs on any host). The
vPMU logs one line for that counter and reason; --verbose's summary says
how often it repeated, and the guest runs to its end.

usage: test-log-flood.py VPMU_VMM TOGGLE_KERNEL FAULT_PERF_SHIM"""
import errno
import os
import re
import subprocess
import sys
import tempfile

VMM, KERNEL, SHIM = sys.argv[1:4]
TOGGLES = 100000
failures = []


def check(cond, what):
    print(('PASS: ' if cond else 'FAIL: ') + what, flush=True)
    if not cond:
        failures.append(what)


def main():
    with tempfile.TemporaryDirectory(prefix='vpmu-flood-') as tmp:
        hits = os.path.join(tmp, 'hits')
        asan = os.environ.get('ASAN_OPTIONS', '')
        env = dict(os.environ, LD_PRELOAD=os.path.abspath(SHIM),
                   VPMU_FAULT_PERF_ERRNO=str(errno.EMFILE), VPMU_FAULT_PERF_COUNT=hits,
                   # the shim comes before the sanitizer runtime in an ASan build
                   ASAN_OPTIONS=(asan + ':' if asan else '') + 'verify_asan_link_order=0')
        p = subprocess.run([VMM, '--accel', 'emu', '--host-counters', 'time', '--verbose', KERNEL],
                           capture_output=True, text=True, env=env, timeout=110)
        refused = open(hits).read().count('refused') if os.path.exists(hits) else 0
    sys.stdout.write(p.stdout)
    lines = p.stderr.splitlines()
    warnings = [l for l in lines if l.startswith('vpmu-vmm: vpmu: ')]
    for l in lines[:20]:
        print('stderr: ' + l)
    print(f'stderr: {len(lines)} lines in all')
    check(p.returncode == 1 and re.search(r'^SUMMARY: 1 passed, 0 failed', p.stdout, re.M) and
          f'enabled and disabled {TOGGLES} times' in p.stdout,
          f'the guest toggled {TOGGLES} times and passed (exit {p.returncode})')
    check(refused == TOGGLES, f'every enable asked the host, which refused: {refused}')
    check(len(warnings) == 1 and 'counter gp0' in warnings[0] and 'EMFILE' in warnings[0],
          f'one warning line for gp0 and EMFILE: {len(warnings)}')
    check(len(lines) <= 12, f'a handful of lines on stderr, summary included: {len(lines)}')
    check(re.search(r'^vpmu-vmm:   gp0: its warning above repeated %d times, not logged again$'
                    % (TOGGLES - 1), p.stderr, re.M),
          f'the summary says the warning repeated {TOGGLES - 1} times')
    print(f'{len(failures)} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
