// SPDX-License-Identifier: MIT
/*
 * The counter sets this process has open (counter_registry.h). Held across fork() (atfork
 * handlers), so a child never inherits the list's mutex taken by a thread it does not have.
 */
#include <pthread.h>
#include <unistd.h>

#include "counter/counter_internal.h"
#include "counter/counter_registry.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lk_counters *first, *last;
static uint32_t last_set;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_mutex_lock(&registry_lock);
}

static void fork_release(void)
{
	pthread_mutex_unlock(&registry_lock);
}

static void register_atfork(void)
{
	pthread_atfork(fork_prepare, fork_release, fork_release);
}

void lk__counters_register(struct lk_counters *c)
{
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&registry_lock);
	c->set = ++last_set;
	c->opener = getpid();
	c->reg_prev = last;
	c->reg_next = NULL;
	if (last)
		last->reg_next = c;
	else
		first = c;
	last = c;
	c->registered = true;
	pthread_mutex_unlock(&registry_lock);
}

void lk__counters_unregister(struct lk_counters *c)
{
	if (!c->registered)
		return;
	pthread_mutex_lock(&registry_lock);
	if (c->reg_prev)
		c->reg_prev->reg_next = c->reg_next;
	else
		first = c->reg_next;
	if (c->reg_next)
		c->reg_next->reg_prev = c->reg_prev;
	else
		last = c->reg_prev;
	c->registered = false;
	pthread_mutex_unlock(&registry_lock);
}

int lk__counters_foreach(int (*fn)(struct lk_counters *c, uint32_t set, void *arg), void *arg)
{
	pid_t self = getpid();
	int ret = 0;

	pthread_mutex_lock(&registry_lock);
	for (struct lk_counters *c = first; c && !ret; c = c->reg_next)
		if (c->opener == self)
			ret = fn(c, c->set, arg);
	pthread_mutex_unlock(&registry_lock);
	return ret;
}
