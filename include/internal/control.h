/* SPDX-License-Identifier: MIT */
/*
 * Internal API: the control socket's client side (finding a process's socket, pinning it,
 * request and reply) and the parsers of the LOWKEY_TRACE* values, for `lowkey` and the tests.
 * The server side is src/control/control_internal.h.
 */
#ifndef LK_INTERNAL_CONTROL_H
#define LK_INTERNAL_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal/control_protocol.h"

/* ---- environment.c ---- */

/* "4096", "64K", "2M", "1G" (also "64KiB", "64kb"): bytes. 0 or -EINVAL. */
int lk__parse_size(const char *s, uint64_t *out);

/* "1", "yes", "true", "on" / "0", "no", "false", "off", any case. 0 or -EINVAL. */
int lk__parse_bool(const char *s, bool *out);

/* A signal by name or number: "USR2", "SIGUSR2", "RTMIN+1", "12". Its number, or -EINVAL. */
int lk__parse_signal(const char *s);

/*
 * Why sig cannot be the snapshot signal (a synchronous signal: SEGV, BUS, ILL, FPE, TRAP, SYS; or
 * one that cannot be caught: KILL, STOP), as a phrase; NULL when it can.
 */
const char *lk__snapshot_signal_unfit(int sig);

/* "SIGUSR2 (12)", "SIGRTMIN+1 (35)", "signal 99": sig for a message, in buf. */
const char *lk__signal_name(int sig, char *buf, size_t len);

/* ---- control_client.c ---- */

/*
 * The process a client asked for, pinned from its first look at it: a pidfd and the process's
 * start time. Whatever is read from /proc/PID afterwards, and whatever answers on its socket, is
 * taken for that process's only while it is still alive and started when it did: a process that
 * takes the pid after it exits is never mistaken for it.
 */
struct lk__ctl_pin {
	pid_t pid;		  /* 0: nothing pinned */
	int pidfd;		  /* -1: none (no pidfd_open here): the start time alone */
	unsigned long long start; /* /proc/PID/stat's starttime, in clock ticks after boot */
};

/*
 * lk__ctl_pin - pin process pid. 0, or -ESRCH (no such process, or it exited meanwhile: err
 * says which). lk__ctl_unpin must follow a 0.
 */
int lk__ctl_pin(struct lk__ctl_pin *p, pid_t pid, char *err, size_t errlen);

/* lk__ctl_pin_check - 0 while the pinned process lives (a zombie has exited), else -ESRCH. */
int lk__ctl_pin_check(const struct lk__ctl_pin *p);

void lk__ctl_unpin(struct lk__ctl_pin *p);

struct lk__ctl_client {
	int fd;
	pid_t pid; /* the process at the other end */
	uint32_t seq;
	char path[108]; /* the socket */
	/* lk__ctl_connect: the process asked for, and its effective owner read under the pin */
	struct lk__ctl_pin pin;
	uid_t uid; /* (uid_t)-1: not known (lk__ctl_connect_path) */
	gid_t gid;
	/* lk__ctl_connect: its mount namespace or root is not this side's; the paths it is given are its own */
	bool other_mnt;
	uint8_t buf[LK_CTL_MAX_MSG]; /* the last message received; decoded strings point here */
	/* lk__ctl_call: told of the PROGRESS of the request it waits for (NULL: not told) */
	void (*on_progress)(const struct lk__ctl_progress *p, void *arg);
	void *progress_arg;
};

/* Whether pid's environment has LOWKEY_CONTROL set true (false also when it cannot be read). */
bool lk__ctl_asked(pid_t pid);

/*
 * lk__ctl_find_socket - where the pinned process's control socket is, as a path of the process's
 * own (in its mount namespace, named by its pid there): found from its open sockets (/proc/PID/fd
 * and /proc/PID/net/unix) or, where those cannot be read, from where the library puts them, looked
 * up under its root (/proc/PID/root). Returns 0, -ESRCH (the process exited), -ENOENT (no control
 * socket open), -ENOTCONN (none open though its environment has LOWKEY_CONTROL=1: err says why,
 * e.g. its directory belongs to someone else), -EACCES (the process belongs to another user and
 * this one is not root), -EPERM (its open files cannot be read here, so whether it has one cannot
 * be told; or it is in another mount namespace that cannot be reached from here: no ptrace access,
 * a user namespace this root does not own, openat2 refused). err says which.
 * A process without a socket is waited for (polled every 10 ms) while it may still be starting
 * up: until it is 1 s old, or 5 s old if its environment has LOWKEY_CONTROL=1; it is -ESRCH as
 * soon as it exits, whatever process takes its pid.
 */
