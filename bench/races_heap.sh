#!/bin/bash
# SPDX-License-Identifier: MIT
# What `lowkey races --heap` costs (docs/BENCHMARKS.md, section 5): tests/races/races_malloc (a
# malloc-heavy program, 2 threads) and tests/races/races_workload (the CPU-bound program of
# races_slowdown.sh, 2 threads) each run alone, with liblowkey-races-heap.so alone preloaded (the
# interposed allocator without the sampler: the program's own memory, which under lowkey races
# the command's hides), under `lowkey races` at the default rate, and under `lowkey races
# --heap`, in turn, RUNS times; the medians of the elapsed time, of the CPU time (user + system)
# and of the largest resident set (/usr/bin/time's %M: under lowkey races, the largest of the
# command and the program). Ratios: preload to alone, heap to races.
# usage: bench/races_heap.sh BUILD_DIR MALLOC_ROUNDS WORKLOAD_ROUNDS RUNS
set -u
. "$(dirname "$0")/lib.sh"
build=$1 malloc_rounds=$2 workload_rounds=$3 runs=$4
lowkey=$build/tools/lowkey/lowkey
heaplib=$build/src/races/liblowkey-races-heap.so
times=$(mktemp /tmp/races_heap_time.XXXXXX)
trap 'rm -f "$times"' EXIT

declare -A elapsed cpu rss
programs="malloc workload"
variants="alone preload races heap"
for ((i = 0; i < runs; i++)); do
	for p in $programs; do
		case $p in
		malloc) prog=("$build/tests/races/races_malloc" 2 "$malloc_rounds") ;;
		workload) prog=("$build/tests/races/races_workload" 2 "$workload_rounds") ;;
		esac
		for v in $variants; do
			case $v in
			alone) cmd=("${prog[@]}") ;;
			preload) cmd=(env LD_PRELOAD="$heaplib" "${prog[@]}") ;;
			races) cmd=("$lowkey" races -o /dev/null -- "${prog[@]}") ;;
			heap) cmd=("$lowkey" races --heap -o /dev/null -- "${prog[@]}") ;;
			esac
			/usr/bin/time -o "$times" -f '%e %M %U %S' "${cmd[@]}" >/dev/null 2>&1
			read -r e m u s <"$times"
			elapsed[$p$v]="${elapsed[$p$v]:-} $e"
			rss[$p$v]="${rss[$p$v]:-} $m"
			cpu[$p$v]="${cpu[$p$v]:-} $(echo "$u + $s" | bc)"
		done
	done
done
printf '%-16s %10s %8s %10s %8s %12s\n' "" "elapsed s" "ratio" "CPU s" "ratio" "max RSS KiB"
for p in $programs; do
	for v in $variants; do
		case $v in
		alone | preload) base=alone ;;
		*) base=races ;;
		esac
		base_e=$(median ${elapsed[$p$base]}) base_c=$(median ${cpu[$p$base]})
		e=$(median ${elapsed[$p$v]}) c=$(median ${cpu[$p$v]}) m=$(median ${rss[$p$v]})
		printf '%-16s %10.2f %7.2fx %10.2f %7.2fx %12d\n' "$p $v" "$e" \
			"$(echo "$e / $base_e" | bc -l)" "$c" "$(echo "$c / $base_c" | bc -l)" "$m"
	done
done
echo "(ratios: preload to alone, heap to races)"
