// SPDX-License-Identifier: MIT
/*
 * lowkey agent --otlp against a real OpenTelemetry Collector (tests/otlp/collector.h): a program
 * (agent_prog.c) started with LOWKEY_CONTROL=1, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
 * records nested spans and events with arguments; what the collector wrote is what it recorded:
 * names, counts, Unix times inside the program's own clock readings, a span around a sleep at
 * least that long, parents, attributes, thread and resource. Then the collector is stopped for
 * 10 s and started again: the agent's drop counts equal the spans missing at the collector, and
 * the program never waits. The agent killed mid-run leaves the program running as it was, and a
 * new one exports again; with --cputime, each span's thread CPU time lies within the program's
 * own readings of it. Sampling: --sample keeps exactly the spans its count says, and counts
 * the others; --slow exports exactly the spans within the windows of the slow ones, computed from
 * the times the program wrote down; bad values of either are refused.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent_child.h"
#include "collector.h"
#include "internal/control.h"
#include "otlp_json.h"

/*
 * The program's OTEL_SERVICE_NAME, which the agent follows: this run's own, so that no agent of
 * another build's tests running meanwhile takes this run's program, nor this agent theirs.
 */
static char service[64];
#define SERVICE service
#define PROG_NAME "lkt_otlp_prog"
#define NAP_MS 20
#define NAP_MS_TEXT "20"

static char scratch[] = "/tmp/lkt-agent-otlp-XXXXXX";
static char spool[] = "/dev/shm/lkt-agent-otlp-XXXXXX";
static struct child prog, agent;
static struct lkt_collector collector;
static unsigned int agent_port;

static int setup(void **state)
{
	(void)state;
	snprintf(service, sizeof(service), "agt-otlp-%d", (int)getpid());
	return mkdtemp(scratch) && mkdtemp(spool) ? 0 : -1;
}

/* After each test, passed or failed: no program, agent or collector of it is left to the next. */
static int stop_all(void **state)
{
	(void)state;
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGKILL);
	lkt_collector_stop(&collector);
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];

	stop_all(state);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", scratch, spool);
	return getenv("LKT_KEEP") || system(cmd) == 0 ? 0 : -1;
}

/* The program, with the OpenTelemetry variables the agent reads from its environment. */
static void start_program(void)
{
	char *argv[] = { AGENT_PROG, NULL };
	char line[64];

	/* Other tests' agents, of this build or another, follow lkt_agent_prog: not this one. */
	setenv("LKT_PROG_NAME", PROG_NAME, 1);
	setenv("OTEL_SERVICE_NAME", SERVICE, 1);
	setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,team=perf%20lab", 1);
	prog = spawn(argv, false, true);
	unsetenv("LKT_PROG_NAME");
	unsetenv("OTEL_SERVICE_NAME");
	unsetenv("OTEL_RESOURCE_ATTRIBUTES");
	assert_true(read_line(&prog, "ready", line, sizeof(line)));
}

/*
 * The agent, following the program only, sending to the collector; queue: its queue's bound;
 * extra: more options (NULL-terminated), or NULL.
 */
static void start_agent_with(const char *queue, char *const *extra)
{
	char url[64], line[512];
	char *argv[32] = { LOWKEY,
			   "agent",
			   "--listen",
			   "127.0.0.1:0",
			   "--process",
			   SERVICE, /* its OTEL_SERVICE_NAME: no other test's program */
			   "--scan-interval",
			   "0.2",
			   "--flush-ms",
			   "50",
			   "--spool",
			   spool,
			   "--otlp",
			   url,
			   NULL };
	size_t n = 0;
	const char *at;

	while (argv[n])
		n++;
	for (size_t i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", collector.port);
	if (queue)
		setenv("OTEL_BSP_MAX_QUEUE_SIZE", queue, 1);
	agent = spawn(argv, true, false);
	unsetenv("OTEL_BSP_MAX_QUEUE_SIZE");
	assert_true(read_line(&agent, "lowkey agent: serving", line, sizeof(line)));
	at = strstr(line, "port ");
	assert_non_null(at);
	agent_port = (unsigned int)atoi(at + 5);
}

static void start_agent(const char *queue)
{
	start_agent_with(queue, NULL);
}

static char *agent_metrics(void)
{
	return capture("curl -sf http://127.0.0.1:%u/metrics", agent_port);
}

/* The exporter's counts, as the agent's /metrics says them. */
struct counts {
	double exported, full, failed, queued, lost;
	double rate, tail; /* sampled out: the sites' sum, by reason */
};

/* The sites of the program's commands these tests give. */
static const char *const sites[] = { "otl:beat", "otl:seq", "otl:fast", "otl:mark", "otl:slow" };

/* What the agent sampled out of site for reason ("rate" or "tail"); 0 if it has no such series. */
static double sampled_out(const char *text, const char *site, const char *reason)
{
	char series[256];
	double v;

	snprintf(series, sizeof(series),
		 "lowkey_agent_otlp_spans_sampled_out_total{pid=\"%d\",process=\"%s\",site=\"%s\","
		 "reason=\"%s\"}",
		 (int)prog.pid, SERVICE, site, reason);
	v = sample(text, series);
	return isnan(v) ? 0 : v;
}

static struct counts agent_counts(void)
{
	char *text = agent_metrics(), lost[128];
	struct counts c = { NAN, NAN, NAN, NAN, NAN, 0, 0 };

	if (!text)
		return c;
	snprintf(lost, sizeof(lost), "lowkey_events_lost_total{pid=\"%d\",process=\"%s\"}",
		 (int)prog.pid, SERVICE);
	c.exported = sample(text, "lowkey_agent_otlp_spans_exported_total");
	c.full = sample(text, "lowkey_agent_otlp_spans_dropped_total{reason=\"queue_full\"}");
	c.failed = sample(text, "lowkey_agent_otlp_spans_dropped_total{reason=\"failed\"}");
	c.queued = sample(text, "lowkey_agent_otlp_spans_queued");
	c.lost = sample(text, lost);
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		c.rate += sampled_out(text, sites[i], "rate");
		c.tail += sampled_out(text, sites[i], "tail");
	}
	free(text);
	return c;
}

