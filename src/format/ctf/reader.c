// SPDX-License-Identifier: MIT
/*
 * Reading lowkey's CTF traces back (see reader.h for what is trusted: nothing). Every length read
 * from a file is checked against the file: a damaged stream ends its walk with an error, it is
 * never read past. Files are read with pread, not mapped: a file its owner truncates meanwhile
 * reads short instead of raising SIGBUS.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "probe/probe_internal.h"
#include "internal/ctf_reader.h"

#define FORMAT2_PACKET_PREFIX 88 /* format 2's packet context ended with u32 tid, u32 spare */
#define CTF_MAGIC 0xc1fc1fc1u
#define INDEX_NAME ".lowkey-index"
#define MAX_INDEX (64u << 20)  /* a line per event class: 65535 classes need far less */
#define MAX_PACKET (64u << 20) /* lowkey writes packets of 256 KiB and a record at most */

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

static void free_class(struct lk__event_class *c)
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
		free_class(c);
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
		free_class(c);
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
		free_class(c);
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

static int parse_index(struct lk__trace_reader *r, char *text, size_t len, char *err, size_t errlen)
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
	return 0;
}

/* ---- the metadata: the TSDL lowkey writes (ctf.c), one statement a line ---- */

#define METADATA_NAME "metadata"
#define METADATA_FIRST_LINE "/* CTF 1.8 */"

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

static int parse_metadata(struct lk__trace_reader *r, char *text, size_t len, char *err,
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
	if (r->format != 2 && r->format != LK__CTF_FORMAT)
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
	return 0;
}

/* An index (lowkey-trace N) or a metadata, told by the first line. */
static int parse_description(struct lk__trace_reader *r, char *text, size_t len, char *err,
			     size_t errlen)
{
	if (len >= sizeof(METADATA_FIRST_LINE) - 1 &&
	    memcmp(text, METADATA_FIRST_LINE, sizeof(METADATA_FIRST_LINE) - 1) == 0)
		return parse_metadata(r, text, len, err, errlen);
	return parse_index(r, text, len, err, errlen);
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

/* ---- files ---- */

/* Open name in the trace's directory if it is a regular file: never a FIFO or a device, never a link. */
static int open_regular(const struct lk__trace_reader *r, const char *name, struct stat *st,
			char *err, size_t errlen)
{
	int fd = openat(r->dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC),
	    rc;

	if (fd < 0 && errno == ELOOP)
		return lk__failf(
			err, errlen, -ELOOP,
			"%s/%s is a symbolic link: a trace's files are never read through one",
			r->dir, name);
	if (fd < 0)
		return lk__failf(err, errlen, -errno, "cannot open %s/%s: %s", r->dir, name,
				 strerror(errno));
	if (fstat(fd, st) != 0)
		rc = lk__failf(err, errlen, -errno, "cannot inspect %s/%s: %s", r->dir, name,
			       strerror(errno));
	else if (!S_ISREG(st->st_mode))
		rc = lk__failf(err, errlen, -EINVAL,
			       "%s/%s is not a regular file (a FIFO, a device or a directory): "
			       "not part of a lowkey trace",
			       r->dir, name);
	else
		return fd;
	close(fd);
	return rc;
}

/* Read up to len bytes at off: fewer only at the end of the file. -errno on error. */
static ssize_t read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* Read and parse file (the index or the metadata); -ENOENT with nothing said if it is not there. */
static int read_description(struct lk__trace_reader *r, const char *file, char *err, size_t errlen)
{
	struct stat st;
	char *text;
	ssize_t n;
	int rc, fd = open_regular(r, file, &st, err, errlen);

	if (fd < 0)
		return fd;
	if (st.st_size > MAX_INDEX) {
		close(fd);
		return lk__failf(err, errlen, -EFBIG,
				 "%s: its %s is %lld bytes, more than any lowkey trace's "
				 "(%u MiB)",
				 r->dir, file, (long long)st.st_size, MAX_INDEX >> 20);
	}
	text = malloc((size_t)st.st_size + 1);
	n = text ? read_at(fd, text, (size_t)st.st_size, 0) : -ENOMEM;
	close(fd);
	if (n < 0)
		rc = lk__failf(err, errlen, (int)n, "cannot read %s/%s: %s", r->dir, file,
			       strerror((int)-n));
	else if (strcmp(file, INDEX_NAME) == 0)
		rc = parse_index(r, text, (size_t)n, err, errlen);
	else
		rc = parse_metadata(r, text, (size_t)n, err, errlen);
	free(text);
	return rc;
}

/*
 * A trace of lowkey before format 3 has its classes in the index, which says more than its
 * metadata did (the TSC at the start); a newer one has no index, and a copy of an older one may
 * have lost it: the metadata then.
 */
static int read_index(struct lk__trace_reader *r, char *err, size_t errlen)
{
	int rc = read_description(r, INDEX_NAME, err, errlen);

	if (rc == -ENOENT)
		rc = read_description(r, METADATA_NAME, err, errlen);
	if (rc == -ENOENT)
		return lk__failf(err, errlen, rc, "%s is not a lowkey trace (no %s/%s)", r->dir,
				 r->dir, METADATA_NAME);
	return rc;
}

int lk__reader_openat(struct lk__trace_reader *r, int dir_fd, const char *name, char *err,
		      size_t errlen)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->dir_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r->dir = strdup(name);
	if (r->dir_fd < 0)
		rc = lk__failf(err, errlen, -errno, "cannot open %s: %s", name, strerror(errno));
	else if (!r->dir)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory");
	else
		rc = read_index(r, err, errlen);
	if (rc)
		lk__reader_close(r);
	return rc;
}

