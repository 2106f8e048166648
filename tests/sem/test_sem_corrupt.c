// SPDX-License-Identifier: MIT
/*
 * A shared set whose bytes a peer rewrote: every call fails with -EINVAL, nothing crashes, nothing
 * is written outside the region. Each case crafts bytes a hostile peer with write access could
 * plant -- refs that are aligned and inside the region but not where a waiter or a list head
 * is, waiters that lie about their operations, values out of range, a free-slot stack that hands
 * out a slot in use -- and runs the calls in a child, so a crash shows as a signal, not as the end
 * of the test program.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/error.h>
#include <lowkey/sem.h>

#include "sem/sem_internal.h"

#define NSEMS 2

static char name[64];

static int op(struct lk_semset *s, unsigned short num, short delta, short flags)
{
	struct lk_sembuf b = { num, delta, flags };
	struct timespec none = { 0, 0 };

	return lk_semop(s, &b, 1, &none);
}

static lk__ref ref_at(struct lk_semset *s, const void *p)
{
	return (lk__ref)((const char *)p - (const char *)s->hdr);
}

/* Make sem's alter list hold one "waiter" at ref (a corrupted list: it loops back at once). */
static void plant_ref(struct lk_semset *s, unsigned int sem, lk__ref ref)
{
	s->sems[sem].pending_alter.next = ref;
	s->sems[sem].pending_alter.prev = ref;
}

/* Link slot k, made to look like a live sleeper's, onto sem's alter list. */
static struct waiter *plant_waiter(struct lk_semset *s, unsigned int sem, unsigned int k,
				   short sem_op)
{
	struct waiter *w = &s->slots[k];
	struct node *head = &s->sems[sem].pending_alter;

	w->ops[0] = (struct lk_sembuf){ (unsigned short)sem, sem_op, 0 };
	w->nops = 1;
	w->alter = 1;
	w->status = PENDING;
	w->alive.word = (uint32_t)gettid();
	w->node.next = w->node.prev = ref_at(s, head);
	head->next = head->prev = ref_at(s, w);
	return w;
}

/* The calls a victim makes after the damage: all -EINVAL, and the name can still be removed. */
static int victim_calls(struct lk_semset *s, unsigned short sem)
{
	if (op(s, sem, 1, 0) != -EINVAL)
		return 20;
	if (!strstr(lk_last_error(), "corrupted"))
		return 21;
	if (lk_semctl(s, sem, LK_GETVAL) != -EINVAL || lk_semctl(s, sem, LK_GETNCNT) != -EINVAL)
		return 22;
	return 0;
}

typedef int (*damage_fn)(struct lk_semset *s);

