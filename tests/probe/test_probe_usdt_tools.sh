#!/bin/sh
# SPDX-License-Identifier: MIT
# USDT with the tools users have: bpftrace and perf (Debian's bpftrace and linux-perf) list
# lowkey's sites, attach to them and see every event with its arguments:
#   - bpftrace, the program turning its sites on itself (lk_probe_usdt_enable): every call seen;
#   - bpftrace, the site turned on by the semaphore bpftrace raises (the library's watcher reads
#     it), bpftrace starting the program (-c) or attaching to it running (-p);
#   - perf probe + perf record -e sdt_lkt_usdt:query, turned on by perf's semaphore the same way,
#     perf starting the program or attaching to it running (-p): `lowkey list --pid` shows the
#     tracer attached, and every call after that is seen;
#   - SystemTap: stap -L lists the marks and their arguments, stap -p3 translates a script on them
#     (a uprobe at each note, with its semaphore, the arguments from the note's registers); it
#     runs the script only where a build tree for the running kernel lets it build its module.
# Each query runs in a scoped span (LK_SPAN) whose end, reached at the scope's exit, fires
# lkt_usdt:request_end once for every lkt_usdt:request_begin.
# A tool that is missing, or cannot attach here (not root, no tracefs, BPF denied), is skipped
# with the reason; if none ran, the test is skipped (77).
# usage: test_probe_usdt_tools.sh TARGET (tests/probe/usdt_target.c) LOWKEY
set -u
target=$1
lowkey=$2
failed=0
ran=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail()
{
	echo "FAIL: $*"
	failed=1
}

# Lines "Q id twice table" of $1: each with twice = -2 * id and table "users"; prints the count.
checked_queries()
{
	awk -v file="$1" '
		$1 == "Q" { n++; if ($3 != -2 * $2 || $4 != "users") { print "bad line in " file ": " $0 > "/dev/stderr"; bad = 1 } }
		END { print n + 0; exit bad }' "$1"
}

bpftrace_script()
{
	printf 'usdt:%s:lkt_usdt:query { printf("Q %%d %%d %%s\\n", arg0, arg1, str(arg2)); }\n' "$target"
	printf 'usdt:%s:lkt_usdt:done { printf("D %%d\\n", arg0); }\n' "$target"
	printf 'usdt:%s:lkt_usdt:request_begin { printf("B\\n"); }\n' "$target"
	printf 'usdt:%s:lkt_usdt:request_end { printf("E\\n"); }\n' "$target"
}

# The scoped spans of $1: as many ends as begins, at least $2 of them; prints the count.
checked_spans()
{
	awk -v file="$1" -v least="$2" '
		$1 == "B" { b++ } $1 == "E" { e++ }
		END { print e + 0; if (b != e || e < least) { print file ": " b + 0 " request_begin, " e + 0 " request_end" > "/dev/stderr"; exit 1 } }' "$1"
}

run_bpftrace()
{
	if ! command -v bpftrace >/dev/null; then
		echo "SKIP bpftrace: not installed (Debian: bpftrace)"
		return
	fi
	bpftrace -l "usdt:$target:*" >"$tmp/list" 2>&1
	if ! grep -qx "usdt:$target:lkt_usdt:query" "$tmp/list"; then
		fail "bpftrace -l does not list usdt:$target:lkt_usdt:query:"
		cat "$tmp/list"
		return
	fi
	bpftrace_script >"$tmp/script.bt"
	timeout 120 bpftrace "$tmp/script.bt" -c "$target 50 api" >"$tmp/api" 2>&1
	if ! grep -q '^D ' "$tmp/api" && grep -qiE 'permission|not permitted|cap_|BPF_PROG_LOAD|failed to attach' "$tmp/api"; then
		echo "SKIP bpftrace: it cannot attach here:"
		cat "$tmp/api"
		return
	fi
	ran=1
	n=$(checked_queries "$tmp/api") || fail "bpftrace saw wrong arguments (api)"
	[ "$n" = 50 ] || fail "bpftrace saw $n of the 50 queries of a program that enabled its sites"
	checked_spans "$tmp/api" 50 >/dev/null || fail "bpftrace did not see every scoped span's end (api)"
	grep -qx "usdt:$target:lkt_usdt:request_end" "$tmp/list" || fail "bpftrace -l does not list the scoped span's end"
	grep -qx 'D 50' "$tmp/api" || fail "bpftrace did not see lkt_usdt:done(50)"

	timeout 120 bpftrace "$tmp/script.bt" -c "$target 300" >"$tmp/watch" 2>&1
	n=$(checked_queries "$tmp/watch") || fail "bpftrace saw wrong arguments (semaphore)"
	[ "$n" -ge 1 ] || fail "bpftrace's semaphore never turned the site on"
	checked_spans "$tmp/watch" 1 >/dev/null || fail "bpftrace did not see the scoped span's end (semaphore)"
	grep -qx 'D 300' "$tmp/watch" || fail "bpftrace did not see lkt_usdt:done(300) (semaphore)"
	[ $failed -eq 0 ] && echo "bpftrace: $n of 300 queries once the semaphore was seen, all 50 with the API"
	[ $failed -eq 0 ] || cat "$tmp/api" "$tmp/watch"
	run_bpftrace_late
}

