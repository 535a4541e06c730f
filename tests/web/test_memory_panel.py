"""The Memory view in Chromium against a real gateway (DESIGN.md §13, docs/web.md): the
items extraction kept and the user's own, pin and unpin, edit (the old text stays in the
history), forget, where an item came from with a link that opens its key scrolled to the
message, and no serious accessibility violation (axe-core)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from playwright.async_api import expect

from sessiongate.core.memory_extraction import EXTRACTION_SYSTEM_PROMPT
from sessiongate.models.base import WireMessage
from tests.support.gateway import Gateway
from tests.support.helpers import ScriptedModel
from tests.web.browser import (
    PacedModel,
    call,
    chromium,
    gateway,
    new_page,
    open_view,
    send,
    serious_violations,
    sign_in,
    wait_idle,
    watched,
)


def control_reply(messages: Sequence[WireMessage]) -> str:
    """Extraction: the user's city, once; anything else: nothing to keep."""
    if messages[0]["content"] != EXTRACTION_SYSTEM_PROMPT:
        return "a summary"
    said = str(messages[1]["content"]).split("<conversation>", 1)[1]
    if "I live in Lyon" in said:
        return json.dumps({"memory": [{"op": "add", "text": "Lives in Lyon."}]})
    return json.dumps({"memory": []})


async def items(gw: Gateway, history: bool = False) -> list[dict[str, Any]]:
    query = "?include_invalid=true" if history else ""
    answer = await call(gw, "GET", f"/v1/memory{query}")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


async def until_remembered(gw: Gateway, text: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        found = [i for i in await items(gw) if i["text"] == text]
        if found:
            return found[0]
        assert time.monotonic() < deadline, await items(gw)
        await asyncio.sleep(0.05)


async def test_the_memory_view_lists_pins_edits_forgets_and_links_to_the_message(
    tmp_path: Path,
) -> None:
    agents = {
        "defaults": {"model": "scripted"},
        "main": {"control_model": "control", "memory": {"extract": True}},
    }
    control = ScriptedModel("control", control_reply)
    with gateway(
        tmp_path, PacedModel(lambda text: f"You said: {text}"), others=[control], agents=agents
    ) as gw:
        mine = await call(gw, "POST", "/v1/memory", json={"text": "Prefers short answers."})
        assert mine.status_code == 201, mine.text
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await page.get_by_label("Open or start a key").fill("home")
            await page.get_by_role("button", name="Open", exact=True).click()
            await send(page, "I live in Lyon")
            await wait_idle(page)
            await until_remembered(gw, "Lives in Lyon.")
            # The next turn announces what was remembered, in the conversation.
            await send(page, "thanks")
            await wait_idle(page)
            await expect(page.locator(".transcript .note.memory")).to_have_text(
                ["Remembered: Lives in Lyon."]
            )
            for n in range(25):  # earlier pages of the conversation: the link pages back
                await call(
                    gw,
                    "POST",
                    "/v1/sessions/home/messages",
                    json={"content": f"n {n}", "stream": False},
                )
            lyon = await until_remembered(gw, "Lives in Lyon.")
            assert lyon["created_by"] == "extraction" and lyon["source"]["key"] == "home"

            await open_view(page, "Memory")
            view = page.locator("#memory-view")
            await expect(view.locator(".memory-text")).to_have_text(
                ["Lives in Lyon.", "Prefers short answers."]
            )
            assert await serious_violations(page) == []

            # Pin, then unpin.
            await view.get_by_role("button", name="Pin Lives in Lyon.").click()
            await expect(view.get_by_role("button", name="Unpin Lives in Lyon.")).to_be_visible()
            assert [i["pinned"] for i in await items(gw) if i["id"] == lyon["id"]] == [True]
            await view.get_by_role("button", name="Unpin Lives in Lyon.").click()
            await expect(view.get_by_role("button", name="Pin Lives in Lyon.")).to_be_visible()
            assert [i["pinned"] for i in await items(gw) if i["id"] == lyon["id"]] == [False]

            # Edit: a new item; the old one stays in the history, replaced.
            await view.get_by_role("button", name="Edit Lives in Lyon.").click()
            await view.get_by_label("Edit memory").fill("Lives in Lyon, France.")
            await view.get_by_role("button", name="Save").click()
            await expect(view.locator(".memory-text").first).to_have_text("Lives in Lyon, France.")
            (edited,) = [i for i in await items(gw) if i["text"] == "Lives in Lyon, France."]
            assert edited["created_by"] == "user" and edited["source"] == lyon["source"]
            old = [i for i in await items(gw, history=True) if i["id"] == lyon["id"]]
            assert old[0]["superseded_by"] == edited["id"]
            await view.get_by_label("Show replaced items too").check()
            await expect(view.locator(".memory.invalid .memory-text")).to_have_text(
                ["Lives in Lyon."]
            )
            await expect(view.locator(".memory.invalid .badge")).to_have_text(["replaced"])
            assert await serious_violations(page) == []
            await view.get_by_label("Show replaced items too").uncheck()

            # Forget: gone from the gateway, not only from the page.
            await view.get_by_role("button", name="Forget Prefers short answers.").click()
            await expect(view.locator("#memory-status")).to_have_text("Forgotten.")
            await expect(view.locator(".memory-text")).to_have_text(["Lives in Lyon, France."])
            gone = await call(gw, "GET", f"/v1/memory/{mine.json()['id']}")
            assert gone.status_code == 404

            # Add one by hand, pinned.
            await view.get_by_label("Remember").fill("Has a dog called Rex.")
            await view.get_by_label("Pinned").check()
            await view.get_by_role("button", name="Add to memory").click()
            await expect(view.locator("#memory-status")).to_have_text("Remembered.")
            (rex,) = [i for i in await items(gw) if i["text"] == "Has a dog called Rex."]
            assert rex["pinned"] and rex["created_by"] == "user" and rex["source"] is None

            # Where it came from: the key opens, paged back to the message, marked.
            await view.get_by_role("link", name="the message in home").click()
            await expect(page.locator("#conversation-title")).to_have_text("home")
            message_id = edited["source"]["message_ids"][0]
            marked = page.locator(f'[data-message-id="{message_id}"]')
            await expect(marked).to_have_class("msg user highlight")
            await expect(marked).to_contain_text("I live in Lyon")
            await expect(marked).to_be_focused()
            assert watched(page).errors == []
