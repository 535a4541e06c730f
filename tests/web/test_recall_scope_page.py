"""The page's Recall dialog with "Look in: all my conversations" (recall scope "all",
DESIGN.md §13): a fact said in another key is found, named by its key, and reaches the
next turn of this key."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import expect

from tests.web.browser import chromium, gateway, last_reply, new_page, send, wait_idle
from tests.web.test_panels import RecallAwareModel, chat_on


async def test_recall_from_all_conversations_reaches_the_next_turn(tmp_path: Path) -> None:
    with gateway(tmp_path, RecallAwareModel()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await chat_on(page, gw, "garden")
            await send(page, "The tomatoes go in the south bed with basil")
            await wait_idle(page)
            await send(page, "/new")
            await wait_idle(page)
            await page.get_by_label("Open or start a key").fill("kitchen")
            await page.get_by_role("button", name="Open", exact=True).click()
            await expect(page.locator("#conversation-title")).to_have_text("kitchen")
            await send(page, "hello")
            await wait_idle(page)

            await page.get_by_role("button", name="Recall").click()
            dialog = page.get_by_role("dialog")
            await dialog.get_by_label("What to look for").fill("tomatoes")
            await dialog.get_by_label("Why").fill("what to cook from the garden")
            await dialog.get_by_role("button", name="Search history").click()
            await expect(dialog.locator("h3")).to_have_text("0 fragments")  # kitchen only
            await dialog.get_by_label("Look in").select_option("all")
            await dialog.get_by_role("button", name="Search history").click()
            fragment = dialog.locator("ol.fragments li").first
            await expect(fragment).to_contain_text("The tomatoes go in the south bed")
            await expect(fragment).to_contain_text("garden ·")
            await dialog.get_by_role("button", name="Use in my next message").click()
            await expect(page.locator("#recall-chip")).to_contain_text(
                "from all your conversations"
            )

            await send(page, "What can I cook?")
            await expect(last_reply(page)).to_contain_text("south bed")
            await wait_idle(page)
