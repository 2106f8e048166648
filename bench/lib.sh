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
