// SPDX-License-Identifier: MIT
/*
 * lowkey trace: reading back a trace whose process ended without finishing it -- counting what
 * reached the disk, and converting the CTF it left for a JSON or Perfetto trace -- with the
 * rights of the traced process's user.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/trace_convert.h"
#include "internal/probe.h"
#include "internal/trace_progress.h"
#include "internal/ctf_reader.h"
#include "internal/trace_file.h"
#include "status.h"
#include "trace.h"

/* Counted as the library counts a trace it writes (lk_trace_stats): the sites' events ... */
static int count_event(const struct lk__event *e, void *arg)
{
	struct trace_totals *t = arg;

	t->events += e->cls->id != LK__EVENT_THREAD_NAME && e->cls->id != LK__EVENT_SCHED_OUT &&
		     e->cls->id != LK__EVENT_SCHED_IN;
	return 0;
}

/* ... and a thread for each stream of them; its context switches' stream is not another thread. */
static int count_stream(const struct lk__stream_info *s, void *arg)
{
	struct trace_totals *t = arg;

	if (s->stream_id == 0) {
		t->lost += s->lost;
		t->threads++;
	}
	return 0;
}

static uint64_t stream_bytes(const char *dir)
{
	char path[PATH_MAX];
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	uint64_t sum = 0;

	while (d && (e = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (strncmp(e->d_name, "stream-", 7) == 0 && stat(path, &st) == 0)
			sum += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
	return sum;
}

/* A JSON or Perfetto trace's CTF directory is OUTPUT.ctf-XXXXXX (the library's mkdtemp); nothing else. */
static bool ctf_beside_output(const char *output, const char *ctf_dir)
{
	size_t n = strlen(output);

	return strncmp(ctf_dir, output, n) == 0 && strncmp(ctf_dir + n, ".ctf-", 5) == 0 &&
	       strlen(ctf_dir + n + 5) == 6 && !strchr(ctf_dir + n + 5, '/');
}

/*
 * Whether a Perfetto trace's process wrote its file itself, as it records (the consumer encodes the
 * rings: perfetto_live.c): its CTF directory then holds no thread's stream, only the metadata and
 * the context switches' streams, and the file has packets.
 */
static bool written_directly(const char *output, const char *ctf_dir)
{
	struct stat st;
	struct dirent *e;
	bool threads = false;
	DIR *d;

	if (stat(output, &st) != 0 || st.st_size == 0 || !(d = opendir(ctf_dir)))
		return false;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "stream-", 7) == 0 && !strstr(e->d_name, "-sched"))
			threads = true;
	closedir(d);
	return !threads;
}

/* Cut a Perfetto file after its last whole packet (a write cut short by the process's death). */
static int keep_whole_packets(const char *path, uint64_t *bytes)
{
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), rc = 0;
	uint64_t at = 0, size;
	struct stat st;
	uint8_t *p;

	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL; /* not the file the trace was written to */
		goto out;
	}
	size = (uint64_t)st.st_size;
	p = size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : NULL;
	if (size && p == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	while (at < size && p[at] == 0x0a) { /* Trace.packet: field 1, length-delimited */
		uint64_t len = 0, next = at + 1;
		unsigned int shift = 0;

		while (next < size && shift < 64 && (p[next] & 0x80))
			len |= (uint64_t)(p[next++] & 0x7f) << shift, shift += 7;
		if (next >= size || shift >= 64)
			break;
		len |= (uint64_t)p[next++] << shift;
		if (len > size - next)
			break;
		at = next + len;
	}
	if (size)
		munmap(p, size);
	if (at < size && ftruncate(fd, (off_t)at) != 0)
		rc = -errno;
	*bytes = at;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

static int no_stream_begin(const struct lk__stream_info *s, void *arg)
{
	(void)s, (void)arg;
	return 0;
}

/* A Perfetto trace its process wrote itself: kept as it is, up to its last whole packet, and counted. */
static int recover_pftrace(const struct trace_opts *o, const char *ctf_dir, struct trace_totals *t,
			   char *err, size_t errlen)
{
	const struct lk__reader_ops ops = { no_stream_begin, count_event,
					    count_stream }; /* the report's walk calls each */
	struct lk__trace_file rt;
	int rc = keep_whole_packets(o->output, &t->bytes);

	if (rc)
		return snprintf(err, errlen, "cannot recover %s: %s", o->output, strerror(-rc)), rc;
	status_reading_begin(o->output, 1); /* counting what reached the disk */
	rc = lk__trace_file_open(&rt, o->output, err, errlen);
	if (!rc) {
		rc = lk__trace_file_walk(&rt, &ops, t, err, errlen);
		lk__trace_file_close(&rt);
	}
	status_reading_end();
	if (!rc)
		trace_remove_dir(
			ctf_dir); /* its metadata, and the context switches not written yet */
	return rc;
}

static int recover_here(const struct trace_opts *o, const char *ctf_dir, struct trace_totals *t,
			char *err, size_t errlen)
{
	const struct lk__reader_ops ops = { .event = count_event, .stream_end = count_stream };
	const char *dir = o->format != LK_TRACE_CTF ? ctf_dir : o->output;
	struct lk__trace_reader r;
	int rc;

	if (o->format == LK_TRACE_PERFETTO && written_directly(o->output, ctf_dir))
		return recover_pftrace(o, ctf_dir, t, err, errlen);
	status_reading_begin(dir, 1); /* counting what reached the disk */
	rc = lk__reader_open(&r, dir, err, errlen);
	if (!rc) {
		rc = lk__reader_walk(&r, &ops, t, err, errlen);
		lk__reader_close(&r);
	}
	status_reading_end();
	if (rc)
		return rc;
	t->bytes = stream_bytes(dir);
	if (rc || o->format == LK_TRACE_CTF)
		return rc;
	rc = lk__trace_convert_progress(
		ctf_dir, o->output, (enum lk_trace_format)o->format,
		&(struct lk__progress_sink){ status_conversion_sink,
					     (void *)lk__trace_format_name(o->format) },
		err, errlen);
	if (!rc)
		trace_remove_dir(ctf_dir);
	return rc;
}

/* What a recovering child hands back through its pipe. */
struct recovery {
	int rc;
	struct trace_totals totals;
	char err[512];
};

static int drop_to(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
	    setresuid(uid, uid, uid) != 0)
		return -errno;
	return 0;
}

