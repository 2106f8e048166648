// SPDX-License-Identifier: MIT
/*
 * `lowkey races` end to end on races_fixture.c (and races_cxx.cpp, built with Clang and GCC), with
 * the order of the sampled instructions fixed (--seed) and a stated rate, window and run time: two
 * threads adding to a plain int without a lock are reported, with both accesses named (function,
 * file) and the global they touch; so are a pointer published without release, a global a signal
 * handler writes, adjacent bitfields written by two threads and a plain member in C++, each with
 * both sides named (C++ demangled: Counter::bump()). A race two calls deep on each side has both
 * threads' stacks, innermost first (an inlined function an entry of its own), in the text, the JSON
 * and the --html page; a race whose call chains pass through a library the program dlopen()ed
 * after sampling started, and closed before it ended, has that frame named with its function and
 * line; a race: suppression naming a caller suppresses it, race_top: does not, nor race: with no
 * stacks taken. The same ++ under a mutex is not; nor are atomics: lock-prefixed
 * read-modify-writes, and the plain movs of relaxed loads and stores that only the debug
 * information shows atomic (_Atomic in C, std::atomic in C++, volatile sig_atomic_t), nor those
 * Clang's sanitizer metadata lists (an _Atomic through a pointer, races_metadata.c). The ++ in a
 * shared library is reported with --lib naming it, not sampled without, and counted but not printed
 * when a suppressions file matches its source file. --pid attaches to the fixture started waiting
 * for it, twice in turn and until it exits, with nothing left open after; a child it forks does not
 * wait; a process not started so is refused. With --heap, a race on a block malloc'ed in a named
 * function names the block, its size, the offset and that function (the new one where a block was
 * freed and allocated again), in text and JSON, with --pid too, and is suppressed by that function;
 * without it no block is named and the program's malloc is the C library's. In C++ (Clang's and
 * GCC's builds) a block made with new is named by the function that said new, not operator new.
 * lowkey sent SIGTERM or SIGHUP while the program runs passes it on, reports, removes the plan's
 * directory and exits 128 + the signal. Each racy access repeats in a loop for the whole run,
 * so that the sampler reaches it many times at the rate given. Skipped where this process cannot
 * have a process-wide execute watchpoint (perf_event_paranoid, seccomp, no breakpoints, a kernel
 * before 5.13, qemu-user), saying why.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/error.h>
#include <lowkey/watch.h>

#include "cli/run.h"

/* What each run states: the seed, 500 instructions armed a second, 1 ms windows, 1 s of work. */
#define RACES_OPTS LOWKEY " races --seed 1 --rate 500 --window 1 -j"
#define RACES RACES_OPTS " -- " FIXTURE_BIN
#define SECONDS "1"
/*
 * Where a race must be found: 5 ms windows for 3 s. On a loaded machine the other thread may not
 * run at all during a window of 1 ms, and a run of 1 s opens only a few on the racy instruction.
 */
#define RACY_OPTS LOWKEY " races --seed 1 --rate 500 --window 5 -j"
#define RACY RACY_OPTS " -- " FIXTURE_BIN
#define RACY_SECONDS "3"

static struct lkt_run r;

/* Whether a run saw no race at all: none reported, none suppressed. */
static bool saw_nothing(const struct lkt_run *run)
{
	return run->status == 0 &&
	       (strstr(run->out, "\"suppressed\": 0,") || !strstr(run->out, "suppressed"));
}

/*
 * A run where a race must be found: with seed 1, and where it saw nothing, once more with seed 2.
 * On a machine loaded enough that the racing thread does not run in any window of the first run
 * (it happened), the second gives it other instructions and other windows; a detector that
 * cannot find the race misses it in both.
 */
static void __attribute__((format(printf, 1, 2))) racy_sh(const char *fmt, ...)
{
	char cmd[4096], *seed;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	lkt_sh(&r, "%s", cmd);
	seed = strstr(cmd, "--seed 1 ");
	if (saw_nothing(&r) && seed) {
		seed[7] = '2';
		print_message("no race seen with seed 1: once more with seed 2\n");
		lkt_sh(&r, "%s", cmd);
	}
}

static void a_function(void)
{
}

static int can_sample(void **state)
{
	struct lk_watch *w;
	int err = lk_watch_add(&w, (const void *)a_function, 1,
			       LK_WATCH_EXEC | LK_WATCH_PROCESS | LK_WATCH_DISABLED, NULL, NULL);

	(void)state;
	if (err) {
		print_message("skipped: no process-wide execute watchpoint here: %s\n",
			      lk_last_error());
		return -1;
	}
	lk_watch_remove(w);
	return 0;
}

/*
 * Whether a race on symbol (a prefix of its name) has f1 on one side and f2 on the other: its
 * JSON object runs from its "addr" to the next race's.
 */
