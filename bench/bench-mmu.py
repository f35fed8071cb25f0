#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The emulator's software MMU at a multi-process kernel's scale: host CPU
time per MOV CR3 between address spaces, per guest page fault, and per
INVLPG, from vpmu-vmm --accel emu running guest-tests/demo/mmu.c.

usage: bench-mmu.py [--runs N] [--scale X] VPMU-VMM MMU.MB

Each event runs twice with the same n: with the event (event=on) and
without it (event=off: the same loop, the MOV CR3 or INVLPG left out and
the PTE left as it is), same setup, same image. The event's cost is

    (CPU(event=on) - CPU(event=off)) / n

so the VMM's start, the guest's setup (64 address spaces built) and the
loop's own instructions cancel. CPU time is the vpmu-vmm process's user +
system time (every thread; the window pages' SIGSEGVs and mmaps are system
time), from getrusage(RUSAGE_CHILDREN) around each run: the development
machine is shared and loaded, which stretches wall time but not CPU time.
The best (least) of --runs runs of each is kept; the runs go round-robin so
that a change of load hits every configuration alike.

The yardstick is one plain guest instruction: the same image's cr3 loop
without the event (loads from pages already mapped, 4 instructions a load)
run long, less its n=0 run, gives host CPU per guest instruction; each
event's cost is printed as that many plain instructions too. Instruction
counts are exact (--verbose's "guest: N instructions"), and each
configuration's must be the same every run.

Columns: µs per event; x plain: the event's cost in plain guest
instructions; +insns: guest instructions the event adds (the #PF
handler's, the MOV CR3's, and a constant few hundred over n from the
guest's last line, whose sum is longer with the event); maps: window pages
mapped per event (--verbose's "pages mapped on first touch", on less off,
over n); µs/map: the event's cost per page it made the emulator map
again. Then each event=on run's --verbose
memory line.

--scale X multiplies every n (and so the run time; default 1: about 6 s
of CPU per round of runs, 20 s in all). Exit status 0 when every run's
guest checked its sums (a stale translation shows as a wrong sum), 1 when
not, 2 for a usage error."""
import argparse
import os
import re
import resource
import subprocess
import sys
import time

TIMEOUT = 300
MEM = '512M'  # 64 x 1024 pages of frames, and the tables, from 16 MiB

# label, command-line words, n at --scale 1
EVENTS = [
    ('MOV CR3, K=2, 256 pages', 'work=cr3 k=2 pages=256', 200),
    ('MOV CR3, K=64, 256 pages', 'work=cr3 k=64 pages=256', 200),
    ('MOV CR3, K=64, 1024 pages', 'work=cr3 k=64 pages=1024', 50),
    ('#PF, then unmap + INVLPG', 'work=pf k=64 pages=256', 30000),
    ('INVLPG, PTE unchanged', 'work=invlpg k=64 pages=256', 400000),
    ('INVLPG, PTE to a new frame', 'work=remap k=64 pages=256', 30000),
]
PLAIN = ('work=cr3 k=64 pages=256 event=off', 100000)


class RunError(Exception):
    pass


def run(vmm, kernel, words):
    """(CPU s, guest instructions, memory line, guest's line) of one run; raises RunError
    unless the guest's sums checked out (exit status 1: isa-debug-exit 0)."""
    cmd = [vmm, '--accel', 'emu', '--mem', MEM, '--verbose', '--append', words, kernel]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RunError(f'{" ".join(cmd)}: still running after {TIMEOUT} s')
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 1:
        tail = '\n'.join((p.stdout + p.stderr).strip().splitlines()[-5:])
        raise RunError(f'{" ".join(cmd)}: exit status {p.returncode}, expected 1:\n{tail}')
    m = re.search(r'^vpmu-vmm: guest: (\d+) instructions', p.stderr, re.M)
    mem = re.search(r'^vpmu-vmm: (memory: .*)$', p.stderr, re.M)
    guest = re.search(r'^mmu: .*$', p.stdout, re.M)
    if not m or not mem or not guest:
        raise RunError(f'{" ".join(cmd)}: no "guest:" or "memory:" line (--verbose) or no '
                       'guest summary')
    return cpu, int(m.group(1)), mem.group(1), guest.group(0)


def pages_mapped(mem):
    return int(re.search(r'(\d+) pages mapped on first touch', mem).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--runs', type=int, default=3, help='runs of each, the best kept (3)')
    ap.add_argument('--scale', type=float, default=1.0, help='multiply every n (1)')
    ap.add_argument('vmm')
    ap.add_argument('kernel', help='build/guest-tests/mmu.mb')
    a = ap.parse_args()
    if a.runs < 1 or a.scale <= 0:
        ap.error('--runs takes a count of at least 1, --scale a positive factor')
    for path in (a.vmm, a.kernel):
        if not os.path.isfile(path):
            ap.error(f'{path}: no such file (build first: ninja -C build)')

    def scaled(n):
        return max(1, round(n * a.scale))

    runs = {}  # words -> None; the order they run in
    for _, words, n in EVENTS:
        for ev in ('on', 'off'):
            runs[f'{words} n={scaled(n)} event={ev}'] = None
    plain_words = f'{PLAIN[0]} n={scaled(PLAIN[1])}'
    zero_words = f'{PLAIN[0]} n=0'
    runs[plain_words] = runs[zero_words] = None

    load0 = os.getloadavg()
    t0 = time.monotonic()
    print(f'bench-mmu: {a.kernel} on {a.vmm} --accel emu --mem {MEM}; best of {a.runs} runs '
          f'each; load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the start')
    best = {}  # words -> [cpu, insns, memory line, guest line]
    try:
        for _ in range(a.runs):
            for words in runs:
                cpu, insns, mem, guest = run(a.vmm, a.kernel, words)
                b = best.setdefault(words, [cpu, insns, mem, guest])
                if insns != b[1]:
                    raise RunError(f'{words}: {insns} guest instructions, {b[1]} in an '
                                   'earlier run of the same guest')
                b[0] = min(b[0], cpu)
    except RunError as e:
        print(f'bench-mmu: {e}')
        return 1

    cpu_p, insns_p = best[plain_words][:2]
    cpu_z, insns_z = best[zero_words][:2]
    plain_insns = insns_p - insns_z
    plain_s = (cpu_p - cpu_z) / plain_insns if cpu_p > cpu_z else float('nan')
    print(f'\nplain guest instruction ({plain_words} less n=0): {plain_insns} instructions in '
          f'{cpu_p - cpu_z:.3f} s CPU: {plain_s * 1e9:.2f} ns each '
          f'({1e-6 / plain_s:.0f} M/s)')
    print(f'\n  {"event":<28} {"n":>6} {"CPU s on-off":>13} {"µs/event":>9} '
          f'{"x plain":>8} {"+insns":>7} {"maps":>7} {"µs/map":>7}')
    mems = []
    for label, words, n in EVENTS:
        n = scaled(n)
        on = best[f'{words} n={n} event=on']
        off = best[f'{words} n={n} event=off']
        per = (on[0] - off[0]) / n
        maps = (pages_mapped(on[2]) - pages_mapped(off[2])) / n
        per_map = f'{per / maps * 1e6:7.2f}' if maps >= 1 else f'{"-":>7}'
        print(f'  {label:<28} {n:>6} {on[0]:6.2f}-{off[0]:<6.2f} {per * 1e6:9.2f} '
              f'{per / plain_s:8.0f} {(on[1] - off[1]) / n:7.1f} {maps:7.1f} {per_map}')
        mems.append((f'{words} n={n}', on[2]))
    print('\n  --verbose of each event=on run:')
    for words, mem in mems:
        print(f'  {words:<38} {mem}')
    load1 = os.getloadavg()
    print(f'\nbench-mmu: µs/event = (best CPU s with the event - best without) / n; x plain '
          f'= that / one plain instruction\'s CPU time; {time.monotonic() - t0:.0f} s wall in '
          f'all; load average {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end')
    return 0


if __name__ == '__main__':
    sys.exit(main())
