// SPDX-License-Identifier: MIT
/*
 * lowkey agent --otlp: each span the agent pairs, and each LK_PROBE event, handed to the OTLP/HTTP
 * exporter (otlp.h), which queues, batches and sends them on a thread of its own: the agent's
 * reading never waits on the network, and what the exporter cannot send it drops and counts
 * (lowkey_agent_otlp_spans_dropped_total).
 *
 * Spans nest as they did on their thread: a span opened under another is its child in the same
 * trace, an outermost one starts a trace of its own, and an event is a zero-length span inside
 * the span open around it (otlp.h says why an event is not a span event). Times are the trace's
 * counter mapped to CLOCK_REALTIME by the trace's own clock pair (realtime0_ns at tsc0).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "agent.h"
#include "internal/probe.h"
#include "internal/proc.h"
#include "otlp.h"

int agent_otlp_start(struct agent *a, char *err, size_t errlen)
{
	struct otlp_config cfg = { .endpoint = strcmp(a->o->otlp, "env") ? a->o->otlp : NULL,
				   .requests = a->o->otlp_requests };

	a->otlp = otlp_exporter_new(&cfg, err, errlen);
	return a->otlp ? 0 : -1;
}

void agent_otlp_stop(struct agent *a)
{
	otlp_exporter_free(a->otlp);
	a->otlp = NULL;
}

#define MAX_RESOURCE_ATTRS 64

static int hex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 :
				      -1;
}

/* s with its %XX decoded, in place, and the spaces around it trimmed. */
static char *decoded(char *s)
{
	char *out = s, *end;

	while (*s == ' ')
		s++;
	end = out = s;
	for (char *in = s; *in; in++) {
		if (in[0] == '%' && hex(in[1]) >= 0 && hex(in[2]) >= 0) {
			*end++ = (char)(hex(in[1]) * 16 + hex(in[2]));
			in += 2;
		} else {
			*end++ = *in;
		}
	}
	while (end > out && end[-1] == ' ')
		end--;
	*end = 0;
	return out;
}

/*
 * The process's OTEL_RESOURCE_ATTRIBUTES ("key=value,...", values percent-encoded, as the
 * OpenTelemetry specification writes them) into attrs, pointing into buf; service.name into
 * *service. A pair without '=' or with an empty key is left out, as the specification says.
 */
static unsigned int resource_attrs(pid_t pid, char *buf, size_t len, struct otlp_attr *attrs,
				   const char **service)
{
	unsigned int n = 0;
	char *save = NULL;

	if (!agent_proc_env(pid, "OTEL_RESOURCE_ATTRIBUTES", buf, len))
		return 0;
	for (char *pair = strtok_r(buf, ",", &save); pair && n < MAX_RESOURCE_ATTRS;
	     pair = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(pair, '='), *key;

		if (!eq)
			continue;
		*eq = 0;
		key = decoded(pair);
		if (!*key)
			continue;
		if (strcmp(key, "service.name") == 0)
			*service = decoded(eq + 1);
		else
			attrs[n++] =
				(struct otlp_attr){ key, OTLP_STRING, { .s = decoded(eq + 1) } };
	}
	return n;
}

void agent_otlp_attach(struct agent *a, struct agent_proc *p)
{
	char exe[64] = "", service[sizeof(p->name) + 32], err[256], *env = malloc(65536);
	struct otlp_attr attrs[MAX_RESOURCE_ATTRS];
	struct otlp_resource desc = { .pid = (uint32_t)p->pid, .attrs = attrs };
	const char *from_attrs = NULL;

	if (!a->otlp || !env) {
		free(env);
		return;
	}
	if (lk__proc_comm(p->pid, 0, exe, sizeof(exe)) >= 0)
		desc.executable_name = exe;
	desc.nattrs = resource_attrs(p->pid, env, 65536, attrs, &from_attrs);
	/* the process's OTEL_SERVICE_NAME, its OTEL_RESOURCE_ATTRIBUTES', or unknown_service:NAME */
	if (p->has_service)
		desc.service_name = p->name;
	else if (from_attrs && *from_attrs)
		desc.service_name = from_attrs;
	else if (snprintf(service, sizeof(service), "unknown_service:%s", exe) > 0)
		desc.service_name = service;
	p->otlp_res = otlp_resource_new(a->otlp, &desc, err, sizeof(err));
	if (!p->otlp_res)
		fprintf(stderr, "lowkey agent: process %d's spans are not exported: %s\n",
			(int)p->pid, err);
	free(env);
}

