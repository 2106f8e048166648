// SPDX-License-Identifier: MIT
/*
 * Writes the seed inputs of the control protocol's corpus: one valid message of every type and a
 * few deliberately broken ones. Run once to (re)seed: seed_control tests/fuzz/corpus/control.
 * The fuzzer then grows the corpus from these; `-merge=1` keeps it small.
 */
#include <stdio.h>
#include <string.h>

#include "internal/control_protocol.h"

static const char *dir;
static int count;

static void save(const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len) {
		perror(path);
		return;
	}
	fclose(f);
	count++;
}

static int encode(const struct lk__ctl_msg *m, unsigned char *buf)
{
	int n = lk__ctl_encode(m, buf, LK_CTL_MAX_MSG);

	if (n < 0)
		fprintf(stderr, "cannot encode a %s message\n", lk__ctl_type_name(m->type));
	return n;
}

static void valid(const char *name, const struct lk__ctl_msg *m)
{
	unsigned char buf[LK_CTL_MAX_MSG];
	int n = encode(m, buf);

	if (n > 0)
		save(name, buf, (size_t)n);
}

int main(int argc, char **argv)
{
	unsigned char buf[LK_CTL_MAX_MSG];
	struct lk__ctl_msg m = { .seq = 7 };
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: seed_control DIR\n");
		return 2;
	}
	dir = argv[1];

	m.type = LK_CTL_RULE;
	m.rule = (struct lk__ctl_rule){ 1, LK_CTL_RULE_SESSION, "db:*" };
	valid("rule", &m);
	m.type = LK_CTL_START;
	m.start = (struct lk__ctl_start){ 1,	   LK_CTL_START_STOP_ON_CLOSE, 1, 100,
					  1 << 20, "/tmp/trace.json" };
	valid("start", &m);
	m.start = (struct lk__ctl_start){
		0, LK_CTL_START_STOP_ON_CLOSE, 0, 100, 0, "/tmp/trace.ctf", LK_CTL_OUT_DIR
	};
	valid("start-dir", &m);
	m.type = LK_CTL_SNAPSHOT;
	m.snapshot = (struct lk__ctl_snapshot){ "", LK_CTL_OUT_PATH };
	valid("snapshot", &m);
	m.snapshot = (struct lk__ctl_snapshot){ "/tmp/slow.ctf", LK_CTL_OUT_DIR };
	valid("snapshot-dir", &m);
	m.type = LK_CTL_STOP;
	valid("stop", &m);
	m.type = LK_CTL_STATUS;
	valid("status", &m);
	m.type = LK_CTL_LIST;
	valid("list", &m);
	m.type = LK_CTL_LOCKS;
	valid("locks", &m);
	m.type = LK_CTL_COUNTERS;
	valid("counters", &m);
	m.type = LK_CTL_LOCK;
	m.lock = (struct lk__ctl_lock){ 1, 600, 0, 14, 65310, 614970, 0, "table" };
	valid("lock", &m);
	m.type = LK_CTL_PERF;
	m.perf = (struct lk__ctl_perf){ 2, 0, 1234567, 2000000, 1000000, "cycles:u" };
	valid("perf", &m);
	m.type = LK_CTL_RESULT;
	m.result = (struct lk__ctl_result){ -22, 3, "lk_probe_enable: the glob is NULL or empty" };
	valid("result", &m);
	m.type = LK_CTL_STATUS_REPLY;
	m.status = (struct lk__ctl_status){ 1234, 1,	 2, 3, 10,	     4,	     1, 1000,
					    5,	  65536, 2, 0, "/tmp/t.ctf", "0.1.0" };
	valid("status-reply", &m);
	m.type = LK_CTL_SITE;
	m.site = (struct lk__ctl_site){ 17, 1,	    3,	     1,	     0x541,
					42, "db",   "query", "db.c", "id, name, ptr",
					"", "query" };
	valid("site", &m);
	m.type = LK_CTL_STATS;
	m.stats = (struct lk__ctl_stats){ 0, 100, 2, 4096, 3, "/tmp/t.ctf", "" };
	valid("stats", &m);
	m.type = LK_CTL_EXIT;
	m.stats = (struct lk__ctl_stats){ -28, 100, 0, 4096, 1, "/tmp/t.ctf", "disk full" };
	valid("exit", &m);
	m.type = LK_CTL_ENV_START;
	m.env_start = (struct lk__ctl_env_start){ 0, "", "/tmp/t.json", "/tmp/t.json.ctf-abc123" };
	valid("env-start", &m);
	m.type = LK_CTL_ENV_RULE;
	m.env_rule = (struct lk__ctl_env_rule){ 0, 2, "db:debug*" };
	valid("env-rule", &m);
	m.type = LK_CTL_ENV_FINISH;
	m.stats = (struct lk__ctl_stats){ 0, 5, 0, 512, 1, "/tmp/t.ctf", "" };
	valid("env-finish", &m);

	/* broken ones: each is refused for a different reason */
	m.type = LK_CTL_RULE;
	m.rule = (struct lk__ctl_rule){ 1, 0, "app:*" };
	n = encode(&m, buf);
	save("short", buf, 10);
	save("truncated-string", buf, (size_t)n - 2);
	buf[n] = 'x';
	buf[8] = (unsigned char)(n + 1);
	save("trailing", buf, (size_t)n + 1);
	n = encode(&m, buf);
	buf[n - 1] = 'x'; /* the NUL */
	save("no-nul", buf, (size_t)n);
	n = encode(&m, buf);
	buf[16] = 2; /* enable: not a boolean */
	save("bad-bool", buf, (size_t)n);
	n = encode(&m, buf);
	buf[4] = 9; /* version */
	save("version", buf, (size_t)n);
	n = encode(&m, buf);
	buf[0] ^= 0xff; /* magic */
	save("magic", buf, (size_t)n);
	n = encode(&m, buf);
	buf[6] = 200; /* type */
	save("unknown-type", buf, (size_t)n);
	m.type = LK_CTL_START;
	m.start = (struct lk__ctl_start){ 0, 0, 0, 0, 0, "relative/path" };
	valid("relative-path-raw", &m);
	m.type = LK_CTL_SNAPSHOT;
	m.snapshot = (struct lk__ctl_snapshot){ "/tmp/x.ctf", LK_CTL_OUT_DIR + 1 };
	valid("unknown-output-raw", &m);
	printf("%d seeds written to %s\n", count, dir);
	return 0;
}
