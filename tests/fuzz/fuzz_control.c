// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for the control protocol's decoder (src/control/protocol.c), the code that reads
 * every message a control client sends a traced process.
 *
 * Properties checked on every input, besides what AddressSanitizer and UBSan check (no read past
 * the input, no undefined behaviour):
 *   - a refused input gets an error code from the documented set and a message;
 *   - an accepted input re-encodes to exactly its own bytes (one encoding per message), and its
 *     strings lie inside the input and end at their NUL.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc \
 *         tests/fuzz/fuzz_control.c src/control/protocol.c -o fuzz_control
 *   ./fuzz_control -max_len=8300 tests/fuzz/corpus/control     (grows the corpus in place)
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal/control_protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int condition)
{
	if (!condition)
		__builtin_trap();
}

static void check_string(const char *s, const uint8_t *data, size_t size)
{
	must(s != NULL);
	must((const uint8_t *)s >= data && (const uint8_t *)s < data + size);
	must(memchr(s, 0, size - (size_t)((const uint8_t *)s - data)) != NULL);
}

/* Every string field the decoder set points into the input. */
static void check_strings(const struct lk__ctl_msg *m, const uint8_t *data, size_t size)
{
	switch (m->type) {
	case LK_CTL_RULE:
		check_string(m->rule.glob, data, size);
		break;
	case LK_CTL_START:
		check_string(m->start.path, data, size);
		must(m->start.path[0] == '/');
		must(m->start.output <= LK_CTL_OUT_DIR);
		must(lk__ctl_request_fds(m) == m->start.output);
		break;
	case LK_CTL_SNAPSHOT:
		check_string(m->snapshot.path, data, size);
		must(m->snapshot.output <= LK_CTL_OUT_DIR);
		must(lk__ctl_request_fds(m) == m->snapshot.output);
		break;
	case LK_CTL_RESULT:
		check_string(m->result.message, data, size);
		break;
	case LK_CTL_STATS:
	case LK_CTL_EXIT:
	case LK_CTL_ENV_FINISH:
		check_string(m->stats.path, data, size);
		check_string(m->stats.message, data, size);
		break;
	case LK_CTL_STATUS_REPLY:
		check_string(m->status.path, data, size);
		check_string(m->status.version, data, size);
		break;
	case LK_CTL_SITE:
		check_string(m->site.provider, data, size);
		check_string(m->site.event, data, size);
		check_string(m->site.file, data, size);
		check_string(m->site.arg_names, data, size);
		check_string(m->site.object, data, size);
		must(m->site.nargs <= 8 && m->site.kind >= 1 && m->site.kind <= 4);
		break;
	case LK_CTL_LOCK:
		check_string(m->lock.name, data, size);
		must(m->lock.kind >= 1 && m->lock.kind <= 3);
		break;
	case LK_CTL_PERF:
		check_string(m->perf.event, data, size);
		must(m->perf.event[0] != 0);
		break;
	case LK_CTL_ENV_START:
		check_string(m->env_start.message, data, size);
		check_string(m->env_start.path, data, size);
		check_string(m->env_start.ctf_dir, data, size);
		break;
	case LK_CTL_ENV_RULE:
		check_string(m->env_rule.glob, data, size);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t again[LK_CTL_MAX_MSG];
	struct lk__ctl_msg m, m2;
	char err[256] = "";
	int rc = lk__ctl_decode(data, size, &m, err, sizeof(err));
	int n;

	if (rc) {
		must(rc == -EBADMSG || rc == -EPROTONOSUPPORT || rc == -EMSGSIZE ||
		     rc == -EOPNOTSUPP || rc == -EINVAL);
		must(err[0] != 0);
		return 0;
	}
	check_strings(&m, data, size);
	n = lk__ctl_encode(&m, again, sizeof(again));
	must(n >= 0 && (size_t)n == size && memcmp(again, data, size) == 0);
	must(lk__ctl_decode(again, (size_t)n, &m2, err, sizeof(err)) == 0 && m2.type == m.type &&
	     m2.seq == m.seq);
	return 0;
}
