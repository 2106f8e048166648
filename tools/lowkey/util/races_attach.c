// SPDX-License-Identifier: MIT
/*
 * `lowkey races --pid`: the command's side of attaching to liblowkey-races.so waiting in a
 * running program (include/internal/races_file.h says the protocol; docs/design.md, "Races", why
 * it is done so).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "builtin.h"
#include "races.h"
#include "signal_forward.h"

#define REPLY_TIMEOUT_MS 10000

/* The process's waiting socket, connected, its peer checked to be pid; -1 after saying why. */
static int connect_to(pid_t pid, const char *lib)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char hint[PATH_MAX + 128];
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, n;

	n = snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, LKR_ATTACH_NAME, (int)pid);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		cli_error("races", NULL, "cannot make a socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&addr,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) != 0) {
		snprintf(
			hint, sizeof(hint),
			"start the program with LD_PRELOAD=%s LOWKEY_RACES_ATTACH=1 (docs/races.md)",
			lib);
		cli_error(
			"races", hint,
			"process %d is not waiting for lowkey races (%s; or it is in another network "
			"namespace)",
			(int)pid, strerror(errno));
		close(fd);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid != pid) {
		cli_error("races", NULL, "another process answers for process %d: not attaching",
			  (int)pid);
		close(fd);
		return -1;
	}
	return fd;
}

static int send_plan(int conn, int plan_fd)
{
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int))];
	} control = { 0 };
	char byte = LKR_ATTACH_START;
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = sizeof(control.buf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &plan_fd, sizeof(int));
	return sendmsg(conn, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

/* The library's next message: its byte, 0 if it closed the connection, -ETIMEDOUT. */
static int next_reply(int conn, int timeout_ms)
{
	struct pollfd p = { .fd = conn, .events = POLLIN };
	char byte;
	ssize_t n;
	int ready;

	while ((ready = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (ready == 0)
		return -ETIMEDOUT;
	n = recv(conn, &byte, 1, 0);
	return n == 1 ? byte : 0;
}

/*
 * Until the library is done, or ^C, SIGTERM or a hang-up (signal_stop_set(), blocked by the caller)
 * asks it to stop; lowkey then reports.
 */
static void wait_done(int conn)
{
	struct pollfd p[2] = { { .fd = conn, .events = POLLIN }, { .fd = -1, .events = POLLIN } };
	sigset_t stop;
	int reply;

	signal_stop_set(&stop);
	p[1].fd = signalfd(-1, &stop, SFD_CLOEXEC);
	for (;;) {
		if (poll(p, p[1].fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			reply = next_reply(conn, 0);
			if (reply == LKR_ATTACH_DONE || reply <= 0)
				break;
		}
		if (p[1].fd >= 0 && p[1].revents) {
			char stop_byte = LKR_ATTACH_STOP;

			(void)send(conn, &stop_byte, 1, MSG_NOSIGNAL);
			do
				reply = next_reply(conn, REPLY_TIMEOUT_MS);
			while (reply > 0 && reply != LKR_ATTACH_DONE);
			break;
		}
	}
	if (p[1].fd >= 0)
		close(p[1].fd);
}

static int attach_and_wait(pid_t pid, int plan_fd, const char *program, const char *lib)
{
	int conn = connect_to(pid, lib), reply, ret = 0;

	if (conn < 0)
		return CLI_EXIT_FAIL;
	if (send_plan(conn, plan_fd) != 0) {
		cli_error("races", NULL, "cannot hand process %d the plan: %s", (int)pid,
			  strerror(errno));
		close(conn);
		return CLI_EXIT_FAIL;
	}
	reply = next_reply(conn, REPLY_TIMEOUT_MS);
	if (reply == LKR_ATTACH_STARTED) {
		wait_done(conn);
	} else if (reply == LKR_ATTACH_REFUSED) {
		cli_error("races", "was its executable replaced since it started?",
			  "process %d refused the plan: it does not run %s", (int)pid, program);
		ret = CLI_EXIT_FAIL;
	} else if (reply == -ETIMEDOUT) {
		cli_error(
			"races", NULL,
			"process %d did not answer in %d s: is another lowkey races attached to it?",
			(int)pid, REPLY_TIMEOUT_MS / 1000);
		ret = CLI_EXIT_FAIL;
	} else if (reply != LKR_ATTACH_DONE) {
		cli_error("races", NULL, "process %d exited before it could be sampled", (int)pid);
		ret = CLI_EXIT_FAIL;
	} /* LKR_ATTACH_DONE at once: it could not start; the plan says why */
	close(conn);
	return ret;
}

/*
 * The stop signals are blocked from before the plan is handed over: one that comes before the
 * sampling begins stops it as soon as it does, and one that comes when the attach fails is taken
 * back, so that lowkey removes its plan and says what happened rather than dying of it. One held
 * back before they were blocked (signal_forward_defer(), as the plan was made) means the process
 * is not attached to at all.
 */
int races_attach(pid_t pid, int plan_fd, const char *program, const char *lib)
{
	struct timespec now = { 0, 0 };
	sigset_t stop, old;
	int ret;

	signal_stop_set(&stop);
	sigprocmask(SIG_BLOCK, &stop, &old);
	ret = signal_forward_held() ? CLI_EXIT_FAIL : attach_and_wait(pid, plan_fd, program, lib);
	while (sigtimedwait(&stop, NULL, &now) > 0)
		;
	sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}
