// SPDX-License-Identifier: MIT
/*
 * Spans into an ExportTraceServiceRequest, through the code protoc-c generated from the vendored
 * opentelemetry-proto definitions (third_party/opentelemetry-proto); its gzip form; what the
 * receiver's answer says it rejected.
 *
 * The messages point into the queued spans (strings and ids are not copied): one allocation for
 * all of a batch's messages, one for the packed bytes.
 *
 * The packed bytes' buffer is sized by a bound taken from the messages as they are built, not by
 * protobuf-c's get_packed_size(): that is a whole walk of the request, a quarter of the encoding's
 * instructions, and protobuf-c's pack() needs no size ahead (it writes each nested message, then
 * its length before it).
 */
#include "otlp_internal.h"

#include <lowkey/version.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest pb_request;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse pb_response;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans pb_resource_spans;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans pb_scope_spans;
typedef Opentelemetry__Proto__Trace__V1__Span pb_span;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pb_scope;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

/* W3C trace flags: sampled (every span lowkey exports was kept). */
#define OTLP_FLAG_SAMPLED 0x01u

/* The batch's messages, carved from one allocation. */
struct batch {
	pb_request req;
	pb_scope scope;
	size_t nres;
	pb_resource_spans *rs, **rsp;
	pb_scope_spans *ss, **ssp;
	pb_resource *res;
	struct otlp_res **res_of; /* the distinct resources, in the order first met */
	pb_span *spans, **spanp;  /* spanp: grouped by resource */
	pb_kv *kv, **kvp;
	pb_any *any;
	size_t nkv;
};

static unsigned int span_nattrs(const struct otlp_span *s)
{
	return 1 + !!s->thread_name + !!s->thread_cpu_ns + s->is_event + s->nargs;
}

static bool zero(const uint8_t *id, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (id[i])
			return false;
	return true;
}

static void set_any(pb_any *any, const struct otlp_attr *a)
{
	opentelemetry__proto__common__v1__any_value__init(any);
	switch (a->type) {
	case OTLP_INT:
		any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		any->int_value = a->v.i;
		break;
	case OTLP_DOUBLE:
		any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
		any->double_value = a->v.d;
		break;
	case OTLP_BOOL:
		any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
		any->bool_value = a->v.b;
		break;
	case OTLP_STRING:
	default:
		any->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		any->string_value = (char *)(a->v.s ? a->v.s : "");
		break;
	}
}

/* The next attribute slot, set to a; returns its pointer's slot for the message's array. */
static pb_kv **push_attr(struct batch *b, const struct otlp_attr *a)
{
	size_t i = b->nkv++;

	opentelemetry__proto__common__v1__key_value__init(&b->kv[i]);
	b->kv[i].key = (char *)(a->key ? a->key : "");
	set_any(&b->any[i], a);
	b->kv[i].value = &b->any[i];
	b->kvp[i] = &b->kv[i];
	return &b->kvp[i];
}

static void span_attrs(struct batch *b, pb_span *m, const struct otlp_span *s)
{
	struct otlp_attr tid = { "thread.id", OTLP_INT, .v.i = s->tid };
	struct otlp_attr tname = { "thread.name", OTLP_STRING, .v.s = s->thread_name };
	struct otlp_attr cpu = { "lowkey.thread.cpu_time_ns", OTLP_INT,
				 .v.i = (int64_t)s->thread_cpu_ns };
	struct otlp_attr event = { "lowkey.event", OTLP_BOOL, .v.b = true };

	m->attributes = push_attr(b, &tid);
	m->n_attributes = 1;
	if (s->thread_name) {
		push_attr(b, &tname);
		m->n_attributes++;
	}
	if (s->thread_cpu_ns) {
		push_attr(b, &cpu);
		m->n_attributes++;
	}
	if (s->is_event) {
		push_attr(b, &event);
		m->n_attributes++;
	}
	for (unsigned int i = 0; i < s->nargs; i++)
		push_attr(b, &s->args[i]);
	m->n_attributes += s->nargs;
}

