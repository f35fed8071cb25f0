#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""vpmu-vmm --pmu-filter FILE without a guest: a filter that cannot be read
or parsed gives one stderr line that names the file, the line and what is
wrong, and exit status 2 (vpmu-vmm's own errors), before anything runs."""
import os
import subprocess
import sys
import tempfile

VMM = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    else:
        print("ok:", what)


def run(*args):
    p = subprocess.run([VMM, "--accel", "emu", *args], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def one_error_line(args, want, what):
    rc, out, err = run(*args)
    lines = err.splitlines()
    print(f"{what}: exit {rc}, stderr {err!r}")
    check(rc == 2, f"{what}: exit 2, got {rc}")
    check(out == "", f"{what}: nothing on stdout, got {out!r:.200}")
    check(lines == [want], f"{what}: want the one line {want!r}, got {lines!r:.400}")


with tempfile.TemporaryDirectory() as tmp:
    def filter_file(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    kernel = os.path.join(tmp, "no-such-kernel.elf64")

    one_error_line(["--pmu-filter", "/nonexistent", kernel],
                   "vpmu-vmm: --pmu-filter /nonexistent: cannot open: No such file or directory",
                   "missing file")
    one_error_line(["--pmu-filter", tmp, kernel],
                   f"vpmu-vmm: --pmu-filter {tmp}: cannot read: Is a directory", "a directory")

    bad = filter_file("bad.filter", "# deny two events\naction deny\nevent 0x100 umask 0\n")
    one_error_line(["--pmu-filter", bad, kernel],
                   f"vpmu-vmm: --pmu-filter {bad}: line 3: event select '0x100' is out of range "
                   "(at most 0xff)", "event select out of range")

    mixed = filter_file("mixed.filter", "action allow\nevent 0xc0 umask 0\n"
                        "masked event 0xc4 mask 0xf0 match 0x20\n")
    one_error_line(["--pmu-filter", mixed, kernel],
                   f"vpmu-vmm: --pmu-filter {mixed}: line 3: 'masked' entry in a filter of plain "
                   "'event' entries (the first on line 2): a filter is all plain or all masked, "
                   "as in KVM", "plain and masked entries mixed")

    noaction = filter_file("noaction.filter", "event 0xc0 umask 0\n")
    one_error_line(["--pmu-filter", noaction, kernel],
                   f"vpmu-vmm: --pmu-filter {noaction}: no 'action allow' or 'action deny' "
                   "line: a filter needs one", "no action line")

    # a good filter passes: the next error is the (missing) kernel's, not the filter's
    good = filter_file("good.filter", "action allow\nevent 0xc0 umask 0x00\nfixed 0,1\n")
    rc, out, err = run("--pmu-filter", good, kernel)
    print(f"good filter: exit {rc}, stderr {err!r}")
    check(rc == 2 and "--pmu-filter" not in err and kernel in err,
          f"good filter: accepted, the kernel is what fails (got {err!r:.300})")

rc, out, err = run("--help")
check(rc == 0 and "--pmu-filter FILE" in out and "docs/pmu-filter.md" in out,
      "--help lists --pmu-filter and points at docs/pmu-filter.md")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
