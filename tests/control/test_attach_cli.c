// SPDX-License-Identifier: MIT
/*
 * `lowkey trace --pid` and `lowkey list --pid` against running processes: events arrive; Ctrl-C,
 * --duration and the process's own exit end the trace properly; a killed lowkey leaves the process
 * as it was; a killed process leaves what it wrote; bad pids get one line saying which and what
 * to do. And against hostile ones: a FIFO planted where a mapped file was, a process posing as a
 * control socket that never stops answering, one whose control directory someone else took.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "cli/proc_signals.h"
#include "cli/run.h"
#include "ctl_test.h"
#include "control/control_internal.h"

static char scratch[] = "/tmp/lkt-attach-XXXXXX";
static struct lkt_run r;
static char path[1024], err[1024];

static int setup(void **state)
{
	(void)state;
	return mkdtemp(scratch) ? 0 : -1;
}

/* Targets still running (a failed test leaves them): ended at teardown. */
static pid_t spawned[64];
static int nspawned;

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < nspawned; i++)
		if (spawned[i] > 0 && kill(spawned[i], SIGKILL) == 0)
			waitpid(spawned[i], NULL, 0);
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

static const char *in_scratch(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	return path;
}

static void expect(int status, const char *text)
{
	lkt_expect(&r, status, text);
}

/*
 * Fork a child that runs run(arg) with its standard output on a pipe; return once the child has
 * written its first line there (into line): "ready..." when it is.
 */
static pid_t spawn_ready(void (*run)(const void *), const void *arg, char *line, size_t len)
{
	int p[2];
	pid_t pid;
	FILE *f;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		run(arg);
		_exit(0);
	}
	close(p[1]);
	if (nspawned < 64)
		spawned[nspawned++] = pid;
	f = fdopen(p[0], "r");
	line[0] = 0;
	assert_non_null(fgets(line, (int)len, f));
	fclose(f);
	return pid;
}

struct serve {
	const char *program, *ms;
	bool control;
};

static void exec_serve(const void *arg)
{
	const struct serve *s = arg;

	if (s->control)
		setenv("LOWKEY_CONTROL", "1", 1);
	else
		unsetenv("LOWKEY_CONTROL");
	execl(s->program, s->program, "serve", s->ms, (char *)NULL);
	_exit(127);
}

/* Start `program serve [ms]`, with its control socket open or not; returns once it is ready. */
static pid_t spawn_target(const char *program, bool control, const char *ms)
{
	struct serve s = { program, ms, control };
	char line[64];
	pid_t pid = spawn_ready(exec_serve, &s, line, sizeof(line));

	assert_int_equal(strncmp(line, "ready ", 6), 0);
	return pid;
}

static int end_target(pid_t pid)
{
	int status = 0;

	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	return status;
}

/* `lowkey ARGS` in the background, its output into a file of the scratch directory. */
static pid_t spawn_lowkey(const char *out, char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(LOWKEY, argv);
		_exit(127);
	}
	return pid;
}

static int wait_lowkey(pid_t pid, const char *out)
{
	int status = 0;
	FILE *f;
	size_t n;

	waitpid(pid, &status, 0);
	f = fopen(out, "r");
	n = f ? fread(r.out, 1, sizeof(r.out) - 1, f) : 0;
	r.out[n] = 0;
	if (f)
		fclose(f);
	r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return r.status;
}

static struct lk__ctl_status target_status(pid_t pid)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	struct lk__ctl_client c;

	assert_int_equal(lk__ctl_connect(&c, pid, err, sizeof(err)), 0);
	assert_int_equal(
		lk__ctl_call(&c, &req, LK_CTL_STATUS_REPLY, &reply, 30000, err, sizeof(err)), 0);
	lk__ctl_disconnect(&c);
	return reply.status; /* numbers only: the strings went with the client */
}

static pid_t polled;

static bool tracing(void *arg)
{
	(void)arg;
	return target_status(polled).running;
}

/* Some events have reached the trace on disk. */
static bool written(void *arg)
{
	(void)arg;
	return target_status(polled).events > 0;
}

static bool left_alone(void *arg)
{
	struct lk__ctl_status st = target_status(polled);

	(void)arg;
	return !st.running && st.sites_enabled == 0 && st.clients == 1;
}

