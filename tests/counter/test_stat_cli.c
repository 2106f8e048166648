// SPDX-License-Identifier: MIT
/*
 * lowkey stat from the outside: exit statuses as a shell's, the formats, repetitions, -p, and the
 * messages for what cannot be counted, unprivileged and under seccomp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <cmocka.h>

#include "helpers.h"
#include "run.h"

#ifndef LOWKEY_BIN
#error "LOWKEY_BIN: the path of the lowkey binary"
#endif
#ifndef WORKLOAD_BIN
#error "WORKLOAD_BIN: the path of counter_workload"
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
	assert_int_equal(STAT("--", "/etc/passwd"), 126);	/* not executable */
	contains(r.err, "cannot execute");
	assert_string_equal(r.out, "");
}

static void usage_errors_exit_2(void **state)
{
	(void)state;
	assert_int_equal(STAT("-e", "task-clock"), 2);	/* nothing to count */
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
		contains(r.err, "insn per cycle");	/* a PMU: counted, with IPC */
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
	assert_int_equal(STAT("-x", ",", "-e", "page-faults", "--", WORKLOAD_BIN, "fork-faults", "4000",
			      "thread-faults", "3000"), 0);
	faults = csv_value(r.err, "page-faults");
	assert_true(faults >= 7000);
}

static bool csv_has_thread_value(const char *csv, double at_least, double at_most)
{
	for (const char *line = csv; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *comma = strchr(line, ',');
		const char *dash = memchr(line, '-', comma ? (size_t)(comma - line) : 0);
		double v;

		if (!comma || !dash)
			continue;	/* not a "comm-tid,value,..." line */
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
			      "thread-faults", "3000", "fork-faults", "2000"), 0);
	assert_true(csv_value(r.err, "page-faults") >= 5000);
	assert_true(csv_has_thread_value(r.err, 3000, 3400));
	assert_true(csv_has_thread_value(r.err, 2000, 2400));
	contains(r.err, "counter_workl");

	assert_int_equal(STAT("--per-thread", "-e", "page-faults,task-clock", "--", WORKLOAD_BIN,
			      "thread-faults", "100"), 0);
	contains(r.err, "Per thread:");
	assert_int_equal(STAT("--per-thread", "--json", "-e", "page-faults", "--", WORKLOAD_BIN,
			      "thread-faults", "100"), 0);
	contains(r.err, "\"threads\": [");
	contains(r.err, "\"tid\"");
}

static void csv_like_perf(void **state)
{
	int fields = 1;

	(void)state;
	assert_int_equal(STAT("-x", ";", "-e", "task-clock,page-faults", "--", WORKLOAD_BIN, "faults",
			      "1000"), 0);
	/* value;unit;event;run time;% running;metric;metric unit */
	contains(r.err, ";msec;task-clock;");
	contains(r.err, "CPUs utilized");
	for (const char *p = strstr(r.err, "page-faults"); p && *p && *p != '\n'; p++)
		fields += *p == ';';
	assert_int_equal(fields, 5);	/* from the event on: event;run;pcnt;metric;unit */
	assert_null(strstr(r.err, "Performance counter stats"));
}

static void json_document(void **state)
{
	int depth = 0;

	(void)state;
	assert_int_equal(STAT("--json", "-e", "task-clock,page-faults,cycles", "--", WORKLOAD_BIN,
			      "faults", "1000", "exit", "4"), 4);
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
	assert_int_equal(STAT("-r", "3", "-o", path, "-e", "page-faults", "--", WORKLOAD_BIN, "faults",
			      "500"), 0);
	assert_string_equal(r.err, "");	/* the figures went to the file */
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	contains(buf, "(3 runs)");
	contains(buf, "+-");

	assert_int_equal(STAT("-r", "3", "--json", "-e", "page-faults", "--", WORKLOAD_BIN, "faults",
			      "500"), 0);
	contains(r.err, "\"runs\": 3");
	contains(r.err, "\"variance\"");
	contains(r.err, "\"stddev\"");
}

/* -p: a running process, with its threads; stops at --duration. */
static void counts_a_running_process(void **state)
{
	char pid[16];
	int status;
	pid_t child = fork();

	(void)state;
	if (child == 0) {
		execl(WORKLOAD_BIN, WORKLOAD_BIN, "spin", "3000", (char *)NULL);
		_exit(127);
	}
	snprintf(pid, sizeof(pid), "%d", (int)child);
	usleep(100 * 1000);
	assert_int_equal(STAT("-p", pid, "--duration", "0.3", "--per-thread", "-x", ",", "-e",
			      "task-clock"), 0);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	/* It spun while counted (how much depends on the machine's load). */
	assert_true(csv_value(r.err, "task-clock") > 0);
	contains(r.err, "counter_workl");	/* the per-thread line names the thread */
	contains(r.err, pid);

	/* A process that is gone. */
	assert_int_equal(STAT("-p", pid, "--duration", "0.1"), 1);
	contains(r.err, "no process");
}

/* The end of the process ends the count, before the duration. */
static void process_exit_ends_the_count(void **state)
{
	char pid[16];
	int status;
	pid_t child = fork();

	(void)state;
	if (child == 0) {
		execl(WORKLOAD_BIN, WORKLOAD_BIN, "sleep", "200", (char *)NULL);
		_exit(127);
	}
	snprintf(pid, sizeof(pid), "%d", (int)child);
	usleep(50 * 1000);
	/* It ends (a zombie until we reap it, which pidfd_open's poll reports as its end). */
	assert_int_equal(STAT("-p", pid, "--duration", "30", "--json", "-e", "task-clock"), 0);
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
	snprintf(cmd, sizeof(cmd), "chmod 755 '%s' && cp '%s' '%s' && cp '%s' '%s' && chmod 755 '%s' '%s'",
		 dir, LOWKEY_BIN, lowkey, WORKLOAD_BIN, workload, lowkey, workload);
	assert_int_equal(system(cmd), 0);
}

static void unprivileged_run(void **state)
{
	char dir[] = "/tmp/lowkey-stat-nobody-XXXXXX", lowkey[256], workload[256], cmd[300];

	(void)state;
	stage_for_nobody(dir, lowkey, workload, sizeof(lowkey));
	assert_int_equal(run_stat(drop_to_nobody, (char *[]){ lowkey, "stat", "-e",
				  "task-clock,page-faults", "--", workload, "faults", "1000", NULL }), 0);
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
	assert_int_equal(run_stat(deny_with_eperm, (char *[]){ LOWKEY_BIN, "stat", "-e", "task-clock",
				  "--", "true", NULL }), 1);
	contains(r.err, "seccomp");
	assert_int_equal(run_stat(deny_with_enosys, (char *[]){ LOWKEY_BIN, "stat", "--", "true", NULL }), 1);
	contains(r.err, "seccomp");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exit_status_is_the_commands),
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
		cmocka_unit_test(unprivileged_run),
		cmocka_unit_test(seccomp_denied),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
