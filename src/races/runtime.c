// SPDX-License-Identifier: MIT
/*
 * liblowkey-races.so: the sampler `lowkey races` preloads into the program (docs/design.md,
 * "Races"). It reads the plan the command wrote ($LOWKEY_RACES_FILE, include/internal/races_file.h)
 * and, on a thread of its own, arms one instruction of the plan after another with a process-wide
 * execute watchpoint. The thread that reaches the armed instruction traps before it runs it; in
 * its SIGTRAP callback it computes the address the instruction is about to access from its
 * registers, hands it over, and waits. Meanwhile the sampler watches that address in every thread
 * for a window (writes only if the sampled instruction reads, reads and writes if it writes): an
 * access another thread makes then is a race. The value is read before and after the window: a
 * change nothing was caught making is a write the watchpoint could not see.
 *
 * Only the sampler thread calls lowkey's watch functions; the callbacks use atomics, futexes and
 * libgcc's unwinder (for both threads' stacks: docs/design.md says why that one). While a thread
 * is held the sampler allocates nothing and takes no lock the program may hold (the held thread
 * may be inside malloc).
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include <lowkey/error.h>
#include <lowkey/watch.h>

#include "internal/races_file.h"

#define HIT_MAX 16	      /* accesses of one window kept with their instruction */
#define HANDLER_FRAMES_MAX 32 /* frames of the handler's own, above the trapped one */
#define POLL_NS \
	50000000u /* how often a sampler attached with --pid looks for the command leaving */

/* Where the sample is; only these moves: IDLE -> ARMED -> CLAIMED -> HELD -> CLOSING -> IDLE. */
enum phase {
	IDLE,	 /* nothing armed; a trap now is stale */
	ARMED,	 /* the instruction is armed: the first thread to reach it claims it */
	CLAIMED, /* a thread is computing the address (it goes back to IDLE if it cannot) */
	HELD,	 /* the thread waits; the window is open */
	CLOSING, /* the window is closed; the thread still waits while the sampler reads */
};

struct sampler {
	struct lkr_header *h;
	size_t map_size;
	struct lkr_object *objects;
	const struct lkr_insn *insns;
	struct lkr_race *races;
	uint32_t *order;
	unsigned int stack_depth; /* the plan's, as checked: frames of each stack kept */
	uint64_t rng;
	uint64_t start_ns;
	struct lk_watch *exec, *rw, *wr;
	pthread_t thread;
	bool running; /* the sampler thread was started (in this process, owner) */
	pid_t owner;  /* the process that started it: not a fork()ed child */
	int stop;     /* futex word too: the destructor wakes the sampler with it */

	/* Waiting for `lowkey races --pid` (LOWKEY_RACES_ATTACH=1); -1 otherwise. */
	int listen_fd;
	int conn_fd;	       /* the command attached now, or -1 */
	uint64_t next_poll_ns; /* when to look again whether it detached */
	bool detached;	       /* it asked to stop, or went away */

	/* The sample, shared with the callbacks (atomics). */
	int phase;
	const struct lkr_insn *pick;
	uint64_t pick_ip;
	uint64_t addr;
	pid_t held_tid;
	unsigned int held_depth;
	uint64_t held_stack[LKR_STACK_MAX];
	unsigned int inflight;
	unsigned int nhits;
	uint64_t hit_ip[HIT_MAX];
	pid_t hit_tid[HIT_MAX];
	unsigned int hit_depth[HIT_MAX];
	uint64_t hit_stack[HIT_MAX][LKR_STACK_MAX];
};

static struct sampler sampler = { .listen_fd = -1, .conn_fd = -1 };
static uint64_t parking; /* where the data watchpoints point between windows */

/* ---- small helpers ---- */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void futex_wait(int *word, int value, uint64_t timeout_ns)
{
	struct timespec ts = { (time_t)(timeout_ns / 1000000000u),
			       (long)(timeout_ns % 1000000000u) };

	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, timeout_ns ? &ts : NULL, NULL, 0);
}

