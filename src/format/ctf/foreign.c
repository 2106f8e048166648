// SPDX-License-Identifier: MIT
/*
 * CTF that lowkey's writer did not write -- a lowkey trace rewritten by babeltrace2 (a copy, a cut
 * with --begin/--end), an LTTng trace -- read through libbabeltrace2: its CTF source (source.ctf.fs,
 * one for each directory at or below the one named that has a metadata file) and a sink of ours
 * on each stream that puts each message into the trace file in memory (trace_file.h), as the JSON
 * and Perfetto readers do; the trace reader merges the threads' events in time order.
 * docs/trace.md says why a library and not a TSDL parser of our own, and what is read.
 *
 * libbabeltrace2 is loaded with dlopen() when such a trace is opened, never linked: it brings
 * GLib and its plugins, which a program that only records has no use for. Its header is needed to
 * build this reader; a build without it says so when a foreign trace is opened.
 *
 * What an event becomes:
 *  - its thread: the vtid context (lowkey's own, or LTTng's `add-context -t vtid`), else in a
 *    lowkey trace its stream's id (the stream_instance_id lowkey writes, the thread's id), else
 *    the vpid context, else 0; its CPU time: lowkey's cputime_ns context; a thread's name: lowkey's
 *    thread_name records, or LTTng's procname context;
 *  - its time: nanoseconds from the clock's origin; for a lowkey trace (its env says tracer_name
 *    "lowkey"), moved back onto CLOCK_MONOTONIC with the env's lowkey_realtime0_ns and
 *    lowkey_monotonic0_ns, so that it reads as the trace before the rewrite;
 *  - its class: the name's text up to the first ':' is the provider, the rest the event. In a
 *    lowkey trace, ":begin" and ":end" make span begins and ends, lowkey:sched_out and sched_in
 *    context switches, and an event whose one field is named "value" a counter (lowkey names every
 *    counter's field so). In any other trace, an event name ending in _begin or _entry begins a
 *    span, and one ending in _end or _exit ends it, of the name without that suffix;
 *  - its arguments: the payload's first 8 fields that are numbers (integers, enumerations, booleans,
 *    reals; an integer shown in hexadecimal is a pointer) or strings; arrays, structures and
 *    variants are left out;
 *  - discarded-events messages: events the thread of their stream lost.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/failf.h"
#include "probe/probe_internal.h"
#include "internal/trace_file.h"
#include "format/ctf/read.h"

#ifndef LK_HAVE_BABELTRACE2

int lk__ctf_foreign_read(struct lk__trace_file *t, const char *path, char *err, size_t errlen)
{
	(void)t;
	return lk__failf(
		err, errlen, -ENOTSUP,
		"%s is not a trace lowkey's writer wrote: other CTF traces are read through "
		"libbabeltrace2, which this lowkey was built without (apt-get install "
		"libbabeltrace2-dev, then build lowkey again)",
		path);
}

#else

#include <dlfcn.h>
#include <ftw.h>
#include <pthread.h>

#include <babeltrace2/babeltrace.h>

#define BT_SONAME "libbabeltrace2.so.0"

/*
 * The libbabeltrace2 functions the reader calls, found with dlsym() under their own names (its
 * header's inline ones, such as bt_field_class_type_is(), are called directly).
 */