static bool race_between(const char *out, const char *symbol, const char *f1, const char *f2)
{
	char sym[256], fn1[256], fn2[256];
	const char *race = out;

	snprintf(sym, sizeof(sym), "\"symbol\": \"%s", symbol);
	snprintf(fn1, sizeof(fn1), "\"function\": \"%s\"", f1);
	snprintf(fn2, sizeof(fn2), "\"function\": \"%s\"", f2);
	while ((race = strstr(race, "\"addr\": "))) {
		const char *next = strstr(race + 1, "\"addr\": ");
		size_t len = next ? (size_t)(next - race) : strlen(race);
		char *one = strndup(race, len);
		const char *a, *b;
		bool found;

		assert_non_null(one);
		a = strstr(one, fn1);
		b = a ? strstr(a + 1, fn2) : NULL;
		if (!b) { /* the other order */
			b = strstr(one, fn2);
			a = b ? strstr(b + 1, fn1) : NULL;
		}
		found = strstr(one, sym) && a && b;
		free(one);
		if (found)
			return true;
		race++;
	}
	return false;
}

static void expect_race(const char *mode, const char *symbol, const char *f1, const char *f2)
{
	racy_sh("%s %s %s", RACY, mode, RACY_SECONDS);
	if (r.status != 66 || !race_between(r.out, symbol, f1, f2))
		print_error("wanted a race on %s between %s and %s (exit 66):\n%s\n", symbol, f1,
			    f2, r.out);
	assert_int_equal(r.status, 66);
	assert_true(race_between(r.out, symbol, f1, f2));
}

static void plain_counter_is_a_race(void **state)
{
	const char *other;

	(void)state;
	racy_sh("%s plain %s", RACY, RACY_SECONDS);
	lkt_expect(&r, 66, "\"symbol\": \"counter\"");
	lkt_expect(&r, 66, "\"function\": \"bump_plain\"");
	lkt_expect(&r, 66, "races_fixture.c\"");
	/* the other thread's access is named too, not only the held one's */
	other = strstr(r.out, "\"other\": {");
	assert_non_null(other);
	assert_non_null(strstr(other, "\"function\": \"bump_plain\""));
}

static void counter_under_a_mutex_is_not(void **state)
{
	(void)state;
	lkt_sh(&r, "%s mutex %s", RACES, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
}

static void atomic_counters_are_not(void **state)
{
	(void)state;
	lkt_sh(&r, "%s atomic %s", RACES, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"atomic\": 0,")); /* their lock-prefixed adds were seen */
}

static void atomics_the_debug_information_shows_are_not(void **state)
{
	(void)state;
	lkt_sh(&r, "%s atomic_plain %s", RACES, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"atomic_c11\": 0,")); /* the relaxed movs were read as such */
	lkt_sh(&r, "%s sig_atomic %s", RACES, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"sig_atomic\": 0,"));
}

static void cxx_atomic_is_not_and_plain_is(void **state)
{
	(void)state;
#ifdef FIXTURE_CXX
	lkt_sh(&r, "%s -- %s atomic %s", RACES_OPTS, FIXTURE_CXX, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"atomic_std\": 0,"));
	racy_sh("%s -- %s plain %s", RACY_OPTS, FIXTURE_CXX, RACY_SECONDS);
	/* demangled, the mangled name kept beside; the caller in the stack */
	lkt_expect(&r, 66, "\"function\": \"Counter::bump()\"");
	lkt_expect(&r, 66, "\"mangled\": \"_ZN7Counter4bumpEv\"");
	lkt_expect(&r, 66, "\"function\": \"(anonymous namespace)::bump_plain()\"");
	lkt_expect(&r, 66, "races_cxx.cpp\"");
	racy_sh("%s races --seed 1 --rate 500 --window 5 -- %s plain %s", LOWKEY, FIXTURE_CXX,
		RACY_SECONDS);
	lkt_expect(&r, 66, "by thread");
	lkt_expect(&r, 66, " at Counter::bump()+0x");
	/* suppressed by the demangled name, as a file written for ThreadSanitizer names it */
	racy_sh("%s --suppressions %s/cxx.supp -- %s plain %s", RACY_OPTS, SUPPRESSIONS_DIR,
		FIXTURE_CXX, RACY_SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"suppressed\": 0,"));
#else
	skip(); /* no clang++ here (races.deps) */
#endif
}

/* The same C++ race built with g++: GCC's mangling (the same ABI) demangled as well. */
static void cxx_built_by_gcc_is_demangled(void **state)
{
	(void)state;
#ifdef FIXTURE_CXX_GCC
	racy_sh("%s -- %s plain %s", RACY_OPTS, FIXTURE_CXX_GCC, RACY_SECONDS);
	lkt_expect(&r, 66, "\"function\": \"Counter::bump()\"");
	lkt_expect(&r, 66, "\"mangled\": \"_ZN7Counter4bumpEv\"");
	lkt_expect(&r, 66, "\"function\": \"(anonymous namespace)::bump_plain()\"");
#else
	skip(); /* no g++ here (compilers.deps) */
#endif
}

/*
 * The functions of the first stack in text from its "\"stack\": [" to its "]", joined with
 * commas, in order.
 */
static void stack_functions(const char *stack, char *out, size_t len)
{
	const char *end = strchr(stack, ']'), *f = stack;
	size_t n = 0;

	out[0] = 0;
	while ((f = strstr(f, "\"function\": \"")) && f < end) {
		const char *name = f + strlen("\"function\": \""), *quote = strchr(name, '"');

		n += (size_t)snprintf(out + n, len - n, "%s%.*s", n ? "," : "", (int)(quote - name),
				      name);
		if (n >= len)
			break;
		f = quote;
	}
}

