/* SPDX-License-Identifier: MIT */
/*
 * lowkey agent: the processes it follows (agent_proc.c), how it finds them (agent_scan.c), what it
 * makes of their events (agent_metrics.c), their locks' and counter sets' figures
 * (agent_figures.c) and the HTTP side that serves it (agent_http.c).
 *
 * One thread (the command's) finds processes, attaches to them, and reads each one's trace as its
 * consumer appends packets; the HTTP server's thread renders /metrics. Both take agent.lock: the
 * reader while it changes a process or the list, the server while it renders.
 */
#ifndef LOWKEY_CLI_AGENT_H
#define LOWKEY_CLI_AGENT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "internal/control.h"
#include "internal/ctf_reader.h"
#include "internal/trace_spans.h"

#define AGENT_MAX_GLOBS 64
#define AGENT_MAX_BUCKETS 64

/* --sample GLOB=RATE: num of every den spans of the sites glob matches are exported. */
struct agent_rate {
	char glob[LK_CTL_MAX_GLOB + 1]; /* provider:event, as -e */
	uint64_t num, den;
};

struct agent_opts {
	const char *listen; /* "HOST:PORT": IPv4, or [IPv6] */
	const char *otlp;   /* --otlp URL: spans to an OTLP/HTTP receiver; NULL: none */
	const char *globs[AGENT_MAX_GLOBS]; /* the sites enabled in each process, in order */
	int nglobs;
	const char *names[AGENT_MAX_GLOBS]; /* --process: the processes taken; none: every one */
	int nnames;
	double scan_s;			   /* how often /proc is looked through */
	unsigned int flush_ms;		   /* the traced process's consumer's period */
	uint64_t buffer;		   /* its per-thread rings (0: the library's default) */
	const char *spool;		   /* where the traces are written (a tmpfs) */
	double buckets[AGENT_MAX_BUCKETS]; /* histogram bounds, seconds, ascending */
	size_t nbuckets;
	unsigned int max_sites; /* sites per process before the rest fold into site="other" */
	unsigned int max_locks; /* lock names per process before the rest fold into lock="other" */
	unsigned int max_sets;	/* counter sets per process before the rest fold into set="other" */
	const char *locks_dir;	/* --locks-dir: where liblowkey-locks.so writes its tables */
	bool cputime;		/* record thread CPU time (costs the traced process per event) */
	unsigned int otlp_requests; /* --otlp-requests: at once; 0: the exporter's default */
	struct agent_rate rates[AGENT_MAX_GLOBS]; /* --sample, first match wins; none: 1 */
	int nrates;
	double slow_s;	 /* --slow: a span longer is slow (0: no tail sampling) */
	double window_s; /* and the spans within this of it are exported */
};

struct agent_hist {
	uint64_t *n; /* per bucket, not cumulative; [nbuckets]: past the last bound */
	uint64_t count;
	double sum;
};

/* One provider:event of a process (every kind: a span's begin and end are one site). */
struct agent_site {
	char *name; /* "provider:event", or "other" */
	uint64_t events;
	bool is_counter, has_spans;
	double value; /* a counter's last value */
	struct agent_hist wall, cpu;
	uint64_t sampled_out[2]; /* --otlp: spans not exported, by enum agent_sampled */
};

/*
 * The locks of one name in a process (lowkey/lock.h's named locks, or the pthread locks of a
 * table of liblowkey-locks.so), their figures summed, as the last poll found them; or "other", the
 * locks past max_locks.
 */
struct agent_lock {
	char *name;
	uint64_t acq, read_acq, contended, wait_ns, hold_ns, read_hold_ns;
	bool shared;  /* an rwlock among them: shared acquisitions and holds have series too */
	bool present; /* the last poll found a lock of this name */
};

/* A process's lock names: those with series of their own, in the order placed, and "other". */
struct agent_lockset {
	struct agent_lock *locks;
	size_t nlocks;
	size_t *index;		 /* open addressing on the name: index + 1 into locks, 0 empty */
	size_t index_size;	 /* a power of two, over twice nlocks */
	struct agent_lock other; /* the locks past max_locks, name "other" */
	uint64_t folded;	 /* lock names the last poll counted under "other" */
};

/*
 * The table liblowkey-locks.so keeps for a process run with it preloaded, a file of --locks-dir
 * (agent_preload.c). Its locks are named by their variable, or by where they were first taken.
 */
