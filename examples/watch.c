// SPDX-License-Identifier: MIT
/*
 * Who writes this variable? A watchpoint on a global, in every thread, with the callback on
 * lowkey's delivery thread (where printf is allowed).
 *
 *   cc watch.c $(pkg-config --cflags --libs lowkey) -o watch && ./watch
 */
#include <pthread.h>
#include <stdio.h>

#include <lowkey/lowkey.h>

static long balance;

static void on_write(const struct lk_watch_hit *hit, void *arg)
{
	(void)arg;
	printf("thread %d wrote balance = %ld (the instruction after the write is at %p)\n",
	       (int)hit->tid, (long)hit->value, hit->ip);
}

static void *worker(void *arg)
{
	balance += (long)arg; /* a thread created after the watchpoint: watched too */
	return NULL;
}

int main(void)
{
	struct lk_watch_stats stats;
	struct lk_watch *w;
	pthread_t t;
	int err;

	err = lk_watch_add(&w, &balance, sizeof(balance),
			   LK_WATCH_WRITE | LK_WATCH_PROCESS | LK_WATCH_DEFERRED, on_write, NULL);
	if (err) {
		fprintf(stderr, "cannot watch balance: %s\n%s\n", lk_strerror(err),
			lk_last_error());
		return 1;
	}
	balance = 100;
	pthread_create(&t, NULL, worker, (void *)25);
	pthread_join(t, NULL);
	balance -= 10;

	lk_watch_sync(); /* let the delivery thread print everything queued so far */
	lk_watch_stats(w, &stats);
	printf("%llu writes seen, %llu dropped\n", (unsigned long long)stats.hits,
	       (unsigned long long)stats.dropped);
	lk_watch_remove(w);
	return 0;
}
