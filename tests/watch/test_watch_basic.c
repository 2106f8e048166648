// SPDX-License-Identifier: MIT
/*
 * Watchpoints fire where and only where they should: the right address, thread, instruction and
 * value; write-only vs read/write; thread scope vs process scope (threads that existed before and
 * threads created after); execute watchpoints; move; disable and enable; remove.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "watch/watch_test.h"
#include "watch/watch_attempts.h"

static long watched; /* 8-byte aligned */
static long other;
static int small[4];

static struct recorder rec;

static int reset(void **state)
{
	(void)state;
	memset(&rec, 0, sizeof(rec));
	return 0;
}

static void write_fires_with_address_thread_ip_value(void **state)
{
	struct lk_watch *w;

	(void)state;
#if !defined(__x86_64__)
	/* The IP a data watchpoint reports is architecture-defined (x86: the instruction after the
	 * store); lowkey has watchpoints on x86-64 only. */
	(void)w;
	print_message("skipped: where a data watchpoint reports the store is x86's\n");
	skip();
#else
	extern char after_store[];

	assert_int_equal(
		lk_watch_add(&w, &watched, sizeof(watched), LK_WATCH_WRITE, record_hit, &rec), 0);
	/* Label the instruction after the store: the IP a data watchpoint reports. */
	asm volatile("movq $1234, %0\n\t"
		     ".globl after_store\n"
		     "after_store:"
		     : "=m"(watched));
	assert_int_equal(hits_of(&rec), 1);
	assert_ptr_equal(rec.hits[0].addr, &watched);
	assert_int_equal(rec.hits[0].len, sizeof(watched));
	assert_int_equal(rec.hits[0].tid, test_gettid());
	assert_ptr_equal(rec.hits[0].ip, after_store);
	assert_int_equal(rec.hits[0].access, LK_WATCH_WRITE);
	assert_true(rec.hits[0].has_value);
	assert_int_equal(rec.hits[0].value, 1234);
	assert_ptr_equal(rec.hits[0].watch, w);
	assert_false(rec.hits[0].late);
	assert_non_null(rec.hits[0].context);
	assert_int_equal(lk_watch_remove(w), 0);

	WRITE_ONCE(watched, 5); /* removed: no callback */
	assert_int_equal(hits_of(&rec), 1);
#endif
}

static void small_lengths_fire_on_their_bytes_only(void **state)
{
	struct lk_watch *w;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &small[1], sizeof(int), LK_WATCH_WRITE, record_hit, &rec),
			 0);
	WRITE_ONCE(small[0], 1);
	WRITE_ONCE(small[2], 1);
	assert_int_equal(hits_of(&rec), 0);
	WRITE_ONCE(small[1], -2);
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(rec.hits[0].value, 0xfffffffe); /* 4 bytes, zero-extended */
	assert_int_equal(lk_watch_remove(w), 0);
}

static void read_write_fires_on_loads_write_only_does_not(void **state)
{
	struct lk_watch *w;
	long v;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE, record_hit, &rec), 0);
	v = READ_ONCE(watched);
	assert_int_equal(hits_of(&rec), 0);
	WRITE_ONCE(watched, v + 1);
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(lk_watch_remove(w), 0);

	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_READWRITE, record_hit, &rec), 0);
	v = READ_ONCE(watched);
	assert_int_equal(hits_of(&rec), 2);
	assert_int_equal(rec.hits[1].access, LK_WATCH_READWRITE);
	assert_false(rec.hits[1].has_value); /* reading it would trap again */
	WRITE_ONCE(watched, v + 1);
	assert_int_equal(hits_of(&rec), 3);
	assert_int_equal(lk_watch_remove(w), 0);
}

/* A read/write watchpoint's callback that reads the watched variable itself. */
static void reading_callback(const struct lk_watch_hit *hit, void *arg)
{
	long v = READ_ONCE(watched); /* traps again, nested: lowkey ignores it */

	(void)v;
	record_hit(hit, arg);
}

static void callback_own_accesses_are_ignored(void **state)
{
	struct lk_watch_stats st;
	struct lk_watch *w;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_READWRITE, reading_callback, &rec),
			 0);
	WRITE_ONCE(watched, 3);
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(lk_watch_stats(w, &st), 0);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.delivered, 1);
	assert_int_equal(st.ignored, 1);
	assert_int_equal(lk_watch_remove(w), 0);
}

static void write_watched(void *arg)
{
	(void)arg;
	WRITE_ONCE(watched, 77);
}

static void thread_scope_does_not_fire_in_other_threads(void **state)
{
	struct lk_watch *w;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_THREAD, record_hit,
				      &rec),
			 0);
	assert_true(run_in_thread(write_watched, NULL) > 0);
	assert_int_equal(hits_of(&rec), 0);
	WRITE_ONCE(watched, 1);
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(rec.hits[0].tid, test_gettid());
	assert_int_equal(lk_watch_remove(w), 0);
}

