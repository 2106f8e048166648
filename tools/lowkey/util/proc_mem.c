// SPDX-License-Identifier: MIT
/*
 * A process's lowkey sites' state from its memory, for `lowkey list --pid` where the process has
 * no control socket to ask.
 *
 * The process may be another user's, hostile to a root lowkey, and chooses what its memory holds.
 * So where to read comes from the object's file (read through /proc/PID/map_files where this
 * user may: the very file mapped): a site's descriptor and its semaphores are offsets in that
 * file, and each is read only where a writable mapping of that file, in the process's maps, holds
 * those bytes. The bytes read are a few integers, compared or tested against zero; no pointer of
 * the process's is followed. /proc/PID/mem is opened once, and what it allows is the kernel's
 * ptrace access check (PTRACE_MODE_ATTACH: stricter than for maps where Yama is on).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/proc.h"
#include "util/proc_mem.h"

#define MAX_MAPPINGS (1u << 20) /* far above the kernel's default vm.max_map_count */

/* A file mapping's line of /proc/PID/maps into *out (path not copied); false for other lines. */
static bool parse_mapping(char *line, struct proc_mapping *out, char **path)
{
	unsigned long long start, end, offset, inode;
	char perms[8];
	int at = 0;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &offset,
		   &out->dev_major, &out->dev_minor, &inode, &at) != 7 ||
	    !at || !inode || end <= start)
		return false;
	*path = line + at;
	(*path)[strcspn(*path, "\n")] = 0;
	if (**path != '/')
		return false;
	out->start = start;
	out->end = end;
	out->offset = offset;
	out->inode = inode;
	out->writable = perms[0] && perms[1] == 'w';
	return true;
}

