// SPDX-License-Identifier: MIT
/*
 * The control socket: `lowkey trace --pid` and `lowkey list --pid` talk to a running process here.
 *
 * lk_control_open() binds a SOCK_SEQPACKET Unix socket at DIR/PID.sock, DIR being a directory only
 * this user can enter (see lk__control_dir), and starts a service thread that blocks every signal
 * and serves clients with poll(). A client must be this process's user or root (SO_PEERCRED);
 * others get one refusal message and are disconnected. Every message is decoded by protocol.c,
 * which checks everything; a message it refuses is counted (STATUS shows the counts), changes
 * nothing, and ends the connection after one error reply. The library never prints: refusals are
 * counted, not logged.
 *
 * The service thread never waits for a client: every socket is non-blocking, and what a client's
 * socket cannot take now waits in that client's outbox, sent as the client reads. Its next
 * requests wait too (they are not read while its outbox holds anything), so one client costs at
 * most one request's replies. A client whose outbox has not moved for lk__control_stall_ms is
 * dropped; the others are served meanwhile.
 *
 * Rules a client adds with scope "session" are removed when its connection closes, and a trace it
 * started with "stop on close" is stopped then, so a `lowkey trace --pid` that is killed leaves the
 * process as it found it. At exit (and at lk_control_close) a trace started over the socket is
 * stopped and finished, its counters sent to every client still connected (EXIT), and the socket
 * file removed. A forked child does not inherit the socket: it may open its own. Opening removes
 * the socket files that processes killed before they could close theirs left in the directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/error.h>
#include <lowkey/probe.h>

#include "core/env.h"
#include "core/error.h"
#include "control/control_internal.h"
#include "probe/probe_internal.h"
#include "internal/trace_progress.h"

_Static_assert(LK_CTL_FORMAT_MAX == LK_TRACE_PERFETTO, "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_TRACE_FLAGS == (LK_TRACE_CPUTIME | LK_TRACE_OVERWRITE | LK_TRACE_SCHED),
	       "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_KIND_MAX == LK_PROBE_COUNTER, "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_TYPE_MAX == LK_PROBE_PTR, "protocol.h mirrors lowkey/probe.h");
_Static_assert(LK_CTL_MAX_ARGS == LK_PROBE_MAX_ARGS, "protocol.h mirrors lowkey/probe.h");

#define MAX_CLIENTS 8
#define MAX_SESSION_RULES 256

int lk__control_stall_ms = 5000;

struct session_rule {
	char *glob;
	bool enable;
};

/* Encoded messages waiting for their client to read them, each preceded by its u32 length. */
struct outbox {
	uint8_t *data;
	size_t off, len, cap;
};

struct client {
	int fd;
	bool broken; /* a reply could not be sent, or the client broke the protocol: drop it */
	uid_t uid;
	struct session_rule *rules;
	size_t nrules;
	struct outbox out;
	int64_t moved_at; /* ms, CLOCK_MONOTONIC: when the outbox last moved or filled */
};

static struct {
	bool open;
	bool serving; /* the service thread runs (open, and not deferred) */
	pid_t owner;  /* the process that opened it (not a forked child) */
	int listen_fd;
	int wake_fd; /* an eventfd: lk_control_close wakes the service thread */
	pthread_t thread;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];

	/* the service thread's (and, once it has been joined, the closer's) */
	struct client clients[MAX_CLIENTS];
	unsigned int nclients;
	unsigned int trace_gen; /* the trace started over the socket; 0: none */
	int trace_owner;	/* its client, when it stops on close; -1: none */

	uint64_t refused_peers, refused_messages; /* atomics */
} ctl = { .listen_fd = -1, .wake_fd = -1, .trace_owner = -1 };

static pthread_mutex_t ctl_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ctl_once = PTHREAD_ONCE_INIT;

const char *lk__control_path(void)
{
	return __atomic_load_n(&ctl.open, __ATOMIC_ACQUIRE) ? ctl.path : NULL;
}

