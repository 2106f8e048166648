/* SPDX-License-Identifier: MIT */
/*
 * Probes: tracepoints that cost one NOP while off.
 *
 *	LK_PROBE(db, query, id, rows);		// an event with two integer arguments
 *
 *	void handle(struct request *r)
 *	{
 *		LK_SPAN(db, handle);		// a span from here to the end of the scope
 *		LK_COUNTER(db, queue_depth, r->queue->depth);
 *		...
 *	}
 *
 *	lk_probe_enable("db:*");
 *	lk_trace_start(&(struct lk_trace_config){ .path = "trace.ctf" });
 *	...
 *	lk_trace_stop();
 *
 * Every site is guarded by its own static key: while off it is one 5-byte NOP and its arguments are
 * not evaluated. While on, an event is written, unformatted, into the calling thread's ring
 * buffer: a TSC timestamp, the site's id, the arguments (and the thread's CPU time when the trace
 * asks for it); a consumer thread drains the buffers into the trace. A full buffer drops events and
 * counts them; the count is in the trace and in lk_trace_stats().
 *
 * Arguments: up to 8, each a signed or unsigned integer, a float or double, a string (char *,
 * const char *, or a char array: copied, up to LK_PROBE_STRING_MAX bytes), or any other pointer
 * (recorded as its address). Types are found at compile time. Strings and pointers may be NULL.
 *
 * Traces are CTF 1.8 directories (babeltrace2, Trace Compass, the LTTng tools read them) or Chrome
 * Trace Event JSON (Perfetto UI, chrome://tracing). `lowkey trace -- cmd` traces a program from the
 * outside; `lowkey report TRACE` summarizes a trace.
 *
 * Providers and events are identifiers. One LK_PROBE per line, or use distinct lines.
 */
#ifndef LOWKEY_PROBE_H
#define LOWKEY_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <lowkey/bits/compiler.h>
#include <lowkey/key.h>

LK_BEGIN_DECLS

/* ---- sites ---- */

enum lk_probe_kind {
	LK_PROBE_EVENT = 1,		/* LK_PROBE: an instant */
	LK_PROBE_SPAN_BEGIN = 2,	/* LK_SPAN, LK_SPAN_BEGIN */
	LK_PROBE_SPAN_END = 3,		/* the end of LK_SPAN's scope, LK_SPAN_END */
	LK_PROBE_COUNTER = 4,		/* LK_COUNTER: a value track */
};

enum lk_probe_type {
	LK_PROBE_I64 = 1,	/* any signed integer, widened */
	LK_PROBE_U64 = 2,	/* any unsigned integer or _Bool, widened */
	LK_PROBE_F64 = 3,	/* float or double */
	LK_PROBE_STR = 4,	/* char *, const char *, char arrays: copied */
	LK_PROBE_PTR = 5,	/* any other pointer: its address */
};

#define LK_PROBE_MAX_ARGS 8
#define LK_PROBE_STRING_MAX 1024	/* longer strings are truncated */

/* What a site is; the library owns everything but the static fields. */
struct lk_probe_site {
	struct lk_key_false key;	/* on while the site records */
	uint32_t magic;
	uint16_t abi;
	uint8_t kind;			/* enum lk_probe_kind */
	uint8_t nargs;
	uint32_t arg_types;		/* enum lk_probe_type, 4 bits per argument, first in the low bits */
	uint32_t line;
	uint32_t id;			/* the event id in traces, given when the site registers */
	uint32_t flags;
	const char *provider;
	const char *event;
	const char *file;
	const char *arg_names;		/* the arguments as written: "id, rows" */
};

#define LK__PROBE_MAGIC 0x6c6b7072u	/* "lkpr" */
#define LK__PROBE_ABI 2	/* 2: 8-byte record header */

/* ---- enabling, listing ---- */

