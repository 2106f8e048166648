// SPDX-License-Identifier: MIT
/*
 * Keys and probes as users write them in C, every case users meet: two sites with an
 * initialized variable, a variable-length array or a cleanup variable between them (Clang before
 * 17 checked every asm goto against every label of the function), probes of every argument count
 * and type, spans, counters, batches. Compiled warning-free by test_header_hygiene (tests/hygiene.sh)
 * in C99, C11, C17 and GNU11 with every compiler at hand; never run.
 */
#include <lowkey/lowkey.h>

LK_DEFINE_KEY_FALSE(dialect_key);
LK_DEFINE_KEY_TRUE(dialect_key_on);
static LK_DEFINE_KEY_FALSE(dialect_static_key);

struct dialect_thing {
	int x;
};

int dialect_two_probes(int x);
int dialect_two_keys(int x);
int dialect_vla(int n);
int dialect_cleanup(int n);
int dialect_span(int x);
int dialect_every_type(const char *s, struct dialect_thing *t);
int dialect_batch(void);

int dialect_two_probes(int x)
{
	LK_PROBE(a, b, x);
	int y = x + 1;
	LK_PROBE(a, c, y);
	return y;
}

int dialect_two_keys(int x)
{
	if (lk_branch_unlikely(&dialect_key))
		x++;
	int y = x + 1;
	if (lk_branch_likely(&dialect_key_on))
		y++;
	if (lk_branch_unlikely(&dialect_static_key))
		y--;
	return y;
}

int dialect_vla(int n)
{
	LK_PROBE(vla, before, n);
	int vla[n > 0 ? n : 1];
	vla[0] = n;
	LK_PROBE(vla, after, vla[0]);
	return vla[0];
}

static void dialect_release(int *p)
{
	(void)p;
}

int dialect_cleanup(int n)
{
	LK_PROBE(cleanup, before, n);
	__attribute__((cleanup(dialect_release))) int held = n;
	LK_PROBE(cleanup, after, held);
	return held;
}

int dialect_span(int x)
{
	LK_SPAN(span, outer);
	LK_COUNTER(span, value, x);
	LK_COUNTER(span, ratio, 0.5 * x);
	{
		LK_SPAN(span, inner);
		LK_PROBE(span, nothing);
		if (x > 3)
			return x;
	}
	LK_SPAN_BEGIN(span, across);
	LK_SPAN_END(span, across);
	return -x;
}

int dialect_every_type(const char *s, struct dialect_thing *t)
{
	char buf[8] = "buf";
	unsigned char uc = 1;
	short sh = -2;
	long l = -3;
	unsigned long long ull = 4;
	_Bool flag = 1;
	float f = 1.5f;

	LK_PROBE(types, all8, uc, sh, l, ull, flag, f, s, t);
	LK_PROBE(types, arrays, buf, (char *)buf, (void *)0, 2.5, 'c');
	LK_PROBE(types, one, t->x);
	LK_PROBE(types, same_line, t->x + 1);
	return t->x;
}

int dialect_batch(void)
{
	struct lk_key_change changes[2];

	changes[0].key = LK_KEY(&dialect_key);
	changes[0].op = LK_KEY_ENABLE;
	changes[1].key = LK_KEY(&dialect_key_on);
	changes[1].op = LK_KEY_DISABLE;
	return lk_key_apply(changes, 2) + lk_key_sites(&dialect_key) +
	       (int)lk_key_enabled(&dialect_key_on);
}
