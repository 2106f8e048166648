#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Load one of lowkey's HTML pages in headless Chromium and check that it rendered.

  check_page.py CHROMIUM PAGE.html PNG [--expect SELECTOR=N | SELECTOR>=N]... [--colour RRGGBB]...
                [--text STRING]... [--series TITLE=N]...

1. The page is self-contained: its source names no http(s) or protocol-relative resource, and
   Chromium runs with every host name unresolvable, so a fetch would fail and show in its log.
2. Chromium's log (--enable-logging=stderr) has no console message and no network error: the
   pages have no script of their own, so any console line is an error.
3. The DOM after parsing (--dump-dom) holds the expected elements: SELECTOR is tag or tag.class
   (e.g. svg.histogram, rect.bar); the count is exact (=) or a minimum (>=). --text STRING must
   appear in the DOM's text, escaped markup included. --series TITLE=N: the line chart titled
   TITLE (its aria-label) draws exactly N lines (polyline.series).
4. A screenshot of the whole page is not blank: it has more than a few colours, and each --colour
   (a chart's fill) covers at least 40 pixels. Pillow (Debian python3-pil) decodes the PNG.

Exits 0 if all holds, 1 with the reasons otherwise.
"""
import html.parser
import re
import subprocess
import sys

import PIL.Image

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-extensions", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND"]


class Counter(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.counts = {}
        self.text = []
        self.chart = None   # the aria-label of the <svg> being read
        self.lines = {}     # aria-label: polyline.series in it

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        attr = dict(attrs)
        if tag == "svg":
            self.chart = attr.get("aria-label")
        elif tag == "polyline" and "series" in (attr.get("class") or "").split():
            self.lines[self.chart] = self.lines.get(self.chart, 0) + 1
        for name, value in attrs:
            if name == "class" and value:
                for cls in value.split():
                    key = tag + "." + cls
                    self.counts[key] = self.counts.get(key, 0) + 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "svg":
            self.chart = None

    def handle_data(self, data):
        self.text.append(data)


def png_colours(path):
    """{(r, g, b) as bytes: pixels}, width, height of a screenshot (Pillow decodes it)."""
    with PIL.Image.open(path) as image:
        rgb = image.convert("RGB")
        counts = rgb.getcolors(maxcolors=rgb.width * rgb.height)
        return {bytes(c): n for n, c in counts}, rgb.width, rgb.height


def chromium(binary, args, page):
    return subprocess.run([binary] + FLAGS + args + ["file://" + page], capture_output=True, text=True,
                          errors="replace", timeout=120)


def main(argv):
    binary, page, png = argv[1:4]
    expects, colours, texts, series = [], [], [], []
    it = iter(argv[4:])
    for opt in it:
        value = next(it)
        {"--expect": expects, "--colour": colours, "--text": texts, "--series": series}[opt].append(value)
    errors = []

    source = open(page, encoding="utf-8").read()    # raises if the page is not valid UTF-8
    for m in re.finditer(r'''(?:src|href)\s*=\s*["']?\s*((?:https?:)?//[^"' >]*)''', source, re.I):
        errors.append("the page loads %s: it must be self-contained" % m.group(1))

    dom = chromium(binary, ["--enable-logging=stderr", "--v=0", "--dump-dom"], page)
    if dom.returncode != 0:
        errors.append("chromium --dump-dom exited %d: %s" % (dom.returncode, dom.stderr[-2000:]))
    for line in dom.stderr.splitlines():
        if ":CONSOLE" in line or "net::ERR" in line or "Uncaught" in line:
            errors.append("browser log: " + line.strip())

    parsed = Counter()
    parsed.feed(dom.stdout)
    for e in expects:
        m = re.fullmatch(r"([\w.-]+)(>=|=)(\d+)", e)
        key, op, want = m.group(1), m.group(2), int(m.group(3))
        got = parsed.counts.get(key, 0)
        if (op == "=" and got != want) or (op == ">=" and got < want):
            errors.append("%s: %d in the DOM, wanted %s %d" % (key, got, op, want))
    for e in series:
        title, want = e.rsplit("=", 1)
        got = parsed.lines.get(title, 0)
        if got != int(want):
            errors.append("chart %r draws %d lines, wanted %s" % (title, got, want))
    text = "".join(parsed.text)
    for t in texts:
        if t not in text:
            errors.append("text %r is not in the page" % t)

    shot = chromium(binary, ["--screenshot=" + png, "--window-size=1040,3000"], page)
    if shot.returncode != 0:
        errors.append("chromium --screenshot exited %d: %s" % (shot.returncode, shot.stderr[-2000:]))
    else:
        found, width, height = png_colours(png)
        if len(found) < 8:
            errors.append("the screenshot has %d colours: blank" % len(found))
        for c in colours:
            n = found.get(bytes.fromhex(c), 0)
            if n < 40:
                errors.append("colour #%s covers %d pixels of the screenshot: a chart did not render" % (c, n))
        print("%s: %dx%d screenshot, %d colours; DOM: %s" % (page, width, height, len(found),
              ", ".join("%s %d" % (k, parsed.counts.get(re.split("[>=]", k)[0], 0)) for k in expects)))
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