static void span_message(struct batch *b, pb_span *m, struct otlp_item *it)
{
	struct otlp_span *s = &it->span;

	opentelemetry__proto__trace__v1__span__init(m);
	m->trace_id = (ProtobufCBinaryData){ sizeof(s->trace_id), s->trace_id };
	m->span_id = (ProtobufCBinaryData){ sizeof(s->span_id), s->span_id };
	if (!zero(s->parent_span_id, sizeof(s->parent_span_id)))
		m->parent_span_id =
			(ProtobufCBinaryData){ sizeof(s->parent_span_id), s->parent_span_id };
	m->flags = OTLP_FLAG_SAMPLED;
	m->name = (char *)(s->name ? s->name : "");
	m->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
	m->start_time_unix_nano = s->start_unix_ns;
	m->end_time_unix_nano = s->is_event ? s->start_unix_ns : s->end_unix_ns;
	span_attrs(b, m, s);
}

static size_t res_index(struct batch *b, struct otlp_res *r)
{
	for (size_t i = 0; i < b->nres; i++)
		if (b->res_of[i] == r)
			return i;
	b->res_of[b->nres] = r;
	return b->nres++;
}

/* Sizes: n spans, at most n resources, nkv attributes. One block for all of it. */
static void *batch_alloc(struct batch *b, size_t n, size_t nkv)
{
	size_t sz = n * (sizeof(pb_resource_spans) + sizeof(pb_resource_spans *) +
			 sizeof(pb_scope_spans) + sizeof(pb_scope_spans *) + sizeof(pb_resource) +
			 sizeof(struct otlp_res *) + sizeof(pb_span) + sizeof(pb_span *)) +
		    nkv * (sizeof(pb_kv) + sizeof(pb_kv *) + sizeof(pb_any));
	char *p = malloc(sz ? sz : 1), *at = p;

	if (!p)
		return NULL;
#define CARVE(field, count)                        \
	do {                                       \
		b->field = (void *)at;             \
		at += (count) * sizeof(*b->field); \
	} while (0)
	/* Eight-byte members first: every array stays aligned. */
	CARVE(rs, n);
	CARVE(ss, n);
	CARVE(res, n);
	CARVE(spans, n);
	CARVE(kv, nkv);
	CARVE(any, nkv);
	CARVE(rsp, n);
	CARVE(ssp, n);
	CARVE(res_of, n);
	CARVE(spanp, n);
	CARVE(kvp, nkv);
#undef CARVE
	return p;
}

/* Each distinct resource's ResourceSpans, with its spans' pointers grouped in spanp. */
static void group(struct batch *b, struct otlp_item *const *items, size_t n, size_t *first)
{
	size_t *count = first + n, at = 0;

	for (size_t i = 0; i < n; i++)
		count[res_index(b, items[i]->res)]++;
	for (size_t r = 0; r < b->nres; r++) {
		first[r] = at;
		at += count[r];
		count[r] = 0;
	}
	for (size_t i = 0; i < n; i++) {
		size_t r = res_index(b, items[i]->res);

		b->spanp[first[r] + count[r]++] = &b->spans[i];
	}
	for (size_t r = 0; r < b->nres; r++) {
		struct otlp_res *res = b->res_of[r];

		opentelemetry__proto__resource__v1__resource__init(&b->res[r]);
		b->res[r].n_attributes = res->nattrs;
		b->res[r].attributes = res->nattrs ? &b->kvp[b->nkv] : NULL;
		for (size_t a = 0; a < res->nattrs; a++)
			push_attr(b, &res->attrs[a]);
		opentelemetry__proto__trace__v1__scope_spans__init(&b->ss[r]);
		b->ss[r].scope = &b->scope;
		b->ss[r].spans = &b->spanp[first[r]];
		b->ss[r].n_spans = count[r];
		b->ssp[r] = &b->ss[r];
		opentelemetry__proto__trace__v1__resource_spans__init(&b->rs[r]);
		b->rs[r].resource = &b->res[r];
		b->rs[r].scope_spans = &b->ssp[r];
		b->rs[r].n_scope_spans = 1;
		b->rsp[r] = &b->rs[r];
	}
}

