#!/usr/bin/env python3
"""A guest gone wrong never hangs vpmu-vmm: jump0 (no IDT, then a jump to
linear address 0) must end with exit status 2 and one line saying what
happened, within the test's own deadline. The old emulator read address 0
as "no stop address" and spun at 100 % CPU forever.

Usage: test-no-hang.py VPMU_VMM JUMP0_KERNEL
"""
import subprocess
import sys
import time

DEADLINE = 30  # seconds: a hang, not a speed check (under load it takes well under one)


def main():
    vmm, kernel = sys.argv[1], sys.argv[2]
    cmd = [vmm, "--accel", "emu", "--mem", "4M", kernel]
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
        (bool(lines) and "triple fault" in lines[0], "the line says triple fault"),
        ("jump0: no IDT, jumping to 0" in p.stdout, "the guest ran up to the jump"),
    ]
    for cond, what in checks:
        print(f"{'PASS' if cond else 'FAIL'}: {what}")
        ok &= cond
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
