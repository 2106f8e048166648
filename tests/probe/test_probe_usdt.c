// SPDX-License-Identifier: MIT
/*
 * USDT: every site carries an SDT note that external tracers attach to.
 *  - The notes in this very executable: one per copy of each site, named provider:event (spans
 *    event_begin/event_end), arguments "-8@REG" for signed integers and "8@REG" for the rest, a
 *    semaphore of its own in .probes, a .stapsdt.base; the probe point is a nop.
 *  - A real uprobe at a site's note (perf_event_open with the uprobe PMU, the note's semaphore as
 *    ref_ctr_offset): the kernel raises the semaphore; lk_probe_usdt_poll() then turns the site
 *    on and the uprobe counts every call, and sees the arguments in the registers the note
 *    names; off again once the uprobe is gone. The watching thread does it by itself: it runs
 *    by default, with every signal blocked (stopped here, after the first test, so the tests
 *    of reads by hand see no other reader).
 *  - Without a uprobe (no privilege needed): a semaphore raised by hand, as the kernel does,
 *    turns the site on at the next poll or rule change; USDT rules apply in order.
 *  - `lowkey enable --pid` turns a site on (for a uprobe without a semaphore, where one can be
 *    opened); `lowkey disable` off.
 *  - A uprobe attached to a program that runs already (lkt_usdt_late): its events flow once the
 *    watcher has turned the site on, exactly those emitted after, with their arguments; in a
 *    fork()ed child too; none with LOWKEY_USDT_WATCH=0.
 * The uprobe parts skip, saying why, where the uprobe PMU cannot be opened (not root, no
 * CAP_PERFMON, a container, an emulator).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <linux/perf_event.h>
#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <grp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/proc_signals.h"
#include "cli/run.h"
#include "usdt_notes.h"

#if defined(__x86_64__) || defined(__aarch64__)
#include <asm/perf_regs.h>
#endif

__attribute__((noinline)) void usdt_query(long id, unsigned long rows, const char *table,
					  double ratio);
__attribute__((noinline)) void usdt_query(long id, unsigned long rows, const char *table,
					  double ratio)
{
	LK_PROBE(usdt_test, query, id, rows, table, ratio);
}

__attribute__((noinline)) void usdt_spans(int depth);
__attribute__((noinline)) void usdt_spans(int depth)
{
	LK_SPAN_BEGIN(usdt_test, work);
	LK_COUNTER(usdt_test, depth, depth);
	LK_SPAN_END(usdt_test, work);
}

/* A scoped span: its end is the SDT stub called from the scope's exit. */
__attribute__((noinline)) int usdt_scoped(int depth);
__attribute__((noinline)) int usdt_scoped(int depth)
{
	LK_SPAN(usdt_test, scoped);
	if (depth > 1)
		return usdt_scoped(depth - 1) + 1; /* nested: each level ends its own span */
	return 1;
}

static const char table_name[] = "users";
static struct lkt_run run_out;
static struct usdt_file self;
static char exe[4096];

static int setup(void **state)
{
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	(void)state;
	if (len <= 0)
		return -1;
	exe[len] = '\0';
	return usdt_read(exe, &self);
}

static const struct usdt_note *one_note(const char *provider, const char *name)
{
	const struct usdt_note *n[4];

	if (usdt_find(&self, provider, name, n, 4) != 1) {
		print_error("wanted one note %s:%s in %s\n", provider, name, exe);
		return NULL;
	}
	return n[0];
}

#if defined(__x86_64__)
#define REG "%[a-z0-9]+"
#define NOP 0x90
#elif defined(__aarch64__)
#define REG "[xw][0-9]+"
#define NOP 0x1f /* d503201f, little-endian */
#else
#define REG "[a-z][a-z0-9]*"
#define NOP 0x13 /* addi x0, x0, 0: 00000013 (0x01 for c.nop) */
#endif

static void assert_args(const struct usdt_note *n, const char *pattern)
{
	regex_t re;
	int rc;

	assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
	rc = regexec(&re, n->args, 0, NULL, 0);
	regfree(&re);
	if (rc != 0)
		print_error("%s:%s has arguments '%s', wanted /%s/\n", n->provider, n->name,
			    n->args, pattern);
	assert_int_equal(rc, 0);
}

static void notes_describe_every_site(void **state)
{
	const struct usdt_note *q = one_note("usdt_test", "query");
	const struct usdt_note *b = one_note("usdt_test", "work_begin");
	const struct usdt_note *e = one_note("usdt_test", "work_end");
	const struct usdt_note *d = one_note("usdt_test", "depth");
	const struct usdt_note *sb = one_note("usdt_test", "scoped_begin");
	const struct usdt_note *se = one_note("usdt_test", "scoped_end");
	const struct usdt_note *all[] = { q, b, e, d, sb, se };

	(void)state;
	assert_true(self.has_base);
	for (unsigned int i = 0; i < 6; i++)
		assert_non_null(all[i]);
	assert_args(q, "^-8@" REG " 8@" REG " 8@" REG " 8@" REG
		       "$"); /* long, unsigned long, string, double */
	assert_args(d, "^-8@" REG "$");
	assert_string_equal(b->args, "");
	assert_string_equal(e->args, "");
	assert_string_equal(sb->args, "");
	assert_string_equal(se->args, "");
	for (unsigned int i = 0; i < 6; i++) {
		assert_int_equal(all[i]->base, self.base_addr);
		assert_true(all[i]->semaphore_in_probes);
		assert_int_not_equal(all[i]->pc_offset, 0);
#if !defined(__riscv)
		assert_int_equal(all[i]->first_byte, NOP);
#else
		assert_true(all[i]->first_byte == NOP || all[i]->first_byte == 0x01);
#endif
		for (unsigned int j = 0; j < i; j++) {
			assert_int_not_equal(all[i]->semaphore, all[j]->semaphore);
			assert_int_not_equal(all[i]->pc, all[j]->pc);
		}
	}
}

