"""A web search MCP server for seed 002's example query, on the official MCP SDK (stdio).

No search engine is reachable from the test machine, so this server ranks a small fixed
set of pages by the words they share with the query; everything between it and the
gateway (the SDK, the stdio transport, tool listing and calls) is the real thing.

Run: `python tests/support/web_search_server.py`.
"""

from __future__ import annotations

import re

from mcp.server.mcpserver import MCPServer

PAGES = [
    (
        "https://running.example/marathon-training-plan",
        "Marathon training plan: build weekly mileage by no more than 10 percent, "
        "one long run each week, and a taper of two to three weeks before race day.",
    ),
    (
        "https://coach.example/marathon-nutrition",
        "Marathon training nutrition: practise race-day fuelling on long runs; "
        "take carbohydrate every 30 to 45 minutes after the first hour.",
    ),
    (
        "https://garden.example/tomatoes",
        "Growing tomatoes: stake the plants early and water at the base in the morning.",
    ),
]

server = MCPServer("web")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@server.tool()
def search(query: str, limit: int = 2) -> str:
    """Search the web. Returns the best pages, one per line: URL, then a summary."""
    wanted = _words(query)
    ranked = sorted(PAGES, key=lambda page: -len(wanted & _words(page[1])))
    hits = [page for page in ranked if wanted & _words(page[1])][: max(1, limit)]
    if not hits:
        return "no results"
    return "\n".join(f"{url} — {summary}" for url, summary in hits)


if __name__ == "__main__":
    server.run()
