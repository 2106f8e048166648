// SPDX-License-Identifier: MIT
/*
 * The programs `lowkey races` is tested on: two threads run for a given time,
 *   races_fixture plain SECONDS      both ++ one int without a lock (a race: must be found)
 *   races_fixture mutex SECONDS      the same ++ under a mutex (no race)
 *   races_fixture atomic SECONDS     _Atomic counters, relaxed and sequentially consistent
 *                                    read-modify-writes (lock prefix: no race)
 *   races_fixture atomic_plain SECONDS  an _Atomic int read and written with relaxed loads and
 *                                    stores, plain movs that only the debug information shows
 *                                    atomic (no race)
 *   races_fixture sig_atomic SECONDS a volatile sig_atomic_t counted by both (left out as atomic)
 *   races_fixture lib SECONDS        the plain ++ in a shared library (races_lib.c): a race there
 *   races_fixture publish SECONDS    one thread fills a node and publishes its pointer with a
 *                                    plain store (no release), the other reads the pointer and
 *                                    the node through it (a race on the pointer)
 *   races_fixture signal SECONDS     a signal handler (SIGALRM, every 200 us) writes a global
 *                                    that both threads read (a race with the handler)
 *   races_fixture bitfield SECONDS   each thread writes its own bitfield of one byte (a race:
 *                                    each write reads and writes the byte)
 *   races_fixture fork SECONDS       plain, after forking a child that sleeps as long and exits
 *   races_fixture deep SECONDS       one thread writes a global two calls deep (outer_write ->
 *                                    inner_write, where deep_add is inlined), the other reads it
 *                                    two calls deep (outer_read -> inner_read): a race whose
 *                                    stacks name them
 *   races_fixture late SECONDS       opens a library with dlopen() (races_late.c, after sampling
 *                                    started), through which one thread writes a global and the
 *                                    other reads it (a race whose stacks have a frame in it), and
 *                                    closes it before exiting
 *   races_fixture heap SECONDS       both ++ a member (at +8) of a block of 24 bytes malloc'ed in
 *                                    make_shared() (a race on the heap: --heap names the block)
 *   races_fixture heap_again SECONDS the same, the block malloc'ed in first_site(), freed, and
 *                                    one of the same size malloc'ed in second_site() (the
 *                                    allocator gives the same back): second_site names it
 *   races_fixture started SECONDS    mutex, after printing "started" (stdout): for a test that
 *                                    signals it once it runs
 * and print what they counted. Each thread runs a time rather than a count, so that a busy
 * machine shortens no run; each repeats its racy access in a loop, so that in that time the
 * sampler arms it many times. The empty asm keeps each access an instruction of its own (at -O1
 * too).
 * The heap modes first print which object the program's malloc is (stdout, "malloc: PATH"):
 * liblowkey-races-heap.so only when it was preloaded.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 4096
#define NODES 64

struct worker {
	void (*bump)(void);
	struct timespec end;
};

struct node {
	long value;
};

static int counter;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic long relaxed_counter, seq_cst_counter;
static _Atomic int plain_atomic;
static volatile sig_atomic_t sig_counter;
static struct node nodes[NODES];
static struct node *published;
static long consumed;
static int ticks;
static _Atomic long ticks_seen;
static struct {
	unsigned int low : 4;
	unsigned int high : 4;
} bits;
static long deep_value, deep_sum;
static long late_value, late_sum;
static void (*late_call)(void (*fn)(void), int times);

/* Made by the heap modes before the threads start. */
struct shared {
	long before, value, after;
};
static struct shared *shared;

#define BARRIER() __asm__ volatile("" ::: "memory")

static void bump_plain(void)
{
	for (int i = 0; i < BATCH; i++) {
		counter++;
		BARRIER();
	}
}

void races_lib_bump(int *counter, int times);

static void bump_lib(void)
{
	races_lib_bump(&counter, BATCH);
}

static void bump_mutex(void)
{
	for (int i = 0; i < BATCH; i++) {
		pthread_mutex_lock(&lock);
		counter++;
		pthread_mutex_unlock(&lock);
	}
}