static void attaching_records_the_processs_events(void **state)
{
	pid_t pid = spawn_target(TARGET, true, NULL);
	struct lkt_count n;

	(void)state;
	lkt_sh(&r, "%s trace --pid %d -e app:tick --duration 0.5 -o '%s'", LOWKEY, (int)pid,
	       in_scratch("att.ctf"));
	expect(0, "tracing process");
	assert_non_null(strstr(r.out, "events (0 lost) from 1 thread"));
	n = lkt_count(in_scratch("att.ctf"), "app:tick");
	assert_true(n.events > 0);
	assert_true(n.arg1_is_twice_arg0);
	assert_int_equal(lkt_count(in_scratch("att.ctf"), "lib:work").events, 0);
	/* the process runs on, its rules and tracing as before */
	polled = pid;
	assert_true(lkt_wait_for(left_alone, NULL));

	/* JSON, every site */
	lkt_sh(&r, "%s trace --pid %d --duration 0.3 --format json -o '%s'", LOWKEY, (int)pid,
	       in_scratch("att.json"));
	expect(0, "written to");
	assert_int_equal(lkt_sh(&r, "grep -c '\"name\":\"work\",\"cat\":\"lib\"' '%s'",
				in_scratch("att.json")),
			 0);
	assert_int_equal(WIFSIGNALED(end_target(pid)), 0);
}

/* What a case tracing process pid needs: its pid as an argument, its output and lowkey's log. */
struct traced {
	char pid[16], out[1024], log[1024];
};

static struct traced traced_as(pid_t pid, const char *name)
{
	struct traced f;

	snprintf(f.pid, sizeof(f.pid), "%d", (int)pid);
	snprintf(f.out, sizeof(f.out), "%s/%s.ctf", scratch, name);
	snprintf(f.log, sizeof(f.log), "%s/%s.log", scratch, name);
	return f;
}

static void ctrl_c_stops_the_trace(void **state)
{
	pid_t pid = spawn_target(TARGET, true, NULL), lk;
	struct traced f = traced_as(pid, "ctrlc");

	(void)state;
	lk = spawn_lowkey(f.log, (char *const[]){ "lowkey", "trace", "--pid", f.pid, "-e", "app:*",
						  "-o", f.out, NULL });
	polled = pid;
	assert_true(lkt_wait_for(tracing, NULL));
	assert_true(lkt_wait_for(written, NULL));
	kill(lk, SIGINT);
	wait_lowkey(lk, f.log);
	expect(0, "Ctrl-C stops");
	assert_non_null(strstr(r.out, "events (0 lost)"));
	assert_true(lkt_count(f.out, "app:tick").events > 0);
	assert_true(lkt_wait_for(left_alone, NULL));
	end_target(pid);
}

/* lowkey trace --pid with SIGINT raised in it once it has sent its nth message to the process. */
static void trace_interrupted_after_message(pid_t pid, int nth, const char *out)
{
	lkt_sh(&r,
	       LKT_PRELOAD_SHIM SIGNAL_SHIM " LKT_SHIM_RAISE_SENT=%d:%d " LOWKEY
					    " trace --pid %d -e 'app:*' -o '%s'",
	       SIGINT, nth, (int)pid, out);
}

/* Between the start sent and the reply: the trace that started is stopped and finished. */
static void ctrl_c_as_the_trace_starts(void **state)
{
	pid_t pid = spawn_target(TARGET, true, NULL);

	(void)state;
	trace_interrupted_after_message(pid, 2, in_scratch("ctrlc-start.ctf"));
	expect(0, "Ctrl-C stops");
	assert_non_null(strstr(r.out, "events (0 lost)"));
	assert_true(lkt_count(in_scratch("ctrlc-start.ctf"), "app:tick").events >= 0);
	polled = pid;
	assert_true(lkt_wait_for(left_alone, NULL));
	end_target(pid);
}

