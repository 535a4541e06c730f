"""A local server speaking OpenAI's streaming chat-completions wire, for end-to-end tests
where the hosted model cannot run: each request's answer is computed by a function of
its JSON body (so one server can play a classifier and a reply model at once).

Runs in its own thread (http.server), so a synchronous test can drive a gateway that
runs in another thread with httpx, as a client would.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.fake_providers import (
    openai_chunk,
    openai_ending,
    openai_events,
    openai_tool_events,
    split_arguments,
    sse,
)


@dataclass(frozen=True)
class WireAnswer:
    """Text to stream, or an HTTP error status; `reasoning` pieces stream first (as
    `delta.<reasoning_field>`), and `finish` is the finish_reason (`length`: the model
    hit its output limit)."""

    text: str = ""
    status: int = 200
    reasoning: tuple[str, ...] = ()
    reasoning_field: str = "reasoning_content"
    finish: str = "stop"
    #: Tool calls after the text: `(id, name, arguments JSON)` each.
    calls: tuple[tuple[str, str, str], ...] = ()


Responder = Callable[[dict[str, Any]], WireAnswer]


@dataclass
class WireServer:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)

    def bodies_for(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r.get("model") == model]


@contextmanager
def openai_wire_server(respond: Responder) -> Iterator[WireServer]:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet test output

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                # As an OpenAI server answers a path it lacks (a gateway probing for
                # Ollama's /api/show to learn the window): not a chat request.
                self.send_response(404)
                self.send_header("content-length", "0")
                self.send_header("connection", "close")
                self.end_headers()
                return
            body = json.loads(raw or b"{}")
            with lock:
                seen.append(body)
            answer = respond(body)
            if answer.status != 200:
                payload = json.dumps(
                    {"error": {"message": "scripted failure", "type": "server_error"}}
                ).encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(payload)
                return
            words = answer.text.split(" ")
            tokens = [w if i == 0 else " " + w for i, w in enumerate(words)]
            frames = "".join(_frames(answer, tokens)).encode()
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
        yield WireServer(f"http://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()


def _frames(answer: WireAnswer, tokens: list[str]) -> list[str]:
    if answer.calls:
        calls = [split_arguments(*call) for call in answer.calls]
        return openai_tool_events([t for t in tokens if t], calls)
    if not answer.reasoning and answer.finish == "stop":
        return openai_events(tokens)
    frames = []
    for piece in answer.reasoning:
        chunk = openai_chunk()
        chunk["choices"][0]["delta"] = {answer.reasoning_field: piece}
        frames.append(sse(chunk))
    frames += [sse(openai_chunk(t)) for t in tokens]
    return frames + openai_ending(answer.finish, (11, 7), True)
