"""The `openai` adapter against a real local HTTP server speaking chat-completions SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from sessiongate.config.models import ModelConfig
from sessiongate.errors import ConfigError
from sessiongate.models.openai.adapter import OpenAIChatModel
from sessiongate.models.retry import RetryPolicy, parse_retry_after
from sessiongate.service.engine import build_reply_model
from tests.support.fake_providers import (
    FakeServer,
    Reply,
    consume,
    openai_chunk,
    openai_events,
    sse,
)

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


async def test_the_request_is_one_streamed_chat_completion_with_usage() -> None:
    async with FakeServer(OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer not-needed"
    assert request.headers["content-type"] == "application/json"
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
    assert outcome.usage.estimated is True
    assert outcome.usage.to_dict()["estimated"] is True


async def test_a_chunk_of_the_wrong_shape_is_a_bad_response() -> None:
    async with FakeServer(Reply(events=[sse({"choices": "nope"})])) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_bad_response"
    assert len(server.requests) == 1


async def test_a_finish_reason_on_the_first_choice_only_counts() -> None:
    # n=1: the answer is the first choice; another choice's finish_reason ends nothing.
    second = openai_chunk()
    second["choices"] = [
        {"index": 0, "delta": {}, "finish_reason": None},
        {"index": 1, "delta": {}, "finish_reason": "stop"},
    ]
    events = [*openai_events(["Hel"], finish=False, done=False), sse(second), sse("[DONE]")]
    async with FakeServer(Reply(events=events)) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "stream_incomplete"


# -- the SSE body (models/sse.py) ---------------------------------------------------------------


async def test_lines_split_anywhere_crlf_and_comments_read_as_one_stream() -> None:
    body = "".join(openai_events(["Hello", ",", " world"])).replace("\n", "\r\n")
    body = ": OPENROUTER PROCESSING\r\n\r\n" + body
    frames = [body[i : i + 5] for i in range(0, len(body), 5)]  # every line split
    async with FakeServer(Reply(events=frames)) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    assert outcome.usage is not None and outcome.usage.prompt_tokens == 11


async def test_a_line_over_the_cap_fails_the_stream_after_the_text_so_far() -> None:
    events = [*openai_events(["Hel"], finish=False, done=False), "data: " + "x" * 5000]
    async with FakeServer(Reply(events=[*events, "\n\n"])) as server:
        outcome = await consume(model_for(server, max_line_bytes=4096), MESSAGES)
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_bad_response"
    assert outcome.error.message == "the model server sent a stream line longer than 4096 bytes"
    assert len(server.requests) == 1  # text reached the caller: never retried


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
        build_reply_model(
            "m", ModelConfig.model_validate({"provider": "openai", "base_url": "http://x/v1"})
        )


def test_config_names_a_missing_key_variable_without_guessing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SG_TEST_MISSING_KEY", raising=False)
    config = ModelConfig.model_validate(
        {"provider": "openai", "model": "m", "api_key_env": "SG_TEST_MISSING_KEY"}
    )
    with pytest.raises(ConfigError, match="SG_TEST_MISSING_KEY"):
        build_reply_model("m", config)
