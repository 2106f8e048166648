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
#include <elf.h>
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
#include "lowkey-locks-paths.h"

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

/* ---- the report ---- */

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

/* The page is drawn from the JSON: the same figures, by the same code. */
static int write_html(const struct lks_proc *procs, size_t n, const struct options *o, int status,
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
	lks_write_json(f, procs, n, o->top, status, cmd);
	ret = fclose(f) == 0 ? locks_html(json, len, o->html) : CLI_EXIT_FAIL;
	free(json);
	return ret;
}

static int report(FILE *out, const char *dir, const struct options *o, double tpn, uint64_t end_ns,
		  pid_t child, int status, const char *cmd)
{
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
	for (size_t i = 0; i < n; i++)
		if (lks_build_rows(&procs[i], (procs[i].h->flags & LKL_F_TICKS_NS) ? 1.0 : tpn,
				   end_ns) != 0)
			procs[i].nrows = 0;
	if (o->json)
		lks_write_json(out, procs, n, o->top, status, cmd);
	else
		for (size_t i = 0; i < n; i++)
			lks_print_text(out, &procs[i], o->top);
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

/* Whether cmd can be profiled: its file found in $PATH (into exe), dynamically linked. 0, or
 * lowkey's exit status after the error is printed. */
static int check_command(const char *cmd, char *exe, size_t len)
{
	if (!which(cmd, exe, len)) {
		if (strchr(cmd, '/') && access(cmd, F_OK) == 0) {
			cli_error("locks", NULL, "%s: cannot execute: %s", cmd, strerror(EACCES));
			return 126; /* as a shell, and lowkey stat and trace */
		}
		cli_error("locks", "check the command's name and $PATH", "%s: command not found",
			  cmd);
		return 127;
	}
	if (statically_linked(exe)) {
		cli_error("locks",
			  "rebuild it without -static; LD_PRELOAD needs the dynamic loader",
			  "'%s' is statically linked: its locks cannot be intercepted", exe);
		return CLI_EXIT_FAIL;
	}
	return 0;
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

static int locks_run(int argc, char **argv)
{
	char lib_buf[PATH_MAX], exe[PATH_MAX], dir[PATH_MAX];
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
	ret = check_command(argv[0], exe, sizeof(exe));
	if (!ret)
		ret = open_outputs(&o, &out);
	if (ret)
		return ret;
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
