// SPDX-License-Identifier: MIT
/*
 * The rules every lowkey command shares: a run command's exit status as a shell gives
 * it, in stat and locks alike; the end of a process that called _exit() is not taken for a kill;
 * -j wherever --json is; -q, --quiet wherever a status line is; the rules written once in
 * `lowkey help`; benchmarks that show progress on a terminal, print each row as it is measured,
 * and print no progress into a pipe; bench probe's sustained rates say what ended their searches,
 * and its consumers' CPU, limits and ratios are in its text and JSON.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "run.h"

static struct lkt_run r;

static bool have_locks(void)
{
	return lkt_sh(&r, "%s locks --help", LOWKEY) == 0;
}

/* Built, and able to sample here (perf breakpoints with sigtrap: not in every sandbox). */
static bool have_races(void)
{
	return lkt_sh(&r, "%s races -- true", LOWKEY) == 0;
}

/* The same statuses from stat, locks and races: the command's own, 128+N, 127, 126. */
static void exit_status_as_a_shell(void **state)
{
	static const char *const runners[] = { "stat -e task-clock", "locks", "races" };

	(void)state;
	for (size_t i = 0; i < sizeof(runners) / sizeof(runners[0]); i++) {
		if (i == 1 && !have_locks()) {
			print_message("lowkey locks is not built here (no libdw): stat only\n");
			break;
		}
		if (i == 2 && !have_races()) {
			print_message("lowkey races is not built or cannot sample here: %s\n",
				      r.out);
			break;
		}
		assert_int_equal(lkt_sh(&r, "%s %s -- sh -c 'exit 3'", LOWKEY, runners[i]), 3);
		assert_int_equal(lkt_sh(&r, "%s %s -- sh -c 'kill -TERM $$'", LOWKEY, runners[i]),
				 128 + 15);
		lkt_expect(&r, 128 + 15, NULL);
		assert_int_equal(lkt_sh(&r, "%s %s -- lowkey-no-such-command", LOWKEY, runners[i]),
				 127);
		assert_non_null(strstr(r.out, "lowkey-no-such-command: command not found"));
		assert_int_equal(lkt_sh(&r, "%s %s -- /etc/passwd", LOWKEY, runners[i]), 126);
		assert_non_null(strstr(r.out, "cannot execute"));
	}
}

/* sh's `exit 3` ends the process with _exit(): no exit handlers, yet no kill either. */
static void locks_tells_exit_from_kill(void **state)
{
	(void)state;
	if (!have_locks())
		skip();
	lkt_sh(&r, "%s locks -- sh -c 'exit 3'", LOWKEY);
	lkt_expect(&r, 3, "[ended by _exit(): no exit handlers ran]");
	assert_null(strstr(r.out, "killed"));
	lkt_sh(&r, "%s locks -- sh -c 'kill -KILL $$'", LOWKEY);
	lkt_expect(&r, 128 + 9, "[killed by a signal]");
	lkt_sh(&r, "%s locks -j -- sh -c 'exit 0'", LOWKEY);
	lkt_expect(&r, 0, "\"ended\": \"_exit\"");
	/* sh execs ls: the first image exec'd, the second exited */
	lkt_sh(&r, "%s locks -- sh -c 'exec ls / >/dev/null'", LOWKEY);
	lkt_expect(&r, 0, "[exec'd another program]");
}

/* The names in the lines under a heading of `lowkey help` or `lowkey bench list`: "   NAME  text". */
static int names_under(const char *listing, const char *prefix, char names[][48], int max)
{
	int n = 0;

	for (const char *line = listing; line && *line && n < max;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char name[32];

		if (*line == '\n' && n)
			break; /* the end of the list: the rules follow in lowkey help */
		if (strncmp(line, "   ", 3) != 0 || line[3] == ' ' ||
		    sscanf(line, "%31s", name) != 1)
			continue;
		snprintf(names[n++], 48, "%s%s", prefix, name);
	}
	return n;
}