/* A thread that exists before the watchpoint is added, and writes when told to. */
struct waiting_writer {
	pthread_barrier_t added, written;
	pid_t tid;
};

static void *waiting_writer_main(void *p)
{
	struct waiting_writer *ww = p;

	ww->tid = test_gettid();
	pthread_barrier_wait(&ww->added);
	WRITE_ONCE(watched, 99);
	pthread_barrier_wait(&ww->written);
	return NULL;
}

static void process_scope_fires_in_existing_thread(void **state)
{
	struct waiting_writer ww;
	struct lk_watch *w;
	pthread_t t;

	(void)state;
	pthread_barrier_init(&ww.added, NULL, 2);
	pthread_barrier_init(&ww.written, NULL, 2);
	assert_int_equal(pthread_create(&t, NULL, waiting_writer_main, &ww), 0);
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_PROCESS,
				      record_hit, &rec),
			 0);
	pthread_barrier_wait(&ww.added);
	pthread_barrier_wait(&ww.written);
	pthread_join(t, NULL);
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(rec.hits[0].tid, ww.tid);
	assert_ptr_equal(rec.hits[0].addr, &watched);
	assert_int_equal(rec.hits[0].value, 99);

	WRITE_ONCE(watched, 1); /* and in the thread that added it */
	assert_int_equal(hits_of(&rec), 2);
	assert_int_equal(rec.hits[1].tid, test_gettid());
	assert_int_equal(lk_watch_remove(w), 0);
	pthread_barrier_destroy(&ww.added);
	pthread_barrier_destroy(&ww.written);
}

static pid_t grandchild_tid;

static void write_then_spawn(void *arg)
{
	(void)arg;
	WRITE_ONCE(watched, 10);
	grandchild_tid = run_in_thread(write_watched, NULL); /* a thread's thread inherits too */
}

static void process_scope_fires_in_threads_created_later(void **state)
{
	struct lk_watch *w;
	pid_t child;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_PROCESS,
				      record_hit, &rec),
			 0);
	child = run_in_thread(write_then_spawn, NULL);
	assert_int_equal(hits_of(&rec), 2);
	assert_int_equal(rec.hits[0].tid, child);
	assert_int_equal(rec.hits[0].value, 10);
	assert_int_equal(rec.hits[1].tid, grandchild_tid);
	assert_int_equal(rec.hits[1].value, 77);
	assert_int_equal(lk_watch_remove(w), 0);

	assert_true(run_in_thread(write_then_spawn, NULL) > 0); /* removed: in no thread */
	assert_int_equal(hits_of(&rec), 2);
}

/* One copy of the function, at the address the test watches. noclone is GCC's (it keeps IPA from
 * making a specialized copy); Clang has no such attribute (-Wunknown-attributes), and the test calls
 * the function only through a volatile pointer, so no call site can be specialized anyway. */
#if defined(__clang__)
#define LKT_NOCLONE
#else
#define LKT_NOCLONE __attribute__((noclone))
#endif
static __attribute__((noinline)) LKT_NOCLONE int watched_function(int x)
{
	asm volatile("" : "+r"(x));
	return x * 3;
}

static void exec_fires_at_the_instruction(void **state)
{
	int (*volatile fn)(int) = watched_function;
	struct lk_watch *w;

	(void)state;
	assert_int_equal(lk_watch_add(&w, (const void *)watched_function, 1, LK_WATCH_EXEC,
				      record_hit, &rec),
			 0);
	assert_int_equal(fn(2), 6); /* the function still runs, once */
	assert_int_equal(hits_of(&rec), 1);
	assert_ptr_equal(rec.hits[0].ip, (const void *)watched_function);
	assert_ptr_equal(rec.hits[0].addr, (const void *)watched_function);
	assert_int_equal(rec.hits[0].access, LK_WATCH_EXEC);
	assert_false(rec.hits[0].has_value);
	assert_int_equal(fn(3), 9);
	assert_int_equal(hits_of(&rec), 2);
	assert_int_equal(lk_watch_remove(w), 0);
}

