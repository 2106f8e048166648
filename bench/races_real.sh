#!/bin/bash
# SPDX-License-Identifier: MIT
# `lowkey races` on a real program with a race injected: pigz 2.6 (docs/BENCHMARKS.md, section 5).
# Fetches nothing: SRC is pigz's unpacked source, `apt-get source pigz` (Debian's 2.6-1) or
# upstream's tag v2.6 (https://github.com/madler/pigz), the same pigz.c, yarn.c and zopfli.
# In WORK it builds, with gcc and the system's zlib (zlib1g-dev), three pigz:
#   plain  -O2 -g, as SRC has it
#   race   -O2 -g, with bench/races_real_pigz.patch: a counter the compression threads add to
#          with no lock held (compress_thread, race_compressed_bytes)
#   tsan   the race one with -fsanitize=thread
# and compresses a generated text file of MIB MiB (WORK/input-MIB.txt: words drawn by awk with a
# fixed seed, so every run and machine has the same bytes) with `pigz -p 2 -c` to /dev/null.
# usage: bench/races_real.sh BUILD_DIR SRC WORK MODE ARGS...
#   detect RUNS "RATES" "MIBS" [WINDOW_MS]
#                               the race pigz under `lowkey races --rate R --seed S --window W`
#                               (S = 1..RUNS, W 1 by default), for each rate and size: runs found
#                               (exit 66 and a race on race_compressed_bytes in compress_thread),
#                               and the races on anything else, all runs together; the last
#                               report that found it is kept in WORK/found-WINDOW.txt
#   clean RUNS RATE MIB [WINDOW_MS]
#                               the plain pigz, RUNS runs (seeds 1..RUNS): runs with a race
#                               reported; the reports are kept in WORK/clean-SEED.txt
#   cost RUNS MIB               plain alone, plain under `lowkey races` (default rate), the same
#                               with `--lib` zlib (pigz's time is mostly zlib's deflate, which
#                               neither lowkey without --lib nor TSan instruments), race alone,
#                               tsan, in turn RUNS times: medians of the elapsed time, the CPU
#                               time (user + system) and the max RSS (/usr/bin/time; under lowkey
#                               races the largest of the command's and the program's)
#   tsan RUNS MIB               the tsan pigz RUNS times: runs in which TSan reported a race on
#                               race_compressed_bytes (and its exit status, 66 by default)
#   e.g. bench/races_real.sh build /tmp/pigz-2.6 /tmp/races_real detect 10 "20 200 1000" "16 64"
set -u
. "$(dirname "$0")/lib.sh"
build=$(realpath "$1") src=$2 work=$3 mode=$4
shift 4
lowkey=$build/tools/lowkey/lowkey
patch=$(realpath "$(dirname "$0")/races_real_pigz.patch")
mkdir -p "$work" || exit 1

