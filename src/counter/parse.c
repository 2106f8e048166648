// SPDX-License-Identifier: MIT
/*
 * perf's event-list syntax: "a,b:u,{c,d}:k,pmu/term=1,term2=2/u".
 *
 * Commas separate events except inside a PMU's /.../ terms; braces make a group and may carry
 * modifiers for all members; a trailing ":mods" (or, for a PMU event, letters right after the
 * closing '/') are perf's modifiers when every letter is one. Anything else after a colon belongs to
 * the name (libpfm4's EVENT:UMASK, a tracepoint's subsystem:name).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "counter/counter_internal.h"

#define MODIFIER_LETTERS "ukhGHIDepPSWb"

int lk__modifiers_parse(const char *s, struct lk__modifiers *mods, bool *has_ukh)
{
	for (; *s; s++) {
		switch (*s) {
		case 'u':
			mods->user = true;
			*has_ukh = true;
			break;
		case 'k':
			mods->kernel = true;
			*has_ukh = true;
			break;
		case 'h':
			mods->hv = true;
			*has_ukh = true;
			break;
		case 'G':
			mods->guest = true;
			break;
		case 'H':
			mods->host = true;
			break;
		case 'I':
			mods->exclude_idle = true;
			break;
		case 'D':
			mods->pinned = true;
			break;
		case 'e':
			mods->exclusive = true;
			break;
		case 'p':
			mods->precise++;
			break;
		case 'P':
			mods->precise = 3;
			break;
		/* Sampling and grouping hints with no effect on counting. */
		case 'S':
		case 'W':
		case 'b':
			break;
		default:
			return lk__fail(-EINVAL,
					"unknown event modifier '%c' in ':%s' (perf's modifiers "
					"are u k h G H I D e p)",
					*s, s);
		}
	}
	if (mods->precise > 3)
		return lk__fail(-EINVAL, "too many 'p' modifiers (at most ppp)");
	return 0;
}

static bool all_modifier_letters(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!strchr(MODIFIER_LETTERS, s[i]))
			return false;
	return true;
}

/*
 * Where the modifiers of "base:mods" or "pmu/terms/mods" start (0: none), and how long the base
 * is.
 */
static size_t split_modifiers(const char *text, size_t *base_len)
{
	const char *slash = strchr(text, '/'), *colon;

	*base_len = strlen(text);
	if (slash) {
		const char *close = strchr(slash + 1, '/');

		if (!close || !close[1])
			return 0;
		*base_len = (size_t)(close + 1 - text);
		return *base_len + (close[1] == ':');
	}
	colon = strrchr(text, ':');
	if (!colon || !all_modifier_letters(colon + 1, strlen(colon + 1)))
		return 0;
	*base_len = (size_t)(colon - text);
	return *base_len + 1;
}

static int add_spec(struct lk__event_list *list, const char *start, size_t len, unsigned group,
		    const char *group_mods, const char *whole, size_t col)
{
	struct lk__event_spec *spec, *grown;
	size_t mods, base_len;

	while (len && isspace((unsigned char)*start))
		start++, len--, col++;
	while (len && isspace((unsigned char)start[len - 1]))
		len--;
	if (len == 0)
		return lk__fail(-EINVAL, "event list '%s': empty event at column %zu", whole,
				col + 1);
	if (list->n >= LK__COUNTERS_MAX_EVENTS)
		return lk__fail(-EINVAL, "event list '%s': more than %d events", whole,
				LK__COUNTERS_MAX_EVENTS);
	grown = realloc(list->specs, (list->n + 1) * sizeof(*grown));
	if (!grown)
		return lk__fail(-ENOMEM, "out of memory parsing events");
	list->specs = grown;
	spec = &list->specs[list->n];
	memset(spec, 0, sizeof(*spec));
	spec->group = group;
	spec->text = strndup(start, len);
	if (!spec->text)
		return lk__fail(-ENOMEM, "out of memory parsing events");
	list->n++;

	mods = split_modifiers(spec->text, &base_len);
	spec->base = strndup(spec->text, base_len);
	if (!spec->base)
		return lk__fail(-ENOMEM, "out of memory parsing events");
	if (mods) {
		int err = lk__modifiers_parse(spec->text + mods, &spec->mods, &spec->has_mods);

		if (err) {
			lk__fail_append(" (event '%s')", spec->text);
			return err;
		}
	}
	if (group_mods && !spec->has_mods) {
		int err = lk__modifiers_parse(group_mods, &spec->mods, &spec->has_mods);

		if (err)
			return err;
	} else if (group_mods) {
		/* The event's own u/k/h win; the group's other modifiers still apply. */
		struct lk__modifiers gm = { 0 };
		bool ignored = false;

		lk__modifiers_parse(group_mods, &gm, &ignored);
		spec->mods.guest |= gm.guest;
		spec->mods.host |= gm.host;
		spec->mods.exclude_idle |= gm.exclude_idle;
		spec->mods.pinned |= gm.pinned;
		spec->mods.exclusive |= gm.exclusive;
	}
	if (spec->base[0] == '\0')
		return lk__fail(-EINVAL, "event list '%s': '%s' has modifiers but no event", whole,
				spec->text);
	return 0;
}

