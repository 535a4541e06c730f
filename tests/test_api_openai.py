"""The OpenAI-compatible surface (`/v1/models`, `/v1/chat/completions`) driven by the
official `openai` SDK against a real gateway on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from sessiongate.errors import ModelError
from sessiongate.models.base import ReplyModel
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def scripted() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, scripted: ScriptedModel) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("openai")
    models: dict[str, ReplyModel] = {
        "scripted": scripted,
        # Not an agent: reached only through a per-key `reply_model` override.
        "failing": ScriptedModel("failing", fail=ModelError("upstream down")),
    }
    # `models` lets a key's override pick it (core/agent_access.py).
    agents = {"defaults": {"model": "scripted", "models": ["failing"]}}
    with running_gateway(gateway_settings(path, agents=agents), models) as gateway:
        yield gateway


def sdk(gw: Gateway, user: str = "alice", **kwargs: Any) -> openai.OpenAI:
    # No retries: a 5xx must surface at once, and a retry would run (and store) a turn again.
    return openai.OpenAI(
        base_url=gw.url + "/v1",
        api_key=kwargs.pop("api_key", None) or gw.keys[user],
        max_retries=0,
        timeout=TIMEOUT,
        **kwargs,
    )


@pytest.fixture
def client(gw: Gateway) -> Iterator[openai.OpenAI]:
    with sdk(gw) as c:
        yield c


@pytest.fixture
def rest(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT) as c:
        yield c


def user(content: str) -> list[Any]:
    return [{"role": "user", "content": content}]


def session_key(key: str) -> dict[str, str]:
    return {"X-Session-Key": key}


def stored(gw: Gateway, rest: httpx.Client, key: str, who: str = "alice") -> list[dict[str, Any]]:
    shown = rest.get(f"/v1/sessions/{key}", headers=gw.auth(who))
    assert shown.status_code == 200, shown.text
    sid = shown.json()["latest"]["session_id"]
    page = rest.get(f"/v1/sessions/{key}/segments/{sid}/messages", headers=gw.auth(who))
    assert page.status_code == 200, page.text
    return list(page.json()["messages"])


# -- models -------------------------------------------------------------------------------


def test_models_list_names_the_agents(client: openai.OpenAI) -> None:
    models = list(client.models.list())
    assert [m.id for m in models] == ["main"]
    assert all(m.object == "model" for m in models)


# -- completions --------------------------------------------------------------------------


def test_non_streaming_completion_returns_the_reply(
    gw: Gateway, client: openai.OpenAI, rest: httpx.Client
) -> None:
    completion = client.chat.completions.create(
        model="main", messages=user("hello there"), extra_headers=session_key("oa:plain")
    )
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "main"
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "reply to: hello there"
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.completion_tokens > 0 and completion.usage.prompt_tokens > 0
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    messages = stored(gw, rest, "oa:plain")
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "hello there"),
        ("assistant", "reply to: hello there"),
    ]


def test_content_parts_are_joined_with_a_newline(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="main",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "+2"}],
            }
        ],
        extra_headers=session_key("oa:parts"),
    )
    assert completion.choices[0].message.content == "reply to: part one\n+2"


def test_streaming_deltas_concatenate_to_the_reply_with_a_usage_chunk(
    client: openai.OpenAI,
) -> None:
    stream = client.chat.completions.create(
        model="main",
        messages=user("stream me some words"),
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=session_key("oa:stream"),
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    with_choices = [c for c in chunks if c.choices]
    assert with_choices[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in with_choices)
    assert text == "reply to: stream me some words"
    assert sum(1 for c in with_choices if c.choices[0].delta.content) >= 2
    assert [c.choices[0].finish_reason for c in with_choices].count("stop") == 1
    assert with_choices[-1].choices[0].finish_reason == "stop"

    usage_chunks = [c for c in chunks if c.usage is not None]
    assert len(usage_chunks) == 1 and usage_chunks[0] is chunks[-1]
    assert usage_chunks[0].choices == []
    usage = usage_chunks[0].usage
    assert usage is not None and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_streaming_without_include_usage_has_no_usage_chunk(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="main", messages=user("no usage"), stream=True, extra_headers=session_key("oa:nu")
    )
    chunks = list(stream)
    assert all(c.usage is None for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "reply to: no usage"
    )


def test_gateway_keeps_the_history(
    gw: Gateway, client: openai.OpenAI, rest: httpx.Client, scripted: ScriptedModel
) -> None:
    key = "oa:history"
    first = client.chat.completions.create(
        model="main", messages=user("my name is Ada"), extra_headers=session_key(key)
    )
    assert first.choices[0].message.content == "reply to: my name is Ada"
    second = client.chat.completions.create(
        model="main", messages=user("what is my name?"), extra_headers=session_key(key)
    )
    assert second.choices[0].message.content == "reply to: what is my name?"
    seen = next(r for r in reversed(scripted.requests) if r[-1]["content"] == "what is my name?")
    assert [(m["role"], m["content"]) for m in seen if m["role"] != "system"] == [
        ("user", "my name is Ada"),
        ("assistant", "reply to: my name is Ada"),
        ("user", "what is my name?"),
    ]

    # A client that re-sends the whole conversation does not duplicate it.
    resend: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "my name is Ada"},
        {"role": "assistant", "content": "reply to: my name is Ada"},
        {"role": "user", "content": "what is my name?"},
        {"role": "assistant", "content": "reply to: what is my name?"},
        {"role": "user", "content": "and again?"},
    ]
    client.chat.completions.create(model="main", messages=resend, extra_headers=session_key(key))
    context = rest.get(f"/v1/sessions/{key}/context", headers=gw.auth("alice")).json()
    assert [(m["role"], m["content"]) for m in context["messages"] if m["role"] != "system"] == [
        ("user", "my name is Ada"),
        ("assistant", "reply to: my name is Ada"),
        ("user", "what is my name?"),
        ("assistant", "reply to: what is my name?"),
        ("user", "and again?"),
        ("assistant", "reply to: and again?"),
    ]


def test_x_session_key_picks_the_key(
    gw: Gateway, client: openai.OpenAI, rest: httpx.Client
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="main", messages=user("pick me"), extra_headers=session_key("oa:picked")
    )
    assert raw.headers["x-session-key"] == "oa:picked"
    assert raw.parse().choices[0].message.content == "reply to: pick me"
    shown = rest.get("/v1/sessions/oa:picked", headers=gw.auth("alice"))
    assert shown.status_code == 200
    assert shown.json()["owner"] == "alice"
    assert shown.json()["latest"]["message_count"] == 2
    assert raw.headers["x-session-id"] == shown.json()["latest"]["session_id"]


def test_without_x_session_key_a_first_request_starts_a_conversation_of_its_own(
    gw: Gateway, rest: httpx.Client
) -> None:
    """Not the caller's route key (which curl and the terminal client share): a key of
    its own, found again by the list the client sends next (DESIGN.md §11)."""
    with sdk(gw, "bob") as bob:
        raw = bob.chat.completions.with_raw_response.create(model="main", messages=user("routed"))
    key = raw.headers["x-session-key"]
    assert key.startswith("oai:chat:") and raw.headers["x-session-identity"] == "new"
    messages = stored(gw, rest, key, "bob")
    assert [m["content"] for m in messages] == ["routed", "reply to: routed"]


async def test_async_client_runs_concurrent_turns_on_separate_keys(gw: Gateway) -> None:
    async with openai.AsyncOpenAI(
        base_url=gw.url + "/v1", api_key=gw.keys["alice"], max_retries=0, timeout=TIMEOUT
    ) as client:

        async def one(index: int) -> str:
            stream = await client.chat.completions.create(
                model="main",
                messages=user(f"async number {index}"),
                stream=True,
                extra_headers=session_key(f"oa:async-{index}"),
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        replies = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(4))), TIMEOUT)
    assert replies == [f"reply to: async number {i}" for i in range(4)]


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_unknown_model_is_refused_like_one_the_caller_may_not_use(
    gw: Gateway, client: openai.OpenAI, rest: httpx.Client, stream: bool
) -> None:
    # An agent nobody configured and one configured for others answer alike (403), so a
    # name never tells whether it exists.
    with pytest.raises(openai.PermissionDeniedError) as raised:
        client.chat.completions.create(
            model="no-such-agent",
            messages=user("hi"),
            stream=stream,
            extra_headers=session_key("oa:nomodel"),
        )
    assert raised.value.status_code == 403
    assert isinstance(raised.value.body, dict)
    assert raised.value.body.get("code") == "agent_not_allowed"
    assert rest.get("/v1/sessions/oa:nomodel", headers=gw.auth("alice")).status_code == 404


@pytest.mark.parametrize("stream", [False, True])
def test_bad_api_key_is_unauthorised(gw: Gateway, stream: bool) -> None:
    with sdk(gw, api_key="sg_AAAAAAAAAAAA_" + "x" * 43) as bad:
        with pytest.raises(openai.AuthenticationError) as raised:
            bad.models.list()
        assert raised.value.status_code == 401
        with pytest.raises(openai.AuthenticationError):
            bad.chat.completions.create(model="main", messages=user("hi"), stream=stream)


def test_a_key_another_user_holds_is_the_callers_own_and_leaks_nothing(
    gw: Gateway, rest: httpx.Client
) -> None:
    """Keys are per owner: alice naming bob's key gets her own conversation under that
    name, answered exactly like a key nobody uses (no 404 that would say bob has it)."""
    with sdk(gw, "bob") as bob:
        bob.chat.completions.create(
            model="main", messages=user("bob private 5150"), extra_headers=session_key("oa:bobs")
        )
    with sdk(gw, "alice") as alice:
        taken = alice.chat.completions.create(
            model="main", messages=user("first"), extra_headers=session_key("oa:bobs")
        )
        unused = alice.chat.completions.create(
            model="main", messages=user("first"), extra_headers=session_key("oa:nobodys")
        )
    assert taken.choices[0].message.content == unused.choices[0].message.content
    assert "5150" not in taken.model_dump_json()
    assert [m["content"] for m in stored(gw, rest, "oa:bobs", "alice")] == [
        "first",
        "reply to: first",
    ]
    assert [m["content"] for m in stored(gw, rest, "oa:bobs", "bob")] == [
        "bob private 5150",
        "reply to: bob private 5150",
    ]


def test_invalid_session_key_header_is_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="main", messages=user("hi"), extra_headers=session_key("bad key")
        )
    assert raised.value.status_code == 400
    assert isinstance(raised.value.body, dict)
    assert raised.value.body.get("code") == "invalid_session_key"


def test_no_user_message_is_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="main",
            messages=[{"role": "system", "content": "only a system prompt"}],
            extra_headers=session_key("oa:nouser"),
        )
    assert raised.value.status_code == 400


def _break_key(gw: Gateway, client: openai.OpenAI, rest: httpx.Client, key: str) -> None:
    client.chat.completions.create(
        model="main", messages=user("ok"), extra_headers=session_key(key)
    )
    patched = rest.patch(
        f"/v1/sessions/{key}", json={"reply_model": "failing"}, headers=gw.auth("alice")
    )
    assert patched.status_code == 200, patched.text


def test_model_failure_is_a_502(gw: Gateway, client: openai.OpenAI, rest: httpx.Client) -> None:
    key = "oa:fails"
    _break_key(gw, client, rest, key)
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(
            model="main", messages=user("now fail"), extra_headers=session_key(key)
        )
    assert raised.value.status_code == 502
    assert isinstance(raised.value.body, dict)
    assert raised.value.body.get("code") == "model_error"
    # The user message is kept; no assistant message was invented.
    assert [(m["role"], m["content"]) for m in stored(gw, rest, key)][-2:] == [
        ("assistant", "reply to: ok"),
        ("user", "now fail"),
    ]


def test_model_failure_while_streaming_raises_in_the_sdk(
    gw: Gateway, client: openai.OpenAI, rest: httpx.Client
) -> None:
    key = "oa:fails-streaming"
    _break_key(gw, client, rest, key)
    stream = client.chat.completions.create(
        model="main", messages=user("now fail"), stream=True, extra_headers=session_key(key)
    )
    with pytest.raises(openai.APIError) as raised:
        list(stream)
    assert "upstream down" in raised.value.message