static void futex_wake(int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static int phase_of(const struct sampler *s)
{
	return __atomic_load_n(&s->phase, __ATOMIC_SEQ_CST);
}

static void set_phase(struct sampler *s, int phase)
{
	__atomic_store_n(&s->phase, phase, __ATOMIC_SEQ_CST);
	futex_wake(&s->phase);
}

/* xorshift64*: the order the plan's instructions are armed in, reproducible from the seed. */
static uint64_t next_random(struct sampler *s)
{
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545f4914f6cdd1dull;
}

static void shuffle(struct sampler *s)
{
	for (uint32_t i = s->h->ninsns; i > 1; i--) {
		uint32_t j = (uint32_t)(next_random(s) % i), t = s->order[i - 1];

		s->order[i - 1] = s->order[j];
		s->order[j] = t;
	}
}

/* The bytes at addr, read so that an unmapped address is an error, not a SIGSEGV. */
static bool read_value(uint64_t addr, unsigned int size, uint64_t *value)
{
	struct iovec local = { value, size }, remote = { (void *)(uintptr_t)addr, size };

	*value = 0;
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)size;
}

/* ---- the stacks ---- */

struct unwind_walk {
	uint64_t from;	  /* the trapped instruction: the frames above it are the handler's */
	uint64_t *pcs;	  /* where its frame and its callers' go */
	unsigned int max; /* at most this many */
	unsigned int n;
	unsigned int skipped; /* the handler's frames passed over */
	bool found;
};

static _Unwind_Reason_Code unwind_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct unwind_walk *w = arg;
	int before_insn;
	uint64_t pc = _Unwind_GetIPInfo(ctx, &before_insn);

	if (!w->found && pc != w->from)
		return ++w->skipped < HANDLER_FRAMES_MAX ? _URC_NO_REASON : _URC_END_OF_STACK;
	w->found = true;
	if (w->n == w->max || !pc) /* pc 0: the thread's first frame (clone's) said it ends */
		return _URC_END_OF_STACK;
	w->pcs[w->n++] = pc;
	return _URC_NO_REASON;
}

/*
 * The trapped thread's stack, from inside its SIGTRAP handler: libgcc's unwinder walks out of the
 * handler through the signal frame (the kernel's sigreturn trampoline, which libgcc knows) into
 * the interrupted code, by the objects' .eh_frame, so code built without frame pointers unwinds
 * as well. The frames above the trapped instruction are the handler's, left out. Up to max return
 * addresses into pcs; how many (0 when the trapped frame was not reached).
 */
static unsigned int capture_stack(const ucontext_t *uc, uint64_t *pcs, unsigned int max)
{
	struct unwind_walk w = {
		.from = uc ? (uint64_t)uc->uc_mcontext.gregs[REG_RIP] : 0,
		.pcs = pcs,
		.max = max,
	};

	if (!max || !uc)
		return 0;
	_Unwind_Backtrace(unwind_frame, &w);
	return w.n;
}

/*
 * The unwinder's first call initializes libgcc's register tables (pthread_once) and may bind
 * symbols: made once here, at start, never first in a signal handler.
 */
static void prewarm_unwinder(void)
{
	ucontext_t uc = { 0 };
	uint64_t pc;

	capture_stack(&uc, &pc, 1);
}

/* ---- the callbacks (in the SIGTRAP handler of the thread that trapped) ---- */

static bool effective_address(const struct lkr_insn *in, const ucontext_t *uc, uint64_t bias,
			      uint64_t *addr)
{
	const greg_t *regs = uc->uc_mcontext.gregs;
	uint64_t a;

	if (in->base == LKR_REG_RIP) {
		a = (uint64_t)in->disp + bias;
	} else {
		a = (uint64_t)in->disp;
		if (in->base != LKR_REG_NONE)
			a += (uint64_t)regs[in->base];
	}
	if (in->index != LKR_REG_NONE)
		a += (uint64_t)regs[in->index] * in->scale;
	*addr = a;
	return a % in->size == 0; /* the watchpoint then covers exactly the bytes accessed */
}

