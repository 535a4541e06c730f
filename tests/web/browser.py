"""What the web page tests share: Chromium (Debian's, never a download), a paced reply
model, a gateway on loopback, and the steps every test takes (signing in, sending)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import httpx
import pytest
from playwright.async_api import Browser, BrowserContext, Page, Playwright, async_playwright

from sessiongate.models.base import NO_OPTIONS, ModelChunk, ModelOptions, TextDelta, Usage
from sessiongate.models.base import WireMessage as Wire
from tests.support.gateway import Gateway, gateway_settings, running_gateway

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # A spoken reply starts playing by itself after Send (a gesture in a real browser).
    "--autoplay-policy=no-user-gesture-required",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
TIMEOUT_MS = 15_000


def chromium_path() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is not installed: run `bash scripts/browser.sh` (CI installs it)")
    return found


def axe_source() -> str:
    path = os.environ.get("SESSIONGATE_TEST_AXE", "")
    if not path or not Path(path).is_file():
        pytest.fail(
            "axe-core is missing: run "
            '`export SESSIONGATE_TEST_AXE="$(bash scripts/browser.sh | tail -n1)"`'
        )
    return Path(path).read_text(encoding="utf-8")


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    executable = chromium_path()
    playwright: Playwright
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class Watch:
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


_watches: WeakKeyDictionary[Page, Watch] = WeakKeyDictionary()


def watched(page: Page) -> Watch:
    return _watches[page]


@asynccontextmanager
async def new_page(
    browser: Browser, viewport: dict[str, int] | None = None, **options: Any
) -> AsyncIterator[Page]:
    """A page in a context of its own (its own sessionStorage: another tab, another
    user). Its dialogs (alert, confirm) and uncaught errors are in `watched(page)`."""
    context: BrowserContext = await browser.new_context(
        viewport=viewport or DESKTOP,  # type: ignore[arg-type]
        **options,
    )
    context.set_default_timeout(TIMEOUT_MS)
    page = await context.new_page()
    seen = Watch()
    page.on("dialog", lambda dialog: seen.dialogs.append(dialog.message))
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    _watches[page] = seen
    try:
        yield page
    finally:
        await context.close()


class PacedModel:
    """Streams `reply(last user message)` word by word, `delay` seconds apart: slow enough
    for a browser to see the text grow, and to reload in the middle of it."""

    def __init__(
        self, reply: Callable[[str], str], *, delay: float = 0.0, name: str = "scripted"
    ) -> None:
        self.name = name
        self.reply = reply
        self.delay = delay

    async def stream(
        self, messages: Sequence[Wire], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        text = self.reply(str(messages[-1]["content"]))
        words = text.split(" ")
        for index, word in enumerate(words):
            yield TextDelta(word if index == 0 else " " + word)
            await asyncio.sleep(self.delay)
        yield Usage(prompt_tokens=len(messages), completion_tokens=len(words))


@contextmanager
def gateway(
    tmp_path: Path, model: Any, *, others: Sequence[Any] = (), **settings: Any
) -> Iterator[Gateway]:
    """A gateway whose reply model is `model`; `others` are more models by their names
    (a control model, say)."""
    models = {each.name: each for each in (model, *others)}
    with running_gateway(gateway_settings(tmp_path, **settings), models) as gw:
        yield gw


async def call(
    gw: Gateway, method: str, path: str, user: str = "alice", **options: Any
) -> httpx.Response:
    """The public API beside the page, as `user`: to check what the page did."""
    async with httpx.AsyncClient(base_url=gw.url, headers=gw.auth(user), timeout=30) as client:
        return await client.request(method, path, **options)


async def sign_in(page: Page, url: str, key: str) -> None:
    await page.goto(url + "/")
    await page.get_by_label("API key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("navigation", name="Sessions").wait_for()
    await page.get_by_label("Message", exact=True).wait_for()


async def send(page: Page, text: str) -> None:
    await page.get_by_label("Message", exact=True).fill(text)
    await page.get_by_role("button", name="Send").click()


async def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    # Evaluated through the DevTools protocol, which the page's CSP does not govern: the
    # policy the page really runs under stays untouched for the check.
    await page.evaluate(axe_source())
    found: list[dict[str, Any]] = await page.evaluate(
        """async () => {
            const result = await axe.run(document, { resultTypes: ['violations'] });
            return result.violations
                .filter(v => v.impact === 'serious' || v.impact === 'critical')
                .map(v => ({ id: v.id, impact: v.impact,
                             nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ')) }));
        }"""
    )
    return found


async def open_view(page: Page, name: str) -> None:
    """One of the views in the top navigation (Chat, Notes, Tasks, Modes)."""
    await page.get_by_role("navigation", name="Views").get_by_role("button", name=name).click()
    await page.get_by_role("heading", name=name, exact=True).wait_for()


def last_reply(page: Page) -> Any:
    """The assistant's text of the newest turn on screen."""
    return page.locator(".transcript .msg.assistant").last.locator(".text")


async def wait_idle(page: Page) -> None:
    """Until no turn is streaming (the page keeps none pending)."""
    await page.wait_for_function(
        "() => sessionStorage.getItem('sg.pending') === null", timeout=TIMEOUT_MS
    )