/*
 * The agent read total spans, each exported, dropped, queued or sampled out: none is held any
 * more for --slow; and if drained, none waits in the exporter's queue.
 */
static struct counts agent_read_all(double total, bool drained)
{
	double end = now_s() + WAIT_S;
	struct counts c;

	do {
		c = agent_counts();
		if (c.exported + c.full + c.failed + c.queued + c.rate + c.tail == total &&
		    (!drained || !c.queued))
			return c;
		sleep_ms(100);
	} while (now_s() < end);
	fail_msg("the agent decided %g spans (%g exported, %g + %g dropped, %g queued, %g + %g "
		 "sampled out), not %g%s",
		 c.exported + c.full + c.failed + c.queued + c.rate + c.tail, c.exported, c.full,
		 c.failed, c.queued, c.rate, c.tail, total, drained ? " all sent" : "");
	return c;
}

static struct counts agent_done(double total)
{
	return agent_read_all(total, true);
}

static void wait_attached(void)
{
	char want[128], *text = NULL;
	double end = now_s() + WAIT_S;

	snprintf(want, sizeof(want), "lowkey_process_attached{pid=\"%d\",process=\"%s\"}",
		 (int)prog.pid, SERVICE);
	while (now_s() < end) {
		free(text);
		text = agent_metrics();
		if (text && sample(text, want) == 1)
			break;
		sleep_ms(50);
	}
	assert_true(text && sample(text, want) == 1);
	free(text);
}

/* Tell the program cmd and wait for its "done"; its line beginning with prefix into answer. */
static void program_does(const char *cmd, const char *prefix, char *answer, size_t len)
{
	char line[256];

	tell(&prog, "%s\n", cmd);
	if (prefix)
		assert_true(read_line(&prog, prefix, answer, len));
	assert_true(read_line(&prog, "done", line, sizeof(line)));
}

/* The program quits by itself, with status 0: nothing held it up. */
static void program_quits(void)
{
	int status;

	tell(&prog, "quit\n");
	assert_true(ended(&prog, &status));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(prog.in);
	fclose(prog.out);
	prog.pid = 0;
}

static void got_read(struct lkt_otlp_got *g, const char *path)
{
	char err[512];

	if (lkt_otlp_read(g, path, err, sizeof(err)))
		fail_msg("%s", err);
}

/* One span as the collector wrote it. */
struct span {
	const char *name, *trace, *id, *parent;
	uint64_t start, end;
	const struct lk__jr_value *v;
};

struct spans {
	struct span *v;
	size_t n;
	pid_t pid, tid;
};

/* The resource of every span is the program's, its thread the one the program named. */
static void collect(const struct lk__jr_value *res, const struct lk__jr_value *s, void *arg)
{
	struct spans *all = arg;
	struct span *sp;

	assert_string_equal(lkt_otlp_attr_string(res, "service.name"), SERVICE);
	assert_string_equal(lkt_otlp_attr_string(res, "deployment.environment"), "ci");
	assert_string_equal(lkt_otlp_attr_string(res, "team"), "perf lab");
	assert_string_equal(lkt_otlp_attr_string(res, "process.executable.name"), PROG_NAME);
	assert_string_equal(lkt_otlp_attr_string(res, "telemetry.sdk.name"), "lowkey");
	assert_int_equal(lkt_otlp_attr_int(res, "process.pid"), all->pid);
	assert_non_null(lkt_otlp_attr_string(res, "host.name"));
	all->v = realloc(all->v, (all->n + 1) * sizeof(*all->v));
	assert_non_null(all->v);
	sp = &all->v[all->n++];
	*sp = (struct span){ lk__jr_string(s, "name"),
			     lk__jr_string(s, "traceId"),
			     lk__jr_string(s, "spanId"),
			     lk__jr_string(s, "parentSpanId"),
			     lkt_otlp_u64(s, "startTimeUnixNano"),
			     lkt_otlp_u64(s, "endTimeUnixNano"),
			     s };
	assert_non_null(sp->name);
	assert_non_null(sp->trace);
	assert_non_null(sp->id);
	if (all->tid) {
		assert_int_equal(lkt_otlp_attr_int(s, "thread.id"), all->tid);
		assert_string_equal(lkt_otlp_attr_string(s, "thread.name"), "agt-otlp");
	}
}

