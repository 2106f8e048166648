// SPDX-License-Identifier: MIT
/*
 * The control socket, served by this very process: where the socket lives and how its directory is
 * checked; every command; session rules and traces that end with their connection; hostile and
 * malformed messages refused while the process keeps serving; too many clients; fork; exit; the
 * figures of its locks and counter sets.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <lowkey/counter.h>
#include <lowkey/error.h>
#include <lowkey/lock.h>
#include <lowkey/probe.h>

#include "control/control_internal.h"
#include "ctl_test.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

static char scratch[] = "/tmp/lkt-ctl-XXXXXX";
static char err[1024];

static void ping(int n)
{
	for (int i = 0; i < n; i++)
		LK_PROBE(srv, ping, i, (long)2 * i);
}

static void other(void)
{
	LK_PROBE(srv, other);
}

static int setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_DFL); /* a reply to a vanished client must not need it ignored */
	return mkdtemp(scratch) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	lk_control_close();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
	return system(cmd) == 0 ? 0 : -1;
}

/* A fresh private XDG_RUNTIME_DIR for this test; returns its path. */
static const char *private_runtime_dir(const char *name)
{
	static char dir[512];

	snprintf(dir, sizeof(dir), "%s/%s", scratch, name);
	assert_int_equal(mkdir(dir, 0700), 0);
	setenv("XDG_RUNTIME_DIR", dir, 1);
	return dir;
}

static void connect_self(struct lk__ctl_client *c)
{
	int rc = lk__ctl_connect(c, getpid(), err, sizeof(err));

	if (rc)
		print_error("connect: %s\n", err);
	assert_int_equal(rc, 0);
}

static int call(struct lk__ctl_client *c, struct lk__ctl_msg *req, uint16_t type,
		struct lk__ctl_msg *reply)
{
	return lk__ctl_call(c, req, type, reply, 30000, err, sizeof(err));
}

static int rule(struct lk__ctl_client *c, bool enable, uint8_t scope, const char *glob)
{
	struct lk__ctl_msg req = { .type = LK_CTL_RULE, .rule = { enable, scope, glob } }, reply;
	int rc = call(c, &req, LK_CTL_RESULT, &reply);

	return rc ? rc : (int)reply.result.value;
}

static int start(struct lk__ctl_client *c, const char *path, uint8_t ctl_flags)
{
	struct lk__ctl_msg req = { .type = LK_CTL_START,
				   .start = { LK_TRACE_CTF, ctl_flags, 0, 10, 0, path } },
			   reply;

	return call(c, &req, LK_CTL_RESULT, &reply);
}

static struct lk__ctl_status get_status(struct lk__ctl_client *c)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;

	assert_int_equal(call(c, &req, LK_CTL_STATUS_REPLY, &reply), 0);
	return reply.status;
}

struct site_query {
	const char *provider, *event;
	bool on;
};

static int query_site(const struct lk_probe_info *s, void *arg)
{
	struct site_query *q = arg;

	if (strcmp(s->provider, q->provider) == 0 && strcmp(s->event, q->event) == 0)
		q->on |= s->enabled;
	return 0;
}

static bool site_enabled(const char *provider, const char *event)
{
	struct site_query q = { provider, event, false };

	lk_probe_list(query_site, &q);
	return q.on;
}

static void trace_path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", scratch, name);
}

/* ---- the socket and its directory ---- */