/* Whether some stack in the JSON begins with the functions want ("a,b,c"). */
static bool json_stack_begins(const char *out, const char *want)
{
	char functions[4096];

	for (const char *s = out; (s = strstr(s, "\"stack\": [")); s++) {
		stack_functions(s, functions, sizeof(functions));
		if (strncmp(functions, want, strlen(want)) == 0)
			return true;
	}
	return false;
}

/* Whether the text has the frames "#0  first", "#1  second", "#2  third" in one stack. */
static bool text_stack_has(const char *out, const char *first, const char *second,
			   const char *third)
{
	char frame[3][256];
	const char *at = out;

	snprintf(frame[0], sizeof(frame[0]), "#0  %s", first);
	snprintf(frame[1], sizeof(frame[1]), "\n    #1  %s", second);
	snprintf(frame[2], sizeof(frame[2]), "\n    #2  %s", third);
	while ((at = strstr(at, frame[0]))) {
		const char *one = strchr(at, '\n'), *two = one ? strchr(one + 1, '\n') : NULL;

		at++;
		if (one && two && strncmp(one, frame[1], strlen(frame[1])) == 0 &&
		    strncmp(two, frame[2], strlen(frame[2])) == 0)
			return true;
	}
	return false;
}

static void both_stacks_named(void **state)
{
	(void)state;
	/* the writer's access is in deep_add, inlined in inner_write: an entry of its own */
	racy_sh("%s deep %s", RACY, RACY_SECONDS);
	if (r.status != 66 || !json_stack_begins(r.out, "deep_add,inner_write,outer_write,work") ||
	    !json_stack_begins(r.out, "inner_read,outer_read,work"))
		print_error("wanted both stacks of the race on deep_value:\n%s\n", r.out);
	lkt_expect(&r, 66, "\"symbol\": \"deep_value\"");
	lkt_expect(&r, 66, "\"function\": \"deep_add\", \"mangled\": \"deep_add\", \"offset\": 0");
	lkt_expect(&r, 66, "\"inlined\": true");
	assert_true(json_stack_begins(r.out, "deep_add,inner_write,outer_write,work"));
	assert_true(json_stack_begins(r.out, "inner_read,outer_read,work"));
	/* the same in text, and none with --stack 0 */
	racy_sh("%s races --seed 1 --rate 500 --window 5 -- %s deep %s", LOWKEY, FIXTURE_BIN,
		RACY_SECONDS);
	lkt_expect(&r, 66, "deep_value");
	assert_true(text_stack_has(r.out, "deep_add (inlined) (races_fixture.c:", "inner_write+",
				   "outer_write+"));
	assert_true(text_stack_has(r.out, "inner_read+", "outer_read+", "work+"));
	racy_sh("%s races --seed 1 --rate 500 --window 5 --stack 0 -j -- %s deep %s", LOWKEY,
		FIXTURE_BIN, RACY_SECONDS);
	lkt_expect(&r, 66, "\"stack\": []");
	assert_false(json_stack_begins(r.out, "deep_add"));
	lkt_sh(&r, "%s races --stack 17 -- true", LOWKEY);
	lkt_expect(&r, 2, "bad number '17'");
}

/* --html: the page holds both stacks, escaped; it says what it could not write before running. */
static void html_page(void **state)
{
	char page[] = "/tmp/lkt-races-html.XXXXXX";
	int fd = mkstemp(page);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	lkt_sh(&r,
	       "%s races --seed 1 --rate 500 --window 5 --html %s -- %s deep %s >/dev/null 2>&1; "
	       "st=$?; cat %s; exit $st",
	       LOWKEY, page, FIXTURE_BIN, RACY_SECONDS, page);
	unlink(page);
	lkt_expect(&r, 66, "<!DOCTYPE html>");
	lkt_expect(&r, 66, "deep_value");
	lkt_expect(&r, 66, "<code>inner_write+0x");
	lkt_expect(&r, 66, "<code>outer_read+0x");
	assert_null(strstr(r.out, "<script"));
	lkt_sh(&r, "%s races --html /nonexistent/dir/page.html -- %s mutex 0.1", LOWKEY,
	       FIXTURE_BIN);
	lkt_expect(&r, 1, "choose a writable place with --html");
}

/*
 * A frame in a library dlopen()ed after sampling started (and dlclose()d before the end) is named
 * with its function and line, on both sides: the library lists it as it records the race.
 */
