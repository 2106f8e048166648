// SPDX-License-Identifier: MIT
/*
 * The control socket's requests: each message a client sends is decoded by protocol.c, which
 * checks everything; a message it refuses is counted (STATUS shows the counts), changes nothing,
 * and ends the connection after one error reply. Rules a client adds with scope "session" are
 * removed when its connection closes, and a trace it started with "stop on close" is stopped
 * then (control.c drops the client).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/counter.h>
#include <lowkey/error.h>
#include <lowkey/lock.h>
#include <lowkey/probe.h>

#include "control/control_server.h"
#include "counter/counter_registry.h"
#include "internal/outfile.h"
#include "probe/probe_internal.h"
#include "internal/trace_progress.h"
#include "internal/utf8.h"

_Static_assert(LK_CTL_FORMAT_MAX == LK_TRACE_PERFETTO, "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_TRACE_FLAGS == (LK_TRACE_CPUTIME | LK_TRACE_OVERWRITE | LK_TRACE_SCHED),
	       "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_KIND_MAX == LK_PROBE_COUNTER, "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_TYPE_MAX == LK_PROBE_PTR, "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_MAX_ARGS == LK_PROBE_MAX_ARGS, "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_LOCK_KIND_MAX == LK_LOCK_SPINLOCK, "protocol.h mirrors lowkey/lock.h");

#define MAX_SESSION_RULES 256
/*
 * Room for more descriptors than any request carries, so that the refusal says how many came;
 * past it the kernel drops them and flags the message (MSG_CTRUNC), refused the same.
 */
#define MAX_RECEIVED_FDS 4

/* ---- the trace started over the socket, and session rules ---- */

void lk__srv_remove_session_rules(struct lk__srv_client *c)
{
	while (c->nrules) {
		struct lk__srv_rule *r = &c->rules[--c->nrules];

		lk__probe_remove_rule(r->glob, r->enable);
		free(r->glob);
	}
	free(c->rules);
	c->rules = NULL;
}

bool lk__srv_our_trace_running(void)
{
	return lk__srv.trace_gen && __atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&lk__trace.gen, __ATOMIC_ACQUIRE) == lk__srv.trace_gen;
}

/* The running trace's path, copied under the trace lock ("" when none). */
static void trace_path(char *out, size_t len)
{
	pthread_mutex_lock(&lk__trace_mutex);
	snprintf(out, len, "%s", lk__trace.running && lk__trace.path ? lk__trace.path : "");
	pthread_mutex_unlock(&lk__trace_mutex);
}

void lk__srv_stop_trace(struct lk__ctl_msg *m, char *path, size_t pathlen, char *msg, size_t msglen)
{
	struct lk_trace_stats st;
	int err;

	trace_path(path, pathlen);
	err = lk_trace_stop();
	snprintf(msg, msglen, "%s", err ? lk_last_error() : "");
	lk_trace_stats(&st);
	lk__srv.trace_gen = 0;
	lk__srv.trace_owner = -1;
	m->stats = (struct lk__ctl_stats){
		err < -4095 ? -EIO : err, st.events, st.lost, st.bytes, st.threads, path, msg
	};
}

/* ---- requests ---- */

