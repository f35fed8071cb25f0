#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""vpmu-vmm --restore refuses what it cannot restore exactly, in one line,
with exit status 2 and no guest output: a damaged file (a flipped byte,
truncated, extended), one for another model, RAM size, format or Unicorn,
values no device can hold even under a good checksum, and what is no
snapshot at all (nothing, a directory, a kernel, no file). Then mutated
snapshots with a recomputed checksum, from a fixed seed: whatever each
does, vpmu-vmm ends on its own (a guest exit, a guest error or a refusal),
never by a signal or with a sanitizer's report.

usage: test-snapshot-refuse.py VMM KERNEL"""
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import zlib

HEADER = 128
TAG_VCPU, TAG_LAPIC, TAG_PLATFORM = 2, 3, 4
MUTATIONS = 24
failures = 0


def check(cond, what):
    global failures
    print(f"{'PASS' if cond else 'FAIL'}: {what}", flush=True)
    if not cond:
        failures += 1


def run(cmd, timeout=60):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


def reseal(blob):
    """The CRC-32 of the whole file with its CRC field zeroed, into that field."""
    b = bytearray(blob)
    b[0x18:0x1c] = b'\0\0\0\0'
    b[0x18:0x1c] = struct.pack('<I', zlib.crc32(bytes(b)))
    return bytes(b)


def sections(blob):
    """{tag: (payload offset, length)}"""
    out, at = {}, HEADER
    for _ in range(struct.unpack_from('<I', blob, 0x1c)[0]):
        tag, _, n = struct.unpack_from('<IIQ', blob, at)
        out[tag] = (at + 16, n)
        at += 16 + n + (8 - n % 8) % 8
    return out


def refused(vmm, tmp, blob_or_path, what, want, extra=()):
    if isinstance(blob_or_path, bytes):
        path = os.path.join(tmp, 'bad.snap')
        with open(path, 'wb') as f:
            f.write(blob_or_path)
    else:
        path = blob_or_path
    cmd = [vmm, '--accel', 'emu'] + list(extra) + ['--restore', path]
    p = run(cmd)
    err = p.stderr.decode(errors='replace')
    one = err.count('\n') == 1 and err.endswith('\n')
    check(p.returncode == 2 and not p.stdout and one and re.search(want, err) is not None,
          f'{what}: exit {p.returncode}, {len(p.stdout)} bytes of guest output, '
          f'stderr {err.strip()!r}')


def main():
    vmm, kernel = sys.argv[1], sys.argv[2]
    seed = int(os.environ.get('VPMU_SNAPSHOT_SEED', '4242'))
    print(f'test-snapshot-refuse: seed {seed} (VPMU_SNAPSHOT_SEED={seed} repeats it)')
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix='vpmu-snapshot-') as tmp:
        good = os.path.join(tmp, 'good.snap')
        p = run([vmm, '--accel', 'emu', '--cpu', 'Icelake-Server', '--save-at', '30000', good,
                 kernel])
        check(p.returncode == 0 and os.path.exists(good), f'a snapshot to damage: exit {p.returncode}')
        if p.returncode:
            return 1
        blob = open(good, 'rb').read()
        sec = sections(blob)
        ram_at, ram_len = sec[6]

        # damaged on disk: the checksum or the sizes say so
        b = bytearray(blob)
        b[ram_at + ram_len // 2] ^= 0x40
        refused(vmm, tmp, bytes(b), 'a byte flipped in guest RAM', r'damaged.*CRC-32')
        b = bytearray(blob)
        b[0x21] ^= 0x01
        refused(vmm, tmp, bytes(b), 'a byte flipped in the model name', r'damaged.*CRC-32')
        refused(vmm, tmp, blob[:len(blob) // 2], 'cut in half', r'damaged.*says \d+ bytes and has')
        refused(vmm, tmp, blob[:100], 'cut in its header', r'damaged snapshot: only 100 bytes')
        refused(vmm, tmp, blob + b'\0' * 8, 'eight bytes appended', r'damaged.*says \d+ bytes')

        # foreign: another guest, format or Unicorn
        refused(vmm, tmp, good, 'restored as another model', r'Icelake-Server guest; drop --cpu',
                ['--cpu', 'Skylake-Server'])
        refused(vmm, tmp, good, 'restored with other RAM', r'128 MiB of RAM; drop --mem',
                ['--mem', '64M'])
        b = bytearray(blob)
        struct.pack_into('<I', b, 0x08, 2)
        refused(vmm, tmp, reseal(b), 'format 2', r'format 2; this vpmu-vmm reads format 1')
        b = bytearray(blob)
        struct.pack_into('<I', b, 0x54, struct.unpack_from('<I', b, 0x54)[0] + 1)
        refused(vmm, tmp, reseal(b), 'another Unicorn', r'another Unicorn')
        b = bytearray(blob)
        b[0x20:0x40] = b'Skylake-Server'.ljust(32, b'\0')
        refused(vmm, tmp, reseal(b), 'an Icelake-Server vPMU under a Skylake-Server header',
                r'vPMU refused its part.*Icelake-Server snapshot, this vCPU is Skylake-Server')

        b = bytearray(blob)
        b[0x20:0x40] = b'Bogus'.ljust(32, b'\0')
        refused(vmm, tmp, reseal(b), 'an unknown model', r"unknown CPU model 'Bogus'")

        # a good checksum over values no device can hold
        b = bytearray(blob)
        b[sec[TAG_VCPU][0] + 64] = 2  # cs64, after eight 64-bit control registers
        refused(vmm, tmp, reseal(b), 'a flag of 2', r'damaged snapshot: a flag that is neither 0 nor 1')
        b = bytearray(blob)
        b[sec[TAG_PLATFORM][0] + 43] = 200  # the RTC index, after the 16550 and board state
        refused(vmm, tmp, reseal(b), 'an RTC index of 200', r'damaged snapshot: an RTC index past')
        b = bytearray(blob)
        struct.pack_into('<Q', b, sec[TAG_LAPIC][0] - 8, sec[TAG_LAPIC][1] + (1 << 40))
        refused(vmm, tmp, reseal(b), 'a section longer than the file',
                r'damaged snapshot: section \d+ .* longer than the file')
        b = bytearray(blob)
        struct.pack_into('<Q', b, sec[TAG_LAPIC][0] - 8, sec[TAG_LAPIC][1] - 8)
        refused(vmm, tmp, reseal(b), 'a section shorter than its contents', r'damaged snapshot: ')

        # not a snapshot at all
        empty = os.path.join(tmp, 'empty')
        open(empty, 'wb').close()
        refused(vmm, tmp, empty, 'an empty file', r'not an emulator snapshot')
        refused(vmm, tmp, tmp, 'a directory', r'cannot read it: Is a directory')
        refused(vmm, tmp, os.path.join(tmp, 'none'), 'no such file', r'cannot open it: No such')
        refused(vmm, tmp, kernel, 'a kernel', r'not an emulator snapshot')
        p = run([vmm, '--restore', good, kernel])
        check(p.returncode == 2 and not p.stdout and re.search(rb'give no KERNEL', p.stderr),
              f'--restore with a KERNEL: exit {p.returncode}, {p.stderr.strip()!r}')
        p = run([vmm, '--accel', 'kvm', '--restore', good])
        check(p.returncode == 2 and not p.stdout and re.search(rb'use --accel emu', p.stderr),
              f'--restore with --accel kvm: exit {p.returncode}, {p.stderr.strip()!r}')

        # mutated state under a good checksum: refused, or run; never a crash
        crashed = 0
        for i in range(MUTATIONS):
            tag = rng.choice([TAG_VCPU, TAG_LAPIC, TAG_PLATFORM])
            at, n = sec[tag]
            b = bytearray(blob)
            k = rng.randrange(n)
            b[at + k] ^= 1 << rng.randrange(8)
            path = os.path.join(tmp, 'mutated.snap')
            with open(path, 'wb') as f:
                f.write(reseal(b))
            p = run([vmm, '--accel', 'emu', '--max-insns', '3000000', '--timeout', '20',
                     '--restore', path])
            sanitizer = re.search(rb'runtime error|AddressSanitizer|LeakSanitizer', p.stderr)
            if p.returncode < 0 or sanitizer:
                crashed += 1
                print(f'  mutation {i}: section {tag} byte {k}: exit {p.returncode}, '
                      f'{p.stderr[-300:]!r}')
        check(crashed == 0, f'{MUTATIONS} mutated snapshots with good checksums: '
              f'{crashed} ended by a signal or a sanitizer report')
    print(f'test-snapshot-refuse: {failures} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
