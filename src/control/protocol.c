// SPDX-License-Identifier: MIT
/*
 * The control protocol's encoder and decoder (see protocol.h for the wire format).
 *
 * Each message type has a schema: its fields in wire order, where each lands in struct
 * lk__ctl_msg, and the check its value must pass. One decoder and one encoder walk the schemas,
 * so no message type has parsing code of its own to get wrong.
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "internal/failf.h"
#include "internal/utf8.h"
#include "internal/control_protocol.h"

enum field_kind { F_U8, F_U32, F_I32, F_U64, F_I64, F_STR };

enum field_check {
	C_ANY,	    /* any value */
	C_BOOL,	    /* 0 or 1 */
	C_MAX,	    /* at most max */
	C_RANGE1,   /* 1 .. max */
	C_MASK,	    /* no bits outside max */
	C_ERRNO,    /* 0 or -1 .. -4095 */
	C_NONEMPTY, /* a string of 1 .. max bytes */
	C_TEXT,	    /* a string of 0 .. max bytes */
	C_ABSPATH,  /* a string of 1 .. max bytes starting with '/' */
	C_OPTPATH,  /* "", or as C_ABSPATH */
	C_ARGTYPES, /* 4-bit types 1 .. LK_CTL_TYPE_MAX for the first nargs, zero after */
};

struct field {
	const char *name;
	uint8_t kind;	 /* enum field_kind */
	uint8_t check;	 /* enum field_check */
	uint16_t offset; /* in struct lk__ctl_msg */
	uint64_t max;
};

struct schema {
	uint16_t type;
	const char *name;
	bool request;
	unsigned int nfields;
	const struct field *fields;
};

#define AT(member) (uint16_t) offsetof(struct lk__ctl_msg, member)
/* clang-format off */
#define FIELD(name, kind, check, member, max) { name, kind, check, AT(member), max }
/* clang-format on */

static const struct field rule_fields[] = {
	FIELD("enable", F_U8, C_BOOL, rule.enable, 1),
	FIELD("scope", F_U8, C_MAX, rule.scope, LK_CTL_RULE_SESSION),
	FIELD("glob", F_STR, C_NONEMPTY, rule.glob, LK_CTL_MAX_GLOB),
};

static const struct field start_fields[] = {
	FIELD("format", F_U8, C_MAX, start.format, LK_CTL_FORMAT_MAX),
	FIELD("ctl_flags", F_U8, C_MASK, start.ctl_flags, LK_CTL_START_STOP_ON_CLOSE),
	FIELD("flags", F_U32, C_MASK, start.flags, LK_CTL_TRACE_FLAGS),
	FIELD("flush_ms", F_U32, C_MAX, start.flush_ms, 60000),
	FIELD("buffer_size", F_U64, C_MAX, start.buffer_size, 1u << 30),
	FIELD("path", F_STR, C_ABSPATH, start.path, LK_CTL_MAX_PATH),
	FIELD("output", F_U8, C_MAX, start.output, LK_CTL_OUT_DIR),
};

static const struct field snapshot_fields[] = {
	FIELD("path", F_STR, C_OPTPATH, snapshot.path, LK_CTL_MAX_PATH),
	FIELD("output", F_U8, C_MAX, snapshot.output, LK_CTL_OUT_DIR),
};

static const struct field result_fields[] = {
	FIELD("err", F_I32, C_ERRNO, result.err, 0),
	FIELD("value", F_I64, C_ANY, result.value, 0),
	FIELD("message", F_STR, C_TEXT, result.message, LK_CTL_MAX_TEXT),
};

static const struct field stats_fields[] = {
	FIELD("err", F_I32, C_ERRNO, stats.err, 0),
	FIELD("events", F_U64, C_ANY, stats.events, 0),
	FIELD("lost", F_U64, C_ANY, stats.lost, 0),
	FIELD("bytes", F_U64, C_ANY, stats.bytes, 0),
	FIELD("threads", F_U32, C_ANY, stats.threads, 0),
	FIELD("path", F_STR, C_TEXT, stats.path, LK_CTL_MAX_PATH),
	FIELD("message", F_STR, C_TEXT, stats.message, LK_CTL_MAX_TEXT),
};

