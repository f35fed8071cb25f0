#!/bin/sh
# The default script tools/linux-guest runs inside the guest (busybox sh):
# Linux's own perf on the virtual PMU. Each check prints PASS:, FAIL: or
# SKIP: <why>, and the last line is SUMMARY: N passed, M failed, K skipped;
# the exit status is 1 when anything failed.
#
# /etc/linux-guest/env (written by tools/linux-guest) says what to expect:
#   MODEL                     the --cpu model
#   KNOWN_COUNT KNOWN_N KNOWN_K KNOWN_START KNOWN_END
#                             known-count's user-mode instruction count, its
#                             loop (N iterations of K instructions) and the
#                             address range of its code
#   PEBS_PERIOD               the sample period of the PEBS check
#   EXPECT_VERSION EXPECT_GP EXPECT_FIXED EXPECT_WIDTH
#                             the model's perfmon version, general-purpose and
#                             fixed counters and counter width (empty: not known)
#   EXPECT_PEBS EXPECT_LBR    text the "Performance Events:" line must contain
#                             (empty: Linux 6.1 cannot name it for this model)
# shellcheck source=/dev/null
. /etc/linux-guest/env

passed=0
failed=0
skipped=0
pass() {
	echo "PASS: $*"
	passed=$((passed + 1))
}
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
skip() {
	echo "SKIP: $*"
	skipped=$((skipped + 1))
}
section() {
	echo
	echo "== $*"
}
# A perf command that waits for something that never comes (a PMI, a
# timer) must not hang the run: guest seconds, and an idle guest's clock
# runs ahead on the emulator.
T=120

# ---- 1. the PMU line ------------------------------------------------------
section "dmesg | grep -i perf"
dmesg | grep -i perf
pmu_line=$(dmesg | sed -n 's/^\[[^]]*\] //; /Performance Events:/p' | head -n 1)
have_pmu=0
case $pmu_line in
*"Intel PMU driver"*)
	have_pmu=1
	pass "dmesg: Linux's Intel PMU driver is up on $MODEL"
	;;
"")
	fail "dmesg: no 'Performance Events:' line at all"
	;;
*)
	fail "dmesg: no PMU driver on $MODEL: '$pmu_line' (hardware events will be <not supported>)"
	;;
esac
nopmu="no PMU driver in this guest (see the dmesg check), so perf has no hardware events"

# "... version:                4" and the like, printed after the PMU line
hwfield() {
	dmesg | sed -n "s/^\[[^]]*\] \.\.\. $1: *//p" | head -n 1
}
if [ $have_pmu = 1 ]; then
	dmesg | sed -n 's/^\[[^]]*\] \(\.\.\. .*\)/\1/p'
	for f in "version:$EXPECT_VERSION" "generic registers:$EXPECT_GP" \
		"fixed-purpose events:$EXPECT_FIXED" "bit width:$EXPECT_WIDTH"; do
		name=${f%%:*}
		want=${f#*:}
		got=$(hwfield "$name")
		if [ -z "$want" ]; then
			skip "dmesg '... $name': nothing known to expect for $MODEL (got '$got')"
		elif [ "$got" = "$want" ]; then
			pass "dmesg '... $name' is $got, as $MODEL has"
		else
			fail "dmesg '... $name' is '$got'; $MODEL has $want"
		fi
	done
	for want in "$EXPECT_PEBS" "$EXPECT_LBR"; do
		[ -n "$want" ] || continue
		case $pmu_line in
		*"$want"*) pass "dmesg PMU line says '$want'" ;;
		*) fail "dmesg PMU line lacks '$want' for $MODEL: '$pmu_line'" ;;
		esac
	done
fi

# ---- 2. perf stat on the common hardware events ---------------------------
events="instructions cycles ref-cycles branches branch-misses"
section "perf stat -e instructions,cycles,ref-cycles,branches,branch-misses -- known-count"
timeout $T perf stat -e instructions,cycles,ref-cycles,branches,branch-misses \
	-- known-count 2>stat.txt
rc=$?
cat stat.txt
# "    4,012,345      instructions   # ..." or "   <not supported>      cycles"
statvalue() {
	awk -v ev="$1" '{
		for (i = 2; i <= NF; i++)
			if ($i == ev) {
				v = $1
				for (j = 2; j < i; j++)
					v = v " " $j
				gsub(",", "", v)
				print v
				exit
			}
	}' stat.txt
}
for ev in $events; do
	v=$(statvalue "$ev")
	[ -n "$v" ] || v="no line in the output of perf stat (exit status $rc)"
	case $v in
	*[!0-9]*)
		if [ $have_pmu = 0 ]; then
			skip "perf stat $ev: $v ($nopmu)"
		else
			fail "perf stat $ev: $v"
		fi
		;;
	*)
		pass "perf stat $ev counted $v"
		eval "count_$(echo "$ev" | tr - _)=$v"
		;;
	esac
done
# user and kernel: at least what known-count retires in user mode alone
# shellcheck disable=SC2154 # set by the eval above
if [ -n "${count_instructions:-}" ]; then
	if [ "$count_instructions" -ge "$KNOWN_COUNT" ]; then
		pass "perf stat instructions $count_instructions >= known-count's $KNOWN_COUNT user instructions"
	else
		fail "perf stat instructions $count_instructions < known-count's $KNOWN_COUNT user instructions"
	fi
