#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The time backend under the emulator: real perf overflows (the host
event's records, which the emulator finds between blocks without a signal)
become guest PMIs at the programmed period of the emulator thread's CPU
time.

The timer-pmi guest samples fixed counter 1 (core cycles) with a PMI every
1 ms worth of cycles at the model's nominal clock (CPUID 15H) until 400
PMIs have come. The test reads the guest's serial output through a pty
(line by line, as it is printed) and samples the VMM thread's CPU time
(/proc/PID/schedstat: the scheduler's ns clock, which task-clock also
counts) when the guest says it starts and when it says it stopped, then
checks:

  * PMIs vs that CPU time window: 400 PMIs ~ window / 1 ms, within +-25%.
    Why 25%: the window is measured from outside, through a pty round trip
    of this process, which a loaded 2-CPU machine may deschedule for tens
    of ms on a ~400 ms window; the guest enables the counter a little
    after its line; the last period is partial (one PMI). There is no
    systematic error: both clocks are the scheduler's.
  * PMIs vs the host event's own running time (--verbose): within 2% (the
    same clock; only the partial last period differs).
  * PMIs vs the whole process's CPU time (rusage): never more than it
    allows (+5%), since cycles come only from CPU time.
  * every overflow the guest handled was a PMI request, every PMI the VMM
    delivered a guest interrupt (an overflow while the handler has the LVT
    masked is found by its second look, and its PMI dropped, as hardware
    does), and each request came from a host overflow record.

Also: --host-counters perf is refused under the emulator with one line
saying why, auto is exact there, and --verbose names the backend.