/* ---- the directory ---- */

/* Whether path is a directory of this user that no one else may enter. */
static bool private_dir(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & 077) == 0;
}

/* Create dir (0700) or check the one there: a real directory of ours, closed to others. */
static int make_private_dir(const char *dir)
{
	bool created = mkdir(dir, 0700) == 0;
	struct stat st;
	int fd, err = 0;

	if (!created && errno != EEXIST)
		return lk__fail(-errno, "lk_control_open: cannot create %s: %s", dir,
				strerror(errno));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			return lk__fail(
				-ENOTDIR,
				"lk_control_open: %s is not a directory (a symbolic link or a file "
				"is there): remove it",
				dir);
		return lk__fail(-errno, "lk_control_open: cannot open %s: %s", dir,
				strerror(errno));
	}
	if (created)
		fchmod(fd, 0700); /* whatever the umask made of it */
	if (fstat(fd, &st) != 0)
		err = lk__fail(-errno, "lk_control_open: cannot inspect %s: %s", dir,
			       strerror(errno));
	else if (st.st_uid != geteuid())
		err = lk__fail(
			-EPERM,
			"lk_control_open: %s belongs to uid %u, not to this process's uid %u: "
			"someone else made it; remove it",
			dir, (unsigned int)st.st_uid, (unsigned int)geteuid());
	else if (st.st_mode & 077)
		err = lk__fail(-EPERM,
			       "lk_control_open: %s is open to other users (mode %03o): "
			       "`chmod 700 %s`",
			       dir, (unsigned int)(st.st_mode & 0777), dir);
	close(fd);
	return err;
}

int lk__control_dir(char *out, size_t len)
{
	const char *xdg = lk__env("XDG_RUNTIME_DIR");
	/* room for "/PID.sock" after the directory */
	size_t room = sizeof(ctl.path) - sizeof("/4194304.sock");
	int n = -1;

	if (xdg && xdg[0] == '/' && private_dir(xdg))
		n = snprintf(out, len, "%s/lowkey", xdg);
	if (n < 0 || (size_t)n >= len || (size_t)n >= room)
		n = snprintf(out, len, "/tmp/lowkey-%u", (unsigned int)geteuid());
	if (n < 0 || (size_t)n >= len)
		return lk__fail(-ENAMETOOLONG,
				"lk_control_open: no room for the socket's directory name");
	return make_private_dir(out);
}

/* ---- replies ---- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One message, now or never: for peers that are refused, and for the goodbye at exit. */
static int send_msg(int fd, struct lk__ctl_msg *m)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	int n = lk__ctl_encode(m, buf, sizeof(buf));

	if (n < 0)
		return n;
	return send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n ? 0 : -errno;
}

static void result_msg(struct lk__ctl_msg *m, char *text, uint32_t seq, int err, int64_t value,
		       const char *message)
{
	snprintf(text, LK_CTL_MAX_TEXT + 1, "%s", message ? message : "");
	*m = (struct lk__ctl_msg){ .type = LK_CTL_RESULT, .seq = seq };
	m->result = (struct lk__ctl_result){ err < -4095 ? -EINVAL : err, value, text };
}

static bool pending(const struct client *c)
{
	return c->out.off < c->out.len;
}

static void outbox_free(struct outbox *o)
{
	free(o->data);
	*o = (struct outbox){ 0 };
}

static int outbox_reserve(struct outbox *o, size_t n)
{
	size_t cap = o->cap ? o->cap : 4096;
	uint8_t *grown;

	if (o->off == o->len)
		o->off = o->len = 0;
	if (o->cap - o->len >= n)
		return 0;
	while (cap - o->len < n)
		cap *= 2;
	grown = realloc(o->data, cap);
	if (!grown)
		return -ENOMEM;
	o->data = grown;
	o->cap = cap;
	return 0;
}