static void socket_lives_in_a_private_directory(void **state)
{
	const char *dir = private_runtime_dir("xdg-ok");
	char want[512];
	struct stat st;

	(void)state;
	assert_int_equal(lk_control_open(), 0);
	assert_int_equal(lk_control_open(), 0); /* idempotent */
	snprintf(want, sizeof(want), "%s/lowkey/%d.sock", dir, (int)getpid());
	assert_string_equal(lk__control_path(), want);
	assert_int_equal(lstat(want, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(want, sizeof(want), "%s/lowkey", dir);
	assert_int_equal(lstat(want, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(st.st_uid, geteuid());
	snprintf(want, sizeof(want), "%s", lk__control_path());
	lk_control_close();
	assert_null(lk__control_path());
	assert_false(lkt_file_exists(want)); /* removed at close */
}

static void a_runtime_dir_open_to_others_is_not_used(void **state)
{
	char dir[512], want[512];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/xdg-open", scratch);
	assert_int_equal(mkdir(dir, 0755), 0);
	chmod(dir, 0755);
	setenv("XDG_RUNTIME_DIR", dir, 1);
	assert_int_equal(lk_control_open(), 0);
	snprintf(want, sizeof(want), "/tmp/lowkey-%u/%d.sock", (unsigned int)geteuid(),
		 (int)getpid());
	assert_string_equal(lk__control_path(), want);
	lk_control_close();
}

static void unsafe_directories_are_refused(void **state)
{
	const char *dir = private_runtime_dir("xdg-bad");
	char sub[512], elsewhere[512];

	(void)state;
	snprintf(sub, sizeof(sub), "%s/lowkey", dir);
	snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", scratch);
	assert_int_equal(mkdir(elsewhere, 0700), 0);

	assert_int_equal(symlink(elsewhere, sub), 0);
	assert_int_equal(lk_control_open(), -ENOTDIR);
	assert_non_null(strstr(lk_last_error(), "symbolic link"));
	assert_null(lk__control_path());
	unlink(sub);

	assert_int_equal(mkdir(sub, 0755), 0);
	chmod(sub, 0755);
	assert_int_equal(lk_control_open(), -EPERM);
	assert_non_null(strstr(lk_last_error(), "open to other users"));

	if (geteuid() == 0) {
		chmod(sub, 0700);
		assert_int_equal(chown(sub, 65534, 65534), 0);
		assert_int_equal(lk_control_open(), -EPERM);
		assert_non_null(strstr(lk_last_error(), "belongs to uid 65534"));
	}
	rmdir(sub);
	assert_int_equal(lk_control_open(), 0); /* and once it is gone, a good one is made */
	lk_control_close();
}

static int bound_socket(const char *path, bool listening)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	if (listening)
		assert_int_equal(listen(fd, 1), 0);
	return fd;
}

static void sockets_left_by_killed_processes_are_swept(void **state)
{
	const char *dir = private_runtime_dir("xdg-sweep");
	char sub[512], stale[600], live[600], other[600];
	int live_fd;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/lowkey", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(stale, sizeof(stale), "%s/999999.sock", sub);
	snprintf(live, sizeof(live), "%s/999998.sock", sub);
	snprintf(other, sizeof(other), "%s/notes.sock", sub);
	close(bound_socket(stale,
			   true)); /* its process "was killed": the file stays, no one listens */
	live_fd = bound_socket(live, true);
	fclose(fopen(other, "w")); /* not a socket: never touched */
	assert_int_equal(lk_control_open(), 0);
	assert_false(lkt_file_exists(stale));
	assert_true(lkt_file_exists(live));
	assert_true(lkt_file_exists(other));
	lk_control_close();
	close(live_fd);
}

/* ---- commands ---- */

static void commands_work(void **state)
{
	struct lk__ctl_msg req = { .type = LK_CTL_LIST }, m;
	struct lk__ctl_client c;
	struct lk__ctl_status st;
	char path[512];
	bool found = false;
	int sites = 0, rc;

	(void)state;
	private_runtime_dir("xdg-commands");
	assert_int_equal(lk_control_open(), 0);
	connect_self(&c);
	st = get_status(&c);
	assert_int_equal(st.pid, getpid());
	assert_int_equal(st.clients, 1);
	assert_int_equal(st.running, 0);
	assert_string_equal(st.version, lk_version());

	/* LIST: every site, then a RESULT with the count */
	assert_int_equal(lk__ctl_send(&c, &req), 0);
	for (;;) {
		assert_int_equal(lk__ctl_recv(&c, &m, 30000, err, sizeof(err)), 0);
		assert_int_equal(m.seq, req.seq);
		if (m.type == LK_CTL_RESULT)
			break;
		assert_int_equal(m.type, LK_CTL_SITE);
		sites++;
		if (strcmp(m.site.provider, "srv") == 0 && strcmp(m.site.event, "ping") == 0) {
			found = true;
			assert_int_equal(m.site.kind, LK_PROBE_EVENT);
			assert_int_equal(m.site.nargs, 2);
			assert_int_equal(m.site.arg_types, LK_PROBE_I64 | LK_PROBE_I64 << 4);
			assert_string_equal(m.site.arg_names, "i, (long)2 * i");
			assert_int_equal(m.site.enabled, 0);
			assert_non_null(strstr(m.site.file, "test_ctl_server.c"));
		}
	}
	assert_int_equal(m.result.err, 0);
	assert_int_equal(m.result.value, sites);
	assert_true(found);
	assert_int_equal(st.sites, sites);

	/* RULE, START, events, STOP */
	assert_int_equal(rule(&c, true, LK_CTL_RULE_SESSION, "srv:ping"), 1);
	assert_int_equal(rule(&c, true, LK_CTL_RULE_SESSION, "nothing:here"), 0);
	trace_path(path, sizeof(path), "commands.ctf");
	assert_int_equal(start(&c, path, 0), 0);
	st = get_status(&c);
	assert_int_equal(st.running, 1);
	assert_string_equal(st.path, path);
	assert_int_equal(st.sites_enabled, 1);
	rc = start(&c, path, 0);
	assert_int_equal(rc, -EBUSY);
	assert_non_null(strstr(err, "already running"));
	ping(100);
	other();
	req = (struct lk__ctl_msg){ .type = LK_CTL_STOP };
	assert_int_equal(call(&c, &req, LK_CTL_STATS, &m), 0);
	assert_int_equal(m.stats.err, 0);
	assert_int_equal(m.stats.events, 100); /* the pings; the thread's name is not an event */
	assert_int_equal(m.stats.threads, 1);
	assert_string_equal(m.stats.path, path);
	struct lkt_count n = lkt_count(path, "srv:ping");
	assert_int_equal(n.events, 100);
	assert_int_equal(n.arg0_sum, 99 * 100 / 2);
	assert_true(n.arg1_is_twice_arg0);
	assert_int_equal(lkt_count(path, "srv:other").events, 0);

	/* STOP without a trace; START into a path that cannot be */
	req = (struct lk__ctl_msg){ .type = LK_CTL_STOP };
	assert_int_equal(call(&c, &req, LK_CTL_STATS, &m), -ENOENT);
	assert_true(start(&c, "/proc/no/such/dir", 0) < 0);
	assert_true(err[0] != 0);
	assert_int_equal(get_status(&c).running, 0);
	lk__ctl_disconnect(&c);
	lk_control_close();
}

static bool trace_stopped(void *arg)
{
	struct lk_trace_stats st;

	(void)arg;
	lk_trace_stats(&st);
	return !st.running;
}

static bool rule_gone(void *arg)
{
	(void)arg;
	return !site_enabled("srv", "ping");
}

static void session_ends_with_the_connection(void **state)
{
	struct lk_trace_config config = { .flush_ms = 10 };
	struct lk__ctl_client a, b;
	char path[512], path2[512];

	(void)state;
	private_runtime_dir("xdg-session");
	assert_int_equal(lk_control_open(), 0);
	connect_self(&a);
	connect_self(&b);
	assert_int_equal(rule(&a, true, LK_CTL_RULE_SESSION, "srv:ping"), 1);
	assert_int_equal(rule(&b, true, LK_CTL_RULE_KEEP, "srv:other"), 1);
	trace_path(path, sizeof(path), "session.ctf");
	assert_int_equal(start(&a, path, LK_CTL_START_STOP_ON_CLOSE), 0);
	assert_true(site_enabled("srv", "ping"));
	ping(10);

	/* A goes away without a word: its trace stops, its rule goes */
	lk__ctl_disconnect(&a);
	assert_true(lkt_wait_for(trace_stopped, NULL));
	assert_int_equal(lkt_count(path, "srv:ping").events, 10);
	lk__ctl_disconnect(&b);

	/* B's rule was kept: a trace started in the process records srv:other, not srv:ping */
	trace_path(path2, sizeof(path2), "session2.ctf");
	config.path = path2;
	assert_int_equal(lk_trace_start(&config), 0);
	assert_true(lkt_wait_for(rule_gone, NULL));
	assert_true(site_enabled("srv", "other"));
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
	lk_control_close();
}

/* ---- hostile input ---- */

static int raw_connect(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", lk__control_path());
	assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	return fd;
}

/* Receive one message on a raw connection (30 s at most); its length, 0 at the end, -errno. */
static ssize_t raw_recv(int fd, uint8_t *buf, size_t len)
{
	struct timeval tv = { 30, 0 };
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recv(fd, buf, len, 0);
	/* a peer that closed with our messages unread reports that first; what it sent is behind */
	if (n < 0 && errno == ECONNRESET)
		n = recv(fd, buf, len, 0);
	return n < 0 ? -errno : n;
}

/* The next message on fd must be a RESULT with error want. */
static void expect_result(int fd, int want)
{
	uint8_t reply[LK_CTL_MAX_MSG];
	struct lk__ctl_msg m;
	ssize_t n = raw_recv(fd, reply, sizeof(reply));

	assert_true(n > 0);
	assert_int_equal(lk__ctl_decode(reply, (size_t)n, &m, err, sizeof(err)), 0);
	assert_int_equal(m.type, LK_CTL_RESULT);
	if (m.result.err != want)
		print_error("wanted %d, got %d: %s\n", want, m.result.err, m.result.message);
	assert_int_equal(m.result.err, want);
	assert_true(m.result.message[0] != 0);
}

/* The process has ended the connection: nothing more comes, and the end is seen. */
static void expect_dropped(int fd)
{
	uint8_t reply[LK_CTL_MAX_MSG];
	ssize_t n = raw_recv(fd, reply, sizeof(reply));

	if (n != 0)
		print_error("the connection is still open (recv: %zd)\n", n);
	assert_int_equal(n, 0);
}

/* Send len bytes on a new connection: the reply must be a RESULT with error want, then the end. */
static void expect_refusal(const void *msg, size_t len, int want)
{
	int fd = raw_connect();

	assert_int_equal(send(fd, msg, len, MSG_NOSIGNAL), (ssize_t)len);
	expect_result(fd, want);
	expect_dropped(fd);
	close(fd);
}

static int encode(struct lk__ctl_msg *m, uint8_t *buf)
{
	int n = lk__ctl_encode(m, buf, LK_CTL_MAX_MSG);

	assert_true(n > 0);
	return n;
}

static void hostile_messages_are_refused(void **state)
{
	static uint8_t big[LK_CTL_MAX_MSG * 2];
	struct lk__ctl_msg m = { .type = LK_CTL_STATUS };
	struct lk__ctl_client c;
	struct lk__ctl_status st;
	uint8_t buf[LK_CTL_MAX_MSG];
	uint64_t before;
	int fd, n, refusals = 0;

	(void)state;
	private_runtime_dir("xdg-hostile");
	assert_int_equal(lk_control_open(), 0);
	connect_self(&c);
	before = get_status(&c).refused_messages;

	expect_refusal("abc", 3, -EBADMSG), refusals++;
	memset(big, 0xa5, sizeof(big));
	expect_refusal(big, sizeof(big), -EMSGSIZE), refusals++;
	expect_refusal(big, LK_CTL_MAX_MSG, -EBADMSG), refusals++; /* bad magic */

	n = encode(&m, buf);
	buf[4] = 7; /* version 7 */
	expect_refusal(buf, (size_t)n, -EPROTONOSUPPORT), refusals++;
	n = encode(&m, buf);
	buf[8]++; /* length */
	expect_refusal(buf, (size_t)n, -EBADMSG), refusals++;
	n = encode(&m, buf);
	buf[6] = 0x55; /* type */
	expect_refusal(buf, (size_t)n, -EOPNOTSUPP), refusals++;

	m = (struct lk__ctl_msg){ .type = LK_CTL_RESULT,
				  .result = { 0, 0, "a reply is not a request" } };
	n = encode(&m, buf);
	expect_refusal(buf, (size_t)n, -EOPNOTSUPP), refusals++;

	m = (struct lk__ctl_msg){ .type = LK_CTL_START,
				  .start = { 0, 0, 0, 0, 0, "relative.ctf" } };
	n = encode(&m, buf);
	expect_refusal(buf, (size_t)n, -EINVAL), refusals++;
	m.start.path = "/tmp/x";
	m.start.flags = 0x80;
	n = encode(&m, buf);
	expect_refusal(buf, (size_t)n, -EINVAL), refusals++;

	m = (struct lk__ctl_msg){ .type = LK_CTL_RULE, .rule = { 1, 0, "srv:*" } };
	n = encode(&m, buf);
	buf[n - 1] = 'x'; /* the string's NUL */
	expect_refusal(buf, (size_t)n, -EBADMSG), refusals++;
	n = encode(&m, buf);
	buf[LK_CTL_HEADER + 2] = 200; /* the string's length */
	expect_refusal(buf, (size_t)n, -EBADMSG), refusals++;

	/* A client that sends and leaves without reading, and one that connects and leaves. */
	fd = raw_connect();
	send(fd, "junk", 4, MSG_NOSIGNAL);
	close(fd);
	refusals++;
	close(raw_connect());

	/* None of it changed anything, and the process still serves. */
	for (int i = 0; i < 6000 && get_status(&c).refused_messages - before < (uint64_t)refusals;
	     i++)
		lkt_sleep_ms(10); /* the last connections may be served after this one */
	st = get_status(&c);
	assert_int_equal(st.refused_messages - before, (uint64_t)refusals);
	assert_int_equal(st.running, 0);
	assert_int_equal(st.sites_enabled, 0);
	assert_int_equal(st.clients, 1);
	assert_int_equal(rule(&c, true, LK_CTL_RULE_SESSION, "srv:ping"), 1);
	lk__ctl_disconnect(&c);
	lk_control_close();
}

/*
 * A client that sends malformed frames and never reads: the first one gets its error reply and
 * ends the connection; the frames behind it are never read. Each used to hold the service thread
 * for 5 s, and the client was never dropped.
 */
static void a_client_breaking_the_protocol_is_dropped(void **state)
{
	struct lk__ctl_client c;
	uint64_t before;
	int fd, sent = 0;

	(void)state;
	private_runtime_dir("xdg-malformed");
	assert_int_equal(lk_control_open(), 0);
	connect_self(&c);
	before = get_status(&c).refused_messages;
	fd = raw_connect();
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	while (sent < 100000 && send(fd, "junk", 4, MSG_NOSIGNAL) == 4)
		sent++; /* until the process stops reading them, or it has dropped us */
	assert_true(sent > 0);
	assert_int_equal(fcntl(fd, F_SETFL, 0), 0);
	expect_result(fd, -EBADMSG);
	expect_dropped(fd);
	close(fd);
	assert_int_equal(get_status(&c).refused_messages - before, 1);
	assert_int_equal(get_status(&c).clients, 1);
	lk__ctl_disconnect(&c);
	lk_control_close();
}

struct flood {
	int fd;
	uint32_t sent; /* STATUS requests, seq 1 .. sent */
};

/* Send STATUS requests without reading the replies, until the process stops reading them. */
static struct flood flood_without_reading(void)
{
	struct lk__ctl_msg m = { .type = LK_CTL_STATUS };
	struct flood f = { raw_connect(), 0 };
	uint8_t buf[LK_CTL_MAX_MSG];
	int n;

	assert_int_equal(fcntl(f.fd, F_SETFL, O_NONBLOCK), 0);
	for (;;) {
		struct pollfd p = { .fd = f.fd, .events = POLLOUT };

		m.seq = f.sent + 1;
		n = encode(&m, buf);
		if (send(f.fd, buf, (size_t)n, MSG_NOSIGNAL) == n) {
			f.sent++;
			continue;
		}
		if (errno != EAGAIN)
			break; /* the process has ended the connection */
		/* full: the process's replies fill our side and it has stopped reading ours */
		if (poll(&p, 1, 200) == 0)
			break;
	}
	assert_int_equal(fcntl(f.fd, F_SETFL, 0), 0);
	return f;
}

static struct lk__ctl_client *status_client;

static bool one_client_left(void *arg)
{
	(void)arg;
	return get_status(status_client).clients == 1;
}

/*
 * A client that sends requests and does not read the replies: what its socket cannot take waits,
 * its next requests wait, and the others are served meanwhile; when it reads, every reply comes,
 * in order. One that never reads is dropped once its replies have waited lk__control_stall_ms.
 */
static void a_client_that_does_not_read_stalls_no_one(void **state)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	struct lk__ctl_client c;
	struct lk__ctl_msg m;
	struct flood f;
	uint64_t before;
	int saved = __atomic_load_n(&lk__control_stall_ms, __ATOMIC_RELAXED);

	(void)state;
	private_runtime_dir("xdg-stall");
	assert_int_equal(lk_control_open(), 0);
	__atomic_store_n(&lk__control_stall_ms, 3600 * 1000,
			 __ATOMIC_RELAXED); /* never, in this test */
	connect_self(&c);
	before = get_status(&c).refused_messages;
	f = flood_without_reading();
	assert_true(f.sent > 10);
	assert_int_equal(get_status(&c).clients,
			 2); /* served while the other waits, not after it is gone */
	assert_int_equal(get_status(&c).refused_messages, before);
	for (uint32_t seq = 1; seq <= f.sent; seq++) {
		ssize_t n = raw_recv(f.fd, buf, sizeof(buf));

		assert_true(n > 0);
		assert_int_equal(lk__ctl_decode(buf, (size_t)n, &m, err, sizeof(err)), 0);
		assert_int_equal(m.type, LK_CTL_STATUS_REPLY);
		assert_int_equal(m.seq, seq);
	}
	close(f.fd);

	__atomic_store_n(&lk__control_stall_ms, 1, __ATOMIC_RELAXED);
	f = flood_without_reading();
	status_client = &c;
	assert_true(lkt_wait_for(one_client_left, NULL));
	close(f.fd);
	__atomic_store_n(&lk__control_stall_ms, saved, __ATOMIC_RELAXED);
	lk__ctl_disconnect(&c);
	lk_control_close();
}

static void too_many_clients_are_refused(void **state)
{
	struct lk__ctl_client c[9], extra;
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	uint64_t before;

	(void)state;
	private_runtime_dir("xdg-many");
	assert_int_equal(lk_control_open(), 0);
	for (int i = 0; i < 8; i++)
		connect_self(&c[i]);
	before = get_status(&c[0]).refused_peers;
	assert_int_equal(get_status(&c[7]).clients, 8);
	connect_self(&extra); /* the kernel accepts; the process refuses */
	assert_int_equal(call(&extra, &req, LK_CTL_STATUS_REPLY, &reply), -EBUSY);
	assert_non_null(strstr(err, "already serves"));
	lk__ctl_disconnect(&extra);
	assert_int_equal(get_status(&c[0]).refused_peers, before + 1);
	lk__ctl_disconnect(&c[3]);
	connect_self(&c[8]); /* a slot freed: served again */
	assert_int_equal(get_status(&c[8]).pid, getpid());
	for (int i = 0; i < 9; i++)
		if (i != 3)
			lk__ctl_disconnect(&c[i]);
	lk_control_close();
}

/* ---- fork and exit ---- */

static void a_forked_child_has_its_own_socket(void **state)
{
	struct lk__ctl_client c;
	char parent_path[512];
	int status;
	pid_t child;

	(void)state;
	private_runtime_dir("xdg-fork");
	assert_int_equal(lk_control_open(), 0);
	snprintf(parent_path, sizeof(parent_path), "%s", lk__control_path());
	child = fork();
	if (child == 0) {
		struct lk__ctl_client cc;
		int ok = lk__control_path() == NULL; /* not inherited */

		if (!UNDER_TSAN) { /* ThreadSanitizer cannot start threads after a multi-threaded fork */
			ok = ok && lk_control_open() == 0 &&
			     strcmp(lk__control_path(), parent_path) != 0;
			ok = ok && lk__ctl_connect(&cc, getpid(), err, sizeof(err)) == 0;
			if (ok)
				lk__ctl_disconnect(&cc);
		}
		exit(ok ? 0 : 1); /* at exit, the child's socket goes; the parent's stays */
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(lkt_file_exists(parent_path));
	connect_self(&c);
	assert_int_equal(get_status(&c).pid, getpid());
	lk__ctl_disconnect(&c);
	lk_control_close();
}

/* What a LOCKS or COUNTERS listing held: each message's name (or event) and its numbers. */
struct listed {
	int n;
	char name[8][64];
	uint64_t a[8], b[8]; /* LOCK: acquisitions, kind; PERF: set, index */
};

static struct listed list(struct lk__ctl_client *c, uint16_t type)
{
	struct lk__ctl_msg req = { .type = type }, m;
	struct listed l = { 0 };

	assert_int_equal(lk__ctl_send(c, &req), 0);
	for (;;) {
		assert_int_equal(lk__ctl_recv(c, &m, 30000, err, sizeof(err)), 0);
		assert_int_equal(m.seq, req.seq);
		if (m.type == LK_CTL_RESULT) {
			assert_int_equal(m.result.err, 0);
			assert_int_equal(m.result.value, l.n);
			return l;
		}
		assert_int_equal(m.type, type == LK_CTL_LOCKS ? LK_CTL_LOCK : LK_CTL_PERF);
		assert_true(l.n < 8);
		snprintf(l.name[l.n], sizeof(l.name[0]), "%s",
			 type == LK_CTL_LOCKS ? m.lock.name : m.perf.event);
		l.a[l.n] = type == LK_CTL_LOCKS ? m.lock.acquisitions : m.perf.set;
		l.b[l.n] = type == LK_CTL_LOCKS ? m.lock.kind : m.perf.index;
		l.n++;
	}
}

/* How many messages a listing of type held, without asserting (for a forked child); -1: failed. */
static int count_listed(struct lk__ctl_client *c, uint16_t type)
{
	struct lk__ctl_msg req = { .type = type }, m;
	int n = 0;

	if (lk__ctl_send(c, &req) != 0)
		return -1;
	while (lk__ctl_recv(c, &m, 30000, err, sizeof(err)) == 0)
		if (m.type == LK_CTL_RESULT)
			return m.result.err ? -1 : n;
		else
			n++;
	return -1;
}

/*
 * LOCKS lists the named locks with their figures, names escaped as text; COUNTERS the events of
 * the sets open now, in the order opened, and none of a closed set or of the parent's in a
 * forked child.
 */
static void locks_and_counter_sets_are_listed(void **state)
{
	lk_mutex_t a;
	lk_rwlock_t b;
	struct lk_counters *one = NULL, *two = NULL;
	struct lk__ctl_client c;
	struct listed l;
	int status;
	pid_t child;

	(void)state;
	private_runtime_dir("xdg-figures");
	assert_int_equal(lk_control_open(), 0);
	connect_self(&c);
	assert_int_equal(list(&c, LK_CTL_LOCKS).n, 0);
	assert_int_equal(list(&c, LK_CTL_COUNTERS).n, 0);

	assert_int_equal(lk_mutex_init(&a, "srv-a"), 0);
	assert_int_equal(lk_rwlock_init(&b, "srv\nb"), 0);
	for (int i = 0; i < 3; i++) {
		lk_mutex_lock(&a);
		lk_mutex_unlock(&a);
	}
	l = list(&c, LK_CTL_LOCKS);
	assert_int_equal(l.n, 2);
	for (int i = 0; i < 2; i++) {
		bool is_a = strcmp(l.name[i], "srv-a") == 0;

		if (!is_a)
			assert_string_equal(l.name[i], "srv\\x0ab"); /* escaped, not refused */
		assert_int_equal(l.a[i], is_a ? 3 : 0);
		assert_int_equal(l.b[i], is_a ? LK_LOCK_MUTEX : LK_LOCK_RWLOCK);
	}

	if (lk_counters_open(&one, "task-clock", 0, 0) < 0 ||
	    lk_counters_open(&two, "task-clock,page-faults", 0, 0) < 0) {
		print_message("counter sets not checked: %s\n", lk_last_error());
	} else {
		l = list(&c, LK_CTL_COUNTERS);
		assert_int_equal(l.n, 3);
		assert_string_equal(l.name[0], "task-clock");
		assert_string_equal(l.name[2], "page-faults");
		assert_true(l.a[1] == l.a[2] && l.a[1] > l.a[0]); /* numbered in the order opened */
		assert_int_equal(l.b[2], 1);
		child = fork();
		if (child == 0) {
			struct lk__ctl_client cc;
			int ok = 1;

			if (!UNDER_TSAN) { /* no thread after a multi-threaded fork under TSan */
				ok = lk_control_open() == 0 &&
				     lk__ctl_connect(&cc, getpid(), err, sizeof(err)) == 0;
				ok = ok &&
				     count_listed(&cc, LK_CTL_COUNTERS) == 0; /* the parent's */
				if (ok)
					lk__ctl_disconnect(&cc);
			}
			_exit(ok ? 0 : 1);
		}
		assert_int_equal(waitpid(child, &status, 0), child);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		lk_counters_close(one);
		l = list(&c, LK_CTL_COUNTERS);
		assert_int_equal(l.n, 2);
		assert_string_equal(l.name[0], "task-clock");
		lk_counters_close(two);
		assert_int_equal(list(&c, LK_CTL_COUNTERS).n, 0);
	}
	assert_int_equal(lk_mutex_destroy(&a), 0);
	assert_int_equal(lk_rwlock_destroy(&b), 0);
	assert_int_equal(list(&c, LK_CTL_LOCKS).n, 0);
	lk__ctl_disconnect(&c);
	lk_control_close();
}

static void exit_finishes_a_trace_started_over_the_socket(void **state)
{
	struct lk__ctl_client c;
	struct lk__ctl_msg m;
	char path[512], sock[512];
	int go[2], status;
	pid_t child;

	(void)state;
	private_runtime_dir("xdg-exit");
	assert_int_equal(pipe(go), 0);
	child = fork();
	if (child == 0) {
		char fd[16];

		/* a fresh process (exec), whose only thread is its own: see exit_child() */
		snprintf(fd, sizeof(fd), "%d", go[0]);
		execl("/proc/self/exe", "test_ctl_server", "--exit-child", fd, (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	for (int i = 0; i < 6000 && lk__ctl_connect(&c, child, err, sizeof(err)) != 0; i++)
		lkt_sleep_ms(10);
	assert_true(c.fd >= 0);
	snprintf(sock, sizeof(sock), "%s", c.path);
	assert_int_equal(rule(&c, true, LK_CTL_RULE_SESSION, "srv:ping"), 1);
	trace_path(path, sizeof(path), "exit.ctf");
	assert_int_equal(start(&c, path, 0), 0);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(lk__ctl_recv(&c, &m, 60000, err, sizeof(err)), 0);
	assert_int_equal(m.type, LK_CTL_EXIT);
	assert_int_equal(m.stats.err, 0);
	assert_int_equal(m.stats.events, 25);
	assert_string_equal(m.stats.path, path);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_false(lkt_file_exists(sock));
	assert_int_equal(lkt_count(path, "srv:ping").events, 25);
	lk__ctl_disconnect(&c);
	close(go[1]);
}

/* ---- descriptors sent with a request ---- */

/* Send len bytes with n descriptors (SCM_RIGHTS); what sendmsg returns. */
static ssize_t send_with_fds(int sock, const void *buf, size_t len, const int *fds, int n)
{
	union {
		char space[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { (void *)buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	assert_true(n <= 8);
	if (n) {
		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.space;
		msg.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL);
}

/* How many descriptors this process has open. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", "..", and d's own */
}

static int new_dir(const char *name)
{
	char path[512];
	int fd;

	trace_path(path, sizeof(path), name);
	assert_int_equal(mkdir(path, 0755), 0);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static void traces_and_snapshots_go_into_the_directory_sent(void **state)
{
	struct lk__ctl_msg req, m;
	struct lk__ctl_client c;
	char named[512], dir[512], snap[512];
	int fd;

	(void)state;
	private_runtime_dir("xdg-fds");
	assert_int_equal(lk_control_open(), 0);
	connect_self(&c);
	assert_int_equal(rule(&c, true, LK_CTL_RULE_SESSION, "srv:ping"), 1);

	/* the name only names it: nothing is made there */
	trace_path(named, sizeof(named), "named-only.ctf");
	fd = new_dir("sent.ctf");
	req = (struct lk__ctl_msg){ .type = LK_CTL_START,
				    .start = { LK_TRACE_CTF, 0, 0, 10, 0, named, LK_CTL_OUT_DIR } };
	assert_int_equal(lk__ctl_call_fd(&c, &req, fd, LK_CTL_RESULT, &m, 30000, err, sizeof(err)),
			 0);
	close(fd);
	ping(40);
	req = (struct lk__ctl_msg){ .type = LK_CTL_STOP };
	assert_int_equal(call(&c, &req, LK_CTL_STATS, &m), 0);
	assert_int_equal(m.stats.err, 0);
	assert_int_equal(m.stats.events, 40);
	assert_string_equal(m.stats.path, named);
	trace_path(dir, sizeof(dir), "sent.ctf");
	assert_int_equal(lkt_count(dir, "srv:ping").events, 40);
	assert_false(lkt_file_exists(named));

	/* a flight recorder's snapshot, into the directory sent with SNAPSHOT */
	trace_path(named, sizeof(named), "recorder.ctf");
	req = (struct lk__ctl_msg){
		.type = LK_CTL_START, .start = { LK_TRACE_CTF, 0, LK_TRACE_OVERWRITE, 10, 0, named }
	};
	assert_int_equal(call(&c, &req, LK_CTL_RESULT, &m), 0);
	ping(30);
	trace_path(snap, sizeof(snap), "snapshot-named-only.ctf");
	fd = new_dir("snapshot-sent.ctf");
	req = (struct lk__ctl_msg){ .type = LK_CTL_SNAPSHOT, .snapshot = { snap, LK_CTL_OUT_DIR } };
	assert_int_equal(lk__ctl_call_fd(&c, &req, fd, LK_CTL_STATS, &m, 30000, err, sizeof(err)),
			 0);
	close(fd);
	assert_int_equal(m.stats.events, 30);
	assert_string_equal(m.stats.path, snap);
	trace_path(dir, sizeof(dir), "snapshot-sent.ctf");
	assert_int_equal(lkt_count(dir, "srv:ping").events, 30);
	assert_false(lkt_file_exists(snap));
	req = (struct lk__ctl_msg){ .type = LK_CTL_STOP };
	assert_int_equal(call(&c, &req, LK_CTL_STATS, &m), 0);

	/* a flight recorder takes no directory at its start: snapshots bring theirs */
	fd = new_dir("recorder-sent.ctf");
	req = (struct lk__ctl_msg){ .type = LK_CTL_START,
				    .start = { LK_TRACE_CTF, 0, LK_TRACE_OVERWRITE, 10, 0, named,
					       LK_CTL_OUT_DIR } };
	assert_int_equal(lk__ctl_call_fd(&c, &req, fd, LK_CTL_RESULT, &m, 30000, err, sizeof(err)),
			 -EINVAL);
	close(fd);
	lk__ctl_disconnect(&c);
	lk_control_close();
}

/* A request with descriptors it does not say it carries, or not what it says: refused, all closed. */
static void descriptors_that_do_not_fit_are_refused_and_closed(void **state)
{
	struct lk__ctl_msg status = { .type = LK_CTL_STATUS },
			   start = { .type = LK_CTL_START,
				     .start = { LK_TRACE_CTF, 0, 0, 10, 0, "/x.ctf",
						LK_CTL_OUT_DIR } };
	uint8_t with_dir[LK_CTL_MAX_MSG], plain[LK_CTL_MAX_MSG], old[LK_CTL_MAX_MSG];
	struct lk__ctl_client c;
	char path[512];
	int fds[8], file, full, n_dir, n_plain, sock, before_fds, refusals = 0;
	uint64_t before;

	(void)state;
	private_runtime_dir("xdg-bad-fds");
	assert_int_equal(lk_control_open(), 0);
	connect_self(&c);
	before = get_status(&c).refused_messages;
	n_dir = encode(&start, with_dir);
	n_plain = encode(&status, plain);
	memcpy(old, with_dir, (size_t)n_dir);
	old[4] = 2; /* a client of the protocol before descriptors */
	trace_path(path, sizeof(path), "a-file");
	file = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(file >= 0);
	full = new_dir("full");
	assert_int_equal(mkdirat(full, "entry", 0755), 0);
	for (int i = 0; i < 8; i++)
		fds[i] = new_dir((char[]){ 'd', (char)('0' + i), 0 });
	before_fds = open_fds();

	struct {
		const uint8_t *msg;
		int len, nfds, want;
		const int *fds;
	} cases[] = {
		{ with_dir, n_dir, 0, -EBADMSG, NULL },		  /* says one, none came */
		{ plain, n_plain, 1, -EBADMSG, fds },		  /* a STATUS carries none */
		{ with_dir, n_dir, 2, -EBADMSG, fds },		  /* two */
		{ with_dir, n_dir, 8, -EBADMSG, fds },		  /* more than are read */
		{ with_dir, n_dir, 1, -ENOTDIR, &file },	  /* not a directory */
		{ with_dir, n_dir, 1, -EEXIST, &full },		  /* not empty */
		{ (const uint8_t *)"junk", 4, 1, -EBADMSG, fds }, /* not a message */
		{ old, n_dir, 1, -EPROTONOSUPPORT, fds },	  /* an older protocol */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sock = raw_connect();
		assert_int_equal(send_with_fds(sock, cases[i].msg, (size_t)cases[i].len,
					       cases[i].fds, cases[i].nfds),
				 cases[i].len);
		expect_result(sock, cases[i].want);
		expect_dropped(sock);
		close(sock);
		refusals++;
	}
	for (int i = 0; i < 6000 && get_status(&c).refused_messages - before < (uint64_t)refusals;
	     i++)
		lkt_sleep_ms(10);
	assert_int_equal(get_status(&c).refused_messages - before, (uint64_t)refusals);
	/* the service thread closes each connection just after counting its refusal */
	for (int i = 0; i < 6000 && open_fds() != before_fds; i++)
		lkt_sleep_ms(10);
	assert_int_equal(open_fds(), before_fds); /* every descriptor received was closed */
	assert_int_equal(get_status(&c).running, 0);
	for (int i = 0; i < 8; i++)
		close(fds[i]);
	close(file);
	close(full);
	lk__ctl_disconnect(&c);
	lk_control_close();
}

/* A process that sends descriptors with its replies: the client never receives them. */
static void descriptors_a_process_sends_back_are_not_taken(void **state)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply, m;
	struct lk__ctl_client c;
	uint8_t buf[LK_CTL_MAX_MSG];
	char sock_path[512], got[LK_CTL_MAX_MSG];
	int listener, peer, fds[2], before_fds, n;

	(void)state;
	trace_path(sock_path, sizeof(sock_path), "hostile.sock");
	listener = bound_socket(sock_path, true);
	assert_int_equal(lk__ctl_connect_path(&c, sock_path, 0, err, sizeof(err)), 0);
	peer = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	assert_true(peer >= 0);
	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	fds[1] = new_dir("sent-back");
	before_fds = open_fds();

	assert_int_equal(lk__ctl_send(&c, &req), 0);
	assert_true(recv(peer, got, sizeof(got), 0) > 0);
	m = (struct lk__ctl_msg){ .type = LK_CTL_RESULT,
				  .seq = req.seq,
				  .result = { -EPERM, 0, "no" } };
	n = encode(&m, buf);
	assert_int_equal(send_with_fds(peer, buf, (size_t)n, fds, 2), n);
	assert_int_equal(lk__ctl_recv(&c, &reply, 30000, err, sizeof(err)), 0);
	assert_int_equal(reply.type, LK_CTL_RESULT);
	assert_int_equal(reply.result.err, -EPERM);
	assert_int_equal(open_fds(), before_fds);
	close(fds[0]);
	close(fds[1]);
	close(peer);
	close(listener);
	lk__ctl_disconnect(&c);
}

/* The child of exit_finishes_a_trace_started_over_the_socket. */
static int exit_child(int go)
{
	char byte;

	lk_control_open();
	if (read(go, &byte, 1) != 1)
		_exit(2);
	ping(25);
	exit(0); /* atexit: the trace is finished, the client told, the socket removed */
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(socket_lives_in_a_private_directory),
		cmocka_unit_test(a_runtime_dir_open_to_others_is_not_used),
		cmocka_unit_test(unsafe_directories_are_refused),
		cmocka_unit_test(sockets_left_by_killed_processes_are_swept),
		cmocka_unit_test(commands_work),
		cmocka_unit_test(session_ends_with_the_connection),
		cmocka_unit_test(hostile_messages_are_refused),
		cmocka_unit_test(a_client_breaking_the_protocol_is_dropped),
		cmocka_unit_test(a_client_that_does_not_read_stalls_no_one),
		cmocka_unit_test(too_many_clients_are_refused),
		cmocka_unit_test(a_forked_child_has_its_own_socket),
		cmocka_unit_test(locks_and_counter_sets_are_listed),
		cmocka_unit_test(exit_finishes_a_trace_started_over_the_socket),
		cmocka_unit_test(traces_and_snapshots_go_into_the_directory_sent),
		cmocka_unit_test(descriptors_that_do_not_fit_are_refused_and_closed),
		cmocka_unit_test(descriptors_a_process_sends_back_are_not_taken),
	};

	if (argc == 3 && strcmp(argv[1], "--exit-child") == 0)
		return exit_child(atoi(argv[2]));
	return cmocka_run_group_tests(tests, setup, teardown);
}
