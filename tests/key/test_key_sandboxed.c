// SPDX-License-Identifier: MIT
/*
 * A process that sandboxes itself after its first flips: a seccomp filter now denies membarrier
 * (EPERM), although lowkey registered for it and used it before. A flip can no longer make every
 * core drop code it fetched, so it must fail with -ENOSYS and a message, leaving every site and
 * the key as they were -- whatever the other threads' signal masks (the second thread blocks every
 * signal in one case), and also when the filter comes in the middle of a flip.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "child.h"

#include <lowkey/lowkey.h>

#include "sites.h"

static LK_DEFINE_KEY_FALSE(sb_off);
static LK_DEFINE_KEY_FALSE(sb_on);

static __attribute__((noinline)) int sb_off_site(void)
{
	return lk_branch_unlikely(&sb_off) ? 1 : 0;
}

static __attribute__((noinline)) int sb_on_site(void)
{
	return lk_branch_unlikely(&sb_on) ? 1 : 0;
}

/* Every thread of the process, from now on: membarrier fails with EPERM. */
static int deny_membarrier(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) ?
		       -errno :
		       0;
}

static void *idle(void *arg)
{
	if (arg) { /* a thread that blocks every signal */
		sigset_t all;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, NULL);
	}
	for (;;)
		pause();
	return NULL;
}

static bool refused_unchanged(int err)
{
	return err == -ENOSYS && strstr(lk_last_error(), "membarrier") &&
	       strstr(lk_last_error(), "seccomp") && strstr(lk_last_error(), "LK_KEYS_PORTABLE");
}

static int child(bool block_sigtrap)
{
	pthread_t t;

	if (lkt_seccomp_or_skip() != 0)
		return 77;
	if (pthread_create(&t, NULL, idle, block_sigtrap ? &t : NULL) != 0)
		return 1;
	/* First flips, with membarrier: registered and used. */
	if (lk_key_enable(&sb_on) != 0 || lk_key_enable(&sb_off) != 0 ||
	    lk_key_disable(&sb_off) != 0)
		return 2;
	if (deny_membarrier() != 0)
		return 3;

	if (!refused_unchanged(lk_key_enable(&sb_off)))
		return 4;
	if (lk_key_enabled(&sb_off) || sb_off_site() != 0 ||
	    lkt_check_sites(&sb_off) != LKT_PATCHING)
		return 5;
	if (!refused_unchanged(lk_key_disable(&sb_on)))
		return 6;
	if (!lk_key_enabled(&sb_on) || sb_on_site() != 1 || lkt_check_sites(&sb_on) != LKT_PATCHING)
		return 7;
	return 0;
}

static void run_child(bool block_sigtrap)
{
	if (!LKT_PATCHING)
		skip();
	lkt_in_child(child(block_sigtrap));
}

static void refused_beside_a_thread(void **state)
{
	(void)state;
	run_child(false);
}

static void refused_beside_a_thread_blocking_all(void **state)
{
	(void)state;
	run_child(true);
}

static LK_DEFINE_KEY_FALSE(sb_mid);

static __attribute__((noinline)) int sb_mid_site(void)
{
	return lk_branch_unlikely(&sb_mid) ? 1 : 0;
}

/* Sandboxes the process the moment a flip has changed the site's first byte, before it returns. */
static void *sandbox_midway(void *arg)
{
	const volatile uint8_t *site = arg;
	uint8_t before[4] = { site[0], site[1], site[2], site[3] };

	while (site[0] == before[0] && site[1] == before[1] && site[2] == before[2] &&
	       site[3] == before[3])
		;
	deny_membarrier();
	return NULL;
}

/* The flip that was under way when the filter came fails, with the site as it was before it. */
static int midway_child(void)
{
	const volatile uint8_t *site = lkt_first_site(&sb_mid);
	bool on = false;
	pthread_t t;

	if (lkt_seccomp_or_skip() != 0)
		return 77;
	if (!site || lk_key_enable(&sb_mid) != 0 || lk_key_disable(&sb_mid) != 0)
		return 1;
	if (pthread_create(&t, NULL, sandbox_midway, (void *)site) != 0)
		return 2;
	for (int flips = 0; flips < 1000000; flips++) {
		int err = !on ? lk_key_enable(&sb_mid) : lk_key_disable(&sb_mid);

		if (err == 0) {
			on = !on;
			continue;
		}
		if (!refused_unchanged(err))
			return 3;
		if (lk_key_enabled(&sb_mid) != on || sb_mid_site() != on ||
		    lkt_check_sites(&sb_mid) != 1)
			return 4;
		return 0;
	}
	return 5; /* never refused */
}

static void refused_midway(void **state)
{
	(void)state;
	if (!LKT_PATCHING || UNDER_TSAN)
		skip();
	lkt_in_child(midway_child());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refused_beside_a_thread),
		cmocka_unit_test(refused_beside_a_thread_blocking_all),
		cmocka_unit_test(refused_midway),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
