// SPDX-License-Identifier: MIT
/*
 * lowkey locks -- COMMAND: lock contention in any dynamically linked program.
 *
 * Runs COMMAND with liblowkey-locks.so preloaded (src/lock/preload/) and $LOWKEY_LOCKS_DIR set to
 * a private directory. Every process image of the command (fork children and exec()ed programs
 * included) writes its figures to its own file there as it goes (include/internal/lock_file.h). When COMMAND ends, the
 * files are read, call sites symbolized, and a report printed per process, most waited-for lock
 * first.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lock.h>

#include "builtin.h"
#include "internal/json.h"
#include "internal/outfile.h"
#include "internal/utf8.h"
#include "util/locks.h"
#include "util/locks_html.h"
#include "lowkey-locks-paths.h"
#include "util/probe_elf.h"
#include "util/symbolize.h"

static const char locks_usage[] =
	"usage: lowkey locks [--top N] [-j|--json] [-o FILE] [--hold-sampling N] [--max-locks N] [--] COMMAND [ARGS...]\n"
	"\n"
	"Runs COMMAND with liblowkey-locks.so preloaded and, when it ends, reports the contention on every\n"
	"pthread mutex, rwlock and spinlock, condition-variable re-acquisition and POSIX semaphore it used:\n"
	"per lock, acquisitions, how many were contended, the time spent waiting (total, max, mean), the time\n"
	"the lock was held (total, max, mean) and how often it changed hands, most waited-for lock first.\n"
	"Each lock is named by its address and the call site of its first contended acquisition. Fork\n"
	"children and programs COMMAND executes are profiled too, one report per process.\n"
	"\n"
	"Options:\n"
	"  --top N            locks to show per process, most waited-for first (default 10; 0: all)\n"
	"  -j, --json         print the report as JSON\n"
	"  -o, --output FILE  write the report to FILE (default: standard error)\n"
	"  --html OUT         also write it as one self-contained HTML page to OUT: a bar chart of the\n"
	"                     locks' wait and hold times, and the table with their call sites\n"
	"  --hold-sampling N  time one hold in N (default 16; 1 times every hold: exact, slower)\n"
	"  --max-locks N      locks tracked per process (default 65536); more are counted, not named\n"
	"\n"
	"The program runs unmodified: error codes, recursive, error-checking and robust mutexes behave as\n"
	"without lowkey. Statically linked and set-user-ID programs cannot be profiled (the dynamic loader\n"
	"ignores LD_PRELOAD for them). Call sites are named with libdw when it is installed and the\n"
	"program has symbols; build with -g for file:line.\n"
	"\n"
	"Environment: LOWKEY_LOCKS_LIB overrides where liblowkey-locks.so is looked for.\n"
	"Exit status: COMMAND's own (128 + the signal if one killed it), 127 if it was not found, 126 if it\n"
	"could not be executed, 1 if lowkey could not profile it or write the report, 2 on bad usage.\n"
	"A process is shown as ended by exit(), by _exit() (its exit handlers did not run), by exec() of\n"
	"another program, or by a signal, as far as lowkey can tell.\n";

struct options {
	long top;
	bool json;
	const char *output;
	const char *html;
	long hold_sampling;
	long max_locks;
};

/* ---- finding the library and checking the command ---- */

static bool readable(const char *path)
{
	return path && access(path, R_OK) == 0;
}

static const char *find_preload(char *buf, size_t len)
{
	const char *env = getenv("LOWKEY_LOCKS_LIB");
	char exe[PATH_MAX];
	ssize_t n;

	if (env)
		return readable(env) ? env : NULL;
	/* installed next to us: BINDIR/../LIBDIR */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		char *slash;

		exe[n] = 0;
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			if (snprintf(buf, len, "%s/../%s/liblowkey-locks.so", exe,
				     LK_LOCKS_LIBDIR) < (int)len &&
			    readable(buf))
				return buf;
		}
	}
	if (readable(LK_LOCKS_PRELOAD_BUILD))
		return LK_LOCKS_PRELOAD_BUILD;
	if (readable(LK_LOCKS_PRELOAD_INSTALL))
		return LK_LOCKS_PRELOAD_INSTALL;
	return NULL;
}

/* The file execvp() would run, or NULL. */
static bool which(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return access(out, X_OK) == 0;
	}
	for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; p && *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);

		snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", cmd);
		if (access(out, X_OK) == 0)
			return true;
		p = colon ? colon + 1 : NULL;
	}
	return false;
}

