// SPDX-License-Identifier: MIT
/*
 * The OTLP exporter without a collector: what it encodes, decoded again with protoc-c's code for
 * the same definitions; its gzip; the environment as the OpenTelemetry specification reads it;
 * Retry-After; the receiver's partial success; and the queue's accounting against an endpoint
 * where nothing listens.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "otlp_internal.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest pb_request;
typedef Opentelemetry__Proto__Trace__V1__Span pb_span;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;

static void clear_env(void)
{
	static const char *const vars[] = {
		"OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"OTEL_EXPORTER_OTLP_COMPRESSION",
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
		"OTEL_EXPORTER_OTLP_TIMEOUT",
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
		"OTEL_SERVICE_NAME",
		"OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_BSP_MAX_QUEUE_SIZE",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static int setup(void **state)
{
	(void)state;
	clear_env();
	return 0;
}

static struct otlp_res *res_new(const struct otlp_resource *desc, const char *env_attrs)
{
	struct otlp_res *r = calloc(1, sizeof(*r));
	struct otlp_kv *kv = NULL;
	size_t n = 0;
	char err[256];

	assert_non_null(r);
	atomic_init(&r->refs, 1);
	assert_int_equal(
		otlp_kv_parse(env_attrs, "OTEL_RESOURCE_ATTRIBUTES", &kv, &n, err, sizeof(err)), 0);
	assert_int_equal(otlp_res_build(r, desc, kv, n), 0);
	otlp_kv_free(kv, n);
	return r;
}

static const pb_kv *find_kv(pb_kv **kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kv[i]->key, key))
			return kv[i];
	return NULL;
}

static const char *kv_string(pb_kv **kv, size_t n, const char *key)
{
	const pb_kv *a = find_kv(kv, n, key);

	if (!a)
		return NULL;
	assert_int_equal(a->value->value_case,
			 OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
	return a->value->string_value;
}

static int64_t kv_int(pb_kv **kv, size_t n, const char *key)
{
	const pb_kv *a = find_kv(kv, n, key);

	assert_non_null(a);
	assert_int_equal(a->value->value_case,
			 OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE);
	return a->value->int_value;
}

static pb_request *encode_decode(struct otlp_item **items, size_t n)
{
	uint8_t *buf;
	size_t len;
	pb_request *req;

	assert_int_equal(otlp_encode(items, n, &buf, &len), 0);
	req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
		NULL, len, buf);
	free(buf);
	assert_non_null(req);
	return req;
}

static void free_request(pb_request *req)
{
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
		req, NULL);
}

/* Spans of two processes, nested, with every kind of argument and a probe event. */
static void test_encode(void **state)
{
	struct otlp_resource d1 = { .host_name = "h1", .pid = 41, .executable_name = "srv" };
	struct otlp_resource d2 = { .service_name = "other", .pid = 42 };
	struct otlp_res *r1 = res_new(&d1, "deployment.environment=test"), *r2 = res_new(&d2, "");
	struct otlp_attr args[] = {
		{ "bytes", OTLP_INT, .v.i = -5 },
		{ "ratio", OTLP_DOUBLE, .v.d = 0.25 },
		{ "path", OTLP_STRING, .v.s = "/tmp/x" },
		{ "hit", OTLP_BOOL, .v.b = true },
	};
	struct otlp_span root = { .name = "request",
				  .start_unix_ns = 1000,
				  .end_unix_ns = 5000,
				  .pid = 41,
				  .tid = 7,
				  .thread_name = "worker",
				  .thread_cpu_ns = 1234 };
	struct otlp_span child = { .name = "parse",
				   .start_unix_ns = 2000,
				   .end_unix_ns = 3000,
				   .pid = 41,
				   .tid = 7,
				   .nargs = 4,
				   .args = args };
	struct otlp_span event = { .name = "cache_miss",
				   .start_unix_ns = 2500,
				   .end_unix_ns = 9999,
				   .pid = 41,
				   .tid = 7,
				   .is_event = true };
	struct otlp_span lone = {
		.name = "tick", .start_unix_ns = 10, .end_unix_ns = 20, .pid = 42, .tid = 42
	};
	struct otlp_item *items[4];
	pb_request *req;
	pb_span **spans;

	(void)state;
	otlp_new_trace_id(root.trace_id);
	otlp_new_span_id(root.span_id);
	memcpy(child.trace_id, root.trace_id, 16);
	memcpy(child.parent_span_id, root.span_id, 8);
	memcpy(event.trace_id, root.trace_id, 16);
	items[0] = otlp_item_new(r1, &child);
	items[1] = otlp_item_new(r2, &lone);
	items[2] = otlp_item_new(r1, &root);
	items[3] = otlp_item_new(r1, &event);
	/* The event's parent is the child, whose id the copy made. */
	memcpy(items[3]->span.parent_span_id, items[0]->span.span_id, 8);
	req = encode_decode(items, 4);

	assert_int_equal(req->n_resource_spans, 2);
	assert_string_equal(kv_string(req->resource_spans[0]->resource->attributes,
				      req->resource_spans[0]->resource->n_attributes,
				      "service.name"),
			    "unknown_service:srv");
	assert_string_equal(kv_string(req->resource_spans[0]->resource->attributes,
				      req->resource_spans[0]->resource->n_attributes,
				      "deployment.environment"),
			    "test");
	assert_string_equal(kv_string(req->resource_spans[0]->resource->attributes,
				      req->resource_spans[0]->resource->n_attributes, "host.name"),
			    "h1");
	assert_int_equal(kv_int(req->resource_spans[0]->resource->attributes,
				req->resource_spans[0]->resource->n_attributes, "process.pid"),
			 41);
	assert_string_equal(kv_string(req->resource_spans[1]->resource->attributes,
				      req->resource_spans[1]->resource->n_attributes,
				      "service.name"),
			    "other");
	assert_int_equal(req->resource_spans[0]->n_scope_spans, 1);
	assert_string_equal(req->resource_spans[0]->scope_spans[0]->scope->name, "lowkey");
	assert_int_equal(req->resource_spans[0]->scope_spans[0]->n_spans, 3);
	assert_int_equal(req->resource_spans[1]->scope_spans[0]->n_spans, 1);
	spans = req->resource_spans[0]->scope_spans[0]->spans;

	/* In the order given, within their resource. */
	assert_string_equal(spans[0]->name, "parse");
	assert_string_equal(spans[1]->name, "request");
	assert_string_equal(spans[2]->name, "cache_miss");
	assert_int_equal(spans[1]->start_time_unix_nano, 1000);
	assert_int_equal(spans[1]->end_time_unix_nano, 5000);
	assert_int_equal(spans[1]->kind,
			 OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL);
	/* Ids: the root's as given, its child under it, in its trace. */
	assert_int_equal(spans[1]->trace_id.len, 16);
	assert_memory_equal(spans[1]->trace_id.data, root.trace_id, 16);
	assert_memory_equal(spans[1]->span_id.data, root.span_id, 8);
	assert_int_equal(spans[1]->parent_span_id.len, 0);
	assert_memory_equal(spans[0]->trace_id.data, root.trace_id, 16);
	assert_int_equal(spans[0]->parent_span_id.len, 8);
	assert_memory_equal(spans[0]->parent_span_id.data, root.span_id, 8);
	assert_int_equal(spans[0]->span_id.len, 8);
	assert_memory_not_equal(spans[0]->span_id.data, (uint8_t[8]){ 0 }, 8);
	/* The thread's attributes. */
	assert_int_equal(kv_int(spans[1]->attributes, spans[1]->n_attributes, "thread.id"), 7);
	assert_string_equal(kv_string(spans[1]->attributes, spans[1]->n_attributes, "thread.name"),
			    "worker");
	assert_int_equal(kv_int(spans[1]->attributes, spans[1]->n_attributes,
				"lowkey.thread.cpu_time_ns"),
			 1234);
	assert_null(find_kv(spans[0]->attributes, spans[0]->n_attributes, "thread.name"));
	assert_null(
		find_kv(spans[0]->attributes, spans[0]->n_attributes, "lowkey.thread.cpu_time_ns"));
	/* The arguments, each of its type. */
	assert_int_equal(kv_int(spans[0]->attributes, spans[0]->n_attributes, "bytes"), -5);
	assert_true(find_kv(spans[0]->attributes, spans[0]->n_attributes, "ratio")
			    ->value->double_value == 0.25);
	assert_string_equal(kv_string(spans[0]->attributes, spans[0]->n_attributes, "path"),
			    "/tmp/x");
	assert_true(
		find_kv(spans[0]->attributes, spans[0]->n_attributes, "hit")->value->bool_value);
	/* The event: zero-length, marked, under the span it happened in. */
	assert_int_equal(spans[2]->start_time_unix_nano, 2500);
	assert_int_equal(spans[2]->end_time_unix_nano, 2500);
	assert_true(find_kv(spans[2]->attributes, spans[2]->n_attributes, "lowkey.event")
			    ->value->bool_value);
	assert_memory_equal(spans[2]->parent_span_id.data, items[0]->span.span_id, 8);
	/* A span given no ids is the root of a trace of its own. */
	spans = req->resource_spans[1]->scope_spans[0]->spans;
	assert_int_equal(spans[0]->trace_id.len, 16);
	assert_memory_not_equal(spans[0]->trace_id.data, root.trace_id, 16);
	assert_int_equal(spans[0]->parent_span_id.len, 0);

	free_request(req);
	for (int i = 0; i < 4; i++) {
		otlp_resource_put(items[i]->res);
		free(items[i]);
	}
	otlp_resource_put(r1);
	otlp_resource_put(r2);
}

