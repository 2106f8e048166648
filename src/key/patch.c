// SPDX-License-Identifier: MIT
/*
 * Rewriting sites while other threads may be running them.
 *
 * A batch makes the pages of its sites writable (keeping them executable: threads are running
 * there), hands the instructions to the architecture's protocol, and restores the protection. The
 * batch's table stays published until the next batch replaces it, so a thread that ran into a
 * transient trap instruction finds where to continue even if its signal is delivered late. A table
 * is freed only when no trap handler is reading it.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/error.h"
#include "core/sigtrap.h"
#include "core/sync.h"
#include "key/key_internal.h"

#ifndef PR_GET_MDWE
#define PR_GET_MDWE 66
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

struct batch_table {
	size_t n;
	struct lk__patch patches[];
};

struct known_table {
	size_t n;
	uintptr_t addrs[];
};

/* Read by the trap handler. */
static struct batch_table *current_batch;
static struct known_table *current_known;
static unsigned long traps_in_flight;

/* Tables replaced while a handler might still read them; freed once none does. */
#define GRAVEYARD_MAX 64
static void *graveyard[GRAVEYARD_MAX];
static size_t graveyard_n;

void lk__patch_trap_enter(void)
{
	__atomic_fetch_add(&traps_in_flight, 1, __ATOMIC_SEQ_CST);
}

void lk__patch_trap_exit(void)
{
	__atomic_fetch_sub(&traps_in_flight, 1, __ATOMIC_RELEASE);
}

