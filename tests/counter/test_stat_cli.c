// SPDX-License-Identifier: MIT
/*
 * lowkey stat from the outside: exit statuses as a shell's, the signals it passes on, the formats,
 * repetitions, -p, and the messages for what cannot be counted, unprivileged and under seccomp.
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <cmocka.h>

#include "cli/proc_signals.h"
#include "helpers.h"
#include "run.h"

#ifndef LOWKEY_BIN
#error "LOWKEY_BIN: the path of the lowkey binary"
#endif
#ifndef WORKLOAD_BIN
#error "WORKLOAD_BIN: the path of counter_workload"
#endif
#ifndef SIGNAL_SHIM
#error "SIGNAL_SHIM: the path of lkt_signal_shim (tests/cli/signal_shim.c)"
#endif

static struct run_result r;

#define STAT(...) run_stat(NULL, (char *[]){ LOWKEY_BIN, "stat", __VA_ARGS__, NULL })

static int run_stat(run_prepare_fn prepare, char **argv)
{
	assert_int_equal(run_program(argv, prepare, &r), 0);
	return r.status;
}

static void contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("expected '%s' in:\n%s", needle, haystack);
}

static void exit_status_is_the_commands(void **state)
{
	(void)state;
	assert_int_equal(STAT("-e", "task-clock", "--", "sh", "-c", "exit 7"), 7);
	contains(r.err, "task-clock");
	assert_int_equal(STAT("-e", "task-clock", "--", "true"), 0);
	/* Killed by a signal: 128 + the signal, as a shell reports it. */
	assert_int_equal(STAT("-e", "task-clock", "--", "sh", "-c", "kill -TERM $$"), 128 + 15);
	/* The command's own output is left alone. */
	assert_int_equal(STAT("-e", "page-faults", "--", "echo", "hello"), 0);
	assert_string_equal(r.out, "hello\n");
	/* Without "--" the command starts at the first word that is not an option. */
	assert_int_equal(STAT("-e", "page-faults", "sh", "-c", "exit 3"), 3);
}

static void missing_command_exits_127(void **state)
{
	(void)state;
	assert_int_equal(STAT("--", "lowkey-no-such-command", "arg"), 127);
	contains(r.err, "lowkey-no-such-command: command not found");
	assert_int_equal(STAT("--", "/etc/passwd"), 126); /* not executable */
	contains(r.err, "cannot execute");
	assert_string_equal(r.out, "");
}

static void usage_errors_exit_2(void **state)
{
	(void)state;
	assert_int_equal(STAT("-e", "task-clock"), 2); /* nothing to count */
	contains(r.err, "give a command or -p PID");
	assert_int_equal(STAT("-r", "0", "--", "true"), 2);
	assert_int_equal(STAT("--per-thread", "-r", "2", "--", "true"), 2);
	contains(r.err, "-r");
	assert_int_equal(STAT("--duration", "1", "--", "true"), 2);
	assert_int_equal(STAT("--json", "-x", ",", "--", "true"), 2);
	assert_int_equal(STAT("--bogus", "--", "true"), 2);
	contains(r.err, "--bogus");
	assert_int_equal(STAT("-p", "1", "-r", "2"), 2);
	/* numbers are whole and in range: not cut to an int, not an error and then a table */
	assert_int_equal(STAT("-r", "4294967298", "-e", "task-clock", "--", "true"), 2);
	contains(r.err, "4294967298");
	assert_int_equal(STAT("-r", "99999999999", "-e", "task-clock", "--", "true"), 2);
	assert_null(strstr(r.err, "Performance counter stats"));
	assert_int_equal(STAT("-r", "2x", "-e", "task-clock", "--", "true"), 2);
	assert_int_equal(STAT("-p", "4294967297", "-e", "task-clock"), 2);
	assert_int_equal(STAT("-e", "", "--", "true"), 2);
	contains(r.err, "empty");
	assert_int_equal(STAT("-x", "", "-e", "task-clock", "--", "true"), 2);
	contains(r.err, "empty");
	/* help goes to stdout with status 0, as git's */
	assert_int_equal(STAT("--help"), 0);
	contains(r.out, "usage: lowkey stat");
	assert_int_equal(run_stat(NULL, (char *[]){ LOWKEY_BIN, "help", "stat", NULL }), 0);
	contains(r.out, "--per-thread");
}

static void unknown_event_names_it_and_suggests(void **state)
{
	(void)state;
	assert_int_equal(STAT("-e", "task-clock,cyles", "--", "true"), 2);
	contains(r.err, "unknown event 'cyles'");
	contains(r.err, "'cycles'");
	assert_int_equal(STAT("-e", "{task-clock", "--", "true"), 2);
	contains(r.err, "never closed");
}

