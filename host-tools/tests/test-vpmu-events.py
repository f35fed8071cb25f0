#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""vpmu-events through the real program: every Skylake-Server catalogue
event round-trips encode -> decode to itself or an event with the same
encoding; reserved bits are reported; errors are one line and exit 1."""
import json
import subprocess
import sys

EV = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([EV, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def one_error_line(args, what):
    rc, out, err = run(*args)
    lines = err.splitlines()
    check(rc != 0, f"{what}: exit {rc}")
    check(len(lines) == 1 and lines[0].startswith("vpmu-events: "),
          f"{what}: want one 'vpmu-events:' line on stderr, got {err!r:.300}")


rc, out, err = run("--json", "list")
check(rc == 0, "list --json")
catalogue = json.loads(out)
names = [e["name"] for e in catalogue["events"]]
enc = {e["name"]: e["encoding"] for e in catalogue["events"]}
check(catalogue["count"] == len(names) == 372, f"372 events, got {len(names)}")

# encode all, decode all: one process each (JSON Lines), then a few one by one.
rc, out, err = run("--json", "encode", *names)
check(rc == 0 and err == "", f"encode all: rc {rc} {err!r}")
encoded = [json.loads(line) for line in out.splitlines()]
check([e["name"] for e in encoded] == names, "encode order")
values = [e["value"] for e in encoded]
rc, out, err = run("--json", "decode", *values)
check(rc == 0 and err == "", f"decode all: rc {rc} {err!r}")
decoded = [json.loads(line) for line in out.splitlines()]
check(len(decoded) == len(names), "decode count")
aliases = 0
for name, e, dec in zip(names, encoded, decoded):
    v = int(e["value"], 16)
    check(v & (1 << 22) and v & (1 << 16) and v & (1 << 17), f"{name}: default USR|OS|EN")
    check(dec["value"] == e["value"], f"{name}: value")
    got = dec["name"]
    if got != name:
        aliases += 1
        # an alias: a different catalogue event with the very same encoding
        check(got is not None and enc[got] == enc[name], f"{name}: decoded as {got}")
        check(name in dec["aliases"], f"{name}: not among the aliases of {got}")
    check(dec["event"] == v & 0xff and dec["umask"] == (v >> 8) & 0xff, f"{name}: fields")
    check(dec["cmask"] == (v >> 24) & 0xff and dec["inv"] == bool(v & (1 << 23)),
          f"{name}: cmask/inv")
    # AnyThread events are refused by the model: decode says so
    check(dec["wrmsr_gp"] == bool(v & (1 << 21)), f"{name}: wrmsr_gp")
print(f"round trip: {len(names)} events, {aliases} decoded to an alias")
for name in names[::37]:
    rc, out, _ = run("--json", "encode", name)
    v = json.loads(out)["value"]
    rc2, out2, _ = run("--json", "decode", v)
    d = json.loads(out2)
    check(rc == 0 and rc2 == 0 and enc[d["name"]] == enc[name], f"{name}: single round trip")

# Known example and modifiers.
rc, out, _ = run("--json", "encode", "INST_RETIRED.ANY_P")
check(json.loads(out)["value"] == "0x4300c0", "INST_RETIRED.ANY_P = 0x4300c0 (USR|OS|EN)")
rc, out, _ = run("--json", "encode", "--int", "INST_RETIRED.ANY_P")
check(json.loads(out)["value"] == "0x5300c0", "INST_RETIRED.ANY_P --int = 0x5300c0")
rc, out, _ = run("--json", "encode", "--usr", "--int", "--cmask", "2", "INST_RETIRED.ANY_P")
check(json.loads(out)["value"] == "0x25100c0", f"--usr --int --cmask 2: {out}")
rc, out, _ = run("decode", "0x5300c0")
check(rc == 0 and "INST_RETIRED.ANY_P" in out and "RESERVED" not in out, f"text decode: {out}")

# Reserved bits: AnyThread, bit 34 on Skylake-Server, bits 63:32.
for value, bits in ((0x7300c0, [21]), ((1 << 34) | 0x5300c0, [34]),
                    (0xffffffff005300c0, list(range(32, 64)))):
    rc, out, _ = run("--json", "decode", hex(value))
    d = json.loads(out)
    check(rc == 0 and d["reserved_bits"] == bits and d["wrmsr_gp"],
          f"{value:#x}: reserved {d['reserved_bits']}")
    rc, out, _ = run("decode", hex(value))
    check("RESERVED" in out and "#GP" in out, f"{value:#x}: text says reserved: {out}")
# bit 34 is Adaptive on Icelake-Server: not reserved there
rc, out, _ = run("--json", "--cpu", "icelake-server", "decode", hex((1 << 34) | 0x5300c0))
d = json.loads(out)
check(d["reserved_bits"] == [] and d["adaptive"] and not d["wrmsr_gp"], f"ICX bit 34: {d}")
check(d["name"] is None and d["catalogue"] is False, "ICX has no catalogue")
rc, out, _ = run("--json", "--cpu", "LunarLake", "decode", hex((1 << 36) | (0x5 << 40) | 0x5300c0))
d = json.loads(out)
check(d["eq"] and d["umask2"] == 5 and d["reserved_bits"] == [], f"LNL eq/umask2: {d}")

# list: substring and glob, case-insensitive.
rc, out, _ = run("list", "inst_retired")
check(rc == 0 and "INST_RETIRED.ANY_P" in out, "list substring")
rc, out, _ = run("--json", "list", "br_*.near_call*")
got = [e["name"] for e in json.loads(out)["events"]]
check(got and all(n.startswith("BR_") and ".NEAR_CALL" in n for n in got), f"glob: {got}")
rc, out, _ = run("list", "--desc", "INST_RETIRED.ANY_P")
check(rc == 0 and "programmable" in out.lower() or "instructions" in out.lower(), "--desc")

rc, out, err = run("--help")
check(rc == 0 and "Usage" in out and err == "", "--help")
one_error_line([], "no command")
one_error_line(["frobnicate"], "unknown command")
one_error_line(["--bogus", "list"], "unknown option")
one_error_line(["--cpu"], "--cpu without a value")
one_error_line(["decode"], "decode without a value")
one_error_line(["decode", "0xzz"], "bad number")
one_error_line(["decode", "0x10000000000000000"], "number too large")
one_error_line(["decode", "-1"], "negative number")
one_error_line(["encode", "NO_SUCH.EVENT"], "unknown event")
one_error_line(["encode", "--cmask", "256", "INST_RETIRED.ANY_P"], "cmask out of range")
one_error_line(["--cpu", "Pentium", "list"], "unknown model")
one_error_line(["--cpu", "Icelake-Server", "list"], "no catalogue for list")
one_error_line(["--cpu", "LunarLake", "encode", "INST_RETIRED.ANY_P"], "no catalogue for encode")
one_error_line(["list", "NO_SUCH_THING_AT_ALL"], "list without matches")
one_error_line(["decode", "--usr", "0x1"], "encode option on decode")

if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("ok")
