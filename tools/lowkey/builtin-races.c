// SPDX-License-Identifier: MIT
/*
 * lowkey races -- COMMAND: a sampling data-race detector built on hardware watchpoints
 * (docs/races.md; docs/design.md, "Races").
 *
 * Decodes COMMAND's code with Capstone (util/races_decode.c), writes the instructions it may
 * sample and the parameters into a file in a private directory (include/internal/races_file.h),
 * and runs COMMAND with liblowkey-races.so preloaded (src/races/), which samples and records the
 * races into the same file. When COMMAND ends, the races are named with libdw and printed
 * (util/races_report.c), and drawn as a page with --html (util/races_html.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "builtin.h"
#include "internal/outfile.h"
#include "util/preload_run.h"
#include "util/races.h"
#include "util/signal_forward.h"
#include "lowkey-races-paths.h"

#define RACES_EXIT_FOUND 66 /* as ThreadSanitizer's exitcode */
#define DEFAULT_RATE 20.0   /* instructions armed per second */
#define DEFAULT_WINDOW_MS 1.0
#define MAX_RACES 4096u

static const char races_usage[] =
	"usage: lowkey races [--rate N] [--window MS] [--seed N] [--duration S] [--lib FILE] [--suppressions FILE] [--stack N] [--heap] [-j|--json] [--html OUT] [-o FILE] [--] COMMAND [ARGS...]\n"
	"       lowkey races --pid PID [--duration S] [OPTIONS]\n"
	"\n"
	"Runs COMMAND with liblowkey-races.so preloaded and looks for data races in it by sampling, as\n"
	"DataCollider does: it arms one memory-accessing instruction of the program at a time with an\n"
	"execute watchpoint; the first thread to reach it is held there for a short window while a data\n"
	"watchpoint on the address it is about to access covers every thread. Another thread's\n"
	"conflicting access in the window (a write, or any access if the held one writes) is a race; so\n"
	"is a change of the value in the window that no watchpoint caught. When COMMAND ends, each race\n"
	"is printed once per pair of instructions: both accesses with their thread, function and source\n"
	"line, both threads' stacks (C++ names demangled), and the global accessed. Atomic\n"
	"instructions (lock prefix, xchg) are never sampled, nor plain ones the debug information\n"
	"shows accessing an atomic (_Atomic, std::atomic<T>, volatile sig_atomic_t).\n"
	"\n"
	"Options:\n"
	"  --rate N           instructions armed per second (default 20); each stays armed until a\n"
	"                     thread reaches it or 1/N s has passed. A thread is held at most N times\n"
	"                     the window each second\n"
	"  --window MS        how long a sampled thread is held, in milliseconds (default 1)\n"
	"  --seed N           the order in which instructions are armed (default: a random one; the\n"
	"                     report says which, to run the same order again)\n"
	"  --duration S       stop sampling after S seconds; COMMAND runs on (default: until it exits,\n"
	"                     or with --pid until ^C)\n"
	"  --pid PID          sample running process PID instead, started with\n"
	"                     LD_PRELOAD=liblowkey-races.so LOWKEY_RACES_ATTACH=1 (it waits for lowkey\n"
	"                     races at no cost); the watchpoints are removed when lowkey races stops\n"
	"  --lib FILE         sample the shared library FILE too, if COMMAND loads it at its start\n"
	"                     (repeat for more)\n"
	"  --suppressions FILE  leave out the races FILE matches, in ThreadSanitizer's syntax:\n"
	"                     race:PATTERN per line, matched against the functions, source files and\n"
	"                     objects of every frame of both threads' stacks and the global's name,\n"
	"                     race_top:PATTERN against each stack's first frame (* any characters,\n"
	"                     ^ and $ anchors); they are counted, not printed (repeat for more files)\n"
	"  --stack N          frames kept of each thread's stack, 0 to 16 (default 16; 0: none)\n"
	"  --heap             name the heap block of a race on the heap: its size, the offset in it,\n"
	"                     the thread and the function that allocated it (liblowkey-races-heap.so\n"
	"                     is preloaded too and records every block: the allocator costs more).\n"
	"                     With --pid, the process must have been started with it preloaded\n"
	"  -j, --json         print the report as JSON\n"
	"  --html OUT         also write it as one self-contained HTML page to OUT: a bar chart of\n"
	"                     how often each race was caught, the races, both threads' stacks\n"
	"  -o, --output FILE  write the report to FILE (default: standard error)\n"
	"\n"
	"x86-64 only. Sampled: the instructions of COMMAND's own executable (and --lib's) that\n"
	"access 1, 2, 4 or 8 bytes of memory, less those relative to rsp or rbp alone (the thread's\n"
	"own stack frame), to fs or gs (thread-local) and string operations. Takes three of the four\n"
	"debug registers (perf breakpoints with sigtrap: Linux 5.13, kernel.perf_event_paranoid <= 2).\n"
	"Build with -g for file:line. Statically linked and set-user-ID programs cannot be sampled.\n"
	"\n"
	"Environment: LOWKEY_RACES_LIB overrides where liblowkey-races.so is looked for.\n"
	"Exit status: 66 if races were found; else COMMAND's own (128 + the signal if one killed it;\n"
	"0 with --pid),\n"
	"127 if it was not found, 126 if it could not be executed; 1 if lowkey could not sample it or\n"
	"write the report, 2 on bad usage.\n";

