// SPDX-License-Identifier: MIT
/* A shared library with probe sites, for the control tests (lkt_ctl_lib). */
#include <lowkey/probe.h>

#include "target.h"

void lkt_lib_work(int i)
{
	LK_PROBE(lib, work, i, "from the library");
}
