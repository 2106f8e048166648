#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The --sched breakdown of `lowkey report --html` holds the text report's figures.

  check_split.py PAGE.html REPORT.txt

REPORT.txt is `lowkey report` of the same trace. The page's table of threads (tid, name, in
spans, on-CPU (switches), runnable, blocked) must have a row for each thread of the text report's
threads table, with the same four figures as written there; its table of span events (span event,
spans, wall, on-CPU (switches), runnable, blocked) the same rows as the text's "spans (time,
--sched)". Some thread must have spent time blocked in its spans (the test program sleeps in
some), so that a split of all zeros cannot pass. Exits 0 if all holds, 1 with the reasons otherwise.
"""
import html.parser
import re
import sys

THREAD_COLS = ["tid", "name", "in spans", "on-CPU (switches)", "runnable", "blocked"]
EVENT_COLS = ["span event", "spans", "wall", "on-CPU (switches)", "runnable", "blocked"]


class Tables(html.parser.HTMLParser):
    """Every <table> as a list of rows, each a list of its cells' text."""

    def __init__(self):
        super().__init__()
        self.tables, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def table(tables, header):
    found = [t for t in tables if t and t[0] == header]
    return found[0][1:] if len(found) == 1 else None


def figures(rest):
    """'1.20 ms 3.25 us 0 ns' -> ['1.20 ms', '3.25 us', '0 ns']"""
    return re.findall(r"-|\S+ (?:ns|us|ms|s)\b", rest)


def text_sections(path):
    threads, events, section = {}, {}, None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("threads "):
            section = "threads"
            continue
        if line.startswith("spans (time, --sched)"):
            section = "split"
            continue
        if not line.startswith("  ") or line.startswith("  ("):
            section = None if not line.startswith("  ") else section
            continue
        if section == "threads":
            m = re.match(r"\s+(\d+)\s+(\S+)\s+\d+\s+\d+\s+(.*)$", line)
            if m:
                f = figures(m.group(3))
                threads[m.group(1)] = [m.group(2), f[0]] + f[-3:]
        elif section == "split":
            m = re.match(r"\s+(\S+)\s+(\d+)\s+(.*)$", line)
            if m:
                events[m.group(1)] = [m.group(2)] + figures(m.group(3))
    return threads, events


def main(argv):
    page, text = argv[1:3]
    parser = Tables()
    parser.feed(open(page, encoding="utf-8").read())
    errors = []
    want_threads, want_events = text_sections(text)
    got_threads = table(parser.tables, THREAD_COLS)
    got_events = table(parser.tables, EVENT_COLS)
    if got_threads is None or got_events is None:
        print("FAIL: the page has no table of the split by thread and by span event")
        return 1
    got_threads = {r[0]: r[1:] for r in got_threads}
    got_events = {r[0]: r[1:] for r in got_events}
    for kind, got, want in (("thread", got_threads, want_threads), ("span event", got_events, want_events)):
        if not want:
            errors.append("the text report has no %s split" % kind)
        if sorted(got) != sorted(want):
            errors.append("%ss: the page has %s, the text report %s" % (kind, sorted(got), sorted(want)))
        for key in sorted(set(got) & set(want)):
            if got[key] != want[key]:
                errors.append("%s %s: the page says %s, the text report %s" % (kind, key, got[key], want[key]))
    if not any(row[-1] not in ("0 ns", "-") for row in got_threads.values()):
        errors.append("no thread was blocked in its spans: the program sleeps in some")
    print("%s: %d threads and %d span events, as in %s" % (page, len(got_threads), len(got_events), text))
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