void agent_otlp_detach(struct agent *a, struct agent_proc *p)
{
	agent_sample_free(a, p);
	if (p->otlp_res)
		otlp_resource_put(p->otlp_res);
	p->otlp_res = NULL;
}

void agent_otlp_stream_free(struct agent_stream *st)
{
	free(st->ids);
	free(st->thread_name);
	st->ids = NULL;
	st->thread_name = NULL;
	st->ids_cap = 0;
}

uint64_t agent_otlp_unix_ns(const struct lk__trace_reader *r, uint64_t tsc)
{
	uint64_t mono = lk__reader_ns(r, tsc);

	return mono >= r->monotonic0_ns ? r->realtime0_ns + (mono - r->monotonic0_ns) :
					  r->realtime0_ns;
}

void agent_otlp_begin(struct agent *a, struct agent_stream *st)
{
	size_t d = st->open.depth;
	struct agent_span_ids *ids;

	if (!a->otlp)
		return;
	if (d >= st->ids_cap) {
		size_t cap = d < 8 ? 16 : 2 * d;
		struct agent_span_ids *grown = realloc(st->ids, cap * sizeof(*grown));

		if (!grown)
			return; /* exported as a trace of its own (ids_of) */
		st->ids = grown;
		st->ids_cap = cap;
	}
	ids = &st->ids[d];
	if (d)
		memcpy(ids->trace, st->ids[d - 1].trace, sizeof(ids->trace));
	else
		otlp_new_trace_id(ids->trace);
	otlp_new_span_id(ids->span);
}

/* s's ids: those of the open span at depth k (k == SIZE_MAX: none, an event) under depth k - 1. */
static void ids_of(const struct agent_stream *st, size_t k, size_t parent, struct otlp_span *s)
{
	if (k != SIZE_MAX && k < st->ids_cap) {
		memcpy(s->trace_id, st->ids[k].trace, sizeof(s->trace_id));
		memcpy(s->span_id, st->ids[k].span, sizeof(s->span_id));
	}
	if (parent && parent - 1 < st->ids_cap) {
		if (k == SIZE_MAX)
			memcpy(s->trace_id, st->ids[parent - 1].trace, sizeof(s->trace_id));
		memcpy(s->parent_span_id, st->ids[parent - 1].span, sizeof(s->parent_span_id));
	}
}

void agent_otlp_end(struct agent *a, struct agent_proc *p, struct agent_stream *st, size_t k,
		    const struct lk__event *e)
{
	const struct lk__pair_open *o = &st->open.v[k];
	char name[2 * 256 + 2];
	struct otlp_span s = {
		.name = name,
		.start_unix_ns = agent_otlp_unix_ns(&p->r, o->tsc),
		.end_unix_ns = agent_otlp_unix_ns(&p->r, e->tsc),
		.pid = (uint32_t)p->pid,
		.tid = (uint32_t)st->cur.s.tid,
		.thread_name = st->thread_name,
		.thread_cpu_ns = p->r.cputime && e->cputime_ns > o->cpu ? e->cputime_ns - o->cpu :
									  0,
	};

	if (!a->otlp)
		return;
	snprintf(name, sizeof(name), "%s:%s", e->cls->provider, e->cls->event);
	ids_of(st, k, k, &s);
	agent_sample(a, p, e->cls, &s);
	if (!k)
		agent_sample_outer_end(p, st);
}

/* Argument i of e (at offset *off, moved past it) as an attribute; false past the record's end. */
static bool attr_of(const struct lk__event *e, size_t *off, unsigned int i, struct otlp_attr *at,
		    char *ptr, size_t ptrlen)
{
	unsigned int type = (e->cls->arg_types >> (4 * i)) & 0xf;
	const char *str = NULL;
	uint64_t v = 0;

	*off = lk__event_arg(e, *off, i, &v, &str);
	if (!*off) /* the record ends before it */
		return false;
	at->key = e->cls->arg_name[i];
	switch (type) {
	case LK_PROBE_I64:
	case LK_PROBE_U64: /* past INT64_MAX, as its two's complement: OTLP has no u64 */
		*at = (struct otlp_attr){ at->key, OTLP_INT, { .i = (int64_t)v } };
		break;
	case LK_PROBE_F64:
		at->type = OTLP_DOUBLE;
		memcpy(&at->v.d, &v, sizeof(at->v.d));
		break;
	case LK_PROBE_PTR:
		snprintf(ptr, ptrlen, "0x%" PRIx64, v);
		*at = (struct otlp_attr){ at->key, OTLP_STRING, { .s = ptr } };
		break;
	default:
		*at = (struct otlp_attr){ at->key, OTLP_STRING, { .s = str ? str : "" } };
	}
	return true;
}

