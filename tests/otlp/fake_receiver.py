#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An OTLP/HTTP receiver that answers as told, for the exporter's tests of what a collector
rarely does on demand: Retry-After, a refusal, a partial success. It records each request (its
arrival, headers, body) in DIR and prints its port once it listens.

    fake_receiver.py DIR ANSWER...

Each ANSWER serves one request, the last one every request after it: STATUS, STATUS:SECONDS
(a Retry-After) or 200:partialN (a partial success rejecting N spans)."""
import http.server
import json
import os
import sys
import time

out_dir = sys.argv[1]
answers = sys.argv[2:]
served = 0


def partial_success(rejected):
    # ExportTraceServiceResponse { partial_success (1) { rejected_spans (1): rejected } }
    inner = bytes([0x08]) + varint(rejected)
    return bytes([0x0A, len(inner)]) + inner


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        global served
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        answer = answers[min(served, len(answers) - 1)]
        with open(os.path.join(out_dir, "body-%d" % served), "wb") as f:
            f.write(body)
        with open(os.path.join(out_dir, "requests.jsonl"), "a") as f:
            f.write(json.dumps({"time": time.monotonic(), "path": self.path,
                                "headers": {k.lower(): v for k, v in self.headers.items()},
                                "answer": answer}) + "\n")
        served += 1
        status, _, extra = answer.partition(":")
        reply = b""
        if extra.startswith("partial"):
            reply = partial_success(int(extra[len("partial"):]))
        self.send_response(int(status))
        if extra and not extra.startswith("partial"):
            self.send_header("Retry-After", extra)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
