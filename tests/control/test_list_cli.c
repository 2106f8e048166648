// SPDX-License-Identifier: MIT
/*
 * `lowkey list BINARY`: the sites read from the ELF file, without running it, must be exactly the
 * sites the program registers when it runs -- for a PIE executable (pointers through
 * R_X86_64_RELATIVE relocations), a non-PIE one (absolute values), a shared object, a program with
 * liblowkey.a in it, and one linked with packed relative relocations (DT_RELR) where the linker
 * supports them. And files that are not programs are refused clearly.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/run.h"

static struct lkt_run r, listing;

/* Collapse runs of blanks, so lines compare whatever the column widths. */
static void squeeze(char *s)
{
	char *w = s;

	for (char *p = s; *p; p++)
		if (!(*p == ' ' && (w == s || w[-1] == ' ' || w[-1] == '\n')))
			*w++ = *p;
	*w = 0;
}

/*
 * Run `program list` (the sites it registers, one per line: object|provider|event|kind|file|line|
 * nargs|types|names) and check each one of object want_object ("-": the program itself) is in
 * `lowkey list` of listed_file. Returns how many.
 */
static int compare(const char *program, const char *want_object, const char *listed_file)
{
	static const char *const kinds[] = { "", "event", "span-begin", "span-end", "counter" };
	char *save = NULL, expected[2048];
	int n = 0;

	assert_int_equal(lkt_sh(&listing, "%s list", program), 0);
	assert_int_equal(lkt_sh(&r, "%s list '%s'", LOWKEY, listed_file), 0);
	squeeze(r.out);
	for (char *line = strtok_r(listing.out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *f[9], *p = line, *tsave = NULL, *nsave = NULL;
		int k = 0;

		for (; k < 9 && p; k++) {
			f[k] = p;
			p = strchr(p, '|');
			if (p)
				*p++ = 0;
		}
		assert_int_equal(k, 9);
		if (strcmp(f[0], want_object) != 0)
			continue;
		snprintf(expected, sizeof(expected), "%s:%s %s %s:%s ", f[1], f[2],
			 kinds[atoi(f[3])], f[4], f[5]);
		/* arguments: "name: type, ..." (the fixtures' names hold no top-level comma) */
		{
			char *type = strtok_r(f[7], ",", &tsave),
			     *name = strtok_r(f[8], ",", &nsave);

			for (int a = 0; a < atoi(f[6]); a++) {
				while (name && *name == ' ')
					name++;
				snprintf(expected + strlen(expected),
					 sizeof(expected) - strlen(expected), "%s%s: %s",
					 a ? ", " : "", name ? name : "?", type ? type : "?");
				type = strtok_r(NULL, ",", &tsave);
				name = strtok_r(NULL, ",", &nsave);
			}
		}
		squeeze(expected);
		if (!strstr(r.out, expected))
			print_error("`lowkey list %s` lacks '%s':\n%s\n", listed_file, expected,
				    r.out);
		assert_non_null(strstr(r.out, expected));
		n++;
	}
	return n;
}

static void expect_header(const char *file, const char *type, int sites)
{
	char want[1024];

	snprintf(want, sizeof(want), "%s (%s): %d site%s", file, type, sites,
		 sites == 1 ? "" : "s");
	if (!strstr(r.out, want))
		print_error("wanted '%s' in:\n%s\n", want, r.out);
	assert_non_null(strstr(r.out, want));
}

static void a_pie_executable(void **state)
{
	(void)state;
	/* the premise: its site pointers are dynamic relocations, not values in the file */
	assert_int_equal(lkt_sh(&r, "readelf -rW '%s' | grep -c R_X86_64_RELATIVE", TARGET), 0);
	assert_int_equal(compare(TARGET, "-", TARGET), 6);
	expect_header(TARGET, "PIE executable", 6);
}

/*
 * GNU ld also stores each RELATIVE relocation's addend in the file, so reading the file as it is
 * would give the same pointers; other linkers (lld) store zeros. Zero every word a RELATIVE
 * relocation targets, in a copy, as such a linker would have left it: only the relocations can
 * then give the sites. Returns how many words were zeroed.
 */
static int zero_relocated_words(const char *path)
{
	static const uint8_t zero[8];
	int fd = open(path, O_RDWR), zeroed = 0;
	Elf_Scn *scn = NULL, *target;
	Elf *elf;

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh, th;
		Elf_Data *d = elf_getdata(scn, NULL);

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !(sh.sh_flags & SHF_ALLOC))
			continue;
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela rel;

			if (!gelf_getrela(d, (int)i, &rel) ||
			    GELF_R_TYPE(rel.r_info) != R_X86_64_RELATIVE)
				continue;
			for (target = elf_nextscn(elf, NULL); target;
			     target = elf_nextscn(elf, target)) {
				if (gelf_getshdr(target, &th) && th.sh_type == SHT_PROGBITS &&
				    rel.r_offset >= th.sh_addr &&
				    rel.r_offset + 8 <= th.sh_addr + th.sh_size) {
					assert_int_equal(pwrite(fd, zero, 8,
								(off_t)(th.sh_offset +
									rel.r_offset - th.sh_addr)),
							 8);
					zeroed++;
					break;
				}
			}
		}
	}
	elf_end(elf);
	close(fd);
	return zeroed;
}

