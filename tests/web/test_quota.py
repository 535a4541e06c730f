"""The page's quota line (DESIGN.md §15): "quota: N of M requests this minute" beside the
user's name, counting up after a turn, hidden for a user without quotas; a turn over the
quota shows its `quota_exceeded` error and nothing is stored."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from playwright.async_api import expect

from tests.web.browser import PacedModel, call, chromium, gateway, new_page, send, sign_in


def _fresh_minute(margin: float = 20.0) -> None:
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.2)


async def test_the_quota_line_counts_turns_and_a_refusal_shows_its_code(tmp_path: Path) -> None:
    model = PacedModel(lambda text: f"You said: {text}")
    with gateway(tmp_path, model, quotas={"requests_per_minute": 2}) as gw:
        async with chromium() as browser, new_page(browser) as page:
            _fresh_minute()
            await sign_in(page, gw.url, gw.keys["alice"])
            quota = page.locator("#quota")
            await expect(quota).to_have_text("quota: 0 of 2 requests this minute")
            await send(page, "first")
            await expect(quota).to_have_text("quota: 1 of 2 requests this minute")
            await send(page, "second")
            await expect(quota).to_have_text("quota: 2 of 2 requests this minute")
            await send(page, "third, refused")
            await expect(page.locator(".error code").last).to_have_text("quota_exceeded")
        with sqlite3.connect(gw.engine.settings.sqlite_path) as db:
            rows = db.execute("SELECT content FROM messages WHERE role = 'user'").fetchall()
        assert sorted(r[0] for r in rows) == ["first", "second"]  # the refused one: not stored
        answer = await call(gw, "GET", "/v1/me/quotas")
        assert answer.json()["quotas"]["requests_per_minute"]["used"] == 2


async def test_no_quota_no_line(tmp_path: Path) -> None:
    model = PacedModel(lambda text: f"You said: {text}")
    with gateway(tmp_path, model) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await expect(page.locator("#whoami")).to_have_text("alice")
            await expect(page.locator("#quota")).to_be_hidden()
