"""The `anthropic` adapter against a real local HTTP server speaking Messages SSE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import ModelConfig
from sessiongate.errors import ConfigError
from sessiongate.models.anthropic import LEADING_USER_PLACEHOLDER, AnthropicModel, to_anthropic
from sessiongate.service.engine import build_reply_model
from tests.fake_providers import (
    FakeServer,
    Reply,
    anthropic_error,
    anthropic_events,
    assistant_message,
    consume,
    engine_for,
    sse,
)
from tests.helpers import collect, types

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
OK = Reply(events=anthropic_events(["Hello", ",", " world"], input_tokens=13, output_tokens=5))


def model_for(server: FakeServer, **overrides: Any) -> AnthropicModel:
    options: dict[str, Any] = {
        "model": "fake-claude",
        "base_url": server.url,
        "connect_timeout": 1.0,
        "read_timeout": 2.0,
        "max_retries": 2,
        "base_delay": 0.01,
    }
    return AnthropicModel("claude", **(options | overrides))


def sent_key(headers: dict[str, str]) -> str | None:
    """The key as the SDK sent it: `x-api-key`, or (newer SDKs) a bearer token."""
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer[7:] if bearer.startswith("Bearer ") else None)


def failing(status: int, kind: str, message: str, **headers: str) -> Reply:
    return Reply(status=status, headers=headers, json_body=anthropic_error(kind, message))


# -- message shaping ---------------------------------------------------------------------------


def test_system_messages_go_to_the_system_parameter_and_roles_alternate() -> None:
    system, turns = to_anthropic(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "system", "content": "Recalled: the cat is Tom."},
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": "ok"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "three"},
        ]
    )
    assert system == "Be brief.\n\nRecalled: the cat is Tom."
    assert turns == [
        {"role": "user", "content": "one\n\ntwo"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "three"},
    ]


def test_a_window_that_starts_on_an_assistant_message_gets_a_user_message_first() -> None:
    system, turns = to_anthropic(
        [{"role": "assistant", "content": "earlier"}, {"role": "user", "content": "now"}]
    )
    assert system == ""
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[0]["content"] == LEADING_USER_PLACEHOLDER


# -- streaming --------------------------------------------------------------------------------


async def test_streams_tokens_and_the_servers_usage() -> None:
    async with FakeServer(OK) as server:
        outcome = await consume(model_for(server, api_key="sk-ant-test-key"), MESSAGES)
    assert outcome.error is None
    assert outcome.text == "Hello, world" and outcome.tokens == 3
    assert outcome.usage is not None
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (13, 5)
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert sent_key(request.headers) == "sk-ant-test-key"
    assert request.body["system"] == "Be brief."
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]
    assert request.body["max_tokens"] == 4096 and request.body["stream"] is True


async def test_a_500_is_retried_and_the_retry_answers() -> None:
    async with FakeServer(failing(500, "api_error", "boom"), OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert len(server.requests) == 2


async def test_overloaded_529_counts_as_unavailable_and_is_retried() -> None:
    async with FakeServer(failing(529, "overloaded_error", "Overloaded")) as server:
        outcome = await consume(model_for(server, max_retries=1), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_unavailable" and outcome.error.retryable
    assert len(server.requests) == 2


async def test_a_429_waits_for_retry_after_then_succeeds() -> None:
    limited = failing(429, "rate_limit_error", "slow down", **{"retry-after": "1"})
    async with FakeServer(limited, OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    first, second = server.requests
    assert 0.9 <= second.at - first.at < 3.0


async def test_a_persistent_500_gives_up_after_max_retries_plus_one_attempts() -> None:
    async with FakeServer(failing(500, "api_error", "down")) as server:
        outcome = await consume(model_for(server, max_retries=2), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_unavailable" and outcome.error.retryable
    assert len(server.requests) == 3


async def test_a_401_is_not_retried_and_never_shows_the_key() -> None:
    secret = "sk-ant-api03-secretsecret"
    reply = failing(401, "authentication_error", f"invalid x-api-key {secret}")
    async with FakeServer(reply) as server:
        outcome = await consume(model_for(server, api_key=secret), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_auth" and not outcome.error.retryable
    assert secret not in outcome.error.message
    assert len(server.requests) == 1


async def test_an_error_event_before_any_text_is_retried() -> None:
    overloaded = sse(anthropic_error("overloaded_error", "Overloaded"), "error")
    flaky = Reply(events=[*anthropic_events([])[:1], overloaded])
    async with FakeServer(flaky, OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert len(server.requests) == 2


async def test_an_error_event_after_text_ends_the_reply_with_that_error() -> None:
    overloaded = sse(anthropic_error("overloaded_error", "Overloaded"), "error")
    flaky = Reply(events=[*anthropic_events(["Hel"], stop=False), overloaded])
    async with FakeServer(flaky, OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_unavailable"
    assert "Overloaded" in outcome.error.message
    assert len(server.requests) == 1


async def test_a_connection_dropped_mid_stream_is_interrupted_not_retried() -> None:
    cut = Reply(events=anthropic_events(["Hello", " wor"], stop=False), drop=True)
    async with FakeServer(cut, OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "Hello wor"
    assert outcome.error is not None and outcome.error.code == "model_stream_interrupted"
    assert len(server.requests) == 1


async def test_a_body_that_ends_without_message_stop_is_interrupted() -> None:
    short = Reply(events=anthropic_events(["Hello"], stop=False))  # a clean end, too early
    async with FakeServer(short) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "Hello"
    assert outcome.error is not None and outcome.error.code == "model_stream_interrupted"


async def test_invalid_json_in_a_data_line_is_a_bad_response() -> None:
    frames = [*anthropic_events(["Hi"], stop=False), "event: content_block_delta\ndata: {oops\n\n"]
    async with FakeServer(Reply(events=frames)) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "Hi"
    assert outcome.error is not None and outcome.error.code == "model_bad_response"


async def test_a_first_byte_that_never_comes_times_out() -> None:
    async with FakeServer(Reply(hang=True)) as server:
        outcome = await consume(model_for(server, read_timeout=0.5), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_timeout"
    assert 0.4 <= outcome.seconds < 1.5
    assert len(server.requests) == 1


# -- configuration and the engine ---------------------------------------------------------------


def test_config_needs_a_model_name() -> None:
    with pytest.raises(ConfigError, match=r"models\.c\.model"):
        build_reply_model("c", ModelConfig(provider="anthropic"))


async def test_a_turn_through_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SG_TEST_ANTHROPIC_KEY", "sk-ant-e2e")
    async with FakeServer(OK) as server:
        config = {
            "provider": "anthropic",
            "base_url": server.url,
            "model": "fake-claude",
            "api_key_env": "SG_TEST_ANTHROPIC_KEY",
        }
        engine = engine_for(tmp_path, config)
        try:
            events = await collect(engine, "hi")
            content, metadata = await assistant_message(engine)
        finally:
            await engine.aclose()
    assert types(events)[-1] == "end"
    assert content == "Hello, world"
    assert metadata["model"] == "m" and metadata["usage"]["completion_tokens"] == 5
    assert sent_key(server.requests[0].headers) == "sk-ant-e2e"


async def test_a_broken_server_falls_back_to_the_next_model(tmp_path: Path) -> None:
    async with FakeServer(failing(529, "overloaded_error", "Overloaded")) as server:
        config = {
            "provider": "anthropic",
            "base_url": server.url,
            "model": "fake-claude",
            "max_retries": 0,
        }
        engine = engine_for(tmp_path, config)
        try:
            events = await collect(engine, "hi")
            content, metadata = await assistant_message(engine)
        finally:
            await engine.aclose()
    assert types(events)[-1] == "end"
    assert metadata["model"] == "offline" and "No model is configured" in content
    assert len(server.requests) == 1