fi
if [ -n "${count_branches:-}" ]; then
	if [ "$count_branches" -ge "$KNOWN_N" ]; then
		pass "perf stat branches $count_branches >= known-count's $KNOWN_N loop branches"
	else
		fail "perf stat branches $count_branches < known-count's $KNOWN_N loop branches"
	fi
fi

# ---- 3. an exact user-mode count ------------------------------------------
section "perf stat -e instructions:u -- known-count (expect 1 + $KNOWN_K*$KNOWN_N + 3 = $KNOWN_COUNT)"
if [ $have_pmu = 0 ]; then
	timeout $T perf stat -e instructions:u -- known-count
	skip "instructions:u exact count: $nopmu"
else
	for run in 1 2; do
		timeout $T perf stat -x, -e instructions:u -- known-count 2>stat-u.txt
		cat stat-u.txt
		got=$(awk -F, '$3 ~ /^instructions/ { print $1; exit }' stat-u.txt)
		if [ "$got" = "$KNOWN_COUNT" ]; then
			pass "run $run: instructions:u = $got, exactly known-count's 1 + $KNOWN_K*$KNOWN_N + 3"
		else
			fail "run $run: instructions:u = '$got'; known-count retires exactly $KNOWN_COUNT in user mode"
		fi
	done
fi

# ---- 4. PEBS: precise samples every PEBS_PERIOD instructions --------------
# Linux 6.1 knows PEBS formats up to 5: on a model with format 6 or
# architectural PEBS it says "no PEBS fmt6+" and refuses precise events.
# There the same count and IP checks run on PMI sampling (instructions:u),
# which the emulator delivers after the overflowing instruction, and the
# PEBS check itself is a skip that says why.
want=$((KNOWN_COUNT / PEBS_PERIOD))
samp_ev=instructions:upp
samp_what=PEBS
case $pmu_line in
*"no PEBS"*) pebs_said=$(printf '%s\n' "$pmu_line" | grep -o 'no PEBS[^,]*') ;;
*"PEBS fmt"*) pebs_said= ;;
*) pebs_said="no PEBS format at all" ;;
esac
if [ -n "$pebs_said" ]; then
	samp_ev=instructions:u
	samp_what="PMI sampling"
fi
section "perf record -e $samp_ev -c $PEBS_PERIOD -- known-count (expect $KNOWN_COUNT/$PEBS_PERIOD = $want +-1 samples)"
if [ -n "$pebs_said" ]; then
	skip "PEBS record: Linux $(uname -r)'s PMU line on $MODEL says $pebs_said (it knows PEBS formats 0-5, not 6 nor architectural PEBS): sampling instructions:u instead"
fi
if [ $have_pmu = 0 ]; then
	timeout $T perf record -q -N -e $samp_ev -c "$PEBS_PERIOD" -o pebs.data -- known-count 2>&1 | head -n 5
	skip "$samp_what record: $nopmu"
elif ! timeout $T perf record -q -N -e $samp_ev -c "$PEBS_PERIOD" -o pebs.data -- known-count; then
	fail "perf record -e $samp_ev failed on $MODEL"
else
	perf evlist -v -i pebs.data | grep -o 'precise_ip: [0-9]*'
	perf report -i pebs.data --stdio --sort sym 2>/dev/null | grep -v '^$'
	perf script -i pebs.data -F ip >ips.txt 2>/dev/null
	n=0
	outside=0
	while read -r ip; do
		n=$((n + 1))
		a=$((0x$ip))
		if [ $a -lt $((KNOWN_START)) ] || [ $a -ge $((KNOWN_END)) ]; then
			outside=$((outside + 1))
			[ $outside -le 3 ] && echo "sample IP $ip is not known-count's"
		fi
	done <ips.txt
	if [ $n -ge $((want - 1)) ] && [ $n -le $((want + 1)) ] && [ $n -gt 0 ]; then
		pass "$samp_what: $n samples of $samp_ev, $KNOWN_COUNT/$PEBS_PERIOD = $want +-1"
	else
		fail "$samp_what: $n samples of $samp_ev; $KNOWN_COUNT/$PEBS_PERIOD = $want +-1 expected"
	fi
	if [ $n -gt 0 ] && [ $outside = 0 ]; then
		pass "$samp_what: all $n sample IPs are known-count's instructions ($KNOWN_START-$KNOWN_END)"
	else
		fail "$samp_what: $outside of $n sample IPs outside known-count's code ($KNOWN_START-$KNOWN_END)"
	fi
fi

