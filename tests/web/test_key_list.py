"""The key list in Chromium: conversations by their titles (the first user message, or the
one set with PATCH), searchable by title; on a phone, the list in view with its rows after
sign-in (once only a sliver of a 174 px box showed, below the fold)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, expect

from tests.support.gateway import Gateway
from tests.web.browser import (
    PHONE,
    PacedModel,
    call,
    chromium,
    gateway,
    new_page,
    sign_in,
    watched,
)

#: Rows of the key list a phone must show whole after sign-in (a 390 by 844 screen).
PHONE_ROWS = 5
QUESTION = "Plan the garden beds for spring: tomatoes, basil and beans near the fence {n}"


def echo_model() -> PacedModel:
    return PacedModel(lambda text: f"You said: {text}")


def fill_keys(gw: Gateway, count: int) -> None:
    """`count` conversations an OpenAI client started (`oai:chat:<uuid>` keys)."""
    with httpx.Client(base_url=gw.url, headers=gw.auth("alice"), timeout=30) as client:
        for n in range(count):
            answer = client.post(
                "/v1/chat/completions",
                json={
                    "model": "main",
                    "messages": [{"role": "user", "content": QUESTION.format(n=n)}],
                },
            )
            assert answer.status_code == 200, answer.text


async def whole_rows(page: Page) -> list[str]:
    """The key list's rows a reader sees whole now: inside the window, inside the list's
    own scroll box, and not covered by anything else (what is on top at their corners)."""
    seen: list[str] = await page.evaluate(
        """() => {
          const list = document.querySelector('#session-list');
          const box = list.getBoundingClientRect();
          const top = Math.max(0, box.top), bottom = Math.min(innerHeight, box.bottom);
          return [...list.querySelectorAll('button.session')].filter((row) => {
            const r = row.getBoundingClientRect();
            if (r.height === 0 || r.top < top - 0.5 || r.bottom > bottom + 0.5) return false;
            return [[r.left + 4, r.top + 2], [r.right - 4, r.bottom - 2]].every(
              ([x, y]) => row.contains(document.elementFromPoint(x, y)));
          }).map((row) => row.querySelector('.key').textContent);
        }"""
    )
    return seen


async def test_on_a_phone_the_key_list_shows_its_rows_after_sign_in(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        fill_keys(gw, 12)
        async with chromium() as browser, new_page(browser, PHONE) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await expect(page.locator("#session-list button.session")).to_have_count(12)
            await expect(page.locator("#session-list button.session").first).to_be_visible()
            shown = await whole_rows(page)
            assert len(shown) >= PHONE_ROWS, shown
            # The newest conversation first, and the one the page opened.
            assert shown[0] == (await page.locator("#conversation-title").text_content())
            # The same after a reload (the key kept in the tab signs in again).
            await page.reload()
            await expect(page.locator("#session-list button.session")).to_have_count(12)
            assert len(await whole_rows(page)) >= PHONE_ROWS
            # The search stays usable by name though its label is not drawn here.
            await expect(page.get_by_label("Search keys")).to_be_visible()
            assert watched(page).errors == []


async def test_the_list_shows_each_conversations_title_and_searches_it(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        fill_keys(gw, 2)
        listed: list[dict[str, Any]] = (await call(gw, "GET", "/v1/sessions")).json()["sessions"]
        assert all(s["key"].startswith("oai:chat:") for s in listed)
        titles = sorted(s["title"] for s in listed)
        assert titles == ["Plan the garden beds for spring: tomatoes, basil and beans\u2026"] * 2
        named = listed[0]["key"]
        patched = await call(gw, "PATCH", f"/v1/sessions/{named}", json={"title": "Beans"})
        assert patched.status_code == 200 and patched.json()["title"] == "Beans"
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            rows = page.locator("#session-list button.session")
            await expect(rows).to_have_count(2)
            texts = sorted(await rows.locator(".title").all_text_contents())
            assert texts == [
                "Beans",
                "Plan the garden beds for spring: tomatoes, basil and beans\u2026",
            ]
            # Each row still names its key, below the title.
            assert sorted(await rows.locator(".key").all_text_contents()) == sorted(
                s["key"] for s in listed
            )
            await page.get_by_label("Search keys").fill("beans")
            await expect(rows).to_have_count(2)  # the other's title says beans too
            await page.get_by_label("Search keys").fill("garden")  # "Beans" no longer does
            await expect(rows).to_have_count(1)
            await expect(rows.locator(".key")).to_have_text(
                next(s["key"] for s in listed if s["key"] != named)
            )
            assert watched(page).errors == []