static void thread_named(struct agent_stream *st, const struct lk__event *e)
{
	const char *str = NULL;
	uint64_t v;
	char *copy;

	lk__event_arg(e, 0, 0, &v, &str);
	copy = str ? strdup(str) : NULL;
	if (copy) {
		free(st->thread_name);
		st->thread_name = copy;
	}
}

void agent_otlp_event(struct agent *a, struct agent_proc *p, struct agent_stream *st,
		      const struct lk__event *e)
{
	struct otlp_attr args[LK_PROBE_MAX_ARGS];
	char name[2 * 256 + 2], ptrs[LK_PROBE_MAX_ARGS][24];
	struct otlp_span s = { .name = name, .pid = (uint32_t)p->pid };
	size_t off = 0;

	if (!a->otlp)
		return;
	if (e->cls->id == LK__EVENT_THREAD_NAME) {
		thread_named(st, e);
		return;
	}
	if (e->cls->kind != LK_PROBE_EVENT)
		return;
	for (s.nargs = 0; s.nargs < e->cls->nargs && s.nargs < LK_PROBE_MAX_ARGS; s.nargs++)
		if (!attr_of(e, &off, s.nargs, &args[s.nargs], ptrs[s.nargs], sizeof(ptrs[0])))
			break;
	snprintf(name, sizeof(name), "%s:%s", e->cls->provider, e->cls->event);
	s.start_unix_ns = s.end_unix_ns = agent_otlp_unix_ns(&p->r, e->tsc);
	s.tid = (uint32_t)st->cur.s.tid;
	s.thread_name = st->thread_name;
	s.args = args;
	s.is_event = true;
	ids_of(st, SIZE_MAX, st->open.depth, &s);
	agent_sample(a, p, e->cls, &s);
}

void agent_otlp_render(struct agent *a, FILE *f, bool openmetrics)
{
	const char *total = openmetrics ? "" : "_total";
	struct otlp_stats st;

	if (!a->otlp)
		return;
	otlp_exporter_stats(a->otlp, &st);
	fprintf(f,
		"# HELP lowkey_agent_otlp_spans_exported%s Spans and events the OTLP receiver "
		"accepted\n# TYPE lowkey_agent_otlp_spans_exported%s counter\n"
		"lowkey_agent_otlp_spans_exported_total %" PRIu64 "\n",
		total, total, st.exported);
	fprintf(f,
		"# HELP lowkey_agent_otlp_spans_dropped%s Spans and events not sent: the queue was "
		"full, or the receiver failed until the retries ran out\n"
		"# TYPE lowkey_agent_otlp_spans_dropped%s counter\n"
		"lowkey_agent_otlp_spans_dropped_total{reason=\"queue_full\"} %" PRIu64 "\n"
		"lowkey_agent_otlp_spans_dropped_total{reason=\"failed\"} %" PRIu64 "\n",
		total, total, st.dropped_full, st.dropped_failed);
	fprintf(f,
		"# HELP lowkey_agent_otlp_spans_queued Spans waiting to be sent\n"
		"# TYPE lowkey_agent_otlp_spans_queued gauge\n"
		"lowkey_agent_otlp_spans_queued %" PRIu64 "\n",
		st.queued);
	agent_sample_render(a, f, openmetrics);
}

void agent_otlp_summary(struct agent *a)
{
	struct otlp_stats st;

	if (!a->otlp)
		return;
	otlp_exporter_stats(a->otlp, &st);
	fprintf(stderr,
		"lowkey agent: OTLP: %" PRIu64 " spans exported, %" PRIu64
		" dropped (queue full), %" PRIu64 " dropped (failed), %" PRIu64
		" sampled out (--sample), %" PRIu64 " sampled out (--slow); %" PRIu64
		" still queued, sent now\n",
		st.exported, st.dropped_full, st.dropped_failed, a->sampled_out[AGENT_SAMPLED_RATE],
		a->sampled_out[AGENT_SAMPLED_TAIL], st.queued);
}
