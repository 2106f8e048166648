// SPDX-License-Identifier: MIT
/*
 * lowkey/lock.hpp: the C++ wrappers under the standard library's lock holders (lock_guard,
 * unique_lock with try_lock and defer_lock, scoped_lock over two locks, shared_lock,
 * condition_variable_any), mutual exclusion under std::threads, and the statistics seeing the
 * wrapped locks by name. Behaviour only, never timing: where a thread must be waiting, the test
 * watches the lock word for the waiter's mark instead of sleeping.
 */
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <lowkey/lock.hpp>

/* cmocka last: its fail() macro would rewrite std::basic_ios::fail() in <ios>, which C++20's
 * <condition_variable> includes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h> /* has no C++ guard of its own */
}

static_assert(sizeof(lowkey::mutex) == sizeof(lk_mutex_t), "a wrapper is its C lock");
static_assert(sizeof(lowkey::shared_mutex) == sizeof(lk_rwlock_t), "a wrapper is its C lock");
static_assert(alignof(lowkey::spinlock) == 64, "the C lock's alignment is kept");
static_assert(!std::is_copy_constructible<lowkey::mutex>::value &&
		      !std::is_move_constructible<lowkey::mutex>::value,
	      "a lock's address is its identity");

/* Constant-initialized (constexpr constructors): no dynamic initialization to order. */
#if __cplusplus >= 202002L
#define LKT_CONSTINIT constinit
#else
#define LKT_CONSTINIT
#endif
static LKT_CONSTINIT lowkey::mutex table_lock{ "hpp-table" };
static LKT_CONSTINIT lowkey::spinlock stats_lock{ "hpp-spin" };
static LKT_CONSTINIT lowkey::shared_mutex config_lock{ "hpp-config" };
static LKT_CONSTINIT lowkey::pcpu_shared_mutex slots_lock;

/* Another thread's try_lock of l: whether it got the lock (released at once if so). */
template <typename L> static bool other_thread_gets(L &l)
{
	bool got = false;

	std::thread([&] {
		std::unique_lock<L> u(l, std::try_to_lock);
		got = u.owns_lock();
	}).join();
	return got;
}

template <typename L> static bool other_thread_reads(L &l)
{
	bool got = false;

	std::thread([&] {
		std::shared_lock<L> r(l, std::try_to_lock);
		got = r.owns_lock();
	}).join();
	return got;
}

struct found {
	const char *name;
	const void *lock;
	int seen;
	struct lk_lockstat stat;
};

static int find_lock(const struct lk_lockstat *st, void *arg)
{
	found *f = static_cast<found *>(arg);

	if (std::strcmp(st->name, f->name) == 0) {
		f->seen++;
		f->lock = st->lock;
		f->stat = *st;
	}
	return 0;
}

static found lookup(const char *name)
{
	found f = { name, nullptr, 0, {} };

	assert_int_equal(lk_lockstat_foreach(find_lock, &f), 0);
	return f;
}

static void lock_guard_and_registry(void **)
{
	uint64_t before = table_lock.stat().acquisitions;

	{
		std::lock_guard<lowkey::mutex> hold(table_lock);
		assert_false(other_thread_gets(table_lock));
	}
	assert_true(other_thread_gets(table_lock)); /* released by the guard; the thread's is +1 */

	struct lk_lockstat st = table_lock.stat();
	assert_string_equal(st.name, "hpp-table");
	assert_int_equal(st.kind, LK_LOCK_MUTEX);
	assert_ptr_equal(st.lock, table_lock.native_handle());
	assert_int_equal(st.acquisitions, before + 2);

	/* The C API sees the same lock: through the handle, and in the registry by name. */
	assert_int_equal(lk_mutex_trylock(table_lock.native_handle()), 0);
	assert_false(table_lock.try_lock());
	lk_mutex_unlock(table_lock.native_handle());
	found f = lookup("hpp-table");
	assert_int_equal(f.seen, 1);
	assert_ptr_equal(f.lock, table_lock.native_handle());
	assert_int_equal(f.stat.acquisitions, before + 3);
}