/* Whether path is an ELF executable without a program interpreter: LD_PRELOAD cannot reach it. */
static bool statically_linked(const char *path)
{
	Elf64_Ehdr eh;
	bool is_static = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_phentsize == sizeof(Elf64_Phdr)) {
		is_static = true;
		for (unsigned int i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;

			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			    (ssize_t)sizeof(ph))
				break;
			if (ph.p_type == PT_INTERP)
				is_static = false;
		}
	}
	close(fd);
	return is_static;
}

/* ---- running it ---- */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int make_dir(char *dir, size_t len)
{
	const char *bases[] = { "/dev/shm", getenv("TMPDIR"), "/tmp" };

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i] || access(bases[i], W_OK) != 0)
			continue;
		snprintf(dir, len, "%s/lowkey-locks.XXXXXX", bases[i]);
		if (mkdtemp(dir))
			return 0;
	}
	return -errno;
}

static void child_environment(const char *lib, const char *dir, const struct options *o)
{
	const char *old = getenv("LD_PRELOAD");
	char *preload;
	char num[32];

	if (old && *old) {
		if (asprintf(&preload, "%s:%s", lib, old) < 0)
			_exit(127);
		setenv("LD_PRELOAD", preload, 1);
	} else {
		setenv("LD_PRELOAD", lib, 1);
	}
	setenv("LOWKEY_LOCKS_DIR", dir, 1);
	if (o->hold_sampling) {
		snprintf(num, sizeof(num), "%ld", o->hold_sampling);
		setenv("LOWKEY_LOCK_HOLD_SAMPLING", num, 1);
	}
	if (o->max_locks) {
		snprintf(num, sizeof(num), "%ld", o->max_locks);
		setenv("LOWKEY_LOCKS_MAX", num, 1);
	}
}

/* Run argv; its wait status, or -errno if it could not be started (exec's errno through a pipe). */
static int run(char **argv, const char *lib, const char *dir, const struct options *o, pid_t *child)
{
	struct sigaction ignore = { .sa_handler = SIG_IGN }, old_int, old_quit;
	int pipefd[2], status = 0, exec_errno = 0;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -errno;
	}
	if (pid == 0) {
		close(pipefd[0]);
		child_environment(lib, dir, o);
		execvp(argv[0], argv);
		exec_errno = errno;
		if (write(pipefd[1], &exec_errno, sizeof(exec_errno)) < 0)
			_exit(127);
		_exit(127);
	}
	*child = pid;
	close(pipefd[1]);
	/* like time(1): ^C goes to the command, and we live on to report */
	sigaction(SIGINT, &ignore, &old_int);
	sigaction(SIGQUIT, &ignore, &old_quit);
	if (read(pipefd[0], &exec_errno, sizeof(exec_errno)) != (ssize_t)sizeof(exec_errno))
		exec_errno = 0;
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	return exec_errno ? -exec_errno : status;
}

/* ---- reading the files ---- */

struct row {
	const struct lkl_entry *e;
	enum lkl_kind kind;
	uint64_t address;
	bool destroyed;
	uint64_t acquisitions; /* all kinds of acquisition */
	uint64_t wait_ns, wait_max_ns, wait_mean_ns;
	uint64_t hold_ns, hold_max_ns, hold_mean_ns;
	uint64_t read_hold_ns, read_hold_max_ns, read_hold_mean_ns;
	struct lks_site site, first_site;
};

/* How a process image ended, as far as its file and the command's wait status tell. */
enum ending {
	ENDED_EXIT,	  /* exit() or a return from main: the library's destructor ran */
	ENDED_EXEC,	  /* it exec()ed: a later file has its pid */
	ENDED_UNDER_EXIT, /* _exit(): the command's own process, which exited without destructors */
	ENDED_SIGNAL,	  /* the command's own process, killed */
	ENDED_UNKNOWN,	  /* another process without the mark: _exit() or a signal */
};

struct proc {
	char path[PATH_MAX];
	void *data; /* the file, read */
	size_t size;
	const struct lkl_header *h;
	const struct lkl_entry *entries;
	const struct lkl_module *modules;
	uint32_t nmodules;
	struct row *rows;
	size_t nrows;
	uint64_t nlocks; /* rows, and destroyed locks folded into the header */
	uint64_t duration_ns;
	uint64_t acquisitions, contended, wait_ns;
	enum ending ended;
};

/* _exit(), exec() and signals leave no mark in the file (LKL_F_EXITED is set by the destructor). */
static enum ending ending_of(const struct proc *p, const struct proc *all, size_t n, pid_t command,
			     int status)
{
	if (p->h->flags & LKL_F_EXITED)
		return ENDED_EXIT;
	for (size_t i = 0; i < n; i++)
		if (all[i].h->pid == p->h->pid && all[i].h->start_ns > p->h->start_ns)
			return ENDED_EXEC;
	if (p->h->pid == (uint32_t)command)
		return WIFSIGNALED(status) ? ENDED_SIGNAL : ENDED_UNDER_EXIT;
	return ENDED_UNKNOWN;
}

