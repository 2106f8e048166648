// SPDX-License-Identifier: MIT
/*
 * lowkey agent: finding the processes to follow.
 *
 * A process is taken when it is this user's (root: anyone's) and has a lowkey control socket: its
 * environment asks for one (LOWKEY_CONTROL=1), or this network namespace lists a listening socket
 * named as the library names them (a program that called lk_control_open() itself). With
 * --process, only those whose comm or OTEL_SERVICE_NAME matches one of the globs. The connection
 * is the control client's (lk__ctl_connect): pinned, checked with SO_PEERCRED, in the process's
 * own namespaces, as the process's user where root must. A process that cannot be attached to is
 * not tried again while it lives (by pid and start time).
 */
#include <ctype.h>
#include <dirent.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "internal/proc.h"

#define MAX_LISTED 4096

unsigned long long agent_start_time(pid_t pid)
{
	char file[64], buf[1024], *close_paren;
	unsigned long long start = 0;
	size_t n;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/stat", (int)pid);
	f = fopen(file, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	close_paren = strrchr(buf, ')'); /* the name may hold anything */
	/* after the name: state is field 3, starttime field 22 */
	if (!close_paren || sscanf(close_paren + 2,
				   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
				   "%*d %*d %*d %*d %llu",
				   &start) != 1)
		return 0;
	return start;
}

/* The pids of the listening control sockets this network namespace has (".../lowkey.../PID.sock"). */
static size_t listed_sockets(pid_t *pids, size_t cap)
{
	char line[4096 + 128], name[4096];
	FILE *f = fopen("/proc/self/net/unix", "re");
	size_t n = 0;

	while (f && n < cap && fgets(line, sizeof(line), f)) {
		unsigned int flags, type;
		const char *base;
		char *end;
		long pid;

		if (sscanf(line, "%*s %*s %*s %x %x %*s %*s %4095s", &flags, &type, name) != 3 ||
		    type != SOCK_SEQPACKET || !(flags & 0x10000) || !strstr(name, "lowkey"))
			continue; /* 0x10000: listening */
		base = strrchr(name, '/');
		pid = base ? strtol(base + 1, &end, 10) : 0;
		if (pid > 0 && strcmp(end, ".sock") == 0)
			pids[n++] = (pid_t)pid;
	}
	if (f)
		fclose(f);
	return n;
}

static bool followed(const struct agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i]->pid == pid && !a->procs[i]->exited)
			return true;
	return false;
}

static bool ignored(const struct agent *a, pid_t pid, unsigned long long start)
{
	for (size_t i = 0; i < a->nignored; i++)
		if (a->ignored[i].pid == pid && a->ignored[i].start == start)
			return true;
	return false;
}

static void ignore(struct agent *a, pid_t pid, unsigned long long start)
{
	struct agent_seen *grown = realloc(a->ignored, (a->nignored + 1) * sizeof(*grown));

	if (!grown)
		return; /* tried again at the next scan */
	a->ignored = grown;
	a->ignored[a->nignored++] = (struct agent_seen){ pid, start };
}

/* Forget the processes not tried again that have exited. */
static void prune_ignored(struct agent *a)
{
	size_t kept = 0;

	for (size_t i = 0; i < a->nignored; i++)
		if (agent_start_time(a->ignored[i].pid) == a->ignored[i].start)
			a->ignored[kept++] = a->ignored[i];
	a->nignored = kept;
}

/* --process: its comm or service name matches a glob (none given: every process). */
static bool named(const struct agent *a, pid_t pid)
{
	char comm[64], service[256], file[64];
	bool have_service = false;

	if (!a->o->nnames)
		return true;
	if (lk__proc_comm(pid, 0, comm, sizeof(comm)) < 0)
		comm[0] = 0;
	snprintf(file, sizeof(file), "/proc/%d/environ", (int)pid);
	for (int i = 0; i < a->o->nnames; i++) {
		if (fnmatch(a->o->names[i], comm, 0) == 0)
			return true;
		if (!have_service) {
			FILE *f = fopen(file, "re");
			char var[4096];
			size_t n = f ? fread(var, 1, sizeof(var) - 1, f) : 0;

			if (f)
				fclose(f);
			var[n] = 0;
			service[0] = 0;
			for (size_t k = 0; k < n; k += strlen(var + k) + 1)
				if (strncmp(var + k, "OTEL_SERVICE_NAME=", 18) == 0)
					snprintf(service, sizeof(service), "%s", var + k + 18);
			have_service = true;
		}
		if (service[0] && fnmatch(a->o->names[i], service, 0) == 0)
			return true;
	}
	return false;
}

static bool candidate(struct agent *a, pid_t pid, const pid_t *listed, size_t nlisted)
{
	struct lk__proc_ids ids;
	bool has_socket = false;

	if (lk__proc_ids(pid, &ids) != 0 || (geteuid() != 0 && ids.euid != geteuid()))
		return false;
	for (size_t i = 0; i < nlisted && !has_socket; i++)
		has_socket = listed[i] == pid;
	return (has_socket || lk__ctl_asked(pid)) && named(a, pid);
}

static void add(struct agent *a, struct agent_proc *p)
{
	struct agent_proc **grown;

	pthread_mutex_lock(&a->lock);
	grown = realloc(a->procs, (a->nprocs + 1) * sizeof(*grown));
	if (grown) {
		a->procs = grown;
		a->procs[a->nprocs++] = p;
	}
	pthread_mutex_unlock(&a->lock);
	if (!grown)
		agent_proc_free(a, p, true);
}

static void try_process(struct agent *a, pid_t pid, const pid_t *listed, size_t nlisted)
{
	unsigned long long start = agent_start_time(pid);
	struct agent_proc *p;
	char err[1024];

	if (!start || followed(a, pid) || ignored(a, pid, start) ||
	    !candidate(a, pid, listed, nlisted))
		return;
	p = agent_attach(a, pid, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "lowkey agent: cannot follow process %d: %s\n", (int)pid, err);
		ignore(a, pid, start);
		pthread_mutex_lock(&a->lock);
		a->attach_failures++;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	add(a, p);
}

void agent_scan(struct agent *a)
{
	pid_t *listed = malloc(MAX_LISTED * sizeof(*listed));
	size_t nlisted = listed ? listed_sockets(listed, MAX_LISTED) : 0;
	DIR *d = opendir("/proc");
	struct dirent *e;

	prune_ignored(a);
	while (d && (e = readdir(d))) {
		char *end;
		long pid;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		try_process(a, (pid_t)pid, listed, nlisted);
	}
	if (d)
		closedir(d);
	free(listed);
}
