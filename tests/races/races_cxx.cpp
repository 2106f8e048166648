// SPDX-License-Identifier: MIT
/*
 * C++ built with Clang, for `lowkey races`: two threads run for a given time,
 *   races_cxx atomic SECONDS   both add to a std::atomic<int> with relaxed loads and stores, as
 *                              a global and through a pointer: plain movs on x86-64 that only the
 *                              debug information shows atomic (no race)
 *   races_cxx plain SECONDS    both ++ a plain int member of an object in its member function
 *                              Counter::bump() (a race: must be found, named demangled)
 *   races_cxx heap SECONDS     both ++ a member (at +8) of an object of 16 bytes made with new in
 *                              make_tally() (with --heap: the block is named by make_tally, not by
 *                              operator new), after a std::bad_alloc caught (printed)
 * The empty asm keeps each access an instruction of its own.
 */
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

static void barrier()
{
	__asm__ volatile("" ::: "memory");
}

/* Outside the anonymous namespace: its functions' names are Counter::... */
struct Counter {
	static constexpr int batch = 4096;
	int hits;
	std::atomic<long> total;
	void bump();
};

__attribute__((noinline)) void Counter::bump()
{
	for (int i = 0; i < batch; i++) {
		hits++;
		barrier();
	}
}

Counter stats;

struct Tally {
	long made;
	long hits;
};

Tally *tally;

/* Outside the anonymous namespace too: named make_tally(). */
__attribute__((noinline)) Tally *make_tally()
{
	return new Tally{ 1, 0 };
}

/* An operator new that throws: the block made after it is still named (printed: caught). */
__attribute__((noinline)) bool bad_alloc_caught()
{
	static void *volatile sink;

	try {
		sink = ::operator new(std::size_t(1) << 62);
	} catch (const std::bad_alloc &) {
		return true;
	}
	::operator delete(sink);
	return false;
}

namespace
{

constexpr int batch = Counter::batch;

std::atomic<int> global_count;

/* Through a pointer: the function the access is in (std::atomic's, inlined) says it is atomic. */
__attribute__((noinline)) void add_through(std::atomic<long> *total)
{
	for (int i = 0; i < batch; i++) {
		total->store(total->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
		barrier();
	}
}

void bump_atomic()
{
	for (int i = 0; i < batch; i++) {
		global_count.store(global_count.load(std::memory_order_relaxed) + 1,
				   std::memory_order_relaxed);
		barrier();
	}
	add_through(&stats.total);
}

__attribute__((noinline)) void bump_plain()
{
	stats.bump();
	barrier();
}

__attribute__((noinline)) void bump_tally()
{
	for (int i = 0; i < batch; i++) {
		tally->hits++;
		barrier();
	}
}

} // namespace

int main(int argc, char **argv)
{
	void (*bump)() = nullptr;
	double seconds = argc == 3 ? std::atof(argv[2]) : 0;

	if (argc == 3 && std::strcmp(argv[1], "atomic") == 0)
		bump = bump_atomic;
	else if (argc == 3 && std::strcmp(argv[1], "plain") == 0)
		bump = bump_plain;
	else if (argc == 3 && std::strcmp(argv[1], "heap") == 0)
		bump = bump_tally;
	if (!bump || seconds <= 0) {
		std::fprintf(stderr, "usage: races_cxx atomic|plain|heap SECONDS\n");
		return 2;
	}
	if (bump == bump_tally) {
		std::printf("bad_alloc: %s\n", bad_alloc_caught() ? "caught" : "not thrown");
		tally = make_tally();
	}
	auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
	/* LKT_FIXTURE_PAUSE_US: a sleep after each batch, leaving most of the CPU to others. */
	const char *pause_us = std::getenv("LKT_FIXTURE_PAUSE_US");
	auto pause = std::chrono::microseconds(pause_us ? std::atol(pause_us) : 0);
	auto work = [bump, end, pause] {
		do {
			bump();
			if (pause.count())
				std::this_thread::sleep_for(pause);
		} while (std::chrono::steady_clock::now() < end);
	};
	std::thread a(work), b(work);
	a.join();
	b.join();
	std::printf("%d %d %ld %ld\n", global_count.load(), stats.hits, stats.total.load(),
		    tally ? tally->hits : 0);
	return 0;
}
