// SPDX-License-Identifier: MIT
/* Error strings: lk_strerror() and the per-thread lk_last_error(). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

static void strerror_covers_codes(void **state)
{
	(void)state;
	assert_string_equal(lk_strerror(0), "success");
	assert_string_equal(lk_strerror(-EINVAL), lk_strerror(EINVAL));
	assert_non_null(strstr(lk_strerror(-EPERM), "not permitted"));
	assert_string_equal(lk_strerror(-99999), "unknown error");
}

static void *fail_in_thread(void *arg)
{
	char *seen = arg;

	strcpy(seen, lk_last_error()); /* a new thread starts with no message */
	lk_key_enable((struct lk_key *)NULL);
	strcat(seen, "|");
	strcat(seen, lk_last_error());
	return NULL;
}

static void last_error_is_per_thread(void **state)
{
	char seen[1024] = "";
	pthread_t t;

	(void)state;
	assert_int_equal(lk_key_dec((struct lk_key *)NULL), -EINVAL);
	assert_non_null(strstr(lk_last_error(), "lk_key_dec"));

	assert_int_equal(pthread_create(&t, NULL, fail_in_thread, seen), 0);
	pthread_join(t, NULL);
	assert_true(seen[0] == '|');
	assert_non_null(strstr(seen, "lk_key_enable"));
	/* ours is untouched by the other thread's failure */
	assert_non_null(strstr(lk_last_error(), "lk_key_dec"));
}

static void version_matches_header(void **state)
{
	(void)state;
	assert_string_equal(lk_version(), LK_VERSION_STRING);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(strerror_covers_codes),
		cmocka_unit_test(last_error_is_per_thread),
		cmocka_unit_test(version_matches_header),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