static const char *ending_name(enum ending e)
{
	static const char *const names[] = { "exit", "exec", "_exit", "signal", "_exit or signal" };

	return names[e];
}

/* What the summary line says about the end: nothing for a plain exit. */
static const char *ending_note(enum ending e)
{
	static const char *const notes[] = {
		"",
		" [exec'd another program]",
		" [ended by _exit(): no exit handlers ran]",
		" [killed by a signal]",
		" [ended without exit handlers: _exit() or a signal]",
	};

	return notes[e];
}

static const char *validate(const struct lkl_header *h, size_t size)
{
	if (size < LKL_HEADER_SIZE)
		return "shorter than its header";
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != LKL_MAGIC)
		return "no lowkey locks header (the process died while starting?)";
	if (h->version != LKL_VERSION)
		return "written by another version of liblowkey-locks.so";
	if (h->header_size != LKL_HEADER_SIZE || h->entry_size != LKL_ENTRY_SIZE)
		return "unexpected header or entry size";
	if (!h->capacity || (h->capacity & (h->capacity - 1)) || h->capacity > (1u << 24))
		return "bad table capacity";
	if (size < lkl_file_size(h->capacity) ||
	    h->modules_offset != LKL_HEADER_SIZE + (uint64_t)h->capacity * LKL_ENTRY_SIZE)
		return "truncated";
	return NULL;
}

/*
 * The whole file, read rather than mapped: a process that cut its file while lowkey had it mapped
 * would kill lowkey with SIGBUS. A file cut meanwhile is read as far as it goes (validate() says
 * it is truncated). NULL, or the reason why not.
 */
static const char *read_table(int fd, size_t size, struct proc *p)
{
	size_t got = 0;

	if (size > lkl_file_size(1u << 24))
		return "larger than any table liblowkey-locks.so writes";
	p->data = malloc(size);
	if (!p->data)
		return "out of memory";
	while (got < size) {
		ssize_t n = pread(fd, (char *)p->data + got, size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return "cannot be read";
		if (n == 0)
			break;
		got += (size_t)n;
	}
	p->size = got;
	return NULL;
}

static int load_proc(const char *path, struct proc *p)
{
	const char *bad;
	struct stat st;
	int fd = open_regular_file(path, NULL, 0);

	memset(p, 0, sizeof(*p));
	snprintf(p->path, sizeof(p->path), "%s", path);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0 || st.st_size <= 0) {
		close(fd);
		return -EINVAL;
	}
	bad = read_table(fd, (size_t)st.st_size, p);
	close(fd);
	p->h = p->data;
	if (!bad)
		bad = validate(p->h, p->size);
	if (bad) {
		cli_error("locks", NULL, "skipping %s: %s", path, bad);
		return -EINVAL;
	}
	p->entries = (const struct lkl_entry *)((const char *)p->data + LKL_HEADER_SIZE);
	p->modules = (const struct lkl_module *)((const char *)p->data + p->h->modules_offset);
	p->nmodules = p->h->nmodules < LKL_MAX_MODULES ? p->h->nmodules : LKL_MAX_MODULES;
	return 0;
}

static uint64_t to_ns(uint64_t ticks, double ticks_per_ns)
{
	return (uint64_t)((double)ticks / ticks_per_ns + 0.5);
}

static uint64_t mean(uint64_t total, uint64_t n)
{
	return n ? (total + n / 2) / n : 0;
}

/* sampled holds: mean x count, exact when every hold was timed */
static void holds(uint64_t samples, uint64_t total, uint64_t max, uint64_t count, double tpn,
		  uint64_t *total_ns, uint64_t *max_ns, uint64_t *mean_ns)
{
	double m = samples ? (double)total / (double)samples : 0;

	*mean_ns = to_ns((uint64_t)(m + 0.5), tpn);
	*max_ns = to_ns(max, tpn);
	*total_ns = samples >= count ? to_ns(total, tpn) :
				       to_ns((uint64_t)(m * (double)count), tpn);
}

static int by_wait(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->wait_ns != y->wait_ns)
		return x->wait_ns < y->wait_ns ? 1 : -1;
	if (x->acquisitions != y->acquisitions)
		return x->acquisitions < y->acquisitions ? 1 : -1;
	return x->address < y->address ? -1 : x->address > y->address;
}

/* ---- naming call sites ---- */

