/* SPDX-License-Identifier: MIT */
/*
 * The OTLP/HTTP span exporter: finished spans to an OpenTelemetry Collector (or any OTLP/HTTP
 * receiver), as ExportTraceServiceRequest messages in protobuf, POSTed to ENDPOINT/v1/traces.
 *
 * The caller hands spans over with otlp_export(), which copies them into a bounded queue and
 * returns: it never waits on the network. A few sender threads (otlp_config's requests), each
 * with a connection of its own, take batches from the queue in turn, encode them (code generated
 * by protoc-c from the vendored opentelemetry-proto definitions), compress them with gzip where
 * configured and send them with libcurl, retrying with exponential backoff (and the server's
 * Retry-After) on the answers the OTLP specification calls retryable. A batch stays one request,
 * its retries included, on one sender; batches sent at once may arrive in any order. Every span
 * handed over is, in the end, either exported or dropped, and counted as one or the other
 * (otlp_exporter_stats()).
 *
 * The environment is read as the OpenTelemetry specification says (otlp_exporter_new(),
 * otlp_resource_new()): OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
 * OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION,
 * OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
 *
 * Nothing here is async-signal-safe: every function may allocate or take the queue's lock. Any
 * thread may call otlp_export(), otlp_resource_new() and otlp_exporter_stats() at the same time;
 * otlp_exporter_free() comes after all of them.
 */
#ifndef LOWKEY_CLI_OTLP_H
#define LOWKEY_CLI_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An attribute: a span's argument, its thread's, or a resource's. */
enum otlp_attr_type { OTLP_INT, OTLP_DOUBLE, OTLP_STRING, OTLP_BOOL };

struct otlp_attr {
	const char *key;
	enum otlp_attr_type type;
	union {
		int64_t i;
		double d;
		const char *s; /* UTF-8; NULL is sent as "" */
		bool b;
	} v;
};

/*
 * One finished span, all times CLOCK_REALTIME nanoseconds since the epoch. An LK_PROBE event is
 * a zero-length span (is_event, end == start): probes are exported as they are read, whether or
 * not a span encloses them and whether or not that span ends while the agent watches, and each is
 * counted and dropped on its own; as a span event it would wait for its enclosing span's end.
 * Nested in an enclosing span (parent_span_id), trace UIs draw it inside that span.
 */
struct otlp_span {
	const char *name; /* the site's name */
	uint64_t start_unix_ns, end_unix_ns;
	uint32_t pid;		 /* not sent: the span's resource says process.pid */
	uint32_t tid;		 /* thread.id */
	const char *thread_name; /* NULL: no thread.name attribute */
	uint64_t thread_cpu_ns;	 /* 0: not recorded, no attribute */
	unsigned int nargs;
	const struct otlp_attr *args; /* the site's arguments, attributes under their own keys */
	bool is_event;
	/*
	 * Ids, as the caller knows the nesting: all zero trace_id makes the span a root of a trace
	 * of its own (random ids; parent_span_id ignored). Otherwise span_id (all zero: a random
	 * one) and parent_span_id (all zero: a root) are sent as given; otlp_new_trace_id() and
	 * otlp_new_span_id() make them when a span begins, so that its children can name it.
	 */
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t parent_span_id[8];
};

/* What a process is: becomes the OTLP Resource its spans are sent under. */
struct otlp_resource {
	/* NULL: OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES', else "unknown_service:" and
	 * the executable's name */
	const char *service_name;
	const char *host_name;	     /* NULL: this machine's (gethostname) */
	uint32_t pid;		     /* process.pid; 0: none */
	const char *executable_name; /* process.executable.name; NULL: none */
	/* More, after OTEL_RESOURCE_ATTRIBUTES' (which they override). */
	unsigned int nattrs;
	const struct otlp_attr *attrs;
};

enum otlp_compression {
	OTLP_COMPRESSION_ENV, /* OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION: gzip or none (unset) */
	OTLP_COMPRESSION_NONE,
	OTLP_COMPRESSION_GZIP,
};

#define OTLP_REQUESTS_DEFAULT 4
#define OTLP_REQUESTS_MAX 64

