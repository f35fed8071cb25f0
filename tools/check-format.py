#!/usr/bin/env python3
"""The C sources follow .clang-format: one line per file that does not, exit 1.

Usage: check-format.py SOURCE_ROOT. Exit 77 (a meson skip) without clang-format.
"""
import os
import shutil
import subprocess
import sys

FOLDERS = ("vpmu", "vmm-glue", "host-tools", "guest-tests", "bench", "fuzz", "examples")
SUFFIXES = (".c", ".h", ".cc")


def sources(root):
    for folder in FOLDERS:
        for base, dirs, files in os.walk(os.path.join(root, folder)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SUFFIXES):
                    yield os.path.join(base, name)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    tool = shutil.which("clang-format")
    if not tool:
        print("SKIP: clang-format is not installed (Debian package clang-format)")
        return 77
    bad = 0
    for path in sources(root):
        r = subprocess.run([tool, "--style=file", "--dry-run", "--Werror", path],
                           capture_output=True, text=True)
        if r.returncode:
            n = r.stderr.count("warning:") + r.stderr.count("error:")
            print(f"{os.path.relpath(path, root)}: {n} lines differ from .clang-format "
                  f"(run: clang-format -i {os.path.relpath(path, root)})")
            bad += 1
    print(f"check-format: {bad} files need formatting" if bad else "check-format: all sources formatted")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