/* Send what the client's socket takes now; the rest waits for poll to say it has room. */
static void flush(struct client *c)
{
	struct outbox *o = &c->out;

	while (o->off < o->len) {
		uint32_t n;
		ssize_t sent;

		memcpy(&n, o->data + o->off, 4);
		sent = send(c->fd, o->data + o->off + 4, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (sent != (ssize_t)n) {
			c->broken = true;
			return;
		}
		o->off += 4 + (size_t)n;
		c->moved_at = now_ms();
	}
}

static void reply(struct client *c, struct lk__ctl_msg *m)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	int n = lk__ctl_encode(m, buf, sizeof(buf));
	uint32_t len = (uint32_t)n;

	if (n < 0 || outbox_reserve(&c->out, 4 + (size_t)n) != 0) {
		c->broken = true;
		return;
	}
	if (!pending(c))
		c->moved_at = now_ms();
	memcpy(c->out.data + c->out.len, &len, 4);
	memcpy(c->out.data + c->out.len + 4, buf, len);
	c->out.len += 4 + len;
	flush(c);
}

static void reply_result(struct client *c, uint32_t seq, int err, int64_t value,
			 const char *message)
{
	struct lk__ctl_msg m;
	char text[LK_CTL_MAX_TEXT + 1];

	result_msg(&m, text, seq, err, value, message);
	reply(c, &m);
}

/* ---- clients ---- */

static void remove_session_rules(struct client *c)
{
	while (c->nrules) {
		struct session_rule *r = &c->rules[--c->nrules];

		lk__probe_remove_rule(r->glob, r->enable);
		free(r->glob);
	}
	free(c->rules);
	c->rules = NULL;
}

/* Whether the trace running now is the one started over the socket. */
static bool our_trace_running(void)
{
	return ctl.trace_gen && __atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&lk__trace.gen, __ATOMIC_ACQUIRE) == ctl.trace_gen;
}

/* The running trace's path, copied under the trace lock ("" when none). */
static void trace_path(char *out, size_t len)
{
	pthread_mutex_lock(&lk__trace_mutex);
	snprintf(out, len, "%s", lk__trace.running && lk__trace.path ? lk__trace.path : "");
	pthread_mutex_unlock(&lk__trace_mutex);
}

/* Stop the trace; fill m (type set by the caller) with its counters. */
static void stop_trace(struct lk__ctl_msg *m, char *path, size_t pathlen, char *msg, size_t msglen)
{
	struct lk_trace_stats st;
	int err;

	trace_path(path, pathlen);
	err = lk_trace_stop();
	snprintf(msg, msglen, "%s", err ? lk_last_error() : "");
	lk_trace_stats(&st);
	ctl.trace_gen = 0;
	ctl.trace_owner = -1;
	m->stats = (struct lk__ctl_stats){
		err < -4095 ? -EIO : err, st.events, st.lost, st.bytes, st.threads, path, msg
	};
}

static void drop_client(unsigned int i)
{
	struct client *c = &ctl.clients[i];

	if (ctl.trace_owner == (int)i) {
		if (our_trace_running()) {
			struct lk__ctl_msg m;
			char path[LK_CTL_MAX_PATH + 1], msg[LK_CTL_MAX_TEXT + 1];

			stop_trace(&m, path, sizeof(path), msg, sizeof(msg));
		}
		ctl.trace_owner = -1;
	}
	remove_session_rules(c);
	outbox_free(&c->out);
	close(c->fd);
	ctl.clients[i] = ctl.clients[--ctl.nclients];
	if (ctl.trace_owner == (int)ctl.nclients)
		ctl.trace_owner = (int)i; /* the owner moved into the freed slot */
}

