// SPDX-License-Identifier: MIT
/*
 * lowkey trace: record a program's probes from its start (-- cmd), or a running process's (--pid).
 * This file: the options, the output (rotation to OUT.old, created before anything runs), the
 * summary, and reading back a trace whose process died before finishing it.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "builtin.h"
#include "internal/json.h"
#include "internal/outfile.h"
#include "internal/control.h"
#include "internal/trace_convert.h"
#include "internal/probe.h"
#include "internal/trace_progress.h"
#include "internal/ctf_reader.h"
#include "internal/trace_file.h"
#include "util/status.h"
#include "util/trace.h"

static const char trace_usage[] =
	"usage: lowkey trace [-e GLOB]... [-o OUT] [--format ctf|json|perfetto] [--cputime] [--sched]\n"
	"                    [--buffer SIZE] [--json] [--quiet] -- CMD [ARGS]\n"
	"       lowkey trace --pid PID [-e GLOB]... [-o OUT] [--format ctf|json|perfetto] [--cputime]\n"
	"                    [--buffer SIZE] [--duration S] [--json] [--quiet]\n"
	"\n"
	"Records the probes (LK_PROBE, LK_SPAN, LK_COUNTER) of a program linked with liblowkey.\n"
	"\n"
	"With a command, runs it with tracing started before its main() (through the environment,\n"
	"see docs/trace.md) and finished when it exits; child processes it starts are not traced.\n"
	"lowkey exits with the command's exit status (128+N if a signal N ended it, 127 if it could\n"
	"not be found), or 1 when the trace failed.\n"
	"\n"
	"With --pid, attaches to a running process through its control socket, which the process opens\n"
	"when started with LOWKEY_CONTROL=1 or by calling lk_control_open(); traces for S seconds or\n"
	"until Ctrl-C, then stops. The process's own rules and state are left as they were.\n"
	"\n"
	"Options:\n"
	"  -e, --event GLOBS    sites to record: comma-separated \"provider:event\" globs (fnmatch), or\n"
	"                       providers; repeatable, applied in order; a leading '-' excludes\n"
	"                       (-e '*,-db:debug', or -e '*' -e -db:debug). See `lowkey help` for -e.\n"
	"                       Default: every site. A glob that matches no site is an error.\n"
	"  -o, --output OUT     the trace: a CTF directory (default lowkey.ctf), or a file (default\n"
	"                       lowkey.json, lowkey.pftrace); an existing OUT is moved to OUT.old\n"
	"  -f, --format FMT     ctf (babeltrace2, Trace Compass), json (Chrome JSON: Perfetto UI,\n"
	"                       chrome://tracing) or perfetto (Perfetto's protobuf: ui.perfetto.dev,\n"
	"                       trace_processor; about 1/5 of the JSON's size). `lowkey convert` turns\n"
	"                       a CTF trace into the others later.\n"
	"  -c, --cputime        record each event's thread CPU time too\n"
	"      --sched          record the threads' context switches too (off-CPU time: preempted or\n"
	"                       blocked, and on which CPU); needs perf_event_open (perf_event_paranoid\n"
	"                       2 or lower, or CAP_PERFMON); `lowkey report` then splits each span's\n"
	"                       time into on-CPU, runnable (preempted) and blocked\n"
	"  -b, --buffer SIZE    per-thread ring buffer: 64K, 2M, ... (default 2M); events that find it\n"
	"                       full are dropped and counted\n"
	"  -W, --overwrite      a flight recorder: each thread's ring keeps its newest events and\n"
	"                       nothing is written until a snapshot: `lowkey snapshot --pid`, the\n"
	"                       --snapshot-signal, lk_trace_snapshot() in the program, and at its exit\n"
	"                       (OUT, then OUT.1, OUT.2, ...), in --format, with --sched's switches.\n"
	"                       With --pid: started, left running\n"
	"      --snapshot-signal SIG  with --overwrite: signal SIG (USR2, RTMIN+1, 12) takes a snapshot;\n"
	"                       not SEGV, BUS, ILL, FPE, TRAP, SYS (sent again for each fault), KILL, STOP\n"
	"  -p, --pid PID        trace a running process\n"
	"  -d, --duration S     with --pid: stop after S seconds (default: at Ctrl-C)\n"
	"  -j, --json           print the summary as JSON: {\"output\", \"format\", \"events\", \"lost\",\n"
	"                       \"threads\", \"bytes\"} (on stderr, like the text one)\n"
	"  -q, --quiet          no status line while the trace is converted, or while --pid traces\n"
	"                       (shown on a terminal only, and never with --json)\n"
	"  -h, --help           this text\n"
	"\n"
	"Examples:\n"
	"  lowkey trace -e 'db:*' -- ./server --port 8080\n"
	"  lowkey trace -o run.pftrace --format perfetto --cputime -- ./bench\n"
	"  LOWKEY_CONTROL=1 ./server &  lowkey trace --pid $! -e 'net:*' --duration 10\n"
	"\n"
	"Then: babeltrace2 lowkey.ctf, `lowkey report lowkey.ctf`, or open the JSON or .pftrace in\n"
	"ui.perfetto.dev.\n";

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

/* Remove a lowkey trace directory: only the files a trace has. */
static int remove_trace_dir(const char *dir)
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
		return remove_trace_dir(old);
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

