/* SPDX-License-Identifier: MIT */
/* Internal: the counter module's data structures, shared by its files. */
#ifndef LK_COUNTER_INTERNAL_H
#define LK_COUNTER_INTERNAL_H

#include <linux/perf_event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <lowkey/counter.h>

/* Bounds that keep reads allocation-free: a group is read into a buffer on the stack. */
#define LK__COUNTERS_MAX_EVENTS 256
#define LK__GROUP_MAX 64

/* perf's modifiers, as written after ':' (or after a PMU's closing '/'). */
struct lk__modifiers {
	bool user, kernel, hv; /* u k h: count only the levels named */
	bool guest, host;      /* G H */
	bool exclude_idle;     /* I */
	bool pinned;	       /* D */
	bool exclusive;	       /* e */
	int precise;	       /* p, pp, ppp: accepted, meaningless for counting */
};

/* One event as parsed: the text and where it sits. */
struct lk__event_spec {
	char *text; /* as written, braces removed: "cycles:u", "msr/tsc/" */
	char *base; /* without modifiers: "cycles", "msr/tsc/" */
	struct lk__modifiers mods;
	bool has_mods;	/* some of u/k/h were written */
	unsigned group; /* index of its group, in order of appearance */
};

struct lk__event_list {
	struct lk__event_spec *specs;
	size_t n;
	unsigned ngroups;
};

/* One event of an open set. */
struct lk__event {
	struct lk__event_spec spec;
	struct perf_event_attr attr;
	char *canonical; /* what it resolved to */
	char *unit;	 /* "ns", a sysfs unit, or "" */
	double scale;
	bool hardware;
	bool user_only_fallback;
	bool opened; /* false: not supported (LK_COUNTERS_SKIP_UNSUPPORTED) */
	int error;
	char *why;
};

/* A group: events [first, first + n) of the set, in order; only opened ones are in the kernel's
 * group, and the first opened one is its leader. */
struct lk__group {
	size_t first, n;
	size_t nopen;  /* events of this group the kernel counts */
	bool fastpath; /* every opened member is mmapped for rdpmc */
};

/* The kernel counters of one thread: fds[i] for event i (-1 when not opened), and for the
 * self-monitoring fast path each event's perf page. With LK_COUNTERS_PER_THREAD there is one
 * "task" per CPU, all for the same thread, each with the ring buffer its CPU reports into. */
struct lk__task {
	pid_t tid;
	int cpu; /* -1: any CPU */
	int *fds;
	struct perf_event_mmap_page **pages;
	uint64_t *ids; /* PER_THREAD: each fd's kernel id, to match reports */
	int ring_fd;   /* PER_THREAD: the fd that owns the ring; -1 */
	struct perf_event_mmap_page *ring;
	size_t ring_size;
};

/* A thread or child of a LK_COUNTERS_PER_THREAD set, as the kernel's reports describe it. */
struct lk__thread {
	pid_t pid, tid;
	pid_t ptid; /* the thread that created it (FORK record), 0 if unknown */
	char comm[16];
	bool exited, reported;
	uint64_t *value, *enabled, *running; /* per event; over CPUs: sum, max, sum */
};

struct lk__thread_table {
	struct lk__thread *v;
	size_t n, cap;
	size_t *order; /* indexes of reported threads, in the order reported */
	size_t nreported;
	size_t *hash; /* open addressing on tid: index + 1, 0 empty */
	size_t hash_size;
	uint64_t lost;
};

struct lk_counters {
	unsigned flags;
	pid_t pid;
	size_t nevents;
	struct lk__event *events;
	unsigned ngroups;
	struct lk__group *groups;
	size_t ntasks, cap_tasks;
	struct lk__task *tasks;
	bool decided; /* the first thread has settled which events open */
	bool per_cpu; /* LK_COUNTERS_PER_THREAD: tasks are per CPU */
	struct lk__thread_table threads;
	bool user_fallback;	  /* perf_event_paranoid forced user-only counting */
	bool self;		  /* counts the thread that opened it, alone */
	pthread_t owner;	  /* that thread: the fast path is only valid there */
	unsigned fork_generation; /* the fast path's pages are gone in a forked child */
	size_t page_size;
	/* registry.c: the sets open in this process, for the control socket's server */
	struct lk_counters *reg_prev, *reg_next;
	uint32_t set; /* its number: 1, 2, ... in the order opened */
	pid_t opener; /* the process that opened it (a forked child's copy is not its) */
	bool registered;
};

