"""A web search MCP server (stdio) for the examples: seed 002's planner and seed 000's
hand-off both search the web through it, as `web__search` when it is configured as
`[mcp.web]`.

Seed 002 searched with Brave's MCP server. This one needs nothing but the `mcp` and
`httpx` packages sessiongate already installs:

- with BRAVE_API_KEY in its environment it asks Brave Search's API (pass the key through
  `[mcp.web] env = { BRAVE_API_KEY = "${BRAVE_API_KEY}" }`);
- without it, it searches Wikipedia (no key needed), which answers most "what is" and
  "how to" questions well enough for a demonstration.

Run by the gateway as `.venv/bin/python examples/mcp/web_search.py`; `sessiongate mcp
list --config examples/lifehub.toml` shows it and its tool.
"""

from __future__ import annotations

import os
import re

import httpx
from mcp.server.mcpserver import MCPServer

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
WIKIPEDIA_URL = "https://en.wikipedia.org/w/api.php"
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
HEADERS = {"User-Agent": "sessiongate-example-web-search/1.0"}

server = MCPServer("web")


def _plain(text: str) -> str:
    """Search snippets carry a little HTML (`<span class="searchmatch">`): text only."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text)).strip()


def _brave(query: str, count: int, key: str) -> list[tuple[str, str, str]]:
    answer = httpx.get(
        BRAVE_URL,
        params={"q": query, "count": count},
        headers={**HEADERS, "Accept": "application/json", "X-Subscription-Token": key},
        timeout=TIMEOUT,
    )
    answer.raise_for_status()
    results = answer.json().get("web", {}).get("results", [])
    return [
        (r.get("title", ""), r.get("url", ""), _plain(r.get("description", "")))
        for r in results[:count]
    ]


def _wikipedia(query: str, count: int) -> list[tuple[str, str, str]]:
    answer = httpx.get(
        WIKIPEDIA_URL,
        params={
            "action": "query",
            "list": "search",
            "srsearch": query,
            "srlimit": count,
            "format": "json",
        },
        headers=HEADERS,
        timeout=TIMEOUT,
    )
    answer.raise_for_status()
    hits = answer.json().get("query", {}).get("search", [])
    return [
        (
            hit["title"],
            "https://en.wikipedia.org/wiki/" + hit["title"].replace(" ", "_"),
            _plain(hit.get("snippet", "")),
        )
        for hit in hits
    ]


@server.tool()
def search(query: str, count: int = 5) -> str:
    """Search the web. Returns the best pages, one per line: title, URL and a summary."""
    count = max(1, min(count, 10))
    key = os.environ.get("BRAVE_API_KEY")
    results = _brave(query, count, key) if key else _wikipedia(query, count)
    if not results:
        return "no results"
    return "\n".join(
        f"{number}. {title} — {url}\n   {summary}"
        for number, (title, url, summary) in enumerate(results, start=1)
    )


if __name__ == "__main__":
    server.run()