struct agent_table {
	pid_t pid;
	unsigned long long start; /* the process's start time (pinned) */
	char file[256];		  /* its name in the directory */
	dev_t dev;		  /* the file, as first found */
	ino_t ino;
	uint64_t image_ns; /* when the process image made it (a later exec() makes another) */
	char name[128];	   /* the process label: OTEL_SERVICE_NAME, else its comm */
	struct agent_lockset locks;
	struct agent_entry_name *names; /* by lock address and first site: index into locks */
	size_t nnames, names_size;
	bool gone; /* the process ended: shown in one more scrape */
	unsigned int scrapes_since_gone;
	double gone_at; /* CLOCK_MONOTONIC s */
};

/* One event of a counter set of a process (lk_counters_open*), or of the sets past max_sets. */
struct agent_perf {
	uint32_t set; /* the set's number in the process; 0: "other" */
	char *event;
	uint64_t value, enabled_ns, running_ns;
};
enum agent_sampled { AGENT_SAMPLED_RATE, AGENT_SAMPLED_TAIL };

/* A thread's stream file of a process's trace, read as it grows. */
struct agent_stream {
	char *name;
	struct lk__ctf_cursor cur;
	int fd;		  /* read-write: its size, and holes punched behind what was read */
	uint64_t punched; /* bytes from the start that are holes now */
	struct lk__pair_stack open; /* its open spans */
	struct agent_span_ids *ids; /* --otlp: the ids of its open spans, by depth */
	size_t ids_cap;
	char *thread_name;  /* --otlp: as its stream last named it */
	uint64_t slow_from; /* --slow: its outermost open span is slow; its window's start (ns) */
	bool damaged;	    /* not read on (an error message was printed) */
};

struct agent_proc {
	pid_t pid;
	unsigned long long start;   /* its start time (pinned) */
	char name[128];		    /* the process label: OTEL_SERVICE_NAME, else its comm */
	bool has_service;	    /* name is its OTEL_SERVICE_NAME */
	struct lk__ctl_client *ctl; /* NULL once disconnected */
	int dir_fd;		    /* its trace directory */
	char dir[64];		    /* the directory's name in the spool */
	struct lk__trace_reader r;
	bool have_reader;
	struct otlp_res *otlp_res; /* --otlp: the resource its spans are sent under */
	struct agent_keep *keep;   /* --sample: by class id, each site's rate and where it is */
	size_t nkeep;
	struct agent_recorder *rec; /* --slow: its spans held until they are known in or out */
	struct lk__pair_index pairs;
	uint32_t *site_of; /* by class id: index + 1 into sites; 0: not seen yet */
	size_t nsite_of;
	struct agent_stream *streams;
	size_t nstreams;
	struct agent_site *sites;
	size_t nsites;
	long other;		    /* index of site "other", -1: none */
	uint64_t folded;	    /* event classes folded into "other" */
	uint64_t lost;		    /* what its threads lost, all streams */
	struct agent_lockset locks; /* its named locks, summed by name, in the order met */
	uint32_t *own_sets; /* the counter sets with series of their own: the first max_sets */
	size_t nown_sets;
	struct agent_perf *perf; /* as the last poll read them */
	size_t nperf;
	uint64_t sets_folded; /* counter sets the last poll counted under "other" */
	size_t nsets;	      /* counter sets the last poll found */
	bool exiting;	      /* it said it exits, or its connection closed: read what is left */
	bool exited;	      /* read to the end; its series go after one more scrape */
	unsigned int scrapes_since_exit;
	double exited_at; /* CLOCK_MONOTONIC s */
};

/* A process looked at and not followed: not asking for a socket, or not attached to (failed). */
struct agent_seen {
	pid_t pid;
	unsigned long long start;
	bool failed;
};

struct agent {
	const struct agent_opts *o;
	pthread_mutex_t lock; /* procs, each process's state, the counts below */
	struct agent_proc **procs;
	size_t nprocs;
	struct agent_seen *ignored; /* processes looked at and not followed (agent_scan.c) */
	size_t nignored;
	int spool_fd; /* this agent's directory in the spool */
	char spool[PATH_MAX];
	uint64_t attach_failures;
	struct otlp_exporter *otlp;  /* --otlp */
	uint64_t sampled_out[2];     /* spans not exported, by enum agent_sampled */
	uint64_t recorder_full;	     /* of the tail's, those decided early: a recorder was full */
	uint64_t traces;	     /* traces started, numbering their directories */
	struct agent_table **tables; /* --locks-dir: the tables of live processes, and just ended */
	size_t ntables;
	uint64_t clock_ns,
		clock_ticks; /* CLOCK_MONOTONIC and the lock counter as the agent began */
};

