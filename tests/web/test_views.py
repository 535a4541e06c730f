"""The Notes, Tasks and Modes views in Chromium against a real gateway: each one's whole
round trip through the public API, what a user without a mode enabled sees, and axe-core
on each view at desktop and phone width."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.async_api import expect

from tests.support.gateway import Gateway
from tests.web.browser import (
    DESKTOP,
    PHONE,
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

EXTRACTED = '{"tasks": [{"title": "Call the dentist", "due": "2031-03-05"}]}'


def echo_model() -> PacedModel:
    return PacedModel(lambda text: f"You said: {text}")


def enable_modes(gw: Gateway, user: str, modes: list[str]) -> None:
    """The admin's act (PATCH /v1/users/{name}): the page itself cannot enable a mode."""
    answer = httpx.patch(
        f"{gw.url}/v1/users/{user}", json={"modes_enabled": modes}, headers=gw.auth("root")
    )
    assert answer.status_code == 200, answer.text


async def test_notes_add_search_list_delete(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model()) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await open_view(page, "Notes")
            notes = page.locator("#note-list")
            await expect(notes).to_contain_text("No notes.")

            for title, content in (
                ("Bike", "The bike's rear brake pads need replacing."),
                ("Bread", "Sourdough: feed the starter twice a day."),
            ):
                await page.get_by_label("Title").fill(title)
                await page.get_by_label("Note", exact=True).fill(content)
                await page.get_by_role("button", name="Add note").click()
                await expect(page.locator("#notes-status")).to_have_text("Note added.")
                await expect(notes.locator("li h3").first).to_have_text(title)
            await expect(notes.locator("li.card")).to_have_count(2)  # newest first
            await expect(notes.locator("li h3")).to_have_text(["Bread", "Bike"])

            await page.get_by_label("Search notes").fill("brake")
            await page.get_by_role("button", name="Search", exact=True).click()
            await expect(notes.locator("li.card")).to_have_count(1)
            await expect(notes.locator("li.card")).to_contain_text("rear brake pads")
            await expect(notes.locator("li.card")).to_contain_text("score")

            # An emptied search lists every note again.
            await page.get_by_label("Search notes").fill("")
            await page.get_by_role("button", name="Search", exact=True).click()
            await expect(notes.locator("li.card")).to_have_count(2)
            await page.get_by_role("button", name="Delete note Bike").click()
            await expect(notes.locator("li.card")).to_have_count(1)
            await expect(notes.locator("li h3")).to_have_text(["Bread"])
            listed = (await call(gw, "GET", "/v1/notes")).json()
            assert [note["title"] for note in listed["notes"]] == ["Bread"]

            # Bad input shows the gateway's code, not a broken page.
            await page.get_by_label("Note", exact=True).fill("bad \x01 control")
            await page.get_by_role("button", name="Add note").click()
            await expect(page.locator("#notes-status .error code")).to_have_text("invalid_content")
            assert watched(page).errors == []


async def test_tasks_add_done_filter_and_an_extracted_task_shows_its_source(
    tmp_path: Path,
) -> None:
    control = PacedModel(lambda text: EXTRACTED, name="control")
    # The echo model answers (a reply of the offline stand-in is never read for tasks).
    agents = {
        "defaults": {"model": "scripted"},
        "main": {"control_model": "control", "extract_tasks": True},
    }
    with gateway(tmp_path, echo_model(), others=[control], agents=agents) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, "Remind me to call the dentist on 5 March 2031")
            await wait_idle(page)
            await gw.engine.turns.drain()  # extraction runs after the turn

            await open_view(page, "Tasks")
            tasks = page.locator("#task-list")
            extracted = tasks.locator("li", has_text="Call the dentist")
            await expect(extracted).to_contain_text("due 2031-03-05")
            await expect(extracted).to_contain_text("from chat:alice")

            await page.get_by_label("Task", exact=True).fill("Buy milk")
            await page.get_by_label("Due").fill("2031-01-02")
            await page.get_by_role("button", name="Add task").click()
            milk = tasks.locator("li", has_text="Buy milk")
            await expect(milk).to_contain_text("due 2031-01-02")
            await expect(milk).not_to_contain_text("from ")  # made here, not by a turn

            await milk.get_by_role("checkbox").check()
            await expect(page.locator("#tasks-status")).to_contain_text("Buy milk: done")
            # Under "open tasks" a ticked task leaves the list.
            await expect(tasks.locator("li", has_text="Buy milk")).to_have_count(0)
            await page.get_by_label("Show", exact=True).select_option("done")
            await expect(tasks.locator("li")).to_have_count(1)
            await expect(tasks.locator("li").first).to_contain_text("Buy milk")
            await expect(tasks.get_by_role("checkbox")).to_be_checked()
            await page.get_by_label("Show", exact=True).select_option("")
            await expect(tasks.locator("li")).to_have_count(2)
            stored = await call(gw, "GET", "/v1/tasks?status=done")
            assert [task["title"] for task in stored.json()["tasks"]] == ["Buy milk"]

            # A title of spaces passes the form's `required` but not the gateway: its code
            # is on the page.
            await page.get_by_label("Task", exact=True).fill("   ")
            await page.get_by_role("button", name="Add task").click()
            await expect(page.locator("#tasks-status .error code")).to_have_text("invalid_title")