#define BT_FUNCTIONS(X)                                          \
	X(bt_graph_create)                                       \
	X(bt_graph_put_ref)                                      \
	X(bt_graph_add_source_component)                         \
	X(bt_graph_add_simple_sink_component)                    \
	X(bt_graph_connect_ports)                                \
	X(bt_graph_run)                                          \
	X(bt_plugin_find)                                        \
	X(bt_plugin_put_ref)                                     \
	X(bt_plugin_borrow_source_component_class_by_name_const) \
	X(bt_component_source_get_output_port_count)             \
	X(bt_component_source_borrow_output_port_by_index_const) \
	X(bt_component_sink_borrow_input_port_by_index_const)    \
	X(bt_value_map_create)                                   \
	X(bt_value_map_insert_empty_array_entry)                 \
	X(bt_value_array_append_string_element)                  \
	X(bt_value_put_ref)                                      \
	X(bt_value_get_type)                                     \
	X(bt_value_integer_signed_get)                           \
	X(bt_value_string_get)                                   \
	X(bt_message_iterator_next)                              \
	X(bt_message_get_type)                                   \
	X(bt_message_put_ref)                                    \
	X(bt_message_event_borrow_event_const)                   \
	X(bt_message_event_borrow_default_clock_snapshot_const)  \
	X(bt_message_discarded_events_get_count)                 \
	X(bt_message_discarded_events_borrow_stream_const)       \
	X(bt_message_stream_beginning_borrow_stream_const)       \
	X(bt_clock_snapshot_get_ns_from_origin)                  \
	X(bt_event_borrow_class_const)                           \
	X(bt_event_borrow_stream_const)                          \
	X(bt_event_borrow_payload_field_const)                   \
	X(bt_event_borrow_common_context_field_const)            \
	X(bt_event_class_get_name)                               \
	X(bt_stream_borrow_trace_const)                          \
	X(bt_stream_get_id)                                      \
	X(bt_stream_borrow_class_const)                          \
	X(bt_stream_class_borrow_default_clock_class_const)      \
	X(bt_trace_borrow_environment_entry_value_by_name_const) \
	X(bt_field_borrow_class_const)                           \
	X(bt_field_class_get_type)                               \
	X(bt_field_class_integer_get_preferred_display_base)     \
	X(bt_field_class_structure_get_member_count)             \
	X(bt_field_class_structure_borrow_member_by_index_const) \
	X(bt_field_class_structure_member_get_name)              \
	X(bt_field_structure_borrow_member_field_by_index_const) \
	X(bt_field_integer_unsigned_get_value)                   \
	X(bt_field_integer_signed_get_value)                     \
	X(bt_field_real_double_precision_get_value)              \
	X(bt_field_real_single_precision_get_value)              \
	X(bt_field_bool_get_value)                               \
	X(bt_field_string_get_value)                             \
	X(bt_current_thread_take_error)                          \
	X(bt_current_thread_clear_error)                         \
	X(bt_error_get_cause_count)                              \
	X(bt_error_borrow_cause_by_index)                        \
	X(bt_error_cause_get_message)                            \
	X(bt_error_release)

#define BT_POINTER(f) __typeof__(&f) f;
static struct {
	BT_FUNCTIONS(BT_POINTER)
} bt;
#undef BT_POINTER

static pthread_once_t bt_once = PTHREAD_ONCE_INIT;
static char bt_problem[512]; /* why libbabeltrace2 is not usable; "" when it is */

