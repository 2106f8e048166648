// SPDX-License-Identifier: MIT
/*
 * lowkey trace's output: rotated to OUT.old (only lowkey traces and regular files are moved) and
 * created before anything runs, so that an unwritable path fails at once; and the summary.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "builtin.h"
#include "internal/json.h"
#include "internal/outfile.h"
#include "internal/trace_convert.h"
#include "trace.h"

/* ---- the output ---- */

static bool trace_file_name(const char *name)
{
	return strcmp(name, "metadata") == 0 || strcmp(name, "metadata.tmp") == 0 ||
	       strcmp(name, ".lowkey-index") == 0 || strcmp(name, ".lowkey-index.tmp") == 0 ||
	       strncmp(name, "stream-", 7) == 0;
}

/* 1: a lowkey trace directory; 0: an empty directory; -1: something else. */
static int classify_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int entries = 0, foreign = 0, index = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		entries++;
		foreign += !trace_file_name(e->d_name);
		index += strcmp(e->d_name, ".lowkey-index") == 0 ||
			 strcmp(e->d_name, "metadata") == 0;
	}
	closedir(d);
	if (!entries)
		return 0;
	return foreign || !index ? -1 : 1;
}

int trace_remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (trace_file_name(e->d_name))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	return rmdir(dir) == 0 ? 0 : -errno;
}

/* Make room at path: remove what is there if it is a lowkey trace or a regular file. */
static int clear_old(const char *old)
{
	struct stat st;

	if (lstat(old, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISREG(st.st_mode))
		return unlink(old) == 0 ? 0 : -errno;
	if (S_ISDIR(st.st_mode) && classify_dir(old) >= 0)
		return trace_remove_dir(old);
	return -EEXIST;
}

/* Like perf: an existing output becomes OUT.old. Returns 0, 1 (error printed), or 2: use it as is. */
static int move_aside(const char *path)
{
	char old[PATH_MAX];
	struct stat st;
	int kind, rc;

	if (lstat(path, &st) != 0)
		return 0;
	if (S_ISDIR(st.st_mode)) {
		kind = classify_dir(path);
		if (kind == 0)
			return 2;
		if (kind < 0) {
			cli_error("trace", "choose another output with -o",
				  "%s exists and is not a lowkey trace", path);
			return 1;
		}
	} else if (!S_ISREG(st.st_mode)) {
		cli_error("trace", "choose another output with -o",
			  "%s exists and is not a regular file", path);
		return 1;
	}
	if ((size_t)snprintf(old, sizeof(old), "%s.old", path) >= sizeof(old)) {
		cli_error("trace", NULL, "the output path is too long");
		return 1;
	}
	rc = clear_old(old);
	if (rc) {
		cli_error("trace", "remove it, or choose another output with -o",
			  "cannot replace %s: %s", old,
			  rc == -EEXIST ? "it is not a lowkey trace" : strerror(-rc));
		return 1;
	}
	if (rename(path, old) != 0) {
		cli_error("trace", "choose another output with -o", "cannot move %s to %s: %s",
			  path, old, strerror(errno));
		return 1;
	}
	return 0;
}

int trace_prepare_output(struct trace_opts *o, uid_t uid, gid_t gid, int *fd_out)
{
	char err[PATH_MAX + 200];
	int rc, fd;

	if (fd_out)
		*fd_out = -1;
	o->peer_uid = uid;
	o->peer_gid = gid;
	rc = move_aside(o->output);

	if (rc == 1)
		return 1;
	if (rc == 2 && o->format != LK_TRACE_CTF) {
		cli_error("trace", "choose a file name with -o",
			  "%s is a directory; a %s trace is a file", o->output,
			  lk__trace_format_name(o->format));
		return 1;
	}
	if (rc == 2 && !fd_out)
		return 0; /* an empty directory: the trace goes in it */
	/*
	 * A new one: whatever took the name since it was moved aside is not written. An empty
	 * directory found there is the trace's, opened as such.
	 */
	fd = lk__out_open(o->output,
			  o->format == LK_TRACE_CTF ? LK__OUT_DIR | (rc == 2 ? LK__OUT_EMPTY : 0) :
						      0,
			  NULL, err, sizeof(err));
	if (fd < 0) {
		cli_error("trace", "choose a writable place with -o", "%s", err);
		return 1;
	}
	o->created_output = rc != 2;
	/* on the descriptor: the name may be someone else's by now */
	if (uid != (uid_t)-1 && o->created_output && fchown(fd, uid, gid) != 0) {
		cli_error("trace", NULL, "cannot give %s to uid %u: %s", o->output,
			  (unsigned int)uid, strerror(errno));
		close(fd);
		trace_discard_output(o);
		return 1;
	}
	if (fd_out)
		*fd_out = fd;
	else
		close(fd);
	return 0;
}

void trace_discard_output(const struct trace_opts *o)
{
	struct stat st;

	if (!o->created_output || lstat(o->output, &st) != 0)
		return;
	if (S_ISDIR(st.st_mode))
		rmdir(o->output); /* only when empty */
	else if (S_ISREG(st.st_mode) && st.st_size == 0)
		unlink(o->output);
}

/* ---- the summary ---- */

static void human_size(uint64_t bytes, char *out, size_t len)
{
	static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, len, "%llu bytes", (unsigned long long)bytes);
	else
		snprintf(out, len, "%.1f %s", v, units[u]);
}

void trace_print_summary(const struct trace_opts *o, const struct trace_totals *t)
{
	char size[32];
	struct stat st;
	uint64_t bytes = t->bytes;

	if (o->format != LK_TRACE_CTF && stat(o->output, &st) == 0)
		bytes = (uint64_t)st.st_size;
	if (o->json) {
		struct lk__json j;

		lk__json_begin(&j, stderr, true);
		lk__json_str_or_null(&j, "output", o->output);
		lk__json_str(&j, "format", lk__trace_format_name(o->format));
		lk__json_uint(&j, "events", t->events);
		lk__json_uint(&j, "lost", t->lost);
		lk__json_uint(&j, "threads", t->threads);
		lk__json_uint(&j, "bytes", bytes);
		lk__json_end(&j);
		return;
	}
	human_size(bytes, size, sizeof(size));
	if (o->overwrite) {
		char next[PATH_MAX + 8];

		snprintf(next, sizeof(next), "%s.1", o->output);
		fprintf(stderr,
			"lowkey trace: the flight recorder's snapshots wrote %llu events from %u thread%s "
			"(%s) to %s%s%s\n",
			(unsigned long long)t->events, t->threads, t->threads == 1 ? "" : "s", size,
			o->output, stat(next, &st) == 0 ? " and " : "",
			stat(next, &st) == 0 ? next : "");
		if (t->lost)
			fprintf(stderr,
				"lowkey trace: %llu events were dropped besides those overwritten (a signal "
				"handler's over an event in progress, an event larger than --buffer / 8)\n",
				(unsigned long long)t->lost);
		return;
	}
	fprintf(stderr,
		"lowkey trace: %llu events (%llu lost) from %u thread%s, %s written to %s\n",
		(unsigned long long)t->events, (unsigned long long)t->lost, t->threads,
		t->threads == 1 ? "" : "s", size, o->output);
	if (t->lost)
		fprintf(stderr,
			"hint: events were dropped because a thread's buffer was full: raise --buffer "
			"(now %llu KiB per thread) or record fewer sites\n",
			(unsigned long long)(o->buffer ? o->buffer : 2u << 20) / 1024);
}