static const char *module_path(const struct lkl_header *h, const struct lkl_module *m)
{
	return m->path[0] ? m->path : h->exe;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The objects the process wrote down, for libdw; NULL: no memory (then no symbols). */
static struct symbolizer *open_symbolizer(const struct proc *p)
{
	struct symbol_object *objects = calloc(p->nmodules ? p->nmodules : 1, sizeof(*objects));
	struct symbolizer *s;

	if (!objects)
		return NULL;
	for (uint32_t i = 0; i < p->nmodules; i++)
		objects[i] = (struct symbol_object){ module_path(p->h, &p->modules[i]),
						     p->modules[i].bias };
	s = symbolizer_open_objects(objects, p->nmodules);
	free(objects);
	return s;
}

/*
 * A call site by its return address: the object and offset from the process's own table (so
 * without libdw or debug information a site is still "libfoo.so.1+0x1a2b", for addr2line later),
 * the function and file:line from libdw where it knows them.
 */
static void name_site(const struct proc *p, struct symbolizer *sym, uint64_t ra,
		      struct lks_site *out)
{
	/* a return address points after the call: look up the call itself */
	uint64_t addr = ra ? ra - 1 : 0;
	const struct lkl_module *m = NULL;
	struct symbol_place place;

	memset(out, 0, sizeof(*out));
	out->address = ra;
	if (!ra)
		return;
	for (uint32_t i = 0; i < p->nmodules; i++)
		if (addr >= p->modules[i].start && addr < p->modules[i].end)
			m = &p->modules[i];
	if (m) {
		snprintf(out->module, sizeof(out->module), "%.63s",
			 base_name(module_path(p->h, m)));
		out->offset = ra - m->bias;
	}
	if (!sym)
		return;
	symbolizer_place(sym, addr, false, &place);
	if (place.function)
		snprintf(out->function, sizeof(out->function), "%s", place.function);
	if (place.file) {
		snprintf(out->file, sizeof(out->file), "%s", base_name(place.file));
		out->line = place.line;
	}
}

/* The names come from the program's files: escaped (lk__text_escape). */
static const char *site_string(const struct lks_site *site, char *buf, size_t len)
{
	char raw[1024];

	if (!site->address)
		snprintf(raw, sizeof(raw), "?");
	else if (site->function[0] && site->file[0])
		snprintf(raw, sizeof(raw), "%s (%s:%d)", site->function, site->file, site->line);
	else if (site->function[0])
		snprintf(raw, sizeof(raw), "%s (%s)", site->function, site->module);
	else if (site->module[0])
		snprintf(raw, sizeof(raw), "%s+0x%lx", site->module, (unsigned long)site->offset);
	else
		snprintf(raw, sizeof(raw), "0x%lx", (unsigned long)site->address);
	return lk__text_escape(raw, buf, len);
}

static int build_rows(struct proc *p, double tpn, uint64_t end_ns)
{
	const struct lkl_header *h = p->h;
	struct symbolizer *sym;
	size_t n = 0;

	p->duration_ns = (h->flags & LKL_F_EXITED) && h->end_ns > h->start_ns ?
				 h->end_ns - h->start_ns :
				 (end_ns > h->start_ns ? end_ns - h->start_ns : 0);
	p->rows = calloc(h->capacity, sizeof(*p->rows));
	if (!p->rows)
		return -ENOMEM;
	for (uint32_t i = 0; i < h->capacity; i++) {
		const struct lkl_entry *e = &p->entries[i];
		struct row *r;

		if (!e->key ||
		    !(e->acquisitions || e->read_acquisitions || e->try_fails || e->posts))
			continue;
		r = &p->rows[n++];
		r->e = e;
		r->kind = (enum lkl_kind)(e->key & LKL_KIND_MASK);
		r->address = e->key & ~(LKL_KIND_MASK | LKL_RETIRED);
		r->destroyed = e->key & LKL_RETIRED;
		r->acquisitions = e->acquisitions + e->read_acquisitions;
		r->wait_ns = to_ns(e->wait_total, tpn);
		r->wait_max_ns = to_ns(e->wait_max, tpn);
		r->wait_mean_ns = mean(r->wait_ns, e->contended);
		holds(e->hold_samples, e->hold_total, e->hold_max, e->acquisitions, tpn,
		      &r->hold_ns, &r->hold_max_ns, &r->hold_mean_ns);
		holds(e->read_hold_samples, e->read_hold_total, e->read_hold_max,
		      e->read_acquisitions, tpn, &r->read_hold_ns, &r->read_hold_max_ns,
		      &r->read_hold_mean_ns);
		p->acquisitions += r->acquisitions;
		p->contended += e->contended;
		p->wait_ns += r->wait_ns;
	}
	p->nrows = n;
	p->nlocks = n + h->folded_locks;
	p->acquisitions += h->folded_acquisitions;
	if (n)
		qsort(p->rows, n, sizeof(*p->rows), by_wait);
	sym = n ? open_symbolizer(p) : NULL;
	for (size_t i = 0; i < n; i++) {
		name_site(p, sym, p->rows[i].e->site, &p->rows[i].site);
		name_site(p, sym, p->rows[i].e->first_site, &p->rows[i].first_site);
	}
	symbolizer_close(sym);
	return 0;
}

/* ---- the report ---- */

static const char *kind_name(enum lkl_kind k)
{
	static const char *const names[] = { "mutex", "rwlock", "spinlock", "semaphore" };

	return names[k & LKL_KIND_MASK];
}

static const char *duration(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, len, "%luns", (unsigned long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
	return buf;
}

static double per_mille_cpu(uint64_t wait_ns, const struct proc *p)
{
	uint32_t cpus = p->h->cpus ? p->h->cpus : 1;

	return p->duration_ns ? 1000.0 * (double)wait_ns / ((double)p->duration_ns * cpus) : 0;
}

static size_t shown(const struct proc *p, const struct options *o)
{
	return o->top > 0 && (size_t)o->top < p->nrows ? (size_t)o->top : p->nrows;
}

static void print_text(FILE *out, const struct proc *p, const struct options *o)
{
	const struct lkl_header *h = p->h;
	char a[16], b[16], c[16], d[16], e2[16], f[16], site[400], first[400],
		name[4 * sizeof(h->exe)];
	size_t n = shown(p, o);

	fprintf(out,
		"\nlowkey locks: %s (pid %u)%s, %s on %u CPUs: %lu lock%s, %lu acquisitions, %lu contended (%.2f%%), "
		"%s waiting = %.1f/1000 of CPU time\n",
		lk__text_escape(h->comm[0] ? h->comm : h->exe, name, sizeof(name)), h->pid,
		ending_note(p->ended), duration(a, sizeof(a), p->duration_ns), h->cpus,
		(unsigned long)p->nlocks, p->nlocks == 1 ? "" : "s", (unsigned long)p->acquisitions,
		(unsigned long)p->contended,
		p->acquisitions ? 100.0 * (double)p->contended / (double)p->acquisitions : 0,
		duration(b, sizeof(b), p->wait_ns), per_mille_cpu(p->wait_ns, p));
	if (!n)
		return;
	fprintf(out, "%3s %-28s %10s %9s %6s %9s %9s %9s %9s %9s %9s %8s %8s\n", "#", "lock",
		"acquired", "contended", "%", "wait tot", "wait max", "wait avg", "hold tot",
		"hold max", "hold avg", "owners", "1/1000");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &p->rows[i];
		const struct lkl_entry *e = r->e;
		char label[64];

		snprintf(label, sizeof(label), "%s %#lx%s", kind_name(r->kind),
			 (unsigned long)r->address, r->destroyed ? " (gone)" : "");
		fprintf(out, "%3zu %-28s %10lu %9lu %5.1f%% %9s %9s %9s %9s %9s %9s %8lu %8.2f\n",
			i + 1, label, (unsigned long)r->acquisitions, (unsigned long)e->contended,
			r->acquisitions ? 100.0 * (double)e->contended / (double)r->acquisitions :
					  0,
			duration(a, sizeof(a), r->wait_ns), duration(b, sizeof(b), r->wait_max_ns),
			duration(c, sizeof(c), r->wait_mean_ns), duration(d, sizeof(d), r->hold_ns),
			duration(e2, sizeof(e2), r->hold_max_ns),
			duration(f, sizeof(f), r->hold_mean_ns), (unsigned long)e->owner_changes,
			per_mille_cpu(r->wait_ns, p));
		if (e->site)
			fprintf(out, "    contended first at %s",
				site_string(&r->site, site, sizeof(site)));
		else
			fprintf(out, "    never contended; first taken at %s",
				site_string(&r->first_site, first, sizeof(first)));
		if (r->kind == LKL_RWLOCK)
			fprintf(out, "; %lu reads (held %s, max %s), %lu writes",
				(unsigned long)e->read_acquisitions,
				duration(a, sizeof(a), r->read_hold_ns),
				duration(b, sizeof(b), r->read_hold_max_ns),
				(unsigned long)e->acquisitions);
		if (e->cond_reacquires)
			fprintf(out, "; %lu re-taken by condition waits",
				(unsigned long)e->cond_reacquires);
		if (e->try_fails)
			fprintf(out, "; %lu failed try-locks", (unsigned long)e->try_fails);
		if (r->kind == LKL_SEM)
			fprintf(out, "; %lu posts", (unsigned long)e->posts);
		fputc('\n', out);
	}
	if (n < p->nrows)
		fprintf(out, "    ... and %zu more locks (--top 0 shows all)\n", p->nrows - n);
	if (h->folded_locks)
		fprintf(out,
			"    %lu destroyed locks that were never contended are not listed (%lu acquisitions)\n",
			(unsigned long)h->folded_locks, (unsigned long)h->folded_acquisitions);
	if (h->untracked)
		fprintf(out,
			"    %lu acquisitions of locks beyond the table's %u entries were not counted: raise --max-locks\n",
			(unsigned long)h->untracked, h->capacity);
	if (h->hold_period > 1)
		fprintf(out,
			"    hold times: one hold in %u timed, totals are mean x acquisitions (--hold-sampling 1 times all)\n",
			h->hold_period);
}

static void json_site(struct lk__json *j, const char *key, const struct lks_site *s)
{
	char addr[32];

	if (!s->address) {
		lk__json_null(j, key);
		return;
	}
	lk__json_object(j, key);
	snprintf(addr, sizeof(addr), "%#lx", (unsigned long)s->address);
	lk__json_str(j, "address", addr);
	lk__json_str(j, "module", s->module);
	lk__json_int(j, "offset", (long long)s->offset);
	if (s->function[0])
		lk__json_str(j, "function", s->function);
	else
		lk__json_null(j, "function");
	if (s->file[0]) {
		lk__json_str(j, "file", s->file);
		lk__json_int(j, "line", s->line);
	}
	lk__json_close(j);
}

static void print_json_proc(struct lk__json *j, const struct proc *p, const struct options *o)
{
	const struct lkl_header *h = p->h;
	size_t n = shown(p, o);

	lk__json_object(j, NULL);
	lk__json_int(j, "pid", h->pid);
	lk__json_int(j, "ppid", h->ppid);
	lk__json_str(j, "command", h->comm);
	lk__json_str(j, "executable", h->exe);
	lk__json_bool(j, "exited", h->flags & LKL_F_EXITED);
	lk__json_str(j, "ended", ending_name(p->ended));
	lk__json_int(j, "duration_ns", (long long)p->duration_ns);
	lk__json_int(j, "cpus", h->cpus);
	lk__json_int(j, "hold_sampling", h->hold_period);
	lk__json_int(j, "locks", (long long)p->nlocks);
	lk__json_int(j, "acquisitions", (long long)p->acquisitions);
	lk__json_int(j, "contended", (long long)p->contended);
	lk__json_int(j, "wait_total_ns", (long long)p->wait_ns);
	lk__json_num(j, "wait_per_mille_cpu", per_mille_cpu(p->wait_ns, p));
	lk__json_int(j, "untracked_acquisitions", (long long)h->untracked);
	lk__json_int(j, "destroyed_uncontended_locks", (long long)h->folded_locks);
	lk__json_array(j, "top");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &p->rows[i];
		const struct lkl_entry *e = r->e;
		char addr[32];

		lk__json_object(j, NULL);
		lk__json_str(j, "kind", kind_name(r->kind));
		snprintf(addr, sizeof(addr), "%#lx", (unsigned long)r->address);
		lk__json_str(j, "address", addr);
		lk__json_bool(j, "destroyed", r->destroyed);
		json_site(j, "site", &r->site);
		json_site(j, "first_site", &r->first_site);
		lk__json_int(j, "acquisitions", (long long)r->acquisitions);
		lk__json_int(j, "read_acquisitions", (long long)e->read_acquisitions);
		lk__json_int(j, "contended", (long long)e->contended);
		lk__json_num(j, "contended_pct",
			     r->acquisitions ?
				     100.0 * (double)e->contended / (double)r->acquisitions :
				     0);
		lk__json_int(j, "wait_total_ns", (long long)r->wait_ns);
		lk__json_int(j, "wait_max_ns", (long long)r->wait_max_ns);
		lk__json_int(j, "wait_mean_ns", (long long)r->wait_mean_ns);
		lk__json_int(j, "hold_samples", (long long)e->hold_samples);
		lk__json_int(j, "hold_total_ns", (long long)r->hold_ns);
		lk__json_int(j, "hold_max_ns", (long long)r->hold_max_ns);
		lk__json_int(j, "hold_mean_ns", (long long)r->hold_mean_ns);
		lk__json_int(j, "read_hold_total_ns", (long long)r->read_hold_ns);
		lk__json_int(j, "read_hold_max_ns", (long long)r->read_hold_max_ns);
		lk__json_int(j, "owner_changes", (long long)e->owner_changes);
		lk__json_int(j, "cond_reacquires", (long long)e->cond_reacquires);
		lk__json_int(j, "failed_trylocks", (long long)e->try_fails);
		lk__json_int(j, "posts", (long long)e->posts);
		lk__json_num(j, "wait_per_mille_cpu", per_mille_cpu(r->wait_ns, p));
		lk__json_close(j);
	}
	lk__json_close(j);
	lk__json_close(j);
}

