#!/usr/bin/env python3
"""browser_check.py: loads one HTML report in headless Chromium and checks it.

usage: browser_check.py [options] --screenshot PNG PAGE.html
       browser_check.py [--timeout S] --batch FILE   (one line of page options a page)

Launches `chromium --headless=new --remote-debugging-pipe` and speaks the
Chrome DevTools Protocol over the pipe (the browser reads commands on its
fd 3 and writes replies and events on its fd 4, each message one JSON text
ended by a NUL byte). The page is opened from its file:// URL; once it has
loaded (and a short settle time has passed) the driver checks:

  - no console errors: console.error/console.warn/console.assert calls,
    uncaught exceptions, and browser log entries of level "error";
  - no network requests other than the page's own file URL and data: URLs;
  - no element attribute or stylesheet that names an external resource
    (only "#anchor" links and data: URIs are allowed);
  - the DOM contract of tftrace's reports (docs/REPORTS.md): the report
    kind on <html>, #verdict with data-status / data-step and a sentence,
    the expected <section id=...> (each with an <h2>), and the divergence
    step marked (.divergence-mark[data-step=N] in #curves,
    .first-divergence[data-step=N] in #heatmap when a tensor diverged).

A full-page screenshot is written to --screenshot and its path printed
("screenshot: PATH"). With --batch, one browser checks every page of FILE,
each in its own tab. Exit status: 0 when every check passed, 1 when one
failed (each failure printed as "FAIL: PAGE: ..."), 2 on bad usage, 77 with
"SKIP: ..." when no chromium is found. Chromium is always killed on the way
out, and every wait has a deadline (--page-timeout for a page, --timeout
for everything, 60 s at most).

Only the Python standard library is used.
"""

import argparse
import base64
import fcntl
import json
import os
import pathlib
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP_RC = 77

DIFF_SECTIONS = {"curves", "heatmap", "first-divergence", "nonfinite", "leaks", "desync", "tensors"}
DUMP_SECTIONS = {"curves", "memory", "collectives", "check"}
STATUSES = {"diff": {"match", "diverged", "incomplete"}, "dump": {"ok", "findings", "incomplete"}}

# What the page's DOM says, evaluated in the page (returnByValue): plain data only.
DOM_PROBE = r"""
(() => {
  const out = {};
  const root = document.documentElement;
  out.lang = root.getAttribute("lang");
  out.report = root.getAttribute("data-tft-report");
  const v = document.getElementById("verdict");
  out.verdict = v ? {
    tag: v.tagName.toLowerCase(),
    text: (v.textContent || "").trim(),
    status: v.getAttribute("data-status"),
    step: v.getAttribute("data-step"),
  } : null;
  out.sections = Array.from(document.querySelectorAll("section[id]")).map(s => ({
    id: s.id, h2: s.querySelector("h2") !== null,
  }));
  const steps = sel => Array.from(document.querySelectorAll(sel)).map(e => e.getAttribute("data-step"));
  out.curveMarks = steps("#curves .divergence-mark");
  out.curveMarksSvg = Array.from(document.querySelectorAll("#curves .divergence-mark"))
      .filter(e => e instanceof SVGElement).length;
  out.heatmapFirst = steps("#heatmap .first-divergence");
  out.downsampled = document.querySelectorAll(".downsampled").length;
  out.ids = {};
  for (const e of document.querySelectorAll("[id]")) out.ids[e.id] = (out.ids[e.id] || 0) + 1;
  // every attribute that can name a resource, and every url(...) of CSS
  const external = [];
  const ok = u => { u = u.trim(); return u === "" || u.startsWith("#") || /^data:/i.test(u); };
  const attrs = ["src", "href", "xlink:href", "srcset", "poster", "data", "action", "formaction",
                 "background", "cite", "longdesc", "manifest", "ping", "imagesrcset"];
  for (const e of document.querySelectorAll("*")) {
    for (const a of e.attributes) {
      const n = a.name.toLowerCase();
      if (attrs.includes(n) && !(n === "data" && e.tagName.toLowerCase() !== "object")) {
        const vals = (n === "srcset" || n === "imagesrcset")
            ? a.value.split(",").map(s => s.trim().split(/\s+/)[0]) : [a.value];
        for (const u of vals) if (!ok(u)) external.push(`<${e.tagName.toLowerCase()} ${a.name}="${u}">`);
      }
      if (n === "style") {
        for (const m of a.value.matchAll(/url\(\s*['"]?([^'")]*)/gi))
          if (!ok(m[1])) external.push(`<${e.tagName.toLowerCase()} style> url(${m[1]})`);
      }
    }
    const t = e.tagName.toLowerCase();
    if (t === "base" || t === "iframe" || t === "frame" || t === "embed" || t === "portal")
      external.push(`<${t}> element`);
    if (t === "meta" && /refresh/i.test(e.getAttribute("http-equiv") || ""))
      external.push("<meta http-equiv=refresh>");
  }
  for (const s of document.querySelectorAll("style")) {
    const css = s.textContent || "";
    for (const m of css.matchAll(/url\(\s*['"]?([^'")]*)/gi))
      if (!ok(m[1])) external.push(`<style> url(${m[1]})`);
    for (const m of css.matchAll(/@import\s+(?:url\()?\s*['"]?([^'");\s]*)/gi))
      external.push(`<style> @import ${m[1]}`);
  }
  out.external = external;
  out.title = document.title;
  out.bytes = root.outerHTML.length;
  return out;
})()
"""


