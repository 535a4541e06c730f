"""One contract for the HTTP model adapters: every behaviour here is checked against the
`openai` and the `anthropic` adapter alike, each talking to a local fake server that speaks
its provider's wire protocol (tests/fake_providers.py). A behaviour one adapter has and the
other lacks is a bug. What only one provider has (Anthropic's system merge, OpenAI's chunk
shape) stays in tests/test_models_openai.py and tests/test_models_anthropic.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import Settings
from sessiongate.core.keys import KeyRef
from sessiongate.errors import IncompleteStream
from sessiongate.models.anthropic.adapter import AnthropicModel
from sessiongate.models.openai.adapter import OpenAIChatModel
from sessiongate.models.retry import PLACEHOLDER_KEY, redact
from sessiongate.service.engine import build_engine
from tests.support.fake_providers import (
    FakeServer,
    Reply,
    anthropic_error,
    anthropic_events,
    assistant_message,
    closed_port,
    consume,
    engine_for,
    openai_error,
    openai_events,
    sse,
)
from tests.support.helpers import collect, types

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
TOKENS = ["Hello", ",", " world"]

Model = OpenAIChatModel | AnthropicModel


@dataclass(frozen=True)
class Provider:
    """One provider's wire protocol, as the contract needs it."""

    name: str
    #: The adapter's class and the path under the server's URL its base_url names.
    adapter: type[Model]
    base_path: str
    upstream_model: str
    #: (prompt, completion) as the server's complete stream reports them.
    usage: tuple[int, int]
    #: SSE frames: `complete` ends with both markers; `cut` has neither (the body just
    #: ends); `framing_only` has the stream's end but not the model's stop reason;
    #: `reason_only` the model's stop reason but not the stream's end.
    complete: Callable[[list[str]], list[str]]
    cut: Callable[[list[str]], list[str]]
    framing_only: Callable[[list[str]], list[str]]
    reason_only: Callable[[list[str]], list[str]]
    #: A JSON error body for an error status, and an error frame inside a stream.
    error_body: Callable[[str, str], dict[str, Any]]
    error_frame: Callable[[str, str], str]
    #: A text frame whose data is not JSON.
    malformed: str
    #: The key as the request carried it.
    sent_key: Callable[[dict[str, str]], str | None]

    def model_config(self, base_url: str) -> dict[str, Any]:
        return {
            "provider": self.name,
            "base_url": base_url,
            "model": self.upstream_model,
        }


def _bearer(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    return value[7:] if value.startswith("Bearer ") else None


OPENAI = Provider(
    name="openai",
    adapter=OpenAIChatModel,
    base_path="/v1",
    upstream_model="fake-model",
    usage=(11, 7),
    complete=lambda tokens: openai_events(tokens),
    cut=lambda tokens: openai_events(tokens, finish=False, done=False),
    framing_only=lambda tokens: openai_events(tokens, finish=False, done=True),
    reason_only=lambda tokens: openai_events(tokens, usage=None, finish=True, done=False),
    error_body=lambda kind, message: openai_error(message, kind),
    error_frame=lambda kind, message: sse(openai_error(message, kind)),
    malformed="data: {not json\n\n",
    sent_key=_bearer,
)

ANTHROPIC = Provider(
    name="anthropic",
    adapter=AnthropicModel,
    base_path="",
    upstream_model="fake-claude",
    usage=(13, 5),
    complete=lambda tokens: anthropic_events(tokens),
    cut=lambda tokens: anthropic_events(tokens, stop_reason=False, message_stop=False),
    framing_only=lambda tokens: anthropic_events(tokens, stop_reason=False, message_stop=True),
    reason_only=lambda tokens: anthropic_events(tokens, stop_reason=True, message_stop=False),
    error_body=lambda kind, message: anthropic_error(kind, message),
    error_frame=lambda kind, message: sse(anthropic_error(kind, message), "error"),
    malformed="event: content_block_delta\ndata: {oops\n\n",
    sent_key=lambda headers: headers.get("x-api-key") or _bearer(headers),
)


class Wire:
    """A provider in one test: makes its adapters (closed at the end) and its replies."""

    def __init__(self, provider: Provider) -> None:
        self.p = provider
        self.opened: list[Model] = []

    def model(self, where: FakeServer | str, **overrides: Any) -> Model:
        base = where if isinstance(where, str) else where.url + self.p.base_path
        options: dict[str, Any] = {
            "model": self.p.upstream_model,
            "base_url": base,
            "connect_timeout": 1.0,
            "read_timeout": 2.0,
            "max_retries": 2,
            "base_delay": 0.01,
        }
        model = self.p.adapter("fake", **(options | overrides))
        self.opened.append(model)
        return model

    def ok(self) -> Reply:
        return Reply(events=self.p.complete(TOKENS))

    def failing(self, status: int, kind: str, message: str, **headers: str) -> Reply:
        return Reply(status=status, headers=headers, json_body=self.p.error_body(kind, message))


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=lambda p: p.name)
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    made = Wire(request.param)
    yield made
    for model in made.opened:
        await model.aclose()