/* End of the event starting at s: the first ',' or '}' outside a PMU's /.../, or the end. */
static const char *event_end(const char *s, const char **unterminated)
{
	bool in_terms = false;
	const char *open = NULL;

	*unterminated = NULL;
	for (; *s; s++) {
		if (*s == '/') {
			in_terms = !in_terms;
			open = in_terms ? s : NULL;
		} else if (!in_terms && (*s == ',' || *s == '}' || *s == '{')) {
			break;
		}
	}
	if (in_terms)
		*unterminated = open;
	return s;
}

static int parse_group(const char *whole, const char **pos, struct lk__event_list *out)
{
	const char *s = *pos + 1, *close, *mods_end, *bad;
	unsigned group = out->ngroups;
	size_t first = out->n;
	char *group_mods = NULL;
	int err = 0;

	/* Find the group's end and its modifiers first: they apply to every member. */
	close = s;
	while (*close && *close != '}') {
		close = event_end(close, &bad);
		if (bad)
			return lk__fail(-EINVAL, "event list '%s': unterminated '/' at column %zu",
					whole, (size_t)(bad - whole) + 1);
		if (*close == '{')
			return lk__fail(-EINVAL, "event list '%s': groups cannot nest (column %zu)",
					whole, (size_t)(close - whole) + 1);
		if (*close == ',')
			close++;
	}
	if (*close != '}')
		return lk__fail(-EINVAL, "event list '%s': '{' at column %zu is never closed",
				whole, (size_t)(*pos - whole) + 1);
	mods_end = close + 1;
	if (*mods_end == ':') {
		const char *m = mods_end + 1;

		mods_end = m + strcspn(m, ",");
		group_mods = strndup(m, (size_t)(mods_end - m));
		if (!group_mods)
			return lk__fail(-ENOMEM, "out of memory parsing events");
	}

	while (s < close) {
		const char *end = event_end(s, &bad);

		err = add_spec(out, s, (size_t)(end - s), group, group_mods, whole,
			       (size_t)(s - whole));
		if (err)
			goto out;
		if (*end == ',' && end + 1 == close) {
			err = lk__fail(-EINVAL, "event list '%s': empty event at column %zu", whole,
				       (size_t)(close - whole) + 1);
			goto out;
		}
		s = *end == ',' ? end + 1 : end;
	}
	if (out->n == first) {
		err = lk__fail(-EINVAL, "event list '%s': empty group at column %zu", whole,
			       (size_t)(*pos - whole) + 1);
		goto out;
	}
	if (out->n - first > LK__GROUP_MAX) {
		err = lk__fail(-EINVAL, "event list '%s': a group has at most %d events", whole,
			       LK__GROUP_MAX);
		goto out;
	}
	out->ngroups++;
	*pos = mods_end;
out:
	free(group_mods);
	return err;
}

int lk__events_parse(const char *events, bool one_group, struct lk__event_list *out)
{
	const char *s = events, *bad;
	int err = 0;

	memset(out, 0, sizeof(*out));
	for (;;) {
		if (*s == '{') {
			err = parse_group(events, &s, out);
		} else if (*s == '}') {
			err = lk__fail(-EINVAL,
				       "event list '%s': '}' at column %zu closes no group", events,
				       (size_t)(s - events) + 1);
		} else {
			const char *end = event_end(s, &bad);

			if (bad) {
				err = lk__fail(-EINVAL,
					       "event list '%s': unterminated '/' at column %zu",
					       events, (size_t)(bad - events) + 1);
			} else {
				err = add_spec(out, s, (size_t)(end - s), out->ngroups, NULL,
					       events, (size_t)(s - events));
				out->ngroups += err == 0;
				s = end;
			}
		}
		if (err || *s == '\0')
			break;
		if (*s != ',') {
			err = lk__fail(-EINVAL,
				       "event list '%s': unexpected '%c' at column %zu (a comma "
				       "missing?)",
				       events, *s, (size_t)(s - events) + 1);
			break;
		}
		s++;
	}
	if (!err && one_group) {
		if (out->n > LK__GROUP_MAX)
			err = lk__fail(-EINVAL, "a group has at most %d events; this list has %zu",
				       LK__GROUP_MAX, out->n);
		for (size_t i = 0; i < out->n; i++)
			out->specs[i].group = 0;
		out->ngroups = 1;
	}
	if (err)
		lk__events_free(out);
	return err;
}

void lk__events_free(struct lk__event_list *list)
{
	for (size_t i = 0; i < list->n; i++) {
		free(list->specs[i].text);
		free(list->specs[i].base);
	}
	free(list->specs);
	memset(list, 0, sizeof(*list));
}
