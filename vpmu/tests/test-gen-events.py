#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gen-events.py must fail the build, with one clear line, on a bad list.

Usage: test-gen-events.py GEN-EVENTS.PY EVENT-LIST.txt

Feeds the generator corrupted copies of the event list and checks that
each run exits non-zero, prints exactly one line
"gen-events.py: FILE:LINE: ..." naming the right line, and leaves no
output file behind. Also checks that C string literals it emits decode
back to the exact input bytes, and the CMask=0 count the C table cannot
show.
"""

import os
import re
import subprocess
import sys
import tempfile

failures = 0


def check(cond, what):
	global failures
	if not cond:
		failures += 1
		print(f'FAIL: {what}')


def run(gen, path, out):
	return subprocess.run([sys.executable, gen, '--model', 'test', '--symbol', 'test_events',
			       path, out], capture_output=True, text=True)


def c_unescape(lit):
	"""Bytes of a run of adjacent C string literals, decoded as C11 does."""
	out = bytearray()
	for body in re.findall(r'"((?:[^"\\]|\\.)*)"', lit):
		i = 0
		while i < len(body):
			c = body[i]
			if c != '\\':
				out += c.encode('ascii')
				i += 1
				continue
			n = body[i + 1]
			if n in '01234567':
				m = re.match(r'[0-7]{1,3}', body[i + 1:])
				out.append(int(m.group(0), 8))
				i += 1 + len(m.group(0))
			elif n == 'x':
				# C takes every following hex digit: the run-on to avoid.
				m = re.match(r'[0-9a-fA-F]+', body[i + 2:])
				out.append(int(m.group(0), 16) & 0xff)
				i += 2 + len(m.group(0))
			else:
				out += {'\\': b'\\', '"': b'"', '?': b'?', 'n': b'\n', 't': b'\t'}[n]
				i += 2
	return bytes(out)


def main():
	gen, src = sys.argv[1], sys.argv[2]
	with open(src, 'rb') as f:
		orig = f.read().decode('utf-8').split('\n')

	attrs = orig[2::3]
	cmask = [a for a in attrs if ' CMask=' in a]
	check(len(cmask) == 77, f'{len(cmask)} CMask= tokens, want 77')
	check(sum(' CMask=0 ' in a for a in cmask) == 20, 'want 20 bare CMask=0')

	with tempfile.TemporaryDirectory() as tmp:
		out = os.path.join(tmp, 'out.c')

		r = run(gen, src, out)
		check(r.returncode == 0 and not r.stderr, f'pristine list failed: {r.stderr.strip()}')
		check(os.path.exists(out), 'pristine list wrote no output')
		os.unlink(out)

		def sub(lineno, old, new):
			lines = list(orig)
			check(old in lines[lineno - 1], f'test setup: "{old}" not on line {lineno}')
			lines[lineno - 1] = lines[lineno - 1].replace(old, new, 1)
			return lines

		# (what, corrupted lines, line the error must name)
		cases = [
			('name line without closing pipe', sub(4, ' |', ''), 4),
			('unknown attribute token', sub(3, 'IA32_FIXED_CTR0', 'IA32_FIXED_CTR0 Foo=1'), 3),
			('unknown key', sub(15, 'UMask=00H', 'UMask=00H Foo=1'), 15),
			('unknown flag', sub(6, 'Fixed', 'Fixd'), 6),
			('missing pipe on attribute line', sub(9, ' |', ''), 9),
			('pipe inside description', sub(5, 'Counts', 'Co|unts'), 5),
			('duplicate name', sub(4, 'CPU_CLK_UNHALTED.THREAD', 'INST_RETIRED.ANY'), 4),
			('duplicate name, other case', sub(4, 'CPU_CLK_UNHALTED.THREAD', 'inst_retired.any'), 4),
			('bad hex', sub(15, 'EventSel=C4H', 'EventSel=CXH'), 15),
			('hex without H', sub(15, 'EventSel=C4H', 'EventSel=C4'), 15),
			('CMask too wide', sub(33, 'CMask=01H', 'CMask=100H'), 33),
			('keys out of order', sub(15, 'EventSel=C4H UMask=00H', 'UMask=00H EventSel=C4H'), 15),
			('key repeated', sub(15, 'UMask=00H', 'UMask=00H UMask=00H'), 15),
			('missing Counter=', sub(15, 'Counter=0,1,2,3 ', ''), 15),
			('bad counter list', sub(15, 'Counter=0,1,2,3 ', 'Counter=0,,2 '), 15),
			('AnyThread not 1', sub(24, 'AnyThread=1', 'AnyThread=2'), 24),
			('unknown MSR', sub(315, 'MSR_PEBS_FRONTEND(3F7H)', 'MSR_PEBS_BACKEND(3F7H)'), 315),
			('MSR address mismatch', sub(315, 'MSR_PEBS_FRONTEND(3F7H)', 'MSR_PEBS_FRONTEND(3F6H)'), 315),
			('unclosed PEBS bracket', sub(75, '[PreciseEventingIP]', '[PreciseEventingIP'), 75),
			('unknown PEBS item', sub(75, 'PreciseEventingIP', 'PreciseEventingIPX'), 75),
			('fixed counter without Fixed flag', sub(3, 'Fixed, ', ''), 3),
			('doubled space', sub(15, 'UMask=00H ', 'UMask=00H  '), 15),
			('carriage return', sub(5, 'Counts', 'Counts\r'), 5),
			('last line lost', orig[:-1], len(orig) - 1),
			('a line lost in the middle', orig[:10] + orig[11:], 12),
		]
		bad_utf8 = '\n'.join(orig).encode('utf-8').replace(b'Counts the number of core',
								     b'Counts the \xff of core', 1)
		cases.append(('invalid UTF-8', bad_utf8, 5))
		cases.append(('empty file', b'', 1))

		for what, lines, lineno in cases:
			path = os.path.join(tmp, 'bad.txt')
			data = lines if isinstance(lines, bytes) else '\n'.join(lines).encode('utf-8')
			with open(path, 'wb') as f:
				f.write(data)
			if os.path.exists(out):
				os.unlink(out)
			r = run(gen, path, out)
			err = r.stderr.splitlines()
			check(r.returncode != 0, f'{what}: exit status 0')
			check(len(err) == 1 and err[0].startswith(f'gen-events.py: {path}:{lineno}: '),
			      f'{what}: want one line "gen-events.py: {path}:{lineno}: ...", got {err!r}')
			check(not os.path.exists(out), f'{what}: output left behind')
			check(not os.path.exists(out + '.tmp'), f'{what}: temp output left behind')

		# Literal safety: quotes, backslashes, trigraph-like "??", and
		# digits right after non-ASCII (hex-escape run-on).
		nasty = 'a "q" \\ ??= ??/ ??( ?\u201c1\u201d2 \u20130A \xe9F end'
		lines = list(orig[:3])
		lines[1] = nasty + ' |'
		path = os.path.join(tmp, 'nasty.txt')
		with open(path, 'wb') as f:
			f.write('\n'.join(lines).encode('utf-8'))
		r = run(gen, path, out)
		check(r.returncode == 0, f'nasty description rejected: {r.stderr.strip()}')
		if r.returncode == 0:
			with open(out, 'rb') as f:
				text = f.read()
			check(all(b < 0x80 for b in text), 'output is not plain ASCII')
			check(b'??' not in text, 'output contains "??"')
			m = re.search(r'\.desc = ((?:"(?:[^"\\]|\\.)*"\s*)+),', text.decode('ascii'))
			check(m and c_unescape(m.group(1)) == nasty.encode('utf-8'),
			      'description does not decode back to its UTF-8 bytes')

	if failures:
		print(f'{failures} check(s) failed')
		return 1
	print('ok')
	return 0


if __name__ == '__main__':
	sys.exit(main())
