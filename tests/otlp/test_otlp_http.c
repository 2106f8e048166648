// SPDX-License-Identifier: MIT
/*
 * The exporter's HTTP side against a receiver that answers as told (fake_receiver.py): the
 * path, headers and gzip body a request carries, decoded again; Retry-After honoured; a 429
 * retried; a 400 given up at once; a partial success's rejected spans counted dropped.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "otlp_internal.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include <internal/json_read.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

struct receiver {
	pid_t pid;
	int port;
	char dir[64];
};

/* Start fake_receiver.py with answers (NULL-terminated); read the port it prints. */
static void receiver_start(struct receiver *r, const char *const *answers)
{
	const char *argv[16] = { "python3", FAKE_RECEIVER };
	int fd[2], n = 2;
	char line[32] = "";
	FILE *f;

	snprintf(r->dir, sizeof(r->dir), "/tmp/lkt-otlp-http-XXXXXX");
	assert_non_null(mkdtemp(r->dir));
	argv[n++] = r->dir;
	while (*answers && n < 15)
		argv[n++] = *answers++;
	assert_int_equal(pipe(fd), 0);
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (!r->pid) {
		/* Gone with the test, should an assertion end it before receiver_stop(). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(fd[1], 1);
		close(fd[0]);
		execvp("python3", (char **)argv);
		_exit(127);
	}
	close(fd[1]);
	f = fdopen(fd[0], "r");
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	r->port = atoi(line);
	assert_true(r->port > 0);
}

static void receiver_stop(struct receiver *r)
{
	char cmd[128];

	kill(r->pid, SIGTERM);
	waitpid(r->pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
	assert_int_equal(system(cmd), 0);
}

static void clear_env(void)
{
	unsetenv("OTEL_EXPORTER_OTLP_HEADERS");
	unsetenv("OTEL_EXPORTER_OTLP_COMPRESSION");
}

/* Export three spans to r, one request's worth, and wait until the exporter is done with them. */
static void send_three(struct receiver *r, struct otlp_stats *st)
{
	struct otlp_config cfg = {
		.backoff_min_ms = 10, .backoff_max_ms = 20, .batch_spans = 3, .batch_ms = 600000
	};
	struct otlp_resource d = { .service_name = "http-test", .pid = 5 };
	const char *names[] = { "one", "two", "three" };
	struct otlp_exporter *e;
	struct otlp_res *res;
	char url[64], err[256];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", r->port);
	cfg.endpoint = url;
	e = otlp_exporter_new(&cfg, err, sizeof(err));
	if (!e)
		fail_msg("%s", err);
	res = otlp_resource_new(e, &d, err, sizeof(err));
	assert_non_null(res);
	for (int i = 0; i < 3; i++) {
		struct otlp_span s = { .name = names[i],
				       .start_unix_ns = 100 + i,
				       .end_unix_ns = 200 + i };

		assert_true(otlp_export(e, res, &s));
	}
	otlp_resource_put(res);
	do {
		usleep(10000);
		otlp_exporter_stats(e, st);
	} while (st->queued);
	otlp_exporter_free(e);
}

/* The receiver's record of its requests: one JSON object a line. */
static struct lk__jr_value **read_requests(struct receiver *r, size_t *n)
{
	char path[128], *text, err[256];
	struct lk__jr_value **reqs = NULL;
	size_t len, pos = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/requests.jsonl", r->dir);
	f = fopen(path, "r");
	assert_non_null(f);
	text = malloc(1 << 20);
	len = fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	*n = 0;
	while (pos < len) {
		while (pos < len && text[pos] == '\n')
			pos++;
		if (pos == len)
			break;
		reqs = realloc(reqs, (*n + 1) * sizeof(*reqs));
		reqs[*n] = lk__jr_parse_next(text, len, &pos, err, sizeof(err));
		if (!reqs[*n])
			fail_msg("%s", err);
		(*n)++;
	}
	free(text);
	return reqs;
}

static void free_requests(struct lk__jr_value **reqs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		lk__jr_free(reqs[i]);
	free(reqs);
}

/* The n-th request's body, gunzipped, decoded. */
static Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *
decode_body(struct receiver *r, int n)
{
	static uint8_t gz[1 << 16], pb[1 << 18];
	char path[128];
	z_stream z = { 0 };
	size_t len;
	FILE *f;

	snprintf(path, sizeof(path), "%s/body-%d", r->dir, n);
	f = fopen(path, "rb");
	assert_non_null(f);
	len = fread(gz, 1, sizeof(gz), f);
	fclose(f);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = gz;
	z.avail_in = (uInt)len;
	z.next_out = pb;
	z.avail_out = sizeof(pb);
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	len = z.total_out;
	inflateEnd(&z);
	return opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
		NULL, len, pb);
}

/* 503 with Retry-After: 1, then 200: one retry, a second later, the same body. */
static void test_retry_after(void **state)
{
	static const char *const answers[] = { "503:1", "200", NULL };
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req;
	struct lk__jr_value **reqs;
	const struct lk__jr_value *h;
	struct receiver r;
	struct otlp_stats st;
	size_t n;

	(void)state;
	setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=secret%20key,x-tenant=a", 1);
	setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", 1);
	receiver_start(&r, answers);
	send_three(&r, &st);
	clear_env();
	assert_int_equal(st.exported, 3);
	assert_int_equal(st.requests, 2);
	assert_int_equal(st.retries, 1);
	assert_int_equal(st.failed_requests, 1);

	reqs = read_requests(&r, &n);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(lk__jr_string(reqs[i], "path"), "/v1/traces");
		h = lk__jr_get(reqs[i], "headers");
		assert_string_equal(lk__jr_string(h, "content-type"), "application/x-protobuf");
		assert_string_equal(lk__jr_string(h, "content-encoding"), "gzip");
		assert_string_equal(lk__jr_string(h, "x-api-key"), "secret key");
		assert_string_equal(lk__jr_string(h, "x-tenant"), "a");
	}
	/* The retry waited as long as the receiver asked: not the 10-20 ms backoff. */
	assert_true(lk__jr_number(reqs[1], "time") - lk__jr_number(reqs[0], "time") >= 1.0);
	free_requests(reqs, n);

	req = decode_body(&r, 1);
	assert_non_null(req);
	assert_int_equal(req->n_resource_spans, 1);
	assert_int_equal(req->resource_spans[0]->scope_spans[0]->n_spans, 3);
	assert_string_equal(req->resource_spans[0]->scope_spans[0]->spans[2]->name, "three");
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
		req, NULL);
	receiver_stop(&r);
}

