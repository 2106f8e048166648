/* SPDX-License-Identifier: MIT */
/*
 * The OTLP exporter's parts (otlp.h is their user's contract): the environment as the
 * OpenTelemetry specification reads it (otlp_env.c), the copy of a span in the queue and the
 * resource it is sent under, the protobuf encoding (otlp_encode.c) and one HTTP request
 * (otlp_http.c). Declared here for the exporter and its tests.
 */
#ifndef LOWKEY_CLI_OTLP_INTERNAL_H
#define LOWKEY_CLI_OTLP_INTERNAL_H

#include "otlp.h"

#include <stdatomic.h>
#include <time.h>

/* A key and its value, both owned. */
struct otlp_kv {
	char *key, *value;
};

/*
 * A list of key=value pairs as OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS write them
 * (W3C Baggage's form without its ;properties: comma-separated, blanks around each part ignored,
 * values percent-decoded). 0 with *out (free with otlp_kv_free) and *n; -EINVAL with a message
 * naming what (the variable) and the bad member; -ENOMEM.
 */
int otlp_kv_parse(const char *text, const char *what, struct otlp_kv **out, size_t *n, char *err,
		  size_t errlen);
void otlp_kv_free(struct otlp_kv *kv, size_t n);

/*
 * The traces URL: traces_endpoint as is, else endpoint + "/v1/traces", else as the environment
 * says (otlp.h). 0 with *url (free it); -EINVAL with a message (not an http or https URL with a
 * host, named with where it came from); -ENOMEM.
 */
int otlp_traces_url(const char *endpoint, const char *traces_endpoint, char **url, char *err,
		    size_t errlen);

/* gzip from the environment: 0 or 1, or -EINVAL with a message (neither "gzip" nor "none"). */
int otlp_env_gzip(char *err, size_t errlen);

/* A request's timeout from the environment in ms, 10 s unset; -EINVAL with a message. */
long otlp_env_timeout_ms(char *err, size_t errlen);

/*
 * A count of spans from the environment variable name (OTEL_BSP_MAX_QUEUE_SIZE,
 * OTEL_BSP_MAX_EXPORT_BATCH_SIZE), dflt unset or empty; -EINVAL with a message (not 1 to 2^24).
 */
long otlp_env_spans(const char *name, long dflt, char *err, size_t errlen);

/* The request headers from the environment (traces' own variable if set, else the general one). */
int otlp_env_headers(struct otlp_kv **out, size_t *n, char *err, size_t errlen);

/* A resource, as its spans share it: immutable once made, freed when its last holder puts it. */
struct otlp_res {
	atomic_uint refs;
	size_t nattrs;
	struct otlp_attr *attrs; /* service.name first; keys and strings owned */
};

/*
 * The resource's attributes for desc and the environment's (OTEL_SERVICE_NAME read here,
 * OTEL_RESOURCE_ATTRIBUTES parsed once by the exporter): service.name first, then host.name,
 * process.pid, process.executable.name, telemetry.sdk.name, then env_attrs and desc's own, each
 * replacing an attribute of the same key. 0 or -ENOMEM (r half built: otlp_res_release it).
 */
int otlp_res_build(struct otlp_res *r, const struct otlp_resource *desc,
		   const struct otlp_kv *env_attrs, size_t nenv);
/* Free r and its attributes (its last reference). */
void otlp_res_release(struct otlp_res *r);

/* A span in the queue: the caller's span copied, its strings and arguments in the same block. */
struct otlp_item {
	struct otlp_item *next;
	struct otlp_res *res;
	struct otlp_span span;
};

/* A copy of s in one allocation, ids filled in where the caller left them zero; NULL: ENOMEM. */
struct otlp_item *otlp_item_new(struct otlp_res *r, const struct otlp_span *s);

/*
 * An ExportTraceServiceRequest of n spans (one ResourceSpans per distinct resource, in the order
 * first met): 0 with *buf (malloc'ed) and *len, or -ENOMEM.
 */
int otlp_encode(struct otlp_item *const *items, size_t n, uint8_t **buf, size_t *len);

/* in compressed as a gzip member: 0 with *out (malloc'ed) and *outlen, or -ENOMEM. */
int otlp_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen);

/*
 * The spans an ExportTraceServiceResponse says were rejected (its partial_success); 0 for an
 * empty body, or one that is not such a message.
 */
uint64_t otlp_response_rejected(const uint8_t *body, size_t len);

/*
 * A Retry-After header's value in ms from now: delay-seconds or an HTTP-date; -1 if neither
 * (RFC 9110, 10.2.3).
 */
long otlp_retry_after_ms(const char *value, time_t now);

/* One HTTP connection to the endpoint, reused from request to request, used by one thread. */
struct otlp_http;

struct otlp_http_result {
	long status;	     /* the HTTP status, 0 if none came (no connection, a timeout) */
	long retry_after_ms; /* the answer's Retry-After, -1 without */
	uint64_t rejected;   /* an answer's partial success */
	char error[256];     /* why it failed, for the message a caller may print */
};

/*
 * abort_at_ms: a request under way is cut short once CLOCK_MONOTONIC passes it (in ms; 0: never),
 * checked about once a second: the exporter's shutdown, bounded.
 */
struct otlp_http *otlp_http_new(const char *url, const struct otlp_kv *headers, size_t nheaders,
				bool gzip, const _Atomic int64_t *abort_at_ms, char *err,
				size_t errlen);
/* POST body (already compressed where gzip was asked), waiting at most timeout_ms. */
void otlp_http_post(struct otlp_http *h, const uint8_t *body, size_t len, long timeout_ms,
		    struct otlp_http_result *res);
void otlp_http_free(struct otlp_http *h);

/* Retryable, as OTLP/HTTP says: no answer at all, 429, 502, 503, 504. */
bool otlp_http_retryable(long status);

#endif
