// SPDX-License-Identifier: MIT
/*
 * The OTLP exporter against a real OpenTelemetry Collector (collector.h): what arrives is what
 * was sent (names, times, ids, attributes, resources from the OTEL_* variables), with gzip; and
 * with the collector stopped for 10 s and started again, every span sent is either in its output
 * or counted dropped, and the producer's otlp_export() calls all returned.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "collector.h"
#include "otlp_json.h"
#include "otlp.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE_NS 1700000000000000000ull

static char dir[] = "/tmp/lkt-otlp-XXXXXX";

static int setup(void **state)
{
	char why[512];

	(void)state;
	if (!lkt_collector_available(why, sizeof(why))) {
		fprintf(stderr, "skipped: %s\n", why);
		return -1;
	}
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return getenv("LKT_KEEP") || system(cmd) == 0 ? 0 : -1;
}

static void got_read(struct lkt_otlp_got *g, const char *path)
{
	char err[512];

	if (lkt_otlp_read(g, path, err, sizeof(err)))
		fail_msg("%s", err);
}

static const struct lk__jr_value *attr(const struct lk__jr_value *owner, const char *key)
{
	return lkt_otlp_attr(owner, key);
}

static const char *attr_string(const struct lk__jr_value *owner, const char *key)
{
	return lkt_otlp_attr_string(owner, key);
}

static uint64_t json_u64(const struct lk__jr_value *owner, const char *key)
{
	assert_non_null(lk__jr_string(owner, key));
	return lkt_otlp_u64(owner, key);
}

static int64_t attr_int(const struct lk__jr_value *owner, const char *key)
{
	assert_non_null(attr(owner, key));
	return lkt_otlp_attr_int(owner, key);
}

static struct otlp_exporter *exporter(const struct otlp_config *cfg)
{
	char err[256];
	struct otlp_exporter *e = otlp_exporter_new(cfg, err, sizeof(err));

	if (!e)
		fail_msg("%s", err);
	return e;
}

/* What test_content sent, to find in what arrived. */
struct content {
	uint8_t trace[16], root[8];
	unsigned int seen, events;
	pid_t pid;
};

static void check_span(const struct lk__jr_value *res, const struct lk__jr_value *span, void *arg)
{
	struct content *c = arg;
	const char *name = lk__jr_string(span, "name");
	char trace[33], root[17];

	lkt_otlp_hex(c->trace, 16, trace);
	lkt_otlp_hex(c->root, 8, root);
	c->seen++;
	assert_string_equal(attr_string(res, "service.name"), "lowkey-otlp-test");
	assert_string_equal(attr_string(res, "deployment.environment"), "ci");
	assert_string_equal(attr_string(res, "team"), "perf lab");
	assert_string_equal(attr_string(res, "process.executable.name"), "test_otlp_collector");
	assert_int_equal(attr_int(res, "process.pid"), c->pid);
	assert_non_null(attr_string(res, "host.name"));
	assert_string_equal(lk__jr_string(span, "traceId"), trace);
	assert_int_equal(attr_int(span, "thread.id"), 77);
	if (!strcmp(name, "request")) {
		assert_string_equal(lk__jr_string(span, "spanId"), root);
		assert_int_equal(json_u64(span, "startTimeUnixNano"), BASE_NS);
		assert_int_equal(json_u64(span, "endTimeUnixNano"), BASE_NS + 5000000);
		assert_string_equal(attr_string(span, "thread.name"), "worker-1");
		assert_int_equal(attr_int(span, "lowkey.thread.cpu_time_ns"), 4200000);
	} else if (!strcmp(name, "parse")) {
		const struct lk__jr_value *ratio = attr(span, "ratio"), *hit = attr(span, "hit");

		assert_string_equal(lk__jr_string(span, "parentSpanId"), root);
		assert_int_equal(json_u64(span, "endTimeUnixNano") -
					 json_u64(span, "startTimeUnixNano"),
				 1234567);
		assert_int_equal(attr_int(span, "bytes"), -40000000000ll);
		assert_true(lk__jr_number(ratio, "doubleValue") == 0.5);
		assert_string_equal(attr_string(span, "path"), "/srv/ü");
		assert_true(lk__jr_get(hit, "boolValue")->boolean);
	} else if (!strcmp(name, "cache_miss")) {
		c->events++;
		assert_string_equal(lk__jr_string(span, "parentSpanId"), root);
		assert_int_equal(json_u64(span, "startTimeUnixNano"), BASE_NS + 100);
		assert_int_equal(json_u64(span, "endTimeUnixNano"), BASE_NS + 100);
		assert_true(lk__jr_get(attr(span, "lowkey.event"), "boolValue")->boolean);
	} else {
		fail_msg("unexpected span '%s'", name);
	}
}

