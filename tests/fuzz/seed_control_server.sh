#!/bin/bash
# Writes the seed scripts of the control server's corpus (tests/fuzz/fuzz_control_server.c reads
# them: one byte per operation, (client << 3) | op, operands after). Run once:
#   tests/fuzz/seed_control_server.sh tests/fuzz/corpus/control-server
set -eu
out=$1
seed() { printf "$2" > "$out/seed-$1"; }

# ops: 0 connect, 1 frame LEN BYTES, 2 request TYPE OPTIONS, 3 read, 4 close, 5 sync, 6 fire N, 7 shut down
# request types: 0 rule (options: 1 enable, 2 session, glob << 2), 1 start (1 json, 2 stop on close,
# 4 cputime, buffer << 3), 2 stop, 3 status, 4 list
seed status '\x00\x02\x03\x00\x05\x03\x04'
seed session-trace '\x00\x02\x00\x03\x02\x01\x02\x06\x10\x05\x03\x04\x05'
seed list '\x00\x02\x04\x00\x05\x03\x04'
seed junk-unread "\\x00$(for i in $(seq 20); do printf '\\x01\\x04junk'; done)\\x05"
seed kept-and-unowned '\x00\x08\x02\x00\x01\x0a\x01\x01\x06\x05\x0a\x02\x00\x0b\x05'
seed json-owner-leaves '\x00\x02\x00\x03\x02\x01\x03\x06\x08\x04\x05'
seed bad-version '\x00\x01\x10LKCT\x07\x00\x03\x00\x10\x00\x00\x00\x01\x00\x00\x00\x03\x05'
seed half-closed '\x00\x02\x03\x00\x07\x05\x03'
seed flood-unread "\\x00$(for i in $(seq 60); do printf '\\x02\\x03\\x00'; done)\\x08\\x0a\\x03\\x00\\x05\\x0b"
# more junk than the server's replies to it fit in the socket: the server must not wait for it
seed junk-flood-unread "\\x00$(for i in $(seq 1200); do printf '\\x01\\x01j'; done)\\x08\\x0a\\x03\\x00\\x05\\x0b"
echo "10 seeds written to $out"
