// SPDX-License-Identifier: MIT
#include <string.h>

#include "internal/json.h"
#include "internal/utf8.h"

void lk__json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *run;
	size_t n;

	if (!s) {
		fputs("null", f);
		return;
	}
	n = strlen(s);
	fputc('"', f);
	run = p;
	while (*p) {
		unsigned char c = *p;
		size_t k;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7f) {
			p++;
			continue;
		}
		k = c >= 0x80 ? lk__utf8_sequence(p, n - (size_t)(p - (const unsigned char *)s)) : 0;
		if (k && !(k == 2 && lk__utf8_control(p, 2))) {
			p += k;
			continue;
		}
		fwrite(run, 1, (size_t)(p - run), f);
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c <= 0x7f)
			fprintf(f, "\\u%04x", c);
		else if (k)	/* C1, U+0080..U+009F: valid JSON raw, but a terminal's controls */
			fprintf(f, "\\u%04x", p[1]);
		else
			fputs("\\ufffd", f);	/* not UTF-8: JSON text must be */
		p += k ? k : 1;
		run = p;
	}
	fwrite(run, 1, (size_t)(p - run), f);
	fputc('"', f);
}
