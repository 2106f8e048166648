// SPDX-License-Identifier: MIT
/*
 * lk_semset against the kernel's System V semaphores: the same random sequences of calls on
 * both, the same results, call by call.
 *
 * 1. Calls that never wait (every operation LK_IPC_NOWAIT), mixed with SETVAL, GETVAL, GETALL,
 *    GETNCNT, GETZCNT, out-of-range semaphores and values: every return code and every value.
 * 2. Sleepers: threads whose calls wait, on both sides, while the main thread changes values.
 *    After each step both sides are let settle -- every sleeper either returned or counted by
 *    GETNCNT/GETZCNT, which is a state, not a time -- and then compared: the values, the counts
 *    per semaphore, and which sleepers returned with what. That checks the order sleepers are
 *    served in, complex ones and simple ones, wait-for-zero included. At the end both sets are
 *    removed, and the sleepers left must all get EIDRM.
 *
 * Each sequence prints its seed when it fails; LOWKEY_SEM_SEED=N runs that one alone, and
 * LOWKEY_SEM_SEQUENCES=N runs N of each kind.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/sem.h>

_Static_assert(sizeof(struct lk_sembuf) == sizeof(struct sembuf),
	       "lk_sembuf is laid out as sembuf");
_Static_assert(LK_IPC_NOWAIT == IPC_NOWAIT && LK_GETVAL == GETVAL && LK_SETVAL == SETVAL &&
		       LK_GETALL == GETALL && LK_SETALL == SETALL && LK_GETNCNT == GETNCNT &&
		       LK_GETZCNT == GETZCNT && LK_IPC_RMID == IPC_RMID,
	       "the same command values");

union semun {
	int val;
	unsigned short *array;
};

struct side {
	bool kernel;
	int semid;
	struct lk_semset *set;
};

static uint64_t rng;

static unsigned int next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned int)(rng >> 11);
}

static unsigned int pick(unsigned int n)
{
	return next_rand() % n;
}

static void open_sides(struct side sides[2], unsigned int nsems)
{
	sides[0] = (struct side){ .kernel = true,
				  .semid = semget(IPC_PRIVATE, (int)nsems, IPC_CREAT | 0600) };
	if (sides[0].semid < 0)
		skip(); /* no System V IPC here (a container without it): nothing to compare with */
	sides[1] = (struct side){ .kernel = false };
	assert_int_equal(lk_semset_create(&sides[1].set, NULL, nsems, 0), 0);
}

static void close_sides(struct side sides[2])
{
	semctl(sides[0].semid, 0, IPC_RMID);
	lk_semset_close(sides[1].set);
}

static int do_semop(struct side *s, struct lk_sembuf *ops, size_t nops)
{
	if (s->kernel)
		return semop(s->semid, (struct sembuf *)ops, nops) == 0 ? 0 : -errno;
	return lk_semop(s->set, ops, nops, NULL);
}

static int do_semctl(struct side *s, unsigned int semnum, int cmd, int value, unsigned short *array)
{
	if (s->kernel) {
		union semun arg;
		int r;

		if (cmd == SETVAL)
			arg.val = value;
		else
			arg.array = array;
		r = semctl(s->semid, (int)semnum, cmd, arg);
		return r >= 0 ? r : -errno;
	}
	if (cmd == SETVAL)
		return lk_semctl(s->set, semnum, cmd, value);
	if (cmd == GETALL || cmd == SETALL)
		return lk_semctl(s->set, semnum, cmd, array);
	return lk_semctl(s->set, semnum, cmd);
}

static void same_values(struct side sides[2], unsigned int nsems, unsigned long seed, int step)
{
	unsigned short k[16], l[16];

	assert_int_equal(do_semctl(&sides[0], 0, GETALL, 0, k), 0);
	assert_int_equal(do_semctl(&sides[1], 0, GETALL, 0, l), 0);
	for (unsigned int i = 0; i < nsems; i++)
		if (k[i] != l[i])
			fail_msg("seed %lu step %d: semaphore %u is %u in the kernel, %u here",
				 seed, step, i, k[i], l[i]);
}

static void random_ops(struct lk_sembuf *ops, size_t nops, unsigned int nsems, bool nowait,
		       int range)
{
	for (size_t i = 0; i < nops; i++) {
		unsigned int r = pick(100);

		ops[i].sem_num =
			(unsigned short)(r < 3 ? nsems : pick(nsems)); /* past the set: EFBIG */
		ops[i].sem_op = (short)((int)pick(2 * (unsigned int)range + 1) - range);
		if (r >= 3 && r < 5)
			ops[i].sem_op = 32767; /* ERANGE unless the value is 0 */
		ops[i].sem_flg = nowait ? IPC_NOWAIT : (pick(10) == 0 ? IPC_NOWAIT : 0);
	}
}

/* ---- 1. calls that never wait ---- */

