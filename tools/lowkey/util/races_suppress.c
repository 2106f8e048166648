// SPDX-License-Identifier: MIT
/*
 * Suppressions for `lowkey races`, in ThreadSanitizer's syntax (races.h), so that a file written
 * for TSan can be given as it is. Depends on the C library alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "races.h"

#define LINE_MAX_LEN 4096

/* TSan's kinds that concern what lowkey does not report: read, not used. */
static const char *const other_kinds[] = {
	"thread", "mutex", "signal", "deadlock", "called_from_lib",
};

/* '*' matches any characters, anything else itself; the whole of string is matched. */
static bool glob_match(const char *p, const char *pend, const char *s)
{
	const char *star = NULL, *resume = NULL;

	while (*s) {
		if (p < pend && *p == '*') {
			star = ++p;
			resume = s;
		} else if (p < pend && *p == *s) {
			p++;
			s++;
		} else if (star) {
			p = star;
			s = ++resume;
		} else {
			return false;
		}
	}
	while (p < pend && *p == '*')
		p++;
	return p == pend;
}

/*
 * As TSan's TemplateMatch: a substring unless anchored by a leading ^ or a trailing $; an empty
 * string matches nothing.
 */
bool races_pattern_match(const char *pattern, const char *string)
{
	size_t len = strlen(pattern);
	bool at_start = pattern[0] == '^', at_end = len > at_start && pattern[len - 1] == '$';
	char glob[LINE_MAX_LEN + 3];
	size_t core = len - at_start - at_end, n = 0;

	if (!string || !*string || core > LINE_MAX_LEN)
		return false;
	if (!at_start)
		glob[n++] = '*';
	memcpy(glob + n, pattern + at_start, core);
	n += core;
	if (!at_end)
		glob[n++] = '*';
	return glob_match(glob, glob + n, string);
}

static bool other_kind(const char *kind, size_t len)
{
	for (size_t i = 0; i < sizeof(other_kinds) / sizeof(other_kinds[0]); i++)
		if (strlen(other_kinds[i]) == len && memcmp(other_kinds[i], kind, len) == 0)
			return true;
	return false;
}

static int add_pattern(struct races_suppressions *s, const char *pattern, size_t len, bool top)
{
	struct races_pattern *bigger = realloc(s->patterns, (s->n + 1) * sizeof(*s->patterns));

	if (!bigger)
		return -ENOMEM;
	s->patterns = bigger;
	s->patterns[s->n].text = strndup(pattern, len);
	s->patterns[s->n].top = top;
	if (!s->patterns[s->n].text)
		return -ENOMEM;
	s->n++;
	return 0;
}

/* One line, its end of line cut: 0, or -EINVAL with err saying why. */
static int parse_line(struct races_suppressions *s, char *line, const char *path, unsigned int nr,
		      char *err, size_t errlen)
{
	char *colon, *end;
	bool race, top;
	size_t len;

	while (*line == ' ' || *line == '\t')
		line++;
	end = line + strlen(line);
	while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		*--end = 0;
	if (!*line || *line == '#')
		return 0;
	colon = strchr(line, ':');
	len = colon ? strlen(colon + 1) : 0;
	if (!colon || !len) {
		snprintf(err, errlen, "%s:%u: not KIND:PATTERN (race:PATTERN)", path, nr);
		return -EINVAL;
	}
	race = colon - line == 4 && strncmp(line, "race", 4) == 0;
	top = colon - line == 8 && strncmp(line, "race_top", 8) == 0;
	if (race || top) {
		if (add_pattern(s, colon + 1, len, top) != 0) {
			snprintf(err, errlen, "out of memory reading %s", path);
			return -ENOMEM;
		}
		return 0;
	}
	if (other_kind(line, (size_t)(colon - line)))
		return 0;
	snprintf(err, errlen, "%s:%u: unknown kind '%.*s' (race:PATTERN)", path, nr,
		 (int)(colon - line) > 64 ? 64 : (int)(colon - line), line);
	return -EINVAL;
}

int races_suppressions_read(struct races_suppressions *s, const char *path, char *err,
			    size_t errlen)
{
	char line[LINE_MAX_LEN + 2];
	unsigned int nr = 0;
	FILE *f = fopen(path, "re");
	int ret = 0;

	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return ret;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);

		nr++;
		if (len && line[len - 1] == '\n')
			line[--len] = 0;
		else if (!feof(f)) {
			snprintf(err, errlen, "%s:%u: longer than %u bytes", path, nr,
				 LINE_MAX_LEN);
			ret = -EINVAL;
			break;
		}
		ret = parse_line(s, line, path, nr, err, errlen);
	}
	if (!ret && ferror(f)) {
		ret = -EIO;
		snprintf(err, errlen, "cannot read %s", path);
	}
	fclose(f);
	return ret;
}

void races_suppressions_free(struct races_suppressions *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->patterns[i].text);
	free(s->patterns);
	s->patterns = NULL;
	s->n = 0;
}

/* Whether pattern matches one of the names of a frame or a location. */
static bool names_match(const char *pattern, const struct races_names *f)
{
	const char *names[] = { f->function, f->mangled, f->file, f->module };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i] && races_pattern_match(pattern, names[i]))
			return true;
	return false;
}

static bool pattern_suppresses(const struct races_pattern *p,
			       const struct races_access_names *accesses, size_t n,
			       const struct races_names *locations, size_t nlocations)
{
	for (size_t i = 0; i < n; i++) {
		size_t frames = p->top && accesses[i].n ? 1 : accesses[i].n;

		for (size_t k = 0; k < frames; k++)
			if (names_match(p->text, &accesses[i].frames[k]))
				return true;
	}
	for (size_t i = 0; !p->top && i < nlocations; i++)
		if (names_match(p->text, &locations[i]))
			return true;
	return false;
}

bool races_race_suppressed(const struct races_suppressions *s,
			   const struct races_access_names *accesses, size_t n,
			   const struct races_names *locations, size_t nlocations)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (pattern_suppresses(&s->patterns[i], accesses, n, locations, nlocations))
			return true;
	return false;
}
