#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Emulator speed against a peer: the same multiboot guest
(guest-tests/demo/peer.c) under qemu-system-x86_64's TCG and under
vpmu-vmm's emulator with the vPMU idle, every counter counting, GP0 PEBS
at period 10 000, and LBR on; guest instructions per second for each, the
ratios to QEMU and to vpmu-vmm counting, and the targets (issue 17).

usage: bench-peer.py [--runs N] [--loop-n N] [--sort-n N] [--qemu-scale K]
                     [--qemu PATH] VPMU-VMM PEER.MB

Each configuration runs its work (n) and a near-empty run (n=0) of the same
image, work and mode; the best (least) of --runs times of each is kept and
the empty one subtracted, so that what is left is the guest's own time, not
the VMM's start and exit. Times are the whole process's: wall clock, and
CPU time (user + system of every thread, os.wait4's rusage); rates and
ratios are on CPU time (the development machine is shared and loaded, which
stretches wall time but not CPU time); wall-clock rates are printed too.

Instruction counts: vpmu-vmm --verbose gives each run's exact guest count
("guest: N instructions"); the rate is (N(n) - N(0)) / time. QEMU counts
nothing, and is 10-20x faster, so it runs K times the work (n x K; K 20
for the loop, 10 for the sort, or --qemu-scale) to run about as long; its
count is K times vpmu-vmm idle's N(n) - N(0): the loop's iterations and
the sort's passes are identical (the sort refills from the same seed), so
the work's instructions are linear in n (the guest's final print of n and
its result differ by a few dozen instructions, below 1e-7 of the count).
Both VMMs' sort checksums must agree.

