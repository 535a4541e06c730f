#!/usr/bin/env python3
"""Seed 001's relay (BridgeHub there) as a sessiongate `command` model.

The gateway runs this program once per turn of the Codex agent, writes
`{"messages": [{"role", "content"}, ...]}` (the agent's system text and the newest 50
messages) to its stdin, and streams whatever it prints as the reply. Exit 0 means the
reply is complete; anything else is a failed turn (nothing is kept as an answer).

Two ways to answer, standard library only:

- BUILDEROS_RELAY_CLI set (e.g. `codex exec` or `claude -p`): that program runs with
  the conversation, written as a transcript, as its last argument; its stdout is the
  reply (seed 001's BridgeHub spawned the `codex` and `claude` CLIs the same way).
- otherwise the conversation goes to an OpenAI-compatible chat-completions server:
  BUILDEROS_RELAY_BASE_URL, else SESSIONGATE_MODELS__REPLY__BASE_URL (the server the
  example's `reply` model is pointed at), else Ollama on this machine; the model is
  BUILDEROS_RELAY_MODEL (default `llama3.2`); a key, if the server wants one, in
  BUILDEROS_RELAY_API_KEY.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.request
from typing import Any


def transcript(messages: list[dict[str, Any]]) -> str:
    names = {"system": "System", "user": "User", "assistant": "Assistant"}
    lines = [f"{names.get(m.get('role', ''), 'Note')}: {m.get('content', '')}" for m in messages]
    return "\n\n".join(lines) + "\n\nAssistant:"


def run_cli(command: str, messages: list[dict[str, Any]]) -> int:
    done = subprocess.run([*shlex.split(command), transcript(messages)], check=False)
    return done.returncode


def run_server(messages: list[dict[str, Any]]) -> int:
    base = (
        os.environ.get("BUILDEROS_RELAY_BASE_URL")
        or os.environ.get("SESSIONGATE_MODELS__REPLY__BASE_URL")
        or "http://127.0.0.1:11434/v1"
    )
    body = {
        "model": os.environ.get("BUILDEROS_RELAY_MODEL", "llama3.2"),
        "messages": messages,
        "stream": True,
    }
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    key = os.environ.get("BUILDEROS_RELAY_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        base.rstrip("/") + "/chat/completions", json.dumps(body).encode(), headers
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        for raw in answer:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return 0
            for choice in json.loads(data).get("choices", []):
                text = (choice.get("delta") or {}).get("content")
                if text:
                    sys.stdout.write(text)
                    sys.stdout.flush()  # the gateway streams it to the phone as it comes
    return 0


def main() -> int:
    messages = json.load(sys.stdin)["messages"]
    command = os.environ.get("BUILDEROS_RELAY_CLI")
    return run_cli(command, messages) if command else run_server(messages)


if __name__ == "__main__":
    sys.exit(main())