int lk__reader_open(struct lk__trace_reader *r, const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0) {
		memset(r, 0, sizeof(*r));
		r->dir_fd = -1;
		return lk__failf(err, errlen, -errno, "%s is not a lowkey trace (%s)", dir,
				 strerror(errno));
	}
	rc = lk__reader_openat(r, fd, dir, err, errlen);
	close(fd);
	return rc;
}

void lk__reader_close(struct lk__trace_reader *r)
{
	for (size_t i = 0; i < r->nclasses; i++)
		free_class(r->classes[i]);
	free(r->classes);
	free(r->dir);
	if (r->dir_fd >= 0)
		close(r->dir_fd);
	memset(r, 0, sizeof(*r));
	r->dir_fd = -1;
}

uint64_t lk__reader_ns(const struct lk__trace_reader *r, uint64_t tsc)
{
	double ns = (double)r->monotonic0_ns +
		    ((double)tsc - (double)r->tsc0) * 1e9 / (double)r->tsc_hz;

	/* a damaged trace may time an event before the clock's start, or past its range */
	if (!(ns > 0))
		return 0;
	return ns < 0x1p64 ? (uint64_t)ns : UINT64_MAX;
}

double lk__event_counter(const struct lk__event *e)
{
	uint64_t v = 0;
	const char *s;
	double d;

	if (!e->cls->nargs || !lk__event_arg(e, 0, 0, &v, &s))
		return 0;
	switch (lk__arg_type(e->cls->arg_types, 0)) {
	case LK_PROBE_F64:
		memcpy(&d, &v, 8);
		return d;
	case LK_PROBE_I64:
		return (double)(int64_t)v;
	default:
		return (double)v;
	}
}

struct lk__switch lk__event_switch(const struct lk__event *e)
{
	struct lk__switch sw = { e->cls->id == LK__EVENT_SCHED_OUT, false, 0 };
	uint64_t preempted = 0;
	const char *s;
	size_t at = lk__event_arg(e, 0, 0, &sw.cpu, &s);

	if (sw.out && at)
		lk__event_arg(e, at, 1, &preempted, &s);
	sw.preempted = preempted != 0;
	return sw;
}