/*
 * lk_probe_enable / lk_probe_disable - add a rule: sites matching glob record (or stop recording)
 * while a trace runs. glob matches "provider:event" (fnmatch(3)), or the provider alone when it
 * has no ':'. Rules apply in order, the last matching one wins, and they also apply to objects
 * loaded later (dlopen). While a trace runs the matching sites are flipped at once, in one batch.
 *
 * Returns the number of sites loaded now that match glob (0 is not an error: a later dlopen may
 * bring some), or -EINVAL (NULL or empty glob), -ENOMEM, or a key-flipping error (-EPERM where
 * code cannot be rewritten: see lowkey/key.h). Thread-safe; not async-signal-safe. Costs a pass
 * over all sites and, while tracing, one key batch.
 */
LK_API int lk_probe_enable(const char *glob);
LK_API int lk_probe_disable(const char *glob);

/* lk_probe_reset_rules - forget every rule (and, while tracing, turn every site off). */
LK_API int lk_probe_reset_rules(void);

struct lk_probe_info {
	const char *provider;
	const char *event;
	const char *file;
	unsigned int line;
	enum lk_probe_kind kind;
	unsigned int nargs;
	enum lk_probe_type arg_types[LK_PROBE_MAX_ARGS];
	const char *arg_names;
	const char *object;	/* the shared object holding the site; "" for the main program */
	unsigned int id;
	bool enabled;		/* recording now */
};

/*
 * lk_probe_list - call fn for every site of every loaded object, in registration order, until it
 * returns non-zero. Returns the number of sites visited, or fn's non-zero value. fn must not call
 * lk_probe_* or lk_trace_* (the registry is locked). Not async-signal-safe.
 */
LK_API int lk_probe_list(int (*fn)(const struct lk_probe_info *info, void *arg), void *arg);

/* lk_probe_type_name - "i64", "u64", "f64", "string", "pointer". */
LK_API const char *lk_probe_type_name(enum lk_probe_type type);

/* ---- tracing ---- */

enum lk_trace_format {
	LK_TRACE_CTF = 0,	/* a CTF 1.8 trace directory */
	LK_TRACE_JSON = 1,	/* a Chrome Trace Event JSON file (written at lk_trace_stop) */
};

#define LK_TRACE_CPUTIME 0x1	/* record each event's thread CPU time (lk_thread_cputime_ns) */
#define LK_TRACE_FIXED_BUFFER 0x2 /* a thread's ring never grows past buffer_size (see below) */

/*
 * Each thread records into a ring of buffer_size bytes, resident from its first event. While the
 * consumer thread lags more than half a ring behind (it was descheduled, the disk is slow), the
 * ring grows into a reservation of 8 times that size instead of dropping events, and gives the
 * extra pages back once the consumer has caught up: by default 2 MiB resident, up to 16 MiB
 * during a stall. LK_TRACE_FIXED_BUFFER keeps it at buffer_size; events that find it full are
 * dropped and counted as lost.
 */
struct lk_trace_config {
	const char *path;		/* the directory (CTF) or file (JSON) to write; required */
	enum lk_trace_format format;
	size_t buffer_size;		/* bytes per thread, rounded up to a power of two; 0: 2 MiB */
	unsigned int flags;		/* LK_TRACE_CPUTIME, LK_TRACE_FIXED_BUFFER */
	unsigned int flush_ms;		/* longest a written event waits in its buffer; 0: 100 ms */
};

/*
 * lk_trace_start - start writing a trace and turn on the sites the rules select.
 * Errors: -EINVAL (no path, bad format or size), -EBUSY (a trace is already running in this
 * process), -errno from creating the output (the message names the path), -ENOMEM, or a
 * key-flipping error. Not async-signal-safe.
 */
LK_API int lk_trace_start(const struct lk_trace_config *config);

