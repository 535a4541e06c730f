"""The working set on the page (issue 21): where earlier messages were summarised, a
divider with the summary in force; "Show original" expands the raw messages it covers,
as they were kept; "Undo" reverts the compaction through the API. The next turn's
`compaction` event brings the divider in; no serious accessibility violation (axe-core)."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import expect

from tests.support.served import relay_model, served_gateway
from tests.web.browser import (
    PacedModel,
    call,
    chromium,
    gateway,
    last_reply,
    new_page,
    send,
    serious_violations,
    sign_in,
    wait_idle,
)


def reply(text: str) -> str:
    if text.startswith("Messages to add to it"):
        return "They planned the launch for Thursday."
    return f"You said: {text}"


async def test_a_divider_shows_the_summary_the_originals_and_undoes(tmp_path: Path) -> None:
    models = {"scripted": {"provider": "offline", "context_window": 4096}}
    agents = {"defaults": {"model": "scripted", "context": {"keep_recent": 2, "compact_at": 1.0}}}
    with gateway(tmp_path, PacedModel(reply), models=models, agents=agents) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            for text in ("first topic", "second topic", "third topic"):
                await send(page, text)
                await expect(last_reply(page)).to_have_text(f"You said: {text}")
                await wait_idle(page)
            made = await call(gw, "POST", "/v1/sessions/chat:alice/compact", json={})
            assert made.status_code == 200, made.text
            record = made.json()["compaction"]
            assert record["covers"] == {"first_seq": 1, "last_seq": 4, "count": 4}

            # The next turn announces it; the divider stands where the messages were.
            await send(page, "and now?")
            await expect(last_reply(page)).to_have_text("You said: and now?")
            await wait_idle(page)
            transcript = page.locator("#transcript")
            divider = page.get_by_role("region", name="Summary of messages 1 to 4")
            await expect(divider).to_be_visible()
            await expect(divider.locator(".summary")).to_have_text(
                "They planned the launch for Thursday."
            )
            await expect(transcript).not_to_contain_text("first topic")
            await expect(transcript.locator(".msg").last).to_contain_text("You said: and now?")

            show = divider.get_by_role("button", name="Show original")
            await expect(show).to_have_attribute("aria-expanded", "false")
            await show.click()
            originals = divider.locator(".originals")
            await expect(originals).to_be_visible()
            await expect(originals.locator(".msg")).to_have_count(4)
            await expect(originals).to_contain_text("first topic")
            await expect(originals).to_contain_text("You said: second topic")
            await expect(divider.get_by_role("button", name="Hide original")).to_have_attribute(
                "aria-expanded", "true"
            )
            assert await serious_violations(page) == []
            await divider.get_by_role("button", name="Hide original").click()
            await expect(originals).to_be_hidden()

            await divider.get_by_role("button", name="Undo").click()
            await expect(page.locator(".compaction-divider")).to_have_count(0)
            await expect(transcript).to_contain_text("first topic")
            await expect(page.locator("#announcer")).to_contain_text("Summary undone")
            listed = await call(gw, "GET", "/v1/sessions/chat:alice/compactions")
            assert listed.json()["in_force"] is None
            assert listed.json()["compactions"][0]["reverted"] is True

            # A reload shows the segment as the gateway has it: no summary in force.
            await page.reload()
            await expect(page.locator("#transcript")).to_contain_text("first topic")
            await expect(page.locator(".compaction-divider")).to_have_count(0)


async def test_the_divider_through_sessiongate_serve(tmp_path: Path) -> None:
    config = relay_model(tmp_path, "relay", context_window=4096)
    config += (
        '[agents.defaults]\nmodel = "relay"\n'
        "[agents.defaults.context]\nkeep_recent = 2\ncompact_at = 1.0\n"
    )
    with served_gateway(tmp_path, config, {"alice": ("--primary",)}) as served:
        with served.client("alice") as http:
            for text in ("alpha", "beta", "gamma"):
                sent = http.post(
                    "/v1/sessions/c:page/messages", json={"content": text, "stream": False}
                )
                assert sent.status_code == 200, sent.text
            made = http.post("/v1/sessions/c:page/compact", json={"instructions": "short"})
            assert made.status_code == 200, made.text
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, served.url, served.keys["alice"])
            sessions = page.get_by_role("navigation", name="Sessions")
            await sessions.get_by_role("button", name="c:page").click()
            divider = page.get_by_role("region", name="Summary of messages 1 to 4")
            await expect(divider).to_be_visible()
            # Only the two newest messages stay outside the divider.
            await expect(page.locator("#transcript > [data-message-id]")).to_have_count(2)
            await expect(page.locator("#transcript")).to_contain_text("gamma")
            await divider.get_by_role("button", name="Show original").click()
            await expect(divider.locator(".originals")).to_contain_text("alpha")
            await divider.get_by_role("button", name="Undo").click()
            await expect(page.locator(".compaction-divider")).to_have_count(0)
        with served.client("alice") as http:
            assert http.get("/v1/sessions/c:page/compactions").json()["in_force"] is None
