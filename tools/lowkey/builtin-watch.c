// SPDX-License-Identifier: MIT
/*
 * lowkey watch: report every write (or access, or call) to an address in another process, with
 * the thread, the instruction, its function and source line, and the value it left. The process
 * is not stopped and gets no signal: the kernel records each hit in a ring buffer (perf sampling
 * of a hardware breakpoint), which this command drains.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "builtin.h"
#include "internal/json.h"
#include "internal/utf8.h"
#include "util/signal_forward.h"
#include "util/symbolize.h"

static const char watch_usage[] =
	"usage: lowkey watch -p PID (--addr ADDR | --symbol NAME) [options]\n"
	"       lowkey watch (--addr ADDR | --symbol NAME) [options] -- COMMAND [ARGS...]\n"
	"\n"
	"Reports each write to an address in a running process (or in COMMAND, started for it):\n"
	"time, thread, the instruction after the write as function+offset, the source line of the\n"
	"write, and the value the memory holds after it. Uses a hardware watchpoint sampled by perf:\n"
	"the process is not stopped and gets no signal.\n"
	"\n"
	"  -p, --pid PID        the process to watch (all its threads, and threads it creates)\n"
	"  -a, --addr ADDR      the address to watch (hex with 0x, or decimal)\n"
	"  -s, --symbol NAME    a global variable (or, with --exec, a function) of the process\n"
	"  -l, --len N          bytes to watch: 1, 2, 4 or 8, aligned (default: the symbol's size up\n"
	"                       to 8, or 8)\n"
	"      --rw             report reads as well as writes\n"
	"      --exec           report each execution of the instruction at ADDR / function NAME\n"
	"  -d, --duration S     stop after S seconds (default: when the process exits or on Ctrl-C)\n"
	"  -j, --json           one JSON object per hit, then a summary object\n"
	"\n"
	"Needs kernel.perf_event_paranoid <= 2 for your own processes (CAP_PERFMON or\n"
	"CAP_SYS_PTRACE otherwise); values are read with process_vm_readv (the right to ptrace the\n"
	"process; `-` when it is refused).\n"
	"\n"
	"Example:\n"
	"  lowkey watch -p $(pidof server) --symbol active_sessions --duration 10\n";

struct options {
	pid_t pid;
	const char *addr_arg, *symbol;
	size_t len;
	unsigned int access;
	double duration;
	bool json;
	char **command;
};

struct watch_run {
	struct options opt;
	struct symbolizer *symbols;
	uint64_t addr;
	size_t len;
	const char *target_name; /* what is watched, for messages */
	uint64_t start_ns;
	uint64_t hits;
	uint64_t counted; /* accesses the kernel counted, read when recording stopped */
};

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- options ---- */

static int parse_number(const char *s, uint64_t *out)
{
	unsigned long long v;

	if (!cli_parse_unsigned(s, UINT64_MAX, &v))
		return -1; /* "-8" and "-1" too: not wrapped to huge values */
	*out = v;
	return 0;
}