static void on_exec(const struct lk_watch_hit *hit, void *arg)
{
	struct sampler *s = arg;
	int expected = ARMED, phase;
	uint64_t addr;

	if ((uint64_t)(uintptr_t)hit->ip != __atomic_load_n(&s->pick_ip, __ATOMIC_ACQUIRE) ||
	    !hit->context)
		return; /* a trap from an instruction armed before */
	if (!__atomic_compare_exchange_n(&s->phase, &expected, CLAIMED, false, __ATOMIC_SEQ_CST,
					 __ATOMIC_SEQ_CST))
		return; /* another thread has it, or the sampler gave up on it */
	if ((uint64_t)(uintptr_t)hit->ip != __atomic_load_n(&s->pick_ip, __ATOMIC_ACQUIRE)) {
		set_phase(s, IDLE); /* the sampler armed another instruction meanwhile */
		return;
	}
	if (!effective_address(s->pick, hit->context, s->objects[s->pick->object].bias, &addr)) {
		__atomic_fetch_add(&s->h->misaligned, 1, __ATOMIC_RELAXED);
		set_phase(s, IDLE);
		return;
	}
	s->addr = addr;
	s->held_tid = hit->tid;
	s->held_depth = capture_stack(hit->context, s->held_stack, s->stack_depth);
	__atomic_fetch_add(&s->h->held_ns, monotonic_ns() - hit->time_ns, __ATOMIC_RELAXED);
	set_phase(s, HELD);
	/* Held: the instruction runs when the sampler is done with the window. */
	while ((phase = phase_of(s)) == HELD || phase == CLOSING)
		futex_wait(&s->phase, phase, 0);
}

/*
 * A trap raised just before the window closed may be handled after the next one opened: the
 * kernel reports the address the watchpoint had when it fired. late: the thread had SIGTRAP
 * blocked, and ip is not the access's.
 */
static bool conflicting(const struct sampler *s, const struct lk_watch_hit *hit)
{
	return phase_of(s) == HELD && (uint64_t)(uintptr_t)hit->addr == s->addr &&
	       hit->tid != s->held_tid && !hit->late && hit->context;
}

/*
 * Whether an access of the window kept before has the instruction ip: only the first access of
 * each instruction can make a record, so only it needs a stack. A slot claimed but not yet filled
 * reads 0 (the window starts with them cleared) and does not match: at worst a stack is taken that
 * is not needed.
 */
static bool ip_kept(const struct sampler *s, uint64_t ip)
{
	unsigned int n = __atomic_load_n(&s->nhits, __ATOMIC_RELAXED);

	for (unsigned int i = 0; i < n && i < HIT_MAX; i++)
		if (__atomic_load_n(&s->hit_ip[i], __ATOMIC_RELAXED) == ip)
			return true;
	return false;
}

static void on_data(const struct lk_watch_hit *hit, void *arg)
{
	struct sampler *s = arg;
	uint64_t stack[LKR_STACK_MAX];
	unsigned int depth = 0;

	/*
	 * The stack is unwound before the access is counted in flight, so that the sampler never
	 * waits for an unwinder: only while a record may still be made of it.
	 */
	if (conflicting(s, hit) && __atomic_load_n(&s->nhits, __ATOMIC_RELAXED) < HIT_MAX &&
	    !ip_kept(s, (uint64_t)(uintptr_t)hit->ip))
		depth = capture_stack(hit->context, stack, s->stack_depth);
	__atomic_fetch_add(&s->inflight, 1, __ATOMIC_SEQ_CST);
	if (conflicting(s, hit)) {
		unsigned int i = __atomic_fetch_add(&s->nhits, 1, __ATOMIC_RELAXED);

		if (i < HIT_MAX) {
			__atomic_store_n(&s->hit_ip[i], (uint64_t)(uintptr_t)hit->ip,
					 __ATOMIC_RELAXED);
			s->hit_tid[i] = hit->tid;
			s->hit_depth[i] = depth;
			memcpy(s->hit_stack[i], stack, depth * sizeof(stack[0]));
			/* in flight still: the plan stays mapped */
			__atomic_fetch_add(&s->h->kept, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&s->h->kept_ns, monotonic_ns() - hit->time_ns,
					   __ATOMIC_RELAXED);
		}
	}
	__atomic_fetch_sub(&s->inflight, 1, __ATOMIC_SEQ_CST);
}

/* ---- the objects the records' frames are in ---- */

/* A record's frames, each an address inside the instruction it names. */
struct record_frames {
	struct sampler *s;
	uint64_t pcs[2 * LKR_STACK_MAX + 2];
	unsigned int n;
};

/*
 * The sampled instruction's address; the byte before the other access's (its trap reports the
 * instruction after it) and before each caller's return address (a call that ends an object's
 * code returns past its end).
 */
