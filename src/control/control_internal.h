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

#endif
