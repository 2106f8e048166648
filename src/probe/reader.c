// SPDX-License-Identifier: MIT
/*
 * Reading lowkey's CTF traces back. Every length read from a file is checked against the file:
 * a truncated or damaged stream ends its walk with an error, it is never read past.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "core/failf.h"
#include "probe/probe_internal.h"
#include "probe/reader.h"

#define PACKET_PREFIX 88
#define CTF_MAGIC 0xc1fc1fc1u

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
			(p[0] == '_' || (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'));
		for (size_t k = 0; ident && k < n; k++)
			ident = p[k] == '_' || (p[k] >= 'a' && p[k] <= 'z') || (p[k] >= 'A' && p[k] <= 'Z') ||
				(p[k] >= '0' && p[k] <= '9');
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
		size_t n = c->id + 64;
		struct lk__event_class **grown = realloc(r->classes, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		memset(grown + r->nclasses, 0, (n - r->nclasses) * sizeof(*grown));
		r->classes = grown;
		r->nclasses = n;
	}
	r->classes[c->id] = c;
	return 0;
}

/* event TAB id TAB kind TAB nargs TAB types TAB provider TAB event TAB where TAB argnames */
static int parse_event_line(struct lk__trace_reader *r, char *line)
{
	char *f[9], *save = NULL;
	struct lk__event_class *c;
	int n = 0;

	for (char *tok = strtok_r(line, "\t\n", &save); tok && n < 9; tok = strtok_r(NULL, "\t\n", &save))
		f[n++] = tok;
	if (n < 8)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->id = (uint32_t)strtoul(f[1], NULL, 10);
	c->kind = (uint8_t)strtoul(f[2], NULL, 10);
	c->nargs = (uint8_t)strtoul(f[3], NULL, 10);
	c->arg_types = (uint32_t)strtoul(f[4], NULL, 16);
	c->provider = strdup(f[5]);
	c->event = strdup(f[6]);
	c->where = strdup(f[7]);
	c->arg_names = strdup(n > 8 ? f[8] : "");
	if (c->nargs > LK_PROBE_MAX_ARGS || c->id > 100000000 || !c->provider || !c->event || !c->where ||
	    !c->arg_names) {
		free(c->provider), free(c->event), free(c->where), free(c->arg_names), free(c);
		return -EINVAL;
	}
	if (c->kind == LK_PROBE_COUNTER)
		strcpy(c->arg_name[0], "value");
	else
		field_names(c);
	for (unsigned int a = 0; a < c->nargs; a++)	/* as the writer: a repeated name is argI */
		for (unsigned int b = 0; b < a; b++)
			if (strcmp(c->arg_name[a], c->arg_name[b]) == 0)
				snprintf(c->arg_name[a], sizeof(c->arg_name[a]), "arg%u", a);
	return add_class(r, c);
}

static int add_builtin_classes(struct lk__trace_reader *r)
{
	struct lk__event_class *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->id = LK__EVENT_THREAD_NAME;
	c->nargs = 1;
	c->arg_types = LK_PROBE_STR;
	c->provider = strdup("lowkey");
	c->event = strdup("thread_name");
	c->where = strdup("");
	c->arg_names = strdup("name");
	strcpy(c->arg_name[0], "name");
	return add_class(r, c);
}

int lk__reader_open(struct lk__trace_reader *r, const char *dir, char *err, size_t errlen)
{
	char path[4096], line[8192];
	unsigned long long v;
	FILE *f;
	int rc = 0, format;

	memset(r, 0, sizeof(*r));
	snprintf(path, sizeof(path), "%s/.lowkey-index", dir);
	f = fopen(path, "re");
	if (!f)
		return lk__failf(err, errlen, -errno, "%s is not a lowkey trace (no %s)", dir, path);
	if (!fgets(line, sizeof(line), f) || sscanf(line, "lowkey-trace %d", &format) != 1) {
		fclose(f);
		return lk__failf(err, errlen, -EINVAL, "%s: %s is not a lowkey trace index", dir, path);
	}
	if (format != 2) {
		fclose(f);
		return lk__failf(err, errlen, -EINVAL, "%s: written by another version of lowkey (record format %s); "
			     "babeltrace2 reads it", dir, format == 1 ? "1" : "unknown");
	}
	r->dir = strdup(dir);
	rc = add_builtin_classes(r);
	while (!rc && fgets(line, sizeof(line), f)) {
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
			snprintf(r->procname, sizeof(r->procname), "%.*s", (int)strcspn(line + 9, "\n"), line + 9);
		else if (strncmp(line, "event\t", 6) == 0)
			rc = parse_event_line(r, line);
	}
	fclose(f);
	if (!rc && !r->tsc_hz)
		rc = -EINVAL;
	if (rc) {
		lk__reader_close(r);
		return lk__failf(err, errlen, rc, "%s: the trace index %s is damaged", dir, path);
	}
	return 0;
}

