#!/usr/bin/env python3
"""libvpmu's ABI against its committed baseline (vpmu/abi/<soname>.abi).

Fails when:
  - abidiff finds a change a program built against the baseline would
    notice: a function or type changed or removed (appending to the
    extensible structs is allowed: suppressions.abignore);
  - a function was added to a symbol version node the baseline already
    has (new functions go in a new node, vpmu/libvpmu.map);
  - there is no baseline for the library's soname (after a soversion bump).
An incompatible change passes only with the soversion bumped and a new
baseline written by tools/abi-baseline, together.
Exit 77 (skipped) when abidiff is not installed.
"""
import os
import re
import subprocess
import sys

abidiff, nm, abi_dir, lib, soname = sys.argv[1:6]
baseline = os.path.join(abi_dir, soname + '.abi')
suppressions = os.path.join(abi_dir, 'suppressions.abignore')
bump = ('bump soversion in vpmu/meson.build and run tools/abi-baseline, or undo the change')

if not abidiff:
    print('skipped: abidiff not installed (Debian package abigail-tools)')
    sys.exit(77)
if not os.path.exists(baseline):
    print(f'{soname}: no ABI baseline {baseline}: run tools/abi-baseline to write one')
    sys.exit(1)
text = open(baseline).read()
m = re.search(r"<abi-corpus [^>]*soname='([^']*)'", text)
if not m or m.group(1) != soname:
    print(f'{baseline}: written for {m.group(1) if m else "no soname"}, not {soname}')
    sys.exit(1)

ok = True
r = subprocess.run([abidiff, '--no-added-syms', '--suppressions', suppressions, baseline, lib],
                   capture_output=True, text=True)
if r.returncode != 0:
    print(r.stdout + r.stderr)
    print(f'{soname}: incompatible ABI change against {baseline} (abidiff exit {r.returncode}, '
          f'above): {bump}')
    ok = False

# New functions: in a version node the baseline does not have.
old = {(n, v) for n, v in re.findall(r"<elf-symbol name='([^']*)' version='([^']*)'", text)}
old_nodes = {v for _, v in old}
out = subprocess.run([nm, '-D', '--defined-only', lib], check=True, capture_output=True,
                     text=True).stdout
new = set()
for line in out.splitlines():
    f = line.split()
    if len(f) == 3 and f[1] == 'T' and '@' in f[2]:
        name, ver = re.split(r'@+', f[2], maxsplit=1)
        new.add((name, ver))
for name, ver in sorted(new - old):
    if ver in old_nodes and name not in {n for n, _ in old}:
        print(f'{name}@{ver}: a new function in version node {ver}, which {baseline} '
              f'already has: give it a new node (VPMU_0.N) in vpmu/libvpmu.map')
        ok = False
print(f'{soname}: {len(old)} baseline symbols, {len(new - old)} added, '
      f'{"compatible" if ok else "INCOMPATIBLE"}')
sys.exit(0 if ok else 1)