static void move_repoints_without_reopening(void **state)
{
	struct lk_watch *w;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE, record_hit, &rec), 0);
	assert_int_equal(lk_watch_move(w, &other, 8), 0);
	WRITE_ONCE(watched, 1);
	assert_int_equal(hits_of(&rec), 0);
	WRITE_ONCE(other, 2);
	assert_int_equal(hits_of(&rec), 1);
	assert_ptr_equal(rec.hits[0].addr, &other);
	assert_int_equal(rec.hits[0].value, 2);

	/* A bad move is refused before the system call and leaves the watchpoint where it was. */
	assert_int_equal(lk_watch_move(w, (char *)&watched + 1, 8), -EINVAL);
	WRITE_ONCE(other, 3);
	assert_int_equal(hits_of(&rec), 2);

	/* A shorter range: the length moves too. */
	assert_int_equal(lk_watch_move(w, &small[2], 4), 0);
	WRITE_ONCE(small[3], 1);
	assert_int_equal(hits_of(&rec), 2);
	WRITE_ONCE(small[2], 5);
	assert_int_equal(hits_of(&rec), 3);
	assert_int_equal(rec.hits[2].len, 4);
	assert_int_equal(lk_watch_remove(w), 0);
}

static void write_other(void *arg)
{
	(void)arg;
	WRITE_ONCE(other, 8);
}

static void move_reaches_inherited_copies(void **state)
{
	struct lk_watch *w;
	pid_t t;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_PROCESS,
				      record_hit, &rec),
			 0);
	assert_int_equal(lk_watch_move(w, &other, 8), 0);
	t = run_in_thread(write_other, NULL); /* created after the move */
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(rec.hits[0].tid, t);
	assert_ptr_equal(rec.hits[0].addr, &other);
	assert_int_equal(lk_watch_remove(w), 0);
}

static void disable_and_enable(void **state)
{
	struct lk_watch *w;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_DISABLED,
				      record_hit, &rec),
			 0);
	WRITE_ONCE(watched, 1);
	assert_int_equal(hits_of(&rec), 0);
	assert_int_equal(lk_watch_enable(w), 0);
	WRITE_ONCE(watched, 2);
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(lk_watch_disable(w), 0);
	WRITE_ONCE(watched, 3);
	assert_int_equal(hits_of(&rec), 1);
	/* Moving a disabled watchpoint keeps it disabled. */
	assert_int_equal(lk_watch_move(w, &other, 8), 0);
	WRITE_ONCE(other, 4);
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(lk_watch_enable(w), 0);
	WRITE_ONCE(other, 5);
	assert_int_equal(hits_of(&rec), 2);
	assert_int_equal(lk_watch_remove(w), 0);
}

static enum attempt ten_counted(void)
{
	struct lk_watch_stats st, before, after;
	struct lk_watch *w;
	enum attempt got;

	assert_int_equal(lk_watch_stats(NULL, &before), 0);
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE, NULL, NULL), 0);
	for (int i = 0; i < 10; i++)
		WRITE_ONCE(watched, i);
	assert_int_equal(lk_watch_stats(w, &st), 0);
	assert_int_equal(lk_watch_stats(NULL, &after), 0);
	/* A hit whose debug status the hypervisor lost comes back unattributed (see watch.h). */
	got = burst_counted(w, 10, after.unattributed - before.unattributed);
	assert_int_equal(st.delivered, st.hits);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(after.hits - before.hits, st.hits);
	assert_int_equal(lk_watch_remove(w), 0);
	return got;
}

static void counting_without_callback(void **state)
{
	(void)state;
	with_attempts(ten_counted, "10 writes counted");
}

/* The kernel's count covers the threads created after a process-scope watchpoint. */
static enum attempt write_in_later_thread_counted(void)
{
	struct lk_watch *w;
	enum attempt got;

	assert_int_equal(
		lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_PROCESS, NULL, NULL), 0);
	assert_true(run_in_thread(write_watched, NULL) > 0);
	got = burst_counted(w, 1, 0);
	assert_int_equal(lk_watch_remove(w), 0);
	return got;
}

static void counted_includes_inherited_copies(void **state)
{
	uint64_t counted;

	(void)state;
	with_attempts(write_in_later_thread_counted, "a write in a thread created later");
	assert_int_equal(lk_watch_counted(NULL, &counted), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(write_fires_with_address_thread_ip_value, reset),
		cmocka_unit_test_setup(small_lengths_fire_on_their_bytes_only, reset),
		cmocka_unit_test_setup(read_write_fires_on_loads_write_only_does_not, reset),
		cmocka_unit_test_setup(callback_own_accesses_are_ignored, reset),
		cmocka_unit_test_setup(thread_scope_does_not_fire_in_other_threads, reset),
		cmocka_unit_test_setup(process_scope_fires_in_existing_thread, reset),
		cmocka_unit_test_setup(process_scope_fires_in_threads_created_later, reset),
		cmocka_unit_test_setup(exec_fires_at_the_instruction, reset),
		cmocka_unit_test_setup(move_repoints_without_reopening, reset),
		cmocka_unit_test_setup(move_reaches_inherited_copies, reset),
		cmocka_unit_test_setup(disable_and_enable, reset),
		cmocka_unit_test_setup(counting_without_callback, reset),
		cmocka_unit_test_setup(counted_includes_inherited_copies, reset),
	};
	lkt_watch_require();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
