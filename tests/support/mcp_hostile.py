"""Misbehaving MCP servers and a tool-calling model, for tests/test_mcp_hostile.py.

`HOSTILE_SERVER` speaks MCP over stdio by hand (newline-delimited JSON-RPC, no SDK), so
it can do what no polite server does on demand: never answer the handshake while
ignoring SIGTERM and keeping a child in its process group, answer a call with error
-32000 (JSON-RPC's generic server error, which is also what the SDK reports a closed
connection as), let a call hang, flood stderr, send an oversized message, and offer
tools whose schemas fetch URLs, backtrack catastrophically or do not compile. It notes
what it does in a file (one line each), so a test can count how often a call ran.

`tool_calling_model` is an OpenAI-compatible chat server for a served gateway: a user
message `call <tool> <json arguments>` is answered with that tool call, anything after a
tool result with `done: <the result>`.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.fake_providers import FakeCall, openai_events, openai_tool_events

HOSTILE_SERVER = r"""
import json, os, signal, subprocess, sys, time

mode, notes = sys.argv[1], sys.argv[2]


def note(text):
    with open(notes, "a") as file:
        file.write(text + "\n")


note(f"started {os.getpid()}")
if mode in ("silent", "stubborn"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "silent":
    # Never reads stdin, never answers, and keeps a child in its process group.
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
    )
    note(f"child {child.pid}")
    time.sleep(600)
if mode == "stderr_flood":
    sys.stderr.write("x" * int(os.environ.get("FLOOD_BYTES", "20000000")) + "\n")
    sys.stderr.write("after the flood\n")
    sys.stderr.flush()

TRAP = os.environ.get("TRAP_URL", "http://127.0.0.1:9/never.json")
OBJECT = {"type": "object"}
TOOLS = {
    "pid": OBJECT,
    "count": OBJECT,
    "hang": OBJECT,
    "big": OBJECT,
    "remote_ref": {"type": "object", "properties": {"q": {"$ref": TRAP}}, "required": ["q"]},
    "redos": {
        "type": "object",
        "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}},
        "required": ["q"],
    },
    "bad_pattern": {
        "type": "object",
        "properties": {"q": {"type": "string", "pattern": "(unclosed"}},
        "required": ["q"],
    },
}


def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    rid, method, params = request["id"], request["method"], request.get("params") or {}
    if method == "initialize":
        send({"id": rid, "result": {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }})
    elif method == "tools/list":
        tools = [{"name": name, "inputSchema": schema} for name, schema in TOOLS.items()]
        send({"id": rid, "result": {"tools": tools}})
    elif method == "tools/call":
        name = params["name"]
        note(f"call {name}")
        if name == "hang":
            continue
        if name == "count":
            send({"id": rid, "error": {"code": -32000, "message": "Connection closed"}})
            continue
        text = "y" * 3_000_000 if name == "big" else f"{name} ran in {os.getpid()}"
        send({"id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "ping":
        send({"id": rid, "result": {}})
    else:
        send({"id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
"""


@dataclass
class Hostile:
    """The script and the file it notes its doings in."""

    script: Path
    notes: Path

    def argv(self, mode: str) -> list[str]:
        return [str(self.script), mode, str(self.notes)]

    def lines(self) -> list[str]:
        return self.notes.read_text().splitlines() if self.notes.exists() else []

    def pids(self) -> list[int]:
        """Every process the server noted: its own pid(s) and its child's."""
        return [
            int(line.split()[1]) for line in self.lines() if line.split()[0] in ("started", "child")
        ]

    def calls(self, tool: str) -> int:
        return self.lines().count(f"call {tool}")


def write_hostile(directory: Path) -> Hostile:
    script = directory / "hostile_server.py"
    script.write_text(HOSTILE_SERVER)
    return Hostile(script, directory / "notes.txt")


def alive(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@dataclass
class Trap:
    """A loopback port that counts the connections made to it and closes each at once."""

    url: str
    connections: list[int] = field(default_factory=list)


@contextmanager
def trap_port() -> Iterator[Trap]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.1)
    trap = Trap(f"http://127.0.0.1:{listener.getsockname()[1]}/schema.json")
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            trap.connections.append(1)
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield trap
    finally:
        stop.set()
        thread.join(2)
        listener.close()


@contextmanager
def tool_calling_model() -> Iterator[str]:
    """The base URL of an OpenAI-compatible chat server that calls tools on request."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            frames = "".join(_answer(body["messages"])).encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(frames)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(frames)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _answer(messages: list[dict[str, Any]]) -> list[str]:
    last = messages[-1]
    content = last.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    if last["role"] == "user" and text.startswith("call "):
        _, tool, arguments = text.split(" ", 2)
        return openai_tool_events([], [FakeCall(f"call-{os.urandom(3).hex()}", tool, (arguments,))])
    return openai_events([f"done: {text[:200]}"])
