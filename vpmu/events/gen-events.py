#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turn a perfmon event list (3 lines per event) into a C event table.

Usage: gen-events.py --model NAME --symbol SYM INPUT OUTPUT.c

Each event is three lines: "| NAME |", its description ending in " |",
and its attribute tokens separated by single spaces ending in " |" (the
format of skylake-server.txt here). The parser is strict on purpose: the table is guest-visible,
so anything it does not understand fails the build with one line
"gen-events.py: FILE:LINE: what is wrong" instead of producing a wrong row.
"""

import argparse
import os
import re
import sys

PROG = 'gen-events.py'

# Attribute keys in the order the list always writes them.
KEY_ORDER = ['EventSel', 'UMask', 'AnyThread', 'EdgeDetect', 'Invert', 'CMask',
	     'MSR', 'Counter', 'CounterHTOff']

# Auxiliary MSRs a row may program; the list spells the address in the key.
AUX_MSRS = {
	'MSR_PEBS_LD_LAT_THRESHOLD': 0x3f6,
	'MSR_PEBS_FRONTEND': 0x3f7,
}

FLAGS = {
	'Architectural': 'VPMU_EV_ARCH',
	'Fixed': 'VPMU_EV_FIXED',
	# Set on speculative events too (UOPS_ISSUED.ANY): a rendering artifact,
	# so it is checked but not stored.
	'AtRetirement': None,
	'Deprecated': 'VPMU_EV_DEPRECATED',
}

PEBS_ITEMS = {
	'PreciseEventingIP': 'VPMU_EV_PRECISE_IP',
	'Precise': 'VPMU_EV_PRECISE',
	'DataLinearAddress': 'VPMU_EV_DLA',
	'Latency': 'VPMU_EV_LATENCY',
}

NAME_RE = re.compile(r'^\| ([A-Z0-9_.]+) \|$')
HEX_RE = re.compile(r'^(?:([0-9A-F]+)H|0)$')
DEC_LIST_RE = re.compile(r'^[0-9]+(?:,[0-9]+)*$')
MSR_KEY_RE = re.compile(r'^(MSR_[A-Z0-9_]+)\(([0-9A-F]+)H\)$')
FIXED_RE = re.compile(r'^IA32_FIXED_CTR([0-9])$')
ERRATA_RE = re.compile(r'Errata: (SKL\d+(, SKL\d+)*)')


class ParseError(Exception):
	def __init__(self, lineno, msg):
		super().__init__(msg)
		self.lineno = lineno
		self.msg = msg


def parse_hex(lineno, key, val, maxval):
	m = HEX_RE.match(val)
	if not m:
		raise ParseError(lineno, f'{key}: "{val}" is not a hex number like 3CH')
	# A bare "0" is how the list writes CMask=0 (20 times).
	v = int(m.group(1), 16) if m.group(1) is not None else 0
	if v > maxval:
		raise ParseError(lineno, f'{key}: {val} does not fit in {maxval:#x}')
	return v


def parse_counters(lineno, key, val):
	if not DEC_LIST_RE.match(val):
		raise ParseError(lineno, f'{key}: "{val}" is not a list of counter numbers')
	mask = 0
	for c in val.split(','):
		n = int(c)
		if n > 31:
			raise ParseError(lineno, f'{key}: counter {n} out of range')
		if mask & (1 << n):
			raise ParseError(lineno, f'{key}: counter {n} listed twice')
		mask |= 1 << n
	return mask


def parse_bool(lineno, key, val):
	if val != '1':
		raise ParseError(lineno, f'{key}: expected "1", got "{val}"')
	return 1


def parse_pebs(lineno, inner, ev):
	ev['flags'].append('VPMU_EV_PEBS')
	seen = set()
	for item in inner.split(', '):
		key, eq, val = item.partition('=')
		if key in seen:
			raise ParseError(lineno, f'PEBS item {key} repeated')
		seen.add(key)
		if key in PEBS_ITEMS and not eq:
			ev['flags'].append(PEBS_ITEMS[key])
		elif key == 'PDISTCounter' and eq:
			if not re.match(r'^[0-9]+$', val) or int(val) > 127:
				raise ParseError(lineno, f'PDISTCounter: bad value "{val}"')
			ev['pdist_counter'] = int(val)
		elif key == 'Counter' and eq:
			# Repeats the top-level Counter=, which is the one we keep;
			# only check that it is well formed.
			parse_counters(lineno, 'PEBS Counter', val)
		else:
			raise ParseError(lineno, f'unknown PEBS item "{item}"')


def parse_flags(lineno, text, ev):
	seen = set()
	for flag in text.split(', '):
		if flag not in FLAGS:
			raise ParseError(lineno, f'unknown token "{flag}"')
		if flag in seen:
			raise ParseError(lineno, f'flag {flag} repeated')
		seen.add(flag)
		if FLAGS[flag]:
			ev['flags'].append(FLAGS[flag])


def parse_attrs(lineno, line, ev):
	if NAME_RE.match(line):
		raise ParseError(lineno, 'event name where attributes belong: a line is missing above')
	if not line.endswith(' |') or '|' in line[:-2]:
		raise ParseError(lineno, 'attribute line must end with " |" and have no other "|"')
	s = line[:-2]
	if '  ' in s or s.startswith(' '):
		raise ParseError(lineno, 'tokens must be separated by single spaces')

	flags_text = ''
	if ' PEBS:[' in s:
		head, rest = s.split(' PEBS:[', 1)
		inner, sep, tail = rest.partition(']')
		if not sep or not inner or '[' in inner or ']' in tail or 'PEBS:[' in tail:
			raise ParseError(lineno, 'malformed PEBS:[...] bracket')
		if tail:
			if not tail.startswith(' ') or len(tail) < 2:
				raise ParseError(lineno, f'unexpected text after PEBS bracket: "{tail}"')
			flags_text = tail[1:]
		parse_pebs(lineno, inner, ev)
		tokens = head.split(' ')
		attr_tokens = tokens
	else:
		tokens = s.split(' ')
		# Attribute tokens come first; the rest is the flag list.
		n = 1 if tokens and FIXED_RE.match(tokens[0]) else 0
		while n < len(tokens) and '=' in tokens[n]:
			n += 1
		attr_tokens = tokens[:n]
		flags_text = ' '.join(tokens[n:])

	if not attr_tokens or '' in attr_tokens:
		raise ParseError(lineno, 'empty attribute or doubled space')

	m = FIXED_RE.match(attr_tokens[0])
	if m:
		idx = int(m.group(1))
		if idx > 2:
			raise ParseError(lineno, f'{attr_tokens[0]}: SKX has 3 fixed counters')
		if len(attr_tokens) > 1:
			raise ParseError(lineno, f'unexpected "{attr_tokens[1]}" after {attr_tokens[0]}')
		ev['fixed_idx'] = idx
	else:
		last = -1
		for tok in attr_tokens:
			key, eq, val = tok.partition('=')
			if not eq:
				raise ParseError(lineno, f'unknown token "{tok}"')
			mm = MSR_KEY_RE.match(key)
			slot = 'MSR' if mm else key
			if slot not in KEY_ORDER:
				raise ParseError(lineno, f'unknown token "{tok}"')
			pos = KEY_ORDER.index(slot)
			if pos == last:
				raise ParseError(lineno, f'{slot} repeated')
			if pos < last:
				raise ParseError(lineno, f'{key} out of order')
			last = pos
			if key == 'EventSel':
				ev['event'] = parse_hex(lineno, key, val, 0xff)
			elif key == 'UMask':
				ev['umask'] = parse_hex(lineno, key, val, 0xff)
			elif key == 'CMask':
				ev['cmask'] = parse_hex(lineno, key, val, 0xff)
			elif key == 'AnyThread':
				parse_bool(lineno, key, val)
				ev['flags'].append('VPMU_EV_ANY')
			elif key == 'EdgeDetect':
				parse_bool(lineno, key, val)
				ev['flags'].append('VPMU_EV_EDGE')
			elif key == 'Invert':
				parse_bool(lineno, key, val)
				ev['flags'].append('VPMU_EV_INV')
			elif key == 'Counter':
				ev['counters'] = parse_counters(lineno, key, val)
			elif key == 'CounterHTOff':
				ev['counters_ht_off'] = parse_counters(lineno, key, val)
			else:
				name, addr = mm.group(1), int(mm.group(2), 16)
				if AUX_MSRS.get(name) != addr:
					raise ParseError(lineno, f'unknown MSR {key}')
				ev['aux_msr'] = addr
				ev['aux_value'] = parse_hex(lineno, key, val, 0xffffffff)
		for req in ('EventSel', 'UMask', 'Counter', 'CounterHTOff'):
			if not any(t.startswith(req + '=') for t in attr_tokens):
				raise ParseError(lineno, f'missing {req}=')

	if flags_text:
		parse_flags(lineno, flags_text, ev)

	is_fixed = ev['fixed_idx'] >= 0
	if is_fixed != ('VPMU_EV_FIXED' in ev['flags']):
		raise ParseError(lineno, 'IA32_FIXED_CTRn and the Fixed flag must go together')


def parse(path):
	try:
		with open(path, 'rb') as f:
			data = f.read()
	except OSError as e:
		raise ParseError(0, e.strerror)
	try:
		text = data.decode('utf-8')
	except UnicodeDecodeError as e:
		lineno = data[:e.start].count(b'\n') + 1
		raise ParseError(lineno, 'not valid UTF-8')
	lines = text.split('\n')
	# The last line may or may not have a newline (the seed has none).
	if lines and lines[-1] == '':
		lines.pop()
	if not lines:
		raise ParseError(1, 'no events')
	for i, line in enumerate(lines):
		if '\r' in line:
			raise ParseError(i + 1, 'carriage return in line')

	events = []
	names = {}
	# Whole records first, so a line lost in the middle is reported where
	# the records go out of step rather than as a bad total at the end.
	for i in range(0, len(lines) - len(lines) % 3, 3):
		lno = i + 1
		m = NAME_RE.match(lines[i])
		if not m:
			raise ParseError(lno, 'expected "| EVENT.NAME |"')
		name = m.group(1)
		if name.upper() in names:
			raise ParseError(lno, f'duplicate event {name} (first at line {names[name.upper()]})')
		# Case-insensitive, since vpmu_event_find() is.
		names[name.upper()] = lno

		desc = lines[i + 1]
		if not desc.endswith(' |') or '|' in desc[:-2]:
			raise ParseError(lno + 1, 'description must end with " |" and have no other "|"')
		desc = desc[:-2]
		if not desc:
			raise ParseError(lno + 1, 'empty description')
		found = ERRATA_RE.findall(desc)
		if len(found) > 1:
			raise ParseError(lno + 1, 'more than one Errata: list')
		errata = found[0][0] if found else None

		ev = {
			'name': name, 'desc': desc, 'errata': errata,
			'fixed_idx': -1, 'pdist_counter': -1,
			'event': 0, 'umask': 0, 'cmask': 0, 'flags': [],
			'aux_msr': 0, 'aux_value': 0,
			'counters': 0, 'counters_ht_off': 0,
		}
		parse_attrs(lno + 2, lines[i + 2], ev)
		events.append(ev)

	if len(events) * 3 != len(lines):
		raise ParseError(len(lines), f'{len(lines)} lines do not make whole events of 3 lines '
				 f'({len(events)} events and {len(lines) % 3} line(s) left over)')
	return events


def c_string(s, indent='\t\t\t', width=80):
	"""A C string literal for s, safe whatever s holds.

	Non-ASCII bytes become 3-digit octal escapes: an octal escape never
	takes more than 3 digits, so unlike \\x it cannot swallow a following
	digit or letter. '?' is escaped so "??(" cannot be read as a trigraph.
	"""
	out = []
	for b in s.encode('utf-8'):
		c = chr(b)
		if c in '\\"?':
			out.append('\\' + c)
		elif 0x20 <= b < 0x7f:
			out.append(c)
		else:
			out.append(f'\\{b:03o}')
	# Long prose is split into adjacent literals, only between whole
	# characters or escapes, so the generated file stays readable.
	chunks, cur = [], ''
	for piece in out:
		if len(cur) + len(piece) > width:
			chunks.append(cur)
			cur = ''
		cur += piece
	chunks.append(cur)
	return ('\n' + indent).join('"' + c + '"' for c in chunks)


def emit(events, model, symbol, src):
	o = []
	o.append('/* SPDX-License-Identifier: MIT */')
	o.append(f'/* Generated by gen-events.py from {os.path.basename(src)}; do not edit. */')
	o.append('#include "events.h"')
	o.append('')
	o.append(f'static const struct vpmu_event_desc {symbol}_events[] = {{')
	for ev in events:
		flags = ' | '.join(ev['flags']) if ev['flags'] else '0'
		o.append('\t{')
		o.append(f'\t\t.name = {c_string(ev["name"])},')
		o.append(f'\t\t.desc = {c_string(ev["desc"])},')
		errata = c_string(ev['errata']) if ev['errata'] else 'NULL'
		o.append(f'\t\t.errata = {errata},')
		o.append(f'\t\t.fixed_idx = {ev["fixed_idx"]},')
		o.append(f'\t\t.pdist_counter = {ev["pdist_counter"]},')
		o.append(f'\t\t.event = {ev["event"]:#04x},')
		o.append(f'\t\t.umask = {ev["umask"]:#04x},')
		o.append(f'\t\t.cmask = {ev["cmask"]:#04x},')
		o.append(f'\t\t.flags = {flags},')
		o.append(f'\t\t.aux_msr = {ev["aux_msr"]:#x},')
		o.append(f'\t\t.aux_value = {ev["aux_value"]:#x},')
		o.append(f'\t\t.counters = {ev["counters"]:#x},')
		o.append(f'\t\t.counters_ht_off = {ev["counters_ht_off"]:#x},')
		o.append('\t},')
	o.append('};')
	o.append('')
	o.append(f'const struct vpmu_event_table {symbol} = {{')
	o.append(f'\t.model = {c_string(model)},')
	o.append(f'\t.nr = {len(events)},')
	o.append(f'\t.events = {symbol}_events,')
	o.append('};')
	return '\n'.join(o) + '\n'


def fail(path, lineno, msg):
	print(f'{PROG}: {path}:{lineno}: {msg}', file=sys.stderr)
	sys.exit(1)


def main():
	ap = argparse.ArgumentParser(prog=PROG)
	ap.add_argument('--model', required=True)
	ap.add_argument('--symbol', required=True)
	ap.add_argument('input')
	ap.add_argument('output')
	args = ap.parse_args()

	if not re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', args.symbol):
		fail(args.input, 0, f'--symbol "{args.symbol}" is not a C identifier')
	try:
		events = parse(args.input)
	except ParseError as e:
		fail(args.input, e.lineno, e.msg)

	text = emit(events, args.model, args.symbol, args.input)
	# Write then rename, so a failed run never leaves a half table that a
	# later incremental build would compile.
	tmp = args.output + '.tmp'
	try:
		with open(tmp, 'w', encoding='ascii') as f:
			f.write(text)
		os.replace(tmp, args.output)
	except OSError as e:
		fail(args.output, 0, e.strerror)


if __name__ == '__main__':
	main()