/* ---- agent_scan.c ---- */

/* --process: pid's comm or OTEL_SERVICE_NAME matches a glob (none given: every process). */
bool agent_named(const struct agent *a, pid_t pid);

/* Look through /proc for processes to follow, and attach to each new one (under a->lock). */
void agent_scan(struct agent *a);

/* A process's start time (/proc/PID/stat), 0 if it cannot be read. */
unsigned long long agent_start_time(pid_t pid);

/* ---- agent_proc.c ---- */

/* Variable name of pid's environment into out, if it can be read here and is set, not empty. */
bool agent_proc_env(pid_t pid, const char *name, char *out, size_t len);

/*
 * Connect to process pid, enable the sites, start a trace into a directory of the spool and open
 * it: the process, or NULL with err (the process is left as it was).
 */
struct agent_proc *agent_attach(struct agent *a, pid_t pid, char *err, size_t errlen);

/* Read every whole packet the process's streams have now; notice its exit. */
void agent_read(struct agent *a, struct agent_proc *p);

/*
 * Ask whether its trace still runs: one that stopped (a full spool: the library's rule for a full
 * disk) or a process that does not answer (a bounded wait) is read to the end and detached; a
 * process still running is attached again at the next scan, with a new trace.
 */
void agent_check(struct agent_proc *p);

/* Stop its trace (waiting a bounded time), disconnect, remove its directory, free it. */
void agent_proc_free(struct agent *a, struct agent_proc *p, bool stop);

/* ---- agent_figures.c ---- */

/*
 * Ask the process for its locks' and counter sets' figures (two requests, each answered from the
 * module's registry by the process's control thread) and keep them for /metrics (under a->lock).
 * A process that does not answer within the bound is read to the end and left, as agent_check.
 */
void agent_poll_figures(struct agent *a, struct agent_proc *p);

void agent_figures_free(struct agent_proc *p);

/* The lowkey_lock_* and lowkey_perf_event_* families. Under a->lock. */
void agent_figures_render(struct agent *a, FILE *f, bool openmetrics);

/*
 * The entry the locks of name go to: their own, made while set has fewer than max_locks names,
 * else "other" (*folded). Names keep their entries for the process's life, so a name keeps its
 * series when its locks come back. NULL when out of memory. Under a->lock.
 */
struct agent_lock *agent_place_lock(struct agent *a, struct agent_lockset *set, const char *name,
				    bool *folded);

/* The figures of the last poll forgotten, the names kept. */
void agent_lockset_clear(struct agent_lockset *set);
void agent_lockset_free(struct agent_lockset *set);

/* ---- agent_preload.c: the tables of liblowkey-locks.so (--locks-dir) ---- */

#ifdef LK_HAVE_LIBDW
/*
 * Read the tables in --locks-dir: each one of a live process that may be followed (its file's
 * owner's, root's files trusted too, and named as --process asks), validated, its figures kept
 * for /metrics; a table whose process ended read a last time and marked gone. Takes a->lock to
 * change what /metrics shows.
 */
void agent_preload_scan(struct agent *a);
#else
static inline void agent_preload_scan(struct agent *a)
{
	(void)a;
}
#endif

/* Whether the renderer shows t: its process lives, or it ended and was not shown since. */
bool agent_table_shown(const struct agent_table *t);
void agent_table_free(struct agent_table *t);

/* ---- agent_metrics.c ---- */

/* The site of class cls in p (made, or "other" past the cap): NULL when out of memory. */
struct agent_site *agent_site_of(struct agent *a, struct agent_proc *p,
				 const struct lk__event_class *cls);

void agent_hist_add(const struct agent_opts *o, struct agent_hist *h, double v);
void agent_sites_free(struct agent_proc *p);

struct family {
	const char *name, *type, *unit, *help;
};

/* A family's # HELP, # TYPE and (OpenMetrics) # UNIT lines. */
void agent_put_family(FILE *f, const struct family *fam, bool om);

/* A label's value, escaped as both formats want. */
void agent_put_label(FILE *f, const char *str);

/* pid="PID",process="NAME" */
void agent_put_proc_labels(FILE *f, const struct agent_proc *p);

/* Whether the renderer shows p: attached, or exited and not yet shown since. */
bool agent_shown(const struct agent_proc *p);
/* pid="PID",process="NAME",site="SITE" (or "other", folded): a site's labels. */
void agent_put_site_labels(FILE *f, const struct agent_proc *p, const struct agent_site *s);

