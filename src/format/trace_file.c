// SPDX-License-Identifier: MIT
/*
 * A trace in any of lowkey's formats (trace_file.h): telling the format by content, and the
 * in-memory form the JSON and Perfetto readers fill, walked as a CTF trace is.
 */
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "probe/probe_internal.h"
#include "internal/trace_file.h"
#include "format/ctf/read.h"

/* ---- a map of numbers ---- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u; /* splitmix64's finalizer */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

static int map_grow(struct lk__tf_map *m)
{
	size_t n = m->keys ? (m->mask + 1) * 2 : 64, old = m->keys ? m->mask + 1 : 0;
	uint64_t *keys = malloc(n * sizeof(*keys)), *old_keys = m->keys;
	uint32_t *vals = malloc(n * sizeof(*vals)), *old_vals = m->vals;

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	memset(vals, 0xff, n * sizeof(*vals));
	m->keys = keys;
	m->vals = vals;
	m->mask = n - 1;
	for (size_t i = 0; i < old; i++) {
		size_t k = mix64(old_keys[i]) & m->mask;

		if (old_vals[i] == UINT32_MAX)
			continue;
		while (vals[k] != UINT32_MAX)
			k = (k + 1) & m->mask;
		keys[k] = old_keys[i];
		vals[k] = old_vals[i];
	}
	free(old_keys);
	free(old_vals);
	return 0;
}

int lk__tf_map_put(struct lk__tf_map *m, uint64_t key, uint32_t val)
{
	size_t k;

	if ((m->used + 1) * 2 > (m->keys ? m->mask + 1 : 0) && map_grow(m))
		return -ENOMEM;
	for (k = mix64(key) & m->mask; m->vals[k] != UINT32_MAX; k = (k + 1) & m->mask)
		if (m->keys[k] == key) {
			m->vals[k] = val;
			return 0;
		}
	m->keys[k] = key;
	m->vals[k] = val;
	m->used++;
	return 0;
}

bool lk__tf_map_get(const struct lk__tf_map *m, uint64_t key, uint32_t *val)
{
	if (!m->keys)
		return false;
	for (size_t k = mix64(key) & m->mask; m->vals[k] != UINT32_MAX; k = (k + 1) & m->mask)
		if (m->keys[k] == key) {
			*val = m->vals[k];
			return true;
		}
	return false;
}

uint32_t *lk__tf_map_at(const struct lk__tf_map *m, uint64_t key)
{
	if (!m->keys)
		return NULL;
	for (size_t k = mix64(key) & m->mask; m->vals[k] != UINT32_MAX; k = (k + 1) & m->mask)
		if (m->keys[k] == key)
			return &m->vals[k];
	return NULL;
}

uint32_t *lk__tf_map_add(struct lk__tf_map *m, uint64_t key, uint32_t val)
{
	uint32_t *at = lk__tf_map_at(m, key);

	if (at || lk__tf_map_put(m, key, val))
		return at;
	return lk__tf_map_at(m, key);
}

