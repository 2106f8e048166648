// SPDX-License-Identifier: MIT
/*
 * The exporter's configuration from the environment, as the OpenTelemetry specification reads
 * it (its "OTLP Exporter Configuration" and "Resource SDK" pages), and the resources spans are
 * sent under.
 */
#include "otlp_internal.h"

#include <internal/failf.h>

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define OTLP_DEFAULT_URL "http://localhost:4318/v1/traces"

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* A signal's own variable if set, else the general one (the specification's precedence). */
static const char *env_traces(const char *traces, const char *general, const char **which)
{
	const char *v = env(traces);

	*which = traces;
	if (!v) {
		v = env(general);
		*which = general;
	}
	return v;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* s[0..len) trimmed of blanks and percent-decoded; NULL on a bad escape or ENOMEM (errno). */
static char *decode_part(const char *s, size_t len, bool percent)
{
	char *out, *o;

	while (len && isspace((unsigned char)*s))
		s++, len--;
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	out = o = malloc(len + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (percent && s[i] == '%') {
			int hi = i + 2 < len ? hex_digit(s[i + 1]) : -1;
			int lo = i + 2 < len ? hex_digit(s[i + 2]) : -1;

			if (hi < 0 || lo < 0) {
				free(out);
				errno = EINVAL;
				return NULL;
			}
			*o++ = (char)(hi << 4 | lo);
			i += 2;
			continue;
		}
		*o++ = s[i];
	}
	*o = '\0';
	return out;
}

void otlp_kv_free(struct otlp_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

static int kv_member(const char *m, size_t len, struct otlp_kv *kv)
{
	const char *eq = memchr(m, '=', len);

	if (!eq)
		return -EINVAL;
	kv->key = decode_part(m, (size_t)(eq - m), false);
	kv->value = kv->key ? decode_part(eq + 1, len - (size_t)(eq - m) - 1, true) : NULL;
	if (!kv->key || !kv->value) {
		int ret = errno == ENOMEM ? -ENOMEM : -EINVAL;

		free(kv->key);
		free(kv->value);
		return ret;
	}
	if (!kv->key[0]) {
		free(kv->key);
		free(kv->value);
		return -EINVAL;
	}
	return 0;
}

int otlp_kv_parse(const char *text, const char *what, struct otlp_kv **out, size_t *n, char *err,
		  size_t errlen)
{
	struct otlp_kv *kv = NULL;
	size_t count = 0, cap = 0;
	const char *p = text;

	while (p && *p) {
		const char *end = strchrnul(p, ',');
		size_t len = (size_t)(end - p);
		bool blank = true;
		int ret;

		for (size_t i = 0; i < len; i++)
			blank &= isspace((unsigned char)p[i]) != 0;
		if (!blank) {
			if (count == cap) {
				struct otlp_kv *grown;

				cap = cap ? 2 * cap : 4;
				grown = realloc(kv, cap * sizeof(*kv));
				if (!grown) {
					otlp_kv_free(kv, count);
					return lk__failf(err, errlen, -ENOMEM, "%s: out of memory",
							 what);
				}
				kv = grown;
			}
			ret = kv_member(p, len, &kv[count]);
			if (ret) {
				otlp_kv_free(kv, count);
				return lk__failf(err, errlen, ret,
						 "%s: '%.*s' is not key=value with the value "
						 "percent-encoded (as in 'a=b,c=d%%20e')",
						 what, (int)len, p);
			}
			count++;
		}
		p = *end ? end + 1 : end;
	}
	*out = kv;
	*n = count;
	return 0;
}

static int check_url(const char *url, const char *from, char *err, size_t errlen)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	CURLUcode rc;
	int ret = 0;

	if (!u)
		return lk__failf(err, errlen, -ENOMEM, "out of memory");
	rc = curl_url_set(u, CURLUPART_URL, url, 0);
	if (rc) {
		ret = lk__failf(err, errlen, -EINVAL,
				"OTLP endpoint '%s' (%s): not an http:// or https:// URL (%s)", url,
				from, curl_url_strerror(rc));
		goto out;
	}
	curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
	curl_url_get(u, CURLUPART_HOST, &host, 0);
	if (!scheme || (strcasecmp(scheme, "http") && strcasecmp(scheme, "https")))
		ret = lk__failf(err, errlen, -EINVAL,
				"OTLP endpoint '%s' (%s): not an http:// or https:// URL", url,
				from);
	else if (!host || !*host)
		ret = lk__failf(err, errlen, -EINVAL, "OTLP endpoint '%s' (%s): no host", url,
				from);
out:
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return ret;
}

/* base + "v1/traces", relative to base's path as the specification asks (one '/' between). */
static char *append_traces(const char *base)
{
	size_t len = strlen(base);
	char *url;

	while (len && base[len - 1] == '/')
		len--;
	if (asprintf(&url, "%.*s/v1/traces", (int)len, base) < 0)
		return NULL;
	return url;
}

int otlp_traces_url(const char *endpoint, const char *traces_endpoint, char **url, char *err,
		    size_t errlen)
{
	const char *from = "the traces endpoint given", *given = traces_endpoint, *base = NULL;
	int ret;

	/* What the caller gives wins over the environment; a signal's own URL over a base. */
	if (!given && endpoint) {
		base = endpoint;
		from = "the endpoint given";
	}
	if (!given && !base && (given = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")))
		from = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
	if (!given && !base && (base = env("OTEL_EXPORTER_OTLP_ENDPOINT")))
		from = "OTEL_EXPORTER_OTLP_ENDPOINT";
	if (!given && !base) {
		from = "the default";
		given = OTLP_DEFAULT_URL;
	}
	/* The base is checked as given: appended to, "http://" would read as host "v1". */
	ret = check_url(given ? given : base, from, err, errlen);
	if (ret)
		return ret;
	*url = given ? strdup(given) : append_traces(base);
	if (!*url)
		return lk__failf(err, errlen, -ENOMEM, "out of memory");
	return 0;
}

int otlp_env_gzip(char *err, size_t errlen)
{
	const char *which, *v = env_traces("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
					   "OTEL_EXPORTER_OTLP_COMPRESSION", &which);

	if (!v || !strcasecmp(v, "none"))
		return 0;
	if (!strcasecmp(v, "gzip"))
		return 1;
	return lk__failf(err, errlen, -EINVAL, "%s='%s': the compression is gzip or none", which,
			 v);
}

long otlp_env_timeout_ms(char *err, size_t errlen)
{
	const char *which, *v = env_traces("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
					   "OTEL_EXPORTER_OTLP_TIMEOUT", &which);
	char *end;
	long ms;

	if (!v)
		return 10000;
	errno = 0;
	ms = strtol(v, &end, 10);
	if (errno || end == v || *end || ms <= 0)
		return lk__failf(err, errlen, -EINVAL,
				 "%s='%s': the timeout is a positive number of milliseconds", which,
				 v);
	return ms;
}

long otlp_env_spans(const char *name, long dflt, char *err, size_t errlen)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n <= 0 || n > (1l << 24))
		return lk__failf(err, errlen, -EINVAL, "%s='%s': a number of spans, 1 to 16777216",
				 name, v);
	return n;
}

int otlp_env_headers(struct otlp_kv **out, size_t *n, char *err, size_t errlen)
{
	const char *which, *v = env_traces("OTEL_EXPORTER_OTLP_TRACES_HEADERS",
					   "OTEL_EXPORTER_OTLP_HEADERS", &which);

	*out = NULL;
	*n = 0;
	return v ? otlp_kv_parse(v, which, out, n, err, errlen) : 0;
}

/* Resources */

static int attr_copy(struct otlp_attr *dst, const struct otlp_attr *src)
{
	*dst = *src;
	dst->key = strdup(src->key ? src->key : "");
	if (src->type == OTLP_STRING)
		dst->v.s = strdup(src->v.s ? src->v.s : "");
	if (!dst->key || (src->type == OTLP_STRING && !dst->v.s)) {
		free((char *)dst->key);
		if (src->type == OTLP_STRING)
			free((char *)dst->v.s);
		return -ENOMEM;
	}
	return 0;
}

static void attr_free(struct otlp_attr *a)
{
	free((char *)a->key);
	if (a->type == OTLP_STRING)
		free((char *)a->v.s);
}

/* Set a (copied) in r, replacing an attribute of the same key. */
static int res_set(struct otlp_res *r, const struct otlp_attr *a)
{
	struct otlp_attr copy, *grown;

	if (attr_copy(&copy, a))
		return -ENOMEM;
	for (size_t i = 0; i < r->nattrs; i++) {
		if (!strcmp(r->attrs[i].key, copy.key)) {
			attr_free(&r->attrs[i]);
			r->attrs[i] = copy;
			return 0;
		}
	}
	grown = realloc(r->attrs, (r->nattrs + 1) * sizeof(*grown));
	if (!grown) {
		attr_free(&copy);
		return -ENOMEM;
	}
	r->attrs = grown;
	r->attrs[r->nattrs++] = copy;
	return 0;
}

static int res_set_string(struct otlp_res *r, const char *key, const char *value)
{
	struct otlp_attr a = { .key = key, .type = OTLP_STRING, .v.s = value };

	return res_set(r, &a);
}

static const char *env_kv_find(const struct otlp_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kv[i].key, key))
			return kv[i].value;
	return NULL;
}