static void refuse_peer(int fd, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse_peer(int fd, int err, const char *fmt, ...)
{
	char text[256], reply_text[LK_CTL_MAX_TEXT + 1];
	struct lk__ctl_msg m;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	__atomic_fetch_add(&ctl.refused_peers, 1, __ATOMIC_RELAXED);
	result_msg(&m, reply_text, 0, err, 0, text);
	send_msg(fd, &m);
	close(fd);
}

static void accept_client(void)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = accept4(ctl.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		close(fd);
		return;
	}
	if (cred.uid != geteuid() && cred.uid != 0) {
		refuse_peer(
			fd, -EACCES,
			"uid %u may not control process %d: only its own user (uid %u) or root may",
			(unsigned int)cred.uid, (int)getpid(), (unsigned int)geteuid());
		return;
	}
	if (ctl.nclients == MAX_CLIENTS) {
		refuse_peer(fd, -EBUSY,
			    "process %d already serves %d control clients: try again later",
			    (int)getpid(), MAX_CLIENTS);
		return;
	}
	ctl.clients[ctl.nclients++] = (struct client){ .fd = fd, .uid = cred.uid };
}

/* ---- requests ---- */

static int remember_rule(struct client *c, const char *glob, bool enable)
{
	struct session_rule *grown;
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
	c->rules[c->nrules++] = (struct session_rule){ copy, enable };
	return 0;
}

static void do_rule(struct client *c, const struct lk__ctl_msg *req)
{
	const struct lk__ctl_rule *r = &req->rule;
	int matched, err;

	if (r->scope == LK_CTL_RULE_SESSION && c->nrules == MAX_SESSION_RULES) {
		reply_result(c, req->seq, -ENOSPC, 0, "too many rules on one connection");
		return;
	}
	matched = r->enable ? lk_probe_enable(r->glob) : lk_probe_disable(r->glob);
	if (matched < 0) {
		reply_result(c, req->seq, matched, 0, lk_last_error());
		return;
	}
	if (r->scope == LK_CTL_RULE_SESSION) {
		err = remember_rule(c, r->glob, r->enable);
		if (err) {
			lk__probe_remove_rule(r->glob, r->enable);
			reply_result(c, req->seq, err, 0, "out of memory recording the rule");
			return;
		}
	}
	reply_result(c, req->seq, 0, matched, "");
}

/* A USDT rule outlives the connection: `lowkey enable --pid` exits right after. */
static void do_usdt(struct client *c, const struct lk__ctl_msg *req)
{
	const struct lk__ctl_rule *r = &req->rule;
	int matched;

	if (r->scope != LK_CTL_RULE_KEEP) {
		reply_result(c, req->seq, -EINVAL, 0,
			     "a USDT rule lasts until disabled: its scope must be KEEP");
		return;
	}
	matched = r->enable ? lk_probe_usdt_enable(r->glob) : lk_probe_usdt_disable(r->glob);
	reply_result(c, req->seq, matched < 0 ? matched : 0, matched < 0 ? 0 : matched,
		     matched < 0 ? lk_last_error() : "");
}

static void do_start(unsigned int i, const struct lk__ctl_msg *req)
{
	const struct lk__ctl_start *s = &req->start;
	struct lk_trace_config config = {
		.path = s->path,
		.format = (enum lk_trace_format)s->format,
		.buffer_size = (size_t)s->buffer_size,
		.flags = s->flags,
		.flush_ms = s->flush_ms,
	};
	int err = lk_trace_start(&config);

	if (!err) {
		ctl.trace_gen = __atomic_load_n(&lk__trace.gen, __ATOMIC_ACQUIRE);
		ctl.trace_owner = (s->ctl_flags & LK_CTL_START_STOP_ON_CLOSE) ? (int)i : -1;
	}
	reply_result(&ctl.clients[i], req->seq, err, 0, err ? lk_last_error() : "");
}

struct stop_progress {
	struct client *c;
	uint32_t seq;
};

