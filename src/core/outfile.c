// SPDX-License-Identifier: MIT
/* Output files (outfile.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/outfile.h"

struct out_stream {
	int fd;
	pid_t owner;	/* the process that opened it: the only one that writes */
};

static ssize_t stream_write(void *cookie, const char *buf, size_t len)
{
	struct out_stream *s = cookie;
	size_t done = 0;

	if (getpid() != s->owner)
		return (ssize_t)len;	/* a forked child's copy of the parent's buffer: dropped */
	while (done < len) {
		ssize_t n = write(s->fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return (ssize_t)done;	/* stdio takes a short count as the error */
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int stream_close(void *cookie)
{
	struct out_stream *s = cookie;
	int rc = close(s->fd);

	free(s);
	return rc;
}

FILE *lk__out_stream(int fd)
{
	static const cookie_io_functions_t io = { .write = stream_write, .close = stream_close };
	struct out_stream *s = malloc(sizeof(*s));
	FILE *f;

	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->fd = fd;
	s->owner = getpid();
	f = fopencookie(s, "w", io);
	if (!f)
		free(s);
	return f;
}
