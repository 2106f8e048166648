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
trap 'rm -f "$tsan"' EXIT
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
		timed "$v" "${cmd[@]}"
	done
done
cost_table alone $variants