static void collect_frames(struct record_frames *f, const struct lkr_race *r)
{
	f->n = 0;
	f->pcs[f->n++] = r->sample_ip;
	if (r->other_ip)
		f->pcs[f->n++] = r->other_ip - 1;
	for (unsigned int i = 1; i < r->sample_depth && i < LKR_STACK_MAX; i++)
		f->pcs[f->n++] = r->sample_stack[i] - 1;
	for (unsigned int i = 1; i < r->other_depth && i < LKR_STACK_MAX; i++)
		f->pcs[f->n++] = r->other_stack[i] - 1;
}

static bool holds_a_frame(const struct dl_phdr_info *info, const struct record_frames *f)
{
	for (unsigned int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		for (unsigned int k = 0; k < f->n; k++)
			if (f->pcs[k] >= lo && f->pcs[k] < hi)
				return true;
	}
	return false;
}

/* An object of the plan, loaded at bias: the command names its frames already. */
static bool in_plan(const struct sampler *s, uint64_t bias)
{
	for (uint32_t i = 0; i < s->h->nobjects; i++)
		if (s->objects[i].loaded && s->objects[i].bias == bias)
			return true;
	return false;
}

/*
 * The object's path, as the loader names it, if the command can open it: absolute (not the vDSO,
 * not the program, nor a library dlopen()ed by a relative path, which the working directory of
 * that moment resolved) and shorter than LKR_PATH_MAX.
 */
static bool object_path(const char *name)
{
	return name && name[0] == '/' && strlen(name) < LKR_PATH_MAX;
}

/* The module at bias and path, listed once: past LKR_MODULES_MAX, no more. */
static void list_module(struct lkr_header *h, uint64_t bias, const char *path)
{
	struct lkr_module *modules = lkr_modules(h);
	uint32_t n = h->nmodules;

	for (uint32_t i = 0; i < n; i++)
		if (modules[i].bias == bias && strcmp(modules[i].path, path) == 0)
			return;
	if (n == LKR_MODULES_MAX)
		return;
	modules[n].bias = bias;
	strcpy(modules[n].path, path);
	/* counted once whole: a process killed meanwhile leaves no half entry counted */
	__atomic_store_n(&h->nmodules, n + 1, __ATOMIC_RELEASE);
}

static int list_frame_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct record_frames *f = data;

	(void)size;
	if (object_path(info->dlpi_name) && holds_a_frame(info, f) &&
	    !in_plan(f->s, info->dlpi_addr))
		list_module(f->s->h, info->dlpi_addr, info->dlpi_name);
	return 0;
}

/*
 * The objects the records made since the first (races_used then) have frames in, that are not in
 * the plan, listed for the command to name those frames: libc, the libraries not sampled, and
 * those the program dlopen()ed after sampling started. Listed while the record's objects are still
 * loaded (a library dlclose()d between the access and this is not found: its frames are
 * addresses), by the sampler thread and never while a thread is held: dl_iterate_phdr() takes
 * the loader's lock.
 */
static void list_record_objects(struct sampler *s, uint64_t first)
{
	struct record_frames f = { .s = s };

	for (uint64_t i = first; i < s->h->races_used; i++) {
		collect_frames(&f, &s->races[i]);
		dl_iterate_phdr(list_frame_object, &f);
	}
}

/* ---- the sampler thread ---- */

/*
 * The record of the pair (the sampled instruction, the window's access number hit, or none: -1),
 * a new one made whole first.
 */
static void book(struct sampler *s, int hit, uint64_t hits, uint64_t before, uint64_t after)
{
	uint64_t other_ip = hit >= 0 ? s->hit_ip[hit] : 0;
	struct lkr_header *h = s->h;
	uint64_t used = h->races_used;
	struct lkr_race *r;

	for (uint64_t i = 0; i < used; i++) {
		r = &s->races[i];
		if (r->sample_ip == s->pick_ip && r->other_ip == other_ip) {
			r->windows++;
			r->hits += hits;
			return;
		}
	}
	if (used == h->max_races) {
		h->flags |= LKR_F_FULL;
		h->races_dropped++;
		return;
	}
	r = &s->races[used];
	*r = (struct lkr_race){
		.sample_ip = s->pick_ip,
		.other_ip = other_ip,
		.addr = s->addr,
		.before = before,
		.after = after,
		.windows = 1,
		.hits = hits,
		.sample_tid = (uint32_t)s->held_tid,
		.other_tid = hit >= 0 ? (uint32_t)s->hit_tid[hit] : 0,
		.size = s->pick->size,
		.access = s->pick->access,
		.other_write = !(s->pick->access & LKR_WRITE),
		.sample_depth = (uint8_t)s->held_depth,
		.other_depth = hit >= 0 ? (uint8_t)s->hit_depth[hit] : 0,
	};
	memcpy(r->sample_stack, s->held_stack, s->held_depth * sizeof(r->sample_stack[0]));
	if (hit >= 0)
		memcpy(r->other_stack, s->hit_stack[hit],
		       s->hit_depth[hit] * sizeof(r->other_stack[0]));
	/* counted once whole: a process killed meanwhile leaves no half record counted */
	__atomic_store_n(&h->races_used, used + 1, __ATOMIC_RELEASE);
}

