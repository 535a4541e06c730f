"""A local OpenAI-compatible text-to-speech server (`POST /v1/audio/speech`) for the
`openai` speech provider's tests and the bench: real speech, made by espeak-ng, answered
as WAV with a streaming header (sizes 0xFFFFFFFF, as servers that stream WAV write it).

Each request's answer is decided by a function of its JSON body (`SpeechAnswer`): real
audio, an HTTP error, a delay before answering, or bytes that are not audio. Runs in its
own thread (http.server), like tests/support/openai_wire_server.py.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class SpeechAnswer:
    """What one request gets: espeak-ng's speech (`body` None), or `body` as it is."""

    status: int = 200
    delay: float = 0.0
    body: bytes | None = None


Responder = Callable[[dict[str, Any]], SpeechAnswer]


@dataclass
class SpeechServer:
    #: The base URL an OpenAI client is given (ends in /v1).
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)


def espeak_wav(text: str, speed: float = 1.0) -> bytes:
    """espeak-ng's WAV of `text`, its sizes set to 0xFFFFFFFF (a streaming header)."""
    program = shutil.which("espeak-ng")
    if program is None:
        raise RuntimeError("espeak-ng is not installed (scripts/speech.sh)")
    wpm = str(max(80, min(450, round(175 * speed))))
    wav = subprocess.run(
        [program, "--stdout", "--stdin", "-s", wpm],
        input=text.encode(),
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    data = wav.index(b"data")
    return (
        wav[:4]
        + struct.pack("<I", 0xFFFFFFFF)
        + wav[8 : data + 4]
        + b"\xff\xff\xff\xff"
        + (wav[data + 8 :])
    )


def _speak(body: dict[str, Any]) -> SpeechAnswer:
    return SpeechAnswer()


@contextmanager
def speech_server(respond: Responder = _speak) -> Iterator[SpeechServer]:
    server_state = SpeechServer("")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet test output

        def _send(self, status: int, content_type: str, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(payload)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with lock:
                server_state.requests.append(body)
                server_state.authorizations.append(self.headers.get("authorization", ""))
            if self.path != "/v1/audio/speech":
                self._send(404, "application/json", b'{"error": {"message": "not found"}}')
                return
            answer = respond(body)
            if answer.delay:
                time.sleep(answer.delay)
            if answer.status != 200:
                error = {"error": {"message": "scripted failure", "type": "server_error"}}
                self._send(answer.status, "application/json", json.dumps(error).encode())
                return
            if body.get("response_format", "mp3") != "wav" or not body.get("input"):
                self._send(400, "application/json", b'{"error": {"message": "wav only"}}')
                return
            payload = answer.body
            if payload is None:
                payload = espeak_wav(str(body["input"]), float(body.get("speed") or 1.0))
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._send(200, "audio/wav", payload)  # unless the client gave up (a timeout)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server_state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        server.shutdown()
        server.server_close()