/* Known spans, through the environment's configuration, gzip-compressed. */
static void test_content(void **state)
{
	struct lkt_collector c = { 0 };
	struct otlp_attr args[] = {
		{ "bytes", OTLP_INT, .v.i = -40000000000ll },
		{ "ratio", OTLP_DOUBLE, .v.d = 0.5 },
		{ "path", OTLP_STRING, .v.s = "/srv/ü" },
		{ "hit", OTLP_BOOL, .v.b = true },
	};
	struct otlp_span root = { .name = "request",
				  .start_unix_ns = BASE_NS,
				  .end_unix_ns = BASE_NS + 5000000,
				  .tid = 77,
				  .thread_name = "worker-1",
				  .thread_cpu_ns = 4200000 };
	struct otlp_span child = { .name = "parse",
				   .start_unix_ns = BASE_NS + 10,
				   .end_unix_ns = BASE_NS + 10 + 1234567,
				   .tid = 77,
				   .nargs = 4,
				   .args = args };
	struct otlp_span event = {
		.name = "cache_miss", .start_unix_ns = BASE_NS + 100, .tid = 77, .is_event = true
	};
	struct otlp_resource d = { .pid = (uint32_t)getpid(),
				   .executable_name = "test_otlp_collector" };
	struct content want = { .pid = getpid() };
	struct otlp_exporter *e;
	struct otlp_res *r;
	struct lkt_otlp_got g = { 0 };
	char endpoint[64], err[256];

	(void)state;
	assert_int_equal(lkt_collector_start(&c, dir, "content.json"), 0);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", c.port);
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint, 1);
	setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", 1);
	setenv("OTEL_SERVICE_NAME", "lowkey-otlp-test", 1);
	setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,team=perf%20lab", 1);
	e = exporter(NULL);
	unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
	unsetenv("OTEL_EXPORTER_OTLP_COMPRESSION");
	r = otlp_resource_new(e, &d, err, sizeof(err));
	unsetenv("OTEL_SERVICE_NAME");
	unsetenv("OTEL_RESOURCE_ATTRIBUTES");
	assert_non_null(r);

	otlp_new_trace_id(want.trace);
	otlp_new_span_id(want.root);
	memcpy(root.trace_id, want.trace, 16);
	memcpy(root.span_id, want.root, 8);
	memcpy(child.trace_id, want.trace, 16);
	memcpy(child.parent_span_id, want.root, 8);
	memcpy(event.trace_id, want.trace, 16);
	memcpy(event.parent_span_id, want.root, 8);
	/* Children end first: they are sent first. */
	for (int i = 0; i < 10; i++)
		assert_true(otlp_export(e, r, &child));
	assert_true(otlp_export(e, r, &event));
	assert_true(otlp_export(e, r, &root));
	otlp_resource_put(r);
	otlp_exporter_free(e);	/* sends what is queued */
	lkt_collector_stop(&c); /* writes what it received */

	got_read(&g, c.out);
	lkt_otlp_each_span(&g, check_span, &want);
	assert_int_equal(want.seen, 12);
	assert_int_equal(want.events, 1);
	lkt_otlp_free(&g);
}

/* test_outage's phases: up, down for 10 s, up again. */
#define PHASE_UP 3000
#define PHASE_DOWN 10000
#define QUEUE 2000
#define BATCH 256

struct producer {
	struct otlp_exporter *e;
	struct otlp_res *r;
	unsigned int from, count, pace_us, returned;
	uint64_t refused;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	char name[32];

	for (unsigned int i = p->from; i < p->from + p->count; i++) {
		struct otlp_span s = { .name = name,
				       .start_unix_ns = BASE_NS + i * 1000ull,
				       .end_unix_ns = BASE_NS + i * 1000ull + 500,
				       .tid = 1 };

		snprintf(name, sizeof(name), "span-%u", i);
		p->refused += !otlp_export(p->e, p->r, &s);
		p->returned++;
		if (p->pace_us)
			usleep(p->pace_us);
	}
	return NULL;
}

