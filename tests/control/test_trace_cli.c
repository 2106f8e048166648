// SPDX-License-Identifier: MIT
/*
 * `lowkey trace -- CMD` end to end, and tracing from the environment without the CLI: events
 * arrive from a PIE, a non-PIE and a statically linked program; the command's exit status comes
 * back; children are not traced; and every way it can go wrong says so (a glob matching nothing,
 * an unwritable output before the program runs, a program without liblowkey, a missing command,
 * a failed start, a program killed mid-trace); SIGTERM and SIGHUP sent to lowkey reach the
 * program, and signals ignored when lowkey started stay ignored in it.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "cli/run.h"
#include "ctl_test.h"

#ifndef PR_SET_MDWE /* Linux 6.3; Debian 12's headers predate it */
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

static char scratch[] = "/tmp/lkt-trace-XXXXXX";
static struct lkt_run r;
static char path[1024], marker[1024], self[4096];

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

static const char *in_scratch(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	return path;
}

static void expect(int status, const char *text)
{
	lkt_expect(&r, status, text);
}

/* Run lowkey trace in the scratch directory with LKT_MARKER set. */
#define TRACE(fmt, ...)                                                                     \
	lkt_sh(&r, "cd '%s' && rm -f ran && LKT_MARKER=ran " LOWKEY " trace " fmt, scratch, \
	       ##__VA_ARGS__)

static bool program_ran(void)
{
	snprintf(marker, sizeof(marker), "%s/ran", scratch);
	return lkt_file_exists(marker);
}

static void events_arrive(const char *program, const char *out)
{
	struct lkt_count n;

	TRACE("-e 'app:*' -o %s -- %s emit 1000", out, program);
	expect(0, "lowkey trace: 2002 events (0 lost) from 1 thread");
	assert_true(program_ran());
	n = lkt_count(in_scratch(out), "app:tick");
	assert_int_equal(n.events, 1000);
	assert_int_equal(n.arg0_sum, 999 * 1000 / 2);
	assert_true(n.arg1_is_twice_arg0);
	assert_int_equal(n.threads, 1);
	assert_int_equal(lkt_count(in_scratch(out), "lib:work").events, 0); /* not asked for */
}

static void events_arrive_from_a_pie_program(void **state)
{
	(void)state;
	events_arrive(TARGET, "pie.ctf");
}

static void events_arrive_from_a_non_pie_program(void **state)
{
	(void)state;
	events_arrive(TARGET_NOPIE, "nopie.ctf");
}

static void events_arrive_from_a_statically_linked_program(void **state)
{
	(void)state;
	events_arrive(TARGET_STATIC, "static.ctf");
}

static void every_site_by_default_and_exclusions(void **state)
{
	(void)state;
	TRACE("-o all.ctf -- " TARGET " emit 1000");
	expect(0, "events (0 lost)");
	assert_int_equal(lkt_count(in_scratch("all.ctf"), "app:tick").events, 1000);
	assert_int_equal(lkt_count(in_scratch("all.ctf"), "lib:work").events, 100);

	TRACE("-e '*' -e -lib:work -o some.ctf -- " TARGET " emit 1000");
	expect(0, "events (0 lost)");
	assert_int_equal(lkt_count(in_scratch("some.ctf"), "app:tick").events, 1000);
	assert_int_equal(lkt_count(in_scratch("some.ctf"), "lib:work").events, 0);

	TRACE("-e -lib -o except.ctf -- " TARGET " emit 1000"); /* a leading exclusion: all but */
	expect(0, "events (0 lost)");
	assert_int_equal(lkt_count(in_scratch("except.ctf"), "app:tick").events, 1000);
	assert_int_equal(lkt_count(in_scratch("except.ctf"), "lib:work").events, 0);
}

static void the_commands_exit_status_comes_back(void **state)
{
	(void)state;
	TRACE("-o code.ctf -- " TARGET " emit 10 7");
	expect(7, "lowkey trace:");
	TRACE("-o killed.ctf -- " TARGET " die 100");
	expect(128 + 9, "without finishing its trace");
	/* what it wrote before it was killed is there, and counted */
	assert_int_equal(lkt_count(in_scratch("killed.ctf"), "app:tick").events, 100);
	assert_non_null(strstr(r.out, "events (0 lost) from 1 thread"));
	TRACE("-o x.ctf -- ./no-such-command");
	expect(127, "cannot run './no-such-command'");
	assert_false(lkt_file_exists(in_scratch("x.ctf")));
	TRACE("-o x.ctf -- /etc/passwd");
	expect(126, "cannot run '/etc/passwd'");
}

static void a_glob_that_matches_nothing_fails(void **state)
{
	(void)state;
	TRACE("-e 'nosuch:*' -o none.ctf -- " TARGET " emit 10");
	expect(1, "no probe site in " TARGET " matches 'nosuch:*'");
	assert_non_null(strstr(r.out, "lowkey list"));
	TRACE("-e app:tick -e 'typo*' -o mixed.ctf -- " TARGET " emit 10");
	expect(1, "matches 'typo*'");
	assert_non_null(strstr(r.out, "lowkey trace: 10 events")); /* the rest was traced */
	/* a killed program cannot say what matched: the trace's own index answers */
	TRACE("-e 'nosuch' -o none2.ctf -- " TARGET " die 10");
	expect(1, "matches 'nosuch'");
}

static void an_unwritable_output_fails_before_the_program_runs(void **state)
{
	(void)state;
	assert_int_equal(lkt_sh(&r, "touch '%s'", in_scratch("file")), 0);
	TRACE("-o file/sub.ctf -- " TARGET " emit 10");
	expect(1, "cannot create the directory");
	assert_non_null(strstr(r.out, "Not a directory"));
	assert_false(program_ran());
	TRACE("--format json -o file/t.json -- " TARGET " emit 10");
	expect(1, "cannot write");
	assert_false(program_ran());

	/* something that is not a trace is never moved or overwritten */
	assert_int_equal(lkt_sh(&r, "mkdir -p '%s' && touch '%s/precious'", in_scratch("mine"),
				in_scratch("mine")),
			 0);
	TRACE("-o mine -- " TARGET " emit 10");
	expect(1, "exists and is not a lowkey trace");
	assert_false(program_ran());
	assert_true(lkt_file_exists(in_scratch("mine/precious")));
}

static void an_existing_trace_moves_to_old(void **state)
{
	(void)state;
	TRACE("-o again.ctf -- " TARGET " emit 3");
	expect(0, NULL);
	TRACE("-o again.ctf -- " TARGET " emit 4");
	expect(0, NULL);
	TRACE("-o again.ctf -- " TARGET " emit 5");
	expect(0, NULL);
	assert_int_equal(lkt_count(in_scratch("again.ctf"), "app:tick").events, 5);
	assert_int_equal(lkt_count(in_scratch("again.ctf.old"), "app:tick").events, 4);
}

static void a_program_without_liblowkey_is_named(void **state)
{
	(void)state;
	TRACE("-o plain.ctf -- " PLAIN " 3");
	expect(1, "program is not linked with liblowkey");
	assert_false(lkt_file_exists(in_scratch("plain.ctf"))); /* nothing left behind */
}

static bool no_trace_named(const char *prefix)
{
	DIR *d = opendir(scratch);
	struct dirent *e;
	bool none = true;

	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			none = false;
	if (d)
		closedir(d);
	return none;
}

static void children_are_not_traced(void **state)
{
	(void)state;
	TRACE("-o fork.ctf -- " TARGET " fork 100");
	expect(0, "events (0 lost)");
	assert_int_equal(lkt_count(in_scratch("fork.ctf"), "app:tick").events, 100);
	assert_int_equal(lkt_count(in_scratch("fork.ctf"), "child:tick").events, 0);

	TRACE("-o exec.ctf -- " TARGET " exec-child 100");
	expect(0, "events (0 lost)");
	assert_int_equal(lkt_count(in_scratch("exec.ctf"), "app:tick").events, 100);
	assert_int_equal(lkt_count(in_scratch("exec.ctf"), "child:tick").events, 0);
	assert_true(
		no_trace_named("lowkey-")); /* the exec'd child did not trace on its own either */
}

static void a_failed_start_stops_the_program_before_main(void **state)
{
	(void)state;
	/* The output is swapped for a file between the CLI's check and the library's start. */
	TRACE("-o swapped.ctf -- sh -c 'rmdir swapped.ctf && touch swapped.ctf && exec " TARGET
	      " emit 5'");
	expect(1, "cannot trace sh:");
	assert_non_null(strstr(r.out, "exists and is not a directory"));
	assert_false(program_ran());
}

/*
 * A program that forbids writable code (PR_SET_MDWE, inherited through exec) cannot have its
 * sites turned on: lowkey trace says so and fails, never "0 events" and success. Whether the
 * trace started before or after the program's sites registered, the message names the cause.
 */
static void sites_that_cannot_be_turned_on_fail_the_trace(void **state)
{
	(void)state;
	if (prctl(PR_GET_MDWE, 0, 0, 0, 0) < 0)
		skip(); /* a kernel before 6.3 has no PR_SET_MDWE */
	TRACE("-e 'app:*' -o mdwe.ctf -- '%s' --mdwe-exec " TARGET " emit 10", self);
#ifdef LK_KEYS_PORTABLE
	expect(0, "lowkey trace: 22 events (0 lost)"); /* no code is written: nothing to forbid */
#else
	expect(1, "memory-deny-write-execute");
#endif
}

static void json_output(void **state)
{
	char *text;
	FILE *f;
	long len;
	int ticks = 0;

	(void)state;
	TRACE("--format json -o t.json -- " TARGET " emit 1000");
	expect(0, "written to");
	f = fopen(in_scratch("t.json"), "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)len + 1);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	assert_non_null(strstr(text, "\"traceEvents\""));
	for (const char *p = text; (p = strstr(p, "\"name\":\"tick\",\"cat\":\"app\"")); p++)
		ticks++;
	assert_int_equal(ticks, 1000);
	free(text);
	assert_true(no_trace_named("t.json.ctf-")); /* its CTF was converted and removed */

	/* killed: the CLI converts what was written */
	TRACE("--format json -o k.json -- " TARGET " die 10");
	expect(128 + 9, "without finishing");
	assert_true(no_trace_named("k.json.ctf-"));
	assert_int_equal(
		lkt_sh(&r, "grep -o '\"name\":\"tick\"' '%s' | wc -l", in_scratch("k.json")), 0);
	assert_int_equal(atoi(r.out), 10);
}

