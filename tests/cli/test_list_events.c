// SPDX-License-Identifier: MIT
/*
 * `lowkey list` with no argument: the counter events, each tried here. Software events are listed
 * and countable; a hardware event this machine cannot count (cycles in a VM without a PMU) is
 * marked <not supported> with the library's reason; --json and -j give one valid document with
 * the same verdicts.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "run.h"

static struct lkt_run r;

/* Whether the kernel registered a CPU PMU (one taking PERF_TYPE_RAW, 4), as lowkey checks it. */
static bool have_cpu_pmu(void)
{
	static struct lkt_run probe;

	return lkt_sh(&probe, "grep -qx 4 /sys/bus/event_source/devices/*/type") == 0;
}

/* The line of r.out that starts with "  name" and a blank, or NULL. */
static const char *event_line(const char *name, char *line, size_t size)
{
	char want[128];
	const char *p;

	snprintf(want, sizeof(want), "\n  %s ", name);
	p = strstr(r.out, want);
	if (!p) {
		snprintf(want, sizeof(want), "\n  %s\n", name);
		p = strstr(r.out, want);
	}
	if (!p)
		return NULL;
	p++;
	snprintf(line, size, "%.*s", (int)strcspn(p, "\n"), p);
	return line;
}

static void software_events_countable(void **state)
{
	char line[512];

	(void)state;
	lkt_sh(&r, "%s list", LOWKEY);
	lkt_expect(&r, 0, "Software events:\n");
	assert_non_null(event_line("task-clock", line, sizeof(line)));
	assert_null(strstr(line, "not supported"));
	assert_non_null(event_line("page-faults", line, sizeof(line)));
	assert_null(strstr(line, "not supported"));
	assert_non_null(strstr(r.out, "Tracepoints"));
}

static void cycles_marked_with_reason(void **state)
{
	char line[512], note[64];
	const char *mark;

	(void)state;
	lkt_sh(&r, "%s list", LOWKEY);
	lkt_expect(&r, 0, "Hardware events:\n");
	if (!event_line("cycles", line, sizeof(line))) {
		print_error("no cycles line in:\n%s\n", r.out);
		fail();
	}
	if (have_cpu_pmu()) {
		print_message(
			"this machine has a CPU PMU: cycles is listed (%s), its verdict is the kernel's\n",
			line);
		return;
	}
	mark = strstr(line, "<not supported> [");
	if (!mark) {
		print_error("cycles not marked without a CPU PMU: '%s'\n", line);
		fail();
	}
	snprintf(note, sizeof(note), "\n%.*s ", (int)strcspn(mark + 16, " \n"), mark + 16);
	mark = strstr(r.out, note);
	assert_non_null(mark);
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(mark + 1, "\n"), mark + 1);
	if (!strstr(line, "no CPU PMU")) {
		print_error("the reason for cycles does not say there is no CPU PMU: '%s'\n", line);
		fail();
	}
}

static void json_valid_with_verdicts(void **state)
{
	static const char check[] =
		"import json, sys\n"
		"d = json.load(sys.stdin)\n"
		"ev = {e['name']: e for e in d['events']}\n"
		"assert ev['task-clock']['supported'] and ev['task-clock']['section'] == 'software', ev['task-clock']\n"
		"c = ev['cycles']\n"
		"assert c['section'] == 'hardware', c\n"
		"assert sys.argv[1] == 'pmu' or (not c['supported'] and 'no CPU PMU' in c['why']), c\n"
		"assert isinstance(d['tracepoints']['count'], int)\n"
		"assert d['tracepoints']['supported'] or d['tracepoints']['why']\n";
	const char *opts[] = { "--json", "-j" };
	char script[] = "/tmp/lowkey-list-check-XXXXXX";
	int fd;

	(void)state;
	if (lkt_sh(&r, "python3 -c 'import json'") != 0) {
		print_message("python3 not installed: the JSON is not checked\n");
		skip();
	}
	fd = mkstemp(script);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, check, sizeof(check) - 1), (ssize_t)sizeof(check) - 1);
	close(fd);
	for (size_t i = 0; i < 2; i++) {
		lkt_sh(&r, "%s list %s | python3 %s %s", LOWKEY, opts[i], script,
		       have_cpu_pmu() ? "pmu" : "none");
		lkt_expect(&r, 0, NULL);
	}
	unlink(script);
}

static void probe_listing_kept(void **state)
{
	(void)state;
	lkt_sh(&r, "%s list /nonexistent/program", LOWKEY);
	lkt_expect(&r, 1, "/nonexistent/program");
	lkt_sh(&r, "%s list --pid 0", LOWKEY);
	lkt_expect(&r, 2, "bad pid");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(software_events_countable),
		cmocka_unit_test(cycles_marked_with_reason),
		cmocka_unit_test(json_valid_with_verdicts),
		cmocka_unit_test(probe_listing_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