/*
 * lk_trace_stop - turn every site off, write out what every thread recorded, and close the
 * trace (for JSON: convert it, which takes time in proportion to its size). Returns 0, -ENOENT
 * if no trace runs, or the first output error met while tracing (-ENOSPC: the disk filled; what
 * was written before stays readable), or else the first error met turning on the sites of an
 * object loaded while tracing (-EPERM where writable code is forbidden, -ENOSYS where
 * membarrier is denied: the trace lacks those sites' events; lk_last_error() names the object
 * and the cause). Not async-signal-safe. fork() waits while another thread starts or stops a
 * trace.
 */
LK_API int lk_trace_stop(void);

struct lk_trace_stats {
	bool running;		/* recording: started, not stopped, no output error */
	uint64_t events;	/* written to the trace so far */
	uint64_t lost;		/* dropped because a thread's buffer was full, or recorded and then
				 * not written because the output failed */
	uint64_t bytes;		/* written to the output */
	unsigned int threads;	/* threads that have recorded */
	int error;		/* 0, or the output error that stopped the trace */
};

/* lk_trace_stats - counters of the running (or last) trace. Thread-safe; takes a lock the trace's
 * consumer thread takes briefly, so not async-signal-safe. Errors: -EINVAL (stats is NULL). */
LK__SAME_NAME_BEGIN
LK_API int lk_trace_stats(struct lk_trace_stats *stats);
LK__SAME_NAME_END

/* ---- the control socket: enabling from outside (`lowkey trace --pid`) ---- */

/*
 * lk_control_open - accept commands from `lowkey trace --pid` and `lowkey list --pid` on a Unix
 * socket at $XDG_RUNTIME_DIR/lowkey/PID.sock (or /tmp/lowkey-EUID/PID.sock when XDG_RUNTIME_DIR is
 * unset or not a private directory of this user), in a directory only this user can enter. Only
 * peers with this process's effective uid, or root, are served (SO_PEERCRED); every message is
 * validated, and a bad one is refused and counted, never acted on. A service thread, with every
 * signal blocked, serves the socket. LOWKEY_CONTROL=1 in the environment opens it at start-up.
 * A forked child does not inherit it (it may open its own). See docs/trace.md.
 *
 * Returns 0 (also when already open), or: -ENOTDIR (the directory's place holds a symbolic link
 * or a file), -EPERM (the directory belongs to another user or is open to others),
 * -ENAMETOOLONG, or the -errno of mkdir, socket, bind, listen or thread creation; lk_last_error()
 * names the path and the fix. Costs a directory check, a socket and a thread. Thread-safe; not
 * async-signal-safe.
 */
LK_API int lk_control_open(void);

/*
 * lk_control_close - stop serving: end every connection (removing the rules clients added for
 * their session, and stopping a trace a client started to last only while it is connected), stop
 * the thread, remove the socket. exit() does this too, and also finishes a trace started over the
 * socket. Nothing if not open. Waits for a command in progress. Not async-signal-safe.
 */
LK_API void lk_control_close(void);

/* ---- internals ---- */

/*
 * The calling thread's write position, in initial-exec TLS so the fast path reaches it with one
 * %fs-relative access. All zero until the thread records its first event, which sends that
 * event to the slow path; the slow path allocates the thread's buffer and fills this in.
 */
struct lk__probe_tls {
	/*
	 * Where the next record goes, and where the records end for the consumer: the same place,
	 * since a record is committed before its emit ends and a nested emit never writes.
	 */
	uintptr_t committed;
	uintptr_t fast_end;	/* the fast path may write up to here */
	unsigned int nesting;	/* emits in progress on this thread (signal handlers nest) */
	unsigned int spare;
};

extern __thread struct lk__probe_tls lk__probe_tls __attribute__((tls_model("initial-exec")));

/* Both return whether the event was recorded (false: no trace, or dropped and counted). */
LK_API bool lk__probe_emit_slow(struct lk_probe_site *site, unsigned int n, const uint64_t *vals);

static inline __attribute__((always_inline)) uint64_t lk__probe_tsc(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
#error "lowkey probes need a cycle counter for this architecture"
#endif
}

