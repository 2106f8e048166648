// SPDX-License-Identifier: MIT
/*
 * lowkey's Chrome JSON traces (json.c) read back into a trace file of any format (trace_file.h).
 *
 * The document is read a value at a time (json_read.h): the top-level object's members, and each
 * of traceEvents' events, parsed, turned into the trace's in-memory events and freed, so memory
 * holds one event's tree at a time besides what the report keeps. What lowkey writes maps back:
 * "B"/"E"/"i" to span begins, ends and events of class cat:name, "C" to counter values, "M" to
 * the process's and threads' names, the instant lowkey:lost to the thread's lost events, and
 * "X" slices of category off-cpu to a switch out and back in. Timestamps ("ts", "dur", "tts") are
 * read from their text, exactly to the nanosecond lowkey writes, not through a double (which holds
 * a quarter of a microsecond of today's real time).
 *
 * A document lowkey did not write (otherData.tracer is not "lowkey", a phase it does not write)
 * is refused; so is one cut short or damaged, with the byte where it went wrong.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "internal/json_read.h"
#include "internal/trace_file.h"

struct json_reader {
	struct lk__trace_file *t;
	const char *name;
	char *err;
	size_t errlen;
	size_t at;   /* the event's offset, for messages */
	bool lowkey; /* otherData.tracer is "lowkey" */
};

static int bad(struct json_reader *j, const char *what)
{
	return lk__failf(j->err, j->errlen, -EINVAL,
			 "%s: the JSON event at byte %zu %s: not a trace lowkey wrote, "
			 "or a damaged one",
			 j->name, j->at, what);
}

/* A whole number as lowkey writes it: digits only. */
static bool decimal_uint(const struct lk__jr_value *v, uint64_t *out)
{
	uint64_t n = 0;

	if (!v || v->type != LK__JR_NUMBER || v->raw_len == 0)
		return false;
	for (size_t i = 0; i < v->raw_len; i++) {
		if (v->raw[i] < '0' || v->raw[i] > '9' || n > (UINT64_MAX - 9) / 10)
			return false;
		n = n * 10 + (uint64_t)(v->raw[i] - '0');
	}
	*out = n;
	return true;
}

/* A decimal number of microseconds as lowkey writes it ("1764056684123456.789") in ns. */
static bool decimal_us(const struct lk__jr_value *v, uint64_t *ns)
{
	uint64_t whole = 0, frac = 0;
	size_t i = 0, digits = 0;

	if (!v || v->type != LK__JR_NUMBER)
		return false;
	for (; i < v->raw_len && v->raw[i] >= '0' && v->raw[i] <= '9'; i++) {
		if (whole > (UINT64_MAX / 1000 - 9) / 10)
			return false;
		whole = whole * 10 + (uint64_t)(v->raw[i] - '0');
	}
	if (i == 0)
		return false;
	if (i < v->raw_len && v->raw[i] == '.') {
		for (i++; i < v->raw_len && v->raw[i] >= '0' && v->raw[i] <= '9'; i++, digits++)
			if (digits < 3)
				frac = frac * 10 + (uint64_t)(v->raw[i] - '0');
		if (digits == 0)
			return false;
		for (size_t d = digits; d < 3; d++)
			frac *= 10;
	}
	if (i != v->raw_len)
		return false; /* an exponent or a sign: lowkey writes neither */
	*ns = whole * 1000 + frac;
	return true;
}

/* A whole number member in [min, max]. */
static bool whole_number(const struct lk__jr_value *obj, const char *key, double min, double max,
			 int64_t *out)
{
	double d = lk__jr_number(obj, key);

	/* in range first: the cast is then defined, and a fraction does not survive it */
	if (!(d >= min && d <= max) || d != (double)(int64_t)d)
		return false;
	*out = (int64_t)d;
	return true;
}

static int thread_of(struct json_reader *j, const struct lk__jr_value *ev,
		     struct lk__tf_thread **th)
{
	int64_t tid;

	if (!whole_number(ev, "tid", 1, INT_MAX, &tid))
		return bad(j, "has no thread id lowkey records");
	*th = lk__tf_thread(j->t, (int)tid);
	return *th ? 0 : -ENOMEM;
}