static void run_producer(struct producer *p, unsigned int from, unsigned int count,
			 unsigned int pace_us)
{
	pthread_t t;

	p->from = from;
	p->count = count;
	p->pace_us = pace_us;
	p->returned = 0;
	assert_int_equal(pthread_create(&t, NULL, produce, p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(p->returned, count);
}

struct seen {
	unsigned char *mark; /* by span number */
	unsigned int distinct, total;
};

static void mark_span(const struct lk__jr_value *res, const struct lk__jr_value *span, void *arg)
{
	struct seen *s = arg;
	unsigned int i;

	(void)res;
	assert_int_equal(sscanf(lk__jr_string(span, "name"), "span-%u", &i), 1);
	assert_true(i < 2 * PHASE_UP + PHASE_DOWN);
	s->total++;
	s->distinct += !s->mark[i];
	s->mark[i] = 1;
}

static unsigned int missing(const struct seen *s, unsigned int from, unsigned int count)
{
	unsigned int n = 0;

	for (unsigned int i = from; i < from + count; i++)
		n += !s->mark[i];
	return n;
}

static void wait_drained(struct otlp_exporter *e)
{
	struct otlp_stats st;

	do {
		usleep(20000);
		otlp_exporter_stats(e, &st);
	} while (st.queued);
}

/*
 * Up: every span arrives. Down for 10 s: the queue fills and the rest are refused at once,
 * counted. Up again: the queued spans arrive, and then every new one. Sent == exported +
 * dropped, and what the collector wrote is exactly what was exported.
 */
static void test_outage(void **state)
{
	struct lkt_collector c = { 0 };
	struct otlp_config cfg = { .queue_spans = QUEUE,
				   .batch_spans = BATCH,
				   .batch_ms = 50,
				   .backoff_max_ms = 1000,
				   .retry_max_ms = 120000,
				   .compression = OTLP_COMPRESSION_NONE };
	struct otlp_resource d = { .service_name = "outage", .pid = (uint32_t)getpid() };
	struct producer p = { 0 };
	struct seen seen = { calloc(2 * PHASE_UP + PHASE_DOWN, 1) };
	struct otlp_stats st;
	struct lkt_otlp_got g = { 0 };
	char endpoint[64], err[256];

	(void)state;
	assert_int_equal(lkt_collector_start(&c, dir, "before.json"), 0);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", c.port);
	cfg.endpoint = endpoint;
	p.e = exporter(&cfg);
	p.r = otlp_resource_new(p.e, &d, err, sizeof(err));
	assert_non_null(p.r);

	/* Up: paced so that the queue never fills (half a span per ms, batches every 50 ms). */
	run_producer(&p, 0, PHASE_UP, 1000);
	wait_drained(p.e);
	otlp_exporter_stats(p.e, &st);
	assert_int_equal(st.exported, PHASE_UP);
	assert_int_equal(p.refused, 0);

	/* Down for 10 s, spans produced all along. */
	lkt_collector_stop(&c);
	run_producer(&p, PHASE_UP, PHASE_DOWN, 1000); /* 10,000 spans, 1 ms apart */
	otlp_exporter_stats(p.e, &st);
	assert_true(st.dropped_full > 0);
	assert_int_equal(st.dropped_full, p.refused);
	assert_true(st.queued <= QUEUE + BATCH); /* the queue, and the batch being retried */
	assert_true(st.failed_requests > 0);

	/* Up again: the queue drains into the new collector, then the last phase goes through,
	 * paced as the first. */
	assert_int_equal(lkt_collector_start(&c, dir, "after.json"), 0);
	wait_drained(p.e);
	run_producer(&p, PHASE_UP + PHASE_DOWN, PHASE_UP, 1000);
	wait_drained(p.e);
	otlp_exporter_stats(p.e, &st);
	otlp_resource_put(p.r);
	otlp_exporter_free(p.e);
	lkt_collector_stop(&c);

	got_read(&g, c.out);
	snprintf(c.out, sizeof(c.out), "%s/before.json", dir);
	got_read(&g, c.out);
	lkt_otlp_each_span(&g, mark_span, &seen);
	lkt_otlp_free(&g);
	/* The first and last phases' spans all arrived: the queue had room for them. */
	assert_int_equal(missing(&seen, 0, PHASE_UP), 0);
	assert_int_equal(missing(&seen, PHASE_UP + PHASE_DOWN, PHASE_UP), 0);

	/* Every span counted once: exported (and in the collector's output) or dropped. */
	assert_int_equal(p.refused, st.dropped_full);
	assert_int_equal(st.accepted + st.dropped_full, 2 * PHASE_UP + PHASE_DOWN);
	assert_int_equal(st.exported + st.dropped_full + st.dropped_failed,
			 2 * PHASE_UP + PHASE_DOWN);
	assert_int_equal(seen.distinct, st.exported);
	print_message("sent %u, arrived %u (%u with repeats), dropped %u\n",
		      2 * PHASE_UP + PHASE_DOWN, seen.distinct, seen.total,
		      2 * PHASE_UP + PHASE_DOWN - seen.distinct);
	free(seen.mark);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_content),
		cmocka_unit_test(test_outage),
	};
	char why[512];

	if (!lkt_collector_available(why, sizeof(why))) {
		printf("skipped: %s\n", why);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