static const struct field status_fields[] = {
	FIELD("pid", F_U32, C_ANY, status.pid, 0),
	FIELD("clients", F_U32, C_ANY, status.clients, 0),
	FIELD("refused_peers", F_U64, C_ANY, status.refused_peers, 0),
	FIELD("refused_messages", F_U64, C_ANY, status.refused_messages, 0),
	FIELD("sites", F_U32, C_ANY, status.sites, 0),
	FIELD("sites_enabled", F_U32, C_ANY, status.sites_enabled, 0),
	FIELD("running", F_U8, C_BOOL, status.running, 1),
	FIELD("events", F_U64, C_ANY, status.events, 0),
	FIELD("lost", F_U64, C_ANY, status.lost, 0),
	FIELD("bytes", F_U64, C_ANY, status.bytes, 0),
	FIELD("threads", F_U32, C_ANY, status.threads, 0),
	FIELD("error", F_I32, C_ERRNO, status.error, 0),
	FIELD("path", F_STR, C_TEXT, status.path, LK_CTL_MAX_PATH),
	FIELD("version", F_STR, C_TEXT, status.version, 64),
};

/* nargs before arg_types: the check of arg_types reads it. */
static const struct field site_fields[] = {
	FIELD("id", F_U32, C_ANY, site.id, 0),
	FIELD("kind", F_U8, C_RANGE1, site.kind, LK_CTL_KIND_MAX),
	FIELD("nargs", F_U8, C_MAX, site.nargs, LK_CTL_MAX_ARGS),
	FIELD("enabled", F_U8, C_BOOL, site.enabled, 1),
	FIELD("arg_types", F_U32, C_ARGTYPES, site.arg_types, 0),
	FIELD("line", F_U32, C_ANY, site.line, 0),
	FIELD("provider", F_STR, C_NONEMPTY, site.provider, LK_CTL_MAX_TEXT),
	FIELD("event", F_STR, C_NONEMPTY, site.event, LK_CTL_MAX_TEXT),
	FIELD("file", F_STR, C_TEXT, site.file, LK_CTL_MAX_TEXT),
	FIELD("arg_names", F_STR, C_TEXT, site.arg_names, LK_CTL_MAX_TEXT),
	FIELD("object", F_STR, C_TEXT, site.object, LK_CTL_MAX_PATH),
	FIELD("function", F_STR, C_TEXT, site.function, LK_CTL_MAX_FUNCTION),
	FIELD("tracer", F_U8, C_BOOL, site.tracer, 1),
};

static const struct field env_start_fields[] = {
	FIELD("err", F_I32, C_ERRNO, env_start.err, 0),
	FIELD("message", F_STR, C_TEXT, env_start.message, LK_CTL_MAX_TEXT),
	FIELD("path", F_STR, C_TEXT, env_start.path, LK_CTL_MAX_PATH),
	FIELD("ctf_dir", F_STR, C_TEXT, env_start.ctf_dir, LK_CTL_MAX_PATH),
};

static const struct field env_rule_fields[] = {
	FIELD("enable", F_U8, C_BOOL, env_rule.enable, 1),
	FIELD("matched", F_U32, C_ANY, env_rule.matched, 0),
	FIELD("glob", F_STR, C_NONEMPTY, env_rule.glob, LK_CTL_MAX_GLOB),
};

static const struct field progress_fields[] = {
	FIELD("done", F_U64, C_ANY, progress.done, 0),
	FIELD("total", F_U64, C_ANY, progress.total, 0),
};

static const struct field lock_fields[] = {
	FIELD("kind", F_U8, C_RANGE1, lock.kind, LK_CTL_LOCK_KIND_MAX),
	FIELD("acquisitions", F_U64, C_ANY, lock.acquisitions, 0),
	FIELD("read_acquisitions", F_U64, C_ANY, lock.read_acquisitions, 0),
	FIELD("contended", F_U64, C_ANY, lock.contended, 0),
	FIELD("wait_ns", F_U64, C_ANY, lock.wait_ns, 0),
	FIELD("hold_ns", F_U64, C_ANY, lock.hold_ns, 0),
	FIELD("read_hold_ns", F_U64, C_ANY, lock.read_hold_ns, 0),
	FIELD("name", F_STR, C_TEXT, lock.name, LK_CTL_MAX_TEXT),
};