static void default_table(void **state)
{
	(void)state;
	assert_int_equal(STAT("--", WORKLOAD_BIN, "faults", "3000"), 0);
	contains(r.err, "Performance counter stats for '" WORKLOAD_BIN " faults 3000'");
	contains(r.err, "task-clock");
	contains(r.err, "CPUs utilized");
	contains(r.err, "page-faults");
	contains(r.err, "/sec");
	contains(r.err, "seconds time elapsed");
	contains(r.err, "seconds user");
	contains(r.err, "cycles");
	contains(r.err, "instructions");
}

static void hardware_events_without_pmu(void **state)
{
	(void)state;
	assert_int_equal(STAT("-e", "cycles,instructions,page-faults", "--", "true"), 0);
	if (!strstr(r.err, "<not supported>")) {
		contains(r.err, "insn per cycle"); /* a PMU: counted, with IPC */
		skip_because("this machine has a hardware PMU");
	}
	contains(r.err, "cycles, instructions: not counted");
	contains(r.err, "not supported on this machine");
	contains(r.err, "no CPU PMU");
}

/* page faults of a forked child and of a thread are the command's too (inherited). */
static void counts_children_and_threads(void **state)
{
	double faults;

	(void)state;
	assert_int_equal(STAT("-x", ",", "-e", "page-faults", "--", WORKLOAD_BIN, "fork-faults",
			      "4000", "thread-faults", "3000"),
			 0);
	faults = csv_value(r.err, "page-faults");
	assert_true(faults >= 7000);
}

static bool csv_has_thread_value(const char *csv, double at_least, double at_most)
{
	for (const char *line = csv; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *comma = strchr(line, ',');
		const char *dash = memchr(line, '-', comma ? (size_t)(comma - line) : 0);
		double v;

		if (!comma || !dash)
			continue; /* not a "comm-tid,value,..." line */
		v = strtod(comma + 1, NULL);
		if (v >= at_least && v <= at_most)
			return true;
	}
	return false;
}

/* A command's threads and children, each on its own line. */
static void per_thread_breakdown_of_a_command(void **state)
{
	(void)state;
	assert_int_equal(STAT("--per-thread", "-x", ",", "-e", "page-faults", "--", WORKLOAD_BIN,
			      "thread-faults", "3000", "fork-faults", "2000"),
			 0);
	assert_true(csv_value(r.err, "page-faults") >= 5000);
	assert_true(csv_has_thread_value(r.err, 3000, 3400));
	assert_true(csv_has_thread_value(r.err, 2000, 2400));
	contains(r.err, "counter_workl");

	assert_int_equal(STAT("--per-thread", "-e", "page-faults,task-clock", "--", WORKLOAD_BIN,
			      "thread-faults", "100"),
			 0);
	contains(r.err, "Per thread:");
	assert_int_equal(STAT("--per-thread", "--json", "-e", "page-faults", "--", WORKLOAD_BIN,
			      "thread-faults", "100"),
			 0);
	contains(r.err, "\"threads\": [");
	contains(r.err, "\"tid\"");
}

static void csv_like_perf(void **state)
{
	int fields = 1;

	(void)state;
	assert_int_equal(STAT("-x", ";", "-e", "task-clock,page-faults", "--", WORKLOAD_BIN,
			      "faults", "1000"),
			 0);
	/* value;unit;event;run time;% running;metric;metric unit */
	contains(r.err, ";msec;task-clock;");
	contains(r.err, "CPUs utilized");
	for (const char *p = strstr(r.err, "page-faults"); p && *p && *p != '\n'; p++)
		fields += *p == ';';
	assert_int_equal(fields, 5); /* from the event on: event;run;pcnt;metric;unit */
	assert_null(strstr(r.err, "Performance counter stats"));
}

static void json_document(void **state)
{
	int depth = 0;

	(void)state;
	assert_int_equal(STAT("--json", "-e", "task-clock,page-faults,cycles", "--", WORKLOAD_BIN,
			      "faults", "1000", "exit", "4"),
			 4);
	contains(r.err, "\"command\": \"" WORKLOAD_BIN " faults 1000 exit 4\"");
	contains(r.err, "\"exit_status\": 4");
	contains(r.err, "\"event\": \"page-faults\"");
	contains(r.err, "\"metric_unit\": \"CPUs utilized\"");
	contains(r.err, "\"time_running_ns\"");
	contains(r.err, "\"supported\"");
	for (const char *p = r.err; *p; p++) {
		depth += (*p == '{' || *p == '[') - (*p == '}' || *p == ']');
		assert_true(depth >= 0);
	}
	assert_int_equal(depth, 0);
}

