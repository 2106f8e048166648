// SPDX-License-Identifier: MIT
/*
 * Strings from a trace reach the HTML pages as text, never as markup, and as valid UTF-8.
 *
 * lkh_text() on its own: markup, quotes, control characters, invalid and overlong UTF-8, and
 * valid multi-byte characters. Then end to end: a trace whose main thread is named
 * "</svg><script>" and whose counter's name is rewritten to "</svg><script>alert(1)</script>\xff"
 * gives a page with no <script> element, its SVG elements balanced, the names there as escaped
 * text, and valid UTF-8 throughout.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "cli/run.h"
#include "html.h"
#include "internal/json_read.h"

#define HOSTILE "</svg><script>alert(1)</script>\xff"

/* Whether s (n bytes) is valid UTF-8 (RFC 3629), written here apart from html.c's. */
static bool valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned int c = s[i], len = c < 0x80		? 1 :
					     (c & 0xe0) == 0xc0 ? 2 :
					     (c & 0xf0) == 0xe0 ? 3 :
					     (c & 0xf8) == 0xf0 ? 4 :
								  0;
		uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;

		if (!len || i + len > n)
			return false;
		for (unsigned int k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		i += len;
	}
	return true;
}

/* lkh_text(s) as a string (the caller frees it). */
static char *escaped(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	lkh_text(f, s);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void expect_escaped(const char *in, const char *want)
{
	char *got = escaped(in);

	if (strcmp(got, want) != 0)
		print_error("lkh_text(\"%s\") = \"%s\", wanted \"%s\"\n", in, got, want);
	assert_string_equal(got, want);
	assert_true(valid_utf8((const unsigned char *)got, strlen(got)));
	free(got);
}

static void text_is_escaped(void **state)
{
	(void)state;
	expect_escaped(HOSTILE, "&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;\xef\xbf\xbd");
	expect_escaped("a&b \"q\" 'r'", "a&amp;b &quot;q&quot; &#39;r&#39;");
	expect_escaped("tab\tnl\nbell\a del\x7f", "tab\tnl\nbell\xef\xbf\xbd del\xef\xbf\xbd");
	/* valid: é, €, U+1F600; a C1 control (U+0085) is replaced like C0's */
	expect_escaped("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
		       "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	expect_escaped("\xc2\x85", "\xef\xbf\xbd");
	/* invalid: overlong '<' (which a lax decoder would read as markup), a surrogate, past
	 * U+10FFFF, a lone continuation byte, a sequence cut short: one U+FFFD per byte */
	expect_escaped("\xc0\xbc", "\xef\xbf\xbd\xef\xbf\xbd");
	expect_escaped("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	expect_escaped("\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	expect_escaped("\x80x", "\xef\xbf\xbdx");
	expect_escaped("\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd");
	expect_escaped("", "");
}

/* lkh_text_n: a NUL inside the bytes is a control character too. */
static void text_n_replaces_nul(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	lkh_text_n(f, "a\0<", 3);
	assert_int_equal(fclose(f), 0);
	assert_string_equal(buf, "a\xef\xbf\xbd&lt;");
	free(buf);
}

/* The JSON the locks and bench pages are drawn from: escapes decoded, malformed text refused. */
static void json_is_read(void **state)
{
	static const char text[] =
		"{\"a\": [1, -2.5e3, true, null], \"s\": \"\\u003cscript\\u003e \\ud83d\\ude00 "
		"\\udc00 \\\"q\\\" \\n\", \"o\": {\"x\": \"y\"}}";
	static const char *const bad[] = { "",	      "{",   "[1,]",  "{\"a\" 1}", "\"\\u12\"",
					   "\"\\x\"", "1 2", "[tru]", "\"a\nb\"",  "{\"a\":1,}" };
	char err[128], deep[200];
	struct lk__jr_value *v;

	(void)state;
	v = lk__jr_parse(text, strlen(text), err, sizeof(err));
	assert_non_null(v);
	assert_int_equal(lk__jr_get(v, "a")->n, 4);
	assert_true(lk__jr_get(v, "a")->items[1].number == -2500);
	assert_true(lk__jr_get(v, "a")->items[2].boolean);
	assert_int_equal(lk__jr_get(v, "a")->items[3].type, LK__JR_NULL);
	assert_string_equal(lk__jr_string(v, "s"),
			    "<script> \xf0\x9f\x98\x80 \xef\xbf\xbd \"q\" \n");
	assert_string_equal(lk__jr_string(lk__jr_get(v, "o"), "x"), "y");
	assert_null(lk__jr_get(v, "missing"));
	assert_true(isnan(lk__jr_number(v, "s")));
	lk__jr_free(v);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = lk__jr_parse(bad[i], strlen(bad[i]), err, sizeof(err));
		if (v)
			print_error("'%s' was read\n", bad[i]);
		assert_null(v);
		assert_non_null(strstr(err, "JSON: "));
	}
	memset(deep, '[', sizeof(deep)); /* nested past the limit */
	assert_null(lk__jr_parse(deep, sizeof(deep), err, sizeof(err)));
	assert_non_null(strstr(err, "deep"));
}

static struct lkt_run out;

/* The bytes of path, NUL-terminated (the caller frees them). */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static size_t occurrences(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Replace every "latency_us" in the trace's class list (its index, else its metadata) with HOSTILE. */
static void rename_counter(const char *dir)
{
	static const char *const files[] = { ".lowkey-index", "metadata" };

	for (size_t i = 0; i < 2; i++) {
		char path[512];
		struct stat st;
		size_t len;
		char *text;
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (stat(path, &st) != 0)
			continue;
		text = slurp(path, &len);
		if (!strstr(text, "latency_us")) {
			free(text);
			continue;
		}
		f = fopen(path, "wb");
		assert_non_null(f);
		for (char *p = text, *hit; *p; p = hit + strlen("latency_us")) {
			hit = strstr(p, "latency_us");
			if (!hit) {
				fputs(p, f);
				break;
			}
			fwrite(p, 1, (size_t)(hit - p), f);
			fputs(HOSTILE, f);
		}
		assert_int_equal(fclose(f), 0);
		free(text);
		return;
	}
	fail_msg("no file of %s names latency_us", dir);
}

static void hostile_trace_gives_text(void **state)
{
	char dir[] = "/tmp/lkt-html-XXXXXX", trace[300], page[300];
	size_t len;
	char *html;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(trace, sizeof(trace), "%s/t.ctf", dir);
	snprintf(page, sizeof(page), "%s/page.html", dir);
	lkt_sh(&out, "%s trace -o %s -- %s '</svg><script>'", LOWKEY, trace, HTML_TARGET);
	lkt_expect(&out, 0, NULL);
	rename_counter(trace);
	lkt_sh(&out, "%s report --html %s %s", LOWKEY, page, trace);
	lkt_expect(&out, 0, NULL);

	html = slurp(page, &len);
	assert_int_equal(strlen(html), len); /* no NUL byte */
	assert_true(valid_utf8((const unsigned char *)html, len));
	assert_null(strstr(html, "<script"));
	assert_int_equal(occurrences(html, "<svg"), occurrences(html, "</svg>"));
	assert_true(occurrences(html, "<svg") >= 4); /* histograms, timeline, counters */
	/* the counter: its chart's title, its table row */
	assert_true(
		occurrences(html,
			    "app:&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;\xef\xbf\xbd") >=
		2);
	/* the main thread: its lane on the timeline, its row of the threads' table */
	assert_true(occurrences(html, "&lt;/svg&gt;&lt;script&gt;") >= 4);
	free(html);
	lkt_sh(&out, "rm -rf %s", dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(text_is_escaped),
		cmocka_unit_test(text_n_replaces_nul),
		cmocka_unit_test(json_is_read),
		cmocka_unit_test(hostile_trace_gives_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