/* ---- uprobes ---- */

static long read_sysfs_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* The bit where config holds ref_ctr_offset ("config:32-63"), or -1. */
static int ref_ctr_shift(void)
{
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset", "r");
	int lo = -1, hi;

	if (f) {
		if (fscanf(f, "config:%d-%d", &lo, &hi) != 2)
			lo = -1;
		fclose(f);
	}
	return lo;
}

static bool uprobe_skip_reason(char *why, size_t len)
{
	if (read_sysfs_long("/sys/bus/event_source/devices/uprobe/type") < 0) {
		snprintf(why, len, "no uprobe PMU (/sys/bus/event_source/devices/uprobe/type)");
		return true;
	}
	if (ref_ctr_shift() < 0) {
		snprintf(why, len, "the uprobe PMU has no ref_ctr_offset (kernel before 4.20)");
		return true;
	}
	return false;
}

/* A uprobe at n in the executable path, for process pid; with_semaphore names its ref_ctr. */
static int open_uprobe_in(const char *path, pid_t pid, const struct usdt_note *n,
			  bool with_semaphore, uint64_t regs_mask)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = (uint32_t)read_sysfs_long("/sys/bus/event_source/devices/uprobe/type");
	a.config1 = (uint64_t)(uintptr_t)path;
	a.config2 = n->pc_offset;
	if (with_semaphore)
		a.config = n->semaphore_offset << ref_ctr_shift();
	if (regs_mask) {
		a.sample_period = 1;
		a.sample_type = PERF_SAMPLE_REGS_USER;
		a.sample_regs_user = regs_mask;
	}
	return (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static int open_or_skip_in(const char *path, pid_t pid, const struct usdt_note *n,
			   bool with_semaphore, uint64_t regs_mask)
{
	char why[256];
	int fd;

	if (uprobe_skip_reason(why, sizeof(why))) {
		print_message("SKIP: %s\n", why);
		skip();
	}
	fd = open_uprobe_in(path, pid, n, with_semaphore, regs_mask);
	if (fd < 0 && (errno == EACCES || errno == EPERM || errno == ENOENT || errno == ENOSYS)) {
		print_message(
			"SKIP: perf_event_open of a uprobe: %s (it needs root or CAP_PERFMON, and a "
			"kernel, not an emulator or a seccomp filter, answering perf_event_open)\n",
			strerror(errno));
		skip();
	}
	if (fd < 0)
		print_error("perf_event_open of a uprobe at %s+%#llx: %s\n", path,
			    (unsigned long long)n->pc_offset, strerror(errno));
	assert_true(fd >= 0);
	return fd;
}

static int open_or_skip(const struct usdt_note *n, bool with_semaphore, uint64_t regs_mask)
{
	return open_or_skip_in(exe, 0, n, with_semaphore, regs_mask);
}

/* A uprobe where one can be opened, else -1 (the caller checks the rest without it). */
static int open_if_possible_with(const char *path, pid_t pid, const struct usdt_note *n,
				 bool with_semaphore)
{
	char why[256];
	int fd;

	if (uprobe_skip_reason(why, sizeof(why))) {
		print_message("(no uprobe: %s)\n", why);
		return -1;
	}
	fd = open_uprobe_in(path, pid, n, with_semaphore, 0);
	if (fd < 0)
		print_message("(no uprobe: perf_event_open: %s)\n", strerror(errno));
	return fd;
}

static int open_if_possible(const struct usdt_note *n, bool with_semaphore)
{
	return open_if_possible_with(exe, 0, n, with_semaphore);
}

/* With the semaphore, in process pid. */
static int open_if_possible_in(const char *path, pid_t pid, const struct usdt_note *n)
{
	return open_if_possible_with(path, pid, n, true);
}

/*
 * For waits on the watcher: true until a minute has passed since start. Not a timing claim (the
 * watcher polls every few milliseconds); a site that never turns on fails the test instead of
 * hanging.
 */
static bool before_a_minute(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec - start->tv_sec < 60)
		return true;
	print_error("the watcher did not turn the site on (or off) in a minute\n");
	return false;
}

static uint64_t count_of(int fd)
{
	uint64_t v = 0;

	assert_int_equal(read(fd, &v, sizeof(v)), sizeof(v));
	return v;
}

static uintptr_t load_bias;

static int main_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	load_bias = info->dlpi_addr;
	return 1; /* the first is the program */
}

static unsigned short semaphore_now(const struct usdt_note *n)
{
	dl_iterate_phdr(main_object, NULL);
	return __atomic_load_n((unsigned short *)(load_bias + n->semaphore), __ATOMIC_RELAXED);
}

static int site_enabled(const struct lk_probe_info *info, void *arg)
{
	if (strcmp(info->provider, "usdt_test") == 0 && strcmp(info->event, "query") == 0)
		*(int *)arg = info->enabled;
	return 0;
}

static bool query_enabled(void)
{
	int on = -1;

	lk_probe_list(site_enabled, &on);
	assert_int_not_equal(on, -1);
	return on == 1;
}

/* ---- the watcher, on by default ---- */