class CdpError(Exception):
    pass


class Browser:
    """A headless Chromium and its DevTools pipe."""

    def __init__(self, exe, end):
        self.end = end            # no wait goes past this (monotonic)
        self.deadline = end       # the current page's
        self.dead = False
        self.next_id = 0
        self.buf = b""
        self.events = []  # (sessionId, method, params) not consumed yet
        self.profile = tempfile.mkdtemp(prefix="tft-chromium-")
        to_r, to_w = os.pipe()      # us -> chromium's fd 3
        from_r, from_w = os.pipe()  # chromium's fd 4 -> us
        # move the child's ends above 10 so bash's "3<&N 4>&M" never
        # overwrites one of them before it is moved
        kid_r = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
        kid_w = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
        os.close(to_r)
        os.close(from_w)
        args = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
            "--user-data-dir=" + self.profile, "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking", "--disable-sync",
            "--disable-component-update", "--disable-default-apps", "--mute-audio",
            "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1280,900",
            "--force-device-scale-factor=1", "about:blank",
        ]
        shell = 'exec "$0" "$@" 3<&%d 4>&%d %d<&- %d>&-' % (kid_r, kid_w, kid_r, kid_w)
        self.stderr_path = os.path.join(self.profile, "chromium.stderr")
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", shell, exe] + args,
            stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=self.stderr,
            pass_fds=(kid_r, kid_w), start_new_session=True)
        os.close(kid_r)
        os.close(kid_w)
        self.wfd = to_w
        self.rfd = from_r

    def close(self):
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.poll() is None:
            try:  # the whole process group: chromium's zygote and renderers too
                os.killpg(self.proc.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                try:  # a loaded machine (CI, 2 cores) can take seconds to reap it
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    print("note: the browser (pid %d) had not exited 30 s after SIGKILL; left to the system"
                          % self.proc.pid, flush=True)
        else:
            try:  # helpers left behind by a browser that exited
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def stderr_tail(self, n=15):
        try:
            lines = pathlib.Path(self.stderr_path).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        # a container has no D-Bus: chromium's complaints about it say nothing
        lines = [ln for ln in lines if "dbus/" not in ln and "Fontconfig" not in ln]
        return "\n".join("  chromium: " + ln for ln in lines[-n:])

    def left(self):
        return self.deadline - time.monotonic()

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            if self.left() <= 0:
                raise CdpError("timed out sending %s" % method)
            _, w, _ = select.select([], [self.wfd], [], min(self.left(), 1.0))
            if w:
                try:
                    n = os.write(self.wfd, data)
                except OSError as e:
                    raise CdpError("writing to chromium's pipe: %s" % e)
                data = data[n:]
        return self.next_id

    def read_message(self, until):
        """The next message, or None when `until` (monotonic) passes."""
        while True:
            nul = self.buf.find(b"\0")
            if nul >= 0:
                raw, self.buf = self.buf[:nul], self.buf[nul + 1:]
                try:
                    return json.loads(raw)
                except ValueError:
                    raise CdpError("chromium sent a message that is not JSON: %r" % raw[:200])
            wait = min(until, self.deadline) - time.monotonic()
            if wait <= 0:
                if time.monotonic() >= self.deadline:
                    raise CdpError("timed out waiting for chromium")
                return None
            r, _, _ = select.select([self.rfd], [], [], min(wait, 1.0))
            if not r:
                if self.proc.poll() is not None:
                    raise CdpError("chromium exited (status %s)" % self.proc.returncode)
                continue
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise CdpError("chromium closed its DevTools pipe (status %s)" % self.proc.poll())
            self.buf += chunk

    def call(self, method, params=None, session=None, timeout=15.0):
        mid = self.send(method, params, session)
        until = time.monotonic() + timeout
        while True:
            msg = self.read_message(until)
            if msg is None:
                raise CdpError("no reply to %s within %.0f s" % (method, timeout))
            if msg.get("id") == mid:
                if "error" in msg:
                    raise CdpError("%s: %s" % (method, msg["error"].get("message", msg["error"])))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append((msg.get("sessionId"), msg["method"], msg.get("params", {})))

    def pump(self, until, stop=None):
        """Collects events until `until`, or until stop(event) is true (returns it)."""
        for ev in self.events:
            if stop and stop(ev):
                return ev
        while True:
            msg = self.read_message(until)
            if msg is None:
                return None
            if "method" in msg:
                ev = (msg.get("sessionId"), msg["method"], msg.get("params", {}))
                self.events.append(ev)
                if stop and stop(ev):
                    return ev


def remote_text(obj):
    """A short text of a Runtime.RemoteObject (console arguments)."""
    if "value" in obj:
        v = obj["value"]
        return v if isinstance(v, str) else json.dumps(v)
    return obj.get("description") or obj.get("unserializableValue") or obj.get("type", "?")


def find_chromium(name):
    if name:
        return shutil.which(name) or (name if os.access(name, os.X_OK) else None)
    for n in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(n)
        if p:
            return p
    return None


def load_page(br, page, shot, timeout, settle):
    """Loads the page in a new tab of br; returns (problems, facts): problems
    are load / console / network failures, facts what DOM_PROBE found (None
    when the browser failed). Raises CdpError when the browser is unusable."""
    url = page.resolve().as_uri()
    problems = []
    deadline = time.monotonic() + timeout
    br.deadline = min(deadline, br.end)
    tid = br.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    sid = br.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
    facts = None
    try:
        for dom in ("Page", "Runtime", "Log", "Network"):
            br.call(dom + ".enable", session=sid)
        br.events.clear()  # about:blank's own events, other tabs' last ones
        nav = br.call("Page.navigate", {"url": url}, session=sid)
        if nav.get("errorText"):
            problems.append("load: navigating to %s: %s" % (url, nav["errorText"]))
        loaded = br.pump(br.deadline - 5, lambda ev: ev[0] == sid and ev[1] == "Page.loadEventFired")
        if loaded is None:
            problems.append("load: no load event within %.0f s" % (timeout - 5))
        # late scripts (timers, requestAnimationFrame) get a moment to misbehave
        br.pump(min(time.monotonic() + settle, br.deadline - 4))
        facts = br.call("Runtime.evaluate", {"expression": DOM_PROBE, "returnByValue": True},
                        session=sid).get("result", {}).get("value")
        if not isinstance(facts, dict):
            problems.append("dom: the probe returned nothing")
            facts = {}
        # the full page, within chromium's texture limit
        m = br.call("Page.getLayoutMetrics", session=sid)
        size = m.get("cssContentSize") or m.get("contentSize") or {}
        w = max(1, min(int(size.get("width", 1280)), 4096))
        h = max(1, min(int(size.get("height", 900)), 16384))
        shot_res = br.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}}, session=sid, timeout=20)
        shot.parent.mkdir(parents=True, exist_ok=True)
        shot.write_bytes(base64.b64decode(shot_res["data"]))
        print("screenshot: %s (%dx%d)" % (shot, w, h))
        br.pump(time.monotonic() + 0.05)
    except CdpError as e:
        problems.append("browser: %s" % e)
        tail = br.stderr_tail()
        if tail:
            problems.append("browser: chromium's last output:\n" + tail)
        facts = None
    for sess, method, p in br.events:
        if sess != sid:
            continue
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            text = " ".join(remote_text(a) for a in p.get("args", []))
            problems.append("console: console.%s: %s" % (p["type"], text))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            exc = d.get("exception", {})
            text = exc.get("description") or d.get("text", "?")
            problems.append("exception: uncaught exception at %s:%s: %s" % (
                d.get("url", "?"), d.get("lineNumber", "?"), text.splitlines()[0] if text else "?"))
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            if e.get("level") == "error":
                problems.append("console: log entry (%s): %s%s" % (
                    e.get("source", "?"), e.get("text", ""), " [%s]" % e["url"] if e.get("url") else ""))
            else:
                print("note: log entry %s (%s): %s" % (e.get("level"), e.get("source"), e.get("text", "")))
        elif method == "Network.requestWillBeSent":
            u = p.get("request", {}).get("url", "")
            if u != url and not u.startswith("data:"):
                problems.append("network: request to %s" % u)
    br.events = [ev for ev in br.events if ev[0] != sid]
    if facts is not None:  # the browser is still usable: close the tab
        br.call("Target.closeTarget", {"targetId": tid})
    return problems, facts