static int add_mapping(struct proc_mem *m, size_t *cap, const struct proc_mapping *map,
		       const char *path)
{
	if (m->nmaps == MAX_MAPPINGS)
		return 0;
	if (m->nmaps == *cap) {
		size_t n = *cap ? *cap * 2 : 256;
		struct proc_mapping *grown = realloc(m->maps, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		m->maps = grown;
		*cap = n;
	}
	m->maps[m->nmaps] = *map;
	m->maps[m->nmaps].path = strdup(path);
	if (!m->maps[m->nmaps].path)
		return -ENOMEM;
	m->nmaps++;
	return 0;
}

static int read_maps(struct proc_mem *m)
{
	char file[64], line[8192];
	size_t cap = 0;
	bool whole = true;
	int rc = 0;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/maps", (int)m->pid);
	f = fopen(file, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (!rc && fgets(line, sizeof(line), f)) {
		struct proc_mapping map;
		bool starts_a_line = whole;
		char *path;

		whole = strchr(line, '\n') != NULL;
		if (starts_a_line && whole && parse_mapping(line, &map, &path))
			rc = add_mapping(m, &cap, &map, path);
	}
	fclose(f);
	return rc;
}

int proc_mem_open(struct proc_mem *m, pid_t pid)
{
	char file[64];
	int rc;

	memset(m, 0, sizeof(*m));
	m->pid = pid;
	snprintf(file, sizeof(file), "/proc/%d/mem", (int)pid);
	m->fd = open(file, O_RDONLY | O_CLOEXEC);
	m->err = m->fd < 0 ? -errno : 0;
	rc = read_maps(m);
	if (rc)
		proc_mem_close(m);
	return rc;
}

void proc_mem_close(struct proc_mem *m)
{
	for (size_t i = 0; i < m->nmaps; i++)
		free(m->maps[i].path);
	free(m->maps);
	if (m->fd >= 0)
		close(m->fd);
	m->maps = NULL;
	m->nmaps = 0;
	m->fd = -1;
}

/* The first mapping of the file the process maps as shown; its other mappings are its file's. */
static const struct proc_mapping *object_of(const struct proc_mem *m, const char *shown)
{
	for (size_t i = 0; i < m->nmaps; i++)
		if (strcmp(m->maps[i].path, shown) == 0)
			return &m->maps[i];
	return NULL;
}

static bool same_file(const struct proc_mapping *a, const struct proc_mapping *b)
{
	return a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && strcmp(a->path, b->path) == 0;
}

/* Read len bytes at file offset at of obj's file, where a writable mapping of it holds them. */
static bool read_at(const struct proc_mem *m, const struct proc_mapping *obj, uint64_t at,
		    void *buf, size_t len)
{
	for (size_t i = 0; i < m->nmaps; i++) {
		const struct proc_mapping *map = &m->maps[i];
		uint64_t size = map->end - map->start;

		if (!map->writable || !same_file(map, obj) || at < map->offset ||
		    at - map->offset > size || len > size - (at - map->offset))
			continue;
		return pread(m->fd, buf, len, (off_t)(map->start + (at - map->offset))) ==
		       (ssize_t)len;
	}
	return false;
}

/* Whether the descriptor read from memory is the one the file describes. */
static bool same_site(const struct lk_probe_site *live, const struct probe_elf_site *s)
{
	return live->magic == LK__PROBE_MAGIC && live->abi == LK__PROBE_ABI &&
	       live->kind == s->kind && live->nargs == s->nargs && live->line == s->line &&
	       live->arg_types == s->raw_types;
}

/* 1 if one of s's semaphores is above zero, 0 if none is, -1 if one cannot be read and none is. */
static int semaphores_raised(const struct proc_mem *m, const struct proc_mapping *obj,
			     const struct probe_elf_site *s)
{
	int raised = 0;

	for (unsigned int i = 0; i < s->nsemaphores && raised != 1; i++) {
		unsigned short count;

		if (!read_at(m, obj, s->semaphores[i], &count, sizeof(count)))
			raised = -1;
		else if (count)
			raised = 1;
	}
	return raised;
}

void proc_mem_site_state(const struct proc_mem *m, const char *shown,
			 const struct probe_elf_site *s, int *enabled, int *tracer)
{
	const struct proc_mapping *obj = m->fd >= 0 ? object_of(m, shown) : NULL;
	struct lk_probe_site live;

	*enabled = *tracer = -1;
	if (!obj || s->at == PROBE_ELF_NOWHERE || !read_at(m, obj, s->at, &live, sizeof(live)) ||
	    !same_site(&live, s))
		return;
	*enabled = live.key.key.lk__count > 0;
	*tracer = semaphores_raised(m, obj, s);
}

/* Yama's ptrace_scope (0 to 3), or -1 where there is no Yama. */
static int yama_scope(void)
{
	long v;

	return lk__read_long_file("/proc/sys/kernel/yama/ptrace_scope", &v) == 0 && v >= 0 &&
			       v <= 3 ?
		       (int)v :
		       -1;
}

void proc_mem_why(const struct proc_mem *m, char *buf, size_t len)
{
	static const char control[] = "start the program with LOWKEY_CONTROL=1";
	struct lk__proc_ids ids;
	int scope = yama_scope();

	if (m->err != -EACCES && m->err != -EPERM)
		snprintf(buf, len, "cannot read its memory (/proc/%d/mem: %s); %s", (int)m->pid,
			 strerror(-m->err), control);
	else if (geteuid() != 0 && lk__proc_ids(m->pid, &ids) == 0 && ids.euid != geteuid())
		snprintf(buf, len,
			 "cannot read its memory: it belongs to uid %u; run lowkey as that user or "
			 "as root, or %s",
			 (unsigned int)ids.euid, control);
	else if (scope == 3)
		snprintf(buf, len,
			 "cannot read its memory: Yama's kernel.yama.ptrace_scope is 3, no process "
			 "may read another's; %s",
			 control);
	else if (scope == 2)
		snprintf(buf, len,
			 "cannot read its memory: Yama's kernel.yama.ptrace_scope is 2, only root "
			 "(CAP_SYS_PTRACE) may; run lowkey as root, or %s",
			 control);
	else if (scope == 1)
		snprintf(buf, len,
			 "cannot read its memory: Yama's kernel.yama.ptrace_scope is 1, only its "
			 "ancestors and root (CAP_SYS_PTRACE) may; run lowkey as root, or %s",
			 control);
	else
		snprintf(buf, len,
			 "cannot read its memory: the kernel's ptrace access check refused (%s: a "
			 "security module, such as SELinux or AppArmor); run lowkey as root, or %s",
			 strerror(-m->err), control);
}
