// SPDX-License-Identifier: MIT
/*
 * The registry of probe sites and the rules that select them.
 *
 * Each object's __lk_probe_sites section holds pointers to its site descriptors. When the object
 * registers, every site gets an id (its event id in traces) and a registry entry holding copies of
 * its names, so a trace can still describe it after the object is unloaded. A site records while
 * a trace runs and the last rule matching it is an enable rule; rule changes, trace start and stop,
 * and objects loading all come down to lk__probe_apply_rules_locked(), which flips the keys that
 * must change in one batch.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "key/key_internal.h"
#include "probe/probe_internal.h"
#include "probe/sdt_internal.h"
#include "internal/site_names.h"

static struct lk__rule_list rules; /* what a trace records */

static struct lk__probe_site_rt *sites;
static size_t nsites, sites_cap;

struct lk__probe_site_rt *lk__probe_sites(size_t *n)
{
	*n = nsites;
	return sites;
}

static bool glob_matches(const char *glob, const struct lk__probe_site_rt *rt)
{
	char full[512];

	if (!strchr(glob, ':'))
		return fnmatch(glob, rt->provider, 0) == 0;
	snprintf(full, sizeof(full), "%s:%s", rt->provider, rt->event);
	return fnmatch(glob, full, 0) == 0;
}

bool lk__rules_select(const struct lk__rule_list *l, const struct lk__probe_site_rt *rt)
{
	bool on = false;

	for (size_t i = 0; i < l->n; i++)
		if (glob_matches(l->v[i].glob, rt))
			on = l->v[i].enable;
	return on;
}

/* On while a trace runs and the rules select it, or while an external tracer wants it (sdt.c). */
static bool site_wanted(const struct lk__probe_site_rt *rt, bool tracing)
{
	return (tracing && lk__rules_select(&rules, rt)) || lk__sdt_wanted_locked(rt);
}

/*
 * LK__SITE_TRACER: the end of a scoped span fires its SDT note (see LK_SPAN in lowkey/probe.h).
 * Set before the key turns on, so the first begin that runs sees it.
 */
static void mark_for_tracer(struct lk_probe_site *s, bool on)
{
	uint32_t flags = __atomic_load_n(&s->flags, __ATOMIC_RELAXED);

	if (!(flags & LK__SITE_TRACER) != !on) /* the registry lock makes this the only writer */
		__atomic_store_n(&s->flags, flags ^ LK__SITE_TRACER, __ATOMIC_RELAXED);
}

LK_API bool lk__probe_recording;

bool lk__probe_tracing(void)
{
	return __atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&lk__trace.stopping, __ATOMIC_ACQUIRE);
}