int trace_prepare_output(struct trace_opts *o, uid_t uid, gid_t gid)
{
	char err[PATH_MAX + 200];
	int rc, fd;

	o->peer_uid = uid;
	o->peer_gid = gid;
	rc = move_aside(o->output);

	if (rc == 1)
		return 1;
	if (rc == 2 && o->format == LK_TRACE_CTF)
		return 0; /* an empty directory: the trace goes in it */
	if (rc == 2) {
		cli_error("trace", "choose a file name with -o",
			  "%s is a directory; a %s trace is a file", o->output,
			  lk__trace_format_name(o->format));
		return 1;
	}
	/* a new one: whatever took the name since it was moved aside is not written */
	fd = lk__out_open(o->output, o->format == LK_TRACE_CTF ? LK__OUT_DIR : 0, NULL, err,
			  sizeof(err));
	if (fd < 0) {
		cli_error("trace", "choose a writable place with -o", "%s", err);
		return 1;
	}
	o->created_output = true;
	/* on the descriptor: the name may be someone else's by now */
	if (uid != (uid_t)-1 && fchown(fd, uid, gid) != 0) {
		cli_error("trace", NULL, "cannot give %s to uid %u: %s", o->output,
			  (unsigned int)uid, strerror(errno));
		close(fd);
		trace_discard_output(o);
		return 1;
	}
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

/* ---- a trace left unfinished ---- */

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
		remove_trace_dir(
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
		remove_trace_dir(ctf_dir);
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

/* ---- options ---- */

static int usage_error(const char *hint, const char *fmt, const char *arg)
{
	cli_error("trace", hint, fmt, arg);
	return CLI_EXIT_USAGE;
}

static int parse_duration(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return (errno || end == s || *end || !(*out > 0) || *out > 1e9) ? -EINVAL : 0;
}

/* --snapshot-signal SIG: a signal the program may catch, and not one the kernel sends for a fault. */
static int snapshot_signal_option(struct trace_opts *o, const char *arg)
{
	int sig = lk__parse_signal(arg);
	const char *why = sig > 0 ? lk__snapshot_signal_unfit(sig) : NULL;
	char name[32];

	if (sig <= 0)
		return usage_error("a signal the program may catch, such as USR2 or 12",
				   "bad signal '%s'", arg);
	if (why) {
		cli_error("trace", "use USR2 or a real-time signal such as RTMIN+1",
			  "--snapshot-signal %s: %s cannot take snapshots: %s", arg,
			  lk__signal_name(sig, name, sizeof(name)), why);
		return CLI_EXIT_USAGE;
	}
	o->snapshot_signal = arg;
	return 0;
}

/* One glob of an -e list, trimmed as LOWKEY_TRACE trims it; empty items are skipped there too. */
static int add_glob(struct trace_opts *o, const char *item, size_t len)
{
	char *glob;

	while (len && isspace((unsigned char)*item))
		item++, len--;
	while (len && isspace((unsigned char)item[len - 1]))
		len--;
	if (!len)
		return 0;
	if (o->nglobs == TRACE_MAX_GLOBS)
		return usage_error(NULL, "more than 64 -e globs%s", "");
	glob = strndup(item, len);
	if (!glob)
		return CLI_EXIT_FAIL;
	if (strcmp(glob, "-") == 0 || strlen(glob) > LK_CTL_MAX_GLOB) {
		usage_error("globs such as -e 'db:*' or -e 'db:*,-db:debug'", "bad glob '%s'",
			    glob);
		free(glob);
		return CLI_EXIT_USAGE;
	}
	o->globs[o->nglobs++] = glob;
	return 0;
}

/*
 * -e LIST: comma-separated globs, as lowkey stat's -e and LOWKEY_TRACE take them. A glob has no
 * braces (fnmatch has none; in lowkey stat they make a group), so {a,b} is refused, not split.
 */
static int add_globs(struct trace_opts *o, const char *list)
{
	int before = o->nglobs, rc = 0;

	if (strpbrk(list, "{}"))
		return usage_error("globs have no braces: list them, -e 'db:query,db:commit'",
				   "bad glob '%s'", list);
	for (const char *p = list; !rc;) {
		size_t len = strcspn(p, ",");

		rc = add_glob(o, p, len);
		if (!p[len])
			break;
		p += len + 1;
	}
	if (!rc && o->nglobs == before)
		return usage_error("give globs such as -e 'db:*'", "-e '%s' names no glob", list);
	return rc;
}

static int parse_option(struct trace_opts *o, int c, const char *arg)
{
	char *end;
	long pid;

	switch (c) {
	case 'e':
		return add_globs(o, arg);
	case 'o':
		free(o->output);
		o->output = strdup(arg);
		return 0;
	case 'f':
		o->format = lk__trace_format_parse(arg);
		if (o->format < 0)
			return usage_error("ctf, json or perfetto", "unknown format '%s'", arg);
		return 0;
	case 'c':
		o->cputime = true;
		return 0;
	case 'W':
		o->overwrite = true;
		return 0;
	case 'G':
		return snapshot_signal_option(o, arg);
	case 'S':
		o->sched = true;
		return 0;
	case 'j':
		o->json = true;
		return 0;
	case 'q':
		o->quiet = true;
		return 0;
	case 'b':
		if (lk__parse_size(arg, &o->buffer) != 0 || o->buffer < 4096 ||
		    o->buffer > (1u << 30))
			return usage_error("a size from 4K to 1G, such as 256K or 4M",
					   "bad buffer size '%s'", arg);
		return 0;
	case 'p':
		errno = 0;
		pid = strtol(arg, &end, 10);
		if (errno || end == arg || *end || pid <= 0 || pid > 1 << 22)
			return usage_error("give a process id, such as $(pidof server)",
					   "bad pid '%s'", arg);
		o->pid = (pid_t)pid;
		return 0;
	case 'd':
		if (parse_duration(arg, &o->duration) != 0)
			return usage_error("seconds, such as 10 or 0.5", "bad duration '%s'", arg);
		return 0;
	}
	fputs(trace_usage, stderr);
	return CLI_EXIT_USAGE;
}

/* The output as an absolute path: the traced process may run elsewhere. */
static int absolute_output(struct trace_opts *o)
{
	char cwd[PATH_MAX], *abs;
	size_t len;

	if (!o->output)
		if (asprintf(&o->output, "lowkey.%s", lk__trace_format_extension(o->format)) < 0)
			o->output = NULL;
	if (!o->output)
		return -ENOMEM;
	len = strlen(o->output);
	while (len > 1 && o->output[len - 1] == '/')
		o->output[--len] = 0;
	if (o->output[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, o->output) < 0)
		return -errno;
	free(o->output);
	o->output = abs;
	return strlen(abs) > LK_CTL_MAX_PATH - 16 ? -ENAMETOOLONG : 0;
}

static int trace_main(int argc, char **argv)
{
	static const char every_site[] = "*";
	static const struct option options[] = {
		{ "event", required_argument, NULL, 'e' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "cputime", no_argument, NULL, 'c' },
		{ "overwrite", no_argument, NULL, 'W' },
		{ "snapshot-signal", required_argument, NULL, 'G' },
		{ "sched", no_argument, NULL, 'S' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct trace_opts o = { .format = LK_TRACE_CTF,
				.peer_uid = (uid_t)-1,
				.peer_gid = (gid_t)-1 };
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+e:o:f:cWb:p:d:jqh", options, NULL)) != -1) {
		if (c == 'h') {
			fputs(trace_usage, stdout);
			return CLI_EXIT_OK;
		}
		rc = parse_option(&o, c, optarg);
		if (rc)
			goto out;
	}
	rc = CLI_EXIT_USAGE;
	if (o.pid && optind < argc) {
		cli_error("trace", NULL, "give either --pid or a command, not both");
		goto out;
	}
	if (!o.pid && optind == argc) {
		cli_error("trace", "lowkey trace -- ./program args, or lowkey trace --pid PID",
			  "nothing to trace");
		goto out;
	}
	if (o.snapshot_signal && (!o.overwrite || o.pid)) {
		cli_error(
			"trace",
			o.pid ? "take snapshots with `lowkey snapshot --pid`" : "add --overwrite",
			"--snapshot-signal is for a flight recorder started with a command (--overwrite -- CMD)");
		goto out;
	}
	if (o.duration && !o.pid) {
		cli_error("trace", "a traced command runs until it exits",
			  "--duration needs --pid");
		goto out;
	}
	if (!o.nglobs)
		o.globs[o.nglobs++] = every_site;
	rc = absolute_output(&o);
	if (rc) {
		cli_error("trace", NULL, "bad output path: %s", strerror(-rc));
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	o.argv = argv + optind;
	rc = o.pid ? trace_attach(&o) : trace_run_command(&o);
out:
	for (int i = 0; i < o.nglobs; i++)
		if (o.globs[i] != every_site)
			free((char *)o.globs[i]);
	free(o.output);
	return rc;
}

const struct cli_command cmd_trace = {
	.name = "trace",
	.summary = "record a program's probes, from its start or by attaching to it",
	.usage = trace_usage,
	.run = trace_main,
};
