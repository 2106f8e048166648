// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for the control socket's server (src/control/control*.c): its state machine,
 * driven through real sockets by up to three clients of this very process.
 *
 * An input is a script. Each byte is an operation (its low 3 bits) for client (byte >> 3) % 3:
 *   0 connect            1 send a frame: a length byte, then that many bytes as they are
 *   2 send a request built from two bytes (type, options)
 *   3 read what arrived  4 close            5 sync: another client's STATUS must be answered
 *   6 fire the probes    7 shut down the writing side
 * A START's path, raw or built, is replaced by one in a scratch directory before it is sent, and
 * a request that says it carries a directory (output LK_CTL_OUT_DIR) is sent with a new, empty
 * one of the scratch directory's.
 *
 * Properties checked, besides what the sanitizers check:
 *   - whatever the clients do (junk, floods, never reading), another client's STATUS is answered
 *     within 10 s: no client stalls the service thread;
 *   - every message the server sends decodes;
 *   - once every client has gone, the server holds none of them; unless a rule was sent to be
 *     kept, no site is on; unless a trace was started without "stop on close", none runs.
 *
 *   See CMakeLists.txt for the build (the library, with the server's files and protocol.c
 *   instrumented).
 *   fuzz-control-server -max_len=4096 tests/fuzz/corpus/control-server
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "control/control_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NCLIENTS 3

static char scratch[] = "/tmp/lkt-fuzz-ctl-XXXXXX";
static char out_dir[64], trace_path[96];
static int fds[NCLIENTS] = { -1, -1, -1 };
static bool full[NCLIENTS]; /* the server has stopped taking this client's frames: do not wait */
static uint32_t seq;
static bool kept_rule, unowned_trace; /* the script asked for what outlives its clients */

