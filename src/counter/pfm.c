// SPDX-License-Identifier: MIT
/*
 * Event names from libpfm4 (Debian libpfm4-dev): perf's generic names (cycles, cache-misses,
 * L1-dcache-load-misses, task-clock, ...) and every model-specific event of the PMUs present.
 *
 * libpfm4 keeps global state and does not promise thread safety, so every call into it holds
 * pfm_lock; it is only reached from lk_counters_open(), never from a read.
 *
 * It is loaded with dlopen() the first time a name needs it, not linked: its event tables carry
 * some 43,000 relocations, which would cost every program linked with liblowkey about 290 page
 * faults (1.2 MB of private memory) at start-up whether it counts anything or not.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <perfmon/pfmlib_perf_event.h>

#include "core/error.h"
#include "internal/pfm.h"

#define PFM_SONAME "libpfm.so.4"

/* The libpfm4 functions lowkey calls, found with dlsym(). */
static struct {
	pfm_err_t (*initialize)(void);
	const char *(*strerror)(int code);
	pfm_err_t (*get_os_event_encoding)(const char *str, int dfl_plm, pfm_os_t os, void *args);
	pfm_err_t (*get_event_info)(int idx, pfm_os_t os, pfm_event_info_t *output);
	pfm_err_t (*get_pmu_info)(pfm_pmu_t pmu, pfm_pmu_info_t *output);
	int (*get_event_next)(int idx);
} pfm;

static pthread_once_t pfm_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t pfm_lock = PTHREAD_MUTEX_INITIALIZER;
static char pfm_problem[256]; /* why libpfm4 is not usable; "" when it is */

static bool pfm_load(void)
{
	void *lib = dlopen(PFM_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *err;

	if (!lib) {
		err = dlerror();
		snprintf(pfm_problem, sizeof(pfm_problem),
			 "cannot load " PFM_SONAME " (%s): install "
			 "libpfm4 (Debian: apt-get install libpfm4)",
			 err ? err : "not found");
		return false;
	}
	/* dlsym returns void *; POSIX guarantees it converts to a function pointer. */
	*(void **)&pfm.initialize = dlsym(lib, "pfm_initialize");
	*(void **)&pfm.strerror = dlsym(lib, "pfm_strerror");
	*(void **)&pfm.get_os_event_encoding = dlsym(lib, "pfm_get_os_event_encoding");
	*(void **)&pfm.get_event_info = dlsym(lib, "pfm_get_event_info");
	*(void **)&pfm.get_pmu_info = dlsym(lib, "pfm_get_pmu_info");
	*(void **)&pfm.get_event_next = dlsym(lib, "pfm_get_event_next");
	if (!pfm.initialize || !pfm.strerror || !pfm.get_os_event_encoding || !pfm.get_event_info ||
	    !pfm.get_pmu_info || !pfm.get_event_next) {
		snprintf(pfm_problem, sizeof(pfm_problem),
			 PFM_SONAME " lacks functions lowkey needs "
				    "(libpfm4 older than 4.0?)");
		return false;
	}
	return true; /* never unloaded: the names it returns stay valid */
}

static void pfm_start(void)
{
	int status;

	if (!pfm_load())
		return;
	status = pfm.initialize();
	if (status != PFM_SUCCESS)
		snprintf(pfm_problem, sizeof(pfm_problem), "libpfm4 could not start (%s)",
			 pfm.strerror(status));
}

static int pfm_ready(void)
{
	pthread_once(&pfm_once, pfm_start);
	if (pfm_problem[0])
		return lk__fail(-EIO,
				"%s: event names are unavailable; raw events (rNNN) and "
				"pmu/event=.../ still work",
				pfm_problem);
	return 0;
}

/* The perf-level attributes libpfm4 writes into its canonical string; we show our own. */
static bool is_perf_level_attr(const char *attr, size_t len)
{
	static const char *const names[] = { "u",    "k",      "h",    "mg",  "mh",	"precise",
					     "excl", "period", "freq", "cpu", "pinned", "hw_smpl" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);

		if (len > n && strncmp(attr, names[i], n) == 0 && attr[n] == '=')
			return true;
	}
	return false;
}

