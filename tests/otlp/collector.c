// SPDX-License-Identifier: MIT
#include "collector.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *lkt_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	if (!f)
		return NULL;
	do {
		if (cap - n < 65536) {
			char *grown = realloc(buf, cap = 2 * cap + 65536);

			if (!grown) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = grown;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
	} while (got);
	fclose(f);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

bool lkt_collector_available(char *why, size_t len)
{
	char *reason;

	if (!access(OTELCOL, X_OK))
		return true;
	reason = lkt_read_file(OTELCOL ".failed", NULL);
	snprintf(why, len, "no OpenTelemetry Collector: %s",
		 reason ? reason : "its build (tests/otlp/otelcol.sh) has not run");
	free(reason);
	return false;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &alen))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static bool listening(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a));

	if (fd >= 0)
		close(fd);
	return ok;
}

static int write_config(struct lkt_collector *c)
{
	FILE *f = fopen(c->config, "w");

	if (!f)
		return -1;
	/* No telemetry server of its own: tests run side by side, each with its collector. */
	fprintf(f,
		"receivers:\n"
		"  otlp:\n"
		"    protocols:\n"
		"      http:\n"
		"        endpoint: 127.0.0.1:%d\n"
		"exporters:\n"
		"  file:\n"
		"    path: %s\n"
		"service:\n"
		"  telemetry:\n"
		"    metrics:\n"
		"      level: none\n"
		"    logs:\n"
		"      level: warn\n"
		"  pipelines:\n"
		"    traces:\n"
		"      receivers: [otlp]\n"
		"      exporters: [file]\n",
		c->port, c->out);
	return fclose(f);
}

static void print_log(const struct lkt_collector *c)
{
	char *log = lkt_read_file(c->log, NULL);

	fprintf(stderr, "collector log (%s):\n%s\n", c->log, log ? log : "(none)");
	free(log);
}

static pid_t spawn(const struct lkt_collector *c)
{
	char arg[600];
	pid_t pid;

	snprintf(arg, sizeof(arg), "--config=file:%s", c->config);
	pid = fork();
	if (pid == 0) {
		int fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		/* Gone with its test, should an assertion end it before lkt_collector_stop(). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(OTELCOL, OTELCOL, arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

int lkt_collector_start(struct lkt_collector *c, const char *dir, const char *out_name)
{
	bool fixed = c->port != 0;

	/* Up to a minute for it to listen: a loaded machine starts a Go program slowly. A fresh
	 * port each try where none was given (another program may have taken the one picked). */
	for (int tries = 0; tries < 3; tries++) {
		if (!fixed)
			c->port = 0;
		snprintf(c->dir, sizeof(c->dir), "%s", dir);
		if (out_name[0] == '/')
			snprintf(c->out, sizeof(c->out), "%s", out_name);
		else
			snprintf(c->out, sizeof(c->out), "%s/%s", dir, out_name);
		snprintf(c->log, sizeof(c->log), "%s/collector.log", dir);
		snprintf(c->config, sizeof(c->config), "%s/collector.yaml", dir);
		if (!c->port)
			c->port = free_port();
		if (c->port <= 0 || write_config(c))
			return -1;
		c->pid = spawn(c);
		if (c->pid < 0)
			return -1;
		for (int i = 0; i < 600; i++) {
			int st;

			if (listening(c->port))
				return 0;
			if (waitpid(c->pid, &st, WNOHANG) == c->pid)
				break;
			usleep(100 * 1000);
		}
		lkt_collector_stop(c);
		print_log(c);
	}
	return -1;
}

void lkt_collector_stop(struct lkt_collector *c)
{
	if (c->pid <= 0)
		return;
	kill(c->pid, SIGTERM);
	waitpid(c->pid, NULL, 0);
	c->pid = 0;
}

double lkt_collector_cpu_s(const struct lkt_collector *c)
{
	char path[64], buf[1024], *p;
	unsigned long utime, stime;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)c->pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	p = p ? strrchr(buf, ')') : NULL;
	/* Fields 14 and 15 (utime, stime), counted from the state after the name. */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
			 &stime) != 2)
		return -1;
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}