static int usage_error(const char *hint, const char *fmt, const char *arg)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, arg);
	cli_error("watch", hint ? hint : "see `lowkey watch --help`", "%s", msg);
	return CLI_EXIT_USAGE;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	enum { OPT_RW = 256, OPT_EXEC, OPT_JSON };
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "addr", required_argument, NULL, 'a' },
		{ "symbol", required_argument, NULL, 's' },
		{ "len", required_argument, NULL, 'l' },
		{ "rw", no_argument, NULL, OPT_RW },
		{ "exec", no_argument, NULL, OPT_EXEC },
		{ "duration", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t n;
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->access = LK_WATCH_WRITE;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+p:a:s:l:d:j", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_number(optarg, &n) || n == 0 || n > INT32_MAX)
				return usage_error(NULL, "bad process id '%s'", optarg);
			o->pid = (pid_t)n;
			break;
		case 'a':
			o->addr_arg = optarg;
			break;
		case 's':
			o->symbol = optarg;
			break;
		case 'l':
			if (parse_number(optarg, &n) || n == 0)
				return usage_error(NULL, "bad length '%s'", optarg);
			o->len = (size_t)n;
			break;
		case OPT_RW:
			o->access = LK_WATCH_READWRITE;
			break;
		case OPT_EXEC:
			o->access = LK_WATCH_EXEC;
			break;
		case 'd':
			o->duration = strtod(optarg, &end);
			if (end == optarg || *end || o->duration <= 0)
				return usage_error(NULL, "bad duration '%s' (seconds, > 0)",
						   optarg);
			break;
		case 'j':
		case OPT_JSON:
			o->json = true;
			break;
		default:
			return usage_error(NULL, "unknown or incomplete option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		o->command = &argv[optind]; /* getopt stopped at "--" or the first operand */
	if (optind < argc && strcmp(argv[optind - 1], "--") != 0)
		return usage_error("put `--` before the command to run", "unexpected argument '%s'",
				   argv[optind]);
	if (!o->pid == !o->command)
		return usage_error(NULL, "%s",
				   o->pid ? "give -p PID or a command, not both" :
					    "give -p PID, or `-- COMMAND` to start one");
	if (!o->addr_arg == !o->symbol)
		return usage_error(NULL, "%s", "give exactly one of --addr and --symbol");
	return 0;
}

/* ---- the target ---- */

/* Start COMMAND stopped at its first instruction (ptrace), so its symbols can be resolved. */
static pid_t start_command(char **command)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
			fprintf(stderr, "lowkey watch: cannot start %s under ptrace: %s\n",
				command[0], strerror(errno));
			_exit(126);
		}
		execvp(command[0], command);
		fprintf(stderr, "lowkey watch: cannot run %s: %s\n", command[0], strerror(errno));
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid)
		return -errno;
	if (!WIFSTOPPED(status))
		return -ECHILD; /* it exited: the child said why */
	return pid;
}

static void resume_command(pid_t pid)
{
	ptrace(PTRACE_DETACH, pid, NULL, NULL);
}

/*
 * A command that died of a signal says nothing itself. SIGTRAP deserves a word: a hypervisor that
 * loses a hit's debug status (DR6) makes the kernel send one that no watchpoint claims.
 */
static void report_command_end(const char *name, int status)
{
	if (!WIFSIGNALED(status))
		return;
	fprintf(stderr, "lowkey watch: %s was killed by signal %d (%s)\n", name, WTERMSIG(status),
		strsignal(WTERMSIG(status)));
	if (WTERMSIG(status) == SIGTRAP)
		fprintf(stderr,
			"lowkey watch: hint: unless it traps by itself, that was a hit whose debug "
			"status the machine lost (seen in virtual machines); see docs/watch.md\n");
}

/* Decide the address and length to watch. Returns 0 or an exit status. */
static int resolve_target(struct watch_run *run)
{
	const struct options *o = &run->opt;
	uint64_t size = 0;
	const char *module = NULL;
	int err;

	if (o->addr_arg) {
		if (parse_number(o->addr_arg, &run->addr))
			return usage_error(NULL, "bad address '%s'", o->addr_arg);
		run->target_name = o->addr_arg;
	} else {
		err = symbolizer_lookup(run->symbols, o->symbol, &run->addr, &size, &module);
		if (err == -EINVAL)
			return usage_error(
				"each thread has its own copy: watch one thread's address "
				"with --addr",
				"'%s' is a thread-local variable", o->symbol);
		if (err)
			return usage_error("the symbol must be in the process's symbol table (not "
					   "static in a stripped binary); or use --addr",
					   "no symbol '%s' in the process", o->symbol);
		run->target_name = o->symbol;
	}
	if (o->access == LK_WATCH_EXEC)
		run->len = 1;
	else if (o->len)
		run->len = o->len;
	else if (size == 1 || size == 2 || size == 4)
		run->len = size;
	else
		run->len = 8;
	if (size > 8 && !o->len && o->access != LK_WATCH_EXEC)
		fprintf(stderr,
			"lowkey watch: %s is %" PRIu64 " bytes; watching its first 8 (--len, "
			"or --addr for another part)\n",
			o->symbol, size);
	return 0;
}

/* ---- output ---- */

