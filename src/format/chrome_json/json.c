// SPDX-License-Identifier: MIT
/*
 * Chrome Trace Event JSON (Perfetto UI, chrome://tracing) from a lowkey trace of any format
 * (internal/trace_file.h), walked event by event.
 *
 * Events become instants ("i"), spans begin/end pairs ("B"/"E"), counters "C" events, thread
 * names "M" metadata; the thread's CPU time, when recorded, goes in "tts". Lost events are
 * reported per thread (a "lowkey:lost" instant at the end of the thread) and in total (otherData).
 * An event of a class this file does not know (one added to lowkey later) is an instant with its
 * fields as arguments. A thread's context switches (LK_TRACE_SCHED) become its off-CPU slices:
 * "X" events named "preempted" or "blocked", category "off-cpu", from a switch out to the next
 * switch in (nested in the spans open then: no probe fires while the thread is off its CPU).
 *
 * Timestamps are microseconds of real time (CLOCK_REALTIME since the epoch), the clock of the CTF
 * trace, written exactly to the nanosecond. The text is always JSON: strings are repaired to UTF-8
 * (core/json.c); a NaN or infinite argument is written as the string "NaN", "Infinity" or
 * "-Infinity", and a NaN or infinite counter value is left out (counter tracks take numbers only)
 * and counted in otherData.nonfinite_counter_values.
 *
 * The text goes through a stdio stream that a forked child never flushes (internal/outfile.h): a
 * flight recorder's snapshot is converted while the program's other threads run, and fork.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/json.h"
#include "internal/outfile.h"
#include "internal/trace_convert.h"
#include "probe/probe_internal.h"
#include "internal/ctf_reader.h"
#include "internal/trace_file.h"

struct json_state {
	FILE *out;
	struct lk__trace_reader *r;
	bool first;
	uint64_t lost, last_tsc, nonfinite_counters;
	uint64_t off_tsc, off_cpu; /* the thread's last switch out, while it is off its CPU */
	bool off, preempted;
};

static bool json_finite(double v)
{
	return v == v && v <= 1.7976931348623157e308 && v >= -1.7976931348623157e308;
}

/* JSON has no NaN or infinity: those become strings. */
static void json_double(FILE *f, double v)
{
	if (json_finite(v))
		fprintf(f, "%.17g", v);
	else
		fputs(v != v ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"", f);
}

static void begin_object(struct json_state *j)
{
	fputs(j->first ? "\n" : ",\n", j->out);
	j->first = false;
}

/* Microseconds since the epoch, to the nanosecond: the CTF trace's real-time clock. */
static void put_time(struct json_state *j, uint64_t tsc)
{
	int64_t since_start = (int64_t)(lk__reader_ns(j->r, tsc) - j->r->monotonic0_ns);
	uint64_t ns = j->r->realtime0_ns + (uint64_t)since_start;

	fprintf(j->out, "\"ts\":%" PRIu64 ".%03u", ns / 1000, (unsigned int)(ns % 1000));
}

/* A counter's value, if JSON can hold it as a number. */
static bool counter_value(const struct lk__event *e)
{
	uint64_t v;
	const char *s;
	double d;

	if (lk__arg_type(e->cls->arg_types, 0) != LK_PROBE_F64 || !lk__event_arg(e, 0, 0, &v, &s))
		return true;
	memcpy(&d, &v, sizeof(d));
	return json_finite(d);
}

static void put_args(FILE *f, const struct lk__event *e)
{
	size_t off = 0;

	fputs(",\"args\":{", f);
	for (unsigned int i = 0; i < e->cls->nargs; i++) {
		unsigned int type = lk__arg_type(e->cls->arg_types, i);
		const char *s;
		uint64_t v = 0;
		double d;

		off = lk__event_arg(e, off, i, &v, &s);
		if (!off)
			break;
		fputs(i ? "," : "", f);
		lk__json_string(f, e->cls->arg_name[i]);
		fputc(':', f);
		switch (type) {
		case LK_PROBE_I64:
			fprintf(f, "%" PRId64, (int64_t)v);
			break;
		case LK_PROBE_U64:
			fprintf(f, "%" PRIu64, v);
			break;
		case LK_PROBE_F64:
			memcpy(&d, &v, 8);
			json_double(f, d);
			break;
		case LK_PROBE_STR:
			lk__json_string(f, s);
			break;
		default:
			fprintf(f, "\"0x%" PRIx64 "\"", v);
			break;
		}
	}
	fputc('}', f);
}

static const char *phase(unsigned int kind)
{
	switch (kind) {
	case LK_PROBE_SPAN_BEGIN:
		return "B";
	case LK_PROBE_SPAN_END:
		return "E";
	case LK_PROBE_COUNTER:
		return "C";
	default:
		return "i";
	}
}

/* lowkey:sched_out starts an off-CPU slice, lowkey:sched_in ends it. */
static int off_cpu(struct json_state *j, const struct lk__event *e)
{
	struct lk__switch sw = lk__event_switch(e);

	if (sw.out) {
		j->off_tsc = e->tsc;
		j->off_cpu = sw.cpu;
		j->preempted = sw.preempted;
		j->off = true;
		return 0;
	}
	if (!j->off)
		return 0; /* the thread was off its CPU when the trace began */
	j->off = false;
	begin_object(j);
	fprintf(j->out, "{\"name\":\"%s\",\"cat\":\"off-cpu\",\"ph\":\"X\",",
		j->preempted ? "preempted" : "blocked");
	put_time(j, j->off_tsc);
	fprintf(j->out,
		",\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{\"cpu\":%" PRIu64
		",\"next_cpu\":%" PRIu64 "}}",
		(double)(lk__reader_ns(j->r, e->tsc) - lk__reader_ns(j->r, j->off_tsc)) / 1000.0,
		j->r->pid, e->tid, j->off_cpu, sw.cpu);
	return ferror(j->out) ? -EIO : 0;
}

