/* SPDX-License-Identifier: MIT */
/*
 * A real OpenTelemetry Collector for the OTLP tests and the exporter's bench: the one
 * tests/otlp/otelcol.sh built into the build tree (OTELCOL), its OTLP/HTTP receiver on a free
 * port of 127.0.0.1, its file exporter writing each request it received as a line of OTLP JSON.
 */
#ifndef LKT_OTLP_COLLECTOR_H
#define LKT_OTLP_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct lkt_collector {
	pid_t pid;
	int port;
	char dir[256]; /* a directory of the caller's */
	char out[512]; /* the file exporter's file */
	char log[512]; /* the collector's own output */
	char config[512];
};

/* Whether the collector was built; false with the reason its build gave (or that it has none). */
bool lkt_collector_available(char *why, size_t len);

/*
 * Start a collector in dir (config and log there) writing to dir/out_name (out_name if absolute), on c->port if not 0
 * (a restart), else on a free port; wait until it listens. 0, or -1 with its log printed.
 */
int lkt_collector_start(struct lkt_collector *c, const char *dir, const char *out_name);

/* Stop it as an operator would (SIGTERM: it flushes what it received and exits). */
void lkt_collector_stop(struct lkt_collector *c);

/* The collector's CPU time (user + system) so far, in seconds, or -1. */
double lkt_collector_cpu_s(const struct lkt_collector *c);

/* The file's content (NUL-terminated, malloc'ed), or NULL. */
char *lkt_read_file(const char *path, size_t *len);

#endif
