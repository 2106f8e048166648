// SPDX-License-Identifier: MIT
/*
 * Static keys: reference counts and flips.
 *
 * A key's count changes only under the registry lock, and only once its sites have been
 * rewritten, so a failed rewrite leaves both as they were. Several changes to one key in a batch
 * are folded into one final count before anything is rewritten.
 */
#include <limits.h>
#include <stdlib.h>

#include "core/error.h"
#include "key/key_internal.h"

struct fold {
	struct lk_key *key;
	size_t order; /* position in the caller's array: changes to one key apply in order */
	int count;    /* the count after all of this key's changes */
};

static int cmp_fold(const void *a, const void *b)
{
	const struct fold *x = a, *y = b;

	if (x->key != y->key)
		return ((uintptr_t)x->key > (uintptr_t)y->key) -
		       ((uintptr_t)x->key < (uintptr_t)y->key);
	return (x->order > y->order) - (x->order < y->order);
}

static int apply_op(int count, enum lk_key_op op, size_t i)
{
	switch (op) {
	case LK_KEY_ENABLE:
		return count > 0 ? count : 1;
	case LK_KEY_DISABLE:
		return 0;
	case LK_KEY_INC:
		if (count == INT_MAX)
			return lk__fail(-EOVERFLOW,
					"lk_key_inc: change %zu would take the key past INT_MAX "
					"references",
					i);
		return count + 1;
	case LK_KEY_DEC:
		if (count <= 0)
			return lk__fail(-EINVAL,
					"lk_key_dec: change %zu would take the key's count below "
					"zero (more lk_key_dec than lk_key_inc calls)",
					i);
		return count - 1;
	}
	return lk__fail(-EINVAL, "lk_key_apply: change %zu has an unknown operation %d", i,
			(int)op);
}

/*
 * Compute each distinct key's final count; folds[0..*nkeys) then hold one entry per key.
 * Call with the registry lock held.
 */
static int fold_changes(const struct lk_key_change *changes, size_t n, struct fold *folds,
			size_t *nkeys)
{
	size_t out = 0;

	for (size_t i = 0; i < n; i++)
		folds[i] = (struct fold){ changes[i].key, i, 0 };
	qsort(folds, n, sizeof(*folds), cmp_fold);

	for (size_t i = 0; i < n;) {
		struct lk_key *key = folds[i].key;
		int count = key->lk__count;

		for (; i < n && folds[i].key == key; i++) {
			count = apply_op(count, changes[folds[i].order].op, folds[i].order);
			if (count < 0)
				return count;
		}
		folds[out++] = (struct fold){ key, 0, count };
	}
	*nkeys = out;
	return 0;
}

static int commit_locked(struct fold *folds, size_t nkeys)
{
	struct lk__patch *patches = NULL;
	size_t npatches = 0, cap = 0;
	int err = 0;

	for (size_t i = 0; i < nkeys && !err; i++) {
		bool was_on = folds[i].key->lk__count > 0, on = folds[i].count > 0;

		if (was_on != on)
			err = lk__key_collect(folds[i].key, on, &patches, &npatches, &cap);
	}
	if (!err)
		err = lk__patch_run(patches, npatches);
	free(patches);
	if (err)
		return err;
	for (size_t i = 0; i < nkeys; i++)
		__atomic_store_n(&folds[i].key->lk__count, folds[i].count, __ATOMIC_RELEASE);
	return 0;
}

static int validate(const struct lk_key_change *changes, size_t n)
{
	if (n && !changes)
		return lk__fail(-EINVAL, "lk_key_apply: changes is NULL");
	for (size_t i = 0; i < n; i++)
		if (!changes[i].key)
			return lk__fail(-EINVAL, "lk_key_apply: change %zu names a NULL key", i);
	return 0;
}

int lk__key_apply_locked(const struct lk_key_change *changes, size_t n)
{
	struct fold *folds;
	size_t nkeys;
	int err = validate(changes, n);

	if (err || n == 0)
		return err;
	folds = malloc(n * sizeof(*folds));
	if (!folds)
		return lk__fail(-ENOMEM, "lk_key_apply: out of memory");
	err = fold_changes(changes, n, folds, &nkeys);
	if (!err)
		err = commit_locked(folds, nkeys);
	free(folds);
	return err;
}

LK_API int lk_key_apply(const struct lk_key_change *changes, size_t n)
{
	int err = validate(changes, n);

	if (err || n == 0)
		return err;
	lk__registry_lock();
	err = lk__key_apply_locked(changes, n);
	lk__registry_unlock();
	return err;
}

static int change_one(struct lk_key *key, enum lk_key_op op, const char *fn)
{
	struct lk_key_change change = { key, op };

	if (!key)
		return lk__fail(-EINVAL, "%s: key is NULL", fn);
	return lk_key_apply(&change, 1);
}

LK_API int(lk_key_enable)(struct lk_key *key)
{
	return change_one(key, LK_KEY_ENABLE, "lk_key_enable");
}

LK_API int(lk_key_disable)(struct lk_key *key)
{
	return change_one(key, LK_KEY_DISABLE, "lk_key_disable");
}

LK_API int(lk_key_inc)(struct lk_key *key)
{
	return change_one(key, LK_KEY_INC, "lk_key_inc");
}

LK_API int(lk_key_dec)(struct lk_key *key)
{
	return change_one(key, LK_KEY_DEC, "lk_key_dec");
}

LK_API bool(lk_key_enabled)(const struct lk_key *key)
{
	return key && __atomic_load_n(&key->lk__count, __ATOMIC_RELAXED) > 0;
}

LK_API int(lk_key_sites)(const struct lk_key *key)
{
	const struct lk__key_state *st;
	int n;

	if (!key)
		return lk__fail(-EINVAL, "lk_key_sites: key is NULL");
	lk__registry_lock();
	st = key->lk__state;
	n = st ? (int)st->n : 0;
	lk__registry_unlock();
	return n;
}