/* "M": the process's name (and pid), a thread's name. */
static int metadata(struct json_reader *j, const struct lk__jr_value *ev, const char *name)
{
	const char *value = lk__jr_string(lk__jr_get(ev, "args"), "name");
	struct lk__tf_thread *th;
	int64_t pid;
	int rc;

	if (!value)
		return bad(j, "names nothing (no args.name)");
	if (strcmp(name, "process_name") == 0) {
		if (!whole_number(ev, "pid", 0, INT_MAX, &pid))
			return bad(j, "has no pid lowkey writes");
		j->t->r.pid = (int)pid;
		snprintf(j->t->r.procname, sizeof(j->t->r.procname), "%s", value);
		return 0;
	}
	if (strcmp(name, "thread_name") != 0)
		return bad(j, "is metadata lowkey does not write");
	if ((rc = thread_of(j, ev, &th)) != 0)
		return rc;
	return lk__tf_thread_name(j->t, th, 0, value, strlen(value));
}

/* "X" of category off-cpu: the thread off its CPU, preempted or blocked. */
static int off_cpu(struct json_reader *j, const struct lk__jr_value *ev, const char *name,
		   struct lk__tf_thread *th, uint64_t ns)
{
	const struct lk__jr_value *args = lk__jr_get(ev, "args");
	int64_t cpu = 0, next_cpu = 0;
	uint64_t dur;

	if (!decimal_us(lk__jr_get(ev, "dur"), &dur) || ns > UINT64_MAX - dur)
		return bad(j, "has no duration lowkey writes");
	if ((strcmp(name, "preempted") != 0 && strcmp(name, "blocked") != 0) ||
	    !whole_number(args, "cpu", 0, 1 << 30, &cpu) ||
	    !whole_number(args, "next_cpu", 0, 1 << 30, &next_cpu))
		return bad(j, "is off-CPU time unlike lowkey's");
	return lk__tf_off_cpu(j->t, th, ns, ns + dur, name[0] == 'p', (uint64_t)cpu,
			      (uint64_t)next_cpu);
}

/* "C": the value of a counter, its one argument. */
static int counter(struct json_reader *j, const struct lk__jr_value *ev, const char *cat,
		   const char *name, struct lk__tf_thread *th, uint64_t ns)
{
	const struct lk__jr_value *args = lk__jr_get(ev, "args");
	uint32_t cls;
	int rc;

	if (!args || args->type != LK__JR_OBJECT || args->n != 1 ||
	    args->items[0].type != LK__JR_NUMBER)
		return bad(j, "is a counter without its one value");
	rc = lk__tf_class(j->t, cat, strlen(cat), name, strlen(name), LK_PROBE_COUNTER, &cls);
	return rc ? rc : lk__tf_counter(j->t, th, cls, ns, args->items[0].number);
}

static unsigned int kind_of(char phase)
{
	switch (phase) {
	case 'B':
		return LK_PROBE_SPAN_BEGIN;
	case 'E':
		return LK_PROBE_SPAN_END;
	case 'i':
		return LK_PROBE_EVENT;
	default:
		return 0;
	}
}

/* A number argument as its text says: a fraction or an exponent a double, a sign an int64. */
static int number_arg(struct lk__tf_args *a, const struct lk__jr_value *v)
{
	char text[40];
	uint64_t raw;
	char *end;

	if (v->raw_len >= sizeof(text) || memchr(v->raw, '.', v->raw_len) ||
	    memchr(v->raw, 'e', v->raw_len) || memchr(v->raw, 'E', v->raw_len)) {
		memcpy(&raw, &v->number, 8);
		return lk__tf_arg(a, v->key, strlen(v->key), LK_PROBE_F64, raw, NULL, 0);
	}
	memcpy(text, v->raw, v->raw_len);
	text[v->raw_len] = 0;
	errno = 0;
	if (text[0] == '-')
		raw = (uint64_t)strtoll(text, &end, 10);
	else
		raw = strtoull(text, &end, 10);
	if (errno || *end) { /* past 64 bits: as a double */
		memcpy(&raw, &v->number, 8);
		return lk__tf_arg(a, v->key, strlen(v->key), LK_PROBE_F64, raw, NULL, 0);
	}
	return lk__tf_arg(a, v->key, strlen(v->key), text[0] == '-' ? LK_PROBE_I64 : LK_PROBE_U64,
			  raw, NULL, 0);
}