/* How far the conversion at a stop or snapshot is, to the client waiting: now or never, never queued. */
static void progress_to_client(uint64_t done, uint64_t total, void *arg)
{
	struct stop_progress *p = arg;
	struct lk__ctl_msg m = { .type = LK_CTL_PROGRESS,
				 .seq = p->seq,
				 .progress = { done, total } };

	if (!pending(p->c)) /* behind queued replies it would come late */
		send_msg(p->c->fd, &m);
}

static void do_stop(struct client *c, const struct lk__ctl_msg *req)
{
	struct lk__ctl_msg m = { .type = LK_CTL_STATS, .seq = req->seq };
	char path[LK_CTL_MAX_PATH + 1], msg[LK_CTL_MAX_TEXT + 1];
	struct stop_progress to = { c, req->seq };
	const struct lk__progress_sink sink = { progress_to_client, &to };

	if (!__atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE)) {
		reply_result(c, req->seq, -ENOENT, 0, "no trace is running");
		return;
	}
	lk__progress_stop_sink_for_thread(&sink);
	stop_trace(&m, path, sizeof(path), msg, sizeof(msg));
	lk__progress_stop_sink_for_thread(NULL);
	reply(c, &m);
}

/* A flight recorder's snapshot, written by this process (as its user) where the client says. */
static void do_snapshot(struct client *c, const struct lk__ctl_msg *req)
{
	struct lk__ctl_msg m = { .type = LK_CTL_STATS, .seq = req->seq };
	char path[LK_CTL_MAX_PATH + 1] = "";
	struct lk__snapshot_result r;
	struct stop_progress to = { c, req->seq };
	const struct lk__progress_sink sink = { progress_to_client, &to };
	int err;

	lk__progress_stop_sink_for_thread(&sink); /* a JSON snapshot is converted */
	err = lk__trace_snapshot(req->snapshot.path[0] ? req->snapshot.path : NULL, &r, path,
				 sizeof(path));
	lk__progress_stop_sink_for_thread(NULL);
	if (err) {
		reply_result(c, req->seq, err, 0, lk_last_error());
		return;
	}
	m.stats = (struct lk__ctl_stats){ 0, r.events, r.discarded, r.bytes, r.threads, path, "" };
	reply(c, &m);
}

static int count_site(const struct lk_probe_info *info, void *arg)
{
	uint32_t *counts = arg;

	counts[0]++;
	counts[1] += info->enabled;
	return 0;
}

static void do_status(struct client *c, const struct lk__ctl_msg *req)
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
		.clients = ctl.nclients,
		.refused_peers = __atomic_load_n(&ctl.refused_peers, __ATOMIC_RELAXED),
		.refused_messages = __atomic_load_n(&ctl.refused_messages, __ATOMIC_RELAXED),
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
	reply(c, &m);
}

/* The sites, encoded while the registry is locked and sent after, so a slow client holds no lock. */
struct site_list {
	uint8_t *data;
	size_t len, cap;
	uint32_t seq;
	int count, err;
};

static int encode_site(const struct lk_probe_info *info, void *arg)
{
	struct site_list *l = arg;
	struct lk__ctl_msg m = { .type = LK_CTL_SITE, .seq = l->seq };
	char function[LK_CTL_MAX_FUNCTION]; /* a template's signature may be longer */
	uint32_t types = 0;
	int n;

	for (unsigned int a = 0; a < info->nargs; a++)
		types |= (uint32_t)info->arg_types[a] << (4 * a);
	snprintf(function, sizeof(function), "%s", info->function ? info->function : "");
	m.site = (struct lk__ctl_site){
		info->id,   (uint8_t)info->kind, (uint8_t)info->nargs, info->enabled,
		types,	    info->line,		 info->provider,       info->event,
		info->file, info->arg_names,	 info->object,	       function
	};
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
	n = lk__ctl_encode(&m, l->data + l->len + 4, LK_CTL_MAX_MSG);
	if (n < 0)
		return 0; /* names too long for a message: left out rather than cut */
	memcpy(l->data + l->len, &(uint32_t){ (uint32_t)n }, 4);
	l->len += 4 + (size_t)n;
	l->count++;
	return 0;
}

