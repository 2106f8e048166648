// SPDX-License-Identifier: MIT
/*
 * liblowkey-races-heap.so: what `lowkey races --heap` preloads in front of liblowkey-races.so so
 * that a race on heap memory names the block and where it was allocated, as ThreadSanitizer's
 * "Location is heap block" does (include/internal/races_heap.h). It defines the allocator's
 * functions, which call the next definition (the C library's, or the program's own allocator's)
 * and record each block returned, by its start, with its size, the caller's return address and
 * the thread; free() forgets it first. What the allocator returns is never changed.
 *
 * The next definitions are looked up with dlsym(RTLD_NEXT) on the first call, and dlsym may itself
 * allocate: a thread that is looking them up is served from a small arena of the library's own,
 * whose blocks are never given back. The table is mapped on the first allocation (never malloc's
 * memory), its size from $LOWKEY_RACES_HEAP_SLOTS (a power of two, the command's --heap-slots).
 * The thread's id is kept in initial-exec TLS (no allocation to reach it), cleared in a fork()ed
 * child. A program that exec()s another keeps the library (LD_PRELOAD), which starts afresh there.
 * C++'s global operator new is defined too, so that a block made with `new` is named by the
 * function that said `new`.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal/races_heap.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define ARENA_SIZE 16384u /* what dlsym() may allocate while the functions are looked up */
#define SLOTS_MIN (1u << 10)
#define SLOTS_MAX (1u << 26)

struct allocator {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	void *(*reallocarray)(void *, size_t, size_t);
};

static struct allocator next;
static bool resolved;
static struct lkr_heap_table table;
static int table_state; /* 0: not mapped, 1: being mapped, 2: mapped, 3: could not be */

static TLS pid_t thread_id;
static TLS bool resolving;
static TLS bool in_new; /* in the next operator new: its own allocations are not recorded */

static _Alignas(64) char arena[ARENA_SIZE];
static size_t arena_used;

/* ---- the arena, while dlsym() runs ---- */

struct arena_block {
	size_t size;
	size_t pad;
};

static void *arena_alloc(size_t size)
{
	size_t need = sizeof(struct arena_block) + ((size + 15) & ~(size_t)15);
	size_t at = __atomic_fetch_add(&arena_used, need, __ATOMIC_RELAXED);
	struct arena_block *b = (struct arena_block *)(arena + at);

	if (need < size || at + need > ARENA_SIZE)
		return NULL;
	b->size = size;
	return b + 1; /* zeroed: the arena is static and never reused */
}

static bool in_arena(const void *p)
{
	return (const char *)p >= arena && (const char *)p < arena + ARENA_SIZE;
}

/* ---- the next allocator ---- */

#define LOOK_UP(name) (__typeof__(next.name))dlsym(RTLD_NEXT, #name)

static void resolve(void)
{
	struct allocator a;

	resolving = true;
	a.malloc = LOOK_UP(malloc);
	a.calloc = LOOK_UP(calloc);
	a.realloc = LOOK_UP(realloc);
	a.free = LOOK_UP(free);
	a.posix_memalign = LOOK_UP(posix_memalign);
	a.aligned_alloc = LOOK_UP(aligned_alloc);
	a.memalign = LOOK_UP(memalign);
	a.valloc = LOOK_UP(valloc);
	a.pvalloc = LOOK_UP(pvalloc);
	a.reallocarray = LOOK_UP(reallocarray);
	resolving = false;
	if (!a.malloc || !a.calloc || !a.realloc || !a.free)
		abort(); /* no allocator after this library: nothing can run */
	next = a;
	__atomic_store_n(&resolved, true, __ATOMIC_RELEASE);
}

/* Whether the next allocator can be called; false: serve from the arena. */
static bool ready(void)
{
	if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
		return true;
	if (resolving)
		return false;
	resolve();
	return true;
}

/* ---- the table ---- */

static uint64_t slots_wanted(void)
{
	const char *v = getenv("LOWKEY_RACES_HEAP_SLOTS");
	unsigned long long n = v ? strtoull(v, NULL, 0) : 0;
	uint64_t slots = SLOTS_MIN;

	if (!n)
		return LKR_HEAP_SLOTS_DEFAULT;
	while (slots < n && slots < SLOTS_MAX)
		slots <<= 1;
	return slots;
}

/* The table, mapped by the first thread that needs it; NULL if it could not be. */
static struct lkr_heap_table *table_of(void)
{
	int state = __atomic_load_n(&table_state, __ATOMIC_ACQUIRE), expected = 0;
	uint64_t slots;
	void *mem;

