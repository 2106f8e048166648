# SPDX-License-Identifier: MIT
# What the bench scripts share (bash; sourced: . "$(dirname "$0")/lib.sh").

# median V...: the middle value (the lower of the two middle ones for an even count); sort -g
# reads 1e-06 as well as 12.5
median()
{
	printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

# wait_for FILE PATTERN: until FILE has a line matching PATTERN; a minute at most, then the
# script stops saying what it waited for
wait_for()
{
	for ((k = 0; k < 600; k++)); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "$0: no '$2' in $1" >&2
	exit 1
}

# timed VARIANT CMD...: runs CMD, its output discarded, under /usr/bin/time and adds its elapsed
# seconds, CPU seconds (user + system) and largest resident set (KiB) to the caller's associative
# arrays elapsed[VARIANT], cpu[VARIANT] and rss[VARIANT] (declare -A elapsed cpu rss)
timed()
{
	local v=$1 out e m u s
	shift
	out=$(mktemp /tmp/lowkey_bench_time.XXXXXX)
	/usr/bin/time -o "$out" -f '%e %M %U %S' "$@" >/dev/null 2>&1
	read -r e m u s <"$out"
	rm -f "$out"
	elapsed[$v]="${elapsed[$v]:-} $e"
	rss[$v]="${rss[$v]:-} $m"
	cpu[$v]="${cpu[$v]:-} $(echo "$u + $s" | bc)"
}

# cost_table BASE VARIANT...: each variant's medians of what timed() gathered, elapsed and CPU time
# also as ratios to BASE's
cost_table()
{
	local base_e base_c v e c m
	base_e=$(median ${elapsed[$1]}) base_c=$(median ${cpu[$1]})
	shift
	printf '%-9s %10s %8s %10s %8s %12s\n' "" "elapsed s" "ratio" "CPU s" "ratio" "max RSS KiB"
	for v in "$@"; do
		e=$(median ${elapsed[$v]}) c=$(median ${cpu[$v]}) m=$(median ${rss[$v]})
		printf '%-9s %10.2f %7.2fx %10.2f %7.2fx %12d\n' "$v" "$e" \
			"$(echo "$e / $base_e" | bc -l)" "$c" "$(echo "$c / $base_c" | bc -l)" "$m"
	done
}