static void do_list(struct client *c, const struct lk__ctl_msg *req)
{
	struct site_list l = { .seq = req->seq };

	lk_probe_list(encode_site, &l);
	if (l.err) {
		free(l.data);
		reply_result(c, req->seq, l.err, 0, "out of memory listing the sites");
		return;
	}
	/* already laid out as an outbox; a client's requests are read only when its outbox is empty */
	outbox_free(&c->out);
	c->out = (struct outbox){ l.data, 0, l.len, l.cap };
	c->moved_at = now_ms();
	reply_result(c, req->seq, 0, l.count, "");
}

static void refuse_message(struct client *c, uint32_t seq, int err, const char *why)
{
	__atomic_fetch_add(&ctl.refused_messages, 1, __ATOMIC_RELAXED);
	reply_result(c, seq, err, 0, why);
}

/* Read and serve one message. Returns false when the client is gone or must be dropped. */
static bool serve(unsigned int i)
{
	struct client *c = &ctl.clients[i];
	uint8_t buf[LK_CTL_MAX_MSG];
	struct lk__ctl_msg req;
	char why[LK_CTL_MAX_TEXT];
	ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_TRUNC | MSG_DONTWAIT);
	int err;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;
	if (n < 0)
		return true;
	if ((size_t)n > sizeof(buf)) {
		refuse_message(c, 0, -EMSGSIZE, "message too long");
		return false;
	}
	err = lk__ctl_decode(buf, (size_t)n, &req, why, sizeof(why));
	if (!err && !lk__ctl_is_request(req.type)) {
		err = -EOPNOTSUPP;
		snprintf(why, sizeof(why), "a %s message is not a request",
			 lk__ctl_type_name(req.type));
	}
	if (err) {
		/* one reply, if its socket takes it now; then the connection ends */
		refuse_message(c, req.seq, err, why);
		return false;
	}
	switch (req.type) {
	case LK_CTL_RULE:
		do_rule(c, &req);
		break;
	case LK_CTL_START:
		do_start(i, &req);
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
		do_snapshot(c, &req);
		break;
	}
	return !ctl.clients[i].broken;
}

/* Milliseconds until the first client with a stalled outbox is due to be dropped; -1: none. */
static int poll_timeout(int64_t now)
{
	int64_t stall = __atomic_load_n(&lk__control_stall_ms, __ATOMIC_RELAXED), first = -1;

	for (unsigned int i = 0; i < ctl.nclients; i++) {
		int64_t left = ctl.clients[i].moved_at + stall - now;

		if (pending(&ctl.clients[i]) && (first < 0 || left < first))
			first = left < 0 ? 0 : left;
	}
	return first > INT_MAX ? INT_MAX : (int)first;
}

/* What poll said about client i: send what waits, or serve one request. False: drop it. */
static bool service_client(unsigned int i, short revents)
{
	struct client *c = &ctl.clients[i];

	if (pending(c)) {
		if (revents)
			flush(c);
	} else if (revents && !serve(i)) {
		return false;
	}
	if (c->broken)
		return false;
	return !pending(c) ||
	       now_ms() - c->moved_at < __atomic_load_n(&lk__control_stall_ms, __ATOMIC_RELAXED);
}

static void *service_main(void *arg)
{
	struct pollfd fds[2 + MAX_CLIENTS];

	(void)arg;
	pthread_setname_np(pthread_self(), "lowkey-control");
	for (;;) {
		unsigned int n = ctl.nclients;

		fds[0] = (struct pollfd){ .fd = ctl.wake_fd, .events = POLLIN };
		fds[1] = (struct pollfd){ .fd = ctl.listen_fd, .events = POLLIN };
		for (unsigned int i = 0; i < n; i++)
			fds[2 + i] = (struct pollfd){ .fd = ctl.clients[i].fd,
						      .events = pending(&ctl.clients[i]) ? POLLOUT :
											   POLLIN };
		if (poll(fds, 2 + n, poll_timeout(now_ms())) < 0)
			continue;
		if (fds[0].revents)
			break;
		/* from the last: dropping client i moves the last one into its slot */
		for (unsigned int i = n; i-- > 0;)
			if (!service_client(i, fds[2 + i].revents))
				drop_client(i);
		if (fds[1].revents & POLLIN)
			accept_client();
	}
	return NULL;
}