static const struct preload_lib races_lib = {
	.env = "LOWKEY_RACES_LIB",
	.file = "liblowkey-races.so",
	.libdir = LK_RACES_LIBDIR,
	.build = LK_RACES_PRELOAD_BUILD,
	.install = LK_RACES_PRELOAD_INSTALL,
};

struct options {
	const char *libs[LKR_OBJECTS_MAX - 1];
	unsigned int nlibs;
	double rate, window_ms, duration;
	uint64_t seed;
	bool seeded;
	bool json;
	unsigned int stack_depth;
	bool heap;
	const char *output;
	const char *html;
	pid_t pid; /* --pid; 0: run a command */
	struct races_suppressions suppressions;
};

/* ---- options ---- */

static bool parse_positive(const char *arg, double max, double *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (end == arg || *end || !(v > 0) || v > max)
		return false;
	*out = v;
	return true;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	enum {
		OPT_RATE = 256,
		OPT_WINDOW,
		OPT_SEED,
		OPT_DURATION,
		OPT_LIB,
		OPT_SUPPRESSIONS,
		OPT_PID,
		OPT_STACK,
		OPT_HTML,
		OPT_HEAP
	};
	static const struct option longopts[] = {
		{ "rate", required_argument, NULL, OPT_RATE },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "lib", required_argument, NULL, OPT_LIB },
		{ "suppressions", required_argument, NULL, OPT_SUPPRESSIONS },
		{ "pid", required_argument, NULL, OPT_PID },
		{ "stack", required_argument, NULL, OPT_STACK },
		{ "html", required_argument, NULL, OPT_HTML },
		{ "heap", no_argument, NULL, OPT_HEAP },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	char err[PATH_MAX + 200];
	unsigned long long seed, pid, depth;
	int c;

	*o = (struct options){ .rate = DEFAULT_RATE,
			       .window_ms = DEFAULT_WINDOW_MS,
			       .stack_depth = LKR_STACK_MAX };
	optind = 1;
	while ((c = getopt_long(argc, argv, "+jo:", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_RATE:
			if (!parse_positive(optarg, 100000, &o->rate))
				goto bad_number;
			break;
		case OPT_WINDOW:
			if (!parse_positive(optarg, 1000, &o->window_ms))
				goto bad_number;
			break;
		case OPT_SEED:
			if (!cli_parse_unsigned(optarg, UINT64_MAX, &seed))
				goto bad_number;
			o->seed = seed;
			o->seeded = true;
			break;
		case OPT_DURATION:
			if (!parse_positive(optarg, 1e6, &o->duration))
				goto bad_number;
			break;
		case OPT_LIB:
			if (o->nlibs == LKR_OBJECTS_MAX - 1) {
				cli_error("races", NULL, "at most %u --lib", LKR_OBJECTS_MAX - 1);
				return -1;
			}
			o->libs[o->nlibs++] = optarg;
			break;
		case OPT_SUPPRESSIONS:
			if (races_suppressions_read(&o->suppressions, optarg, err, sizeof(err))) {
				cli_error("races", NULL, "%s", err);
				return -1;
			}
			break;
		case OPT_PID:
			if (!cli_parse_unsigned(optarg, INT_MAX, &pid) || !pid)
				goto bad_number;
			o->pid = (pid_t)pid;
			break;
		case OPT_STACK:
			if (!cli_parse_unsigned(optarg, LKR_STACK_MAX, &depth))
				goto bad_number;
			o->stack_depth = (unsigned int)depth;
			break;
		case OPT_HTML:
			o->html = optarg;
			break;
		case OPT_HEAP:
			o->heap = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'o':
			o->output = optarg;
			break;
		default:
			fputs(races_usage, stderr);
			return -1;
		}
	}
	if (o->pid && optind < argc) {
		cli_error("races", "lowkey races --pid PID, or lowkey races -- COMMAND",
			  "--pid and a command to run: choose one");
		return -1;
	}
	if (!o->pid && optind >= argc) {
		cli_error("races", "lowkey races -- ./my-program args", "no command to run");
		return -1;
	}
	return optind;
bad_number:
	cli_error("races",
		  "--rate: 0 < N <= 100000; --window: 0 < MS <= 1000; --duration: seconds > 0; "
		  "--seed: 0 to 2^64-1; --pid: a process id; --stack: 0 to 16",
		  "bad number '%s'", optarg);
	return -1;
}

/* ---- the plan ---- */

/* The objects decoded: the program first, then --lib's. */
struct objects {
	unsigned int n;
	char paths[LKR_OBJECTS_MAX][PATH_MAX]; /* absolute */
	const char *names[LKR_OBJECTS_MAX];    /* paths[i], for races_run */
	struct stat st[LKR_OBJECTS_MAX];
};

static void fill_plan(struct lkr_header *h, const struct races_code *code,
		      const struct objects *objs, const struct options *o)
{
	struct lkr_object *objects;
	struct lkr_insn *insns;
	uint32_t n = 0;

	h->magic = LKR_MAGIC;
	h->version = LKR_VERSION;
	h->header_size = LKR_HEADER_SIZE;
	h->seed = o->seed;
	h->period_ns = (uint64_t)(1e9 / o->rate + 0.5);
	h->window_ns = (uint64_t)(o->window_ms * 1e6 + 0.5);
	h->duration_ns = (uint64_t)(o->duration * 1e9 + 0.5);
	h->max_races = MAX_RACES;
	h->stack_depth = o->stack_depth;
	h->heap = o->heap;
	h->nobjects = objs->n;
	objects = lkr_objects(h);
	for (unsigned int i = 0; i < objs->n; i++) {
		objects[i].dev = objs->st[i].st_dev;
		objects[i].ino = objs->st[i].st_ino;
		snprintf(objects[i].path, sizeof(objects[i].path), "%s", objs->paths[i]);
	}
	insns = lkr_insns(h);
	for (size_t i = 0; i < code->n; i++) /* by object: the program's first */
		if (code->insns[i].sampled)
			insns[n++] = code->insns[i].plan;
	h->ninsns = n;
}

/* The plan in a new private directory (its name in dir), sized and mapped; NULL after saying why,
 * the directory removed. */
static struct lkr_header *create_plan(char *dir, size_t dirlen, const struct races_code *code,
				      const struct objects *objs, const struct options *o,
				      char *path, size_t pathlen, size_t *size)
{
	struct lkr_header *h;
	int fd;

	if (preload_make_dir("lowkey-races", dir, dirlen) != 0) {
		cli_error("races", "set TMPDIR to a writable directory",
			  "cannot make a directory for the plan: %s", strerror(errno));
		return NULL;
	}
	*size = (size_t)lkr_file_size(objs->n, (uint32_t)code->sampled, MAX_RACES);
	snprintf(path, pathlen, "%s/plan", dir);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)*size) != 0) {
		cli_error("races", "set TMPDIR to a writable directory", "cannot create %s: %s",
			  path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
		rmdir(dir);
		return NULL;
	}
	h = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED) {
		cli_error("races", NULL, "cannot map %s: %s", path, strerror(errno));
		unlink(path);
		rmdir(dir);
		return NULL;
	}
	fill_plan(h, code, objs, o);
	return h;
}

