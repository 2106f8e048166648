// SPDX-License-Identifier: MIT
/*
 * What a CTF trace says about itself: its event classes, clock and process, from the `metadata`
 * (the TSDL lowkey writes, ctf.c) or from the hidden `.lowkey-index` of a trace of lowkey before
 * format 3. Nothing in either is trusted (see ctf_reader.h): a line that is not what lowkey
 * writes is an error that names the line.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "probe/probe_internal.h"
#include "internal/ctf_reader.h"
#include "format/ctf/read.h"

static void field_names(struct lk__event_class *c)
{
	const char *p = c->arg_names;

	for (unsigned int i = 0; i < c->nargs; i++) {
		size_t n;
		bool ident;

		while (p && *p == ' ')
			p++;
		n = p ? strcspn(p, ",") : 0;
		while (n && p[n - 1] == ' ')
			n--;
		ident = n > 0 && n < sizeof(c->arg_name[i]) &&
			(p[0] == '_' || (p[0] >= 'a' && p[0] <= 'z') ||
			 (p[0] >= 'A' && p[0] <= 'Z'));
		for (size_t k = 0; ident && k < n; k++)
			ident = p[k] == '_' || (p[k] >= 'a' && p[k] <= 'z') ||
				(p[k] >= 'A' && p[k] <= 'Z') || (p[k] >= '0' && p[k] <= '9');
		if (ident)
			snprintf(c->arg_name[i], sizeof(c->arg_name[i]), "%.*s", (int)n, p);
		else
			snprintf(c->arg_name[i], sizeof(c->arg_name[i]), "arg%u", i);
		p = p ? strchr(p, ',') : NULL;
		if (p)
			p++;
	}
}

static int add_class(struct lk__trace_reader *r, struct lk__event_class *c)
{
	if (c->id >= r->nclasses) {
		size_t n = r->nclasses * 2 > c->id + 1u ? r->nclasses * 2 : c->id + 64u;
		struct lk__event_class **grown;

		if (n > LK__MAX_EVENT_ID + 1u)
			n = LK__MAX_EVENT_ID + 1u;
		grown = realloc(r->classes, n * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		memset(grown + r->nclasses, 0, (n - r->nclasses) * sizeof(*grown));
		r->classes = grown;
		r->nclasses = n;
	}
	r->classes[c->id] = c;
	return 0;
}

void lk__ctf_free_class(struct lk__event_class *c)
{
	if (c)
		free(c->provider), free(c->event), free(c->where), free(c->arg_names);
	free(c);
}

/* s, all of it, as a number of base at most max: no sign, no blanks, nothing after. */
static bool parse_uint(const char *s, int base, unsigned long max, unsigned long *out)
{
	unsigned long v;
	char *end;

	if (!(base == 16 ? isxdigit((unsigned char)s[0]) : isdigit((unsigned char)s[0])))
		return false;
	errno = 0;
	v = strtoul(s, &end, base);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* A type of 1 .. LK_PROBE_PTR for each of the first nargs arguments, none after. */
static bool valid_types(uint32_t types, unsigned int nargs)
{
	for (unsigned int i = 0; i < 8; i++) {
		unsigned int t = lk__arg_type(types, i);

		if (i < nargs ? t < LK_PROBE_I64 || t > LK_PROBE_PTR : t != 0)
			return false;
	}
	return true;
}

/* A class from the trace's description, checked as the writer would have made it. */
static int add_parsed_class(struct lk__trace_reader *r, unsigned long id, unsigned long kind,
			    unsigned long nargs, unsigned long types, const char *provider,
			    const char *event, const char *where, const char *arg_names,
			    const char **why)
{
	struct lk__event_class *c;

	*why = "a number out of range";
	if (id < LK__FIRST_SITE_ID || id > LK__MAX_EVENT_ID || kind < LK_PROBE_EVENT ||
	    kind > LK_PROBE_COUNTER || nargs > LK_PROBE_MAX_ARGS || types > UINT32_MAX ||
	    !valid_types((uint32_t)types, (unsigned int)nargs))
		return -EINVAL;
	*why = "a second event class with the same id";
	if (id < r->nclasses && r->classes[id])
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct lk__event_class){ (uint32_t)id,	(uint8_t)kind,	  (uint8_t)nargs,
				       (uint32_t)types, strdup(provider), strdup(event),
				       strdup(where),	strdup(arg_names) };
	if (!c->provider || !c->event || !c->where || !c->arg_names) {
		lk__ctf_free_class(c);
		return -ENOMEM;
	}
	if (c->kind == LK_PROBE_COUNTER)
		strcpy(c->arg_name[0], "value");
	else
		field_names(c);
	for (unsigned int a = 0; a < c->nargs; a++) /* as the writer: a repeated name is argI */
		for (unsigned int b = 0; b < a; b++)
			if (strcmp(c->arg_name[a], c->arg_name[b]) == 0)
				snprintf(c->arg_name[a], sizeof(c->arg_name[a]), "arg%u", a);
	if (add_class(r, c) != 0) {
		lk__ctf_free_class(c);
		return -ENOMEM;
	}
	return 0;
}