/* ---- open and close ---- */

static void close_fds(void)
{
	if (ctl.listen_fd >= 0)
		close(ctl.listen_fd);
	if (ctl.wake_fd >= 0)
		close(ctl.wake_fd);
	ctl.listen_fd = ctl.wake_fd = -1;
}

/* A forked child: the socket and the thread are the parent's. */
static void control_fork_prepare(void)
{
	pthread_mutex_lock(&ctl_mutex);
}

static void control_fork_parent(void)
{
	pthread_mutex_unlock(&ctl_mutex);
}

static void control_fork_child(void)
{
	if (ctl.open) {
		close_fds();
		for (unsigned int i = 0; i < ctl.nclients; i++) {
			close(ctl.clients[i].fd);
			outbox_free(&ctl.clients[i].out);
		}
		ctl.nclients = 0;
		ctl.trace_gen = 0;
		ctl.trace_owner = -1;
		ctl.open = false;
		ctl.serving = false;
	}
	pthread_mutex_unlock(&ctl_mutex);
}

static void control_at_exit(void);

static void control_once(void)
{
	pthread_atfork(control_fork_prepare, control_fork_parent, control_fork_child);
	atexit(control_at_exit);
}

/*
 * Remove the sockets of processes that died without closing theirs (killed): a socket file that
 * refuses connections has no one listening. Files that accept, or cannot be tried, are left: they
 * may belong to a live process, in another pid namespace too. Bounded, and only *.sock files.
 */
static void sweep_stale_sockets(const char *dir)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct dirent *e;
	int tried = 0;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d)) && tried < 256) {
		size_t len = strlen(e->d_name);
		int fd;

		if (len < 6 || strcmp(e->d_name + len - 5, ".sock") != 0 || e->d_type != DT_SOCK)
			continue;
		if ((size_t)snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", dir,
				     e->d_name) >= sizeof(addr.sun_path))
			continue;
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			break;
		tried++;
		if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 &&
		    errno == ECONNREFUSED)
			unlinkat(dirfd(d), e->d_name, 0);
		close(fd);
	}
	if (d)
		closedir(d);
}

