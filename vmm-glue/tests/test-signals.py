#!/usr/bin/env python3
"""SIGINT and SIGTERM always stop vpmu-vmm cleanly: the run loop stops,
vpmu-vmm says where the guest was, prints its summary, removes its stats
socket and exits 130 / 143 -- also when it was started in the background
from a non-interactive shell, which starts it with SIGINT ignored. Then
50 runs with the signal at a random moment, before and after the socket
exists: no socket may be left behind.

Usage: test-signals.py VPMU_VMM FOREVER_KERNEL
"""
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import time

RUNS = 50
failures = 0


def check(cond, what):
    global failures
    print(f"{'PASS' if cond else 'FAIL'}: {what}")
    if not cond:
        failures += 1


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def background(vmm, kernel, tmp, sig):
    """Start vpmu-vmm as a background job of `sh -c`, signal it, check how it ended."""
    sock = os.path.join(tmp, "stats")
    out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    cmd = (f"{shlex.quote(vmm)} --accel emu --stats {shlex.quote(sock)} {shlex.quote(kernel)}"
           f" >{shlex.quote(out)} 2>{shlex.quote(err)} & echo $!; wait $!")
    sh = subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.PIPE, text=True,
                          start_new_session=True)
    pid = int(sh.stdout.readline())
    ready = wait_for(lambda: os.path.exists(sock) and
                     "forever: spinning" in open(out).read(), 60)
    check(ready, f"{signal.Signals(sig).name}: the guest runs and the stats socket exists")
    with open(f"/proc/{pid}/status") as f:
        ignored = int(next(l for l in f if l.startswith("SigIgn:")).split()[1], 16)
    check(not ignored & (1 << (signal.SIGINT - 1)),
          f"{signal.Signals(sig).name}: vpmu-vmm took SIGINT back from the shell's SIG_IGN")
    os.kill(pid, sig)
    try:
        rc = sh.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(sh.pid, signal.SIGKILL)
        sh.wait()
        rc = None
    stderr = open(err).read()
    name = signal.Signals(sig).name
    check(rc == 128 + sig, f"{name}: exit status {rc}, want {128 + sig}")
    check(f"vpmu-vmm: stopped by {name}; RIP 0x" in stderr,
          f"{name}: one line says where the guest was")
    check("vpmu-vmm: guest:" in stderr and "instructions" in stderr,
          f"{name}: the summary is printed")
    check(not os.path.exists(sock), f"{name}: the stats socket is gone")
    for line in stderr.splitlines():
        if "stopped by" in line:
            print(f"  {line}")


def timing_runs(vmm, kernel, tmp):
    stale = 0
    outcomes = {}
    for i in range(RUNS):
        sock = os.path.join(tmp, f"s{i}")
        sig = signal.SIGINT if i % 2 else signal.SIGTERM
        p = subprocess.Popen([vmm, "--accel", "emu", "--stats", sock, kernel],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(random.uniform(0, 0.15))
        p.send_signal(sig)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            check(False, f"run {i}: no exit 30 s after {sig.name}")
        outcomes[rc] = outcomes.get(rc, 0) + 1
        if os.path.exists(sock):
            stale += 1
            os.unlink(sock)
        # before main() installs the handlers the default action kills it: no socket then
        if rc not in (128 + sig, -sig):
            check(False, f"run {i}: {sig.name} gave exit status {rc}")
    print(f"test-signals: {RUNS} runs, exit statuses {dict(sorted(outcomes.items()))}, "
          f"{stale} stale sockets")
    check(stale == 0, f"{RUNS} signal-timing runs leave no stats socket behind ({stale})")


def main():
    vmm, kernel = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="vpmu-signals-") as tmp:
        background(vmm, kernel, tmp, signal.SIGINT)
        background(vmm, kernel, tmp, signal.SIGTERM)
        timing_runs(vmm, kernel, tmp)
    print(f"test-signals: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