static void frame_in_a_library_opened_later(void **state)
{
	(void)state;
	racy_sh("%s late %s", RACY, RACY_SECONDS);
	if (r.status != 66 || !json_stack_begins(r.out, "late_add,races_late_call,late_writer") ||
	    !json_stack_begins(r.out, "late_get,races_late_call,late_reader"))
		print_error("wanted races_late_call named in both stacks:\n%s\n", r.out);
	lkt_expect(&r, 66, "\"symbol\": \"late_value\"");
	lkt_expect(&r, 66, "races_late.c\"");
	assert_true(json_stack_begins(r.out, "late_add,races_late_call,late_writer"));
	assert_true(json_stack_begins(r.out, "late_get,races_late_call,late_reader"));
	racy_sh("%s races --seed 1 --rate 500 --window 5 -- %s late %s", LOWKEY, FIXTURE_BIN,
		RACY_SECONDS);
	assert_true(text_stack_has(r.out, "late_add+", "races_late_call+0x", "late_writer+"));
	assert_non_null(strstr(r.out, "races_late_call+0x"));
	assert_non_null(strstr(strstr(r.out, "races_late_call+0x"), " (races_late.c:"));
}

/* A suppressions file of text (one line), written in a file of its own: its path in path. */
static void write_suppressions(char *path, const char *line)
{
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	close(fd);
}

/*
 * In the deep mode only the reader's stack has outer_read, a caller: race: naming it suppresses
 * every race, race_top: (the accesses themselves) none, and race: none where no stack is taken.
 */
static void suppressed_by_a_caller(void **state)
{
	char race[] = "/tmp/lkt-races-supp.XXXXXX", top[] = "/tmp/lkt-races-supp.XXXXXX";

	(void)state;
	write_suppressions(race, "race:outer_read\n");
	write_suppressions(top, "race_top:outer_read\n");
	racy_sh("%s --suppressions %s -- %s deep %s", RACY_OPTS, race, FIXTURE_BIN, RACY_SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"suppressed\": 0,"));
	racy_sh("%s --suppressions %s -- %s deep %s", RACY_OPTS, top, FIXTURE_BIN, RACY_SECONDS);
	lkt_expect(&r, 66, "\"symbol\": \"deep_value\"");
	lkt_expect(&r, 66, "\"suppressed\": 0,");
	racy_sh("%s --stack 0 --suppressions %s -- %s deep %s", RACY_OPTS, race, FIXTURE_BIN,
		RACY_SECONDS);
	lkt_expect(&r, 66, "\"symbol\": \"deep_value\"");
	lkt_expect(&r, 66, "\"suppressed\": 0,");
	unlink(race);
	unlink(top);
}

/*
 * Clang's sanitizer metadata lists the relaxed movs of an _Atomic reached through a pointer, which
 * the debug information cannot tell from plain ones (built without it, the same program is
 * reported: docs/races.md). A plain int in a function the metadata covers is still sampled, and found. A list
 * whose entries point outside the code is not read.
 */
static void atomics_the_sanitizer_metadata_lists_are_not(void **state)
{
	(void)state;
#ifdef FIXTURE_METADATA
	char copy[] = "/tmp/lkt-races-md-XXXXXX", bad[sizeof(copy) + 12];
	int fd = mkstemp(copy);

	lkt_sh(&r, "%s -- %s atomic %s", RACES_OPTS, FIXTURE_METADATA, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"atomic_metadata\": 0,"));
	assert_null(strstr(r.out, "\"covered\": 0,"));
	racy_sh("%s -- %s plain %s", RACY_OPTS, FIXTURE_METADATA, RACY_SECONDS);
	lkt_expect(&r, 66, "bump_plain");

	/* Every byte 0xff: each entry names the byte before itself, no code there. */
	assert_true(fd >= 0);
	close(fd);
	snprintf(bad, sizeof(bad), "%s.bytes", copy);
	lkt_sh(&r,
	       "objcopy --dump-section sanmd_atomics=%s %s %s && LC_ALL=C tr '\\000-\\376' '\\377' "
	       "<%s >%s.ff && objcopy --update-section sanmd_atomics=%s.ff %s %s && %s -- %s atomic %s",
	       bad, FIXTURE_METADATA, copy, bad, bad, bad, copy, copy, RACES_OPTS, copy, SECONDS);
	unlink(bad);
	strcat(bad, ".ff");
	unlink(bad);
	unlink(copy);
	assert_non_null(strstr(r.out, "\"atomic_metadata\": 0,"));
	assert_non_null(strstr(r.out, "\"covered\": 0,"));
#else
	skip(); /* no Clang with -fexperimental-sanitize-metadata here (compilers.deps) */
#endif
}

/* Whether no user but root and this one can change path or what is above it. */
static bool trusted_dir(const char *path)
{
	char dir[4096];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s", path);
	for (char *end = dir + strlen(dir); end > dir; end = strrchr(dir, '/')) {
		*end = 0;
		if (stat(dir[0] ? dir : "/", &st) != 0 || (st.st_uid && st.st_uid != geteuid()) ||
		    (st.st_mode & (S_IWGRP | S_IWOTH)))
			return false;
	}
	return true;
}

/*
 * The program stripped, its DWARF in a separate file its debuglink names: the relaxed movs of an
 * _Atomic are still known (as the reports' lines are), so none is reported.
 */