MODES = {"work": {"unlock_ttl": "1h"}, "night": {"unlock_ttl": "10m"}}


async def test_modes_unlock_with_a_ttl_and_lock(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model(), modes=MODES) as gw:
        enable_modes(gw, "alice", ["work"])
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await open_view(page, "Modes")
            work = page.locator("#mode-list li", has_text="work")
            night = page.locator("#mode-list li", has_text="night")
            await expect(work.locator(".state")).to_have_text("Locked")
            await expect(night.locator(".state")).to_have_text("Not enabled")
            await expect(night.get_by_role("button")).to_have_count(0)

            await page.get_by_label("Unlock work for").fill("2h")  # more than unlock_ttl
            await page.get_by_role("button", name="Unlock work").click()
            await expect(page.locator("#modes-status .error code")).to_have_text("invalid_ttl")
            await expect(work.locator(".state")).to_have_text("Locked")

            await page.get_by_label("Unlock work for").fill("30m")
            await page.get_by_role("button", name="Unlock work").click()
            await expect(work.locator(".state")).to_contain_text("Unlocked until")
            me = (await call(gw, "GET", "/v1/me")).json()
            expires = next(mode for mode in me["modes"] if mode["name"] == "work")["expires_at"]
            await expect(work.locator(".state time")).to_have_attribute("datetime", expires)
            await expect(page.locator("#unlock-list li")).to_have_count(1)
            await expect(page.locator("#unlock-list li").first).to_contain_text("work")

            await page.get_by_role("button", name="Lock work", exact=True).click()
            await expect(work.locator(".state")).to_have_text("Locked")
            await expect(page.locator("#unlock-list li").first).to_contain_text("→ locked")
            await expect(page.locator("#unlock-list li").first).to_contain_text("by alice")
            await expect(page.get_by_label("Unlock work for")).to_be_focused()


async def test_a_user_without_a_mode_enabled_sees_none_to_unlock(tmp_path: Path) -> None:
    with gateway(tmp_path, echo_model(), modes=MODES) as gw:
        enable_modes(gw, "alice", ["work"])
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["bob"])
            await open_view(page, "Modes")
            await expect(page.locator("#mode-list li .state")).to_have_text(
                ["Not enabled", "Not enabled"]
            )
            await expect(page.locator("#mode-list").get_by_role("button")).to_have_count(0)
            await expect(page.locator("#unlock-list")).to_contain_text("No unlocks yet.")


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_each_view_has_no_serious_accessibility_violation(tmp_path: Path, size: str) -> None:
    viewport = DESKTOP if size == "desktop" else PHONE
    with gateway(tmp_path, echo_model(), modes=MODES) as gw:
        enable_modes(gw, "alice", ["work"])
        async with chromium() as browser, new_page(browser, viewport) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, "hello")
            await wait_idle(page)
            await page.get_by_role("button", name="Settings").click()
            await expect(page.get_by_role("dialog")).to_be_visible()
            assert await serious_violations(page) == [], "settings"
            await page.keyboard.press("Escape")
            await page.get_by_role("button", name="Recall").click()
            await expect(page.get_by_role("dialog")).to_be_visible()
            assert await serious_violations(page) == [], "recall"
            await page.keyboard.press("Escape")

            await open_view(page, "Notes")
            await page.get_by_label("Note", exact=True).fill("A note to list.")
            await page.get_by_role("button", name="Add note").click()
            await expect(page.locator("#note-list li.card")).to_have_count(1)
            assert await serious_violations(page) == [], "notes"

            await open_view(page, "Tasks")
            await page.get_by_label("Task", exact=True).fill("A task to list")
            await page.get_by_role("button", name="Add task").click()
            await expect(page.locator("#task-list li")).to_contain_text(["A task to list"])
            assert await serious_violations(page) == [], "tasks"

            await open_view(page, "Modes")
            await page.get_by_role("button", name="Unlock work").click()
            await expect(page.locator("#unlock-list li")).to_have_count(1)
            assert await serious_violations(page) == [], "modes"
            if size == "phone":
                width = await page.evaluate("() => document.documentElement.scrollWidth")
                assert width <= PHONE["width"]
