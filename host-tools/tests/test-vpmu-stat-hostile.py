#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""vpmu-stat against hostile fake servers: it believes only a server of
its own user or root (SO_PEERCRED); strings a server sends reach the
table and Prometheus labels with their control characters escaped; a NUL
or other raw byte a snapshot never holds (in a number, in a string) is
refused; endless, silent and deeply nested replies are refused. Every
refusal is one line on stderr, nothing on stdout, exit 1, and vpmu-stat's
memory stays bounded (its peak RSS, from wait4).

usage: test-vpmu-stat-hostile.py VPMU_STAT"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

STAT = sys.argv[1]
RSS_LIMIT_KB = 64 * 1024  # 16 MiB of reply at most, and the tool itself
failures = []

ESC = '\x1b[2J\x1b]0;owned\x07'  # clear screen, set the terminal title, bell


def check(cond, what):
    print(('PASS: ' if cond else 'FAIL: ') + what, flush=True)
    if not cond:
        failures.append(what)


def snapshot(model='Skylake-Server', backend='exact', vmm='vpmu-vmm', kind='gp', state='backed',
             event='INST_RETIRED.ANY_P', config=0x4300c0):
    """A snapshot as vpmu_stats_to_json() writes it (json.dumps escapes as it does);
    event None: "event": null, a counter the server has no name for."""
    fields = ['msr_reads', 'msr_writes', 'msr_faults', 'rdpmcs', 'syncs', 'backend_ops',
              'backend_reads', 'creates', 'overflows', 'pmis_requested', 'pmis_delivered',
              'global_status', 'global_ctrl', 'pebs_records', 'pebs_bytes', 'pebs_skipped',
              'pebs_deferred', 'walk_faults', 'pmis_merged']
    vcpu = {'index': 0, 'model': model, 'backend': backend, 'version': 4, 'seq': 7}
    vcpu.update({f: 1 for f in fields})
    vcpu['counters'] = [{'slot': 0, 'kind': kind, 'index': 0, 'config': config,
                         'event': event, 'count': 12345, 'time_enabled': 0, 'time_running': 0,
                         'time_discarded': 0,
                         'overflows': 0, 'creates': 1, 'updates': 1,
                         'flags': ['implemented', 'programmed', 'backed'], 'state': state,
                         'error': 0, 'log_repeats': 0}]
    doc = {'version': 1, 'vmm': vmm, 'pid': 4242, 'vcpus': [vcpu]}
    return (json.dumps(doc, ensure_ascii=True, separators=(',', ':')) + '\n').encode()


class Server:
    """One Unix socket that answers each connection with `reply` (bytes, or a callable)."""

    def __init__(self, path, reply):
        self.path, self.reply = path, reply
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.done = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            try:
                if callable(self.reply):
                    self.reply(c, self)
                else:
                    c.sendall(self.reply)
            except OSError:
                pass
            c.close()

    def close(self):
        self.done = True
        self.thread.join()
        self.sock.close()
        os.unlink(self.path)


def endless(c, srv):
    chunk = b' ' * 65536
    c.sendall(b'{"version":1,"vmm":"')
    while not srv.done:
        c.sendall(chunk)


def silent(c, srv):
    end = time.time() + 8
    while not srv.done and time.time() < end:
        time.sleep(0.05)