/* Fold the window's accesses by their instruction into the records. */
static void book_window(struct sampler *s, uint64_t before, uint64_t after, bool compared)
{
	unsigned int n = __atomic_load_n(&s->nhits, __ATOMIC_RELAXED),
		     kept = n < HIT_MAX ? n : HIT_MAX;

	for (unsigned int i = 0; i < kept; i++) {
		uint64_t hits = 1;
		bool first = true;

		for (unsigned int j = 0; j < i && first; j++)
			first = s->hit_ip[j] != s->hit_ip[i];
		if (!first)
			continue;
		for (unsigned int j = i + 1; j < kept; j++)
			hits += s->hit_ip[j] == s->hit_ip[i];
		if (i == 0)
			hits += n - kept; /* those not kept, most likely the same loop */
		book(s, (int)i, hits, before, after);
	}
	if (!n && compared && before != after)
		book(s, -1, 0, before, after);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/* The held thread's address is watched in every thread for the window. */
static void run_window(struct sampler *s)
{
	const struct lkr_insn *in = s->pick;
	struct lk_watch *w = (in->access & LKR_WRITE) ? s->rw : s->wr;
	uint64_t before = 0, after = 0, records = s->h->races_used;
	bool compared = read_value(s->addr, in->size, &before);

	memset(s->hit_ip, 0, sizeof(s->hit_ip)); /* no callback reads them before the enable */
	__atomic_store_n(&s->nhits, 0, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->h->samples, 1, __ATOMIC_RELAXED);
	if (lk_watch_move(w, (const void *)(uintptr_t)s->addr, in->size) == 0 &&
	    lk_watch_enable(w) == 0) {
		sleep_ns(s->h->window_ns);
		lk_watch_disable(w);
	} else {
		compared = false;
	}
	set_phase(s, CLOSING);
	while (__atomic_load_n(&s->inflight, __ATOMIC_SEQ_CST))
		sched_yield(); /* a callback that saw HELD is storing its access */
	compared = read_value(s->addr, in->size, &after) && compared;
	book_window(s, before, after, compared);
	set_phase(s, IDLE);
	/* released: the thread may have been held inside dlopen() with the loader's lock */
	list_record_objects(s, records);
}

/*
 * Whether the command that attached asked to stop or went away: looked at every POLL_NS, a poll()
 * on its connection.
 */
static bool detached(struct sampler *s)
{
	struct pollfd p = { .fd = s->conn_fd, .events = POLLIN };
	uint64_t now;

	if (s->conn_fd < 0 || s->detached)
		return s->detached;
	now = monotonic_ns();
	if (now < s->next_poll_ns)
		return false;
	s->next_poll_ns = now + POLL_NS;
	s->detached = poll(&p, 1, 0) != 0;
	return s->detached;
}

static bool stopping(struct sampler *s)
{
	return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) ||
	       (s->h->duration_ns && monotonic_ns() - s->start_ns >= s->h->duration_ns) ||
	       detached(s);
}