static void repeats_give_mean_and_spread(void **state)
{
	char path[] = "/tmp/lowkey-stat-test-XXXXXX";
	int fd = mkstemp(path);
	FILE *f;
	char buf[8192];
	size_t n;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(STAT("-r", "3", "-o", path, "-e", "page-faults", "--", WORKLOAD_BIN,
			      "faults", "500"),
			 0);
	assert_string_equal(r.err, ""); /* the figures went to the file */
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	contains(buf, "(3 runs)");
	contains(buf, "+-");

	assert_int_equal(STAT("-r", "3", "--json", "-e", "page-faults", "--", WORKLOAD_BIN,
			      "faults", "500"),
			 0);
	contains(r.err, "\"runs\": 3");
	contains(r.err, "\"variance\"");
	contains(r.err, "\"stddev\"");
}

/* What `trap '' HUP INT QUIT` does, in the child that execs lowkey stat; and its opposite. */
static int ignore_hup_int_quit(void)
{
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	return 0;
}

static int default_hup_int_quit(void)
{
	signal(SIGHUP, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	return 0;
}

#define HUP_INT_QUIT (1ULL << (SIGHUP - 1) | 1ULL << (SIGINT - 1) | 1ULL << (SIGQUIT - 1))

/* Of SIGHUP, SIGINT and SIGQUIT, those the command ignored: its SigIgn line in r.out. */
static unsigned long long ignored_by_the_command(void)
{
	const char *line = strstr(r.out, "SigIgn:");

	if (!line)
		fail_msg("no SigIgn line in:\n%s", r.out);
	return strtoull(line + strlen("SigIgn:"), NULL, 16) & HUP_INT_QUIT;
}

/* The command starts with the dispositions lowkey stat was started with, ignored (nohup) or not. */
static void command_keeps_the_dispositions(void **state)
{
	char *argv[] = { LOWKEY_BIN,	      "stat", "-e", "task-clock", "--", "grep", "SigIgn:",
			 "/proc/self/status", NULL };

	(void)state;
	assert_int_equal(run_stat(ignore_hup_int_quit, argv), 0);
	assert_int_equal(ignored_by_the_command(), HUP_INT_QUIT);
	assert_int_equal(run_stat(default_hup_int_quit, argv), 0);
	assert_int_equal(ignored_by_the_command(), 0);
}

/* The pid the command prints once it runs (a hang guard, not a timing). */
static pid_t running_command(int out)
{
	char line[32] = "";
	size_t used = 0;

	while (!strchr(line, '\n')) {
		struct pollfd p = { out, POLLIN, 0 };

		if (poll(&p, 1, 60000) != 1 || !drain(out, line, &used, sizeof(line)))
			fail_msg("the command did not say it runs: '%s'", line);
	}
	return (pid_t)strtol(line, NULL, 10);
}

/*
 * sig sent to lowkey stat while the command runs reaches the command, which it ends; lowkey stat
 * prints the counts and exits as the command did.
 */
static void signal_while_running(int sig)
{
	char *argv[] = { LOWKEY_BIN, "stat", "-e", "task-clock",
			 "--",	     "sh",   "-c", "echo $$; exec sleep 1000 >/dev/null 2>&1",
			 NULL };
	struct run_child c = { 0, -1, -1 };
	bool left_running;
	pid_t command;

	assert_int_equal(run_start(argv, NULL, &c), 0);
	command = running_command(c.out);
	kill(c.pid, sig);
	assert_int_equal(run_finish(&c, &r), 0);
	left_running = kill(command, 0) == 0;
	if (left_running)
		kill(command, SIGKILL);
	assert_false(left_running);
	assert_int_equal(r.status, 128 + sig);
	contains(r.err, "task-clock");
}

static void term_and_hup_are_passed_on(void **state)
{
	(void)state;
	signal_while_running(SIGTERM);
	signal_while_running(SIGHUP);
	/* A run they end is the last of -r. */
	assert_int_equal(STAT("-r", "3", "--json", "-e", "task-clock", "--", "sh", "-c",
			      "kill -HUP $$"),
			 128 + SIGHUP);
	contains(r.err, "\"runs\": 1");
}

static const char *const *shim_vars; /* "NAME=VALUE" each, NULL-ended */

/* In the child before it executes lowkey: the shim preloaded, with shim_vars set. */
static int with_signal_shim(void)
{
#ifdef __SANITIZE_ADDRESS__
	const char *old = getenv("ASAN_OPTIONS");
	char opts[512];

	/* the shim comes before the sanitizer's runtime, which would refuse to start */
	snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0", old ? old : "",
		 old && *old ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
#endif
	for (const char *const *v = shim_vars; *v; v++) {
		const char *eq = strchr(*v, '=');
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)(eq - *v), *v);
		if (setenv(name, eq + 1, 1) != 0)
			return -1;
	}
	return setenv("LD_PRELOAD", SIGNAL_SHIM, 1);
}

