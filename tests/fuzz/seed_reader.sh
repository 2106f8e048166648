#!/bin/sh
# Writes the seed inputs of the trace reader's corpus (tests/fuzz/fuzz_reader.c): traces of
# tests/control/target.c -- integers, a span, counters; with thread CPU time; a library's site with
# a string -- each packed as the harness reads them (u16 length, the metadata, one stream, cut to
# 4 KiB), and a stream cut inside a packet. (The seed-plain, -cputime, -strings and -cut seeds
# were written by lowkey before format 3, with the index; the seed-metadata-* ones in format 3,
# each event with its vtid; this writes seed-format4-*, a recording's rings as they stand.) Run
# once from the source tree, after a build:
#   tests/fuzz/seed_reader.sh build tests/fuzz/corpus/reader
set -eu
build=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pack() {	# pack TRACE_DIR NAME [BYTES]: its metadata (its index, written before format 3)
	index=$1/.lowkey-index
	[ -e "$index" ] || index=$1/metadata
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
pack "$tmp/plain.ctf" format4-plain
pack "$tmp/cpu.ctf" format4-cputime
pack "$tmp/lib.ctf" format4-strings
pack "$tmp/plain.ctf" format4-cut 150
echo "4 seeds written to $out"
