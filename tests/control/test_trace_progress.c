// SPDX-License-Identifier: MIT
/*
 * The progress of a trace's conversion at its end (no command is silent on a terminal).
 *
 * The library's side, with this test as `lowkey trace`: a program traced from the environment
 * into JSON reports PROGRESS on its status socket while the trace is converted at exit (a first
 * report at 0, a last one at the total), from itself only; and says nothing into a descriptor
 * that is no longer the socket (closed, or another socket put at its number), never from a forked
 * child, nothing at all when set-group-ID, and without dying of SIGPIPE when `lowkey trace` is gone.
 *
 * The command line's side, on a pseudo-terminal: `lowkey trace --format json` (of a command, and
 * of a process it attaches to), `lowkey snapshot` of a JSON flight recorder and `lowkey convert`
 * show a status line while converting, and
 * `lowkey report` while it reads a trace (a CTF directory's streams; a JSON or Perfetto file read,
 * then parsed); none with --quiet, --json or into a pipe.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/run.h"
#include "internal/control_protocol.h"

#define EVENTS "20000"

static char scratch[] = "/tmp/lkt-progress-XXXXXX";
static const char *target_program = PROGRESS_TARGET; /* what run_target runs */
static struct lkt_run r;

struct heard {
	int status; /* the program's exit status, 128+N for signal N */
	bool started, finished, progress_after_finish;
	int progress, begins, ends; /* PROGRESS messages; those at 0 and at the total */
	int from_others;	    /* messages sent by another process than the program */
	uint64_t total;
};

static int setup(void **state)
{
	(void)state;
	return mkdtemp(scratch) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

static void set_env_num(const char *name, unsigned long long v)
{
	char num[32];

	snprintf(num, sizeof(num), "%llu", v);
	setenv(name, num, 1);
}

/* Run the target with argv, traced from the environment into JSON as `lowkey trace` would. */
static pid_t spawn(int status_end, int keep_fd, char *const argv[])
{
	char out[1024], id[64];
	struct stat st;
	pid_t pid;

	assert_int_equal(fstat(status_end, &st), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid)
		return pid;
	snprintf(out, sizeof(out), "%s/trace-%d.json", scratch, (int)getpid());
	snprintf(id, sizeof(id), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("LOWKEY_TRACE", "*", 1);
	setenv("LOWKEY_TRACE_FORMAT", "json", 1);
	setenv("LOWKEY_TRACE_OUTPUT", out, 1);
	set_env_num("LOWKEY_TRACE_PID", (unsigned long long)getpid());
	set_env_num("LOWKEY_TRACE_STATUS_FD", (unsigned long long)status_end);
	setenv("LOWKEY_TRACE_STATUS_ID", id, 1);
	fcntl(status_end, F_SETFD, 0);
	if (keep_fd >= 0)
		fcntl(keep_fd, F_SETFD, 0);
	execv(argv[0], argv);
	_exit(127);
}

static int socket_pair(int sv[2])
{
	int on = 1;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	return setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
}

/* One message and the pid that sent it; false at the end. */
static bool receive(int fd, struct lk__ctl_msg *m, uint8_t *buf, pid_t *sender)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(struct ucred))];
	} control;
	struct iovec iov = { buf, LK_CTL_MAX_MSG };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = &control,
			     .msg_controllen = sizeof(control) };
	ssize_t n;

	do
		n = recvmsg(fd, &mh, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return false;
	*sender = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
			*sender = ((struct ucred *)(void *)CMSG_DATA(c))->pid;
	assert_int_equal(lk__ctl_decode(buf, (size_t)n, m, NULL, 0), 0);
	return true;
}

static void note(struct heard *h, const struct lk__ctl_msg *m, pid_t sender, pid_t program)
{
	h->from_others += sender != program;
	switch (m->type) {
	case LK_CTL_ENV_START:
		h->started = m->env_start.err == 0;
		break;
	case LK_CTL_ENV_FINISH:
		h->finished = true;
		break;
	case LK_CTL_PROGRESS:
		h->progress++;
		h->progress_after_finish |= h->finished;
		h->begins += m->progress.done == 0;
		h->ends += m->progress.done == m->progress.total;
		h->total = m->progress.total;
		assert_true(m->progress.done <= m->progress.total);
		break;
	}
}

/*
 * Run the target in a mode and hear its status socket to the end. decoy: another socket pair
 * whose end the target gets at its number (for "reuse"); hang_up: close our end after the start.
 */