static int bind_socket(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char dir[sizeof(addr.sun_path)];
	int err = lk__control_dir(dir, sizeof(dir));

	if (err)
		return err;
	sweep_stale_sockets(dir);
	if ((size_t)snprintf(ctl.path, sizeof(ctl.path), "%s/%d.sock", dir, (int)getpid()) >=
	    sizeof(ctl.path))
		return lk__fail(-ENAMETOOLONG, "lk_control_open: the socket path in %s is too long",
				dir);
	memcpy(addr.sun_path, ctl.path, sizeof(addr.sun_path));
	ctl.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ctl.listen_fd < 0)
		return lk__fail(-errno, "lk_control_open: socket: %s", strerror(errno));
	unlink(ctl.path); /* left by an earlier process with this pid, or this one before exec */
	if (bind(ctl.listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		return lk__fail(-errno, "lk_control_open: cannot bind %s: %s", ctl.path,
				strerror(errno));
	chmod(ctl.path, 0600);
	if (listen(ctl.listen_fd, MAX_CLIENTS) != 0) {
		err = -errno;
		unlink(ctl.path);
		return lk__fail(err, "lk_control_open: listen: %s", strerror(-err));
	}
	return 0;
}

static int start_service(void)
{
	sigset_t all, old;
	int err;

	ctl.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl.wake_fd < 0)
		return lk__fail(-errno, "lk_control_open: eventfd: %s", strerror(errno));
	/* The thread starts with every signal blocked: the application's signals are not for it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&ctl.thread, NULL, service_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		close(ctl.wake_fd);
		ctl.wake_fd = -1;
		return lk__fail(-err, "lk_control_open: cannot start the control thread: %s",
				strerror(err));
	}
	ctl.serving = true;
	return 0;
}

/* A socket open but not served: its service starts now. Call with ctl_mutex held. */
static int serve_listening_locked(void)
{
	int err;

	if (!ctl.open || ctl.serving || ctl.owner != getpid())
		return 0;
	err = start_service();
	if (err) {
		__atomic_store_n(&ctl.open, false, __ATOMIC_RELEASE);
		unlink(ctl.path);
		close_fds();
	}
	return err;
}

static int control_open(bool serve)
{
	int err;

	pthread_once(&ctl_once, control_once);
	pthread_mutex_lock(&ctl_mutex);
	if (ctl.open) {
		err = serve ? serve_listening_locked() : 0;
		pthread_mutex_unlock(&ctl_mutex);
		return err;
	}
	ctl.nclients = 0;
	ctl.trace_gen = 0;
	ctl.trace_owner = -1;
	ctl.serving = false;
	err = bind_socket();
	if (!err && serve) {
		err = start_service();
		if (err)
			unlink(ctl.path);
	}
	if (err) {
		close_fds();
	} else {
		ctl.owner = getpid();
		__atomic_store_n(&ctl.open, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ctl_mutex);
	return err;
}

LK_API int lk_control_open(void)
{
	return control_open(true);
}

int lk__control_listen(void)
{
	return control_open(false);
}

int lk__control_serve(void)
{
	int err;

	pthread_mutex_lock(&ctl_mutex);
	err = serve_listening_locked();
	pthread_mutex_unlock(&ctl_mutex);
	return err;
}

/*
 * Stop the service thread and end every connection. exiting: also finish a trace started over the
 * socket, whoever owns it, and tell the clients.
 */
static void shutdown_locked(bool exiting)
{
	struct lk__ctl_msg m = { .type = LK_CTL_EXIT };
	char path[LK_CTL_MAX_PATH + 1] = "", msg[LK_CTL_MAX_TEXT + 1] = "";
	struct lk_trace_stats st;

	__atomic_store_n(&ctl.open, false, __ATOMIC_RELEASE);
	if (ctl.serving) {
		eventfd_write(ctl.wake_fd, 1);
		if (!pthread_equal(pthread_self(), ctl.thread))
			pthread_join(ctl.thread, NULL);
		ctl.serving = false;
	}
	if (exiting) {
		if (our_trace_running()) {
			stop_trace(&m, path, sizeof(path), msg, sizeof(msg));
		} else {
			lk_trace_stats(&st);
			m.stats = (struct lk__ctl_stats){ 0,	      st.events, st.lost, st.bytes,
							  st.threads, path,	 msg };
		}
		for (unsigned int i = 0; i < ctl.nclients; i++)
			reply(&ctl.clients[i],
			      &m); /* after what waits for it, if its socket takes it now */
	}
	while (ctl.nclients)
		drop_client(ctl.nclients - 1);
	unlink(ctl.path);
	close_fds();
}

LK_API void lk_control_close(void)
{
	pthread_mutex_lock(&ctl_mutex);
	if (ctl.open && ctl.owner == getpid())
		shutdown_locked(false);
	pthread_mutex_unlock(&ctl_mutex);
}

static void control_at_exit(void)
{
	pthread_mutex_lock(&ctl_mutex);
	if (ctl.open && ctl.owner == getpid())
		shutdown_locked(true);
	pthread_mutex_unlock(&ctl_mutex);
}