/* lowkey stat argv with the signal shim (tests/cli/signal_shim.c) doing what vars say. */
static int stat_with_shim(char **argv, const char *const vars[])
{
	shim_vars = vars;
	return run_stat(with_signal_shim, argv);
}

/*
 * The command ended while lowkey stat held it before its exec (a ^C from the terminal reaches it
 * there too): lowkey says so and exits as the command did, where it died of SIGPIPE at the byte
 * that lets the command go.
 */
static void command_ended_while_held(void **state)
{
	char *argv[] = { LOWKEY_BIN, "stat", "-e", "task-clock", "--", "true", NULL };

	(void)state;
	assert_int_equal(stat_with_shim(argv, (const char *const[]){ "LKT_SHIM_END_HELD=2", NULL }),
			 128 + SIGINT);
	contains(r.err, "'true' was ended by SIGINT before it started");
}

/*
 * A signal for lowkey between two runs of -r, when no command runs to take it (here at the start
 * of the second run): lowkey prints the runs done, then ends of that signal.
 */
static void signal_between_runs(void **state)
{
	char *argv[] = { LOWKEY_BIN, "stat",	   "-r", "3",	 "--json",
			 "-e",	     "task-clock", "--", "true", NULL };
	char at_second_run[32];
	int sigs[] = { SIGINT, SIGTERM };

	(void)state;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		/* two pipes a run */
		snprintf(at_second_run, sizeof(at_second_run), "LKT_SHIM_RAISE=%d:3", sigs[i]);
		assert_int_equal(stat_with_shim(argv, (const char *const[]){ at_second_run, NULL }),
				 128 + sigs[i]);
		contains(r.err, "\"runs\": 1");
	}
}

/*
 * A SIGTERM for lowkey the moment the command has been reaped, before lowkey has its own handling
 * back: it is no longer the command's to take, and ends lowkey once the figures are printed.
 */
static void signal_once_the_command_ended(void **state)
{
	char *argv[] = { LOWKEY_BIN, "stat", "--json", "-e", "task-clock", "--", "true", NULL };

	(void)state;
	assert_int_equal(stat_with_shim(argv,
					(const char *const[]){ "LKT_SHIM_RAISE_REAPED=15", NULL }),
			 128 + SIGTERM);
	contains(r.err, "\"runs\": 1");
}

/* Two signals while no command runs: the second ends lowkey at once, before the figures. */
static void a_second_signal_acts_at_once(void **state)
{
	char *argv[] = { LOWKEY_BIN, "stat",	   "-r", "3",	 "--json",
			 "-e",	     "task-clock", "--", "true", NULL };
	const char *const vars[] = {
		"LKT_SHIM_RAISE_REAPED=15", /* the first, once the first run's command is reaped */
		"LKT_SHIM_RAISE=15:3",	    /* the second, as the second run would start */
		NULL,
	};

	(void)state;
	assert_int_equal(stat_with_shim(argv, vars), 128 + SIGTERM);
	assert_null(strstr(r.err, "\"runs\""));
}

/* The name in /proc/PID/comm ("" once it is gone). */
static void comm_of(pid_t pid, char *comm, size_t size)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	comm[0] = '\0';
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(comm, (int)size, f))
		comm[strcspn(comm, "\n")] = '\0';
	fclose(f);
}

/* Until the forked child pid has exec'd the workload (a hang guard, not a timing). */
static void wait_for_the_workload(pid_t pid)
{
	static const char name[] = "counter_workl"; /* counter_workload, as the kernel cuts it */
	char comm[32] = "";

	for (int i = 0; i < 60000 && strncmp(comm, name, strlen(name)); i++) {
		comm_of(pid, comm, sizeof(comm));
		if (strncmp(comm, name, strlen(name)))
			usleep(1000);
	}
	if (strncmp(comm, name, strlen(name)))
		fail_msg("process %d is not running %s after a minute: '%s'", (int)pid,
			 WORKLOAD_BIN, comm);
}

