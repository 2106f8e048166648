#!/bin/bash
# SPDX-License-Identifier: MIT
# lowkey agent's lock figures (docs/BENCHMARKS.md, "lowkey agent: lock and counter figures"): a
# program (tests/agent/lkt_agent_prog) with LOCKS named mutexes, each a name of its own, followed
# by an agent with --max-locks LOCKS, so /metrics has 4 series a lock (acquisitions, contended,
# wait, hold); the time to scrape it (curl's time_total), SCRAPES times: the median. What one request costs the process is `lowkey bench agent-figures`.
# usage: bench/agent_locks.sh BUILD_DIR LOCKS SCRAPES
set -u
. "$(dirname "$0")/lib.sh"
build=$1 locks=$2 scrapes=$3
lowkey=$build/tools/lowkey/lowkey
tmp=$(mktemp -d /dev/shm/lowkey-agent-locks.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$tmp"' EXIT

mkfifo "$tmp/in"
LOWKEY_CONTROL=1 "$build/tests/agent/lkt_agent_prog" <"$tmp/in" >"$tmp/out" &
prog=$!
exec 3>"$tmp/in"
wait_for "$tmp/out" ready
echo "manylocks $locks" >&3
wait_for "$tmp/out" done

"$lowkey" agent --listen 127.0.0.1:0 --spool "$tmp" --process lkt_agent_prog \
	--max-locks "$locks" 2>"$tmp/agent.err" &
wait_for "$tmp/agent.err" serving
port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$tmp/agent.err")
last=$(printf 'many-%05d' $((locks - 1)))
until curl -s "http://127.0.0.1:$port/metrics" | grep -q "lock=\"$last\""; do sleep 0.2; done

times=()
for ((i = 0; i < scrapes; i++)); do
	times+=("$(curl -s -o "$tmp/metrics" -w '%{time_total}' "http://127.0.0.1:$port/metrics")")
done
series=$(grep -c '^lowkey_' "$tmp/metrics")
bytes=$(wc -c <"$tmp/metrics")
printf 'scrape of /metrics with %d locks: %d series, %d bytes, median of %d: %.2f ms (curl time_total)\n' \
	"$locks" "$series" "$bytes" "$scrapes" "$(echo "$(median "${times[@]}") * 1000" | bc -l)"
echo "  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