/* Zero-initialized fields take the defaults. */
struct otlp_config {
	/*
	 * Where to send (http or https), in this order: traces_endpoint as is; endpoint, the
	 * collector's base URL (`--otlp http://host:4318`), + "/v1/traces";
	 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is; OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces";
	 * http://localhost:4318/v1/traces.
	 */
	const char *endpoint;
	const char *traces_endpoint;
	/* The bound on the spans held, queued or in requests under way; 0: 65536. */
	size_t queue_spans;
	unsigned int batch_spans; /* spans a request at most; 0: 512 */
	/*
	 * Requests under way at once, each on a thread and connection of its own: the encoding and
	 * the round trips of as many batches overlap. 0: OTLP_REQUESTS_DEFAULT; at most
	 * OTLP_REQUESTS_MAX (more is taken as that).
	 */
	unsigned int requests;
	unsigned int batch_ms; /* how long a span waits for a fuller batch; 0: 200 ms */
	enum otlp_compression compression;
	/* One request's limit; 0: OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT, else 10 s. */
	unsigned int timeout_ms;
	unsigned int retry_max_ms; /* how long a batch is retried before it is dropped; 0: 60 s */
	unsigned int shutdown_ms;  /* otlp_exporter_free()'s wait for the queue to drain; 0: 5 s */
	/* The first retry's wait, doubled each time (jittered) up to the second; 0: 100 ms, 5 s. */
	unsigned int backoff_min_ms;
	unsigned int backoff_max_ms;
};

struct otlp_stats {
	uint64_t accepted;	  /* spans otlp_export() took */
	uint64_t queued;	  /* of those, waiting in the queue or in requests under way */
	uint64_t exported;	  /* accepted by the receiver */
	uint64_t dropped_full;	  /* refused by otlp_export(): the queue was full */
	uint64_t dropped_failed;  /* given up: retries ran out, a non-retryable answer, the
				       receiver's partial success rejected them, or shutdown */
	uint64_t requests;	  /* HTTP requests made, retries included */
	uint64_t retries;	  /* of those, repeats of a batch */
	uint64_t failed_requests; /* those that did not succeed (no answer, or not 2xx) */
	uint64_t bytes_sent;	  /* request bodies, after compression */
};

struct otlp_exporter;
struct otlp_res;

/*
 * An exporter for cfg (NULL: all defaults), its threads started. Reads the environment once, here
 * (OTEL_SERVICE_NAME when a resource is made). NULL with a message in err: the endpoint is not an
 * http or https URL with a host, an OTEL_* variable cannot be read as the specification says
 * (the message names it and its value), out of memory, or a thread could not be started.
 * Costs a thread per request under way at once (cfg's requests), each with a connection to the
 * endpoint, made on its first request.
 */
struct otlp_exporter *otlp_exporter_new(const struct otlp_config *cfg, char *err, size_t errlen);

/*
 * The resource spans are sent under, copied, with OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
 * merged in: service.name is desc's, else OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES', else
 * "unknown_service:" and the executable's name; then host.name, process.pid,
 * process.executable.name and telemetry.sdk.name ("lowkey"), which OTEL_RESOURCE_ATTRIBUTES'
 * attributes replace, and desc's own replace those. Give it back with otlp_resource_put(); the
 * spans queued with it hold it until sent. NULL with a message: out of memory.
 */
struct otlp_res *otlp_resource_new(struct otlp_exporter *e, const struct otlp_resource *desc,
				   char *err, size_t errlen);
void otlp_resource_put(struct otlp_res *r);

/*
 * Queue a copy of s under resource r. Never waits on the network: allocates the copy and takes
 * the queue's lock, which is held elsewhere only to move spans in and out and to count them.
 * false: dropped (the exporter holds queue_spans spans already, or out of memory), counted in
 * dropped_full.
 */
bool otlp_export(struct otlp_exporter *e, struct otlp_res *r, const struct otlp_span *s);

/* The counts so far (a consistent snapshot: accepted == queued + exported + dropped_failed). */
void otlp_exporter_stats(struct otlp_exporter *e, struct otlp_stats *out);

/* The last failed request's reason ("" if none yet), for a status line. */
void otlp_exporter_last_error(struct otlp_exporter *e, char *buf, size_t len);

/* The URL requests go to, as resolved from the configuration and environment. */
const char *otlp_exporter_endpoint(const struct otlp_exporter *e);

/*
 * Send what is queued, waiting for it at most cfg's shutdown_ms (and about a second more for a
 * request under way to be cut short); what is left then is counted dropped_failed. Then stop the
 * threads and free everything. NULL is ignored.
 */
void otlp_exporter_free(struct otlp_exporter *e);

/* Random, never all-zero ids (a thread-local generator seeded by getrandom). */
void otlp_new_trace_id(uint8_t id[16]);
void otlp_new_span_id(uint8_t id[8]);

#endif
