#!/bin/sh
# SPDX-License-Identifier: MIT
# browser_test.sh KIND LOWKEY HTML_TARGET [LOCKS_VICTIM | RACES_FIXTURE]: make one of lowkey's HTML pages and load
# it in headless Chromium (check_page.py says what is checked). Exit 77 (skipped) where Chromium
# or python3 with Pillow is missing, saying so.
set -eu
export LC_ALL=C
kind=$1 lowkey=$2 target=$3
here=$(cd "$(dirname "$0")" && pwd)
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
	echo "SKIP: no chromium (Debian package chromium, in deps/html.deps)"
	exit 77
fi
# Debian's python3 first: python3-pil installs Pillow for it, not for another python3 on PATH
python=
for p in /usr/bin/python3 "$(command -v python3 || true)"; do
	if [ -x "$p" ] && "$p" -c 'import PIL.Image' 2>/dev/null; then
		python=$p
		break
	fi
done
if [ -z "$python" ]; then
	echo "SKIP: no python3 with Pillow (Debian packages python3, python3-pil, in deps/html.deps)"
	exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/lkt-html.XXXXXX")
# LK_HTML_SCREENSHOTS=DIR keeps each page and its screenshot there, to be looked at
keep() {
	[ -z "${LK_HTML_SCREENSHOTS:-}" ] || cp "$dir/$kind.html" "$dir/$kind.png" "$LK_HTML_SCREENSHOTS/" 2>/dev/null || true
	rm -rf "$dir"
}
trap keep EXIT
page=$dir/$kind.html
check() {
	"$python" "$here/check_page.py" "$chromium" "$page" "$dir/$kind.png" "$@"
}
case $kind in
report|report_json|report_perfetto)
	# with the context switches where this machine lets lowkey record them (perf_event_open)
	if "$lowkey" trace --sched -c -o "$dir/t.ctf" -- "$target"; then
		sched=yes offcpu="rect.offcpu>=4" split="svg.stacked=1" parts="rect.part>=3"
	else
		echo "(no --sched here: the timeline is checked without its off-CPU strips, and no split)"
		"$lowkey" trace -c -o "$dir/t.ctf" -- "$target"
		sched=no offcpu="rect.offcpu=0" split="svg.stacked=0" parts="rect.part=0"
	fi
	# the same page from the trace converted to JSON or Perfetto (lowkey report reads all three)
	trace=$dir/t.ctf
	case $kind in
	report_json) trace=$dir/t.json ;;
	report_perfetto) trace=$dir/t.pftrace ;;
	esac
	[ "$trace" = "$dir/t.ctf" ] || "$lowkey" convert -q "$dir/t.ctf" -o "$trace"
	"$lowkey" report --html "$page" "$trace"
	# 3 span events x (wall, CPU), the timeline with the 4 threads' spans (and their hatched
	# off-CPU strips), with --sched the split by thread (a bar of up to 3 parts for each worker:
	# the main thread has no span) and its 2 tables,
	# 3 counters drawn one line per thread that set it, 2 tables; the palette's first three
	# colours are the span events' (app:execute, app:parse, app:request)
	tables=2
	[ $sched = no ] || tables=4
	check --expect svg.histogram=6 --expect "rect.bar>=18" --expect svg.timeline=1 --expect rect.lane=4 \
	      --expect "rect.span>=50" --expect "$offcpu" --expect "pattern=2" --expect "$split" --expect "$parts" \
	      --expect svg.line=3 --expect polyline.series=8 --expect table=$tables --expect script=0 \
	      --series "app:progress=4" --series "app:queue_depth=3" --series "app:latency_us=1" \
	      --text "app:request: wall time (360 spans)" --text "worker-2" \
	      --colour 4e79a7 --colour f28e2b --colour 59a14f
	if [ $sched = yes ]; then
		# the split's figures are the text report's, by thread and by span event
		"$lowkey" report "$trace" >"$dir/report.txt"
		"$python" "$here/check_split.py" "$page" "$dir/report.txt"
	fi
	;;
hostile)
	# a thread name that is markup, and an event name with markup and a byte that is not UTF-8
	"$lowkey" trace -o "$dir/t.ctf" -- "$target" '</svg><script>'
	hostile=$(printf '</svg><script>alert(1)</script>\377')
	for f in "$dir/t.ctf/.lowkey-index" "$dir/t.ctf/metadata"; do
		[ -f "$f" ] && grep -q latency_us "$f" && sed -i "s#latency_us#$hostile#g" "$f" && break
	done
	"$lowkey" report --html "$page" "$dir/t.ctf"
	check --expect script=0 --expect svg.histogram=3 --expect svg.line=3 \
	      --text '</svg><script> (' --text 'app:</svg><script>alert(1)</script>'
	;;
locks)
	victim=$4
	"$lowkey" locks --html "$page" -- "$victim" 2>"$dir/locks.txt" || { cat "$dir/locks.txt"; exit 1; }
	# locks_victim's 10 most waited-for locks: a bar for the wait and one for the hold of each. The
	# spinlock's is among them; its rank depends on how long each wait took, which the test does
	# not set.
	check --expect svg.bars=1 --expect rect.bar=20 --expect table=1 --expect tr=11 --expect script=0 \
	      --text "spin_contended (locks_victim.c:" --text "spinlock, spin_contended" \
	      --colour 4e79a7 --colour f28e2b
	;;
races)
	fixture=$4
	# a race two calls deep on each side, found with the seed fixed (tests/races); where this
	# process cannot have the watchpoints, lowkey says so and the page cannot be made
	st=0
	"$lowkey" races --seed 1 --rate 500 --window 5 --html "$page" -- "$fixture" deep 3 \
		>"$dir/races.txt" 2>&1 || st=$?
	if [ $st = 1 ] && grep -q "cannot arm the" "$dir/races.txt"; then
		echo "SKIP: no watchpoints here:"; cat "$dir/races.txt"
		exit 77
	fi
	[ $st = 66 ] || { cat "$dir/races.txt"; exit 1; }
	# the chart of how often each race was caught, the races' table and one of stacks per race
	check --expect svg.bars=1 --expect "rect.bar>=2" --expect "table>=2" --expect script=0 \
	      --text "deep_value" --text "inner_write+0x" --text "outer_write+0x" \
	      --text "inner_read+0x" --text "outer_read+0x" --colour 4e79a7
	;;
bench)
	# the cputime bench, short: its two rows beside the vDSO patch's, and its tables
	"$lowkey" bench cputime --runs 3 --samples 2000 --quiet --html "$page"
	check --expect svg.bars=1 --expect rect.bar=4 --expect "table>=2" --expect script=0 \
	      --text "vDSO thread CPU time patch: 100M reads of the thread" --text "clock_gettime(CLOCK_THREAD_CPUTIME_ID)" \
	      --text "lk_thread_cputime_ns" --colour 4e79a7 --colour f28e2b
	;;
*)
	echo "unknown page kind $kind" >&2
	exit 2
	;;
esac
