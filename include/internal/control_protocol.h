/* SPDX-License-Identifier: MIT */
/*
 * Internal: the control protocol between `lowkey` and a traced process.
 *
 * Two channels carry it: the control socket a process opens (lk_control_open, LOWKEY_CONTROL=1),
 * where `lowkey trace --pid`, `lowkey list --pid` and `lowkey agent` send requests and read replies; and the status
 * socket `lowkey trace -- cmd` hands to the program it runs (LOWKEY_TRACE_STATUS_FD), where the
 * library reports how tracing from the environment started and how it ended.
 *
 * Both are SOCK_SEQPACKET: one datagram is one message. A message is a 16-byte header
 *
 *	u32 magic ("LKCT") | u16 version | u16 type | u32 length (whole message) | u32 seq
 *
 * then the fields of its type, in the order its schema (protocol.c) lists them, packed, all
 * little-endian: u8, u32, i32, u64, i64, and strings as u16 length, the bytes, a NUL (the length
 * counts neither itself nor the NUL; a string holds no other NUL, and no control character: no C0,
 * DEL or C1, see internal/utf8.h, since both sides print what they receive). Nothing may follow the last
 * field. Each message has exactly one encoding, so decoding then encoding gives back the input
 * byte for byte (the fuzzer checks it).
 *
 * A START or SNAPSHOT request whose output field is LK_CTL_OUT_DIR carries one descriptor with it
 * (SCM_RIGHTS, in the same datagram): a directory the client created on its side, where the
 * process writes the trace as CTF; its path then only names it in messages. Any other request
 * carries none. The server accepts at most the descriptors a request says it carries, checks what
 * each is, and closes every other one it received.
 *
 * The decoder trusts nothing: it checks the magic, the version, the length against what arrived,
 * every field against the end of the message, every string's length and NUL, and every value
 * against its range (booleans 0 or 1, known formats, kinds and flags, absolute paths). It reads
 * only the bytes it is given, allocates nothing, and never fails other than by returning an error.
 * This file depends on nothing but the C library, so it can be fuzzed on its own
 * (tests/fuzz/fuzz_control.c).
 */
#ifndef LK_PROBE_PROTOCOL_H
#define LK_PROBE_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LK_CTL_MAGIC 0x54434b4cu /* "LKCT" in memory order */
/*
 * Bumped with every message added or changed: builds of the two sides that differ refuse each
 * other's first message (-EPROTONOSUPPORT, naming both versions) instead of misreading it.
 */
#define LK_CTL_VERSION 4
#define LK_CTL_HEADER 16
#define LK_CTL_MAX_MSG 8192 /* the longest message either side sends or accepts */
#define LK_CTL_MAX_GLOB 256
#define LK_CTL_MAX_PATH 4095
#define LK_CTL_MAX_TEXT 1024 /* messages, names, file paths */
#define LK_CTL_MAX_FUNCTION \
	512 /* a site's function, cut to fit a message with every other field at its longest */

/* Mirrors of lowkey/probe.h's limits (control.c checks they agree): this file stands alone. */
#define LK_CTL_FORMAT_MAX 2	/* LK_TRACE_PERFETTO */
#define LK_CTL_TRACE_FLAGS 0xdu /* LK_TRACE_CPUTIME | LK_TRACE_OVERWRITE | LK_TRACE_SCHED */
#define LK_CTL_KIND_MAX 4	/* LK_PROBE_COUNTER */
#define LK_CTL_TYPE_MAX 5	/* LK_PROBE_PTR */
#define LK_CTL_MAX_ARGS 8	/* LK_PROBE_MAX_ARGS */
#define LK_CTL_LOCK_KIND_MAX 3	/* LK_LOCK_SPINLOCK (lowkey/lock.h) */

enum lk__ctl_type {
	/* requests: client -> process */
	LK_CTL_RULE = 1,   /* enable or disable a glob; reply RESULT (value: sites matching now) */
	LK_CTL_START = 2,  /* start a trace; reply RESULT */
	LK_CTL_STOP = 3,   /* stop the trace; reply STATS, or RESULT with an error */
	LK_CTL_STATUS = 4, /* reply STATUS */
	LK_CTL_LIST = 5,   /* reply: one SITE per site, then RESULT (value: how many) */
	LK_CTL_USDT = 9,   /* a USDT rule (fields of RULE, scope KEEP): sites on for external
				 * tracers; reply RESULT (value: sites matching now) */
	LK_CTL_SNAPSHOT =
		8, /* write a flight recorder's snapshot; reply STATS, or RESULT with an error */
	LK_CTL_LOCKS = 10,    /* reply: one LOCK per named lock, then RESULT (value: how many) */
	LK_CTL_COUNTERS = 11, /* reply: one PERF per event of each counter set the process has
				 * open, then RESULT (value: how many) */

