// SPDX-License-Identifier: MIT
/* A statically linked program: `lowkey locks` must refuse it (LD_PRELOAD cannot reach it). */
int main(void)
{
	return 0;
}