/* ---- putting it together ---- */

static int by_start(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;

	return x->h->start_ns < y->h->start_ns ? -1 : x->h->start_ns > y->h->start_ns;
}

/* Every valid file in dir, loaded; the files are removed as they are read. */
static int load_dir(const char *dir, struct proc **out, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct proc *v = NULL;
	size_t n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		struct proc *grown;
		size_t len = strlen(de->d_name);

		if (len < 5 || strcmp(de->d_name + len - 4, ".lkl") != 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		grown = realloc(v, (n + 1) * sizeof(*v));
		if (!grown)
			break;
		v = grown;
		if (load_proc(path, &v[n]) == 0)
			n++;
		else
			free(v[n].data);
		unlink(path);
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), by_start);
	*out = v;
	*count = n;
	return 0;
}

static double ticks_per_ns(uint64_t t0, uint64_t ns0)
{
	uint64_t ns1 = monotonic_ns(), t1;

	/* the window is the command's run; stretch a short one so the rate is precise */
	if (ns1 - ns0 < 50 * 1000 * 1000) {
		struct timespec ts = { 0, (long)(50 * 1000 * 1000 - (ns1 - ns0)) };

		nanosleep(&ts, NULL);
		ns1 = monotonic_ns();
	}
	t1 = lk__lock_ticks();
	return (double)(t1 - t0) / (double)(ns1 - ns0);
}