static bool is_root(const struct span *s)
{
	return !s->parent || !s->parent[0];
}

static const struct span *find(const struct spans *all, const char *id)
{
	for (size_t i = 0; i < all->n; i++)
		if (!strcmp(all->v[i].id, id))
			return &all->v[i];
	return NULL;
}

static unsigned int count(const struct spans *all, const char *name)
{
	unsigned int n = 0;

	for (size_t i = 0; i < all->n; i++)
		n += !strcmp(all->v[i].name, name);
	return n;
}

/* A request is a root; a parse and an item are its children, in its trace. */
static void check_nesting(const struct spans *all, const struct span *s, unsigned int *children)
{
	const struct span *parent;

	if (!strcmp(s->name, "otl:request") || !strcmp(s->name, "otl:nap")) {
		assert_true(is_root(s));
		return;
	}
	assert_false(is_root(s));
	parent = find(all, s->parent);
	assert_non_null(parent);
	assert_string_equal(parent->name, "otl:request");
	assert_string_equal(parent->trace, s->trace);
	assert_true(parent->start <= s->start && s->end <= parent->end);
	children[parent - all->v]++;
}

/* The item event's arguments: i, i / 4.0 and "item"; a zero-length span marked as an event. */
static void check_item(const struct span *s, unsigned char *seen, long n)
{
	const struct lk__jr_value *q = lkt_otlp_attr(s->v, "quarter"), *ev;
	int64_t i = lkt_otlp_attr_int(s->v, "i");

	assert_true(i >= 0 && i < n);
	assert_false(seen[i]);
	seen[i] = 1;
	assert_non_null(q);
	assert_true(lk__jr_number(q, "doubleValue") == (double)i / 4.0);
	assert_string_equal(lkt_otlp_attr_string(s->v, "label"), "item");
	ev = lkt_otlp_attr(s->v, "lowkey.event");
	assert_true(ev && lk__jr_get(ev, "boolValue") && lk__jr_get(ev, "boolValue")->boolean);
	assert_int_equal(s->start, s->end);
}

/* What the program recorded, in the collector's output. */
static void test_spans(void **state)
{
	const long n = 50;
	struct spans all = { 0 };
	struct lkt_otlp_got g = { 0 };
	unsigned char seen[50] = { 0 };
	unsigned int *children = calloc(3 * n + 1, sizeof(*children));
	char answer[256];
	unsigned long long before, after;
	int tid;

	(void)state;
	assert_int_equal(lkt_collector_start(&collector, scratch, "spans.json"), 0);
	start_program();
	start_agent(NULL);
	wait_attached();
	all.pid = prog.pid;
	program_does("otlp 50 " NAP_MS_TEXT, "otlp ", answer, sizeof(answer));
	assert_int_equal(sscanf(answer, "otlp %d %llu %llu", &tid, &before, &after), 3);
	all.tid = tid;
	agent_done(3 * (double)n + 1);
	program_quits();
	stop_child(&agent, SIGTERM);
	lkt_collector_stop(&collector); /* writes what it received */

	got_read(&g, collector.out);
	lkt_otlp_each_span(&g, collect, &all);
	assert_int_equal(all.n, 3 * n + 1);
	assert_int_equal(count(&all, "otl:request"), n);
	assert_int_equal(count(&all, "otl:parse"), n);
	assert_int_equal(count(&all, "otl:item"), n);
	assert_int_equal(count(&all, "otl:nap"), 1);
	for (size_t i = 0; i < all.n; i++) {
		const struct span *s = &all.v[i];

		/* recorded between the program's two readings of the clock */
		if (!(s->start >= before && s->end >= s->start && s->end <= after))
			fail_msg("%s: [%" PRIu64 ", %" PRIu64
				 "] not within [%llu, %llu]: start-before %lld after-end %lld",
				 s->name, s->start, s->end, before, after,
				 (long long)(s->start - before), (long long)(after - s->end));
		check_nesting(&all, s, children);
		if (!strcmp(s->name, "otl:item"))
			check_item(s, seen, n);
		if (!strcmp(s->name, "otl:nap"))
			assert_true(s->end - s->start >= NAP_MS * 1000000ull);
	}
	for (size_t i = 0; i < all.n; i++)
		if (!strcmp(all.v[i].name, "otl:request"))
			assert_int_equal(children[i], 2); /* its parse and its item */
	free(children);
	free(all.v);
	lkt_otlp_free(&g);
}

/* test_outage's phases: spans while the collector is up, while it is down, and up again. */
#define BEATS_UP 200
#define BEATS_DOWN 3000
#define QUEUE "1000"
#define OUTAGE_S 10

