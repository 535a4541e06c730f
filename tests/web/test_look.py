"""The page as people meet it: no serious or critical accessibility violation (axe-core,
run inside the page) at desktop and phone widths, light and dark; and the screenshots the
README shows, taken from a realistic conversation."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import pytest
from playwright.async_api import Page, expect

from sessiongate.models.base import ModelOptions, WireMessage
from tests.support.agent_models import Call, ToolModel, toolbox
from tests.support.gateway import Gateway
from tests.web.browser import (
    DESKTOP,
    PHONE,
    chromium,
    gateway,
    new_page,
    send,
    serious_violations,
    sign_in,
    wait_idle,
)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

PLANNING = (
    "Here is a plan for **Saturday**:\n\n"
    "1. Farmers' market at *9:00*\n"
    "2. Lunch with Sam\n"
    "3. Fix the bike: see [the manual](https://example.com/bike)\n\n"
    "Shall I add these as tasks?"
)
SUM = "Done: the two orders come to **42** items, and `notes_search` found the invoice."


def assistant(messages: Sequence[WireMessage], options: ModelOptions) -> str | list[Call]:
    last = messages[-1]
    if last["role"] == "tool":
        return SUM
    text = str(last["content"]).lower()
    if "orders" in text:
        return [Call("add", {"a": 17, "b": 25}, "c1"), Call("echo", {"text": "invoice"}, "c2")]
    if "saturday" in text:
        return PLANNING
    return "Hello! Ask me anything."


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    model = ToolModel(assistant)
    agents = {"main": {"model": model.name, "tools": ["add", "echo"]}}
    with gateway(tmp_path, model, agents=agents) as running:
        running.engine.tools.add_source(toolbox())
        yield running


async def converse(page: Page, gw: Gateway) -> None:
    await sign_in(page, gw.url, gw.keys["alice"])
    for text in ("What should I do on Saturday?", "/new", "How many items in both orders?"):
        await send(page, text)
        await wait_idle(page)
    await expect(page.get_by_role("region", name="Chain").locator("li.segment")).to_have_count(2)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_no_serious_accessibility_violation(
    gw: Gateway, size: str, scheme: Literal["light", "dark"]
) -> None:
    viewport = DESKTOP if size == "desktop" else PHONE
    async with chromium() as browser, new_page(browser, viewport, color_scheme=scheme) as page:
        await page.goto(gw.url + "/")
        await expect(page.get_by_label("API key")).to_be_enabled()
        assert await serious_violations(page) == []  # the sign-in view
        await converse(page, gw)
        await page.locator(".turn details.step").first.locator("summary").click()
        assert await serious_violations(page) == []  # the signed-in chat view
        await page.get_by_role("button", name="Context").click()
        await expect(page.get_by_role("dialog")).to_contain_text("tokens")
        assert await serious_violations(page) == []  # a dialog open over it
        await page.keyboard.press("Escape")
        await expect(page.get_by_role("dialog")).to_have_count(0)
        await expect(page.get_by_role("button", name="Context")).to_be_focused()


async def test_usable_at_phone_width(gw: Gateway) -> None:
    async with chromium() as browser, new_page(browser, PHONE) as page:
        await converse(page, gw)
        # Nothing wider than the screen: no sideways scrolling.
        width = await page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE["width"]
        for name in ("Send", "New segment"):
            box = await page.get_by_role("button", name=name).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
            assert box["height"] >= 32  # big enough to tap


async def test_screenshots(gw: Gateway) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    async with chromium() as browser:
        for name, viewport in (("web-desktop.png", DESKTOP), ("web-phone.png", PHONE)):
            async with new_page(browser, viewport) as page:
                if name == "web-desktop.png":
                    await converse(page, gw)
                else:
                    await sign_in(page, gw.url, gw.keys["alice"])
                await (
                    page.locator(".turn details.step, .transcript details.step")
                    .first.locator("summary")
                    .click()
                )
                await page.get_by_label("Message", exact=True).fill(
                    "Thanks! Add the market as a task."
                )
                path = SCREENSHOTS / name
                await page.screenshot(path=str(path))
                assert path.stat().st_size > 10_000
