#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""End-to-end test of the stats endpoint: boot the spin guest under
`vpmu-vmm --stats SOCK`, read it with vpmu-stat in every format while the
guest idles, check the figures against what the guest printed, disturb the
server with garbage clients, and check that the guest still finishes
normally and that the socket is removed (also on SIGINT/SIGTERM).

Usage: test-vpmu-stat.py VPMU_VMM SPIN_KERNEL VPMU_STAT"""
import json
import math
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import shutil
import tempfile
import threading
import time

VMM, KERNEL, STAT = sys.argv[1:4]
failures = []


def check(cond, what):
    print(('PASS: ' if cond else 'FAIL: ') + what)
    if not cond:
        failures.append(what)


def run_stat(*args, ok=True):
    p = subprocess.run([STAT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=60)
    if ok and p.returncode != 0:
        print(p.stderr)
    return p


# ---- a checker of the Prometheus text exposition format 0.0.4 -------------

NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*'
LVALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r'^(%s)(?:\{((?:%s=%s)(?:,%s=%s)*,?)?\})? (\S+)(?: (-?\d+))?$'
                    % (NAME, LABEL, LVALUE, LABEL, LVALUE))
LABEL_RE = re.compile(r'(%s)=(%s)' % (LABEL, LVALUE))
TYPES = {'counter', 'gauge', 'histogram', 'summary', 'untyped'}


def family_of(name, types):
    if name in types:
        return name
    for suffix in ('_bucket', '_count', '_sum'):
        if name.endswith(suffix) and types.get(name[:-len(suffix)]) in ('histogram', 'summary'):
            return name[:-len(suffix)]
    return name


def parse_prometheus(text):
    """Return {(name, frozenset(labels)): value}; raise ValueError on a format error."""
    types, helps, samples, done = {}, set(), {}, set()
    current = None
    if not text.endswith('\n'):
        raise ValueError('the exposition does not end with a newline')
    for n, line in enumerate(text.split('\n')[:-1], 1):
        if line.startswith('#'):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ('HELP', 'TYPE'):
                if not re.fullmatch(NAME, parts[2]):
                    raise ValueError(f'line {n}: bad metric name {parts[2]!r}')
                if parts[1] == 'TYPE':
                    if parts[2] in types:
                        raise ValueError(f'line {n}: second TYPE for {parts[2]}')
                    if parts[2] in done or any(family_of(k[0], types) == parts[2] for k in samples):
                        raise ValueError(f'line {n}: TYPE after samples of {parts[2]}')
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise ValueError(f'line {n}: bad TYPE line')
                    types[parts[2]] = parts[3]
                else:
                    if parts[2] in helps:
                        raise ValueError(f'line {n}: second HELP for {parts[2]}')
                    helps.add(parts[2])
            continue
        if not line.strip():
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f'line {n}: not a sample: {line!r}')
        name, labels, value = m.group(1), m.group(2) or '', m.group(3)
        fam = family_of(name, types)
        if fam not in types:
            raise ValueError(f'line {n}: sample of {name} before its TYPE line')
        if types[fam] == 'counter' and not name.endswith('_total'):
            raise ValueError(f'line {n}: counter {name} lacks the _total suffix')
        if fam != current:
            if fam in done:
                raise ValueError(f'line {n}: samples of {fam} are not grouped together')
            if current:
                done.add(current)
            current = fam
        try:
            v = float(value)
        except ValueError:
            raise ValueError(f'line {n}: value {value!r} is not a float')
        if value not in ('NaN', '+Inf', '-Inf') and math.isnan(v):
            raise ValueError(f'line {n}: bad value {value!r}')
        lbl = {}
        for lm in LABEL_RE.finditer(labels):
            if lm.group(1) in lbl:
                raise ValueError(f'line {n}: label {lm.group(1)} twice')
            lbl[lm.group(1)] = json.loads(lm.group(2).replace('\\n', '\\n'))
        key = (name, frozenset(lbl.items()))
        if key in samples:
            raise ValueError(f'line {n}: duplicate series {line!r}')
        samples[key] = v
    return samples


def prom_get(samples, name, **labels):
    found = [v for (n, lbl), v in samples.items() if n == name and set(labels.items()) <= lbl]
    if len(found) != 1:
        raise KeyError(f'{name} {labels}: {len(found)} series')
    return found[0]


def self_test_checker():
    good = ('# HELP a_total x\n# TYPE a_total counter\na_total{vm="p\\"q",c="1"} 3\n'
            '# TYPE b gauge\nb 1.5e3\n')
    parse_prometheus(good)
    for bad in ('a_total 1\n', '# TYPE a counter\na 1\n', '# TYPE a gauge\na{x="1} 1\n',
                '# TYPE a gauge\na one\n', '# TYPE a gauge\n# TYPE a gauge\na 1\n',
                '# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n'):
        try:
            parse_prometheus(bad)
        except ValueError:
            continue
        check(False, f'the exposition checker rejects {bad!r}')


# ---- the test --------------------------------------------------------------

# every vpmu-vmm started, killed at the end if still running (a failed check must not leave one)
started = []


def start_vmm(sock, wait_ready=True):
    p = subprocess.Popen([VMM, '--accel', 'emu', '--stats', sock, KERNEL], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    started.append(p)
    lines = []
    if wait_ready:
        for line in p.stdout:
            lines.append(line)
            if 'spin: ready' in line:
                break
    return p, lines


def wait_path(path, timeout=60):
    end = time.time() + timeout
    while not os.path.exists(path) and time.time() < end:
        time.sleep(0.02)
    return os.path.exists(path)


def garbage_clients(sock):
    """Junk senders, clients that never read, and a connect storm."""
    held = []
    for _ in range(8):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        held.append(s)	# never read, kept open past the server's deadline
    for _ in range(8):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        try:
            s.sendall(b'\x00GET / HTTP/1.0\r\n\r\n{"version":' + os.urandom(4096))
        except OSError:
            pass
        held.append(s)
    for _ in range(300):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sock)
        except OSError:
            pass
        s.close()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.shutdown(socket.SHUT_WR)	# half-closed right away
    held.append(s)
    return held


def connect_retrying(sock, timeout=10):
    """Connect; a full backlog (EAGAIN on a Unix socket) is retried, as vpmu-stat does."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(sock)
            return s
        except BlockingIOError:
            s.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def read_raw(sock):
    s = connect_retrying(sock)
    data = b''
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return data


