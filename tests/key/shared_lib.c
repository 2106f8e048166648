// SPDX-License-Identifier: MIT
/* A shared library (linked normally) that defines keys, has sites on them, and on a key of the
 * executable that loads it. */
#include <lowkey/key.h>

#include "sites.h"

LK_DEFINE_KEY_FALSE(lib_key);
LK_DEFINE_KEY_TRUE(lib_true_key);
LK_DECLARE_KEY(exe_key);

int lib_site_lib_key(void);
int lib_site_lib_true_key(void);
int lib_site_exe_key(void);
int lib_check_sites(const void *key);

int lib_site_lib_key(void)
{
	return lk_branch_unlikely(&lib_key) ? 1 : 0;
}

int lib_site_lib_true_key(void)
{
	return lk_branch_likely(&lib_true_key) ? 1 : 0;
}

int lib_site_exe_key(void)
{
	return lk_branch_unlikely(&exe_key) ? 1 : 0;
}

/* Checks this library's own site table. */
int lib_check_sites(const void *key)
{
	return lkt_check_sites(key);
}