/* counter_workload mode ms in a child, once it runs; its pid also as text, for -p. */
static pid_t start_workload(const char *mode, const char *ms, char *pid, size_t len)
{
	pid_t child = fork();

	if (child == 0) {
		execl(WORKLOAD_BIN, WORKLOAD_BIN, mode, ms, (char *)NULL);
		_exit(127);
	}
	assert_true(child > 0);
	snprintf(pid, len, "%d", (int)child);
	wait_for_the_workload(child);
	return child;
}

/* Whether process pid has a perf event open (lowkey stat: its counters). */
static bool has_perf_event(pid_t pid)
{
	char path[64], link[64];
	struct dirent *e;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	while (d && !found && (e = readdir(d))) {
		char fd[64 + 256];
		ssize_t n;

		snprintf(fd, sizeof(fd), "%s/%s", path, e->d_name);
		n = readlink(fd, link, sizeof(link) - 1);
		found = n > 0 && (link[n] = '\0', strcmp(link, "anon_inode:[perf_event]") == 0);
	}
	if (d)
		closedir(d);
	return found;
}

/* A child of this process that runs lowkey and has opened its counters; 0 while there is none. */
static pid_t counting_lowkey(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	while (d && !found && (e = readdir(d))) {
		char path[64 + 256], line[512], *close_paren;
		pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
		int ppid;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		close_paren = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		fclose(f);
		if (close_paren && sscanf(close_paren + 1, " %*c %d", &ppid) == 1 &&
		    ppid == getpid() && strstr(line, "(lowkey)") && has_perf_event(pid))
			found = pid;
	}
	if (d)
		closedir(d);
	return found;
}

/* Kills the process *arg once lowkey stat counts it: it ends during the count, whatever the timing. */
static void *end_it_once_counted(void *arg)
{
	pid_t target = *(pid_t *)arg;

	for (int i = 0; i < 60000 && !counting_lowkey(); i++) /* a hang guard, not a timing */
		usleep(1000);
	kill(target, SIGKILL);
	return NULL;
}

/* -p: a running process, with its threads; stops at --duration. */
static void counts_a_running_process(void **state)
{
	char pid[16];
	int status;
	pid_t child;

	(void)state;
	child = start_workload("spin", "3000", pid, sizeof(pid));
	assert_int_equal(STAT("-p", pid, "--duration", "0.3", "--per-thread", "-x", ",", "-e",
			      "task-clock"),
			 0);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	/* It spun while counted (how much depends on the machine's load). */
	assert_true(csv_value(r.err, "task-clock") > 0);
	contains(r.err, "counter_workl"); /* the per-thread line names the thread */
	contains(r.err, pid);

	/* A process that is gone. */
	assert_int_equal(STAT("-p", pid, "--duration", "0.1"), 1);
	contains(r.err, "no process");
}

/* Until lowkey (pid) catches sig: it counts, and sig ends the count (a hang guard, no timing). */
static void wait_until_caught(pid_t pid, int sig)
{
	for (int i = 0; i < 60000 && !lkt_process_has_signal(pid, "SigCgt:", sig); i++)
		usleep(1000);
	if (!lkt_process_has_signal(pid, "SigCgt:", sig))
		fail_msg("lowkey stat -p does not catch signal %d after a minute", sig);
}

/* lowkey stat -p pid started with prepare's dispositions, ended by sig once it catches it. */
static void count_until(const char *pid, run_prepare_fn prepare, int sig)
{
	char *argv[] = { LOWKEY_BIN, "stat", "-p", (char *)pid, "-e", "task-clock", NULL };
	struct run_child c = { 0, -1, -1 };

	assert_int_equal(run_start(argv, prepare, &c), 0);
	wait_until_caught(c.pid, sig);
	if (prepare == ignore_hup_int_quit) {
		assert_true(lkt_process_has_signal(c.pid, "SigIgn:", SIGHUP));
		assert_true(lkt_process_has_signal(c.pid, "SigIgn:", SIGINT));
	}
	kill(c.pid, sig);
	assert_int_equal(run_finish(&c, &r), 0);
	assert_int_equal(r.status, 0);
	contains(r.err, "task-clock");
	contains(r.err, "seconds time elapsed");
}

/*
 * -p until a signal: SIGINT, SIGTERM and SIGHUP each end the count, which lowkey stat prints; one
 * lowkey stat was started ignoring (nohup) stays ignored.
 */
