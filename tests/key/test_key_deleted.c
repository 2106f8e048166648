// SPDX-License-Identifier: MIT
/*
 * Flips in a process with threads whose executable has been deleted since it started (as an
 * upgrade replaces a program or a library under a running server). The sites' pages are swapped
 * for rewritten copies, mapped from the file so that uprobes keep working:
 *  - kept: once a flip has remapped the pages, the file stays reachable (lowkey keeps its fd), and
 *    every flip after the deletion succeeds;
 *  - stale: pages written before in place (the process had one thread then), never remapped, and
 *    a process that cannot reopen the deleted file (no CAP_CHECKPOINT_RESTORE: run as nobody when
 *    the test is root): the flip fails with -ESTALE and its message, key and sites unchanged;
 *  - map_files: the same as root, which reopens the file through /proc/self/map_files: it flips.
 * The test copies its own executable into a directory of its own and runs the copy, which deletes
 * itself.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "sites.h"

static LK_DEFINE_KEY_FALSE(del_key);
static int stop;

static __attribute__((noinline)) int del_site(void)
{
	return lk_branch_unlikely(&del_key) ? 1 : 0;
}

static void *run_site(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		(void)del_site();
	return NULL;
}

static int flip_to(bool on)
{
	return on ? lk_key_enable(&del_key) : lk_key_disable(&del_key);
}

/* The copy's side; exits 0 or the step that failed. */
static int child(const char *mode, const char *self)
{
	bool in_place_first = strcmp(mode, "kept") != 0;
	pthread_t t;
	int err;

	if (in_place_first && flip_to(true) != 0) /* one thread: written in place */
		return 1;
	if (pthread_create(&t, NULL, run_site, NULL) != 0)
		return 2;
	if (!in_place_first && (flip_to(true) != 0 || flip_to(false) != 0 || flip_to(true) != 0))
		return 3; /* remapped: the fd is kept */
	if (unlink(self) != 0)
		return 4;
	err = flip_to(false);
	if (strcmp(mode, "stale") == 0) {
		if (err != -ESTALE || !strstr(lk_last_error(), "deleted or replaced"))
			return 5;
		if (!lk_key_enabled(&del_key) || del_site() != 1 || lkt_check_sites(&del_key) != 1)
			return 6;
		return 0;
	}
	for (int i = 0; i < 200 && !err; i++)
		err = flip_to(i % 2 == 0);
	if (err)
		return 7;
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	return del_site() == 0 && lkt_check_sites(&del_key) == 1 ? 0 : 8;
}

/* A copy of this executable in a directory anyone may write, for the copy to delete itself. */
static void copy_self(char *dir, char *copy, size_t len)
{
	char buf[65536];
	ssize_t n;
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), out;

	assert_true(in >= 0);
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0777), 0);
	snprintf(copy, len, "%s/test_key_deleted", dir);
	out = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	assert_true(out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	assert_int_equal(close(out), 0);
}

static void run_copy(const char *mode, bool as_nobody)
{
	char dir[] = "/tmp/lkt_key_deleted.XXXXXX", copy[PATH_MAX];
	int status;
	pid_t pid;

	if (!LKT_PATCHING || !LKT_TRAP_PROTOCOL)
		skip(); /* no sites, or rewritten in place by one store (no pages swapped) */
	if (as_nobody && system("command -v setpriv >/dev/null") != 0)
		skip(); /* util-linux's setpriv is missing */
	copy_self(dir, copy, sizeof(copy));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		const char *nobody[] = { "setpriv",
					 "--reuid=65534",
					 "--regid=65534",
					 "--clear-groups",
					 "--inh-caps=-all",
					 copy,
					 "--child",
					 mode,
					 NULL };
		const char *plain[] = { copy, "--child", mode, NULL };

		if (as_nobody)
			execvp("setpriv", (char **)nobody);
		else
			execv(copy, (char **)plain);
		_exit(93);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	unlink(copy);
	rmdir(dir);
	if (WIFSIGNALED(status))
		fail_msg("the copy was killed by signal %d", WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void flips_after_deletion_through_the_kept_fd(void **state)
{
	(void)state;
	run_copy("kept", geteuid() == 0); /* root could reopen it without the fd */
}

static void refused_where_the_file_cannot_be_reached(void **state)
{
	(void)state;
	if (UNDER_TSAN)
		skip(); /* its runtime's thread: no flip is ever made in place */
	run_copy("stale", geteuid() == 0);
}

static void root_reopens_it_through_map_files(void **state)
{
	(void)state;
	if (UNDER_TSAN || geteuid() != 0)
		skip();
	run_copy("map_files", false);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(flips_after_deletion_through_the_kept_fd),
		cmocka_unit_test(refused_where_the_file_cannot_be_reached),
		cmocka_unit_test(root_reopens_it_through_map_files),
	};

	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child(argv[2], argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
