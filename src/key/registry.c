// SPDX-License-Identifier: MIT
/*
 * Static-key sites of the loaded objects.
 *
 * When an object registers, each entry of its __lk_key_sites table is attached to its key, and any
 * site whose compiled instruction disagrees with the key's present direction is rewritten: the key
 * was flipped before a dlopen(), or the site was compiled against the wrong declaration. When it
 * unregisters (dlclose, exit), its sites are detached so no later flip writes to unmapped code.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "core/error.h"
#include "key/key_internal.h"

static const uint8_t *entry_code(const struct lk__key_site *e)
{
	return (const uint8_t *)&e->code + e->code;
}

static const uint8_t *entry_target(const struct lk__key_site *e)
{
	return (const uint8_t *)&e->target + e->target;
}

/* The key named by the entry, read from the site's static slot. */
static struct lk_key *entry_key(const struct lk__key_site *e)
{
	int64_t offset = e->ref & ~(int64_t)LK__SITE_FLAGS;

	return *(struct lk_key *const *)((const char *)&e->ref + offset);
}

static void entry_range(const struct lk__dso_rt *dso, const struct lk__key_site **begin,
			const struct lk__key_site **end)
{
	*begin = dso->desc->key_sites.start;
	*end = dso->desc->key_sites.stop;
	if (!*begin || !*end || *end < *begin)
		*begin = *end = NULL;
}

static int state_append(struct lk_key *key, const struct lk__site_rt *site)
{
	struct lk__key_state *st = key->lk__state;

	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return -ENOMEM;
		key->lk__state = st;
	}
	if (st->n == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 4;
		struct lk__site_rt *grown = realloc(st->sites, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		st->sites = grown;
		st->cap = cap;
	}
	st->sites[st->n++] = *site;
	return 0;
}

static int patch_append(struct lk__patch **patches, size_t *n, size_t *cap,
			const struct lk__site_rt *s, bool jump)
{
	struct lk__patch *p;
	int prot;

	if (*n == *cap) {
		size_t grown_cap = *cap ? *cap * 2 : 16;
		struct lk__patch *grown = realloc(*patches, grown_cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		*patches = grown;
		*cap = grown_cap;
	}
	p = &(*patches)[(*n)++];
	p->addr = s->code;
	lk__arch_site_insn(p->insn, s->code, s->target, jump);
	lk__arch_copy_code(p->old, s->code, LK__SITE_LEN);
	p->resume = lk__arch_resume(s->code, p->insn);
	prot = lk__dso_prot(s->dso, (uintptr_t)s->code);
	p->prot = prot >= 0 ? prot : PROT_READ | PROT_EXEC;
	return 0;
}

/* Queue the rewrite of s if its instruction is not the one for direction `on`. */
static int reconcile(const struct lk__site_rt *s, bool on, struct lk__patch **patches, size_t *n,
		     size_t *cap)
{
	bool jumping, want = (on == s->jump_when_on);

	if (!lk__arch_site_decode(s->code, s->target, &jumping))
		return 0; /* not ours any more (a debugger's breakpoint?): leave it alone */
	if (jumping == want)
		return 0;
	return patch_append(patches, n, cap, s, want);
}

int lk__key_collect(struct lk_key *key, bool on, struct lk__patch **patches, size_t *n, size_t *cap)
{
	struct lk__key_state *st = key->lk__state;
	int err;

	if (!st)
		return 0;
	for (size_t i = 0; i < st->n; i++) {
		err = reconcile(&st->sites[i], on, patches, n, cap);
		if (err)
			return err;
	}
	return 0;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return (x > y) - (x < y);
}

/* Publish every registered site's address, for traps that arrive after their rewrite ended. */
static void publish_known_sites(void)
{
	const struct lk__key_site *b, *e;
	uintptr_t *addrs;
	size_t n = 0;

	for (struct lk__dso_rt *d = lk__dso_list(); d; d = d->next) {
		entry_range(d, &b, &e);
		n += (size_t)(e - b);
	}
	addrs = malloc((n ? n : 1) * sizeof(*addrs));
	if (!addrs)
		return; /* keep the previous set: late traps on new sites fall back to the batch table */
	n = 0;
	for (struct lk__dso_rt *d = lk__dso_list(); d; d = d->next) {
		entry_range(d, &b, &e);
		for (; b < e; b++)
			addrs[n++] = (uintptr_t)entry_code(b);
	}
	qsort(addrs, n, sizeof(*addrs), cmp_addr);
	lk__patch_set_known(addrs, n);
}

static void key_dso_load(struct lk__dso_rt *dso)
{
	const struct lk__key_site *b, *e;
	struct lk__patch *patches = NULL;
	size_t n = 0, cap = 0;
	int err = 0;

	entry_range(dso, &b, &e);
	if (b == e)
		return;
	for (; b < e && !err; b++) {
		struct lk_key *key = entry_key(b);
		struct lk__site_rt site = {
			.code = (uint8_t *)entry_code(b),
			.target = (uint8_t *)entry_target(b),
			.dso = dso,
			.jump_when_on = b->ref & LK__SITE_JUMP_WHEN_ON,
		};

		if (!key)
			continue;
		err = state_append(key, &site);
		if (!err)
			err = reconcile(&site,
					__atomic_load_n(&key->lk__count, __ATOMIC_RELAXED) > 0,
					&patches, &n, &cap);
	}
	publish_known_sites();
	if (!err && n)
		err = lk__patch_run(patches, n);
	if (err) {
		lk__fail_append(" (while loading the static-key sites of %s)",
				dso->path && *dso->path ? dso->path : "the main program");
		lk__dso_load_failed(dso, err);
	}
	free(patches);
}

/* Detach dso's sites from every key they name; each key's array is filtered once. */
static void key_dso_unload(struct lk__dso_rt *dso)
{
	static unsigned long generation;
	const struct lk__key_site *b, *e;

	entry_range(dso, &b, &e);
	if (b == e)
		return;
	generation++;
	for (; b < e; b++) {
		struct lk_key *key = entry_key(b);
		struct lk__key_state *st = key ? key->lk__state : NULL;
		size_t kept = 0;

		if (!st || st->filter_gen == generation)
			continue;
		st->filter_gen = generation;
		for (size_t i = 0; i < st->n; i++)
			if (st->sites[i].dso != dso)
				st->sites[kept++] = st->sites[i];
		st->n = kept;
		if (kept == 0) {
			free(st->sites);
			free(st);
			key->lk__state = NULL;
		}
	}
	/* dso is already off the registry list: the new set leaves its sites out. */
	publish_known_sites();
}

LK__DSO_HANDLER(key_dso_handler, "key", key_dso_load, key_dso_unload);
