// SPDX-License-Identifier: MIT
/*
 * Shared by the benchmarks: timing, statistics, errors, the machine's description.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "internal/json.h"
#include "internal/stats.h"

extern const struct lk_bench __start_lk_benches[];
extern const struct lk_bench __stop_lk_benches[];

const struct lk_bench *lkb_find(const char *name)
{
	for (const struct lk_bench *b = __start_lk_benches; b < __stop_lk_benches; b++)
		if (strcmp(b->name, name) == 0)
			return b;
	return NULL;
}

void lkb_list(FILE *out)
{
	for (const struct lk_bench *b = __start_lk_benches; b < __stop_lk_benches; b++)
		fprintf(out, "   %-12s %s\n", b->name, b->summary);
}

uint64_t lkb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double lkb_percentile(double *v, size_t n, double p)
{
	lk__sort_doubles(v, n);
	return lk__percentile_sorted(v, n, p);
}

double lkb_median(double *v, size_t n)
{
	return lkb_percentile(v, n, 50.0);
}

void lkb_mean_stddev(const double *v, size_t n, double *mean, double *stddev)
{
	double sum = 0, sq = 0;

	for (size_t i = 0; i < n; i++)
		sum += v[i];
	*mean = n ? sum / (double)n : NAN;
	for (size_t i = 0; i < n; i++)
		sq += (v[i] - *mean) * (v[i] - *mean);
	*stddev = n > 1 ? sqrt(sq / (double)(n - 1)) : 0;
}

int lkb_ncpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		return CPU_COUNT(&set);
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

int lkb_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return -pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

int lkb_fail(const char *what, int err)
{
	fprintf(stderr, "lowkey bench: %s: %s\n", what, lk_strerror(err));
	if (*lk_last_error())
		fprintf(stderr, "hint: %s\n", lk_last_error());
	return 1;
}

static void cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[256];

	snprintf(buf, len, "unknown CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			snprintf(buf, len, "%s", colon + 2);
			buf[strcspn(buf, "\n")] = 0;
			break;
		}
	}
	fclose(f);
}

static bool is_guest(void)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[4096];
	bool guest = false;

	if (!f)
		return false;
	while (!guest && fgets(line, sizeof(line), f))
		if (strncmp(line, "flags", 5) == 0 && strstr(line, " hypervisor"))
			guest = true;
	fclose(f);
	return guest;
}

const char *lkb_machine(void)
{
	static char desc[512];
	struct utsname u;
	char model[200];

	if (desc[0])
		return desc;
	cpu_model(model, sizeof(model));
	uname(&u);
	snprintf(desc, sizeof(desc), "%s, %ld CPUs, %s, Linux %s %s", model,
		 sysconf(_SC_NPROCESSORS_ONLN), is_guest() ? "virtual machine guest" : "bare metal",
		 u.release, u.machine);
	return desc;
}
