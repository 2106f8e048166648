#!/bin/sh
# SPDX-License-Identifier: MIT
# USDT with the tools users have: bpftrace and perf (Debian's bpftrace and linux-perf) list
# lowkey's sites, attach to them and see every event with its arguments:
#   - bpftrace, the program turning its sites on itself (lk_probe_usdt_enable): every call seen;
#   - bpftrace, the site turned on by the semaphore bpftrace raises (LOWKEY_USDT_WATCH=1);
#   - perf probe + perf record -e sdt_lkt_usdt:query, turned on by perf's semaphore the same way.
# Each query runs in a scoped span (LK_SPAN) whose end, reached at the scope's exit, fires
# lkt_usdt:request_end once for every lkt_usdt:request_begin.
# A tool that is missing, or cannot attach here (not root, no tracefs, BPF denied), is skipped
# with the reason; if none ran, the test is skipped (77).
# usage: test_probe_usdt_tools.sh TARGET (tests/probe/usdt_target.c)
set -u
target=$1
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

	LOWKEY_USDT_WATCH=1 timeout 120 bpftrace "$tmp/script.bt" -c "$target 300" >"$tmp/watch" 2>&1
	n=$(checked_queries "$tmp/watch") || fail "bpftrace saw wrong arguments (semaphore)"
	[ "$n" -ge 1 ] || fail "bpftrace's semaphore never turned the site on"
	checked_spans "$tmp/watch" 1 >/dev/null || fail "bpftrace did not see the scoped span's end (semaphore)"
	grep -qx 'D 300' "$tmp/watch" || fail "bpftrace did not see lkt_usdt:done(300) (semaphore)"
	[ $failed -eq 0 ] && echo "bpftrace: $n of 300 queries once the semaphore was seen, all 50 with the API"
	[ $failed -eq 0 ] || cat "$tmp/api" "$tmp/watch"
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
	LOWKEY_USDT_WATCH=1 timeout 120 perf record -q -e sdt_lkt_usdt:query -e sdt_lkt_usdt:done -e sdt_lkt_usdt:request_end \
		-o "$tmp/perf.data" -- "$target" 300 >"$tmp/record" 2>&1 || fail "perf record failed: $(cat "$tmp/record")"
	perf script -i "$tmp/perf.data" >"$tmp/script" 2>&1
	perf probe -q -d 'sdt_lkt_usdt:*' >/dev/null 2>&1
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

run_bpftrace
run_perf
[ $failed -eq 0 ] || exit 1
[ $ran -eq 1 ] || exit 77
echo "bpftrace and perf attach to lowkey's sites and see their arguments"