# bpftrace -p on a program that runs already, with no step from the user: it exits at the 200th
# query it sees.
run_bpftrace_late()
{
	"$target" 1 until-term &
	pid=$!
	printf 'usdt:%s:lkt_usdt:query { printf("Q %%d %%d %%s\\n", arg0, arg1, str(arg2)); @n++; if (@n == 200) { exit(); } }\n' \
		"$target" >"$tmp/late.bt"
	timeout 120 bpftrace -p "$pid" "$tmp/late.bt" >"$tmp/late" 2>&1
	kill -TERM "$pid"
	wait "$pid" || fail "the target attached to by bpftrace -p failed"
	n=$(checked_queries "$tmp/late") || fail "bpftrace -p saw wrong arguments"
	[ "$n" -ge 200 ] || { fail "bpftrace -p saw $n queries of a running program, not 200"; cat "$tmp/late"; }
	[ $failed -eq 0 ] && echo "bpftrace -p: 200 queries of a running program, with their arguments"
}

# perf probe's events are global (tracefs): one test at a time on this machine adds them.
perf_under_lock()
{
	perf probe -q -d 'sdt_lkt_usdt:*' >/dev/null 2>&1	# left by a run that was killed
	perf probe -x "$target" sdt_lkt_usdt:query >"$tmp/probe" 2>&1
	perf probe -x "$target" sdt_lkt_usdt:done >>"$tmp/probe" 2>&1
	perf probe -x "$target" sdt_lkt_usdt:request_end >>"$tmp/probe" 2>&1
	if ! perf probe -l 2>/dev/null | grep -q 'sdt_lkt_usdt:query'; then
		echo "SKIP perf: perf probe cannot add the SDT events here (root and tracefs needed):"
		cat "$tmp/probe"
		return
	fi
	ran=1
	# in a build with debug information, every probe point has it, the scoped span's end (a stub) too
	perf probe -l >>"$tmp/probe" 2>&1
	if LC_ALL=C readelf -S "$target" | grep -q '\.debug_info' &&
	   grep -q 'Failed to find debug information' "$tmp/probe"; then
		fail "perf probe found no debug information for a probe point:"
		cat "$tmp/probe"
	fi
	timeout 120 perf record -q -e sdt_lkt_usdt:query -e sdt_lkt_usdt:done -e sdt_lkt_usdt:request_end \
		-o "$tmp/perf.data" -- "$target" 300 >"$tmp/record" 2>&1 || fail "perf record failed: $(cat "$tmp/record")"
	perf script -i "$tmp/perf.data" >"$tmp/script" 2>&1
	# "sdt_lkt_usdt:query: (55d0c6c4e21b) arg1=3 arg2=-6 arg3=..."
	awk '/sdt_lkt_usdt:query/ { id = ""; tw = ""
			for (i = 1; i <= NF; i++) { if ($i ~ /^arg1=/) id = substr($i, 6); if ($i ~ /^arg2=/) tw = substr($i, 6) }
			print "Q", id, tw, "users" }' "$tmp/script" >"$tmp/perf.q"
	n=$(checked_queries "$tmp/perf.q") || fail "perf saw wrong arguments"
	[ "$n" -ge 1 ] || fail "perf's semaphore never turned the site on: $(head -5 "$tmp/script")"
	grep -q 'sdt_lkt_usdt:done:.* arg1=300' "$tmp/script" || fail "perf did not see lkt_usdt:done(300)"
	ends=$(grep -c 'sdt_lkt_usdt:request_end:' "$tmp/script")
	[ "$ends" -ge 1 ] || fail "perf never saw the scoped span's end lkt_usdt:request_end"
	[ $failed -eq 0 ] && echo "perf: $n of 300 queries and $ends scoped span ends once the semaphore was seen"
	perf_late control
	perf_late memory
	perf probe -q -d 'sdt_lkt_usdt:*' >/dev/null 2>&1
}