static void run_target(struct heard *h, const char *mode, const char *arg, bool with_decoy,
		       bool hang_up)
{
	int sv[2], decoy[2] = { -1, -1 }, st;
	char fd_arg[16];
	uint8_t buf[LK_CTL_MAX_MSG];
	struct lk__ctl_msg m;
	pid_t pid, sender;

	memset(h, 0, sizeof(*h));
	socket_pair(sv);
	if (with_decoy) {
		socket_pair(decoy);
		snprintf(fd_arg, sizeof(fd_arg), "%d", decoy[1]);
		arg = fd_arg;
	}
	pid = spawn(sv[1], decoy[1],
		    (char *[]){ (char *)target_program, (char *)mode, EVENTS, (char *)arg, NULL });
	close(sv[1]);
	if (decoy[1] >= 0)
		close(decoy[1]);
	while (receive(sv[0], &m, buf, &sender)) {
		note(h, &m, sender, pid);
		if (hang_up && h->started)
			break;
	}
	close(sv[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	h->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (decoy[0] >= 0) {
		/* the decoy heard nothing (its end: every holder exited) */
		assert_int_equal(recv(decoy[0], buf, sizeof(buf), MSG_DONTWAIT), 0);
		close(decoy[0]);
	}
}

static void conversion_reports_its_progress(void **state)
{
	struct heard h;

	(void)state;
	run_target(&h, "emit", NULL, false, false);
	assert_int_equal(h.status, 0);
	assert_true(h.started && h.finished);
	assert_true(h.total > 0);
	assert_int_equal(h.begins, 1);
	assert_true(h.ends >= 1);
	assert_true(h.progress >= 2);
	assert_false(h.progress_after_finish); /* the conversion comes before the finish */
	assert_int_equal(h.from_others, 0);
}

static void closed_socket_hears_nothing(void **state)
{
	struct heard h;

	(void)state;
	run_target(&h, "close", NULL, false, false);
	assert_int_equal(h.status, 0);
	assert_true(h.started);
	assert_false(h.finished);
	assert_int_equal(h.progress, 0);
}

static void another_socket_at_its_number_hears_nothing(void **state)
{
	struct heard h;

	(void)state;
	run_target(&h, "reuse", NULL, true, false); /* the decoy is checked in run_target */
	assert_int_equal(h.status, 0);
	assert_true(h.started);
	assert_false(h.finished);
	assert_int_equal(h.progress, 0);
}

static void forked_child_does_not_report(void **state)
{
	char out[1024];
	struct heard h;
	struct stat st;

	(void)state;
#if defined(__SANITIZE_THREAD__)
	/* the child starts a trace's thread after its multi-threaded parent forked */
	print_message(
		"skipped: ThreadSanitizer cannot follow a thread started after a multi-threaded fork\n");
	skip();
#endif
	snprintf(out, sizeof(out), "%s/child.json", scratch);
	run_target(&h, "fork", out, false, false);
	assert_int_equal(h.status, 0);
	assert_int_equal(stat(out, &st), 0); /* the child converted a trace of its own */
	assert_true(st.st_size > 0);
	assert_true(h.finished);
	assert_int_equal(h.from_others, 0);
	assert_int_equal(h.begins, 1); /* the program's conversion, not the child's too */
}

/*
 * A set-group-ID program (AT_SECURE) ignores every LOWKEY_* variable: it neither traces nor says
 * anything on the status socket. Needs root (to give the copy another group) and a file system
 * that honours set-group-ID.
 */
static void secure_program_ignores_the_variables(void **state)
{
	char copy[1024];
	struct statvfs fs;
	struct heard h;

	(void)state;
	snprintf(copy, sizeof(copy), "%s/setgid-target", scratch);
	if (geteuid() != 0 || statvfs(scratch, &fs) != 0 || (fs.f_flag & ST_NOSUID)) {
		print_message(
			"skipped: needs root and a file system without nosuid, to make a set-group-ID copy\n");
		skip();
	}
	lkt_sh(&r, "cp '%s' '%s' && chgrp 65534 '%s' && chmod 2755 '%s'", PROGRESS_TARGET, copy,
	       copy, copy);
	lkt_expect(&r, 0, NULL);
	target_program = copy;
	run_target(&h, "emit", NULL, false, false);
	target_program = PROGRESS_TARGET;
	assert_int_equal(h.status, 0);
	assert_false(h.started);
	assert_false(h.finished);
	assert_int_equal(h.progress, 0);
}

static void gone_lowkey_raises_no_sigpipe(void **state)
{
	struct heard h;

	(void)state;
	run_target(&h, "peer-gone", NULL, false, true);
	assert_true(h.started);
	assert_int_equal(h.status, 0); /* not 128 + SIGPIPE */
}

/* ---- the command line on a terminal ---- */

#define STATUS_LINE "\r\033[Klowkey %s: converting the trace to JSON: "

static char pty_out[1 << 16];

/* Run argv on a pseudo-terminal (stdout and stderr); its exit status, its output in pty_out. */
static int run_on_pty(char *const argv[])
{
	size_t len = 0;
	int master, st;
	pid_t pid = forkpty(&master, NULL, NULL, NULL);

	assert_true(pid >= 0);
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	for (;;) {
		ssize_t n = read(master, pty_out + len, sizeof(pty_out) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* EIO: the child closed the terminal */
		len += (size_t)n;
	}
	pty_out[len] = 0;
	close(master);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static bool status_line_in(const char *text, const char *cmd)
{
	char line[128];

	snprintf(line, sizeof(line), STATUS_LINE, cmd);
	return strstr(text, line) != NULL;
}

static void trace_shows_the_conversion_on_a_terminal_only(void **state)
{
	char out[1024];
	const char *last;

	(void)state;
	snprintf(out, sizeof(out), "%s/cli.json", scratch);
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "trace", "--format", "json", "-o", out,
						"--", TARGET, "emit", EVENTS, NULL }),
			 0);
	if (!status_line_in(pty_out, "trace"))
		fail_msg("no status line in:\n%s", pty_out);
	/* erased before the summary, which has the line to itself */
	last = strstr(pty_out, "\033[K");
	for (const char *at = last; at; at = strstr(at + 1, "\033[K"))
		last = at;
	assert_true(strncmp(last + 3, "lowkey trace: ", 14) == 0 &&
		    isdigit((unsigned char)last[17]));

	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "trace", "--quiet", "--format", "json",
						"-o", out, "--", TARGET, "emit", EVENTS, NULL }),
			 0);
	assert_null(strstr(pty_out, "\033[K"));
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "trace", "--json", "--format", "json", "-o",
						out, "--", TARGET, "emit", EVENTS, NULL }),
			 0);
	assert_null(strstr(pty_out, "\033[K"));

	lkt_sh(&r, LOWKEY " trace --format json -o '%s' -- " TARGET " emit " EVENTS, out);
	lkt_expect(&r, 0, "lowkey trace: ");
	assert_null(strstr(r.out, "\033[K"));
	assert_null(strchr(r.out, '\r'));
}

