#!/bin/bash
# SPDX-License-Identifier: MIT
# lowkey agent's figures (docs/BENCHMARKS.md, "lowkey agent"):
#  1. the enabled-event cost of a traced program: tests/agent/lkt_agent_prog's "bench N" (N
#     LK_PROBE events, timed in the program by its thread's CPU time) while `lowkey trace --pid` records it into a tmpfs
#     directory (the baseline: the same trace, nobody reading it) and while `lowkey agent` follows
#     it (the same trace, read as it grows), alternately, RUNS times each: medians and their ratio;
#  2. the time to scrape /metrics with 10,000 series: tests/agent/lkt_agent_sites (1,000 span
#     sites) followed with 6 histogram bounds (1 + 6 + 3 series a site), curl's time_total,
#     SCRAPES times: the median.
# usage: bench/agent.sh BUILD_DIR RUNS EVENTS SCRAPES
set -u
. "$(dirname "$0")/lib.sh"
build=$1 runs=$2 events=$3 scrapes=$4
lowkey=$build/tools/lowkey/lowkey
tmp=$(mktemp -d /dev/shm/lowkey-agent-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$tmp"' EXIT

# start PROGRAM: run it with its control socket, commands on fd 3; $prog is its pid
start()
{
	rm -f "$tmp/in" "$tmp/out"
	mkfifo "$tmp/in"
	LOWKEY_CONTROL=1 "$1" <"$tmp/in" >"$tmp/out" &
	prog=$!
	exec 3>"$tmp/in"
	wait_for "$tmp/out" ready
}

# ask COMMAND: send it to the program, wait for its "done"
ask()
{
	local before
	before=$(grep -c '^done' "$tmp/out")
	echo "$1" >&3
	until [ "$(grep -c '^done' "$tmp/out")" -gt "$before" ]; do sleep 0.02; done
}

# agent ARGS...: start lowkey agent; $agent its pid, $port its port, once it follows $prog
agent()
{
	rm -f "$tmp/agent.err" # not the last agent's port
	"$lowkey" agent --listen 127.0.0.1:0 --spool "$tmp" "$@" 2>"$tmp/agent.err" &
	agent=$!
	wait_for "$tmp/agent.err" serving
	port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$tmp/agent.err")
	until curl -s "http://127.0.0.1:$port/metrics" |
		grep -q "^lowkey_process_attached{pid=\"$prog\".*} 1"; do sleep 0.1; done
}

start "$build/tests/agent/lkt_agent_prog"
traced="" followed=""
for ((i = 0; i < runs; i++)); do
	rm -rf "$tmp/t.ctf" "$tmp/trace.err"
	"$lowkey" trace --pid "$prog" -e 'agt:*' -b 64M -q -o "$tmp/t.ctf" 2>"$tmp/trace.err" &
	tracer=$!
	wait_for "$tmp/trace.err" "tracing process"
	ask "bench $events"
	traced="$traced $(grep '^ns ' "$tmp/out" | tail -1 | cut -d' ' -f2)"
	kill -INT $tracer
	wait $tracer

	agent --process lkt_agent_prog -e 'agt:*' -b 64M
	ask "bench $events"
	followed="$followed $(grep '^ns ' "$tmp/out" | tail -1 | cut -d' ' -f2)"
	kill -TERM $agent
	wait $agent
done
echo "quit" >&3
exec 3>&-
wait $prog
t=$(median $traced) f=$(median $followed)
printf 'enabled LK_PROBE, ns an event (median of %d runs of %d events)\n' "$runs" "$events"
printf '  traced by lowkey trace --pid (nobody reads)  %8.2f   1.00x\n' "$t"
printf '  followed by lowkey agent                     %8.2f   %.2fx\n' "$f" "$(echo "$f / $t" | bc -l)"
printf '  runs: trace --pid:%s; agent:%s\n' "$traced" "$followed"

cmake --build "$build" --target lkt_agent_sites >/dev/null || exit 1
start "$build/tests/agent/lkt_agent_sites"
agent --process lkt_agent_sites --max-sites 1000 --buckets 1e-6,1e-5,1e-4,1e-3,0.01,0.1
ask go
until [ "$(curl -s "http://127.0.0.1:$port/metrics" | grep -c '^lowkey_span_duration_seconds_count')" -ge 1000 ]; do
	sleep 0.1
done
series=$(curl -s "http://127.0.0.1:$port/metrics" | grep -vc '^#')
times=""
for ((i = 0; i < scrapes; i++)); do
	times="$times $(curl -s -o /dev/null -w '%{time_total}' -H 'Accept: application/openmetrics-text' "http://127.0.0.1:$port/metrics")"
done
bytes=$(curl -s -H 'Accept: application/openmetrics-text' "http://127.0.0.1:$port/metrics" | wc -c)
printf 'scrape of /metrics: %d series, %d bytes, median of %d: %.2f ms (curl time_total)\n' \
	"$series" "$bytes" "$scrapes" "$(echo "$(median $times) * 1000" | bc -l)"
kill -TERM $agent
wait $agent
echo quit >&3
