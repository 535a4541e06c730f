"""The `openai` adapter against a real local HTTP server speaking chat-completions SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import ModelConfig
from sessiongate.errors import ConfigError
from sessiongate.models.openai import OpenAIChatModel
from sessiongate.models.retry import RetryPolicy, parse_retry_after
from sessiongate.service.engine import build_reply_model
from tests.fake_providers import (
    FakeServer,
    Reply,
    assistant_message,
    closed_port,
    consume,
    engine_for,
    openai_chunk,
    openai_error,
    openai_events,
    sse,
)
from tests.helpers import collect, types

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
OK = Reply(events=openai_events(["Hello", ",", " world"]))


_OPENED: list[OpenAIChatModel] = []


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    """Each adapter owns an aiohttp session; close the ones a test made."""
    yield
    while _OPENED:
        await _OPENED.pop().aclose()


def model_for(server: FakeServer, **overrides: Any) -> OpenAIChatModel:
    options: dict[str, Any] = {
        "model": "fake-model",
        "base_url": server.url + "/v1",
        "connect_timeout": 1.0,
        "read_timeout": 2.0,
        "max_retries": 2,
        "base_delay": 0.01,
    }
    model = OpenAIChatModel("fake", **(options | overrides))
    _OPENED.append(model)
    return model


async def test_streams_tokens_and_the_servers_usage() -> None:
    async with FakeServer(OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None
    assert outcome.text == "Hello, world" and outcome.tokens == 3
    assert outcome.usage is not None and outcome.usage.to_dict()["total_tokens"] == 18
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer not-needed"
    assert request.body["model"] == "fake-model" and request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.body["messages"] == MESSAGES


async def test_estimates_usage_when_the_server_sends_none() -> None:
    async with FakeServer(Reply(events=openai_events(["abcdefgh"], usage=None))) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "abcdefgh"
    # "Be brief." is 3 estimated tokens, "hi" 1; the reply's 8 characters are 2.
    assert outcome.usage is not None
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (4, 2)


async def test_a_500_is_retried_and_the_retry_answers() -> None:
    async with FakeServer(Reply(status=500, json_body=openai_error("boom")), OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert len(server.requests) == 2


async def test_a_429_waits_for_retry_after_then_succeeds() -> None:
    limited = Reply(
        status=429, headers={"retry-after": "1"}, json_body=openai_error("slow", "rate_limit")
    )
    async with FakeServer(limited, OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    first, second = server.requests
    assert 0.9 <= second.at - first.at < 3.0


async def test_a_persistent_500_gives_up_after_max_retries_plus_one_attempts() -> None:
    async with FakeServer(Reply(status=503, json_body=openai_error("down"))) as server:
        outcome = await consume(model_for(server, max_retries=2), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_unavailable" and outcome.error.retryable
    assert "down" in outcome.error.message
    assert len(server.requests) == 3


async def test_a_429_that_persists_is_rate_limited() -> None:
    limited = Reply(status=429, headers={"retry-after": "0"}, json_body=openai_error("slow"))
    async with FakeServer(limited) as server:
        outcome = await consume(model_for(server, max_retries=1), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_rate_limited" and outcome.error.retryable
    assert len(server.requests) == 2


async def test_a_401_is_not_retried_and_never_shows_the_key() -> None:
    secret = "sk-test-0123456789abcdef"
    echo = openai_error(f"Incorrect API key provided: {secret}", "invalid_request_error")
    async with FakeServer(Reply(status=401, json_body=echo)) as server:
        outcome = await consume(model_for(server, api_key=secret), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_auth" and not outcome.error.retryable
    assert secret not in outcome.error.message and "sk-" not in outcome.error.message
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == f"Bearer {secret}"


async def test_another_4xx_is_a_bad_request_without_retry() -> None:
    body = openai_error("model 'nope' not found", "invalid_request_error")
    async with FakeServer(Reply(status=404, json_body=body)) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_bad_request" and not outcome.error.retryable
    assert "not found" in outcome.error.message
    assert len(server.requests) == 1


async def test_a_connection_dropped_mid_stream_is_interrupted_not_retried() -> None:
    cut = Reply(events=openai_events(["Hello", " wor"], done=False), drop=True)
    async with FakeServer(cut, OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "Hello wor"
    assert outcome.error is not None and outcome.error.code == "model_stream_interrupted"
    assert outcome.usage is None
    assert len(server.requests) == 1  # text had reached the caller: no silent restart


async def test_a_drop_before_any_token_is_retried() -> None:
    cut = Reply(events=[], drop=True)
    async with FakeServer(cut, OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert len(server.requests) == 2


async def test_invalid_json_in_a_data_line_is_a_bad_response() -> None:
    broken = Reply(events=[sse(openai_chunk("Hi")), "data: {not json\n\n"])
    async with FakeServer(broken) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "Hi"
    assert outcome.error is not None and outcome.error.code == "model_bad_response"


async def test_a_chunk_of_the_wrong_shape_is_a_bad_response() -> None:
    async with FakeServer(Reply(events=[sse({"choices": "nope"})])) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_bad_response"
    assert len(server.requests) == 1


async def test_an_error_object_in_the_stream_is_a_model_error() -> None:
    failing = Reply(events=[sse({"error": {"message": "overloaded", "type": "server_error"}})])
    async with FakeServer(failing, OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"  # retried: no text yet
    assert len(server.requests) == 2


async def test_a_first_byte_that_never_comes_times_out() -> None:
    async with FakeServer(Reply(hang=True)) as server:
        outcome = await consume(model_for(server, read_timeout=0.5), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_timeout"
    assert outcome.error.retryable
    assert 0.4 <= outcome.seconds < 1.5
    assert len(server.requests) == 1


async def test_a_stream_that_goes_quiet_times_out() -> None:
    quiet = Reply(events=openai_events(["Hel"], done=False), stall=True)
    async with FakeServer(quiet) as server:
        outcome = await consume(model_for(server, read_timeout=0.5), MESSAGES)
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_timeout"
    assert outcome.seconds < 1.5


async def test_a_server_that_is_not_there_is_unavailable_after_retries() -> None:
    model = OpenAIChatModel(
        "gone", model="m", base_url=f"http://127.0.0.1:{closed_port()}/v1", base_delay=0.01
    )
    _OPENED.append(model)
    outcome = await consume(model, MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_unavailable" and outcome.error.retryable


# -- retry policy -----------------------------------------------------------------------------


def test_retry_after_accepts_seconds_dates_and_milliseconds() -> None:
    now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    date = format_datetime(now + timedelta(seconds=12), usegmt=True)
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": date}, now=now) == 12.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, max_retry_after=30.0)
    assert [policy.delay(n) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]
    assert policy.delay(0, retry_after=3600) == 30.0


# -- configuration and the engine ---------------------------------------------------------------


def test_config_needs_a_model_name() -> None:
    with pytest.raises(ConfigError, match=r"models\.m\.model"):
        build_reply_model("m", ModelConfig(provider="openai", base_url="http://x/v1"))


def test_config_names_a_missing_key_variable_without_guessing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SG_TEST_MISSING_KEY", raising=False)
    config = ModelConfig(provider="openai", model="m", api_key_env="SG_TEST_MISSING_KEY")
    with pytest.raises(ConfigError, match="SG_TEST_MISSING_KEY"):
        build_reply_model("m", config)


async def test_a_turn_through_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SG_TEST_OPENAI_KEY", "sk-e2e-key-1234")
    async with FakeServer(OK) as server:
        config = {
            "provider": "openai",
            "base_url": server.url + "/v1",
            "model": "fake-model",
            "api_key_env": "SG_TEST_OPENAI_KEY",
        }
        engine = engine_for(tmp_path, config)
        try:
            events = await collect(engine, "hi")
            content, metadata = await assistant_message(engine)
        finally:
            await engine.aclose()
    assert types(events)[-1] == "end"
    assert content == "Hello, world"
    assert metadata["model"] == "m" and metadata["usage"]["prompt_tokens"] == 11
    assert server.requests[0].headers["authorization"] == "Bearer sk-e2e-key-1234"
    assert server.requests[0].body["messages"][-1] == {"role": "user", "content": "hi"}
    assert server.requests[0].headers["content-type"] == "application/json"
    assert server.requests[0].body["stream"] is True


async def test_a_broken_server_falls_back_to_the_next_model(tmp_path: Path) -> None:
    async with FakeServer(Reply(status=500, json_body=openai_error("boom"))) as server:
        config = {
            "provider": "openai",
            "base_url": server.url + "/v1",
            "model": "fake-model",
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
