// SPDX-License-Identifier: MIT
/* A shared library the test links with: the same header's sites, and one of its own. */
#include "sites.hpp"

extern "C" int lkt_shared_run(int i)
{
	LK_PROBE(cxx_shared, own, i);
	return twice(i) + out_of_line(i) + inlined(i) + with_lambda(i);
}