static void bump_atomic(void)
{
	for (int i = 0; i < BATCH; i++) {
		atomic_fetch_add_explicit(&relaxed_counter, 1, memory_order_relaxed);
		atomic_fetch_add(&seq_cst_counter, 1);
	}
}

/* A relaxed load then a relaxed store: two plain movs on x86-64, atomic all the same. */
static void bump_atomic_plain(void)
{
	for (int i = 0; i < BATCH; i++) {
		int v = atomic_load_explicit(&plain_atomic, memory_order_relaxed);

		atomic_store_explicit(&plain_atomic, v + 1, memory_order_relaxed);
		BARRIER();
	}
}

static void bump_sig_atomic(void)
{
	for (int i = 0; i < BATCH; i++)
		sig_counter = sig_counter + 1;
}

static void publish(void)
{
	for (int i = 0; i < BATCH; i++) {
		struct node *n = &nodes[i % NODES];

		n->value = i;
		BARRIER();
		published = n; /* no release: the reader may see the pointer before the value */
		BARRIER();
	}
}

static void consume(void)
{
	for (int i = 0; i < BATCH; i++) {
		struct node *n = published;

		BARRIER();
		if (n)
			consumed += n->value;
		BARRIER();
	}
}

static void on_alarm(int sig)
{
	(void)sig;
	ticks++;
}

static void watch_ticks(void)
{
	long seen = 0;

	for (int i = 0; i < BATCH; i++) {
		seen += ticks;
		BARRIER();
	}
	atomic_fetch_add(&ticks_seen, seen);
}

static void set_alarm(long usec)
{
	struct itimerval it = { { 0, usec }, { 0, usec } };
	struct sigaction sa = { .sa_handler = on_alarm };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (usec)
		sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

static void bump_low(void)
{
	for (int i = 0; i < BATCH; i++) {
		bits.low++;
		BARRIER();
	}
}

static void bump_high(void)
{
	for (int i = 0; i < BATCH; i++) {
		bits.high++;
		BARRIER();
	}
}

/* Inlined always, where the debug information says so: a frame of its own in the stack. */
static inline __attribute__((always_inline)) void deep_add(void)
{
	deep_value++;
}

/* Two calls deep, never inlined: the barrier after each call keeps it from being a jump. */
static __attribute__((noinline)) void inner_write(void)
{
	deep_add();
	BARRIER();
}

static __attribute__((noinline)) void outer_write(void)
{
	for (int i = 0; i < BATCH; i++) {
		inner_write();
		BARRIER();
	}
}

static __attribute__((noinline)) long inner_read(void)
{
	long v = deep_value;

	BARRIER();
	return v;
}

static __attribute__((noinline)) void outer_read(void)
{
	long sum = 0;

	for (int i = 0; i < BATCH; i++) {
		sum += inner_read();
		BARRIER();
	}
	deep_sum += sum;
}

static __attribute__((noinline)) struct shared *make_shared(void)
{
	struct shared *s = malloc(sizeof(*s));

	BARRIER();
	return s;
}

static __attribute__((noinline)) struct shared *first_site(void)
{
	struct shared *s = malloc(sizeof(*s));

	BARRIER();
	return s;
}

static __attribute__((noinline)) struct shared *second_site(void)
{
	struct shared *s = malloc(sizeof(*s));

	BARRIER();
	return s;
}

/* Which object defines the malloc the program calls. */
static void print_malloc_owner(void)
{
	Dl_info info;

	if (dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info) && info.dli_fname)
		printf("malloc: %s\n", info.dli_fname);
	else
		printf("malloc: ?\n");
}

static void heap_setup(void)
{
	print_malloc_owner();
	shared = make_shared();
	if (!shared)
		exit(1);
	memset(shared, 0, sizeof(*shared));
}

static void heap_again_setup(void)
{
	struct shared *first;

	print_malloc_owner();
	first = first_site();
	free(first);
	shared = second_site();
	if (!shared)
		exit(1);
	memset(shared, 0, sizeof(*shared));
	printf("same block again: %s\n", shared == first ? "yes" : "no");
}

static void say_started(void)
{
	printf("started\n");
}

static void bump_shared(void)
{
	for (int i = 0; i < BATCH; i++) {
		shared->value++;
		BARRIER();
	}
}

static __attribute__((noinline)) void late_add(void)
{
	late_value++;
	BARRIER();
}