static void unique_lock_try_and_defer(void **)
{
	std::unique_lock<lowkey::mutex> u(table_lock, std::defer_lock);

	assert_false(u.owns_lock());
	assert_true(u.try_lock());
	assert_true(u.owns_lock());
	assert_false(other_thread_gets(table_lock));
	u.unlock();
	assert_true(other_thread_gets(table_lock));
	u.lock();
	assert_false(other_thread_gets(table_lock));
	u.unlock();

	std::unique_lock<lowkey::spinlock> s(stats_lock, std::try_to_lock);
	assert_true(s.owns_lock());
	assert_false(other_thread_gets(stats_lock));
	s.unlock();
	assert_true(other_thread_gets(stats_lock));
	assert_string_equal(stats_lock.stat().name, "hpp-spin");
	assert_int_equal(stats_lock.stat().kind, LK_LOCK_SPINLOCK);
	assert_ptr_equal(lookup("hpp-spin").lock, stats_lock.native_handle());
}

/* Two threads take the same two locks in opposite orders, many times: scoped_lock (std::lock)
 * must neither deadlock nor let both in at once. */
static void scoped_lock_two_locks(void **)
{
	lowkey::mutex a{ "hpp-a" };
	lowkey::spinlock b{ "hpp-b" };
	long inside = 0, total = 0, overlaps = 0;
	const int rounds = 20000;

	{
		std::scoped_lock both(a, b);
		assert_false(other_thread_gets(a));
		assert_false(other_thread_gets(b));
	}
	assert_true(other_thread_gets(a));
	assert_true(other_thread_gets(b));

	/* cmocka's asserts belong to the main thread: the threads count what they see. */
	auto ab = [&] {
		for (int i = 0; i < rounds; i++) {
			std::scoped_lock both(a, b);
			overlaps += inside++ != 0;
			total++;
			inside--;
		}
	};
	auto ba = [&] {
		for (int i = 0; i < rounds; i++) {
			std::scoped_lock both(b, a);
			overlaps += inside++ != 0;
			total++;
			inside--;
		}
	};
	std::thread t1(ab), t2(ba);
	t1.join();
	t2.join();
	assert_int_equal(overlaps, 0);
	assert_int_equal(total, 2 * rounds);
	assert_true(a.stat().acquisitions >= 2u * rounds + 1);
}

static void shared_lock_on_rwlock(void **)
{
	uint64_t reads = config_lock.stat().read_acquisitions;

	{
		std::shared_lock<lowkey::shared_mutex> r(config_lock);
		assert_true(other_thread_reads(config_lock)); /* readers share */
		assert_false(other_thread_gets(config_lock)); /* a writer is kept out */
	}
	{
		std::unique_lock<lowkey::shared_mutex> w(config_lock);
		assert_false(other_thread_reads(config_lock));
		assert_false(other_thread_gets(config_lock));
	}
	assert_true(other_thread_gets(config_lock));

	struct lk_lockstat st = config_lock.stat();
	assert_string_equal(st.name, "hpp-config");
	assert_int_equal(st.kind, LK_LOCK_RWLOCK);
	assert_int_equal(st.read_acquisitions, reads + 2);
	found f = lookup("hpp-config");
	assert_int_equal(f.seen, 1);
	assert_ptr_equal(f.lock, config_lock.native_handle());

	/* The per-CPU one: readers in several threads at once, a writer alone. */
	{
		std::shared_lock<lowkey::pcpu_shared_mutex> r(slots_lock);
		std::thread([] {
			std::shared_lock<lowkey::pcpu_shared_mutex> r2(slots_lock);
		}).join();
	}
	{
		std::lock_guard<lowkey::pcpu_shared_mutex> w(slots_lock);
	}
}

