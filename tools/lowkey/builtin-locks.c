// SPDX-License-Identifier: MIT
/*
 * lowkey locks -- COMMAND: lock contention in any dynamically linked program.
 *
 * Runs COMMAND with liblowkey-locks.so preloaded (src/lock/preload/) and $LOWKEY_LOCKS_DIR set to
 * a private directory. Every process image of the command (fork children and exec()ed programs
 * included) writes its figures to its own file there as it goes (include/internal/lock_file.h).
 * When COMMAND ends, the files are read and call sites symbolized (util/locks_read.c), and a
 * report printed per process, most waited-for lock first (util/locks_print.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lock.h>

#include "builtin.h"
#include "internal/outfile.h"
#include "util/locks.h"
#include "util/locks_html.h"
#include "util/preload_run.h"
#include "util/signal_forward.h"
#include "lowkey-locks-paths.h"

static const char locks_usage[] =
	"usage: lowkey locks [--top N] [-j|--json] [-o FILE] [--hold-sampling N] [--max-locks N] [--] COMMAND [ARGS...]\n"
	"\n"
	"Runs COMMAND with liblowkey-locks.so preloaded and, when it ends, reports the contention on every\n"
	"pthread mutex, rwlock and spinlock, condition-variable re-acquisition and POSIX semaphore it used:\n"
	"per lock, acquisitions, how many were contended, the time spent waiting (total, max, mean), the time\n"
	"the lock was held (total, max, mean) and how often it changed hands: the 10 most waited-for\n"
	"locks by default, and how many more there are; --all lists every one.\n"
	"Each lock is named by its address and the call site of its first contended acquisition. Fork\n"
	"children and programs COMMAND executes are profiled too, one report per process.\n"
	"\n"
	"Options:\n"
	"  -a, --all          list every lock the command took, contended or not, destroyed or not\n"
	"  --top N            locks to list per process (default 10; 0: all, as --all); the report\n"
	"                     says how many it leaves out\n"
	"  --sort KEY         list the locks by KEY, greatest first: wait (total wait, the default),\n"
	"                     wait-max, acquired, contended, owners (owner changes) or hold (total)\n"
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

static const struct preload_lib locks_lib = {
	.env = "LOWKEY_LOCKS_LIB",
	.file = "liblowkey-locks.so",
	.libdir = LK_LOCKS_LIBDIR,
	.build = LK_LOCKS_PRELOAD_BUILD,
	.install = LK_LOCKS_PRELOAD_INSTALL,
};

struct options {
	long top;
	enum lks_sort sort;
	bool json;
	const char *output;
	const char *html;
	long hold_sampling;
	long max_locks;
};

/* ---- running it ---- */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Run argv with the library and the variables that tell it where to write and how. */
static int run(char **argv, const char *lib, const char *dir, const struct options *o, pid_t *child)
{
	char vars[3][PATH_MAX + 32];
	char *env[4] = { vars[0], NULL, NULL, NULL };
	size_t n = 1;

	snprintf(vars[0], sizeof(vars[0]), "LOWKEY_LOCKS_DIR=%s", dir);
	if (o->hold_sampling) {
		snprintf(vars[n], sizeof(vars[n]), "LOWKEY_LOCK_HOLD_SAMPLING=%ld",
			 o->hold_sampling);
		env[n] = vars[n];
		n++;
	}
	if (o->max_locks) {
		snprintf(vars[n], sizeof(vars[n]), "LOWKEY_LOCKS_MAX=%ld", o->max_locks);
		env[n] = vars[n];
		n++;
	}
	return preload_run(argv, lib, env, child);
}

/* ---- the report ---- */

/*
 * The measured rate's largest relative error: a twentieth of the last of the three digits the
 * report prints. A short command's window reaches it in a few ms; a busy machine's wide brackets
 * take longer, up to the 50 ms window that was always used before.
 */
