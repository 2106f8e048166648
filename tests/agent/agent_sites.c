// SPDX-License-Identifier: MIT
/*
 * 1,000 span sites, agt:s000 to agt:s999, for the agent's scrape figure (bench/agent.sh): each
 * line on standard input records one span at every site, then "done" is printed.
 */
#include <stdio.h>

#include <lowkey/probe.h>

/* clang-format off */
#define S(n) LK_SPAN_BEGIN(agt, s##n); LK_SPAN_END(agt, s##n);
#define D(a) S(a##0) S(a##1) S(a##2) S(a##3) S(a##4) S(a##5) S(a##6) S(a##7) S(a##8) S(a##9)
#define H(a) D(a##0) D(a##1) D(a##2) D(a##3) D(a##4) D(a##5) D(a##6) D(a##7) D(a##8) D(a##9)

static void every_site(void)
{
	H(0) H(1) H(2) H(3) H(4) H(5) H(6) H(7) H(8) H(9)
}
/* clang-format on */

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		every_site();
		printf("done\n");
	}
	return 0;
}
