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
 *
 * This file: the server's state, its service thread and clients, opening and closing. The socket
 * file is control_socket.c's, the replies control_outbox.c's, the requests control_requests.c's
 * (control_server.h).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <lowkey/error.h>
#include <lowkey/probe.h>

#include "core/error.h"
#include "control/control_server.h"

int lk__control_stall_ms = 5000;

struct lk__srv lk__srv = { .listen_fd = -1, .wake_fd = -1, .trace_owner = -1 };

static pthread_mutex_t ctl_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ctl_once = PTHREAD_ONCE_INIT;

const char *lk__control_path(void)
{
	return __atomic_load_n(&lk__srv.open, __ATOMIC_ACQUIRE) ? lk__srv.path : NULL;
}

/* ---- clients ---- */

static void drop_client(unsigned int i)
{
	struct lk__srv_client *c = &lk__srv.clients[i];

	if (lk__srv.trace_owner == (int)i) {
		if (lk__srv_our_trace_running()) {
			struct lk__ctl_msg m;
			char path[LK_CTL_MAX_PATH + 1], msg[LK_CTL_MAX_TEXT + 1];

			lk__srv_stop_trace(&m, path, sizeof(path), msg, sizeof(msg));
		}
		lk__srv.trace_owner = -1;
	}
	lk__srv_remove_session_rules(c);
	lk__srv_outbox_free(&c->out);
	close(c->fd);
	lk__srv.clients[i] = lk__srv.clients[--lk__srv.nclients];
	if (lk__srv.trace_owner == (int)lk__srv.nclients)
		lk__srv.trace_owner = (int)i; /* the owner moved into the freed slot */
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
	__atomic_fetch_add(&lk__srv.refused_peers, 1, __ATOMIC_RELAXED);
	lk__srv_result_msg(&m, reply_text, 0, err, 0, text);
	lk__srv_send_now(fd, &m);
	close(fd);
}

static void accept_client(void)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = accept4(lk__srv.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

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
	if (lk__srv.nclients == LK__SRV_MAX_CLIENTS) {
		refuse_peer(fd, -EBUSY,
			    "process %d already serves %d control clients: try again later",
			    (int)getpid(), LK__SRV_MAX_CLIENTS);
		return;
	}
	lk__srv.clients[lk__srv.nclients++] = (struct lk__srv_client){ .fd = fd, .uid = cred.uid };
}

/* ---- the service thread ---- */

/* Milliseconds until the first client with a stalled outbox is due to be dropped; -1: none. */
static int poll_timeout(int64_t now)
{
	int64_t stall = __atomic_load_n(&lk__control_stall_ms, __ATOMIC_RELAXED), first = -1;

	for (unsigned int i = 0; i < lk__srv.nclients; i++) {
		int64_t left = lk__srv.clients[i].moved_at + stall - now;

		if (lk__srv_pending(&lk__srv.clients[i]) && (first < 0 || left < first))
			first = left < 0 ? 0 : left;
	}
	return first > INT_MAX ? INT_MAX : (int)first;
}

/* What poll said about client i: send what waits, or serve one request. False: drop it. */
static bool service_client(unsigned int i, short revents)
{
	struct lk__srv_client *c = &lk__srv.clients[i];

	if (lk__srv_pending(c)) {
		if (revents)
			lk__srv_flush(c);
	} else if (revents && !lk__srv_serve(i)) {
		return false;
	}
	if (c->broken)
		return false;
	return !lk__srv_pending(c) ||
	       lk__srv_now_ms() - c->moved_at <
		       __atomic_load_n(&lk__control_stall_ms, __ATOMIC_RELAXED);
}