void lk__tf_map_free(struct lk__tf_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- event classes ---- */

static struct lk__event_class *new_class(uint32_t id, const char *provider, size_t plen,
					 const char *event, size_t elen, unsigned int kind)
{
	struct lk__event_class *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->id = id;
	c->kind = (uint8_t)kind;
	c->provider = strndup(provider, plen);
	c->event = strndup(event, elen);
	c->where = strdup("");
	c->arg_names = strdup("");
	if (!c->provider || !c->event || !c->where || !c->arg_names) {
		free(c->provider), free(c->event), free(c->where), free(c->arg_names), free(c);
		return NULL;
	}
	return c;
}

static int put_class(struct lk__trace_file *t, struct lk__event_class *c)
{
	if (c->id >= t->r.nclasses) {
		size_t n = t->r.nclasses ? t->r.nclasses * 2 : 64;
		struct lk__event_class **grown = realloc(t->r.classes, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		memset(grown + t->r.nclasses, 0, (n - t->r.nclasses) * sizeof(*grown));
		t->r.classes = grown;
		t->r.nclasses = n;
	}
	t->r.classes[c->id] = c;
	return 0;
}

/* lowkey's own events, at the ids the CTF reader gives them (the report knows them by id). */
static int builtin(struct lk__trace_file *t, uint32_t id, const char *event, unsigned int nargs,
		   uint32_t types, const char *const *names)
{
	struct lk__event_class *c = new_class(id, "lowkey", 6, event, strlen(event), 0);

	if (!c)
		return -ENOMEM;
	c->nargs = (uint8_t)nargs;
	c->arg_types = types;
	for (unsigned int i = 0; i < nargs; i++)
		snprintf(c->arg_name[i], sizeof(c->arg_name[i]), "%s", names[i]);
	if (put_class(t, c)) {
		free(c->provider), free(c->event), free(c->where), free(c->arg_names), free(c);
		return -ENOMEM;
	}
	return 0;
}

int lk__tf_init(struct lk__trace_file *t, enum lk__trace_format format)
{
	static const char *const name[] = { "name" }, *const out[] = { "cpu", "preempted" };

	t->format = format;
	t->format_name = format == LK__TF_JSON	   ? "Chrome JSON" :
			 format == LK__TF_PERFETTO ? "Perfetto" :
						     "CTF";
	t->r.dir_fd = -1;
	t->r.tsc_hz = 1000000000u;
	lk__reader_set_clock(&t->r);
	t->next_class = LK__FIRST_SITE_ID;
	if (builtin(t, LK__EVENT_THREAD_NAME, "thread_name", 1, LK_PROBE_STR, name) ||
	    builtin(t, LK__EVENT_SCHED_OUT, "sched_out", 2, LK_PROBE_U64 | LK_PROBE_U64 << 4,
		    out) ||
	    builtin(t, LK__EVENT_SCHED_IN, "sched_in", 1, LK_PROBE_U64, out))
		return -ENOMEM;
	return 0;
}

static uint64_t hash_bytes(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3u; /* FNV-1a */
	return (h ^ 0xff) * 0x100000001b3u;
}

/* The arguments a class without any given has: a counter's value, or none. */
static const struct lk__tf_args *default_args(unsigned int kind)
{
	static const struct lk__tf_args none,
		value = { .n = 1, .types = LK_PROBE_F64, .names = { "value" } };

	return kind == LK_PROBE_COUNTER ? &value : &none;
}

static uint64_t hash_class(unsigned int kind, const char *provider, size_t plen, const char *event,
			   size_t elen, unsigned int nargs, uint32_t types, const char (*names)[64])
{
	uint64_t h = hash_bytes(hash_bytes(kind, provider, plen), event, elen);

	h = (h ^ nargs ^ (uint64_t)types << 8) * 0x100000001b3u;
	for (unsigned int i = 0; i < nargs; i++)
		h = hash_bytes(h, names[i], strlen(names[i]));
	return h;
}

static bool same_args(const struct lk__event_class *c, const struct lk__tf_args *a)
{
	if (c->nargs != a->n || c->arg_types != a->types)
		return false;
	for (unsigned int i = 0; i < a->n; i++)
		if (strcmp(c->arg_name[i], a->names[i]) != 0)
			return false;
	return true;
}

static bool same_class(const struct lk__event_class *c, const char *provider, size_t plen,
		       const char *event, size_t elen, unsigned int kind,
		       const struct lk__tf_args *a)
{
	return c->kind == kind && strlen(c->provider) == plen &&
	       memcmp(c->provider, provider, plen) == 0 && strlen(c->event) == elen &&
	       memcmp(c->event, event, elen) == 0 && same_args(c, a);
}

static int grow_class_slots(struct lk__trace_file *t)
{
	size_t n = t->class_slots ? (t->class_mask + 1) * 2 : 256;
	uint32_t *slots = calloc(n, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	free(t->class_slots);
	t->class_slots = slots;
	t->class_mask = n - 1;
	for (size_t id = LK__FIRST_SITE_ID; id < t->next_class; id++) {
		const struct lk__event_class *c = t->r.classes[id];
		uint64_t h = hash_class(c->kind, c->provider, strlen(c->provider), c->event,
					strlen(c->event), c->nargs, c->arg_types, c->arg_name);
		size_t k = h & t->class_mask;

		while (slots[k])
			k = (k + 1) & t->class_mask;
		slots[k] = (uint32_t)id;
	}
	return 0;
}

int lk__tf_class(struct lk__trace_file *t, const char *provider, size_t plen, const char *event,
		 size_t elen, unsigned int kind, uint32_t *id)
{
	return lk__tf_class_args(t, provider, plen, event, elen, kind, NULL, id);
}

int lk__tf_class_args(struct lk__trace_file *t, const char *provider, size_t plen,
		      const char *event, size_t elen, unsigned int kind,
		      const struct lk__tf_args *a, uint32_t *id)
{
	uint64_t h;
	uint32_t next = t->next_class;
	struct lk__event_class *c;
	size_t k;

	if ((size_t)(next - LK__FIRST_SITE_ID + 1) * 2 > (t->class_slots ? t->class_mask + 1 : 0) &&
	    grow_class_slots(t))
		return -ENOMEM;
	if (!a)
		a = default_args(kind);
	h = hash_class(kind, provider, plen, event, elen, a->n, a->types, a->names);
	for (k = h & t->class_mask; t->class_slots[k]; k = (k + 1) & t->class_mask)
		if (same_class(t->r.classes[t->class_slots[k]], provider, plen, event, elen, kind,
			       a)) {
			*id = t->class_slots[k];
			return 0;
		}
	if (next > LK__MAX_EVENT_ID)
		return -E2BIG;
	c = new_class(next, provider, plen, event, elen, kind);
	if (!c)
		return -ENOMEM;
	c->nargs = (uint8_t)a->n;
	c->arg_types = a->types;
	memcpy(c->arg_name, a->names, sizeof(c->arg_name));
	if (put_class(t, c)) {
		free(c->provider), free(c->event), free(c->where), free(c->arg_names), free(c);
		return -ENOMEM;
	}
	t->class_slots[k] = next;
	t->next_class = next + 1;
	*id = next;
	return 0;
}

/* ---- threads and their events ---- */

struct lk__tf_thread *lk__tf_thread(struct lk__trace_file *t, int tid)
{
	uint32_t i;

	if (lk__tf_map_get(&t->thread_of, (uint64_t)tid, &i))
		return &t->threads[i];
	if (t->nthreads == t->capthreads) {
		size_t cap = t->capthreads ? t->capthreads * 2 : 16;
		struct lk__tf_thread *grown = realloc(t->threads, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		t->threads = grown;
		t->capthreads = cap;
	}
	if (t->nthreads >= UINT32_MAX - 1 ||
	    lk__tf_map_put(&t->thread_of, (uint64_t)tid, (uint32_t)t->nthreads))
		return NULL;
	memset(&t->threads[t->nthreads], 0, sizeof(t->threads[0]));
	t->threads[t->nthreads].tid = tid;
	return &t->threads[t->nthreads++];
}

static int push_event(struct lk__trace_file *t, struct lk__tf_stream *s, uint32_t cls, uint64_t ns,
		      uint64_t cpu_ns, const void *payload, size_t len)
{
	if (len > UINT32_MAX)
		return -E2BIG;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8; /* small: a file may name many threads */
		struct lk__tf_event *grown = realloc(s->v, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		s->v = grown;
		s->cap = cap;
	}
	if (t->capbytes - t->nbytes < len) {
		size_t cap = t->capbytes ? t->capbytes : 4096;
		uint8_t *grown;

		while (cap - t->nbytes < len)
			cap *= 2;
		grown = realloc(t->bytes, cap);
		if (!grown)
			return -ENOMEM;
		t->bytes = grown;
		t->capbytes = cap;
	}
	if (len)
		memcpy(t->bytes + t->nbytes, payload, len);
	s->v[s->n++] = (struct lk__tf_event){ ns, cpu_ns, t->nbytes, cls, (uint32_t)len };
	t->nbytes += len;
	if (cls == LK__EVENT_THREAD_NAME)
		return 0; /* a name has no time of its own in JSON and Perfetto */
	if (!t->have_base || ns < t->base_ns)
		t->base_ns = ns;
	t->have_base = true;
	return 0;
}

int lk__tf_event(struct lk__trace_file *t, struct lk__tf_thread *th, uint32_t cls, uint64_t ns,
		 uint64_t cpu_ns, const void *payload, size_t len)
{
	return push_event(t, &th->probes, cls, ns, cpu_ns, payload, len);
}

int lk__tf_thread_name(struct lk__trace_file *t, struct lk__tf_thread *th, uint64_t ns,
		       const char *name, size_t len)
{
	char buf[LK_PROBE_STRING_MAX + 1];
	const char *nul = memchr(name, 0, len);

	if (nul)
		len = (size_t)(nul - name);
	if (len > LK_PROBE_STRING_MAX)
		len = LK_PROBE_STRING_MAX;
	memcpy(buf, name, len);
	buf[len] = 0;
	return push_event(t, &th->probes, LK__EVENT_THREAD_NAME, ns, 0, buf, len + 1);
}

int lk__tf_arg(struct lk__tf_args *a, const char *name, size_t nlen, unsigned int type,
	       uint64_t raw, const char *str, size_t slen)
{
	size_t need = type == LK_PROBE_STR ? slen + 1 : 8;

	if (a->n == LK_PROBE_MAX_ARGS)
		return -E2BIG;
	if (type == LK_PROBE_STR && memchr(str, 0, slen))
		slen = strlen(str), need = slen + 1; /* what a C string holds */
	if (a->cap - a->len < need) {
		size_t cap = a->cap ? a->cap : 256;
		uint8_t *grown;

		while (cap - a->len < need)
			cap *= 2;
		grown = realloc(a->payload, cap);
		if (!grown)
			return -ENOMEM;
		a->payload = grown;
		a->cap = cap;
	}
	if (type == LK_PROBE_STR) {
		memcpy(a->payload + a->len, str, slen);
		a->payload[a->len + slen] = 0;
	} else {
		memcpy(a->payload + a->len, &raw, 8);
	}
	a->len += need;
	if (nlen >= sizeof(a->names[0]))
		nlen = sizeof(a->names[0]) - 1;
	memcpy(a->names[a->n], name, nlen);
	a->names[a->n][nlen] = 0;
	a->types |= (uint32_t)type << (4 * a->n);
	a->n++;
	return 0;
}

void lk__tf_args_reset(struct lk__tf_args *a)
{
	a->n = 0;
	a->types = 0;
	a->len = 0;
}

void lk__tf_args_free(struct lk__tf_args *a)
{
	free(a->payload);
	memset(a, 0, sizeof(*a));
}

int lk__tf_counter(struct lk__trace_file *t, struct lk__tf_thread *th, uint32_t cls, uint64_t ns,
		   double value)
{
	return push_event(t, &th->probes, cls, ns, 0, &value, sizeof(value));
}

int lk__tf_switch(struct lk__trace_file *t, struct lk__tf_thread *th, uint32_t cls, uint64_t ns,
		  const void *payload, size_t len)
{
	t->r.sched = true;
	return push_event(t, &th->sched, cls, ns, 0, payload, len);
}

int lk__tf_off_cpu(struct lk__trace_file *t, struct lk__tf_thread *th, uint64_t out_ns,
		   uint64_t in_ns, bool preempted, uint64_t cpu, uint64_t next_cpu)
{
	const struct lk__tf_event *last = th->sched.n ? &th->sched.v[th->sched.n - 1] : NULL;
	uint64_t out[2] = { cpu, preempted };
	int rc;

	if ((last && (last->cls == LK__EVENT_SCHED_OUT || out_ns < last->ns)) || in_ns < out_ns)
		return -ERANGE; /* the report looks intervals up by time: they must come in order */
	rc = push_event(t, &th->sched, LK__EVENT_SCHED_OUT, out_ns, 0, out, sizeof(out));

	t->r.sched = true;
	if (rc || in_ns == UINT64_MAX)
		return rc;
	return push_event(t, &th->sched, LK__EVENT_SCHED_IN, in_ns, 0, &next_cpu, sizeof(next_cpu));
}

/* ---- walking it as the CTF reader walks a trace ---- */

/* Threads in the order of CTF's stream files: by the tid's decimal digits, as text. */
static int by_stream_name(const void *a, const void *b, void *arg)
{
	const struct lk__tf_thread *threads = arg;
	char x[16], y[16];

	snprintf(x, sizeof(x), "%d", threads[*(const size_t *)a].tid);
	snprintf(y, sizeof(y), "%d", threads[*(const size_t *)b].tid);
	return strcmp(x, y);
}

static void memory_cursor(struct lk__tf_cursor *c, const struct lk__trace_file *t,
			  const struct lk__tf_thread *th, unsigned int stream_id)
{
	memset(c, 0, sizeof(*c));
	c->t = t;
	c->v = stream_id ? &th->sched : &th->probes;
	c->s = (struct lk__stream_info){ th->tid, stream_id, t->r.dir,
					 0,	  c->v->n,   stream_id ? 0 : th->lost,
					 0 };
	c->ctf.fd = -1;
}

/* A cursor on each thread's events, and on its switches if it has any, in CTF's order. */
static int memory_cursors(struct lk__trace_file *t, struct lk__tf_cursor *v, size_t *n)
{
	size_t *order = malloc((t->nthreads + 1) * sizeof(*order));

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < t->nthreads; i++)
		order[i] = i;
	qsort_r(order, t->nthreads, sizeof(*order), by_stream_name, t->threads);
	*n = 0;
	for (size_t i = 0; i < t->nthreads; i++) {
		const struct lk__tf_thread *th = &t->threads[order[i]];

		memory_cursor(&v[(*n)++], t, th, 0);
		if (th->sched.n)
			memory_cursor(&v[(*n)++], t, th, 1);
	}
	free(order);
	return 0;
}

/* Past this many streams, a CTF cursor opens its file only to read a packet: descriptors are few. */
#define MANY_STREAMS 64

static int ctf_cursors(struct lk__trace_file *t, struct lk__tf_cursor **v, size_t *n, char *err,
		       size_t errlen)
{
	char **names = NULL;
	int count = lk__reader_streams(&t->r, &names), rc = 0;

	if (count < 0)
		return lk__failf(err, errlen, count, "cannot list %s: %s", t->r.dir,
				 strerror(-count));
	*v = calloc((size_t)count + 1, sizeof(**v));
	if (!*v)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory");
	for (int i = 0; i < count; i++) {
		if (!rc) {
			(*v)[i].t = t;
			rc = lk__ctf_cursor_open(&(*v)[i].ctf, &t->r, names[i],
						 count > MANY_STREAMS, err, errlen);
			*n = (size_t)i + !rc;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int lk__tf_cursors_open(struct lk__trace_file *t, struct lk__tf_cursor **v, size_t *n, char *err,
			size_t errlen)
{
	int rc;

	*v = NULL;
	*n = 0;
	if (t->format == LK__TF_CTF)
		rc = ctf_cursors(t, v, n, err, errlen);
	else if (!(*v = calloc(2 * t->nthreads + 1, sizeof(**v))) || memory_cursors(t, *v, n))
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory");
	else
		rc = 0;
	if (rc) {
		lk__tf_cursors_close(*v, *n);
		*v = NULL;
		*n = 0;
	}
	return rc;
}

void lk__tf_cursors_close(struct lk__tf_cursor *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!v[i].v)
			lk__ctf_cursor_close(&v[i].ctf);
	free(v);
}

int lk__tf_cursor_next(struct lk__tf_cursor *c, struct lk__event *e)
{
	const struct lk__tf_event *v;

	if (!c->v)
		return lk__ctf_cursor_next(&c->ctf, e);
	if (c->pos == c->v->n)
		return 0;
	v = &c->v->v[c->pos++];
	/* from 1, not 0: the report takes a time of 0 for none (a foreign CTF's are never 0) */
	*e = (struct lk__event){ c->s.tid,
				 c->t->format == LK__TF_FOREIGN_CTF ? v->ns :
				 v->cls == LK__EVENT_THREAD_NAME    ? 1 :
								      v->ns - c->t->base_ns + 1,
				 v->cpu_ns,
				 c->t->r.classes[v->cls],
				 v->len ? c->t->bytes + v->at : NULL,
				 v->len };
	return 1;
}

int lk__tf_cursor_count(struct lk__tf_cursor *c, uint64_t *events, struct lk__event *e)
{
	if (!c->v)
		return lk__ctf_cursor_count(&c->ctf, events, e);
	for (; c->pos < c->v->n; c->pos++, (*events)++)
		if (c->v->v[c->pos].cls == LK__EVENT_THREAD_NAME)
			return lk__tf_cursor_next(c, e);
	return 0;
}

void lk__tf_cursor_rewind(struct lk__tf_cursor *c)
{
	if (c->v)
		c->pos = 0;
	else
		lk__ctf_cursor_rewind(&c->ctf);
}

const struct lk__stream_info *lk__tf_cursor_info(const struct lk__tf_cursor *c)
{
	return c->v ? &c->s : &c->ctf.s;
}

int lk__tf_cursor_error(const struct lk__tf_cursor *c, int rc, char *err, size_t errlen)
{
	if (c->v)
		return lk__failf(err, errlen, rc, "%s", strerror(-rc));
	return lk__ctf_cursor_error(&c->ctf, rc, err, errlen);
}

static int by_time(const void *a, const void *b)
{
	const struct lk__tf_event *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at; /* payloads are stored in the file's order */
}

static void sort_stream(struct lk__tf_stream *s)
{
	for (size_t i = 1; i < s->n; i++)
		if (s->v[i].ns < s->v[i - 1].ns) {
			qsort(s->v, s->n, sizeof(*s->v), by_time);
			return;
		}
}

void lk__tf_sort_streams(struct lk__trace_file *t)
{
	for (size_t i = 0; i < t->nthreads; i++) {
		sort_stream(&t->threads[i].probes);
		sort_stream(&t->threads[i].sched);
	}
}

/* A stream between its callbacks. */
static int walk_cursor(struct lk__tf_cursor *c, const struct lk__reader_ops *ops, void *arg)
{
	struct lk__event e;
	int rc = ops->stream_begin ? ops->stream_begin(&c->s, arg) : 0;

	while (!rc && (rc = lk__tf_cursor_next(c, &e)) == 1)
		rc = ops->event(&e, arg);
	if (!rc && ops->stream_end)
		rc = ops->stream_end(&c->s, arg);
	return rc;
}

int lk__trace_file_walk(struct lk__trace_file *t, const struct lk__reader_ops *ops, void *arg,
			char *err, size_t errlen)
{
	struct lk__tf_cursor *v;
	size_t n;
	int rc;

	if (t->format == LK__TF_CTF)
		return lk__reader_walk(&t->r, ops, arg, err, errlen);
	rc = lk__tf_cursors_open(t, &v, &n, err, errlen);
	for (size_t i = 0; i < n && !rc; i++)
		rc = walk_cursor(&v[i], ops, arg);
	lk__tf_cursors_close(v, n);
	if (rc == -ENOMEM)
		lk__failf(err, errlen, rc, "out of memory");
	return rc;
}

/* ---- opening ---- */

int lk__trace_file_parse(struct lk__trace_file *t, const uint8_t *data, size_t len,
			 const char *name, char *err, size_t errlen)
{
	size_t i = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	t->r.dir_fd = -1;
	if (len == 0)
		return lk__failf(err, errlen, -EINVAL, "%s is not a lowkey trace: it is empty",
				 name);
	/* Perfetto: Trace.packet's key (field 1, length-delimited), the byte JSON takes for a newline */
	while (data[0] != 0x0a && i < len &&
	       (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
		i++;
	if (len >= 6 && memcmp(data, "/* CTF", 6) == 0)
		return lk__failf(err, errlen, -EINVAL,
				 "%s is a CTF trace's metadata: give lowkey report the trace's "
				 "directory",
				 name);
	if (i == len || (data[0] != 0x0a && data[i] != '{'))
		return lk__failf(
			err, errlen, -EINVAL,
			"%s is not a lowkey trace: not a CTF trace's directory, nor Chrome JSON, nor Perfetto "
			"protobuf (it begins with the byte 0x%02x)",
			name, data[i < len ? i : 0]);
	rc = lk__tf_init(t, data[0] == 0x0a ? LK__TF_PERFETTO : LK__TF_JSON);
	if (!rc)
		t->r.dir = strdup(name);
	if (rc || !t->r.dir)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory reading %s", name);
	else if (t->format == LK__TF_JSON)
		rc = lk__chrome_json_read(t, (const char *)data, len, name, err, errlen);
	else
		rc = lk__perfetto_read(t, data, len, name, err, errlen);
	if (!rc && lk__reader_packet_hook && len > t->parsed)
		lk__reader_packet_hook(len - t->parsed); /* the rest since the last step */
	if (rc)
		lk__trace_file_close(t);
	return rc;
}

/* Bytes read or parsed between two reports to the progress hook: a clock read each (progress.c). */
#define RT_PROGRESS_STEP (256u << 10)

void lk__tf_parsed(struct lk__trace_file *t, size_t at)
{
	if (lk__reader_packet_hook && at >= t->parsed + RT_PROGRESS_STEP) {
		lk__reader_packet_hook(at - t->parsed);
		t->parsed = at;
	}
}

/*
 * A regular file, read whole: its size bounds what is allocated. Read, not mapped (see reader.h).
 * Read in steps, each told to the progress hook: a large file out of the page cache takes a while.
 */
static int read_file(int fd, const char *path, uint8_t **data, size_t *len, char *err,
		     size_t errlen)
{
	struct stat st;
	size_t done = 0;

	if (fstat(fd, &st) != 0)
		return lk__failf(err, errlen, -errno, "cannot read %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return lk__failf(err, errlen, -EINVAL,
				 "%s is not a lowkey trace: neither a directory nor a regular file",
				 path);
	if ((uint64_t)st.st_size >= SIZE_MAX / 2)
		return lk__failf(err, errlen, -EFBIG, "%s is too large to read", path);
	*data = malloc((size_t)st.st_size + 1);
	if (!*data)
		return lk__failf(err, errlen, -ENOMEM, "out of memory reading %s (%lld bytes)",
				 path, (long long)st.st_size);
	while (done < (size_t)st.st_size) {
		size_t left = (size_t)st.st_size - done;
		ssize_t n = read(fd, *data + done,
				 left < RT_PROGRESS_STEP * 16 ? left : RT_PROGRESS_STEP * 16);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			free(*data);
			return lk__failf(err, errlen, -e, "cannot read %s: %s", path, strerror(e));
		}
		if (n == 0)
			break; /* it shrank meanwhile: what is there */
		done += (size_t)n;
		if (lk__reader_packet_hook)
			lk__reader_packet_hook((uint64_t)n);
	}
	*len = done;
	return 0;
}

/*
 * Whether directory fd holds a trace of lowkey's writer: its metadata begins as ctf.c writes
 * every one (the first line, then lowkey's first type), or it has the index of a trace older
 * than format 3. Not when it has neither file: LTTng keeps its traces below the directory named.
 * An unreadable metadata is lowkey's reader's, which says why.
 */
static bool written_by_lowkey(int fd)
{
	static const char head[] = METADATA_FIRST_LINE
		"\n\ntypealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n";
	char buf[sizeof(head) - 1];
	int md = openat(fd, METADATA_NAME, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ssize_t n;

	if (md < 0)
		return errno != ENOENT || faccessat(fd, INDEX_NAME, F_OK, 0) == 0;
	n = pread(md, buf, sizeof(buf), 0);
	close(md);
	return n < 0 || ((size_t)n == sizeof(buf) && memcmp(buf, head, sizeof(buf)) == 0) ||
	       faccessat(fd, INDEX_NAME, F_OK, 0) == 0;
}

static int found_metadata(const char *path, const struct stat *st, int type, struct FTW *at)
{
	(void)st;
	return type == FTW_F && strcmp(path + at->base, METADATA_NAME) == 0;
}

static int open_foreign_ctf(struct lk__trace_file *t, const char *path, char *err, size_t errlen)
{
	int rc;

	/* what is no CTF trace at all is said so, whether libbabeltrace2 is there or not */
	if (nftw(path, found_metadata, 16, FTW_PHYS) != 1)
		return lk__failf(err, errlen, -EINVAL,
				 "%s: not a CTF trace: no metadata file in it or below it", path);
	rc = lk__tf_init(t, LK__TF_FOREIGN_CTF);

	if (!rc)
		t->r.dir = strdup(path);
	if (rc || !t->r.dir)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory reading %s", path);
	else
		rc = lk__ctf_foreign_read(t, path, err, errlen);
	if (rc)
		lk__trace_file_close(t);
	return rc;
}

int lk__trace_file_open(struct lk__trace_file *t, const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), rc;
	uint8_t *data = NULL;
	size_t len = 0;
	struct stat st;
	bool dir = fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);

	memset(t, 0, sizeof(*t));
	t->r.dir_fd = -1;
	if (dir && !written_by_lowkey(fd)) {
		close(fd);
		return open_foreign_ctf(t, path, err, errlen);
	}
	if (fd < 0 || dir) {
		if (fd >= 0)
			close(fd);
		t->format = LK__TF_CTF;
		t->format_name = "CTF";
		return lk__reader_open(&t->r, path, err,
				       errlen); /* it says why it cannot be opened */
	}
	rc = read_file(fd, path, &data, &len, err, errlen);
	close(fd);
	if (rc) {
		memset(t, 0, sizeof(*t));
		t->r.dir_fd = -1;
		return rc;
	}
	rc = lk__trace_file_parse(t, data, len, path, err, errlen);
	free(data);
	return rc;
}

void lk__trace_file_close(struct lk__trace_file *t)
{
	for (size_t i = 0; i < t->nthreads; i++) {
		free(t->threads[i].probes.v);
		free(t->threads[i].sched.v);
		free(t->threads[i].open);
	}
	free(t->threads);
	free(t->class_slots);
	free(t->bytes);
	lk__tf_map_free(&t->thread_of);
	lk__tf_args_free(&t->args);
	lk__reader_close(&t->r);
	t->threads = NULL;
	t->nthreads = t->capthreads = 0;
	t->class_slots = NULL;
	t->bytes = NULL;
}
