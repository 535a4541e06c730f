"""Request body limits, enforced before any handler parses the body. (Header size and
slow clients are refused earlier still, by the HTTP protocol: api/http_protocol.py.)"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


def is_turn_path(path: str) -> bool:
    """The routes whose bodies may carry image attachments (an OpenAI client's as
    image parts)."""
    if path in ("/v1/chat", "/v1/chat/completions"):
        return True
    return path.startswith("/v1/sessions/") and path.endswith("/messages")


class BodyLimitMiddleware:
    """Answers 413 for a body over the limit, whether announced by Content-Length or
    streamed; the body is buffered (it is bounded by definition) and replayed to the app.
    Turn routes get `turn_max_bytes` (room for image attachments), the rest `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int, turn_max_bytes: int | None = None) -> None:
        self.app = app
        self.default_max_bytes = max_bytes
        self.turn_max_bytes = max(turn_max_bytes or max_bytes, max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        turn = is_turn_path(scope.get("path", ""))
        max_bytes = self.turn_max_bytes if turn else self.default_max_bytes
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    announced = int(value)
                except ValueError:
                    await _reject(send, 400, "bad_request", "invalid Content-Length")
                    return
                if announced > max_bytes:
                    await _too_large(send, max_bytes)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_bytes:
                await _too_large(send, max_bytes)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send, max_bytes: int) -> None:
    await _reject(send, 413, "payload_too_large", f"the request body exceeds {max_bytes} bytes")


def error_json(code: str, message: str) -> bytes:
    """The gateway's error body, for answers written before FastAPI's handlers exist."""
    return json.dumps({"error": {"code": code, "message": message}}).encode()


async def _reject(send: Send, status: int, code: str, message: str) -> None:
    body = error_json(code, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