static __attribute__((noinline)) void late_get(void)
{
	late_sum += late_value;
	BARRIER();
}

static void late_writer(void)
{
	late_call(late_add, BATCH);
}

static void late_reader(void)
{
	late_call(late_get, BATCH);
}

/* The library of the late mode, opened now: the sampler started before main. */
static void *open_late(void)
{
	void *lib = dlopen(RACES_LATE_LIB, RTLD_NOW | RTLD_LOCAL);

	if (lib)
		*(void **)&late_call = dlsym(lib, "races_late_call");
	if (!lib || !late_call) {
		fprintf(stderr, "races_fixture: %s\n", dlerror());
		exit(1);
	}
	return lib;
}

/* What each of the two threads runs in a mode. */
static const struct mode {
	const char *name;
	void (*bump[2])(void);
	bool fork_child;
	void (*setup)(void); /* before the threads start */
} modes[] = {
	{ "plain", { bump_plain, bump_plain } },
	{ "mutex", { bump_mutex, bump_mutex } },
	{ "atomic", { bump_atomic, bump_atomic } },
	{ "atomic_plain", { bump_atomic_plain, bump_atomic_plain } },
	{ "sig_atomic", { bump_sig_atomic, bump_sig_atomic } },
	{ "lib", { bump_lib, bump_lib } },
	{ "publish", { publish, consume } },
	{ "signal", { watch_ticks, watch_ticks } },
	{ "bitfield", { bump_low, bump_high } },
	{ "fork", { bump_plain, bump_plain }, true },
	{ "deep", { outer_write, outer_read } },
	{ "late", { late_writer, late_reader } },
	{ "heap", { bump_shared, bump_shared }, false, heap_setup },
	{ "heap_again", { bump_shared, bump_shared }, false, heap_again_setup },
	{ "started", { bump_mutex, bump_mutex }, false, say_started },
};

static int before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* LKT_FIXTURE_PAUSE_US: a sleep after each batch, leaving most of the CPU to others (tests). */
static struct timespec pause_between;

static void *work(void *arg)
{
	struct worker *w = arg;
	struct timespec now;

	do {
		w->bump();
		if (pause_between.tv_nsec)
			nanosleep(&pause_between, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (before(&now, &w->end));
	return NULL;
}

static const struct mode *mode_of(const char *name)
{
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(modes[i].name, name) == 0)
			return &modes[i];
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[2] = { 0 };
	const struct mode *mode = argc == 3 ? mode_of(argv[1]) : NULL;
	pthread_t threads[2];
	pid_t child = 0;
	void *late = NULL;
	struct timespec end;
	double seconds;

	if (!mode || (seconds = atof(argv[2])) <= 0) {
		fprintf(stderr, "usage: races_fixture MODE SECONDS (modes: see races_fixture.c)\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)seconds;
	end.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	if (getenv("LKT_FIXTURE_PAUSE_US"))
		pause_between.tv_nsec = atol(getenv("LKT_FIXTURE_PAUSE_US")) % 1000000 * 1000;
	if (mode->bump[0] == watch_ticks)
		set_alarm(200);
	if (mode->bump[0] == late_writer)
		late = open_late();
	if (mode->setup) {
		mode->setup();
		fflush(stdout);
	}
	if (mode->fork_child && (child = fork()) == 0) {
		nanosleep(&(struct timespec){ (time_t)seconds, 0 }, NULL);
		_exit(0);
	}
	for (int i = 0; i < 2; i++) {
		w[i] = (struct worker){ mode->bump[i], end };
		if (pthread_create(&threads[i], NULL, work, &w[i]) != 0)
			return 1;
	}
	for (int i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	if (child > 0)
		waitpid(child, NULL, 0);
	if (late)
		dlclose(late); /* before the end: its frames are named all the same */
	set_alarm(0);
	printf("%d %ld %ld %d %d %ld %ld %u %ld %ld\n", counter, atomic_load(&relaxed_counter),
	       atomic_load(&seq_cst_counter), atomic_load(&plain_atomic), (int)sig_counter,
	       consumed, atomic_load(&ticks_seen), bits.low + bits.high, deep_sum, late_sum);
	return 0;
}