static void a_pie_executable_whose_file_holds_no_addends(void **state)
{
	char copy[] = "/tmp/lkt-list-XXXXXX";
	int fd = mkstemp(copy);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(lkt_sh(&r, "cp '%s' '%s'", TARGET, copy), 0);
	assert_true(zero_relocated_words(copy) >= 6 * 5); /* each site: its slot and four strings */
	assert_int_equal(compare(TARGET, "-", copy), 6);
	unlink(copy);
}

static void a_non_pie_executable(void **state)
{
	(void)state;
	assert_int_equal(
		lkt_sh(&r, "readelf -hW '%s' | grep -c 'EXEC (Executable file)'", TARGET_NOPIE), 0);
	assert_int_equal(compare(TARGET_NOPIE, "-", TARGET_NOPIE), 6);
	expect_header(TARGET_NOPIE, "executable", 6);
}

static void a_shared_object(void **state)
{
	(void)state;
	assert_int_equal(compare(TARGET, TARGET_LIB, TARGET_LIB), 1);
	expect_header(TARGET_LIB, "shared object", 1);
}

static void a_program_with_the_static_library(void **state)
{
	(void)state;
	assert_int_equal(compare(TARGET_STATIC, "-", TARGET_STATIC), 7);
}

static void packed_relative_relocations(void **state)
{
	(void)state;
#ifdef TARGET_RELR
	assert_int_equal(lkt_sh(&r, "readelf -dW '%s' | grep -c RELR", TARGET_RELR), 0);
	assert_int_equal(compare(TARGET_RELR, "-", TARGET_RELR), 6);
#else
	skip(); /* the linker has no -z pack-relative-relocs */
#endif
}

static void json_output(void **state)
{
	char want[2048];
	int line;

	(void)state;
	/* The site's line, from the source: the file may gain lines above it. */
	assert_int_equal(lkt_sh(&r, "grep -n 'LK_PROBE(lib, work' '%s/target_lib.c' | cut -d: -f1",
				SOURCE_DIR),
			 0);
	line = atoi(r.out);
	assert_true(line > 0);
	assert_int_equal(lkt_sh(&r, "%s list --json '%s'", LOWKEY, TARGET_LIB), 0);
	snprintf(
		want, sizeof(want),
		"{\n  \"sites\": [\n    {\"object\": \"%s\", \"object_type\": \"shared object\", \"provider\": \"lib\", "
		"\"event\": \"work\", \"kind\": \"event\", \"file\": \"%s/target_lib.c\", \"line\": %d, "
		"\"function\": \"lkt_lib_work\", \"args\": "
		"[{\"name\": \"i\", \"type\": \"i64\"}, {\"name\": \"\\\"from the library\\\"\", \"type\": \"string\"}]}\n  ],\n"
		"  \"usdt\": []\n}\n",
		TARGET_LIB, SOURCE_DIR, line);
	assert_string_equal(r.out, want);
	assert_int_equal(lkt_sh(&r, "%s list --json %s %s | grep -c '\"provider\"'", LOWKEY, TARGET,
				TARGET_LIB),
			 0);
	assert_int_equal(atoi(r.out), 7);
}

/*
 * USDT probes of another provider (<sys/sdt.h>) are listed in a section of their own and counted
 * in the summary; lowkey's own sites' notes are not among them.
 */