static void must(int condition)
{
	if (!condition)
		__builtin_trap();
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

/* At exit, after the control socket's own handler (registered later, so run first) closed it. */
static void remove_scratch(void)
{
	nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup_once(void)
{
	static bool done;
	char xdg[64];

	if (done)
		return;
	done = true;
	signal(SIGPIPE, SIG_IGN);
	must(mkdtemp(scratch) != NULL);
	atexit(remove_scratch);
	snprintf(xdg, sizeof(xdg), "%s/xdg", scratch);
	snprintf(out_dir, sizeof(out_dir), "%s/out", scratch);
	snprintf(trace_path, sizeof(trace_path), "%s/trace", out_dir);
	must(mkdir(xdg, 0700) == 0);
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	must(lk_control_open() == 0);
}

/* ---- what the clients send ---- */

/*
 * What a valid message asks that outlives its client; a START's path is made ours (re-encoded).
 * *nfds: the descriptors it says it carries.
 */
static size_t vet(uint8_t *buf, size_t len, size_t cap, unsigned int *nfds)
{
	struct lk__ctl_msg m;
	int n;

	*nfds = 0;
	if (lk__ctl_decode(buf, len, &m, NULL, 0) != 0)
		return len;
	*nfds = lk__ctl_request_fds(&m);
	if (m.type == LK_CTL_RULE && m.rule.scope == LK_CTL_RULE_KEEP)
		kept_rule = true;
	if (m.type != LK_CTL_START)
		return len;
	if (!(m.start.ctl_flags & LK_CTL_START_STOP_ON_CLOSE))
		unowned_trace = true;
	m.start.path = trace_path;
	n = lk__ctl_encode(&m, buf, cap);
	must(n > 0);
	return (size_t)n;
}

/* A new, empty directory of ours, open; -1 if it cannot be made. */
static int new_out_dir(void)
{
	char dir[128];

	snprintf(dir, sizeof(dir), "%s/sent-XXXXXX", out_dir);
	if (!mkdtemp(dir))
		return -1;
	return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* send(), with the directory dir (-1: none) passed along. */
static ssize_t send_with(int fd, const uint8_t *buf, size_t len, int dir)
{
	union {
		char space[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { (void *)buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (dir >= 0) {
		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.space;
		msg.msg_controllen = sizeof(cbuf.space);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &dir, sizeof(int));
	}
	return sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void send_frame(int k, const uint8_t *frame, size_t len)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	unsigned int nfds;
	int dir = -1;

	if (fds[k] < 0 || len > sizeof(buf))
		return;
	memcpy(buf, frame, len);
	len = vet(buf, len, sizeof(buf), &nfds);
	if (nfds)
		dir = new_out_dir();
	if (send_with(fds[k], buf, len, dir) >= 0 || errno != EAGAIN || full[k])
		goto out;
	/* give the server a moment to take what is queued: a flood then reaches its limits */
	if (poll(&(struct pollfd){ .fd = fds[k], .events = POLLOUT }, 1, 100) == 1)
		send_with(fds[k], buf, len, dir);
	else
		full[k] = true;
out:
	if (dir >= 0)
		close(dir);
}

static void send_request(int k, uint8_t type, uint8_t options)
{
	static const char *const globs[] = { "fz:*",	     "fz:ping", "*",
					     "nothing:here", "fz",	"-fz:other" };
	static const uint64_t buffers[] = { 0, 4096, 1 << 20 };
	/* types 0 to 4 as their numbers, 5 and 6 the figures of locks and counter sets */
	static const uint16_t types[] = { LK_CTL_RULE, LK_CTL_START, LK_CTL_STOP,    LK_CTL_STATUS,
					  LK_CTL_LIST, LK_CTL_LOCKS, LK_CTL_COUNTERS };
	struct lk__ctl_msg m = { .type = types[type % 7], .seq = ++seq };
	uint8_t buf[LK_CTL_MAX_MSG];
	int n;

	if (m.type == LK_CTL_RULE)
		m.rule = (struct lk__ctl_rule){ options & 1, (options >> 1) & 1,
						globs[(options >> 2) % 6] };
	if (m.type == LK_CTL_START)
		m.start = (struct lk__ctl_start){
			options & 1, (options >> 1) & 1,	  (options >> 2) & 1,
			10,	     buffers[(options >> 3) % 3], trace_path
		};
	n = lk__ctl_encode(&m, buf, sizeof(buf));
	must(n > 0);
	send_frame(k, buf, (size_t)n);
}

static void connect_client(int k)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };

	if (fds[k] >= 0)
		return;
	fds[k] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	must(fds[k] >= 0);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", lk__control_path());
	/* the backlog may be full (clients the server has not accepted yet): then, no client */
	if (connect(fds[k], (struct sockaddr *)&addr, sizeof(addr)) != 0) {
		close(fds[k]);
		fds[k] = -1;
	}
}

static void close_client(int k)
{
	if (fds[k] >= 0)
		close(fds[k]);
	fds[k] = -1;
	full[k] = false;
}

/* What the server sent: every message must decode. Its end of the connection closes ours. */
static void read_client(int k)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	struct lk__ctl_msg m;

	full[k] = false;
	while (fds[k] >= 0) {
		ssize_t n = recv(fds[k], buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);

		if (n < 0 && errno == ECONNRESET)
			continue; /* what the server sent before closing is behind the error */
		if (n == 0)
			close_client(k);
		if (n <= 0)
			return;
		must((size_t)n <= sizeof(buf) && lk__ctl_decode(buf, (size_t)n, &m, NULL, 0) == 0);
	}
}

/* ---- what the server must do ---- */

static struct lk__ctl_status status(void)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	struct lk__ctl_client c;
	char err[256];

	/* the server may be at its limit of clients a moment longer than ours take to close */
	for (int i = 0; i < 1000 && lk__ctl_connect_path(&c, lk__control_path(), getpid(), err,
							 sizeof(err)) == 0;
	     i++) {
		int rc = lk__ctl_call(&c, &req, LK_CTL_STATUS_REPLY, &reply, 10000, err,
				      sizeof(err));

		lk__ctl_disconnect(&c);
		if (rc == 0)
			return reply.status;
		must(rc == -EBUSY);
		usleep(1000);
	}
	__builtin_trap();
}

static bool alone(void)
{
	for (int i = 0; i < 10000; i++) { /* 10 s: a bound on the server, not a measurement */
		if (status().clients == 1)
			return true;
		usleep(1000);
	}
	return false;
}

/* Every client gone: check what must be left, then leave nothing for the next input. */
static void finish(void)
{
	struct lk__ctl_status st;

	for (int k = 0; k < NCLIENTS; k++)
		close_client(k);
	must(alone());
	st = status();
	must(kept_rule || st.sites_enabled == 0);
	must(unowned_trace || !st.running);
	lk_trace_stop();
	lk_probe_reset_rules();
	nftw(out_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	must(mkdir(out_dir, 0700) == 0);
	kept_rule = unowned_trace = false;
}

static void fire(int n)
{
	for (int i = 0; i < n; i++)
		LK_PROBE(fz, ping, i);
	LK_PROBE(fz, other);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;

	setup_once();
	if (access(out_dir, F_OK) != 0)
		must(mkdir(out_dir, 0700) == 0);
	while (p < end) {
		uint8_t op = *p++;
		int k = (op >> 3) % NCLIENTS;
		size_t len;

		switch (op & 7) {
		case 0:
			connect_client(k);
			break;
		case 1:
			len = p < end ? *p++ : 0;
			len = len < (size_t)(end - p) ? len : (size_t)(end - p);
			send_frame(k, p, len);
			p += len;
			break;
		case 2:
			if (end - p >= 2)
				send_request(k, p[0], p[1]);
			p += end - p >= 2 ? 2 : end - p;
			break;
		case 3:
			read_client(k);
			break;
		case 4:
			close_client(k);
			break;
		case 5:
			status();
			break;
		case 6:
			fire(p < end ? *p++ % 32 : 1);
			break;
		case 7:
			if (fds[k] >= 0)
				shutdown(fds[k], SHUT_WR);
			break;
		}
	}
	finish();
	return 0;
}