def run_measured(*args):
    """Like run_stat, with the peak RSS of that one child."""
    pid = os.fork()
    if pid == 0:
        try:
            out = os.open(os.path.join(TMP, 'out'), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            err = os.open(os.path.join(TMP, 'err'), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.execv(STAT, [STAT, *args])
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    with open(os.path.join(TMP, 'out'), 'rb') as f:
        out = f.read()
    with open(os.path.join(TMP, 'err'), 'rb') as f:
        err = f.read()
    return os.waitstatus_to_exitcode(status), out, err, ru.ru_maxrss


def refused_one_line(name, reply, pattern, args=()):
    path = os.path.join(TMP, name + '.sock')
    srv = Server(path, reply)
    try:
        t = time.time()
        rc, out, err, rss = run_measured(*args, path)
        took = time.time() - t
    finally:
        srv.close()
    text = err.decode(errors='replace')
    check(rc == 1 and not out and err.count(b'\n') == 1 and re.search(pattern, text),
          f'{name}: refused in one line ({text.strip()!r}, exit {rc}, {len(out)} bytes out)')
    check(rss < RSS_LIMIT_KB, f'{name}: peak RSS {rss} KiB (< {RSS_LIMIT_KB})')
    check(all(0x20 <= b < 0x7f for b in err.rstrip(b'\n')),
          f'{name}: the error line is printable ASCII')
    return took


NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LVALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r'^%s(?:\{%s=%s(?:,%s=%s)*\})? \S+$' % (NAME, NAME, LVALUE, NAME, LVALUE))


def hostile_strings():
    """Terminal escapes in every server string: shown escaped, never raw."""
    path = os.path.join(TMP, 'escapes.sock')
    doc = snapshot(model='Sky' + ESC, backend='exact' + ESC, vmm='vmm' + ESC, kind='gp' + ESC,
                   state='backed' + ESC, event='EV' + ESC)
    srv = Server(path, doc)
    try:
        table = subprocess.run([STAT, path], capture_output=True, timeout=60)
        prom = subprocess.run([STAT, '--prometheus', path], capture_output=True, timeout=60)
        js = subprocess.run([STAT, '--json', path], capture_output=True, timeout=60)
    finally:
        srv.close()
    for what, p in (('table', table), ('--prometheus', prom), ('--json', js)):
        bad = [b for b in p.stdout if (b < 0x20 and b != 0x0a) or b >= 0x7f]
        check(p.returncode == 0 and p.stdout and not bad,
              f'{what}: no control byte from the server reaches the output ({len(bad)} found)')
    t = table.stdout.decode()
    check('Sky\\x1b[2J\\x1b]0;owned\\x07' in t and 'EV\\x1b[2J' in t and 'vmm\\x1b' in t and
          'exact\\x1b[2J' in t,
          'table: the escapes are shown as \\xHH text')
    lines = prom.stdout.decode().splitlines()
    malformed = [l for l in lines if not l.startswith('#') and not SAMPLE.match(l)]
    check(lines and not malformed, f'--prometheus: every sample well-formed ({malformed[:2]})')
    check('model="Sky\\\\x1b[2J\\\\x1b]0;owned\\\\x07"' in prom.stdout.decode(),
          '--prometheus: the label carries \\\\xHH (a backslash, escaped, then xHH)')
    check(json.loads(js.stdout)[0]['vcpus'][0]['model'] == 'Sky' + ESC,
          '--json: the document as served, still valid JSON with its \\u escapes')


def names_from_the_catalogue():
    """A server that sends no event name ("event": null): vpmu-stat names the counter from
    libvpmu's catalogue of the vCPU's model, by its event select and unit
    mask (SDM Vol. 3B Table 21-1: C0H/00H is INST_RETIRED.ANY_P; fixed
    counter 0 counts INST_RETIRED.ANY), or says it does not know."""
    cases = [
        ('gp C0H/00H', snapshot(event=None), 'INST_RETIRED.ANY_P'),
        ('gp C4H/00H', snapshot(event=None, config=0x4300c4), 'BR_INST_RETIRED.ALL_BRANCHES'),
        ('fixed 0', snapshot(event=None, kind='fixed', config=0xb), 'INST_RETIRED.ANY'),
        ('gp, enable bits only', snapshot(event=None, config=0x430000), '(unknown event)'),
        ('a model without a catalogue', snapshot(event=None, model='Icelake-Server'),
         '(unknown event)'),
    ]
    for i, (what, doc, want) in enumerate(cases):
        path = os.path.join(TMP, f'names{i}.sock')
        srv = Server(path, doc)
        try:
            p = subprocess.run([STAT, path], capture_output=True, text=True, timeout=60)
        finally:
            srv.close()
        # the counter's row: COUNTER, GUEST EVENT, ENCODING ...
        shown = re.search(r'^ +(?:gp|fixed)0 +(.+?) +0x[0-9a-f]+ ', p.stdout, re.M)
        check(p.returncode == 0 and shown and shown.group(1) == want,
              f'no event name, {what}: shown as {want} ({shown.group(1) if shown else None})')


def other_user_server():
    """A server of another uid (nobody) is not believed, whatever it serves."""
    if os.geteuid() != 0:
        print('SKIP: a server of another uid: needs root to serve as nobody (uid 65534)')
        return
    d = os.path.join(TMP, 'nobody')
    os.mkdir(d)
    os.chmod(TMP, 0o711)
    os.chown(d, 65534, 65534)
    path = os.path.join(d, 'vm.sock')
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            os.chmod(path, 0o666)
            s.listen(4)
            os.write(w, b'x')
            s.settimeout(20)
            c, _ = s.accept()
            c.sendall(snapshot())
            c.close()
        except Exception:
            pass
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    rc, out, err, _ = run_measured(path)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    os.chmod(TMP, 0o700)
    text = err.decode(errors='replace')
    check(rc == 1 and not out and err.count(b'\n') == 1 and
          re.search(r'served by uid 65534 .*not by this user .* or root', text),
          f"another uid's server is refused in one line ({text.strip()!r})")


def main():
    global TMP
    TMP = tempfile.mkdtemp(prefix='vpmu-stat-hostile-')
    try:
        # the baseline: a well-formed snapshot of our own uid is read
        path = os.path.join(TMP, 'good.sock')
        srv = Server(path, snapshot())
        p = subprocess.run([STAT, path], capture_output=True, text=True, timeout=60)
        srv.close()
        check(p.returncode == 0 and 'INST_RETIRED.ANY_P' in p.stdout and
              re.search(r'PMIs: 1 requested, 1 delivered, 1 merged', p.stdout),
              f'a well-formed snapshot of this user is read ({p.stderr.strip()})')

        hostile_strings()
        names_from_the_catalogue()

        good = snapshot()
        nul_number = good.replace(b'"pid":4242', b'"pid":42\x0042')
        check(nul_number != good, 'the NUL case is built')
        refused_one_line('nul-in-number', nul_number, r'malformed reply')
        refused_one_line('nul-after-number', good.replace(b'"seq":7', b'"seq":7\x00'),
                         r'malformed reply')
        refused_one_line('raw-c1-csi-in-string', good.replace(b'Skylake', b'Sky\x9b2Jlake'),
                         r'malformed reply: byte 0x9b')
        refused_one_line('raw-del-in-string', good.replace(b'Skylake', b'Sky\x7flake'),
                         r'malformed reply: byte 0x7f')
        refused_one_line('raw-esc-in-string', good.replace(b'Skylake', b'Sky\x1blake'),
                         r'malformed reply')
        refused_one_line('deep-nesting', b'[' * 100000, r'malformed reply')
        refused_one_line('endless', endless, r'more than 16777216 bytes')
        took = refused_one_line('silent', silent, r'no snapshot within 5000 ms')
        check(took < 10, f'silent: given up after {took:.1f} s')
        refused_one_line('not-json', b'\x1b[2J hello', r'malformed reply')

        other_user_server()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print(f'{len(failures)} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