static int res_service(struct otlp_res *r, const struct otlp_resource *desc,
		       const struct otlp_kv *env_attrs, size_t nenv)
{
	const char *name = desc->service_name;
	char *fallback = NULL;
	int ret;

	if (!name)
		name = env("OTEL_SERVICE_NAME");
	if (!name)
		name = env_kv_find(env_attrs, nenv, "service.name");
	if (!name) {
		if (asprintf(&fallback, "unknown_service%s%s", desc->executable_name ? ":" : "",
			     desc->executable_name ? desc->executable_name : "") < 0)
			return -ENOMEM;
		name = fallback;
	}
	ret = res_set_string(r, "service.name", name);
	free(fallback);
	return ret;
}

static int res_facts(struct otlp_res *r, const struct otlp_resource *desc)
{
	char host[256] = "";
	const char *host_name = desc->host_name;
	struct otlp_attr pid = { .key = "process.pid", .type = OTLP_INT, .v.i = desc->pid };
	int ret = 0;

	if (!host_name && !gethostname(host, sizeof(host) - 1))
		host_name = host;
	if (host_name && *host_name)
		ret = res_set_string(r, "host.name", host_name);
	if (!ret && desc->pid)
		ret = res_set(r, &pid);
	if (!ret && desc->executable_name)
		ret = res_set_string(r, "process.executable.name", desc->executable_name);
	if (!ret)
		ret = res_set_string(r, "telemetry.sdk.name", "lowkey");
	return ret;
}

int otlp_res_build(struct otlp_res *r, const struct otlp_resource *desc,
		   const struct otlp_kv *env_attrs, size_t nenv)
{
	int ret = res_service(r, desc, env_attrs, nenv);

	if (!ret)
		ret = res_facts(r, desc);
	for (size_t i = 0; !ret && i < nenv; i++)
		if (strcmp(env_attrs[i].key, "service.name"))
			ret = res_set_string(r, env_attrs[i].key, env_attrs[i].value);
	for (unsigned int i = 0; !ret && i < desc->nattrs; i++)
		if (desc->attrs[i].key && strcmp(desc->attrs[i].key, "service.name"))
			ret = res_set(r, &desc->attrs[i]);
	return ret;
}

void otlp_res_release(struct otlp_res *r)
{
	for (size_t i = 0; i < r->nattrs; i++)
		attr_free(&r->attrs[i]);
	free(r->attrs);
	free(r);
}