/*
 * --pid: the time so far while tracing; the process converts its trace as it stops, and tells the
 * client how far it is.
 */
static void attach_shows_the_process_converting(void **state)
{
	char out[1024], pid_arg[16];
	FILE *serving;
	int pid = 0;

	(void)state;
	snprintf(out, sizeof(out), "%s/attach.json", scratch);
	serving = popen("LOWKEY_CONTROL=1 exec " TARGET " serve 60000", "r");
	assert_non_null(serving);
	assert_int_equal(fscanf(serving, "ready %d", &pid), 1);
	snprintf(pid_arg, sizeof(pid_arg), "%d", pid);
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "trace", "--pid", pid_arg, "--format",
						"json", "-o", out, "--duration", "0.5", NULL }),
			 0);
	kill(pid, SIGTERM);
	pclose(serving);
	if (!status_line_in(pty_out, "trace") ||
	    !strstr(pty_out, "\r\033[Klowkey trace: tracing process "))
		fail_msg("no status line while tracing or converting in:\n%s", pty_out);
}

/* A flight recorder's JSON snapshot is converted by the process, which tells `lowkey snapshot`. */
static void snapshot_shows_the_process_converting(void **state)
{
	char out[1024], pid_arg[16];
	struct timespec pause = { 0, 200 * 1000 * 1000 };
	FILE *serving;
	int pid = 0;

	(void)state;
	snprintf(out, sizeof(out), "%s/flight.json", scratch);
	serving = popen("LOWKEY_CONTROL=1 exec " TARGET " serve 60000", "r");
	assert_non_null(serving);
	assert_int_equal(fscanf(serving, "ready %d", &pid), 1);
	snprintf(pid_arg, sizeof(pid_arg), "%d", pid);
	lkt_sh(&r, LOWKEY " trace --pid %d --overwrite --format json -o '%s'", pid, out);
	lkt_expect(&r, 0, NULL);
	nanosleep(&pause, NULL); /* some events in the rings: none would be a snapshot of nothing */
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "snapshot", "--pid", pid_arg, NULL }), 0);
	if (!strstr(pty_out, "\r\033[Klowkey snapshot: converting the snapshot: "))
		fail_msg("no status line in:\n%s", pty_out);
	assert_int_equal(
		run_on_pty((char *[]){ LOWKEY, "snapshot", "--quiet", "--pid", pid_arg, NULL }), 0);
	assert_non_null(strstr(pty_out, "lowkey snapshot: "));
	assert_null(strstr(pty_out, "\033[K"));
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "snapshot", "-q", "--pid", pid_arg, NULL }),
			 0);
	assert_null(strstr(pty_out, "\033[K"));
	kill(pid, SIGTERM);
	pclose(serving);
}

