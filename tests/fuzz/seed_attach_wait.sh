#!/bin/bash
# Writes the seed scripts of the attach wait's corpus (tests/fuzz/fuzz_attach_wait.c reads them:
# one byte per operation, (arg << 3) | op). Run once:
#   tests/fuzz/seed_attach_wait.sh tests/fuzz/corpus/attach-wait
set -eu
out=$1
seed() { printf "$2" > "$out/seed-$1"; }

# ops: 0 yield arg*8, 1 kill V's holder, 2 socket holder as V (odd arg: nobody's), 3 plain holder
# as V, 4 (arg>>1)+1 processes that exit at once (odd arg: from V), 5 stop the client, 6 continue it
seed a-exits '\x01\x50'
seed to-nobody '\x01\x0a\x50'
seed to-root '\x01\x02\x50'
seed stopped-to-nobody '\x05\x01\x0a\x06\x50'
seed through-a-plain-one '\x01\x03\x18\x01\x0a\x50'
seed cycled '\x01\x2c\x0a\x50'
seed late '\xf8\xf8\x01\x0a\xf8'
seed churn '\x01\x0a\x01\x02\x01\x0a\x01\x03\x01\x0a\x01\x0a\x50'
echo "8 seeds written to $out"