/* A record's header: one u64, the event id in its low 16 bits and the TSC's low 48 bits above
 * (the shift drops the TSC's top bits, no mask needed). The consumer and readers extend the
 * timestamp from the packet's; 48 bits last 34 hours at 2.3 GHz. */
#define LK__PROBE_HEADER 8
#define LK__PROBE_ID_BITS 16
#define LK__PROBE_TSC_BITS 48
#define LK__PROBE_TSC_MASK ((UINT64_C(1) << LK__PROBE_TSC_BITS) - 1)

static inline uint64_t lk__probe_header(uint64_t tsc, uint32_t id)
{
	return tsc << LK__PROBE_ID_BITS | id;
}

/*
 * The fast path for numeric arguments: claim the thread, reserve, stamp, copy, commit, release.
 * The claim (nesting 0 -> 1) is stored before the write position is read, so a signal handler
 * that interrupts this event and records one of its own sees the claim and takes the slow path,
 * which drops and counts its event rather than writing over this one. Anything unusual (no buffer
 * yet, the watermark or the end of the ring reached, CPU time requested, tracing stopped) goes
 * to the slow path too: fast_end routes it there.
 */
static inline __attribute__((always_inline)) bool
lk__probe_emit(struct lk_probe_site *site, unsigned int n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
	       uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7)
{
	struct lk__probe_tls *t = &lk__probe_tls;
	uint32_t size = LK__PROBE_HEADER + 8 * n;
	unsigned int nested = __atomic_load_n(&t->nesting, __ATOMIC_RELAXED);
	uintptr_t p;

	__atomic_store_n(&t->nesting, nested + 1, __ATOMIC_RELAXED);	/* read by lk_trace_stop */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	p = __atomic_load_n(&t->committed, __ATOMIC_RELAXED);
	if (LK__LIKELY(nested == 0 && p + size <= __atomic_load_n(&t->fast_end, __ATOMIC_RELAXED))) {
		const uint64_t args[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };
		uint64_t head = lk__probe_header(lk__probe_tsc(), site->id);

		memcpy((void *)p, &head, 8);
		for (unsigned int i = 0; i < n; i++)	/* n is a constant: unrolled, from registers */
			memcpy((void *)(p + LK__PROBE_HEADER + 8 * i), &args[i], 8);
		__atomic_store_n(&t->committed, p + size, __ATOMIC_RELEASE);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&t->nesting, 0, __ATOMIC_RELAXED);
		return true;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&t->nesting, nested, __ATOMIC_RELAXED);
	{
		const uint64_t args[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };

		return lk__probe_emit_slow(site, n, args);
	}
}

#define lk__probe_emit0(site) lk__probe_emit((site), 0, 0, 0, 0, 0, 0, 0, 0, 0)

/* Argument counting and mapping, 0 to 8 arguments (GNU ", ##" swallows the comma for none). */
#define LK__CAT_(a, b) a##b
#define LK__CAT(a, b) LK__CAT_(a, b)
#define LK__NARGS(...) LK__NARGS_(_, ##__VA_ARGS__, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define LK__NARGS_(_, a1, a2, a3, a4, a5, a6, a7, a8, a9, n, ...) n
#define LK__MAP(M, ...) LK__CAT(LK__MAP_, LK__NARGS(__VA_ARGS__))(M, ##__VA_ARGS__)
#define LK__MAP_0(M)
#define LK__MAP_1(M, a) M(0, a)
#define LK__MAP_2(M, a, b) M(0, a) M(1, b)
#define LK__MAP_3(M, a, b, c) LK__MAP_2(M, a, b) M(2, c)
#define LK__MAP_4(M, a, b, c, d) LK__MAP_3(M, a, b, c) M(3, d)
#define LK__MAP_5(M, a, b, c, d, e) LK__MAP_4(M, a, b, c, d) M(4, e)
#define LK__MAP_6(M, a, b, c, d, e, f) LK__MAP_5(M, a, b, c, d, e) M(5, f)
#define LK__MAP_7(M, a, b, c, d, e, f, g) LK__MAP_6(M, a, b, c, d, e, f) M(6, g)
#define LK__MAP_8(M, a, b, c, d, e, f, g, h) LK__MAP_7(M, a, b, c, d, e, f, g) M(7, h)
#define LK__MAP_9(M, ...) _Static_assert(0, "a probe takes at most 8 arguments")