static const struct field perf_fields[] = {
	FIELD("set", F_U32, C_ANY, perf.set, 0),
	FIELD("index", F_U32, C_ANY, perf.index, 0),
	FIELD("value", F_U64, C_ANY, perf.value, 0),
	FIELD("time_enabled", F_U64, C_ANY, perf.time_enabled, 0),
	FIELD("time_running", F_U64, C_ANY, perf.time_running, 0),
	FIELD("event", F_STR, C_NONEMPTY, perf.event, LK_CTL_MAX_TEXT),
};

/* clang-format off */
#define SCHEMA(type, name, request, fields) { type, name, request, sizeof(fields) / sizeof(fields[0]), fields }
#define EMPTY_SCHEMA(type, name) { type, name, true, 0, NULL }
/* clang-format on */

static const struct schema schemas[] = {
	SCHEMA(LK_CTL_RULE, "rule", true, rule_fields),
	SCHEMA(LK_CTL_START, "start", true, start_fields),
	EMPTY_SCHEMA(LK_CTL_STOP, "stop"),
	EMPTY_SCHEMA(LK_CTL_STATUS, "status"),
	EMPTY_SCHEMA(LK_CTL_LIST, "list"),
	SCHEMA(LK_CTL_USDT, "usdt", true, rule_fields),
	SCHEMA(LK_CTL_SNAPSHOT, "snapshot", true, snapshot_fields),
	EMPTY_SCHEMA(LK_CTL_LOCKS, "locks"),
	EMPTY_SCHEMA(LK_CTL_COUNTERS, "counters"),
	SCHEMA(LK_CTL_RESULT, "result", false, result_fields),
	SCHEMA(LK_CTL_STATUS_REPLY, "status-reply", false, status_fields),
	SCHEMA(LK_CTL_SITE, "site", false, site_fields),
	SCHEMA(LK_CTL_STATS, "stats", false, stats_fields),
	SCHEMA(LK_CTL_EXIT, "exit", false, stats_fields),
	SCHEMA(LK_CTL_PROGRESS, "progress", false, progress_fields),
	SCHEMA(LK_CTL_LOCK, "lock", false, lock_fields),
	SCHEMA(LK_CTL_PERF, "perf", false, perf_fields),
	SCHEMA(LK_CTL_ENV_START, "env-start", false, env_start_fields),
	SCHEMA(LK_CTL_ENV_RULE, "env-rule", false, env_rule_fields),
	SCHEMA(LK_CTL_ENV_FINISH, "env-finish", false, stats_fields),
};

static const struct schema *find_schema(unsigned int type)
{
	for (size_t i = 0; i < sizeof(schemas) / sizeof(schemas[0]); i++)
		if (schemas[i].type == type)
			return &schemas[i];
	return NULL;
}

const char *lk__ctl_type_name(unsigned int type)
{
	const struct schema *s = find_schema(type);

	return s ? s->name : "unknown";
}

bool lk__ctl_is_request(unsigned int type)
{
	const struct schema *s = find_schema(type);

	return s && s->request;
}

/* ---- decoding ---- */

struct cursor {
	const uint8_t *p, *end;
};

