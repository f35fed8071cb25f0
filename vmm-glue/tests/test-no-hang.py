#!/usr/bin/env python3
"""A guest gone wrong never hangs vpmu-vmm: it must end with exit status 2
and one line saying what happened, within the test's own deadline.
- jump0 (no IDT, then a jump to linear address 0): a triple fault. The old
  emulator read address 0 as "no stop address" and spun at 100 % CPU.
- excloop (every gate on an unmapped page, through IST): exceptions without
  end, which the old emulator delivered for ever.

- pagebits with 6 GiB of RAM: its test pages at 1 GiB lie inside RAM's
  physical range, which the emulator cannot map elsewhere: refused in one
  line, where the old emulator went on with the identity page.

Usage: test-no-hang.py VPMU_VMM KERNEL PHRASE BANNER [MEM [where]]
  PHRASE: what vpmu-vmm's one line must say; BANNER: the guest's last line;
  MEM: --mem (default 4M); where: the line must also say where the guest
  was (RIP, CPL, mode, paging, instructions retired)
"""
import re
import subprocess
import sys
import time

# emu_describe's words, which every line that ends a run carries
WHERE = (r'RIP 0x[0-9a-f]+, CPL [0-3], (64-bit mode|compatibility mode|32-bit protected mode), '
         r'paging (on|off), after [0-9]+ instructions')
DEADLINE = 30  # seconds: a hang, not a speed check (under load it takes well under one)


def main():
    vmm, kernel, phrase, banner = sys.argv[1:5]
    mem = sys.argv[5] if len(sys.argv) > 5 else "4M"
    # 'where': a run ended by the guest (a triple fault, an exception loop)
    # must say where it was; a layout refusal says what to do instead
    where = len(sys.argv) > 6 and sys.argv[6] == "where"
    cmd = [vmm, "--accel", "emu", "--mem", mem, kernel]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        print(f"FAIL: {' '.join(cmd)} still running after {DEADLINE} s: a hang")
        return 1
    wall = time.monotonic() - t0
    lines = [l for l in p.stderr.splitlines() if l.startswith("vpmu-vmm:")]
    print(f"test-no-hang: exit status {p.returncode} after {wall:.2f} s; stderr: {lines}")
    ok = True
    checks = [
        (p.returncode == 2, "exit status 2 (vpmu-vmm's own error)"),
        (len(lines) == 1, "exactly one vpmu-vmm line"),
        (bool(lines) and phrase in lines[0], f"the line says {phrase!r}"),
        (not where or (bool(lines) and re.search(WHERE, lines[0]) is not None),
         "the line says where the guest was: RIP, CPL, mode, paging and instructions retired"),
        (banner in p.stdout, "the guest ran up to its last line"),
    ]
    for cond, what in checks:
        print(f"{'PASS' if cond else 'FAIL'}: {what}")
        ok &= cond
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