static void nonblocking_sequence(unsigned long seed)
{
	unsigned int nsems = 1 + (unsigned int)(seed % 6);
	unsigned short init[16];
	struct side sides[2];

	rng = seed * 0x9E3779B97F4A7C15ull + 1;
	open_sides(sides, nsems);
	for (unsigned int i = 0; i < nsems; i++)
		init[i] = (unsigned short)pick(4);
	for (int s = 0; s < 2; s++)
		assert_int_equal(do_semctl(&sides[s], 0, SETALL, 0, init), 0);

	for (int step = 0; step < 3000; step++) {
		unsigned int action = pick(10), num = pick(nsems + 1);
		struct lk_sembuf ops[4];
		size_t nops = pick(10) < 6 ? 1 : 2 + pick(3);
		int value = (int)pick(6), r[2];

		if (pick(30) == 0)
			value = pick(2) ? -1 : 40000;
		random_ops(ops, nops, nsems, true, 3);
		for (int s = 0; s < 2; s++) {
			switch (action) {
			case 0:
			case 1:
			case 2:
			case 3:
			case 4:
			case 5:
				r[s] = do_semop(&sides[s], ops, nops);
				break;
			case 6:
				r[s] = do_semctl(&sides[s], num, SETVAL, value, NULL);
				break;
			case 7:
				r[s] = do_semctl(&sides[s], num, GETVAL, 0, NULL);
				break;
			case 8:
				r[s] = do_semctl(&sides[s], num, GETNCNT, 0, NULL);
				break;
			default:
				r[s] = do_semctl(&sides[s], num, GETZCNT, 0, NULL);
				break;
			}
		}
		if (r[0] != r[1])
			fail_msg("seed %lu step %d: action %u gives %d in the kernel, %d here",
				 seed, step, action, r[0], r[1]);
		same_values(sides, nsems, seed, step);
	}
	close_sides(sides);
}

static unsigned long seed_from_env(void)
{
	const char *v = getenv("LOWKEY_SEM_SEED");

	return v ? strtoul(v, NULL, 10) : 0;
}

/* How many sequences: LOWKEY_SEM_SEQUENCES, or the default. */
static unsigned long sequences(unsigned long fallback)
{
	const char *v = getenv("LOWKEY_SEM_SEQUENCES");

	return v ? strtoul(v, NULL, 10) : fallback;
}

static void calls_that_never_wait(void **state)
{
	unsigned long only = seed_from_env();

	(void)state;
	for (unsigned long seed = 1, n = only ? 1 : sequences(100); seed <= n; seed++)
		nonblocking_sequence(only ? only : seed);
}

/* ---- 2. sleepers ---- */

#define MAX_SLEEPERS 24

struct sleeper {
	struct side *side;
	struct lk_sembuf ops[3];
	size_t nops;
	int result;
	int done;
	pid_t tid;
	pthread_t thread;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *w = arg;

	__atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	w->result = do_semop(w->side, w->ops, w->nops);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE); /* publishes result */
	return NULL;
}

static int queued(struct side *s, unsigned int nsems)
{
	int n = 0;

	for (unsigned int i = 0; i < nsems; i++)
		n += do_semctl(s, i, GETNCNT, 0, NULL) + do_semctl(s, i, GETZCNT, 0, NULL);
	return n;
}

static int count_done(struct sleeper *w, int started)
{
	int done = 0;

	for (int i = 0; i < started; i++)
		done += __atomic_load_n(&w[i].done, __ATOMIC_SEQ_CST);
	return done;
}

/* Whether thread tid of this process is asleep (state S in /proc). */
static bool asleep(pid_t tid)
{
	char path[64], buf[512], *p;
	bool s = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		s = p[2] == 'S';
	fclose(f);
	return s;
}

/*
 * Every sleeper of a side has either returned or is counted as waiting by GETNCNT/GETZCNT. The
 * counts are read one semaphore at a time, so they are only trusted when nothing moved while
 * they were read: every sleeper that has not returned is asleep in the kernel, and none returned
 * meanwhile.
 */
static void settle(struct side *s, struct sleeper *w, int started, unsigned int nsems,
		   unsigned long seed, int step)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int done = count_done(w, started), waiting = queued(s, nsems);
		bool still = true;

		for (int i = 0; i < started && still; i++) {
			pid_t tid = __atomic_load_n(&w[i].tid, __ATOMIC_SEQ_CST);

			if (!__atomic_load_n(&w[i].done, __ATOMIC_SEQ_CST) &&
			    (!tid || !asleep(tid)))
				still = false;
		}
		if (still && count_done(w, started) == done && done + waiting == started)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		/* a liveness bound, not a timing: a sleeper that neither returns nor waits is a bug */
		if (now.tv_sec - start.tv_sec > 20)
			fail_msg("seed %lu step %d: %s sleepers never settled", seed, step,
				 s->kernel ? "kernel" : "lowkey");
		sched_yield();
	}
}