static void bt_load(void)
{
	void *lib = dlopen(BT_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *missing = NULL, *why;

	if (!lib) {
		why = dlerror();
		snprintf(bt_problem, sizeof(bt_problem),
			 "cannot load " BT_SONAME " (%s): install libbabeltrace2 (Debian: "
			 "apt-get install libbabeltrace2-0)",
			 why ? why : "not found");
		return;
	}
	/* dlsym returns void *; POSIX guarantees it converts to a function pointer. */
#define BT_FIND(f)                                           \
	if (!(*(void **)&bt.f = dlsym(lib, #f)) && !missing) \
		missing = #f;
	BT_FUNCTIONS(BT_FIND)
#undef BT_FIND
	if (missing)
		snprintf(bt_problem, sizeof(bt_problem),
			 BT_SONAME " lacks %s (libbabeltrace2 older than 2.0?)", missing);
	/* never unloaded: its plugins stay loaded too */
}

/* A stream of the trace: the thread its events are on, and the losses it told before one. */
struct fr_stream {
	const bt_stream *stream;
	int tid;
	bool has_tid;
	uint64_t lost;
};

struct fr {
	struct lk__trace_file *t;
	const char *path;
	char *err;
	size_t errlen;
	int rc; /* the first error, with its message in err */
	bool lowkey;
	int64_t shift;	    /* lowkey: monotonic0 - realtime0, added to the clock's ns */
	const char *domain; /* the provider of names without one */
	struct fr_stream *streams;
	size_t nstreams, capstreams, last; /* last: the latest found */
	char **dirs;			   /* the traces' directories */
	size_t ndirs;
};

static int fr_fail(struct fr *f, int rc, const char *what)
{
	if (!f->rc)
		f->rc = lk__failf(f->err, f->errlen, rc, "%s: %s", f->path, what);
	return f->rc;
}

static const char *env_string(const bt_trace *trace, const char *name)
{
	const bt_value *v = bt.bt_trace_borrow_environment_entry_value_by_name_const(trace, name);

	return v && bt.bt_value_get_type(v) == BT_VALUE_TYPE_STRING ? bt.bt_value_string_get(v) :
								      NULL;
}

static int64_t env_int(const bt_trace *trace, const char *name)
{
	const bt_value *v = bt.bt_trace_borrow_environment_entry_value_by_name_const(trace, name);

	return v && bt.bt_value_get_type(v) == BT_VALUE_TYPE_SIGNED_INTEGER ?
		       bt.bt_value_integer_signed_get(v) :
		       0;
}

/* A lowkey trace's env: the process, what was recorded, and its clock's CLOCK_MONOTONIC. */
static void read_lowkey_env(struct fr *f, const bt_trace *trace)
{
	struct lk__trace_reader *r = &f->t->r;
	int64_t real0 = env_int(trace, "lowkey_realtime0_ns"),
		mono0 = env_int(trace, "lowkey_monotonic0_ns");

	f->lowkey = true;
	f->shift = mono0 - real0;
	r->realtime0_ns = real0 > mono0 ? (uint64_t)(real0 - mono0) : 0;
	r->cputime = env_int(trace, "lowkey_cputime") != 0;
	r->sched = env_int(trace, "lowkey_sched") != 0;
	r->sched_lost = (uint64_t)env_int(trace, "lowkey_sched_lost");
	r->overwrite = env_int(trace, "lowkey_overwrite") != 0;
	r->dropped = (uint64_t)env_int(trace, "lowkey_dropped");
}

/* The first stream of a trace tells what its env says. */
static void read_env(struct fr *f, const bt_trace *trace)
{
	const char *tracer = env_string(trace, "tracer_name"), *procname;
	struct lk__trace_reader *r = &f->t->r;

	if (f->nstreams)
		return;
	if (tracer && strcmp(tracer, "lowkey") == 0)
		read_lowkey_env(f, trace);
	f->domain = env_string(trace, "domain");
	procname = env_string(trace, "procname");
	if (procname)
		snprintf(r->procname, sizeof(r->procname), "%s", procname);
	if (env_int(trace, "vpid") > 0 && env_int(trace, "vpid") <= INT32_MAX)
		r->pid = (int)env_int(trace, "vpid");
}

/* The stream's entry, added the first time; a sink's messages come in runs of one stream. */
static struct fr_stream *find_stream(struct fr *f, const bt_stream *s)
{
	if (f->last < f->nstreams && f->streams[f->last].stream == s)
		return &f->streams[f->last];
	for (size_t i = f->nstreams; i-- > 0;)
		if (f->streams[i].stream == s)
			return &f->streams[f->last = i];
	if (f->nstreams == f->capstreams) {
		size_t cap = f->capstreams ? f->capstreams * 2 : 16;
		struct fr_stream *grown = realloc(f->streams, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		f->streams = grown;
		f->capstreams = cap;
	}
	f->streams[f->nstreams] = (struct fr_stream){ .stream = s };
	f->last = f->nstreams;
	return &f->streams[f->nstreams++];
}

/* ---- fields ---- */

static const bt_field *member(const bt_field *st, const char *name)
{
	const bt_field_class *fc;
	uint64_t n;

	if (!st)
		return NULL;
	fc = bt.bt_field_borrow_class_const(st);
	n = bt.bt_field_class_structure_get_member_count(fc);
	for (uint64_t i = 0; i < n; i++) {
		const bt_field_class_structure_member *m =
			bt.bt_field_class_structure_borrow_member_by_index_const(fc, i);

		if (strcmp(bt.bt_field_class_structure_member_get_name(m), name) == 0)
			return bt.bt_field_structure_borrow_member_field_by_index_const(st, i);
	}
	return NULL;
}

/* A number or string field as lowkey's type and value; 0 for a field of another kind. */
static unsigned int field_value(const bt_field *fd, uint64_t *raw, const char **str)
{
	const bt_field_class *fc = bt.bt_field_borrow_class_const(fd);
	bt_field_class_type type = bt.bt_field_class_get_type(fc);
	double d;

	if (bt_field_class_type_is(type, BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER)) {
		*raw = bt.bt_field_integer_unsigned_get_value(fd);
		return bt.bt_field_class_integer_get_preferred_display_base(fc) ==
				       BT_FIELD_CLASS_INTEGER_PREFERRED_DISPLAY_BASE_HEXADECIMAL ?
			       LK_PROBE_PTR :
			       LK_PROBE_U64;
	}
	if (bt_field_class_type_is(type, BT_FIELD_CLASS_TYPE_SIGNED_INTEGER)) {
		*raw = (uint64_t)bt.bt_field_integer_signed_get_value(fd);
		return LK_PROBE_I64;
	}
	if (type == BT_FIELD_CLASS_TYPE_BOOL) {
		*raw = bt.bt_field_bool_get_value(fd) ? 1 : 0;
		return LK_PROBE_U64;
	}
	if (type == BT_FIELD_CLASS_TYPE_DOUBLE_PRECISION_REAL ||
	    type == BT_FIELD_CLASS_TYPE_SINGLE_PRECISION_REAL) {
		d = type == BT_FIELD_CLASS_TYPE_DOUBLE_PRECISION_REAL ?
			    bt.bt_field_real_double_precision_get_value(fd) :
			    (double)bt.bt_field_real_single_precision_get_value(fd);
		memcpy(raw, &d, sizeof(d));
		return LK_PROBE_F64;
	}
	if (type == BT_FIELD_CLASS_TYPE_STRING) {
		*str = bt.bt_field_string_get_value(fd);
		return LK_PROBE_STR;
	}
	return 0;
}

static bool context_number(const bt_field *ctx, const char *name, uint64_t *v)
{
	const bt_field *fd = member(ctx, name);
	const char *s;
	unsigned int type = fd ? field_value(fd, v, &s) : 0;

	return type && type != LK_PROBE_STR && type != LK_PROBE_F64;
}

/* The payload's fields into the trace file's argument list (t->args). */
static int read_args(struct fr *f, const bt_field *payload)
{
	struct lk__tf_args *a = &f->t->args;
	uint64_t n = payload ? bt.bt_field_class_structure_get_member_count(
				       bt.bt_field_borrow_class_const(payload)) :
			       0;
	int rc = 0;

	lk__tf_args_reset(a);
	for (uint64_t i = 0; i < n && a->n < LK_PROBE_MAX_ARGS && !rc; i++) {
		const bt_field_class_structure_member *m =
			bt.bt_field_class_structure_borrow_member_by_index_const(
				bt.bt_field_borrow_class_const(payload), i);
		const char *name = bt.bt_field_class_structure_member_get_name(m), *str = NULL;
		uint64_t raw = 0;
		unsigned int type = field_value(
			bt.bt_field_structure_borrow_member_field_by_index_const(payload, i), &raw,
			&str);

		if (type)
			rc = lk__tf_arg(a, name, strlen(name), type, raw, str,
					str ? strlen(str) : 0);
	}
	return rc;
}

/* ---- events ---- */

static bool has_suffix(const char *s, size_t n, const char *suffix, size_t *base)
{
	size_t k = strlen(suffix);

	if (n <= k || memcmp(s + n - k, suffix, k) != 0)
		return false;
	*base = n - k;
	return true;
}

/* The span convention: lowkey's ":begin"/":end", another tracer's _begin/_entry, _end/_exit. */
static unsigned int event_kind(const struct fr *f, const char *event, size_t *len)
{
	static const char *const begins[] = { "_begin", "_entry" }, *const ends[] = { "_end",
										      "_exit" };

	if (f->lowkey)
		return has_suffix(event, *len, ":begin", len) ? LK_PROBE_SPAN_BEGIN :
		       has_suffix(event, *len, ":end", len)   ? LK_PROBE_SPAN_END :
								LK_PROBE_EVENT;
	for (size_t i = 0; i < 2; i++) {
		if (has_suffix(event, *len, begins[i], len))
			return LK_PROBE_SPAN_BEGIN;
		if (has_suffix(event, *len, ends[i], len))
			return LK_PROBE_SPAN_END;
	}
	return LK_PROBE_EVENT;
}

/* The process is named as its main thread is (the vpid context's), where the env names none. */
static void name_process(struct fr *f, int tid, const char *name)
{
	struct lk__trace_reader *r = &f->t->r;

	if (!r->procname[0] && tid == r->pid)
		snprintf(r->procname, sizeof(r->procname), "%s", name);
}

/* The thread an event is on, and that of its stream from then on; NULL out of memory. */
static struct lk__tf_thread *event_thread(struct fr *f, const bt_event *ev, uint64_t ns,
					  uint64_t *cpu_ns)
{
	const bt_field *ctx = bt.bt_event_borrow_common_context_field_const(ev);
	const bt_stream *stream = bt.bt_event_borrow_stream_const(ev);
	struct fr_stream *s = find_stream(f, stream);
	struct lk__tf_thread *th;
	uint64_t tid = 0, pid = 0;
	const bt_field *procname = member(ctx, "procname");
	const char *name = NULL;

	if (context_number(ctx, "vpid", &pid) && !f->t->r.pid && pid && pid <= INT32_MAX)
		f->t->r.pid = (int)pid;
	/* a lowkey recording's events carry no vtid: the stream is the thread (stream_instance_id) */
	if (!context_number(ctx, "vtid", &tid))
		tid = f->lowkey ? bt.bt_stream_get_id(stream) : pid;
	*cpu_ns = 0;
	context_number(ctx, "cputime_ns", cpu_ns);
	th = s ? lk__tf_thread(f->t, (int)tid) : NULL;
	if (!th)
		return NULL;
	s->tid = (int)tid;
	s->has_tid = true;
	th->lost += s->lost;
	s->lost = 0;
	if (procname && field_value(procname, &tid, &name) == LK_PROBE_STR && !th->probes.n) {
		if (lk__tf_thread_name(f->t, th, ns, name, strlen(name)))
			return NULL;
		f->t->context_names++;
		name_process(f, th->tid, name);
	}
	return th;
}

/* lowkey's own records in a lowkey trace: a thread's name, its context switches. */
static int lowkey_record(struct fr *f, struct lk__tf_thread *th, const char *event, uint64_t ns)
{
	const struct lk__tf_args *a = &f->t->args;
	uint64_t v[2] = { 0, 0 };

	if (strcmp(event, "thread_name") == 0)
		return lk__tf_thread_name(f->t, th, ns, a->len ? (const char *)a->payload : "",
					  a->len);
	memcpy(v, a->payload, a->len < sizeof(v) ? a->len : sizeof(v));
	if (strcmp(event, "sched_out") == 0)
		return lk__tf_switch(f->t, th, LK__EVENT_SCHED_OUT, ns, v, sizeof(v));
	return lk__tf_switch(f->t, th, LK__EVENT_SCHED_IN, ns, v, sizeof(v[0]));
}

static bool is_lowkey_record(const struct fr *f, const char *provider, size_t plen,
			     const char *event)
{
	return f->lowkey && plen == 6 && memcmp(provider, "lowkey", 6) == 0 &&
	       (strcmp(event, "thread_name") == 0 || strcmp(event, "sched_out") == 0 ||
		strcmp(event, "sched_in") == 0);
}

static int put_event(struct fr *f, struct lk__tf_thread *th, const char *name, uint64_t ns,
		     uint64_t cpu_ns)
{
	const char *colon = strchr(name, ':'),
		   *provider = colon	 ? name :
			       f->domain ? f->domain :
					   "ctf",
		   *event = colon ? colon + 1 : name;
	size_t plen = colon ? (size_t)(colon - name) : strlen(provider), elen = strlen(event);
	struct lk__tf_args *a = &f->t->args;
	unsigned int kind;
	uint32_t cls;
	int rc;

	if (is_lowkey_record(f, provider, plen, event))
		return lowkey_record(f, th, event, ns);
	kind = event_kind(f, event, &elen);
	if (f->lowkey && kind == LK_PROBE_EVENT && a->n == 1 && a->types != LK_PROBE_STR &&
	    strcmp(a->names[0], "value") == 0)
		kind = LK_PROBE_COUNTER;
	rc = lk__tf_class_args(f->t, provider, plen, event, elen, kind, a, &cls);
	if (!rc)
		rc = lk__tf_event(f->t, th, cls, ns, cpu_ns, a->payload, a->len);
	return rc;
}

static int on_event(struct fr *f, const bt_message *msg)
{
	const bt_event *ev = bt.bt_message_event_borrow_event_const(msg);
	const bt_stream *s = bt.bt_event_borrow_stream_const(ev);
	const char *name = bt.bt_event_class_get_name(bt.bt_event_borrow_class_const(ev));
	int64_t ns = 0;
	uint64_t cpu_ns;
	struct lk__tf_thread *th;
	int rc;

	if (!bt.bt_stream_class_borrow_default_clock_class_const(
		    bt.bt_stream_borrow_class_const(s)))
		return fr_fail(f, -EINVAL, "its events have no clock: lowkey cannot order them");
	if (bt.bt_clock_snapshot_get_ns_from_origin(
		    bt.bt_message_event_borrow_default_clock_snapshot_const(msg), &ns) !=
	    BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK)
		return fr_fail(f, -EINVAL, "an event's time overflows 64 bits of nanoseconds");
	ns = ns + f->shift > 0 ? ns + f->shift : 1; /* 0 is no time to the report */
	th = event_thread(f, ev, (uint64_t)ns, &cpu_ns);
	rc = th ? read_args(f, bt.bt_event_borrow_payload_field_const(ev)) : -ENOMEM;
	if (!rc)
		rc = put_event(f, th, name ? name : "", (uint64_t)ns, cpu_ns);
	if (rc == -E2BIG)
		return fr_fail(f, rc, "more event classes than lowkey reads (65,535)");
	return rc ? fr_fail(f, rc, strerror(-rc)) : 0;
}

static int on_discarded(struct fr *f, const bt_message *msg)
{
	struct fr_stream *s =
		find_stream(f, bt.bt_message_discarded_events_borrow_stream_const(msg));
	uint64_t count = 0;
	uint32_t i;

	if (!s)
		return fr_fail(f, -ENOMEM, strerror(ENOMEM));
	if (bt.bt_message_discarded_events_get_count(msg, &count) !=
	    BT_PROPERTY_AVAILABILITY_AVAILABLE)
		return 0;
	if (s->has_tid && lk__tf_map_get(&f->t->thread_of, (uint64_t)s->tid, &i))
		f->t->threads[i].lost += count;
	else
		s->lost += count; /* the stream's next event's thread */
	return 0;
}

static int on_message(struct fr *f, const bt_message *msg)
{
	struct fr_stream *s;

	switch (bt.bt_message_get_type(msg)) {
	case BT_MESSAGE_TYPE_EVENT:
		return on_event(f, msg);
	case BT_MESSAGE_TYPE_DISCARDED_EVENTS:
		return on_discarded(f, msg);
	case BT_MESSAGE_TYPE_STREAM_BEGINNING:
		read_env(f, bt.bt_stream_borrow_trace_const(
				    bt.bt_message_stream_beginning_borrow_stream_const(msg)));
		s = find_stream(f, bt.bt_message_stream_beginning_borrow_stream_const(msg));
		return s ? 0 : fr_fail(f, -ENOMEM, strerror(ENOMEM));
	default:
		return 0;
	}
}

static bt_graph_simple_sink_component_consume_func_status consume(bt_message_iterator *it,
								  void *arg)
{
	struct fr *f = arg;
	bt_message_array_const msgs;
	uint64_t n = 0;
	int rc = 0;

	switch (bt.bt_message_iterator_next(it, &msgs, &n)) {
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_END:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_END;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_AGAIN:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_AGAIN;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_MEMORY_ERROR:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_MEMORY_ERROR;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_OK:
		break;
	default:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (!rc)
			rc = on_message(f, msgs[i]);
		bt.bt_message_put_ref(msgs[i]);
	}
	return rc ? BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR :
		    BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_OK;
}

/* ---- errors ---- */

/* libbabeltrace2's error of this thread as the message: its root cause (the first). */
static int bt_failure(struct fr *f, int rc, const char *what)
{
	const bt_error *e = bt.bt_current_thread_take_error();
	uint64_t n = e ? bt.bt_error_get_cause_count(e) : 0;
	char msg[1024];

	snprintf(msg, sizeof(msg), "%s%s%s", what, n ? ": " : "",
		 n ? bt.bt_error_cause_get_message(bt.bt_error_borrow_cause_by_index(e, 0)) : "");
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	if (e)
		bt.bt_error_release(e);
	return fr_fail(f, rc, msg);
}

/* ---- the traces below the directory ---- */

#define MAX_TRACES 1024 /* directories with a metadata below the one named */

static char **traces;
static size_t ntraces;
static int traces_rc;

/* nftw's callback: a file named metadata makes its directory a trace. */
static int find_trace(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	char *dir;

	(void)st;
	if (type != FTW_F || strcmp(path + ftw->base, METADATA_NAME) != 0)
		return 0;
	if (ntraces == MAX_TRACES)
		return traces_rc = -E2BIG;
	dir = strndup(path, ftw->base ? (size_t)ftw->base - 1 : 0);
	if (!dir)
		return traces_rc = -ENOMEM;
	traces[ntraces++] = dir;
	return 0;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Every directory at or below path that has a metadata file, sorted, into f->dirs: source.ctf.fs
 * reads a trace's own directory only (the babeltrace2 command finds them itself). nftw keeps its
 * state in globals: one walk at a time.
 */
static int find_traces(struct fr *f)
{
	static pthread_mutex_t walk = PTHREAD_MUTEX_INITIALIZER;
	int rc;

	pthread_mutex_lock(&walk);
	traces = calloc(MAX_TRACES, sizeof(*traces));
	ntraces = 0;
	traces_rc = traces ? 0 : -ENOMEM;
	rc = traces_rc ? traces_rc : nftw(f->path, find_trace, 16, FTW_PHYS);
	if (rc > 0 || (rc < 0 && !traces_rc))
		rc = -errno;
	f->dirs = traces;
	f->ndirs = ntraces;
	pthread_mutex_unlock(&walk);
	if (rc == -E2BIG)
		return fr_fail(f, rc, "more than 1,024 CTF traces below it");
	if (rc)
		return fr_fail(f, rc, strerror(-rc));
	if (!f->ndirs)
		return fr_fail(f, -EINVAL, "not a CTF trace: no metadata file in it or below it");
	qsort(f->dirs, f->ndirs, sizeof(*f->dirs), by_path);
	return 0;
}

/* ---- the graph ---- */

static const bt_component_source *add_source(struct fr *f, bt_graph *g, const bt_plugin *ctf,
					     size_t i)
{
	const bt_component_class_source *cls =
		bt.bt_plugin_borrow_source_component_class_by_name_const(ctf, "fs");
	const bt_component_source *src = NULL;
	bt_value *params = bt.bt_value_map_create(), *inputs = NULL;
	char name[32];

	if (!cls || !params ||
	    bt.bt_value_map_insert_empty_array_entry(params, "inputs", &inputs) ||
	    bt.bt_value_array_append_string_element(inputs, f->dirs[i])) {
		bt.bt_value_put_ref(params);
		bt_failure(f, -ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(name, sizeof(name), "source-%zu", i);
	if (bt.bt_graph_add_source_component(g, cls, name, params, BT_LOGGING_LEVEL_NONE, &src))
		bt_failure(f, -EINVAL, "babeltrace2 cannot read it");
	bt.bt_value_put_ref(params);
	return src;
}

/*
 * Each of a source's streams into a simple sink of ours: no muxer, whose order of the streams'
 * messages the trace file in memory makes anyway (lk__tf_sort_streams), and which refuses traces
 * babeltrace2 itself wrote when a cut's ends round before an event's time.
 */
static int add_sinks(struct fr *f, bt_graph *g, const bt_component_source *src, size_t *nsinks)
{
	uint64_t n = bt.bt_component_source_get_output_port_count(src);
	const bt_component_sink *sink;
	char name[32];

	for (uint64_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "lowkey-%zu", (*nsinks)++);
		if (bt.bt_graph_add_simple_sink_component(g, name, NULL, consume, NULL, f, &sink) ||
		    bt.bt_graph_connect_ports(
			    g, bt.bt_component_source_borrow_output_port_by_index_const(src, i),
			    bt.bt_component_sink_borrow_input_port_by_index_const(sink, 0), NULL))
			return bt_failure(f, -ENOMEM, "cannot make babeltrace2's graph");
	}
	return 0;
}

/* A source for each trace found, each of its streams into a sink. */
static int build_graph(struct fr *f, bt_graph *g, const bt_plugin *ctf)
{
	size_t nsinks = 0;

	for (size_t i = 0; i < f->ndirs; i++) {
		const bt_component_source *src = add_source(f, g, ctf, i);

		if (!src || add_sinks(f, g, src, &nsinks))
			return f->rc;
	}
	return 0;
}

static const bt_plugin *find_plugin(struct fr *f, const char *name)
{
	const bt_plugin *p = NULL;

	if (bt.bt_plugin_find(name, BT_TRUE, BT_FALSE, BT_TRUE, BT_TRUE, BT_FALSE, &p) !=
	    BT_PLUGIN_FIND_STATUS_OK) {
		bt.bt_current_thread_clear_error();
		fr_fail(f, -ENOTSUP,
			"babeltrace2's plugins are not found (Debian: apt-get install "
			"libbabeltrace2-0)");
		return NULL;
	}
	return p;
}

static int run_graph(struct fr *f)
{
	const bt_plugin *ctf = find_plugin(f, "ctf");
	bt_graph *g = ctf ? bt.bt_graph_create(0) : NULL;
	bt_graph_run_status st;

	if (ctf && !g)
		fr_fail(f, -ENOMEM, strerror(ENOMEM));
	if (g && !build_graph(f, g, ctf)) {
		do
			st = bt.bt_graph_run(g);
		while (st == BT_GRAPH_RUN_STATUS_AGAIN);
		if (st != BT_GRAPH_RUN_STATUS_OK)
			bt_failure(f, st == BT_GRAPH_RUN_STATUS_MEMORY_ERROR ? -ENOMEM : -EINVAL,
				   "babeltrace2 cannot read it");
	}
	bt.bt_graph_put_ref(g);
	bt.bt_plugin_put_ref(ctf);
	return f->rc;
}

int lk__ctf_foreign_read(struct lk__trace_file *t, const char *path, char *err, size_t errlen)
{
	struct fr f = { .t = t, .path = path, .err = err, .errlen = errlen };

	pthread_once(&bt_once, bt_load);
	if (bt_problem[0])
		return lk__failf(err, errlen, -ENOTSUP,
				 "%s is a CTF trace lowkey did not write, read through "
				 "libbabeltrace2: %s",
				 path, bt_problem);
	if (!find_traces(&f))
		run_graph(&f);
	for (size_t i = 0; i < f.ndirs; i++)
		free(f.dirs[i]);
	free(f.dirs);
	free(f.streams);
	if (!f.rc)
		lk__tf_sort_streams(t);
	return f.rc;
}

#endif