/* The ids of this process's threads named as the watcher is: how many (up to max). */
static int watcher_threads(pid_t *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && strcmp(comm, "lowkey-usdt\n") == 0 &&
		    n < max)
			tids[n++] = (pid_t)atoi(e->d_name);
		if (f)
			fclose(f);
	}
	closedir(d);
	return n;
}

/* The signals thread tid blocks (SigBlk of its status). */
static uint64_t blocked_signals(pid_t tid)
{
	char path[64];
	uint64_t mask = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	assert_true(lkt_signal_mask(path, "SigBlk:", &mask));
	return mask;
}

/*
 * This program has USDT sites: its watcher runs from start-up, and takes no signal the program
 * could handle (all but SIGKILL, SIGSTOP and the C library's own, which it cannot block).
 */
static void watcher_runs_by_default(void **state)
{
	pid_t tids[4];
	uint64_t mask;

	(void)state;
	assert_int_equal(watcher_threads(tids, 4), 1);
	mask = blocked_signals(tids[0]);
	for (int sig = 1; sig <= 64; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || (sig >= 32 && sig < SIGRTMIN))
			continue;
		if (!(mask >> (sig - 1) & 1))
			print_error("the watcher does not block signal %d\n", sig);
		assert_true(mask >> (sig - 1) & 1);
	}
	assert_int_equal(lk_probe_usdt_watch(0), 0);
	assert_int_equal(watcher_threads(tids, 4), 0);
}

static void semaphore_turns_the_site_on(void **state)
{
	const struct usdt_note *q = one_note("usdt_test", "query");
	int fd;

	(void)state;
	assert_non_null(q);
	assert_int_equal(semaphore_now(q), 0);
	fd = open_or_skip(q, true, 0);
	/*
	 * The kernel raises it once per mapping of the probe's file page: lld maps the page where
	 * the text starts in both the read-only and the executable segment, so there it is 2.
	 */
	assert_true(semaphore_now(q) >= 1);

	for (int i = 0; i < 5; i++)
		usdt_query(i, 1, table_name, 0.5);
	assert_int_equal(count_of(fd), 0); /* off until the library reads the semaphore */
	assert_false(query_enabled());

	assert_int_equal(lk_probe_usdt_poll(), 1);
	assert_true(query_enabled());
	for (int i = 0; i < 7; i++)
		usdt_query(i, 1, table_name, 0.5);
	assert_int_equal(count_of(fd), 7);

	close(fd);
	assert_int_equal(semaphore_now(q), 0);
	assert_int_equal(lk_probe_usdt_poll(), 0);
	assert_false(query_enabled());
}

/* The library's side of a tracer, without one: the semaphore raised as the kernel would. */
static void semaphore_raised_by_hand(void **state)
{
	const struct usdt_note *q = one_note("usdt_test", "query");
	unsigned short *sem;

	(void)state;
	assert_non_null(q);
	dl_iterate_phdr(main_object, NULL);
	sem = (unsigned short *)(load_bias + q->semaphore);
	assert_int_equal(lk_probe_usdt_poll(), 0);
	assert_false(query_enabled());
	__atomic_add_fetch(sem, 1, __ATOMIC_RELAXED);
	assert_int_equal(lk_probe_usdt_poll(), 1);
	assert_true(query_enabled());
	usdt_query(1, 2, table_name, 0.5); /* on, with no trace: goes as far as the slow path */
	assert_true(lk_probe_enable("usdt_test") >=
		    0); /* rules applied: the semaphore read again */
	assert_true(query_enabled());
	__atomic_sub_fetch(sem, 1, __ATOMIC_RELAXED);
	assert_int_equal(lk_probe_reset_rules(), 0);
	assert_false(query_enabled());
}

/* The watcher, without a tracer: it notices the semaphore going up, then down. */
static void watcher_notices_a_raised_semaphore(void **state)
{
	const struct usdt_note *q = one_note("usdt_test", "query");
	struct timespec ms = { 0, 1000 * 1000 }, start;
	unsigned short *sem;

	(void)state;
	assert_non_null(q);
	dl_iterate_phdr(main_object, NULL);
	sem = (unsigned short *)(load_bias + q->semaphore);
	assert_int_equal(lk_probe_usdt_watch(1), 0);
	assert_int_equal(lk_probe_usdt_watch(2), 0); /* a new interval for the running thread */
	__atomic_add_fetch(sem, 1, __ATOMIC_RELAXED);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!query_enabled() && before_a_minute(&start))
		nanosleep(&ms, NULL);
	assert_true(query_enabled());
	__atomic_sub_fetch(sem, 1, __ATOMIC_RELAXED);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (query_enabled() && before_a_minute(&start))
		nanosleep(&ms, NULL);
	assert_false(query_enabled());
	assert_int_equal(lk_probe_usdt_watch(0), 0);
}

static void usdt_rules_apply_in_order(void **state)
{
	(void)state;
	assert_int_equal(lk_probe_usdt_enable("usdt_test"), 6);
	assert_true(query_enabled());
	assert_int_equal(lk_probe_usdt_disable("usdt_test:q*"), 1);
	assert_false(query_enabled());
	assert_int_equal(lk_probe_usdt_enable("usdt_test:query"), 1);
	assert_true(query_enabled());
	assert_int_equal(lk_probe_usdt_enable(""), -EINVAL);
	assert_int_equal(lk_probe_usdt_enable(NULL), -EINVAL);
	assert_int_equal(lk_probe_usdt_reset_rules(), 0);
	assert_false(query_enabled());
	assert_int_equal(lk_probe_usdt_watch(3600 * 1000 + 1), -EINVAL);
	assert_int_equal(lk_probe_usdt_watch(0), 0); /* stopping a watcher that never ran */
}