/* event TAB id TAB kind TAB nargs TAB types TAB provider TAB event TAB where TAB argnames */
static int parse_event_line(struct lk__trace_reader *r, char *line, const char **why)
{
	unsigned long id, kind, nargs, types;
	char *f[9], *p = line;
	int n = 0;

	while (n < 8 && p)
		f[n++] = strsep(&p, "\t");
	f[8] = p ? p : ""; /* the arguments as written: the rest of the line */
	*why = "fewer than 8 fields";
	if (n < 8)
		return -EINVAL;
	*why = "a number out of range";
	if (!parse_uint(f[1], 10, LK__MAX_EVENT_ID, &id) ||
	    !parse_uint(f[2], 10, LK_PROBE_COUNTER, &kind) ||
	    !parse_uint(f[3], 10, LK_PROBE_MAX_ARGS, &nargs) ||
	    !parse_uint(f[4], 16, UINT32_MAX, &types))
		return -EINVAL;
	return add_parsed_class(r, id, kind, nargs, types, f[5], f[6], f[7], f[8], why);
}

static int add_builtin(struct lk__trace_reader *r, uint32_t id, const char *event,
		       const char *names)
{
	struct lk__event_class *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->id = id;
	c->provider = strdup("lowkey");
	c->event = strdup(event);
	c->where = strdup("");
	c->arg_names = strdup(names);
	if (!c->provider || !c->event || !c->where || !c->arg_names || add_class(r, c) != 0) {
		lk__ctf_free_class(c);
		return -ENOMEM;
	}
	if (id == LK__EVENT_THREAD_NAME) {
		c->nargs = 1;
		c->arg_types = LK_PROBE_STR;
	} else {
		c->nargs = id == LK__EVENT_SCHED_OUT ? 2 : 1;
		c->arg_types = id == LK__EVENT_SCHED_OUT ? LK_PROBE_U64 | LK_PROBE_U64 << 4 :
							   LK_PROBE_U64;
	}
	field_names(c);
	return 0;
}

static int add_builtin_classes(struct lk__trace_reader *r)
{
	int rc = add_builtin(r, LK__EVENT_THREAD_NAME, "thread_name", "name");

	if (!rc)
		rc = add_builtin(r, LK__EVENT_SCHED_OUT, "sched_out", "cpu,preempted");
	if (!rc)
		rc = add_builtin(r, LK__EVENT_SCHED_IN, "sched_in", "cpu");
	return rc;
}

static int parse_line(struct lk__trace_reader *r, char *line, const char **why)
{
	unsigned long long v;

	*why = "out of memory";
	if (sscanf(line, "tsc_hz %llu", &v) == 1)
		r->tsc_hz = v;
	else if (sscanf(line, "tsc0 %llu", &v) == 1)
		r->tsc0 = v;
	else if (sscanf(line, "monotonic0_ns %llu", &v) == 1)
		r->monotonic0_ns = v;
	else if (sscanf(line, "realtime0_ns %llu", &v) == 1)
		r->realtime0_ns = v;
	else if (sscanf(line, "cputime %llu", &v) == 1)
		r->cputime = v;
	else if (sscanf(line, "pid %llu", &v) == 1)
		r->pid = (int)v;
	else if (strncmp(line, "procname ", 9) == 0)
		snprintf(r->procname, sizeof(r->procname), "%s", line + 9);
	else if (strncmp(line, "event\t", 6) == 0)
		return parse_event_line(r, line, why);
	return 0;
}

/* The next line of text (its newline replaced by a NUL), or NULL at end. */
static char *next_line(char **p, char *end)
{
	char *line = *p, *nl;

	if (line >= end)
		return NULL;
	nl = memchr(line, '\n', (size_t)(end - line));
	*p = nl ? nl + 1 : end;
	if (nl)
		*nl = 0;
	return line;
}

