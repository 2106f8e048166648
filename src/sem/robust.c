// SPDX-License-Identifier: MIT
/*
 * How the wakers of a shared set learn that a sleeper died: the kernel tells them.
 *
 * While it sleeps, a sleeper's waiter slot holds its thread id in alive.word, and an entry for
 * that word sits on the thread's robust futex list (set_robust_list(2)). When a thread dies, the
 * kernel walks its list and, in every word that still holds the dying thread's id, stores
 * FUTEX_OWNER_DIED -- before anyone could wait for the process, in whatever PID namespace the
 * waker lives. A waker that finds the bit knows the sleeper is gone (queue.c reaps it).
 *
 * The list is libc's: one per thread, made for robust mutexes. The sleeper puts its entry at the
 * head and takes it off again before lk_semop returns; in between this thread locks no robust
 * mutex of its own (short of a signal handler doing what is not async-signal-safe). Taking the
 * entry off restores the head from what was saved on our stack: nothing is read back from the
 * region. That is why this is not a robust pthread mutex in the slot, as it once was: glibc
 * links its robust mutexes through pointers stored in the mutexes themselves and writes through
 * them on unlock -- pointers that, in a shared set, any process that can open the set could have
 * rewritten, turning an unlock into a write anywhere in our process. The entry's pointer here is
 * followed by the kernel alone, when the thread exits, with the checks it makes for any user
 * pointer.
 *
 * The kernel finds an entry's word at entry + the list's futex_offset (libc's choice: -32 for
 * glibc on x86_64). The entry must then lie in the slot's alive area, after the word and with the
 * pointer-sized word before it (where libc's list code writes a back link) in the area too. A
 * thread without a robust list, or one whose offset does not fit, still sleeps; its death is then
 * not detected, as the header says.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sem/sem_internal.h"

#define TLS_IE __attribute__((tls_model("initial-exec")))

static __thread struct robust_list_head *my_head TLS_IE;
static __thread bool looked TLS_IE;

static struct robust_list_head *thread_head(void)
{
	struct robust_list_head *head = NULL;
	size_t len = 0;

	if (looked)
		return my_head;
	looked = true;
	if (syscall(SYS_get_robust_list, 0, &head, &len) == 0 && head && len == sizeof(*head))
		my_head = head;
	return my_head;
}

static struct robust_list *entry_for(struct waiter *w, long futex_offset)
{
	long at = -futex_offset;

	if (at < 2 * (long)sizeof(void *) || at % (long)sizeof(void *) ||
	    at + (long)sizeof(void *) > (long)sizeof(w->alive))
		return NULL;
	return (struct robust_list *)((char *)&w->alive.word + at);
}

static void order(void)
{
	__atomic_signal_fence(
		__ATOMIC_SEQ_CST); /* the kernel reads these as of our last instruction */
}

/*
 * Claim slot w for this thread: false if it is not free (its word is not 0 -- a free-slot stack a
 * peer rewrote). The word is set with the entry pending, so a death at any point here is seen.
 */
bool lk__alive_begin(struct waiter *w, struct alive_token *t)
{
	struct robust_list_head *head = thread_head();
	struct robust_list *entry = head ? entry_for(w, head->futex_offset) : NULL;
	uint32_t free_word = 0;
	bool claimed;

	*t = (struct alive_token){ NULL, NULL, NULL };
	if (entry) {
		head->list_op_pending = entry;
		order();
	}
	claimed = __atomic_compare_exchange_n(&w->alive.word, &free_word, (uint32_t)gettid(), false,
					      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	if (entry) {
		if (claimed) {
			t->head = head;
			t->entry = entry;
			t->first = head->list.next;
			entry->next = head->list.next;
			order();
			head->list.next = entry;
			order();
		}
		head->list_op_pending = NULL;
	}
	return claimed;
}

/* Take the slot's entry off this thread's list; the word stays as it is. */
void lk__alive_unlink(struct alive_token *t)
{
	struct robust_list_head *head = t->head;

	if (!head)
		return;
	head->list_op_pending = t->entry;
	order();
	/* something a signal handler left on the list in front of ours: leave the list be */
	if (head->list.next == t->entry)
		head->list.next = t->first;
	order();
	head->list_op_pending = NULL;
	t->head = NULL;
}

/* Give the slot's word back (0), taking the entry off this thread's list first. */
void lk__alive_end(struct waiter *w, struct alive_token *t)
{
	lk__alive_unlink(t);
	__atomic_store_n(&w->alive.word, 0, __ATOMIC_RELEASE);
}
