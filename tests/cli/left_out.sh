#!/bin/sh
# SPDX-License-Identifier: MIT
# A command this build left out (lowkey races off x86-64) says so and why, for the command and for
# `lowkey help`, and fails; it is not "no such command".
#   left_out.sh COMMAND WHY LOWKEY [EMULATOR...]: runs [EMULATOR...] LOWKEY COMMAND
set -u
cmd=$1 why=$2
shift 2
lowkey=$1
shift
failed=0
for args in "$cmd" "help $cmd"; do
	# shellcheck disable=SC2086
	out=$("$@" "$lowkey" $args 2>&1)
	status=$?
	case $out in
	*"not in this build of lowkey: $why"*) ;;
	*) echo "FAIL: lowkey $args said: $out"; failed=1 ;;
	esac
	if [ "$status" -ne 1 ]; then
		echo "FAIL: lowkey $args exited $status, not 1"
		failed=1
	fi
done
[ "$failed" -ne 0 ] || echo "lowkey $cmd: left out, and says why"
exit "$failed"
