// SPDX-License-Identifier: MIT
/* A plugin with probe sites, dlopen()ed by test_probe_dso while a trace runs. */
#include <lowkey/probe.h>

void plugin_fire(long n);

void plugin_fire(long n)
{
	for (long i = 0; i < n; i++)
		LK_PROBE(plug, fired, i, "from the plugin");
}