def cred_check(sock):
    if os.geteuid() != 0:
        print('SKIP: SO_PEERCRED refusal: needs root to connect as another uid (nobody)')
        return
    os.chmod(os.path.dirname(sock), 0o711)	# nobody may reach the socket file...
    os.chmod(sock, 0o666)	# ...and open it: only SO_PEERCRED stops it now
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        result = b'error'
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = connect_retrying(sock)
            data = b''
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            result = b'got %d bytes' % len(data)
        except ConnectionResetError:
            result = b'got 0 bytes'
        except Exception as e:
            result = repr(e).encode()
        os.write(w, result)
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    result = os.read(r, 4096)
    os.close(r)
    os.chmod(sock, 0o600)
    check(result == b'got 0 bytes', f'a peer of another uid is refused by SO_PEERCRED ({result!r})')
    # and with the socket's own mode 0600 it cannot even connect
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock)
        except PermissionError:
            code = 0
        except Exception:
            code = 2
        os._exit(code)
    _, st = os.waitpid(pid, 0)
    os.chmod(os.path.dirname(sock), 0o700)
    check(os.WEXITSTATUS(st) == 0, 'mode 0600 keeps another uid from connecting')


def refused(args_sock, what, pattern):
    """vpmu-vmm --stats PATH refused before the guest runs: exit 2, one line."""
    p = subprocess.run([VMM, '--accel', 'emu', '--stats', args_sock, KERNEL], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode == 2 and p.stderr.count('\n') == 1 and re.search(pattern, p.stderr) and
          not p.stdout, f'{what}: refused in one line ({p.stderr.strip()!r}, exit {p.returncode})')