/* Arm one instruction until a thread reaches it or the period ends. */
static void one_pick(struct sampler *s, const struct lkr_insn *in, uint64_t deadline)
{
	uint64_t ip = s->objects[in->object].bias + in->vaddr, now;
	int expected = ARMED, phase;

	if (lk_watch_move(s->exec, (const void *)(uintptr_t)ip, 1) != 0)
		return;
	s->pick = in;
	s->held_depth = 0;
	__atomic_store_n(&s->pick_ip, ip, __ATOMIC_RELEASE);
	set_phase(s, ARMED);
	s->h->picks++;
	if (lk_watch_enable(s->exec) != 0) {
		set_phase(s, IDLE);
		return;
	}
	while (phase_of(s) == ARMED && !stopping(s) && (now = monotonic_ns()) < deadline)
		futex_wait(&s->phase, ARMED, deadline - now);
	if (!__atomic_compare_exchange_n(&s->phase, &expected, IDLE, false, __ATOMIC_SEQ_CST,
					 __ATOMIC_SEQ_CST)) {
		while ((phase = phase_of(s)) == CLAIMED)
			futex_wait(&s->phase, CLAIMED, 0);
	}
	lk_watch_disable(s->exec);
	if (phase_of(s) == HELD)
		run_window(s);
}

/* Arm the plan's instructions in turn until the end of the program, of the duration, or of --pid. */
static void sample(struct sampler *s)
{
	uint64_t next = monotonic_ns(), now;

	for (uint32_t i = 0; !stopping(s); i = (i + 1) % s->h->ninsns) {
		if (i == 0)
			shuffle(s);
		if (!s->objects[s->insns[s->order[i]].object].loaded)
			continue; /* a library the program had not loaded when sampling started */
		next += s->h->period_ns;
		one_pick(s, &s->insns[s->order[i]], next);
		now = monotonic_ns();
		if (now > next)
			next = now; /* a late pick starts the next period: no catching up in a burst */
		while (!stopping(s) && (now = monotonic_ns()) < next)
			futex_wait(&s->stop, 0, next - now);
	}
}

static void disarm(struct sampler *s)
{
	lk_watch_remove(s->exec);
	lk_watch_remove(s->rw);
	lk_watch_remove(s->wr);
	s->exec = s->rw = s->wr = NULL;
	__atomic_fetch_or(&s->h->flags, LKR_F_FINISHED, __ATOMIC_RELEASE);
}

static void *sampler_main(void *arg)
{
	struct sampler *s = arg;

	sample(s);
	disarm(s);
	return NULL;
}

/* ---- start and end ---- */

static void fail(struct sampler *s, const char *what, int err)
{
	snprintf(s->h->error, sizeof(s->h->error), "%s: %s", what,
		 err == -ENOMEM ? "out of memory" : lk_last_error());
	__atomic_fetch_or(&s->h->flags, LKR_F_FINISHED, __ATOMIC_RELEASE);
}

/* Each object of the plan that is loaded: its bias. The first loaded is the program. */
static int find_objects(struct dl_phdr_info *info, size_t size, void *data)
{
	struct sampler *s = data;
	struct stat st;
	bool program = !s->objects[0].loaded;

	(void)size;
	if (program) {
		s->objects[0].bias = info->dlpi_addr;
		s->objects[0].loaded = 1;
		return 0;
	}
	if (!info->dlpi_name || !*info->dlpi_name || stat(info->dlpi_name, &st) != 0)
		return 0;
	for (uint32_t i = 1; i < s->h->nobjects; i++) {
		if (s->objects[i].dev == st.st_dev && s->objects[i].ino == st.st_ino) {
			s->objects[i].bias = info->dlpi_addr;
			s->objects[i].loaded = 1;
		}
	}
	return 0;
}

/* The plan in the file open at fd, if it is one and for this program; NULL otherwise. */
static struct lkr_header *map_plan_fd(int fd, size_t *size)
{
	struct stat st, exe;
	struct lkr_header *h;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size < LKR_HEADER_SIZE)
		return NULL;
	h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return NULL;
	*size = (size_t)st.st_size;
	if (h->magic == LKR_MAGIC && h->version == LKR_VERSION && h->ninsns && h->nobjects &&
	    h->nobjects <= LKR_OBJECTS_MAX && h->stack_depth <= LKR_STACK_MAX &&
	    lkr_file_size(h->nobjects, h->ninsns, h->max_races) <= (uint64_t)st.st_size &&
	    stat("/proc/self/exe", &exe) == 0 && exe.st_dev == lkr_objects(h)[0].dev &&
	    exe.st_ino == lkr_objects(h)[0].ino)
		return h;
	munmap(h, *size); /* another program the command runs: not sampled */
	return NULL;
}

/* The plan in the file named by $LOWKEY_RACES_FILE, if it is for this program. */
static struct lkr_header *map_plan(size_t *size)
{
	const char *path = getenv("LOWKEY_RACES_FILE");
	struct lkr_header *h;
	int fd;