static void same_sleepers(struct side sides[2], struct sleeper w[2][MAX_SLEEPERS], int started,
			  unsigned int nsems, unsigned long seed, int step)
{
	for (int s = 0; s < 2; s++)
		settle(&sides[s], w[s], started, nsems, seed, step);
	same_values(sides, nsems, seed, step);
	for (unsigned int i = 0; i < nsems; i++) {
		for (int cmd = GETNCNT; cmd <= GETZCNT; cmd++) {
			int k = do_semctl(&sides[0], i, cmd, 0, NULL),
			    l = do_semctl(&sides[1], i, cmd, 0, NULL);

			if (k != l)
				fail_msg("seed %lu step %d: %s of %u is %d in the kernel, %d here",
					 seed, step, cmd == GETNCNT ? "GETNCNT" : "GETZCNT", i, k,
					 l);
		}
	}
	for (int i = 0; i < started; i++) {
		int k = __atomic_load_n(&w[0][i].done, __ATOMIC_ACQUIRE),
		    l = __atomic_load_n(&w[1][i].done, __ATOMIC_ACQUIRE);

		if (k != l)
			fail_msg("seed %lu step %d: sleeper %d %s in the kernel, %s here", seed,
				 step, i, k ? "returned" : "sleeps", l ? "returned" : "sleeps");
		if (k && w[0][i].result != w[1][i].result)
			fail_msg("seed %lu step %d: sleeper %d got %d in the kernel, %d here", seed,
				 step, i, w[0][i].result, w[1][i].result);
	}
}

static void blocking_sequence(unsigned long seed)
{
	static struct sleeper w[2][MAX_SLEEPERS];
	unsigned int nsems = 1 + (unsigned int)(seed % 4);
	unsigned short init[4];
	struct side sides[2];
	int started = 0;

	rng = seed * 0xD1B54A32D192ED03ull + 7;
	memset(w, 0, sizeof(w));
	open_sides(sides, nsems);
	for (unsigned int i = 0; i < nsems; i++)
		init[i] = (unsigned short)pick(3);
	for (int s = 0; s < 2; s++)
		assert_int_equal(do_semctl(&sides[s], 0, SETALL, 0, init), 0);

	for (int step = 0; step < 60; step++) {
		unsigned int action = pick(10);

		if (action < 5 && started < MAX_SLEEPERS) {
			struct lk_sembuf ops[3];
			size_t nops = pick(3) == 0 ? 1 + pick(3) : 1;

			random_ops(ops, nops, nsems, false, 2);
			for (size_t i = 0; i < nops; i++)
				ops[i].sem_num %=
					(unsigned short)nsems; /* waiting calls: valid ones */
			for (int s = 0; s < 2; s++) {
				struct sleeper *x = &w[s][started];

				x->side = &sides[s];
				memcpy(x->ops, ops, sizeof(ops));
				x->nops = nops;
				assert_int_equal(pthread_create(&x->thread, NULL, sleeper_main, x),
						 0);
			}
			started++;
		} else if (action < 9) {
			struct lk_sembuf ops[3];
			size_t nops = 1 + pick(3);
			int r[2];

			random_ops(ops, nops, nsems, true, 2);
			for (size_t i = 0; i < nops; i++)
				if (pick(3)) /* mostly increments: they wake sleepers */
					ops[i].sem_op = (short)(ops[i].sem_op < 0 ? -ops[i].sem_op :
										    ops[i].sem_op);
			for (int s = 0; s < 2; s++)
				r[s] = do_semop(&sides[s], ops, nops);
			if (r[0] != r[1])
				fail_msg("seed %lu step %d: semop gives %d in the kernel, %d here",
					 seed, step, r[0], r[1]);
		} else {
			unsigned int num = pick(nsems);
			int value = (int)pick(3);

			for (int s = 0; s < 2; s++)
				assert_int_equal(do_semctl(&sides[s], num, SETVAL, value, NULL), 0);
		}
		same_sleepers(sides, w, started, nsems, seed, step);
	}
	/* removal wakes every sleeper left with EIDRM, on both sides */
	assert_int_equal(semctl(sides[0].semid, 0, IPC_RMID), 0);
	assert_int_equal(lk_semctl(sides[1].set, 0, LK_IPC_RMID), 0);
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < started; i++)
			assert_int_equal(pthread_join(w[s][i].thread, NULL), 0);
	for (int i = 0; i < started; i++)
		if (w[0][i].result != w[1][i].result)
			fail_msg("seed %lu: at removal, sleeper %d got %d in the kernel, %d here",
				 seed, i, w[0][i].result, w[1][i].result);
	lk_semset_close(sides[1].set);
}

static void sleepers_served_alike(void **state)
{
	unsigned long only = seed_from_env();

	(void)state;
	for (unsigned long seed = 1, n = only ? 1 : sequences(500); seed <= n; seed++)
		blocking_sequence(only ? only : seed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(calls_that_never_wait),
		cmocka_unit_test(sleepers_served_alike),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
