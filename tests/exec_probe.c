// SPDX-License-Identifier: MIT
/* Cross builds: run directly by tests/cross_exec.sh to learn whether the host executes programs of
 * the target (binfmt_misc with a qemu handler). */
int main(void)
{
	return 0;
}