static int remember_rule(struct lk__srv_client *c, const char *glob, bool enable)
{
	struct lk__srv_rule *grown;
	char *copy;

	if (c->nrules == MAX_SESSION_RULES)
		return -ENOSPC;
	grown = realloc(c->rules, (c->nrules + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	c->rules = grown;
	copy = strdup(glob);
	if (!copy)
		return -ENOMEM;
	c->rules[c->nrules++] = (struct lk__srv_rule){ copy, enable };
	return 0;
}

static void do_rule(struct lk__srv_client *c, const struct lk__ctl_msg *req)
{
	const struct lk__ctl_rule *r = &req->rule;
	int matched, err;

	if (r->scope == LK_CTL_RULE_SESSION && c->nrules == MAX_SESSION_RULES) {
		lk__srv_reply_result(c, req->seq, -ENOSPC, 0, "too many rules on one connection");
		return;
	}
	matched = r->enable ? lk_probe_enable(r->glob) : lk_probe_disable(r->glob);
	if (matched < 0) {
		lk__srv_reply_result(c, req->seq, matched, 0, lk_last_error());
		return;
	}
	if (r->scope == LK_CTL_RULE_SESSION) {
		err = remember_rule(c, r->glob, r->enable);
		if (err) {
			lk__probe_remove_rule(r->glob, r->enable);
			lk__srv_reply_result(c, req->seq, err, 0,
					     "out of memory recording the rule");
			return;
		}
	}
	lk__srv_reply_result(c, req->seq, 0, matched, "");
}

/* A USDT rule outlives the connection: `lowkey enable --pid` exits right after. */
static void do_usdt(struct lk__srv_client *c, const struct lk__ctl_msg *req)
{
	const struct lk__ctl_rule *r = &req->rule;
	int matched;

	if (r->scope != LK_CTL_RULE_KEEP) {
		lk__srv_reply_result(c, req->seq, -EINVAL, 0,
				     "a USDT rule lasts until disabled: its scope must be KEEP");
		return;
	}
	matched = r->enable ? lk_probe_usdt_enable(r->glob) : lk_probe_usdt_disable(r->glob);
	lk__srv_reply_result(c, req->seq, matched < 0 ? matched : 0, matched < 0 ? 0 : matched,
			     matched < 0 ? lk_last_error() : "");
}

static void do_start(unsigned int i, const struct lk__ctl_msg *req, int dir_fd)
{
	const struct lk__ctl_start *s = &req->start;
	struct lk_trace_config config = {
		.path = s->path,
		.format = (enum lk_trace_format)s->format,
		.buffer_size = (size_t)s->buffer_size,
		.flags = s->flags,
		.flush_ms = s->flush_ms,
	};
	int err = dir_fd >= 0 ? lk__trace_start_in(&config, dir_fd) : lk_trace_start(&config);

	if (!err) {
		lk__srv.trace_gen = __atomic_load_n(&lk__trace.gen, __ATOMIC_ACQUIRE);
		lk__srv.trace_owner = (s->ctl_flags & LK_CTL_START_STOP_ON_CLOSE) ? (int)i : -1;
	}
	lk__srv_reply_result(&lk__srv.clients[i], req->seq, err, 0, err ? lk_last_error() : "");
}

struct stop_progress {
	struct lk__srv_client *c;
	uint32_t seq;
};

/* How far the conversion at a stop or snapshot is, to the client waiting: now or never, never queued. */
static void progress_to_client(uint64_t done, uint64_t total, void *arg)
{
	struct stop_progress *p = arg;
	struct lk__ctl_msg m = { .type = LK_CTL_PROGRESS,
				 .seq = p->seq,
				 .progress = { done, total } };

	if (!lk__srv_pending(p->c)) /* behind queued replies it would come late */
		lk__srv_send_now(p->c->fd, &m);
}

static void do_stop(struct lk__srv_client *c, const struct lk__ctl_msg *req)
{
	struct lk__ctl_msg m = { .type = LK_CTL_STATS, .seq = req->seq };
	char path[LK_CTL_MAX_PATH + 1], msg[LK_CTL_MAX_TEXT + 1];
	struct stop_progress to = { c, req->seq };
	const struct lk__progress_sink sink = { progress_to_client, &to };

	if (!__atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE)) {
		lk__srv_reply_result(c, req->seq, -ENOENT, 0, "no trace is running");
		return;
	}
	lk__progress_stop_sink_for_thread(&sink);
	lk__srv_stop_trace(&m, path, sizeof(path), msg, sizeof(msg));
	lk__progress_stop_sink_for_thread(NULL);
	lk__srv_reply(c, &m);
}

/*
 * A flight recorder's snapshot, written by this process (as its user) where the client says: at
 * a path of this process's, or into the directory it sent.
 */
static void do_snapshot(struct lk__srv_client *c, const struct lk__ctl_msg *req, int dir_fd)
{
	struct lk__ctl_msg m = { .type = LK_CTL_STATS, .seq = req->seq };
	char path[LK_CTL_MAX_PATH + 1] = "";
	struct lk__snapshot_result r;
	struct stop_progress to = { c, req->seq };
	const struct lk__progress_sink sink = { progress_to_client, &to };
	int err;

	lk__progress_stop_sink_for_thread(&sink); /* a JSON snapshot is converted */
	err = lk__trace_snapshot_in(req->snapshot.path[0] ? req->snapshot.path : NULL, dir_fd, &r,
				    path, sizeof(path));
	lk__progress_stop_sink_for_thread(NULL);
	if (err) {
		lk__srv_reply_result(c, req->seq, err, 0, lk_last_error());
		return;
	}
	m.stats = (struct lk__ctl_stats){ 0, r.events, r.discarded, r.bytes, r.threads, path, "" };
	lk__srv_reply(c, &m);
}

static int count_site(const struct lk_probe_info *info, void *arg)
{
	uint32_t *counts = arg;

	counts[0]++;
	counts[1] += info->enabled;
	return 0;
}

static void do_status(struct lk__srv_client *c, const struct lk__ctl_msg *req)
{
	struct lk__ctl_msg m = { .type = LK_CTL_STATUS_REPLY, .seq = req->seq };
	char path[LK_CTL_MAX_PATH + 1];
	struct lk_trace_stats st;
	uint32_t counts[2] = { 0, 0 };

	lk_probe_list(count_site, counts);
	lk_trace_stats(&st);
	trace_path(path, sizeof(path));
	m.status = (struct lk__ctl_status){
		.pid = (uint32_t)getpid(),
		.clients = lk__srv.nclients,
		.refused_peers = __atomic_load_n(&lk__srv.refused_peers, __ATOMIC_RELAXED),
		.refused_messages = __atomic_load_n(&lk__srv.refused_messages, __ATOMIC_RELAXED),
		.sites = counts[0],
		.sites_enabled = counts[1],
		.running = st.running,
		.events = st.events,
		.lost = st.lost,
		.bytes = st.bytes,
		.threads = st.threads,
		.error = st.error < -4095 ? -EIO : st.error,
		.path = path,
		.version = lk_version(),
	};
	lk__srv_reply(c, &m);
}

/*
 * A reply of many messages (the sites, the locks, the counters), encoded while the module's
 * registry is locked and sent after, so a slow client holds no lock.
 */
struct listing {
	uint8_t *data;
	size_t len, cap;
	uint32_t seq;
	int count, err;
};

/* Append m (seq set here); 1 when out of memory (the listing is abandoned), else 0. */
static int listing_add(struct listing *l, struct lk__ctl_msg *m)
{
	int n;

	m->seq = l->seq;
	if (l->cap - l->len < LK_CTL_MAX_MSG + 4) {
		size_t cap = l->cap ? l->cap * 2 : 64 * 1024;
		uint8_t *grown = realloc(l->data, cap);

		if (!grown) {
			l->err = -ENOMEM;
			return 1;
		}
		l->data = grown;
		l->cap = cap;
	}
	/* each message preceded by its length */
	n = lk__ctl_encode(m, l->data + l->len + 4, LK_CTL_MAX_MSG);
	if (n < 0)
		return 0; /* names too long for a message: left out rather than cut */
	memcpy(l->data + l->len, &(uint32_t){ (uint32_t)n }, 4);
	l->len += 4 + (size_t)n;
	l->count++;
	return 0;
}

/* The listing as c's outbox, then the RESULT that ends it (what: what was listed, for an error). */
static void listing_send(struct lk__srv_client *c, struct listing *l, const char *what)
{
	char msg[128];

	if (l->err) {
		free(l->data);
		snprintf(msg, sizeof(msg), "out of memory listing the %s", what);
		lk__srv_reply_result(c, l->seq, l->err, 0, msg);
		return;
	}
	/* already laid out as an outbox; a client's requests are read only when its outbox is empty */
	lk__srv_outbox_free(&c->out);
	c->out = (struct lk__srv_outbox){ l->data, 0, l->len, l->cap };
	c->moved_at = lk__srv_now_ms();
	lk__srv_reply_result(c, l->seq, 0, l->count, "");
}

static int encode_site(const struct lk_probe_info *info, void *arg)
{
	struct lk__ctl_msg m = { .type = LK_CTL_SITE };
	char function[LK_CTL_MAX_FUNCTION]; /* a template's signature may be longer */
	uint32_t types = 0;

	for (unsigned int a = 0; a < info->nargs; a++)
		types |= (uint32_t)info->arg_types[a] << (4 * a);
	snprintf(function, sizeof(function), "%s", info->function ? info->function : "");
	m.site = (struct lk__ctl_site){
		info->id,    (uint8_t)info->kind, (uint8_t)info->nargs, info->enabled,
		types,	     info->line,	  info->provider,	info->event,
		info->file,  info->arg_names,	  info->object,		function,
		info->tracer
	};
	return listing_add(arg, &m);
}

static void do_list(struct lk__srv_client *c, const struct lk__ctl_msg *req)
{
	struct listing l = { .seq = req->seq };

	lk_probe_usdt_poll(); /* whether a tracer is attached now, not at the watcher's last read */
	lk_probe_list(encode_site, &l);
	listing_send(c, &l, "sites");
}

/* A name the program chose: control characters escaped, cut to fit a message. */
static const char *clean_name(const char *name, char *out)
{
	return lk__text_escape(name ? name : "", out, LK_CTL_MAX_TEXT + 1);
}

static int encode_lock(const struct lk_lockstat *st, void *arg)
{
	struct lk__ctl_msg m = { .type = LK_CTL_LOCK };
	char name[LK_CTL_MAX_TEXT + 1];

	m.lock = (struct lk__ctl_lock){ (uint8_t)st->kind,	st->acquisitions,
					st->read_acquisitions,	st->contended,
					st->wait_total_ns,	st->hold_total_ns,
					st->read_hold_total_ns, clean_name(st->name, name) };
	return listing_add(arg, &m);
}

/*
 * Every named lock's figures, copied under the lock registry's mutex (lk_lockstat_foreach), which
 * only init, destroy and a static lock's first acquisition take: never a lock or unlock.
 */
static void do_locks(struct lk__srv_client *c, const struct lk__ctl_msg *req)
{
	struct listing l = { .seq = req->seq };
	int err = lk_lockstat_foreach(encode_lock, &l);

	if (err < 0 && !l.err) {
		free(l.data);
		lk__srv_reply_result(c, req->seq, err, 0, lk_last_error());
		return;
	}
	listing_send(c, &l, "locks");
}

/* The events of one set, each read now (read(), from this thread: the opener's rdpmc is not ours). */
static int encode_set(struct lk_counters *set, uint32_t number, void *arg)
{
	struct listing *l = arg;
	size_t n = lk_counters_count(set);
	struct lk_counter_value *v = calloc(n ? n : 1, sizeof(*v));
	int got = v ? lk_counters_read(set, v, n) : -ENOMEM;

	if (got == -ENOMEM)
		l->err = -ENOMEM;
	for (size_t i = 0; got >= 0 && i < n && !l->err; i++) {
		struct lk__ctl_msg m = { .type = LK_CTL_PERF };
		struct lk_counter_info info;
		char event[LK_CTL_MAX_TEXT + 1];

		if (lk_counters_describe(set, i, &info) != 0 || info.error)
			continue; /* not counted on this machine: nothing to say */
		m.perf = (struct lk__ctl_perf){ number,
						(uint32_t)i,
						v[i].value,
						v[i].time_enabled,
						v[i].time_running,
						clean_name(info.name, event) };
		listing_add(l, &m);
	}
	free(v);
	return l->err ? 1 : 0;
}

/* The counter sets the program has open, read now, under the counter registry's mutex. */
static void do_counters(struct lk__srv_client *c, const struct lk__ctl_msg *req)
{
	struct listing l = { .seq = req->seq };

	lk__counters_foreach(encode_set, &l);
	listing_send(c, &l, "counter sets");
}

static void refuse_message(struct lk__srv_client *c, uint32_t seq, int err, const char *why)
{
	__atomic_fetch_add(&lk__srv.refused_messages, 1, __ATOMIC_RELAXED);
	lk__srv_reply_result(c, seq, err, 0, why);
}

/* One datagram of client c, and the descriptors it brought (*nfds; all of them, or *truncated). */
static ssize_t receive(struct lk__srv_client *c, uint8_t *buf, size_t len, int *fds,
		       unsigned int *nfds, bool *truncated)
{
	union {
		char space[CMSG_SPACE(MAX_RECEIVED_FDS * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { buf, len };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = cbuf.space,
			      .msg_controllen = sizeof(cbuf.space) };
	ssize_t n = recvmsg(c->fd, &msg, MSG_TRUNC | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	*nfds = 0;
	*truncated = n >= 0 && (msg.msg_flags & MSG_CTRUNC);
	if (n < 0)
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		size_t count;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t k = 0; k < count && *nfds < MAX_RECEIVED_FDS; k++)
			memcpy(&fds[(*nfds)++], CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
	}
	return n;
}

static void close_all(const int *fds, unsigned int n)
{
	for (unsigned int k = 0; k < n; k++)
		close(fds[k]);
}

/*
 * Whether the descriptors that came with req are those it says it carries: as many, each an empty
 * directory. 0, or -errno with why.
 */
static int check_fds(const struct lk__ctl_msg *req, const int *fds, unsigned int nfds,
		     bool truncated, char *why, size_t len)
{
	unsigned int expected = lk__ctl_request_fds(req);
	struct stat st;

	if (truncated || nfds != expected) {
		snprintf(why, len, "a %s request carries %u descriptor%s; %s%u came with it",
			 lk__ctl_type_name(req->type), expected, expected == 1 ? "" : "s",
			 truncated ? "over " : "", nfds);
		return -EBADMSG;
	}
	if (req->type == LK_CTL_SNAPSHOT && nfds && !req->snapshot.path[0]) {
		snprintf(why, len, "a snapshot into a directory sent with it names that directory");
		return -EINVAL;
	}
	for (unsigned int k = 0; k < nfds; k++) {
		if (fstat(fds[k], &st) != 0 || !S_ISDIR(st.st_mode)) {
			snprintf(why, len,
				 "the descriptor sent with a %s request is not a directory",
				 lk__ctl_type_name(req->type));
			return -ENOTDIR;
		}
		if (!lk__out_dir_empty(fds[k])) {
			snprintf(
				why, len,
				"the directory sent with a %s request is not empty (or cannot be read)",
				lk__ctl_type_name(req->type));
			return -EEXIST;
		}
	}
	return 0;
}

/* Decode and check one request of n bytes; 0 or -errno with why. */
static int check_request(uint8_t *buf, ssize_t n, struct lk__ctl_msg *req, const int *fds,
			 unsigned int nfds, bool truncated, char *why, size_t len)
{
	int err;

	if ((size_t)n > LK_CTL_MAX_MSG) {
		memset(req, 0, sizeof(*req));
		snprintf(why, len, "message too long");
		return -EMSGSIZE;
	}
	err = lk__ctl_decode(buf, (size_t)n, req, why, len);
	if (!err && !lk__ctl_is_request(req->type)) {
		err = -EOPNOTSUPP;
		snprintf(why, len, "a %s message is not a request", lk__ctl_type_name(req->type));
	}
	if (err) {
		if (nfds || truncated)
			snprintf(why + strlen(why), len - strlen(why),
				 " (the descriptors sent with it are closed)");
		return err;
	}
	return check_fds(req, fds, nfds, truncated, why, len);
}

bool lk__srv_serve(unsigned int i)
{
	struct lk__srv_client *c = &lk__srv.clients[i];
	uint8_t buf[LK_CTL_MAX_MSG];
	struct lk__ctl_msg req;
	char why[LK_CTL_MAX_TEXT];
	int fds[MAX_RECEIVED_FDS], err;
	unsigned int nfds;
	bool truncated;
	ssize_t n = receive(c, buf, sizeof(buf), fds, &nfds, &truncated);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		close_all(fds, nfds);
		return false;
	}
	if (n < 0)
		return true;
	err = check_request(buf, n, &req, fds, nfds, truncated, why, sizeof(why));
	if (err) {
		/* one reply, if its socket takes it now; then the connection ends */
		close_all(fds, nfds);
		refuse_message(c, req.seq, err, why);
		return false;
	}
	switch (req.type) {
	case LK_CTL_RULE:
		do_rule(c, &req);
		break;
	case LK_CTL_START:
		do_start(i, &req, nfds ? fds[0] : -1);
		break;
	case LK_CTL_STOP:
		do_stop(c, &req);
		break;
	case LK_CTL_STATUS:
		do_status(c, &req);
		break;
	case LK_CTL_LIST:
		do_list(c, &req);
		break;
	case LK_CTL_USDT:
		do_usdt(c, &req);
		break;
	case LK_CTL_SNAPSHOT:
		do_snapshot(c, &req, nfds ? fds[0] : -1);
		break;
	case LK_CTL_LOCKS:
		do_locks(c, &req);
		break;
	case LK_CTL_COUNTERS:
		do_counters(c, &req);
		break;
	}
	return !lk__srv.clients[i].broken;
}