static void *service_main(void *arg)
{
	struct pollfd fds[2 + LK__SRV_MAX_CLIENTS];

	(void)arg;
	pthread_setname_np(pthread_self(), "lowkey-control");
	for (;;) {
		unsigned int n = lk__srv.nclients;

		fds[0] = (struct pollfd){ .fd = lk__srv.wake_fd, .events = POLLIN };
		fds[1] = (struct pollfd){ .fd = lk__srv.listen_fd, .events = POLLIN };
		for (unsigned int i = 0; i < n; i++)
			fds[2 + i] = (struct pollfd){
				.fd = lk__srv.clients[i].fd,
				.events = lk__srv_pending(&lk__srv.clients[i]) ? POLLOUT : POLLIN
			};
		if (poll(fds, 2 + n, poll_timeout(lk__srv_now_ms())) < 0)
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
	if (lk__srv.listen_fd >= 0)
		close(lk__srv.listen_fd);
	if (lk__srv.wake_fd >= 0)
		close(lk__srv.wake_fd);
	lk__srv.listen_fd = lk__srv.wake_fd = -1;
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
	if (lk__srv.open) {
		close_fds();
		for (unsigned int i = 0; i < lk__srv.nclients; i++) {
			close(lk__srv.clients[i].fd);
			lk__srv_outbox_free(&lk__srv.clients[i].out);
		}
		lk__srv.nclients = 0;
		lk__srv.trace_gen = 0;
		lk__srv.trace_owner = -1;
		lk__srv.open = false;
		lk__srv.serving = false;
	}
	pthread_mutex_unlock(&ctl_mutex);
}

static void control_at_exit(void);

static void control_once(void)
{
	pthread_atfork(control_fork_prepare, control_fork_parent, control_fork_child);
	atexit(control_at_exit);
}

static int start_service(void)
{
	sigset_t all, old;
	int err;

	lk__srv.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (lk__srv.wake_fd < 0)
		return lk__fail(-errno, "lk_control_open: eventfd: %s", strerror(errno));
	/* The thread starts with every signal blocked: the application's signals are not for it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&lk__srv.thread, NULL, service_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		close(lk__srv.wake_fd);
		lk__srv.wake_fd = -1;
		return lk__fail(-err, "lk_control_open: cannot start the control thread: %s",
				strerror(err));
	}
	lk__srv.serving = true;
	return 0;
}

/* A socket open but not served: its service starts now. Call with ctl_mutex held. */
static int serve_listening_locked(void)
{
	int err;

	if (!lk__srv.open || lk__srv.serving || lk__srv.owner != getpid())
		return 0;
	err = start_service();
	if (err) {
		__atomic_store_n(&lk__srv.open, false, __ATOMIC_RELEASE);
		unlink(lk__srv.path);
		close_fds();
	}
	return err;
}

static int control_open(bool serve)
{
	int err;

	pthread_once(&ctl_once, control_once);
	pthread_mutex_lock(&ctl_mutex);
	if (lk__srv.open) {
		err = serve ? serve_listening_locked() : 0;
		pthread_mutex_unlock(&ctl_mutex);
		return err;
	}
	lk__srv.nclients = 0;
	lk__srv.trace_gen = 0;
	lk__srv.trace_owner = -1;
	lk__srv.serving = false;
	err = lk__srv_bind();
	if (!err && serve) {
		err = start_service();
		if (err)
			unlink(lk__srv.path);
	}
	if (err) {
		close_fds();
	} else {
		lk__srv.owner = getpid();
		__atomic_store_n(&lk__srv.open, true, __ATOMIC_RELEASE);
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

	__atomic_store_n(&lk__srv.open, false, __ATOMIC_RELEASE);
	if (lk__srv.serving) {
		eventfd_write(lk__srv.wake_fd, 1);
		if (!pthread_equal(pthread_self(), lk__srv.thread))
			pthread_join(lk__srv.thread, NULL);
		lk__srv.serving = false;
	}
	if (exiting) {
		if (lk__srv_our_trace_running()) {
			lk__srv_stop_trace(&m, path, sizeof(path), msg, sizeof(msg));
		} else {
			lk_trace_stats(&st);
			m.stats = (struct lk__ctl_stats){ 0,	      st.events, st.lost, st.bytes,
							  st.threads, path,	 msg };
		}
		for (unsigned int i = 0; i < lk__srv.nclients; i++)
			lk__srv_reply(&lk__srv.clients[i],
				      &m); /* after what waits for it, if its socket takes it now */
	}
	while (lk__srv.nclients)
		drop_client(lk__srv.nclients - 1);
	unlink(lk__srv.path);
	close_fds();
}

LK_API void lk_control_close(void)
{
	pthread_mutex_lock(&ctl_mutex);
	if (lk__srv.open && lk__srv.owner == getpid())
		shutdown_locked(false);
	pthread_mutex_unlock(&ctl_mutex);
}

static void control_at_exit(void)
{
	pthread_mutex_lock(&ctl_mutex);
	if (lk__srv.open && lk__srv.owner == getpid())
		shutdown_locked(true);
	pthread_mutex_unlock(&ctl_mutex);
}