/* After a rule, before the start: nothing is started or made, and lowkey ends of the signal. */
static void ctrl_c_before_the_trace_starts(void **state)
{
	pid_t pid = spawn_target(TARGET, true, NULL);
	struct stat st;

	(void)state;
	trace_interrupted_after_message(pid, 1, in_scratch("ctrlc-before.ctf"));
	expect(128 + SIGINT, "stopped by SIGINT (2) before the trace started");
	assert_int_equal(stat(in_scratch("ctrlc-before.ctf"), &st), -1);
	polled = pid;
	assert_true(lkt_wait_for(left_alone, NULL));
	end_target(pid);
}

/*
 * A signal lowkey was started ignoring (nohup) stays ignored while it traces; the others stop
 * it.
 */
static void an_ignored_signal_stays_ignored(void **state)
{
	pid_t pid = spawn_target(TARGET, true, NULL), lk;
	struct traced f = traced_as(pid, "ignored");

	(void)state;
	signal(SIGINT, SIG_IGN); /* inherited by lowkey */
	lk = spawn_lowkey(f.log, (char *const[]){ "lowkey", "trace", "--pid", f.pid, "-e", "app:*",
						  "-o", f.out, NULL });
	signal(SIGINT, SIG_DFL);
	polled = pid;
	assert_true(lkt_wait_for(tracing, NULL)); /* started: lowkey has its dispositions */
	assert_true(lkt_process_has_signal(lk, "SigIgn:", SIGINT));
	assert_true(lkt_process_has_signal(lk, "SigCgt:", SIGTERM));
	assert_true(lkt_process_has_signal(lk, "SigCgt:", SIGHUP));
	kill(lk, SIGTERM);
	wait_lowkey(lk, f.log);
	expect(0, "events (0 lost)");
	assert_true(lkt_wait_for(left_alone, NULL));
	end_target(pid);
}

static void a_killed_lowkey_leaves_the_process_as_it_was(void **state)
{
	pid_t pid = spawn_target(TARGET, true, NULL), lk;
	struct traced f = traced_as(pid, "killed-lowkey");

	(void)state;
	lk = spawn_lowkey(f.log,
			  (char *const[]){ "lowkey", "trace", "--pid", f.pid, "-o", f.out, NULL });
	polled = pid;
	assert_true(lkt_wait_for(tracing, NULL));
	assert_true(lkt_wait_for(written, NULL));
	kill(lk, SIGKILL);
	wait_lowkey(lk, f.log);
	assert_true(lkt_wait_for(left_alone, NULL)); /* trace stopped, session rules removed */
	assert_true(lkt_count(f.out, "app:tick").events > 0); /* and finished properly */
	end_target(pid);
}

static void the_processs_exit_ends_the_trace(void **state)
{
	pid_t pid = spawn_target(TARGET, true, "400");

	(void)state;
	lkt_sh(&r, "%s trace --pid %d -e app:tick -o '%s'", LOWKEY, (int)pid,
	       in_scratch("exit.ctf"));
	expect(0, "exited; its trace is finished");
	assert_non_null(strstr(r.out, "events (0 lost)"));
	assert_true(lkt_count(in_scratch("exit.ctf"), "app:tick").events > 0);
	waitpid(pid, NULL, 0);
}

static void a_process_killed_mid_trace_leaves_its_events(void **state)
{
	pid_t pid = spawn_target(TARGET, true, NULL), lk;
	struct traced f = traced_as(pid, "vanished");

	(void)state;
	lk = spawn_lowkey(f.log, (char *const[]){ "lowkey", "trace", "--pid", f.pid, "-e",
						  "app:tick", "-o", f.out, NULL });
	polled = pid;
	assert_true(lkt_wait_for(tracing, NULL));
	assert_true(lkt_wait_for(written, NULL));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	wait_lowkey(lk, f.log);
	expect(0, "ended without finishing the trace");
	assert_true(lkt_count(f.out, "app:tick").events > 0);
}

static void expect_one_line(int status, const char *text)
{
	int lines = 0;

	expect(status, text);
	for (const char *p = r.out; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 1);
}

static bool execed_sleep(void *arg)
{
	char link[64], exe[256] = "";

	(void)arg;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)polled);
	return readlink(link, exe, sizeof(exe) - 1) > 0 && strstr(exe, "sleep");
}