struct beats {
	unsigned char *seq; /* by otl:seq's i: arrived */
	unsigned int distinct;
	char **ids; /* the span ids arrived, each once */
	size_t nids;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void mark(const struct lk__jr_value *res, const struct lk__jr_value *s, void *arg)
{
	struct beats *b = arg;
	const char *name = lk__jr_string(s, "name");

	(void)res;
	b->ids = realloc(b->ids, (b->nids + 1) * sizeof(*b->ids));
	assert_non_null(b->ids);
	b->ids[b->nids++] = (char *)lk__jr_string(s, "spanId");
	if (!strcmp(name, "otl:seq")) {
		int64_t i = lkt_otlp_attr_int(s, "i");

		assert_true(i >= 0 && i < 2 * BEATS_UP + BEATS_DOWN);
		b->seq[i] = 1;
	} else {
		assert_string_equal(name, "otl:beat");
	}
}

/* Spans a request repeated (one the collector wrote, whose answer the agent never saw) count once. */
static unsigned int distinct(struct beats *b)
{
	unsigned int n = 0;

	qsort(b->ids, b->nids, sizeof(*b->ids), cmp_str);
	for (size_t i = 0; i < b->nids; i++)
		n += !i || strcmp(b->ids[i], b->ids[i - 1]) != 0;
	return n;
}

static unsigned int arrived(const struct beats *b, unsigned int from, unsigned int count)
{
	unsigned int n = 0;

	for (unsigned int i = from; i < from + count; i++)
		n += b->seq[i];
	return n;
}

/*
 * The collector stopped for 10 s while the program records, then started again on its port: the
 * spans of the first and last phases all arrive, those of the outage that did not fit in the
 * agent's queue are dropped and counted, and the counts match what the collector wrote.
 */
static void test_outage(void **state)
{
	const double total = 2.0 * (2 * BEATS_UP + BEATS_DOWN); /* a span and an event a beat */
	struct beats b = { calloc(2 * BEATS_UP + BEATS_DOWN, 1) };
	struct lkt_otlp_got g = { 0 };
	char cmd[64], path[600];
	struct counts c;
	double down_at;

	(void)state;
	assert_int_equal(lkt_collector_start(&collector, scratch, "before.json"), 0);
	start_program();
	start_agent(QUEUE);
	wait_attached();
	snprintf(cmd, sizeof(cmd), "beats 0 %d 0", BEATS_UP);
	program_does(cmd, NULL, NULL, 0);
	c = agent_done(2 * BEATS_UP);
	assert_true(c.exported == 2 * BEATS_UP);

	lkt_collector_stop(&collector);
	down_at = now_s();
	snprintf(cmd, sizeof(cmd), "beats %d %d 0", BEATS_UP, BEATS_DOWN);
	program_does(cmd, NULL, NULL, 0); /* it never waits for the collector */
	/* the agent read them all: what did not fit in its queue is dropped */
	c = agent_read_all(2 * (BEATS_UP + BEATS_DOWN), false);
	assert_true(c.full > 0);
	while (now_s() < down_at + OUTAGE_S)
		sleep_ms(100);
	assert_int_equal(lkt_collector_start(&collector, scratch, "after.json"), 0);
	/* what waited in the queue goes (at the exporter's next retry), then the last phase */
	agent_done(2 * (BEATS_UP + BEATS_DOWN));
	snprintf(cmd, sizeof(cmd), "beats %d %d 1000", BEATS_UP + BEATS_DOWN, BEATS_UP);
	program_does(cmd, NULL, NULL, 0);
	c = agent_done(total);
	program_quits();
	stop_child(&agent, SIGTERM);
	lkt_collector_stop(&collector);

	got_read(&g, collector.out);
	snprintf(path, sizeof(path), "%s/before.json", scratch);
	got_read(&g, path);
	lkt_otlp_each_span(&g, mark, &b);
	b.distinct = distinct(&b);
	print_message("%g spans, %u arrived, %g dropped (queue full), %g dropped (failed)\n", total,
		      b.distinct, c.full, c.failed);
	assert_true(c.lost == 0); /* every event recorded was read: only the exporter drops */
	assert_true(c.full > 0);
	assert_true(b.distinct == c.exported);
	assert_true(c.exported + c.full + c.failed == total);
	assert_int_equal(arrived(&b, 0, BEATS_UP), BEATS_UP);
	assert_int_equal(arrived(&b, BEATS_UP + BEATS_DOWN, BEATS_UP), BEATS_UP);
	free(b.ids);
	free(b.seq);
	lkt_otlp_free(&g);
}

static struct lk__ctl_status program_status(void)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	struct lk__ctl_client c;
	char err[256];

	if (lk__ctl_connect(&c, prog.pid, err, sizeof(err)))
		fail_msg("%s", err);
	if (lk__ctl_call(&c, &req, LK_CTL_STATUS_REPLY, &reply, 30000, err, sizeof(err)))
		fail_msg("%s", err);
	lk__ctl_disconnect(&c);
	return reply.status; /* numbers only: the strings went with the client */
}