static void atomics_in_a_separate_debug_file_are_not(void **state)
{
	char dir[] = FIXTURE_DIR "/separate-XXXXXX";

	(void)state;
	if (!trusted_dir(FIXTURE_DIR)) {
		print_message("%s: another user could write there, where debuglink files are not "
			      "looked for\n",
			      FIXTURE_DIR);
		skip();
	}
	assert_non_null(mkdtemp(dir));
	lkt_sh(&r,
	       "{ objcopy --only-keep-debug %s %s/fixture.debug && objcopy --strip-debug "
	       "--add-gnu-debuglink=%s/fixture.debug %s %s/fixture && %s -- %s/fixture "
	       "atomic_plain %s; } 2>&1; s=$?; rm -r %s; exit $s",
	       FIXTURE_BIN, dir, dir, FIXTURE_BIN, dir, RACES_OPTS, dir, SECONDS, dir);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"atomic_c11\": 0,"));
}

static void publication_race(void **state)
{
	(void)state;
	expect_race("publish", "published\"", "publish", "consume");
}

static void race_with_a_signal_handler(void **state)
{
	(void)state;
	expect_race("signal", "ticks\"", "on_alarm", "watch_ticks");
}

static void bitfield_race(void **state)
{
	(void)state;
	expect_race("bitfield", "bits\"", "bump_low", "bump_high");
}

static void suppressed_by_file(void **state)
{
	(void)state;
	racy_sh("%s --suppressions %s/lib.supp --lib %s -- %s lib %s", RACY_OPTS, SUPPRESSIONS_DIR,
		FIXTURE_LIB, FIXTURE_BIN, RACY_SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"suppressed\": 0,"));
	/* the same in text: counted */
	racy_sh("%s --seed 1 --rate 500 --window 5 --suppressions %s/lib.supp --lib %s -- %s lib %s",
		LOWKEY " races", SUPPRESSIONS_DIR, FIXTURE_LIB, FIXTURE_BIN, RACY_SECONDS);
	lkt_expect(&r, 0, "suppressed");
	lkt_sh(&r, "%s races --suppressions /nonexistent/x.supp -- true", LOWKEY);
	lkt_expect(&r, 2, "cannot read /nonexistent/x.supp");
}

/* The fixture started waiting for --pid (mode, seconds), and $pid once its socket is there. */
#define START_WAITING(mode, seconds)                                                           \
	"exec 2>&1; LD_PRELOAD=" RACES_LIB " LOWKEY_RACES_ATTACH=1 " FIXTURE_BIN " " mode      \
	" " seconds " >/dev/null & pid=$!; "                                                   \
	"for i in $(seq 3000); do grep -q \"@lowkey-races.$pid\\$\" /proc/net/unix && break; " \
	"sleep 0.01; done; "
#define ATTACH LOWKEY " races --pid $pid --seed 1 --rate 500 --window 5 -j"

static void attach_with_pid(void **state)
{
	(void)state;
	/* twice in turn to the same process; nothing left armed (no perf event open) after each */
	racy_sh(START_WAITING("plain", "60") ATTACH
		" --duration " RACY_SECONDS "; st=$?; "
		"echo perf events: $(ls -l /proc/$pid/fd | grep -c perf_event); "
		"[ $st = 66 ] && " ATTACH " --duration " RACY_SECONDS "; st=$?; "
		"echo perf events: $(ls -l /proc/$pid/fd | grep -c perf_event); "
		"kill $pid; wait $pid; exit $st");
	lkt_expect(&r, 66, "\"symbol\": \"counter\"");
	lkt_expect(&r, 66, "\"exit_status\": null");
	assert_null(strstr(r.out, "perf events: 1"));
	assert_null(strstr(r.out, "perf events: 2"));
	assert_non_null(strstr(r.out, "perf events: 0"));
}

static void attached_until_the_process_exits(void **state)
{
	(void)state;
	racy_sh(START_WAITING("plain", RACY_SECONDS) ATTACH "; st=$?; wait $pid; exit $st");
	lkt_expect(&r, 66, "\"symbol\": \"counter\"");
	/* a program waiting for --pid and never attached ends as it would alone */
	lkt_sh(&r, "LD_PRELOAD=%s LOWKEY_RACES_ATTACH=1 %s mutex 0.2", RACES_LIB, FIXTURE_BIN);
	assert_int_equal(r.status, 0);
}

/* $plan: the plan process $pid mapped once lowkey races --pid ($cli) handed it over. */
#define WAIT_FOR_PLAN                                                               \
	"for i in $(seq 3000); do plan=$(grep -o '/[^ ]*lowkey-races[^ ]*/plan' "   \
	"/proc/$pid/maps | head -1); [ -n \"$plan\" ] && break; sleep 0.01; done; " \
	"[ -n \"$plan\" ] || { kill -9 $cli $pid; exit 3; }; "

/* lowkey races --pid stopped by a signal while it sampled: it reported, as at the process's end. */
static void expect_stopped_and_reported(void)
{
	if (r.status != 0 && r.status != 66)
		print_error("exit %d, output:\n%s\n", r.status, r.out);
	assert_true(r.status == 0 || r.status == 66);
	assert_non_null(strstr(r.out, "\"exit_status\": null"));
}

/*
 * lowkey races --pid hung up on (its terminal closed) while it samples: it stops the sampling,
 * reports, and removes its plan, as for ^C.
 */
