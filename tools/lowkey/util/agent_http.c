// SPDX-License-Identifier: MIT
/*
 * lowkey agent: /metrics over HTTP, served by libmicrohttpd on a thread of its own.
 *
 * The listening socket is made here (so that port 0 can be told back, and the address family is
 * the one asked for) and handed to the server. The format follows the scraper's Accept header:
 * OpenMetrics 1.0 where it asks for it (Prometheus does), else Prometheus' text format 0.0.4.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "agent.h"

#define OPENMETRICS_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define TEXT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define CONNECTION_TIMEOUT_S 10
#define MAX_CONNECTIONS 64

struct agent_http {
	struct MHD_Daemon *daemon;
	struct agent *agent;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status, const char *type,
			     char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result rc;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	rc = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result text_reply(struct MHD_Connection *conn, unsigned int status,
				  const char *text)
{
	char *body = strdup(text);

	return body ? reply(conn, status, "text/plain; charset=utf-8", body, strlen(body)) : MHD_NO;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_size, void **con_cls)
{
	struct agent_http *h = cls;
	const char *accept;
	bool om;
	size_t len;
	char *body;

	(void)version;
	(void)upload_data;
	(void)con_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return text_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET /metrics\n");
	if (*upload_size)
		return MHD_NO;
	if (strcmp(url, "/metrics") != 0)
		return text_reply(conn, MHD_HTTP_NOT_FOUND,
				  "lowkey agent: the metrics are at /metrics\n");
	accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	om = accept && strstr(accept, "application/openmetrics-text");
	body = agent_render(h->agent, om, &len);
	if (!body)
		return text_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	return reply(conn, MHD_HTTP_OK, om ? OPENMETRICS_TYPE : TEXT_TYPE, body, len);
}

/* "HOST:PORT", HOST an IPv4 address or an IPv6 one in brackets, into *ss. */
static int parse_listen(const char *addr, struct sockaddr_storage *ss, socklen_t *sslen)
{
	char host[128];
	const char *colon = strrchr(addr, ':');
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	size_t hl = colon ? (size_t)(colon - addr) : 0;
	unsigned long port;
	char *end;

	if (!colon || hl >= sizeof(host) || !colon[1])
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (*end || port > 65535)
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = 0;
	memset(ss, 0, sizeof(*ss));
	if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
		host[hl - 1] = 0;
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		*sslen = sizeof(*v6);
		return inet_pton(AF_INET6, host + 1, &v6->sin6_addr) == 1 ? 0 : -EINVAL;
	}
	v4->sin_family = AF_INET;
	v4->sin_port = htons((uint16_t)port);
	*sslen = sizeof(*v4);
	return inet_pton(AF_INET, host, &v4->sin_addr) == 1 ? 0 : -EINVAL;
}

static int listen_on(const char *addr, unsigned int *port, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	if (parse_listen(addr, &ss, &len) != 0) {
		snprintf(err, errlen,
			 "bad --listen '%s': give ADDRESS:PORT, such as 127.0.0.1:9464", addr);
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 64) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
		int rc = -errno;

		snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(-rc));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	*port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
						 ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

struct agent_http *agent_http_start(struct agent *a, const char *addr, unsigned int *port,
				    char *err, size_t errlen)
{
	struct agent_http *h = calloc(1, sizeof(*h));
	int fd;

	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->agent = a;
	fd = listen_on(addr, port, err, errlen);
	if (fd < 0) {
		free(h);
		return NULL;
	}
	h->daemon = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD, 0, NULL, NULL, answer, h,
				     MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
				     (unsigned int)CONNECTION_TIMEOUT_S,
				     MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
				     MHD_OPTION_END);
	if (!h->daemon) {
		snprintf(err, errlen, "cannot start the HTTP server on %s", addr);
		close(fd);
		free(h);
		return NULL;
	}
	return h;
}

void agent_http_stop(struct agent_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->daemon); /* closes the listening socket too */
	free(h);
}
