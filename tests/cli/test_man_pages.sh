#!/bin/sh
# SPDX-License-Identifier: MIT
# The manual pages (docs/man) against the command line they document:
#   - every command `lowkey help` lists has its page, lowkey(1) names it, each page has the
#     sections a man page needs, and renders without a groff or man warning;
#   - every option of a command -- in its --help text, in its getopt tables (tools/lowkey/builtin-CMD.c, util/CMD_*.c)
#     and, for benchmarks, in `lowkey bench NAME --help` -- is in its page: a new option without
#     documentation fails here.
# usage: test_man_pages.sh LOWKEY MANDIR CLI_SOURCE_DIR
set -u
lowkey=$1 mandir=$2 srcdir=$3
failed=0

fail()
{
	echo "FAIL: $*"
	failed=1
}

if ! command -v groff >/dev/null; then
	echo "SKIP: groff is not installed (Debian: groff-base), so the pages cannot be rendered"
	exit 77
fi

# The page as plain text, wide, unhyphenated: an option is never split across lines.
render()
{
	groff -man -Tascii -P-cbou -rLL=500n -rHY=0 "$1" 2>/dev/null
}

# Options in a help text: the option lines ("  -e, --event GLOB  ...") and the synopsis.
help_options()
{
	awk '
		/^$/ { synopsis = 0 }
		/^usage:/ { synopsis = 1 }
		synopsis {
			line = $0
			while (match(line, /[[(| ]--?[A-Za-z][-A-Za-z0-9]*/)) {
				print substr(line, RSTART + 1, RLENGTH - 1)
				line = substr(line, RSTART + RLENGTH)
			}
			next
		}
		/^ +-/ {
			for (i = 1; i <= NF && $i ~ /^-/; i++) {
				sub(/,$/, "", $i)
				print $i
			}
		}'
}

# Options in C sources: getopt_long's short option strings and the long options' tables.
source_options()
{
	sed -n 's/.*getopt_long([^,]*,[^,]*, *"\([^"]*\)".*/\1/p' "$@" | tr -d '+:' | fold -w1 | sed 's/^/-/'
	grep -ho '{ *"[a-z][-a-z0-9]*", *\(no\|required\|optional\)_argument' "$@" |
		sed 's/{ *"\([^"]*\)".*/--\1/'
}

# Whether the rendered page has option opt as a word of its own.
documented()
{
	printf '%s\n' "$2" | grep -qE -- "(^|[^-A-Za-z0-9])$1([^-A-Za-z0-9]|$)"
}

check_page()
{
	page=$1
	# For a terminal and for print: only the latter warns about some characters (a form feed).
	warnings=$(groff -man -ww -z -Tutf8 "$page" 2>&1; groff -man -ww -z -Tps "$page" 2>&1)
	[ -z "$warnings" ] || fail "$page: groff warns: $warnings"
	! tr -d '\t\n' <"$page" | LC_ALL=C grep -q '[[:cntrl:]]' ||
		fail "$page: control characters in the source (a backslash-f taken for a form feed?)"
	if command -v man >/dev/null; then
		warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
		[ -z "$warnings" ] || fail "$page: man --warnings: $warnings"
	fi
	text=$(render "$page")
	for section in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" "SEE ALSO"; do
		printf '%s\n' "$text" | grep -qx "$section" || fail "$page: no $section section"
	done
}

commands=$("$lowkey" help | awk '/^Commands:/ { c = 1; next } /^$/ { c = 0 } c && /^   [a-z]/ { print $1 }')
[ -n "$commands" ] || fail "'$lowkey help' lists no commands"
[ -f "$mandir/lowkey.1" ] || fail "no $mandir/lowkey.1"
check_page "$mandir/lowkey.1"
main_text=$(render "$mandir/lowkey.1")
for opt in $("$lowkey" --help | help_options | sort -u); do
	documented "$opt" "$main_text" || fail "lowkey.1 does not document '$opt' of lowkey --help"
done

for cmd in $commands; do
	page=$mandir/lowkey-$cmd.1
	if [ ! -f "$page" ]; then
		fail "'lowkey $cmd' has no manual page $page"
		continue
	fi
	printf '%s\n' "$main_text" | grep -q "lowkey-$cmd(1)" || fail "lowkey.1 does not name lowkey-$cmd(1)"
	check_page "$page"
	text=$(render "$page")
	sources=$(ls "$srcdir/builtin-$cmd".c "$srcdir/util/$cmd"_*.c 2>/dev/null)
	# --help and -h are the dispatcher's for every command; the page says so too.
	for opt in $( ("$lowkey" "$cmd" --help | help_options; [ -z "$sources" ] || source_options $sources) | sort -u); do
		documented "$opt" "$text" || fail "lowkey-$cmd.1 does not document '$opt' (from lowkey $cmd --help or $cmd*.c)"
	done
done

# Benchmarks: every option of every benchmark's help text is in lowkey-bench.1.
if printf '%s\n' "$commands" | grep -qx bench; then
	text=$(render "$mandir/lowkey-bench.1")
	for name in $("$lowkey" bench list | awk '/^   [a-z]/ { print $1 }'); do
		printf '%s\n' "$text" | grep -qx "  *$name" || printf '%s\n' "$text" | grep -q "^   $name$" ||
			fail "lowkey-bench.1 has no section for benchmark '$name'"
		for opt in $("$lowkey" bench "$name" --help | help_options | sort -u); do
			documented "$opt" "$text" || fail "lowkey-bench.1 does not document '$opt' of lowkey bench $name"
		done
	done
fi

# Pages for commands that are gone: a page nobody can use. (A command this build leaves out, as
# `lowkey watch` without libdw, keeps its source file and its page.)
for page in "$mandir"/lowkey-*.1; do
	cmd=$(basename "$page" .1)
	cmd=${cmd#lowkey-}
	printf '%s\n' "$commands" | grep -qx "$cmd" || grep -qs "\.name = \"$cmd\"" "$srcdir"/builtin-*.c ||
		fail "$page documents '$cmd', which no tools/lowkey/builtin-*.c defines"
done

[ $failed -eq 0 ] && echo "every command has its page, every option is documented, no warnings"
exit $failed