Usage: test-host-counters.py VPMU_VMM TIMER_PMI_KERNEL"""
import os
import pty
import re
import select
import subprocess
import sys
import time

VMM, KERNEL = sys.argv[1:3]
failures = []
PERIOD_MS = 1.0
PMIS = 400


def check(cond, what):
    print(('PASS: ' if cond else 'FAIL: ') + what, flush=True)
    if not cond:
        failures.append(what)


def cpu_ns(pid):
    """Sum of the exec runtime of every thread of `pid`, in ns."""
    total = 0
    for tid in os.listdir(f'/proc/{pid}/task'):
        with open(f'/proc/{pid}/task/{tid}/schedstat') as f:
            total += int(f.read().split()[0])
    return total


def run_timed():
    master, slave = pty.openpty()
    cmd = [VMM, '--accel', 'emu', '--cpu', 'Skylake-Server', '--host-counters', 'time',
           '--verbose', '--max-insns', '20000000000', KERNEL]
    print('test-host-counters: ' + ' '.join(cmd), flush=True)
    t_start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE, text=True)
    os.close(slave)
    out, buf, t0, t1 = [], b'', None, None
    deadline = time.monotonic() + 50
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 1.0)
        if not r:
            if p.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        buf += data
        while b'\n' in buf:
            line, buf = buf.split(b'\n', 1)
            line = line.decode(errors='replace').rstrip('\r')
            out.append(line)
            if line.startswith('timer-pmi: nominal clock') and t0 is None:
                t0 = cpu_ns(p.pid)
            elif re.match(r'timer-pmi: \d+ PMIs', line) and t1 is None:
                t1 = cpu_ns(p.pid)
    os.close(master)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read()
    wall = time.monotonic() - t_start
    sys.stdout.write('\n'.join(out) + '\n' + err)
    return p.returncode, out, err, t0, t1, ru.ru_utime + ru.ru_stime, wall


def guest_totals(text):
    """The guest's last line: overflows it handled and interrupts it took, in all."""
    m = re.search(r'^timer-pmi: in all (\d+) overflows, (\d+) interrupts', text, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def main():
    # perf makes no sense under the emulator: one line, exit 2
    p = subprocess.run([VMM, '--accel', 'emu', '--host-counters', 'perf', KERNEL],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2 and len(lines) == 1 and 'exclude_host' in lines[0],
          f'--host-counters perf refused under the emulator in one line: {p.stderr.strip()!r}')
    p = subprocess.run([VMM, '--accel', 'emu', '--verbose', '--max-insns', '1', KERNEL],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    check(re.search(r'^vpmu-vmm: --host-counters auto: using exact \(.+\)$', p.stderr, re.M),
          '--host-counters auto is exact on the emulator, with a reason')

    rc, out, err, t0, t1, proc_cpu, wall = run_timed()
    text = '\n'.join(out)
    check(rc == 1 and re.search(r'^SUMMARY: [1-9]\d* passed, 0 failed', text, re.M) is not None,
          f'the guest passed (exit status {rc})')
    check(re.search(r'^vpmu-vmm: --host-counters time: using time \(.+\)$', err, re.M),
          '--verbose names the time backend and why')
    m = re.search(r'^timer-pmi: (\d+) PMIs', text, re.M)
    guest_pmis = int(m.group(1)) if m else -1
    m = re.search(r'(\d+) overflows, (\d+) PMIs requested, (\d+) delivered', err)
    requested, delivered = (int(m.group(2)), int(m.group(3))) if m else (-1, -1)
    m = re.search(r'host-counter overflows: (\d+)', err)
    signals = int(m.group(1)) if m else -1
    m = re.search(r'fixed1 host event enabled (\d+) ns, running (\d+) ns', err)
    running_ms = int(m.group(2)) / 1e6 if m else -1
    window_ms = (t1 - t0) / 1e6 if t0 is not None and t1 is not None else -1
    print(f'test-host-counters: {guest_pmis} PMIs; VMM thread CPU in the guest\'s window '
          f'{window_ms:.1f} ms; host event running {running_ms:.1f} ms; process CPU '
          f'{proc_cpu * 1e3:.1f} ms; {signals} host overflows; wall {wall:.2f} s', flush=True)

    overflows_all, interrupts_all = guest_totals(text)
    m = re.search(r'vpmu \S+: .* (\d+) overflows, \d+ PMIs requested', err)
    host_overflows = int(m.group(1)) if m else -1
    check(PMIS <= guest_pmis < PMIS + 8 and requested == overflows_all and
          delivered == interrupts_all,
          f'{PMIS} PMIs seen by the guest ({guest_pmis}; a few more may land as it stops); every overflow a PMI request ({requested} requested, '
          f'{overflows_all} overflows in the guest); every delivered PMI a guest interrupt '
          f'({delivered} delivered, {interrupts_all} interrupts; the rest found the LVT masked)')
    check(host_overflows == requested and 0 < signals <= host_overflows,
          f'each PMI came from a host overflow ({host_overflows} overflows, {signals} of them '
          f'found by stopping the guest, the rest by its own MSR accesses)')
    if window_ms > 0:
        expect = window_ms / PERIOD_MS
        check(0.75 * expect <= guest_pmis <= 1.25 * expect,
              f'PMIs ~ CPU time x 2.1 GHz / 2.1M cycles: {guest_pmis} vs {expect:.1f} (+-25%)')
    else:
        check(False, 'the guest printed its start and end lines')
    check(running_ms > 0 and abs(guest_pmis - running_ms / PERIOD_MS) <= 0.02 * guest_pmis + 1,
          f'PMIs ~ the host event\'s running time / 1 ms: {guest_pmis} vs {running_ms:.1f} (+-2%)')
    check(guest_pmis <= 1.05 * proc_cpu * 1e3 / PERIOD_MS + 1,
          f'no more PMIs than the process CPU time allows ({proc_cpu * 1e3:.1f} ms)')
    kvm_time()
    print(f'test-host-counters: {len(failures)} failed')
    return 1 if failures else 0


def kvm_time():
    """The time backend on KVM: the overflow signal interrupts KVM_RUN.

    The vCPU thread's CPU time there is the guest's and the VMM's exit
    handling, and the guest runs on after its last PMI with the counter
    disabled (the host event stays open), so only the bound holds: never
    more PMIs than the host event's running time allows."""
    if not os.access('/dev/kvm', os.R_OK | os.W_OK):
        print('SKIP: --accel kvm --host-counters time: /dev/kvm is absent or not usable here')
        return
    p = subprocess.run([VMM, '--accel', 'kvm', '--host-counters', 'time', '--verbose', KERNEL],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    sys.stdout.write(p.stdout + p.stderr)
    if p.returncode == 2:
        print('SKIP: --accel kvm --host-counters time: this KVM cannot run the guest: ' +
              (p.stderr.strip().splitlines() or ['?'])[-1])
        return
    m = re.search(r'^timer-pmi: (\d+) PMIs', p.stdout, re.M)
    guest_pmis = int(m.group(1)) if m else -1
    m = re.search(r'(\d+) PMIs requested, (\d+) delivered', p.stderr)
    requested, delivered = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    m = re.search(r'PMIs \(\d+ NMIs\), \d+ RDPMC shadow refreshes, (\d+) signals', p.stderr)
    signals = int(m.group(1)) if m else -1
    m = re.search(r'fixed1 host event enabled (\d+) ns, running (\d+) ns', p.stderr)
    running_ms = int(m.group(2)) / 1e6 if m else -1
    check(p.returncode == 1 and re.search(r'^SUMMARY: [1-9]\d* passed, 0 failed', p.stdout, re.M),
          f'KVM: the guest passed (exit status {p.returncode})')
    overflows_all, interrupts_all = guest_totals(p.stdout)
    check(PMIS <= guest_pmis < PMIS + 8 and requested == overflows_all and
          delivered == interrupts_all,
          f'KVM: {PMIS} PMIs seen ({guest_pmis}); requested = the guest\'s overflows ({requested}, '
          f'{overflows_all}); delivered = its interrupts ({delivered}, {interrupts_all})')
    check(signals >= PMIS, f'KVM: each PMI came with a host overflow signal ({signals} signals)')
    check(0 < guest_pmis <= 1.02 * running_ms / PERIOD_MS + 1,
          f'KVM: no more PMIs than the host event ran ms: {guest_pmis} vs {running_ms:.1f} ms')


sys.exit(main())
