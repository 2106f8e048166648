#!/bin/bash
# SPDX-License-Identifier: MIT
# completion/lowkey.bash in a non-interactive bash, as bash calls it on Tab: COMP_LINE,
# COMP_POINT, COMP_WORDS (split at COMP_WORDBREAKS, so "db:q" is three words) and COMP_CWORD set,
# then _lowkey_complete, then COMPREPLY checked. Commands, a command's options, option values,
# counter events of `lowkey list` for stat -e, probe sites of a program for trace -e.
# usage: test_completion.sh LOWKEY COMPLETION_SCRIPT PROGRAM_WITH_PROBES
set -u
lowkey=$1 script=$2 program=$3
failed=0

PATH=$(dirname "$lowkey"):$PATH
# shellcheck source=/dev/null
source "$script" || { echo "FAIL: cannot source $script"; exit 1; }
complete -p lowkey >/dev/null || { echo "FAIL: $script registers no completion for lowkey"; exit 1; }

# The words bash makes of $1: blanks separate, and each COMP_WORDBREAKS character is a word.
split_words()
{
	local rest=$1 word breaks=$COMP_WORDBREAKS

	words=()
	while [[ -n $rest ]]; do
		if [[ $rest == [[:space:]]* ]]; then
			rest=${rest#?}
		elif [[ $breaks == *"${rest:0:1}"* ]]; then
			words+=("${rest:0:1}")
			rest=${rest#?}
		else
			word=${rest%%[[:space:]"$breaks"]*}
			words+=("$word")
			rest=${rest#"$word"}
		fi
	done
}

# Complete the line BEFORE AFTER with the cursor between them (at the end without AFTER), as bash
# does on Tab, and leave the candidates in COMPREPLY.
complete_line()
{
	local before=$1 after=${2-} words

	COMP_LINE=$before$after
	COMP_POINT=${#before}
	split_words "$before"
	COMP_WORDS=("${words[@]}")
	[[ -z $before || $before == *[[:space:]] || $COMP_WORDBREAKS == *"${before: -1}"* ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	split_words "$after"
	COMP_WORDS+=("${words[@]}")
	COMPREPLY=()
	_lowkey_complete lowkey "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
}

# expect LINE WORD...: each WORD is among the candidates for LINE (BEFORE|AFTER: the cursor at |).
expect()
{
	local line=$1 want got

	shift
	complete_line "${line%%|*}" "$([[ $line == *"|"* ]] && printf '%s' "${line#*|}")"
	for want in "$@"; do
		for got in "${COMPREPLY[@]}"; do
			[[ $got == "$want" ]] && continue 2
		done
		echo "FAIL: '$line<Tab>' does not offer '$want'; offers: ${COMPREPLY[*]:0:40}"
		failed=1
	done
}

# reject LINE WORD...: no WORD is among the candidates.
reject()
{
	local line=$1 bad got

	shift
	complete_line "${line%%|*}" "$([[ $line == *"|"* ]] && printf '%s' "${line#*|}")"
	for bad in "$@"; do
		for got in "${COMPREPLY[@]}"; do
			if [[ $got == "$bad" ]]; then
				echo "FAIL: '$line<Tab>' offers '$bad'"
				failed=1
			fi
		done
	done
}

# Subcommands, every one `lowkey help` lists.
expect "lowkey " stat trace list report help version --help --version
expect "lowkey st" stat
reject "lowkey st" trace list
for cmd in $("$lowkey" help | awk '/^Commands:/ { c = 1; next } /^$/ { c = 0 } c && /^   [a-z]/ { print $1 }'); do
	expect "lowkey ${cmd:0:2}" "$cmd"
done
expect "lowkey help tr" trace

# Options of a command, from its --help.
expect "lowkey stat --" --events --repeat --pid --json --output --field-separator
expect "lowkey stat --re" --repeat
reject "lowkey stat --re" --json
expect "lowkey trace --" --event --output --format --cputime --buffer --pid --duration --json
expect "lowkey list -" --json --pid
expect "lowkey bench " branch probe sem list
expect "lowkey bench branch --" --runs --flips --json

# Option values written OPT a|b in the help.
expect "lowkey trace --format " ctf json

# Counter events for stat -e, from `lowkey list`; a comma list completes its last item.
expect "lowkey stat -e task-" task-clock
expect "lowkey stat -e page-faults,task-" page-faults,task-clock
expect "lowkey stat --events cyc" cycles

# Probe sites for trace -e: those of the program after --, also when the cursor is before it.
"$lowkey" list "$program" >/dev/null 2>&1 || { echo "FAIL: lowkey list $program fails"; failed=1; }
site=$("$lowkey" list "$program" 2>/dev/null | awk '/^  [^ ]/ { print $1; exit }')
provider=${site%%:*}
if [[ -z $site ]]; then
	echo "FAIL: $program has no probe sites to complete"
	failed=1
else
	expect "lowkey trace -e | -- $program" "$site" "$provider:*"
	# "prov:e" is three words for bash (':' breaks words): the candidates are what follows the ':'.
	expect "lowkey trace -e $provider:${site#*:}| -- $program" "${site#*:}"
	reject "lowkey trace -e $provider:${site#*:}| -- $program" "$site"
	expect "lowkey trace -e ${provider:0:2}| -- $program" "$provider:*"
	# Exclusions: -e -provider:...
	expect "lowkey trace -e -${provider:0:2}| -- $program" "-$provider:*"
	# The sites of a running process (--pid) are asked of it; here a pid with none: no candidate.
	reject "lowkey trace --pid $$ -e ${provider:0:2}" "$provider:*"
fi

# Process ids after --pid, but not after a benchmark's -p (a thread count there).
expect "lowkey stat -p $$" "$$"
expect "lowkey trace --pid $$" "$$"
reject "lowkey bench breakpoint thread -p $$" "$$"

# After --: commands to run, then files.
expect "lowkey stat -- tru" true

[[ $failed -eq 0 ]] && echo "completion offers commands, options, values, events and probe sites"
exit $failed