/* As before any agent came: no trace running, no site on. */
static bool program_untouched(void)
{
	struct lk__ctl_status st = program_status();

	return !st.running && st.sites_enabled == 0;
}

/* The program's server ends the agent's session as it sees the connection close: soon after. */
static void wait_untouched(void)
{
	double end = now_s() + WAIT_S;

	while (now_s() < end && !program_untouched())
		sleep_ms(50);
	assert_true(program_untouched());
}

/* test_agent_killed's phases: the first agent's, killed mid-way; without one; the second's. */
#define BEATS_FIRST 2000
#define BEATS_FIRST_US "500"
#define BEATS_ALONE 500
#define BEATS_SECOND 300
_Static_assert(BEATS_FIRST + BEATS_ALONE + BEATS_SECOND <= 2 * BEATS_UP + BEATS_DOWN,
	       "mark() takes every beat");

/* Every span id once: what an agent saw acknowledged is never sent again. */
static void each_once(struct beats *b)
{
	assert_int_equal(distinct(b), b->nids);
}

/*
 * The agent killed (SIGKILL) while the program records and it exports: the program runs on, its
 * sites back off as before the agent came, without waiting for anything; a new agent follows it
 * afresh and exports again. The collector has spans of both agents' periods, each once, and at
 * least those the first agent counted exported before it was killed.
 */
static void test_agent_killed(void **state)
{
	struct beats b = { calloc(2 * BEATS_UP + BEATS_DOWN, 1) }; /* mark()'s bound, above all */
	struct lkt_otlp_got g = { 0 };
	char cmd[64], line[256];
	struct counts c, second;
	double end = now_s() + WAIT_S;

	(void)state;
	assert_int_equal(lkt_collector_start(&collector, scratch, "killed.json"), 0);
	start_program();
	assert_true(program_untouched());
	start_agent(NULL);
	wait_attached();
	assert_true(program_status().sites_enabled > 0);
	tell(&prog, "beats 0 %d " BEATS_FIRST_US "\n", BEATS_FIRST);
	do { /* the first agent exports while the program records */
		sleep_ms(20);
		c = agent_counts();
	} while (!(c.exported > 0) && now_s() < end);
	assert_true(c.exported > 0);
	stop_child(&agent, SIGKILL);
	assert_true(read_line(&prog, "done", line, sizeof(line)));
	wait_untouched();
	snprintf(cmd, sizeof(cmd), "beats %d %d 0", BEATS_FIRST, BEATS_ALONE);
	program_does(cmd, NULL, NULL, 0); /* it runs on, its sites off */

	start_agent(NULL);
	wait_attached();
	snprintf(cmd, sizeof(cmd), "beats %d %d 0", BEATS_FIRST + BEATS_ALONE, BEATS_SECOND);
	program_does(cmd, NULL, NULL, 0);
	second = agent_done(2 * BEATS_SECOND); /* the second agent's counts: its spans only */
	assert_true(second.exported == 2 * BEATS_SECOND);
	program_quits();
	stop_child(&agent, SIGTERM);
	lkt_collector_stop(&collector);

	got_read(&g, collector.out);
	lkt_otlp_each_span(&g, mark, &b);
	print_message("first agent: %g spans exported before its kill, %zu arrived\n", c.exported,
		      b.nids - 2 * BEATS_SECOND);
	each_once(&b);
	/* all the first agent saw acknowledged arrived: the rest is the second agent's */
	assert_true((double)(b.nids - 2 * BEATS_SECOND) >= c.exported);
	assert_true(arrived(&b, 0, BEATS_FIRST) > 0);
	assert_int_equal(arrived(&b, BEATS_FIRST, BEATS_ALONE), 0); /* no agent, no trace */
	assert_int_equal(arrived(&b, BEATS_FIRST + BEATS_ALONE, BEATS_SECOND), BEATS_SECOND);
	free(b.ids);
	free(b.seq);
	lkt_otlp_free(&g);
}

#define BURNS 8
#define BURN_US 2000

/* The program's own readings of a span otl:burn, and the collector's span. */
struct burn {
	unsigned long long inner, outer, wall;
	int64_t cpu;	    /* the span's lowkey.thread.cpu_time_ns */
	unsigned int turns; /* otl:turn events in it */
};

struct burns {
	struct burn v[BURNS];
	/* the collector's spans otl:burn (id, cpu) and events otl:turn (parent, i), as they come */
	const struct lk__jr_value *spans[BURNS], *turns[BURNS];
	unsigned int nspans, nturns;
};

static void gather_burns(const struct lk__jr_value *res, const struct lk__jr_value *s, void *arg)
{
	struct burns *b = arg;
	const char *name = lk__jr_string(s, "name");

	(void)res;
	if (!strcmp(name, "otl:burn")) {
		assert_true(b->nspans < BURNS);
		b->spans[b->nspans++] = s;
	} else {
		assert_string_equal(name, "otl:turn");
		assert_true(b->nturns < BURNS);
		b->turns[b->nturns++] = s;
	}
}

