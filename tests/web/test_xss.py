"""Model output is never markup: a reply carrying script, an image with an error handler
and `javascript:` links runs nothing, links nothing unsafe, and reads exactly as sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.web.browser import (
    PacedModel,
    chromium,
    gateway,
    last_reply,
    new_page,
    send,
    sign_in,
    watched,
)

HOSTILE = (
    "Hello <script>window.__pwned=1</script> and "
    '<img src=x onerror="window.__pwned=2"> and '
    "[x](javascript:alert(1)) and [safe](https://example.com/a) and "
    '<a href="javascript:alert(2)">y</a> and [y](JaVaScRiPt:alert(3))'
)
ALLOWED_TAGS = {
    "P", "BR", "STRONG", "EM", "CODE", "PRE", "A", "UL", "OL", "LI",
    "H3", "H4", "H5", "H6", "BLOCKQUOTE", "HR",
}  # fmt: skip


async def assert_nothing_ran(page: Page) -> None:
    assert await page.evaluate("() => window.__pwned") is None
    assert watched(page).dialogs == []
    hrefs = await page.evaluate(
        "() => [...document.querySelectorAll('[href], [src]')]"
        ".map(n => (n.getAttribute('href') || n.getAttribute('src')).trim().toLowerCase())"
    )
    assert not [h for h in hrefs if h.startswith(("javascript:", "data:text", "vbscript:"))]
    transcript = page.locator(".transcript")
    assert await transcript.locator("script, img, iframe, object, embed").count() == 0


async def check_reply(page: Page) -> None:
    reply = last_reply(page)
    await expect(reply).to_contain_text("<script>window.__pwned=1</script>")
    await expect(reply).to_contain_text('<img src=x onerror="window.__pwned=2">')
    await expect(reply).to_contain_text("[x](javascript:alert(1))")
    await expect(reply).to_contain_text('<a href="javascript:alert(2)">y</a>')
    await expect(reply).to_contain_text("[y](JaVaScRiPt:alert(3))")
    links = reply.locator("a")
    await expect(links).to_have_count(1)
    await expect(links).to_have_attribute("href", "https://example.com/a")
    await expect(links).to_have_attribute("rel", "noopener noreferrer nofollow")
    await assert_nothing_ran(page)


async def test_a_hostile_reply_is_shown_as_text(tmp_path: Path) -> None:
    with gateway(tmp_path, PacedModel(lambda text: HOSTILE)) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, '<img src=x onerror="window.__pwned=3"> please')
            await check_reply(page)
            await expect(page.locator(".transcript .msg.user .text")).to_have_text(
                '<img src=x onerror="window.__pwned=3"> please'
            )
            # The stored reply takes the other road (a segment's page): the same result.
            await page.reload()
            await check_reply(page)
            assert watched(page).errors == []


CASES = [
    "[a](javascript:alert(1))",
    "[a]( javascript:alert(1))",
    "[a](data:text/html,<script>alert(1)</script>)",
    "[a](vbscript:msgbox(1))",
    "[a](//evil.example/x)",
    "<javascript:alert(1)>",
    "javascript:alert(1)",
    "**<b onmouseover=alert(1)>bold</b>**",
    "```html\n<script>alert(1)</script>\n```",
    "# <svg onload=alert(1)>",
    "- <iframe src=javascript:alert(1)>",
    "> <style>body{display:none}</style>",
    "`<img src=x onerror=alert(1)>`",
    "[*a*](https://ok.example/)[b](mailto:me@example.com)",
]


@pytest.mark.parametrize("source", CASES)
async def test_markdown_builds_only_safe_nodes(tmp_path: Path, source: str) -> None:
    with gateway(tmp_path, PacedModel(lambda text: text)) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await page.goto(gw.url + "/")
            result: dict[str, Any] = await page.evaluate(
                """async (source) => {
                    const { renderMarkdown } = await import('/web/markdown.js');
                    const box = document.createElement('div');
                    box.append(renderMarkdown(source));
                    const tags = [...box.querySelectorAll('*')].map(n => n.tagName);
                    const hrefs = [...box.querySelectorAll('a')].map(a => a.getAttribute('href'));
                    const attrs = [...box.querySelectorAll('*')].flatMap(
                        n => [...n.attributes].map(a => a.name));
                    return { tags, hrefs, attrs, text: box.textContent };
                }""",
                source,
            )
            assert set(result["tags"]) <= ALLOWED_TAGS, result
            assert all(h.startswith(("https://", "http://", "mailto:")) for h in result["hrefs"])
            assert set(result["attrs"]) <= {"href", "rel", "target", "data-language", "start"}
            assert await page.evaluate("() => window.__pwned") is None
            assert watched(page).dialogs == []
            # What did not become markup is still there to read.
            if "alert(1)" in source:
                assert "alert(1)" in result["text"]
