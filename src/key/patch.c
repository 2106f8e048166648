// SPDX-License-Identifier: MIT
/*
 * Rewriting sites while other threads may be running them.
 *
 * A batch takes one of two protocols, neither of which ever makes a thread trap:
 *  - in place: the pages of the sites are made writable (staying executable), the architecture
 *    writes the instructions, and the protection is restored. On aarch64 and riscv64 that is one
 *    store per site, safe while other threads run it. On x86-64 it is the kernel's int3 protocol,
 *    which sends a thread meeting a half-written site through SIGTRAP; a thread that blocks SIGTRAP
 *    -- which any thread may start doing at any moment -- would be killed by that trap, so x86-64
 *    rewrites in place only where the caller is the only thread, and nothing can meet the int3;
 *  - remapping (remap.c), on x86-64 wherever another thread exists: copies of the pages are written
 *    and swapped in, and no byte a thread may execute is ever written.
 * Where remapping cannot be done the flip fails, its sites as they were: nothing falls back to a
 * trap.
 *
 * `lowkey bench branch` may force the int3 protocol anywhere (lk__patch_traps_for_bench), to
 * measure it beside remapping; only then can a thread trap, and lowkey's SIGTRAP handler sends it
 * on. The batch's table stays published until the next one replaces it, so a thread that ran into
 * a transient trap instruction finds where to continue even if its signal is delivered late. A
 * table is freed only when no trap handler is reading it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#include <lowkey/error.h>

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

int lk__patch_explain_mprotect(int err, const void *page)
{
	int mdwe = prctl(PR_GET_MDWE, 0, 0, 0, 0);

	if (mdwe > 0 && (mdwe & PR_MDWE_REFUSE_EXEC_GAIN))
		return lk__fail(
			-EPERM,
			"cannot rewrite static-key sites: this process forbids writable code "
			"(memory-deny-write-execute: prctl(PR_SET_MDWE) or systemd's "
			"MemoryDenyWriteExecute=yes). Build with -DLK_KEYS_PORTABLE=ON (sites become "
			"load + branch), or drop MemoryDenyWriteExecute= from the service.");
	if (err == EACCES || err == EPERM)
		return lk__fail(
			-EPERM,
			"cannot rewrite static-key sites: mprotect(%p, PROT_WRITE|PROT_EXEC) was refused "
			"(%s). A security module forbids writable code (SELinux: allow execmod for this "
			"program's domain, or `setsebool -P allow_execmod 1`). Or build with "
			"-DLK_KEYS_PORTABLE=ON.",
			page, strerror(err));
	return lk__fail(-err, "cannot rewrite static-key sites: mprotect(%p) failed: %s", page,
			strerror(err));
}

/* The pages under the (sorted) patches, merging neighbours with the same protection. */
static size_t page_runs(const struct lk__patch *p, size_t n, struct lk__page_run *runs)
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
		runs[r++] = (struct lk__page_run){ start, end, p[i].prot };
	}
	return r;
}

/* Make the runs writable. On failure everything done is undone and nothing has been written. */
static int unlock_pages(const struct lk__page_run *runs, size_t r)
{
	for (size_t i = 0; i < r; i++) {
		if (mprotect((void *)runs[i].start, runs[i].end - runs[i].start,
			     runs[i].prot | PROT_WRITE | PROT_EXEC) != 0) {
			int err = errno;
			void *refused = (void *)runs[i].start;

			while (i--)
				mprotect((void *)runs[i].start, runs[i].end - runs[i].start,
					 runs[i].prot);
			return lk__patch_explain_mprotect(err, refused);
		}
	}
	return 0;
}

static void lock_pages(const struct lk__page_run *runs, size_t nruns)
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

/*
 * Whether the caller is the only thread that can run a site until the batch ends, so that rewriting
 * in place cannot make another thread trap: glibc and the kernel both count one thread. The caller
 * runs no site meanwhile (its asynchronous signals are held; the library has no sites), and no
 * other thread can appear: only this one could create it. glibc's flag alone would miss threads
 * made with clone() behind its back (a sanitizer's runtime makes one), which the kernel counts.
 * Reads /proc/self/stat; false where it cannot be read.
 */
