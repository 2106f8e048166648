// SPDX-License-Identifier: MIT
/*
 * A program with USDT probes of its own provider, written with SystemTap's <sys/sdt.h> as other
 * programs write them; built WITH_LOWKEY, it has a lowkey site too, whose note is lowkey's.
 */
#include <sys/sdt.h>

#ifdef WITH_LOWKEY
#include <lowkey/probe.h>
#endif

int main(int argc, char **argv)
{
	DTRACE_PROBE2(fgn, hello, argc, argv);
	DTRACE_PROBE(fgn, bye);
#ifdef WITH_LOWKEY
	LK_PROBE(mixed, tick, argc);
#endif
	return 0;
}
