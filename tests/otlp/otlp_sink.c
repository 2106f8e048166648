// SPDX-License-Identifier: MIT
/*
 * An OTLP/HTTP receiver that reads each request's body and discards it, answering 200 with an
 * empty ExportTraceServiceResponse (all accepted): what the exporter alone can send, without a
 * collector's CPU time beside it on the same machine (tests/otlp/otlp_bench, bench/agent_otlp.sh).
 * libmicrohttpd parses the HTTP, a thread per connection. It listens on 127.0.0.1, prints its port
 * once it does, and serves until SIGTERM or SIGINT, when it prints "requests N bytes B".
 *
 *   otlp_sink
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_uint_fast64_t requests, bytes;

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *data_len, void **state)
{
	static int started;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls, (void)url, (void)version, (void)data;
	if (!*state) { /* the headers: the body follows */
		*state = &started;
		return MHD_YES;
	}
	if (*data_len) {
		atomic_fetch_add_explicit(&bytes, *data_len, memory_order_relaxed);
		*data_len = 0;
		return MHD_YES;
	}
	atomic_fetch_add_explicit(&requests, 1, memory_order_relaxed);
	r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/x-protobuf");
	ret = MHD_queue_response(
		conn, strcmp(method, "POST") ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

int main(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	const union MHD_DaemonInfo *info;
	struct MHD_Daemon *d;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* the server's threads inherit it */
	d = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0,
		NULL, NULL, answer, NULL, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_END);
	info = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
	if (!info) {
		fprintf(stderr, "otlp_sink: cannot listen on 127.0.0.1\n");
		return 1;
	}
	printf("%u\n", (unsigned int)info->port);
	fflush(stdout);
	sigwait(&set, &sig);
	MHD_stop_daemon(d);
	printf("requests %llu bytes %llu\n", (unsigned long long)atomic_load(&requests),
	       (unsigned long long)atomic_load(&bytes));
	return 0;
}