/* Every command and bench whose help offers --json offers -j, and the short form works. */
static void short_json_everywhere(void **state)
{
	static char names[64][48];
	int n, checked = 0;

	(void)state;
	lkt_sh(&r, "%s help", LOWKEY);
	n = names_under(r.out, "", names, 32);
	lkt_sh(&r, "%s bench list", LOWKEY);
	n += names_under(r.out, "bench ", names + n, 32);
	assert_true(n >= 10);
	for (int i = 0; i < n; i++) {
		if (strcmp(names[i], "bench") == 0 ||
		    lkt_sh(&r, "%s %s --help", LOWKEY, names[i]) != 0 || !strstr(r.out, "--json"))
			continue; /* no JSON */
		if (!strstr(r.out, "-j, --json") && !strstr(r.out, "-j|--json"))
			fail_msg("lowkey %s --help offers --json without -j:\n%s", names[i], r.out);
		checked++;
	}
	assert_true(checked >= 8);
	lkt_sh(&r, "%s clock -j", LOWKEY);
	lkt_expect(&r, 0, "{");
	lkt_sh(&r, "%s stat -j -e task-clock -- true", LOWKEY);
	lkt_expect(&r, 0, "\"event\": \"task-clock\"");
	if (have_locks()) {
		lkt_sh(&r, "%s locks -j -- true", LOWKEY);
		lkt_expect(&r, 0, "\"processes\": [");
	}
}

/* Whether text has word as a word of its own: "(trace, convert, ...)". */
static bool names_word(const char *text, const char *word)
{
	size_t len = strlen(word);

	for (const char *at = strstr(text, word); at; at = strstr(at + 1, word))
		if (at > text && strchr(" (", at[-1]) && at[len] && strchr(",) ", at[len]))
			return true;
	return false;
}

/*
 * Every command whose help says it shows a status line takes -q, --quiet, and `lowkey help`'s
 * rules name it; at least trace, convert, report, snapshot and bench do (their status lines are
 * checked on a terminal in test_trace_progress and below).
 */
static void quiet_wherever_a_status_line(void **state)
{
	static char names[32][48], rules[1024];
	const char *at;
	int n, with_status = 0;

	(void)state;
	lkt_sh(&r, "%s help", LOWKEY);
	at = strstr(r.out, "--quiet hides it");
	assert_non_null(at);
	snprintf(rules, sizeof(rules), "%s", at);
	n = names_under(r.out, "", names, 32);
	assert_true(n >= 10);
	for (int i = 0; i < n; i++) {
		char quoted[64];

		if (lkt_sh(&r, "%s %s --help", LOWKEY, names[i]) != 0 ||
		    !strstr(r.out, "status line"))
			continue;
		with_status++;
		if (!strstr(r.out, "-q, --quiet") && !strstr(r.out, "[-q|--quiet]"))
			fail_msg(
				"lowkey %s --help speaks of a status line, without -q, --quiet:\n%s",
				names[i], r.out);
		snprintf(quoted, sizeof(quoted), "%.47s", names[i]);
		if (!names_word(rules, quoted))
			fail_msg(
				"lowkey help does not name %s among the commands with --quiet:\n%s",
				names[i], rules);
		/* accepted, not an unknown option: the usage error would say so */
		lkt_sh(&r, "%s %s --quiet --lowkey-no-such-option", LOWKEY, names[i]);
		assert_null(strstr(r.out, "unrecognized option '--quiet'"));
	}
	assert_true(with_status >= 5);
}

static void help_states_the_rules_once(void **state)
{
	(void)state;
	lkt_sh(&r, "%s help", LOWKEY);
	lkt_expect(&r, 0, "Event lists (-e");
	assert_non_null(strstr(r.out, "Exit status:"));
	assert_non_null(strstr(r.out, "128+N"));
	assert_non_null(strstr(r.out, "-j is --json"));
}

/* A short `lowkey bench probe`: a few seconds, a row every few hundred ms. */
#define SHORT_PROBE "bench probe --runs 1 --seconds 0.02 --burst 1000 --no-lttng"

/* SHORT_PROBE's output, text or JSON: run once, for every test that reads it. */
static const struct lkt_run *short_probe(bool json)
{
	static struct lkt_run runs[2];
	static bool done[2];

	if (!done[json]) {
		lkt_sh(&runs[json], "%s " SHORT_PROBE "%s", LOWKEY, json ? " --json" : "");
		done[json] = true;
	}
	return &runs[json];
}
#define STATUS_LINE "\r\033[Klowkey bench probe: "
#define FIRST_ROW "empty loop (baseline)"
#define LAST_ROW "memory per recording thread"

struct pty_run {
	char out[1 << 16];
	size_t len;
	int status;
	/* the read() each was first seen in: the order of events, not their timing */
	int status_line, first_row, status_after_first_row, last_row;
};

static int seen_at(const struct pty_run *p, size_t from, const char *what)
{
	const char *at = strstr(p->out + from, what);

	return at ? (int)(at - p->out) : -1;
}

