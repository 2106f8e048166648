// SPDX-License-Identifier: MIT
/*
 * The readers the harnesses fuzz are linked without the library: the site registration that the
 * headers they include call from constructors is not there, and does nothing here.
 */
#include <lowkey/bits/dso.h>

void lk__dso_register(const struct lk__dso *dso)
{
	(void)dso;
}

void lk__dso_unregister(const struct lk__dso *dso)
{
	(void)dso;
}