/* The span whose id is id, of those gathered. */
static const struct lk__jr_value *burn_span(const struct burns *b, const char *id)
{
	for (unsigned int i = 0; id && i < b->nspans; i++) {
		const char *span_id = lk__jr_string(b->spans[i], "spanId");

		assert_non_null(span_id);
		if (!strcmp(span_id, id))
			return b->spans[i];
	}
	return NULL;
}

/*
 * --cputime: each span carries its thread CPU time, and it lies between the program's own readings
 * of the thread's CPU time inside the span and around it. Exact, not a tolerance: the program
 * runs with LOWKEY_CLOCK=syscall, so each time lowkey records is a clock_gettime(
 * CLOCK_THREAD_CPUTIME_ID) of the thread, made after the program's reading before the span and
 * before its reading after it. Half the spans spin, so their CPU time is as close to their wall
 * time as the program measured it inside them; half sleep, and their CPU time is below the span's
 * wall time, which is at least the sleep.
 */
static void test_cputime(void **state)
{
	struct burns b = { 0 };
	struct lkt_otlp_got g = { 0 };
	char line[256];

	(void)state;
	assert_int_equal(lkt_collector_start(&collector, scratch, "cputime.json"), 0);
	setenv("LOWKEY_CLOCK", "syscall", 1);
	start_program();
	unsetenv("LOWKEY_CLOCK");
	start_agent_with(NULL, (char *[]){ "--cputime", NULL });
	wait_attached();
	tell(&prog, "cpu %d %d\n", BURNS, BURN_US);
	for (int i = 0; i < BURNS; i++) {
		struct burn *w = &b.v[i];
		int k;

		assert_true(read_line(&prog, "burn ", line, sizeof(line)));
		assert_int_equal(sscanf(line, "burn %d %llu %llu %llu", &k, &w->inner, &w->outer,
					&w->wall),
				 4);
		assert_int_equal(k, i);
	}
	assert_true(read_line(&prog, "done", line, sizeof(line)));
	agent_done(2 * BURNS);
	program_quits();
	stop_child(&agent, SIGTERM);
	lkt_collector_stop(&collector);

	got_read(&g, collector.out);
	lkt_otlp_each_span(&g, gather_burns, &b);
	assert_int_equal(b.nspans, BURNS);
	assert_int_equal(b.nturns, BURNS);
	for (unsigned int t = 0; t < b.nturns; t++) {
		int64_t i = lkt_otlp_attr_int(b.turns[t], "i");
		const struct lk__jr_value *s =
			burn_span(&b, lk__jr_string(b.turns[t], "parentSpanId"));
		struct burn *w;

		assert_true(i >= 0 && i < BURNS);
		assert_non_null(s);
		w = &b.v[i];
		w->turns++;
		w->cpu = lkt_otlp_attr_int(s, "lowkey.thread.cpu_time_ns");
		if (!(w->cpu > 0 && (unsigned long long)w->cpu >= w->inner &&
		      (unsigned long long)w->cpu <= w->outer))
			fail_msg("span %" PRId64 ": CPU time %" PRId64 " ns, the program read %llu "
				 "inside it, %llu around it (wall %llu)",
				 i, w->cpu, w->inner, w->outer, w->wall);
		if (i % 2) { /* it slept */
			uint64_t wall = lkt_otlp_u64(s, "endTimeUnixNano") -
					lkt_otlp_u64(s, "startTimeUnixNano");

			assert_true(wall >= BURN_US * 1000ull);
			assert_true((uint64_t)w->cpu < wall);
		}
	}
	for (int i = 0; i < BURNS; i++)
		assert_int_equal(b.v[i].turns, 1);
	lkt_otlp_free(&g);
}

/* The agent's summary line as it stops (SIGTERM), into line. */
static void agent_stops(char *line, size_t len)
{
	kill(agent.pid, SIGTERM);
	assert_true(read_line(&agent, "lowkey agent: OTLP:", line, len));
	stop_child(&agent, SIGTERM);
}

#define RATE_BEATS 1000

struct rated {
	unsigned char seq[RATE_BEATS];
	unsigned int beats, seqs;
};

static void mark_rated(const struct lk__jr_value *res, const struct lk__jr_value *s, void *arg)
{
	struct rated *r = arg;
	const char *name = lk__jr_string(s, "name");

	(void)res;
	if (!strcmp(name, "otl:beat")) {
		r->beats++;
	} else {
		int64_t i = lkt_otlp_attr_int(s, "i");

		assert_string_equal(name, "otl:seq");
		assert_true(i >= 0 && i < RATE_BEATS);
		assert_false(r->seq[i]);
		r->seq[i] = 1;
		r->seqs++;
	}
}

/*
 * --sample otl:seq=1/10: of the program's events otl:seq (i = 0, 1, ...), exactly those with i a
 * multiple of 10 arrive (a count per site, its first span included); every span otl:beat does.
 * The agent counts the others as sampled out, in /metrics and as it stops.
 */