/* Run lowkey with args on a pseudo-terminal (stdout and stderr), reading as it writes. */
static void run_on_pty(struct pty_run *p, char *const argv[])
{
	int master, reads = 0;
	pid_t pid;

	memset(p, 0, sizeof(*p));
	p->status_line = p->first_row = p->status_after_first_row = p->last_row = -1;
	pid = forkpty(&master, NULL, NULL, NULL);
	assert_true(pid >= 0);
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	for (;;) {
		ssize_t n = read(master, p->out + p->len, sizeof(p->out) - 1 - p->len);
		int first;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* EIO: the child closed the terminal */
		p->len += (size_t)n;
		p->out[p->len] = '\0';
		reads++;
		if (p->status_line < 0 && seen_at(p, 0, STATUS_LINE) >= 0)
			p->status_line = reads;
		first = seen_at(p, 0, FIRST_ROW);
		if (p->first_row < 0 && first >= 0)
			p->first_row = reads;
		if (first >= 0 && p->status_after_first_row < 0 &&
		    seen_at(p, (size_t)first, STATUS_LINE) >= 0)
			p->status_after_first_row = reads;
		if (p->last_row < 0 && seen_at(p, 0, LAST_ROW) >= 0)
			p->last_row = reads;
	}
	close(master);
	assert_int_equal(waitpid(pid, &p->status, 0), pid);
}