# ---- 5. call chains: frame pointers (software event), then LBR ------------
# A sample whose stack reads c, b, a, main from the innermost frame out.
# perf script prints one sample per block: its callchain, one frame a line
# ("  401042 c (/bin/callchain)"), then an empty line.
has_chain() {
	awk 'NF == 0 { if (chain ~ / c b a main/) found = 1; chain = ""; next }
	     { chain = chain " " $2 }
	     END { if (chain ~ / c b a main/) found = 1; exit !found }' "$1"
}
section "perf record --call-graph fp -e cpu-clock:u -- callchain (main -> a -> b -> c)"
if timeout $T perf record -q -N --call-graph fp -e cpu-clock:u -c 50000 -o fp.data -- callchain; then
	perf report -i fp.data --stdio --no-children 2>/dev/null | grep -v '^$' | head -n 30
	perf script -i fp.data -F ip,sym >fp.txt 2>/dev/null
	if has_chain fp.txt; then
		pass "frame-pointer call graph names c <- b <- a <- main"
	else
		fail "no sample in fp.data has the stack c <- b <- a <- main"
		head -n 20 fp.txt
	fi
else
	fail "perf record --call-graph fp -e cpu-clock:u failed"
fi

lbr=$(cat /sys/bus/event_source/devices/cpu/caps/branches 2>/dev/null)
section "perf record -b / --call-graph lbr -- callchain (LBR depth: ${lbr:-none})"
if [ $have_pmu = 0 ]; then
	skip "LBR: $nopmu"
elif [ -z "$lbr" ] || [ "$lbr" = 0 ]; then
	skip "LBR: $MODEL has none (no /sys/bus/event_source/devices/cpu/caps/branches)"
else
	if ! timeout $T perf record -q -N -b -e instructions:u -c 100003 -o br.data -- callchain; then
		fail "perf record -b failed"
	else
		# the default branch sort: Debian's perf 6.1 dies of SIGSEGV on this file
		# with --sort symbol_to (the host's perf 6.1 too, at the same perf+0x163d43)
		perf report -i br.data --stdio -b 2>/dev/null | grep -v '^$' | head -n 20
		perf script -i br.data -F brstacksym >br.txt 2>/dev/null
		# "from+0xoff/to+0xoff/P/-/-/cycles" per record
		edge() {
			if grep -q "\(^\| \)$1+0x[0-9a-f]*/$2+0x" br.txt; then
				pass "perf record -b: branch records hold the $3 $1 -> $2"
			else
				fail "perf record -b: no branch record of the $3 $1 -> $2"
			fi
		}
		edge b c call
		edge c b return
	fi
	if ! timeout $T perf record -q -N --call-graph lbr -e instructions:u -c 100003 -o lbr.data -- callchain; then
		fail "perf record --call-graph lbr failed"
	else
		perf report -i lbr.data --stdio --no-children 2>/dev/null | grep -v '^$' | head -n 30
		perf script -i lbr.data -F ip,sym >lbr.txt 2>/dev/null
		if has_chain lbr.txt; then
			pass "LBR call graph names c <- b <- a <- main"
		else
			fail "no sample in lbr.data has the LBR call stack c <- b <- a <- main"
			head -n 20 lbr.txt
		fi
	fi
fi

# ---- 6. perf test: the PMU-related ones -----------------------------------
# Chosen from `perf test list` of Debian 12's perf 6.1: the tests that open
# hardware events, read counters with RDPMC or check the PMU's sysfs and
# sample formats. Left out: "PMU events" (10: parsing the JSON event tables
# of every CPU; host-side only, ~7 s of CPU natively, minutes on an
# emulator), "Setup struct perf_event_attr" (needs python), "Object code
# reading" (needs objdump), the shell tests (not in the initramfs).
# Run by number (a name selects only the subtests whose names match too),
# looked up by description in this perf's own list.
PERF_TESTS="mmap interface tests
Parse event definition strings
PERF_RECORD_* events & perf_sample fields
Parse perf pmu format
Roundtrip evsel->name
Sample parsing
Convert perf time to TSC
x86 Sample parsing"
section "perf test (PMU-related tests)"
perf test list >tests.txt 2>&1
nums=""
while IFS= read -r desc; do
	[ -n "$desc" ] || continue
	num=$(awk -v d="$desc" '{
		line = $0
		sub(/^ *[0-9]+: /, "", line)
		if ($1 ~ /^[0-9]+:$/ && line == d) { sub(":", "", $1); print $1; exit }
	}' tests.txt)
	if [ -z "$num" ]; then
		skip "perf test '$desc': this perf has no such test"
	else
		nums="$nums $num"
	fi
done <<EOF
$PERF_TESTS
EOF
if [ -n "$nums" ]; then
	echo "perf test$nums"
	# shellcheck disable=SC2086 # one argument per test number
	timeout 600 perf test $nums >tests.txt 2>&1
	cat tests.txt
	# "  4.2: User space counter reading of instructions     : Ok"
	while IFS= read -r line; do
		res=${line##*: }
		what=$(echo "${line%: *}" | sed 's/^ *//; s/ *$//')
		case $res in
		Ok) pass "perf test $what" ;;
		Skip*) skip "perf test $what: perf says $res" ;;
		FAILED*)
			if [ $have_pmu = 0 ]; then
				fail "perf test $what ($nopmu)"
			else
				fail "perf test $what"
			fi
			;;
		esac
	done <tests.txt
fi

echo
echo "SUMMARY: $passed passed, $failed failed, $skipped skipped"
[ $failed = 0 ]
