"""Markdown in Chromium: a reply is Markdown while it streams (re-rendered at most once per
animation frame, not per token), nested lists and pipe tables take their shape, and a
hostile table cell stays text like everything else."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from playwright.async_api import Page

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
from tests.web.test_xss import ALLOWED_TAGS

TABLE_TAGS = {"TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "DIV"}
STREAMED = "**Bold** from the start, then a list:\n\n" + "\n".join(
    f"- item {n} with *some* words" for n in range(1, 41)
)

# Counts each re-render of a reply's text (a replaceChildren on a `.text` node).
COUNT_RENDERS = """
window.__renders = 0;
new MutationObserver((records) => {
  for (const record of records) {
    if (record.type === 'childList' && record.target.classList?.contains('text')) {
      window.__renders += 1;
      return;
    }
  }
}).observe(document, { childList: true, subtree: true });
"""


async def render(page: Page, source: str) -> dict[str, Any]:
    result: dict[str, Any] = await page.evaluate(
        """async (source) => {
            const { renderMarkdown } = await import('/web/markdown.js');
            const box = document.createElement('div');
            box.append(renderMarkdown(source));
            const tags = [...box.querySelectorAll('*')].map(n => n.tagName);
            const attrs = [...box.querySelectorAll('*')].flatMap(
                n => [...n.attributes].map(a => a.name + '=' + a.value));
            const shape = (node) => [...node.children].map(child =>
                [child.tagName, child.children.length ? shape(child) : child.textContent]);
            return { tags, attrs, text: box.textContent, shape: shape(box),
                     hrefs: [...box.querySelectorAll('a')].map(a => a.getAttribute('href')) };
        }""",
        source,
    )
    return result


async def test_a_reply_is_markdown_while_it_streams(tmp_path: Path) -> None:
    model = PacedModel(lambda text: STREAMED, delay=0.01)
    tokens = len(STREAMED.split(" "))
    with gateway(tmp_path, model) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await page.add_init_script(COUNT_RENDERS)
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, "go")
            reply = last_reply(page)
            streaming_with_markup = False
            for _ in range(500):
                state = await page.evaluate(
                    """() => {
                        const node = document.querySelector('.turn .msg.assistant .text');
                        return node && { streaming: node.classList.contains('streaming'),
                                         strong: !!node.querySelector('strong'),
                                         items: node.querySelectorAll('li').length };
                    }"""
                )
                if state and state["streaming"] and state["strong"] and 0 < state["items"] < 40:
                    streaming_with_markup = True
                    break
                await asyncio.sleep(0.01)
            assert streaming_with_markup  # bold and a partial list before the reply ended
            await wait_idle(page)
            await page.wait_for_function(
                "() => document.querySelectorAll('.turn .msg.assistant .text li').length === 40"
            )
            assert await reply.locator("strong").first.text_content() == "Bold"
            assert await reply.evaluate("(node) => node.classList.contains('streaming')") is False
            renders = await page.evaluate("() => window.__renders")
            assert 2 <= renders < tokens, (renders, tokens)  # per frame, never per token
            assert watched(page).errors == []


async def test_nested_lists_and_tables_take_their_shape(tmp_path: Path) -> None:
    with gateway(tmp_path, PacedModel(lambda text: text)) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await page.goto(gw.url + "/")
            nested = await render(
                page, "- fruit\n  - apple\n  - pear\n    1. ripe\n    2. green\n- veg\n\nafter"
            )
            assert nested["shape"] == [
                [
                    "UL",
                    [
                        [
                            "LI",
                            [
                                [
                                    "UL",
                                    [
                                        ["LI", "apple"],
                                        ["LI", [["OL", [["LI", "ripe"], ["LI", "green"]]]]],
                                    ],
                                ]
                            ],
                        ],
                        ["LI", "veg"],
                    ],
                ],
                ["P", "after"],
            ]
            assert "fruit" in nested["text"] and "pear" in nested["text"]

            table = await render(
                page,
                "Prices:\n\n| fruit | price | note |\n|:---|---:|:-:|\n"
                "| apple | 1.20 | **fresh** |\n| pear | 2 |\n| fig | 3 | x | extra |\n\nafter",
            )
            assert set(table["tags"]) <= ALLOWED_TAGS | TABLE_TAGS, table
            cells = await page.evaluate(
                """async () => {
                    const { renderMarkdown } = await import('/web/markdown.js');
                    const box = document.createElement('div');
                    box.append(renderMarkdown(
                        '| fruit | price | note |\\n|:---|---:|:-:|\\n'
                        + '| apple | 1.20 | **fresh** |\\n'
                        + '| pear | 2 |\\n| fig | 3 | x | extra |'));
                    return [...box.querySelectorAll('tr')].map(row =>
                        [...row.children].map(c => [c.tagName, c.textContent, c.className]));
                }"""
            )
            assert cells == [
                [
                    ["TH", "fruit", "align-left"],
                    ["TH", "price", "align-right"],
                    ["TH", "note", "align-center"],
                ],
                [
                    ["TD", "apple", "align-left"],
                    ["TD", "1.20", "align-right"],
                    ["TD", "fresh", "align-center"],
                ],
                [
                    ["TD", "pear", "align-left"],
                    ["TD", "2", "align-right"],
                    ["TD", "", "align-center"],
                ],
                [
                    ["TD", "fig", "align-left"],
                    ["TD", "3", "align-right"],
                    ["TD", "x", "align-center"],
                ],
            ]
            # Not a table: the delimiter row must match the header's cells.
            loose = await render(page, "a | b\n---\nc | d")
            assert "TABLE" not in loose["tags"]
            escaped = await render(page, "| code | pipe |\n|---|---|\n| `a|b` | x \\| y |")
            assert escaped["text"].endswith("a|bx | y")


async def test_hostile_table_cells_stay_text(tmp_path: Path) -> None:
    hostile = (
        "| <script>window.__pwned=1</script> | [x](javascript:alert(1)) |\n"
        "|---|---|\n"
        '| <img src=x onerror="window.__pwned=2"> | [ok](https://example.com/t) |\n'
        "| <a href=javascript:alert(2)>y</a> | `<b onclick=alert(3)>` |"
    )
    with gateway(tmp_path, PacedModel(lambda text: hostile)) as gw:
        async with chromium() as browser, new_page(browser) as page:
            await page.goto(gw.url + "/")
            result = await render(page, hostile)
            assert set(result["tags"]) <= ALLOWED_TAGS | TABLE_TAGS, result
            assert result["hrefs"] == ["https://example.com/t"]
            names = {attr.split("=", 1)[0] for attr in result["attrs"]}
            assert names <= {"href", "rel", "target", "class", "scope"}, result["attrs"]
            assert "<script>window.__pwned=1</script>" in result["text"]
            assert '<img src=x onerror="window.__pwned=2">' in result["text"]
            assert "[x](javascript:alert(1))" in result["text"]

            # And through the page: streamed, then stored and shown again after a reload.
            await sign_in(page, gw.url, gw.keys["alice"])
            await send(page, "a table please")
            await wait_idle(page)
            for _ in range(2):
                reply = last_reply(page)
                assert await reply.locator("table td").count() == 4
                assert await reply.locator("script, img, iframe").count() == 0
                assert await reply.locator("a").count() == 1
                assert await page.evaluate("() => window.__pwned") is None
                await page.reload()
                await page.locator(".transcript .msg.assistant table").first.wait_for()
            assert watched(page).dialogs == [] and watched(page).errors == []