static const char *basename_of(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

static int64_t sign_extend(uint64_t v, size_t len)
{
	unsigned int bits = (unsigned int)len * 8;

	if (bits >= 64)
		return (int64_t)v;
	return (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* One line per hit: a stream of JSON documents. */
static void print_json(const struct watch_run *run, const struct lk_watch_sample *s,
		       const struct symbol_place *p)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, true);
	lk__json_uint(&j, "time_ns", s->time_ns);
	lk__json_fixed(&j, "elapsed_s", (double)(s->time_ns - run->start_ns) / 1e9, 6);
	lk__json_int(&j, "pid", s->pid);
	lk__json_int(&j, "tid", s->tid);
	lk__json_strf(&j, "ip", "%#" PRIx64, s->ip);
	lk__json_str_or_null(&j, "function", p->function);
	lk__json_uint(&j, "offset", p->offset);
	lk__json_str_or_null(&j, "module", p->module);
	lk__json_str_or_null(&j, "file", p->file);
	lk__json_int(&j, "line", p->line);
	lk__json_strf(&j, "addr", "%#" PRIx64, s->addr);
	if (s->has_value)
		lk__json_int(&j, "value", sign_extend(s->value, run->len));
	else
		lk__json_null(&j, "value");
	lk__json_end(&j);
}

/* The hit as a line; the names come from the target's files: escaped (lk__text_escape). */
static void print_text(const struct watch_run *run, const struct lk_watch_sample *s,
		       const struct symbol_place *p)
{
	char where[512], line[300], value[64], shown_where[4 * sizeof(where)],
		shown_line[4 * sizeof(line)];

	if (p->function)
		snprintf(where, sizeof(where), "%s+%#" PRIx64, p->function, p->offset);
	else
		snprintf(where, sizeof(where), "%#" PRIx64, s->ip);
	if (p->file)
		snprintf(line, sizeof(line), "%s:%d", basename_of(p->file), p->line);
	else
		snprintf(line, sizeof(line), "(%s)", p->module ? basename_of(p->module) : "?");
	if (s->has_value)
		snprintf(value, sizeof(value), "%" PRId64 " (%#" PRIx64 ")",
			 sign_extend(s->value, run->len), s->value);
	else
		snprintf(value, sizeof(value), "-");
	printf("%12.6f %7d  %-32s %-28s %s\n", (double)(s->time_ns - run->start_ns) / 1e9,
	       (int)s->tid, lk__text_escape(where, shown_where, sizeof(shown_where)),
	       lk__text_escape(line, shown_line, sizeof(shown_line)), value);
}

static void on_sample(const struct lk_watch_sample *s, void *arg)
{
	struct watch_run *run = arg;
	struct symbol_place place;

	/* A data watchpoint reports the instruction after the access: its line is that of ip - 1. */
	symbolizer_place(run->symbols, s->ip, run->opt.access != LK_WATCH_EXEC, &place);
	if (run->opt.json)
		print_json(run, s, &place);
	else
		print_text(run, s, &place);
	run->hits++;
}

/* ---- the loop ---- */

/*
 * Stop recording, take the kernel's count, then read what arrived before the stop: every access
 * counted is then either read or reported lost.
 */
static int finish(struct watch_run *run, struct lk_watch_sampler *sampler)
{
	int err = lk_watch_sampler_stop(sampler);

	if (!err)
		err = lk_watch_sampler_counted(sampler, &run->counted);
	if (err)
		cli_error("watch", lk_last_error(), "stopping the watchpoints failed: %s",
			  lk_strerror(err));
	lk_watch_sampler_read(sampler, 0, on_sample, run);
	return err ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static int read_until_done(struct watch_run *run, struct lk_watch_sampler *sampler)
{
	uint64_t deadline =
		run->opt.duration > 0 ? run->start_ns + (uint64_t)(run->opt.duration * 1e9) : 0;

	while (!stop_requested) {
		int timeout = 200, n;

		if (deadline) {
			uint64_t now = monotonic_ns();

			if (now >= deadline)
				break;
			if (deadline - now < 200000000u)
				timeout = (int)((deadline - now) / 1000000u) + 1;
		}
		n = lk_watch_sampler_read(sampler, timeout, on_sample, run);
		fflush(stdout);
		if (n == -ESRCH)
			break; /* the process exited and everything it left was read */
		if (n == -EINTR)
			continue;
		if (n < 0) {
			cli_error("watch", lk_last_error(), "reading the samples failed: %s",
				  lk_strerror(n));
			return CLI_EXIT_FAIL;
		}
	}
	return finish(run, sampler);
}

static void print_summary(const struct watch_run *run, const struct lk_watch_sampler *sampler)
{
	uint64_t lost = lk_watch_sampler_lost(sampler);
	uint64_t missing = run->counted > run->hits + lost ? run->counted - run->hits - lost : 0;

	if (run->opt.json) {
		struct lk__json j;

		lk__json_begin(&j, stdout, true);
		lk__json_object(&j, "summary");
		lk__json_int(&j, "pid", run->opt.pid);
		lk__json_strf(&j, "addr", "%#" PRIx64, run->addr);
		lk__json_uint(&j, "len", run->len);
		lk__json_uint(&j, "hits", run->hits);
		lk__json_uint(&j, "lost", lost);
		lk__json_uint(&j, "counted", run->counted);
		lk__json_close(&j);
		lk__json_end(&j);
	}
	fprintf(stderr, "lowkey watch: %" PRIu64 " hit%s", run->hits, run->hits == 1 ? "" : "s");
	if (lost)
		fprintf(stderr, ", %" PRIu64 " lost (the ring buffer was full)", lost);
	if (missing)
		fprintf(stderr,
			"; the kernel counted %" PRIu64 ": %" PRIu64 " never reached lowkey",
			run->counted, missing);
	fputc('\n', stderr);
}

static const char *access_words(unsigned int access)
{
	return access == LK_WATCH_WRITE	    ? "writes" :
	       access == LK_WATCH_READWRITE ? "reads and writes" :
					      "executions";
}

static int open_sampler(struct watch_run *run, struct lk_watch_sampler **sampler)
{
	int err =
		lk_watch_sampler_open(sampler, run->opt.pid, run->addr, run->len, run->opt.access);

	if (err == -EINVAL) {
		cli_error("watch", NULL, "%s", lk_last_error());
		return CLI_EXIT_USAGE;
	}
	if (err) {
		cli_error("watch", lk_last_error(), "cannot watch %s in process %d: %s",
			  run->target_name, (int)run->opt.pid, lk_strerror(err));
		return CLI_EXIT_FAIL;
	}
	return 0;
}

static int watch_run(int argc, char **argv)
{
	struct lk_watch_sampler *sampler = NULL;
	struct signal_stop stop_old;
	struct watch_run run;
	char err[256];
	int status, rc;
	pid_t child = 0;

	memset(&run, 0, sizeof(run));
	rc = parse_options(argc, argv, &run.opt);
	if (rc)
		return rc;
	if (!run.opt.command && cli_check_pid("watch", run.opt.pid, true))
		return CLI_EXIT_FAIL;
	if (run.opt.command) {
		child = start_command(run.opt.command);
		if (child < 0)
			return CLI_EXIT_FAIL;
		run.opt.pid = child;
	}
	run.symbols = symbolizer_open_process(run.opt.pid, err, sizeof(err));
	if (!run.symbols) {
		cli_error("watch", "is the process id right, and is it yours?", "%s", err);
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	rc = resolve_target(&run);
	if (!rc)
		rc = open_sampler(&run, &sampler);
	if (rc)
		goto out;
	/* no SA_RESTART: the wait returns -EINTR */
	signal_stop_catch(&stop_old, on_stop_signal, 0);
	run.start_ns = monotonic_ns();
	fprintf(stderr,
		"lowkey watch: watching %zu byte%s at %#" PRIx64 " (%s) in process %d for %s\n",
		run.len, run.len == 1 ? "" : "s", run.addr, run.target_name, (int)run.opt.pid,
		access_words(run.opt.access));
	if (child)
		resume_command(child);
	rc = read_until_done(&run, sampler);
	print_summary(&run, sampler);
out:
	lk_watch_sampler_close(sampler);
	symbolizer_close(run.symbols);
	if (child) {
		if (rc)
			kill(child, SIGKILL); /* it never ran past its first instruction */
		if (waitpid(child, &status, 0) == child && !rc)
			report_command_end(run.opt.command[0], status);
	}
	return rc;
}

const struct cli_command cmd_watch = {
	.name = "watch",
	.summary = "report each write to an address in a running process",
	.usage = watch_usage,
	.run = watch_run,
};
