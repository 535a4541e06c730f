"""Request body limits, enforced before any handler parses the body. (Header size and
slow clients are refused earlier still, by the HTTP protocol: api/http_protocol.py.)

`POST /v1/import` is the exception: an export file may be far larger than any other body,
so its route reads the body as it arrives, line by line, within `max_import_bytes`
(`import_lines`), and nothing buffers it whole first."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sessiongate.errors import SessionGateError
from sessiongate.service.session_exchange import MAX_LINE_BYTES

IMPORT_PATH = "/v1/import"
#: An artifact upload bounds its own body (`limits.max_artifact_bytes`, api/artifacts.py)
#: and is written as it arrives.
ARTIFACT_UPLOAD_PATH = "/v1/artifacts"


def is_turn_path(path: str) -> bool:
    """The routes whose bodies may carry image attachments (an OpenAI client's as
    image parts)."""
    if path in ("/v1/chat", "/v1/chat/completions"):
        return True
    return path.startswith("/v1/sessions/") and path.endswith("/messages")


class BodyLimitMiddleware:
    """Answers 413 for a body over the limit, whether announced by Content-Length or
    streamed; the body is buffered (it is bounded by definition) and replayed to the app.
    Turn routes get `turn_max_bytes` (room for image attachments), the rest `max_bytes`;
    the import route bounds its own body (`import_lines`)."""

    def __init__(self, app: ASGIApp, max_bytes: int, turn_max_bytes: int | None = None) -> None:
        self.app = app
        self.default_max_bytes = max_bytes
        self.turn_max_bytes = max(turn_max_bytes or max_bytes, max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] in ("GET", "HEAD", "OPTIONS")
            or scope.get("path") in (IMPORT_PATH, ARTIFACT_UPLOAD_PATH)
        ):
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


class BodyTooLarge(SessionGateError):
    """A body over its route's limit, found while it streams in."""

    code = "payload_too_large"
    status = 413

    def __init__(self, max_bytes: int, limit_name: str) -> None:
        super().__init__(f"the request body exceeds {max_bytes} bytes ([limits] {limit_name})")


async def import_lines(
    content_length: str | None, body: AsyncIterable[bytes], max_bytes: int
) -> AsyncIterator[bytes]:
    """The lines of an import body as it arrives; BodyTooLarge as soon as it is announced
    (Content-Length) or found to be over `max_bytes`, so at most one line and the
    parsed chain are ever held, never the whole body. A line past the parser's own limit
    is handed on as soon as it is too long, for the parser to refuse by its number."""
    try:
        announced = int(content_length) if content_length is not None else None
    except ValueError:
        announced = None  # the HTTP protocol refuses a malformed one before this
    if announced is not None and announced > max_bytes:
        raise BodyTooLarge(max_bytes, "max_import_bytes")
    received = 0
    pending = bytearray()
    async for chunk in _until_disconnect(body):
        received += len(chunk)
        if received > max_bytes:
            raise BodyTooLarge(max_bytes, "max_import_bytes")
        searched = len(pending)  # a long line is not searched again with each chunk
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", max(start, searched))) >= 0:
            yield bytes(pending[start:end])
            start = end + 1
        del pending[:start]
        if len(pending) > MAX_LINE_BYTES:
            yield bytes(pending)
            pending.clear()
    if pending:
        yield bytes(pending)


async def _until_disconnect(body: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The body's chunks; a client gone mid-body is a 400 nobody reads (not a 500 in the
    log): nothing was written, and the import is all or nothing."""
    try:
        async for chunk in body:
            yield chunk
    except ClientDisconnect:
        raise SessionGateError(
            "the client left before its body ended; nothing was imported", code="body_incomplete"
        ) from None


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
