// SPDX-License-Identifier: MIT
/*
 * Probes and keys as a C++ program has them (sites.hpp): each site registered exactly once however
 * many translation units, inlined copies and objects hold its code; every site a 5-byte NOP or a
 * jmp matching its key; events from every unit, the shared library and a dlopen()ed plugin, with
 * C++ argument types; a span ended by an exception unwinding through it.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <tuple>
extern "C" {
#include <cmocka.h> /* has no C++ guard of its own */
}

#include "sites.hpp"
#include "trace_read.h"

LK_DEFINE_KEY_FALSE(cxx_key);
LK_DEFINE_KEY_TRUE(cxx_key_on);

namespace
{

struct row {
	std::string object, name, file;
	unsigned int line, kind;
	std::string types;
};

int collect(const struct lk_probe_info *info, void *arg)
{
	auto *rows = static_cast<std::multimap<std::string, row> *>(arg);
	std::string name = std::string(info->provider) + ":" + info->event;
	std::string types;

	if (name.compare(0, 3, "cxx") != 0)
		return 0;
	for (unsigned int i = 0; i < info->nargs; i++)
		types += std::string(lk_probe_type_name(info->arg_types[i])) + " ";
	rows->emplace(name, row{ info->object, name, info->file, info->line,
				 static_cast<unsigned int>(info->kind), types });
	return 0;
}

std::multimap<std::string, row> sites_now()
{
	std::multimap<std::string, row> rows;

	lk_probe_list(collect, &rows);
	return rows;
}

size_t rows_in(const std::multimap<std::string, row> &rows, const std::string &name,
	       bool main_program)
{
	size_t n = 0;

	for (auto it = rows.lower_bound(name); it != rows.upper_bound(name); ++it)
		n += it->second.object.empty() == main_program;
	return n;
}

void *open_plugin()
{
	void *h = dlopen(PLUGIN_PATH, RTLD_NOW);

	if (!h)
		fail_msg("dlopen: %s", dlerror());
	return h;
}

int run_plugin(void *h, int i)
{
	auto run = reinterpret_cast<int (*)(int)>(dlsym(h, "lkt_plugin_run"));

	assert_non_null(run);
	return run(i);
}

/* The process's trace directory for what: random as well (a failed run's directory stays, and a
 * later process may get the same pid), the same name each time in one process. */
std::string trace_dir(const char *what)
{
	static const unsigned int nonce = [] {
		unsigned int n = 0;

		if (getrandom(&n, sizeof(n), 0) != static_cast<ssize_t>(sizeof(n)))
			n = static_cast<unsigned int>(time(nullptr));
		return n;
	}();

	return std::string("/tmp/lowkey-test-cxx-") + what + "-" + std::to_string(getpid()) + "-" +
	       std::to_string(nonce);
}

void start(const std::string &dir)
{
	struct lk_trace_config c = {};

	c.path = dir.c_str();
	assert_true(lk_probe_enable("cxx*") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
}

void stop_and_load(const std::string &dir)
{
	char err[512];

	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
	if (lkt_trace_load(dir.c_str(), err, sizeof(err)) != 0)
		fail_msg("reading %s: %s", dir.c_str(), err);
}

void remove_dir(const std::string &dir)
{
	lkt_trace_unload();
	assert_int_equal(system(("rm -rf '" + dir + "'").c_str()), 0);
}

/* The first event named name whose argument a is the string s; or -1. */
long find_event(const char *name, unsigned int a, const char *s)
{
	for (size_t i = 0; i < lkt_trace_events(); i++)
		if (strcmp(lkt_trace_name(i), name) == 0 && lkt_trace_arg_string(i, a) &&
		    strcmp(lkt_trace_arg_string(i, a), s) == 0)
			return static_cast<long>(i);
	return -1;
}

} // namespace

/*
 * Within one object no two sites are the same descriptor seen twice. Sites only the main program
 * has are there exactly once; twice<> has one per instantiation (int, double, long), and the
 * instantiation the shared library also has (int) is registered by one object or each, never
 * twice by the same one.
 */
static void each_site_registered_once(void **)
{
	auto rows = sites_now();
	std::set<std::tuple<std::string, std::string, std::string, unsigned int, unsigned int,
			    std::string>>
		seen;
	size_t f64 = 0;

	for (const auto &r : rows) {
		const row &x = r.second;

		/* twice<int> and twice<long> look alike: tell them apart below */
		if (x.name != "cxx:twice")
			assert_true(seen.emplace(x.object, x.name, x.file, x.line, x.kind, x.types)
					    .second);
	}
	assert_int_equal(rows_in(rows, "cxx:member", true), 1);
	assert_int_equal(rows_in(rows, "cxx:static_member", true), 1);
	assert_int_equal(rows_in(rows, "cxx:risky", true), 2); /* the span's begin and end */
	assert_int_equal(rows_in(rows, "cxx_shared:own", false), 1);
	assert_int_equal(rows_in(rows, "cxx_shared:own", true), 0);
	for (const char *both :
	     { "cxx:out_of_line", "cxx:out_of_line_after", "cxx:inlined", "cxx:lambda" }) {
		assert_true(rows_in(rows, both, true) <= 1);
		assert_true(rows_in(rows, both, false) <= 1);
		assert_true(rows_in(rows, both, true) + rows_in(rows, both, false) >= 1);
	}
	for (auto it = rows.lower_bound("cxx:twice"); it != rows.upper_bound("cxx:twice"); ++it)
		f64 += it->second.types == "f64 ";
	assert_int_equal(f64, 1);
	assert_true(rows_in(rows, "cxx:twice", true) >= 2 && rows_in(rows, "cxx:twice", true) <= 3);
	assert_true(rows_in(rows, "cxx:twice", true) + rows_in(rows, "cxx:twice", false) >= 3);
	assert_int_equal(rows_in(rows, "cxx_plugin:scaled", false), 0);
}

/* keyed<int> is kept out of line in both units: one copy survives linking, with its sites. */
static void every_site_is_a_nop_or_a_jmp(void **)
{
	int all = lkt_check_all_sites();

#ifdef LK__PATCHED_SITES
	assert_int_equal(lkt_check_key_sites(&cxx_key), 2); /* keyed<int>, keyed<long> */
	assert_int_equal(lkt_check_key_sites(&cxx_key_on), 2);
	assert_true(all >= 4 + 10);
#else
	assert_int_equal(all, 0);
#endif
	start(trace_dir("nop"));
	assert_true(lkt_check_all_sites() ==
		    all); /* the probe sites are jmps now, and checked so */
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
	assert_int_equal(lkt_check_all_sites(), all);
	assert_int_equal(system(("rm -rf '" + trace_dir("nop") + "'").c_str()), 0);
}

/*
 * An objdump line's instruction bytes, in memory order, then whether its mnemonic is a nop:
 * "0f1f440000" for "0f 1f 44 00 00 <tab>nopl ...", "1f2003d5" for GNU's word "d503201f <tab>nop".
 * Empty when the mnemonic is not a nop.
 */
static std::string instruction_bytes(const char *p)
{
	std::string bytes;
	char token[64];
	int len;

	while (sscanf(p, " %63s%n", token, &len) == 1) {
		size_t n = strlen(token);

		if (n % 2 || strspn(token, "0123456789abcdef") != n)
			return strncmp(token, "nop", 3) == 0 ? bytes : std::string();
		if (n == 2)
			bytes += token;
		else /* a word, as GNU objdump prints aarch64's and riscv's: most significant first */
			for (size_t i = n; i >= 2; i -= 2)
				bytes += std::string(token + i - 2, 2);
		p += len;
	}
	return std::string();
}

/*
 * The same from the file, as the toolchain's objdump disassembles it: every site of the program
 * (keys and probes, all off at start, or on and likely) was compiled as the NOP (x86-64: the 5-byte
 * one; aarch64, riscv64: the 4-byte one), nothing else.
 */
static void objdump_sees_a_nop_at_every_site(void **)
{
	uint64_t at[256];
	size_t n = lkt_site_file_addresses(at, 256);
	char exe[4096], line[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	std::set<uint64_t> want(at, at + (n < 256 ? n : 256)), nops;

#ifndef LK__PATCHED_SITES
	assert_int_equal(n, 0);
	return;
#endif
	assert_true(n >= 14 && n <= 256);
	assert_true(len > 0);
	exe[len] = 0;
	FILE *p = popen((std::string(OBJDUMP) + " -d --section=.text '" + exe + "'").c_str(), "r");
#if defined(__x86_64__)
	const std::string nop = "0f1f440000";
#elif defined(__aarch64__)
	const std::string nop = "1f2003d5";
#else
	const std::string nop = "13000000";
#endif

	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long addr;
		int end;

		/* GNU: "    1a2b:\t0f 1f 44 00 00 \tnopl ...", "  9f0:\td503201f \tnop"; LLVM:
		 * "    1a2b: 0f 1f 44 00 00   \tnopl\t(%rax,%rax)", "  9f0: 1f 20 03 d5   \tnop" */
		if (sscanf(line, " %llx:%n", &addr, &end) == 1 && want.count(addr) &&
		    instruction_bytes(line + end) == nop)
			nops.insert(addr);
	}
	assert_int_equal(pclose(p), 0);
	for (uint64_t a : want)
		if (!nops.count(a))
			fail_msg("site at 0x%llx is not the 5-byte NOP in objdump's listing",
				 static_cast<unsigned long long>(a));
}

static void keys_in_templates_follow_the_key(void **)
{
	assert_int_equal(keyed(1), 2);
	assert_int_equal(keyed(1L), 2);
	assert_int_equal(lk_key_enable(&cxx_key), 0);
	assert_int_equal(keyed(1), 3);
	assert_int_equal(keyed(1L), 3);
	assert_int_equal(lk_key_disable(&cxx_key_on), 0);
	assert_int_equal(keyed(1), 1);
	assert_true(lkt_check_all_sites() >= 0);
	assert_int_equal(lk_key_disable(&cxx_key), 0);
	assert_int_equal(lk_key_enable(&cxx_key_on), 0);
	assert_int_equal(keyed(1L), 2);
	assert_true(lkt_check_all_sites() >= 0);
}

static void events_from_every_unit_and_object(void **)
{
	std::string dir = trace_dir("units");
	void *plugin = open_plugin();
	long e;

	start(dir);
	tu_a_run(1);
	tu_b_run(2);
	lkt_shared_run(3);
	run_plugin(plugin, 4);
	stop_and_load(dir);
	assert_int_equal(dlclose(plugin), 0);

	/* tu_a, tu_b, the shared library and the plugin each ran their sites once */
	const struct {
		const char *name;
		size_t events;
	} expected[] = {
		{ "cxx:twice", 5 },
		{ "cxx:out_of_line", 3 },
		{ "cxx:out_of_line_after", 3 },
		{ "cxx:inlined", 3 },
		{ "cxx:lambda", 3 },
		{ "cxx:member", 2 },
		{ "cxx:static_member", 2 },
		{ "cxx:risky", 4 },
		{ "cxx_shared:own", 1 },
		{ "cxx_plugin:scaled", 2 },
		{ "cxx_plugin:handled", 1 },
		{ "cxx_plugin:handle", 2 },
	};
	for (const auto &x : expected)
		if (lkt_trace_count(x.name) != x.events)
			fail_msg("%s: %zu events, %zu expected", x.name, lkt_trace_count(x.name),
				 x.events);

	/* std::string_view, enum class, bool, int; and a std::string */
	assert_true((e = find_event("cxx:member", 0, "tu_a")) >= 0);
	assert_int_equal(lkt_trace_arg(e, 1), 1);
	assert_int_equal(lkt_trace_arg(e, 2), 1);
	assert_int_equal(lkt_trace_arg(e, 3), 0);
	assert_true((e = find_event("cxx:member", 0, "tu_b")) >= 0);
	assert_int_equal(lkt_trace_arg(e, 1), 2);
	assert_int_equal(lkt_trace_arg(e, 2), 0);
	assert_true((e = find_event("cxx:static_member", 0, "b")) >= 0);
	assert_int_equal(static_cast<int64_t>(lkt_trace_arg(e, 1)), -3);
	assert_string_equal(lkt_trace_arg_string(e, 2), "b");
	assert_true((e = find_event("cxx_plugin:handled", 0, "plugin")) >= 0);
	assert_int_equal(lkt_trace_arg(e, 1), 4);
	remove_dir(dir);
}

static void span_ends_when_an_exception_leaves_it(void **)
{
	std::string dir = trace_dir("throw");
	bool caught = false;
	size_t begin = 0, end = 0;

	start(dir);
	try {
		risky(true);
	} catch (const std::runtime_error &) {
		caught = true;
	}
	stop_and_load(dir);
	assert_true(caught);
	for (size_t i = 0; i < lkt_trace_events(); i++) {
		if (strcmp(lkt_trace_name(i), "cxx:risky") != 0)
			continue;
		if (lkt_trace_kind(i) == LK_PROBE_SPAN_BEGIN)
			begin++;
		else if (lkt_trace_kind(i) == LK_PROBE_SPAN_END && begin == 1)
			end++;
	}
	assert_int_equal(begin, 1);
	assert_int_equal(end, 1);
	remove_dir(dir);
}

/* `lowkey list FILE` lines: how many start with "  NAME " and, of those, how many contain what. */
static size_t listed(const std::string &file, const std::string &name, const char *what = "")
{
	std::string cmd = std::string(LOWKEY) + " list '" + file + "'";
	FILE *p = popen(cmd.c_str(), "r");
	char line[4096];
	size_t n = 0;

	assert_non_null(p);
	while (fgets(line, sizeof(line), p))
		n += strncmp(line, ("  " + name + " ").c_str(), name.size() + 3) == 0 &&
		     strstr(line, what);
	assert_int_equal(pclose(p), 0);
	return n;
}

/*
 * `lowkey list` reads the sites from the files: each once, however many units and copies hold its
 * code; a template's instantiations told apart by their function.
 */
static void lowkey_list_shows_each_site_once(void **)
{
	std::string self = "/proc/" + std::to_string(getpid()) + "/exe";

	/* A cross build's test runs under qemu-user; the CLI it starts runs only where binfmt_misc can. */
	if (system((std::string(LOWKEY) + " --version >/dev/null 2>&1").c_str()) != 0) {
		print_message(
			"cannot run %s on this host (a cross build without binfmt_misc): skipped\n",
			LOWKEY);
		skip();
	}

	for (const char *once :
	     { "cxx:out_of_line", "cxx:out_of_line_after", "cxx:inlined", "cxx:lambda",
	       "cxx:member", "cxx:static_member", "cxx:before_the_header" })
		assert_int_equal(listed(self, once), 1);
	assert_int_equal(listed(self, "cxx:risky"), 2);
	assert_int_equal(listed(self, "cxx:twice"), 3);
	assert_int_equal(listed(self, "cxx:twice", "= int]"), 1);
	assert_int_equal(listed(self, "cxx:twice", "double]"), 1);
	assert_int_equal(listed(self, "cxx:twice", "long"), 1);
	assert_int_equal(listed(SHARED_PATH, "cxx:inlined"), 1);
	assert_int_equal(listed(SHARED_PATH, "cxx_shared:own"), 1);
	assert_int_equal(listed(PLUGIN_PATH, "cxx_plugin:scaled"), 2);
}

/* A plugin's template instantiations register when it loads, once each, and go when it unloads. */
static void plugin_sites_come_and_go(void **)
{
	void *plugin = open_plugin();
	auto rows = sites_now();
	std::set<std::string> types;

	for (auto it = rows.lower_bound("cxx_plugin:scaled");
	     it != rows.upper_bound("cxx_plugin:scaled"); ++it) {
		assert_non_null(strstr(it->second.object.c_str(), "lkt_cxx_plugin"));
		types.insert(it->second.types);
	}
	assert_int_equal(rows.count("cxx_plugin:scaled"), 2);
	assert_true(types == (std::set<std::string>{ "i64 i64 ", "f64 f64 " }));
	assert_int_equal(rows.count("cxx_plugin:handled"), 1);
	assert_int_equal(rows.count("cxx_plugin:handle"), 2);
	assert_int_equal(dlclose(plugin), 0);
	rows = sites_now();
	assert_int_equal(rows.count("cxx_plugin:scaled"), 0);
	assert_int_equal(rows.count("cxx_plugin:handle"), 0);
}

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(each_site_registered_once),
		cmocka_unit_test(every_site_is_a_nop_or_a_jmp),
		cmocka_unit_test(objdump_sees_a_nop_at_every_site),
		cmocka_unit_test(keys_in_templates_follow_the_key),
		cmocka_unit_test(events_from_every_unit_and_object),
		cmocka_unit_test(span_ends_when_an_exception_leaves_it),
		cmocka_unit_test(plugin_sites_come_and_go),
		cmocka_unit_test(lowkey_list_shows_each_site_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