static void test_sample_rate(void **state)
{
	char *extra[] = { "--sample", "otl:seq=1/10", "--sample", "otl:*=1", NULL };
	struct rated *r = calloc(1, sizeof(*r));
	struct lkt_otlp_got g = { 0 };
	char cmd[64], line[512], want[64];
	struct counts c;
	char *text;

	(void)state;
	assert_non_null(r);
	assert_int_equal(lkt_collector_start(&collector, scratch, "sampled.json"), 0);
	start_program();
	start_agent_with(NULL, extra);
	wait_attached();
	snprintf(cmd, sizeof(cmd), "beats 0 %d 0", RATE_BEATS);
	program_does(cmd, NULL, NULL, 0);
	c = agent_done(2 * RATE_BEATS);
	assert_int_equal((long)c.exported, RATE_BEATS + RATE_BEATS / 10);
	assert_int_equal((long)c.rate, RATE_BEATS - RATE_BEATS / 10);
	assert_true(c.tail == 0 && c.full == 0 && c.failed == 0);
	text = agent_metrics();
	assert_non_null(text);
	assert_int_equal((long)sampled_out(text, "otl:seq", "rate"), RATE_BEATS - RATE_BEATS / 10);
	assert_int_equal((long)sampled_out(text, "otl:beat", "rate"), 0);
	free(text);
	program_quits();
	agent_stops(line, sizeof(line));
	snprintf(want, sizeof(want), " %d sampled out (--sample)", RATE_BEATS - RATE_BEATS / 10);
	if (!strstr(line, want))
		fail_msg("the agent's summary '%s' does not say '%s'", line, want);
	lkt_collector_stop(&collector);

	got_read(&g, collector.out);
	lkt_otlp_each_span(&g, mark_rated, r);
	assert_int_equal(r->beats, RATE_BEATS);
	assert_int_equal(r->seqs, RATE_BEATS / 10);
	for (int i = 0; i < RATE_BEATS; i++)
		assert_int_equal(r->seq[i], i % 10 == 0);
	free(r);
	lkt_otlp_free(&g);
}

#define SLOW_MS 100
#define WINDOW_MS 300
#define EDGE_NS 2000000ull /* the program keeps 5 ms from the windows' edges: 2 is plenty */

/* What the program's tail command recorded (its file), and what arrived of it. */
struct tail_run {
	uint64_t fast[1024][2], slow[8][2]; /* T0, T1 */
	long nfast, nslow;
	unsigned char marks[1024];
	unsigned int fast_arrived, slow_arrived, marks_arrived;
};

static void read_tail(struct tail_run *t, const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long long t0, t1;
	char line[128];
	long i;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "fast %ld %llu %llu", &i, &t0, &t1) == 3) {
			assert_int_equal(i, t->nfast);
			assert_true(i < 1024);
			t->fast[i][0] = t0;
			t->fast[i][1] = t1;
			t->nfast++;
		} else if (sscanf(line, "slow %llu %llu", &t0, &t1) == 2) {
			assert_true(t->nslow < 8);
			t->slow[t->nslow][0] = t0;
			t->slow[t->nslow++][1] = t1;
		} else {
			fail_msg("%s: '%s'", path, line);
		}
	}
	fclose(f);
}

/*
 * 1: fast span i overlaps a slow span's window; 0: it does not; -1: it is too close to say. A
 * fast span the machine held up for longer than SLOW_MS (a busy machine's scheduler) is a slow
 * one too: the agent cannot tell, and should not.
 */
static int in_window(const struct tail_run *t, long i)
{
	uint64_t w = WINDOW_MS * 1000000ull, t0 = t->fast[i][0], t1 = t->fast[i][1];
	int in = 0;

	for (long k = 0; k < t->nslow + t->nfast; k++) {
		const uint64_t *x = k < t->nslow ? t->slow[k] : t->fast[k - t->nslow];
		uint64_t from = x[0] - w, to = x[1] + w;

		if (k >= t->nslow && x[1] - x[0] + EDGE_NS <= SLOW_MS * 1000000ull)
			continue; /* fast, as meant */

		if ((t1 + EDGE_NS > from && t1 < from + EDGE_NS) ||
		    (t0 + EDGE_NS > to && t0 < to + EDGE_NS))
			return -1;
		in |= t1 >= from && t0 <= to;
	}
	return in;
}

static void mark_tail(const struct lk__jr_value *res, const struct lk__jr_value *s, void *arg)
{
	struct tail_run *t = arg;
	const char *name = lk__jr_string(s, "name");

	(void)res;
	if (!strcmp(name, "otl:fast")) {
		t->fast_arrived++;
	} else if (!strcmp(name, "otl:slow")) {
		t->slow_arrived++;
	} else {
		int64_t i = lkt_otlp_attr_int(s, "i");

		assert_string_equal(name, "otl:mark");
		assert_true(i >= 0 && i < t->nfast);
		assert_false(t->marks[i]); /* never twice */
		t->marks[i] = 1;
		t->marks_arrived++;
	}
}

