// SPDX-License-Identifier: MIT
/* A plugin the test dlopen()s: sites on a key of the executable and on its own key. */
#include <lowkey/key.h>

#include "sites.h"

LK_DECLARE_KEY(host_key);
LK_DEFINE_KEY_FALSE(plugin_key);

int plugin_host_site(void);
int plugin_own_site(void);
struct lk_key *plugin_own_key(void);
int plugin_check_sites(const void *key);

int plugin_host_site(void)
{
	return lk_branch_unlikely(&host_key) ? 1 : 0;
}

int plugin_own_site(void)
{
	return lk_branch_unlikely(&plugin_key) ? 1 : 0;
}

struct lk_key *plugin_own_key(void)
{
	return LK_KEY(&plugin_key);
}

int plugin_check_sites(const void *key)
{
	return lkt_check_sites(key);
}