	/* replies and notifications: process -> client */
	LK_CTL_RESULT = 64, /* err (0 or -errno), value, message */
	LK_CTL_STATUS_REPLY = 65,
	LK_CTL_SITE = 66,
	LK_CTL_STATS = 67,    /* a trace's counters, at its end */
	LK_CTL_EXIT = 68,     /* notification: the process is exiting; the trace it finished */
	LK_CTL_PROGRESS = 69, /* notification: how far the conversion of a trace at its stop is, on
				 * the status socket (at exit) or to the client whose STOP it serves */
	LK_CTL_LOCK = 70, /* one lock's figures (lowkey/lock.h's struct lk_lockstat), for LOCKS */
	LK_CTL_PERF = 71, /* one event of an open counter set, read now, for COUNTERS */

	/* the status socket of `lowkey trace -- cmd`: library -> CLI */
	LK_CTL_ENV_START = 96,	/* tracing from the environment started, or why it did not */
	LK_CTL_ENV_RULE = 97,	/* at the end: how many sites a rule matched over the run */
	LK_CTL_ENV_FINISH = 98, /* at the end: the trace's counters (follows the ENV_RULEs) */
};

/* LK_CTL_RULE scope */
#define LK_CTL_RULE_KEEP 0    /* stays after the client leaves */
#define LK_CTL_RULE_SESSION 1 /* removed when the client's connection closes */

/* Where a START or SNAPSHOT writes (output) */
#define LK_CTL_OUT_PATH 0 /* at path, created by the process in its own filesystem */
#define LK_CTL_OUT_DIR 1  /* as CTF into the directory descriptor the request carries */

/* LK_CTL_START options (ctl_flags) */
#define LK_CTL_START_STOP_ON_CLOSE 0x1 /* stop the trace if the client's connection closes */

struct lk__ctl_rule {
	uint8_t enable;	  /* 1 enable, 0 disable */
	uint8_t scope;	  /* LK_CTL_RULE_KEEP or LK_CTL_RULE_SESSION */
	const char *glob; /* 1..LK_CTL_MAX_GLOB bytes */
};

struct lk__ctl_start {
	uint8_t format;	   /* enum lk_trace_format */
	uint8_t ctl_flags; /* LK_CTL_START_* */
	uint32_t flags;	   /* LK_TRACE_* */
	uint32_t flush_ms;
	uint64_t buffer_size;
	const char *path; /* absolute */
	uint8_t output;	  /* LK_CTL_OUT_*; with LK_CTL_OUT_DIR the format is CTF */
};

struct lk__ctl_snapshot {
	const char *path; /* absolute, or "": the process's next default name */
	uint8_t output;	  /* LK_CTL_OUT_*; with LK_CTL_OUT_DIR, path is not "" */
};

struct lk__ctl_result {
	int32_t err;
	int64_t value;
	const char *message;
};

struct lk__ctl_stats {
	int32_t err; /* the trace's output error, or the stop's error; 0 if none */
	uint64_t events, lost, bytes;
	uint32_t threads;
	const char *path;    /* where the trace is */
	const char *message; /* what went wrong, when err */
};

struct lk__ctl_status {
	uint32_t pid;
	uint32_t clients;	   /* connected now, this one included */
	uint64_t refused_peers;	   /* connections refused: another uid, too many clients */
	uint64_t refused_messages; /* malformed or invalid messages refused */
	uint32_t sites, sites_enabled;
	uint8_t running;
	uint64_t events, lost, bytes;
	uint32_t threads;
	int32_t error;	     /* the running (or last) trace's output error */
	const char *path;    /* the running trace's path, or "" */
	const char *version; /* the library's version */
};

struct lk__ctl_site {
	uint32_t id;
	uint8_t kind;  /* enum lk_probe_kind */
	uint8_t nargs; /* 0..LK_PROBE_MAX_ARGS */
	uint8_t enabled;
	uint32_t arg_types; /* 4 bits per argument, as in struct lk_probe_site */
	uint32_t line;
	const char *provider, *event, *file, *arg_names;
	const char *object;   /* the shared object, "" for the main program */
	const char *function; /* as in struct lk_probe_info, cut to LK_CTL_MAX_FUNCTION - 1 bytes */
	uint8_t tracer;	      /* an outside tracer holds one of its USDT semaphores */
};

