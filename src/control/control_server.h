/* SPDX-License-Identifier: MIT */
/*
 * Internal to the control socket's server: its state and what its files share. control.c opens,
 * serves and closes the socket (the service thread, its clients), control_socket.c makes the
 * directory and binds the socket, control_outbox.c queues and sends the replies, and
 * control_requests.c serves each request.
 *
 * The state is the service thread's while it runs; before it starts and once it has been joined,
 * it is the thread that holds control.c's mutex. Nothing here takes a lock.
 */
#ifndef LK_CONTROL_SERVER_H
#define LK_CONTROL_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "control/control_internal.h"

#define LK__SRV_MAX_CLIENTS 8

/* A rule a client added with scope "session": removed when its connection closes. */
struct lk__srv_rule {
	char *glob;
	bool enable;
};

/* Encoded messages waiting for their client to read them, each preceded by its u32 length. */
struct lk__srv_outbox {
	uint8_t *data;
	size_t off, len, cap;
};

struct lk__srv_client {
	int fd;
	bool broken; /* a reply could not be sent, or the client broke the protocol: drop it */
	uid_t uid;
	struct lk__srv_rule *rules;
	size_t nrules;
	struct lk__srv_outbox out;
	int64_t moved_at; /* ms, CLOCK_MONOTONIC: when the outbox last moved or filled */
};

struct lk__srv {
	bool open;
	bool serving; /* the service thread runs (open, and not deferred) */
	pid_t owner;  /* the process that opened it (not a forked child) */
	int listen_fd;
	int wake_fd; /* an eventfd: lk_control_close wakes the service thread */
	pthread_t thread;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];

	/* the service thread's (and, once it has been joined, the closer's) */
	struct lk__srv_client clients[LK__SRV_MAX_CLIENTS];
	unsigned int nclients;
	unsigned int trace_gen; /* the trace started over the socket; 0: none */
	int trace_owner;	/* its client, when it stops on close; -1: none */

	uint64_t refused_peers, refused_messages; /* atomics */
};

extern struct lk__srv lk__srv;

/* ---- control_socket.c ---- */

/*
 * Bind and listen at DIR/PID.sock (lk__control_dir), after removing the sockets that dead
 * processes left there; sets lk__srv.path and lk__srv.listen_fd (left open on failure, for the
 * caller to close). 0 or -errno with lk__fail's message.
 */
int lk__srv_bind(void);

/* ---- control_outbox.c ---- */

/* CLOCK_MONOTONIC in ms. */
int64_t lk__srv_now_ms(void);

/* One message, now or never (MSG_DONTWAIT), queued nowhere. 0 or -errno. */
int lk__srv_send_now(int fd, struct lk__ctl_msg *m);

/* m as a RESULT; text (LK_CTL_MAX_TEXT + 1 bytes) holds its copy of message. */
void lk__srv_result_msg(struct lk__ctl_msg *m, char *text, uint32_t seq, int err, int64_t value,
			const char *message);

/* Whether replies wait in c's outbox. */
static inline bool lk__srv_pending(const struct lk__srv_client *c)
{
	return c->out.off < c->out.len;
}

void lk__srv_outbox_free(struct lk__srv_outbox *o);

/* Send what the client's socket takes now; the rest waits for poll to say it has room. */
void lk__srv_flush(struct lk__srv_client *c);

/* Queue a reply after those that wait, and send what the socket takes. c->broken on failure. */
void lk__srv_reply(struct lk__srv_client *c, struct lk__ctl_msg *m);
void lk__srv_reply_result(struct lk__srv_client *c, uint32_t seq, int err, int64_t value,
			  const char *message);

/* ---- control_requests.c ---- */

/* Read and serve one message of client i. Returns false when the client is gone or must be dropped. */
bool lk__srv_serve(unsigned int i);

/* Remove the rules client c added with scope "session". */
void lk__srv_remove_session_rules(struct lk__srv_client *c);

/* Whether the trace running now is the one started over the socket. */
bool lk__srv_our_trace_running(void);

/* Stop the trace; fill m (type set by the caller) with its counters, path and msg its strings. */
void lk__srv_stop_trace(struct lk__ctl_msg *m, char *path, size_t pathlen, char *msg,
			size_t msglen);

#endif