/* A producer hands items to consumers through a queue guarded by a lowkey::mutex. */
static void condition_variable_any_with_mutex(void **)
{
	lowkey::mutex m{ "hpp-queue" };
	std::condition_variable_any cv;
	std::deque<int> q;
	bool done = false;
	long sum = 0;
	const int items = 5000;
	std::vector<std::thread> consumers;

	for (int c = 0; c < 3; c++)
		consumers.emplace_back([&] {
			std::unique_lock<lowkey::mutex> u(m);
			for (;;) {
				cv.wait(u, [&] { return !q.empty() || done; });
				if (q.empty())
					return;
				sum += q.front();
				q.pop_front();
			}
		});
	for (int i = 1; i <= items; i++) {
		{
			std::lock_guard<lowkey::mutex> g(m);
			q.push_back(i);
		}
		cv.notify_one();
	}
	{
		std::lock_guard<lowkey::mutex> g(m);
		done = true;
	}
	cv.notify_all();
	for (auto &t : consumers)
		t.join();
	assert_int_equal(sum, static_cast<long>(items) * (items + 1) / 2);
	assert_true(q.empty());
}

/* A counter incremented non-atomically under each kind of lock comes out exact. */
template <typename L> static void hammer(L &l, long &counter, int threads, int rounds)
{
	std::vector<std::thread> ts;

	for (int t = 0; t < threads; t++)
		ts.emplace_back([&] {
			for (int i = 0; i < rounds; i++) {
				std::lock_guard<L> g(l);
				long v =
					counter; /* a read and a write apart: a race would lose updates */
				std::atomic_signal_fence(std::memory_order_seq_cst);
				counter = v + 1;
			}
		});
	for (auto &t : ts)
		t.join();
}

static void contention_counts_exact(void **)
{
	const int threads = 4, rounds = 50000;
	lowkey::mutex m{ "hpp-hammer-mutex" };
	lowkey::spinlock s{ "hpp-hammer-spin" };
	lowkey::shared_mutex rw{ "hpp-hammer-rw" };
	lowkey::pcpu_shared_mutex p;
	long cm = 0, cs = 0, crw = 0, cp = 0;

	hammer(m, cm, threads, rounds);
	hammer(s, cs, threads, rounds);
	hammer(rw, crw, threads, rounds);
	hammer(p, cp, threads, rounds);
	assert_int_equal(cm, threads * rounds);
	assert_int_equal(cs, threads * rounds);
	assert_int_equal(crw, threads * rounds);
	assert_int_equal(cp, threads * rounds);
	assert_int_equal(m.stat().acquisitions, threads * rounds);
	assert_int_equal(s.stat().acquisitions, threads * rounds);
	assert_int_equal(rw.stat().acquisitions, threads * rounds);

	/* One wait the test knows of: the lock held here while a thread is seen in its slow path. */
	lowkey::mutex known{ "hpp-known" };
	known.lock();
	std::thread waiter([&] { std::lock_guard<lowkey::mutex> g(known); });
	while (!(__atomic_load_n(&known.native_handle()->lk__word, __ATOMIC_SEQ_CST) & 2))
		std::this_thread::yield(); /* the waiter swapped in 2: it is about to sleep */
	known.unlock();
	waiter.join();
	struct lk_lockstat st = known.stat();
	assert_int_equal(st.acquisitions, 2);
	assert_int_equal(st.contended, 1);
	found f = lookup("hpp-known");
	assert_int_equal(f.seen, 1);
	assert_int_equal(f.stat.contended, 1);
	assert_int_equal(f.stat.owner_changes, 1);
}

/* The destructor takes a lock off the registry: a heap one can go away with no dangling entry. */
static void destructor_unregisters(void **)
{
	auto m = std::make_unique<lowkey::mutex>("hpp-heap");

	assert_int_equal(reinterpret_cast<uintptr_t>(m.get()) % 64, 0);
	{
		std::lock_guard<lowkey::mutex> g(*m);
	}
	assert_int_equal(lookup("hpp-heap").seen, 1);
	m.reset();
	assert_int_equal(lookup("hpp-heap").seen, 0);

	lowkey::mutex unnamed;
	unnamed.lock();
	unnamed.unlock();
	assert_string_equal(unnamed.stat().name, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lock_guard_and_registry),
		cmocka_unit_test(unique_lock_try_and_defer),
		cmocka_unit_test(scoped_lock_two_locks),
		cmocka_unit_test(shared_lock_on_rwlock),
		cmocka_unit_test(condition_variable_any_with_mutex),
		cmocka_unit_test(contention_counts_exact),
		cmocka_unit_test(destructor_unregisters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
