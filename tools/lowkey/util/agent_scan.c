// SPDX-License-Identifier: MIT
/*
 * lowkey agent: finding the processes to follow.
 *
 * A process is taken when it is this user's (root: anyone's) and has a lowkey control socket: its
 * environment asks for one (LOWKEY_CONTROL=1), or this network namespace lists a listening socket
 * named as the library names them (a program that called lk_control_open() itself). With
 * --process, only those whose comm or OTEL_SERVICE_NAME matches one of the globs. The connection
 * is the control client's (lk__ctl_connect): pinned, checked with SO_PEERCRED, in the process's
 * own namespaces, as the process's user where root must. Processes are remembered by pid and
 * start time (try_process says what for).
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

static struct agent_seen *seen(const struct agent *a, pid_t pid, unsigned long long start)
{
	for (size_t i = 0; i < a->nignored; i++)
		if (a->ignored[i].pid == pid && a->ignored[i].start == start)
			return &a->ignored[i];
	return NULL;
}

static void remember(struct agent *a, pid_t pid, unsigned long long start, bool failed)
{
	struct agent_seen *grown = realloc(a->ignored, (a->nignored + 1) * sizeof(*grown));

	if (!grown)
		return; /* looked at again at the next scan */
	a->ignored = grown;
	a->ignored[a->nignored++] = (struct agent_seen){ pid, start, failed };
}

/* Forget the processes remembered that have exited. */
static void prune_seen(struct agent *a)
{
	size_t kept = 0;

	for (size_t i = 0; i < a->nignored; i++)
		if (agent_start_time(a->ignored[i].pid) == a->ignored[i].start)
			a->ignored[kept++] = a->ignored[i];
	a->nignored = kept;
}

bool agent_named(const struct agent *a, pid_t pid)
{
	char comm[64], service[256];
	bool have_service;

	if (!a->o->nnames)
		return true;
	if (lk__proc_comm(pid, 0, comm, sizeof(comm)) < 0)
		comm[0] = 0;
	have_service = agent_proc_env(pid, "OTEL_SERVICE_NAME", service, sizeof(service));
	for (int i = 0; i < a->o->nnames; i++)
		if (fnmatch(a->o->names[i], comm, 0) == 0 ||
		    (have_service && fnmatch(a->o->names[i], service, 0) == 0))
			return true;
	return false;
}

static bool is_listed(pid_t pid, const pid_t *listed, size_t nlisted)
{
	for (size_t i = 0; i < nlisted; i++)
		if (listed[i] == pid)
			return true;
	return false;
}

/* This user's (root: anyone's), and named as --process asks. */
static bool ours(struct agent *a, pid_t pid)
{
	struct lk__proc_ids ids;

	return lk__proc_ids(pid, &ids) == 0 && (geteuid() == 0 || ids.euid == geteuid()) &&
	       agent_named(a, pid);
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

/*
 * A process is looked at once: one whose environment does not ask for a socket is looked at again
 * only once this namespace lists a socket of its (lk_control_open() called later); one that could
 * not be attached to, never again while it lives.
 */
static void try_process(struct agent *a, pid_t pid, const pid_t *listed, size_t nlisted)
{
	unsigned long long start = agent_start_time(pid);
	struct agent_seen *before;
	struct agent_proc *p;
	bool has_socket;
	char err[1024];

	if (!start || followed(a, pid))
		return;
	before = seen(a, pid, start);
	has_socket = is_listed(pid, listed, nlisted);
	if (before && (before->failed || !has_socket))
		return;
	if (!ours(a, pid))
		return;
	if (!has_socket && !lk__ctl_asked(pid)) {
		remember(a, pid, start, false);
		return;
	}
	p = agent_attach(a, pid, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "lowkey agent: cannot follow process %d: %s\n", (int)pid, err);
		if (before)
			before->failed = true;
		else
			remember(a, pid, start, true);
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

	prune_seen(a);
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
