"""The page in Chromium against a real gateway: signing in and out, a reply streaming in,
`/new` and the chain, tool steps, reloads (after and in the middle of a turn), one user
never seeing another's keys, and the whole thing by keyboard alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import Page, expect

from tests.support.agent_models import Call, ToolModel, toolbox
from tests.web.browser import (
    PacedModel,
    chromium,
    gateway,
    last_reply,
    new_page,
    send,
    sign_in,
    wait_idle,
    watched,
)

LONG_REPLY = " ".join(f"word{n}" for n in range(1, 31))


def echo_model(delay: float = 0.0) -> PacedModel:
    return PacedModel(lambda text: f"You said: {text}", delay=delay)


async def stored_key(page: Page) -> str | None:
    value = await page.evaluate("() => sessionStorage.getItem('sg.apiKey')")
    return None if value is None else str(value)


async def test_sign_in_and_sign_out_clears_the_key(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await page.goto(gw.url + "/")
            await page.get_by_label("API key").fill("not-a-key")
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.locator("#signin-error .error code")).to_have_text("invalid_api_key")
            assert await stored_key(page) is None

            await sign_in(page, gw.url, gw.keys["alice"])
            assert await stored_key(page) == gw.keys["alice"]
            await expect(page.locator("#whoami")).to_have_text("alice")
            assert gw.keys["alice"] not in page.url

            await page.get_by_role("button", name="Sign out").click()
            await expect(page.get_by_label("API key")).to_be_visible()
            assert await stored_key(page) is None
            assert await page.evaluate("() => Object.keys(sessionStorage)") == []
            await page.reload()  # nothing left to sign back in with
            await expect(page.get_by_label("API key")).to_be_enabled()
            await expect(page.get_by_role("navigation", name="Sessions")).to_be_hidden()


async def test_tokens_appear_as_they_arrive(tmp_path: Path) -> None:
    model = PacedModel(lambda text: LONG_REPLY, delay=0.05)
    with gateway(tmp_path, model) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, "count for me")
            seen: list[str] = []
            reply = last_reply(page)
            for _ in range(400):
                if await reply.count():
                    text = await reply.first.text_content() or ""
                    if text and (not seen or seen[-1] != text):
                        seen.append(text)
                    if text == LONG_REPLY:
                        break
                await asyncio.sleep(0.01)
            partial = [text for text in seen if text != LONG_REPLY]
            assert len(set(partial)) >= 2, seen
            assert all(LONG_REPLY.startswith(text) for text in partial)
            assert seen[-1] == LONG_REPLY
            await wait_idle(page)
            await expect(page.locator("#announcer")).to_contain_text("Reply finished")
            # The routed turn landed on alice's key, now listed and selected.
            await expect(
                page.get_by_role("navigation", name="Sessions").get_by_role(
                    "button", name="chat:alice"
                )
            ).to_have_attribute("aria-current", "true")


async def test_new_segment_shows_two_segments_in_the_chain(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, "first topic")
            await expect(last_reply(page)).to_have_text("You said: first topic")
            await wait_idle(page)
            chain = page.get_by_role("region", name="Chain")
            await expect(chain.locator("li.segment")).to_have_count(1)

            await send(page, "/new")
            await wait_idle(page)
            await expect(chain.locator("li.segment")).to_have_count(2)
            await expect(chain.locator("li.segment").nth(1)).to_contain_text("manual")
            await expect(page.locator(".note.rotation").last).to_contain_text("manual")

            await page.get_by_role("button", name="New segment").click()
            await expect(chain.locator("li.segment")).to_have_count(3)
            await expect(chain.locator("li.segment").nth(2)).to_have_attribute(
                "data-reason", "manual"
            )
            # An archived segment's messages, read-only.
            await chain.get_by_role("button", name="Show segment 1").click()
            await expect(page.locator("#segment-banner")).to_contain_text("archived")
            await expect(page.locator(".transcript .msg.user .text")).to_have_text(["first topic"])
            await page.get_by_role("button", name="Back to latest").click()
            await expect(page.locator(".transcript .msg.user")).to_have_count(0)


async def test_a_tool_turn_shows_its_steps(tmp_path: Path) -> None:
    calls = [Call("add", {"a": 2, "b": 3}, "c1"), Call("echo", {"text": "hi"}, "c2")]
    model = ToolModel(
        lambda messages, options: calls if messages[-1]["role"] == "user" else "It is **5**."
    )
    agents = {"main": {"model": model.name, "tools": ["add", "echo"]}}
    with gateway(tmp_path, model, agents=agents) as gw:
        gw.engine.tools.add_source(toolbox())
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, "add 2 and 3")
            await wait_idle(page)
            steps = page.locator(".turn details.step")
            await expect(steps).to_have_count(2)
            add = steps.filter(has_text="Tool add")
            await expect(add.locator("summary")).to_contain_text("Tool add: ok")
            assert not await add.get_attribute("open")  # collapsed until asked
            await add.locator("summary").click()
            await expect(add.locator("pre").first).to_be_visible()
            await expect(add.locator("pre")).to_have_text(['{\n  "a": 2,\n  "b": 3\n}', "5"])
            echo = steps.filter(has_text="Tool echo")
            await expect(echo.locator("pre").last).to_have_text("alice:hi")
            await expect(last_reply(page).locator("strong")).to_have_text("5")

            # After a reload the stored turn still shows its calls and results.
            await page.reload()
            await expect(page.locator(".transcript details.step")).to_have_count(4)
            await expect(page.locator(".transcript details.step").first).to_contain_text("Tool add")


async def test_reload_after_a_turn_keeps_everything_once(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            for text in ("one", "two", "three"):
                await send(page, text)
                await wait_idle(page)
            users = page.locator(".transcript .msg.user .text")
            replies = page.locator(".transcript .msg.assistant .text")
            await expect(users).to_have_text(["one", "two", "three"])
            await expect(replies).to_have_text(
                ["You said: one", "You said: two", "You said: three"]
            )
            await page.reload()
            await expect(users).to_have_text(["one", "two", "three"])
            await expect(replies).to_have_text(
                ["You said: one", "You said: two", "You said: three"]
            )
            await expect(page.locator("#conversation-title")).to_have_text("chat:alice")


async def reload_mid_turn(tmp_path: Path, *, turn_gone: bool) -> list[tuple[str, str, str]]:
    """Reloads while a reply streams and checks that it ends whole and once. Returns the
    resuming requests the page made: (method, path, Last-Event-ID). With `turn_gone` the
    gateway's resume route answers 404, as after a restart."""
    model = PacedModel(lambda text: LONG_REPLY, delay=0.08)
    resumes: list[tuple[str, str, str]] = []
    with gateway(tmp_path, model) as gw:
        async with chromium() as browser, new_page(browser) as page:
            if turn_gone:
                await page.route(
                    "**/v1/turns/*/events",
                    lambda route: route.fulfill(
                        status=404,
                        json={"error": {"code": "turn_not_found", "message": "gone"}},
                    ),
                )
            page.on(
                "request",
                lambda request: (
                    resumes.append(
                        (request.method, request.url, request.headers.get("last-event-id", ""))
                    )
                    if request.headers.get("last-event-id")
                    else None
                ),
            )
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, "first")
            await wait_idle(page)
            await send(page, "a long one")
            await expect(last_reply(page)).to_contain_text("word5")
            assert await page.evaluate("() => sessionStorage.getItem('sg.pending')") is not None
            await page.reload()
            await expect(last_reply(page)).to_have_text(LONG_REPLY, timeout=15_000)
            await wait_idle(page)
            await expect(page.locator(".transcript .msg.user .text")).to_have_text(
                ["first", "a long one"]
            )
            await expect(page.locator(".transcript .msg.assistant .text")).to_have_text(
                [LONG_REPLY, LONG_REPLY]
            )
            assert await page.locator(".transcript .error").count() == 0
            # And the store agrees: one turn, one reply.
            await page.reload()
            await expect(page.locator(".transcript .msg.assistant .text")).to_have_text(
                [LONG_REPLY, LONG_REPLY]
            )
            assert watched(page).errors == []
    return resumes


