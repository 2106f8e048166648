// SPDX-License-Identifier: MIT
/*
 * One OTLP/HTTP request at a time through libcurl: a POST of application/x-protobuf on a
 * connection kept from request to request, the answer's status, Retry-After and partial
 * success. Each sender thread of the exporter has one of its own.
 */
#include "otlp_internal.h"

#include <internal/failf.h>

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* An answer's body is read up to this (a partial success, an error's google.rpc.Status). */
#define OTLP_BODY_MAX 65536

struct otlp_http {
	CURL *curl;
	struct curl_slist *headers;
	uint8_t body[OTLP_BODY_MAX];
	size_t body_len;
	char retry_after[64];
	const _Atomic int64_t *abort_at_ms;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct otlp_http *h = arg;
	size_t len = size * nmemb, room = sizeof(h->body) - h->body_len;

	memcpy(h->body + h->body_len, data, len < room ? len : room);
	h->body_len += len < room ? len : room;
	return len;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *arg)
{
	struct otlp_http *h = arg;
	size_t len = size * nmemb;
	static const char name[] = "retry-after:";

	if (len > sizeof(name) - 1 && !strncasecmp(line, name, sizeof(name) - 1)) {
		size_t vlen = len - (sizeof(name) - 1);

		if (vlen >= sizeof(h->retry_after))
			vlen = sizeof(h->retry_after) - 1;
		memcpy(h->retry_after, line + sizeof(name) - 1, vlen);
		while (vlen &&
		       (h->retry_after[vlen - 1] == '\r' || h->retry_after[vlen - 1] == '\n'))
			vlen--;
		h->retry_after[vlen] = '\0';
	}
	return len;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct otlp_http *h = arg;
	int64_t at = atomic_load_explicit(h->abort_at_ms, memory_order_relaxed);
	struct timespec now;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (!at)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 >= at;
}

static int add_header(struct otlp_http *h, const char *key, const char *value)
{
	struct curl_slist *l;
	char *line;

	if (asprintf(&line, "%s: %s", key, value) < 0)
		return -ENOMEM;
	l = curl_slist_append(h->headers, line);
	free(line);
	if (!l)
		return -ENOMEM;
	h->headers = l;
	return 0;
}

static int set_headers(struct otlp_http *h, const struct otlp_kv *headers, size_t n, bool gzip)
{
	int ret = add_header(h, "Content-Type", "application/x-protobuf");

	for (size_t i = 0; !ret && i < n; i++)
		ret = add_header(h, headers[i].key, headers[i].value);
	if (!ret && gzip)
		ret = add_header(h, "Content-Encoding", "gzip");
	/* No "Expect: 100-continue" round trip before larger bodies. */
	if (!ret)
		ret = add_header(h, "Expect", "");
	return ret;
}

struct otlp_http *otlp_http_new(const char *url, const struct otlp_kv *headers, size_t nheaders,
				bool gzip, const _Atomic int64_t *abort_at_ms, char *err,
				size_t errlen)
{
	struct otlp_http *h;

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc) {
		lk__failf(err, errlen, -EIO, "libcurl: %s", curl_easy_strerror(curl_init_rc));
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (!h || !(h->curl = curl_easy_init()) || set_headers(h, headers, nheaders, gzip)) {
		lk__failf(err, errlen, -ENOMEM, "out of memory");
		otlp_http_free(h);
		return NULL;
	}
	h->abort_at_ms = abort_at_ms;
	curl_easy_setopt(h->curl, CURLOPT_URL, url);
	curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h->curl, CURLOPT_XFERINFODATA, h);
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->headers);
	curl_easy_setopt(h->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, h);
	curl_easy_setopt(h->curl, CURLOPT_USERAGENT, "lowkey-otlp");
	/* The endpoint names the collector: a proxy from the environment would not be it. */
	curl_easy_setopt(h->curl, CURLOPT_NOPROXY, "*");
	return h;
}

void otlp_http_post(struct otlp_http *h, const uint8_t *body, size_t len, long timeout_ms,
		    struct otlp_http_result *res)
{
	CURLcode rc;

	h->body_len = 0;
	h->retry_after[0] = '\0';
	res->status = 0;
	res->retry_after_ms = -1;
	res->rejected = 0;
	res->error[0] = '\0';
	curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
	rc = curl_easy_perform(h->curl);
	if (rc) {
		snprintf(res->error, sizeof(res->error), "%s", curl_easy_strerror(rc));
		return;
	}
	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &res->status);
	if (h->retry_after[0])
		res->retry_after_ms = otlp_retry_after_ms(h->retry_after, time(NULL));
	if (res->status >= 200 && res->status < 300)
		res->rejected = otlp_response_rejected(h->body, h->body_len);
	else
		snprintf(res->error, sizeof(res->error), "HTTP status %ld", res->status);
}

void otlp_http_free(struct otlp_http *h)
{
	if (!h)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	curl_slist_free_all(h->headers);
	free(h);
}

bool otlp_http_retryable(long status)
{
	return status == 0 || status == 429 || status == 502 || status == 503 || status == 504;
}

long otlp_retry_after_ms(const char *value, time_t now)
{
	const char *p = value;
	char *end;
	long secs;
	time_t when;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p >= '0' && *p <= '9') {
		errno = 0;
		secs = strtol(p, &end, 10);
		while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
			end++;
		if (errno || *end || secs < 0 || secs > 86400)
			return -1;
		return secs * 1000;
	}
	when = curl_getdate(p, NULL);
	if (when == (time_t)-1)
		return -1;
	return when > now ? (long)(when - now) * 1000 : 0;
}
