#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The public headers compile without one warning in a user's translation unit (C_SOURCE,
# CXX_SOURCE), with -I as pkg-config gives it (not -isystem, which would hide the headers'
# warnings), for every compiler at hand (GCC, Clang 14, Clang 16), every supported standard, -O0
# and -O2 (C++: -O2, see check). Used by test_header_hygiene_lock (tests/lock) and
# test_header_hygiene (tests/cli).
#
# usage: hygiene.sh C_SOURCE CXX_SOURCE INCLUDE_DIR BUILD_INCLUDE_DIR C_COMPILER [CXX_COMPILER]
set -u
csrc=$1 cxxsrc=$2 cc=$5 cxx=${6:-}
includes="-I$3 -I$4"
cflags="-Wall -Wextra -pedantic -Werror -Wshadow -Wconversion -Wsign-conversion -Wundef -Wcast-qual
	-Wstrict-prototypes -Wmissing-prototypes"
cxxflags="-Wall -Wextra -pedantic -Werror -Wold-style-cast -Wzero-as-null-pointer-constant
	-Wmissing-field-initializers -Wshadow -Wconversion -Wsign-conversion -Wundef -Wcast-qual
	-Wmissing-declarations"
failed=0 runs=0

# The project's compiler first, then the ones on PATH; each binary once.
compilers() {
	seen=
	for c in "$@"; do
		p=$(command -v "$c" 2>/dev/null) || continue
		r=$(readlink -f "$p")
		case " $seen " in *" $r "*) continue ;; esac
		seen="$seen $r"
		echo "$p"
	done
}

# -O0 and -O2 for C: the key sites' C form depends on __OPTIMIZE__ (bits/key_site.h). For C++ it does
# not, and -fsyntax-only runs none of the passes whose warnings depend on the level: -O2 alone.
check() {	# compiler standard file flags levels
	for o in $5; do
		runs=$((runs + 1))
		# shellcheck disable=SC2086
		if ! out=$("$1" -std="$2" $o $4 $includes -fsyntax-only "$3" 2>&1) || [ -n "$out" ]; then
			echo "FAIL: $1 -std=$2 $o $3"
			echo "$out"
			failed=$((failed + 1))
		fi
	done
}

for c in $(compilers "$cc" gcc clang clang-16); do
	for std in c99 c11 c17 gnu11; do
		check "$c" $std "$csrc" "$cflags" "-O0 -O2"
	done
	echo "checked: $c, C99 C11 C17 GNU11"
done
for c in $(compilers $cxx g++ clang++ clang++-16); do
	for std in c++11 c++14 c++17 c++20 gnu++17; do
		check "$c" $std "$cxxsrc" "$cxxflags" -O2
	done
	echo "checked: $c, C++11 C++14 C++17 C++20 GNU++17"
done
echo "$runs compilations, $failed failed"
[ "$failed" -eq 0 ]