async def test_reload_in_the_middle_of_a_turn_loses_nothing(tmp_path: Path) -> None:
    resumes = await reload_mid_turn(tmp_path, turn_gone=False)
    # The gateway still had the turn: only the events after the last one seen were asked for.
    assert [method for method, _, _ in resumes] == ["GET"]
    _, url, last = resumes[0]
    assert "/v1/turns/" in url and url.endswith("/events")
    assert int(last.rsplit(".", 1)[1]) >= 2


async def test_reload_when_the_gateway_lost_the_turn_retries_the_same_turn(
    tmp_path: Path,
) -> None:
    resumes = await reload_mid_turn(tmp_path, turn_gone=True)
    # 404 from the resume route, then the same POST with the same Idempotency-Key.
    assert [method for method, _, _ in resumes] == ["GET", "POST"]


async def test_a_second_user_cannot_see_the_first_users_keys(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser:
            async with new_page(browser) as alice:
                await sign_in(alice, gw.url, gw.keys["alice"])
                await alice.get_by_label("Open or start a key").fill("alice:secret-plans")
                await alice.get_by_label("Open or start a key").press("Enter")
                await send(alice, "my secret plan")
                await wait_idle(alice)
                sessions = alice.get_by_role("navigation", name="Sessions")
                await expect(
                    sessions.get_by_role("button", name="alice:secret-plans")
                ).to_be_visible()
            async with new_page(browser) as bob:
                await sign_in(bob, gw.url, gw.keys["bob"])
                await send(bob, "hello")
                await wait_idle(bob)
                sessions = bob.get_by_role("navigation", name="Sessions")
                keys = await sessions.locator("button.session .key").all_text_contents()
                assert keys == ["chat:bob"]
                # Naming alice's key opens bob's own (empty) key of that name.
                await bob.get_by_label("Open or start a key").fill("alice:secret-plans")
                await bob.get_by_label("Open or start a key").press("Enter")
                await expect(bob.locator("#conversation-title")).to_have_text("alice:secret-plans")
                await expect(bob.locator(".transcript")).not_to_contain_text("secret plan")
                await expect(
                    bob.get_by_role("region", name="Chain").locator("li.segment")
                ).to_have_count(0)


async def test_keyboard_only(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await page.goto(gw.url + "/")
            await expect(page.get_by_label("API key")).to_be_focused()
            await page.keyboard.type(gw.keys["alice"])
            await page.keyboard.press("Enter")
            await expect(page.get_by_label("Message", exact=True)).to_be_focused()
            await page.keyboard.type("typed, not clicked")
            await page.keyboard.press("Shift+Enter")
            await page.keyboard.type("second line")
            await page.keyboard.press("Enter")
            await expect(last_reply(page)).to_have_text(
                "You said: typed, not clicked\nsecond line", use_inner_text=True
            )
            await expect(page.locator(".transcript .msg.user .text")).to_have_text(
                "typed, not clicked\nsecond line"
            )
            await wait_idle(page)
            await expect(page.get_by_label("Message", exact=True)).to_have_value("")
            await page.get_by_label("Message", exact=True).focus()
            await page.keyboard.type("and with control")
            await page.keyboard.press("Control+Enter")
            await expect(last_reply(page)).to_have_text("You said: and with control")
            await wait_idle(page)

            new_segment = page.get_by_role("button", name="New segment")
            for _ in range(20):
                if await new_segment.evaluate("button => button === document.activeElement"):
                    break
                await page.keyboard.press("Shift+Tab")
            await expect(new_segment).to_be_focused()
            await page.keyboard.press("Enter")
            chain = page.get_by_role("region", name="Chain")
            await expect(chain.locator("li.segment")).to_have_count(2)
            # Ctrl+K jumps to the key search.
            await page.keyboard.press("Control+k")
            await expect(page.get_by_label("Search keys")).to_be_focused()