/*
 * A Perfetto trace is written by the traced program as it records: killed, it leaves the packets
 * written before (whole ones), which the CLI keeps, counts and does not convert over.
 */
static void perfetto_output_of_a_killed_program(void **state)
{
	(void)state;
	TRACE("--format perfetto -o k.pftrace -- " TARGET " die 10");
	expect(128 + 9, "without finishing");
	assert_non_null(strstr(r.out, "events (0 lost) from 1 thread"));
	assert_true(no_trace_named("k.pftrace.ctf-"));
	/* every tick there, read by the report as a Perfetto file */
	assert_int_equal(lkt_sh(&r, LOWKEY " report '%s' | grep -E '^ +app:tick +10 '",
				in_scratch("k.pftrace")),
			 0);
}

static void cputime_and_buffer_options(void **state)
{
	struct lk__trace_reader rd;
	struct lkt_count n;
	char err[256], want[256];

	(void)state;
	TRACE("--cputime -o cpu.ctf -- " TARGET " emit 10");
	expect(0, NULL);
	assert_int_equal(lk__reader_open(&rd, in_scratch("cpu.ctf"), err, sizeof(err)), 0);
	assert_true(rd.cputime);
	lk__reader_close(&rd);

	/* A 4 KiB ring and a burst: whatever was dropped is counted, so events + lost add up exactly. */
	TRACE("--buffer 4K -e app:tick -o small.ctf -- " TARGET " emit 200000");
	expect(0, NULL);
	n = lkt_count(in_scratch("small.ctf"), "app:tick");
	assert_int_equal(n.events + n.lost, 200000);
	snprintf(want, sizeof(want), "events (%ld lost)", n.lost);
	assert_non_null(strstr(r.out, want));
	if (n.lost)
		assert_non_null(strstr(r.out, "raise --buffer (now 4 KiB per thread)"));

	TRACE("--json -e app:tick -o j.ctf -- " TARGET " emit 10");
	snprintf(want, sizeof(want),
		 "{\"output\": \"%s/j.ctf\", \"format\": \"ctf\", \"events\": 10, ", scratch);
	expect(0, want);
	assert_non_null(strstr(r.out, "\"lost\": 0, \"threads\": 1, \"bytes\": "));

	TRACE("--buffer 12 -- " TARGET);
	expect(2, "bad buffer size");
	TRACE("--format xml -- " TARGET);
	expect(2, "unknown format");
	/* -e takes comma lists, as lowkey stat and LOWKEY_TRACE do, trimmed; -j is --json */
	TRACE("-j -e ' app:tick ,' -o comma.ctf -- " TARGET " emit 10");
	snprintf(want, sizeof(want),
		 "{\"output\": \"%s/comma.ctf\", \"format\": \"ctf\", \"events\": 10, ", scratch);
	expect(0, want);
	TRACE("-e 'app:tick,nosuch:*' -o comma2.ctf -- " TARGET " emit 10");
	expect(1, "matches 'nosuch:*'");
	TRACE("-e '{app:tick,app:tock}' -- " TARGET);
	expect(2, "globs have no braces");
	TRACE("-e ',' -- " TARGET);
	expect(2, "names no glob");
	TRACE("--duration 3 -- " TARGET);
	expect(2, "--duration needs --pid");
	TRACE("");
	expect(2, "nothing to trace");
	TRACE("--help");
	expect(0, "usage: lowkey trace");
}

