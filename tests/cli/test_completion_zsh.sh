#!/bin/sh
# SPDX-License-Identifier: MIT
# The zsh completion, installed (`cmake --install --component completion`) beside the bash one it
# asks: its candidates for lines as zsh splits them (whole "provider:event" words), then Tab in an
# interactive zsh on a pseudo-terminal (zsh/zpty) completing a command, an option and an event.
# usage: test_completion_zsh.sh LOWKEY BUILD_DIR PROGRAM_WITH_PROBES
set -u
lowkey=$1 build=$2 program=$3

if ! command -v zsh >/dev/null; then
	echo "SKIP: zsh is not installed (Debian: zsh)"
	exit 77
fi
prefix=$(mktemp -d /tmp/lowkey-zsh-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" --component completion >/dev/null || exit 1
functions=$prefix/share/zsh/site-functions
[ -f "$functions/_lowkey" ] || { echo "FAIL: no share/zsh/site-functions/_lowkey installed"; exit 1; }
site=$("$lowkey" list "$program" 2>/dev/null | awk '/^  [^ ]/ { print $1; exit }')
[ -n "$site" ] || { echo "FAIL: $program has no probe sites"; exit 1; }

PATH=$(dirname "$lowkey"):$PATH LOWKEY_TEST_SITE=$site LOWKEY_TEST_PROGRAM=$program \
	timeout 60 zsh -f -c '
failed=0
source "$1/_lowkey" || exit 1
site=$LOWKEY_TEST_SITE program=$LOWKEY_TEST_PROGRAM
# expect "LINE" CURRENT PREFIX WORD: WORD is among the candidates for word CURRENT of LINE.
expect() {
	local words=(${(z)1}) CURRENT=$2 PREFIX=$3 SUFFIX="" got
	got=("${(@f)$(_lowkey_bash_candidates)}")
	(( ${got[(Ie)$4]} )) || { print -r -- "FAIL: $1 (word $2) does not offer $4: $got"; failed=1 }
}
expect "lowkey st" 2 st stat
expect "lowkey stat --re" 3 --re --repeat
expect "lowkey stat -e page-faults,task" 4 page-faults,task page-faults,task-clock
expect "lowkey trace -e ${site%%:*} -- $program" 4 ${site%%:*} "${site%%:*}:*"
expect "lowkey trace -e ${site%:*}:${${site#*:}[1]} -- $program" 4 "${site%:*}:${${site#*:}[1]}" $site

# Tab in an interactive zsh: ^Y prints the line as Tab left it.
zmodload zsh/zpty || exit 1
zpty z "zsh -f -i"
zpty -w z "PS1=\"%% \"; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z "showbuf() { zle -I; print -r -- \"BUFFER<\$BUFFER>\"; BUFFER=\"\" }; zle -N showbuf; bindkey \"^Y\" showbuf"
zpty -n -w z "lowkey sta"$'"'"'\t'"'"'" --js"$'"'"'\t'"'"'" -e task-cl"$'"'"'\t'"'"'$'"'"'\x19'"'"'
zpty -w z exit
out=""
while zpty -r z line; do out+=$line; done 2>/dev/null
[[ $out == *"BUFFER<lowkey stat --json -e task-clock"[\ \>]* ]] ||
	{ print -r -- "FAIL: Tab in zsh did not complete lowkey sta --js -e task-cl: ${(M)${(f)out}:#*BUFFER*}"; failed=1 }
(( failed )) || print "zsh completes commands, options, events and probe sites through the bash completion"
exit $failed
' zsh "$functions"
