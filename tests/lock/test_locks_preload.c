// SPDX-License-Identifier: MIT
/*
 * liblowkey-locks.so and `lowkey locks`, end to end.
 *
 * locks_victim uses every kind of lock the preload wraps, with known counts and contention, and
 * checks every return code itself. It must exit 0 with and without the preload (the preload
 * changes no behaviour), and with it, the figures in its file must be exactly the known ones.
 * Then: fork children and exec()ed images get files of their own; threads started before main
 * are counted; the command prints a report naming the contended call sites; bad usage is refused;
 * sent SIGTERM or SIGHUP while the program runs, it passes the signal on, reports, removes its
 * directory and exits 128 + the signal.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/run.h"
#include "internal/lock_file.h"

struct run {
	int status;
	char out[8192]; /* the victim's stdout */
	char err[8192]; /* and stderr */
};

static void read_all(int fd, char *buf, size_t len)
{
	size_t used = 0;
	ssize_t n;

	while (used + 1 < len && (n = read(fd, buf + used, len - 1 - used)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		used += (size_t)n;
	}
	buf[used] = 0;
	/* drain the rest so the child never blocks on a full pipe */
	while (read(fd, (char[256]){ 0 }, 256) > 0)
		;
}

/* Run argv with extra environment (NAME=VALUE strings, NULL-terminated); capture its output. */
static void run(char *const argv[], char *const env[], struct run *r)
{
	int out[2], err[2];
	pid_t pid;

	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(err), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		close(out[0]);
		close(err[0]);
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	read_all(out[0], r->out, sizeof(r->out));
	read_all(err[0], r->err, sizeof(r->err));
	close(out[0]);
	close(err[0]);
	assert_int_equal(waitpid(pid, &r->status, 0), pid);
}

static int exit_code(const struct run *r)
{
	return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
}

static uint64_t address_of(const struct run *r, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "%s=", name);
	for (p = r->out; (p = strstr(p, key)); p++)
		if (p == r->out || p[-1] == '\n')
			return strtoull(p + strlen(key), NULL, 16);
	fail_msg("no address for %s in:\n%s", name, r->out);
	return 0;
}

/* ---- the files ---- */

struct file {
	void *map;
	size_t size;
	const struct lkl_header *h;
	const struct lkl_entry *entries;
};

