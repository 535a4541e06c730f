"""`sessiongate chat`: a terminal client for a running gateway, over HTTP and SSE."""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
from rich.console import Console
from rich.markup import escape


def run_chat(url: str, api_key: str, key: str | None, console: Console) -> int:
    headers = {"Authorization": f"Bearer {api_key}"}
    timeout = httpx.Timeout(300.0, connect=10.0)
    with httpx.Client(base_url=url, headers=headers, timeout=timeout) as client:
        try:
            if key is not None:
                _show_history(client, key, console)
        except httpx.HTTPError as exc:
            console.print(f"[red]cannot reach {url}: {exc}[/red]")
            return 1
        console.print("[dim]Type a message; /new starts a new segment; Ctrl-D quits.[/dim]")
        while True:
            try:
                text = console.input("[bold cyan]you>[/bold cyan] ")
            except (EOFError, KeyboardInterrupt):
                console.print()
                return 0
            if not text.strip():
                continue
            try:
                _turn(client, key, text, console)
            except httpx.HTTPError as exc:
                console.print(f"[red]connection problem: {exc}[/red]")


def _show_history(client: httpx.Client, key: str, console: Console) -> None:
    response = client.get(f"/v1/sessions/{quote(key, safe='')}")
    if response.status_code == 404:
        return
    response.raise_for_status()
    latest = response.json()["latest"]["session_id"]
    page = client.get(
        f"/v1/sessions/{quote(key, safe='')}/segments/{latest}/messages", params={"limit": 20}
    ).json()
    for message in page.get("messages", []):
        console.print(f"[dim]{message['role']}: {escape(message['content'][:300])}[/dim]")


def _turn(client: httpx.Client, key: str | None, text: str, console: Console) -> None:
    path = f"/v1/sessions/{quote(key, safe='')}/messages" if key else "/v1/chat"
    with client.stream("POST", path, json={"content": text, "stream": True}) as response:
        if response.status_code != 200:
            response.read()
            error = response.json().get("error", {})
            console.print(f"[red]{error.get('code')}: {escape(str(error.get('message')))}[/red]")
            return
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                _render(event, json.loads(line[6:]), console)


def _render(event: str, data: dict[str, object], console: Console) -> None:
    if event == "token":
        console.print(escape(str(data["content"])), end="")
    elif event == "rotation":
        console.print(f"[yellow]— new segment ({data['reason']}): {data['to']} —[/yellow]")
    elif event == "end":
        console.print()
    elif event == "error":
        console.print(f"\n[red]{data['code']}: {escape(str(data['message']))}[/red]")
