// SPDX-License-Identifier: MIT
/* A program not linked with liblowkey: `lowkey trace` must say so. Exits with argv[1]. */
#include <stdlib.h>

int main(int argc, char **argv)
{
	return argc > 1 ? atoi(argv[1]) : 0;
}
