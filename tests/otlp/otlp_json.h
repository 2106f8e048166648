/* SPDX-License-Identifier: MIT */
/*
 * What the test collector's file exporter wrote (collector.h): one ExportTraceServiceRequest a
 * line, in OTLP JSON, read with the project's JSON reader. The OTLP tests of the exporter and of
 * `lowkey agent --otlp` share it.
 */
#ifndef LKT_OTLP_JSON_H
#define LKT_OTLP_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <internal/json_read.h>

struct lkt_otlp_got {
	struct lk__jr_value **lines;
	size_t nlines;
};

/* Add the requests of the file at path to g: 0, or -1 with a message in err. */
int lkt_otlp_read(struct lkt_otlp_got *g, const char *path, char *err, size_t errlen);
void lkt_otlp_free(struct lkt_otlp_got *g);

typedef void (*lkt_otlp_span_fn)(const struct lk__jr_value *resource,
				 const struct lk__jr_value *span, void *arg);

/* fn for every span of g, with the resource it came under, in the order received. */
void lkt_otlp_each_span(const struct lkt_otlp_got *g, lkt_otlp_span_fn fn, void *arg);

/* An attribute's value object ({"stringValue": ...} and so on) of a span or resource, or NULL. */
const struct lk__jr_value *lkt_otlp_attr(const struct lk__jr_value *owner, const char *key);

/* A string attribute's value, or NULL (none, or not a string). */
const char *lkt_otlp_attr_string(const struct lk__jr_value *owner, const char *key);

/* An integer attribute's value (OTLP JSON writes it as a string); INT64_MIN if none. */
int64_t lkt_otlp_attr_int(const struct lk__jr_value *owner, const char *key);

/* A 64-bit field (startTimeUnixNano, ...; written as a string); 0 if none. */
uint64_t lkt_otlp_u64(const struct lk__jr_value *owner, const char *key);

/* An id as OTLP JSON writes it: n bytes in lowercase hex, into out (2n + 1 bytes). */
void lkt_otlp_hex(const uint8_t *id, size_t n, char *out);

#endif