/* "perf::PERF_COUNT_HW_CACHE_L1D:READ:MISS:u=1:k=1:h=0" -> "perf::PERF_COUNT_HW_CACHE_L1D:READ:MISS" */
static void canonical_name(const char *fstr, char *out, size_t size)
{
	const char *s = fstr, *sep = strstr(fstr, "::");
	size_t used = 0;

	/* Copy "pmu::event", then each ":attr" libpfm4 added except the perf-level ones. */
	s = sep ? sep + 2 : fstr;
	s += strcspn(s, ":");
	used = (size_t)(s - fstr) < size - 1 ? (size_t)(s - fstr) : size - 1;
	memcpy(out, fstr, used);
	while (*s == ':') {
		const char *attr = s + 1;
		size_t len = strcspn(attr, ":");

		if (!is_perf_level_attr(attr, len) && used + len + 1 < size) {
			out[used++] = ':';
			memcpy(out + used, attr, len);
			used += len;
		}
		s = attr + len;
	}
	out[used] = '\0';
}

int lk__pfm_encode(const char *name, struct lk__pfm_event *out)
{
	struct perf_event_attr attr;
	pfm_perf_encode_arg_t arg;
	pfm_event_info_t info;
	pfm_pmu_info_t pmu;
	char *fstr = NULL;
	int ret, err;

	err = pfm_ready();
	if (err)
		return err;
	memset(&attr, 0, sizeof(attr));
	memset(&arg, 0, sizeof(arg));
	arg.size = sizeof(arg);
	arg.attr = &attr;
	arg.fstr = &fstr;

	pthread_mutex_lock(&pfm_lock);
	ret = pfm.get_os_event_encoding(name, PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT, &arg);
	if (ret == PFM_SUCCESS) {
		memset(out, 0, sizeof(*out));
		out->type = attr.type;
		out->config = attr.config;
		out->config1 = attr.config1;
		out->config2 = attr.config2;
		canonical_name(fstr ? fstr : name, out->canonical, sizeof(out->canonical));
		memset(&info, 0, sizeof(info));
		info.size = sizeof(info);
		memset(&pmu, 0, sizeof(pmu));
		pmu.size = sizeof(pmu);
		if (pfm.get_event_info(arg.idx, PFM_OS_PERF_EVENT, &info) == PFM_SUCCESS &&
		    pfm.get_pmu_info(info.pmu, &pmu) == PFM_SUCCESS && pmu.name)
			snprintf(out->pmu, sizeof(out->pmu), "%s", pmu.name);
	}
	pthread_mutex_unlock(&pfm_lock);
	free(fstr);

	switch (ret) {
	case PFM_SUCCESS:
		return 0;
	case PFM_ERR_NOTFOUND:
		return -ENOENT;
	case PFM_ERR_NOMEM:
		return lk__fail(-ENOMEM, "out of memory encoding event '%s'", name);
	default:
		return lk__fail(-EINVAL, "event '%s': libpfm4 says: %s", name, pfm.strerror(ret));
	}
}

/* perf writes its generic events in lower case ("cache-misses"); libpfm4 spells them CACHE-MISSES. */
static void lower_copy(char *dst, const char *src, size_t size)
{
	size_t i;

	for (i = 0; src[i] && i + 1 < size; i++)
		dst[i] = (char)tolower((unsigned char)src[i]);
	dst[i] = '\0';
}

int lk__pfm_for_each_name(void (*fn)(const char *name, void *arg), void *arg)
{
	pfm_pmu_t p;
	int err = pfm_ready();

	if (err)
		return err;
	pthread_mutex_lock(&pfm_lock);
	pfm_for_all_pmus(p)
	{
		pfm_pmu_info_t pmu;

		memset(&pmu, 0, sizeof(pmu));
		pmu.size = sizeof(pmu);
		if (pfm.get_pmu_info(p, &pmu) != PFM_SUCCESS || !pmu.is_present)
			continue;
		for (int i = pmu.first_event; i != -1; i = pfm.get_event_next(i)) {
			pfm_event_info_t info;
			char lower[128];

			memset(&info, 0, sizeof(info));
			info.size = sizeof(info);
			if (pfm.get_event_info(i, PFM_OS_PERF_EVENT, &info) != PFM_SUCCESS)
				continue;
			if (p == PFM_PMU_PERF_EVENT) {
				/* perf's aliases, not the PERF_COUNT_* spellings. */
				if (strncmp(info.name, "PERF_COUNT_", 11) == 0)
					continue;
				lower_copy(lower, info.name, sizeof(lower));
				fn(lower, arg);
			} else if (p != PFM_PMU_PERF_EVENT_RAW) {
				fn(info.name, arg);
			}
		}
	}
	pthread_mutex_unlock(&pfm_lock);
	return 0;
}
