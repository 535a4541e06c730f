"""`sessiongate chat`: a terminal client for a running gateway, over HTTP and SSE.

Lines are sent as turns (`/new` and `/new <text>` too: the gateway rotates; `/compact
[instructions]`: the gateway summarises the older messages now). What the working set
does is shown as a line: a compaction, or older messages left out (docs/working_set.md).
A few
commands stay in the client: `/help`, `/history` (the current key's latest segment),
`/sessions` (the caller's keys) and `/quit`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from rich.console import Console
from rich.markup import escape

HISTORY_LIMIT = 50
HELP = """\
[bold]commands[/bold]
  /new [text]  start a new segment (the gateway archives the current one); text after it
               is the new segment's first message
  /compact [instructions]  summarise the older messages now (the originals are kept)
  /history     the messages of the current key's latest segment
  /sessions    your session keys: messages, segments, last activity
  /help        this list
  /quit        leave (or Ctrl-D)
Anything else is sent as a message."""
_COMMAND = re.compile(r"/[a-z]+")


@dataclass
class ChatState:
    #: The key turns go to: --key, else the one the gateway's route chose (from `start`).
    key: str | None


def run_chat(url: str, api_key: str, key: str | None, console: Console) -> int:
    headers = {"Authorization": f"Bearer {api_key}"}
    timeout = httpx.Timeout(300.0, connect=10.0)
    state = ChatState(key)
    with httpx.Client(base_url=url, headers=headers, timeout=timeout) as client:
        try:
            if key is not None:
                _show_history(client, key, console, limit=20, quiet=True)
        except httpx.HTTPError as exc:
            console.print(f"[red]cannot reach {escape(url)}: {escape(str(exc))}[/red]")
            return 1
        console.print("[dim]Type a message; /new starts a new segment; /help; Ctrl-D quits.[/dim]")
        while True:
            try:
                text = console.input("[bold cyan]you>[/bold cyan] ")
            except (EOFError, KeyboardInterrupt):
                console.print()
                return 0
            command = text.strip()
            if not command:
                continue
            try:
                if command in ("/quit", "/exit"):
                    return 0
                if command == "/help":
                    console.print(HELP)
                elif command == "/history":
                    _history_command(client, state, console)
                elif command == "/sessions":
                    _sessions_command(client, console)
                elif _COMMAND.fullmatch(command) and command not in ("/new", "/compact"):
                    console.print(f"[yellow]unknown command {command}; /help lists them[/yellow]")
                else:
                    _turn(client, state, text, console)
            except httpx.HTTPError as exc:
                console.print(f"[red]connection problem: {escape(str(exc))}[/red]")


def _history_command(client: httpx.Client, state: ChatState, console: Console) -> None:
    if state.key is None:
        console.print("[dim]no conversation yet: send a message first[/dim]")
        return
    if not _show_history(client, state.key, console, limit=HISTORY_LIMIT, quiet=False):
        console.print(f"[dim]{escape(state.key)} has no messages yet[/dim]")


def _show_history(
    client: httpx.Client, key: str, console: Console, *, limit: int, quiet: bool
) -> bool:
    """The newest `limit` messages of the key's latest segment; False when there are none."""
    path = f"/v1/sessions/{quote(key, safe='')}"
    response = client.get(path)
    if response.status_code == 404:
        return False
    response.raise_for_status()
    latest = response.json()["latest"]
    count = int(latest.get("message_count") or 0)
    after = max(0, count - limit)
    page = client.get(
        f"{path}/segments/{latest['session_id']}/messages", params={"after": after, "limit": limit}
    ).json()
    messages: list[dict[str, Any]] = page.get("messages", [])
    if not quiet:
        console.print(f"[bold]{escape(key)}[/bold] segment {latest['session_id']}")
    for message in messages:
        mark = " (fallback)" if (message.get("metadata") or {}).get("fallback") else ""
        body = escape(str(message["content"])[:300])
        console.print(f"[dim]{message['role']}{mark}: {body}[/dim]")
    return bool(messages)


def _sessions_command(client: httpx.Client, console: Console) -> None:
    response = client.get("/v1/sessions")
    response.raise_for_status()
    keys: list[dict[str, Any]] = response.json().get("sessions", [])
    if not keys:
        console.print("[dim]no sessions yet[/dim]")
        return
    for k in keys:
        console.print(
            f"{escape(k['key'])}  [dim]owner {escape(k['owner'])}, {k['message_count']}"
            f" message(s) in {k['segment_count']} segment(s), last {k['last_activity_at']}[/dim]",
            soft_wrap=True,
        )


def _turn(client: httpx.Client, state: ChatState, text: str, console: Console) -> None:
    key = state.key
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
                data = json.loads(line[6:])
                if event == "start" and state.key is None:
                    state.key = str(data["session_key"])
                _render(event, data, console)


def _render(event: str, data: dict[str, object], console: Console) -> None:
    if event == "token":
        console.print(escape(str(data["content"])), end="")
    elif event == "rotation":
        console.print(f"[yellow]— new segment ({data['reason']}): {data['to']} —[/yellow]")
    elif event == "compaction":
        console.print(f"[yellow]— {escape(compaction_line(data))} —[/yellow]")
    elif event == "context_trimmed":
        console.print(
            f"[yellow]— {data['dropped']} older message(s) left out of the model's context"
            f" ({data['reason']}) —[/yellow]"
        )
    elif event == "end":
        console.print()
    elif event == "error":
        console.print(f"\n[red]{data['code']}: {escape(str(data['message']))}[/red]")


def compaction_line(data: dict[str, object]) -> str:
    """A `compaction` event in words (docs/working_set.md)."""
    status = data.get("status")
    covers = data.get("covers") or {}
    if data.get("carried_from"):  # the previous segment's summary, carried over
        if status == "waited" and isinstance(covers, dict):
            return (
                f"the previous conversation (messages #1-#{covers.get('last_seq')}) was"
                " summarised and carried over (this turn waited for it)"
            )
        if status == "pending":
            return "the previous conversation's summary is not ready: this turn goes on without it"
        return "summarising the previous conversation failed: nothing was carried over"
    if status in ("done", "waited") and isinstance(covers, dict):
        waited = " (this turn waited for it)" if status == "waited" else ""
        return (
            f"messages #{covers.get('first_seq')}-#{covers.get('last_seq')} summarised"
            f" ({data.get('tokens_before')} -> {data.get('tokens_after')} tokens,"
            f" compaction {data.get('compaction_id')}){waited}; the originals are kept"
        )
    if status == "failed":
        return "a compaction failed: nothing was lost; older messages may be left out"
    if status == "nothing_to_compact":
        return "nothing to compact yet"
    return "this agent's context is not compacted"