	if (!path || !*path)
		return NULL;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	h = map_plan_fd(fd, size);
	close(fd);
	return h;
}

/* The first instruction of the plan in an object that is loaded, or NULL. */
static const struct lkr_insn *first_loaded(const struct sampler *s)
{
	for (uint32_t i = 0; i < s->h->ninsns; i++)
		if (s->objects[s->insns[i].object].loaded)
			return &s->insns[i];
	return NULL;
}

static int arm_watchpoints(struct sampler *s)
{
	const struct lkr_insn *in = first_loaded(s);
	const void *first = (const void *)(uintptr_t)(s->objects[in->object].bias + in->vaddr);
	unsigned int off = LK_WATCH_PROCESS | LK_WATCH_DISABLED;
	int err;

	err = lk_watch_add(&s->exec, first, 1, LK_WATCH_EXEC | off, on_exec, s);
	if (err) {
		fail(s, "cannot arm the execute watchpoint", err);
		return err;
	}
	err = lk_watch_add(&s->rw, &parking, sizeof(parking), LK_WATCH_READWRITE | off, on_data, s);
	if (!err)
		err = lk_watch_add(&s->wr, &parking, sizeof(parking), LK_WATCH_WRITE | off, on_data,
				   s);
	if (err) {
		fail(s, "cannot arm the data watchpoints", err);
		lk_watch_remove(s->exec);
		if (s->rw)
			lk_watch_remove(s->rw);
	}
	return err;
}

static int start_thread(struct sampler *s, void *(*fn)(void *))
{
	sigset_t all, old;
	int err;

	/* No signal of the program's may land on the sampler, which runs none of its code. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->thread, NULL, fn, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

/*
 * Claim the plan mapped at h and make ready to sample it: its objects' biases, the order, the
 * watchpoints (disabled). 0, or -1 with the reason in the plan's error (the plan is then
 * finished).
 */
static int prepare(struct sampler *s, struct lkr_header *h, size_t size)
{
	uint32_t expected = 0;

	if (!__atomic_compare_exchange_n(&h->claimed, &expected, 1, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		munmap(h, size); /* a process before this one samples (this is an exec()) */
		return -1;
	}
	s->h = h;
	s->map_size = size;
	h->pid = getpid();
	s->objects = lkr_objects(h);
	dl_iterate_phdr(find_objects, s);
	h->nmodules = 0; /* listed as records are made: list_record_objects() */
	s->insns = lkr_insns(h);
	s->races = lkr_races(h);
	s->rng = h->seed ? h->seed : 1;
	s->order = malloc(h->ninsns * sizeof(*s->order));
	if (!s->order) {
		fail(s, "cannot start", -ENOMEM);
		return -1;
	}
	for (uint32_t i = 0; i < h->ninsns; i++)
		s->order[i] = i;
	if (!first_loaded(s)) {
		snprintf(h->error, sizeof(h->error),
			 "no object of the plan is loaded (--lib names a library the program does "
			 "not load at its start)");
		__atomic_fetch_or(&h->flags, LKR_F_FINISHED, __ATOMIC_RELEASE);
		return -1;
	}
	s->stack_depth = h->stack_depth; /* map_plan_fd() checked it */
	if (s->stack_depth)
		prewarm_unwinder();
	if (arm_watchpoints(s))
		return -1;
	s->start_ns = monotonic_ns();
	__atomic_fetch_or(&h->flags, LKR_F_STARTED, __ATOMIC_RELEASE);
	return 0;
}

/* After a plan: nothing of it kept, ready for the next --pid. */
static void release(struct sampler *s)
{
	free(s->order);
	s->order = NULL;
	if (s->h)
		munmap(s->h, s->map_size);
	s->h = NULL;
	s->objects = NULL;
	s->insns = NULL;
	s->races = NULL;
	s->pick = NULL;
	__atomic_store_n(&s->pick_ip, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&s->phase, IDLE, __ATOMIC_SEQ_CST);
}

/* ---- attaching: `lowkey races --pid` (docs/design.md, "Races") ---- */

/* The plan's descriptor sent with the command's start message; -1 if none came. */
static int receive_plan(int conn)
{
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} control;
	char byte;
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = sizeof(control.buf),
	};
	int fd = -1;

	if (recvmsg(conn, &msg, MSG_CMSG_CLOEXEC) != 1 || byte != LKR_ATTACH_START)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)), fds[4];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || n > 4)
			continue;
		memcpy(fds, CMSG_DATA(c), (size_t)n * sizeof(int));
		for (int i = 0; i < n; i++) {
			if (fd < 0)
				fd = fds[i];
			else
				close(fds[i]); /* one is expected */
		}
	}
	if (msg.msg_flags & MSG_CTRUNC) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void reply(int conn, char byte)
{
	(void)send(conn, &byte, 1, MSG_NOSIGNAL);
}

