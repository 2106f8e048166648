// SPDX-License-Identifier: MIT
/*
 * Flips in a process whose threads block SIGTRAP, as servers that take every signal with
 * sigwait() do. A thread that runs into a site's int3 with SIGTRAP blocked would be killed by the
 * kernel (a blocked synchronous trap is forced with SIG_DFL), so such flips must not trap: the
 * process survives, every flip succeeds, each run of a site goes one way or the other, and the
 * rewritten code is still mapped from the executable. test_key_masks has threads that change
 * their masks during the flips.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "child.h"

#include <lowkey/lowkey.h>

#include "settled.h"
#include "sites.h"

static LK_DEFINE_KEY_FALSE(blk_key);

/*
 * The flipper makes generation odd while a flip is under way and even once it has returned; an even
 * generation g means the key is on iff g / 2 is odd. A run of the site between two reads of the same
 * even generation came after that flip returned and must go the key's way; any other run may go
 * either way, and nothing but 0 or 1 is valid.
 */
static unsigned long generation;
static int stop;
static unsigned long runs, wrong, stale;
static bool emulated; /* under qemu-user: a run of the previous direction is stale (settled.h) */

static __attribute__((noinline)) int blk_site(void)
{
	return lk_branch_unlikely(&blk_key) ? 1 : 0;
}

static void observe(void)
{
	unsigned long before = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
	int got = blk_site();
	unsigned long after = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
	enum lkt_run verdict = lkt_judge_run(before, got, after, emulated);

	if (verdict == LKT_RUN_WRONG)
		__atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
	if (verdict == LKT_RUN_STALE)
		__atomic_fetch_add(&stale, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&runs, 1, __ATOMIC_RELAXED);
}

static int flip(bool on)
{
	int err;

	__atomic_fetch_add(&generation, 1, __ATOMIC_RELEASE);
	err = on ? lk_key_enable(&blk_key) : lk_key_disable(&blk_key);
	__atomic_fetch_add(&generation, 1, __ATOMIC_RELEASE);
	return err;
}

static void block_all_signals(void)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
}

static void *run_site(void *arg)
{
	(void)arg;
	block_all_signals();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		observe();
	return NULL;
}

/* The path /proc/self/maps gives the mapping holding addr, in path (empty for anonymous memory). */
static bool mapping_of(const void *addr, char *path, size_t len)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[4096];
	bool found = false;

	while (maps && !found && fgets(line, sizeof(line), maps)) {
		unsigned long start, end;
		int at = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &start, &end, &at) >= 2 &&
		    (uintptr_t)addr >= start && (uintptr_t)addr < end) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(path, len, "%s", at ? line + at : "");
			found = true;
		}
	}
	if (maps)
		fclose(maps);
	return found;
}

/* The rewritten code is still the executable's in /proc/self/maps, for profilers and debuggers. */
static bool still_mapped_from_exe(void)
{
	char exe[4096], mapped[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (len <= 0 || !mapping_of((const void *)blk_site, mapped, sizeof(mapped)))
		return false;
	exe[len] = '\0';
	return strcmp(exe, mapped) == 0;
}

/* Like a sigwait() server: every thread, the flipping one included, blocks every signal. */
static int child(void)
{
	pthread_t t[2];

	emulated = lkt_under_emulator();
	block_all_signals();
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, run_site, NULL) != 0)
			return 1;
	while (__atomic_load_n(&runs, __ATOMIC_RELAXED) < 1000)
		sched_yield();
	for (int i = 0; i < 3000; i++) {
		if (flip(true) != 0)
			return 2;
		if (flip(false) != 0)
			return 3;
	}
	if (flip(true) != 0)
		return 4;
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	lkt_print_runs(runs, stale, wrong);
	if (wrong != 0)
		return 5;
	if (blk_site() != 1)
		return 6;
	if (lkt_check_sites(&blk_key) != LKT_PATCHING)
		return 7;
	if (!still_mapped_from_exe())
		return 8;
	return 0;
}

static void flips_spare_threads_that_block_sigtrap(void **state)
{
	(void)state;
	lkt_in_child(child());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(flips_spare_threads_that_block_sigtrap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
