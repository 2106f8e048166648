// SPDX-License-Identifier: MIT
/*
 * The control socket's replies. The service thread never waits for a client: every socket is
 * non-blocking, and what a client's socket cannot take now waits in that client's outbox, sent
 * as the client reads (control.c polls for room).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "control/control_server.h"

int64_t lk__srv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One message, now or never: for peers that are refused, and for the goodbye at exit. */
int lk__srv_send_now(int fd, struct lk__ctl_msg *m)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	int n = lk__ctl_encode(m, buf, sizeof(buf));

	if (n < 0)
		return n;
	return send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n ? 0 : -errno;
}

void lk__srv_result_msg(struct lk__ctl_msg *m, char *text, uint32_t seq, int err, int64_t value,
			const char *message)
{
	snprintf(text, LK_CTL_MAX_TEXT + 1, "%s", message ? message : "");
	*m = (struct lk__ctl_msg){ .type = LK_CTL_RESULT, .seq = seq };
	m->result = (struct lk__ctl_result){ err < -4095 ? -EINVAL : err, value, text };
}

void lk__srv_outbox_free(struct lk__srv_outbox *o)
{
	free(o->data);
	*o = (struct lk__srv_outbox){ 0 };
}

static int outbox_reserve(struct lk__srv_outbox *o, size_t n)
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
void lk__srv_flush(struct lk__srv_client *c)
{
	struct lk__srv_outbox *o = &c->out;

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
		c->moved_at = lk__srv_now_ms();
	}
}

void lk__srv_reply(struct lk__srv_client *c, struct lk__ctl_msg *m)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	int n = lk__ctl_encode(m, buf, sizeof(buf));
	uint32_t len = (uint32_t)n;

	if (n < 0 || outbox_reserve(&c->out, 4 + (size_t)n) != 0) {
		c->broken = true;
		return;
	}
	if (!lk__srv_pending(c))
		c->moved_at = lk__srv_now_ms();
	memcpy(c->out.data + c->out.len, &len, 4);
	memcpy(c->out.data + c->out.len + 4, buf, len);
	c->out.len += 4 + len;
	lk__srv_flush(c);
}

void lk__srv_reply_result(struct lk__srv_client *c, uint32_t seq, int err, int64_t value,
			  const char *message)
{
	struct lk__ctl_msg m;
	char text[LK_CTL_MAX_TEXT + 1];

	lk__srv_result_msg(&m, text, seq, err, value, message);
	lk__srv_reply(c, &m);
}