def check_dom(facts, a):
    """The DOM contract checks; returns the failures."""
    errs = []
    kind = a.report
    if facts.get("report") != kind:
        errs.append('dom: <html data-tft-report="%s">, expected "%s"' % (facts.get("report"), kind))
    if facts.get("lang") != "en":
        errs.append('dom: <html lang="%s">, expected "en"' % facts.get("lang"))
    for u in facts.get("external", []):
        errs.append("dom: external resource named: %s" % u)
    dup = sorted(i for i, n in facts.get("ids", {}).items() if n > 1)
    if dup:
        errs.append("dom: duplicate ids: %s" % ", ".join(dup))
    v = facts.get("verdict")
    step = None
    if not v:
        errs.append("dom: no element with id=verdict")
    else:
        print("verdict: [%s step=%s] %s" % (v["status"], v["step"], v["text"]))
        if v["tag"] != "p":
            errs.append("dom: #verdict is a <%s>, expected <p>" % v["tag"])
        if not v["text"]:
            errs.append("dom: #verdict has no sentence")
        if v["status"] not in STATUSES[kind]:
            errs.append("dom: #verdict data-status=%r is not one of %s" % (v["status"], sorted(STATUSES[kind])))
        if a.status and v["status"] != a.status:
            errs.append("dom: #verdict data-status=%r, expected %r" % (v["status"], a.status))
        if v["step"] is not None:
            try:
                step = int(v["step"])
            except ValueError:
                errs.append("dom: #verdict data-step=%r is not a step number" % v["step"])
        if a.step == "none":
            if v["step"] is not None:
                errs.append("dom: #verdict data-step=%r, expected none" % v["step"])
        elif a.step is not None and v["step"] != a.step:
            errs.append("dom: #verdict data-step=%r, expected %r" % (v["step"], a.step))
        for t in a.verdict_contains:
            if t not in v["text"]:
                errs.append("dom: #verdict sentence lacks %r" % t)
    have = {s["id"]: s["h2"] for s in facts.get("sections", [])}
    print("sections: %s" % ", ".join(have) if have else "sections: none")
    known = DIFF_SECTIONS if kind == "diff" else DUMP_SECTIONS
    for sid, h2 in have.items():
        if sid not in known:
            print("note: section#%s is not one of the contract's ids" % sid)
        if not h2:
            errs.append("dom: section#%s has no <h2>" % sid)
    for sid in a.sections:
        if sid not in have:
            errs.append("dom: no section#%s (present: %s)" % (sid, ", ".join(have) or "none"))
    for sid in a.no_sections:
        if sid in have:
            errs.append("dom: section#%s present, expected absent" % sid)
    if a.marked:
        if step is None:
            errs.append("dom: --marked needs #verdict data-step, which is absent")
        else:
            if "curves" in have:
                marks = facts.get("curveMarks", [])
                if str(step) not in marks:
                    errs.append("dom: no .divergence-mark[data-step=%d] in #curves (marks: %s)" % (
                        step, ", ".join(str(m) for m in marks) or "none"))
                elif facts.get("curveMarksSvg", 0) == 0:
                    errs.append("dom: the .divergence-mark elements in #curves are not SVG elements")
            # the heatmap's first divergent cell: when there is one (a leak
            # or a desync alone diverges no tensor)
            if "heatmap" in have and "first-divergence" in have:
                first = facts.get("heatmapFirst", [])
                if str(step) not in first:
                    errs.append("dom: no .first-divergence[data-step=%d] in #heatmap (found: %s)" % (
                        step, ", ".join(str(m) for m in first) or "none"))
    if a.downsampled and not facts.get("downsampled"):
        errs.append("dom: no .downsampled note")
    return errs


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", type=pathlib.Path, nargs="?")
    ap.add_argument("--batch", type=pathlib.Path, metavar="FILE",
                    help="check several pages in one browser: each line of FILE holds one page's "
                         "arguments (shell words: PAGE --screenshot PNG expectations...)")
    ap.add_argument("--screenshot", type=pathlib.Path, help="where the PNG goes")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM"), help="the browser (default: chromium on PATH)")
    ap.add_argument("--timeout", type=float, default=45.0, help="seconds for everything (at most 60)")
    ap.add_argument("--page-timeout", type=float, default=30.0, help="seconds for one page")
    ap.add_argument("--settle", type=float, default=0.3, help="seconds to watch the page after its load")
    ap.add_argument("--report", choices=("diff", "dump"), default="diff")
    ap.add_argument("--status", help="expected #verdict data-status")
    ap.add_argument("--step", help='expected #verdict data-step ("none": absent)')
    ap.add_argument("--verdict-contains", action="append", default=[], metavar="TEXT")
    ap.add_argument("--section", dest="sections", action="append", default=[], metavar="ID",
                    help="a section#ID that must be present (repeatable; commas allowed)")
    ap.add_argument("--no-section", dest="no_sections", action="append", default=[], metavar="ID")
    ap.add_argument("--marked", action="store_true",
                    help="the verdict's step is marked in #curves (when present) and in #heatmap "
                         "(when present with #first-divergence)")
    ap.add_argument("--downsampled", action="store_true", help="the page has a .downsampled note")
    return ap


