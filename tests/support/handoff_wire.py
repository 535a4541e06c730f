"""One local server speaking OpenAI's wire for seed 000's hand-off tests: streaming chat
completions (text, or tool calls) for the reply model, the control model and the primary
user's tool-calling agent, and `POST /v1/images/generations` (an OpenAI-compatible images
API). Each chat answer is computed by a function of the request's JSON body.

Runs in its own thread (http.server), so a synchronous test drives a gateway that runs in
another thread with httpx, as a client would.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.fake_providers import FakeCall, openai_events, openai_tool_events


@dataclass(frozen=True)
class ChatAnswer:
    """Text to stream (word by word), tool calls, or an HTTP error status; `delay`
    seconds before answering."""

    text: str = ""
    calls: tuple[FakeCall, ...] = ()
    status: int = 200
    delay: float = 0.0


Responder = Callable[[dict[str, Any]], ChatAnswer]


@dataclass
class HandoffWire:
    url: str
    #: (path, body) of every request, in order.
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: What the images API answers: a status, and the image.
    image_status: int = 200
    image: bytes = b""

    def chat_bodies(self, model: str) -> list[dict[str, Any]]:
        return [
            body
            for path, body in self.requests
            if path.endswith("/chat/completions") and body.get("model") == model
        ]

    def image_prompts(self) -> list[str]:
        return [
            str(body.get("prompt"))
            for path, body in self.requests
            if path.endswith("/images/generations")
        ]


@contextmanager
def handoff_wire(respond: Responder, image: bytes) -> Iterator[HandoffWire]:
    state = HandoffWire("", image=image)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet test output

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(payload)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (a timeout test)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with lock:
                state.requests.append((self.path, body))
            if self.path.endswith("/images/generations"):
                if state.image_status != 200:
                    error = {"error": {"message": "SECRET upstream text", "type": "server_error"}}
                    self._send(state.image_status, json.dumps(error).encode(), "application/json")
                    return
                encoded = base64.b64encode(state.image).decode()
                answer = {"created": 1, "data": [{"b64_json": encoded}]}
                self._send(200, json.dumps(answer).encode(), "application/json")
                return
            reply = respond(body)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.status != 200:
                error = {"error": {"message": "scripted failure", "type": "server_error"}}
                self._send(reply.status, json.dumps(error).encode(), "application/json")
                return
            words = reply.text.split(" ") if reply.text else []
            tokens = [w if i == 0 else " " + w for i, w in enumerate(words)]
            if reply.calls:
                frames = openai_tool_events(tokens, list(reply.calls))
            else:
                frames = openai_events(tokens)
            self._send(200, "".join(frames).encode(), "text/event-stream")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