static bool take(struct cursor *c, size_t n, const uint8_t **out)
{
	if ((size_t)(c->end - c->p) < n)
		return false;
	*out = c->p;
	c->p += n;
	return true;
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static const size_t width[] = { [F_U8] = 1, [F_U32] = 4, [F_I32] = 4, [F_U64] = 8, [F_I64] = 8 };

static int check_number(const struct field *f, uint64_t v, const struct lk__ctl_msg *m, char *err,
			size_t errlen)
{
	bool ok = true;

	switch (f->check) {
	case C_BOOL:
	case C_MAX:
		ok = v <= f->max;
		break;
	case C_RANGE1:
		ok = v >= 1 && v <= f->max;
		break;
	case C_MASK:
		ok = (v & ~f->max) == 0;
		break;
	case C_ERRNO:
		ok = (int32_t)v <= 0 && (int32_t)v >= -4095;
		break;
	case C_ARGTYPES:
		for (unsigned int i = 0; i < 8 && ok; i++) {
			unsigned int t = (unsigned int)(v >> (4 * i)) & 0xf;

			ok = i < m->site.nargs ? t >= 1 && t <= LK_CTL_TYPE_MAX : t == 0;
		}
		break;
	}
	if (!ok)
		return lk__failf(err, errlen, -EINVAL, "field %s: value %lld is out of range",
				 f->name, (long long)v);
	return 0;
}

static void store_number(const struct field *f, uint64_t v, struct lk__ctl_msg *m)
{
	char *at = (char *)m + f->offset;

	switch (f->kind) {
	case F_U8: {
		uint8_t x = (uint8_t)v;
		memcpy(at, &x, 1);
		break;
	}
	case F_U32: {
		uint32_t x = (uint32_t)v;
		memcpy(at, &x, 4);
		break;
	}
	case F_I32: {
		int32_t x = (int32_t)(uint32_t)v;
		memcpy(at, &x, 4);
		break;
	}
	case F_U64:
		memcpy(at, &v, 8);
		break;
	case F_I64: {
		int64_t x = (int64_t)v;
		memcpy(at, &x, 8);
		break;
	}
	}
}

/* The offset of the first control character (internal/utf8.h) in the len bytes at s, or len. */
static size_t first_control(const uint8_t *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (lk__utf8_control(s + i, len - i))
			return i;
		else if (s[i] >= 0x80 && lk__utf8_sequence(s + i, len - i))
			i += lk__utf8_sequence(s + i, len - i) - 1;
	return len;
}

static int decode_string(const struct field *f, struct cursor *c, struct lk__ctl_msg *m, char *err,
			 size_t errlen)
{
	const uint8_t *lenp, *bytes;
	size_t bad;
	uint16_t len;

	if (!take(c, 2, &lenp))
		return lk__failf(err, errlen, -EBADMSG, "field %s: the message ends inside it",
				 f->name);
	len = get16(lenp);
	if (len > f->max)
		return lk__failf(err, errlen, -EBADMSG,
				 "field %s: %u bytes, over the limit of %llu", f->name, len,
				 (unsigned long long)f->max);
	if (!take(c, (size_t)len + 1, &bytes))
		return lk__failf(err, errlen, -EBADMSG,
				 "field %s: %u bytes announced past the message's end", f->name,
				 len);
	if (bytes[len] != 0 || memchr(bytes, 0, len))
		return lk__failf(err, errlen, -EBADMSG,
				 "field %s: not a NUL-terminated string of %u bytes", f->name, len);
	if ((bad = first_control(bytes, len)) < len)
		return lk__failf(err, errlen, -EBADMSG,
				 "field %s: a control character (byte 0x%02x) at offset %zu",
				 f->name, bytes[bad], bad);
	if ((f->check == C_NONEMPTY || f->check == C_ABSPATH) && len == 0)
		return lk__failf(err, errlen, -EINVAL, "field %s: empty", f->name);
	if ((f->check == C_ABSPATH || (f->check == C_OPTPATH && len)) && bytes[0] != '/')
		return lk__failf(err, errlen, -EINVAL, "field %s: not an absolute path", f->name);
	memcpy((char *)m + f->offset, &(const char *){ (const char *)bytes }, sizeof(const char *));
	return 0;
}

static int decode_field(const struct field *f, struct cursor *c, struct lk__ctl_msg *m, char *err,
			size_t errlen)
{
	const uint8_t *p;
	uint64_t v;
	int rc;

	if (f->kind == F_STR)
		return decode_string(f, c, m, err, errlen);
	if (!take(c, width[f->kind], &p))
		return lk__failf(err, errlen, -EBADMSG, "field %s: the message ends inside it",
				 f->name);
	switch (f->kind) {
	case F_U8:
		v = p[0];
		break;
	case F_U32:
	case F_I32:
		v = get32(p);
		break;
	default:
		v = get64(p);
		break;
	}
	if (f->kind == F_I32)
		v = (uint64_t)(int64_t)(int32_t)(uint32_t)v; /* sign-extend for the range check */
	rc = check_number(f, v, m, err, errlen);
	if (!rc)
		store_number(f, v, m);
	return rc;
}

static int decode_header(const uint8_t *b, size_t len, struct lk__ctl_msg *out, char *err,
			 size_t errlen)
{
	uint32_t magic, length;
	uint16_t version;

	if (len > LK_CTL_MAX_MSG)
		return lk__failf(err, errlen, -EMSGSIZE, "a message of %zu bytes: the limit is %d",
				 len, LK_CTL_MAX_MSG);
	if (len < LK_CTL_HEADER)
		return lk__failf(err, errlen, -EBADMSG,
				 "a message of %zu bytes is shorter than the %d-byte header", len,
				 LK_CTL_HEADER);
	magic = get32(b);
	version = get16(b + 4);
	length = get32(b + 8);
	if (magic != LK_CTL_MAGIC)
		return lk__failf(err, errlen, -EBADMSG,
				 "bad magic %#x: not a lowkey control message", magic);
	if (version != LK_CTL_VERSION)
		return lk__failf(err, errlen, -EPROTONOSUPPORT,
				 "protocol version %u; this side speaks version %d", version,
				 LK_CTL_VERSION);
	if (length != len)
		return lk__failf(err, errlen, -EBADMSG, "the header says %u bytes, %zu arrived",
				 length, len);
	out->type = get16(b + 6);
	out->seq = get32(b + 12);
	return 0;
}

int lk__ctl_decode(const void *buf, size_t len, struct lk__ctl_msg *out, char *err, size_t errlen)
{
	const uint8_t *b = buf;
	const struct schema *s;
	struct cursor c;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!buf)
		return lk__failf(err, errlen, -EBADMSG, "no message");
	rc = decode_header(b, len, out, err, errlen);
	if (rc)
		return rc;
	s = find_schema(out->type);
	if (!s)
		return lk__failf(err, errlen, -EOPNOTSUPP, "unknown message type %u", out->type);
	c = (struct cursor){ b + LK_CTL_HEADER, b + len };
	for (unsigned int i = 0; i < s->nfields; i++) {
		rc = decode_field(&s->fields[i], &c, out, err, errlen);
		if (rc) {
			uint16_t type = out->type;
			uint32_t seq = out->seq;

			memset(out, 0, sizeof(*out)); /* no half-decoded message */
			out->type = type;
			out->seq = seq;
			return rc;
		}
	}
	if (c.p != c.end)
		return lk__failf(err, errlen, -EBADMSG,
				 "%zu bytes after the last field of a %s message",
				 (size_t)(c.end - c.p), s->name);
	return 0;
}