/* ---- parse.c ---- */

/* Parse a comma list in perf's syntax. Returns 0 or -EINVAL/-ENOMEM with a message. */
int lk__events_parse(const char *events, bool one_group, struct lk__event_list *out);
void lk__events_free(struct lk__event_list *list);

/* Parse a modifier string ("u", "uk", "ppH"). Returns 0, or -EINVAL with a message. */
int lk__modifiers_parse(const char *s, struct lk__modifiers *mods, bool *has_ukh);

/* ---- resolve.c ---- */

/*
 * Resolve ev->spec into ev->attr (type, config, config1/2, exclusions), canonical, unit and scale.
 * Returns 0, -ENOENT (unknown, with suggestions), -EINVAL (bad PMU terms), -EACCES (tracefs),
 * -ENOMEM.
 */
int lk__event_resolve(struct lk__event *ev);

/* Apply the modifiers to attr's exclusion bits (perf's rules). */
void lk__modifiers_apply(const struct lk__modifiers *mods, bool has_ukh,
			 struct perf_event_attr *attr);

/* ---- suggest.c ---- */

/* Append " Did you mean: a, b, c?" (or a hint) to the thread's message for an unknown name. */
void lk__suggest_events(const char *name);

/* ---- explain.c ---- */

/* Whether the kernel registered a CPU PMU (one that takes PERF_TYPE_RAW events). */
bool lk__have_cpu_pmu(void);

/* Refine the message of a failed open of ev (err from lk__perf_open) and map the errno the caller
 * sees: "not supported" cases become -EOPNOTSUPP. */
int lk__explain_open_failure(int err, const struct lk__event *ev, pid_t pid);

/* Whether err (as returned by lk__explain_open_failure) means "this machine cannot count it". */
bool lk__unsupported_error(int err);

/* ---- read.c ---- */

/* lk_counter_scale(), inline for the read paths (the public symbol would go through the PLT). */
static inline uint64_t lk__scale(uint64_t value, uint64_t enabled, uint64_t running)
{
	unsigned __int128 scaled;

	if (running == 0)
		return 0;
	if (running >= enabled)
		return value;
	/* Round to nearest; the product needs 128 bits (a count of 2^40 times 2^30 ns). */
	scaled = ((unsigned __int128)value * enabled + running / 2) / running;
	return scaled > UINT64_MAX ? UINT64_MAX : (uint64_t)scaled;
}

/* Add one group read (PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING) of the opened
 * members of g into values (indexed by event). Returns 0 or -EIO if the buffer is malformed. */
int lk__group_accumulate(const struct lk_counters *c, const struct lk__group *g,
			 const uint64_t *buf, size_t words, struct lk_counter_value *values,
			 size_t n);

/* ---- threads.c (LK_COUNTERS_PER_THREAD) ---- */

/* The CPUs that may run the target: /sys/devices/system/cpu/online. Returns how many, or -errno. */
int lk__online_cpus(int **cpus);

/* After a CPU's events are open: map its ring, point the other events at it, learn the ids. */
int lk__threads_setup_task(struct lk_counters *c, struct lk__task *t);
void lk__threads_teardown(struct lk_counters *c);
/* The target's own entry, before anything runs. */
int lk__threads_seed(struct lk_counters *c, pid_t pid);
/* Sum of the per-CPU counters: value and running add up, enabled is the same on every CPU. */
int lk__read_per_cpu(struct lk_counters *c, struct lk_counter_value *values, size_t m);
int lk__read_thread_per_cpu(struct lk_counters *c, size_t t, struct lk_counter_thread *who,
			    struct lk_counter_value *values, size_t n);

/* ---- selfread.c ---- */

extern unsigned lk__counter_fork_generation;
void lk__counter_atfork_once(void);

/* Map the perf page of every event of each all-hardware group (self-monitoring sets only). */
void lk__fastpath_setup(struct lk_counters *c);
void lk__fastpath_teardown(struct lk_counters *c);

/* Read group g with rdpmc into values. Returns true if it could, false to use read(). */
bool lk__fastpath_read(const struct lk_counters *c, const struct lk__group *g,
		       struct lk_counter_value *values, size_t n);

#endif