# perf record -p on a program that runs already. perf starts with its events disabled and says
# (its control FIFO's ack) when it has enabled them: its uprobes, and their semaphores, are up by
# then, and `lowkey list --pid` shows the tracer: $1 "control", asking the program's control
# socket (LOWKEY_CONTROL=1), or "memory", reading its memory (no socket: the default). The program
# then makes 20 more calls and exits: perf sees each of them.
perf_late()
{
	rm -f "$tmp/ctl" "$tmp/ack"
	if [ "$1" = control ]; then
		LOWKEY_CONTROL=1 "$target" 20 until-term &
	else
		env -u LOWKEY_CONTROL "$target" 20 until-term &
	fi
	pid=$!
	mkfifo "$tmp/ctl" "$tmp/ack"
	perf record -q -D -1 --control "fifo:$tmp/ctl,$tmp/ack" -e sdt_lkt_usdt:query -e sdt_lkt_usdt:done \
		-p "$pid" -o "$tmp/late.data" >"$tmp/late.rec" 2>&1 &
	rec=$!
	exec 8<>"$tmp/ctl" 7<>"$tmp/ack"
	echo enable >&8
	read -r ack <&7
	[ "$ack" = ack ] || fail "perf record -p did not acknowledge enabling its events: $ack"
	"$lowkey" list --pid "$pid" >"$tmp/late.list" 2>&1
	grep -q 'lkt_usdt:query .* tracer ' "$tmp/late.list" ||
		fail "lowkey list --pid ($1) does not show perf attached: $(cat "$tmp/late.list")"
	"$lowkey" list --json --pid "$pid" 2>/dev/null | grep -q "\"source\": \"$1\"" ||
		fail "lowkey list --json --pid did not read the sites' state from the $1"
	kill -TERM "$pid"
	wait "$pid" || fail "the target attached to by perf record -p failed"
	wait "$rec" || fail "perf record -p failed: $(cat "$tmp/late.rec")"
	exec 8>&- 7>&-
	perf script -i "$tmp/late.data" >"$tmp/late.script" 2>&1
	awk '/sdt_lkt_usdt:query/ { id = ""; tw = ""
			for (i = 1; i <= NF; i++) { if ($i ~ /^arg1=/) id = substr($i, 6); if ($i ~ /^arg2=/) tw = substr($i, 6) }
			print "Q", id, tw, "users" }' "$tmp/late.script" >"$tmp/late.q"
	n=$(checked_queries "$tmp/late.q") || fail "perf record -p saw wrong arguments"
	[ "$n" -ge 20 ] || fail "perf record -p saw $n queries, not the 20 after it attached: $(head -5 "$tmp/late.script")"
	grep -q 'sdt_lkt_usdt:done:.* arg1=20' "$tmp/late.script" || fail "perf record -p did not see lkt_usdt:done(20)"
	[ $failed -eq 0 ] && echo "perf record -p: $n queries of a running program, the 20 after lowkey list ($1) saw it attached among them"
}

run_perf()
{
	if ! command -v perf >/dev/null || ! perf version >/dev/null 2>&1; then
		echo "SKIP perf: not installed, or no perf for this kernel (Debian: linux-perf)"
		return
	fi
	if command -v flock >/dev/null; then
		exec 9>/tmp/lowkey-usdt-perf.lock
		flock 9
	fi
	perf_under_lock
}