def page_args(ap, argv):
    a = ap.parse_args(argv)
    a.sections = [s for x in a.sections for s in x.split(",") if s]
    a.no_sections = [s for x in a.no_sections for s in x.split(",") if s]
    return a


def main():
    ap = parser()
    top = page_args(ap, sys.argv[1:])
    if top.batch:
        try:
            lines = top.batch.read_text().splitlines()
        except OSError as e:
            print("browser_check.py: %s" % e, file=sys.stderr)
            return 2
        pages = [page_args(ap, shlex.split(ln)) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    else:
        pages = [top]
    for a in pages:
        if not a.page or not a.screenshot:
            print("browser_check.py: each page needs PAGE and --screenshot PNG", file=sys.stderr)
            return 2
        if not a.page.is_file():
            print("browser_check.py: %s: no such file" % a.page, file=sys.stderr)
            return 2
    exe = find_chromium(top.chromium)
    if not exe:
        print("SKIP: no chromium found (install Debian's chromium, or set CHROMIUM)")
        return SKIP_RC
    t0 = time.monotonic()
    failed = 0
    total = max(10.0, min(top.timeout, 60.0))

    def interrupted(signum, frame):  # ctest's timeout, ^C: chromium goes too (the finally below)
        raise SystemExit("browser_check.py: %s" % (
            "no result within %.0f s" % (total + 10) if signum == signal.SIGALRM
            else "ended by signal %d" % signum))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(sig, interrupted)
    signal.alarm(int(total) + 10)  # a backstop behind every deadline
    br = Browser(exe, t0 + total)
    try:
        for a in pages:
            t1 = time.monotonic()
            print("page: %s (%d bytes), browser %s" % (a.page, a.page.stat().st_size, exe))
            if br.dead:
                problems, facts = ["browser: not checked, the browser failed on an earlier page"], None
            else:
                try:
                    problems, facts = load_page(br, a.page, a.screenshot, max(5.0, a.page_timeout), a.settle)
                except CdpError as e:
                    problems, facts = ["browser: %s" % e], None
                if facts is None:
                    br.dead = True
            if facts is not None:
                problems += check_dom(facts, a)
            for p in problems:
                print("FAIL: %s: %s" % (a.page.name, p))
            print("%s %s (%.1f s)" % ("FAILED" if problems else "PASS", a.page.name, time.monotonic() - t1))
            failed += bool(problems)
    finally:
        br.close()
    if len(pages) > 1:
        print("%d of %d pages passed (%.1f s)" % (len(pages) - failed, len(pages), time.monotonic() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