static int load_files(const char *dir, struct file *files, int max)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) && n < max) {
		char path[512];
		struct stat st;
		int fd;

		if (!strstr(de->d_name, ".lkl"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		fd = open(path, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(fstat(fd, &st), 0);
		files[n].size = (size_t)st.st_size;
		files[n].map = mmap(NULL, files[n].size, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		assert_true(files[n].map != MAP_FAILED);
		files[n].h = files[n].map;
		assert_int_equal(files[n].h->magic, LKL_MAGIC);
		assert_int_equal(files[n].h->version, LKL_VERSION);
		assert_true(files[n].size >= lkl_file_size(files[n].h->capacity));
		files[n].entries =
			(const struct lkl_entry *)((char *)files[n].map + LKL_HEADER_SIZE);
		n++;
	}
	closedir(d);
	return n;
}

static void unload_files(struct file *files, int n, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	for (int i = 0; i < n; i++)
		munmap(files[i].map, files[i].size);
	while (d && (de = readdir(d))) {
		char path[512];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static const struct lkl_entry *entry(const struct file *f, uint64_t address, enum lkl_kind kind)
{
	for (uint32_t i = 0; i < f->h->capacity; i++)
		if (f->entries[i].key == (address | kind))
			return &f->entries[i];
	fail_msg("no entry for %#lx (kind %d) in pid %u", (unsigned long)address, kind, f->h->pid);
	return NULL;
}

static char *make_dir(void)
{
	char *dir = strdup("/tmp/lowkey-locks-test.XXXXXX");

	assert_non_null(mkdtemp(dir));
	return dir;
}

static void run_victim(const char *mode, const char *dir, struct run *r)
{
	char preload[600], dirvar[600];
	char *argv[] = { VICTIM, (char *)mode, NULL };
	char *env[] = { preload, dirvar, "LOWKEY_LOCK_HOLD_SAMPLING=1", NULL };

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", PRELOAD);
	snprintf(dirvar, sizeof(dirvar), "LOWKEY_LOCKS_DIR=%s", dir);
	run(argv, dir ? env : NULL, r);
	if (exit_code(r) != 0)
		fail_msg("locks_victim %s %s preload: exit %d\n%s", mode, dir ? "with" : "without",
			 exit_code(r), r->err);
}

/* ---- tests ---- */

static void behaves_the_same_without_the_preload(void **state)
{
	struct run r;

	(void)state;
	run_victim("all", NULL, &r);
	run_victim("fork", NULL, &r);
}

/* Preloaded without $LOWKEY_LOCKS_DIR (by hand, say): it stays out of the way entirely. */
static void inert_without_a_directory(void **state)
{
	char preload[600];
	char *argv[] = { VICTIM, "all", NULL };
	char *env[] = { preload, NULL };
	struct run r;

	(void)state;
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", PRELOAD);
	unsetenv("LOWKEY_LOCKS_DIR");
	run(argv, env, &r);
	assert_int_equal(exit_code(&r), 0);
}

static void exact_figures_for_every_kind(void **state)
{
	char *dir = make_dir();
	struct file files[8];
	const struct lkl_entry *e;
	const struct file *f;
	struct run r;
	int n;

	(void)state;
	run_victim("all", dir, &r);
	n = load_files(dir, files, 8);
	assert_int_equal(n, 1);
	f = &files[0];
	assert_true(f->h->flags & LKL_F_EXITED);
	assert_int_equal(f->h->untracked, 0);
	assert_int_equal(f->h->hold_period, 1);

	e = entry(f, address_of(&r, "plain"), LKL_MUTEX);
	assert_int_equal(e->acquisitions, 1000);
	assert_int_equal(e->contended, 0);
	assert_int_equal(e->hold_samples, 1000);
	assert_int_equal(e->owner, 0);
	assert_int_not_equal(e->first_site, 0);
	assert_int_equal(e->site, 0);

	e = entry(f, address_of(&r, "contended"), LKL_MUTEX);
	assert_int_equal(e->acquisitions, 3); /* main, the waiter, the holder in timed_out() */
	assert_int_equal(e->contended, 1);
	assert_int_equal(e->try_fails, 1);
	assert_true(e->wait_total > 0);
	assert_int_equal(e->wait_max, e->wait_total);
	assert_int_not_equal(e->site, 0);
	/* main -> waiter -> holder; glibc may give the holder the joined waiter's thread block, and
	 * threads are told apart by thread pointer: one change or two */
	assert_true(e->owner_changes == 1 || e->owner_changes == 2);

	/* a recursive mutex locked three deep is one acquisition, and is released in the end */
	e = entry(f, address_of(&r, "recursive"), LKL_MUTEX);
	assert_int_equal(e->acquisitions, 1);
	assert_int_equal(e->depth, 0);
	assert_int_equal(e->owner, 0);
	assert_int_equal(e->hold_samples, 1);

	/* the robust one: the dead owner's lock, EOWNERDEAD (held), then a normal lock */
	e = entry(f, address_of(&r, "robust"), LKL_MUTEX);
	assert_int_equal(e->acquisitions, 3);
	assert_int_equal(e->owner, 0);

	/* the thread started by a constructor before main */
	e = entry(f, address_of(&r, "before_main"), LKL_MUTEX);
	assert_int_equal(e->acquisitions, 1 + 500);

	e = entry(f, address_of(&r, "rw"), LKL_RWLOCK);
	assert_int_equal(e->read_acquisitions, 21);
	assert_int_equal(e->acquisitions, 1);
	assert_int_equal(e->contended, 1);
	assert_int_equal(e->try_fails, 1);
	assert_int_equal(e->read_hold_samples, 21);
	assert_int_equal(e->read_timing, 0);
	assert_int_equal(e->owner, 0);

	e = entry(f, address_of(&r, "spin"), LKL_SPIN);
	assert_int_equal(e->acquisitions, 2);
	assert_int_equal(e->contended, 1);
	assert_int_equal(e->try_fails, 1);
	assert_int_equal(e->owner, 0);

	e = entry(f, address_of(&r, "cond_mutex"), LKL_MUTEX);
	assert_true(e->cond_reacquires >= 2);
	assert_int_equal(e->acquisitions,
			 2 + e->cond_reacquires); /* main and the signaller, plus re-takes */
	assert_int_equal(e->owner, 0);

	e = entry(f, address_of(&r, "sem"), LKL_SEM);
	assert_int_equal(e->read_acquisitions, 3);
	assert_int_equal(e->contended, 1);
	assert_int_equal(e->try_fails, 1);
	assert_int_equal(e->posts, 1);

	unload_files(files, n, dir);
	free(dir);
}

static void fork_children_get_their_own_file(void **state)
{
	char *dir = make_dir();
	struct file files[8];
	const struct file *parent = NULL, *child = NULL;
	uint64_t plain;
	struct run r;
	int n;

	(void)state;
	run_victim("fork", dir, &r);
	plain = address_of(&r, "plain");
	n = load_files(dir, files, 8);
	assert_int_equal(n, 2);
	for (int i = 0; i < n; i++) {
		if (files[i].h->ppid == files[(i + 1) % n].h->pid)
			child = &files[i];
		else
			parent = &files[i];
	}
	assert_non_null(parent);
	assert_non_null(child);
	/* the parent: 100 + the one held across fork; the child: its 30, not the parent's */
	assert_int_equal(entry(parent, plain, LKL_MUTEX)->acquisitions, 101);
	assert_int_equal(entry(child, plain, LKL_MUTEX)->acquisitions, 30);
	assert_true(parent->h->flags & LKL_F_EXITED);
	assert_true(child->h->flags & LKL_F_EXITED);
	unload_files(files, n, dir);
	free(dir);
}

static void exec_gets_a_file_per_image(void **state)
{
	char *dir = make_dir();
	struct file files[8];
	const struct file *before = NULL, *after = NULL;
	struct run r;
	int n;

	(void)state;
	run_victim("exec", dir, &r);
	n = load_files(dir, files, 8);
	assert_int_equal(n, 2);
	assert_int_equal(files[0].h->pid, files[1].h->pid);
	for (int i = 0; i < n; i++) {
		if (files[i].h->flags & LKL_F_EXITED)
			after = &files[i];
		else
			before = &files[i]; /* exec() ends an image without exit handlers */
	}
	assert_non_null(before);
	assert_non_null(after);
	/* the printed address is the same in both images (same executable, same layout? not with
	 * ASLR): find the mutex by its counts instead */
	{
		int found40 = 0, found7 = 0;

		for (uint32_t i = 0; i < before->h->capacity; i++)
			found40 += before->entries[i].key && before->entries[i].acquisitions == 40;
		for (uint32_t i = 0; i < after->h->capacity; i++)
			found7 += after->entries[i].key && after->entries[i].acquisitions == 7;
		assert_int_equal(found40, 1);
		assert_int_equal(found7, 1);
	}
	unload_files(files, n, dir);
	free(dir);
}

/* ---- the command ---- */

static void read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	read_all(fd, buf, len);
	close(fd);
}

static void command_reports_sites(void **state)
{
	char out[] = "/tmp/lowkey-locks-report.XXXXXX";
	static char report[1 << 16];
	char *argv[] = { LOWKEY, "locks", "--json", "--top", "0", "-o",
			 out,	 "--",	  VICTIM,   "all",   NULL };
	char *text_argv[] = { LOWKEY, "locks", "--top", "3", "--", VICTIM, "all", NULL };
	struct run r;
	int fd = mkstemp(out);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	run(argv, NULL, &r);
	assert_int_equal(exit_code(&r), 0);
	read_file(out, report, sizeof(report));
	unlink(out);
	assert_non_null(strstr(report, "\"processes\""));
	assert_non_null(strstr(report, "\"kind\": \"mutex\""));
	assert_non_null(strstr(report, "\"kind\": \"rwlock\""));
	assert_non_null(strstr(report, "\"kind\": \"spinlock\""));
	assert_non_null(strstr(report, "\"kind\": \"semaphore\""));
	/* the first contended acquisition of each kind, symbolized to the function that made it */
	assert_non_null(strstr(report, "\"function\": \"lock_contended\""));
	assert_non_null(strstr(report, "\"function\": \"read_contended\""));
	assert_non_null(strstr(report, "\"function\": \"spin_contended\""));
	assert_non_null(strstr(report, "\"function\": \"sem_contended\""));
	assert_non_null(strstr(report, "\"file\": \"locks_victim.c\""));
	assert_non_null(strstr(report, "\"exit_status\": 0"));

	run(text_argv, NULL, &r);
	assert_int_equal(exit_code(&r), 0);
	assert_non_null(strstr(r.err, "lowkey locks: "));
	assert_non_null(strstr(r.err, "contended first at"));
	assert_non_null(strstr(r.err, "more locks not listed, "));
	assert_non_null(strstr(r.err, ": --all lists every lock\n"));
	assert_non_null(strstr(r.out, "plain=")); /* the program's own output is untouched */
}

static long json_number(const char *json, const char *key)
{
	char needle[64];
	const char *at;

	snprintf(needle, sizeof(needle), "\"%s\": ", key);
	at = strstr(json, needle);
	assert_non_null(at);
	return strtol(at + strlen(needle), NULL, 10);
}

/*
 * Locks that were destroyed are still listed, each once (a lock made again at the same address
 * is a new lock, not the old one counted twice), also when there are more than the table holds:
 * those never contended are summed then, and still counted once each.
 */
static void destroyed_locks_are_counted_once(void **state)
{
	char out[] = "/tmp/lowkey-locks-report.XXXXXX";
	static char report[1 << 16];
	char *argv[] = { LOWKEY, "locks", "--json", "--all",   "-o",
			 out,	 "--",	  VICTIM,   "destroy", NULL };
	char *churn[] = { LOWKEY, "locks", "--json",  "--max-locks", "1024",
			  "--",	  VICTIM,  "destroy", "2000",	     NULL };
	struct run r;
	long listed = 0, destroyed = 0, folded;
	int fd = mkstemp(out);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	run(argv, NULL, &r);
	assert_int_equal(exit_code(&r), 0);
	read_file(out, report, sizeof(report));
	unlink(out);
	assert_int_equal(json_number(report, "destroyed_uncontended_locks"), 0);
	for (const char *p = strstr(report, "\"top\""); p && (p = strstr(p, "\"kind\"")); p++)
		listed++;
	for (const char *p = report; (p = strstr(p, "\"destroyed\": true")); p++)
		destroyed++;
	assert_int_equal(destroyed, 10);
	assert_int_equal(json_number(report, "locks"), listed);

	/* 2000 at one address, in a table of 1024 entries: half of it listed, the rest summed */
	run(churn, NULL, &r);
	assert_int_equal(exit_code(&r), 0);
	folded = json_number(r.err, "destroyed_uncontended_locks");
	listed = json_number(r.err, "listed") + json_number(r.err, "left_out");
	assert_int_equal(listed, 1024 / 2 - 1); /* and the entry the address reuses */
	assert_int_equal(json_number(r.err, "locks"), listed + folded);
	assert_int_equal(listed + folded, 2000 + 1); /* and before_main */
}

static void command_refuses_bad_usage(void **state)
{
	char *no_command[] = { LOWKEY, "locks", NULL };
	char *bad_top[] = { LOWKEY, "locks", "--top", "many", "--", "/bin/true", NULL };
	char *missing[] = { LOWKEY, "locks", "--", "/nonexistent/program", NULL };
	char *is_static[] = { LOWKEY, "locks", "--", STATIC_PROGRAM, NULL };
	char *fails[] = { LOWKEY, "locks", "--", "/bin/false", NULL };
	char *exits_3[] = { LOWKEY, "locks", "--", "/bin/sh", "-c", "exit 3", NULL };
	char *unwritable[] = { LOWKEY, "locks",	    "-o",  "/nonexistent/report",
			       "--",   "/bin/echo", "ran", NULL };
	char *help[] = { LOWKEY, "locks", "--help", NULL };
	struct run r;

	(void)state;
	run(no_command, NULL, &r);
	assert_int_equal(exit_code(&r), 2);
	assert_non_null(strstr(r.err, "no command"));
	run(bad_top, NULL, &r);
	assert_int_equal(exit_code(&r), 2);
	run(missing, NULL, &r);
	assert_int_equal(exit_code(&r), 127); /* as a shell, lowkey stat and lowkey trace */
	assert_non_null(strstr(r.err, "command not found"));
	run(is_static, NULL, &r);
	assert_int_equal(exit_code(&r), 1);
	assert_non_null(strstr(r.err, "statically linked"));
	run(fails, NULL, &r);
	assert_int_equal(exit_code(&r), 1);
	assert_non_null(strstr(r.err, "exited with status 1"));
	run(exits_3, NULL, &r);
	assert_int_equal(exit_code(&r), 3); /* the command's own status */
	run(unwritable, NULL, &r);
	assert_int_equal(exit_code(&r), 1);
	assert_non_null(strstr(r.err, "cannot write /nonexistent/report"));
	assert_null(strstr(r.out, "ran")); /* refused before the command ran */
	run(help, NULL, &r);
	assert_int_equal(exit_code(&r), 0);
	assert_non_null(strstr(r.out, "usage: lowkey locks"));
}

/*
 * lowkey locks killed (SIGTERM) or hung up on (SIGHUP) while the program runs: the program gets
 * the signal, and lowkey reports, removes its directory and exits as for a program killed by it.
 */
static void signalled_while_running(void **state)
{
	static struct lkt_run r;

	(void)state;
	lkt_signal_while_running(&r, LOWKEY " locks -- " VICTIM " wait", "waiting",
				 "LOWKEY_LOCKS_DIR", "", "TERM", 128 + SIGTERM,
				 "was killed by signal 15");
	lkt_signal_while_running(&r, LOWKEY " locks -- " VICTIM " wait", "waiting",
				 "LOWKEY_LOCKS_DIR", "", "HUP", 128 + SIGHUP,
				 "was killed by signal 1 ");
}

/* A signal for lowkey after it made its directory, before the program started: it is removed. */
static void signalled_before_the_program(void **state)
{
	static struct lkt_run r;

	(void)state;
	lkt_signal_before_start(&r, SIGNAL_SHIM, LOWKEY " locks -- echo program ran", "program ran",
				SIGTERM);
	lkt_signal_before_start(&r, SIGNAL_SHIM, LOWKEY " locks -- echo program ran", "program ran",
				SIGINT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(behaves_the_same_without_the_preload),
		cmocka_unit_test(destroyed_locks_are_counted_once),
		cmocka_unit_test(inert_without_a_directory),
		cmocka_unit_test(exact_figures_for_every_kind),
		cmocka_unit_test(fork_children_get_their_own_file),
		cmocka_unit_test(exec_gets_a_file_per_image),
		cmocka_unit_test(command_reports_sites),
		cmocka_unit_test(command_refuses_bad_usage),
		cmocka_unit_test(signalled_while_running),
		cmocka_unit_test(signalled_before_the_program),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
