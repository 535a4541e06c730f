"""First load of the web page (`GET /`) in Chromium: bytes transferred and time to
interactive, through the gateway and, as the peer in the same run, the same files from
Python's `http.server`.

    python bench/page_load.py [--runs 30]

Every load is a first load: a new browser context (empty cache, no cookies or storage).
Time to interactive is `performance.now()` at the mark app.js sets right after it
enables the "API key" field, which it can only do once every module of the page has been
fetched, parsed and run; it counts from the navigation's start (`timeOrigin`). An empty
page from `http.server` is the floor: what a new context and a navigation cost alone. Transfer
size is the sum of the Resource Timing `encodedBodySize` of the document and every
subresource (the bodies as they crossed the wire, compressed when they were), with
`transferSize` (headers included) and `decodedBodySize` beside it. Loads alternate between
the two servers so drift on the machine hits both alike."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from support.common import (
    REPO_DIR,
    load_average,
    machine_line,
    percentile,
    render_table,
    version_of,
)

sys.path.insert(0, str(REPO_DIR))
sys.path.insert(0, str(REPO_DIR / "src"))

from playwright.async_api import Browser, async_playwright
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel
from tests.web.browser import CHROMIUM_ARGS, DESKTOP, chromium_path

from sessiongate.api.web import WEB_DIR

MEASURE = """() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const resources = performance.getEntriesByType('resource');
    const all = [nav, ...resources];
    const sum = (field) => all.reduce((total, entry) => total + entry[field], 0);
    const mark = performance.getEntriesByName('sessiongate:interactive')[0];
    return {
        encoded: sum('encodedBodySize'),
        decoded: sum('decodedBodySize'),
        transfer: sum('transferSize'),
        requests: all.length,
        interactive: mark ? mark.startTime : null,
        dom_content_loaded: nav.domContentLoadedEventEnd,
    };
}"""


@dataclass
class Load:
    encoded: int
    decoded: int
    transfer: int
    requests: int
    interactive: float
    dom_content_loaded: float


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def plain_http_server() -> Iterator[str]:
    """The page's files laid out as the gateway serves them (`/` and `/web/...`)."""
    with tempfile.TemporaryDirectory() as root:
        shutil.copytree(WEB_DIR, Path(root) / "web")
        shutil.copy(WEB_DIR / "index.html", Path(root) / "index.html")
        # The floor: what a new context and a navigation cost with nothing to load.
        (Path(root) / "empty.html").write_text("<!doctype html><title>empty</title>")
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=root))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()


async def first_load(browser: Browser, url: str) -> Load:
    """One load of `url` in a new context. A page without the app (the empty floor) is
    interactive at DOMContentLoaded."""
    context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        page = await context.new_page()
        await page.goto(url, wait_until="domcontentloaded")
        if not url.endswith("empty.html"):
            await page.wait_for_selector("#api-key:enabled")
            await page.wait_for_function(
                "() => performance.getEntriesByName('sessiongate:interactive').length > 0"
            )
        result: dict[str, Any] = await page.evaluate(MEASURE)
        if result["interactive"] is None:
            result["interactive"] = result["dom_content_loaded"]
        return Load(**result)
    finally:
        await context.close()


async def measure(
    urls: dict[str, str], runs: int, warmup: int
) -> tuple[str, dict[str, list[Load]]]:
    loads: dict[str, list[Load]] = {name: [] for name in urls}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_ARGS
        )
        version = browser.version
        try:
            for index in range(warmup + runs):
                for name, url in urls.items():
                    load = await first_load(browser, url)
                    if index >= warmup:
                        loads[name].append(load)
        finally:
            await browser.close()
    return version, loads


def report(version: str, loads: dict[str, list[Load]], runs: int) -> str:
    headers = [
        "server",
        "requests",
        "body KB (wire)",
        "body KB (decoded)",
        "transfer KB (+headers)",
        "TTI median ms",
        "TTI p95 ms",
        "DCL median ms",
    ]
    rows = []
    medians: dict[str, float] = {}
    for name, samples in loads.items():
        tti = [s.interactive for s in samples]
        medians[name] = statistics.median(tti)
        last = samples[-1]
        rows.append(
            [
                name,
                str(last.requests),
                f"{last.encoded / 1024:.1f}",
                f"{last.decoded / 1024:.1f}",
                f"{last.transfer / 1024:.1f}",
                f"{medians[name]:.1f}",
                f"{percentile(tti, 0.95):.1f}",
                f"{statistics.median(s.dom_content_loaded for s in samples):.1f}",
            ]
        )
    names = list(loads)
    ratio = medians[names[0]] / medians[names[1]]
    lines = [
        f"{runs} first loads per server (new context each), Chromium {version}, "
        f"playwright {version_of('playwright')}, {machine_line()}, "
        f"load average {load_average():.1f} at the end",
        render_table(headers, rows, right=set(range(1, len(headers)))),
        f"time to interactive, median, {names[0]} / {names[1]}: {ratio:.2f}x",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed loads per server")
    parser.add_argument("--warmup", type=int, default=3, help="untimed loads per server first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        settings = gateway_settings(Path(data))
        with (
            running_gateway(settings, {"scripted": ScriptedModel()}) as gateway,
            plain_http_server() as peer,
        ):
            urls = {
                "sessiongate": gateway.url + "/",
                "http.server (same files)": peer + "/",
                "empty page (http.server)": peer + "/empty.html",
            }
            version, loads = asyncio.run(measure(urls, args.runs, args.warmup))
    print(report(version, loads, args.runs))


if __name__ == "__main__":
    main()
