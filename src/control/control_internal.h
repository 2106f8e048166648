/* SPDX-License-Identifier: MIT */
/*
 * Internal to the control room: the control socket's server (control.c; its parts share
 * control_server.h). What `lowkey` uses, the client side and the environment's parsers, is the
 * internal API in include/internal/control.h.
 */
#ifndef LK_CONTROL_INTERNAL_H
#define LK_CONTROL_INTERNAL_H

#include "internal/control.h"

/* ---- control.c ---- */

/* The control socket's path while it is open in this process, else NULL. */
const char *lk__control_path(void);

/*
 * lk_control_open in two steps, for LOWKEY_CONTROL at start-up: lk__control_listen binds the
 * socket, so a tracer finds it and may connect at once, and lk__control_serve starts the service
 * thread once the program has registered its sites. A tracer that connected in between is
 * answered then, by a process that has all of its sites, instead of being told there is no socket
 * (or, served sooner, finding none of the program's sites). Each returns 0 or lk_control_open's
 * errors; lk__control_serve does nothing unless the socket is open and not served.
 */
int lk__control_listen(void);
int lk__control_serve(void);

/*
 * How long (ms) replies may wait for a client that does not read them before the client is
 * dropped: 5000. Read by the service thread each time round; tests change it.
 */
extern int lk__control_stall_ms;

/*
 * The directory for this user's control sockets: $XDG_RUNTIME_DIR/lowkey when XDG_RUNTIME_DIR is
 * an absolute directory this user owns that no one else may enter, else /tmp/lowkey-EUID. Created
 * (mode 0700) when missing; an existing one must be a real directory (not a symbolic link) owned
 * by this user with no access for group or others. 0 or -errno with lk__fail's message.
 */
int lk__control_dir(char *out, size_t len);

/*
 * lk__send_with_fd - send len bytes of buf on socket sock as one datagram, with descriptor fd
 * alongside (SCM_RIGHTS) unless fd is -1. Returns what sendmsg() returns (MSG_NOSIGNAL: a closed
 * peer gives EPIPE, never SIGPIPE). control_client.c.
 */
ssize_t lk__send_with_fd(int sock, const void *buf, size_t len, int fd);

/* ---- control_view.c: a process's own view of its files and ids, for the client ---- */

struct stat;

struct lk__view {
	pid_t pid;   /* as this side sees it */
	pid_t nspid; /* as its own pid namespace sees it (NSpid's last field): its socket's name */
	uid_t uid;   /* its effective owner, as this side sees it (stat, SO_PEERCRED) */
	gid_t gid;
	uid_t nsuid; /* uid as its own user namespace sees it: the name of /tmp/lowkey-UID */
	int root; /* O_PATH of /proc/PID/root, its paths resolved under it; -1: this side's paths */
	int root_err;	 /* errno: why /proc/PID/root could not be opened */
	int resolve_err; /* errno: why openat2 could not resolve under it (ENOSYS, a seccomp EPERM) */
	bool other_mnt;	 /* its mount namespace or root is not this process's */
	bool other_user; /* its user namespace is not this process's */
};

/*
 * lk__view_open - how process pid (effective owner uid, gid as read here) names its files; it
 * must be pinned by the caller. Reads /proc/PID/{status,uid_map,ns,root}. Returns 0, or -errno
 * when it is in another mount namespace whose root cannot be reached from here (v->root_err:
 * EACCES/EPERM, no ptrace access; ENOSYS or EPERM from openat2: a kernel before 5.6 or a seccomp
 * profile). lk__view_close must follow, whatever it returned.
 */
int lk__view_open(struct lk__view *v, pid_t pid, uid_t uid, gid_t gid);
void lk__view_close(struct lk__view *v);

/*
 * An O_PATH descriptor of the process's absolute path (flags: O_NOFOLLOW, O_DIRECTORY), resolved
 * under its root: never outside it whatever symbolic links it holds. -errno on failure.
 */
int lk__view_fd(const struct lk__view *v, const char *path, int flags);

/* stat (follow) or lstat of the process's path, under its root. 0 or -errno. */
int lk__view_stat(const struct lk__view *v, const char *path, struct stat *st, bool follow);

/* Whether the socket is connected as the process's owner (root here, the process in another user namespace). */
bool lk__view_as_owner(const struct lk__view *v);

/*
 * lk__view_connect - a SOCK_SEQPACKET socket connected to the process's socket path, as its
 * owner when lk__view_as_owner (a forked child takes its uid and gid, connects, and passes the
 * descriptor back). Under the process's root, a symbolic link in the socket's place is not
 * followed. The descriptor (close-on-exec), or -errno: connect's errors, -ECONNREFUSED also where
 * no socket is at path, -ENAMETOOLONG, and where *ids is set, the errors of
 * setgroups/setresgid/setresuid in the child.
 */
int lk__view_connect(const struct lk__view *v, const char *path, bool *ids);

#endif
