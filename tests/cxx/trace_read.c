// SPDX-License-Identifier: MIT
#include <lowkey/key.h>

#include "key/sites.h"
#include "probe/trace_check.h"
#include "trace_read.h"

static struct lkt_trace trace;

int lkt_trace_load(const char *dir, char *err, size_t errlen)
{
	int rc = lkt_read(&trace, dir);

	snprintf(err, errlen, "%s", trace.err);
	return rc;
}

void lkt_trace_unload(void)
{
	lkt_free(&trace);
}

size_t lkt_trace_events(void)
{
	return trace.n;
}

const char *lkt_trace_name(size_t i)
{
	return trace.ev[i].name;
}

unsigned int lkt_trace_kind(size_t i)
{
	return trace.ev[i].kind;
}

int lkt_trace_tid(size_t i)
{
	return trace.ev[i].tid;
}

unsigned int lkt_trace_nargs(size_t i)
{
	return trace.ev[i].nargs;
}

uint64_t lkt_trace_arg(size_t i, unsigned int a)
{
	return trace.ev[i].v[a];
}

const char *lkt_trace_arg_string(size_t i, unsigned int a)
{
	return trace.ev[i].s[a];
}

size_t lkt_trace_count(const char *name)
{
	return lkt_count(&trace, name);
}

int lkt_check_all_sites(void)
{
	return lkt_check_sites(NULL);
}

int lkt_check_key_sites(const void *key)
{
	return lkt_check_sites(key);
}