static bool only_thread(void)
{
	char buf[1024], *fields;
	long threads = 0;
	ssize_t len;
	int fd;

	if (!__libc_single_threaded)
		return false;
	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	fields = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	/* Fields 3 to 19, then num_threads (proc(5)). */
	if (fields && sscanf(fields + 1,
			     "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			     "%*s %*s %ld",
			     &threads) == 1)
		return threads == 1;
	return false;
}

bool lk__patch_traps_for_bench;

/*
 * A sync failed after the sites changed: a core may still run what it fetched before, so only
 * remapping (no trap, no sync needed) can put the old instructions back. Returns err, with the
 * sync's message.
 */
static int put_back(int err, struct lk__patch *patches, size_t n, const struct lk__page_run *runs,
		    size_t nruns)
{
	char why[512];

	snprintf(why, sizeof(why), "%s", lk_last_error());
	if (lk__remap(runs, nruns, patches, n, true) == 0)
		return lk__fail(err, "%s", why);
	return lk__fail(
		err,
		"%s Putting the sites back failed too (%s): threads that run them now go the "
		"new way, though the key has not changed.",
		why, lk_last_error());
}

/* The remap protocol needs no trap; the sync makes every thread drop what it fetched before. */
static int rewrite_by_remapping(struct lk__patch *patches, size_t n,
				const struct lk__page_run *runs, size_t nruns)
{
	int err = lk__remap(runs, nruns, patches, n, false);

	if (!err && (err = lk__sync_cores()) != 0)
		return put_back(err, patches, n, runs, nruns);
	return err;
}

/* The batch's table stays published even if it fails: a trap late from it still finds its way. */
static int rewrite_in_place(struct batch_table **table, struct lk__patch *patches, size_t n,
			    const struct lk__page_run *runs, size_t nruns)
{
	int err = unlock_pages(runs, nruns);

	if (err)
		return err;
	if (LK__ARCH_TRAPS) {
		retire(__atomic_exchange_n(&current_batch, *table, __ATOMIC_SEQ_CST));
		*table = NULL;
	}
	if (lk__arch_rewrite(patches, n, &err) == LK__REWRITE_TORN)
		err = put_back(err, patches, n, runs, nruns);
	lock_pages(runs, nruns);
	return err;
}

/*
 * In place where no thread can trap: on the word architectures always, on x86-64 where the caller
 * is the only thread. Everywhere else the pages are remapped: a thread that blocks SIGTRAP, or
 * starts to at any moment, or runs a handler whose mask holds it, would be killed by the trap.
 */
static int run_batch(struct batch_table *table, struct lk__patch *patches, size_t n,
		     struct lk__page_run *runs)
{
	size_t nruns = page_runs(patches, n, runs);
	bool traps = LK__ARCH_TRAPS &&
		     __atomic_load_n(&lk__patch_traps_for_bench, __ATOMIC_RELAXED);
	sigset_t saved;
	int err =
		lk__sync_cores_prepare(); /* fails here, before any write, where it cannot be done */

	if (!err && traps)
		err = ensure_trap_handler();
	if (err)
		return err;
	lk__sigtrap_hold_async(&saved);
	if (traps || !LK__ARCH_TRAPS || only_thread())
		err = rewrite_in_place(&table, patches, n, runs, nruns);
	else
		err = rewrite_by_remapping(patches, n, runs, nruns);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	free(table); /* unless published */
	return err;
}

int lk__patch_run(struct lk__patch *patches, size_t n)
{
	struct batch_table *table;
	struct lk__page_run *runs;
	int err;

	if (n == 0)
		return 0;
	sort_patches(patches, n);

	table = malloc(sizeof(*table) + n * sizeof(table->patches[0]));
	runs = malloc(n * sizeof(*runs));
	if (!table || !runs) {
		free(table);
		free(runs);
		return lk__fail(-ENOMEM, "out of memory preparing to rewrite %zu static-key sites",
				n);
	}
	table->n = n;
	memcpy(table->patches, patches, n * sizeof(*patches));
	err = run_batch(table, patches, n, runs);
	free(runs);
	return err;
}
