#!/bin/sh
# SPDX-License-Identifier: MIT
# Build the OpenTelemetry Collector the OTLP tests send to (tests/otlp/otelcol: the collector's
# Go modules at one release, go.mod), once: OUT is kept, and rebuilt only when the module's files
# change (OUT.stamp). Where it cannot be built (no Go, a module not served), OUT.failed says why
# and the tests that need it skip with that reason; this step itself then succeeds.
#   otelcol.sh SOURCE_DIR OUT
src=$1
case $2 in
/*) out=$2 ;;
*) out=$(pwd)/$2 ;;
esac
stamp=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | cksum | cut -d' ' -f1)
if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
rm -f "$out" "$out.failed" "$out.stamp"
if ! command -v go >/dev/null 2>&1; then
	echo "Go is not installed (the collector is built from its Go modules)" >"$out.failed"
	cat "$out.failed"
	exit 0
fi
start=$(date +%s)
# -mod=mod: go.sum pins every module; the proxy is the environment's (GOPROXY). No VCS stamp:
# the module sits inside this repository, whose state is none of the collector's business.
if ! (cd "$src" && GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -o "$out.tmp" .) >"$out.log" 2>&1; then
	# What failed, without the download log: Go names a module that cannot be had as
	# module@version; a line of main.go is shown as the package it imports.
	reason=$(grep -v '^go: downloading' "$out.log" | head -5 |
		while IFS= read -r line; do
			n=$(expr "$line" : 'main\.go:\([0-9]*\):')
			if [ -n "$n" ]; then
				printf '%s: %s\n' "$(sed -n "${n}p" "$src/main.go" | tr -d '\t')" "${line#*: }"
			else
				printf '%s\n' "$line"
			fi
		done)
	[ -n "$reason" ] || reason=$(tail -5 "$out.log")
	printf 'building it failed (%s):\n%s\n' "$out.log" "$reason" >"$out.failed"
	cat "$out.failed"
	rm -f "$out.tmp"
	exit 0
fi
mv "$out.tmp" "$out" || exit 1
echo "$stamp" >"$out.stamp"
echo "otelcol: built in $(($(date +%s) - start)) s: $out"
