#!/bin/sh
# Writes the seed inputs of the trace reader's corpus (tests/fuzz/fuzz_reader.c): traces of
# tests/control/target.c -- integers, a span, counters; with thread CPU time; a library's site with
# a string -- each packed as the harness reads them (u16 index length, the index, one stream, cut
# to 4 KiB), and a stream cut inside a packet. Run once from the source tree, after a build:
#   tests/fuzz/seed_reader.sh build tests/fuzz/corpus/reader
set -eu
build=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pack() {	# pack TRACE_DIR NAME [BYTES]
	index=$1/.lowkey-index
	stream=$(ls "$1"/stream-* | head -1)
	len=$(stat -c %s "$index")
	{
		printf "\\$(printf %03o $((len & 255)))\\$(printf %03o $((len >> 8)))"
		cat "$index"
		head -c "${3:-4096}" "$stream"
	} > "$out/seed-$2"
}

lowkey=$build/tools/lowkey/lowkey
target=$build/tests/control/lkt_ctl_target
"$lowkey" trace -o "$tmp/plain.ctf" -- "$target" emit 40 >/dev/null 2>&1
"$lowkey" trace --cputime -o "$tmp/cpu.ctf" -- "$target" emit 20 >/dev/null 2>&1
"$lowkey" trace -e 'lib:*' -o "$tmp/lib.ctf" -- "$target" emit 30 >/dev/null 2>&1
pack "$tmp/plain.ctf" plain
pack "$tmp/cpu.ctf" cputime
pack "$tmp/lib.ctf" strings
pack "$tmp/plain.ctf" cut 150
echo "4 seeds written to $out"