/* An event's "args" into the trace's collector: numbers and strings, as lowkey writes them. */
static int event_args(struct json_reader *j, const struct lk__jr_value *ev)
{
	const struct lk__jr_value *args = lk__jr_get(ev, "args");
	struct lk__tf_args *a = &j->t->args;
	int rc = 0;

	lk__tf_args_reset(a);
	if (!args)
		return 0;
	if (args->type != LK__JR_OBJECT)
		return bad(j, "has arguments that are not an object");
	for (size_t i = 0; i < args->n && !rc; i++) {
		const struct lk__jr_value *v = &args->items[i];

		if (v->type == LK__JR_STRING)
			rc = lk__tf_arg(a, v->key, strlen(v->key), LK_PROBE_STR, 0, v->string,
					strlen(v->string));
		else if (v->type == LK__JR_NUMBER)
			rc = number_arg(a, v);
		else
			return bad(j, "has an argument that is neither a number nor a string");
	}
	return rc == -E2BIG ? bad(j, "has more arguments than a probe can have") : rc;
}

static int event(struct json_reader *j, const struct lk__jr_value *ev)
{
	const char *ph = lk__jr_string(ev, "ph"), *name = lk__jr_string(ev, "name"),
		   *cat = lk__jr_string(ev, "cat");
	uint64_t ns, cpu_ns = 0, lost;
	struct lk__tf_thread *th;
	uint32_t cls;
	int rc;

	if (ev->type != LK__JR_OBJECT || !ph || !ph[0] || ph[1] || !name)
		return bad(j, "is not an event (an object with a name and a one-letter ph)");
	if (ph[0] == 'M')
		return metadata(j, ev, name);
	if (!cat)
		return bad(j, "has no category");
	if (!decimal_us(lk__jr_get(ev, "ts"), &ns))
		return bad(j, "has no timestamp lowkey writes");
	if ((rc = thread_of(j, ev, &th)) != 0)
		return rc;
	if (lk__jr_get(ev, "tts")) {
		if (!decimal_us(lk__jr_get(ev, "tts"), &cpu_ns))
			return bad(j, "has a thread time lowkey does not write");
		j->t->r.cputime = true;
	}
	if (ph[0] == 'X' && strcmp(cat, "off-cpu") == 0)
		return off_cpu(j, ev, name, th, ns);
	if (ph[0] == 'C')
		return counter(j, ev, cat, name, th, ns);
	if (ph[0] == 'i' && strcmp(name, "lowkey:lost") == 0 && strcmp(cat, "lowkey") == 0) {
		if (!decimal_uint(lk__jr_get(lk__jr_get(ev, "args"), "events"), &lost) ||
		    th->lost > UINT64_MAX - lost)
			return bad(j, "counts lost events unlike lowkey");
		th->lost += lost;
		return 0;
	}
	if (!kind_of(ph[0]))
		return bad(j, "has a phase lowkey does not write");
	if ((rc = event_args(j, ev)) != 0)
		return rc;
	rc = lk__tf_class_args(j->t, cat, strlen(cat), name, strlen(name), kind_of(ph[0]),
			       &j->t->args, &cls);
	return rc ? rc :
		    lk__tf_event(j->t, th, cls, ns, cpu_ns, j->t->args.payload, j->t->args.len);
}

static void skip_space(const char *text, size_t len, size_t *pos)
{
	while (*pos < len && (text[*pos] == ' ' || text[*pos] == '\t' || text[*pos] == '\n' ||
			      text[*pos] == '\r'))
		(*pos)++;
}

/* The next character after blanks, if it is one of these (it is consumed); 0 if not. */
static char expect(const char *text, size_t len, size_t *pos, const char *one_of)
{
	skip_space(text, len, pos);
	if (*pos >= len || !strchr(one_of, text[*pos]) || !text[*pos])
		return 0;
	return text[(*pos)++];
}

static int syntax(struct json_reader *j, size_t pos, size_t len, const char *what)
{
	if (pos >= len)
		return lk__failf(j->err, j->errlen, -EINVAL,
				 "%s ends before its JSON does (at byte %zu): the file is cut "
				 "short",
				 j->name, len);
	return lk__failf(j->err, j->errlen, -EINVAL, "%s is damaged at byte %zu: %s", j->name, pos,
			 what);
}

/* A value the reader could not parse: its message, with the file's name. */
static int parse_error(struct json_reader *j, const char *msg)
{
	char copy[256];

	snprintf(copy, sizeof(copy), "%s", msg);
	if (strstr(copy, "unexpected end") || strstr(copy, "unterminated"))
		return lk__failf(j->err, j->errlen, -EINVAL, "%s is cut short (%s)", j->name, copy);
	return lk__failf(j->err, j->errlen, strstr(copy, "out of memory") ? -ENOMEM : -EINVAL,
			 "%s is damaged (%s)", j->name, copy);
}

