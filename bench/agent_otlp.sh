#!/bin/bash
# SPDX-License-Identifier: MIT
# lowkey agent --otlp's figures (docs/BENCHMARKS.md, "lowkey agent"): PROCS copies of
# tests/agent/lkt_agent_prog each record BEATS spans otl:beat around an event otl:seq as fast as
# they can (beats 0 BEATS 0: two OTLP spans a beat, no sampling), followed by one agent that sends
# them to a local OpenTelemetry Collector (tests/otlp's, built by `ctest -R otlp_collector_build`;
# its file exporter writes to /dev/null). Prints, per run: the spans the programs recorded, the
# events their rings lost, the spans the agent exported and dropped, the seconds from the first
# beat until the poll (every 0.2 s) that saw the agent's last span sent or dropped, exported
# spans per second, the agent's CPU seconds (user + system) to the end (a second later) and per
# 100,000 spans it handled, its peak RSS (VmHWM), the receiver's CPU seconds over the run, and the
# spans it sampled out. RECEIVER=sink sends to tests/otlp/otlp_sink instead, which discards what it
# reads: what the agent alone can send, without the collector's CPU time on the same machine.
# REQUESTS=N passes --otlp-requests N (default: the agent's). RATE=R paces each program to R beats
# a second (2R spans) instead of as fast as it can. Options after RUNS go to the agent: --sample
# 'otl:*=1/100', --slow 0.01,0.1 (docs/BENCHMARKS.md).
# usage: [RECEIVER=collector|sink] [REQUESTS=N] [RATE=R] bench/agent_otlp.sh BUILD_DIR PROCS BEATS [RUNS [AGENT OPTION...]]
set -u
. "$(dirname "$0")/lib.sh"
build=$1 procs=$2 beats=$3 runs=${4:-1}
shift $(($# < 4 ? $# : 4))
lowkey=$build/tools/lowkey/lowkey
prog=$build/tests/agent/lkt_agent_prog
otelcol=$build/tests/otlp/otelcol
sink=$build/tests/otlp/otlp_sink
receiver=${RECEIVER:-collector}
requests=()
[ -n "${REQUESTS:-}" ] && requests=(--otlp-requests "$REQUESTS")
tmp=$(mktemp -d /dev/shm/lowkey-agent-otlp-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$tmp"' EXIT
if [ "$receiver" = sink ]; then
	[ -x "$sink" ] || {
		echo "no receiver at $sink: build the otlp_sink target" >&2
		exit 1
	}
elif [ ! -x "$otelcol" ]; then
	echo "no collector at $otelcol: ctest -R otlp_collector_build" >&2
	exit 1
fi

cpu_s()
{
	awk '{ sub(/.*\) /, ""); print ($12 + $13) / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat"
}

metric()
{
	curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" 'index($0, m) == 1 { s += $NF } END { print s + 0 }'
}

port_otlp=$((20000 + $$ % 20000))
# The programs' name (comm), this run's own: another agent_otlp.sh running meanwhile follows its own.
name=lko_$$
cat >"$tmp/otelcol.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$port_otlp
exporters:
  file:
    path: /dev/null
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
EOF
if [ "$receiver" = sink ]; then
	"$sink" >"$tmp/sink.out" &
	receiver_pid=$!
	until [ -s "$tmp/sink.out" ]; do sleep 0.1; done
	port_otlp=$(head -1 "$tmp/sink.out")
else
	"$otelcol" --config="file:$tmp/otelcol.yaml" >"$tmp/otelcol.log" 2>&1 &
	receiver_pid=$!
fi
until curl -s -o /dev/null "http://127.0.0.1:$port_otlp/"; do sleep 0.1; done

echo "procs spans_recorded events_lost exported dropped_full dropped_failed seconds exported_per_s agent_cpu_s agent_cpu_s_per_100k agent_peak_rss_kib receiver_cpu_s sampled_out"
for ((r = 0; r < runs; r++)); do
	pids=()
	for ((i = 0; i < procs; i++)); do
		mkfifo "$tmp/in$i"
		LKT_PROG_NAME=$name LOWKEY_CONTROL=1 "$prog" <"$tmp/in$i" >"$tmp/out$i" &
		pids+=($!)
		eval "exec $((10 + i))>\"$tmp/in$i\""
		wait_for "$tmp/out$i" ready
	done
	"$lowkey" agent --listen 127.0.0.1:0 --spool "$tmp" --process "$name" -e 'otl:*' -b 64M \
		--scan-interval 0.2 --otlp "http://127.0.0.1:$port_otlp" "${requests[@]}" "$@" 2>"$tmp/agent.err" &
	agent=$!
	wait_for "$tmp/agent.err" "serving .* port [0-9][0-9]* .*spool"
	port=
	for ((k = 0; k < 600 && ${#port} == 0; k++)); do
		port=$(sed -n 's/.*serving.* port \([0-9][0-9]*\) .*/\1/p' "$tmp/agent.err")
		[ -n "$port" ] || sleep 0.1
	done
	until [ "$(metric 'lowkey_process_attached{')" -ge "$procs" ]; do sleep 0.1; done
	cpu0=$(cpu_s $agent)
	rcpu0=$(cpu_s $receiver_pid)
	t0=$(date +%s.%N)
	for ((i = 0; i < procs; i++)); do
		if [ -n "${RATE:-}" ]; then
			echo "pace 0 $beats $RATE" >&$((10 + i))
		else
			echo "beats 0 $beats 0" >&$((10 + i))
		fi
	done
	for ((i = 0; i < procs; i++)); do wait_for "$tmp/out$i" done; done
	# until every span read is sent or dropped, and no more come
	last=-1 same=0
	while [ $same -lt 5 ]; do
		sleep 0.2
		handled=$(($(metric lowkey_agent_otlp_spans_exported_total) + $(metric lowkey_agent_otlp_spans_dropped_total) +
			$(metric lowkey_agent_otlp_spans_sampled_out_total)))
		if [ "$(metric lowkey_agent_otlp_spans_queued)" = 0 ] &&
			[ "$(metric lowkey_agent_otlp_spans_held)" = 0 ] && [ "$handled" = "$last" ] &&
			[ "$handled" -gt 0 ]; then
			same=$((same + 1))
		else
			same=0 t1=$(date +%s.%N)
		fi
		last=$handled
	done
	cpu1=$(cpu_s $agent)
	rcpu1=$(cpu_s $receiver_pid)
	exported=$(metric lowkey_agent_otlp_spans_exported_total)
	full=$(metric 'lowkey_agent_otlp_spans_dropped_total{reason="queue_full"}')
	failed=$(metric 'lowkey_agent_otlp_spans_dropped_total{reason="failed"}')
	lost=$(metric 'lowkey_events_lost_total{')
	sampled=$(metric lowkey_agent_otlp_spans_sampled_out_total)
	rss=$(awk '/VmHWM/ { print $2 }' /proc/$agent/status)
	awk -v p="$procs" -v n=$((2 * beats * procs)) -v l="$lost" -v e="$exported" -v f="$full" \
		-v x="$failed" -v t0="$t0" -v t1="$t1" -v c0="$cpu0" -v c1="$cpu1" -v rss="$rss" \
		-v r0="$rcpu0" -v r1="$rcpu1" -v s="$sampled" \
		'BEGIN { t = t1 - t0; c = c1 - c0;
		 printf "%d %d %d %d %d %d %.2f %.0f %.2f %.3f %d %.2f %d\n", p, n, l, e, f, x, t, e / t, c,
			c / (e + f + x + s) * 1e5, rss, r1 - r0, s }'
	kill -INT $agent
	wait $agent
	for ((i = 0; i < procs; i++)); do
		echo quit >&$((10 + i))
		eval "exec $((10 + i))>&-"
		rm -f "$tmp/in$i" "$tmp/out$i"
	done
	wait "${pids[@]}"
done
