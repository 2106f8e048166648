#!/bin/bash
# SPDX-License-Identifier: MIT
# What `lowkey races` costs a CPU-bound multithreaded program (docs/BENCHMARKS.md, section 5):
# tests/races/races_workload with 2 threads, alone, under `lowkey races` at each of RATES (default
# "20 200": 20 is the default rate), and built with ThreadSanitizer, in turn, RUNS times; the
# medians of the elapsed time, of the CPU time (user + system) and of the largest resident set
# (/usr/bin/time's %M: the largest of lowkey's command and the program, for the runs under lowkey
# races).
# usage: bench/races_slowdown.sh BUILD_DIR ROUNDS RUNS ["RATES"]
set -u
. "$(dirname "$0")/lib.sh"
build=$1 rounds=$2 runs=$3 rates=${4:-20 200}
src=$(dirname "$0")/../tests/races/races_workload.c
workload=$build/tests/races/races_workload
lowkey=$build/tools/lowkey/lowkey
tsan=$(mktemp /tmp/races_workload_tsan.XXXXXX)
times=$(mktemp /tmp/races_time.XXXXXX)
trap 'rm -f "$tsan" "$times"' EXIT
gcc -O2 -g -fsanitize=thread -pthread "$src" -o "$tsan" || exit 1

declare -A elapsed cpu rss
variants="alone"
for rate in $rates; do variants="$variants rate$rate"; done
variants="$variants tsan"
for ((i = 0; i < runs; i++)); do
	for v in $variants; do
		case $v in
		alone) cmd=("$workload" 2 "$rounds") ;;
		rate*) cmd=("$lowkey" races --rate "${v#rate}" -o /dev/null -- "$workload" 2 "$rounds") ;;
		tsan) cmd=("$tsan" 2 "$rounds") ;;
		esac
		/usr/bin/time -o "$times" -f '%e %M %U %S' "${cmd[@]}" >/dev/null 2>&1
		read -r e m u s <"$times"
		elapsed[$v]="${elapsed[$v]:-} $e"
		rss[$v]="${rss[$v]:-} $m"
		cpu[$v]="${cpu[$v]:-} $(echo "$u + $s" | bc)"
	done
done
base_e=$(median ${elapsed[alone]}) base_c=$(median ${cpu[alone]})
printf '%-9s %10s %8s %10s %8s %12s\n' "" "elapsed s" "ratio" "CPU s" "ratio" "max RSS KiB"
for v in $variants; do
	e=$(median ${elapsed[$v]}) c=$(median ${cpu[$v]}) m=$(median ${rss[$v]})
	printf '%-9s %10.2f %7.2fx %10.2f %7.2fx %12d\n' "$v" "$e" "$(echo "$e / $base_e" | bc -l)" \
		"$c" "$(echo "$c / $base_c" | bc -l)" "$m"
done
