"""The `openai` provider speaking the wire itself (models/openai/http.py, issue 24): the
quirks the official SDK used to sit in front of, each against a real HTTP server on
loopback, and once through `sessiongate serve`."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.models.base import ModelOptions, ToolSpec
from sessiongate.models.openai.adapter import OpenAIChatModel
from sessiongate.models.openai.http import ChatCompletionsClient
from tests.support.fake_providers import (
    FakeServer,
    Reply,
    _read_request,
    _respond,
    consume,
    consume_with,
    openai_chunk,
    openai_events,
    openai_tool_events,
    split_arguments,
    sse,
)
from tests.support.gateway import parse_sse
from tests.support.served_fake_model import serve_with_fake_model

MESSAGES = [{"role": "user", "content": "hi"}]


@dataclass(frozen=True)
class TextReply(Reply):
    """An error status whose body is plain text (an nginx page), not JSON."""

    text: str = ""


@dataclass(frozen=True)
class CloseReply(Reply):
    """Read the request, then close the connection without a byte of answer (what a
    keep-alive connection the server already dropped looks like to the client)."""


class TextServer(FakeServer):
    """`FakeServer` that also answers `TextReply`s, and with `by_prompt` picks each reply by
    the request's last message rather than by its order (a gateway may ask its model
    other things in the background)."""

    def __init__(self, *replies: Reply, by_prompt: dict[str, Reply] | None = None) -> None:
        super().__init__(*replies)
        self.by_prompt = by_prompt or {}

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            seen = await _read_request(reader)
            if seen is None:
                return
            self.requests.append(seen)
            last = (seen.body or {}).get("messages", [{}])[-1].get("content")
            reply = self.by_prompt.get(str(last))
            if reply is None:
                reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
            if isinstance(reply, CloseReply):
                return
            if not isinstance(reply, TextReply):
                await _respond(writer, reply, self._closing)
                return
            body = reply.text.encode()
            writer.write(
                f"HTTP/1.1 {reply.status} Error\r\nconnection: close\r\n"
                f"content-type: text/html\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


_OPENED: list[OpenAIChatModel] = []


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while _OPENED:
        await _OPENED.pop().aclose()


def model_at(url: str, **overrides: Any) -> OpenAIChatModel:
    options: dict[str, Any] = {
        "model": "fake-model",
        "base_url": url + "/v1",
        "connect_timeout": 1.0,
        "read_timeout": 2.0,
        "max_retries": 2,
        "base_delay": 0.01,
    }
    model = OpenAIChatModel("fake", **(options | overrides))
    _OPENED.append(model)
    return model


def chunked(body: str, size: int) -> list[str]:
    return [body[i : i + size] for i in range(0, len(body), size)]


# -- the body: lines, comments, ends ---------------------------------------------------------


async def test_a_data_line_split_across_reads_is_one_chunk() -> None:
    # Each event cut in the middle of its JSON (and of `data:` itself), sent as separate
    # network writes 5 ms apart.
    frames: list[str] = []
    for event in openai_events(["Hello", ",", " world"]):
        frames += [event[:3], event[3:17], event[17:]]
    async with FakeServer(Reply(events=frames)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world" and outcome.tokens == 3
    assert outcome.usage is not None and not outcome.usage.estimated


async def test_crlf_line_ends_and_a_cr_lf_pair_split_between_reads() -> None:
    body = "".join(openai_events(["a", "b", "c"])).replace("\n", "\r\n")
    # Every CRLF split between two writes: the LF that starts the next write ends no line.
    frames = body.replace("\r\n", "\r\x00\n").split("\x00")
    async with FakeServer(Reply(events=frames)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "abc"
    assert outcome.usage is not None and outcome.usage.prompt_tokens == 11


async def test_comments_and_other_fields_between_events_are_skipped() -> None:
    events = openai_events(["x", "y"])
    frames = [": ping\n\n", events[0], ":\n", "event: message\nid: 7\nretry: 10\n"]
    frames += [*events[1:2], ": ping\n\n", *events[2:]]
    async with FakeServer(Reply(events=frames)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "xy"


async def test_an_error_object_mid_stream_ends_the_reply_after_its_text() -> None:
    error = {"error": {"message": "backend died", "type": "server_error"}}
    events = [*openai_events(["Hel"], finish=False, done=False), sse(error)]
    async with FakeServer(Reply(events=events)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_unavailable"
    assert outcome.error.message.endswith("mid-reply")
    assert len(server.requests) == 1  # text reached the caller: never retried


async def test_an_error_object_before_any_text_is_retried() -> None:
    error = {"error": {"message": "try later", "type": "rate_limit_exceeded"}}
    async with FakeServer(
        Reply(events=[sse(error)]), Reply(events=openai_events(["ok"]))
    ) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "ok" and len(server.requests) == 2


async def test_a_body_that_closes_without_done_after_the_finish_reason_is_complete() -> None:
    events = openai_events(["whole"], usage=None, done=False)
    async with FakeServer(Reply(events=events)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "whole"
    assert outcome.usage is not None and outcome.usage.estimated


async def test_a_body_that_closes_without_done_or_finish_reason_is_incomplete() -> None:
    events = openai_events(["half"], finish=False, done=False)
    async with FakeServer(Reply(events=events)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.text == "half"
    assert outcome.error is not None and outcome.error.code == "stream_incomplete"
    assert len(server.requests) == 1


async def test_a_connection_cut_mid_body_before_text_is_retried_then_answers() -> None:
    cut = Reply(events=openai_events([], finish=False, done=False)[:1], drop=True)
    async with FakeServer(cut, Reply(events=openai_events(["again"]))) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "again" and len(server.requests) == 2


# -- statuses ---------------------------------------------------------------------------------


async def test_a_non_json_error_body_is_classified_by_status_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="sessiongate.models")
    page = "<html><body><h1>502 Bad Gateway</h1> nginx upstream db-7 down</body></html>"
    async with TextServer(TextReply(status=502, text=page)) as server:
        outcome = await consume(model_at(server.url, max_retries=1), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_unavailable"
    assert outcome.error.message == "the model server answered 502"
    assert len(server.requests) == 2  # a 5xx is retried
    details = [r.__dict__["detail"] for r in caplog.records if r.getMessage() == "model_failure"]
    assert details and all("HTTP 502" in d and "nginx upstream db-7 down" in d for d in details)


async def test_a_429_waits_for_retry_after_then_answers() -> None:
    limited = Reply(status=429, headers={"retry-after": "0.3"}, json_body={"error": {}})
    async with FakeServer(limited, Reply(events=openai_events(["late"]))) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "late"
    first, second = server.requests
    assert second.at - first.at >= 0.3


async def test_a_429_that_persists_is_rate_limited_after_the_retries() -> None:
    limited = Reply(status=429, headers={"retry-after-ms": "10"}, json_body={"error": {}})
    async with FakeServer(limited) as server:
        outcome = await consume(model_at(server.url, max_retries=2), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_rate_limited"
    assert len(server.requests) == 3


async def test_a_400_context_length_exceeded_is_a_context_overflow_not_retried() -> None:
    # OpenAI's own wording and code: the working set retries the turn once with a
    # smaller context on this code (service/turn/working_context.py).
    body = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9100 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    async with FakeServer(Reply(status=400, json_body=body)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "context_overflow"
    assert "8192" not in outcome.error.message
    assert len(server.requests) == 1


async def test_another_400_is_a_bad_request() -> None:
    body = {"error": {"message": "unknown parameter foo", "type": "invalid_request_error"}}
    async with FakeServer(Reply(status=400, json_body=body)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_bad_request"
    assert len(server.requests) == 1


async def test_a_refused_connection_and_a_silent_server_are_told_apart() -> None:
    with_nothing = model_at("http://127.0.0.1:1", max_retries=0)
    refused = await consume(with_nothing, MESSAGES)
    assert refused.error is not None and refused.error.code == "model_unavailable"
    assert refused.error.message == "the model server refused the connection"
    async with FakeServer(Reply(hang=True)) as server:
        silent = await consume(model_at(server.url, read_timeout=0.3, max_retries=0), MESSAGES)
    assert silent.error is not None and silent.error.code == "model_timeout"
    assert silent.error.message == "the model timed out before answering"


async def test_a_connection_closed_before_the_head_is_unreachable_and_retried() -> None:
    # The SDK's aiohttp transport had reported this as a connect timeout (not retried).
    async with TextServer(CloseReply(), Reply(events=openai_events(["back"]))) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "back" and len(server.requests) == 2
    async with TextServer(CloseReply()) as server:
        closed = await consume(model_at(server.url, max_retries=0), MESSAGES)
    assert closed.error is not None and closed.error.code == "model_unavailable"
    assert closed.error.message == "the model server could not be reached"


# -- tool calls and usage -------------------------------------------------------------------


async def test_tool_call_deltas_split_over_many_chunks_come_whole() -> None:
    arguments = json.dumps({"city": "Zürich", "days": [1, 2, 3], "note": "a\nb"})
    calls = [split_arguments("call_a", "weather", arguments, size=1)]
    calls.append(split_arguments("call_b", "time", '{"tz": "UTC"}', size=2))
    events = openai_tool_events(["Looking"], calls, interleave=True)
    frames = [piece for event in events for piece in chunked(event, 40)]
    tools = (
        ToolSpec(name="weather", description="", parameters={"type": "object"}),
        ToolSpec(name="time", description="", parameters={"type": "object"}),
    )
    async with FakeServer(Reply(events=frames)) as server:
        outcome = await consume_with(model_at(server.url), MESSAGES, ModelOptions(tools=tools))
    assert outcome.error is None and outcome.text == "Looking"
    assert [(c.call_id, c.name, c.arguments) for c in outcome.calls] == [
        ("call_a", "weather", arguments),
        ("call_b", "time", '{"tz": "UTC"}'),
    ]
    assert outcome.order == ["text", "call", "call", "usage"]


async def test_usage_in_the_final_chunk_beside_the_finish_reason_is_reported() -> None:
    last = openai_chunk("!", finish="stop")
    last["usage"] = {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}
    events = [*openai_events(["Hi"], finish=False, done=False), sse(last), sse("[DONE]")]
    async with FakeServer(Reply(events=events)) as server:
        outcome = await consume(model_at(server.url), MESSAGES)
    assert outcome.error is None and outcome.text == "Hi!"
    assert outcome.usage is not None and not outcome.usage.estimated
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (40, 2)


# -- the request and the connection --------------------------------------------------------------


async def test_the_request_carries_the_key_the_body_and_nothing_of_the_sdk() -> None:
    async with FakeServer(Reply(events=openai_events(["ok"]))) as server:
        outcome = await consume(model_at(server.url, api_key="sk-test-123456"), MESSAGES)
    assert outcome.error is None
    (seen,) = server.requests
    assert seen.method == "POST" and seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test-123456"
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["user-agent"].startswith("sessiongate")
    assert not [name for name in seen.headers if name.startswith("x-stainless")]
    assert json.loads(seen.raw) == seen.body and seen.body["messages"] == MESSAGES


def test_the_base_url_and_organisation_come_from_the_environment_as_the_sdk_read_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-42")
    default = ChatCompletionsClient(base_url=None, api_key="k", connect_timeout=1, read_timeout=1)
    assert default.url == "https://api.openai.com/v1/chat/completions"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.internal:8080/v1/")
    from_env = ChatCompletionsClient(base_url=None, api_key="k", connect_timeout=1, read_timeout=1)
    assert from_env.url == "http://proxy.internal:8080/v1/chat/completions"
    assert from_env._headers["OpenAI-Organization"] == "org-42"


class KeepAliveServer:
    """HTTP/1.1 with keep-alive: answers every request on a connection with a stream whose
    `[DONE]` and the chunked body's end come in two writes, `gap` apart; counts
    connections."""

    def __init__(self, gap: float) -> None:
        self.gap = gap
        self.connections = 0
        self.requests = 0
        self._server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> KeepAliveServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                self.requests += 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for event in openai_events(["same"]):
                    data = event.encode()
                    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
                await asyncio.sleep(self.gap)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.mark.parametrize(("gap", "connections"), [(0.05, 1), (1.0, 3)])
async def test_the_connection_is_reused_when_the_body_ends_soon_after_done(
    gap: float, connections: int
) -> None:
    # After [DONE] the rest of the body is awaited briefly (0.5 s): a body that ends in
    # time gives its connection back to the pool; one that does not is closed.
    async with KeepAliveServer(gap) as server:
        model = model_at(server.url)
        for _ in range(3):
            outcome = await consume(model, MESSAGES)
            assert outcome.error is None and outcome.text == "same"
    assert server.requests == 3 and server.connections == connections


# -- through `sessiongate serve` ---------------------------------------------------------------


async def test_served_gateway_reads_a_quirky_stream_and_maps_a_non_json_error(
    tmp_path: Path,
) -> None:
    """`sessiongate serve` with an `openai` model at a server that splits lines, ends
    them with CRLF and sends comments: the turn streams the whole reply. The next turn's
    upstream answers 503 with an HTML page: the client gets the fixed message and code,
    none of the page."""
    body = ": ping\r\n\r\n" + "".join(openai_events(["Hel", "lo"])).replace("\n", "\r\n")
    quirky = Reply(events=chunked(body, 7))
    broken = TextReply(status=503, text="<html>upstream db-7.internal exploded</html>")
    fine = Reply(events=openai_events(["{}"]))  # anything else the gateway asks
    routes = {"hello": quirky, "again": broken}
    async with TextServer(fine, by_prompt=routes) as provider:
        with serve_with_fake_model(tmp_path, provider.url) as served:
            async with httpx.AsyncClient(
                base_url=served.url, headers=served.auth, timeout=60
            ) as client:
                path = "/v1/sessions/wire:quirks/messages"
                first = await client.post(path, json={"content": "hello"})
                second = await client.post(path, json={"content": "again"})
    events = parse_sse(first.text)
    assert "".join(d["content"] for kind, d in events if kind == "token") == "Hello"
    assert events[-1][0] == "end"
    kind, error = parse_sse(second.text)[-1]
    assert kind == "error" and error["code"] == "model_unavailable"
    assert error["message"] == "the model server answered 503"
    assert "db-7" not in second.text
    asked = [r.body["messages"][-1]["content"] for r in provider.requests]
    assert "hello" in asked and "again" in asked
    assert all(r.body["stream"] is True for r in provider.requests)