static void bad_pids_are_explained(void **state)
{
	pid_t gone = fork(), plain, quiet;

	(void)state;
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	lkt_sh(&r, "%s trace --pid %d -o '%s'", LOWKEY, (int)gone, in_scratch("x.ctf"));
	expect_one_line(1, "no process");

	plain = fork();
	if (plain == 0) {
		execl("/bin/sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	polled = plain;
	assert_true(lkt_wait_for(execed_sleep, NULL));
	lkt_sh(&r, "%s trace --pid %d -o '%s'", LOWKEY, (int)plain, in_scratch("x.ctf"));
	expect_one_line(1, "is not linked with liblowkey");
	end_target(plain);

	quiet = spawn_target(TARGET, false, NULL);
	lkt_sh(&r, "%s trace --pid %d -o '%s'", LOWKEY, (int)quiet, in_scratch("x.ctf"));
	expect_one_line(1, "has no lowkey control socket open: start it with LOWKEY_CONTROL=1");
	end_target(quiet);
	assert_false(lkt_file_exists(in_scratch("x.ctf")));

	lkt_sh(&r, "%s trace --pid nope", LOWKEY);
	expect(2, "bad pid");
	lkt_sh(&r, "%s trace --pid 1 -- true", LOWKEY);
	expect(2, "not both");
}

static void a_glob_matching_nothing_in_the_process(void **state)
{
	pid_t pid = spawn_target(TARGET, true, NULL);

	(void)state;
	lkt_sh(&r, "%s trace --pid %d -e app:tick -e 'nosuch:*' --duration 5 -o '%s'", LOWKEY,
	       (int)pid, in_scratch("nomatch.ctf"));
	expect(1, "matches 'nosuch:*'");
	assert_non_null(strstr(r.out, "lowkey list --pid"));
	assert_false(lkt_file_exists(in_scratch("nomatch.ctf")));
	polled = pid;
	assert_true(lkt_wait_for(left_alone, NULL)); /* app:tick's session rule went too */
	end_target(pid);
}

/*
 * A library's constructors run before the program's: liblowkey's opens the control socket, and a
 * tracer that connected before the program registered its sites would find none of them. The
 * library below it sleeps in its constructor; every listing through the socket has the program's.
 */
static void a_tracer_connecting_at_start_up_sees_the_programs_sites(void **state)
{
	(void)state;
	lkt_sh(&r,
	       "m='%s'; rm -f \"$m\"; LKT_LIB_CTOR_MARKER=\"$m\" LKT_LIB_CTOR_SLEEP_MS=500 LOWKEY_CONTROL=1 "
	       "%s serve 5000 >/dev/null 2>&1 & p=$!; "
	       "while [ ! -e \"$m\" ]; do sleep 0.01; done; "
	       "for i in $(seq 500); do o=$(%s list --json --pid $p 2>/dev/null); "
	       "case $o in *'\"source\": \"control\"'*) echo \"$o\"; break;; esac; sleep 0.01; done; "
	       "kill $p; wait $p; rm -f \"$m\"",
	       in_scratch("lib-ctor"), TARGET, LOWKEY);
	assert_non_null(strstr(r.out, "\"source\": \"control\""));
	assert_non_null(strstr(r.out, "\"provider\": \"lib\", \"event\": \"work\""));
	assert_non_null(strstr(r.out, "\"provider\": \"app\", \"event\": \"tick\""));
}

/*
 * The same moment for `lowkey trace --pid`: the socket is there as soon as liblowkey's constructor
 * has run, and served once the program has registered its sites. A tracer that connects in
 * between waits for its answer, then records the program's events (told there was no socket
 * before: the socket was opened only once the program had registered).
 */
static void a_trace_started_during_start_up_waits_for_the_program(void **state)
{
	char marker[sizeof(path)];

	(void)state;
	memcpy(marker, in_scratch("lib-ctor-trace"), sizeof(marker));
	lkt_sh(&r,
	       "m='%s'; rm -f \"$m\"; LKT_LIB_CTOR_MARKER=\"$m\" LKT_LIB_CTOR_SLEEP_MS=500 LOWKEY_CONTROL=1 "
	       "%s serve 5000 >/dev/null 2>&1 & p=$!; "
	       "while [ ! -e \"$m\" ]; do sleep 0.01; done; "
	       "%s trace --pid $p -e app:tick --duration 0.3 -o '%s' 2>&1; s=$?; "
	       "kill $p; wait $p; rm -f \"$m\"; exit $s",
	       marker, TARGET, LOWKEY, in_scratch("start-up.ctf"));
	expect(0, "events (0 lost) from 1 thread");
	assert_true(lkt_count(in_scratch("start-up.ctf"), "app:tick").events > 0);
}

/*
 * Earlier still: `LOWKEY_CONTROL=1 prog & lowkey trace --pid $!` may come in before liblowkey's
 * constructor has run (the shell has not exec'd it, the loader still maps its libraries). A young
 * process that asked for a socket is waited for; here the shell sleeps 300 ms before exec'ing the
 * program (told "no control socket open" at once before).
 */
static void a_trace_started_before_the_program_was_execd_waits_for_it(void **state)
{
	(void)state;
	lkt_sh(&r,
	       "LOWKEY_CONTROL=1 sh -c 'sleep 0.3; exec \"$0\" serve 5000' '%s' >/dev/null 2>&1 & p=$!; "
	       "%s trace --pid $p -e app:tick --duration 0.3 -o '%s' 2>&1; s=$?; kill $p; wait $p; exit $s",
	       TARGET, LOWKEY, in_scratch("before-exec.ctf"));
	expect(0, "events (0 lost) from 1 thread");
	assert_true(lkt_count(in_scratch("before-exec.ctf"), "app:tick").events > 0);
}

static void list_a_running_process(void **state)
{
	struct lk__ctl_msg req = { .type = LK_CTL_RULE,
				   .rule = { 1, LK_CTL_RULE_SESSION, "app:tick" } },
			   reply;
	pid_t pid = spawn_target(TARGET, true, NULL), quiet;
	struct lk__ctl_client c;

	(void)state;
	/* with its control socket, mid-trace: which sites are on */
	assert_int_equal(lk__ctl_connect(&c, pid, err, sizeof(err)), 0);
	assert_int_equal(lk__ctl_call(&c, &req, LK_CTL_RESULT, &reply, 30000, err, sizeof(err)), 0);
	req = (struct lk__ctl_msg){ .type = LK_CTL_START,
				    .start = { 0, 0, 0, 0, 0, in_scratch("list.ctf") } };
	assert_int_equal(lk__ctl_call(&c, &req, LK_CTL_RESULT, &reply, 30000, err, sizeof(err)), 0);
	lkt_sh(&r, "%s list --pid %d", LOWKEY, (int)pid);
	expect(0, TARGET_LIB ": 1 site");
	assert_non_null(strstr(r.out, "lib:work      event       off"));
	assert_non_null(strstr(r.out, "app:tick      event       on"));
	assert_non_null(strstr(r.out, "app:depth     counter     off"));
	lkt_sh(&r, "%s list --json --pid %d", LOWKEY, (int)pid);
	expect(0, "\"source\": \"control\"");
	assert_non_null(
		strstr(r.out, "\"provider\": \"app\", \"event\": \"tick\", \"kind\": \"event\""));
	assert_non_null(strstr(r.out, "\"enabled\": true"));
	lk__ctl_disconnect(
		&c); /* ends the session: rules and trace (stop on close not asked: it runs on) */
	end_target(pid);

	/* without: the sites of the files it has mapped, their state from its memory (root, or the
	 * same user without Yama), else unknown, saying why */
	quiet = spawn_target(TARGET, false, NULL);
	lkt_sh(&r, "%s list --pid %d", LOWKEY, (int)quiet);
	expect(0, "has no control socket open");
	assert_non_null(strstr(r.out, TARGET " (PIE executable): 6 sites"));
	assert_non_null(strstr(r.out, TARGET_LIB " (shared object): 1 site"));
	if (strstr(r.out, "their state from its memory")) {
		assert_non_null(strstr(r.out, "lib:work      event       off"));
		lkt_sh(&r, "%s list --json --pid %d 2>/dev/null", LOWKEY, (int)quiet);
		expect(0, "\"source\": \"memory\"");
		assert_non_null(strstr(r.out, "\"enabled\": false, \"tracer\": false"));
	} else {
		assert_non_null(strstr(r.out, "is unknown: cannot read its memory"));
		lkt_sh(&r, "%s list --json --pid %d 2>/dev/null", LOWKEY, (int)quiet);
		expect(0, "\"source\": \"elf\"");
		assert_null(strstr(r.out, "\"enabled\""));
	}
	end_target(quiet);
}

/* ---- hostile processes ---- */

/* A child that runs fn(arg), which says "ready" on fd 1 (a pipe) when it is; wait for that. */
struct helper {
	void (*fn)(const char *);
	const char *arg;
};

static void run_helper(const void *arg)
{
	const struct helper *h = arg;

	h->fn(h->arg);
}

static pid_t spawn_helper(void (*fn)(const char *), const char *arg)
{
	struct helper h = { fn, arg };
	char line[64];
	pid_t pid = spawn_ready(run_helper, &h, line, sizeof(line));

	assert_string_equal(line, "ready\n");
	return pid;
}

static void ready(void)
{
	if (write(1, "ready\n", 6) != 6)
		_exit(2);
}

/* Map a copy of the library at dir/lib.so, remove it, and leave a FIFO where maps names it. */
static void plant_fifo(const char *dir)
{
	char lib[1024], fifo[1100], cmd[2200];
	struct stat st;
	void *map;
	int fd;

	snprintf(lib, sizeof(lib), "%s/lib.so", dir);
	snprintf(fifo, sizeof(fifo), "%s (deleted)", lib);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp '%s' '%s'", dir, TARGET_LIB, lib);
	fd = system(cmd) == 0 ? open(lib, O_RDONLY) : -1;
	if (fd < 0 || fstat(fd, &st) != 0)
		_exit(2);
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED || unlink(lib) != 0 || mkfifo(fifo, 0666) != 0)
		_exit(2);
	ready();
	pause();
}

/*
 * A FIFO where the process's maps names a mapped file: lowkey used to open it and wait forever
 * (list --pid without a control socket, and trace --pid explaining why it cannot attach). The
 * timeouts are hang guards.
 */
static void a_fifo_planted_at_a_mapped_path_stalls_nothing(void **state)
{
	char dir[1024];
	pid_t pid;

	(void)state;
	snprintf(dir, sizeof(dir), "%s", in_scratch("planted"));
	pid = spawn_helper(plant_fifo, dir);
	lkt_sh(&r, "timeout 120 %s list --pid %d", LOWKEY, (int)pid);
	expect(0, "sites read from its files");
	if (geteuid() == 0) /* through /proc/PID/map_files: the file mapped, though removed */
		assert_non_null(strstr(r.out, "lib.so (deleted) (shared object): 1 site"));
	lkt_sh(&r, "timeout 120 %s trace --pid %d -o '%s'", LOWKEY, (int)pid,
	       in_scratch("planted.ctf"));
	expect_one_line(1, "has no lowkey control socket open");
	end_target(pid);
}

/*
 * Pose as process pid's control socket in dir: answer every request with SITE messages without
 * end, of the request's seq ("sites") or of another ("strays").
 */
static void pose_as_control_socket(const char *how)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct lk__ctl_msg m = { .type = LK_CTL_SITE };
	uint8_t buf[LK_CTL_MAX_MSG];
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0), conn;

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/lowkey", scratch);
	mkdir(addr.sun_path, 0700);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/lowkey/%d.sock", scratch, (int)getpid());
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, 4) != 0)
		_exit(2);
	ready();
	signal(SIGPIPE, SIG_IGN);
	while ((conn = accept(fd, NULL, NULL)) >= 0) {
		ssize_t n = recv(conn, buf, sizeof(buf), 0);
		int len;

		if (n <= 0 || lk__ctl_decode(buf, (size_t)n, &m, err, sizeof(err)) != 0) {
			close(conn);
			continue;
		}
		m.type = LK_CTL_SITE;
		m.seq += strcmp(how, "strays") == 0 ? 1000 : 0;
		m.site = (struct lk__ctl_site){ 1,	1,	0,	  0,  0,  1,
						"fake", "site", "fake.c", "", "", "fake" };
		len = lk__ctl_encode(&m, buf, sizeof(buf));
		while (send(conn, buf, (size_t)len, 0) == len)
			;
		close(conn);
	}
}