static void babeltrace2_reads_the_trace(void **state)
{
	(void)state;
	if (lkt_sh(&r, "command -v babeltrace2") != 0)
		skip(); /* apt-get install babeltrace2 */
	TRACE("-e app:tick -o bt.ctf -- " TARGET " emit 500");
	expect(0, NULL);
	assert_int_equal(lkt_sh(&r, "babeltrace2 '%s' 2>/dev/null | grep -c ' app:tick: '",
				in_scratch("bt.ctf")),
			 0);
	assert_int_equal(atoi(r.out), 500);
}

static void tracing_from_the_environment_alone(void **state)
{
	(void)state;
	assert_int_equal(
		lkt_sh(&r,
		       "cd '%s' && LOWKEY_TRACE=app:tick LOWKEY_TRACE_OUTPUT=env.ctf %s emit 50",
		       scratch, TARGET),
		0);
	assert_int_equal(lkt_count(in_scratch("env.ctf"), "app:tick").events, 50);

	/* no output named: lowkey-PID.ctf, in this process only (not in the exec'd child) */
	assert_true(no_trace_named("lowkey-"));
	assert_int_equal(
		lkt_sh(&r,
		       "cd '%s' && LOWKEY_TRACE=app:tick,child:tick %s exec-child 5 && ls -d lowkey-*.ctf | wc -l",
		       scratch, TARGET),
		0);
	assert_int_equal(atoi(r.out), 1);
	assert_int_equal(lkt_sh(&r, "cd '%s' && rm -rf lowkey-*.ctf", scratch), 0);

	/* meant for another process: ignored */
	assert_int_equal(
		lkt_sh(&r,
		       "cd '%s' && LOWKEY_TRACE_PID=1 LOWKEY_TRACE=app:tick LOWKEY_TRACE_OUTPUT=other.ctf %s emit 5",
		       scratch, TARGET),
		0);
	assert_false(lkt_file_exists(in_scratch("other.ctf")));

	/* a bad setting: no trace, and the program runs as if untraced (there is no one to tell) */
	assert_int_equal(
		lkt_sh(&r,
		       "cd '%s' && LOWKEY_TRACE_FORMAT=xml LOWKEY_TRACE=app:tick LOWKEY_TRACE_OUTPUT=bad.ctf %s emit 5 3",
		       scratch, TARGET),
		3);
	assert_false(lkt_file_exists(in_scratch("bad.ctf")));

	/* a JSON trace with thread CPU time and a buffer size, from the environment */
	assert_int_equal(
		lkt_sh(&r,
		       "cd '%s' && LOWKEY_TRACE=app LOWKEY_TRACE_FORMAT=json LOWKEY_TRACE_CPUTIME=1 "
		       "LOWKEY_TRACE_BUFFER=64K LOWKEY_TRACE_OUTPUT=env.json %s emit 5 && grep -c '\"tts\"' env.json",
		       scratch, TARGET),
		0);
}