static int on_event(const struct lk__event *e, void *arg)
{
	struct json_state *j = arg;
	FILE *f = j->out;
	uint64_t v;
	const char *s;

	if (e->cls->id == LK__EVENT_SCHED_OUT || e->cls->id == LK__EVENT_SCHED_IN)
		return off_cpu(j, e);
	j->last_tsc = e->tsc;
	if (e->cls->kind == LK_PROBE_COUNTER && !counter_value(e)) {
		j->nonfinite_counters++;
		return 0;
	}
	begin_object(j);
	if (e->cls->id == LK__EVENT_THREAD_NAME) {
		lk__event_arg(e, 0, 0, &v, &s);
		fprintf(f,
			"{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
			j->r->pid, e->tid);
		lk__json_string(f, s ? s : "");
		fputs("}}", f);
		return ferror(f) ? -EIO : 0;
	}
	fputs("{\"name\":", f);
	lk__json_string(f, e->cls->event);
	fputs(",\"cat\":", f);
	lk__json_string(f, e->cls->provider);
	fprintf(f, ",\"ph\":\"%s\",", phase(e->cls->kind));
	put_time(j, e->tsc);
	if (j->r->cputime)
		fprintf(f, ",\"tts\":%.3f", (double)e->cputime_ns / 1000.0);
	fprintf(f, ",\"pid\":%d,\"tid\":%d", j->r->pid, e->tid);
	if (phase(e->cls->kind)[0] == 'i')
		fputs(",\"s\":\"t\"", f);
	if (e->cls->nargs)
		put_args(f, e);
	fputc('}', f);
	return ferror(f) ? -EIO : 0;
}

static int on_stream_end(const struct lk__stream_info *s, void *arg)
{
	struct json_state *j = arg;

	j->off = false;
	j->lost += s->lost;
	if (!s->lost)
		return 0;
	begin_object(j);
	fprintf(j->out, "{\"name\":\"lowkey:lost\",\"cat\":\"lowkey\",\"ph\":\"i\",\"s\":\"t\",");
	put_time(j, j->last_tsc);
	fprintf(j->out, ",\"pid\":%d,\"tid\":%d,\"args\":{\"events\":%" PRIu64 "}}", j->r->pid,
		s->tid, s->lost);
	return 0;
}

int lk__json_convert(const char *in, const char *json_path, char *err, size_t errlen)
{
	int fd = lk__out_open(json_path, LK__OUT_REPLACE, NULL, err, errlen), rc;

	if (fd < 0)
		return fd;
	rc = lk__json_convert_fd(in, fd, json_path, err, errlen);
	close(fd);
	return rc;
}

int lk__json_convert_fd(const char *in, int fd, const char *json_path, char *err, size_t errlen)
{
	struct lk__trace_file t;
	int rc = lk__convert_open(&t, in, err, errlen);

	if (rc)
		return rc;
	rc = lk__json_write(&t, fd, json_path, err, errlen);
	lk__trace_file_close(&t);
	return rc;
}

/* A stream on a duplicate of fd (the caller's stays open), emptied, written from its start. */
static FILE *json_stream(int fd)
{
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	struct stat st;
	FILE *f;

	if (copy < 0)
		return NULL;
	if (fstat(copy, &st) == 0 && (!st.st_size || ftruncate(copy, 0) == 0) &&
	    lseek(copy, 0, SEEK_SET) == 0 && (f = lk__out_stream(copy)))
		return f;
	close(copy);
	return NULL;
}

int lk__json_write(struct lk__trace_file *t, int fd, const char *json_path, char *err,
		   size_t errlen)
{
	const struct lk__reader_ops ops = { NULL, on_event, on_stream_end };
	struct lk__trace_reader *r = &t->r;
	struct json_state j = { .first = true };
	int rc;

	j.out = json_stream(fd);
	j.r = r;
	if (!j.out) {
		rc = -errno;
		snprintf(err, errlen, "cannot write %s: %s", json_path, strerror(errno));
		return rc;
	}
	fprintf(j.out, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
	begin_object(&j);
	fprintf(j.out,
		"{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":", r->pid);
	lk__json_string(j.out, r->procname);
	fputs("}}", j.out);
	rc = lk__trace_file_walk(t, &ops, &j, err, errlen);
	fprintf(j.out,
		"\n],\"otherData\":{\"tracer\":\"lowkey\",\"clock\":\"realtime\",\"lost_events\":%" PRIu64
		",\"nonfinite_counter_values\":%" PRIu64 ",\"tsc_hz\":%" PRIu64,
		j.lost, j.nonfinite_counters + t->nonfinite_counters, r->tsc_hz);
	if (r->overwrite) /* a flight recorder's snapshot: its lost events are older ones overwritten */
		fprintf(j.out, ",\"overwrite\":true,\"dropped_events\":%" PRIu64, r->dropped);
	fputs("}}\n", j.out);
	if (fclose(j.out) != 0 && !rc) {
		rc = -errno;
		snprintf(err, errlen, "writing %s failed: %s", json_path, strerror(errno));
	} else if (rc == -EIO) {
		snprintf(err, errlen, "writing %s failed", json_path);
	}
	return rc;
}
