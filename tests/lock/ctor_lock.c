// SPDX-License-Identifier: MIT
/* A library that takes a lock when it is loaded: a call site in it for `lowkey locks` to name. */
#include <pthread.h>

#ifdef LKT_DECOY /* another build of it (test_locks_other_build.c): its code on other lines */
#line 100
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loads;

__attribute__((constructor)) static void taken_when_loaded(void)
{
	pthread_mutex_lock(&lock);
	loads++;
	pthread_mutex_unlock(&lock);
}