int lk__probe_apply_rules_locked(bool tracing)
{
	struct lk_key_change *changes = malloc((nsites ? nsites : 1) * sizeof(*changes));
	size_t n = 0;
	int err;

	/* before any site turns on for the trace: the slow path is where a thread's buffer is made */
	__atomic_store_n(&lk__probe_recording, tracing, __ATOMIC_RELAXED);
	if (!changes)
		return lk__fail(-ENOMEM, "out of memory flipping probe sites");
	lk__sdt_scan_locked();
	for (size_t i = 0; i < nsites; i++) {
		struct lk__probe_site_rt *rt = &sites[i];
		bool want = rt->site && site_wanted(rt, tracing);

		if (rt->site)
			mark_for_tracer(rt->site, lk__sdt_wanted_locked(rt));

		if (rt->site && want != rt->enabled)
			changes[n++] =
				(struct lk_key_change){ LK_KEY(&rt->site->key),
							want ? LK_KEY_ENABLE : LK_KEY_DISABLE };
	}
	err = lk__key_apply_locked(changes, n);
	if (!err) {
		for (size_t i = 0; i < nsites; i++)
			if (sites[i].site)
				sites[i].enabled = site_wanted(&sites[i], tracing);
	}
	free(changes);
	return err;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

struct lk__record_layout lk__record_layouts[LK__MAX_EVENT_ID + 1];

static void publish_layout(uint32_t id, uint32_t types, unsigned int nargs)
{
	struct lk__record_layout *l = &lk__record_layouts[id];

	l->arg_types = types;
	l->nargs = (uint8_t)nargs;
	l->strings = lk__has_strings(types, nargs);
	__atomic_store_n(&l->valid, true, __ATOMIC_RELEASE); /* read by the consumer with acquire */
}

/* lowkey's own events. */
static __attribute__((constructor)) void publish_builtin_layouts(void)
{
	publish_layout(LK__EVENT_THREAD_NAME, LK_PROBE_STR, 1);
}

static int site_add(struct lk_probe_site *s, struct lk__dso_rt *dso)
{
	struct lk__probe_site_rt *rt;

	/* Event ids are 16 bits in a record (ids are never reused: a trace may still describe one). */
	if (LK__FIRST_SITE_ID + nsites > LK__MAX_EVENT_ID)
		return lk__fail(
			-ENOSPC,
			"more than %u probe sites registered in this process: the rest stay off",
			LK__MAX_EVENT_ID - LK__FIRST_SITE_ID + 1);
	if (nsites == sites_cap) {
		size_t cap = sites_cap ? sites_cap * 2 : 64;
		struct lk__probe_site_rt *grown = realloc(sites, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		sites = grown;
		sites_cap = cap;
	}
	rt = &sites[nsites];
	memset(rt, 0, sizeof(*rt));
	rt->site = s;
	rt->dso = dso;
	rt->provider = dup_or_empty(s->provider);
	rt->event = dup_or_empty(s->event);
	rt->file = dup_or_empty(s->file);
	rt->arg_names = lk__site_arg_names(s->arg_names);
	rt->object = dup_or_empty(dso->path);
	rt->function = dup_or_empty(s->function);
	if (!rt->provider || !rt->event || !rt->file || !rt->arg_names || !rt->object ||
	    !rt->function) {
		free(rt->provider), free(rt->event), free(rt->file), free(rt->arg_names),
			free(rt->object);
		free(rt->function);
		return -ENOMEM;
	}
	rt->id = (uint32_t)(LK__FIRST_SITE_ID + nsites);
	rt->line = s->line;
	rt->arg_types = lk__site_public_types(s->arg_types, s->nargs);
	rt->kind = s->kind;
	rt->nargs = s->nargs;
	publish_layout(rt->id, rt->arg_types, s->nargs);
	s->id = rt->id;
	if (lk__has_strings(s->arg_types, s->nargs))
		__atomic_fetch_or(&s->flags, LK__SITE_STRINGS, __ATOMIC_RELAXED);
	nsites++;
	return 0;
}

/* An entry of __lk_probe_sites: the offset, from the entry, of a slot holding a site's address. */
static struct lk_probe_site *entry_site(const int64_t *entry)
{
	struct lk_probe_site *const *slot =
		(struct lk_probe_site *const *)((const char *)entry + *entry);

	return *slot;
}

static void site_range(const struct lk__dso_rt *dso, const int64_t **b, const int64_t **e)
{
	*b = dso->desc->probe_sites.start;
	*e = dso->desc->probe_sites.stop;
	if (!*b || !*e || *e < *b)
		*b = *e = NULL;
}

/*
 * Every copy of a site's code brings an entry (a function inlined in three places, an inline
 * function kept from several translation units), and a C++ inline function's site may be shared
 * by several objects: a site registers once, with the first object that names it.
 */
static bool site_registered(const struct lk_probe_site *s)
{
	size_t i = s->id - LK__FIRST_SITE_ID;

	return s->id >= LK__FIRST_SITE_ID && i < nsites && sites[i].site == s;
}

static bool site_valid(const struct lk_probe_site *s)
{
	return s && s->magic == LK__PROBE_MAGIC && s->abi == LK__PROBE_ABI &&
	       s->nargs <= LK_PROBE_MAX_ARGS && s->kind >= LK_PROBE_EVENT &&
	       s->kind <= LK_PROBE_COUNTER;
}

static void probe_dso_load(struct lk__dso_rt *dso)
{
	const int64_t *b, *e;
	size_t before = nsites;
	int err;

	site_range(dso, &b, &e);
	for (; b < e; b++) {
		struct lk_probe_site *s = entry_site(b);

		if (site_valid(s) && !site_registered(s) && site_add(s, dso) != 0)
			break;
	}
	if (nsites == before)
		return;
	lk__sdt_object_loaded_locked(dso);
	if (!lk__trace.running) {
		/* USDT rules, or a tracer attached before the object loaded, may want its sites */
		err = lk__probe_apply_rules_locked(false);
		if (err)
			lk__dso_load_failed(dso, err);
		return;
	}
	/* Describe the new sites before any of them can record (a flight recorder's snapshots do it). */
	err = lk__trace.overwrite ? 0 : lk__ctf_write_metadata(&lk__trace);
	if (!err)
		err = lk__probe_apply_rules_locked(true);
	if (err)
		lk__trace_sites_failed(err, dso->path[0] ? dso->path : "the program");
}

static void probe_dso_unload(struct lk__dso_rt *dso)
{
	struct lk_key_change *changes = malloc((nsites ? nsites : 1) * sizeof(*changes));
	size_t n = 0;

	for (size_t i = 0; i < nsites; i++) {
		if (sites[i].dso != dso || !sites[i].site)
			continue;
		if (sites[i].enabled && changes)
			changes[n++] = (struct lk_key_change){ LK_KEY(&sites[i].site->key),
							       LK_KEY_DISABLE };
		sites[i].site = NULL;
		sites[i].dso = NULL;
		sites[i].enabled = false;
	}
	/* The object's code is about to go: whatever happens here, nothing will run its sites. */
	lk__key_apply_locked(changes, n);
	free(changes);
}

LK__DSO_HANDLER(probe_dso_handler, "probe", probe_dso_load, probe_dso_unload);

static int count_matches(const char *glob)
{
	int n = 0;

	for (size_t i = 0; i < nsites; i++)
		if (sites[i].site && glob_matches(glob, &sites[i]))
			n++;
	return n;
}

int lk__rules_add(struct lk__rule_list *l, const char *glob, bool enable, const char *fn)
{
	struct lk__rule *grown;
	char *copy;
	int err, matched;

	if (!glob || !*glob)
		return lk__fail(-EINVAL, "%s: the glob is NULL or empty", fn);
	copy = strdup(glob);
	if (!copy)
		return lk__fail(-ENOMEM, "%s: out of memory", fn);

	lk__registry_lock();
	grown = realloc(l->v, (l->n + 1) * sizeof(*l->v));
	if (!grown) {
		lk__registry_unlock();
		free(copy);
		return lk__fail(-ENOMEM, "%s: out of memory", fn);
	}
	l->v = grown;
	l->v[l->n++] = (struct lk__rule){ copy, enable };
	matched = count_matches(glob);
	err = lk__probe_apply_rules_locked(lk__probe_tracing());
	if (err)
		free(l->v[--l->n].glob); /* the rule could not take effect: forget it */
	lk__registry_unlock();
	return err ? err : matched;
}

int lk__rules_reset(struct lk__rule_list *l)
{
	int err;

	lk__registry_lock();
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].glob);
	free(l->v);
	l->v = NULL;
	l->n = 0;
	err = lk__probe_apply_rules_locked(lk__probe_tracing());
	lk__registry_unlock();
	return err;
}

