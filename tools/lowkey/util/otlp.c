// SPDX-License-Identifier: MIT
/*
 * The OTLP exporter (otlp.h): a bounded queue of span copies that callers fill without waiting,
 * and a few threads that empty it in batches over HTTP, each batch on one thread (its encoding,
 * its request and its retries with backoff), each thread with a connection of its own. The
 * queue's lock is held only to link spans in and out and to add to the counts, never across a
 * request.
 */
#include "otlp_internal.h"

#include <internal/failf.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* A thread sending batches, one request at a time on its own connection. */
struct otlp_sender {
	struct otlp_exporter *e;
	struct otlp_http *http;
	struct otlp_item **items; /* the batch under way */
	pthread_t thread;
};

struct otlp_exporter {
	/* Set at creation, read-only after. */
	char *url;
	bool gzip;
	long timeout_ms;
	size_t queue_max;
	unsigned int batch_max, batch_ms, retry_max_ms, shutdown_ms, backoff_min_ms, backoff_max_ms;
	struct otlp_kv *headers, *env_attrs;
	size_t nheaders, nenv_attrs;
	struct otlp_sender *senders;
	unsigned int nsenders, started;
	_Atomic int64_t abort_at_ms; /* the shutdown's deadline, for a request under way */

	/* Under lock. */
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* the senders: a batch is due, or stop */
	pthread_cond_t stopped; /* a sender waiting out a backoff: stop */
	struct otlp_item *head, **tail;
	size_t count;		/* spans waiting in the queue */
	size_t in_flight;	/* spans in the batches under way, all senders' */
	struct timespec oldest; /* when the queue last became non-empty (CLOCK_MONOTONIC) */
	bool stopping;
	struct timespec stop_by;
	struct otlp_stats stats;
	char last_error[512];
};

static void add_ms(struct timespec *ts, long ms)
{
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void now_plus(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	add_ms(ts, ms);
}

static long ms_until(const struct timespec *ts)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (ts->tv_sec - now.tv_sec) * 1000 + (ts->tv_nsec - now.tv_nsec) / 1000000L;
}

/* Ids */

static __thread uint64_t rng[4];

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256**, seeded once a thread from getrandom (splitmix64 where that fails). */
static uint64_t rng_next(void)
{
	uint64_t r, t;

	if (!(rng[0] | rng[1] | rng[2] | rng[3])) {
		if (getrandom(rng, sizeof(rng), 0) != (ssize_t)sizeof(rng)) {
			uint64_t z = (uint64_t)(uintptr_t)&r ^ (uint64_t)time(NULL);

			for (int i = 0; i < 4; i++) {
				z += 0x9e3779b97f4a7c15ull;
				rng[i] = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			}
		}
		rng[0] |= 1;
	}
	r = rotl(rng[1] * 5, 7) * 9;
	t = rng[1] << 17;
	rng[2] ^= rng[0];
	rng[3] ^= rng[1];
	rng[1] ^= rng[2];
	rng[0] ^= rng[3];
	rng[2] ^= t;
	rng[3] = rotl(rng[3], 45);
	return r;
}

static void random_id(uint8_t *id, size_t n)
{
	do {
		for (size_t i = 0; i < n; i += 8) {
			uint64_t v = rng_next();

			memcpy(id + i, &v, n - i < 8 ? n - i : 8);
		}
	} while (!memcmp(id, (uint8_t[16]){ 0 }, n));
}

void otlp_new_trace_id(uint8_t id[16])
{
	random_id(id, 16);
}

void otlp_new_span_id(uint8_t id[8])
{
	random_id(id, 8);
}

/* Resources and items */

