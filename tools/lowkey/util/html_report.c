// SPDX-License-Identifier: MIT
/* A command's page made from its own JSON report (html_report.h). */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "builtin.h"
#include "html.h"
#include "html_report.h"
#include "internal/json_read.h"
#include "internal/outfile.h"

int html_report_page(const char *cmd, const char *json, size_t len, const char *out_path,
		     void (*page)(FILE *f, const struct lk__jr_value *root))
{
	char err[PATH_MAX + 200];
	struct lk__jr_value *root = lk__jr_parse(json, len, err, sizeof(err));
	FILE *f;
	int rc;

	if (!root) {
		cli_error(cmd, NULL, "cannot read back the report for the page: %s", err);
		return CLI_EXIT_FAIL;
	}
	f = strcmp(out_path, "-") == 0 ? stdout : lk__out_fopen(out_path, err, sizeof(err));
	if (!f) {
		cli_error(cmd, "choose a writable place with --html", "%s", err);
		lk__jr_free(root);
		return CLI_EXIT_FAIL;
	}
	page(f, root);
	rc = lkh_page_end(f);
	if (f != stdout && fclose(f) != 0 && !rc)
		rc = -errno;
	if (rc)
		cli_error(cmd, NULL, "writing %s failed: %s", out_path, strerror(-rc));
	lk__jr_free(root);
	return rc ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