static void convert_shows_its_progress_on_a_terminal_only(void **state)
{
	char ctf[1024], out[1024];

	(void)state;
	snprintf(ctf, sizeof(ctf), "%s/conv.ctf", scratch);
	snprintf(out, sizeof(out), "%s/conv.json", scratch);
	lkt_sh(&r, LOWKEY " trace -o '%s' -- " TARGET " emit " EVENTS, ctf);
	lkt_expect(&r, 0, NULL);

	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "convert", ctf, "-o", out, NULL }), 0);
	if (!status_line_in(pty_out, "convert"))
		fail_msg("no status line in:\n%s", pty_out);
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "convert", "-q", ctf, "-o", out, NULL }),
			 0);
	assert_null(strstr(pty_out, "\033[K"));
	lkt_sh(&r, LOWKEY " convert '%s' -o '%s'", ctf, out);
	lkt_expect(&r, 0, NULL);
	assert_null(strstr(r.out, "\033[K"));
}

/* lowkey report reads a CTF trace with a status line, erased before the report. */
static void report_shows_its_reading_on_a_terminal_only(void **state)
{
	char ctf[1024];
	const char *line;

	(void)state;
	snprintf(ctf, sizeof(ctf), "%s/conv.ctf", scratch); /* from the test before */
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "report", ctf, NULL }), 0);
	/* one pass: the reader counts a CTF trace's events as it reads them, not at open */
	line = strstr(pty_out, "\r\033[Klowkey report: reading the trace: ");
	if (!line)
		fail_msg("no status line in:\n%s", pty_out);
	assert_non_null(
		strstr(line, "\r\033[Ktrace ")); /* the report starts on a line of its own */
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "report", "--json", ctf, NULL }), 0);
	assert_null(strstr(pty_out, "\033[K"));
	assert_int_equal(run_on_pty((char *[]){ LOWKEY, "report", "--quiet", ctf, NULL }), 0);
	assert_non_null(strstr(pty_out, "trace "));
	assert_null(strstr(pty_out, "\033[K"));
	lkt_sh(&r, LOWKEY " report '%s'", ctf);
	lkt_expect(&r, 0, NULL);
	assert_null(strstr(r.out, "\033[K"));
}

/*
 * A JSON or Perfetto file is read into memory, then parsed: a status line with how much of the
 * file (the first, at 0 %, is always drawn), erased before the report; none with -q.
 */
static void report_shows_how_much_of_a_file_is_read(void **state)
{
	static const char *const formats[] = { "json", "perfetto" };
	char path[1024], html[1024];
	const char *line;

	(void)state;
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		snprintf(path, sizeof(path), "%s/read.%s", scratch, formats[i]);
		snprintf(html, sizeof(html), "%s/read.html", scratch);
		lkt_sh(&r, LOWKEY " trace --format %s -o '%s' -- " TARGET " emit " EVENTS,
		       formats[i], path);
		lkt_expect(&r, 0, NULL);
		assert_int_equal(run_on_pty((char *[]){ LOWKEY, "report", path, NULL }), 0);
		line = strstr(pty_out, "\r\033[Klowkey report: reading the trace: 0% (0.0 of ");
		if (!line)
			fail_msg("%s: no status line with the file's size in:\n%s", formats[i],
				 pty_out);
		assert_non_null(strstr(line, " MiB)"));
		assert_non_null(strstr(line, "\r\033[Ktrace ")); /* erased before the report */
		assert_int_equal(
			run_on_pty((char *[]){ LOWKEY, "report", "--html", html, path, NULL }), 0);
		if (!strstr(pty_out, "\r\033[Klowkey report: reading the trace: 0% (0.0 of "))
			fail_msg("%s --html: no status line in:\n%s", formats[i], pty_out);
		assert_int_equal(run_on_pty((char *[]){ LOWKEY, "report", "-q", path, NULL }), 0);
		assert_non_null(strstr(pty_out, "trace "));
		assert_null(strstr(pty_out, "\033[K"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(conversion_reports_its_progress),
		cmocka_unit_test(closed_socket_hears_nothing),
		cmocka_unit_test(another_socket_at_its_number_hears_nothing),
		cmocka_unit_test(forked_child_does_not_report),
		cmocka_unit_test(gone_lowkey_raises_no_sigpipe),
		cmocka_unit_test(secure_program_ignores_the_variables),
		cmocka_unit_test(trace_shows_the_conversion_on_a_terminal_only),
		cmocka_unit_test(attach_shows_the_process_converting),
		cmocka_unit_test(snapshot_shows_the_process_converting),
		cmocka_unit_test(convert_shows_its_progress_on_a_terminal_only),
		cmocka_unit_test(report_shows_its_reading_on_a_terminal_only),
		cmocka_unit_test(report_shows_how_much_of_a_file_is_read),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