struct otlp_res *otlp_resource_new(struct otlp_exporter *e, const struct otlp_resource *desc,
				   char *err, size_t errlen)
{
	struct otlp_res *r = calloc(1, sizeof(*r));

	if (!r) {
		lk__failf(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	atomic_init(&r->refs, 1);
	if (otlp_res_build(r, desc, e->env_attrs, e->nenv_attrs)) {
		otlp_res_release(r);
		lk__failf(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	return r;
}

void otlp_resource_put(struct otlp_res *r)
{
	if (r && atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1)
		otlp_res_release(r);
}

static size_t str_size(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

static char *str_put(char **at, const char *s)
{
	char *copy = *at;
	size_t len = str_size(s);

	if (!s)
		return NULL;
	memcpy(copy, s, len);
	*at += len;
	return copy;
}

static size_t item_size(const struct otlp_span *s)
{
	size_t sz = sizeof(struct otlp_item) + s->nargs * sizeof(struct otlp_attr);

	sz += str_size(s->name) + str_size(s->thread_name);
	for (unsigned int i = 0; i < s->nargs; i++) {
		sz += str_size(s->args[i].key);
		if (s->args[i].type == OTLP_STRING)
			sz += str_size(s->args[i].v.s);
	}
	return sz;
}

static void item_ids(struct otlp_span *s)
{
	if (!memcmp(s->trace_id, (uint8_t[16]){ 0 }, 16)) {
		otlp_new_trace_id(s->trace_id);
		otlp_new_span_id(s->span_id);
		memset(s->parent_span_id, 0, sizeof(s->parent_span_id));
	} else if (!memcmp(s->span_id, (uint8_t[8]){ 0 }, 8)) {
		otlp_new_span_id(s->span_id);
	}
}

struct otlp_item *otlp_item_new(struct otlp_res *r, const struct otlp_span *s)
{
	struct otlp_item *it = malloc(item_size(s));
	struct otlp_attr *args;
	char *at;

	if (!it)
		return NULL;
	it->next = NULL;
	it->res = r;
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
	it->span = *s;
	args = (struct otlp_attr *)(it + 1);
	at = (char *)(args + s->nargs);
	it->span.args = s->nargs ? args : NULL;
	it->span.name = str_put(&at, s->name);
	it->span.thread_name = str_put(&at, s->thread_name);
	for (unsigned int i = 0; i < s->nargs; i++) {
		args[i] = s->args[i];
		args[i].key = str_put(&at, s->args[i].key);
		if (args[i].type == OTLP_STRING)
			args[i].v.s = str_put(&at, s->args[i].v.s);
	}
	item_ids(&it->span);
	return it;
}

static void item_free(struct otlp_item *it)
{
	otlp_resource_put(it->res);
	free(it);
}

/* The queue */

bool otlp_export(struct otlp_exporter *e, struct otlp_res *r, const struct otlp_span *s)
{
	struct otlp_item *it = otlp_item_new(r, s);
	bool wake;

	pthread_mutex_lock(&e->lock);
	/* The bound is on every span held, those in requests under way too. */
	if (!it || e->count + e->in_flight >= e->queue_max) {
		e->stats.dropped_full++;
		pthread_mutex_unlock(&e->lock);
		if (it)
			item_free(it);
		return false;
	}
	if (!e->count)
		clock_gettime(CLOCK_MONOTONIC, &e->oldest);
	*e->tail = it;
	e->tail = &it->next;
	e->count++;
	e->stats.accepted++;
	/*
	 * A sender waits for a first span without a deadline, then for a batch with one; each
	 * further full batch wakes one more.
	 */
	wake = e->count == 1 || e->count % e->batch_max == 0;
	pthread_mutex_unlock(&e->lock);
	if (wake)
		pthread_cond_signal(&e->wake);
	return true;
}

/* Under lock: wait for a batch to be due (full, old enough, or stopping); false: nothing left. */
static bool wait_batch(struct otlp_exporter *e)
{
	for (;;) {
		if (e->stopping)
			return e->count > 0;
		if (e->count >= e->batch_max)
			return true;
		if (e->count) {
			struct timespec due = e->oldest;

			add_ms(&due, e->batch_ms);
			if (ms_until(&due) <= 0)
				return true;
			pthread_cond_timedwait(&e->wake, &e->lock, &due);
		} else {
			pthread_cond_wait(&e->wake, &e->lock);
		}
	}
}

/* Under lock: the batch's items off the queue's head; a full batch left wakes another sender. */
static size_t take_batch(struct otlp_exporter *e, struct otlp_item **items)
{
	size_t n = 0;

	while (e->head && n < e->batch_max) {
		items[n++] = e->head;
		e->head = e->head->next;
	}
	if (!e->head)
		e->tail = &e->head;
	e->count -= n;
	e->in_flight += n;
	if (e->count)
		clock_gettime(CLOCK_MONOTONIC, &e->oldest);
	if (e->count >= e->batch_max)
		pthread_cond_signal(&e->wake);
	return n;
}

/*
 * Under lock: sleep ms, or less when stopping (the shutdown's deadline). Not on wake: a sender
 * backing off must not take the signal meant for one that would send.
 */
static void backoff_sleep(struct otlp_exporter *e, long ms)
{
	struct timespec until;

	now_plus(&until, ms);
	while (ms_until(&until) > 0) {
		if (e->stopping && ms_until(&e->stop_by) < ms_until(&until))
			until = e->stop_by;
		if (ms_until(&until) <= 0)
			break;
		pthread_cond_timedwait(&e->stopped, &e->lock, &until);
	}
}

static long jittered(long ms)
{
	/* Between half and all of it, so that agents restarted together do not retry together. */
	return ms / 2 + (long)(rng_next() % (uint64_t)(ms / 2 + 1));
}

/* Under lock: how long a request may take now (the shutdown's deadline cuts it). */
static long request_timeout(struct otlp_exporter *e)
{
	long t = e->timeout_ms;

	if (e->stopping && ms_until(&e->stop_by) < t)
		t = ms_until(&e->stop_by);
	return t;
}

/* Under lock: a batch under way is over, its spans exported or dropped. */
static void account(struct otlp_exporter *e, uint64_t exported, uint64_t dropped)
{
	e->stats.exported += exported;
	e->stats.dropped_failed += dropped;
	e->in_flight -= exported + dropped;
}

/* Send body (n spans) until it is accepted, refused for good, or its retries run out. */
static void send_batch(struct otlp_sender *w, const uint8_t *body, size_t len, size_t n)
{
	struct otlp_exporter *e = w->e;
	struct timespec give_up;
	long backoff = e->backoff_min_ms;
	struct otlp_http_result res;

	now_plus(&give_up, e->retry_max_ms);
	for (unsigned int attempt = 0;; attempt++) {
		long timeout = request_timeout(e), wait;

		if (timeout <= 0)
			break;
		pthread_mutex_unlock(&e->lock);
		otlp_http_post(w->http, body, len, timeout, &res);
		pthread_mutex_lock(&e->lock);
		e->stats.requests++;
		e->stats.retries += attempt > 0;
		e->stats.bytes_sent += len;
		if (res.status >= 200 && res.status < 300) {
			uint64_t rejected = res.rejected < n ? res.rejected : n;

			account(e, n - rejected, rejected);
			return;
		}
		e->stats.failed_requests++;
		snprintf(e->last_error, sizeof(e->last_error), "%.200s: %.255s", e->url, res.error);
		if (!otlp_http_retryable(res.status))
			break;
		wait = res.retry_after_ms >= 0 ? res.retry_after_ms : jittered(backoff);
		backoff = backoff * 2 < e->backoff_max_ms ? backoff * 2 : e->backoff_max_ms;
		if (wait > ms_until(&give_up))
			break;
		backoff_sleep(e, wait);
	}
	account(e, 0, n);
}

/* Under lock: encode and send one batch (the lock is let go for the work). */
static void export_batch(struct otlp_sender *w, size_t n)
{
	struct otlp_exporter *e = w->e;
	struct otlp_item **items = w->items;
	uint8_t *pb = NULL, *gz = NULL;
	size_t pb_len = 0, gz_len = 0;
	int ret;

	pthread_mutex_unlock(&e->lock);
	ret = otlp_encode(items, n, &pb, &pb_len);
	if (!ret && e->gzip)
		ret = otlp_gzip(pb, pb_len, &gz, &gz_len);
	pthread_mutex_lock(&e->lock);
	if (ret) {
		account(e, 0, n);
		snprintf(e->last_error, sizeof(e->last_error), "out of memory encoding %zu spans",
			 n);
	} else if (gz) {
		send_batch(w, gz, gz_len, n);
	} else {
		send_batch(w, pb, pb_len, n);
	}
	pthread_mutex_unlock(&e->lock);
	free(pb);
	free(gz);
	for (size_t i = 0; i < n; i++)
		item_free(items[i]);
	pthread_mutex_lock(&e->lock);
}

/* Under lock, past the shutdown's deadline: what is left is dropped. */
static void drop_queue(struct otlp_exporter *e)
{
	struct otlp_item *it = e->head;

	e->stats.dropped_failed += e->count;
	e->head = NULL;
	e->tail = &e->head;
	e->count = 0;
	pthread_mutex_unlock(&e->lock);
	while (it) {
		struct otlp_item *next = it->next;

		item_free(it);
		it = next;
	}
	pthread_mutex_lock(&e->lock);
}

static void *sender_thread(void *arg)
{
	struct otlp_sender *w = arg;
	struct otlp_exporter *e = w->e;

	pthread_mutex_lock(&e->lock);
	while (wait_batch(e)) {
		if (e->stopping && ms_until(&e->stop_by) <= 0) {
			drop_queue(e);
			continue;
		}
		export_batch(w, take_batch(e, w->items));
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* Creation */

/* The queue's bound and a batch's size: the caller's, else the OTEL_BSP_* variables', else ours. */
static int queue_config(struct otlp_exporter *e, const struct otlp_config *c, char *err,
			size_t errlen)
{
	long queue = c->queue_spans ? (long)c->queue_spans :
				      otlp_env_spans("OTEL_BSP_MAX_QUEUE_SIZE", 65536, err, errlen);
	long batch = queue < 0 ? queue :
		     c->batch_spans ?
				 (long)c->batch_spans :
				 otlp_env_spans("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, err, errlen);

	if (batch < 0)
		return (int)batch;
	e->queue_max = (size_t)queue;
	/* a batch is never larger than the queue, as the specification says */
	e->batch_max = (unsigned int)(batch < queue ? batch : queue);
	return 0;
}

static int config(struct otlp_exporter *e, const struct otlp_config *c, char *err, size_t errlen)
{
	int ret = otlp_traces_url(c->endpoint, c->traces_endpoint, &e->url, err, errlen);

	if (ret)
		return ret;
	e->gzip = c->compression == OTLP_COMPRESSION_GZIP;
	if (c->compression == OTLP_COMPRESSION_ENV) {
		ret = otlp_env_gzip(err, errlen);
		if (ret < 0)
			return ret;
		e->gzip = ret;
	}
	e->timeout_ms = c->timeout_ms;
	if (!e->timeout_ms) {
		e->timeout_ms = otlp_env_timeout_ms(err, errlen);
		if (e->timeout_ms < 0)
			return (int)e->timeout_ms;
	}
	ret = otlp_env_headers(&e->headers, &e->nheaders, err, errlen);
	if (!ret)
		ret = otlp_kv_parse(getenv("OTEL_RESOURCE_ATTRIBUTES"), "OTEL_RESOURCE_ATTRIBUTES",
				    &e->env_attrs, &e->nenv_attrs, err, errlen);
	if (!ret)
		ret = queue_config(e, c, err, errlen);
	e->batch_ms = c->batch_ms ? c->batch_ms : 200;
	e->retry_max_ms = c->retry_max_ms ? c->retry_max_ms : 60000;
	e->shutdown_ms = c->shutdown_ms ? c->shutdown_ms : 5000;
	e->backoff_min_ms = c->backoff_min_ms ? c->backoff_min_ms : 100;
	e->backoff_max_ms = c->backoff_max_ms ? c->backoff_max_ms : 5000;
	e->nsenders = c->requests ? c->requests : OTLP_REQUESTS_DEFAULT;
	if (e->nsenders > OTLP_REQUESTS_MAX)
		e->nsenders = OTLP_REQUESTS_MAX;
	if (e->backoff_max_ms < e->backoff_min_ms)
		e->backoff_max_ms = e->backoff_min_ms;
	return ret;
}

static void exporter_release(struct otlp_exporter *e)
{
	for (unsigned int i = 0; e->senders && i < e->nsenders; i++) {
		otlp_http_free(e->senders[i].http);
		free(e->senders[i].items);
	}
	free(e->senders);
	otlp_kv_free(e->headers, e->nheaders);
	otlp_kv_free(e->env_attrs, e->nenv_attrs);
	free(e->url);
	free(e);
}

/* Each sender's connection and batch array; 0, or -ENOMEM or libcurl's failure with a message. */
static int make_senders(struct otlp_exporter *e, char *err, size_t errlen)
{
	e->senders = calloc(e->nsenders, sizeof(*e->senders));
	if (!e->senders)
		return lk__failf(err, errlen, -ENOMEM, "out of memory");
	for (unsigned int i = 0; i < e->nsenders; i++) {
		struct otlp_sender *w = &e->senders[i];

		w->e = e;
		w->items = malloc(e->batch_max * sizeof(*w->items));
		if (!w->items)
			return lk__failf(err, errlen, -ENOMEM, "out of memory");
		w->http = otlp_http_new(e->url, e->headers, e->nheaders, e->gzip, &e->abort_at_ms,
					err, errlen);
		if (!w->http)
			return -ENOMEM;
	}
	return 0;
}

/* Stop the senders started so far: what is queued is sent (the shutdown's bounded wait). */
static void stop_senders(struct otlp_exporter *e)
{
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	now_plus(&e->stop_by, e->shutdown_ms);
	atomic_store(&e->abort_at_ms,
		     (int64_t)e->stop_by.tv_sec * 1000 + e->stop_by.tv_nsec / 1000000);
	pthread_mutex_unlock(&e->lock);
	pthread_cond_broadcast(&e->wake);
	pthread_cond_broadcast(&e->stopped);
	for (unsigned int i = 0; i < e->started; i++)
		pthread_join(e->senders[i].thread, NULL);
	pthread_cond_destroy(&e->wake);
	pthread_cond_destroy(&e->stopped);
	pthread_mutex_destroy(&e->lock);
}

static int start_senders(struct otlp_exporter *e, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	int ret = 0;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->wake, &ca);
	pthread_cond_init(&e->stopped, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&e->lock, NULL);
	for (; e->started < e->nsenders; e->started++) {
		struct otlp_sender *w = &e->senders[e->started];

		ret = pthread_create(&w->thread, NULL, sender_thread, w);
		if (ret)
			break;
	}
	if (!ret)
		return 0;
	stop_senders(e);
	return lk__failf(err, errlen, -ret, "the OTLP exporter's threads: %s", strerror(ret));
}

struct otlp_exporter *otlp_exporter_new(const struct otlp_config *cfg, char *err, size_t errlen)
{
	static const struct otlp_config defaults;
	struct otlp_exporter *e = calloc(1, sizeof(*e));

	if (!e) {
		lk__failf(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	e->tail = &e->head;
	if (config(e, cfg ? cfg : &defaults, err, errlen) || make_senders(e, err, errlen) ||
	    start_senders(e, err, errlen)) {
		exporter_release(e);
		return NULL;
	}
	return e;
}

void otlp_exporter_stats(struct otlp_exporter *e, struct otlp_stats *out)
{
	pthread_mutex_lock(&e->lock);
	*out = e->stats;
	out->queued = e->count + e->in_flight;
	pthread_mutex_unlock(&e->lock);
}

void otlp_exporter_last_error(struct otlp_exporter *e, char *buf, size_t len)
{
	pthread_mutex_lock(&e->lock);
	snprintf(buf, len, "%s", e->last_error);
	pthread_mutex_unlock(&e->lock);
}

const char *otlp_exporter_endpoint(const struct otlp_exporter *e)
{
	return e->url;
}

void otlp_exporter_free(struct otlp_exporter *e)
{
	if (!e)
		return;
	stop_senders(e);
	exporter_release(e);
}