# SystemTap needs a kernel build tree (/lib/modules/R/build) even to list probes; it runs a script
# only as a kernel module built for the running kernel (its BPF runtime, stapbpf, cannot read
# $argN in 4.8, and needs CAP_SYS_RESOURCE to raise RLIMIT_MEMLOCK). Listing (-L) and translating
# a script (-p3) need no module: any kernel's build tree serves, picked by -r.
stap_release()
{
	if [ -e "/lib/modules/$(uname -r)/build/.config" ]; then
		uname -r
		return
	fi
	for b in /lib/modules/*/build/.config; do
		[ -e "$b" ] && { basename "$(dirname "$(dirname "$b")")"; return; }
	done
}

# The file offset of link-time address $1 in $target (from its LOAD program headers).
file_offset()
{
	readelf -lW "$target" | awk '$1 == "LOAD" { print $2, $3, $5 }' | while read -r off vaddr size; do
		if [ $(($1)) -ge $((vaddr)) ] && [ $(($1)) -lt $((vaddr + size)) ]; then
			printf '0x%x\n' $(($1 - vaddr + off))
		fi
	done
}

stap_script()
{
	printf 'probe process("%s").mark("query") { printf("Q %%d %%d %%s\\n", $arg1, $arg2, user_string($arg3)) }\n' "$target"
	printf 'probe process("%s").mark("done") { printf("D %%d\\n", $arg1) }\n' "$target"
	printf 'probe process("%s").mark("request_begin") { printf("B\\n") }\n' "$target"
	printf 'probe process("%s").mark("request_end") { printf("E\\n") }\n' "$target"
}

# stap -p3: the module's source puts a uprobe at each note with the note's semaphore, and reads
# query's arguments from the note's registers, signed as the note says (x86-64 register numbers).
check_stap_translation()
{
	readelf -n "$target" | awk '/Name:/ { name = $2 } /Location:/ { gsub(",", ""); print name, $2, $6 }' \
		>"$tmp/notes"
	while read -r name loc sem; do
		case $name in query|done|request_begin|request_end) ;; *) continue ;; esac
		loc=$(printf '0x%x' $((loc)))
		sem=$(printf '0x%x' $((sem)))
		off=$(file_offset "$loc")
		grep -qiE "\.offset=\(loff_t\)($loc|$off)ULL, \.sdt_sem_offset=\(loff_t\)${sem}ULL" "$tmp/stap.c" ||
			fail "stap -p3 puts no uprobe at lkt_usdt:$name ($loc, semaphore $sem)"
	done <"$tmp/notes"
	[ "$(uname -m)" = x86_64 ] || return 0
	want=$(readelf -n "$target" | awk '/Name: query$/ { q = 1 } q && /Arguments:/ { print; exit }' |
		sed 's/.*Arguments: //' | tr ' ' '\n' | awk -F@ '
			BEGIN { split("rax rdx rcx rbx rsi rdi rbp rsp", r, " "); for (i = 1; i <= 8; i++) n["%" r[i]] = i - 1
				for (i = 8; i <= 15; i++) n["%r" i] = i }
			{ print ($1 ~ /^-/ ? "int64_t" : "uint64_t"), n[$2] }')
	got=$(grep -o '(int64_t)([u]*int64_t)((u_fetch_register([0-9]*)' "$tmp/stap.c" | head -3 |
		sed 's/(int64_t)(\([a-z0-9_]*\))((u_fetch_register(\([0-9]*\))/\1 \2/')
	[ "$got" = "$want" ] || fail "stap reads query's arguments as '$(echo $got)', the note says '$(echo $want)'"
}

run_stap()
{
	if ! command -v stap >/dev/null; then
		echo "SKIP stap: not installed (Debian: systemtap)"
		return
	fi
	release=$(stap_release)
	if [ -z "$release" ]; then
		echo "SKIP stap: no kernel build tree in /lib/modules/*/build, which stap needs even to list probes (Debian: linux-headers-amd64)"
		return
	fi
	ran=1
	stap -r "$release" -L "process(\"$target\").mark(\"*\")" >"$tmp/stap.list" 2>"$tmp/stap.err"
	sed "s|^process(\"$target\").mark(||" "$tmp/stap.list" | sort >"$tmp/stap.marks"
	printf '%s\n' '"done") $arg1:long' '"query") $arg1:long $arg2:long $arg3:long' \
		'"request_begin")' '"request_end")' >"$tmp/stap.want"
	cmp -s "$tmp/stap.marks" "$tmp/stap.want" ||
		fail "stap -L lists: $(cat "$tmp/stap.marks" "$tmp/stap.err"), wanted $(cat "$tmp/stap.want")"
	stap_script >"$tmp/script.stp"
	if stap -r "$release" -p3 "$tmp/script.stp" >"$tmp/stap.c" 2>"$tmp/stap.err"; then
		check_stap_translation
	else
		fail "stap -p3 cannot translate a script on lowkey's marks: $(cat "$tmp/stap.err")"
	fi
	[ $failed -eq 0 ] && echo "stap: lists the 4 marks with their arguments, translates a script on them (kernel $release's build tree)"
	if [ "$release" != "$(uname -r)" ]; then
		echo "SKIP stap run: no build tree for the running kernel $(uname -r): stap runs scripts only as a kernel module"
		return
	fi
	timeout 300 stap "$tmp/script.stp" -c "$target 50 api" >"$tmp/stap.run" 2>&1
	if ! grep -q '^D ' "$tmp/stap.run"; then
		echo "SKIP stap run: it cannot build or load its module here:"
		tail -5 "$tmp/stap.run"
		return
	fi
	n=$(checked_queries "$tmp/stap.run") || fail "stap saw wrong arguments"
	[ "$n" = 50 ] || fail "stap saw $n of the 50 queries"
	checked_spans "$tmp/stap.run" 50 >/dev/null || fail "stap did not see every scoped span's end"
	[ $failed -eq 0 ] && echo "stap: every query with its arguments, every scoped span's end"
}

run_bpftrace
run_perf
run_stap
[ $failed -eq 0 ] || exit 1
[ $ran -eq 1 ] || exit 77
echo "the tools that ran here attach to lowkey's sites and see their arguments"
