/* SPDX-License-Identifier: MIT */
/*
 * Counters: sets of perf events for a thread, a process or a whole process tree.
 *
 *	struct lk_counters *c;
 *	struct lk_counter_value v[2];
 *
 *	if (lk_counters_open(&c, "{task-clock,page-faults}", 0, 0) < 0)
 *		fprintf(stderr, "%s\n", lk_last_error());
 *	work();
 *	lk_counters_read(c, v, 2);	// v[0].value: ns of CPU time, v[1].value: page faults
 *	lk_counters_close(c);
 *
 * Events use perf's syntax, comma-separated:
 *   - names: task-clock, context-switches, page-faults, cycles, instructions, cache-misses,
 *     L1-dcache-load-misses, ... and every event libpfm4 knows for this CPU (INST_RETIRED:ANY_P);
 *   - raw codes: r1c0 (PERF_TYPE_RAW, config 0x1c0);
 *   - a kernel PMU with terms from sysfs: msr/tsc/, cpu/event=0x3c,umask=0x00/, power/energy-pkg/;
 *   - tracepoints: sched:sched_switch (needs read access to tracefs);
 *   - modifiers after a colon (or after the closing slash): u (user), k (kernel), h (hypervisor),
 *     G/H (guest/host), I (exclude idle), D (pinned), e (exclusive);
 *   - groups in braces, {cycles,instructions}: the events of a group are scheduled onto the PMU
 *     together (so their ratios are exact) and read with one system call.
 * An event outside braces is a group of one, as in `perf stat`.
 *
 * Values are raw counts; task-clock and cpu-clock count nanoseconds. When there are more hardware
 * events than counters the kernel time-shares the counters (multiplexing): each value comes with
 * the time its event was enabled and the time it really counted, and a value scaled to the whole
 * enabled time.
 *
 * Without privilege (kernel.perf_event_paranoid = 2, no CAP_PERFMON) the kernel refuses to count
 * kernel-mode activity. As perf does, an event written without u/k/h modifiers is then opened for
 * user space only; lk_counters_describe() says so (user_only_fallback). Software events that only
 * happen in the kernel (context-switches, cpu-migrations) then count 0.
 */
#ifndef LOWKEY_COUNTER_H
#define LOWKEY_COUNTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

struct lk_counters;

/* Flags for lk_counters_open(). */
enum {
	/* Children forked and threads created after the open count into the set (perf's inherit). */
	LK_COUNTERS_INHERIT = 1u << 0,
	/* pid names a process: count all of its threads (each thread has its own kernel counters;
	 * reads sum them). Threads created later are counted only with LK_COUNTERS_INHERIT. */
	LK_COUNTERS_PROCESS = 1u << 1,
	/* Open stopped; lk_counters_enable() starts counting. */
	LK_COUNTERS_DISABLED = 1u << 2,
	/* Start counting when the target calls execve(): for a child forked to run a command. */
	LK_COUNTERS_ENABLE_ON_EXEC = 1u << 3,
	/* Make all the events one group, as if the whole list were in braces. */
	LK_COUNTERS_GROUP = 1u << 4,
	/* Keep events this machine cannot count (no PMU, unknown to the kernel) in the set instead of
	 * failing: they read as 0 and lk_counters_describe() gives the reason. */
	LK_COUNTERS_SKIP_UNSUPPORTED = 1u << 5,
	/* Never read hardware counters with rdpmc; always read(). For measuring, mostly. */
	LK_COUNTERS_NO_FASTPATH = 1u << 6,
	/* With LK_COUNTERS_INHERIT: also keep each thread's and child's own counts, which the kernel
	 * reports as each one exits (inherit_stat). Costs one counter per event and CPU, and a ring
	 * buffer per CPU that lk_counters_poll() drains; see lk_counters_read_thread(). */
	LK_COUNTERS_PER_THREAD = 1u << 7,
};

/* One event's reading. Times are in nanoseconds. */
struct lk_counter_value {
	uint64_t value;	       /* the count (nanoseconds for task-clock and cpu-clock) */
	uint64_t time_enabled; /* how long the event was enabled */
	uint64_t time_running; /* how long it was really counting (< enabled: multiplexed) */
	uint64_t scaled;       /* value * time_enabled / time_running, the estimate for the whole
				 * enabled time; = value when not multiplexed; 0 when it never ran */
};

