#!/usr/bin/python3
"""Checks an HTML report of tfdiff --html / tfdump --html against the DOM
contract (docs/REPORTS.md): one self-contained page, the verdict, the
sections, the marked step. Exit 0 when every assertion holds, else 1 with
the reasons.

  check_html.py PAGE --report diff|dump [--status S] [--step N|--no-step]
                [--sections a,b] [--absent a,b] [--mark-curves N]
                [--mark-heatmap N] [--max-bytes B] [--text-contains T]...
                [--downsampled yes|no] [--count TAG.CLASS:N] [--hostile]
"""
import argparse
import os
import sys
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements = []      # (tag, attrs dict, [ancestor section ids])
        self.stack = []
        self.text = []
        self.verdict_text = None
        self._in_verdict = 0
        self.problems = []

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        sections = [s.get("id") for t, s in self.stack if t == "section"]
        self.elements.append((tag, a, sections))
        if a.get("id") == "verdict":
            self._in_verdict = 1
            self.verdict_text = ""
        elif self._in_verdict and tag not in VOID:
            self._in_verdict += 1
        if tag not in VOID:
            self.stack.append((tag, a))

    def handle_startendtag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        sections = [s.get("id") for t, s in self.stack if t == "section"]
        self.elements.append((tag, a, sections))

    def handle_endtag(self, tag):
        if self._in_verdict:
            self._in_verdict -= 1
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return
        self.problems.append("end tag </%s> without a start" % tag)

    def handle_data(self, data):
        self.text.append(data)
        if self._in_verdict:
            self.verdict_text += data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--report", required=True)
    ap.add_argument("--status")
    ap.add_argument("--step")
    ap.add_argument("--no-step", action="store_true")
    ap.add_argument("--sections", default="")
    ap.add_argument("--absent", default="")
    ap.add_argument("--mark-curves")
    ap.add_argument("--mark-heatmap")
    ap.add_argument("--max-bytes", type=int)
    ap.add_argument("--text-contains", action="append", default=[])
    ap.add_argument("--downsampled", choices=["yes", "no"])
    ap.add_argument("--hostile", action="store_true",
                    help="the name of mk_html_hostile appears as text (its newline a space)")
    ap.add_argument("--count", action="append", default=[], help="TAG.CLASS:N at least N elements")
    a = ap.parse_args()
    bad = []
    raw = open(a.page, "rb").read()
    size = len(raw)
    if a.max_bytes and size > a.max_bytes:
        bad.append("page is %d bytes, more than %d" % (size, a.max_bytes))
    p = Page()
    p.feed(raw.decode("utf-8"))
    p.close()
    bad += p.problems
    els = p.elements
    html = [e for e in els if e[0] == "html"]
    if not html or html[0][1].get("data-tft-report") != a.report:
        bad.append("<html data-tft-report> is not %r" % a.report)
    if html and html[0][1].get("lang") != "en":
        bad.append("<html lang> is not en")
    # self-contained: no external reference anywhere
    for tag, at, _ in els:
        if tag in ("script", "iframe", "object", "embed", "link", "img", "base", "form"):
            bad.append("element <%s> present" % tag)
        for k, v in at.items():
            if k.startswith("on"):
                bad.append("event handler attribute %s on <%s>" % (k, tag))
            if k in ("src", "href", "xlink:href", "action", "poster", "data") or k.endswith(":href"):
                if not (v.startswith("#") or v.startswith("data:")):
                    bad.append("<%s %s=%r> references outside the page" % (tag, k, v))
            if k == "style" and "url(" in v:
                bad.append("<%s style> has url()" % tag)
    for tag, at, _ in els:
        if tag == "style":
            pass
    body = raw.decode("utf-8")
    style_start = body.find("<style>")
    style = body[style_start:body.find("</style>")] if style_start >= 0 else ""
    if "url(" in style or "@import" in style:
        bad.append("the style sheet loads something (url( or @import)")
    ver = [e for e in els if e[1].get("id") == "verdict"]
    if len(ver) != 1 or ver[0][0] != "p":
        bad.append("want exactly one <p id=verdict>, got %d" % len(ver))
    else:
        va = ver[0][1]
        if a.status and va.get("data-status") != a.status:
            bad.append("verdict data-status %r, want %r" % (va.get("data-status"), a.status))
        if a.step is not None and va.get("data-step") != a.step:
            bad.append("verdict data-step %r, want %r" % (va.get("data-step"), a.step))
        if a.no_step and "data-step" in va:
            bad.append("verdict has data-step %r, want none" % va.get("data-step"))
        if not (p.verdict_text or "").strip():
            bad.append("verdict has no sentence")
    sections = {}
    for tag, at, _ in els:
        if tag == "section":
            sid = at.get("id")
            if sid in sections:
                bad.append("section %s twice" % sid)
            sections[sid] = True
    for s in filter(None, a.sections.split(",")):
        if s not in sections:
            bad.append("section #%s missing (have %s)" % (s, ",".join(sections)))
    for s in filter(None, a.absent.split(",")):
        if s in sections:
            bad.append("section #%s present, want it absent" % s)
    # each section has an <h2>
    for sid in sections:
        if not any(t == "h2" and sid in secs for t, _, secs in els):
            bad.append("section #%s has no <h2>" % sid)
    def marks(cls, sec):
        return [at for t, at, secs in els if cls in at.get("class", "").split() and sec in secs]
    if a.mark_curves is not None:
        m = marks("divergence-mark", "curves")
        if not m or any(x.get("data-step") != a.mark_curves for x in m):
            bad.append("#curves divergence-mark data-step %r, want all %r" % ([x.get("data-step") for x in m],
                                                                             a.mark_curves))
    if a.mark_heatmap is not None:
        m = marks("first-divergence", "heatmap")
        if len(m) != 1 or m[0].get("data-step") != a.mark_heatmap:
            bad.append("#heatmap first-divergence %r, want one with data-step %r" % (
                [x.get("data-step") for x in m], a.mark_heatmap))
    ds = [at for t, at, _ in els if "downsampled" in at.get("class", "").split()]
    if a.downsampled == "yes" and not ds:
        bad.append("no .downsampled note")
    if a.downsampled == "no" and ds:
        bad.append(".downsampled note on a page that was not downsampled")
    text = "".join(p.text)
    for t in a.text_contains:
        t = t.encode().decode("unicode_escape")
        if t not in text:
            bad.append("text %r not in the page's text" % t)
    if a.hostile:
        want = '<script>alert("x")</script><img src="http://evil.example/x.png" onerror="y">&amp;\' Z'
        if want not in text:
            bad.append("the hostile name is not in the page as text")
    for c in a.count:
        sel, n = c.rsplit(":", 1)
        tag, cls = sel.split(".", 1)
        got = sum(1 for t, at, _ in els if t == tag and cls in at.get("class", "").split())
        if got < int(n):
            bad.append("%d <%s class=%s>, want at least %s" % (got, tag, cls, n))
    if bad:
        print("%s (%d bytes):" % (a.page, size))
        for b in bad:
            print("  FAIL: " + b)
        return 1
    print("%s: ok (%d bytes, sections %s)" % (a.page, size, ",".join(sections)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