/* recover_here() in a child with the traced process's user's rights. */
static int recover_as_peer(const struct trace_opts *o, const char *ctf_dir, struct trace_totals *t,
			   char *err, size_t errlen)
{
	struct recovery rec = { .rc = -EIO };
	int pipefd[2], status;
	ssize_t n = 0, got;
	pid_t child;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return snprintf(err, errlen, "cannot recover the trace: %s", strerror(errno)),
		       -errno;
	child = fork();
	if (child < 0) {
		snprintf(err, errlen, "cannot recover the trace: %s", strerror(errno));
		close(pipefd[0]), close(pipefd[1]);
		return -EAGAIN;
	}
	if (child == 0) {
		close(pipefd[0]);
		rec.rc = drop_to(o->peer_uid, o->peer_gid);
		if (rec.rc)
			snprintf(rec.err, sizeof(rec.err), "cannot take the rights of uid %u: %s",
				 (unsigned int)o->peer_uid, strerror(-rec.rc));
		else
			rec.rc = recover_here(o, ctf_dir, &rec.totals, rec.err, sizeof(rec.err));
		if (write(pipefd[1], &rec, sizeof(rec)) != sizeof(rec))
			_exit(1);
		_exit(0);
	}
	close(pipefd[1]);
	while (n < (ssize_t)sizeof(rec) &&
	       (got = read(pipefd[0], (char *)&rec + n, sizeof(rec) - (size_t)n)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			break;
		n += got;
	}
	close(pipefd[0]);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(rec)) {
		snprintf(err, errlen, "the process recovering the trace (as uid %u) died",
			 (unsigned int)o->peer_uid);
		return -EIO;
	}
	*t = rec.totals;
	if (rec.rc)
		snprintf(err, errlen, "%s", rec.err);
	return rec.rc;
}

int trace_recover(const struct trace_opts *o, const char *ctf_dir, struct trace_totals *t,
		  char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	if (o->format != LK_TRACE_CTF && (!ctf_dir || !*ctf_dir)) {
		snprintf(err, errlen, "the process did not say where its trace was");
		return -ENOENT;
	}
	if (o->format != LK_TRACE_CTF && !ctf_beside_output(o->output, ctf_dir)) {
		snprintf(
			err, errlen,
			"the process named %s as its trace, not a directory beside %s: not reading it",
			ctf_dir, o->output);
		return -EPERM;
	}
	if (o->peer_uid != (uid_t)-1 && o->peer_uid != geteuid())
		return recover_as_peer(o, ctf_dir, t, err, errlen);
	return recover_here(o, ctf_dir, t, err, errlen);
}

int trace_count_matches(const char *dir, const char *glob)
{
	struct lk__trace_reader r;
	char err[256];
	int n = 0;

	if (!dir || lk__reader_open(&r, dir, err, sizeof(err)) != 0)
		return -1;
	for (size_t i = 0; i < r.nclasses; i++)
		if (r.classes[i] && r.classes[i]->kind &&
		    lk__probe_glob_matches(glob, r.classes[i]->provider, r.classes[i]->event))
			n++;
	lk__reader_close(&r);
	return n;
}