static void exit_note(int status, const char *cmd)
{
	if (WIFEXITED(status) && WEXITSTATUS(status))
		fprintf(stderr, "lowkey locks: %s exited with status %d\n", cmd,
			WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		fprintf(stderr, "lowkey locks: %s was killed by signal %d (%s)\n", cmd,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
}

static void write_json(FILE *out, const struct proc *procs, size_t n, const struct options *o,
		       int status, const char *cmd)
{
	struct lk__json j;

	lk__json_begin(&j, out, false);
	lk__json_str(&j, "command", cmd);
	if (WIFEXITED(status))
		lk__json_int(&j, "exit_status", WEXITSTATUS(status));
	else
		lk__json_int(&j, "signal", WTERMSIG(status));
	lk__json_array(&j, "processes");
	for (size_t i = 0; i < n; i++)
		print_json_proc(&j, &procs[i], o);
	lk__json_close(&j);
	lk__json_end(&j);
}

/* The page is drawn from the JSON: the same figures, by the same code. */
static int write_html(const struct proc *procs, size_t n, const struct options *o, int status,
		      const char *cmd)
{
	char *json = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&json, &len);
	int ret;

	if (!f) {
		cli_error("locks", NULL, "cannot write %s: %s", o->html, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	write_json(f, procs, n, o, status, cmd);
	ret = fclose(f) == 0 ? locks_html(json, len, o->html) : CLI_EXIT_FAIL;
	free(json);
	return ret;
}

static int report(FILE *out, const char *dir, const struct options *o, double tpn, uint64_t end_ns,
		  pid_t child, int status, const char *cmd)
{
	struct proc *procs = NULL;
	size_t n = 0;
	int ret = 0;

	if (load_dir(dir, &procs, &n) != 0 || n == 0) {
		cli_error("locks",
			  "is it statically linked or set-user-ID, or does it clear LD_PRELOAD?",
			  "liblowkey-locks.so recorded nothing in '%s'", cmd);
		free(procs);
		return CLI_EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++)
		procs[i].ended = ending_of(&procs[i], procs, n, child, status);
	for (size_t i = 0; i < n; i++)
		if (build_rows(&procs[i], (procs[i].h->flags & LKL_F_TICKS_NS) ? 1.0 : tpn,
			       end_ns) != 0)
			procs[i].nrows = 0;
	if (o->json)
		write_json(out, procs, n, o, status, cmd);
	else
		for (size_t i = 0; i < n; i++)
			print_text(out, &procs[i], o);
	if (o->html)
		ret = write_html(procs, n, o, status, cmd);
	if (fflush(out) != 0 || ferror(out)) {
		cli_error("locks", NULL, "writing %s failed: %s",
			  o->output ? o->output : "the report", strerror(errno));
		ret = CLI_EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++) {
		free(procs[i].rows);
		free(procs[i].data);
	}
	free(procs);
	return ret;
}

static bool parse_count(const char *arg, long min, long max, long *out)
{
	long long v;

	if (!cli_parse_long(arg, min, max, &v))
		return false;
	*out = (long)v;
	return true;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "top", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "html", required_argument, NULL, 'H' },
		{ "hold-sampling", required_argument, NULL, 's' },
		{ "max-locks", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct options){ .top = 10 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "+jo:", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!parse_count(optarg, 0, 1000000, &o->top))
				goto bad_number;
			break;
		case 'j':
			o->json = true;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'H':
			o->html = optarg;
			break;
		case 's':
			if (!parse_count(optarg, 1, 1 << 30, &o->hold_sampling))
				goto bad_number;
			break;
		case 'm':
			if (!parse_count(optarg, 1024, 1 << 24, &o->max_locks))
				goto bad_number;
			break;
		default:
			fputs(locks_usage, stderr);
			return -1;
		}
	}
	if (optind >= argc) {
		cli_error("locks", "lowkey locks -- ./my-program args", "no command to run");
		return -1;
	}
	return optind;
bad_number:
	cli_error("locks", "see 'lowkey locks --help' for the ranges", "bad number '%s'", optarg);
	return -1;
}