size_t lk__event_arg(const struct lk__event *e, size_t offset, unsigned int i, uint64_t *value,
		     const char **str)
{
	unsigned int type = lk__arg_type(e->cls->arg_types, i);

	*str = NULL;
	if (type == LK_PROBE_STR) {
		const void *nul = offset < e->payload_len ?
					  memchr(e->payload + offset, 0, e->payload_len - offset) :
					  NULL;

		if (!nul)
			return 0;
		*str = (const char *)e->payload + offset;
		return (size_t)((const uint8_t *)nul - e->payload) + 1;
	}
	if (offset > e->payload_len || e->payload_len - offset < 8)
		return 0;
	memcpy(value, e->payload + offset, 8);
	return offset + 8;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * Decode the record at p (at most avail bytes) into e; its size, or 0 if it is damaged. The
 * header's 48 TSC bits are extended from *tsc, the previous timestamp; the size follows from the
 * event's arguments.
 */
static size_t decode_record(const struct lk__trace_reader *r, unsigned int stream_id,
			    const uint8_t *p, size_t avail, uint64_t *tsc, struct lk__event *e)
{
	/* the event context: [cputime_ns (stream 0)], vtid (format 3) */
	size_t cpu = stream_id == 0 && r->cputime ? 8 : 0, ctx = cpu + (r->format == 2 ? 0 : 4);
	size_t head = LK__PROBE_HEADER, size;
	bool ok = true, sched;
	uint64_t id;

	if (avail < head + ctx)
		return 0;
	id = lk__header_id(get64(p));
	e->tsc = lk__tsc_advance(*tsc, lk__header_tsc48(get64(p)));
	e->cls = id < r->nclasses ? r->classes[id] : NULL;
	sched = id == LK__EVENT_SCHED_OUT || id == LK__EVENT_SCHED_IN;
	if (!e->cls || sched != (stream_id == 1))
		return 0;
	size = head + ctx +
	       lk__payload_size(e->cls->arg_types, e->cls->nargs, p + head + ctx,
				avail - head - ctx, &ok);
	if (!ok)
		return 0;
	*tsc = e->tsc;
	e->cputime_ns = cpu ? get64(p + head) : 0;
	e->payload = p + head + ctx;
	e->payload_len = size - head - ctx;
	return size;
}

/* Walk the records of one packet's content; tsc: the packet's timestamp_begin. */
static int walk_records(struct lk__trace_reader *r, struct lk__stream_info *s, const uint8_t *p,
			const uint8_t *end, uint64_t tsc, const struct lk__reader_ops *ops,
			void *arg)
{
	while (p < end) {
		struct lk__event e;
		size_t size = decode_record(r, s->stream_id, p, (size_t)(end - p), &tsc, &e);

		if (!size)
			return -EINVAL;
		e.tid = s->tid;
		s->events++;
		if (ops->event) {
			int rc = ops->event(&e, arg);

			if (rc)
				return rc;
		}
		p += size;
	}
	return 0;
}

/* Where a stream's bytes come from: its file, or memory (the fuzzer). */
struct source {
	int fd; /* -1: bytes */
	const uint8_t *bytes;
	uint64_t size;
};

static ssize_t source_read(const struct source *src, void *buf, size_t len, uint64_t off)
{
	if (src->fd >= 0)
		return read_at(src->fd, buf, len, off);
	if (off >= src->size)
		return 0;
	if (len > src->size - off)
		len = (size_t)(src->size - off);
	memcpy(buf, src->bytes + off, len);
	return (ssize_t)len;
}

__thread void (*lk__reader_packet_hook)(uint64_t bytes);

struct walk {
	uint8_t *buf; /* one packet, grown to the largest met (at most MAX_PACKET) */
	size_t cap;
	uint64_t at;	/* where the packet being read starts */
	int read_error; /* -errno from reading, 0 */
};

/* Read the whole packet of bytes at w->at into w->buf: its length read (less: the stream ends). */
static ssize_t read_packet(const struct source *src, struct walk *w, size_t bytes)
{
	ssize_t n;

	if (bytes > w->cap) {
		uint8_t *grown = realloc(w->buf, bytes);

		if (!grown)
			return -ENOMEM;
		w->buf = grown;
		w->cap = bytes;
	}
	n = source_read(src, w->buf, bytes, w->at);
	if (n < 0)
		w->read_error = (int)n;
	return n;
}

/*
 * One stream's packets. Returns 0, -EINVAL (damaged at w->at), an error from reading
 * (w->read_error), -ENOMEM, or a callback's value. A tail shorter than the packet it starts, or
 * than a packet's prefix, is not damage but a writer stopped mid-packet: s->truncated.
 */
static int walk_packets(struct lk__trace_reader *r, const struct source *src,
			struct lk__stream_info *s, struct walk *w, const struct lk__reader_ops *ops,
			void *arg)
{
	size_t prefix = r->format == 2 ? FORMAT2_PACKET_PREFIX : LK__CTF_PACKET_PREFIX;
	int rc = 0;

	for (w->at = 0; !rc && w->at < src->size;) {
		uint64_t avail = src->size - w->at, bytes;
		ssize_t n = read_packet(src, w, avail < prefix ? (size_t)avail : prefix);

		if (n < 0)
			return (int)n;
		if (n >= 4 && get32(w->buf) != CTF_MAGIC)
			return -EINVAL;
		if ((size_t)n < prefix) {
			s->truncated = (uint64_t)n;
			break;
		}
		bytes = get64(w->buf + 56) / 8; /* packet_size */
		if (bytes < prefix || bytes > MAX_PACKET || get32(w->buf + 20) != s->stream_id)
			return -EINVAL;
		if (bytes > avail) {
			s->truncated = avail;
			break;
		}
		n = read_packet(src, w, (size_t)bytes);
		if (n < 0)
			return (int)n;
		if ((uint64_t)n < bytes) { /* the file shrank meanwhile */
			s->truncated = (uint64_t)n;
			break;
		}
		s->packets++;
		s->lost = get64(w->buf + 72); /* events_discarded, cumulative */
		rc = walk_records(r, s, w->buf + prefix, w->buf + bytes, get64(w->buf + 32), ops,
				  arg);
		if (!rc)
			w->at += bytes;
		if (lk__reader_packet_hook)
			lk__reader_packet_hook(bytes);
	}
	return rc;
}

/* Walk a stream from src between its callbacks; messages are the caller's. */
static int walk_source(struct lk__trace_reader *r, const struct source *src,
		       struct lk__stream_info *s, struct walk *w, const struct lk__reader_ops *ops,
		       void *arg)
{
	int rc = ops->stream_begin ? ops->stream_begin(s, arg) : 0;

	if (!rc)
		rc = walk_packets(r, src, s, w, ops, arg);
	if (!rc && s->truncated)
		r->truncated_streams++;
	if (!rc && ops->stream_end)
		rc = ops->stream_end(s, arg);
	return rc;
}

int lk__reader_walk_bytes(struct lk__trace_reader *r, const uint8_t *data, size_t len,
			  struct lk__stream_info *s, const struct lk__reader_ops *ops, void *arg)
{
	struct source src = { -1, data, len };
	struct walk w = { 0 };
	int rc;

	s->packets = s->events = s->lost = s->truncated = 0;
	rc = walk_source(r, &src, s, &w, ops, arg);
	free(w.buf);
	return rc;
}

static int walk_stream(struct lk__trace_reader *r, const char *name,
		       const struct lk__reader_ops *ops, void *arg, char *err, size_t errlen)
{
	size_t len = strlen(name);
	/* stream-TID, or stream-TID-sched: the thread's context switches (stream class 1) */
	struct lk__stream_info s = { .tid = atoi(name + 7),
				     .file = name,
				     .stream_id = len > 6 &&
						  strcmp(name + len - 6, "-sched") == 0 };
	struct walk w = { 0 };
	struct stat st;
	int rc, fd = open_regular(r, name, &st, err, errlen);

	if (fd < 0)
		return fd;
	rc = walk_source(r, &(struct source){ fd, NULL, (uint64_t)st.st_size }, &s, &w, ops, arg);
	close(fd);
	free(w.buf);
	if (rc == -EINVAL)
		return lk__failf(err, errlen, rc,
				 "%s/%s is damaged at byte %llu (a packet or record runs past its "
				 "bounds)",
				 r->dir, name, (unsigned long long)w.at);
	if (rc && rc == w.read_error)
		return lk__failf(err, errlen, rc, "cannot read %s/%s: %s", r->dir, name,
				 strerror(-rc));
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the trace's stream files, sorted; how many, or -errno. */
static int list_streams(struct lk__trace_reader *r, char ***out)
{
	int fd = openat(r->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0, cap = 0, rc = 0;
	char **names = NULL;
	struct dirent *e;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	while (!rc && (e = readdir(d))) {
		if (strncmp(e->d_name, "stream-", 7) != 0)
			continue;
		if (n == cap) {
			char **grown =
				realloc(names, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(*names));

			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			names = grown;
		}
		names[n] = strdup(e->d_name);
		rc = names[n] ? 0 : -ENOMEM;
		n += !rc;
	}
	closedir(d);
	if (n)
		qsort(names, (size_t)n, sizeof(*names), by_name);
	*out = names;
	if (rc) {
		while (n)
			free(names[--n]);
		free(names);
		*out = NULL;
	}
	return rc ? rc : n;
}

int lk__reader_walk(struct lk__trace_reader *r, const struct lk__reader_ops *ops, void *arg,
		    char *err, size_t errlen)
{
	char **names = NULL;
	int n, rc = 0;

	r->truncated_streams = 0;
	if (r->dir_fd < 0)
		return lk__failf(err, errlen, -EBADF, "no trace directory to walk");
	n = list_streams(r, &names);
	if (n < 0)
		return lk__failf(err, errlen, n, "cannot list %s: %s", r->dir, strerror(-n));
	for (int i = 0; i < n; i++) {
		if (!rc)
			rc = walk_stream(r, names[i], ops, arg, err, errlen);
		free(names[i]);
	}
	free(names);
	return rc;
}