static int trace_events(struct json_reader *j, const char *text, size_t len, size_t *pos)
{
	char c;
	int rc;

	if (!expect(text, len, pos, "["))
		return syntax(j, *pos, len, "traceEvents is not an array");
	if (expect(text, len, pos, "]"))
		return 0;
	do {
		struct lk__jr_value *ev;

		skip_space(text, len, pos);
		j->at = *pos;
		lk__tf_parsed(j->t, *pos);
		if (!(ev = lk__jr_parse_next(text, len, pos, j->err, j->errlen)))
			return parse_error(j, j->err);
		rc = event(j, ev);
		lk__jr_free(ev);
		if (rc == -ENOMEM)
			return lk__failf(j->err, j->errlen, rc, "out of memory reading %s",
					 j->name);
		if (rc == -ERANGE)
			return bad(
				j,
				"is off-CPU time that begins before the thread's previous ended");
		if (rc == -E2BIG)
			return lk__failf(j->err, j->errlen, -EINVAL,
					 "%s has more event names than a lowkey trace can",
					 j->name);
		if (rc)
			return rc;
	} while ((c = expect(text, len, pos, ",]")) == ',');
	return c ? 0 : syntax(j, *pos, len, "expected ',' or ']' after an event");
}

static int other_data(struct json_reader *j, const struct lk__jr_value *v)
{
	const char *tracer = lk__jr_string(v, "tracer");
	double nonfinite = lk__jr_number(v, "nonfinite_counter_values");
	const struct lk__jr_value *overwrite = lk__jr_get(v, "overwrite");

	j->lowkey = tracer && strcmp(tracer, "lowkey") == 0;
	if (nonfinite >= 0 && nonfinite < 1e19)
		j->t->nonfinite_counters = (uint64_t)nonfinite;
	/* a flight recorder's snapshot: its lost events are older ones overwritten, but for dropped_events */
	if (overwrite && overwrite->type == LK__JR_BOOL && overwrite->boolean) {
		j->t->r.overwrite = true;
		if (!decimal_uint(lk__jr_get(v, "dropped_events"), &j->t->r.dropped))
			j->t->r.dropped = 0;
	}
	return 0;
}

int lk__chrome_json_read(struct lk__trace_file *t, const char *text, size_t len, const char *name,
			 char *err, size_t errlen)
{
	struct json_reader j = { t, name, err, errlen, 0, false };
	size_t pos = 0;
	char c;
	int rc;

	if (!expect(text, len, &pos, "{"))
		return syntax(&j, pos, len, "not a JSON object");
	if (expect(text, len, &pos, "}"))
		c = '}';
	else
		do {
			struct lk__jr_value *key, *v;

			skip_space(text, len, &pos);
			if (pos < len && text[pos] != '"')
				return syntax(&j, pos, len, "expected a member name");
			if (!(key = lk__jr_parse_next(text, len, &pos, err, errlen)))
				return parse_error(&j, err);
			if (!expect(text, len, &pos, ":")) {
				lk__jr_free(key);
				return syntax(&j, pos, len, "expected ':'");
			}
			if (strcmp(key->string, "traceEvents") == 0) {
				lk__jr_free(key);
				if ((rc = trace_events(&j, text, len, &pos)) != 0)
					return rc;
				continue;
			}
			v = lk__jr_parse_next(text, len, &pos, err, errlen);
			if (v && strcmp(key->string, "otherData") == 0)
				other_data(&j, v);
			lk__jr_free(key);
			if (!v)
				return parse_error(&j, err);
			lk__jr_free(v);
		} while ((c = expect(text, len, &pos, ",}")) == ',');
	if (!c)
		return syntax(&j, pos, len, "expected ',' or '}'");
	skip_space(text, len, &pos);
	if (pos != len)
		return syntax(&j, pos, len, "text after the JSON document");
	if (!j.lowkey)
		return lk__failf(
			err, errlen, -EINVAL,
			"%s is JSON, but not a trace lowkey wrote (its otherData.tracer "
			"is not \"lowkey\"): lowkey report reads the traces of lowkey trace --format json",
			name);
	return 0;
}
