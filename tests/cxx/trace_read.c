// SPDX-License-Identifier: MIT
#include <dlfcn.h>

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

size_t lkt_site_file_addresses(uint64_t *out, size_t max)
{
	const struct lk__key_site *b =
		(const struct lk__key_site *)(const void *)__start___lk_key_sites;
	const struct lk__key_site *e =
		(const struct lk__key_site *)(const void *)__stop___lk_key_sites;
	size_t n = 0;

	for (; b && b < e; b++, n++) {
		const uint8_t *code = (const uint8_t *)&b->code + b->code;
		Dl_info info;

		if (n < max && dladdr(code, &info) && info.dli_fbase)
			out[n] = (uint64_t)(uintptr_t)(code - (const uint8_t *)info.dli_fbase);
	}
	return n;
}