/* A fresh set, damaged by fn, used in a child: 0, or what went wrong. */
static void survive(damage_fn fn)
{
	static int round;
	struct lk_semset *s;
	char one[80];
	int status;
	pid_t pid;

	/* a name per case: a case that failed cannot spoil the next */
	snprintf(one, sizeof(one), "%s-%d", name, round++);
	assert_int_equal(
		lk_semset_create(&s, one, NSEMS, 0600 | LK_SEMSET_WAITERS(4) | LK_SEMSET_EXCL), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* cmocka catches these to go on with the next test: here they must end the child */
		int fatal[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };

		for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
			signal(fatal[i], SIG_DFL);
		status = fn(s);
		/* a damaged set can always be removed */
		_exit(status ? status : lk_semset_unlink(one) ? 10 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	shm_unlink(one);
	if (WIFSIGNALED(status))
		fail_msg("the calls on the damaged set died of signal %d", WTERMSIG(status));
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fail_msg("the calls on the damaged set went wrong (code %d)", WEXITSTATUS(status));
	assert_int_equal(lk_semset_close(s), 0);
}

/* An aligned ref inside the region, but in the header: the out-of-bounds slot free. */
static int ref_into_header(struct lk_semset *s)
{
	plant_ref(s, 0, 64);
	return victim_calls(s, 0);
}

static int ref_into_middle_of_slot(struct lk_semset *s)
{
	plant_ref(s, 0, ref_at(s, &s->slots[1]) + 64);
	return victim_calls(s, 0);
}

static int ref_into_semaphore(struct lk_semset *s)
{
	plant_ref(s, 0, ref_at(s, &s->sems[1]) + 8);
	return victim_calls(s, 0);
}

/* A list head is a valid ref, but never a waiter. */
static int head_as_waiter(struct lk_semset *s)
{
	plant_ref(s, 0, ref_at(s, &s->sems[1].pending_const));
	return victim_calls(s, 0);
}

/* A ref to a head where a waiter is expected, met while counting. */
static int head_as_waiter_counted(struct lk_semset *s)
{
	plant_ref(s, 1, ref_at(s, &s->hdr->pending_alter));
	return lk_semctl(s, 1, LK_GETNCNT) == -EINVAL ? 0 : 30;
}

static int negative_value(struct lk_semset *s)
{
	s->sems[0].value = -7;
	if (lk_semctl(s, 0, LK_GETVAL) != -EINVAL)
		return 40;
	return op(s, 0, 1, LK_IPC_NOWAIT) == -EINVAL ? 0 : 41;
}

static int value_past_semvmx(struct lk_semset *s)
{
	s->sems[1].value = INT32_MAX;
	if (op(s, 1, 1, LK_IPC_NOWAIT) != -EINVAL)
		return 50;
	return lk_semctl(s, 1, LK_GETALL, (unsigned short[NSEMS]){ 0 }) == -EINVAL ? 0 : 51;
}

/* A well-linked live waiter that claims more operations than a waiter holds. */
static int waiter_with_too_many_ops(struct lk_semset *s)
{
	struct waiter *w = plant_waiter(s, 0, 1, -1);

	w->nops = 60000;
	return victim_calls(s, 0);
}

/* A live waiter whose operation names a semaphore past the set. */
static int waiter_past_the_set(struct lk_semset *s)
{
	struct waiter *w = plant_waiter(s, 0, 2, -1);

	w->ops[0].sem_num = 9999;
	return victim_calls(s, 0);
}

/* The free-slot stack hands out a slot that a live sleeper holds. */
static int free_stack_hands_out_a_used_slot(struct lk_semset *s)
{
	plant_waiter(s, 1, 0, -5);	/* slot 0, the top of the free stack */
	if (op(s, 0, -1, 0) != -EINVAL) /* must sleep: takes a slot */
		return 60;
	return 0;
}

/* A free-slot stack whose top is past the slots. */
static int free_stack_past_the_slots(struct lk_semset *s)
{
	s->hdr->free_slots = 1000;
	return op(s, 0, -1, 0) == -EINVAL ? 0 : 70;
}

struct damage {
	damage_fn fn;
};

static void survive_case(void **state)
{
	survive(((struct damage *)*state)->fn);
}

/* clang-format off */
#define CASE(fn) { #fn, survive_case, NULL, NULL, &(struct damage){ fn } }
/* clang-format on */

/* Undamaged, the planted waiter is served like any sleeper: the checks refuse only real damage. */
static void planted_live_waiter_is_served(void **state)
{
	struct lk_semset *s;
	struct waiter *w;

	(void)state;
	lk_semset_unlink(name);
	assert_int_equal(lk_semset_create(&s, name, NSEMS, 0600 | LK_SEMSET_WAITERS(4)), 0);
	w = plant_waiter(s, 0, 3, -1);
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 1);
	assert_int_equal(op(s, 0, 2, 0), 0);
	assert_int_equal(w->status, 0);
	assert_int_equal(lk_semctl(s, 0, LK_GETVAL), 1);
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 0);
	assert_int_equal(lk_semset_close(s), 0);
	assert_int_equal(lk_semset_unlink(name), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(ref_into_header),		 CASE(ref_into_middle_of_slot),
		CASE(ref_into_semaphore),	 CASE(head_as_waiter),
		CASE(head_as_waiter_counted),	 CASE(negative_value),
		CASE(value_past_semvmx),	 CASE(waiter_with_too_many_ops),
		CASE(waiter_past_the_set),	 CASE(free_stack_hands_out_a_used_slot),
		CASE(free_stack_past_the_slots), cmocka_unit_test(planted_live_waiter_is_served),
	};

	snprintf(name, sizeof(name), "/lowkey-test-semcorrupt-%d", (int)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