#define RATE_ERROR_MAX 5e-5
#define RATE_WINDOW_MAX_NS (50 * 1000 * 1000)

/*
 * The rate of the counter the figures are in, measured against CLOCK_MONOTONIC over the window
 * from before the command started to now, which ran while the command did: its error is the
 * brackets' width over the window's length. Not the library's calibration (lk_clock_info()):
 * where no CPUID leaf or perf page gives the rate, its first call measures for 200 µs, a cost on
 * every run, and a nominal rate is no closer to CLOCK_MONOTONIC, which the figures must agree with.
 */
static uint64_t counter_hz(const struct lks_clock *start)
{
	struct lks_clock end;

	for (;;) {
		end = lks_clock_now();
		if (end.ns <= start->ns || end.ticks <= start->ticks)
			return 1000000000u; /* no counter: the fallback counts nanoseconds */
		if ((double)(start->width + end.width) / 2 <=
			    (double)(end.ticks - start->ticks) * RATE_ERROR_MAX ||
		    end.ns - start->ns >= RATE_WINDOW_MAX_NS)
			break;
		nanosleep(&(struct timespec){ 0, 1000 * 1000 }, NULL);
	}
	return (uint64_t)((double)(end.ticks - start->ticks) * 1e9 / (double)(end.ns - start->ns) +
			  0.5);
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

/* The page is drawn from the JSON: the same figures, by the same code. */
static int write_html(const struct lks_proc *procs, size_t n, const struct lks_view *v,
		      const char *path, int status, const char *cmd)
{
	char *json = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&json, &len);
	int ret;

	if (!f) {
		cli_error("locks", NULL, "cannot write %s: %s", path, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	lks_write_json(f, procs, n, v, status, cmd);
	ret = fclose(f) == 0 ? locks_html(json, len, path) : CLI_EXIT_FAIL;
	free(json);
	return ret;
}

static void build_rows(struct lks_proc *procs, size_t n, const struct options *o,
		       const struct lks_view *v, uint64_t end_ns)
{
	double tpn = (double)v->counter_hz / 1e9;

	for (size_t i = 0; i < n; i++)
		if (lks_build_rows(&procs[i], (procs[i].h->flags & LKL_F_TICKS_NS) ? 1.0 : tpn,
				   end_ns, o->sort) != 0)
			procs[i].nrows = 0;
}

static int report(FILE *out, const char *dir, const struct options *o,
		  const struct lks_clock *start, uint64_t end_ns, pid_t child, int status,
		  const char *cmd)
{
	struct lks_view view = { .top = o->top, .sort = o->sort };
	struct lks_proc *procs = NULL;
	size_t n = 0;
	int ret = 0;

	if (lks_load_dir(dir, &procs, &n) != 0 || n == 0) {
		cli_error("locks",
			  "is it statically linked or set-user-ID, or does it clear LD_PRELOAD?",
			  "liblowkey-locks.so recorded nothing in '%s'", cmd);
		free(procs);
		return CLI_EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++)
		procs[i].ended = lks_ending_of(&procs[i], procs, n, child, status);
	view.counter_hz = counter_hz(start);
	build_rows(procs, n, o, &view, end_ns);
	if (o->json)
		lks_write_json(out, procs, n, &view, status, cmd);
	else
		for (size_t i = 0; i < n; i++)
			lks_print_text(out, &procs[i], &view);
	if (o->html)
		ret = write_html(procs, n, &view, o->html, status, cmd);
	if (fflush(out) != 0 || ferror(out)) {
		cli_error("locks", NULL, "writing %s failed: %s",
			  o->output ? o->output : "the report", strerror(errno));
		ret = CLI_EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++)
		lks_free_proc(&procs[i]);
	free(procs);
	return ret;
}

/* ---- the command ---- */

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
		{ "all", no_argument, NULL, 'a' },
		{ "top", required_argument, NULL, 't' },
		{ "sort", required_argument, NULL, 'S' },
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
	while ((c = getopt_long(argc, argv, "+ajo:", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			o->top = 0;
			break;
		case 'S':
			if (!lks_sort_parse(optarg, &o->sort)) {
				cli_error("locks", NULL, "no sort key '%s' (keys: %s)", optarg,
					  lks_sort_names);
				return -1;
			}
			break;
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

/* Before the command runs: an output that cannot be written is said now, not after it. */
static int open_outputs(const struct options *o, FILE **out)
{
	char err[PATH_MAX + 200];

	if (o->html && strcmp(o->html, "-") != 0) {
		int fd = lk__out_open(o->html, LK__OUT_REPLACE, NULL, err, sizeof(err));

		if (fd < 0) {
			cli_error("locks", "choose a writable place with --html", "%s", err);
			return CLI_EXIT_FAIL;
		}
		close(fd);
	}
	if (o->output && !(*out = lk__out_fopen(o->output, err, sizeof(err)))) {
		cli_error("locks", "choose a writable place with -o", "%s", err);
		return CLI_EXIT_FAIL;
	}
	return 0;
}

/* The command run in a new directory for the figures, then the report; the directory removed. */
static int run_and_report(char **argv, const char *lib, struct options *o, FILE *out)
{
	char dir[PATH_MAX];
	struct lks_clock start;
	uint64_t end_ns;
	pid_t child = 0;
	int status, ret;

	ret = preload_make_dir("lowkey-locks", dir, sizeof(dir));
	if (ret) {
		if (out != stderr)
			fclose(out);
		cli_error("locks", "set TMPDIR to a writable directory",
			  "cannot make a directory for the figures: %s", strerror(-ret));
		return CLI_EXIT_FAIL;
	}
	start = lks_clock_now();
	status = run(argv, lib, dir, o, &child);
	end_ns = monotonic_ns();
	if (status < 0) {
		if (status != -EINTR)
			cli_error("locks", NULL, "cannot run '%s': %s", argv[0], strerror(-status));
		rmdir(dir);
		if (out != stderr)
			fclose(out);
		if (status == -EINTR)
			return CLI_EXIT_FAIL; /* asked to stop before it started */
		return -status == ENOENT ? 127 : 126;
	}
	ret = report(out, dir, o, &start, end_ns, child, status, argv[0]);
	if (out != stderr && fclose(out) != 0 && !ret) {
		cli_error("locks", NULL, "writing %s failed: %s", o->output, strerror(errno));
		ret = CLI_EXIT_FAIL;
	}
	rmdir(dir);
	exit_note(status, argv[0]);
	if (ret)
		return ret;
	/* the command's own status, as lowkey stat and trace give it */
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int locks_run(int argc, char **argv)
{
	char lib_buf[PATH_MAX], exe[PATH_MAX];
	struct signal_defer held_back;
	const char *lib;
	struct options o;
	int first, ret;
	FILE *out = stderr;

	first = parse_options(argc, argv, &o);
	if (first < 0)
		return CLI_EXIT_USAGE;
	argv += first;
	lib = preload_find("locks", &locks_lib, lib_buf, sizeof(lib_buf));
	if (!lib)
		return CLI_EXIT_FAIL;
	ret = preload_check_command("locks", argv[0], "its locks cannot be intercepted", exe,
				    sizeof(exe));
	if (!ret)
		ret = open_outputs(&o, &out);
	if (ret)
		return ret;
	/* from here a signal lets lowkey remove its directory first (signal_forward.h) */
	signal_forward_defer(&held_back);
	ret = run_and_report(argv, lib, &o, out);
	signal_forward_undefer(&held_back);
	return ret;
}

const struct cli_command cmd_locks = {
	.name = "locks",
	.summary =
		"lock contention in any program: pthread mutexes, rwlocks, spinlocks, semaphores",
	.usage = locks_usage,
	.run = locks_run,
};
