/* SPDX-License-Identifier: MIT */
/* For end-to-end tests: run a command line, capture its output and exit status. */
#ifndef LKT_RUN_H
#define LKT_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

struct lkt_run {
	int status;	 /* exit status, or 128 + signal */
	char out[65536]; /* stdout and stderr together, truncated */
};

static inline int lkt_sh(struct lkt_run *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Run fmt... through /bin/sh with stderr merged into stdout. */
static inline int lkt_sh(struct lkt_run *r, const char *fmt, ...)
{
	char cmd[4096];
	size_t n = 0, got;
	va_list ap;
	FILE *p;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd) - 8, fmt, ap);
	va_end(ap);
	strcat(cmd, " 2>&1");
	p = popen(cmd, "r");
	if (!p)
		return r->status = -1;
	while ((got = fread(r->out + n, 1, sizeof(r->out) - 1 - n, p)) > 0)
		n += got;
	r->out[n] = 0;
	st = pclose(p);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r->status;
}

/*
 * Shell text for the signal shim (tests/cli/signal_shim.c): LKT_PRELOAD_SHIM, then its path,
 * preloads it into what follows (before a sanitizer's runtime, which would refuse to start);
 * LKT_DIRS_LOGGED, among the shim's variables, logs the directories lowkey makes into $d/dirs,
 * after LKT_DIRS_START made $d; LKT_DIRS_CHECK says which of them is left (and removes them) or
 * that none was made, and removes $d.
 */
#define LKT_PRELOAD_SHIM \
	"ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 LD_PRELOAD="
#define LKT_DIRS_START "d=$(mktemp -d) || exit 3; "
#define LKT_DIRS_LOGGED "LKT_SHIM_DIRS=$d/dirs "
#define LKT_DIRS_CHECK                                                                        \
	"[ -s $d/dirs ] || echo no directory made; "                                          \
	"while read dir; do [ -e \"$dir\" ] && echo directory left: $dir && rm -r \"$dir\"; " \
	"done <$d/dirs; rm -r $d; "

#ifdef cmocka_unit_test
/* The output of a command run with LKT_DIRS_CHECK: lowkey made its directory and removed it. */
static inline void lkt_expect_dirs_removed(const struct lkt_run *r)
{
	assert_null(strstr(r->out, "no directory made"));
	assert_null(strstr(r->out, "directory left"));
}

/* Assert that r exited with status and, if text is not NULL, printed it; show its output if not. */
static inline void lkt_expect(const struct lkt_run *r, int status, const char *text)
{
	if (r->status != status || (text && !strstr(r->out, text)))
		print_error("exit %d (wanted %d), output:\n%s\n(wanted: %s)\n", r->status, status,
			    r->out, text ? text : "");
	assert_int_equal(r->status, status);
	if (text)
		assert_non_null(strstr(r->out, text));
}

/*
 * lkt_signal_while_running - run cli (a lowkey command running a program with a preload library)
 * with a fresh $TMPDIR until the program prints ready, then send lowkey sig ("TERM"). Asserts
 * that lowkey exited with status and said text (stderr), that the program is gone, and that the
 * directory named by the program's variable var, less suffix, was removed.
 */
static inline void lkt_signal_while_running(struct lkt_run *r, const char *cli, const char *ready,
					    const char *var, const char *suffix, const char *sig,
					    int status, const char *text)
{
	lkt_sh(r,
	       "d=$(mktemp -d) || exit 3; TMPDIR=$d %s >$d/out 2>$d/err & cli=$!; "
	       "for i in $(seq 3000); do grep -q '%s' $d/out && break; sleep 0.01; done; "
	       "child=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v p=$cli '$4 == p { print $1 }'); "
	       "dir=$(tr '\\0' '\\n' </proc/$child/environ | sed -n 's|^%s=||p'); "
	       "[ -n \"$dir\" ] || { kill -9 $cli $child; cat $d/out $d/err; rm -r $d; exit 3; }; "
	       "dir=${dir%%%s}; kill -%s $cli; wait $cli; st=$?; "
	       "kill -0 $child 2>/dev/null && echo program left running && kill -9 $child; "
	       "[ -e \"$dir\" ] && echo directory left: $dir && rm -r \"$dir\"; "
	       "cat $d/err; rm -r $d; exit $st",
	       cli, ready, var, suffix, sig);
	lkt_expect(r, status, text);
	assert_null(strstr(r->out, "program left running"));
	assert_null(strstr(r->out, "directory left"));
}

/*
 * lkt_signal_before_start - run cli (a lowkey command that makes its directory, then runs a
 * program that prints ran once it runs) with shim (tests/cli/signal_shim.c) preloaded into lowkey,
 * raising sig at lowkey's first pipe2(), made once the directory is there and before the program
 * starts. Asserts that lowkey ended of sig, that the program never ran, and that the directory
 * was removed.
 */
static inline void lkt_signal_before_start(struct lkt_run *r, const char *shim, const char *cli,
					   const char *ran, int sig)
{
	lkt_sh(r,
	       LKT_DIRS_START LKT_PRELOAD_SHIM "%s LKT_SHIM_RAISE=%d:1 " LKT_DIRS_LOGGED
					       "%s 2>&1; st=$?; " LKT_DIRS_CHECK "exit $st",
	       shim, sig, cli);
	lkt_expect(r, 128 + sig, NULL);
	assert_null(strstr(r->out, ran));
	lkt_expect_dirs_removed(r);
}
#endif

#endif