/*
 * Run `lowkey trace -- TARGET signals` after shell_setup, send lowkey SIGHUP then SIGTERM once the
 * program is ready, and wait for lowkey: r has its exit status, and the program's output then
 * lowkey's.
 */
static void hangup_then_terminate(const char *shell_setup)
{
	lkt_sh(&r,
	       "cd '%s' || exit 3; rm -f signals.out signals.err; %s " LOWKEY
	       " trace -o signals.ctf -- " TARGET " signals >signals.out "
	       "2>signals.err & cli=$!; "
	       "for i in $(seq 3000); do grep -qs ready signals.out && break; sleep 0.01; done; "
	       "kill -HUP $cli; kill -TERM $cli; wait $cli; st=$?; "
	       "cat signals.out signals.err; exit $st",
	       scratch, shell_setup);
}

/* lowkey trace hung up on or killed: the program gets the signal, and lowkey reports on it. */
static void sigterm_and_sighup_are_passed_on(void **state)
{
	(void)state;
	hangup_then_terminate("");
	expect(0, "got SIGHUP");
	assert_non_null(strstr(r.out, "lowkey trace: 0 events"));
}

/*
 * Under nohup (SIGHUP ignored) and with ^C ignored, the program starts with them ignored too, and
 * a SIGHUP sent to lowkey neither stops it nor reaches the program.
 */