/* Add file (the program, or a --lib) to the objects and decode it; 0, or the exit status. */
static int add_object(struct objects *objs, const char *file, struct races_code *code)
{
	char err[PATH_MAX + 200], *path = objs->paths[objs->n];
	int ret;

	if (!realpath(file, path) || stat(path, &objs->st[objs->n]) != 0) {
		cli_error("races", NULL, "%s: %s", file, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	ret = races_decode(path, (uint8_t)objs->n, code, err, sizeof(err));
	if (!ret)
		ret = races_mark_metadata(path, (uint8_t)objs->n, code, err, sizeof(err));
	if (!ret)
		ret = races_mark_atomics(path, (uint8_t)objs->n, code, err, sizeof(err));
	if (ret) {
		cli_error("races", "lowkey races samples x86-64 ELF programs and libraries",
			  "%s: %s", path, err);
		return CLI_EXIT_FAIL;
	}
	objs->names[objs->n] = path;
	objs->n++;
	return 0;
}

/* The program's code and the libraries', decoded; 0, or the exit status after saying why. */
static int decode(const char *exe, const struct options *o, struct objects *objs,
		  struct races_code *code)
{
	int ret = add_object(objs, exe, code);

	for (unsigned int i = 0; !ret && i < o->nlibs; i++)
		ret = add_object(objs, o->libs[i], code);
	if (!ret && !code->sampled) {
		cli_error(
			"races", NULL,
			"%s: no instruction to sample (%zu access memory: %zu atomic, %zu on the stack)",
			exe, code->n, code->atomic, code->stack);
		ret = CLI_EXIT_FAIL;
	}
	return ret;
}

/* ---- the command ---- */

/*
 * Whether the plan's layout is still the one written: the program had the file mapped writable,
 * and the records are found from these fields.
 */
static bool plan_intact(const struct lkr_header *h, const struct races_code *code,
			const struct objects *objs)
{
	return h->magic == LKR_MAGIC && h->version == LKR_VERSION &&
	       h->header_size == LKR_HEADER_SIZE && h->nobjects == objs->n &&
	       h->ninsns == code->sampled && h->max_races == MAX_RACES;
}

/* The page is drawn from the JSON: the same figures, by the same code. */
static int write_html(const struct options *o, struct lkr_header *h, const struct races_code *code,
		      struct races_run *run)
{
	char *json = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&json, &len);
	int ret;

	if (!f) {
		cli_error("races", NULL, "cannot write %s: %s", o->html, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	races_report(f, h, code, run, true);
	ret = fclose(f) == 0 ? races_html(json, len, o->html) : CLI_EXIT_FAIL;
	free(json);
	return ret;
}

static int report(const struct options *o, struct lkr_header *h, const struct races_code *code,
		  const struct objects *objs, struct races_run *run, size_t *found)
{
	char err[PATH_MAX + 200];
	FILE *out = stderr;
	int ret = 0;

	if (!plan_intact(h, code, objs)) {
		cli_error("races", NULL,
			  "the plan's file was changed under it: %s's report is lost",
			  run->command);
		return CLI_EXIT_FAIL;
	}
	if (!(h->flags & LKR_F_STARTED)) {
		cli_error("races",
			  h->error[0] ? NULL : "does it clear LD_PRELOAD, or run another program?",
			  "%s was not sampled%s%s", run->command, h->error[0] ? ": " : "",
			  h->error);
		return CLI_EXIT_FAIL;
	}
	if (o->output && !(out = lk__out_fopen(o->output, err, sizeof(err)))) {
		cli_error("races", "choose a writable place with -o", "%s", err);
		return CLI_EXIT_FAIL;
	}
	*found = races_report(out, h, code, run, o->json);
	if (fflush(out) != 0 || ferror(out)) {
		cli_error("races", NULL, "writing the report failed: %s", strerror(errno));
		ret = CLI_EXIT_FAIL;
	}
	if (out != stderr && fclose(out) != 0 && !ret) {
		cli_error("races", NULL, "writing %s failed: %s", o->output, strerror(errno));
		ret = CLI_EXIT_FAIL;
	}
	if (!ret && o->html)
		ret = write_html(o, h, code, run);
	return ret;
}

static int run_sampled(char **argv, const char *lib, const struct objects *objs, struct options *o,
		       struct races_code *code)
{
	char dir[PATH_MAX], path[PATH_MAX + 16], var[PATH_MAX + 64];
	char *env[] = { var, NULL };
	struct races_run run = {
		.command = argv[0],
		.paths = objs->names,
		.suppressions = &o->suppressions,
		.heap = o->heap,
	};
	struct lkr_header *h;
	size_t size, found = 0;
	pid_t child;
	int status, ret;

	h = create_plan(dir, sizeof(dir), code, objs, o, path, sizeof(path), &size);
	if (!h)
		return CLI_EXIT_FAIL;
	snprintf(var, sizeof(var), "LOWKEY_RACES_FILE=%s", path);
	status = preload_run(argv, lib, env, &child);
	if (status == -EINTR) {
		ret = CLI_EXIT_FAIL; /* asked to stop before it started: the caller raises it */
	} else if (status < 0) {
		cli_error("races", NULL, "cannot run '%s': %s", argv[0], strerror(-status));
		ret = -status == ENOENT ? 127 : 126;
	} else {
		run.seed = o->seed;
		run.rate = o->rate;
		run.window_ms = o->window_ms;
		run.status = status;
		ret = report(o, h, code, objs, &run, &found);
	}
	munmap(h, size);
	unlink(path);
	rmdir(dir);
	if (ret)
		return ret;
	if (found)
		return RACES_EXIT_FOUND;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* --pid: the plan handed to the library waiting in the process, then the report. */
static int run_attached(const char *lib, const struct objects *objs, struct options *o,
			struct races_code *code)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct races_run run = {
		.command = objs->paths[0],
		.paths = objs->names,
		.suppressions = &o->suppressions,
		.seed = o->seed,
		.rate = o->rate,
		.window_ms = o->window_ms,
		.attached = true,
		.heap = o->heap,
	};
	struct lkr_header *h;
	size_t size, found = 0;
	int fd, ret;

	h = create_plan(dir, sizeof(dir), code, objs, o, path, sizeof(path), &size);
	if (!h)
		return CLI_EXIT_FAIL;
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	ret = fd < 0 ? CLI_EXIT_FAIL : races_attach(o->pid, fd, objs->paths[0], lib);
	if (fd < 0)
		cli_error("races", NULL, "cannot open %s: %s", path, strerror(errno));
	else
		close(fd);
	if (!ret)
		ret = report(o, h, code, objs, &run, &found);
	munmap(h, size);
	unlink(path);
	rmdir(dir);
	if (ret)
		return ret;
	return found ? RACES_EXIT_FOUND : 0;
}

/* The program to decode: COMMAND's file, or --pid's executable (the file it maps). */
static int program_of(const struct options *o, char **argv, char *exe, size_t len)
{
	int ret;

	if (!o->pid)
		return preload_check_command("races", argv[0], "its threads cannot be sampled", exe,
					     len);
	ret = cli_check_pid("races", o->pid, true);
	if (!ret)
		snprintf(exe, len, "/proc/%d/exe", (int)o->pid);
	return ret;
}

/* Before the command runs: a page that cannot be written is said now, not after it. */
static int check_html(const struct options *o)
{
	char err[PATH_MAX + 200];
	int fd;

	if (!o->html || strcmp(o->html, "-") == 0)
		return 0;
	fd = lk__out_open(o->html, LK__OUT_REPLACE, NULL, err, sizeof(err));
	if (fd < 0) {
		cli_error("races", "choose a writable place with --html", "%s", err);
		return CLI_EXIT_FAIL;
	}
	close(fd);
	return 0;
}

/*
 * --heap: the heap library, found beside liblowkey-races.so (lib), in front of it in what is
 * preloaded (into buf): its malloc comes first. Returns buf, or NULL after saying why.
 */
static const char *with_heap(const char *lib, char *buf, size_t len)
{
	const char *slash = strrchr(lib, '/');
	int dir = slash ? (int)(slash - lib + 1) : 0;
	int n = snprintf(buf, len, "%.*s%s", dir, lib, LK_RACES_HEAP_FILE);

	if (n < 0 || (size_t)n >= len - strlen(lib) - 1 || access(buf, R_OK) != 0) {
		cli_error("races", "install it beside liblowkey-races.so",
			  "--heap: cannot read %.*s%s", dir, lib, LK_RACES_HEAP_FILE);
		return NULL;
	}
	snprintf(buf + n, len - (size_t)n, ":%s", lib);
	return buf;
}

/* The command run or the process attached to, a signal for lowkey held back until its plan is
 * removed (signal_forward.h). */
static int run_deferring_signals(char **argv, const char *lib, const struct objects *objs,
				 struct options *o, struct races_code *code)
{
	struct signal_defer held_back;
	int ret;

	signal_forward_defer(&held_back);
	ret = o->pid ? run_attached(lib, objs, o, code) : run_sampled(argv, lib, objs, o, code);
	signal_forward_undefer(&held_back);
	return ret;
}

static int races_run(int argc, char **argv)
{
	char lib_buf[PATH_MAX], heap_buf[2 * PATH_MAX + 2], exe[PATH_MAX];
	struct races_code code = { 0 };
	struct objects *objs = NULL;
	struct options o;
	const char *lib;
	int first, ret;

	first = parse_options(argc, argv, &o);
	if (first < 0) {
		races_suppressions_free(&o.suppressions);
		return CLI_EXIT_USAGE;
	}
	argv += first;
	lib = preload_find("races", &races_lib, lib_buf, sizeof(lib_buf));
	if (lib && o.heap && !o.pid)
		lib = with_heap(lib, heap_buf, sizeof(heap_buf));
	ret = lib ? check_html(&o) : CLI_EXIT_FAIL;
	if (!ret)
		ret = program_of(&o, argv, exe, sizeof(exe));
	if (!ret && !(objs = calloc(1, sizeof(*objs)))) {
		cli_error("races", NULL, "out of memory");
		ret = CLI_EXIT_FAIL;
	}
	if (!ret)
		ret = decode(exe, &o, objs, &code);
	if (!ret && !o.seeded && getrandom(&o.seed, sizeof(o.seed), 0) != (ssize_t)sizeof(o.seed))
		o.seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
	if (!ret)
		ret = run_deferring_signals(argv, lib, objs, &o, &code);
	races_code_free(&code);
	races_suppressions_free(&o.suppressions);
	free(objs);
	return ret;
}

const struct cli_command cmd_races = {
	.name = "races",
	.summary = "find data races in a running program by sampling with watchpoints",
	.usage = races_usage,
	.run = races_run,
};
