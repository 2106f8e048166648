// SPDX-License-Identifier: MIT
/*
 * `lowkey watch` end to end: on a running fixture program (-p PID) and on one it starts
 * (-- COMMAND), it finds every write, from the main thread and from a thread created after it
 * started watching, names the function and the source line of the write, and reports the value;
 * SIGINT, SIGTERM and SIGHUP end it with its summary; bad usage exits 2 with a hint, a failure
 * exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "watch/watch_attempts.h"

#define ROUNDS 5 /* as in watch_fixture.c */
#define OUT_MAX (256 * 1024)

struct proc {
	pid_t pid;
	int in, out, err; /* our ends of its stdin, stdout, stderr */
};

static pid_t spawn(char *const argv[], struct proc *p)
{
	int in[2], out[2], err[2];

	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -1;
	p->pid = fork();
	if (p->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	p->in = in[1];
	p->out = out[0];
	p->err = err[0];
	return p->pid;
}

/* Read fd into buf until needle shows up or EOF; returns the bytes read (buf NUL-terminated). */
static size_t read_until(int fd, char *buf, size_t cap, size_t have, const char *needle)
{
	while (have + 1 < cap) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t n;

		buf[have] = 0;
		if (needle && strstr(buf, needle))
			break;
		if (poll(&pfd, 1, 30000) <= 0)
			break; /* 30 s without output: let the assertions say what is missing */
		n = read(fd, buf + have, cap - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	buf[have] = 0;
	return have;
}

static int wait_exit(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int count_of(const char *haystack, const char *needle)
{
	int n = 0;

	for (const char *p = haystack; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* What lowkey printed, for a failure to explain itself (cmocka's print_message cuts at 4 KiB). */
static void show(const char *out, const char *err, const char *fixture_out)
{
	fprintf(stderr, "lowkey watch's stdout:\n%s\nits stderr:\n%s\nthe fixture's stdout:\n%s\n",
		out, err, fixture_out ? fixture_out : "(shared with lowkey's)");
}

/* The fixture, started and waiting for "go". */
struct fixture {
	struct proc p;
	char out[4096];
	int pid, line;
	unsigned long addr;
	long tids[2]; /* its main thread and its second writer */
	int lost[2];  /* writes of each whose hit the hypervisor lost (watch_fixture.c) */
};

/* The writes of thread i (0, 1; 2: both) lowkey can see. */
static int visible(const struct fixture *f, int i)
{
	return i < 2 ? ROUNDS - f->lost[i] : visible(f, 0) + visible(f, 1);
}

static void start_fixture(struct fixture *f)
{
	char *argv[] = { FIXTURE_BIN, NULL };

	assert_true(spawn(argv, &f->p) > 0);
	read_until(f->p.out, f->out, sizeof(f->out), 0, "\n");
	assert_int_equal(sscanf(f->out, "pid %d addr %lx line %d", &f->pid, &f->addr, &f->line), 3);
}

/* Tell the fixture to write; learns its two writer threads' ids. */
static void run_fixture(struct fixture *f)
{
	char *line;

	assert_int_equal(write(f->p.in, "go\n", 3), 3);
	read_until(f->p.out, f->out, sizeof(f->out), strlen(f->out), "tids");
	read_until(f->p.out, f->out, sizeof(f->out), strlen(f->out), "\n");
	line = strstr(f->out, "tids");
	assert_non_null(line);
	assert_int_equal(sscanf(line, "tids %ld %ld lost %d %d", &f->tids[0], &f->tids[1],
				&f->lost[0], &f->lost[1]),
			 4);
	if (f->lost[0] || f->lost[1])
		print_message("the machine lost %d + %d hits (SIGTRAP without a breakpoint)\n",
			      f->lost[0], f->lost[1]);
}

/* Let it exit. */
static void end_fixture(struct fixture *f)
{
	assert_int_equal(write(f->p.in, "exit\n", 5), 5);
	assert_int_equal(wait_exit(f->p.pid), 0);
}

/*
 * What lowkey must get right is checked on every attempt: each hit the kernel counted is reported
 * (hits == counted, nothing lost), with the right thread, function, line, address and value. An
 * attempt in which the kernel counted fewer writes than the fixture made is run again
 * (watch_attempts.h says why).
 */
/* The JSON summary's figures; lowkey's part of the contract is checked here. */
static int json_counted(const char *out, const char *err, const char *fixture_out)
{
	const char *summary = strstr(out, "{\"summary\"");
	int hits = -1, lost = -1, counted = -1;

	if (summary)
		summary = strstr(summary, "\"hits\":");
	if (!summary ||
	    sscanf(summary, "\"hits\": %d, \"lost\": %d, \"counted\": %d}", &hits, &lost,
		   &counted) != 3 ||
	    hits != counted || lost != 0)
		show(out, err, fixture_out);
	assert_int_equal(lost, 0);
	assert_int_equal(hits, counted);
	return counted;
}

static enum attempt watch_running_process_json(void)
{
	static char out[OUT_MAX], err[8192];
	char pid[16], needle[128];
	struct fixture f;
	struct proc w;

	memset(out, 0, sizeof(out));
	start_fixture(&f);
	snprintf(pid, sizeof(pid), "%d", f.pid);
	char *argv[] = { LOWKEY_BIN,	       "watch",	 "-p",	       pid,  "--symbol",
			 "lk_fixture_counter", "--json", "--duration", "60", NULL };
	assert_true(spawn(argv, &w) > 0);
	read_until(w.err, err, sizeof(err), 0, "watching");
	assert_non_null(strstr(err, "watching 8 bytes"));
	run_fixture(&f);
	/*
	 * The second thread's hits, read while the fixture is still there (so the values can be
	 * read too). It has made every write by now: 5 s without output means a hit is missing.
	 */
	snprintf(needle, sizeof(needle), "\"tid\": %ld, ", f.tids[1]);
	for (size_t have = 0; count_of(out, needle) < visible(&f, 1) && have + 1 < sizeof(out);) {
		struct pollfd pfd = { w.out, POLLIN, 0 };
		ssize_t n;

		if (poll(&pfd, 1, 5000) <= 0)
			break;
		n = read(w.out, out + have, sizeof(out) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		out[have] = 0;
	}
	end_fixture(&f);
	/* The fixture exited: lowkey drains what is left and exits by itself. */
	read_until(w.out, out, sizeof(out), strlen(out), "\"summary\"");
	read_until(w.out, out, sizeof(out), strlen(out), NULL);
	read_until(w.err, err, sizeof(err), strlen(err), NULL);
	assert_int_equal(wait_exit(w.pid), 0);

	int counted = json_counted(out, err, f.out);

	if (counted < visible(&f, 2))
		return MACHINE_MISSED;
	assert_int_equal(counted, visible(&f, 2));
	for (int i = 0; i < 2; i++) {
		snprintf(needle, sizeof(needle), "\"tid\": %ld, ", f.tids[i]);
		assert_int_equal(count_of(out, needle), visible(&f, i));
	}
	assert_int_equal(count_of(out, "\"function\": \"bump\""), visible(&f, 2));
	snprintf(needle, sizeof(needle), "watch_fixture.c\", \"line\": %d, ", f.line);
	assert_int_equal(count_of(out, needle), visible(&f, 2));
	snprintf(needle, sizeof(needle), "\"addr\": \"%#lx\", \"value\"", f.addr);
	assert_int_equal(count_of(out, needle), visible(&f, 2));
	/* The last write's value, read after it, is what the fixture left there. */
	if (!f.lost[1])
		assert_non_null(strstr(out, "\"value\": 105}"));
	assert_int_equal(count_of(out, "\"value\": null"), 0);
	return ALL_COUNTED;
}

static void finds_writes_in_running_process_json(void **state)
{
	(void)state;
	with_attempts(watch_running_process_json, "-p PID --json");
}

static enum attempt watch_by_address_text(void)
{
	static char out[OUT_MAX], err[8192];
	char pid[16], addr[32], needle[128];
	struct fixture f;
	struct proc w;

	start_fixture(&f);
	snprintf(pid, sizeof(pid), "%d", f.pid);
	snprintf(addr, sizeof(addr), "%#lx", f.addr);
	char *argv[] = {
		LOWKEY_BIN, "watch", "-p", pid, "--addr", addr, "--len", "4", "--rw", NULL
	};
	assert_true(spawn(argv, &w) > 0);
	read_until(w.err, err, sizeof(err), 0, "watching");
	assert_non_null(strstr(err, "watching 4 bytes"));
	assert_non_null(strstr(err, "reads and writes"));
	run_fixture(&f);
	end_fixture(&f);
	read_until(w.out, out, sizeof(out), 0, NULL);
	read_until(w.err, err, sizeof(err), strlen(err), NULL);
	assert_int_equal(wait_exit(w.pid), 0);
	/* The text summary speaks up when the kernel counted more than lowkey reported. */
	if (strstr(err, "never reached") || strstr(err, " lost "))
		show(out, err, f.out);
	assert_null(strstr(err, "never reached"));
	assert_null(strstr(err, " lost "));
	if (count_of(out, "bump+0x") < visible(&f, 2))
		return MACHINE_MISSED;
	assert_int_equal(count_of(out, "bump+0x"), visible(&f, 2));
	snprintf(needle, sizeof(needle), "watch_fixture.c:%d ", f.line);
	assert_int_equal(count_of(out, needle), visible(&f, 2));
	/* Reads count too: a sanitizer's leak scan at the fixture's exit may add some. */
	const char *hits = strstr(err, "lowkey watch: ");
	int n = 0;

	hits = hits ? strstr(hits + 1, "lowkey watch: ") : NULL;
	assert_non_null(hits);
	assert_int_equal(sscanf(hits, "lowkey watch: %d hits", &n), 1);
	assert_true(n >= visible(&f, 2));
	return ALL_COUNTED;
}

static void finds_writes_by_address_text(void **state)
{
	(void)state;
	with_attempts(watch_by_address_text, "-p PID --addr --rw");
}

static enum attempt watch_a_command(void)
{
	static char out[OUT_MAX], err[8192];
	struct fixture f = { 0 };
	struct proc w;
	const char *tids;

	char *argv[] = { LOWKEY_BIN,  "watch",	"--symbol", "lk_fixture_counter", "--json", "--",
			 FIXTURE_BIN, "--auto", NULL };
	assert_true(spawn(argv, &w) > 0);
	read_until(w.out, out, sizeof(out), 0, NULL);
	read_until(w.err, err, sizeof(err), 0, NULL);
	assert_int_equal(wait_exit(w.pid), 0);
	assert_null(strstr(err, "killed by signal"));
	/* The fixture's own output (its pid line, its tids) shares lowkey's stdout. */
	tids = strstr(out, "tids ");
	assert_non_null(tids);
	assert_int_equal(sscanf(tids, "tids %ld %ld lost %d %d", &f.tids[0], &f.tids[1], &f.lost[0],
				&f.lost[1]),
			 4);

	/* Watching starts before its first instruction, so its first write, bump(0), is there too. */
	int counted = json_counted(out, err, NULL);

	if (counted < visible(&f, 2) + 1)
		return MACHINE_MISSED;
	assert_int_equal(counted, visible(&f, 2) + 1);
	assert_int_equal(count_of(out, "\"function\": \"bump\""), visible(&f, 2) + 1);
	return ALL_COUNTED;
}

static void starts_a_command(void **state)
{
	(void)state;
	with_attempts(watch_a_command, "-- COMMAND");
}

/* lowkey watch -p on f, started with SIGINT ignored or not, ended by sig once it watches. */
static void watch_until(const struct fixture *f, bool ignoring_int, int sig)
{
	static char err[8192];
	char pid[16];
	struct proc w;

	snprintf(pid, sizeof(pid), "%d", f->pid);
	char *argv[] = { LOWKEY_BIN, "watch", "-p", pid, "--symbol", "lk_fixture_counter", NULL };
	if (ignoring_int)
		signal(SIGINT, SIG_IGN); /* inherited by lowkey */
	assert_true(spawn(argv, &w) > 0);
	signal(SIGINT, SIG_DFL);
	read_until(w.err, err, sizeof(err), 0, "watching"); /* said once it catches them */
	if (ignoring_int)
		kill(w.pid, SIGINT); /* nothing: ignored */
	kill(w.pid, sig);
	read_until(w.err, err, sizeof(err), strlen(err), NULL);
	close(w.in);
	close(w.out);
	close(w.err);
	if (!strstr(err, "0 hits"))
		show("", err, NULL);
	assert_int_equal(wait_exit(w.pid), 0);
	assert_non_null(strstr(err, "0 hits"));
}

/*
 * SIGINT, SIGTERM and SIGHUP end the watch with its summary; one lowkey was started ignoring stays
 * ignored.
 */
static void a_signal_ends_the_watch(void **state)
{
	struct fixture f;

	(void)state;
	start_fixture(&f);
	watch_until(&f, false, SIGINT);
	watch_until(&f, false, SIGTERM);
	watch_until(&f, false, SIGHUP);
	watch_until(&f, true, SIGTERM);
	run_fixture(&f); /* it writes once, then it may exit */
	end_fixture(&f);
}

/* Run lowkey with args; returns its exit status, its stderr in err. */
static int lowkey(char *err, size_t cap, char *const args[])
{
	char *argv[16] = { LOWKEY_BIN };
	struct proc w;
	int i;

	for (i = 0; args[i] && i < 14; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	assert_true(spawn(argv, &w) > 0);
	close(w.in);
	read_until(w.err, err, cap, 0, NULL);
	close(w.out);
	close(w.err);
	return wait_exit(w.pid);
}

static void bad_usage_exits_2_failures_exit_1(void **state)
{
	char err[4096], self[16];

	(void)state;
	snprintf(self, sizeof(self), "%d", (int)getpid());
	assert_int_equal(lowkey(err, sizeof(err), (char *[]){ "watch", NULL }), 2);
	assert_non_null(strstr(err, "hint:"));
	assert_int_equal(lowkey(err, sizeof(err), (char *[]){ "watch", "-p", self, NULL }), 2);
	assert_non_null(strstr(err, "--addr"));
	assert_int_equal(lowkey(err, sizeof(err),
				(char *[]){ "watch", "-p", self, "--addr", "0x1000", "--symbol",
					    "x", NULL }),
			 2);
	assert_int_equal(
		lowkey(err, sizeof(err),
		       (char *[]){ "watch", "-p", self, "--addr", "0x1002", "--len", "4", NULL }),
		2);
	assert_non_null(strstr(err, "1, 2, 4 or 8 bytes"));
	assert_int_equal(
		lowkey(err, sizeof(err),
		       (char *[]){ "watch", "-p", self, "--symbol", "no_such_symbol_here", NULL }),
		2);
	assert_non_null(strstr(err, "no symbol"));
	assert_int_equal(lowkey(err, sizeof(err),
				(char *[]){ "watch", "-p", "12ab", "--addr", "0x1000", NULL }),
			 2);
	assert_int_equal(lowkey(err, sizeof(err),
				(char *[]){ "watch", "-p", "4194303", "--addr", "0x1000", NULL }),
			 1);
	assert_non_null(strstr(err, "no process 4194303: check the pid")); /* not "...: no error" */
	/* no sign on a length or an address: "-8" is not 2^64 - 8 */
	assert_int_equal(
		lowkey(err, sizeof(err),
		       (char *[]){ "watch", "-p", self, "--addr", "0x1000", "--len", "-8", NULL }),
		2);
	assert_non_null(strstr(err, "bad length '-8'"));
	assert_int_equal(lowkey(err, sizeof(err),
				(char *[]){ "watch", "-p", self, "--addr", "-1", NULL }),
			 2);
	assert_non_null(strstr(err, "bad address '-1'"));
	assert_int_equal(lowkey(err, sizeof(err), (char *[]){ "watch", "--help", NULL }), 0);
	assert_int_equal(lowkey(err, sizeof(err), (char *[]){ "help", "watch", NULL }), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(finds_writes_in_running_process_json),
		cmocka_unit_test(finds_writes_by_address_text),
		cmocka_unit_test(starts_a_command),
		cmocka_unit_test(a_signal_ends_the_watch),
		cmocka_unit_test(bad_usage_exits_2_failures_exit_1),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
