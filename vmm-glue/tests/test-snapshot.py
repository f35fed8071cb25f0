#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Snapshot and restore on the emulator never change what a guest does.

usage: test-snapshot.py VMM MODEL KERNEL...

For each KERNEL (counting, PEBS, LBR and PMI guests) on CPU model MODEL:
one uninterrupted run, then the same guest split in two at several
points -- `vpmu-vmm --save-at N FILE KERNEL`, then `vpmu-vmm --restore
FILE` in a new process -- and the two parts' guest output, joined, must
equal the uninterrupted run's byte for byte, with the same exit status.
The points: before the first instruction; around the first three PMIs the
uninterrupted run raised (one instruction before the overflow, at it: the
PMI delivered, and a few instructions into the handler); and random
points from a fixed seed (printed; VPMU_SNAPSHOT_SEED overrides it). One
point is split twice (restore, save again, restore) to check a restored
guest saves as well as a booted one."""
import os
import random
import re
import subprocess
import sys
import tempfile
import zlib

MAX_INSNS = '50000000'
RANDOM_POINTS = 5
failures = 0


def check(cond, what):
    global failures
    print(f"{'PASS' if cond else 'FAIL'}: {what}", flush=True)
    if not cond:
        failures += 1


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)


def save(vmm, model, n, path, kernel=None, restore=None):
    """The first part: run to instruction n and save. Returns (process, K saved after)."""
    cmd = [vmm, '--accel', 'emu', '--max-insns', MAX_INSNS]
    if restore:
        cmd += ['--save-at', str(n), path, '--restore', restore]
    else:
        cmd += ['--cpu', model, '--save-at', str(n), path, kernel]
    p = run(cmd)
    m = re.fullmatch(rb'vpmu-vmm: saved after (\d+) instructions to (.*)\n', p.stderr)
    ok = p.returncode == 0 and m is not None and m.group(2).decode() == path
    if not ok:
        print(f'  {" ".join(cmd)}: exit {p.returncode}, stderr {p.stderr[-400:]!r}')
    return p, int(m.group(1)) if ok else -1, ok


def split(vmm, model, kernel, full, n, tmp, label):
    path = os.path.join(tmp, 'guest.snap')
    a, k, ok = save(vmm, model, n, path, kernel=kernel)
    if not ok:
        check(False, f'{label}: --save-at {n} saves and exits 0 with one line')
        return
    b = run([vmm, '--accel', 'emu', '--max-insns', MAX_INSNS, '--restore', path])
    same = a.stdout + b.stdout == full.stdout
    check(same and b.returncode == full.returncode and k >= n,
          f'{label}: saved after {k} (>= {n}) instructions, restored: output '
          f'{"identical" if same else "DIFFERENT"} ({len(a.stdout)} + {len(b.stdout)} bytes), '
          f'exit {b.returncode} (uninterrupted {full.returncode})')
    if not same:
        whole, joined = full.stdout.decode(errors='replace'), (a.stdout + b.stdout).decode(
            errors='replace')
        at = next((i for i, (x, y) in enumerate(zip(whole, joined)) if x != y),
                  min(len(whole), len(joined)))
        print(f'  first difference at byte {at}: uninterrupted {whole[at:at + 120]!r}, '
              f'split {joined[at:at + 120]!r}')
        print(f'  restore stderr: {b.stderr[-400:]!r}')
    os.unlink(path)


def split_twice(vmm, model, kernel, full, n1, n2, tmp, label):
    p1, p2 = os.path.join(tmp, 'one.snap'), os.path.join(tmp, 'two.snap')
    a, k1, ok1 = save(vmm, model, n1, p1, kernel=kernel)
    b, k2, ok2 = save(vmm, model, n2, p2, restore=p1) if ok1 else (None, -1, False)
    if not (ok1 and ok2):
        check(False, f'{label}: saved at {n1}, restored and saved again at {n2}')
        return
    c = run([vmm, '--accel', 'emu', '--max-insns', MAX_INSNS, '--restore', p2])
    same = a.stdout + b.stdout + c.stdout == full.stdout
    check(same and c.returncode == full.returncode,
          f'{label}: saved after {k1}, restored and saved again after {k2}, restored: output '
          f'{"identical" if same else "DIFFERENT"}, exit {c.returncode}')
    os.unlink(p1)
    os.unlink(p2)


def main():
    vmm, model, kernels = sys.argv[1], sys.argv[2], sys.argv[3:]
    seed = int(os.environ.get('VPMU_SNAPSHOT_SEED', str(zlib.crc32(model.encode()) % 100000)))
    print(f'test-snapshot: model {model}, seed {seed} (VPMU_SNAPSHOT_SEED={seed} repeats it)')
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix='vpmu-snapshot-') as tmp:
        for kernel in kernels:
            name = os.path.basename(kernel)
            full = run([vmm, '--accel', 'emu', '--cpu', model, '--verbose', '--max-insns',
                        MAX_INSNS, kernel])
            m = re.search(rb'^vpmu-vmm: guest: (\d+) instructions', full.stderr, re.M)
            check(full.returncode in (1, 3) and m is not None,
                  f'{name}: the uninterrupted run exits {full.returncode}')
            if not m:
                continue
            total = int(m.group(1))
            pm = re.search(rb'^vpmu-vmm: the first PMIs came after these instructions: (.*)$',
                           full.stderr, re.M)
            pmis = [int(x) for x in pm.group(1).split()] if pm else []
            print(f'{name}: {total} instructions, first PMIs at {pmis}')
            points = [(0, 'before the first instruction')]
            for p in pmis[:3]:
                points += [(p - 1, f'one instruction before the overflow at {p}'),
                           (p, f'at the overflow at {p} (PMI delivered)'),
                           (p + 5, f'in the PMI handler ({p} + 5)')]
            points += [(rng.randrange(1, total), 'random') for _ in range(RANDOM_POINTS)]
            for n, why in points:
                if n < total:
                    split(vmm, model, kernel, full, n, tmp, f'{name} {model} at {n}, {why}')
            a, b = sorted(rng.sample(range(1, total), 2))
            split_twice(vmm, model, kernel, full, a, b, tmp, f'{name} {model} at {a} and {b}')
    print(f'test-snapshot: {failures} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