# build NAME PATCHED CFLAGS...: WORK/NAME/pigz, once
build_pigz()
{
	local name=$1 patched=$2 dir=$work/$1
	shift 2
	[ -x "$dir/pigz" ] && return 0
	rm -rf "$dir" && mkdir -p "$dir" && cp -r "$src/." "$dir/" || exit 1
	if [ "$patched" = yes ]; then
		(cd "$dir" && patch -s -p1 <"$patch") || exit 1
	fi
	(cd "$dir" && gcc "$@" -Wall -o pigz pigz.c yarn.c try.c zopfli/src/zopfli/*.c \
		-lz -lm -lpthread) || exit 1
}

# input MIB: the path of the generated input of MIB MiB
input()
{
	local file=$work/input-$1.txt
	if [ ! -s "$file" ]; then
		awk -v bytes=$(($1 * 1048576)) 'BEGIN {
			srand(1)
			split("the of and a to in is was that for it with as his on be at by had " \
				"not are but from or have an they which one you were her all she there " \
				"would their we him been has when who will more no if out so said what " \
				"thread lock block deflate window counter race sample compress", w, " ")
			n = length(w)
			while (out < bytes) {
				line = ""
				for (k = 0; k < 12; k++)
					line = line w[int(rand() * n) + 1] " " int(rand() * 100000) " "
				print line
				out += length(line) + 1
			}
		}' | head -c $(($1 * 1048576)) >"$file.tmp" && mv "$file.tmp" "$file" || exit 1
	fi
	echo "$file"
}

build_pigz plain no -O2 -g
build_pigz race yes -O2 -g
build_pigz tsan yes -O2 -g -fsanitize=thread

# is_injected REPORT: the report names the injected race (the counter, in compress_thread)
is_injected()
{
	grep -q 'race_compressed_bytes' "$1" && grep -q 'compress_thread' "$1"
}

# other_races REPORT: how many races the report has on anything but the counter
other_races()
{
	grep -E '^race [0-9]+:' "$1" | grep -vc 'race_compressed_bytes'
}

case $mode in
detect)
	runs=$1 rates=$2 mibs=$3 window=${4:-1}
	out=$work/detect-$window.txt
	sampled=$("$lowkey" races --rate 1 -j -- "$work/race/pigz" -p 2 -c "$(input 1)" \
		2>&1 >/dev/null | sed -n 's/.*"sampled": \([0-9]*\).*/\1/p' | head -1)
	echo "pigz with the race: $sampled instructions sampled; --window $window;" \
		"found in N of $runs runs"
	printf '%-8s' "rate"
	for m in $mibs; do printf '%12s' "${m} MiB"; done
	printf '%10s\n' "others"
	for rate in $rates; do
		printf '%-8s' "$rate"
		others=0
		for m in $mibs; do
			found=0 file=$(input "$m")
			for ((seed = 1; seed <= runs; seed++)); do
				"$lowkey" races --seed "$seed" --rate "$rate" --window "$window" \
					-o "$out" -- \
					"$work/race/pigz" -p 2 -c "$file" >/dev/null 2>&1
				status=$?
				if [ $status = 66 ] && is_injected "$out"; then
					found=$((found + 1))
					cp "$out" "$work/found-$window.txt"
				fi
				others=$((others + $(other_races "$out")))
			done
			printf '%12s' "$found/$runs"
		done
		printf '%10s\n' "$others"
	done
	;;
clean)
	runs=$1 rate=$2 file=$(input "$3") window=${4:-1}
	reported=0
	for ((seed = 1; seed <= runs; seed++)); do
		"$lowkey" races --seed "$seed" --rate "$rate" --window "$window" \
			-o "$work/clean-$seed.txt" -- \
			"$work/plain/pigz" -p 2 -c "$file" >/dev/null 2>&1
		[ $? = 66 ] && reported=$((reported + 1))
	done
	echo "pigz without the race, --rate $rate --window $window, $3 MiB:" \
		"races reported in $reported of $runs runs"
	;;
cost)
	runs=$1 file=$(input "$2")
	declare -A elapsed cpu rss
	libz=$(ldd "$work/plain/pigz" | awk '$1 ~ /^libz\.so/ { print $3 }')
	variants="plain lowkey libz race tsan"
	for ((i = 0; i < runs; i++)); do
		for v in $variants; do
			case $v in
			plain) cmd=("$work/plain/pigz" -p 2 -c "$file") ;;
			lowkey) cmd=("$lowkey" races -o /dev/null -- "$work/plain/pigz" -p 2 -c "$file") ;;
			libz) cmd=("$lowkey" races --lib "$libz" -o /dev/null -- \
				"$work/plain/pigz" -p 2 -c "$file") ;;
			race) cmd=("$work/race/pigz" -p 2 -c "$file") ;;
			tsan) cmd=(env TSAN_OPTIONS=report_bugs=0 "$work/tsan/pigz" -p 2 -c "$file") ;;
			esac
			timed "$v" "${cmd[@]}"
		done
	done
	cost_table plain $variants
	;;
tsan)
	runs=$1 file=$(input "$2")
	found=0
	for ((i = 0; i < runs; i++)); do
		"$work/tsan/pigz" -p 2 -c "$file" >/dev/null 2>"$work/tsan.txt"
		status=$?
		grep -q 'race_compressed_bytes' "$work/tsan.txt" && found=$((found + 1))
	done
	echo "ThreadSanitizer, $2 MiB: race on race_compressed_bytes reported in $found of $runs" \
		"runs (last exit status $status; its report in $work/tsan.txt)"
	;;
*)
	echo "$0: unknown mode '$mode'" >&2
	exit 2
	;;
esac
