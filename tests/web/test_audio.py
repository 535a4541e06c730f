"""A spoken reply in Chromium with a real espeak-ng voice: the parts (`audio_part`) play in
order as they arrive, the whole reply (`audio`) is then offered for replay without playing
again, every fetch carries the key in its header (never in the address), and after a
reload, or on another device, the reply's audio is there again."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, Request, expect

from tests.web.browser import (
    PacedModel,
    chromium,
    gateway,
    new_page,
    send,
    sign_in,
    wait_idle,
)

pytestmark = pytest.mark.skipif(
    shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (scripts/speech.sh)"
)

LONG = (
    "The first sentence is short. "
    "Then a second sentence follows, with a good many more words in it to speak aloud. "
    "A third sentence closes the reply, and it too has words enough to take a while."
)
SHORT = "Just one sentence here."
VOICES = {"normal": {"provider": "espeak", "voice": "en-us"}}
AGENTS = {"defaults": {"model": "scripted"}, "main": {"voice": "normal"}}

# Every play() the page asks for, with what the player held: which part, or the whole.
RECORD_PLAYS = """
window.__plays = [];
const play = HTMLMediaElement.prototype.play;
HTMLMediaElement.prototype.play = function () {
  window.__plays.push({ part: this.dataset.part ?? null, whole: this.dataset.whole ?? null,
                        src: this.currentSrc || this.src });
  return play.call(this);
};
"""

PLAYER_READY = """(selector) => {
    const players = document.querySelectorAll(selector);
    const player = players[players.length - 1];
    return player && player.dataset.whole === 'true' && player.src.startsWith('blob:')
        && player.duration > 0 && Number.isFinite(player.duration);
}"""


def reply_for(text: str) -> str:
    return SHORT if "short" in text else LONG


async def plays(page: Page) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = await page.evaluate("() => window.__plays")
    return found


async def test_parts_play_in_order_then_the_whole_is_offered_and_kept(tmp_path: Path) -> None:
    model = PacedModel(reply_for)
    with gateway(tmp_path, model, voices=VOICES, agents=AGENTS) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await page.add_init_script(RECORD_PLAYS)
            fetched: list[tuple[str, str | None]] = []

            def on_request(request: Request) -> None:
                if "/v1/artifacts/" in request.url:
                    fetched.append((request.url, request.headers.get("authorization")))

            page.on("request", on_request)
            await sign_in(page, gw.url, gw.keys["alice"])
            await page.get_by_label("Speak the reply").check()
            await send(page, "tell me three things")
            await wait_idle(page)
            await expect(page.locator(".turn .msg.assistant .text").last).to_have_text(LONG)
            selector = ".turn .audio audio"
            await page.wait_for_function(PLAYER_READY, arg=selector, timeout=30_000)
            await expect(page.locator(selector)).to_have_count(1)
            await expect(page.locator(selector)).to_have_attribute("aria-label", "Spoken reply")

            played = await plays(page)
            parts = [entry["part"] for entry in played]
            assert len(parts) >= 2, played  # a reply of three sentences comes in parts
            assert parts == [str(n) for n in range(len(parts))], played  # in order, once each
            assert all(entry["src"].startswith("blob:") for entry in played)
            # The whole reply is loaded for replay but was not played again.
            assert all(entry["whole"] is None for entry in played), played
            assert len(fetched) == len(parts) + 1, fetched  # each part, then the whole
            for url, authorization in fetched:
                assert authorization == f"Bearer {gw.keys['alice']}"
                assert gw.keys["alice"] not in url

            # A one-sentence reply has no parts: its whole audio is what plays.
            await send(page, "short please")
            await wait_idle(page)
            await expect(page.locator(selector)).to_have_count(2)
            await page.wait_for_function(PLAYER_READY, arg=selector, timeout=30_000)
            last = (await plays(page))[-1]
            assert last["whole"] == "true" and last["part"] is None, last

            # After a reload (same tab) the stored replies show their audio again, quietly.
            await page.reload()
            stored = ".transcript .msg.assistant .audio audio"
            await expect(page.locator(stored)).to_have_count(2)
            await page.wait_for_function(PLAYER_READY, arg=stored, timeout=30_000)
            first_ready = await page.evaluate(
                """() => [...document.querySelectorAll('.transcript .msg.assistant .audio audio')]
                    .map(a => a.src.startsWith('blob:'))"""
            )
            assert first_ready == [True, True]
            assert await plays(page) == []

        # Another device (a context of its own: nothing in its session storage) gets the
        # players back too: the gateway lists the key's spoken replies by turn.
        async with chromium() as browser, new_page(browser) as other:
            await other.add_init_script(RECORD_PLAYS)
            await sign_in(other, gw.url, gw.keys["alice"])
            stored = ".transcript .msg.assistant .audio audio"
            await expect(other.locator(stored)).to_have_count(2)
            await other.wait_for_function(PLAYER_READY, arg=stored, timeout=30_000)
            assert await plays(other) == []
