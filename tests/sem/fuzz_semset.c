// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for a shared semaphore set whose bytes a peer rewrites between operations.
 *
 * An input is a little program run against a fresh shared set: operations (lk_semop, lk_semctl,
 * lk_semset_stats) mixed with what a hostile peer with write access could do to the region --
 * write any bytes anywhere, point any list link at a plausible place (a head, a waiter, just
 * beside one), plant a well-formed waiter that is alive, dead, cancelled or ownerless on any list,
 * leave a lock held by a thread that died. Besides what AddressSanitizer and UBSan check (nothing read or
 * written outside the region, no undefined behaviour), every call must return a value it is
 * documented to return; and as long as the region has not been touched, every call must give
 * what the same call gives on a private set -- the checks must not refuse a healthy set.
 *
 * Waits are never left to run: every lk_semop has a zero timeout, and a lock word left held after
 * a mutation names a thread known to be dead (a live holder -- this thread -- would make
 * lk_semctl, which has no timeout, wait as long as it holds on, which is for ever).
 *
 *	cmake --build build --target fuzz_semset && build/tests/sem/fuzz-semset tests/sem/corpus
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/sem.h>

#include "sem/sem_internal.h"

#define NSEMS 3
#define NWAITERS 4
#define MAX_COMMANDS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int condition)
{
	if (!condition)
		__builtin_trap();
}

struct input {
	const uint8_t *p, *end;
};

static unsigned int byte(struct input *in)
{
	return in->p < in->end ? *in->p++ : 0;
}

static unsigned int word16(struct input *in)
{
	unsigned int lo = byte(in);

	return lo | byte(in) << 8;
}

struct fuzz {
	struct lk_semset *s;	 /* the shared set under attack */
	struct lk_semset *model; /* a private set given the same calls */
	char *base;
	bool touched;	   /* the region was written by the "peer": the model no longer applies */
	uint32_t dead_tid; /* a thread that has ended */
};

/* ---- what a peer does ---- */

static struct node *head_at(struct fuzz *f, unsigned int i)
{
	struct lk_semset *s = f->s;

	i %= 2 + 2 * NSEMS;
	if (i < 2)
		return i ? &s->hdr->pending_const : &s->hdr->pending_alter;
	i -= 2;
	return i % 2 ? &s->sems[i / 2].pending_const : &s->sems[i / 2].pending_alter;
}

static lk__ref ref(struct fuzz *f, const void *p)
{
	return (lk__ref)((const char *)p - f->base);
}

/* A value for a link: mostly where something is, or close beside it. */
static lk__ref plausible_ref(struct fuzz *f, struct input *in)
{
	unsigned int kind = byte(in), n = byte(in);

	switch (kind % 5) {
	case 0:
		return ref(f, head_at(f, n));
	case 1:
		return ref(f, &f->s->slots[n % NWAITERS]);
	case 2:
		return ref(f, &f->s->slots[n % NWAITERS]) + 8 * (byte(in) % 16);
	case 3:
		return ref(f, head_at(f, n)) - 8 * (byte(in) % 4);
	default:
		return word16(in) | (lk__ref)word16(in) << 16;
	}
}

static void write_bytes(struct fuzz *f, struct input *in)
{
	size_t at = word16(in) % f->s->size, len = 1 + byte(in) % 8;

	for (size_t i = 0; i < len && at + i < f->s->size; i++)
		f->base[at + i] = (char)byte(in);
}

static void write_link(struct fuzz *f, struct input *in)
{
	unsigned int which = byte(in);
	struct node *n = which & 1 ? head_at(f, which >> 2) :
				     &f->s->slots[(which >> 2) % NWAITERS].node;
	lk__ref value = plausible_ref(f, in);

	if (which & 2)
		n->next = value;
	else
		n->prev = value;
}

/* A waiter as a sleeper would leave it, linked at the end of a list. */
static void plant_waiter(struct fuzz *f, struct input *in)
{
	struct waiter *w = &f->s->slots[byte(in) % NWAITERS];
	struct node *head = head_at(f, byte(in)), *last;
	unsigned int how = byte(in);

	w->nops = (uint16_t)(1 + how % 3);
	for (unsigned int i = 0; i < w->nops; i++)
		w->ops[i] = (struct lk_sembuf){ (unsigned short)(byte(in) % NSEMS),
						(short)((int)(byte(in) % 5) - 2), 0 };
	w->alter = 1;
	w->status = how & 32 ? CANCELLED : PENDING;
	w->alive.word = how & 8 ? FUTEX_OWNER_DIED : how & 16 ? 0 : (uint32_t)gettid();
	if (head->prev >= f->s->size || head->prev % 8)
		return;
	last = (struct node *)(f->base + head->prev);
	w->node.next = ref(f, head);
	w->node.prev = head->prev;
	last->next = ref(f, w);
	head->prev = ref(f, w);
}

static struct semlock *lock_at(struct fuzz *f, unsigned int i)
{
	i %= NSEMS + 1;
	return i == NSEMS ? &f->s->hdr->lock : &f->s->sems[i].lock;
}

static void hold_lock(struct fuzz *f, struct input *in)
{
	lock_at(f, byte(in))->word = f->dead_tid | (byte(in) & 1 ? LOCK_WAITERS : 0);
}

static void no_live_holders(struct fuzz *f)
{
	for (unsigned int i = 0; i <= NSEMS; i++) {
		struct semlock *l = lock_at(f, i);

		if (l->word && (l->word & ~LOCK_WAITERS) != f->dead_tid)
			l->word = 0;
	}
}