/* ---- encoding ---- */

static bool put(uint8_t **p, const uint8_t *end, const void *src, size_t n)
{
	if ((size_t)(end - *p) < n)
		return false;
	memcpy(*p, src, n);
	*p += n;
	return true;
}

static int encode_field(const struct field *f, const struct lk__ctl_msg *m, uint8_t **p,
			const uint8_t *end)
{
	const char *at = (const char *)m + f->offset;
	uint64_t v64;
	uint32_t v32;
	uint16_t v16;
	size_t len;
	const char *s;

	switch (f->kind) {
	case F_U8:
		return put(p, end, at, 1) ? 0 : -EMSGSIZE;
	case F_U32:
	case F_I32:
		memcpy(&v32, at, 4);
		v32 = htole32(v32);
		return put(p, end, &v32, 4) ? 0 : -EMSGSIZE;
	case F_U64:
	case F_I64:
		memcpy(&v64, at, 8);
		v64 = htole64(v64);
		return put(p, end, &v64, 8) ? 0 : -EMSGSIZE;
	}
	memcpy(&s, at, sizeof(s));
	if (!s)
		return -EINVAL;
	len = strlen(s);
	if (len > f->max)
		return -EMSGSIZE;
	v16 = htole16((uint16_t)len);
	if (!put(p, end, &v16, 2) || !put(p, end, s, len + 1))
		return -EMSGSIZE;
	return 0;
}

int lk__ctl_encode(const struct lk__ctl_msg *msg, void *buf, size_t cap)
{
	const struct schema *s = find_schema(msg->type);
	uint8_t *start = buf, *p = start, *end;
	uint32_t magic = htole32(LK_CTL_MAGIC), seq = htole32(msg->seq), length;
	uint16_t version = htole16(LK_CTL_VERSION), type = htole16(msg->type);
	int rc;

	if (!s)
		return -EINVAL;
	end = start + (cap < LK_CTL_MAX_MSG ? cap : LK_CTL_MAX_MSG);
	if ((size_t)(end - p) < LK_CTL_HEADER)
		return -EMSGSIZE;
	memcpy(p, &magic, 4);
	memcpy(p + 4, &version, 2);
	memcpy(p + 6, &type, 2);
	memcpy(p + 12, &seq, 4);
	p += LK_CTL_HEADER;
	for (unsigned int i = 0; i < s->nfields; i++) {
		rc = encode_field(&s->fields[i], msg, &p, end);
		if (rc)
			return rc;
	}
	length = htole32((uint32_t)(p - start));
	memcpy(start + 8, &length, 4);
	return (int)(p - start);
}