/*
 * --slow 0.1,0.3: the program records fast spans (an event in each) and three spans of 0.2 s,
 * the last two 0.15 s apart (their windows merge). Exactly the fast spans and events within
 * 0.3 s of a slow one arrive, each once, and the slow ones; the rest are counted sampled out.
 */
static void test_slow(void **state)
{
	char *extra[] = { "--slow", "0.1,0.3", NULL };
	struct tail_run *t = calloc(1, sizeof(*t));
	struct lkt_otlp_got g = { 0 };
	char cmd[700], path[600], line[512];
	unsigned int expected = 0, unsure = 0;
	struct counts c;

	(void)state;
	assert_non_null(t);
	assert_int_equal(lkt_collector_start(&collector, scratch, "slow.json"), 0);
	start_program();
	start_agent_with(NULL, extra);
	wait_attached();
	snprintf(path, sizeof(path), "%s/tail.txt", scratch);
	snprintf(cmd, sizeof(cmd), "tail %s %d %d", path, SLOW_MS, WINDOW_MS);
	program_does(cmd, NULL, NULL, 0);
	read_tail(t, path);
	assert_int_equal(t->nslow, 3);
	c = agent_done(2.0 * (double)t->nfast + (double)t->nslow);
	assert_true(c.rate == 0 && c.full == 0 && c.failed == 0);
	assert_int_equal((long)(c.exported + c.tail), 2 * t->nfast + t->nslow);
	program_quits();
	agent_stops(line, sizeof(line));
	lkt_collector_stop(&collector);

	got_read(&g, collector.out);
	lkt_otlp_each_span(&g, mark_tail, t);
	assert_int_equal(t->slow_arrived, t->nslow);
	for (long i = 0; i < t->nfast; i++) {
		int in = in_window(t, i);

		if (in < 0) {
			unsure++;
			continue;
		}
		expected += (unsigned int)in;
		if (t->marks[i] != in)
			fail_msg("fast span %ld [%" PRIu64 ", %" PRIu64 "] %s, but it %s", i,
				 t->fast[i][0], t->fast[i][1],
				 in ? "is within a slow span's window" : "is outside every window",
				 t->marks[i] ? "arrived" : "did not arrive");
	}
	print_message("%ld fast spans, %u within the windows, %u too near an edge to say, %u "
		      "arrived\n",
		      t->nfast, expected, unsure, t->marks_arrived);
	assert_true(expected > 0 && expected < (unsigned int)t->nfast);
	/* a fast span and its event arrive together */
	assert_int_equal(t->fast_arrived, t->marks_arrived);
	assert_int_equal((long)c.exported, 2 * (long)t->marks_arrived + t->nslow);
	free(t);
	lkt_otlp_free(&g);
}

/* Bad --sample and --slow values are refused with what was wrong and what is wanted. */
static void test_options(void **state)
{
	static const char *const bad[][2] = {
		{ "--sample otl:seq", "bad --sample 'otl:seq'" },
		{ "--sample '=0.5'", "bad --sample '=0.5'" },
		{ "--sample otl:seq=2", "bad --sample 'otl:seq=2'" },
		{ "--sample otl:seq=-0.1", "bad --sample" },
		{ "--sample otl:seq=1/0", "bad --sample 'otl:seq=1/0'" },
		{ "--sample otl:seq=1/x", "bad --sample" },
		{ "--slow 0", "bad --slow '0'" },
		{ "--slow x", "bad --slow 'x'" },
		{ "--slow 0.1,-1", "bad --slow '0.1,-1'" },
		{ "--slow 0.1,", "bad --slow" },
	};
	char *out;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		out = capture("%s agent --otlp http://127.0.0.1:1 --spool %s %s 2>&1; echo rc=$?",
			      LOWKEY, spool, bad[i][0]);
		assert_non_null(out);
		if (!strstr(out, bad[i][1]) || !strstr(out, "rc=2"))
			fail_msg("lowkey agent %s: '%s', not '%s' and status 2", bad[i][0], out,
				 bad[i][1]);
		free(out);
	}
	out = capture("%s agent --spool %s --sample 'otl:*=0.5' 2>&1; echo rc=$?", LOWKEY, spool);
	assert_non_null(out);
	if (!strstr(out, "--sample: no spans are sent without --otlp") || !strstr(out, "rc=2"))
		fail_msg("--sample without --otlp: '%s'", out);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_spans, stop_all),
		cmocka_unit_test_teardown(test_outage, stop_all),
		cmocka_unit_test_teardown(test_agent_killed, stop_all),
		cmocka_unit_test_teardown(test_cputime, stop_all),
		cmocka_unit_test_teardown(test_sample_rate, stop_all),
		cmocka_unit_test_teardown(test_slow, stop_all),
		cmocka_unit_test_teardown(test_options, stop_all),
	};
	char why[512];

	if (!lkt_collector_available(why, sizeof(why))) {
		printf("skipped: %s\n", why);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