/* What an event of a set is. The strings belong to the set and live until lk_counters_close(). */
struct lk_counter_info {
	const char *name; /* as written, with its modifiers: "cycles:u", "msr/tsc/" */
	const char *
		event; /* what it resolved to: "perf::PERF_COUNT_HW_CPU_CYCLES:u", "msr/event=0x0/" */
	const char *unit; /* "ns" for the clocks, a sysfs unit ("Joules"), "" for a count */
	double scale;	  /* multiply value by scale to get unit (sysfs .scale; 1 otherwise) */
	uint32_t type;	  /* perf_event_attr.type and .config, for those who want them */
	uint64_t config;
	unsigned group; /* index of the event's group; events of one group count together */
	bool hardware;	/* counts on a PMU counter (may be multiplexed, may be rdpmc-read) */
	bool user_only; /* counts user space only (excludes kernel and hypervisor) */
	bool user_only_fallback; /* ...because perf_event_paranoid forbade more, not because asked */
	int error;		 /* 0, or why it is not counted (LK_COUNTERS_SKIP_UNSUPPORTED) */
	const char *why;	 /* the sentence for error, "" when error is 0 */
};

/*
 * lk_counters_open - open a set of counters.
 * @out:    receives the set.
 * @events: a comma-separated list in perf's syntax (see the top of this file). NULL or "" means
 *          "task-clock".
 * @pid:    0 for the calling thread (with LK_COUNTERS_PROCESS: the calling process), or a thread
 *          id, or with LK_COUNTERS_PROCESS a process id.
 * @flags:  LK_COUNTERS_*.
 *
 * Counting starts at once unless LK_COUNTERS_DISABLED or LK_COUNTERS_ENABLE_ON_EXEC is given. A
 * set of the calling thread without LK_COUNTERS_INHERIT maps each hardware event's perf page so
 * lk_counters_read() can use rdpmc (see there).
 *
 * Returns 0, or a negative errno with lk_last_error() saying what to change:
 *   -EINVAL      bad syntax (the message points at it), unknown flags, an empty group.
 *   -ENOENT      no event by that name; the message suggests close names.
 *   -EOPNOTSUPP  the machine cannot count the event (a hardware event without a PMU, as in most
 *                virtual machines; an event the kernel or PMU refuses); the message says why.
 *   -EACCES, -EPERM  denied: the message names the sysctl (kernel.perf_event_paranoid), the
 *                capability (CAP_PERFMON, CAP_SYS_PTRACE for another user's process), or the
 *                seccomp filter in the way.
 *   -ENOSYS      perf_event_open is not available (kernel without perf, or a seccomp filter).
 *   -ESRCH       no such thread or process.
 *   -EMFILE      out of file descriptors (one per event and thread).
 *   -ENOMEM      out of memory.
 * Cost: one perf_event_open() per event (per thread with LK_COUNTERS_PROCESS); the first call in a
 * process also loads libpfm4 (dlopen(), some 43,000 relocations). Thread-safe; not
 * async-signal-safe.
 */
LK_API int lk_counters_open(struct lk_counters **out, const char *events, pid_t pid,
			    unsigned flags);

/*
 * lk_counters_open_cpus - count everything that runs on some CPUs, every process and the kernel
 * (perf stat -a and -C).
 * @cpus, @ncpus: CPU numbers as /sys/devices/system/cpu/online lists them; NULL and 0: every
 *          online CPU.
 * @flags:  LK_COUNTERS_DISABLED, LK_COUNTERS_GROUP, LK_COUNTERS_SKIP_UNSUPPORTED; no other applies.
 *
 * Each event is opened once per CPU (pid -1). lk_counters_read() gives the sums over the CPUs:
 * time_enabled and time_running add up too, so their ratio is still the share of time counted;
 * lk_counters_nthreads() is 1. Events written without u/k/h count the kernel as well.
 *
 * Returns 0, or a negative errno with lk_last_error() saying what to change, as lk_counters_open()
 * and:
 *   -EACCES, -EPERM  counting a CPU needs kernel.perf_event_paranoid <= 0 or CAP_PERFMON (CAP_SYS_ADMIN
 *                before Linux 5.8): the message gives the level now and the command to change it.
 *   -EINVAL  a CPU that is not online, a flag that does not apply, cpus NULL with ncpus > 0.
 * Cost: one perf_event_open() per event and CPU. Thread-safe; not async-signal-safe.
 */
LK_API int lk_counters_open_cpus(struct lk_counters **out, const char *events, const int *cpus,
				 size_t ncpus, unsigned flags);

/*
 * lk_counters_read - read every event of the set.
 * @values: receives min(n, number of events) readings, in the order the events were written.
 *
 * Returns the number of events in the set (which may be more than n), or a negative errno:
 *   -EINVAL  c is NULL, or values is NULL while n > 0.
 *   -EIO     a read() of the kernel counters failed (should not happen; the message says how).
 * Each group is read at once (PERF_FORMAT_GROUP): one read() per group and thread. With
 * LK_COUNTERS_INHERIT the values include the children and threads that inherited the counters,
 * alive or exited. With LK_COUNTERS_PROCESS they are the sums over the threads.
 *
 * Fast path: when the set counts the calling thread alone (pid 0, no INHERIT, no PROCESS), is read
 * by the thread that opened it, and every event of a group is a hardware event whose perf page
 * allows it (cap_user_rdpmc and a counter index), the group is read with rdpmc: no system call.
 * Otherwise one read() per group, about a microsecond (see `lowkey bench ctx`). Without cap_user_time the times on the fast
 * path are those of the thread's last schedule-in (the values are exact); when the page shows
 * multiplexing the read() path is taken. Thread-safe (no lock, no allocation); async-signal-safe.
 */
