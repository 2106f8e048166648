// SPDX-License-Identifier: MIT
/*
 * liblowkey-races.so refuses a plan it cannot read as its own (include/internal/races_file.h):
 * one of the version before stacks were recorded, one whose stack depth is past LKR_STACK_MAX,
 * and one whose counts reach past the file's end. The program runs on unsampled, and the plan
 * stays unclaimed. A well-formed plan for the same program is claimed, so that the test sees the
 * difference.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "internal/races_file.h"
#include "cli/run.h"

static struct lkt_run r;

enum damage { WELL_FORMED, OLD_VERSION, DEEP_STACKS, SHORT_FILE };

/* A plan of one instruction (never reached: the program's ELF header) for FIXTURE_BIN. */
static void make_plan(const char *path, enum damage damage)
{
	size_t size = (size_t)lkr_file_size(1, 1, 4);
	struct lkr_header *h;
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(stat(FIXTURE_BIN, &st), 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(h != MAP_FAILED);
	h->magic = LKR_MAGIC;
	h->version = damage == OLD_VERSION ? LKR_VERSION - 1 : LKR_VERSION;
	h->header_size = LKR_HEADER_SIZE;
	h->seed = 1;
	h->period_ns = 1000000;
	h->window_ns = 100000;
	h->nobjects = 1;
	h->ninsns = damage == SHORT_FILE ? 1000000 : 1;
	h->max_races = 4;
	h->stack_depth = damage == DEEP_STACKS ? LKR_STACK_MAX + 1 : LKR_STACK_MAX;
	lkr_objects(h)[0].dev = st.st_dev;
	lkr_objects(h)[0].ino = st.st_ino;
	lkr_insns(h)[0] = (struct lkr_insn){
		.len = 1, .base = LKR_REG_NONE, .index = LKR_REG_NONE, .size = 1, .access = LKR_READ
	};
	munmap(h, size);
	close(fd);
}

/* Run the fixture with the plan at path; whether it claimed the plan. */
static bool claimed(enum damage damage)
{
	char path[] = "/tmp/lkt-races-plan.XXXXXX";
	struct lkr_header h;
	int fd = mkstemp(path);
	bool taken;

	assert_true(fd >= 0);
	close(fd);
	make_plan(path, damage);
	lkt_sh(&r, "LD_PRELOAD=%s LOWKEY_RACES_FILE=%s %s mutex 0.1", RACES_LIB, path, FIXTURE_BIN);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	unlink(path);
	assert_int_equal(r.status, 0); /* the program ran, sampled or not */
	taken = h.claimed != 0;
	return taken;
}

static void well_formed_plan_is_claimed(void **state)
{
	(void)state;
	assert_true(claimed(WELL_FORMED));
}

static void old_version_is_refused(void **state)
{
	(void)state;
	assert_false(claimed(OLD_VERSION));
}

static void stacks_deeper_than_the_records_are_refused(void **state)
{
	(void)state;
	assert_false(claimed(DEEP_STACKS));
}

static void counts_past_the_file_are_refused(void **state)
{
	(void)state;
	assert_false(claimed(SHORT_FILE));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(well_formed_plan_is_claimed),
		cmocka_unit_test(old_version_is_refused),
		cmocka_unit_test(stacks_deeper_than_the_records_are_refused),
		cmocka_unit_test(counts_past_the_file_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
