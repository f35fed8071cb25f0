#!/usr/bin/env python3
"""The shared library exports exactly the functions of the public headers
(every VPMU_API declaration in them), and the version script lists exactly
those."""
import os
import re
import subprocess
import sys

nm, header, mapfile, lib = sys.argv[1:5]
headers = [os.path.join(header, f) for f in sorted(os.listdir(header)) if f.endswith('.h')]
declared = set()
for h in headers:
    declared |= set(re.findall(r'^VPMU_API\s[^;(]*?\b(vpmu_\w+)\s*\(', open(h).read(), re.M))
mapped = set(re.findall(r'^\s*(vpmu_\w+);', open(mapfile).read(), re.M))
out = subprocess.run([nm, '-D', '--defined-only', lib], check=True, capture_output=True, text=True).stdout
exported = {l.split()[-1].split('@')[0] for l in out.splitlines() if ' T ' in l}
ok = True
for name, got in (('exported by ' + lib, exported), ('listed in ' + mapfile, mapped)):
    for s in sorted(declared - got):
        print(f'{s}: declared in the header but not {name}')
        ok = False
    for s in sorted(got - declared):
        print(f'{s}: {name} but not declared in the header')
        ok = False
print(f'{len(declared)} API functions, {len(exported)} exported, {len(mapped)} in the map')
sys.exit(0 if ok and declared else 1)
