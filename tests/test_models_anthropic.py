"""The `anthropic` adapter against a real local HTTP server speaking Messages SSE."""

from __future__ import annotations

from typing import Any

import pytest

from sessiongate.config.models import ModelConfig
from sessiongate.errors import ConfigError
from sessiongate.models.anthropic.adapter import (
    LEADING_USER_PLACEHOLDER,
    AnthropicModel,
    to_anthropic,
)
from sessiongate.service.engine import build_reply_model
from tests.support.fake_providers import (
    FakeServer,
    Reply,
    anthropic_error,
    anthropic_events,
    consume,
    sse,
)

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


async def test_the_request_carries_the_system_prompt_apart_and_max_tokens() -> None:
    async with FakeServer(OK) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.error is None and outcome.text == "Hello, world"
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.body["system"] == "Be brief."
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]
    assert request.body["max_tokens"] == 4096 and request.body["stream"] is True


async def test_overloaded_529_counts_as_unavailable_and_is_retried() -> None:
    async with FakeServer(failing(529, "overloaded_error", "Overloaded")) as server:
        outcome = await consume(model_for(server, max_retries=1), MESSAGES)
    assert outcome.error is not None
    assert outcome.error.code == "model_unavailable" and outcome.error.retryable
    assert outcome.error.message == "the model server answered 529"
    assert len(server.requests) == 2


async def test_a_rate_limit_error_event_after_text_is_rate_limited() -> None:
    limited = sse(anthropic_error("rate_limit_error", "slow down"), "error")
    flaky = Reply(
        events=[*anthropic_events(["Hel"], stop_reason=False, message_stop=False), limited]
    )
    async with FakeServer(flaky) as server:
        outcome = await consume(model_for(server), MESSAGES)
    assert outcome.text == "Hel"
    assert outcome.error is not None and outcome.error.code == "model_rate_limited"
    assert len(server.requests) == 1


# -- configuration --------------------------------------------------------------------------------


def test_config_needs_a_model_name() -> None:
    with pytest.raises(ConfigError, match=r"models\.c\.model"):
        build_reply_model("c", ModelConfig.model_validate({"provider": "anthropic"}))