Without qemu-system-x86_64 one line says so and the vpmu-vmm figures are
printed alone. Exit status 0 when every run succeeded (targets missed are
reported, not failed: a benchmark on a shared machine), 1 when a run
failed, 2 for a usage error."""
import argparse
import os
import re
import selectors
import shutil
import subprocess
import sys
import time

MODES = ['idle', 'count', 'pebs', 'lbr']
WORKS = ['loop', 'sort']
TIMEOUT = 600
# QEMU's TCG runs this much more work than vpmu-vmm, about as long
QEMU_SCALE = {'loop': 20, 'sort': 10}

# the targets: (what, ratio name, minimum ratio) per work and mode
TARGETS = {
    ('loop', 'idle'): ('qemu', 0.5), ('sort', 'idle'): ('qemu', 0.5),
    ('loop', 'count'): ('qemu', 0.2), ('sort', 'count'): ('qemu', 0.33),
    # within 1.3x of counting: rate >= count's / 1.3
    ('loop', 'pebs'): ('count', 1 / 1.3), ('sort', 'pebs'): ('count', 1 / 1.3),
    ('loop', 'lbr'): ('count', 1 / 1.3), ('sort', 'lbr'): ('count', 1 / 1.3),
}


class RunError(Exception):
    pass


def run_measured(cmd):
    """(wall s, CPU s, stdout, stderr) of one run of cmd, its CPU time (every thread, user +
    system) from os.wait4; raises RunError unless the guest passed."""
    t0 = time.monotonic()
    with open(os.devnull, 'rb') as devnull:
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(devnull.fileno(), 0)
                os.dup2(w_out, 1)
                os.dup2(w_err, 2)
                for fd in (r_out, w_out, r_err, w_err):
                    os.close(fd)
                os.execvp(cmd[0], cmd)
            finally:
                os._exit(127)
    os.close(w_out)
    os.close(w_err)
    out, err = read_both(r_out, r_err, pid, t0)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 1:  # isa-debug-exit (0 << 1) | 1: the guest's work checked out
        tail = '\n'.join((out + err).strip().splitlines()[-5:])
        raise RunError(f'{" ".join(cmd)}: exit status {code}, expected 1:\n{tail}')
    return wall, ru.ru_utime + ru.ru_stime, out, err


def read_both(r_out, r_err, pid, t0):
    """Everything the child writes to its two pipes; kills it after TIMEOUT s."""
    sel = selectors.DefaultSelector()
    bufs = {r_out: [], r_err: []}
    for fd in bufs:
        sel.register(fd, selectors.EVENT_READ)
    while sel.get_map():
        left = TIMEOUT - (time.monotonic() - t0)
        if left <= 0:
            os.kill(pid, 9)
            left = 5
        for key, _ in sel.select(left):
            data = os.read(key.fd, 65536)
            if data:
                bufs[key.fd].append(data)
            else:
                sel.unregister(key.fd)
                os.close(key.fd)
    return (b''.join(bufs[r_out]).decode(errors='replace'),
            b''.join(bufs[r_err]).decode(errors='replace'))


def guest_insns(err):
    m = re.search(r'^vpmu-vmm: guest: (\d+) instructions', err, re.M)
    if not m:
        raise RunError('vpmu-vmm --verbose printed no "guest: N instructions" line')
    return int(m.group(1))


def checksum(out):
    m = re.search(r'checksum ([0-9a-f]+)', out)
    return m.group(1) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--runs', type=int, default=3, help='runs of each, the best kept (3)')
    ap.add_argument('--loop-n', type=int, default=100000000,
                    help='loop iterations, 4 instructions each (100000000)')
    ap.add_argument('--sort-n', type=int, default=2, help='sort passes, ~106M instructions each (2)')
    ap.add_argument('--qemu-scale', type=int,
                    help='QEMU runs this times n (default: 20 for the loop, 10 for the sort)')
    ap.add_argument('--qemu', default='qemu-system-x86_64', help='QEMU binary')
    ap.add_argument('vmm')
    ap.add_argument('kernel', help='guest-tests/peer.mb')
    a = ap.parse_args()
    if a.runs < 1 or a.loop_n < 1 or a.sort_n < 1 or (a.qemu_scale or 1) < 1:
        ap.error('--runs, --loop-n, --sort-n and --qemu-scale take a count of at least 1')
    for path in (a.vmm, a.kernel):
        if not os.path.isfile(path):
            ap.error(f'{path}: no such file (build first: ninja -C build)')

    qemu = shutil.which(a.qemu)
    if not qemu:
        print(f'bench-peer: {a.qemu} not found, so no QEMU TCG figures or ratios to QEMU '
              '(Debian: apt-get install qemu-system-x86)')
    work_n = {'loop': a.loop_n, 'sort': a.sort_n}

    def vmm_cmd(work, mode, n):
        return [a.vmm, '--accel', 'emu', '--mem', '64M', '--verbose',
                '--append', f'work={work} mode={mode} n={n}', a.kernel]

    def qemu_cmd(work, n):
        return [qemu, '-accel', 'tcg', '-cpu', 'max', '-m', '64', '-display', 'none',
                '-serial', 'stdio', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
                '-kernel', a.kernel, '-append', f'work={work} mode=idle n={n}']

    load0 = os.getloadavg()
    print(f'bench-peer: {a.kernel}; best of {a.runs} runs each; load average '
          f'{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the start')
    if qemu:
        ver = subprocess.run([qemu, '--version'], stdout=subprocess.PIPE, text=True).stdout
        print(f'bench-peer: {ver.splitlines()[0] if ver else qemu}, -accel tcg -cpu max')
    failed = False
    for work in WORKS:
        n = work_n[work]
        scale = a.qemu_scale or QEMU_SCALE[work]
        configs = [('vpmu-vmm', m) for m in MODES] + ([('qemu', 'idle')] if qemu else [])
        best = {}  # (vmm, mode, full?) -> [wall, cpu]
        insns = {}  # (mode, full?) -> exact count (vpmu-vmm)
        sums = {}
        try:
            # round-robin, so that a change of load hits every configuration alike
            for _ in range(a.runs):
                for vmm, mode in configs:
                    for full in (True, False):
                        if vmm == 'qemu':
                            cmd = qemu_cmd(work, n * scale if full else 0)
                        else:
                            cmd = vmm_cmd(work, mode, n if full else 0)
                        wall, cpu, out, err = run_measured(cmd)
                        k = (vmm, mode, full)
                        b = best.setdefault(k, [wall, cpu])
                        b[0], b[1] = min(b[0], wall), min(b[1], cpu)
                        if vmm == 'vpmu-vmm':
                            c = guest_insns(err)
                            if insns.setdefault((mode, full), c) != c:
                                raise RunError(f'vpmu-vmm work={work} mode={mode}: guest '
                                               f'instructions {c}, {insns[(mode, full)]} '
                                               'in an earlier run of the same guest')
                        if full and work == 'sort':
                            sums[(vmm, mode)] = checksum(out)
        except RunError as e:
            print(f'bench-peer: {e}')
            failed = True
            continue
        if work == 'sort' and len(set(sums.values())) != 1:
            print(f'bench-peer: sort checksums differ: {sums}')
            failed = True
        idle_insns = insns[('idle', True)] - insns[('idle', False)]
        print()
        if work == 'loop':
            print(f'work=loop n={n}: {idle_insns} guest instructions of vpmu-vmm idle '
                  f'(--verbose, n={n} less n=0; the loop is 4 x {n} = {4 * n})')
        else:
            print(f'work=sort n={n} (passes of 512 Ki words): {idle_insns} guest instructions '
                  f'of vpmu-vmm idle (--verbose, n={n} less n=0), checksum {sums.get(("vpmu-vmm", "idle"))}')
        if qemu:
            print(f'QEMU runs n={n * scale}, counted as {scale} x vpmu-vmm idle\'s '
                  'count (the work is linear in n; QEMU counts nothing itself)')
        rates = {}
        rows = []
        for vmm, mode in configs:
            wf, cf = best[(vmm, mode, True)]
            we, ce = best[(vmm, mode, False)]
            if vmm == 'qemu':
                count = idle_insns * scale
            else:
                count = insns[(mode, True)] - insns[(mode, False)]
            cpu, wall = cf - ce, wf - we
            rate = count / cpu if cpu > 0 else float('nan')
            wrate = count / wall if wall > 0 else float('nan')
            rates[(vmm, mode)] = rate
            rows.append((vmm, mode, count, cf, ce, wf, we, rate, wrate))
        print(f'  {"VMM, vPMU":<24} {"guest insns":>12} {"CPU s":>13} {"wall s":>13} '
              f'{"M/s CPU":>8} {"M/s wall":>9} {"xQEMU":>6} {"xcount":>6}  target')
        for vmm, mode, count, cf, ce, wf, we, rate, wrate in rows:
            name = 'QEMU TCG' if vmm == 'qemu' else f'vpmu-vmm {mode}'
            q = rates.get(('qemu', 'idle'))
            xq = f'{rate / q:6.3f}' if q else f'{"-":>6}'
            xc = f'{rate / rates[("vpmu-vmm", "count")]:6.3f}' if vmm == 'vpmu-vmm' else f'{"-":>6}'
            target = ''
            t = TARGETS.get((work, mode)) if vmm == 'vpmu-vmm' else None
            if t and t[0] == 'qemu':
                target = (f'>= {t[1]:g}x QEMU: ' + ('met' if rate / q >= t[1] else 'MISSED')
                          if q else f'>= {t[1]:g}x QEMU: no QEMU here')
            elif t:
                ratio = rates[('vpmu-vmm', 'count')] / rate
                target = f'<= 1.3x count\'s time ({ratio:.2f}x): ' + ('met' if ratio <= 1.3 else 'MISSED')
            print(f'  {name:<24} {count:>12} {cf:6.2f}-{ce:<6.2f} {wf:6.2f}-{we:<6.2f} '
                  f'{rate / 1e6:8.1f} {wrate / 1e6:9.1f} {xq} {xc}  {target}')
    load1 = os.getloadavg()
    print(f'\nbench-peer: CPU s and wall s: best run with the work - best n=0 run; rates '
          f'and ratios on CPU time; load average {load1[0]:.2f} {load1[1]:.2f} '
          f'{load1[2]:.2f} at the end')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