/*
 * A limit on lowkey's memory, as a guard: the sanitizers' shadow memory cannot live under one
 * (ThreadSanitizer's allocator fails its own check and the program dies with SIGSEGV).
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEMORY_GUARD ""
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MEMORY_GUARD ""
#endif
#endif
#ifndef MEMORY_GUARD
#define MEMORY_GUARD "ulimit -v 4000000; "
#endif

/*
 * A process that answers without end: lowkey list --pid used to keep every site it sent (2.4 GB
 * in 15 s); a reply that never comes among messages that answer nothing held trace --pid forever.
 * The timeouts and the memory limit are guards, not measurements.
 */
static void a_process_posing_as_a_control_socket_is_not_read_on(void **state)
{
	pid_t pid;

	(void)state;
	pid = spawn_helper(pose_as_control_socket, "sites");
	lkt_sh(&r, "%stimeout 120 %s list --pid %d", MEMORY_GUARD, LOWKEY, (int)pid);
	expect_one_line(1, "sent more sites than a lowkey process has (65536");
	end_target(pid);

	pid = spawn_helper(pose_as_control_socket, "strays");
	lkt_sh(&r, "timeout 120 %s trace --pid %d -e 'app:*' -o '%s'", LOWKEY, (int)pid,
	       in_scratch("posing.ctf"));
	expect(1, "messages that answer nothing");
	end_target(pid);
}

