#!/bin/sh
# SPDX-License-Identifier: MIT
# `lowkey help COMMAND` opens the installed manual page, as `perf help` does, and falls back to the
# built-in help where man or the page is missing; it never waits on a pager without a terminal.
# The pages are installed into a temporary prefix (`cmake --install --component man`).
# usage: test_help_man.sh LOWKEY BUILD_DIR
set -u
lowkey=$1 build=$2
failed=0
prefix=$(mktemp -d /tmp/lowkey-help-XXXXXX)
trap 'rm -rf "$prefix"' EXIT

fail()
{
	echo "FAIL: $*"
	failed=1
}

# Whether out (the output of a run) is the manual page, or the built-in help.
is_page()
{
	printf '%s\n' "$1" | grep -q 'LOWKEY-TRACE(1)' && printf '%s\n' "$1" | grep -q 'EXIT STATUS'
}
is_builtin()
{
	printf '%s\n' "$1" | head -n1 | grep -q '^usage: lowkey trace' && ! is_page "$1"
}

if ! cmake --install "$build" --prefix "$prefix" --component man >/dev/null; then
	echo "FAIL: cmake --install --component man"
	exit 1
fi
[ -f "$prefix/share/man/man1/lowkey-trace.1" ] || fail "no share/man/man1/lowkey-trace.1 installed"

# Without pages to find, the built-in help: man's path has none, or there is no man at all.
out=$(MANPATH=/nonexistent "$lowkey" help trace 2>&1)
is_builtin "$out" || fail "help trace without a page: not the built-in help: $(printf '%s' "$out" | head -n3)"
out=$(PATH=/nonexistent "$lowkey" help trace 2>&1)
is_builtin "$out" || fail "help trace without man: not the built-in help: $(printf '%s' "$out" | head -n3)"
out=$("$lowkey" help --text trace 2>&1)
is_builtin "$out" || fail "help --text trace: not the built-in help"
out=$("$lowkey" trace --help 2>&1)
is_builtin "$out" || fail "trace --help: not the built-in help"

if ! command -v man >/dev/null; then
	echo "SKIP: man is not installed (Debian: man-db): the fallback works, the page cannot be opened"
	exit $((failed ? 1 : 77))
fi

# MANPATH pointing at the prefix, output to a pipe: the page, as text.
out=$(MANPATH="$prefix/share/man" PAGER=cat MANPAGER=cat "$lowkey" help trace 2>&1)
is_page "$out" || fail "help trace with MANPATH=$prefix/share/man: not the page: $(printf '%s' "$out" | head -n3)"
printf '%s\n' "$out" | grep -q -- '--duration' || fail "help trace: the page lacks --duration"

# Every command's page is installed and opens.
for cmd in $("$lowkey" help | awk '/^Commands:/ { c = 1; next } /^$/ { c = 0 } c && /^   [a-z]/ { print $1 }'); do
	upper=$(printf '%s' "$cmd" | tr a-z A-Z)
	out=$(MANPATH="$prefix/share/man" "$lowkey" help "$cmd" 2>&1)
	printf '%s\n' "$out" | grep -q "LOWKEY-$upper(1)" || fail "help $cmd: not its page: $(printf '%s' "$out" | head -n2)"
done

# An installed lowkey finds the pages of its own prefix, whatever MANPATH says.
mkdir -p "$prefix/bin" && cp "$lowkey" "$prefix/bin/lowkey"
out=$(MANPATH=/nonexistent "$prefix/bin/lowkey" help trace 2>&1)
is_page "$out" || fail "installed lowkey help trace: not its own page: $(printf '%s' "$out" | head -n3)"

# A terminal on stdout but not on stdin (lowkey help trace </dev/null in a terminal): no pager,
# which would wait for keys. script(1) gives the command a terminal; a pager that sleeps would hang.
if command -v script >/dev/null && command -v timeout >/dev/null; then
	out=$(MANPATH="$prefix/share/man" MANPAGER='sleep 60' PAGER='sleep 60' \
		timeout 30 script -qec "'$lowkey' help trace </dev/null" /dev/null 2>&1)
	rc=$?
	[ $rc -ne 124 ] || fail "help trace with stdin not a terminal waited on the pager"
	printf '%s\n' "$out" | grep -q 'LOWKEY-TRACE(1)' || fail "help trace in script(1): not the page: $(printf '%s' "$out" | head -n3)"
else
	echo "script(1) or timeout(1) missing: the terminal case is not checked"
fi

[ $failed -eq 0 ] && echo "help opens the page where it is installed, the built-in help elsewhere, never a pager without a terminal"
exit $failed