static void attached_then_hung_up(void **state)
{
	(void)state;
	racy_sh(START_WAITING("plain", "60") ATTACH
		" & cli=$!; " WAIT_FOR_PLAN
		"kill -HUP $cli; wait $cli; st=$?; kill $pid; wait $pid; "
		"[ -e \"$plan\" ] && echo plan left: $plan && rm -r \"${plan%%/plan}\"; exit $st");
	expect_stopped_and_reported();
	assert_null(strstr(r.out, "plan left"));
}

/*
 * A child the program forks has no thread waiting for --pid, and keeps no copy of the socket
 * (which would hold its name after the parent exits); the parent can still be attached to.
 */
/* $child: the first child of $pid, once it has one (3: none came). */
#define FIND_CHILD                                                                            \
	"for i in $(seq 3000); do "                                                           \
	"child=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v p=$pid '$4 == p { print $1 }'); " \
	"[ -n \"$child\" ] && break; sleep 0.01; done; [ -n \"$child\" ] || exit 3; "
#define CHILD_SOCKETS "echo child sockets: $(ls -l /proc/$child/fd | grep -c socket); "

static void forked_child_does_not_wait(void **state)
{
	(void)state;
	racy_sh(START_WAITING("fork", "30") FIND_CHILD CHILD_SOCKETS ATTACH
		" --duration " RACY_SECONDS "; "
		"st=$?; kill $child $pid; "
		"wait $pid; exit $st");
	lkt_expect(&r, 66, "child sockets: 0");
	lkt_expect(&r, 66, "\"symbol\": \"counter\"");
}

/*
 * --pid --heap: the process started with the heap library preloaded too names the block; one
 * started without it is sampled, and the report says no block was recorded.
 */
static void attached_with_heap(void **state)
{
	(void)state;
	racy_sh("exec 2>&1; LD_PRELOAD=" RACES_HEAP_LIB ":" RACES_LIB
		" LOWKEY_RACES_ATTACH=1 " FIXTURE_BIN " heap 60 >/dev/null & pid=$!; "
		"for i in $(seq 3000); do grep -q \"@lowkey-races.$pid\\$\" /proc/net/unix && "
		"break; sleep 0.01; done; " ATTACH " --heap --duration " RACY_SECONDS
		"; st=$?; kill $pid; wait $pid; exit $st");
	lkt_expect(&r, 66, "\"function\": \"make_shared\"");
	lkt_expect(&r, 66, "\"offset\": 8,");
	racy_sh(START_WAITING("heap", "60") LOWKEY
		" races --pid $pid --seed 1 --rate 500 --window 5 "
		"--heap --duration " RACY_SECONDS "; st=$?; kill $pid; wait $pid; exit $st");
	lkt_expect(&r, 66, "not started with liblowkey-races-heap.so preloaded");
}

/*
 * lowkey killed (SIGTERM) or hung up on (SIGHUP) while the program runs: the program gets the
 * signal, and lowkey reports, removes the plan's directory and exits as for a program killed by it.
 */
#define STARTED RACES_OPTS " -- " FIXTURE_BIN " started 60"

static void signalled_while_running(void **state)
{
	(void)state;
	lkt_signal_while_running(&r, STARTED, "started", "LOWKEY_RACES_FILE", "/plan", "TERM",
				 128 + SIGTERM, "\"exit_status\": 143");
	lkt_signal_while_running(&r, STARTED, "started", "LOWKEY_RACES_FILE", "/plan", "HUP",
				 128 + SIGHUP, "\"exit_status\": 129");
}

/* A signal for lowkey after it made its plan, before the program started: the plan is removed. */
static void signalled_before_the_program(void **state)
{
	(void)state;
	lkt_signal_before_start(&r, SIGNAL_SHIM, LOWKEY " races -- " FIXTURE_BIN " started 1",
				"started", SIGTERM);
	lkt_signal_before_start(&r, SIGNAL_SHIM, LOWKEY " races -- " FIXTURE_BIN " started 1",
				"started", SIGHUP);
}

#define NOHUP "trap '' HUP; " /* what follows starts ignoring hang-ups */

/*
 * lowkey races --pid started ignoring hang-ups (nohup) keeps them ignored while it samples, not
 * blocked and read as a request to stop; SIGTERM still stops it.
 */
static void attached_under_nohup(void **state)
{
	(void)state;
	racy_sh(START_WAITING("plain", "60") NOHUP ATTACH
		" & cli=$!; " WAIT_FOR_PLAN
		"blk=$(awk '/^SigBlk/ { print $2 }' /proc/$cli/status); "
		"[ $(( 0x$blk & 1 )) = 0 ] || echo hang-ups blocked; "
		"[ $(( (0x$blk >> 14) & 1 )) = 1 ] || echo SIGTERM not blocked; "
		"kill -HUP $cli; kill -TERM $cli; wait $cli; st=$?; kill $pid; wait $pid; exit $st");
	expect_stopped_and_reported();
	assert_null(strstr(r.out, "hang-ups blocked"));
	assert_null(strstr(r.out, "SIGTERM not blocked"));
}

