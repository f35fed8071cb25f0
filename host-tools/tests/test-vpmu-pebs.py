#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""vpmu-pebs against dumps built by vpmu/pebs-record.c (gen-pebs-dumps):
the decoded values equal the ones the records were built from; damaged
files give exactly one line on stderr and exit 1, never a crash."""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

PEBS, GEN = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([PEBS, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def subset(want, got, path):
    """Every key of want is in got with the same value (recursively)."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            check(False, f"{path}: want an object, got {got!r}")
            return
        for k, v in want.items():
            if k not in got:
                check(False, f"{path}.{k} missing")
            else:
                subset(v, got[k], f"{path}.{k}")
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            check(False, f"{path}: want {len(want)} items, got {got!r:.200}")
            return
        for i, (w, g) in enumerate(zip(want, got)):
            subset(w, g, f"{path}[{i}]")
    else:
        check(want == got, f"{path}: want {want!r}, got {got!r}")


def one_error_line(rc, out, err, what=None):
    if what is None:  # called as (rc, err, what)
        out, err, what = None, out, err
    lines = err.splitlines()
    check(rc == 1, f"{what}: exit {rc}, want 1")
    check(len(lines) == 1 and lines[0].startswith("vpmu-pebs: "),
          f"{what}: want exactly one 'vpmu-pebs:' line on stderr, got {err!r:.500}")