def as_user(uid, fn):
    """Run fn() in a child with uid/gid `uid`; its return value (an int) or -1."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(uid)
            os.setuid(uid)
            code = fn()
        except Exception as e:
            print(f'as_user: {e!r}')
        os._exit(code)
    _, st = os.waitpid(pid, 0)
    return os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1


def stale_socket(path):
    """A socket file nobody listens on, as a killed VMM leaves it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    return 0


def socket_path_checks(tmp):
    """The stats socket's path: shared directories, other users' sockets, the mode."""
    # a directory every user may write to, not sticky: refused, nothing created
    open_dir = os.path.join(tmp, 'open')
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    refused(os.path.join(open_dir, 'vm.sock'), 'a world-writable directory without the sticky bit',
            r'other users can write to directory .*open.* not sticky')
    check(os.listdir(open_dir) == [], 'nothing created in the world-writable directory')

    # a sticky shared directory (as /tmp): a new path is fine...
    shared = os.path.join(tmp, 'shared')
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    mine = os.path.join(shared, 'mine.sock')
    stale_socket(mine)
    p, _ = start_vmm(mine, wait_ready=False)
    up = wait_path_serving(mine)
    p.kill()
    p.communicate(timeout=60)
    check(up, 'sticky shared directory: a stale socket of ours is replaced and served')
    if os.path.exists(mine):
        os.unlink(mine)

    # ...another user's socket there is not ours to replace, not even as root
    if os.geteuid() != 0:
        print('SKIP: another user\'s socket in a sticky directory: needs root to make one as nobody')
    else:
        theirs = os.path.join(shared, 'theirs.sock')
        os.chmod(tmp, 0o711)  # nobody may reach the shared directory
        made = as_user(65534, lambda: stale_socket(theirs)) == 0
        os.chmod(tmp, 0o700)
        check(made and os.lstat(theirs).st_uid == 65534, "nobody's stale socket made")
        if not made:
            return
        refused(theirs, "another user's stale socket in a sticky directory",
                r'a socket of uid 65534 .*not this user.s to replace')
        st = os.lstat(theirs) if os.path.lexists(theirs) else None
        check(st is not None and stat.S_ISSOCK(st.st_mode) and st.st_uid == 65534,
              "the other user's socket is still there, still theirs")
        if st:
            os.unlink(theirs)

    # mode 0600 whatever the umask, and the process umask left alone
    private = os.path.join(tmp, 'umask0.sock')
    p = subprocess.Popen([VMM, '--accel', 'emu', '--stats', private, KERNEL],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: os.umask(0))
    up = wait_path_serving(private)
    mode = stat.S_IMODE(os.lstat(private).st_mode) if up else None
    umask = None
    try:
        with open(f'/proc/{p.pid}/status') as f:
            umask = re.search(r'^Umask:\s*(\d+)', f.read(), re.M).group(1)
    except (OSError, AttributeError):
        pass
    p.kill()
    p.communicate(timeout=60)
    check(up and mode == 0o600, f'umask 0: the socket is created 0600 (mode {mode and oct(mode)})')
    check(umask == '0000', f'the process umask is what it was (0000): {umask}')


def wait_path_serving(path, timeout=60):
    """The path exists and a client gets a snapshot from it."""
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            try:
                return read_raw(path).startswith(b'{')
            except OSError:
                pass
        time.sleep(0.05)
    return False


def main():
    self_test_checker()
    tmp = tempfile.mkdtemp(prefix='vpmu-stat-')
    try:
        return checks(tmp)
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait()
        # the test's own fake server socket is in there too
        shutil.rmtree(tmp, ignore_errors=True)