/* A lock's figures as lk_lockstat_foreach gives them; times in nanoseconds. */
struct lk__ctl_lock {
	uint8_t kind; /* enum lk_lock_kind: 1 .. LK_CTL_LOCK_KIND_MAX */
	uint64_t acquisitions, read_acquisitions, contended;
	uint64_t wait_ns;      /* waited, all contended acquisitions together */
	uint64_t hold_ns;      /* held exclusively (hold_total_ns) */
	uint64_t read_hold_ns; /* held shared (read_hold_total_ns) */
	const char *name;      /* "" when it has none; control characters escaped as \xHH */
};

/* One event of a counter set the process opened (lk_counters_open*), read now. */
struct lk__ctl_perf {
	uint32_t set;	/* the set's number in the process: 1, 2, ... in the order opened */
	uint32_t index; /* the event's place in its set */
	uint64_t value, time_enabled, time_running; /* struct lk_counter_value's, unscaled */
	const char *event; /* as written, with its modifiers: "task-clock", "cycles:u" */
};

struct lk__ctl_env_start {
	int32_t err;	     /* 0: tracing started */
	const char *message; /* why not, when err */
	const char *path;    /* the trace's path */
	const char *ctf_dir; /* where the CTF goes (for JSON, a directory converted at the end) */
};

struct lk__ctl_env_rule {
	uint8_t enable;
	uint32_t matched; /* sites the rule matched, loaded at any time during the trace */
	const char *glob;
};

struct lk__ctl_progress {
	uint64_t done;	/* bytes of the CTF streams converted so far */
	uint64_t total; /* bytes to convert (done may pass it: a stream that grew) */
};

struct lk__ctl_msg {
	uint16_t type; /* enum lk__ctl_type */
	uint32_t seq;  /* a request's number, echoed by its replies */
	union {
		struct lk__ctl_rule rule; /* RULE, USDT */
		struct lk__ctl_start start;
		struct lk__ctl_snapshot snapshot;
		struct lk__ctl_result result;
		struct lk__ctl_stats stats;   /* STATS, EXIT, ENV_FINISH */
		struct lk__ctl_status status; /* STATUS_REPLY */
		struct lk__ctl_site site;
		struct lk__ctl_env_start env_start;
		struct lk__ctl_env_rule env_rule;
		struct lk__ctl_progress progress;
		struct lk__ctl_lock lock;
		struct lk__ctl_perf perf;
	};
};

/* How many descriptors a request carries, as its type and output field say (0 or 1). */
static inline unsigned int lk__ctl_request_fds(const struct lk__ctl_msg *m)
{
	if (m->type == LK_CTL_START)
		return m->start.output == LK_CTL_OUT_DIR;
	if (m->type == LK_CTL_SNAPSHOT)
		return m->snapshot.output == LK_CTL_OUT_DIR;
	return 0;
}

/*
 * lk__ctl_decode - parse and validate one message of len bytes.
 * Strings in out point into buf: keep buf while using them. On error, err (errlen bytes) says what
 * was wrong. Returns 0, or -EBADMSG (malformed: magic, length, truncated or trailing bytes, a
 * string without its NUL), -EPROTONOSUPPORT (another protocol version), -EMSGSIZE (longer than
 * LK_CTL_MAX_MSG), -EOPNOTSUPP (unknown type; out->type is set), -EINVAL (a value out of range).
 * Costs one pass over the message; async-signal-safe.
 */
int lk__ctl_decode(const void *buf, size_t len, struct lk__ctl_msg *out, char *err, size_t errlen);

/*
 * lk__ctl_encode - write msg into buf (cap bytes). Returns the message's length, or -EMSGSIZE
 * (does not fit, or over LK_CTL_MAX_MSG, or a string over its limit), -EINVAL (unknown type or
 * a NULL string). Values are not range-checked: a test may encode what the decoder refuses.
 */
int lk__ctl_encode(const struct lk__ctl_msg *msg, void *buf, size_t cap);

/* lk__ctl_type_name - "rule", "start", ... ; "unknown" for others. */
const char *lk__ctl_type_name(unsigned int type);

/* Whether type is a request a process serves on its control socket. */
bool lk__ctl_is_request(unsigned int type);

#endif
