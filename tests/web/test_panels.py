"""The per-key panels in Chromium against a real gateway: settings (overrides) kept across a
reload, recall with a rationale into the next turn, export and import under a new name,
and reverting a semantic rotation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from playwright.async_api import Page, expect

from sessiongate.core.keys import KeyRef
from sessiongate.models.base import NO_OPTIONS, ModelChunk, ModelOptions, TextDelta, Usage
from sessiongate.models.base import WireMessage as Wire
from tests.support.gateway import Gateway, run_sync
from tests.web.browser import (
    PacedModel,
    call,
    chromium,
    gateway,
    last_reply,
    new_page,
    send,
    sign_in,
    wait_idle,
    watched,
)


def echo_model() -> PacedModel:
    return PacedModel(lambda text: f"You said: {text}")


class RecallAwareModel:
    """Says whether its context held recalled fragments, and which."""

    name = "scripted"

    async def stream(
        self, messages: Sequence[Wire], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        recalled = [
            str(m["content"])
            for m in messages
            if m["role"] == "system" and "Recalled from" in str(m["content"])
        ]
        yield TextDelta(f"recalled: {recalled[0]}" if recalled else "nothing recalled")
        yield Usage(prompt_tokens=len(messages), completion_tokens=3)


async def chat_on(page: Page, gw: Gateway, key: str) -> None:
    await sign_in(page, gw.url, gw.keys["alice"])
    await page.get_by_label("Open or start a key").fill(key)
    await page.get_by_role("button", name="Open", exact=True).click()
    await expect(page.locator("#conversation-title")).to_have_text(key)


async def overrides_of(gw: Gateway, key: str) -> object:
    return (await call(gw, "GET", f"/v1/sessions/{key}")).json()["overrides"]


async def test_settings_are_kept_cleared_and_refused_with_the_code(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await chat_on(page, gw, "work")
            await send(page, "hello")
            await wait_idle(page)

            await page.get_by_role("button", name="Settings").click()
            dialog = page.get_by_role("dialog")
            await dialog.get_by_label("Idle window").fill("2h")
            await dialog.get_by_label("Semantic threshold").fill("0.6")
            await dialog.get_by_role("button", name="Save settings").click()
            await expect(dialog).to_have_count(0)
            await expect(page.locator("#announcer")).to_have_text("Settings saved.")
            assert await overrides_of(gw, "work") == {
                "lifecycle": {"idle_window": "2h", "semantic_threshold": 0.6}
            }

            await page.reload()
            await expect(page.locator("#conversation-title")).to_have_text("work")
            await page.get_by_role("button", name="Settings").click()
            await expect(dialog.get_by_label("Idle window")).to_have_value("2h")
            await expect(dialog.get_by_label("Semantic threshold")).to_have_value("0.6")

            # An emptied field removes that override only.
            await dialog.get_by_label("Idle window").fill("")
            await dialog.get_by_role("button", name="Save settings").click()
            await expect(dialog).to_have_count(0)
            assert await overrides_of(gw, "work") == {"lifecycle": {"semantic_threshold": 0.6}}
            await page.get_by_role("button", name="Settings").click()
            await expect(dialog.get_by_label("Idle window")).to_have_value("")
            await expect(dialog.get_by_label("Semantic threshold")).to_have_value("0.6")

            # A value the gateway refuses: its code in the dialog, nothing saved.
            await dialog.get_by_label("Idle window").fill("banana")
            await dialog.get_by_role("button", name="Save settings").click()
            await expect(dialog.locator(".error code")).to_have_text("invalid_override")
            await expect(dialog).to_be_visible()
            assert await overrides_of(gw, "work") == {"lifecycle": {"semantic_threshold": 0.6}}
            await dialog.get_by_label("Reply model").fill("no-such-model")
            await dialog.get_by_label("Idle window").fill("")
            await dialog.get_by_role("button", name="Save settings").click()
            # A model none of the user's agents lists is refused like any model they
            # may not pick, whether or not it exists (core/agent_access.py).
            await expect(dialog.locator(".error code")).to_have_text("model_not_allowed")
            assert watched(page).errors == []


async def test_recall_with_a_rationale_reaches_the_next_turn(tmp_path: Path) -> None:
    with gateway(tmp_path, RecallAwareModel()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await chat_on(page, gw, "garden")
            await send(page, "The tomatoes go in the south bed with basil")
            await wait_idle(page)
            await send(page, "/new")
            await wait_idle(page)
            await expect(page.locator("#chain-list li.segment")).to_have_count(2)
            first_segment = await call(gw, "GET", "/v1/sessions/garden")
            archived_id = first_segment.json()["segments"][0]["session_id"]

            await page.get_by_role("button", name="Recall").click()
            dialog = page.get_by_role("dialog")
            await dialog.get_by_label("What to look for").fill("tomatoes")
            await dialog.get_by_label("Why").fill("planning the beds again")
            await dialog.get_by_role("button", name="Search history").click()
            fragment = dialog.locator("ol.fragments li").first
            await expect(fragment).to_contain_text("The tomatoes go in the south bed")
            await expect(fragment).to_contain_text("Rationale: planning the beds again")
            await expect(fragment).to_contain_text("score")
            await expect(fragment).to_contain_text("segment 1")
            await expect(fragment.locator("[data-session-id]")).to_have_attribute(
                "data-session-id", archived_id
            )

            await dialog.get_by_role("button", name="Use in my next message").click()
            await expect(page.locator("#recall-chip")).to_contain_text("tomatoes")
            # The Context viewer shows what the next turn will send: the recall included.
            await page.get_by_role("button", name="Context").click()
            await expect(dialog.locator(".recalled")).to_contain_text(
                "The tomatoes go in the south bed"
            )
            await expect(dialog.locator(".recalled")).to_contain_text("planning the beds again")
            await page.keyboard.press("Escape")
            await expect(page.get_by_role("dialog")).to_have_count(0)

            await send(page, "What goes with the tomatoes?")
            await expect(last_reply(page)).to_contain_text("recalled:")
            await expect(last_reply(page)).to_contain_text("south bed")
            await wait_idle(page)
            await expect(page.locator("#recall-chip")).to_be_hidden()
            # The rationale is kept with the turn: shown on the stored message after a reload.
            await page.reload()
            recall_note = page.locator(".transcript .msg.user .recall-note")
            await expect(recall_note).to_contain_text("planning the beds again")
            # Without a queued recall the Context viewer shows none.
            await page.get_by_role("button", name="Context").click()
            await expect(dialog).to_contain_text("tokens")
            await expect(dialog.locator(".recalled")).to_have_count(0)


async def test_the_context_viewer_without_a_recall_prints_no_null(tmp_path: Path) -> None:
    """With no recall queued the dialog is the summary line then the context: nothing
    between them (the "no recall" null once came out as the text `null`)."""
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await chat_on(page, gw, "plain")
            await send(page, "hello there")
            await wait_idle(page)
            await page.get_by_role("button", name="Context").click()
            body = page.get_by_role("dialog").locator(".dialog-body")
            await expect(body.locator("ol.context li")).to_have_count(2)
            text = await body.inner_text()
            assert "null" not in text, text
            children = await body.evaluate(
                "(node) => [...node.childNodes].map((c) => c.nodeName + ':' + c.textContent)"
            )
            assert [child.split(":")[0] for child in children] == ["P", "OL"], children
            assert watched(page).errors == []


async def test_export_downloads_ndjson_and_imports_under_a_new_name(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser, new_page(browser, accept_downloads=True) as page:
            await chat_on(page, gw, "trip")
            await send(page, "pack the tent")
            await wait_idle(page)

            async with page.expect_download() as downloading:
                await page.get_by_role("button", name="Export").click()
            download = await downloading.value
            assert download.suggested_filename == "trip.jsonl"
            saved = tmp_path / "trip.jsonl"
            await download.save_as(saved)
            lines = saved.read_text(encoding="utf-8").splitlines()
            first = json.loads(lines[0])
            assert first["key"] == "trip", first
            assert any("pack the tent" in line for line in lines)

            # The same key again is refused, with the gateway's code in the dialog.
            await page.get_by_role("button", name="Import").click()
            dialog = page.get_by_role("dialog")
            await dialog.get_by_label("Export file").set_input_files(saved)
            await dialog.get_by_role("button", name="Import").click()
            await expect(dialog.locator(".error code")).not_to_be_empty()
            refused = await dialog.locator(".error code").text_content()

            await dialog.get_by_label("Import as key").fill("trip-copy")
            await dialog.get_by_role("button", name="Import").click()
            await expect(dialog).to_have_count(0)
            await expect(page.locator("#conversation-title")).to_have_text("trip-copy")
            sessions = page.get_by_role("navigation", name="Sessions")
            await expect(sessions.get_by_role("button", name="trip-copy")).to_have_attribute(
                "aria-current", "true"
            )
            await expect(page.locator(".transcript .msg.user .text")).to_have_text(
                ["pack the tent"]
            )
            keys = (await call(gw, "GET", "/v1/sessions")).json()
            assert sorted(s["key"] for s in keys["sessions"]) == ["trip", "trip-copy"]
            assert refused and refused != "error"


async def test_revert_a_semantic_rotation_from_the_page(tmp_path: Path) -> None:
    # The built-in judge (no control model configured): no shared words → confidence 1.0.
    lifecycle = {
        "timezone": "UTC",
        "semantic": {"enabled": True, "threshold": 0.8, "min_messages": 2},
    }
    with gateway(tmp_path, echo_model(), lifecycle=lifecycle) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await chat_on(page, gw, "topics")
            for text in (
                "my sourdough bread starter smells sour, what flour helps",
                "which flour makes the sourdough starter less sour",
                "explain kubernetes ingress controllers",
            ):
                await send(page, text)
                await wait_idle(page)
            rotation = page.locator(".turn .note.rotation").last
            await expect(rotation).to_contain_text("new topic (semantic)")
            await expect(rotation).to_contain_text("confidence 1")
            chain = page.locator("#chain-list li.segment")
            await expect(chain).to_have_count(2)
            await expect(chain.nth(1)).to_have_attribute("data-reason", "semantic")

            await rotation.get_by_role("button", name="Revert").click()
            await expect(page.locator("#announcer")).to_have_text("Rotation reverted.")
            await expect(chain).to_have_count(3)
            await expect(chain.nth(2)).to_have_attribute("data-reason", "revert")
            await expect(chain.nth(2)).to_contain_text("continues segments 1 and 2")
            # Nothing to revert any more: the chain offers no Revert, the API agrees.
            await expect(
                page.locator("#chain-list").get_by_role("button", name="Revert")
            ).to_have_count(0)
            again = await call(gw, "POST", "/v1/sessions/topics/revert")
            assert again.status_code == 409
            # The continuation's context has the whole conversation back.
            await page.get_by_role("button", name="Context").click()
            dialog = page.get_by_role("dialog")
            await expect(dialog).to_contain_text("sourdough")
            await expect(dialog).to_contain_text("kubernetes")


async def test_the_session_list_holds_keys_past_the_listings_first_page(tmp_path: Path) -> None:
    """GET /v1/sessions answers at most 1000 keys a page: the page follows next_cursor,
    so a key sorting after the first page is listed too, and (being the most recently
    active) is the one a fresh sign-in continues."""
    with gateway(tmp_path, echo_model()) as gw:
        store, ids = gw.engine.store, gw.engine.sessions.ids
        earlier = datetime.now(UTC) - timedelta(days=1)

        async def fill() -> None:
            for n in range(1001):
                await store.create_key(KeyRef("alice", f"k{n:04d}"), ids.new(), earlier)
            await store.create_key(KeyRef("alice", "zz-latest"), ids.new(), datetime.now(UTC))

        run_sync(fill())
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            sessions = page.get_by_role("navigation", name="Sessions")
            await expect(sessions.locator("button.session")).to_have_count(1002)
            await expect(page.locator("#conversation-title")).to_have_text("zz-latest")