/*
 * /metrics as text (malloc()ed, *len bytes): OpenMetrics 1.0 if openmetrics, else Prometheus'
 * text format 0.0.4. Takes a->lock. The series of a process that exited are in the first
 * rendering after its exit, and in none after. NULL when out of memory.
 */
char *agent_render(struct agent *a, bool openmetrics, size_t *len);

/* ---- agent_otlp.c: spans and events to an OTLP/HTTP receiver (--otlp) ---- */

struct agent_span_ids {
	uint8_t trace[16], span[8];
};

struct otlp_span;

#ifdef LK_HAVE_OTLP
/* The exporter for --otlp: 0, or -1 with err. */
int agent_otlp_start(struct agent *a, char *err, size_t errlen);
/* Send what is queued (a bounded wait) and free the exporter. */
void agent_otlp_stop(struct agent *a);
/* The resource of p's spans: its service name, pid and executable. */
void agent_otlp_attach(struct agent *a, struct agent_proc *p);
/* Its spans held for --slow counted as sampled out, its resource given back. */
void agent_otlp_detach(struct agent *a, struct agent_proc *p);
/* A span begins on st at depth st->open.depth: its ids, in its parent's trace. */
void agent_otlp_begin(struct agent *a, struct agent_stream *st);
/* The open span at depth k of st ends with e: exported. */
void agent_otlp_end(struct agent *a, struct agent_proc *p, struct agent_stream *st, size_t k,
		    const struct lk__event *e);
/* An LK_PROBE event (exported as a zero-length span), or the thread's name record. */
void agent_otlp_event(struct agent *a, struct agent_proc *p, struct agent_stream *st,
		      const struct lk__event *e);
void agent_otlp_stream_free(struct agent_stream *st);
/* The exporter's lowkey_agent_otlp_* series. */
void agent_otlp_render(struct agent *a, FILE *f, bool openmetrics);
/* The trace's counter value tsc as CLOCK_REALTIME ns. */
uint64_t agent_otlp_unix_ns(const struct lk__trace_reader *r, uint64_t tsc);
/* The exporter's counts on stderr, as the agent stops (before agent_otlp_stop). */
void agent_otlp_summary(struct agent *a);

/* ---- agent_sample.c: which spans are exported (--sample, --slow) ---- */

/* s, a span (or an event) of class cls of p: exported now, held for --slow, or sampled out. */
void agent_sample(struct agent *a, struct agent_proc *p, const struct lk__event_class *cls,
		  const struct otlp_span *s);
/* The outermost open span of st ends: it no longer holds a window open. */
void agent_sample_outer_end(struct agent_proc *p, struct agent_stream *st);
/* After each read of p: open spans found slow, held spans decided (all of them once p exited). */
void agent_sample_pass(struct agent *a, struct agent_proc *p);
/* p's sampling state freed: what it still holds counted as sampled out. */
void agent_sample_free(struct agent *a, struct agent_proc *p);
/* lowkey_agent_otlp_spans_sampled_out_total and the recorders' series. */
void agent_sample_render(struct agent *a, FILE *f, bool openmetrics);
#else
/* Without the exporter (a build without it) there is no --otlp: nothing to do. */
static inline void agent_otlp_attach(struct agent *a, struct agent_proc *p)
{
	(void)a, (void)p;
}
static inline void agent_otlp_detach(struct agent *a, struct agent_proc *p)
{
	(void)a, (void)p;
}
static inline void agent_otlp_begin(struct agent *a, struct agent_stream *st)
{
	(void)a, (void)st;
}
static inline void agent_otlp_end(struct agent *a, struct agent_proc *p, struct agent_stream *st,
				  size_t k, const struct lk__event *e)
{
	(void)a, (void)p, (void)st, (void)k, (void)e;
}
static inline void agent_otlp_event(struct agent *a, struct agent_proc *p, struct agent_stream *st,
				    const struct lk__event *e)
{
	(void)a, (void)p, (void)st, (void)e;
}
static inline void agent_otlp_stream_free(struct agent_stream *st)
{
	(void)st;
}
static inline void agent_sample_pass(struct agent *a, struct agent_proc *p)
{
	(void)a, (void)p;
}
#endif

/* ---- agent_http.c ---- */

struct agent_http;

/*
 * Serve /metrics at addr ("HOST:PORT"; port 0: any free one) on a thread of its own: the server,
 * or NULL with err. *port: the port bound.
 */
struct agent_http *agent_http_start(struct agent *a, const char *addr, unsigned int *port,
				    char *err, size_t errlen);
void agent_http_stop(struct agent_http *h);

#endif