/* Whether the peer is this process's user, or root. */
static bool peer_allowed(int conn)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
	       (cred.uid == geteuid() || cred.uid == 0);
}

/* One command attached: its plan sampled until it leaves, the duration or the process ends. */
static void serve(struct sampler *s, int conn)
{
	size_t size = 0;
	struct lkr_header *h = NULL;
	int fd;

	if (!peer_allowed(conn))
		return;
	fd = receive_plan(conn);
	if (fd >= 0) {
		h = map_plan_fd(fd, &size);
		close(fd);
	}
	if (!h) {
		reply(conn, LKR_ATTACH_REFUSED); /* not a plan for this program */
		return;
	}
	s->conn_fd = conn;
	s->detached = false;
	s->next_poll_ns = 0;
	if (prepare(s, h, size) == 0) {
		reply(conn, LKR_ATTACH_STARTED);
		sample(s);
		disarm(s);
	}
	if (s->h) /* else another process claimed it: the command says it was not sampled */
		reply(conn, LKR_ATTACH_DONE);
	else
		reply(conn, LKR_ATTACH_REFUSED);
	s->conn_fd = -1;
	release(s);
}

static void *attach_main(void *arg)
{
	struct sampler *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		int conn = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (conn < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				continue;
			break; /* shut down by the destructor */
		}
		serve(s, conn);
		close(conn);
	}
	return NULL;
}

/*
 * A fork()ed child has no waiting thread: its copy of the socket would keep the name bound after
 * the parent exits, and a command connecting to it would wait for an answer that never comes.
 */
static void close_in_child(void)
{
	if (sampler.listen_fd >= 0) {
		close(sampler.listen_fd);
		sampler.listen_fd = -1;
	}
}

/* LOWKEY_RACES_ATTACH=1: listen on the abstract socket named after this process. */
static void wait_for_attach(struct sampler *s)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	const char *v = getenv("LOWKEY_RACES_ATTACH");
	socklen_t len;
	int fd, n;

	if (!v || strcmp(v, "1") != 0)
		return;
	n = snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, LKR_ATTACH_NAME, (int)getpid());
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (bind(fd, (struct sockaddr *)&addr, len) != 0 || listen(fd, 4) != 0) {
		close(fd); /* another process holds the name: nothing waits here */
		return;
	}
	s->listen_fd = fd;
	s->owner = getpid();
	pthread_atfork(NULL, NULL, close_in_child);
	if (start_thread(s, attach_main) != 0) {
		close(fd);
		s->listen_fd = -1;
		return;
	}
	s->running = true;
}

/* ---- start and end of the program ---- */

__attribute__((constructor)) static void races_start(void)
{
	struct sampler *s = &sampler;
	size_t size = 0;
	struct lkr_header *h = map_plan(&size);

	if (!h) {
		wait_for_attach(s);
		return;
	}
	if (prepare(s, h, size) != 0)
		return;
	s->owner = getpid();
	if (start_thread(s, sampler_main)) {
		snprintf(s->h->error, sizeof(s->h->error), "cannot start the sampler thread");
		disarm(s);
		return;
	}
	s->running = true;
}

/*
 * exit(): release a held thread, remove the watchpoints, and say the records are complete; stop
 * waiting for --pid.
 */
__attribute__((destructor)) static void races_end(void)
{
	struct sampler *s = &sampler;

	if (!s->running || s->owner != getpid())
		return; /* not sampling, or a fork()ed child, which has no sampler thread */
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	futex_wake(&s->stop);
	futex_wake(&s->phase);
	if (s->listen_fd >= 0)
		shutdown(s->listen_fd, SHUT_RDWR); /* accept() returns */
	pthread_join(s->thread, NULL);
}