int lk__ctl_find_socket(const struct lk__ctl_pin *pin, char *path, size_t len, char *err,
			size_t errlen);

/*
 * lk__ctl_connect - pin process pid, connect to its control socket and check that it is what
 * answers (SO_PEERCRED) and still the process pinned; c->uid and c->gid are its effective owner.
 * In another mount namespace the socket is reached under the process's root; as root, outside
 * its user namespace, it is connected as the process's own uid and gid (a forked child), which
 * its server accepts. Costs a fork then; not async-signal-safe.
 * The errors of lk__ctl_pin and lk__ctl_find_socket, and -ECONNREFUSED (a socket file is left but
 * nothing listens), -EACCES (refused: another user), -ESTALE (another process answers).
 */
int lk__ctl_connect(struct lk__ctl_client *c, pid_t pid, char *err, size_t errlen);

/* lk__ctl_connect_path - the same for a socket path, pinning nothing; expect_pid 0 accepts any process. */
int lk__ctl_connect_path(struct lk__ctl_client *c, const char *path, pid_t expect_pid, char *err,
			 size_t errlen);

/*
 * lk__ctl_check - 0 while the process c connected to is the one pinned (or nothing was pinned),
 * -ESRCH once it has exited: what was read from /proc/PID since is another process's, if any.
 */
int lk__ctl_check(const struct lk__ctl_client *c, char *err, size_t errlen);

/* Close the connection and the pin. */
void lk__ctl_disconnect(struct lk__ctl_client *c);

/* Send a request (its seq is set here). 0 or -errno. */
int lk__ctl_send(struct lk__ctl_client *c, struct lk__ctl_msg *m);

/*
 * lk__ctl_send_fd - the same, with descriptor fd in the same datagram (SCM_RIGHTS; -1: none), as
 * a request whose output is LK_CTL_OUT_DIR carries its directory. fd stays open here. 0 or
 * -errno (-EINVAL: fd given with a request that carries none, or missing from one that does).
 */
int lk__ctl_send_fd(struct lk__ctl_client *c, struct lk__ctl_msg *m, int fd);

/*
 * Receive and decode one message, waiting up to timeout_ms (-1: forever). Returns 0, -ETIMEDOUT,
 * -ECONNRESET (the process closed the connection or exited), or a decoding error.
 */
int lk__ctl_recv(struct lk__ctl_client *c, struct lk__ctl_msg *m, int timeout_ms, char *err,
		 size_t errlen);

/* The most messages lk__ctl_call reads past while waiting for its reply (late replies). */
#define LK_CTL_MAX_STRAY 1024

/* A deadline (CLOCK_MONOTONIC ms) timeout_ms from now (-1: none); the ms left until it (-1: forever). */
int64_t lk__ctl_deadline(int timeout_ms);
int lk__ctl_left_ms(int64_t deadline);

/*
 * Send a request and wait for its reply of the given type, or a RESULT carrying an error
 * (returned as that error, with its message in err); timeout_ms bounds the whole wait (-1:
 * none), and more than LK_CTL_MAX_STRAY messages that answer nothing end it (-EBADMSG); PROGRESS
 * notifications about the request go to c->on_progress and are not counted among them. EXIT
 * notifications met on the way are answered with -ECONNRESET.
 */
int lk__ctl_call(struct lk__ctl_client *c, struct lk__ctl_msg *req, uint16_t reply_type,
		 struct lk__ctl_msg *reply, int timeout_ms, char *err, size_t errlen);

/* lk__ctl_call with descriptor fd sent along with the request (lk__ctl_send_fd). */
int lk__ctl_call_fd(struct lk__ctl_client *c, struct lk__ctl_msg *req, int fd, uint16_t reply_type,
		    struct lk__ctl_msg *reply, int timeout_ms, char *err, size_t errlen);

#endif