int lk__ctf_parse_index(struct lk__trace_reader *r, char *text, size_t len, char *err,
			size_t errlen)
{
	const char *name = r->dir ? r->dir : "the trace", *why = "";
	char *p = text, *end = text + len, *line;
	unsigned int lineno = 1;
	int rc, format;

	text[len] = 0;
	line = next_line(&p, end);
	if (!line || sscanf(line, "lowkey-trace %d", &format) != 1)
		return lk__failf(err, errlen, -EINVAL, "%s: %s is not a lowkey trace index", name,
				 INDEX_NAME);
	if (format != 2)
		return lk__failf(err, errlen, -EINVAL,
				 "%s: written by another version of lowkey (record format %s); "
				 "babeltrace2 reads it",
				 name, format == 1 ? "1" : "unknown");
	rc = add_builtin_classes(r);
	while (!rc && (line = next_line(&p, end))) {
		lineno++;
		rc = parse_line(r, line, &why);
	}
	if (rc)
		return lk__failf(err, errlen, rc,
				 "%s: line %u of the trace index %s is damaged: %s", name, lineno,
				 INDEX_NAME, why);
	if (!r->tsc_hz)
		return lk__failf(err, errlen, -EINVAL,
				 "%s: the trace index %s is damaged: no tsc_hz", name, INDEX_NAME);
	r->format = 2;
	lk__reader_set_clock(r);
	return 0;
}

/* ---- the metadata: the TSDL lowkey writes (ctf.c), one statement a line ---- */

struct md_event {
	unsigned long id, stream_id;
	bool has_id, counter;
	const char *name, *where;
	const char *field[LK_PROBE_MAX_ARGS];
	unsigned int nfields;
	uint32_t types;
};

struct md_parse {
	enum { MD_TOP, MD_ENV, MD_EVENT, MD_OTHER } block;
	int depth;
	struct md_event ev;
	char tracer[64];
	bool has_format;
};

/* The change in brace depth over a line, braces inside quotes left out. */
static int brace_delta(const char *line)
{
	bool quoted = false;
	int d = 0;

	for (; *line; line++) {
		if (*line == '"')
			quoted = !quoted;
		else if (!quoted && *line == '{')
			d++;
		else if (!quoted && *line == '}')
			d--;
	}
	return d;
}

/* "key = value;" -> key, value (a quoted value without its quotes); false if the line is not one. */
static bool md_assignment(char *line, char **key, char **value)
{
	char *eq = strstr(line, " = "), *v, *end;

	if (!eq)
		return false;
	*eq = 0;
	v = eq + 3;
	end = v + strlen(v);
	if (end == v || end[-1] != ';')
		return false;
	*--end = 0;
	if (*v == '"') {
		if (end - v < 2 || end[-1] != '"')
			return false;
		*--end = 0;
		v++;
	}
	*key = line;
	*value = v;
	return true;
}

static bool md_number(const char *s, unsigned long long *out)
{
	char *end;

	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return !errno && !*end;
}

static int md_env(struct lk__trace_reader *r, struct md_parse *m, char *line, const char **why)
{
	unsigned long long v = 0;
	char *key, *value;

	*why = "an env entry that is not `key = value;`";
	if (!md_assignment(line, &key, &value))
		return -EINVAL;
	if (strcmp(key, "tracer_name") == 0) {
		snprintf(m->tracer, sizeof(m->tracer), "%s", value);
		return 0;
	}
	if (strcmp(key, "procname") == 0) {
		snprintf(r->procname, sizeof(r->procname), "%s", value);
		return 0;
	}
	if (strncmp(key, "lowkey_", 7) != 0 && strcmp(key, "vpid") != 0)
		return 0; /* hostname, domain, the tracer's version */
	*why = "an env number out of range";
	if (!md_number(value, &v))
		return -EINVAL;
	if (strcmp(key, "vpid") == 0)
		r->pid = v <= INT32_MAX ? (int)v : 0;
	else if (strcmp(key, "lowkey_format") == 0)
		r->format = v <= 1000 ? (unsigned int)v : 0, m->has_format = true;
	else if (strcmp(key, "lowkey_cputime") == 0)
		r->cputime = v != 0;
	else if (strcmp(key, "lowkey_sched") == 0)
		r->sched = v != 0;
	else if (strcmp(key, "lowkey_sched_lost") == 0)
		r->sched_lost = v;
	else if (strcmp(key, "lowkey_overwrite") == 0)
		r->overwrite = v != 0;
	else if (strcmp(key, "lowkey_dropped") == 0)
		r->dropped = v;
	else if (strcmp(key, "lowkey_tsc_hz") == 0)
		r->tsc_hz = v;
	else if (strcmp(key, "lowkey_tsc0") == 0)
		r->tsc0 = v;
	else if (strcmp(key, "lowkey_monotonic0_ns") == 0)
		r->monotonic0_ns = v;
	else if (strcmp(key, "lowkey_realtime0_ns") == 0)
		r->realtime0_ns = v;
	return 0;
}