/*
 * lowkey races --pid signalled as it makes its plan, before it hands it over: the process is not
 * sampled, no report, the plan removed, and lowkey ends of the signal.
 */
static void attached_signalled_before_the_plan_was_handed_over(void **state)
{
	(void)state;
	racy_sh(START_WAITING("plain", "3") LKT_DIRS_START LKT_PRELOAD_SHIM SIGNAL_SHIM
		" LKT_SHIM_RAISE_MADE_DIR=2 " LKT_DIRS_LOGGED ATTACH
		"; st=$?; kill $pid; wait $pid; " LKT_DIRS_CHECK "exit $st");
	lkt_expect(&r, 128 + SIGINT, NULL);
	assert_null(strstr(r.out, "exit_status"));
	lkt_expect_dirs_removed(&r);
}

static void pid_refused(void **state)
{
	(void)state;
	lkt_sh(&r, "exec 2>&1; sleep 30 & pid=$!; " ATTACH "; st=$?; kill $pid; exit $st");
	lkt_expect(&r, 1, "is not waiting for lowkey races");
	lkt_expect(&r, 1, "LOWKEY_RACES_ATTACH=1");
	lkt_sh(&r, "%s races --pid 1 -- true", LOWKEY);
	lkt_expect(&r, 2, "choose one");
	if (geteuid() != 0) { /* pid 1 is root's */
		lkt_sh(&r, "%s races --pid 1", LOWKEY);
		lkt_expect(&r, 1, "belongs to uid 0");
	}
}

/* The line "malloc: PATH" the heap modes print: which object the program's malloc is. */
static bool malloc_from(const char *out, const char *object)
{
	const char *line = strstr(out, "malloc: "), *end = line ? strchr(line, '\n') : NULL;
	const char *at = line ? strstr(line, object) : NULL;

	return at && end && at < end;
}

/* The race's "heap" object in the JSON, up to its "held" side (into buf). */
static const char *heap_json(const char *out, char *buf, size_t len)
{
	const char *heap = strstr(out, "\"heap\": {\n        \"start\"");
	const char *held = heap ? strstr(heap, "\"held\"") : NULL;

	if (!held)
		return NULL;
	snprintf(buf, len, "%.*s", (int)(held - heap), heap);
	return buf;
}

/*
 * --heap: a race on a member (at +8) of a block of 24 bytes malloc'ed in make_shared() names the
 * block and the function that allocated it; the program's malloc is liblowkey-races-heap.so's.
 */
static void heap_block_named(void **state)
{
	char buf[4096];
	const char *heap;

	(void)state;
	racy_sh("%s --heap -- %s heap %s", RACY_OPTS, FIXTURE_BIN, RACY_SECONDS);
	heap = heap_json(r.out, buf, sizeof(buf));
	if (r.status != 66 || !heap)
		print_error("wanted a race on the heap block:\n%s\n", r.out);
	lkt_expect(&r, 66, "\"recorded\": true");
	assert_true(malloc_from(r.out, "liblowkey-races-heap.so"));
	assert_non_null(heap);
	assert_non_null(strstr(heap, "\"size\": 24,"));
	assert_non_null(strstr(heap, "\"offset\": 8,"));
	assert_non_null(strstr(heap, "\"site\": {"));
	assert_non_null(strstr(heap, "\"function\": \"make_shared\""));
	assert_non_null(strstr(heap, "races_fixture.c\""));
}

/*
 * A block malloc'ed in first_site(), freed, and one malloc'ed in second_site() (the allocator gives
 * the same back): the race names second_site, in text.
 */
static void heap_block_freed_and_reallocated_names_the_new_site(void **state)
{
	(void)state;
	racy_sh("%s races --seed 1 --rate 500 --window 5 --heap -- %s heap_again %s", LOWKEY,
		FIXTURE_BIN, RACY_SECONDS);
	if (!strstr(r.out, "same block again: yes"))
		print_message("the allocator gave another block: the sites differ anyway\n");
	lkt_expect(&r, 66, "heap block of 24 bytes at +8, 8 bytes at 0x");
	lkt_expect(&r, 66, "  allocated by thread ");
	lkt_expect(&r, 66, " at second_site+0x");
	assert_null(strstr(r.out, "first_site"));
}

/* Without --heap: the same race names no block, and nothing is interposed. */
static void no_heap_blocks_without_the_option(void **state)
{
	(void)state;
	racy_sh("%s -- %s heap %s", RACY_OPTS, FIXTURE_BIN, RACY_SECONDS);
	lkt_expect(&r, 66, "\"heap\": null");
	assert_true(malloc_from(r.out, "libc.so"));
	assert_null(strstr(r.out, "liblowkey-races-heap"));
	assert_null(strstr(r.out, "make_shared"));
}

/* A race is suppressed by the function that allocated its block, as TSan matches it. */
static void heap_race_suppressed_by_allocation_site(void **state)
{
	(void)state;
	racy_sh("%s --heap --suppressions %s/heap.supp -- %s heap %s", RACY_OPTS, SUPPRESSIONS_DIR,
		FIXTURE_BIN, RACY_SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"suppressed\": 0,"));
}

