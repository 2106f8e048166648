// SPDX-License-Identifier: MIT
/*
 * Sites compiled without optimization (a debug build), testing keys defined in test_key_basic.c.
 * In C these are load + branch sites (see key.h): not registered, following the key all the same.
 */
#include <lowkey/key.h>

#include "sites.h"

LK_DECLARE_KEY(basic_false);
LK_DECLARE_KEY_TRUE(basic_true);

int o0_unlikely_false(void);
int o0_likely_true(void);
int o0_check_sites(void);

int o0_unlikely_false(void)
{
	if (lk_branch_unlikely(&basic_false))
		return 1;
	return 0;
}

int o0_likely_true(void)
{
	if (lk_branch_likely(&basic_true))
		return 1;
	return 0;
}