/* ---- the arguments, from the registers the note names ---- */

struct arg_reg {
	int index; /* perf's register number, or -1: a constant */
	int64_t constant;
};

static int perf_reg(const char *name)
{
#if defined(__x86_64__)
	static const char *const names[] = { "ax", "bx", "cx", "dx", "si", "di", "bp", "sp" };

	if (name[0] != '%' || name[1] != 'r')
		return -1;
	for (int i = 0; i < 8; i++)
		if (strcmp(name + 2, names[i]) == 0)
			return i; /* PERF_REG_X86_AX .. SP */
	if (name[2] >= '0' && name[2] <= '9')
		return PERF_REG_X86_R8 + atoi(name + 2) - 8;
	return -1;
#elif defined(__aarch64__)
	if (name[0] == 'x')
		return PERF_REG_ARM64_X0 + atoi(name + 1);
	return -1;
#else
	(void)name;
	return -1;
#endif
}

/* The note's arguments: 0 when each is a register perf samples, or a constant. */
static int parse_args(const char *args, struct arg_reg *out, unsigned int n)
{
	char copy[256], *save = NULL, *tok;
	unsigned int i = 0;

	snprintf(copy, sizeof(copy), "%s", args);
	for (tok = strtok_r(copy, " ", &save); tok && i < n;
	     tok = strtok_r(NULL, " ", &save), i++) {
		const char *op = strchr(tok, '@');

		if (!op)
			return -1;
		op++;
		if (*op == '$') {
			out[i] = (struct arg_reg){ -1, strtoll(op + 1, NULL, 0) };
			continue;
		}
		out[i].index = perf_reg(op);
		if (out[i].index < 0)
			return -1;
	}
	return i == n ? 0 : -1;
}

/* The samples' registers, in the order perf writes them (by register number). */
static unsigned int take_samples(void *ring, uint64_t mask, uint64_t (*regs)[64], unsigned int max)
{
	struct perf_event_mmap_page *page = ring;
	const char *data = (const char *)ring + page->data_offset;
	uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE), tail = page->data_tail;
	unsigned int got = 0, nregs = (unsigned int)__builtin_popcountll(mask);

	while (tail < head && got < max) {
		const struct perf_event_header *h = (const void *)(data + tail % page->data_size);

		if (h->type == PERF_RECORD_SAMPLE) {
			const uint64_t *p = (const uint64_t *)(h + 1);

			if (p[0] != PERF_SAMPLE_REGS_ABI_NONE) {
				unsigned int k = 0;

				for (int r = 0; r < 64; r++)
					if (mask >> r & 1)
						regs[got][r] = p[1 + k++];
				got++;
			}
			(void)nregs;
		}
		tail += h->size;
	}
	__atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
	return got;
}

static uint64_t arg_value(const struct arg_reg *a, const uint64_t *regs)
{
	return a->index < 0 ? (uint64_t)a->constant : regs[a->index];
}