void lk__reader_close(struct lk__trace_reader *r)
{
	for (size_t i = 0; i < r->nclasses; i++) {
		struct lk__event_class *c = r->classes[i];

		if (c) {
			free(c->provider), free(c->event), free(c->where), free(c->arg_names);
			free(c);
		}
	}
	free(r->classes);
	free(r->dir);
	memset(r, 0, sizeof(*r));
}

uint64_t lk__reader_ns(const struct lk__trace_reader *r, uint64_t tsc)
{
	double dt = ((double)tsc - (double)r->tsc0) * 1e9 / (double)r->tsc_hz;

	return (uint64_t)((double)r->monotonic0_ns + dt);
}

size_t lk__event_arg(const struct lk__event *e, size_t offset, unsigned int i, uint64_t *value, const char **str)
{
	unsigned int type = lk__arg_type(e->cls->arg_types, i);

	*str = NULL;
	if (type == LK_PROBE_STR) {
		const void *nul = memchr(e->payload + offset, 0, e->payload_len - offset);

		if (offset >= e->payload_len || !nul)
			return 0;
		*str = (const char *)e->payload + offset;
		return (size_t)((const uint8_t *)nul - e->payload) + 1;
	}
	if (offset + 8 > e->payload_len)
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
static size_t decode_record(const struct lk__trace_reader *r, const uint8_t *p, size_t avail, uint64_t *tsc,
			    struct lk__event *e)
{
	size_t ctx = r->cputime ? 8 : 0, head = LK__PROBE_HEADER, size;
	uint64_t id;
	bool ok = true;

	if (avail < head + ctx)
		return 0;
	id = lk__header_id(get64(p));
	e->tsc = lk__tsc_advance(*tsc, lk__header_tsc48(get64(p)));
	e->cls = id < r->nclasses ? r->classes[id] : NULL;
	if (!e->cls)
		return 0;
	size = head + ctx + lk__payload_size(e->cls->arg_types, e->cls->nargs, p + head + ctx, avail - head - ctx, &ok);
	if (!ok)
		return 0;
	*tsc = e->tsc;
	e->cputime_ns = ctx ? get64(p + head) : 0;
	e->payload = p + head + ctx;
	e->payload_len = size - head - ctx;
	return size;
}

/* Walk the records of one packet's content; tsc: the packet's timestamp_begin. */
static int walk_records(struct lk__trace_reader *r, struct lk__stream_info *s, const uint8_t *p,
			const uint8_t *end, uint64_t tsc, const struct lk__reader_ops *ops, void *arg)
{
	while (p < end) {
		struct lk__event e;
		size_t size = decode_record(r, p, (size_t)(end - p), &tsc, &e);

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

static int walk_stream(struct lk__trace_reader *r, const char *name, const struct lk__reader_ops *ops,
		       void *arg, char *err, size_t errlen)
{
	char path[4096];
	struct lk__stream_info s = { .file = name };
	const uint8_t *map, *p, *end;
	struct stat st;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", r->dir, name);
	s.tid = atoi(name + 7);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = lk__failf(err, errlen, -errno, "cannot read %s", path);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (ops->stream_begin && (rc = ops->stream_begin(&s, arg)) != 0) {
		close(fd);
		return rc;
	}
	map = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (map == MAP_FAILED)
		return lk__failf(err, errlen, -errno, "cannot map %s", path);
	p = map;
	end = map + st.st_size;
	while (!rc && p < end) {
		uint64_t packet_bytes;

		if (end - p < PACKET_PREFIX || get32(p) != CTF_MAGIC) {
			rc = -EINVAL;
			break;
		}
		packet_bytes = get64(p + 56) / 8;	/* packet_size */
		if (packet_bytes < PACKET_PREFIX || packet_bytes > (uint64_t)(end - p)) {
			rc = -EINVAL;
			break;
		}
		s.packets++;
		s.lost = get64(p + 72);	/* events_discarded, cumulative */
		rc = walk_records(r, &s, p + PACKET_PREFIX, p + packet_bytes, get64(p + 32), ops, arg);
		p += packet_bytes;
	}
	if (map)
		munmap((void *)map, (size_t)st.st_size);
	if (rc == -EINVAL)
		return lk__failf(err, errlen, rc, "%s is damaged (a packet or record runs past its bounds)", path);
	if (!rc && ops->stream_end)
		rc = ops->stream_end(&s, arg);
	return rc;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_stream(const struct dirent *e)
{
	return strncmp(e->d_name, "stream-", 7) == 0;
}

int lk__reader_walk(struct lk__trace_reader *r, const struct lk__reader_ops *ops, void *arg, char *err,
		    size_t errlen)
{
	struct dirent **names;
	int n = scandir(r->dir, &names, is_stream, by_name), rc = 0;

	if (n < 0)
		return lk__failf(err, errlen, -errno, "cannot list %s", r->dir);
	for (int i = 0; i < n; i++) {
		if (!rc)
			rc = walk_stream(r, names[i]->d_name, ops, arg, err, errlen);
		free(names[i]);
	}
	free(names);
	return rc;
}
