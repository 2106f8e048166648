#!/bin/bash
# SPDX-License-Identifier: MIT
# What taking both threads' stacks costs a report of `lowkey races` (docs/BENCHMARKS.md, section
# 5): tests/races/races_fixture deep (a race two calls deep on each side) under `lowkey races
# --stack 0` and `--stack 16` in turn, RUNS times each, seeds 1 to RUNS. Each run's JSON says what
# the library's callbacks cost the program's threads, timed in them from the trap's handler to the
# callback's end ("callbacks"): the held thread's until its window opened (address and stack), and
# the other thread's for the accesses kept (a stack for the first of each instruction), both per
# window. Prints the medians of those means over the runs and the ratio of --stack 16 to 0.
# usage: bench/races_stacks.sh BUILD_DIR RUNS [SECONDS]
set -u
. "$(dirname "$0")/lib.sh"
build=$1 runs=$2 seconds=${3:-2}
lowkey=$build/tools/lowkey/lowkey
fixture=$build/tests/races/races_fixture
out=$(mktemp /tmp/races_stacks.XXXXXX)
trap 'rm -f "$out"' EXIT

# one number of the JSON's: the first "key": N
field()
{
	grep -o "\"$1\": [0-9]*" "$out" | head -1 | awk '{ print $2 }'
}

declare -A held kept
for ((i = 1; i <= runs; i++)); do
	for depth in 0 16; do
		"$lowkey" races --seed "$i" --rate 500 --window 5 --stack $depth -j -o "$out" \
			-- "$fixture" deep "$seconds" >/dev/null
		windows=$(field reached) held_ns=$(field held_ns) kept_ns=$(field kept_ns)
		[ "${windows:-0}" -gt 0 ] && held[$depth]="${held[$depth]:-} $(echo "$held_ns / $windows" | bc -l)"
		[ "${windows:-0}" -gt 0 ] && kept[$depth]="${kept[$depth]:-} $(echo "$kept_ns / $windows" | bc -l)"
	done
done
printf '%-10s %22s %26s\n' "" "held thread ns/window" "other thread ns/window"
for depth in 0 16; do
	printf '%-10s %22.0f %26.0f\n' "--stack $depth" "$(median ${held[$depth]})" "$(median ${kept[$depth]})"
done
printf '%-10s %21.2fx %25.2fx\n' "ratio" \
	"$(echo "$(median ${held[16]}) / $(median ${held[0]})" | bc -l)" \
	"$(echo "$(median ${kept[16]}) / $(median ${kept[0]})" | bc -l)"