static void ignored_signals_stay_ignored(void **state)
{
	(void)state;
	hangup_then_terminate("trap '' HUP INT QUIT;");
	expect(0, "ignored: HUP INT QUIT\n");
	assert_null(strstr(r.out, "got SIGHUP"));
}

/*
 * A signal for lowkey once its output is made and before the program starts (the shim raises it
 * at lowkey's first pipe2()): the program never runs, the output is removed, and lowkey ends of
 * that signal.
 */
static void signalled_before_the_program(void **state)
{
	(void)state;
	lkt_sh(&r,
	       "cd '%s' || exit 3; rm -rf early.ctf; " LKT_PRELOAD_SHIM SIGNAL_SHIM
	       " LKT_SHIM_RAISE=%d:1 " LOWKEY " trace -o early.ctf -- "
	       "echo program ran 2>&1; st=$?; [ -e early.ctf ] && echo output left; exit $st",
	       scratch, SIGTERM);
	expect(128 + SIGTERM, NULL);
	assert_null(strstr(r.out, "program ran"));
	assert_null(strstr(r.out, "output left"));
}

/* test_trace_cli --mdwe-exec PROGRAM ARGS: forbid writable code, then run PROGRAM with it. */
static int mdwe_exec(char **argv)
{
	if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0)
		return 99;
	execv(argv[0], argv);
	return 127;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--mdwe-exec") == 0)
		return mdwe_exec(argv + 2);
	if (!realpath("/proc/self/exe", self))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(events_arrive_from_a_pie_program),
		cmocka_unit_test(events_arrive_from_a_non_pie_program),
		cmocka_unit_test(events_arrive_from_a_statically_linked_program),
		cmocka_unit_test(every_site_by_default_and_exclusions),
		cmocka_unit_test(the_commands_exit_status_comes_back),
		cmocka_unit_test(a_glob_that_matches_nothing_fails),
		cmocka_unit_test(an_unwritable_output_fails_before_the_program_runs),
		cmocka_unit_test(an_existing_trace_moves_to_old),
		cmocka_unit_test(a_program_without_liblowkey_is_named),
		cmocka_unit_test(children_are_not_traced),
		cmocka_unit_test(a_failed_start_stops_the_program_before_main),
		cmocka_unit_test(json_output),
		cmocka_unit_test(perfetto_output_of_a_killed_program),
		cmocka_unit_test(cputime_and_buffer_options),
		cmocka_unit_test(babeltrace2_reads_the_trace),
		cmocka_unit_test(tracing_from_the_environment_alone),
		cmocka_unit_test(sites_that_cannot_be_turned_on_fail_the_trace),
		cmocka_unit_test(sigterm_and_sighup_are_passed_on),
		cmocka_unit_test(ignored_signals_stay_ignored),
		cmocka_unit_test(signalled_before_the_program),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