/*
 * A field's most bytes but for a string's or a message's content: its tag (field numbers below
 * 2^18: 3 bytes) and a length, a varint or a fixed value (10 bytes at most).
 */
#define FIELD_MAX 13

/* A message's most bytes, but for its strings' and its messages' content: every field set. */
static size_t fields_max(const ProtobufCMessageDescriptor *d)
{
	return FIELD_MAX * d->n_fields;
}

static size_t str_max(const char *s)
{
	return s ? strlen(s) : 0;
}

/* An attribute's most bytes, as an element of its owner's repeated field. */
static size_t kv_max(const pb_kv *kv)
{
	size_t n = FIELD_MAX +
		   fields_max(&opentelemetry__proto__common__v1__key_value__descriptor) +
		   str_max(kv->key) + FIELD_MAX +
		   fields_max(&opentelemetry__proto__common__v1__any_value__descriptor);

	if (kv->value->value_case ==
	    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
		n += str_max(kv->value->string_value);
	return n;
}

/* The request's most bytes once packed. */
static size_t request_max(const struct batch *b, size_t n)
{
	size_t max = fields_max(
		&opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor);
	size_t per_res =
		3 * FIELD_MAX +
		fields_max(&opentelemetry__proto__trace__v1__resource_spans__descriptor) +
		fields_max(&opentelemetry__proto__resource__v1__resource__descriptor) +
		fields_max(&opentelemetry__proto__trace__v1__scope_spans__descriptor) + FIELD_MAX +
		fields_max(&opentelemetry__proto__common__v1__instrumentation_scope__descriptor) +
		str_max(b->scope.name) + str_max(b->scope.version);

	max += b->nres * per_res;
	for (size_t i = 0; i < n; i++) {
		const pb_span *m = &b->spans[i];

		max += FIELD_MAX + fields_max(&opentelemetry__proto__trace__v1__span__descriptor) +
		       str_max(m->name) + m->trace_id.len + m->span_id.len + m->parent_span_id.len;
	}
	for (size_t i = 0; i < b->nkv; i++)
		max += kv_max(&b->kv[i]);
	return max;
}

int otlp_encode(struct otlp_item *const *items, size_t n, uint8_t **buf, size_t *len)
{
	struct batch b = { 0 };
	size_t nkv = 0, *first;
	void *block;

	for (size_t i = 0; i < n; i++)
		nkv += span_nattrs(&items[i]->span) + items[i]->res->nattrs;
	block = batch_alloc(&b, n, nkv);
	first = calloc(2 * n + 1, sizeof(*first));
	if (!block || !first) {
		free(block);
		free(first);
		return -ENOMEM;
	}
	opentelemetry__proto__common__v1__instrumentation_scope__init(&b.scope);
	b.scope.name = (char *)"lowkey";
	b.scope.version = (char *)LK_VERSION_STRING;
	for (size_t i = 0; i < n; i++)
		span_message(&b, &b.spans[i], items[i]);
	group(&b, items, n, first);
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&b.req);
	b.req.resource_spans = b.rsp;
	b.req.n_resource_spans = b.nres;
	*buf = malloc(request_max(&b, n));
	if (*buf)
		*len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
			&b.req, *buf);
	free(block);
	free(first);
	return *buf ? 0 : -ENOMEM;
}

/*
 * The fastest level: the exporter's CPU time is what a machine pays for each span, and OTLP's
 * repeated keys and names compress well at any level.
 */
int otlp_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen)
{
	z_stream z = { 0 };
	size_t cap;
	int rc;

	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	cap = deflateBound(&z, len);
	*out = malloc(cap);
	if (!*out) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = *out;
	z.avail_out = (uInt)cap;
	rc = deflate(&z, Z_FINISH);
	*outlen = z.total_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

uint64_t otlp_response_rejected(const uint8_t *body, size_t len)
{
	pb_response *r;
	uint64_t rejected = 0;

	if (!len)
		return 0;
	r = opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
		NULL, len, body);
	if (!r)
		return 0;
	if (r->partial_success && r->partial_success->rejected_spans > 0)
		rejected = (uint64_t)r->partial_success->rejected_spans;
	opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
		r, NULL);
	return rejected;
}
