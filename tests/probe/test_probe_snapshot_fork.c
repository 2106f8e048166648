// SPDX-License-Identifier: MIT
/*
 * A flight recorder's snapshots while another thread forks children that call exit(): every
 * snapshot whole. The JSON one is written through stdio as it is converted; a child forked then
 * has a copy of the stream's buffer, and its exit() flushes every stream -- with an ordinary
 * FILE, into the parent's file, in the middle of the parent's text. The snapshots are requested
 * (as a signal handler does) and taken by the trace's own thread, as fork() goes on. Each JSON
 * snapshot must parse (the CLI's JSON reader, RFC 8259) and hold every event; each CTF one must
 * read whole.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "internal/json_read.h"
#include "trace_check.h"

#define EVENTS 20000
#define SNAPSHOTS 8

static int forking;
static unsigned int forks;

static pid_t parent;

/*
 * LeakSanitizer asks this at exit: not in the children, where it cannot see the parent's other
 * threads and would report what they hold as leaked. (Not fflush(NULL) and _exit instead: a
 * stream locked by another thread at the fork would stay locked in the child; exit() flushes
 * without taking the locks.)
 */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return getpid() != parent;
}

static void child_exit(void)
{
	exit(0); /* flushes every stdio stream the child has */
}

/* Children that exit() at once, forked as fast as they go, until told to stop. */
static void *forker_main(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&forking, __ATOMIC_ACQUIRE)) {
		pid_t pid = fork();

		if (pid == 0)
			child_exit();
		if (pid > 0) {
			waitpid(pid, NULL, 0);
			__atomic_fetch_add(&forks, 1, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

static __attribute__((noinline)) void record(void)
{
	static const char *const words[] = { "alpha", "beta", "gamma", "delta" };

	for (uint64_t i = 0; i < EVENTS; i++)
		LK_PROBE(sf, tick, i, words[i % 4]);
}

/* The snapshot is JSON, and holds every event recorded (the ring is large enough for them all). */
static void check_json(const char *path)
{
	const struct lk__jr_value *events;
	struct lk__jr_value *doc;
	size_t len, ticks = 0;
	char err[256] = "", *text = lkt_slurp(path, &len);

	doc = lk__jr_parse(text, len, err, sizeof(err));
	if (!doc)
		fail_msg("%s is not JSON: %s", path, err);
	events = lk__jr_get(doc, "traceEvents");
	assert_non_null(events);
	for (size_t i = 0; i < events->n; i++) {
		const char *name = lk__jr_string(&events->items[i], "name");

		ticks += name && strcmp(name, "tick") == 0;
	}
	assert_int_equal(ticks, EVENTS);
	lk__jr_free(doc);
	free(text);
}

static void check_ctf(const char *path)
{
	struct lkt_trace t;

	if (lkt_read(&t, path) != 0)
		fail_msg("%s does not read: %s", path, t.err);
	assert_int_equal(lkt_count(&t, "sf:tick"), EVENTS);
	lkt_free(&t);
}

/*
 * A snapshot as a signal handler asks for one: taken by the trace's own thread, which holds no
 * lock fork() waits for (lk_trace_snapshot() holds the trace's). Its events are counted when it
 * is written.
 */
static void take_requested_snapshot(void)
{
	struct lk_trace_stats st;
	uint64_t before;

	assert_int_equal(lk_trace_stats(&st), 0);
	before = st.events;
	assert_int_equal(lk_trace_snapshot_request(), 0);
	for (int i = 0; i < 600000 && st.events < before + EVENTS && !st.error; i++) {
		usleep(100);
		assert_int_equal(lk_trace_stats(&st), 0);
	}
	assert_int_equal(st.events, before + EVENTS);
}

static void snapshots_while_children_exit(enum lk_trace_format format)
{
	struct lk_trace_config c = { .format = format,
				     .buffer_size = 16 << 20,
				     .flags = LK_TRACE_OVERWRITE };
	char base[256], path[300];
	pthread_t forker;

	lkt_path(base, sizeof(base), "snapshot-fork");
	c.path = base;
	assert_true(lk_probe_enable("sf") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	record();
	forks = 0;
	__atomic_store_n(&forking, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_create(&forker, NULL, forker_main, NULL), 0);
	/* on a loaded machine the forker may not have run yet: the snapshots start once it forks */
	while (__atomic_load_n(&forks, __ATOMIC_ACQUIRE) == 0)
		sched_yield();
	for (int i = 0; i < SNAPSHOTS; i++)
		take_requested_snapshot();
	__atomic_store_n(&forking, 0, __ATOMIC_RELEASE);
	pthread_join(forker, NULL);
	assert_int_equal(lk_trace_stop(), 0);
	for (int i = 0; i < SNAPSHOTS; i++) {
		if (i)
			snprintf(path, sizeof(path), "%s.%d", base, i);
		else
			snprintf(path, sizeof(path), "%s", base);
		if (format == LK_TRACE_JSON)
			check_json(path);
		else
			check_ctf(path);
		lkt_rmrf(path);
	}
	lk_probe_reset_rules();
}

static void json_snapshots_while_children_exit(void **state)
{
	(void)state;
	snapshots_while_children_exit(LK_TRACE_JSON);
}

static void ctf_snapshots_while_children_exit(void **state)
{
	(void)state;
	snapshots_while_children_exit(LK_TRACE_CTF);
}

int main(void)
{
	parent = getpid();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_snapshots_while_children_exit),
		cmocka_unit_test(ctf_snapshots_while_children_exit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
