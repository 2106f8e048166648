#!/bin/bash
# SPDX-License-Identifier: MIT
# How likely `lowkey races` is to find a race in a given run time, at a few sampling rates
# (docs/BENCHMARKS.md, section 5): tests/races/races_fixture MODE for each run time, RUNS runs at
# each rate, each with its own seed (1..RUNS), and the fraction of runs that found it (exit 66).
# usage: bench/races_detection.sh BUILD_DIR MODE RUNS "RATES" "SECONDS"
#   e.g. bench/races_detection.sh build 20 publish "20 200 1000" "0.25 0.5 1 2"
set -u
build=$1 mode=$2 runs=$3 rates=$4 times=$5
fixture=$build/tests/races/races_fixture
lowkey=$build/tools/lowkey/lowkey
sampled=$("$lowkey" races --rate 1 -j -- "$fixture" "$mode" 0.01 2>&1 >/dev/null |
	sed -n 's/.*"sampled": \([0-9]*\).*/\1/p' | head -1)
echo "races_fixture $mode: $sampled instructions sampled; found in N of $runs runs (exit 66)"
printf '%-8s' "rate"
for t in $times; do printf '%10s' "${t}s"; done
echo
for rate in $rates; do
	printf '%-8s' "$rate"
	for t in $times; do
		found=0
		for ((seed = 1; seed <= runs; seed++)); do
			"$lowkey" races --seed "$seed" --rate "$rate" -o /dev/null -- \
				"$fixture" "$mode" "$t" >/dev/null 2>&1
			[ $? = 66 ] && found=$((found + 1))
		done
		printf '%10s' "$found/$runs"
	done
	echo
done