LK_API int lk_counters_read(struct lk_counters *c, struct lk_counter_value *values, size_t n);

/*
 * lk_counters_enable / lk_counters_disable / lk_counters_reset - start, stop, or zero every event
 * (and, with LK_COUNTERS_INHERIT, the copies children inherited). Reset zeroes the values, not the
 * times. One ioctl() per group and thread. Returns 0, -EINVAL for NULL, or -EIO with a message if
 * the kernel refused. Thread-safe; async-signal-safe.
 */
LK_API int lk_counters_enable(struct lk_counters *c);
LK_API int lk_counters_disable(struct lk_counters *c);
LK_API int lk_counters_reset(struct lk_counters *c);

/*
 * lk_counters_count - how many events the set has (0 for NULL). Async-signal-safe.
 */
LK_API size_t lk_counters_count(const struct lk_counters *c);

/*
 * lk_counters_describe - what event i of the set is (name, unit, group, ...).
 * Returns 0, or -EINVAL when c or info is NULL, -ERANGE when i is past the end. Async-signal-safe.
 */
LK_API int lk_counters_describe(const struct lk_counters *c, size_t i,
				struct lk_counter_info *info);

/* A thread a set counts, for lk_counters_read_thread(). */
struct lk_counter_thread {
	pid_t pid;     /* its process (thread group); 0 when not known */
	pid_t tid;     /* the thread; 0 for "the rest" (see lk_counters_read_thread) */
	char comm[16]; /* its name, as /proc/PID/task/TID/comm has it; "" when not known */
	bool exited;
};

/*
 * lk_counters_nthreads / lk_counters_read_thread - per-thread readings.
 *
 * LK_COUNTERS_PROCESS: one entry per thread the set was opened on, read like lk_counters_read().
 * LK_COUNTERS_PER_THREAD: one entry per thread or child that exited (its own counts, as the kernel
 * reported them at its exit), in the order they exited, after entry 0: the rest, that is the
 * totals minus the exited ones. Entry 0 names the one thread it belongs to when that can be told
 * (every other thread exited), else it has tid 0 and counts the threads still running. Call
 * lk_counters_poll() first to take in the latest exits. Any other set: one entry, the set itself.
 *
 * lk_counters_nthreads() returns how many entries there are (0 for NULL). lk_counters_read_thread()
 * fills *who (if not NULL) and values like lk_counters_read(), and returns what lk_counters_read()
 * returns, or -ERANGE past the last entry. Reads /proc for the name of a live thread: thread-safe,
 * not async-signal-safe.
 */
LK_API size_t lk_counters_nthreads(const struct lk_counters *c);
LK_API int lk_counters_read_thread(struct lk_counters *c, size_t t, struct lk_counter_thread *who,
				   struct lk_counter_value *values, size_t n);

/*
 * lk_counters_poll - take in the reports of threads that exited (LK_COUNTERS_PER_THREAD).
 *
 * The kernel writes a report into a ring buffer per CPU as each counted thread exits; a full buffer
 * loses reports. Call this now and then while the target runs (lk_counters_poll_fds() gives fds to
 * wait on: they turn readable when a buffer is half full). Returns the number of reports lost so
 * far (0 is the hope), -EINVAL for NULL, -ECHILD in a process forked after the open (the buffers
are the parent's). Sets without LK_COUNTERS_PER_THREAD: returns 0. Not
 * thread-safe against itself or lk_counters_read_thread() on the same set; allocates.
 */
LK_API int lk_counters_poll(struct lk_counters *c);

/* lk_counters_poll_fds - the fds to poll() for POLLIN before lk_counters_poll(); returns how many
 * it stored in fds (at most n), 0 for sets without LK_COUNTERS_PER_THREAD. */
LK_API size_t lk_counters_poll_fds(const struct lk_counters *c, int *fds, size_t n);

/*
 * lk_counters_close - stop counting and free the set. NULL is ignored. Not async-signal-safe.
 */
LK_API void lk_counters_close(struct lk_counters *c);

/*
 * lk_counter_scale - the multiplexing estimate: value * enabled / running, rounded, computed
 * without overflow (saturating at UINT64_MAX); 0 when running is 0; value when running >= enabled.
 * Async-signal-safe.
 */
LK_API uint64_t lk_counter_scale(uint64_t value, uint64_t enabled, uint64_t running);

LK_END_DECLS

#endif