static int locks_run(int argc, char **argv)
{
	char lib_buf[PATH_MAX], exe[PATH_MAX], dir[PATH_MAX], err[PATH_MAX + 200];
	const char *lib;
	struct options o;
	uint64_t t0, ns0, end_ns;
	pid_t child = 0;
	int first, status, ret;
	FILE *out = stderr;

	first = parse_options(argc, argv, &o);
	if (first < 0)
		return CLI_EXIT_USAGE;
	argv += first;
	lib = find_preload(lib_buf, sizeof(lib_buf));
	if (!lib) {
		cli_error("locks", "reinstall lowkey, or point LOWKEY_LOCKS_LIB at the library",
			  "cannot find liblowkey-locks.so%s",
			  getenv("LOWKEY_LOCKS_LIB") ? " at $LOWKEY_LOCKS_LIB" : "");
		return CLI_EXIT_FAIL;
	}
	if (!which(argv[0], exe, sizeof(exe))) {
		if (strchr(argv[0], '/') && access(argv[0], F_OK) == 0) {
			cli_error("locks", NULL, "%s: cannot execute: %s", argv[0],
				  strerror(EACCES));
			return 126; /* as a shell, and lowkey stat and trace */
		}
		cli_error("locks", "check the command's name and $PATH", "%s: command not found",
			  argv[0]);
		return 127;
	}
	if (statically_linked(exe)) {
		cli_error("locks",
			  "rebuild it without -static; LD_PRELOAD needs the dynamic loader",
			  "'%s' is statically linked: its locks cannot be intercepted", exe);
		return CLI_EXIT_FAIL;
	}
	/* before the command runs: an output that cannot be written is said now, not after it */
	if (o.html && strcmp(o.html, "-") != 0) {
		int fd = lk__out_open(o.html, LK__OUT_REPLACE, NULL, err, sizeof(err));

		if (fd < 0) {
			cli_error("locks", "choose a writable place with --html", "%s", err);
			return CLI_EXIT_FAIL;
		}
		close(fd);
	}
	if (o.output && !(out = lk__out_fopen(o.output, err, sizeof(err)))) {
		cli_error("locks", "choose a writable place with -o", "%s", err);
		return CLI_EXIT_FAIL;
	}
	ret = make_dir(dir, sizeof(dir));
	if (ret) {
		if (out != stderr)
			fclose(out);
		cli_error("locks", "set TMPDIR to a writable directory",
			  "cannot make a directory for the figures: %s", strerror(-ret));
		return CLI_EXIT_FAIL;
	}
	ns0 = monotonic_ns();
	t0 = lk__lock_ticks();
	status = run(argv, lib, dir, &o, &child);
	end_ns = monotonic_ns();
	if (status < 0) {
		cli_error("locks", NULL, "cannot run '%s': %s", argv[0], strerror(-status));
		rmdir(dir);
		if (out != stderr)
			fclose(out);
		return -status == ENOENT ? 127 : 126;
	}
	ret = report(out, dir, &o, ticks_per_ns(t0, ns0), end_ns, child, status, argv[0]);
	if (out != stderr && fclose(out) != 0 && !ret) {
		cli_error("locks", NULL, "writing %s failed: %s", o.output, strerror(errno));
		ret = CLI_EXIT_FAIL;
	}
	rmdir(dir);
	exit_note(status, argv[0]);
	if (ret)
		return ret;
	/* the command's own status, as lowkey stat and trace give it */
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const struct cli_command cmd_locks = {
	.name = "locks",
	.summary =
		"lock contention in any program: pthread mutexes, rwlocks, spinlocks, semaphores",
	.usage = locks_usage,
	.run = locks_run,
};
