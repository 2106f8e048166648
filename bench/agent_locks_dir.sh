#!/bin/bash
# SPDX-License-Identifier: MIT
# lowkey agent --locks-dir (docs/BENCHMARKS.md, "lowkey agent: lock and counter figures"): what
# reading a liblowkey-locks.so table of LOCKS locks costs the agent at each scan. A program
# (tests/agent/lkt_agent_pthread) runs with the preload and LOCKS heap mutexes, each locked once;
# an agent following only that program scans every 0.1 s, with --locks-dir and without it (the
# baseline: its scan of /proc, and its loop), RUNS times each, alternating. Its CPU time
# (/proc/PID/schedstat, ns) over SECONDS after its first second (the locks are named once, at the
# first scan), over the number of scans: the medians, and their ratio.
# usage: bench/agent_locks_dir.sh BUILD_DIR LOCKS SECONDS RUNS
set -u
. "$(dirname "$0")/lib.sh"
build=$1 locks=$2 seconds=$3 runs=$4
lowkey=$build/tools/lowkey/lowkey
tmp=$(mktemp -d /dev/shm/lowkey-agent-locks-dir.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$tmp"' EXIT
mkdir "$tmp/locks"

mkfifo "$tmp/in"
LKT_PROG_NAME=lkt_ld_bench LD_PRELOAD=$build/src/lock/preload/liblowkey-locks.so \
	LOWKEY_LOCKS_DIR=$tmp/locks "$build/tests/agent/lkt_agent_pthread" <"$tmp/in" >"$tmp/out" &
exec 3>"$tmp/in"
wait_for "$tmp/out" ready
echo "many $locks" >&3
wait_for "$tmp/out" done

# ns of CPU per scan of one agent run, with the options given
per_scan() {
	local agent before after
	"$lowkey" agent --listen 127.0.0.1:0 --spool "$tmp" --scan-interval 0.1 \
		--process lkt_ld_bench "$@" 2>"$tmp/agent.err" &
	agent=$!
	sleep 1
	before=$(cut -d' ' -f1 "/proc/$agent/schedstat")
	sleep "$seconds"
	after=$(cut -d' ' -f1 "/proc/$agent/schedstat")
	kill "$agent"
	wait "$agent"
	echo "($after - $before) / ($seconds * 10)" | bc -l
}

with=() without=()
for ((i = 0; i < runs; i++)); do
	without+=("$(per_scan)")
	with+=("$(per_scan --locks-dir "$tmp/locks")")
done
w=$(median "${with[@]}") wo=$(median "${without[@]}")
printf 'agent scan, a table of %d locks: %.0f us with --locks-dir, %.0f us without: %.2fx (median of %d runs of %d s)\n' \
	"$locks" "$(echo "$w / 1000" | bc -l)" "$(echo "$wo / 1000" | bc -l)" \
	"$(echo "$w / $wo" | bc -l)" "$runs" "$seconds"
echo "  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