/* A field's type as ctf.c writes it: its lowkey type, and whether it is a counter's value. */
static unsigned int md_field_type(const char *type, bool *counter)
{
	static const struct {
		const char *name;
		unsigned int type;
		bool counter;
	} types[] = {
		{ "int64_t", LK_PROBE_I64, false },
		{ "uint64_t", LK_PROBE_U64, false },
		{ "double_t", LK_PROBE_F64, false },
		{ "string", LK_PROBE_STR, false },
		{ "lk_pointer_t", LK_PROBE_PTR, false },
		{ "lk_counter_int64_t", LK_PROBE_I64, true },
		{ "lk_counter_uint64_t", LK_PROBE_U64, true },
		{ "lk_counter_double_t", LK_PROBE_F64, true },
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(type, types[i].name) == 0) {
			*counter = types[i].counter;
			return types[i].type;
		}
	return 0;
}

/* "TYPE _NAME;" inside an event's fields. */
static int md_field(struct md_event *ev, char *line, const char **why)
{
	char *sp = strchr(line, ' '), *name;
	size_t n;
	unsigned int type;
	bool counter = false;

	*why = "a field that is not `TYPE _NAME;`";
	if (!sp || sp[1] != '_')
		return -EINVAL;
	*sp = 0;
	name = sp + 2;
	n = strlen(name);
	if (n < 2 || name[n - 1] != ';')
		return -EINVAL;
	name[n - 1] = 0;
	*why = "a field of a type lowkey does not write";
	type = md_field_type(line, &counter);
	if (!type)
		return -EINVAL;
	*why = "more than 8 fields";
	if (ev->nfields == LK_PROBE_MAX_ARGS)
		return -EINVAL;
	ev->types |= (uint32_t)type << (4 * ev->nfields);
	ev->field[ev->nfields++] = name;
	ev->counter |= counter;
	return 0;
}

static int md_event_line(struct md_event *ev, char *line, int depth, const char **why)
{
	unsigned long long v;
	char *key, *value;

	if (depth >= 2)
		return md_field(ev, line, why);
	if (strncmp(line, "fields := struct", 16) == 0)
		return 0;
	*why = "an event attribute that is not `key = value;`";
	if (!md_assignment(line, &key, &value))
		return -EINVAL;
	*why = "an event number out of range";
	if (strcmp(key, "name") == 0) {
		ev->name = value;
	} else if (strcmp(key, "id") == 0) {
		if (!md_number(value, &v) || v > LK__MAX_EVENT_ID)
			return -EINVAL;
		ev->id = (unsigned long)v;
		ev->has_id = true;
	} else if (strcmp(key, "stream_id") == 0) {
		if (!md_number(value, &v) || v > 1)
			return -EINVAL;
		ev->stream_id = (unsigned long)v;
	} else if (strcmp(key, "model.emf.uri") == 0) {
		ev->where = value;
	}
	return 0;
}

/* An event block is over: its class, unless it is one of lowkey's own (added already). */
static int md_event_end(struct lk__trace_reader *r, struct md_event *ev, const char **why)
{
	char provider[256], event[256], suffix[16] = "", names[LK_PROBE_MAX_ARGS * 64] = "";
	unsigned long kind = LK_PROBE_EVENT;
	int n;

	*why = "an event without a name or an id";
	if (!ev->name || !ev->has_id)
		return -EINVAL;
	if (ev->id < LK__FIRST_SITE_ID)
		return 0;
	*why = "an event name that is not provider:event";
	n = sscanf(ev->name, "%255[^:]:%255[^:]:%15s", provider, event, suffix);
	if (n < 2 || ev->stream_id != 0)
		return -EINVAL;
	if (n == 3)
		kind = strcmp(suffix, "begin") == 0 ? LK_PROBE_SPAN_BEGIN :
		       strcmp(suffix, "end") == 0   ? LK_PROBE_SPAN_END :
						      0;
	else if (ev->counter)
		kind = LK_PROBE_COUNTER;
	*why = "an event of a kind lowkey does not write";
	if (!kind || (ev->counter && (kind != LK_PROBE_COUNTER || ev->nfields != 1)))
		return -EINVAL;
	for (unsigned int i = 0; i < ev->nfields; i++) {
		size_t len = strlen(names);

		snprintf(names + len, sizeof(names) - len, "%s%.63s", i ? "," : "", ev->field[i]);
	}
	return add_parsed_class(r, ev->id, kind, ev->nfields, ev->types, provider, event,
				ev->where ? ev->where : "", names, why);
}