static void bench_progress_on_a_terminal_only(void **state)
{
	static struct pty_run p;

	(void)state;
	run_on_pty(&p, (char *[]){ LOWKEY, "bench", "probe", "--only", "cost", "--runs", "1",
				   "--burst", "1000", "--no-lttng", NULL });
	assert_true(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
	if (p.status_line < 0 || p.first_row < 0 || p.last_row < 0)
		fail_msg("no status line, first row or last row in:\n%s", p.out);
	/* The status line comes first: not silent until the first row. */
	assert_true(p.status_line <= p.first_row);
	assert_true(seen_at(&p, 0, STATUS_LINE) < seen_at(&p, 0, FIRST_ROW));
	/* The first row came out while the bench still worked: the status line was drawn again
	 * after it, and the last row came in a later read. */
	assert_true(p.status_after_first_row >= p.first_row);
	assert_true(p.first_row < p.last_row);
	/* Erased before each row: no row shares a line with a status. */
	assert_null(strstr(p.out, "(0 s)" FIRST_ROW));

	/* --quiet: rows only */
	run_on_pty(&p, (char *[]){ LOWKEY, "bench", "probe", "--quiet", "--only", "cost", "--runs",
				   "1", "--burst", "1000", "--no-lttng", NULL });
	assert_true(p.last_row > 0);
	assert_null(strstr(p.out, "\033[K"));

	/* a pipe: rows only, on stdout and stderr alike */
	lkt_expect(short_probe(false), 0, LAST_ROW);
	assert_null(strstr(short_probe(false)->out, "\033[K"));
	assert_null(strchr(short_probe(false)->out, '\r'));
}

/* The row named `name` ends with how many of its searches ended by a loss, out of how many. */
static void expect_loss_count(const char *out, const char *name)
{
	const char *row = strstr(out, name);
	const char *end = row ? strchr(row, '\n') : NULL;
	const char *tag = row ? strstr(row, "; loss ") : NULL;
	int lost = -1, searches = -1;

	if (!tag || !end || tag > end)
		fail_msg("no '; loss N/M' in the row '%s' of:\n%s", name, out);
	assert_int_equal(sscanf(tag, "; loss %d/%d)", &lost, &searches), 2);
	assert_true(searches > 0);
	assert_true(lost >= 0 && lost <= searches);
}

/*
 * A sustained rate is where a search stopped: at a trial that lost events (the consumer fell
 * behind) or at one whose producers could not keep the rate (short of CPU). Each row says how
 * many of its searches lost events, in the text and in the JSON.
 */
static void bench_probe_says_what_ended_its_searches(void **state)
{
	const struct lkt_run *text = short_probe(false), *json = short_probe(true);

	(void)state;
	lkt_expect(text, 0, LAST_ROW);
	expect_loss_count(text->out, "1 producer thread");
	expect_loss_count(text->out, "2 producer threads, together");
	expect_loss_count(text->out, "1 thread, ring fixed at 2 MiB");

	lkt_expect(json, 0, "\"sustained_searches_ended_by_loss\"");
	lkt_expect(json, 0, "\"one_thread_fixed_buffer\"");
}

/* Member key of the JSON object named object in out: the text after its "key": . */
static const char *json_member(const char *out, const char *object, const char *key)
{
	char name[128];
	const char *at;

	snprintf(name, sizeof(name), "\"%s\": {", object);
	at = strstr(out, name);
	if (!at)
		fail_msg("no object \"%s\" in:\n%s", object, out);
	snprintf(name, sizeof(name), "\"%s\": ", key);
	at = strstr(at, name);
	if (!at)
		fail_msg("no \"%s\" in \"%s\" of:\n%s", key, object, out);
	return at + strlen(name);
}

/* A number member, finite; null as NAN. */
static double json_number(const char *out, const char *object, const char *key)
{
	const char *v = json_member(out, object, key);
	char *end;
	double d;

	if (strncmp(v, "null", 4) == 0)
		return NAN;
	d = strtod(v, &end);
	if (end == v || !isfinite(d))
		fail_msg("\"%s\" of \"%s\" is not a number", key, object);
	return d;
}

static void expect_null(const char *out, const char *object, const char *key)
{
	if (strncmp(json_member(out, object, key), "null", 4) != 0)
		fail_msg("\"%s\" of \"%s\" is not null in:\n%s", key, object, out);
}

/*
 * Beside the sustained rates: each consumer's CPU an event over a fixed-rate run, the limits the
 * lossless rate is quoted against (one thread unlimited, memcpy) and the ratios between them, in
 * text and JSON; LTTng-UST's figures null, with the reason, where it is skipped.
 */
static void bench_probe_quotes_its_limits(void **state)
{
	const struct lkt_run *text = short_probe(false), *json = short_probe(true);
	const char *out = json->out;
	double bytes, memcpy_bytes, record, unlimited, two_ns, dir_write;

	(void)state;
	lkt_expect(text, 0, "lowkey (the threads its trace starts)");
	lkt_expect(text, 0, "LTTng-UST (lttng-consumerd)");
	lkt_expect(text, 0, "1 thread, nothing limiting it");
	lkt_expect(text, 0, "writing a new file in ");
	lkt_expect(text, 0, "lowkey lossless 1 thread / writing a new file");
	lkt_expect(text, 0, "lowkey lossless 1 thread / 1 thread unlimited");
	lkt_expect(text, 0, "lowkey / LTTng-UST lossless, 1 thread");

	lkt_expect(json, 0, "\"sustained_ratios\"");
	/* lowkey's consumer spent CPU on the events it wrote */
	assert_true(json_number(out, "consumer_cpu", "events_per_s") > 0);
	assert_true(json_number(out, "consumer_cpu", "lowkey_ns_per_event") > 0);
	assert_true(json_number(out, "consumer_cpu", "lowkey_ns_per_event_min") <=
		    json_number(out, "consumer_cpu", "lowkey_ns_per_event_max"));
	assert_true(json_number(out, "consumer_cpu", "lowkey_events") > 0);
	expect_null(out, "consumer_cpu", "lowkey_missing");
	/* the limits agree with each other and with the enabled event's row */
	two_ns = json_number(out, "ns_per_event", "enabled_two_ints");
	unlimited = json_number(out, "sustained_limits", "unlimited_events_per_s");
	assert_true(fabs(unlimited * two_ns / 1e9 - 1) < 1e-3);
	memcpy_bytes = json_number(out, "sustained_limits", "memcpy_bytes_per_s");
	record = json_number(out, "sustained_limits", "record_bytes");
	assert_true(memcpy_bytes > 0 && record > 0);
	bytes = json_number(out, "sustained_limits", "memcpy_events_per_s") * record;
	assert_true(fabs(bytes / memcpy_bytes - 1) < 1e-3);
	/* the trace directory's write rate, in bytes and in events at the record size */
	dir_write = json_number(out, "sustained_limits", "dir_write_bytes_per_s");
	assert_true(dir_write > 0);
	bytes = json_number(out, "sustained_limits", "dir_write_events_per_s") * record;
	assert_true(fabs(bytes / dir_write - 1) < 1e-3);
	/* the ratios of the lossless rate, null where no rate was lossless (a starved consumer) */
	if (json_number(out, "sustained_events_per_s", "one_thread") > 0) {
		assert_true(json_number(out, "sustained_ratios", "lossless_over_unlimited") > 0);
		assert_true(json_number(out, "sustained_ratios", "lossless_over_memcpy") > 0);
		assert_true(json_number(out, "sustained_ratios", "lossless_over_dir_write") > 0);
	} else {
		expect_null(out, "sustained_ratios", "lossless_over_unlimited");
		expect_null(out, "sustained_ratios", "lossless_over_memcpy");
		expect_null(out, "sustained_ratios", "lossless_over_dir_write");
	}
	/* --no-lttng: no LTTng-UST figure, and why */
	expect_null(out, "sustained_events_per_s", "lttng_one_thread");
	expect_null(out, "sustained_events_per_s", "lttng_two_threads");
	expect_null(out, "sustained_searches_ended_by_loss", "lttng_one_thread");
	expect_null(out, "consumer_cpu", "lttng_ns_per_event");
	expect_null(out, "sustained_ratios", "lowkey_over_lttng_lossless_one_thread");
	expect_null(out, "sustained_ratios", "consumer_cpu_per_event_lowkey_over_lttng");
	assert_true(strncmp(json_member(out, "lttng_sustained", "missing"), "\"skipped", 8) == 0);
	assert_true(json_number(out, "lttng_sustained", "bytes_in_all") > 0);

	/* --only cost: the per-event rows, none of the sustained ones */
	lkt_sh(&r, "%s bench probe --only cost --runs 1 --burst 1000 --no-lttng -j", LOWKEY);
	lkt_expect(&r, 0, "\"enabled_with_cputime\"");
	assert_null(strstr(r.out, "\"sustained_events_per_s\""));
	assert_null(strstr(r.out, "\"consumer_cpu\""));
}

/*
 * bench branch prints each part as soon as it is measured: the loop rows come before the status
 * line of the next measurement, and each flip row before the status of the next flip. The order
 * of the bytes, not of the reads: it holds however the reads fell.
 */
static void bench_branch_streams_its_rows(void **state)
{
	static struct pty_run p;
	const char *order[] = {
		"empty loop",	       "\r\033[Klowkey bench branch: 1,000 distinct sites",
		"load + branch / key", "\r\033[Klowkey bench branch: flipping a key with 1 site",
		"\n1 site ",	       "\r\033[Klowkey bench branch: flipping a key with 10 sites",
		"\033[K10 sites ",     "static key off vs nop:"
	};
	int at = -1;

	(void)state;
	run_on_pty(&p, (char *[]){ LOWKEY, "bench", "branch", "--runs", "1", "--flips", "3",
				   "--processes", "0", NULL });
	assert_true(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		int next = seen_at(&p, at < 0 ? 0 : (size_t)at, order[i]);

		if (next < 0)
			fail_msg("'%s' is not after '%s' in:\n%s", order[i], i ? order[i - 1] : "",
				 p.out);
		at = next;
	}
}

/*
 * bench formats prints each recording's figures once it is done, before the status line of the
 * next one, and the table of medians (which needs every run) last. The order of the bytes.
 */
static void bench_formats_streams_its_rows(void **state)
{
	static struct pty_run p;
	/* each run records every format, the first turning from run to run, then converts */
	const char *order[] = { "trace formats: 6000 events a run, 2 runs",
				"\r\033[Klowkey bench formats: run 1 of 2: ctf",
				"\033[Krun 1   ctf ",
				"\r\033[Klowkey bench formats: run 1 of 2: json",
				"\033[Krun 1   json ",
				"\r\033[Klowkey bench formats: run 1 of 2: perfetto",
				"\033[Krun 1   perfetto ",
				"\r\033[Klowkey bench formats: run 1 of 2: lowkey convert",
				"\033[Krun 1   convert ",
				"\r\033[Klowkey bench formats: run 2 of 2: json",
				"\033[Krun 2   json ",
				"\nmedians of 2 runs: ",
				"\nperfetto " };
	int at = -1;

	(void)state;
	run_on_pty(&p, (char *[]){ LOWKEY, "bench", "formats", "--events", "6000", "--runs", "2",
				   NULL });
	assert_true(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		int next = seen_at(&p, at < 0 ? 0 : (size_t)at, order[i]);

		if (next < 0)
			fail_msg("'%s' is not after '%s' in:\n%s", order[i], i ? order[i - 1] : "",
				 p.out);
		at = next;
	}
	/* JSON: one document, no rows before it */
	lkt_sh(&r, "%s bench formats --events 6000 --runs 1 -j", LOWKEY);
	lkt_expect(&r, 0, NULL);
	assert_true(r.out[0] == '{');
	assert_null(strstr(r.out, "run 1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exit_status_as_a_shell),
		cmocka_unit_test(locks_tells_exit_from_kill),
		cmocka_unit_test(short_json_everywhere),
		cmocka_unit_test(help_states_the_rules_once),
		cmocka_unit_test(quiet_wherever_a_status_line),
		cmocka_unit_test(bench_progress_on_a_terminal_only),
		cmocka_unit_test(bench_probe_says_what_ended_its_searches),
		cmocka_unit_test(bench_probe_quotes_its_limits),
		cmocka_unit_test(bench_branch_streams_its_rows),
		cmocka_unit_test(bench_formats_streams_its_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
