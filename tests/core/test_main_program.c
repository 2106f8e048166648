// SPDX-License-Identifier: MIT
/*
 * lk__main_program_refers_to_register: read from this program's own dynamic relocations. Built
 * three ways (tests/core/CMakeLists.txt): against liblowkey.so through the PLT and without it
 * (-fno-plt: a GOT relocation instead), where the program registers itself from its constructor,
 * and against liblowkey.a, where lk__dso_register is the program's own and no relocation names it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <lowkey/key.h>

#include "core/dso.h"

static void the_relocations_say_whether_the_program_registers(void **state)
{
	(void)state;
	assert_int_equal(lk__main_program_refers_to_register(), EXPECT_REFERS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_relocations_say_whether_the_program_registers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