/* 429 without Retry-After: retried after the backoff. */
static void test_too_many(void **state)
{
	static const char *const answers[] = { "429", "200", NULL };
	struct receiver r;
	struct otlp_stats st;

	(void)state;
	receiver_start(&r, answers);
	send_three(&r, &st);
	assert_int_equal(st.exported, 3);
	assert_int_equal(st.retries, 1);
	assert_int_equal(st.dropped_failed, 0);
	receiver_stop(&r);
}

/* 400: the receiver cannot read it; sending it again would not help. */
static void test_refused(void **state)
{
	static const char *const answers[] = { "400", NULL };
	struct receiver r;
	struct otlp_stats st;

	(void)state;
	receiver_start(&r, answers);
	send_three(&r, &st);
	assert_int_equal(st.exported, 0);
	assert_int_equal(st.dropped_failed, 3);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.retries, 0);
	receiver_stop(&r);
}

/* A partial success: the spans it rejected are dropped, the others exported. */
static void test_partial(void **state)
{
	static const char *const answers[] = { "200:partial2", NULL };
	struct receiver r;
	struct otlp_stats st;

	(void)state;
	receiver_start(&r, answers);
	send_three(&r, &st);
	assert_int_equal(st.exported, 1);
	assert_int_equal(st.dropped_failed, 2);
	receiver_stop(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_too_many),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_partial),
	};

	if (system("python3 -c pass >/dev/null 2>&1")) {
		printf("skipped: python3 is not installed (it runs the test's receiver)\n");
		return 77;
	}
	clear_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
