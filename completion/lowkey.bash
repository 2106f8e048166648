# SPDX-License-Identifier: MIT
# bash completion for lowkey(1): commands, options, counter events (-e of stat), probe sites (-e of
# trace, from `lowkey list PROGRAM` or `--pid PID`), benchmarks, files and pids.
#
# Commands and options are read from lowkey itself (`lowkey help`, `lowkey CMD --help`), so a new
# option completes without a change here. Needs no bash-completion helpers; uses them where
# loaded (_command_offset, for the command after --).

# The lowkey being completed: the one typed when it is a path, else the one on PATH.
_lowkey_bin()
{
	local bin=${COMP_WORDS[0]:-lowkey}

	[[ $bin == */* && -x $bin ]] || bin=lowkey
	printf '%s\n' "$bin"
}

# Lowkey's commands, from `lowkey help`: the "   name   summary" lines under "Commands:".
_lowkey_commands()
{
	"$(_lowkey_bin)" help 2>/dev/null | awk '/^Commands:/ { c = 1; next } /^$/ { c = 0 } c && /^   [a-z]/ { print $1 }'
}

# A command's options from its help text: the option lines ("  -e, --event GLOB  ...") and the
# synopsis ("usage: lowkey stat [-e EVENTS] ...", up to the first blank line).
_lowkey_options()
{
	"$(_lowkey_bin)" "$@" --help 2>/dev/null | awk '
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
		}' | sort -u
}

# The values an option takes when its help writes them "OPT a|b|c" (--format ctf|json).
_lowkey_option_values()
{
	local opt=$1

	shift
	"$(_lowkey_bin)" "$@" --help 2>/dev/null |
		grep -oE -- "(^|[[ ])$opt[ =][a-z0-9]+(\|[a-z0-9]+)+" | head -n1 | sed -E 's/^.*[ =]//' | tr '|' '\n'
}

# Counter event names, from `lowkey list` (indented "  name ..." lines), kept for the session.
_lowkey_counter_events()
{
	if [[ -z ${_lowkey_events_cache-} ]]; then
		_lowkey_events_cache=$("$(_lowkey_bin)" list 2>/dev/null | awk '/^  [^ ]/ { print $1 }')
	fi
	printf '%s\n' "$_lowkey_events_cache"
}

# Probe sites of the program after "--", or of the process of --pid/-p: "provider:event" and
# "provider:*" for each provider.
_lowkey_probe_sites()
{
	local i program="" pid="" all

	# The whole line: the program may come after the cursor (lowkey trace -e <TAB> -- ./server).
	if [[ -n ${COMP_LINE-} ]]; then
		read -r -a all <<<"$COMP_LINE"
	else
		all=("${COMP_WORDS[@]}")
	fi
	for ((i = 2; i < ${#all[@]}; i++)); do
		case ${all[i]} in
		--) program=${all[i + 1]-}; break ;;
		-p | --pid) pid=${all[i + 1]-} ;;
		--pid=*) pid=${all[i]#--pid=} ;;
		esac
	done
	if [[ -n $pid ]]; then
		"$(_lowkey_bin)" list --pid "$pid" 2>/dev/null
	elif [[ -n $program ]]; then
		[[ $program == */* ]] || program=$(type -P -- "$program")
		[[ -n $program ]] && "$(_lowkey_bin)" list "$program" 2>/dev/null
	fi | awk '/^  [^ ]/ { print $1; p = $1; sub(/:.*/, "", p); print p ":*" }' | sort -u
}