/* A process started with LOWKEY_CONTROL=1 whose control directory someone else made. */
static void a_taken_control_directory_is_named(void **state)
{
	char xdg[1024], taken[1100], line[64] = "";
	int p[2];
	pid_t pid;
	FILE *f;

	(void)state;
	if (geteuid() != 0)
		skip(); /* giving the directory to another user needs root */
	snprintf(xdg, sizeof(xdg), "%s", in_scratch("taken-xdg"));
	snprintf(taken, sizeof(taken), "%s/lowkey", xdg);
	assert_int_equal(mkdir(xdg, 0700), 0);
	assert_int_equal(mkdir(taken, 0700), 0);
	assert_int_equal(chown(taken, 65534, 65534), 0);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		setenv("LOWKEY_CONTROL", "1", 1);
		setenv("XDG_RUNTIME_DIR", xdg, 1);
		execl(TARGET, TARGET, "serve", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	spawned[nspawned++] = pid;
	f = fdopen(p[0], "r");
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);

	lkt_sh(&r, "%s trace --pid %d -o '%s'", LOWKEY, (int)pid, in_scratch("taken.ctf"));
	expect_one_line(1, "was started with LOWKEY_CONTROL=1 but has no control socket open");
	assert_non_null(strstr(r.out, "lowkey belongs to uid 65534, not to the process's uid 0"));
	lkt_sh(&r, "%s list --pid %d", LOWKEY, (int)pid);
	expect(0, "lowkey belongs to uid 65534");
	assert_non_null(strstr(r.out, "(PIE executable): 6 sites"));
	end_target(pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(attaching_records_the_processs_events),
		cmocka_unit_test(ctrl_c_stops_the_trace),
		cmocka_unit_test(ctrl_c_as_the_trace_starts),
		cmocka_unit_test(ctrl_c_before_the_trace_starts),
		cmocka_unit_test(an_ignored_signal_stays_ignored),
		cmocka_unit_test(a_killed_lowkey_leaves_the_process_as_it_was),
		cmocka_unit_test(the_processs_exit_ends_the_trace),
		cmocka_unit_test(a_process_killed_mid_trace_leaves_its_events),
		cmocka_unit_test(bad_pids_are_explained),
		cmocka_unit_test(a_glob_matching_nothing_in_the_process),
		cmocka_unit_test(list_a_running_process),
		cmocka_unit_test(a_tracer_connecting_at_start_up_sees_the_programs_sites),
		cmocka_unit_test(a_trace_started_during_start_up_waits_for_the_program),
		cmocka_unit_test(a_trace_started_before_the_program_was_execd_waits_for_it),
		cmocka_unit_test(a_fifo_planted_at_a_mapped_path_stalls_nothing),
		cmocka_unit_test(a_process_posing_as_a_control_socket_is_not_read_on),
		cmocka_unit_test(a_taken_control_directory_is_named),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