static void test_gzip(void **state)
{
	uint8_t in[4096], *gz, out[4096];
	size_t gz_len;
	z_stream z = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i % 61);
	assert_int_equal(otlp_gzip(in, sizeof(in), &gz, &gz_len), 0);
	assert_true(gz_len < sizeof(in));
	assert_int_equal(gz[0], 0x1f); /* a gzip member, not a zlib stream */
	assert_int_equal(gz[1], 0x8b);
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = gz;
	z.avail_in = (uInt)gz_len;
	z.next_out = out;
	z.avail_out = sizeof(out);
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	assert_int_equal(z.total_out, sizeof(in));
	assert_memory_equal(in, out, sizeof(in));
	inflateEnd(&z);
	free(gz);
}

static void test_kv(void **state)
{
	struct otlp_kv *kv;
	size_t n;
	char err[256];

	(void)state;
	assert_int_equal(
		otlp_kv_parse(" a=b , c = d%20e%2C ,,key.x=", "V", &kv, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(kv[0].key, "a");
	assert_string_equal(kv[0].value, "b");
	assert_string_equal(kv[1].key, "c");
	assert_string_equal(kv[1].value, "d e,");
	assert_string_equal(kv[2].key, "key.x");
	assert_string_equal(kv[2].value, "");
	otlp_kv_free(kv, n);
	assert_int_equal(otlp_kv_parse("a=b,novalue", "OTEL_X", &kv, &n, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "OTEL_X"));
	assert_non_null(strstr(err, "'novalue'"));
	assert_int_equal(otlp_kv_parse("=b", "V", &kv, &n, err, sizeof(err)), -EINVAL);
	assert_int_equal(otlp_kv_parse("a=%zz", "V", &kv, &n, err, sizeof(err)), -EINVAL);
	assert_int_equal(otlp_kv_parse("a=%2", "V", &kv, &n, err, sizeof(err)), -EINVAL);
}

static void expect_url_given(const char *endpoint, const char *traces, const char *want)
{
	char *url = NULL, err[256] = "";

	if (otlp_traces_url(endpoint, traces, &url, err, sizeof(err)))
		fail_msg("%s", err);
	assert_string_equal(url, want);
	free(url);
}

static void expect_url(const char *endpoint, const char *want)
{
	expect_url_given(endpoint, NULL, want);
}

static void expect_bad_url(const char *endpoint, const char *says)
{
	char *url = NULL, err[256] = "";

	assert_int_equal(otlp_traces_url(endpoint, NULL, &url, err, sizeof(err)), -EINVAL);
	assert_null(url);
	if (!strstr(err, says))
		fail_msg("'%s' does not say '%s'", err, says);
}

/* The specification's rules: the general variable gets /v1/traces, the traces one is as is. */
static void test_endpoint(void **state)
{
	(void)state;
	expect_url(NULL, "http://localhost:4318/v1/traces");
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", 1);
	expect_url(NULL, "http://collector:4318/v1/traces");
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/base/", 1);
	expect_url(NULL, "https://collector:4318/base/v1/traces");
	setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9999/custom", 1);
	expect_url(NULL, "http://traces:9999/custom");
	/* What the caller gives wins over the environment. */
	expect_url("http://given:1", "http://given:1/v1/traces");
	expect_url_given("http://given:1", "http://given:2/x", "http://given:2/x");
	expect_url_given(NULL, "http://given:2/x", "http://given:2/x");
	clear_env();

	expect_bad_url("collector:4318", "not an http:// or https:// URL");
	expect_bad_url("ftp://collector/x", "'ftp://collector/x'");
	expect_bad_url("http://", "OTLP endpoint 'http://'");
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://x:4317", 1);
	expect_bad_url(NULL, "OTEL_EXPORTER_OTLP_ENDPOINT");
	clear_env();
}

static void test_env_options(void **state)
{
	char err[256];
	struct otlp_kv *kv;
	size_t n;

	(void)state;
	assert_int_equal(otlp_env_gzip(err, sizeof(err)), 0);
	setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", 1);
	assert_int_equal(otlp_env_gzip(err, sizeof(err)), 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none", 1);
	assert_int_equal(otlp_env_gzip(err, sizeof(err)), 0);
	setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd", 1);
	assert_int_equal(otlp_env_gzip(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION='zstd'"));

	assert_int_equal(otlp_env_timeout_ms(err, sizeof(err)), 10000);
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500", 1);
	assert_int_equal(otlp_env_timeout_ms(err, sizeof(err)), 2500);
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon", 1);
	assert_int_equal(otlp_env_timeout_ms(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "OTEL_EXPORTER_OTLP_TIMEOUT"));

	setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=general", 1);
	assert_int_equal(otlp_env_headers(&kv, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(kv[0].value, "general");
	otlp_kv_free(kv, n);
	setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=traces%3D1,x-tenant=a", 1);
	assert_int_equal(otlp_env_headers(&kv, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(kv[0].value, "traces=1");
	otlp_kv_free(kv, n);
	clear_env();
}

/*
 * OTEL_BSP_MAX_QUEUE_SIZE bounds the queue where the caller gives no bound, and
 * OTEL_BSP_MAX_EXPORT_BATCH_SIZE a batch (never past the queue); a bad one is refused, named.
 */
static void test_env_queue(void **state)
{
	struct otlp_config cfg = { .traces_endpoint = "http://127.0.0.1:1/v1/traces",
				   .batch_ms = 60000,
				   .shutdown_ms = 1 };
	struct otlp_span s = { .name = "s", .start_unix_ns = 1, .end_unix_ns = 2 };
	struct otlp_resource d = { .pid = 1 };
	struct otlp_exporter *e;
	struct otlp_stats st;
	struct otlp_res *r;
	char err[256];
	unsigned int ok = 0;

	(void)state;
	assert_int_equal(otlp_env_spans("OTEL_BSP_MAX_QUEUE_SIZE", 65536, err, sizeof(err)), 65536);
	setenv("OTEL_BSP_MAX_QUEUE_SIZE", "0", 1);
	assert_int_equal(otlp_env_spans("OTEL_BSP_MAX_QUEUE_SIZE", 65536, err, sizeof(err)),
			 -EINVAL);
	assert_null(otlp_exporter_new(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "OTEL_BSP_MAX_QUEUE_SIZE='0'"));
	setenv("OTEL_BSP_MAX_QUEUE_SIZE", "3", 1);
	setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "lots", 1);
	assert_null(otlp_exporter_new(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE='lots'"));
	/*
	 * A batch of 512 would be more than the queue: a batch is 3. A full batch goes at once, and
	 * a sender then retries it against a closed port: the bound counts the spans in flight too,
	 * so 3 are taken, whenever a sender takes them.
	 */
	unsetenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE");
	e = otlp_exporter_new(&cfg, err, sizeof(err));
	assert_non_null(e);
	r = otlp_resource_new(e, &d, err, sizeof(err));
	assert_non_null(r);
	for (int i = 0; i < 10; i++)
		ok += otlp_export(e, r, &s);
	otlp_resource_put(r);
	otlp_exporter_stats(e, &st);
	assert_int_equal(ok, 3);
	assert_int_equal(st.dropped_full, 10 - ok);
	otlp_exporter_free(e);
	/* the caller's bound wins */
	cfg.queue_spans = 4;
	e = otlp_exporter_new(&cfg, err, sizeof(err));
	assert_non_null(e);
	r = otlp_resource_new(e, &d, err, sizeof(err));
	ok = 0;
	for (int i = 0; i < 10; i++)
		ok += otlp_export(e, r, &s);
	otlp_resource_put(r);
	assert_int_equal(ok, 4);
	otlp_exporter_free(e);
	clear_env();
}

/* A bad variable is the exporter's error, named. */
static void test_exporter_refuses(void **state)
{
	char err[256] = "";

	(void)state;
	setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name", 1);
	assert_null(otlp_exporter_new(NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "OTEL_RESOURCE_ATTRIBUTES"));
	clear_env();
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost", 1);
	assert_null(otlp_exporter_new(NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "'localhost' (OTEL_EXPORTER_OTLP_ENDPOINT)"));
	clear_env();
}

static const char *res_attr(struct otlp_res *r, const char *key)
{
	for (size_t i = 0; i < r->nattrs; i++)
		if (!strcmp(r->attrs[i].key, key))
			return r->attrs[i].type == OTLP_STRING ? r->attrs[i].v.s : "(not a string)";
	return NULL;
}

/* service.name: the caller's, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES', unknown_service. */
static void test_resource(void **state)
{
	struct otlp_attr mine = { "host.name", OTLP_STRING, .v.s = "given" };
	struct otlp_resource d = {
		.executable_name = "prog", .pid = 9, .nattrs = 1, .attrs = &mine
	};
	struct otlp_res *r;

	(void)state;
	r = res_new(&d, "service.name=from-attrs,host.name=env-host,team=a%20b");
	assert_string_equal(res_attr(r, "service.name"), "from-attrs");
	assert_string_equal(r->attrs[0].key, "service.name");
	assert_string_equal(res_attr(r, "team"), "a b");
	assert_string_equal(res_attr(r, "host.name"), "given"); /* desc's attrs come last */
	assert_string_equal(res_attr(r, "process.executable.name"), "prog");
	otlp_resource_put(r);

	setenv("OTEL_SERVICE_NAME", "from-env", 1);
	d.nattrs = 0;
	r = res_new(&d, "service.name=from-attrs,host.name=env-host");
	assert_string_equal(res_attr(r, "service.name"), "from-env");
	assert_string_equal(res_attr(r, "host.name"), "env-host");
	otlp_resource_put(r);

	d.service_name = "from-caller";
	r = res_new(&d, "");
	assert_string_equal(res_attr(r, "service.name"), "from-caller");
	otlp_resource_put(r);
	clear_env();

	d.service_name = NULL;
	d.executable_name = NULL;
	r = res_new(&d, "");
	assert_string_equal(res_attr(r, "service.name"), "unknown_service");
	assert_non_null(res_attr(r, "host.name")); /* this machine's */
	otlp_resource_put(r);
}

static void test_retry_after(void **state)
{
	(void)state;
	assert_int_equal(otlp_retry_after_ms("5", 0), 5000);
	assert_int_equal(otlp_retry_after_ms(" 0 ", 0), 0);
	/* 1994-11-06 08:49:37 UTC is 784111777, RFC 9110's example. */
	assert_int_equal(otlp_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 - 12),
			 12000);
	assert_int_equal(otlp_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 + 60), 0);
	assert_int_equal(otlp_retry_after_ms("soon", 0), -1);
	assert_int_equal(otlp_retry_after_ms("-3", 0), -1);
	assert_true(otlp_http_retryable(0));
	assert_true(otlp_http_retryable(429));
	assert_true(otlp_http_retryable(503));
	assert_false(otlp_http_retryable(400));
	assert_false(otlp_http_retryable(500));
}

static void test_partial_success(void **state)
{
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse r =
		OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
	Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess p =
		OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
	uint8_t buf[64];
	size_t len;

	(void)state;
	p.rejected_spans = 3;
	p.error_message = "too old";
	r.partial_success = &p;
	len = opentelemetry__proto__collector__trace__v1__export_trace_service_response__pack(&r,
											      buf);
	assert_int_equal(otlp_response_rejected(buf, len), 3);
	assert_int_equal(otlp_response_rejected(buf, 0), 0);
	assert_int_equal(otlp_response_rejected((const uint8_t *)"\xff\xff", 2), 0);
}

/* A loopback port where nothing listens (bound, never listened on: connections are refused). */
static int closed_port(int *fd)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);

	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(*fd >= 0);
	assert_int_equal(bind(*fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(*fd, (struct sockaddr *)&a, &alen), 0);
	return ntohs(a.sin_port);
}

/*
 * Nobody listening: a full queue drops at once and says so, and what was queued is retried until
 * its time runs out, then dropped. Every span is counted once.
 */
static void test_unreachable(void **state)
{
	char url[64], err[256];
	int fd, port = closed_port(&fd);
	struct otlp_config cfg = { .traces_endpoint = url,
				   .queue_spans = 4,
				   .batch_spans = 1000,
				   .batch_ms = 60000,
				   .retry_max_ms = 300,
				   .backoff_min_ms = 10,
				   .backoff_max_ms = 20,
				   .shutdown_ms = 10000 };
	struct otlp_span s = { .name = "s", .start_unix_ns = 1, .end_unix_ns = 2 };
	struct otlp_resource d = { .pid = 1 };
	struct otlp_exporter *e;
	struct otlp_stats st;
	struct otlp_res *r;
	unsigned int ok = 0;

	(void)state;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", port);
	e = otlp_exporter_new(&cfg, err, sizeof(err));
	assert_non_null(e);
	assert_string_equal(otlp_exporter_endpoint(e), url);
	r = otlp_resource_new(e, &d, err, sizeof(err));
	assert_non_null(r);
	/*
	 * A batch is never more than the queue (4), and a full batch goes at once: a sender may take
	 * one, which it then retries against the closed port. The bound counts the spans in flight
	 * too: 4 queued or in flight, whatever the senders took.
	 */
	for (int i = 0; i < 10; i++)
		ok += otlp_export(e, r, &s);
	otlp_resource_put(r);
	assert_int_equal(ok, 4);
	otlp_exporter_stats(e, &st);
	assert_int_equal(st.accepted, ok);
	assert_int_equal(st.dropped_full, 10 - ok);
	assert_true(st.queued <= 4);
	otlp_exporter_free(e);
	close(fd);

	/* A second exporter, for the retries: small batches, sent at once. */
	port = closed_port(&fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", port);
	cfg.queue_spans = 100;
	cfg.batch_spans = 5;
	cfg.batch_ms = 1;
	e = otlp_exporter_new(&cfg, err, sizeof(err));
	assert_non_null(e);
	r = otlp_resource_new(e, &d, err, sizeof(err));
	for (int i = 0; i < 10; i++)
		assert_true(otlp_export(e, r, &s));
	otlp_resource_put(r);
	do {
		usleep(10000);
		otlp_exporter_stats(e, &st);
	} while (st.queued);
	assert_int_equal(st.accepted, 10);
	assert_int_equal(st.exported, 0);
	assert_int_equal(st.dropped_failed, 10);
	assert_true(st.retries > 0);
	assert_true(st.failed_requests == st.requests);
	otlp_exporter_last_error(e, err, sizeof(err));
	assert_non_null(strstr(err, url));
	otlp_exporter_free(e);
	close(fd);
}

/*
 * Several requests under way at once: each sender holds a batch it retries against the closed
 * port, and the bound still counts every span held, queued or in a sender's batch.
 */
static void test_requests_bound(void **state)
{
	char url[64], err[256];
	int fd, port = closed_port(&fd);
	struct otlp_config cfg = { .traces_endpoint = url,
				   .queue_spans = 8,
				   .batch_spans = 1,
				   .batch_ms = 1,
				   .requests = 4,
				   .backoff_min_ms = 10,
				   .backoff_max_ms = 20,
				   .shutdown_ms = 1 };
	struct otlp_span s = { .name = "s", .start_unix_ns = 1, .end_unix_ns = 2 };
	struct otlp_resource d = { .pid = 1 };
	struct otlp_exporter *e;
	struct otlp_stats st;
	struct otlp_res *r;
	unsigned int ok = 0;

	(void)state;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", port);
	e = otlp_exporter_new(&cfg, err, sizeof(err));
	assert_non_null(e);
	r = otlp_resource_new(e, &d, err, sizeof(err));
	assert_non_null(r);
	for (int i = 0; i < 12; i++)
		ok += otlp_export(e, r, &s);
	do { /* four batches' first requests: each sender took one, and retries it */
		usleep(10000);
		otlp_exporter_stats(e, &st);
	} while (st.requests - st.retries < 4);
	for (int i = 0; i < 12; i++)
		ok += otlp_export(e, r, &s);
	otlp_resource_put(r);
	otlp_exporter_stats(e, &st);
	assert_int_equal(ok, 8);
	assert_int_equal(st.accepted, 8);
	assert_int_equal(st.queued, 8);
	assert_int_equal(st.dropped_full, 24 - 8);
	otlp_exporter_free(e);
	close(fd);
}

static void test_ids(void **state)
{
	uint8_t a[16], b[16], s[8];

	(void)state;
	otlp_new_trace_id(a);
	otlp_new_trace_id(b);
	otlp_new_span_id(s);
	assert_memory_not_equal(a, b, 16);
	assert_memory_not_equal(a, (uint8_t[16]){ 0 }, 16);
	assert_memory_not_equal(s, (uint8_t[8]){ 0 }, 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_encode, setup),
		cmocka_unit_test_setup(test_gzip, setup),
		cmocka_unit_test_setup(test_kv, setup),
		cmocka_unit_test_setup(test_endpoint, setup),
		cmocka_unit_test_setup(test_env_options, setup),
		cmocka_unit_test_setup(test_env_queue, setup),
		cmocka_unit_test_setup(test_exporter_refuses, setup),
		cmocka_unit_test_setup(test_resource, setup),
		cmocka_unit_test_setup(test_retry_after, setup),
		cmocka_unit_test_setup(test_partial_success, setup),
		cmocka_unit_test_setup(test_unreachable, setup),
		cmocka_unit_test_setup(test_requests_bound, setup),
		cmocka_unit_test_setup(test_ids, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
