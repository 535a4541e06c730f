"""The SSE reader both HTTP adapters share (models/sse.py): lines split anywhere by the
network, CRLF and CR line ends, comments, and a line that never ends, which fails the
stream once it passes the cap instead of costing quadratic time and unbounded memory.

The reader alone first, then the Anthropic adapter against a local fake server (the
OpenAI adapter's cases are in tests/test_models_openai.py), then a provider that sends a
line without end to both adapters and to `sessiongate serve` as a subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.models.anthropic.adapter import AnthropicModel
from sessiongate.models.openai.adapter import OpenAIChatModel
from sessiongate.models.sse import (
    DEFAULT_MAX_LINE_BYTES,
    LineSplitter,
    StreamLineTooLong,
    data_lines,
)
from tests.support.fake_providers import (
    FakeServer,
    Reply,
    anthropic_error,
    anthropic_events,
    consume,
    openai_chunk,
    openai_events,
    sse,
)
from tests.support.gateway import parse_sse
from tests.support.served_fake_model import serve_with_fake_model

MESSAGES = [{"role": "user", "content": "hi"}]
MIB = 1024 * 1024


def split_all(pieces: Iterable[bytes], limit: int = DEFAULT_MAX_LINE_BYTES) -> list[bytes]:
    splitter = LineSplitter(limit)
    lines = [line for piece in pieces for line in splitter.feed(piece)]
    last = splitter.close()
    return lines if last is None else [*lines, last]


async def payloads(pieces: Iterable[bytes], limit: int = DEFAULT_MAX_LINE_BYTES) -> list[bytes]:
    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return [data async for data in data_lines(body(), max_line_bytes=limit)]


def one_byte_at_a_time(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


# -- the reader -------------------------------------------------------------------------------


async def test_a_data_line_split_across_reads_is_one_payload() -> None:
    stream = b'data: {"a": 1}\n\ndata: {"b": "two words"}\n\ndata: [DONE]\n\n'
    expected = [b'{"a": 1}', b'{"b": "two words"}', b"[DONE]"]
    assert await payloads([stream]) == expected
    assert await payloads(one_byte_at_a_time(stream)) == expected
    assert await payloads([stream[:9], stream[9:30], stream[30:]]) == expected


async def test_crlf_and_cr_line_ends_even_split_between_reads() -> None:
    crlf = b"data: one\r\n\r\ndata: two\r\n\r\n"
    assert await payloads([crlf]) == [b"one", b"two"]
    assert await payloads(one_byte_at_a_time(crlf)) == [b"one", b"two"]
    # A CR ending one read and its LF starting the next are one line end, not two.
    assert split_all([b"a\r", b"\nb\r", b"\r\nc"]) == [b"a", b"b", b"", b"c"]
    assert split_all([b"data: lone\rdata: cr\r"]) == [b"data: lone", b"data: cr"]


async def test_comments_and_other_fields_are_skipped() -> None:
    stream = b": keep-alive\n\nevent: message_start\nid: 7\nretry: 10\ndata: x\n\n:\n\n"
    assert await payloads([stream]) == [b"x"]


async def test_a_last_line_without_a_line_end_still_counts() -> None:
    assert await payloads([b"data: one\n\ndata: [DO", b"NE]"]) == [b"one", b"[DONE]"]


async def test_a_line_over_the_cap_fails_before_it_ends() -> None:
    splitter = LineSplitter(max_line_bytes=1000)
    assert splitter.feed(b"data: " + b"x" * 994) == []  # exactly at the cap: waits
    with pytest.raises(StreamLineTooLong) as raised:
        splitter.feed(b"x")  # one byte more, and no line end in sight
    assert raised.value.code == "model_bad_response"
    assert raised.value.message == "the model server sent a stream line longer than 1000 bytes"
    # A whole line over the cap in one read fails the same way.
    with pytest.raises(StreamLineTooLong):
        LineSplitter(max_line_bytes=1000).feed(b"data: " + b"y" * 1000 + b"\n")
    # The cap is per line: many lines, each under it, are fine.
    assert len(split_all([b"data: " + b"z" * 900 + b"\n"] * 50, limit=1000)) == 50


def test_each_byte_is_searched_for_a_line_end_once() -> None:
    """The work is linear: a 4 MiB line arriving in 1 KiB reads is searched 4 MiB in all
    (rejoining and resplitting the buffer per read would search ~8 GiB), and joined once."""
    line = b"data: " + b"q" * (4 * MIB)
    pieces = [line[i : i + 1024] for i in range(0, len(line), 1024)] + [b"\n"]
    splitter = LineSplitter()
    ended = [found for piece in pieces for found in splitter.feed(piece)]
    assert ended == [line]
    assert splitter.searched_bytes == len(line) + 1


# -- the Anthropic adapter reads its stream through it -------------------------------------------


def anthropic_model(server: FakeServer, **overrides: Any) -> AnthropicModel:
    options: dict[str, Any] = {"base_url": server.url, "max_retries": 0, "read_timeout": 5.0}
    return AnthropicModel("claude", model="fake-claude", **(options | overrides))


async def test_anthropic_events_split_mid_line_with_crlf_and_comments() -> None:
    body = "".join(anthropic_events(["Hello", ",", " world"])).replace("\n", "\r\n")
    body = ": a proxy's comment\r\n\r\n" + body
    frames = [body[i : i + 7] for i in range(0, len(body), 7)]
    async with FakeServer(Reply(events=frames)) as server:
        model = anthropic_model(server)
        try:
            outcome = await consume(model, MESSAGES)
        finally:
            await model.aclose()
    assert outcome.error is None and outcome.text == "Hello, world"
    assert outcome.usage is not None and outcome.usage.prompt_tokens == 13
    (request,) = server.requests
    assert request.headers["anthropic-version"]  # the SDK still sends the request
    assert request.body["stream"] is True and request.body["model"] == "fake-claude"


async def test_anthropic_error_event_in_the_stream_is_still_the_providers_error() -> None:
    events = [
        *anthropic_events(["Hel"], stop_reason=False, message_stop=False),
        sse(anthropic_error("overloaded_error", "Overloaded"), "error"),
    ]
    async with FakeServer(Reply(events=events)) as server:
        model = anthropic_model(server)
        try:
            outcome = await consume(model, MESSAGES)
        finally:
            await model.aclose()
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_unavailable"
    assert outcome.error.message == "the model server reported an error mid-reply"


async def test_anthropic_line_over_the_cap_fails_and_keeps_the_text_before_it() -> None:
    events = [
        *anthropic_events(["Hel"], stop_reason=False, message_stop=False),
        "data: " + "x" * 5000 + "\n\n",
    ]
    async with FakeServer(Reply(events=events)) as server:
        model = anthropic_model(server, max_line_bytes=4096, max_retries=2)
        try:
            outcome = await consume(model, MESSAGES)
        finally:
            await model.aclose()
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_bad_response"
    assert "longer than 4096 bytes" in outcome.error.message
    assert len(server.requests) == 1


# -- a provider whose line never ends ----------------------------------------------------------


@dataclass
class EndlessLineServer:
    """Answers its first request with `head` (complete SSE frames) and then one line that
    never ends: chunks of "x" for as long as the client reads. Later requests get
    `then`. Counts what it sent of the endless line."""

    head: list[str]
    then: list[str] = field(default_factory=list)
    port: int = 0
    requests: int = 0
    endless_bytes: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            )
            await reader.readexactly(length)
            self.requests += 1
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            )
            frames = self.head if self.requests == 1 else self.then
            for frame in frames:
                data = frame.encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            if self.requests > 1:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return
            chunk = b"x" * 65536
            opening = b'data: {"choices": [{"delta": {"content": "'
            writer.write(f"{len(opening):x}\r\n".encode() + opening + b"\r\n")
            while True:  # until the client hangs up
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await writer.drain()
                self.endless_bytes += len(chunk)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


@contextlib.asynccontextmanager
async def endless_line_server(
    head: list[str], then: list[str] | None = None
) -> AsyncIterator[EndlessLineServer]:
    fake = EndlessLineServer(head, then or [])
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = server.sockets[0].getsockname()[1]
    try:
        yield fake
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_line_without_end_is_cut_off_at_the_cap(provider: str) -> None:
    """However much the server would send, the adapter stops reading at the cap (1 MiB
    here) with a clear error, keeping the text that came before."""
    if provider == "openai":
        head = openai_events(["Hel"], finish=False, done=False)
    else:
        head = anthropic_events(["Hel"], stop_reason=False, message_stop=False)
    async with endless_line_server(head) as server:
        model: OpenAIChatModel | AnthropicModel
        if provider == "openai":
            model = OpenAIChatModel(
                "f", model="m", base_url=server.url + "/v1", max_retries=2, max_line_bytes=MIB
            )
        else:
            model = AnthropicModel(
                "f", model="m", base_url=server.url, max_retries=2, max_line_bytes=MIB
            )
        try:
            outcome = await consume(model, MESSAGES)
        finally:
            await model.aclose()
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_bad_response"
    assert outcome.error.message == f"the model server sent a stream line longer than {MIB} bytes"
    assert server.requests == 1  # not retried: it reached the client after text


async def test_served_gateway_fails_the_turn_at_the_cap_and_keeps_serving(
    tmp_path: Path,
) -> None:
    """`sessiongate serve` against a provider whose line never ends: the turn ends with
    the cap's error after the text that came (kept as an interrupted reply), /health
    answers, and the next turn works."""
    head = openai_events(["Hello"], finish=False, done=False)
    then = [sse(openai_chunk("fine")), *openai_events([], usage=None)[1:]]
    async with endless_line_server(head, then) as provider:
        with serve_with_fake_model(tmp_path, provider.url) as served:
            async with httpx.AsyncClient(
                base_url=served.url, headers=served.auth, timeout=60
            ) as client:
                path = "/v1/sessions/sse:endless/messages"
                first = await client.post(path, json={"content": "talk forever"})
                health = await client.get("/health")
                second = await client.post(path, json={"content": "and now?"})
                context = (await client.get("/v1/sessions/sse:endless/context")).json()
    events = parse_sse(first.text)
    assert "".join(d["content"] for kind, d in events if kind == "token") == "Hello"
    kind, error = events[-1]
    assert kind == "error" and error["code"] == "model_bad_response"
    assert str(DEFAULT_MAX_LINE_BYTES) in error["message"]
    # The provider was cut off near the cap, not read on and on.
    assert provider.endless_bytes < DEFAULT_MAX_LINE_BYTES + 64 * MIB
    assert health.status_code == 200
    answer = parse_sse(second.text)
    assert "".join(d["content"] for kind, d in answer if kind == "token") == "fine"
    assert answer[-1][0] == "end"
    sent = json.dumps(context)
    assert "Hello" in sent and "xxxx" not in sent