/*
 * --heap in C++: the racing object, made with new in make_tally() after a std::bad_alloc was
 * thrown through operator new and caught, is named by make_tally, not by the C++ library's
 * operator new.
 */
static void cxx_heap_block_named_by_the_caller_of_new(const char *fixture)
{
	char buf[4096];
	const char *heap;

	racy_sh("%s --heap -- %s heap %s", RACY_OPTS, fixture, RACY_SECONDS);
	heap = heap_json(r.out, buf, sizeof(buf));
	if (r.status != 66 || !heap)
		print_error("wanted a race on the heap block:\n%s\n", r.out);
	lkt_expect(&r, 66, "bad_alloc: caught");
	assert_non_null(heap);
	assert_non_null(strstr(heap, "\"size\": 16,"));
	assert_non_null(strstr(heap, "\"offset\": 8,"));
	assert_non_null(strstr(heap, "\"function\": \"make_tally()\""));
	assert_non_null(strstr(heap, "\"mangled\": \"_Z10make_tallyv\""));
	assert_non_null(strstr(heap, "races_cxx.cpp\""));
	assert_null(strstr(heap, "operator new"));
}

static void cxx_heap_block_named_by_new_caller(void **state)
{
	(void)state;
#ifdef FIXTURE_CXX
	cxx_heap_block_named_by_the_caller_of_new(FIXTURE_CXX);
#endif
#ifdef FIXTURE_CXX_GCC
	cxx_heap_block_named_by_the_caller_of_new(FIXTURE_CXX_GCC);
#endif
#if !defined(FIXTURE_CXX) && !defined(FIXTURE_CXX_GCC)
	skip(); /* neither clang++ nor g++ here (races.deps, compilers.deps) */
#endif
}

static void race_in_a_library_with_lib(void **state)
{
	(void)state;
	racy_sh("%s --lib %s -- %s lib %s", RACY_OPTS, FIXTURE_LIB, FIXTURE_BIN, RACY_SECONDS);
	lkt_expect(&r, 66, "\"function\": \"races_lib_bump\"");
	lkt_expect(&r, 66, "\"symbol\": \"counter\"");
	lkt_expect(&r, 66, "races_lib.c\"");
	lkt_sh(&r, "%s lib %s", RACES, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
}

static void bad_usage(void **state)
{
	(void)state;
	lkt_sh(&r, "%s races --rate 0 -- true", LOWKEY);
	lkt_expect(&r, 2, "bad number '0'");
	lkt_sh(&r, "%s races", LOWKEY);
	lkt_expect(&r, 2, "no command to run");
	lkt_sh(&r, "%s races -- lowkey-no-such-command", LOWKEY);
	lkt_expect(&r, 127, "command not found");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_usage),
		cmocka_unit_test(plain_counter_is_a_race),
		cmocka_unit_test(counter_under_a_mutex_is_not),
		cmocka_unit_test(atomic_counters_are_not),
		cmocka_unit_test(race_in_a_library_with_lib),
		cmocka_unit_test(atomics_the_debug_information_shows_are_not),
		cmocka_unit_test(cxx_atomic_is_not_and_plain_is),
		cmocka_unit_test(cxx_built_by_gcc_is_demangled),
		cmocka_unit_test(atomics_the_sanitizer_metadata_lists_are_not),
		cmocka_unit_test(atomics_in_a_separate_debug_file_are_not),
		cmocka_unit_test(publication_race),
		cmocka_unit_test(race_with_a_signal_handler),
		cmocka_unit_test(bitfield_race),
		cmocka_unit_test(both_stacks_named),
		cmocka_unit_test(html_page),
		cmocka_unit_test(frame_in_a_library_opened_later),
		cmocka_unit_test(suppressed_by_a_caller),
		cmocka_unit_test(suppressed_by_file),
		cmocka_unit_test(attach_with_pid),
		cmocka_unit_test(attached_until_the_process_exits),
		cmocka_unit_test(forked_child_does_not_wait),
		cmocka_unit_test(pid_refused),
		cmocka_unit_test(heap_block_named),
		cmocka_unit_test(heap_block_freed_and_reallocated_names_the_new_site),
		cmocka_unit_test(no_heap_blocks_without_the_option),
		cmocka_unit_test(heap_race_suppressed_by_allocation_site),
		cmocka_unit_test(cxx_heap_block_named_by_new_caller),
		cmocka_unit_test(attached_with_heap),
		cmocka_unit_test(signalled_while_running),
		cmocka_unit_test(signalled_before_the_program),
		cmocka_unit_test(attached_then_hung_up),
		cmocka_unit_test(attached_signalled_before_the_plan_was_handed_over),
		cmocka_unit_test(attached_under_nohup),
	};

	if (can_sample(NULL))
		return 77;
	/*
	 * The programs' threads sleep 50 us after each batch of their racy accesses: at the rates
	 * used each access still comes every few tens of microseconds, well inside a window, and
	 * the other tests running meanwhile keep most of the CPU (spinning, the two threads took both
	 * CPUs of a small machine for the whole suite).
	 */
	setenv("LKT_FIXTURE_PAUSE_US", "50", 0); /* unless set: 0 spins */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