LK_API int lk_probe_enable(const char *glob)
{
	return lk__rules_add(&rules, glob, true, "lk_probe_enable");
}

LK_API int lk_probe_disable(const char *glob)
{
	return lk__rules_add(&rules, glob, false, "lk_probe_disable");
}

LK_API int lk_probe_reset_rules(void)
{
	return lk__rules_reset(&rules);
}

static void fill_info(const struct lk__probe_site_rt *rt, struct lk_probe_info *info)
{
	memset(info, 0, sizeof(*info));
	info->provider = rt->provider;
	info->event = rt->event;
	info->file = rt->file;
	info->line = rt->line;
	info->kind = (enum lk_probe_kind)rt->kind;
	info->nargs = rt->nargs;
	for (unsigned int a = 0; a < rt->nargs; a++)
		info->arg_types[a] = (enum lk_probe_type)lk__arg_type(rt->arg_types, a);
	info->arg_names = rt->arg_names;
	info->object = rt->object;
	info->function = rt->function;
	info->id = rt->id;
	info->enabled = rt->enabled;
	info->tracer = lk__sdt_attached_locked(rt);
}

LK_API int lk_probe_list(int (*fn)(const struct lk_probe_info *info, void *arg), void *arg)
{
	struct lk_probe_info info;
	int visited = 0, rc = 0;

	if (!fn)
		return lk__fail(-EINVAL, "lk_probe_list: fn is NULL");
	lk__registry_lock();
	for (size_t i = 0; i < nsites && rc == 0; i++) {
		if (!sites[i].site)
			continue;
		fill_info(&sites[i], &info);
		rc = fn(&info, arg);
		visited++;
	}
	lk__registry_unlock();
	return rc ? rc : visited;
}

LK_API const char *lk_probe_type_name(enum lk_probe_type type)
{
	switch (type) {
	case LK_PROBE_I64:
		return "i64";
	case LK_PROBE_U64:
		return "u64";
	case LK_PROBE_F64:
		return "f64";
	case LK_PROBE_STR:
		return "string";
	case LK_PROBE_PTR:
		return "pointer";
	}
	return "unknown";
}

const char *lk__probe_kind_name(unsigned int kind)
{
	switch (kind) {
	case LK_PROBE_EVENT:
		return "event";
	case LK_PROBE_SPAN_BEGIN:
		return "span-begin";
	case LK_PROBE_SPAN_END:
		return "span-end";
	case LK_PROBE_COUNTER:
		return "counter";
	}
	return "unknown";
}

/* ---- for the control socket and the environment (control.c, environment.c) ---- */

bool lk__probe_glob_matches(const char *glob, const char *provider, const char *event)
{
	struct lk__probe_site_rt rt = { .provider = (char *)provider, .event = (char *)event };

	return glob_matches(glob, &rt);
}

int lk__probe_remove_rule(const char *glob, bool enable)
{
	int err = -ENOENT;

	lk__registry_lock();
	for (size_t i = rules.n; i-- > 0;) {
		if (rules.v[i].enable != enable || strcmp(rules.v[i].glob, glob) != 0)
			continue;
		free(rules.v[i].glob);
		memmove(&rules.v[i], &rules.v[i + 1], (rules.n - i - 1) * sizeof(*rules.v));
		rules.n--;
		err = lk__probe_apply_rules_locked(lk__probe_tracing());
		break;
	}
	lk__registry_unlock();
	return err;
}
