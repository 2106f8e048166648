// SPDX-License-Identifier: MIT
#include <lowkey/lowkey.h>

/* A site before the header's, so that this unit's __COUNTER__ differs from tu_b's there. */
static int before_the_header(int x)
{
	LK_PROBE(cxx, before_the_header, x);
	return x;
}

#include "sites.hpp"

int tu_a_run(int i)
{
	widget w;

	return before_the_header(i) + twice(i) + static_cast<int>(twice(0.5 * i)) + out_of_line(i) +
	       inlined(i) + keyed(i) + w.member("tu_a", color::red, true) +
	       widget::static_member("a", delta::down) + with_lambda(i) + risky(false);
}
