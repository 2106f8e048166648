// SPDX-License-Identifier: MIT
/*
 * The registry of loaded objects that carry lowkey sections (see include/lowkey/bits/dso.h).
 */
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/dso.h"

extern const struct lk__dso_handler __start_lk__dso_handlers[]
	__attribute__((weak, visibility("hidden")));
extern const struct lk__dso_handler __stop_lk__dso_handlers[]
	__attribute__((weak, visibility("hidden")));

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static struct lk__dso_rt *registry_head;
static bool main_program_registered;
static void (*after_main_program)(void);

void lk__registry_lock(void)
{
	pthread_mutex_lock(&registry_mutex);
}

void lk__registry_unlock(void)
{
	pthread_mutex_unlock(&registry_mutex);
}

/*
 * Holding the lock across fork() means a child never inherits code half-way through a rewrite or
 * tables half-way through an update, and can flip keys itself.
 */
static void registry_atfork_init(void)
{
	pthread_atfork(lk__registry_lock, lk__registry_unlock, lk__registry_unlock);
}

void (*lk__dso_on_load_error)(const struct lk__dso_rt *dso, int err);

void lk__dso_load_failed(struct lk__dso_rt *dso, int err)
{
	if (!dso->load_error)
		dso->load_error = err;
}

void lk__registry_fork_init(void)
{
	pthread_once(&atfork_once, registry_atfork_init);
}

struct lk__dso_rt *lk__dso_list(void)
{
	return registry_head;
}

int lk__dso_prot(const struct lk__dso_rt *dso, uintptr_t addr)
{
	for (unsigned int i = 0; i < dso->nsegs; i++)
		if (addr >= dso->segs[i].start && addr < dso->segs[i].end)
			return dso->segs[i].prot;
	return -1;
}

static struct lk__dso_rt *registry_find(const struct lk__dso *desc)
{
	for (struct lk__dso_rt *d = registry_head; d; d = d->next)
		if (d->desc == desc)
			return d;
	return NULL;
}

static int segment_prot(ElfW(Word) p_flags)
{
	return ((p_flags & PF_R) ? PROT_READ : 0) | ((p_flags & PF_W) ? PROT_WRITE : 0) |
	       ((p_flags & PF_X) ? PROT_EXEC : 0);
}

static bool object_contains(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= start && addr < start + ph->p_memsz)
			return true;
	}
	return false;
}

static int describe_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lk__dso_rt *rt = arg;

	(void)size;
	if (!object_contains(info, (uintptr_t)rt->desc))
		return 0;
	rt->base = info->dlpi_addr;
	rt->path = strdup(info->dlpi_name ? info->dlpi_name : "");
	for (int i = 0; i < info->dlpi_phnum && rt->nsegs < LK__DSO_MAX_SEGMENTS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		rt->segs[rt->nsegs].start = info->dlpi_addr + ph->p_vaddr;
		rt->segs[rt->nsegs].end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		rt->segs[rt->nsegs].prot = segment_prot(ph->p_flags);
		rt->nsegs++;
	}
	return 1;
}

/* Built without the registry lock: dl_iterate_phdr takes the loader's locks. */
static struct lk__dso_rt *describe(const struct lk__dso *desc)
{
	struct lk__dso_rt *rt = calloc(1, sizeof(*rt));

	if (!rt)
		return NULL;
	rt->desc = desc;
	rt->refs = 1;
	dl_iterate_phdr(describe_object, rt);
	return rt;
}

static void release(struct lk__dso_rt *rt)
{
	if (rt) {
		free(rt->path);
		free(rt);
	}
}

static bool registered(const struct lk__dso *desc)
{
	bool found;

	lk__registry_lock();
	found = registry_find(desc) != NULL;
	if (found)
		registry_find(desc)->refs++;
	lk__registry_unlock();
	return found;
}

bool lk__dso_after_main_program(void (*fn)(void))
{
	bool later;

	if (!lk__main_program_refers_to_register())
		return false;
	lk__registry_lock();
	later = !main_program_registered;
	if (later)
		after_main_program = fn;
	lk__registry_unlock();
	return later;
}

LK_API void lk__dso_register(const struct lk__dso *desc)
{
	struct lk__dso_rt *fresh, *existing;
	void (*then)(void) = NULL;

	if (!desc || desc->magic != LK__DSO_MAGIC || desc->abi != LK__DSO_ABI)
		return;
	lk__registry_fork_init();
	if (registered(desc))
		return;

	fresh = describe(desc);
	if (!fresh)
		return; /* out of memory at load: the object's sites stay as compiled */

	lk__registry_lock();
	existing = registry_find(desc);
	if (existing) {
		existing->refs++;
	} else {
		fresh->next = registry_head;
		registry_head = fresh;
		for (const struct lk__dso_handler *h = __start_lk__dso_handlers;
		     h < __stop_lk__dso_handlers; h++)
			if (h->load)
				h->load(fresh);
		if (fresh->load_error && lk__dso_on_load_error)
			lk__dso_on_load_error(fresh, fresh->load_error);
		if (fresh->path && !fresh->path[0]) {
			main_program_registered = true;
			then = after_main_program;
			after_main_program = NULL;
		}
		fresh = NULL;
	}
	lk__registry_unlock();
	release(fresh);
	if (then)
		then();
}

LK_API void lk__dso_unregister(const struct lk__dso *desc)
{
	struct lk__dso_rt **link, *gone = NULL;

	if (!desc)
		return;
	lk__registry_lock();
	for (link = &registry_head; *link; link = &(*link)->next) {
		if ((*link)->desc != desc)
			continue;
		if (--(*link)->refs == 0) {
			gone = *link;
			*link = gone->next;
			for (const struct lk__dso_handler *h = __stop_lk__dso_handlers;
			     h > __start_lk__dso_handlers; h--)
				if (h[-1].unload)
					h[-1].unload(gone);
		}
		break;
	}
	lk__registry_unlock();
	release(gone);
}