static void uprobe_sees_the_arguments(void **state)
{
	const struct usdt_note *q = one_note("usdt_test", "query");
	struct arg_reg args[4];
	static uint64_t regs[8][64];
	uint64_t mask = 0, ratio_bits;
	double ratio = 0.25;
	size_t ring_size = (size_t)(1 + 8) * (size_t)sysconf(_SC_PAGESIZE);
	void *ring;
	int fd;

	(void)state;
	assert_non_null(q);
#if !defined(__x86_64__) && !defined(__aarch64__)
	print_message("SKIP: no register map for this architecture in the test\n");
	skip();
#endif
	assert_int_equal(parse_args(q->args, args, 4), 0);
	for (int i = 0; i < 4; i++)
		if (args[i].index >= 0)
			mask |= UINT64_C(1) << args[i].index;
	fd = open_or_skip(q, true, mask);
	ring = mmap(NULL, ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(ring != MAP_FAILED);
	assert_true(lk_probe_usdt_poll() >= 1);

	for (int i = 0; i < 5; i++)
		usdt_query(-1000 - i, 40u + (unsigned)i, table_name, ratio * i);
	assert_int_equal(take_samples(ring, mask, regs, 8), 5);
	for (int i = 0; i < 5; i++) {
		double want = ratio * i;

		memcpy(&ratio_bits, &want, sizeof(want));
		assert_int_equal((int64_t)arg_value(&args[0], regs[i]), -1000 - i);
		assert_int_equal(arg_value(&args[1], regs[i]), 40u + (unsigned)i);
		assert_int_equal(arg_value(&args[2], regs[i]), (uintptr_t)table_name);
		assert_int_equal(arg_value(&args[3], regs[i]), ratio_bits);
	}
	munmap(ring, ring_size);
	close(fd);
	assert_int_equal(lk_probe_usdt_poll(), 0);
}

/* ---- LK_SPAN: the scope's end ---- */

/* A uprobe on the end's stub, holding the semaphore: the span turns on and both ends fire. */
static void scoped_span_end_fires_for_a_tracer(void **state)
{
	const struct usdt_note *sb = one_note("usdt_test", "scoped_begin");
	const struct usdt_note *se = one_note("usdt_test", "scoped_end");
	int begin_fd, end_fd;

	(void)state;
	assert_non_null(sb);
	assert_non_null(se);
	end_fd = open_or_skip(se, true, 0);
	begin_fd = open_or_skip(sb, false, 0);
	assert_int_equal(lk_probe_usdt_poll(), 1); /* the end's semaphore turns the span on */
	assert_int_equal(usdt_scoped(3), 3);
	assert_int_equal(usdt_scoped(1), 1);
	assert_int_equal(count_of(begin_fd), 4);
	assert_int_equal(count_of(end_fd), 4);
	close(end_fd);
	assert_int_equal(lk_probe_usdt_poll(), 0);
	usdt_scoped(2);
	assert_int_equal(count_of(begin_fd), 4);
	close(begin_fd);
}

static uint64_t events_of_scoped_spans(const char *dir, const char *name)
{
	char path[4200];
	struct lk_trace_stats st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(lk_trace_start(&(struct lk_trace_config){ .path = path }), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(usdt_scoped(3), 3);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_int_equal(st.lost, 0);
	return st.events;
}

/*
 * A span on for a tracer while a lowkey trace records it: the end, reached through the stub,
 * is recorded as well as without a tracer (no uprobe needed: the semaphore raised by hand).
 */
static void scoped_span_for_a_tracer_records_its_end(void **state)
{
	const struct usdt_note *se = one_note("usdt_test", "scoped_end");
	char dir[] = "/tmp/lkt-usdt-XXXXXX";
	uint64_t plain, for_tracer;
	unsigned short *sem;

	(void)state;
	assert_non_null(se);
	assert_non_null(mkdtemp(dir));
	dl_iterate_phdr(main_object, NULL);
	sem = (unsigned short *)(load_bias + se->semaphore);
	assert_true(lk_probe_enable("usdt_test:scoped") >= 2);
	plain = events_of_scoped_spans(dir, "plain");
	__atomic_add_fetch(sem, 1, __ATOMIC_RELAXED);
	assert_int_equal(lk_probe_usdt_poll(), 1);
	for_tracer = events_of_scoped_spans(dir, "for-tracer");
	assert_int_equal(usdt_scoped(2), 2); /* no trace: the stub runs, nothing is recorded */
	__atomic_sub_fetch(sem, 1, __ATOMIC_RELAXED);
	assert_int_equal(lk_probe_usdt_poll(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
	assert_true(plain >= 30); /* 5 x 3 begins and ends (and the thread's name) */
	assert_int_equal(for_tracer, plain);
	lkt_sh(&run_out, "rm -rf %s", dir);
}

/* ---- the watching thread ---- */

static void watcher_notices_a_tracer(void **state)
{
	const struct usdt_note *d = one_note("usdt_test", "depth");
	struct timespec ms = { 0, 1000 * 1000 }, start;
	uint64_t seen = 0;
	int fd;

	(void)state;
	assert_non_null(d);
	fd = open_or_skip(d, true, 0);
	assert_int_equal(lk_probe_usdt_watch(1), 0);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while ((seen = count_of(fd)) == 0 && before_a_minute(&start)) {
		usdt_spans(3);
		nanosleep(&ms, NULL);
	}
	assert_true(seen >= 1);
	close(fd);
	assert_int_equal(lk_probe_usdt_poll(), 0);
	assert_int_equal(lk_probe_usdt_watch(0), 0);
}

/* ---- a tracer attaching to a program that runs already ---- */

struct late {
	pid_t spawned, pid; /* the program started, and the one serving (its child with "fork") */
	FILE *to, *from;
	struct usdt_file notes;
};

/* Start the program; as_nobody: as uid and gid 65534 (the test runs as root). */
static void late_start_as(struct late *t, const char *mode, const char *watch, bool control,
			  bool as_nobody)
{
	int in[2], out[2];
	char line[64];

	assert_int_equal(usdt_read(LATE_TARGET, &t->notes), 0);
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	t->spawned = fork();
	assert_true(t->spawned >= 0);
	if (t->spawned == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (watch)
			setenv("LOWKEY_USDT_WATCH", watch, 1);
		else
			unsetenv("LOWKEY_USDT_WATCH");
		if (control)
			setenv("LOWKEY_CONTROL", "1", 1);
		if (as_nobody && (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
				  setresuid(65534, 65534, 65534) != 0))
			_exit(126);
		execl(LATE_TARGET, LATE_TARGET, mode, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	t->to = fdopen(in[1], "w");
	t->from = fdopen(out[0], "r");
	assert_non_null(t->to);
	assert_non_null(t->from);
	setvbuf(t->to, NULL, _IOLBF, 0);
	assert_non_null(fgets(line, sizeof(line), t->from));
	assert_int_equal(sscanf(line, "pid %d", &t->pid), 1);
}

static void late_start_with(struct late *t, const char *mode, const char *watch, bool control)
{
	late_start_as(t, mode, watch, control, false);
}

static void late_start(struct late *t, const char *mode, const char *watch)
{
	late_start_with(t, mode, watch, false);
}

/* Ask the program, and return its answer's first number (the answer must start with word). */
static long long late_ask(struct late *t, const char *word, const char *fmt, ...)
{
	char line[128];
	long long v = 0;
	va_list ap;

	va_start(ap, fmt);
	vfprintf(t->to, fmt, ap);
	va_end(ap);
	fputc('\n', t->to);
	fflush(t->to);
	assert_non_null(fgets(line, sizeof(line), t->from));
	if (strncmp(line, word, strlen(word)) != 0)
		print_error("asked '%s', the program answered '%s'\n", fmt, line);
	assert_int_equal(strncmp(line, word, strlen(word)), 0);
	sscanf(line + strlen(word), "%lld", &v);
	return v;
}

static void late_stop(struct late *t)
{
	int status;

	fprintf(t->to, "quit\n");
	fclose(t->to);
	fclose(t->from);
	assert_int_equal(waitpid(t->spawned, &status, 0), t->spawned);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static const struct usdt_note *late_query(const struct late *t)
{
	for (unsigned int i = 0; i < t->notes.n; i++)
		if (strcmp(t->notes.notes[i].provider, "lkt_late") == 0 &&
		    strcmp(t->notes.notes[i].name, "query") == 0)
			return &t->notes.notes[i];
	fail_msg("no lkt_late:query note in %s", LATE_TARGET);
	return NULL;
}

static int64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/*
 * One tracer attaching: a uprobe with the semaphore, the program waits until its watcher has
 * turned the site on (it answers how long after the attach began), then emits n events: the
 * uprobe sees exactly those n, with their arguments. Returns the delay in ns.
 */
static long long late_attach_once(struct late *t, unsigned int n)
{
	const struct usdt_note *q = late_query(t);
	size_t ring_size = (size_t)(1 + 8) * (size_t)sysconf(_SC_PAGESIZE);
	static uint64_t regs[16][64];
	struct arg_reg args[3];
	uint64_t mask = 0;
	long long delay;
	int64_t began;
	void *ring;
	int fd;

	assert_true(n <= 16);
	assert_int_equal(parse_args(q->args, args, 3), 0);
	for (int i = 0; i < 3; i++)
		if (args[i].index >= 0)
			mask |= UINT64_C(1) << args[i].index;
	began = monotonic_ns();
	fd = open_or_skip_in(LATE_TARGET, t->pid, q, true, mask);
	ring = mmap(NULL, ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(ring != MAP_FAILED);
	delay = late_ask(t, "on", "on %lld", (long long)began);
	late_ask(t, "ok", "emit %u", n);
	assert_int_equal(count_of(fd), n);
	assert_int_equal(take_samples(ring, mask, regs, 16), n);
	for (unsigned int i = 0; i < n; i++) {
		assert_int_equal((int64_t)arg_value(&args[0], regs[i]), (int64_t)i);
		assert_int_equal((int64_t)arg_value(&args[1], regs[i]), -2 * (int64_t)i);
	}
	munmap(ring, ring_size);
	close(fd);
	late_ask(t, "off", "off"); /* the watcher turns it off again once the tracer is gone */
	return delay;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* Twenty attaches to one running program, each getting exactly the events emitted after it. */
static void late_tracer_gets_the_events_after_it(void **state)
{
	struct late t;
	long long delays[20];
	char why[256];

	(void)state;
#if !defined(__x86_64__) && !defined(__aarch64__)
	print_message("SKIP: no register map for this architecture in the test\n");
	skip();
#endif
	if (uprobe_skip_reason(why, sizeof(why))) {
		print_message("SKIP: %s\n", why);
		skip();
	}
	late_start(&t, "plain", NULL);
	assert_int_equal(late_ask(&t, "watchers", "watchers"), 1);
	late_ask(&t, "ok", "emit 5"); /* before any tracer: nothing sees these */
	for (int i = 0; i < 20; i++)
		delays[i] = late_attach_once(&t, 7 + (unsigned)i % 5);
	late_ask(&t, "ok", "emit 3");
	late_stop(&t);
	qsort(delays, 20, sizeof(delays[0]), cmp_ll);
	print_message("attach to site on, 20 attaches: median %.1f ms, max %.1f ms\n",
		      (delays[9] + delays[10]) / 2e6, delays[19] / 1e6);
}

/* A fork()ed child of a program with sites watches too: a tracer attached to it gets events. */
static void late_tracer_in_a_forked_child(void **state)
{
	struct late t;

	(void)state;
	late_start(&t, "fork", NULL);
	assert_int_equal(late_ask(&t, "watchers", "watchers"), 1);
	assert_int_not_equal(t.pid, t.spawned);
	late_attach_once(&t, 9);
	late_stop(&t);
}

/* LOWKEY_USDT_WATCH=0: no watcher, and a late tracer's semaphore turns nothing on. */
static void no_watcher_with_zero(void **state)
{
	struct late t;
	int fd;

	(void)state;
	late_start(&t, "plain", "0");
	assert_int_equal(late_ask(&t, "watchers", "watchers"), 0);
	fd = open_if_possible_in(LATE_TARGET, t.pid, late_query(&t));
	late_ask(&t, "ok", "emit 8");
	if (fd >= 0) {
		assert_int_equal(count_of(fd), 0);
		close(fd);
	}
	late_stop(&t);
}

/* The lowest address of the segments path is mapped with (page-aligned): its load bias is
 * where a process maps it first minus this. */
static uint64_t first_load_address(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	uint64_t lowest = UINT64_MAX;
	FILE *f = fopen(path, "rb");

	assert_non_null(f);
	assert_int_equal(fread(&eh, sizeof(eh), 1, f), 1);
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		assert_int_equal(
			fseek(f, (long)(eh.e_phoff + (uint64_t)i * eh.e_phentsize), SEEK_SET), 0);
		assert_int_equal(fread(&ph, sizeof(ph), 1, f), 1);
		if (ph.p_type == PT_LOAD && ph.p_vaddr < lowest)
			lowest = ph.p_vaddr;
	}
	fclose(f);
	return lowest & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
}

/* Where process pid maps path first (its lowest mapping of it). */
static uint64_t mapped_at(pid_t pid, const char *path)
{
	char maps[64], line[4200], real[4096], *name;
	unsigned long long start = 0;
	FILE *f;

	assert_non_null(realpath(path, real));
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	f = fopen(maps, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		name = strchr(line, '/');
		if (name && strcmp(name, real) == 0 && sscanf(line, "%llx-", &start) == 1)
			break;
	}
	fclose(f);
	assert_int_not_equal(start, 0);
	return start;
}

/* Adds d to the semaphore of note n in process pid, as the kernel does for a uprobe. */
static void add_to_semaphore(pid_t pid, const struct usdt_note *n, int d)
{
	uint64_t at = mapped_at(pid, LATE_TARGET) - first_load_address(LATE_TARGET) + n->semaphore;
	unsigned short v;
	char mem[64];
	int fd;

	snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)pid);
	fd = open(mem, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &v, sizeof(v), (off_t)at), sizeof(v));
	v = (unsigned short)(v + d);
	assert_int_equal(pwrite(fd, &v, sizeof(v), (off_t)at), sizeof(v));
	close(fd);
}

/*
 * lowkey list --pid shows the sites an outside tracer holds: "tracer" (text), "tracer": true
 * (JSON). The semaphore raised by hand through /proc/PID/mem as the kernel would (no uprobe,
 * no privilege: the test is the program's parent).
 */
static void list_shows_an_attached_tracer(void **state)
{
	struct late t;
	const char *line;

	(void)state;
	late_start_with(&t, "plain", NULL, true);
	lkt_sh(&run_out, "%s list --pid %d", LOWKEY, (int)t.pid);
	lkt_expect(&run_out, 0, "lkt_late:query");
	assert_null(strstr(run_out.out, "  tracer  ")); /* the column, not a path's "tracer" */
	lkt_sh(&run_out, "%s list --json --pid %d", LOWKEY, (int)t.pid);
	lkt_expect(&run_out, 0, "\"tracer\": false");

	add_to_semaphore(t.pid, late_query(&t), 1);
	lkt_sh(&run_out, "%s list --pid %d", LOWKEY, (int)t.pid);
	lkt_expect(&run_out, 0, "lkt_late:query");
	line = strstr(run_out.out, "lkt_late:query");
	assert_non_null(line);
	assert_true(strncmp(strstr(line, "event"), "event       on   tracer  ", 25) == 0);
	lkt_sh(&run_out, "%s list --json --pid %d", LOWKEY, (int)t.pid);
	lkt_expect(&run_out, 0, "\"enabled\": true, \"tracer\": true");

	add_to_semaphore(t.pid, late_query(&t), -1);
	late_ask(&t, "off", "off"); /* the watcher sees the tracer gone */
	lkt_sh(&run_out, "%s list --pid %d", LOWKEY, (int)t.pid);
	lkt_expect(&run_out, 0, "lkt_late:query");
	assert_null(strstr(run_out.out, "  tracer  ")); /* the column, not a path's "tracer" */
	late_stop(&t);
}

/* The line of text that holds needle, into line (empty when none). */
static void line_with(const char *text, const char *needle, char *line, size_t len)
{
	const char *at = strstr(text, needle), *start, *end;

	line[0] = 0;
	if (!at)
		return;
	for (start = at; start > text && start[-1] != '\n'; start--)
		;
	end = at + strcspn(at, "\n");
	snprintf(line, len, "%.*s", (int)(end - start), start);
}

/* lowkey list --pid PID (text and --json): each of query and idle is on or off, held or not. */
static void list_says(pid_t pid, const char *runner, const char *query, const char *idle,
		      const char *query_json, const char *idle_json)
{
	char line[1024];

	lkt_sh(&run_out, "%s %s list --pid %d", runner, LOWKEY, (int)pid);
	lkt_expect(&run_out, 0,
		   "has no control socket open: sites read from its files; their "
		   "state from its memory\n");
	line_with(run_out.out, "lkt_late:query ", line, sizeof(line));
	if (!strstr(line, query))
		print_error("lkt_late:query: '%s', wanted '%s'\n", line, query);
	assert_non_null(strstr(line, query));
	line_with(run_out.out, "lkt_late:idle ", line, sizeof(line));
	if (!strstr(line, idle))
		print_error("lkt_late:idle: '%s', wanted '%s'\n", line, idle);
	assert_non_null(strstr(line, idle));

	lkt_sh(&run_out, "%s %s list --json --pid %d", runner, LOWKEY, (int)pid);
	lkt_expect(&run_out, 0, "\"source\": \"memory\"");
	line_with(run_out.out, "\"event\": \"query\"", line, sizeof(line));
	assert_non_null(strstr(line, query_json));
	line_with(run_out.out, "\"event\": \"idle\"", line, sizeof(line));
	assert_non_null(strstr(line, idle_json));
}

#define NEITHER "event       off          /"
#define NOT_JSON "\"enabled\": false, \"tracer\": false"

/*
 * Without a control socket (the default), lowkey list --pid reads the sites' state from the
 * process's memory: a uprobe with the semaphore attached to the running program on
 * lkt_late:query shows "tracer" there, not beside lkt_late:idle, and nowhere once it is gone.
 */
static void list_without_control_shows_an_attached_tracer(void **state)
{
	struct late t;
	int fd;

	(void)state;
	late_start(&t, "plain", NULL);
	list_says(t.pid, "", NEITHER, NEITHER, NOT_JSON, NOT_JSON);

	fd = open_or_skip_in(LATE_TARGET, t.pid, late_query(&t), true, 0);
	late_ask(&t, "on", "on %lld", (long long)monotonic_ns()); /* the watcher turned it on */
	list_says(t.pid, "", "event       on   tracer  /", NEITHER,
		  "\"enabled\": true, \"tracer\": true", NOT_JSON);

	close(fd);
	late_ask(&t, "off", "off");
	list_says(t.pid, "", NEITHER, NEITHER, NOT_JSON, NOT_JSON);
	assert_null(strstr(run_out.out, "\"tracer\": true"));
	late_stop(&t);
}

#define AS_NOBODY "setpriv --reuid=65534 --regid=65534 --clear-groups"

/* Yama's kernel.yama.ptrace_scope, or -1 without Yama. */
static int yama_scope(void)
{
	long v = read_sysfs_long("/proc/sys/kernel/yama/ptrace_scope");

	return v < 0 ? -1 : (int)v;
}

/*
 * lowkey as another user (nobody): root's process it may not look into at all, and says so; its
 * own user's, it reads as root does, unless Yama forbids reading the memory of a process that is
 * not a descendant: then the state is unknown, and the message says why and what to do.
 */
static void list_as_another_user(void **state)
{
	char want[256];
	struct late t;
	int scope = yama_scope();

	(void)state;
	if (geteuid() != 0 || lkt_sh(&run_out, "command -v setpriv >/dev/null") != 0 ||
	    lkt_sh(&run_out, AS_NOBODY " test -x %s -a -x %s", LOWKEY, LATE_TARGET) != 0) {
		print_message("SKIP: needs root, setpriv (util-linux), and a build tree nobody "
			      "may run\n");
		skip();
	}
	late_start(&t, "plain", NULL);
	snprintf(want, sizeof(want),
		 "process %d belongs to uid 0: run lowkey as that user or as root", (int)t.pid);
	lkt_sh(&run_out, AS_NOBODY " %s list --pid %d", LOWKEY, (int)t.pid);
	lkt_expect(&run_out, 1, want);
	late_stop(&t);

	late_start_as(&t, "plain", NULL, false, true);
	if (scope <= 0) {
		list_says(t.pid, AS_NOBODY, NEITHER, NEITHER, NOT_JSON, NOT_JSON);
	} else {
		snprintf(want, sizeof(want),
			 "whether each is on, and whether a tracer holds it, is unknown: cannot "
			 "read its memory: Yama's kernel.yama.ptrace_scope is %d",
			 scope);
		lkt_sh(&run_out, AS_NOBODY " %s list --pid %d", LOWKEY, (int)t.pid);
		lkt_expect(&run_out, 0, want);
		lkt_expect(&run_out, 0, "start the program with LOWKEY_CONTROL=1");
		assert_null(strstr(run_out.out, " off "));
		lkt_sh(&run_out, AS_NOBODY " %s list --json --pid %d 2>/dev/null", LOWKEY,
		       (int)t.pid);
		lkt_expect(&run_out, 0, "\"source\": \"elf\"");
		assert_null(strstr(run_out.out, "\"tracer\""));
	}
	late_stop(&t);
}

/* ---- lowkey enable --pid ---- */

static void lowkey_enable_turns_the_site_on(void **state)
{
	const struct usdt_note *q = one_note("usdt_test", "query");
	int fd;

	(void)state;
	assert_non_null(q);
	fd = open_if_possible(q, false); /* no semaphore: only the rule turns the site on */
	assert_int_equal(semaphore_now(q), 0);
	if (lk_control_open() != 0) {
		print_message("SKIP: no control socket: %s\n", lk_last_error());
		skip();
	}

	lkt_sh(&run_out, "%s enable --pid %d 'usdt_test:query'", LOWKEY, (int)getpid());
	lkt_expect(&run_out, 0, "usdt_test:query: 1 site on for USDT tracers");
	assert_true(query_enabled());
	for (int i = 0; i < 4; i++)
		usdt_query(i, 2, table_name, 1.0);
	if (fd >= 0)
		assert_int_equal(count_of(fd), 4);

	lkt_sh(&run_out, "%s disable --pid %d 'usdt_test:*'", LOWKEY, (int)getpid());
	lkt_expect(&run_out, 0, "usdt_test:*: 6 sites off");
	assert_false(query_enabled());
	usdt_query(0, 2, table_name, 1.0);
	if (fd >= 0)
		assert_int_equal(count_of(fd), 4);

	lkt_sh(&run_out, "%s enable --pid %d 'usdt_test:nothing'", LOWKEY, (int)getpid());
	lkt_expect(&run_out, 1, "no probe site in process");
	lkt_sh(&run_out, "%s enable --pid %d", LOWKEY, (int)getpid());
	lkt_expect(&run_out, 2, "give --pid and at least one GLOB");
	lk_control_close();
	assert_int_equal(lk_probe_usdt_reset_rules(), 0);
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(watcher_runs_by_default),
		cmocka_unit_test(notes_describe_every_site),
		cmocka_unit_test(semaphore_turns_the_site_on),
		cmocka_unit_test(semaphore_raised_by_hand),
		cmocka_unit_test(watcher_notices_a_raised_semaphore),
		cmocka_unit_test(usdt_rules_apply_in_order),
		cmocka_unit_test(uprobe_sees_the_arguments),
		cmocka_unit_test(scoped_span_end_fires_for_a_tracer),
		cmocka_unit_test(scoped_span_for_a_tracer_records_its_end),
		cmocka_unit_test(watcher_notices_a_tracer),
		cmocka_unit_test(late_tracer_gets_the_events_after_it),
		cmocka_unit_test(late_tracer_in_a_forked_child),
		cmocka_unit_test(no_watcher_with_zero),
		cmocka_unit_test(list_shows_an_attached_tracer),
		cmocka_unit_test(list_without_control_shows_an_attached_tracer),
		cmocka_unit_test(list_as_another_user),
		cmocka_unit_test(lowkey_enable_turns_the_site_on),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