static inline uint64_t lk__u64_i(int64_t v) { return (uint64_t)v; }
static inline uint64_t lk__u64_u(uint64_t v) { return v; }
static inline uint64_t lk__u64_p(const volatile void *p) { return (uint64_t)(uintptr_t)p; }
static inline uint64_t lk__u64_f(double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	return u;
}

#ifndef __cplusplus
#define LK__ARG_TYPE(x)                                                                       \
	_Generic((x),                                                                         \
		_Bool: LK_PROBE_U64, unsigned char: LK_PROBE_U64, unsigned short: LK_PROBE_U64, \
		unsigned int: LK_PROBE_U64, unsigned long: LK_PROBE_U64,                      \
		unsigned long long: LK_PROBE_U64,                                             \
		char: LK_PROBE_I64, signed char: LK_PROBE_I64, short: LK_PROBE_I64,           \
		int: LK_PROBE_I64, long: LK_PROBE_I64, long long: LK_PROBE_I64,               \
		float: LK_PROBE_F64, double: LK_PROBE_F64,                                    \
		char *: LK_PROBE_STR, const char *: LK_PROBE_STR,                             \
		default: LK_PROBE_PTR)
#define LK__ARG_U64(x)                                                                        \
	_Generic((x),                                                                         \
		_Bool: lk__u64_u, unsigned char: lk__u64_u, unsigned short: lk__u64_u,        \
		unsigned int: lk__u64_u, unsigned long: lk__u64_u, unsigned long long: lk__u64_u, \
		char: lk__u64_i, signed char: lk__u64_i, short: lk__u64_i, int: lk__u64_i,    \
		long: lk__u64_i, long long: lk__u64_i,                                        \
		float: lk__u64_f, double: lk__u64_f,                                          \
		default: lk__u64_p)(x)
#else
} /* extern "C" */
template <typename T> struct lk__arg {
	static constexpr int type = LK_PROBE_PTR;
	static uint64_t value(T v) { return lk__u64_p((const volatile void *)v); }
};
#define LK__ARG_INT(T, code, conv)                                                            \
	template <> struct lk__arg<T> {                                                       \
		static constexpr int type = code;                                             \
		static uint64_t value(T v) { return conv(v); }                                \
	};