# The line up to the cursor, split at blanks: bash's COMP_WORDS split "db:query" at ':' too.
_lowkey_split_line()
{
	local line

	if [[ -n ${COMP_LINE-} ]]; then
		line=${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}
	else
		line="${COMP_WORDS[*]:0:COMP_CWORD+1}"
	fi
	read -r -a _lowkey_words <<<"$line"
	_lowkey_cur=""
	if [[ -n $line && $line != *[[:space:]] ]]; then
		_lowkey_cur=${_lowkey_words[${#_lowkey_words[@]} - 1]}
		unset '_lowkey_words[${#_lowkey_words[@]}-1]'
	fi
	_lowkey_cur=${_lowkey_cur#[\'\"]}
}

# COMPREPLY from words matching the word being completed; a comma list (-e a,b,c) completes its
# last item. Bash replaces only the part after the last ':' or '=' of the word (COMP_WORDBREAKS),
# so that much is taken off each reply.
_lowkey_reply()
{
	local words=$1 cur=$_lowkey_cur lead="" w

	if [[ ${2-} == list ]]; then
		lead=${cur%"${cur##*[,{]}"}
		cur=${cur##*[,{]}
	fi
	if [[ ${2-} == exclude && $cur == -* ]]; then
		lead=-
		cur=${cur#-}
	fi
	COMPREPLY=()
	while IFS= read -r w; do
		[[ -n $w && $w == "$cur"* ]] && COMPREPLY+=("$lead$w")
	done <<<"$words"
	local trim=${_lowkey_cur%"${_lowkey_cur##*[:=]}"}
	if [[ -n $trim && ${COMP_WORDBREAKS-:=} == *:* ]]; then
		for w in "${!COMPREPLY[@]}"; do
			COMPREPLY[w]=${COMPREPLY[w]#"$trim"}
		done
	fi
}

_lowkey_files()
{
	local IFS=$'\n'

	COMPREPLY=($(compgen -f -- "$_lowkey_cur"))
	compopt -o filenames 2>/dev/null
}

# Completion of the word after OPTION of command CMD (bench NAME for benchmarks): 0 when done.
_lowkey_option_value()
{
	local prev=$1 cmd=$2 values

	case $prev in
	-e | --event | --events)
		if [[ $cmd == stat ]]; then
			_lowkey_reply "$(_lowkey_counter_events)" list
		else
			_lowkey_reply "$(_lowkey_probe_sites)" exclude
		fi
		return 0 ;;
	-p | --pid)
		# A process id for every command but the benchmarks (-p is a thread count there).
		if [[ $cmd != bench* ]]; then
			_lowkey_reply "$(cd /proc && printf '%s\n' [0-9]*)"
			return 0
		fi ;;
	-o | --output | --dir)
		[[ $cmd == bench* && $prev == -o ]] || { _lowkey_files; return 0; } ;;
	esac
	values=$(_lowkey_option_values "$prev" $cmd)
	if [[ -n $values ]]; then
		_lowkey_reply "$values"
		return 0
	fi
	return 1
}

_lowkey_complete()
{
	local cmd i words

	_lowkey_split_line
	COMPREPLY=()
	if ((${#_lowkey_words[@]} <= 1)); then
		_lowkey_reply "$(_lowkey_commands; printf '%s\n' --help --version)"
		return 0
	fi
	cmd=${_lowkey_words[1]}
	# After "--": the command to run, and its own arguments.
	for ((i = 2; i < ${#_lowkey_words[@]}; i++)); do
		if [[ ${_lowkey_words[i]} == -- ]]; then
			if declare -F _command_offset >/dev/null && ((COMP_CWORD > i)); then
				_command_offset $((i + 1))
			elif ((i + 1 == ${#_lowkey_words[@]})); then
				COMPREPLY=($(compgen -c -- "$_lowkey_cur"))
			else
				_lowkey_files
			fi
			return 0
		fi
	done
	case $cmd in
	help)
		_lowkey_reply "$(_lowkey_commands; printf '%s\n' --text)"
		return 0 ;;
	bench)
		if ((${#_lowkey_words[@]} == 2)); then
			_lowkey_reply "$("$(_lowkey_bin)" bench list 2>/dev/null | awk '/^   [a-z]/ { print $1 }'; echo list)"
			return 0
		fi
		cmd="bench ${_lowkey_words[2]}" ;;
	esac
	if _lowkey_option_value "${_lowkey_words[${#_lowkey_words[@]} - 1]}" "$cmd"; then
		return 0
	fi
	if [[ $_lowkey_cur == -* ]]; then
		_lowkey_reply "$(_lowkey_options $cmd)"
		return 0
	fi
	if [[ $cmd == "bench breakpoint" ]] && ((${#_lowkey_words[@]} == 3)); then
		_lowkey_reply "$(printf '%s\n' thread enable)"
		return 0
	fi
	_lowkey_files
	return 0
}

complete -F _lowkey_complete lowkey