	if (state == 2)
		return &table;
	if (state != 0 || !__atomic_compare_exchange_n(&table_state, &expected, 1, false,
						       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return NULL; /* another thread maps it: this block goes unrecorded */
	slots = slots_wanted();
	mem = mmap(NULL, lkr_heap_table_bytes(slots), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		__atomic_store_n(&table_state, 3, __ATOMIC_RELEASE);
		return NULL;
	}
	table.slots = mem;
	table.mask = slots - 1;
	__atomic_store_n(&table_state, 2, __ATOMIC_RELEASE);
	return &table;
}

static pid_t tid(void)
{
	if (!thread_id)
		thread_id = (pid_t)syscall(SYS_gettid);
	return thread_id;
}

/* The child has one thread, the one that forked, under another id. */
static void forget_tid(void)
{
	thread_id = 0;
}

__attribute__((constructor)) static void heap_start(void)
{
	pthread_atfork(NULL, NULL, forget_tid);
}

static void record(void *p, size_t size, void *site)
{
	struct lkr_heap_table *t;
	int saved;

	if (!p || in_new)
		return;
	saved = errno;
	t = table_of();
	if (t)
		lkr_heap_insert(t, &(struct lkr_heap_block){ (uintptr_t)p, size, (uintptr_t)site,
							     (uint32_t)tid() });
	else
		__atomic_fetch_add(&table.dropped, 1, __ATOMIC_RELAXED);
	errno = saved;
}

static void forget(void *p)
{
	if (p && __atomic_load_n(&table_state, __ATOMIC_ACQUIRE) == 2)
		lkr_heap_remove(&table, (uintptr_t)p, NULL);
}

/* ---- the allocator's functions ---- */

#define SITE __builtin_return_address(0)

EXPORT void *malloc(size_t size)
{
	void *p;

	if (!ready())
		return arena_alloc(size);
	p = next.malloc(size);
	record(p, size, SITE);
	return p;
}

EXPORT void *calloc(size_t n, size_t size)
{
	void *p;

	if (!ready())
		return n && size > SIZE_MAX / n ? NULL : arena_alloc(n * size);
	p = next.calloc(n, size);
	record(p, n * size, SITE);
	return p;
}

EXPORT void free(void *p)
{
	if (!p || in_arena(p))
		return;
	forget(p); /* first: once free, the allocator may give it to another thread */
	if (ready())
		next.free(p);
}

/* realloc() of a block of the arena: a block of the allocator's, the bytes copied. */
static void *out_of_arena(void *p, size_t size, void *site)
{
	const struct arena_block *b = (const struct arena_block *)p - 1;
	void *q = next.malloc(size);

	if (q) {
		memcpy(q, p, b->size < size ? b->size : size);
		record(q, size, site);
	}
	return q;
}

/*
 * The old block is forgotten before the allocator may free it (another thread may get it at
 * once), and recorded again if it stays.
 */
static void *reallocate(void *p, size_t size, void *(*fn)(void *, size_t, size_t), size_t n,
			void *site)
{
	struct lkr_heap_block old;
	bool known = false;
	void *q;

	if (p && __atomic_load_n(&table_state, __ATOMIC_ACQUIRE) == 2)
		known = lkr_heap_remove(&table, (uintptr_t)p, &old);
	q = fn ? fn(p, n, size) : next.realloc(p, size);
	if (q)
		record(q, fn ? n * size : size, site);
	else if (known && (fn ? n * size : size))
		lkr_heap_insert(&table, &old); /* it failed: the old block lives on */
	return q;
}

EXPORT void *realloc(void *p, size_t size)
{
	if (!ready())
		return p ? NULL : arena_alloc(size); /* dlsym() does not grow its blocks */
	if (in_arena(p))
		return out_of_arena(p, size, SITE);
	return reallocate(p, size, NULL, 1, SITE);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	if (!ready() || !next.reallocarray) {
		errno = ENOMEM;
		return NULL;
	}
	if (in_arena(p))
		return n && size > SIZE_MAX / n ? NULL : out_of_arena(p, n * size, SITE);
	return reallocate(p, size, next.reallocarray, n, SITE);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	int err;

	if (!ready() || !next.posix_memalign)
		return ENOMEM;
	err = next.posix_memalign(out, align, size);
	if (!err)
		record(*out, size, SITE);
	return err;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	void *p;

	if (!ready() || !next.aligned_alloc)
		return NULL;
	p = next.aligned_alloc(align, size);
	record(p, size, SITE);
	return p;
}

EXPORT void *memalign(size_t align, size_t size)
{
	void *p;

	if (!ready() || !next.memalign)
		return NULL;
	p = next.memalign(align, size);
	record(p, size, SITE);
	return p;
}

EXPORT void *valloc(size_t size)
{
	void *p;

	if (!ready() || !next.valloc)
		return NULL;
	p = next.valloc(size);
	record(p, size, SITE);
	return p;
}

EXPORT void *pvalloc(size_t size)
{
	void *p;

	if (!ready() || !next.pvalloc)
		return NULL;
	p = next.pvalloc(size);
	record(p, size, SITE);
	return p;
}

/* ---- C++'s replaceable global operator new ---- */

/*
 * operator new and new[], plain, nothrow, aligned and aligned nothrow, by their Itanium C++ ABI
 * names (size_t is unsigned long: "m"; std::align_val_t is passed as a size_t, a nothrow_t as a
 * pointer). Each calls the next definition, which throws std::bad_alloc, calls the new_handler or
 * returns NULL as it would have, and records the block with the size asked for and its own caller
 * as the site, not the C++ library's operator new. What the next definition allocates on the way
 * (malloc, aligned_alloc, or the plain operator new that libstdc++'s new[] and nothrow ones call)
 * is not recorded: only the outermost operator new of the thread records. operator delete needs
 * no wrapper: libstdc++'s and libc++'s call free(). A program that defines operator new itself is
 * found first (the executable comes before the preloaded libraries): these are never called, and
 * its operator new, calling malloc, is the site.
 */
_Static_assert(sizeof(size_t) == sizeof(unsigned long), "operator new's mangled names take an m");

enum new_kind {
	NEW,
	NEW_ARRAY,
	NEW_NOTHROW,
	NEW_ARRAY_NOTHROW,
	NEW_ALIGNED,
	NEW_ARRAY_ALIGNED,
	NEW_ALIGNED_NOTHROW,
	NEW_ARRAY_ALIGNED_NOTHROW,
	NEW_KINDS
};

static const char *const new_names[NEW_KINDS] = {
	[NEW] = "_Znwm",
	[NEW_ARRAY] = "_Znam",
	[NEW_NOTHROW] = "_ZnwmRKSt9nothrow_t",
	[NEW_ARRAY_NOTHROW] = "_ZnamRKSt9nothrow_t",
	[NEW_ALIGNED] = "_ZnwmSt11align_val_t",
	[NEW_ARRAY_ALIGNED] = "_ZnamSt11align_val_t",
	[NEW_ALIGNED_NOTHROW] = "_ZnwmSt11align_val_tRKSt9nothrow_t",
	[NEW_ARRAY_ALIGNED_NOTHROW] = "_ZnamSt11align_val_tRKSt9nothrow_t",
};

static void *new_next[NEW_KINDS];

/*
 * The definition that the caller's own object would bind name to: a C++ library dlopen()ed with
 * RTLD_LOCAL (a Python extension) has its C++ runtime out of reach of RTLD_NEXT.
 */
static void *next_of_caller(const char *name, void *caller)
{
	Dl_info info;
	void *handle, *fn = NULL;

	if (!dladdr(caller, &info) || !info.dli_fname || !*info.dli_fname)
		return NULL;
	handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (handle) {
		fn = dlsym(handle, name);
		dlclose(handle);
	}
	return fn;
}

/* The next operator new of that kind, on its first call. */
static __attribute__((noinline, cold)) void *look_up_new(enum new_kind kind, void *self,
							 void *caller)
{
	void *fn;

	ready(); /* the allocator first: dlsym() may allocate */
	fn = dlsym(RTLD_NEXT, new_names[kind]);
	if (!fn)
		fn = next_of_caller(new_names[kind], caller);
	if (!fn || fn == self)
		abort(); /* C++ code with no operator new after this library's */
	__atomic_store_n(&new_next[kind], fn, __ATOMIC_RELEASE);
	return fn;
}

static inline void *next_new(enum new_kind kind, void *self, void *caller)
{
	void *fn = __atomic_load_n(&new_next[kind], __ATOMIC_ACQUIRE);

	return fn ? fn : look_up_new(kind, self, caller);
}

/* Whether this is the thread's outermost operator new, the one that records. */
static bool enter_new(void)
{
	if (in_new)
		return false;
	in_new = true;
	return true;
}

/* On return, and as an exception passes (the cleanup attribute, with -fexceptions). */
static void leave_new(bool *outer)
{
	if (*outer)
		in_new = false;
	*outer = false;
}

#define CALL_NEW(kind, self, type, args, size)                                 \
	do {                                                                   \
		type fn_ = (type)next_new(kind, (void *)self, SITE);           \
		bool outer_ __attribute__((cleanup(leave_new))) = enter_new(); \
		void *p_ = fn_ args;                                           \
                                                                               \
		if (outer_) {                                                  \
			leave_new(&outer_);                                    \
			record(p_, size, SITE);                                \
		}                                                              \
		return p_;                                                     \
	} while (0)

typedef void *(*new_fn)(size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void *(*new_aligned_fn)(size_t, size_t);
typedef void *(*new_aligned_nothrow_fn)(size_t, size_t, const void *);

EXPORT void *new_plain(size_t size) __asm__("_Znwm");
EXPORT void *new_array(size_t size) __asm__("_Znam");
EXPORT void *new_nothrow(size_t size, const void *nt) __asm__("_ZnwmRKSt9nothrow_t");
EXPORT void *new_array_nothrow(size_t size, const void *nt) __asm__("_ZnamRKSt9nothrow_t");
EXPORT void *new_aligned(size_t size, size_t align) __asm__("_ZnwmSt11align_val_t");
EXPORT void *new_array_aligned(size_t size, size_t align) __asm__("_ZnamSt11align_val_t");
EXPORT void *new_aligned_nothrow(size_t size, size_t align,
				 const void *nt) __asm__("_ZnwmSt11align_val_tRKSt9nothrow_t");
EXPORT void *
new_array_aligned_nothrow(size_t size, size_t align,
			  const void *nt) __asm__("_ZnamSt11align_val_tRKSt9nothrow_t");

EXPORT void *new_plain(size_t size)
{
	CALL_NEW(NEW, new_plain, new_fn, (size), size);
}

EXPORT void *new_array(size_t size)
{
	CALL_NEW(NEW_ARRAY, new_array, new_fn, (size), size);
}

EXPORT void *new_nothrow(size_t size, const void *nt)
{
	CALL_NEW(NEW_NOTHROW, new_nothrow, new_nothrow_fn, (size, nt), size);
}

EXPORT void *new_array_nothrow(size_t size, const void *nt)
{
	CALL_NEW(NEW_ARRAY_NOTHROW, new_array_nothrow, new_nothrow_fn, (size, nt), size);
}

EXPORT void *new_aligned(size_t size, size_t align)
{
	CALL_NEW(NEW_ALIGNED, new_aligned, new_aligned_fn, (size, align), size);
}

EXPORT void *new_array_aligned(size_t size, size_t align)
{
	CALL_NEW(NEW_ARRAY_ALIGNED, new_array_aligned, new_aligned_fn, (size, align), size);
}

EXPORT void *new_aligned_nothrow(size_t size, size_t align, const void *nt)
{
	CALL_NEW(NEW_ALIGNED_NOTHROW, new_aligned_nothrow, new_aligned_nothrow_fn,
		 (size, align, nt), size);
}

EXPORT void *new_array_aligned_nothrow(size_t size, size_t align, const void *nt)
{
	CALL_NEW(NEW_ARRAY_ALIGNED_NOTHROW, new_array_aligned_nothrow, new_aligned_nothrow_fn,
		 (size, align, nt), size);
}

/* ---- for liblowkey-races.so ---- */

/*
 * One line of /proc/self/maps, "start-end perms offset dev inode [name]": whether it covers addr,
 * and then into *start its start and whether heap blocks may be there (no name: anonymous; or
 * [heap], or a name given with prctl, [anon:...]).
 */
static bool line_covers(const char *line, uint64_t addr, uint64_t *start, bool *heap)
{
	char *end;
	uint64_t lo = strtoull(line, &end, 16), hi;
	const char *name;

	if (*end != '-')
		return false;
	hi = strtoull(end + 1, &end, 16);
	if (addr < lo || addr >= hi)
		return false;
	*start = lo;
	for (int field = 0; field < 4 && end; field++) /* perms, offset, dev, inode */
		end = strchr(end + 1, ' ');
	name = end ? end + strspn(end, " ") : "";
	*heap = !*name || strcmp(name, "[heap]") == 0 || strncmp(name, "[anon:", 6) == 0;
	return true;
}

/* The mapping addr is in, from /proc/self/maps read into a buffer on the stack. */
static bool mapping_of(uint64_t addr, uint64_t *start, bool *heap)
{
	char buf[4096];
	size_t have = 0;
	bool found = false;
	ssize_t got;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	while (!found && (got = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		char *line = buf, *nl;

		have += (size_t)got;
		buf[have] = 0;
		while (!found && (nl = strchr(line, '\n'))) {
			*nl = 0;
			found = line_covers(line, addr, start, heap);
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0; /* a line longer than the buffer: not one of addresses */
	}
	close(fd);
	return found;
}

EXPORT bool lowkey_races_heap_find(uint64_t addr, struct lkr_heap_block *b)
{
	uint64_t start;
	bool heap;

	return __atomic_load_n(&table_state, __ATOMIC_ACQUIRE) == 2 &&
	       mapping_of(addr, &start, &heap) && heap && lkr_heap_find(&table, addr, start, b);
}

EXPORT void lowkey_races_heap_counts(uint64_t *recorded, uint64_t *dropped)
{
	*recorded = __atomic_load_n(&table_state, __ATOMIC_ACQUIRE) == 2 ? lkr_heap_count(&table) :
									   0;
	*dropped = __atomic_load_n(&table.dropped, __ATOMIC_RELAXED);
}
