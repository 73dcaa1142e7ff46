"""Debian's Chromium, headless, driven by Playwright for Python: the HTML report as a person
opens it (from disk, network off). Never lets Playwright download a browser of its own.

    python tests/browser.py PAGE.html SHOT.png [WIDTH [SELECTOR]]    # a screenshot, for docs/

SELECTOR shoots one element (e.g. '#findings', '#tl-b4'), 'A..B' the page from the top of A
to the bottom of B (e.g. '#user-timings..#tl-u0'); "top" the first screen; none the whole
page.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# Root needs --no-sandbox; the rest keeps a closed machine's Chromium from calling out.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


def chromium_path() -> str | None:
    env = os.environ.get("NSYSWRAP_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for path in CHROMIUM_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


@dataclass
class PageLoad:
    console: list[tuple[str, str]] = field(default_factory=list)  # (type, text)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # anything but the page itself
    dialogs: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    @property
    def errors(self) -> list[str]:
        return [t for kind, t in self.console if kind == "error"] + self.page_errors


# What the tests read off the page once its charts are drawn.
_FACTS_JS = """() => {
  const count = (sel) => document.querySelectorAll(sel).length;
  const drawn = (kind) => Array.from(document.querySelectorAll(
      '.chart[data-kind="' + kind + '"]')).filter(el => {
        const c = el.querySelector('canvas');
        return el.getAttribute('data-rendered') === 'yes' && c && c.width > 0 && c.height > 0;
      }).length;
  return {
    charts_done: document.body.getAttribute('data-charts-done'),
    benchmark_charts: count('.chart[data-kind="benchmark"]'),
    timeline_charts: count('.chart[data-kind="timeline"]'),
    family_charts: count('.chart[data-kind="family"]'),
    family_blocks: count('div.family'),
    benchmark_drawn: drawn('benchmark'),
    timeline_drawn: drawn('timeline'),
    family_drawn: drawn('family'),
    user_drawn: drawn('user'),
    failed: count('.chart[data-rendered="failed"]'),
    findings: count('article.finding'),
    kernel_rows: count('#kernels-table tbody tr'),
    images: count('img'),
    // the pages for many reports: charts by kind, drawn ones, and rows of each table
    charts_by_kind: Array.from(document.querySelectorAll('.chart[data-kind]')).reduce(
        (m, el) => { const k = el.getAttribute('data-kind'); m[k] = (m[k] || 0) + 1;
                     return m; }, {}),
    drawn_by_kind: ['ranks', 'families', 'interval'].reduce(
        (m, k) => { m[k] = drawn(k); return m; }, {}),
    table_rows: Array.from(document.querySelectorAll('table[id]')).reduce(
        (m, t) => { m[t.id] = t.querySelectorAll('tbody tr').length; return m; }, {}),
    text: document.body.innerText,
  };
}"""


# The page's region from the top of one element to the bottom of another, in page pixels.
_SPAN_JS = """([top, bottom]) => {
  const a = document.querySelector(top).getBoundingClientRect();
  const b = document.querySelector(bottom).getBoundingClientRect();
  const x = Math.min(a.left, b.left), y = a.top + window.scrollY;
  return {x: x + window.scrollX, y: y, width: Math.max(a.right, b.right) - x,
          height: b.bottom + window.scrollY - y};
}"""


class Chromium:
    """One headless Chromium for many pages (`load_page(..., chromium=)`): each page opens
    in a fresh context of its own (no storage, cache or permissions shared, network off), so
    what one page did cannot reach the next; the browser's start (about a second and a half
    of the four a page takes on two cores) is paid once. Close it when done: Playwright's
    sync API keeps its event loop as the thread's running loop while it is started."""

    def __init__(self):
        from playwright.sync_api import sync_playwright

        exe = chromium_path()
        if exe is None:
            raise RuntimeError("Chromium not found (apt install chromium)")
        self._playwright = sync_playwright().start()
        try:
            self.browser = self._playwright.chromium.launch(
                executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        except BaseException:
            self._playwright.stop()
            raise

    def close(self) -> None:
        try:
            self.browser.close()
        finally:
            self._playwright.stop()


def load_page(page_path: Path, screenshot: Path | None = None, width: int = 1360,
              full_page: bool = True, actions=None, element: str | None = None,
              chromium: Chromium | None = None) -> PageLoad:
    """Open `page_path` from disk with the network off; wait for the charts; collect the
    console, page errors, requests and dialogs (an alert() would be a script injection).
    In a fresh context of `chromium`'s browser, or without it in a Chromium of its own."""
    if chromium is not None:
        context = chromium.browser.new_context(offline=True,
                                               viewport={"width": width, "height": 900})
        try:
            return _load(context, page_path, screenshot, full_page, actions, element)
        finally:
            context.close()
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError("Chromium not found (apt install chromium)")
    with tempfile.TemporaryDirectory(prefix="nsyswrap-chromium-") as profile, \
            sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=exe, headless=True, args=CHROMIUM_ARGS, offline=True,
            viewport={"width": width, "height": 900})
        try:
            return _load(context, page_path, screenshot, full_page, actions, element)
        finally:
            context.close()


def _load(context, page_path: Path, screenshot: Path | None, full_page: bool, actions,
          element: str | None) -> PageLoad:
    result = PageLoad()
    url = Path(page_path).resolve().as_uri()
    page = context.pages[0] if context.pages else context.new_page()
    page.on("console", lambda m: result.console.append((m.type, m.text)))
    page.on("pageerror", lambda e: result.page_errors.append(str(e)))
    page.on("request", lambda r: r.url != url and not r.url.startswith("data:")
            and result.requests.append(r.url))

    def on_dialog(d):
        result.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    page.goto(url, wait_until="load")
    page.wait_for_function("document.body.hasAttribute('data-charts-done')",
                           timeout=120_000)
    page.wait_for_timeout(300)
    if actions:
        actions(page)
    result.facts = page.evaluate(_FACTS_JS)
    if screenshot is not None and element and ".." in element:
        top, bottom = element.split("..")
        box = page.evaluate(_SPAN_JS, [top, bottom])
        page.screenshot(path=str(screenshot), full_page=True, clip=box)
    elif screenshot is not None and element:
        page.locator(element).first.screenshot(path=str(screenshot))
    elif screenshot is not None:
        page.screenshot(path=str(screenshot), full_page=full_page)
    return result


if __name__ == "__main__":
    where = sys.argv[4] if len(sys.argv) > 4 else None
    load = load_page(Path(sys.argv[1]), Path(sys.argv[2]),
                     width=int(sys.argv[3]) if len(sys.argv) > 3 else 1360,
                     full_page=where is None, element=None if where == "top" else where)
    facts = {k: v for k, v in load.facts.items() if k != "text"}
    print(facts, "errors:", load.errors, "requests:", load.requests, "dialogs:", load.dialogs)