static void usdt_probes_of_other_providers(void **state)
{
	(void)state;
	/* lowkey's own sites have USDT notes too: none of them is another provider's */
	lkt_sh(&r, "%s list '%s'", LOWKEY, TARGET);
	lkt_expect(&r, 0, NULL);
	assert_null(strstr(r.out, "USDT"));
#if defined(USDT_FOREIGN) && defined(USDT_MIXED)
	lkt_sh(&r, "%s list '%s'", LOWKEY, USDT_FOREIGN);
	lkt_expect(&r, 0, "has no lowkey probe sites; 2 USDT probes of other providers");
	lkt_expect(&r, 0, ": 2 USDT probes of other providers\n");
	lkt_expect(&r, 0, "fgn:hello");
	lkt_expect(&r, 0, "fgn:bye");
	assert_non_null(strstr(strstr(r.out, "fgn:hello"), "@")); /* its argument spec */
	assert_non_null(strstr(r.out, "(no arguments)"));	  /* fgn:bye's */

	/* beside a lowkey site: the site as ever, and the two foreign probes only */
	lkt_sh(&r, "%s list '%s'", LOWKEY, USDT_MIXED);
	lkt_expect(&r, 0, "mixed:tick");
	lkt_expect(&r, 0, ": 2 USDT probes of other providers\n");
	assert_null(strstr(strstr(r.out, "USDT probes of other providers"), "mixed:tick"));

	lkt_sh(&r,
	       "%s list --json '%s' | python3 -c 'import json,sys; d=json.load(sys.stdin); "
	       "u=d[\"usdt\"]; assert sorted((x[\"provider\"], x[\"name\"]) for x in u) == "
	       "[(\"fgn\", \"bye\"), (\"fgn\", \"hello\")], u; "
	       "assert all(x[\"object\"] == sys.argv[1] and x[\"address\"] > 0 and "
	       "not x[\"semaphore\"] for x in u), u; "
	       "assert [x[\"args\"] for x in u if x[\"name\"] == \"bye\"] == [\"\"], u; "
	       "assert [(s[\"provider\"], s[\"event\"]) for s in d[\"sites\"]] == "
	       "[(\"mixed\", \"tick\")], d' '%s'",
	       LOWKEY, USDT_MIXED, USDT_MIXED);
	lkt_expect(&r, 0, NULL);
#else
	skip(); /* no <sys/sdt.h> to build the program with */
#endif
}

static void files_that_are_not_programs(void **state)
{
	(void)state;
	assert_int_equal(lkt_sh(&r, "%s list /etc/passwd", LOWKEY), 1);
	assert_non_null(strstr(r.out, "/etc/passwd is not an ELF program or library"));
	assert_int_equal(lkt_sh(&r, "%s list /no/such/file", LOWKEY), 1);
	assert_non_null(strstr(r.out, "cannot open /no/such/file"));
	assert_int_equal(lkt_sh(&r, "%s list %s", LOWKEY, OBJECT_FILE), 1);
	assert_non_null(strstr(r.out, "is an object file"));
	assert_int_equal(lkt_sh(&r, "%s list %s", LOWKEY, PLAIN), 0);
	assert_non_null(strstr(r.out, "has no lowkey probe sites"));
	assert_int_equal(lkt_sh(&r, "%s list", LOWKEY),
			 0); /* the counter events: test_list_events */
	assert_non_null(strstr(r.out, "Software events"));
	assert_int_equal(lkt_sh(&r, "%s list --pid 1 %s", LOWKEY, PLAIN), 2);
	assert_int_equal(lkt_sh(&r, "%s list --pid x", LOWKEY), 2);
	assert_int_equal(lkt_sh(&r, "%s help --text list", LOWKEY),
			 0); /* not the page (test_help_man) */
	assert_non_null(strstr(r.out, "usage: lowkey list"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_pie_executable),
		cmocka_unit_test(a_pie_executable_whose_file_holds_no_addends),
		cmocka_unit_test(a_non_pie_executable),
		cmocka_unit_test(a_shared_object),
		cmocka_unit_test(a_program_with_the_static_library),
		cmocka_unit_test(packed_relative_relocations),
		cmocka_unit_test(json_output),
		cmocka_unit_test(usdt_probes_of_other_providers),
		cmocka_unit_test(files_that_are_not_programs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
