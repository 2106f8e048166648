// SPDX-License-Identifier: MIT
/*
 * The public headers in a user's translation unit: a key and a probe, compiled warning-free as C99,
 * C11, C17 and GNU11 by the project's C compiler and by clang where it is installed
 * (tests/cli/CMakeLists.txt, test_header_dialects).
 */
#include <lowkey/lowkey.h>

LK_DEFINE_KEY_FALSE(dialect_key);

int dialect_site(int x);

int dialect_site(int x)
{
	if (lk_branch_unlikely(&dialect_key))
		x++;
	LK_PROBE(dialect, site, (long)x);
	return x;
}