def checks(tmp):
    sock = os.path.join(tmp, 'vm.sock')
    vmm, lines = start_vmm(sock)
    out = ''.join(lines)
    m = re.search(r'fixed0 instructions (\d+), gp0 branches (\d+)', out)
    pm = re.search(r'gp1 PMIs (\d+)', out)
    if not m or not pm or 'spin: ready' not in out:
        vmm.kill()
        print(out, vmm.stderr.read())
        print('FAIL: the spin guest did not reach its waiting phase')
        return 1
    insns, branches, pmis = int(m.group(1)), int(m.group(2)), int(pm.group(1))
    print(f'guest: {insns} instructions, {branches} branches, {pmis} PMIs')

    st = os.lstat(sock)
    check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and
          st.st_uid == os.geteuid(), 'socket is ours with mode 0600')

    held = garbage_clients(sock)

    raw = json.loads(read_raw(sock))
    check(raw.get('version') == 1 and raw.get('vmm') == 'vpmu-vmm' and raw.get('pid') == vmm.pid,
          'raw snapshot: version, vmm, pid')

    # JSON
    p = run_stat('--json', sock, sock)
    check(p.returncode == 0, 'vpmu-stat --json exits 0')
    docs = json.loads(p.stdout)
    check(isinstance(docs, list) and len(docs) == 2, '--json: one document per PATH')
    v = docs[0]['vcpus'][0]
    ctr = {c['kind'] + str(c['index']): c for c in v['counters']}
    check(v['model'] == 'Skylake-Server' and v['backend'] == 'exact', '--json: model and backend')
    check(ctr['gp0']['count'] == branches and ctr['gp0']['event'] == 'BR_INST_RETIRED.ALL_BRANCHES'
          and ctr['gp0']['config'] == 0x4300c4 and ctr['gp0']['state'] == 'backed',
          '--json: gp0 counts the guest branches exactly')
    check(ctr['fixed0']['count'] == insns and ctr['fixed0']['event'] == 'INST_RETIRED.ANY',
          '--json: fixed0 counts the guest instructions')
    check(ctr['gp1']['overflows'] == pmis and ctr['gp1']['event'] == 'INST_RETIRED.ANY_P',
          '--json: gp1 overflowed once per PMI')
    check(v['pmis_requested'] == pmis and v['pmis_delivered'] == pmis, '--json: PMIs requested/delivered')
    check(ctr['gp2']['state'] == 'idle' and ctr['gp2']['event'] is None, '--json: idle counter')
    check(len(v['counters']) == 7 and v['version'] == 4 and v['msr_writes'] > 0,
          '--json: 4 GP + 3 fixed counters, stats fields (struct version 4)')
    check(v['pmis_merged'] == 0 and all(c['log_repeats'] == 0 for c in v['counters']),
          '--json: no merged PMI, no repeated log line')
    check(all(c['time_enabled'] == 0 and c['time_running'] == 0 and c['time_discarded'] == 0
              for c in v['counters']),
          '--json: the exact backend has no host times')
    for f in ('seq', 'msr_reads', 'msr_writes', 'msr_faults', 'rdpmcs', 'syncs', 'backend_ops',
              'backend_reads', 'creates', 'overflows', 'pmis_requested', 'pmis_delivered',
              'global_status', 'global_ctrl', 'pebs_records', 'pebs_bytes', 'pebs_skipped',
              'pebs_deferred', 'walk_faults', 'pmis_merged'):
        if not isinstance(v.get(f), int):
            check(False, f'--json: field {f}')

    # Prometheus
    p = run_stat('--prometheus', sock)
    check(p.returncode == 0, 'vpmu-stat --prometheus exits 0')
    try:
        s = parse_prometheus(p.stdout)
        check(prom_get(s, 'vpmu_counter_events_total', vm=sock, vcpu='0', counter='gp0',
                       event='BR_INST_RETIRED.ALL_BRANCHES') == branches, '--prometheus: gp0 branches')
        check(prom_get(s, 'vpmu_counter_events_total', counter='fixed0') == insns,
              '--prometheus: fixed0 instructions')
        check(prom_get(s, 'vpmu_pmis_delivered_total', vm=sock) == pmis and
              prom_get(s, 'vpmu_pmis_requested_total', vm=sock) == pmis, '--prometheus: PMIs')
        check(prom_get(s, 'vpmu_counter_overflows_total', counter='gp1') == pmis,
              '--prometheus: gp1 overflows')
    except (ValueError, KeyError) as e:
        print(p.stdout)
        check(False, f'--prometheus output: {e}')

    # libvirt
    p = run_stat('--libvirt', sock)
    perf = dict(re.findall(r'^\s*perf\.(\w+)=(\d+)$', p.stdout, re.M))
    check(p.returncode == 0 and perf.get('instructions') == str(insns) and
          perf.get('branch_instructions') == str(branches) and 'cpu_cycles' not in perf,
          f'--libvirt: perf.instructions and perf.branch_instructions ({perf})')

    # table, and --watch with rates (the counts are frozen: 0/s)
    p = run_stat(sock)
    check(p.returncode == 0 and re.search(r'gp0\s+BR_INST_RETIRED.ALL_BRANCHES\s+0x4300c4\s+'
                                          r'exact/backed\s+%d\s' % branches, p.stdout) and
          re.search(r'PMIs: %d requested, %d delivered' % (pmis, pmis), p.stdout),
          'table: gp0 row and PMIs')
    p = run_stat('--watch', '0.2', '--count', '2', sock)
    check(p.returncode == 0 and p.stdout.count('VM ' + sock) == 2 and
          re.search(r'fixed0\s+INST_RETIRED.ANY\s.*\s0\.0$', p.stdout, re.M),
          '--watch: two reads, rate 0.0/s for a frozen counter')

    # bad input: one line on stderr, non-zero exit
    for args, pat in ((['--bogus', sock], 'unknown'), ([os.path.join(tmp, 'none.sock')], 'none.sock'),
                      ([], 'no socket'), (['--watch', 'x', sock], 'watch')):
        p = run_stat(*args, ok=False)
        check(p.returncode != 0 and p.stderr.count('\n') == 1 and pat in p.stderr and not p.stdout,
              f'bad input {args}: one line ({p.stderr.strip()})')
    fake = os.path.join(tmp, 'fake.sock')
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(fake)
    srv.listen(4)

    def serve():
        for reply in (b'{"version": 1, "vcpus": [ {"index": 0', b'hello', b''):
            c, _ = srv.accept()
            c.sendall(reply)
            c.close()
    t = threading.Thread(target=serve)
    t.start()
    for what in ('truncated JSON', 'not JSON', 'empty reply'):
        p = run_stat(fake, ok=False)
        check(p.returncode != 0 and p.stderr.count('\n') == 1 and 'fake.sock' in p.stderr,
              f'malformed server reply ({what}): one line ({p.stderr.strip()})')
    t.join()
    srv.close()

    cred_check(sock)

    for s in held:
        s.close()
    rest, err = vmm.communicate(timeout=300)
    out += rest
    check(vmm.returncode == 1, f'the guest exits normally (status {vmm.returncode})')
    check('spin: done' in out and 'SUMMARY: 3 passed, 0 failed' in out, 'the guest output is complete')
    if vmm.returncode != 1:
        print(out, err)
    check(not os.path.exists(sock), 'the socket is gone after the guest exits')

    for sig in (signal.SIGTERM, signal.SIGINT):
        s2 = os.path.join(tmp, 'sig.sock')
        p, _ = start_vmm(s2, wait_ready=False)
        check(wait_path(s2), f'{sig.name}: the socket appears')
        p.send_signal(sig)
        p.communicate(timeout=60)
        check(p.returncode == 128 + sig and not os.path.exists(s2),
              f'{sig.name}: vpmu-vmm stops, exits {128 + sig} and removes the socket ({p.returncode})')

    socket_path_checks(tmp)

    print(f'{len(failures)} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