# -- a reply that streams to its end ----------------------------------------------------------


async def test_streams_text_and_the_servers_usage(wire: Wire) -> None:
    async with FakeServer(wire.ok()) as server:
        outcome = await consume(wire.model(server, api_key="sk-test-contract"), MESSAGES)
    assert outcome.error is None
    assert outcome.text == "Hello, world" and outcome.tokens == 3
    assert outcome.usage is not None
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == wire.p.usage
    assert outcome.usage.estimated is False  # the server's own counts
    (request,) = server.requests
    assert request.body["stream"] is True
    assert wire.p.sent_key(request.headers) == "sk-test-contract"


async def test_the_models_stop_reason_ends_the_reply_even_without_the_streams_end(
    wire: Wire,
) -> None:
    # finish_reason / stop_reason came; the body then ends before [DONE] / message_stop.
    async with FakeServer(Reply(events=wire.p.reason_only(TOKENS))) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert outcome.usage is not None and outcome.usage.completion_tokens > 0


@pytest.mark.parametrize("after", ["drop", "stall"])
async def test_a_connection_lost_after_the_stop_reason_keeps_the_reply_complete(
    wire: Wire, after: str
) -> None:
    events = wire.p.reason_only(TOKENS)
    reply = Reply(events=events, drop=after == "drop", stall=after == "stall")
    async with FakeServer(reply) as server:
        outcome = await consume(wire.model(server, read_timeout=0.5), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert outcome.usage is not None
    assert len(server.requests) == 1


# -- a stream without its end marker ------------------------------------------------------------


async def test_a_stream_without_its_end_marker_is_incomplete_after_the_text(wire: Wire) -> None:
    async with FakeServer(Reply(events=wire.p.cut(["Hello", " wor"])), wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.text == "Hello wor"  # every token came out before the error
    assert isinstance(outcome.error, IncompleteStream)
    assert outcome.error.code == "stream_incomplete" and not outcome.error.retryable
    assert outcome.usage is None  # nothing that looks like the end of a reply
    assert len(server.requests) == 1  # text had reached the caller: no silent restart


async def test_the_streams_end_without_the_models_stop_reason_is_incomplete(wire: Wire) -> None:
    # [DONE] without a finish_reason; message_stop without a stop_reason.
    async with FakeServer(Reply(events=wire.p.framing_only(["Hel"]))) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.text == "Hel"
    assert isinstance(outcome.error, IncompleteStream)
    assert outcome.usage is None


async def test_an_empty_stream_is_retried_then_incomplete(wire: Wire) -> None:
    async with FakeServer(Reply(events=wire.p.cut([]))) as server:
        outcome = await consume(wire.model(server, max_retries=1), MESSAGES)
    assert outcome.text == ""
    assert isinstance(outcome.error, IncompleteStream)
    assert len(server.requests) == 2  # nothing had reached the caller: worth another try


async def test_an_empty_stream_then_a_good_one_answers(wire: Wire) -> None:
    async with FakeServer(Reply(events=wire.p.cut([])), wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"


# -- error statuses --------------------------------------------------------------------------


async def test_a_500_is_retried_and_the_retry_answers(wire: Wire) -> None:
    async with FakeServer(wire.failing(500, "api_error", "boom"), wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert len(server.requests) == 2


async def test_a_persistent_500_gives_up_after_max_retries_plus_one_attempts(wire: Wire) -> None:
    async with FakeServer(wire.failing(503, "api_error", "down")) as server:
        outcome = await consume(wire.model(server, max_retries=2), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_unavailable" and outcome.error.retryable
    assert outcome.error.message == "the model server answered 503"
    assert len(server.requests) == 3


async def test_a_429_waits_for_retry_after_then_succeeds(wire: Wire) -> None:
    limited = wire.failing(429, "rate_limit_error", "slow down", **{"retry-after": "1"})
    async with FakeServer(limited, wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    first, second = server.requests
    assert 0.9 <= second.at - first.at < 3.0


async def test_a_429_that_persists_is_rate_limited(wire: Wire) -> None:
    limited = wire.failing(429, "rate_limit_error", "slow down", **{"retry-after": "0"})
    async with FakeServer(limited) as server:
        outcome = await consume(wire.model(server, max_retries=1), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_rate_limited" and outcome.error.retryable
    assert len(server.requests) == 2


async def test_a_401_is_not_retried(wire: Wire) -> None:
    reply = wire.failing(401, "authentication_error", "invalid key")
    async with FakeServer(reply) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_auth" and not outcome.error.retryable
    assert len(server.requests) == 1


async def test_another_4xx_is_a_bad_request_without_retry(wire: Wire) -> None:
    reply = wire.failing(404, "not_found_error", "model 'nope' not found")
    async with FakeServer(reply) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_bad_request" and not outcome.error.retryable
    assert outcome.error.message == "the model server rejected the request (404)"
    assert len(server.requests) == 1


# -- connections and timeouts ---------------------------------------------------------------


async def test_a_refused_connection_is_unavailable_after_retries(wire: Wire) -> None:
    base = f"http://127.0.0.1:{closed_port()}{wire.p.base_path}"
    outcome = await consume(wire.model(base, max_retries=1), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_unavailable" and outcome.error.retryable
    assert outcome.error.message == "the model server refused the connection"
    assert outcome.seconds < 1.0  # refused, not waited out as a timeout


async def test_a_connection_dropped_mid_stream_is_interrupted_not_retried(wire: Wire) -> None:
    cut = Reply(events=wire.p.cut(["Hello", " wor"]), drop=True)
    async with FakeServer(cut, wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.text == "Hello wor"
    assert outcome.error is not None and outcome.error.code == "model_stream_interrupted"
    assert outcome.usage is None
    assert len(server.requests) == 1


async def test_a_drop_before_any_text_is_retried(wire: Wire) -> None:
    async with FakeServer(Reply(events=[], drop=True), wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert len(server.requests) == 2


async def test_a_first_byte_that_never_comes_times_out(wire: Wire) -> None:
    async with FakeServer(Reply(hang=True)) as server:
        outcome = await consume(wire.model(server, read_timeout=0.5), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_timeout"
    assert outcome.error.retryable
    assert 0.4 <= outcome.seconds < 1.5
    assert len(server.requests) == 1


async def test_a_stream_that_goes_quiet_times_out(wire: Wire) -> None:
    quiet = Reply(events=wire.p.cut(["Hel"]), stall=True)
    async with FakeServer(quiet) as server:
        outcome = await consume(wire.model(server, read_timeout=0.5), MESSAGES)
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_timeout"
    assert outcome.seconds < 1.5


# -- what the stream itself says -------------------------------------------------------------


async def test_a_malformed_chunk_is_a_bad_response_after_the_text(wire: Wire) -> None:
    broken = Reply(events=[*wire.p.cut(["Hi"]), wire.p.malformed])
    async with FakeServer(broken, wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.text == "Hi"
    assert outcome.error is not None and outcome.error.code == "model_bad_response"
    assert outcome.error.message == "the model's reply could not be parsed"
    assert len(server.requests) == 1


async def test_an_error_event_before_any_text_is_retried(wire: Wire) -> None:
    flaky = Reply(events=[*wire.p.cut([])[:1], wire.p.error_frame("overloaded_error", "busy")])
    async with FakeServer(flaky, wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert len(server.requests) == 2


async def test_an_error_event_after_text_ends_the_reply_with_that_error(wire: Wire) -> None:
    flaky = Reply(events=[*wire.p.cut(["Hel"]), wire.p.error_frame("overloaded_error", "busy")])
    async with FakeServer(flaky, wire.ok()) as server:
        outcome = await consume(wire.model(server), MESSAGES)
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_unavailable"
    assert len(server.requests) == 1


# -- what a client may see of an upstream failure ---------------------------------------------

API_KEY = "sk-live-contract-0123456789abcdef"
LEAK = "sk-proj-LEAKEDLEAKED0123 at db-7.internal, prompt was: my password is hunter2"


def _failures(wire: Wire) -> dict[str, list[Reply]]:
    return {
        "500": [wire.failing(500, "api_error", f"upstream exploded: {LEAK} key={API_KEY}")],
        "401": [wire.failing(401, "authentication_error", f"bad key {API_KEY}; {LEAK}")],
        "400": [wire.failing(400, "invalid_request_error", f"rejected: {LEAK}")],
        "in-stream": [Reply(events=[*wire.p.cut(["Hel"]), wire.p.error_frame("api_error", LEAK)])],
    }


@pytest.mark.parametrize("case", ["500", "401", "400", "in-stream"])
async def test_provider_text_never_reaches_the_error_message_only_the_log(
    wire: Wire, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    replies = _failures(wire)[case]
    caplog.set_level(logging.WARNING, logger="sessiongate.models")
    async with FakeServer(*replies) as server:
        outcome = await consume(wire.model(server, api_key=API_KEY, max_retries=0), MESSAGES)
    error = outcome.error
    assert error is not None
    for secret in (API_KEY, "sk-", "LEAKED", "db-7", "hunter2", "exploded", "127.0.0.1"):
        assert secret not in error.message
        assert secret not in str(error)
    assert error.to_dict() == {"error": {"code": error.code, "message": error.message}}
    assert len(error.message) <= 80
    # The operator still gets the provider's words, with the model named and keys blanked.
    (record,) = [r for r in caplog.records if getattr(r, "code", None) == error.code]
    assert record.levelno == logging.WARNING and "'fake'" in record.__dict__["model"]
    detail = record.__dict__["detail"]
    assert "db-7.internal" in detail and "hunter2" in detail
    assert API_KEY not in detail and "sk-proj-LEAKED" not in detail


async def test_a_base_url_with_credentials_stays_out_of_the_message_and_log(
    wire: Wire, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="sessiongate.models")
    base = f"http://admin:s3cr3tpass@127.0.0.1:{closed_port()}{wire.p.base_path}?key=qwerty99"
    outcome = await consume(wire.model(base, max_retries=0), MESSAGES)
    # (aiohttp refuses credentials in the URL beside a bearer header; httpx2 tries to connect)
    assert outcome.error is not None
    logged = " ".join(str(vars(r)) for r in caplog.records)
    for secret in ("s3cr3tpass", "qwerty99"):
        assert secret not in outcome.error.message and secret not in logged


def test_the_placeholder_key_is_never_redacted_as_a_secret() -> None:
    assert redact(f"key {PLACEHOLDER_KEY} ok", PLACEHOLDER_KEY) == f"key {PLACEHOLDER_KEY} ok"
    assert redact("use sk-abcdefgh1234 now", "") == "use [redacted] now"


# -- through the engine ------------------------------------------------------------------------


async def test_a_turn_through_the_engine(
    wire: Wire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SG_TEST_CONTRACT_KEY", "sk-e2e-key-1234")
    async with FakeServer(wire.ok()) as server:
        config = wire.p.model_config(server.url + wire.p.base_path)
        engine = engine_for(tmp_path, config | {"api_key_env": "SG_TEST_CONTRACT_KEY"})
        try:
            events = await collect(engine, "hi")
            content, metadata = await assistant_message(engine)
        finally:
            await engine.aclose()
    assert types(events)[-1] == "end"
    assert content == "Hello, world"
    assert metadata["model"] == "m"
    assert metadata["usage"]["prompt_tokens"] == wire.p.usage[0]
    assert "estimated" not in metadata["usage"]  # measured usage carries no mark
    assert wire.p.sent_key(server.requests[0].headers) == "sk-e2e-key-1234"


async def test_a_broken_server_falls_back_to_the_next_model(wire: Wire, tmp_path: Path) -> None:
    async with FakeServer(wire.failing(503, "api_error", "down")) as server:
        config = wire.p.model_config(server.url + wire.p.base_path) | {"max_retries": 0}
        engine = engine_for(tmp_path, config)
        try:
            events = await collect(engine, "hi")
            content, metadata = await assistant_message(engine)
        finally:
            await engine.aclose()
    assert types(events)[-1] == "end"
    assert metadata["model"] == "offline" and "The model is unavailable" in content
    assert metadata["fallback"] is True and metadata["failed_models"] == ["m"]
    assert len(server.requests) == 1


async def stored_turn(engine: Any) -> list[tuple[str, str, str]]:
    segment = await engine.store.latest_segment(KeyRef("alice", "chat:alice"))
    return [
        (m.role.value, m.content, m.status.value)
        for m in await engine.store.list_messages(segment.session_id)
    ]


async def test_a_stream_without_its_end_marker_is_stored_interrupted_never_complete(
    wire: Wire, tmp_path: Path
) -> None:
    async with FakeServer(Reply(events=wire.p.cut(["Hello", " wor"]))) as server:
        config = wire.p.model_config(server.url + wire.p.base_path) | {"max_retries": 0}
        engine = engine_for(tmp_path, config)
        try:
            events = await collect(engine, "hi")
            stored = await stored_turn(engine)
        finally:
            await engine.aclose()
    assert types(events) == ["start", "token", "token", "error"]
    assert events[-1].code == "stream_incomplete" and events[-1].status == 502
    assert stored == [("user", "hi", "complete"), ("assistant", "Hello wor", "interrupted")]


async def test_a_model_that_sends_only_keep_alives_is_ended_by_turn_timeout(
    wire: Wire, tmp_path: Path
) -> None:
    """Comments keep the connection's read timeout from ever firing; only the turn's own
    deadline frees the key."""
    replies = (Reply(events=[], keepalive=0.1), wire.ok())
    async with FakeServer(*replies) as server:
        config = wire.p.model_config(server.url + wire.p.base_path) | {
            "max_retries": 0,
            "read_timeout": "30s",
        }
        engine = build_engine(
            Settings(
                data_dir=tmp_path,
                models={"m": config},
                agents={"defaults": {"model": "m", "turn_timeout": "1s"}},
                lifecycle={"timezone": "UTC"},
            )
        )
        try:
            async with asyncio.timeout(20):  # the old code hangs here until the server stops
                started = time.monotonic()
                events = await collect(engine, "hi")
                elapsed = time.monotonic() - started
                after = await collect(engine, "again")  # the key is free
            stored = await stored_turn(engine)
        finally:
            await engine.aclose()
    assert types(events)[-1] == "error"
    assert (events[-1].code, events[-1].status) == ("turn_timeout", 504)
    assert 1.0 <= elapsed < 10
    assert types(after)[-1] == "end"
    assert stored == [
        ("user", "hi", "complete"),
        ("user", "again", "complete"),
        ("assistant", "Hello, world", "complete"),
    ]