static void attached_until_a_signal(void **state)
{
	char pid[16];
	int status;
	pid_t child;

	(void)state;
	child = start_workload("sleep", "60000", pid, sizeof(pid));
	count_until(pid, NULL, SIGINT);
	count_until(pid, NULL, SIGTERM);
	count_until(pid, NULL, SIGHUP);
	count_until(pid, ignore_hup_int_quit, SIGTERM);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
}

/* The end of the process ends the count, before the duration. */
static void process_exit_ends_the_count(void **state)
{
	char pid[16];
	int status;
	pthread_t ender;
	pid_t child;

	(void)state;
	child = start_workload("sleep", "60000", pid, sizeof(pid));
	/*
	 * It ends once counted, not after a sleep that a loaded machine could outlast before lowkey
	 * stat attaches (a zombie until we reap it, which pidfd_open's poll reports as its end).
	 */
	assert_int_equal(pthread_create(&ender, NULL, end_it_once_counted, &child), 0);
	assert_int_equal(STAT("-p", pid, "--duration", "30", "--json", "-e", "task-clock"), 0);
	pthread_join(ender, NULL);
	waitpid(child, &status, 0);
	contains(r.err, "\"pid\"");
	{
		const char *e = strstr(r.err, "\"elapsed_ns\": ");

		assert_non_null(e);
		assert_true(strtod(e + 14, NULL) < 10e9);
	}
}

static int drop_to_nobody(void)
{
	return become_nobody();
}

/*
 * Copies of the programs in a directory nobody may read: the build tree may be under a private
 * home (a clone in /root, mode 0700), which nobody cannot enter.
 */
static void stage_for_nobody(char *dir, char *lowkey, char *workload, size_t len)
{
	char cmd[8192];

	assert_non_null(mkdtemp(dir));
	snprintf(lowkey, len, "%s/lowkey", dir);
	snprintf(workload, len, "%s/workload", dir);
	snprintf(cmd, sizeof(cmd),
		 "chmod 755 '%s' && cp '%s' '%s' && cp '%s' '%s' && chmod 755 '%s' '%s'", dir,
		 LOWKEY_BIN, lowkey, WORKLOAD_BIN, workload, lowkey, workload);
	assert_int_equal(system(cmd), 0);
}