with tempfile.TemporaryDirectory() as d:
    subprocess.run([GEN, d], check=True)
    with open(os.path.join(d, "expected.json")) as f:
        expected = json.load(f)

    # Round trip through the real program.
    for dump in expected:
        path = os.path.join(d, dump["file"])
        rc, out, err = run("--json", path)
        check(rc == 0 and err == "", f"{dump['file']}: exit {rc}, stderr {err!r}")
        doc = json.loads(out)
        check(doc["error"] is None, f"{dump['file']}: error {doc['error']}")
        check(doc["model"] == dump["model"], f"{dump['file']}: model")
        check(doc["perf_capabilities"] == dump["perf_capabilities"], f"{dump['file']}: caps")
        check(doc["decoded"] == dump["decoded"], f"{dump['file']}: decoded count")
        subset(dump["records"], doc["records"], dump["file"])
        # Text mode works too and ends with the count.
        rc, out, err = run(path)
        check(rc == 0 and out.endswith(f"{dump['decoded']} records\n"),
              f"{dump['file']}: text mode rc {rc}")
    print(f"round trip: {sum(x['decoded'] for x in expected)} records in {len(expected)} dumps")

    # --help, usage errors.
    rc, out, err = run("--help")
    check(rc == 0 and "Usage" in out and err == "", "--help")
    one_error_line(*run(), "no file")
    one_error_line(*run("--bogus", "x"), "unknown option")
    one_error_line(*run(os.path.join(d, "does-not-exist")), "missing file")

    with open(os.path.join(d, "fmt4.bin"), "rb") as f:
        good4 = f.read()
    with open(os.path.join(d, "arch.bin"), "rb") as f:
        good_arch = f.read()
    HDR = 112

    def bad(name, data):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def records_len(data, n):
        return data[:104] + struct.pack("<Q", n) + data[112:]

    one_error_line(*run(bad("short", good4[:50])), "shorter than a header")
    one_error_line(*run(bad("magic", b"XXXXXXXX" + good4[8:])), "bad magic")
    one_error_line(*run(bad("version", good4[:8] + struct.pack("<I", 9) + good4[12:])),
                   "bad version")
    one_error_line(*run(bad("hsize", good4[:12] + struct.pack("<I", 1 << 31) + good4[16:])),
                   "impossible header size")
    one_error_line(*run(bad("trunc", good4[:-7])), "truncated records")
    one_error_line(*run(bad("huge", records_len(good4, 1 << 62))), "impossible records_len")
    fmt2 = good4[:48] + struct.pack("<Q", 2 << 8) + good4[56:]
    one_error_line(*run(bad("fmt2", fmt2)), "unsupported format")

    # A record whose size runs past the end: decode stops there, says where.
    second = HDR + 32  # first fmt4 record is basic-only (32 bytes)
    q = struct.unpack_from("<Q", good4, second)[0]
    past = bytearray(good4)
    struct.pack_into("<Q", past, second, (q & ((1 << 48) - 1)) | (0xfff0 << 48))
    p = bad("past", bytes(past))
    rc, out, err = run("--json", p)
    one_error_line(rc, err, "record past the end")
    doc = json.loads(out)
    check(doc["decoded"] == 1 and doc["error"]["record"] == 1 and doc["error"]["offset"] == 32,
          f"past the end: stopped at {doc['error']}")
    check("record 1 at +0x20" in err, f"past the end message: {err!r}")

    # Arch PEBS record size 0 must not loop forever.
    zero = bytearray(good_arch)
    struct.pack_into("<Q", zero, HDR, 0)
    one_error_line(*run(bad("zero", bytes(zero))), "arch record size 0")

    # Files that are no dump, or whose header lies: refused from the header, in one
    # line, with bounded memory and time (peak RSS from wait4 of that one run).
    def measured(*args, feed=None):
        t = time.time()
        pid = os.fork()
        if pid == 0:
            try:
                o = os.open(os.path.join(d, "m.out"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                e = os.open(os.path.join(d, "m.err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(o, 1)
                os.dup2(e, 2)
                os.execv(PEBS, [PEBS, *args])
            finally:
                os._exit(127)
        if feed:
            feed()
        _, status, ru = os.wait4(pid, 0)
        with open(os.path.join(d, "m.out")) as f:
            out = f.read()
        with open(os.path.join(d, "m.err")) as f:
            err = f.read()
        return os.waitstatus_to_exitcode(status), out, err, ru.ru_maxrss, time.time() - t

    # the child's peak RSS counts this Python's pages until its exec (~12 MiB); before
    # the header came first, `vpmu-pebs /dev/zero` peaked at 1.05 GB
    def bounded(what, args, pattern, feed=None, rss_kb=64 * 1024):
        rc, out, err, rss, took = measured(*args, feed=feed)
        one_error_line(rc, out, err, what)
        check(not out, f"{what}: nothing on stdout")
        check(pattern in err, f"{what}: says {pattern!r}: {err.strip()!r}")
        check(rss < rss_kb, f"{what}: peak RSS {rss} KiB, under {rss_kb}")
        check(took < 10, f"{what}: {took:.1f} s")
        print(f"{what}: exit {rc}, {rss} KiB peak, {took:.2f} s: {err.strip()}")

    bounded("/dev/zero", ["/dev/zero"], "no VPMUPEBS magic")
    bounded("/dev/urandom", ["/dev/urandom"], "no VPMUPEBS magic")
    bounded("a directory", [d], "a directory")
    bounded("header_size 4097", [bad("hsize4097", good4[:12] + struct.pack("<I", 4097) +
                                     good4[16:])], "impossible header size 4097")
    bounded("records_len 255 MiB, a short file",
            [bad("lie255", records_len(good4, 255 << 20))], "truncated or damaged")
    bounded("records_len over the limit", [bad("lie257", records_len(good4, 257 << 20))],
            "more than a dump holds (256 MiB)")

    # a pipe: no size to compare with; it must give what the header says, no more
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)

    def writer(data):
        def feed():
            with open(fifo, "wb") as f:
                try:
                    f.write(data)
                except BrokenPipeError:
                    pass
        return feed

    bounded("pipe: 200 MiB declared, a few bytes given", [fifo],
            "the file has fewer", feed=writer(records_len(good4, 200 << 20)))
    bounded("pipe: more than declared", [fifo], "the file has more",
            feed=writer(good4 + b"\0" * 4096))
    rc, out, err, rss, took = measured(fifo, feed=writer(good4))
    check(rc == 0 and err == "" and "records" in out, f"pipe: a good dump decodes ({err!r})")

    # Garbage: random bytes in the records, random lengths: never a crash.
    rng = random.Random(8)
    for name, good in (("fmt4", good4), ("arch", good_arch)):
        for i in range(150):
            data = bytearray(good)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(HDR, len(data))] = rng.randrange(256)
            if i % 3 == 0:
                cut = rng.randrange(HDR, len(data))
                data = records_len(bytes(data[:cut]), cut - HDR)
            rc, out, err = run("--json", bad("fuzz", bytes(data)))
            if rc == 0:
                check(err == "", f"fuzz {name} {i}: stderr on success")
            else:
                one_error_line(rc, err, f"fuzz {name} {i}")
            json.loads(out)

if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("ok")