LK__ARG_INT(bool, LK_PROBE_U64, lk__u64_u)
LK__ARG_INT(unsigned char, LK_PROBE_U64, lk__u64_u)
LK__ARG_INT(unsigned short, LK_PROBE_U64, lk__u64_u)
LK__ARG_INT(unsigned int, LK_PROBE_U64, lk__u64_u)
LK__ARG_INT(unsigned long, LK_PROBE_U64, lk__u64_u)
LK__ARG_INT(unsigned long long, LK_PROBE_U64, lk__u64_u)
LK__ARG_INT(char, LK_PROBE_I64, lk__u64_i)
LK__ARG_INT(signed char, LK_PROBE_I64, lk__u64_i)
LK__ARG_INT(short, LK_PROBE_I64, lk__u64_i)
LK__ARG_INT(int, LK_PROBE_I64, lk__u64_i)
LK__ARG_INT(long, LK_PROBE_I64, lk__u64_i)
LK__ARG_INT(long long, LK_PROBE_I64, lk__u64_i)
LK__ARG_INT(float, LK_PROBE_F64, lk__u64_f)
LK__ARG_INT(double, LK_PROBE_F64, lk__u64_f)
LK__ARG_INT(char *, LK_PROBE_STR, lk__u64_p)
LK__ARG_INT(const char *, LK_PROBE_STR, lk__u64_p)
#undef LK__ARG_INT
template <typename T> struct lk__decay { typedef T type; };
template <typename T, size_t N> struct lk__decay<T[N]> { typedef T *type; };
template <typename T> struct lk__decay<const T> { typedef typename lk__decay<T>::type type; };
#define LK__ARG_T(x) lk__arg<typename lk__decay<__typeof__(x)>::type>
#define LK__ARG_TYPE(x) (LK__ARG_T(x)::type)
#define LK__ARG_U64(x) (LK__ARG_T(x)::value(x))
extern "C" {
#endif

#define LK__TYPE_BITS(i, x) | ((uint32_t)LK__ARG_TYPE(x) << (4 * (i)))
#define LK__ARG_TYPES(...) (0u LK__MAP(LK__TYPE_BITS, ##__VA_ARGS__))
#define LK__VALUE(i, x) LK__ARG_U64(x),
#define LK__HAS_STRINGS(types)                                                                \
	(((types) & 0xf) == 4 || ((types) >> 4 & 0xf) == 4 || ((types) >> 8 & 0xf) == 4 ||  \
	 ((types) >> 12 & 0xf) == 4 || ((types) >> 16 & 0xf) == 4 || ((types) >> 20 & 0xf) == 4 || \
	 ((types) >> 24 & 0xf) == 4 || ((types) >> 28 & 0xf) == 4)

#if defined(__GNUC__) && !defined(__clang__)
#define LK__RETAIN __attribute__((retain))
#else
#define LK__RETAIN
#endif

/*
 * The site's descriptor, and a pointer to it in section __lk_probe_sites (pointers have no
 * alignment surprises; the descriptors live in .data, next to their key).
 */
#define LK__PROBE_SITE(var, provider, event, kind, nargs, types, names)                       \
	static struct lk_probe_site var = {                                                   \
		LK_KEY_INIT_FALSE, LK__PROBE_MAGIC, LK__PROBE_ABI, (kind), (nargs), (types),  \
		__LINE__, 0, 0, #provider, #event, __FILE__, names                            \
	};                                                                                    \
	static struct lk_probe_site *const LK__CAT(var, _ref)                                 \
		__attribute__((used, section("__lk_probe_sites"))) LK__RETAIN = &var

/*
 * Each argument is converted once into a 64-bit local; the fast path stores them from registers.
 * types is the compile-time LK__ARG_TYPES(...), so the string test folds away.
 */
#define LK__ARG_DECL(i, x) const uint64_t LK__CAT(lk__a, i) = LK__ARG_U64(x);
#define LK__ZEROS_0 LK__ZEROS_1 const uint64_t lk__a0 = 0;
#define LK__ZEROS_1 LK__ZEROS_2 const uint64_t lk__a1 = 0;
#define LK__ZEROS_2 LK__ZEROS_3 const uint64_t lk__a2 = 0;
#define LK__ZEROS_3 LK__ZEROS_4 const uint64_t lk__a3 = 0;
#define LK__ZEROS_4 LK__ZEROS_5 const uint64_t lk__a4 = 0;
#define LK__ZEROS_5 LK__ZEROS_6 const uint64_t lk__a5 = 0;
#define LK__ZEROS_6 LK__ZEROS_7 const uint64_t lk__a6 = 0;
#define LK__ZEROS_7 LK__ZEROS_8 const uint64_t lk__a7 = 0;
#define LK__ZEROS_8
#define LK__ZEROS_9
#define LK__ARGS8 lk__a0, lk__a1, lk__a2, lk__a3, lk__a4, lk__a5, lk__a6, lk__a7

#define LK__PROBE_RECORD(site, types, ...)                                                    \
	do {                                                                                  \
		LK__MAP(LK__ARG_DECL, ##__VA_ARGS__)                                          \
		LK__CAT(LK__ZEROS_, LK__NARGS(__VA_ARGS__))                                   \
		if (LK__HAS_STRINGS(types)) {                                                 \
			const uint64_t lk__vals[8] = { LK__ARGS8 };                           \
			lk__probe_emit_slow((site), LK__NARGS(__VA_ARGS__), lk__vals);        \
		} else {                                                                      \
			lk__probe_emit((site), LK__NARGS(__VA_ARGS__), LK__ARGS8);            \
		}                                                                             \
	} while (0)

#define LK__PROBE_AT(n, kind, provider, event, ...)                                           \
	do {                                                                                  \
		LK__PROBE_SITE(LK__CAT(lk__probe_site_, n), provider, event, kind,            \
			       LK__NARGS(__VA_ARGS__), LK__ARG_TYPES(__VA_ARGS__), #__VA_ARGS__); \
		if (lk_branch_unlikely(&LK__CAT(lk__probe_site_, n).key))                     \
			LK__PROBE_RECORD(&LK__CAT(lk__probe_site_, n), LK__ARG_TYPES(__VA_ARGS__), \
					 ##__VA_ARGS__);                                      \
	} while (0)

/*
 * LK_PROBE(provider, event, args...) - record an event with 0 to 8 arguments.
 * Off: one NOP, arguments not evaluated. On: about the cost of a TSC read and a few stores, no
 * lock, no system call (except, rarely, to wake the consumer or when the thread records its first
 * event). Async-signal-safe, once the thread has recorded an event outside a handler: an event
 * recorded by a signal handler that interrupts another event on the same thread is dropped and
 * counted as lost, never written over it.
 */
#define LK_PROBE(provider, event, ...) LK__PROBE_AT(__COUNTER__, LK_PROBE_EVENT, provider, event, ##__VA_ARGS__)

/* LK_COUNTER(provider, name, value) - record a value of a counter track (an integer or double). */
#define LK_COUNTER(provider, name, value) LK__PROBE_AT(__COUNTER__, LK_PROBE_COUNTER, provider, name, value)

/*
 * LK_SPAN_BEGIN(provider, name) / LK_SPAN_END(provider, name) - a span that crosses scopes, on one
 * thread; spans nest. Each end is its own site, enabled by the same rules as its begin.
 */
#define LK_SPAN_BEGIN(provider, name) LK__PROBE_AT(__COUNTER__, LK_PROBE_SPAN_BEGIN, provider, name)
#define LK_SPAN_END(provider, name) LK__PROBE_AT(__COUNTER__, LK_PROBE_SPAN_END, provider, name)

/*
 * LK_SPAN(provider, name) - a span from here to the end of the enclosing scope, however the scope
 * is left. A declaration: use it where a declaration may go. Off: one NOP here, and at scope exit a
 * test of a register the NOP left at zero. The end is recorded only when the begin was (a begin
 * whose end is dropped because the buffer is full, or cut by lk_trace_stop, stays open).
 */
#define LK_SPAN(provider, name) LK__SPAN_AT(__COUNTER__, provider, name)

static inline __attribute__((always_inline)) void lk__span_close(struct lk_probe_site **end)
{
	if (LK__UNLIKELY(*end != NULL))
		lk__probe_emit0(*end);
}

#define LK__SPAN_AT(n, provider, name)                                                        \
	LK__PROBE_SITE(LK__CAT(lk__span_begin_, n), provider, name, LK_PROBE_SPAN_BEGIN, 0, 0, ""); \
	LK__PROBE_SITE(LK__CAT(lk__span_end_, n), provider, name, LK_PROBE_SPAN_END, 0, 0, ""); \
	struct lk_probe_site *LK__CAT(lk__span_guard_, n) __attribute__((cleanup(lk__span_close), unused)) = \
		lk_branch_unlikely(&LK__CAT(lk__span_begin_, n).key) &&                       \
				lk__probe_emit0(&LK__CAT(lk__span_begin_, n))                 \
			? &LK__CAT(lk__span_end_, n)                                          \
			: NULL

LK_END_DECLS

#endif