/* ---- the calls ---- */

static bool semop_result_ok(int r)
{
	return r == 0 || r == -EINVAL || r == -EFBIG || r == -ERANGE || r == -EAGAIN ||
	       r == -ETIMEDOUT || r == -EIDRM || r == -ENOSPC || r == -ENOTRECOVERABLE;
}

static void do_semop(struct fuzz *f, struct input *in)
{
	struct lk_sembuf ops[3];
	struct timespec none = { 0, 0 };
	size_t n = 1 + byte(in) % 3;
	int r;

	for (size_t i = 0; i < n; i++) {
		unsigned int b = byte(in);

		ops[i] = (struct lk_sembuf){ (unsigned short)(b % (NSEMS + 1)),
					     (short)((int)(byte(in) % 7) - 3),
					     (short)(b & 0x80 ? LK_IPC_NOWAIT : 0) };
	}
	r = lk_semop(f->s, ops, n, &none);
	must(semop_result_ok(r));
	if (!f->touched)
		must(lk_semop(f->model, ops, n, &none) == r);
}

static bool semctl_result_ok(int cmd, int r)
{
	if (r >= 0)
		return cmd != LK_GETVAL || r <= LK_SEMVMX;
	return r == -EINVAL || r == -ERANGE || r == -EIDRM || r == -ENOTRECOVERABLE;
}

static void do_semctl(struct fuzz *f, struct input *in)
{
	static const int cmds[] = { LK_GETVAL,	LK_SETVAL,  LK_GETALL,	LK_SETALL,
				    LK_GETNCNT, LK_GETZCNT, LK_IPC_RMID };
	unsigned int b = byte(in), semnum = byte(in) % (NSEMS + 1);
	int cmd = cmds[b % 7], value = (int)(byte(in) % 6) - 1, r, m = 0;
	unsigned short values[NSEMS], model_values[NSEMS];

	if (cmd == LK_IPC_RMID && b % 4)
		cmd = LK_GETVAL; /* removal ends the program's interest: keep it rare */
	for (int i = 0; i < NSEMS; i++)
		values[i] = model_values[i] = (unsigned short)(byte(in) % 4);
	if (cmd == LK_GETALL || cmd == LK_SETALL) {
		r = lk_semctl(f->s, semnum, cmd, values);
		if (!f->touched)
			m = lk_semctl(f->model, semnum, cmd, model_values);
	} else {
		r = lk_semctl(f->s, semnum, cmd, value);
		if (!f->touched)
			m = lk_semctl(f->model, semnum, cmd, value);
	}
	must(semctl_result_ok(cmd, r));
	if (cmd == LK_GETALL && r == 0)
		for (int i = 0; i < NSEMS; i++)
			must(values[i] <= LK_SEMVMX);
	if (!f->touched) {
		must(m == r);
		if (cmd == LK_GETALL)
			must(memcmp(values, model_values, sizeof(values)) == 0);
	}
}

static void do_stats(struct fuzz *f)
{
	struct lk_semset_stats st;

	must(lk_semset_stats(f->s, &st) == 0);
	must(st.nsems == NSEMS && st.waiter_slots == NWAITERS);
}

/* ---- one input ---- */

static uint32_t dead_thread(void)
{
	static uint32_t tid;
	pid_t pid;

	if (!tid) {
		pid = fork();
		if (pid == 0)
			_exit(0);
		must(pid > 0 && waitpid(pid, NULL, 0) == pid);
		tid = (uint32_t)pid;
	}
	return tid;
}

static void open_sets(struct fuzz *f)
{
	char name[64];
	int r;

	snprintf(name, sizeof(name), "/lowkey-fuzz-sem-%d", (int)getpid());
	r = lk_semset_create(&f->s, name, NSEMS,
			     0600 | LK_SEMSET_EXCL | LK_SEMSET_WAITERS(NWAITERS));
	if (r == -EEXIST) {
		shm_unlink(name); /* left by a run that crashed */
		r = lk_semset_create(&f->s, name, NSEMS,
				     0600 | LK_SEMSET_EXCL | LK_SEMSET_WAITERS(NWAITERS));
	}
	must(r == 0);
	shm_unlink(name); /* the mapping is all the program needs */
	must(lk_semset_create(&f->model, NULL, NSEMS, 0) == 0);
	f->base = (char *)f->s->hdr;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, data + size };
	struct fuzz f = { .dead_tid = dead_thread() };

	open_sets(&f);
	for (int n = 0; n < MAX_COMMANDS && in.p < in.end; n++) {
		unsigned int cmd = byte(&in) % 9;

		if (cmd >= 4) {
			f.touched = true;
			switch (cmd) {
			case 4:
				write_bytes(&f, &in);
				break;
			case 5:
				write_link(&f, &in);
				break;
			case 6:
				hold_lock(&f, &in);
				break;
			default:
				plant_waiter(&f, &in);
				break;
			}
			no_live_holders(&f);
			continue;
		}
		switch (cmd) {
		case 0:
		case 1:
			do_semop(&f, &in);
			break;
		case 2:
			do_semctl(&f, &in);
			break;
		default:
			do_stats(&f);
			break;
		}
	}
	must(lk_semset_close(f.s) == 0);
	must(lk_semset_close(f.model) == 0);
	return 0;
}