static int md_line(struct lk__trace_reader *r, struct md_parse *m, char *line, const char **why)
{
	int delta, rc = 0;

	while (*line == ' ' || *line == '\t')
		line++;
	delta = brace_delta(line);
	if (m->depth == 0 && delta > 0)
		m->block = strncmp(line, "env {", 5) == 0   ? MD_ENV :
			   strncmp(line, "event {", 7) == 0 ? MD_EVENT :
							      MD_OTHER;
	else if (m->depth > 0 && delta >= 0 && *line && strncmp(line, "/*", 2) != 0) {
		if (m->block == MD_ENV)
			rc = md_env(r, m, line, why);
		else if (m->block == MD_EVENT)
			rc = md_event_line(&m->ev, line, m->depth, why);
	}
	m->depth += delta;
	if (!rc && (m->depth < 0 || m->depth > 8)) {
		*why = "unbalanced braces";
		rc = -EINVAL;
	}
	if (!rc && m->depth == 0 && m->block == MD_EVENT)
		rc = md_event_end(r, &m->ev, why);
	if (m->depth == 0) {
		memset(&m->ev, 0, sizeof(m->ev));
		m->block = MD_TOP;
	}
	return rc;
}

int lk__ctf_parse_metadata(struct lk__trace_reader *r, char *text, size_t len, char *err,
			   size_t errlen)
{
	const char *name = r->dir ? r->dir : "the trace", *why = "";
	char *p = text, *end = text + len, *line;
	struct md_parse m = { 0 };
	unsigned int lineno = 1;
	int rc;

	text[len] = 0;
	line = next_line(&p, end);
	if (!line || strcmp(line, METADATA_FIRST_LINE) != 0)
		return lk__failf(err, errlen, -EINVAL,
				 "%s: its metadata is not CTF 1.8 text: not a lowkey trace", name);
	rc = add_builtin_classes(r);
	while (!rc && (line = next_line(&p, end))) {
		lineno++;
		rc = md_line(r, &m, line, &why);
	}
	if (rc)
		return lk__failf(err, errlen, rc, "%s: line %u of its metadata is damaged: %s",
				 name, lineno, why);
	if (strcmp(m.tracer, "lowkey") != 0)
		return lk__failf(
			err, errlen, -EINVAL,
			"%s is a CTF trace of %s, not a lowkey trace: babeltrace2 reads it", name,
			m.tracer[0] ? m.tracer : "another tracer");
	if (!m.has_format)
		r->format =
			2; /* lowkey before its traces stood alone; no lowkey_tsc0 either (see below) */
	if (r->format != 2 && r->format != LK__CTF_FORMAT_VTID && r->format != LK__CTF_FORMAT)
		return lk__failf(
			err, errlen, -EINVAL,
			"%s: written by another version of lowkey (format %u); babeltrace2 "
			"reads it",
			name, r->format);
	if (!r->tsc_hz)
		return lk__failf(err, errlen, -EINVAL,
				 "%s: its metadata is damaged: no lowkey_tsc_hz", name);
	/*
	 * Format 2 metadata lacks the TSC at the start: time counts from the TSC's zero, which is
	 * the machine's boot, as CLOCK_MONOTONIC does (within the firmware's time before the kernel).
	 */
	if (!m.has_format)
		r->tsc0 = r->monotonic0_ns = 0;
	lk__reader_set_clock(r);
	return 0;
}

/* An index (lowkey-trace N) or a metadata, told by the first line. */
/* An index (lowkey-trace N) or a metadata, told by the first line. */
static int parse_description(struct lk__trace_reader *r, char *text, size_t len, char *err,
			     size_t errlen)
{
	if (len >= sizeof(METADATA_FIRST_LINE) - 1 &&
	    memcmp(text, METADATA_FIRST_LINE, sizeof(METADATA_FIRST_LINE) - 1) == 0)
		return lk__ctf_parse_metadata(r, text, len, err, errlen);
	return lk__ctf_parse_index(r, text, len, err, errlen);
}

int lk__reader_parse_index(struct lk__trace_reader *r, char *text, size_t len, char *err,
			   size_t errlen)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->dir_fd = -1;
	rc = parse_description(r, text, len, err, errlen);
	if (rc)
		lk__reader_close(r);
	return rc;
}