bool lk__patch_lookup(uintptr_t addr, uintptr_t *resume)
{
	const struct batch_table *t = __atomic_load_n(&current_batch, __ATOMIC_ACQUIRE);
	size_t lo = 0, hi;

	if (!t)
		return false;
	hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uintptr_t a = (uintptr_t)t->patches[mid].addr;

		if (a == addr) {
			*resume = t->patches[mid].resume;
			return true;
		}
		if (a < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool lk__patch_known(uintptr_t addr)
{
	const struct known_table *k = __atomic_load_n(&current_known, __ATOMIC_ACQUIRE);
	size_t lo = 0, hi;

	if (!k)
		return false;
	hi = k->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->addrs[mid] == addr)
			return true;
		if (k->addrs[mid] < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/*
 * Free what was replaced once no handler is inside. A handler increments traps_in_flight before
 * loading a table pointer (seq_cst), and we read the count after storing the new pointer, so a
 * handler we do not see has not loaded the old pointer.
 */
static void retire(void *old)
{
	if (old && graveyard_n < GRAVEYARD_MAX)
		graveyard[graveyard_n++] = old;
	for (int spins = 0; spins < 1000; spins++) {
		if (__atomic_load_n(&traps_in_flight, __ATOMIC_SEQ_CST) == 0) {
			while (graveyard_n)
				free(graveyard[--graveyard_n]);
			return;
		}
		sched_yield();
	}
	/* A handler is stuck (a stopped thread?): keep the tables for next time rather than wait. */
}

void lk__patch_set_known(uintptr_t *addrs, size_t n)
{
	struct known_table *k = malloc(sizeof(*k) + n * sizeof(k->addrs[0]));

	if (k) {
		k->n = n;
		memcpy(k->addrs, addrs, n * sizeof(k->addrs[0]));
		retire(__atomic_exchange_n(&current_known, k, __ATOMIC_SEQ_CST));
	}
	free(addrs);
}

static int cmp_patch(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct lk__patch *)a)->addr;
	uintptr_t y = (uintptr_t)((const struct lk__patch *)b)->addr;

	return (x > y) - (x < y);
}

static int explain_mprotect(int err, const void *page)
{
	int mdwe = prctl(PR_GET_MDWE, 0, 0, 0, 0);

	if (mdwe > 0 && (mdwe & PR_MDWE_REFUSE_EXEC_GAIN))
		return lk__fail(-EPERM,
				"cannot rewrite static-key sites: this process forbids writable code "
				"(memory-deny-write-execute: prctl(PR_SET_MDWE) or systemd's "
				"MemoryDenyWriteExecute=yes). Build with -DLK_KEYS_PORTABLE=ON (sites become "
				"load + branch), or drop MemoryDenyWriteExecute= from the service.");
	if (err == EACCES || err == EPERM)
		return lk__fail(-EPERM,
				"cannot rewrite static-key sites: mprotect(%p, PROT_WRITE|PROT_EXEC) was refused "
				"(%s). A security module forbids writable code (SELinux: allow execmod for this "
				"program's domain, or `setsebool -P allow_execmod 1`). Or build with "
				"-DLK_KEYS_PORTABLE=ON.", page, strerror(err));
	return lk__fail(-err, "cannot rewrite static-key sites: mprotect(%p) failed: %s", page,
			strerror(err));
}

struct page_run {
	uintptr_t start, end;
	int prot;
};

/*
 * Make the pages under the patches writable, merging neighbours with the same protection.
 * On failure everything done is undone and nothing has been written.
 */
static int unlock_pages(const struct lk__patch *p, size_t n, struct page_run *runs, size_t *nruns)
{
	uintptr_t pagesz = (uintptr_t)sysconf(_SC_PAGESIZE);
	size_t r = 0;

	for (size_t i = 0; i < n; i++) {
		uintptr_t start = (uintptr_t)p[i].addr & ~(pagesz - 1);
		uintptr_t end = ((uintptr_t)p[i].addr + LK__SITE_LEN + pagesz - 1) & ~(pagesz - 1);

		if (r && runs[r - 1].prot == p[i].prot && start <= runs[r - 1].end) {
			if (end > runs[r - 1].end)
				runs[r - 1].end = end;
			continue;
		}
		runs[r++] = (struct page_run){ start, end, p[i].prot };
	}
	for (size_t i = 0; i < r; i++) {
		if (mprotect((void *)runs[i].start, runs[i].end - runs[i].start,
			     runs[i].prot | PROT_WRITE | PROT_EXEC) != 0) {
			int err = errno;
			void *refused = (void *)runs[i].start;

			while (i--)
				mprotect((void *)runs[i].start, runs[i].end - runs[i].start, runs[i].prot);
			return explain_mprotect(err, refused);
		}
	}
	*nruns = r;
	return 0;
}

static void lock_pages(const struct page_run *runs, size_t nruns)
{
	for (size_t i = 0; i < nruns; i++)
		mprotect((void *)runs[i].start, runs[i].end - runs[i].start, runs[i].prot);
}

static int ensure_trap_handler(void)
{
	int err = lk__sigtrap_add(lk__arch_trap);

	return err ? err : lk__sigtrap_ensure();
}

/* Sites come in table order, which the linker makes address order within an object. */
static void sort_patches(struct lk__patch *patches, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		if (patches[i - 1].addr > patches[i].addr) {
			qsort(patches, n, sizeof(*patches), cmp_patch);
			return;
		}
	}
}

int lk__patch_run(struct lk__patch *patches, size_t n)
{
	struct batch_table *table, *old;
	struct page_run *runs;
	size_t nruns = 0;
	int err;

	if (n == 0)
		return 0;
	sort_patches(patches, n);

	table = malloc(sizeof(*table) + n * sizeof(table->patches[0]));
	runs = malloc(n * sizeof(*runs));
	if (!table || !runs) {
		free(table);
		free(runs);
		return lk__fail(-ENOMEM, "out of memory preparing to rewrite %zu static-key sites", n);
	}
	table->n = n;
	memcpy(table->patches, patches, n * sizeof(*patches));

	err = lk__sync_cores_prepare();	/* fails here, before any write, where it cannot be done */
	if (!err)
		err = ensure_trap_handler();
	if (!err)
		err = unlock_pages(patches, n, runs, &nruns);
	if (err) {
		free(table);
		free(runs);
		return err;
	}

	old = __atomic_exchange_n(&current_batch, table, __ATOMIC_SEQ_CST);
	retire(old);
	lk__arch_rewrite(patches, n);
	lock_pages(runs, nruns);
	free(runs);
	return 0;
}