static void unprivileged_run(void **state)
{
	char dir[] = "/tmp/lowkey-stat-nobody-XXXXXX", lowkey[256], workload[256], cmd[300];

	(void)state;
	stage_for_nobody(dir, lowkey, workload, sizeof(lowkey));
	assert_int_equal(run_stat(drop_to_nobody,
				  (char *[]){ lowkey, "stat", "-e", "task-clock,page-faults", "--",
					      workload, "faults", "1000", NULL }),
			 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	if (perf_paranoid() >= 2) {
		contains(r.err, "page-faults:u");
		contains(r.err, "kernel.perf_event_paranoid");
	}
	assert_true(strstr(r.err, "<not counted>") == NULL);
}

static int deny_with_eperm(void)
{
	return deny_perf_event_open(EPERM);
}

static int deny_with_enosys(void)
{
	return deny_perf_event_open(ENOSYS);
}

static void seccomp_denied(void **state)
{
	(void)state;
	assert_int_equal(run_stat(deny_with_eperm, (char *[]){ LOWKEY_BIN, "stat", "-e",
							       "task-clock", "--", "true", NULL }),
			 1);
	contains(r.err, "seccomp");
	assert_int_equal(run_stat(deny_with_enosys,
				  (char *[]){ LOWKEY_BIN, "stat", "--", "true", NULL }),
			 1);
	contains(r.err, "seccomp");
}

/* ---- -I, -a/-C, -v ---- */

/* The CSV lines of -I: "     TIME,value,unit,event,..." for event; their count, and the sum of values. */
static int interval_lines(const char *csv, const char *event, double *sum, double *last_time)
{
	int n = 0;

	*sum = 0;
	*last_time = 0;
	for (const char *line = csv; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char *end;
		double t = strtod(line, &end);
		const char *f3 = end && *end == ',' ? strchr(strchr(end + 1, ',') + 1, ',') : NULL;

		if (!f3 || end == line || strncmp(f3 + 1, event, strlen(event)) != 0 ||
		    f3[1 + strlen(event)] != ',')
			continue;
		assert_true(t > *last_time); /* the times go up */
		*last_time = t;
		*sum += strtod(end + 1, NULL);
		n++;
	}
	return n;
}

/*
 * -I 100 on a command that burns 500 ms of CPU: several intervals, not cumulative: they add up to
 * the whole CPU time (counter_workload task-spin burns exactly that much, measured in task-clock:
 * CPU time by the scheduler's clock read 500 ms where task-clock had 499.7, on a shared CPU).
 */
static void interval_counts_add_up(void **state)
{
	double sum, last;
	int n;

	(void)state;
	assert_int_equal(STAT("-I", "100", "-x", ",", "-e", "task-clock,page-faults", "--",
			      WORKLOAD_BIN, "task-spin", "500", "exit", "3"),
			 3);
	n = interval_lines(r.err, "task-clock", &sum, &last);
	if (n < 2) /* 500 ms of CPU is 5 intervals and more; a late wake-up merges some */
		fail_msg("%d intervals in:\n%s", n, r.err);
	if (sum < 500 || sum >= 700) /* ms; cumulative counts would sum to far more */
		fail_msg("the intervals' task-clock sums to %.3f ms, not 500 to 700, in:\n%s", sum,
			 r.err);
	assert_null(strstr(r.err, "Performance counter stats")); /* intervals only, as perf -I */
	assert_int_equal(interval_lines(r.err, "page-faults", &sum, &last), n);

	/* text: perf's header, then the time in the first column */
	assert_int_equal(STAT("-I", "100", "-e", "task-clock", "--", WORKLOAD_BIN, "spin", "250"),
			 0);
	contains(r.err, "#           time             counts unit events\n");
	contains(r.err, " msec  task-clock");
	assert_true(strtod(strchr(r.err, '\n') + 1, NULL) > 0.05);
}

/* --json with -I: one JSON object per line and event. */
static void interval_json_lines(void **state)
{
	int lines = 0;

	(void)state;
	assert_int_equal(
		STAT("-I", "100", "-j", "-e", "task-clock", "--", WORKLOAD_BIN, "spin", "250"), 0);
	for (const char *line = r.err; *line; line = strchr(line, '\n') + 1) {
		const char *nl = strchr(line, '\n');

		assert_non_null(nl);
		assert_true(line[0] == '{' && nl[-1] == '}');
		assert_true(strncmp(line, "{\"interval\": ", 13) == 0);
		assert_non_null(strstr(line, "\"event\": \"task-clock\""));
		lines++;
	}
	assert_true(lines >= 2);
	if (system("command -v python3 >/dev/null 2>&1") != 0)
		skip_because("no python3 to parse the JSON lines with");
	{
		char cmd[512];

		snprintf(
			cmd, sizeof(cmd),
			"%s stat -I 100 --json -e task-clock,page-faults -- %s spin 250 2>&1 >/dev/null"
			" | python3 -c 'import json,sys; v=[json.loads(l) for l in sys.stdin]; "
			"assert len(v) >= 4 and all(\"value\" in x and \"interval\" in x for x in v)'",
			LOWKEY_BIN, WORKLOAD_BIN);
		assert_int_equal(system(cmd), 0);
	}
}

/* -I with -p: a running process, until --duration. */
static void interval_of_a_process(void **state)
{
	char pid[16];
	double sum, last;
	int status;
	pid_t child;

	(void)state;
	child = start_workload("spin", "5000", pid, sizeof(pid));
	assert_int_equal(
		STAT("-p", pid, "-I", "100", "--duration", "1", "-x", ",", "-e", "task-clock"), 0);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	/* 10 intervals on a quiet machine; a late wake-up merges some (never empty ones) */
	assert_true(interval_lines(r.err, "task-clock", &sum, &last) >= 2);
	assert_true(sum > 0);
}

static void interval_usage(void **state)
{
	(void)state;
	assert_int_equal(STAT("-I", "5", "--", "true"), 2);
	contains(r.err, "-I wants milliseconds");
	assert_int_equal(STAT("-I", "100", "-r", "2", "--", "true"), 2);
	assert_int_equal(STAT("-I", "100", "--per-thread", "--", "true"), 2);
	assert_int_equal(STAT("-a", "-p", "1"), 2);
	assert_int_equal(STAT("-C", "0-", "--", "true"), 2);
	contains(r.err, "bad CPU list");
	assert_int_equal(STAT("-C", "1,1", "--", "true"), 2);
	assert_int_equal(STAT("-C", "100000", "--", "true"), 2);
	contains(r.err, "not online");
}

/* -a and -C: every process on the CPUs. Root may; an unprivileged user under perf_event_paranoid
 * > 0 may not, and is told the sysctl's value and the capability. */
static void all_cpus(void **state)
{
	char dir[] = "/tmp/lowkey-stat-nobody-XXXXXX", lowkey[256], workload[256], cmd[300];

	(void)state;
	stage_for_nobody(dir, lowkey, workload, sizeof(lowkey));
	assert_int_equal(run_stat(drop_to_nobody, (char *[]){ lowkey, "stat", "-a", "-e",
							      "cpu-clock", "--", "true", NULL }),
			 perf_paranoid() > 0 ? 1 : 0);
	if (perf_paranoid() > 0) {
		char level[64];

		snprintf(level, sizeof(level), "kernel.perf_event_paranoid is %d", perf_paranoid());
		contains(r.err, level);
		contains(r.err, "needs 0 or lower");
		contains(r.err, "CAP_PERFMON");
		contains(r.err, "sysctl -w kernel.perf_event_paranoid=0");
		assert_int_equal(run_stat(drop_to_nobody,
					  (char *[]){ lowkey, "stat", "-C", "0", "-e", "cpu-clock",
						      "--duration", "0.1", NULL }),
				 1);
		contains(r.err, level);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	if (geteuid() != 0)
		skip_because("not root: -a allowed only where the lines above were");
	assert_int_equal(STAT("-a", "-x", ",", "-e", "cpu-clock", "--", WORKLOAD_BIN, "spin", "100",
			      "exit", "4"),
			 4);
	assert_true(csv_value(r.err, "cpu-clock") >= 100);
	assert_int_equal(STAT("-C", "0", "-e", "cpu-clock", "--duration", "0.1"), 0);
	contains(r.err, "Performance counter stats for 'CPU(s) 0'");
	assert_int_equal(STAT("-a", "-j", "-e", "cpu-clock", "--duration", "0.1"), 0);
	contains(r.err, "\"cpus\": \"system wide\"");
}

/* -v: the target, each event's perf_event_attr and encoding, and the fallbacks. */
static void verbose_says_what_was_opened(void **state)
{
	char dir[] = "/tmp/lowkey-stat-nobody-XXXXXX", lowkey[256], workload[256], cmd[300];

	(void)state;
	assert_int_equal(STAT("-v", "-e", "task-clock,cycles", "--", "true"), 0);
	contains(r.err, "lowkey stat: 2 events on pid ");
	contains(r.err, "task-clock: perf_event_attr type 1 (software) config 0x1, group 0");
	contains(r.err, "encoding perf::PERF_COUNT_SW_TASK_CLOCK");
	if (strstr(r.err, "<not supported>"))
		contains(r.err, "cycles: not counted, left out");
	stage_for_nobody(dir, lowkey, workload, sizeof(lowkey));
	assert_int_equal(run_stat(drop_to_nobody,
				  (char *[]){ lowkey, "stat", "-v", "-e", "page-faults", "--",
					      workload, "faults", "10", NULL }),
			 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	if (perf_paranoid() < 2)
		skip_because("kernel.perf_event_paranoid < 2: no fallback to user space to report");
	contains(r.err, "page-faults: fell back to user space only");
	contains(r.err, "exclude_kernel=1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exit_status_is_the_commands),
		cmocka_unit_test(command_keeps_the_dispositions),
		cmocka_unit_test(term_and_hup_are_passed_on),
		cmocka_unit_test(command_ended_while_held),
		cmocka_unit_test(signal_between_runs),
		cmocka_unit_test(signal_once_the_command_ended),
		cmocka_unit_test(a_second_signal_acts_at_once),
		cmocka_unit_test(missing_command_exits_127),
		cmocka_unit_test(usage_errors_exit_2),
		cmocka_unit_test(unknown_event_names_it_and_suggests),
		cmocka_unit_test(default_table),
		cmocka_unit_test(hardware_events_without_pmu),
		cmocka_unit_test(counts_children_and_threads),
		cmocka_unit_test(per_thread_breakdown_of_a_command),
		cmocka_unit_test(csv_like_perf),
		cmocka_unit_test(json_document),
		cmocka_unit_test(repeats_give_mean_and_spread),
		cmocka_unit_test(counts_a_running_process),
		cmocka_unit_test(process_exit_ends_the_count),
		cmocka_unit_test(attached_until_a_signal),
		cmocka_unit_test(unprivileged_run),
		cmocka_unit_test(seccomp_denied),
		cmocka_unit_test(interval_counts_add_up),
		cmocka_unit_test(interval_json_lines),
		cmocka_unit_test(interval_of_a_process),
		cmocka_unit_test(interval_usage),
		cmocka_unit_test(all_cpus),
		cmocka_unit_test(verbose_says_what_was_opened),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
