"""A fallback to `offline` says the model is unavailable (not that none is configured),
and a reply a fallback model wrote is marked so, visibly in the API's message listing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from sessiongate.config import Settings
from sessiongate.core.context import STAND_IN_SIGNATURE
from sessiongate.core.keys import KeyRef
from sessiongate.errors import ModelError
from sessiongate.service.engine import Engine, build_engine
from tests.conftest import ALICE
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel, collect

DOWN = ModelError("the model server answered 503", code="model_unavailable")
REF = KeyRef("alice", "chat:alice")


def engine_with(
    tmp_path: Path, model: str, fallbacks: list[str], listed: list[str] | None = None
) -> Engine:
    defaults: dict[str, Any] = {"model": model, "fallback_models": fallbacks}
    if listed:
        defaults["models"] = listed  # a key's override may pick these
    return build_engine(
        Settings(data_dir=tmp_path, lifecycle={"timezone": "UTC"}, agents={"defaults": defaults}),
        models={"down": ScriptedModel("down", fail=DOWN), "spare": ScriptedModel("spare")},
    )


async def reply_of(engine: Engine, text: str) -> tuple[str, dict[str, Any]]:
    events = await collect(engine, text)
    assert events[-1].type == "end"
    segment = await engine.store.latest_segment(KeyRef("alice", "chat:alice"))
    reply = (await engine.store.list_messages(segment.session_id))[-1]
    return reply.content, reply.metadata


async def test_offline_standing_in_says_the_model_is_unavailable(tmp_path: Path) -> None:
    engine = engine_with(tmp_path, "down", ["offline"])
    try:
        content, metadata = await reply_of(engine, "are you there?")
    finally:
        await engine.aclose()
    assert content.startswith("The model is unavailable")
    assert "No model is configured" not in content and "are you there?" in content
    assert metadata["model"] == "offline"
    assert metadata["fallback"] is True and metadata["failed_models"] == ["down"]


async def test_offline_as_the_configured_model_keeps_its_own_text(tmp_path: Path) -> None:
    engine = engine_with(tmp_path, "offline", [])
    try:
        content, metadata = await reply_of(engine, "hello")
    finally:
        await engine.aclose()
    assert content.startswith("No model is configured")
    assert "fallback" not in metadata


async def test_any_fallback_model_is_marked_and_a_first_answer_is_not(tmp_path: Path) -> None:
    engine = engine_with(tmp_path, "down", ["spare", "offline"])
    try:
        content, metadata = await reply_of(engine, "hi")
        assert content == "reply to: hi" and metadata["model"] == "spare"
        assert metadata["fallback"] is True and metadata["failed_models"] == ["down"]
    finally:
        await engine.aclose()
    healthy = engine_with(tmp_path / "healthy", "spare", ["offline"])
    try:
        _, metadata = await reply_of(healthy, "hi")
    finally:
        await healthy.aclose()
    assert "fallback" not in metadata and "failed_models" not in metadata


def test_the_mark_is_in_the_api_message_listing(tmp_path: Path) -> None:
    settings = gateway_settings(
        tmp_path, agents={"defaults": {"model": "scripted", "fallback_models": ["offline"]}}
    )
    with running_gateway(settings, {"scripted": ScriptedModel(fail=DOWN)}) as gw:
        base = f"{gw.url}/v1/sessions/fb"
        answer = httpx.post(
            f"{base}/messages",
            json={"content": "hello?", "stream": False},
            headers=gw.auth("alice"),
            timeout=10,
        ).json()
        assert answer["reply"].startswith("The model is unavailable")
        listed = httpx.get(
            f"{base}/segments/{answer['session_id']}/messages",
            headers=gw.auth("alice"),
            timeout=10,
        ).json()["messages"]
    assert [m["role"] for m in listed] == ["user", "assistant"]
    assert listed[1]["metadata"]["fallback"] is True
    assert listed[1]["metadata"]["failed_models"] == ["scripted"]
    assert "fallback" not in listed[0]["metadata"]


# -- the stand-in's answers are kept, never a model's input ---------------------------------


def said_by_stand_in(messages: list[dict[str, Any]]) -> list[str]:
    return [
        str(m["content"])
        for m in messages
        if m["role"] == "assistant" and STAND_IN_SIGNATURE in str(m["content"])
    ]


@pytest.mark.parametrize("first", ["offline", "down"])
async def test_a_stand_in_answer_is_kept_marked_and_no_later_model_reads_it(
    tmp_path: Path, first: str
) -> None:
    """No model configured (`offline` answers "No model is configured…"), or the model
    down (it stands in: "The model is unavailable…"): the answer is stored with
    `offline: true` and estimated usage; the next model's context holds the user message
    it answered, never the answer."""
    engine = engine_with(tmp_path, first, ["offline"], listed=["spare"])
    spare = engine.turns.models["spare"]
    assert isinstance(spare, ScriptedModel)
    try:
        events = await collect(engine, "remember the number 7")
        content, metadata = await reply_of(engine, "and the number 8")
        assert STAND_IN_SIGNATURE in content
        assert metadata["offline"] is True and metadata["model"] == "offline"
        assert metadata["usage"]["estimated"] is True
        assert events[-1].usage["estimated"] is True
        # The preview of the next turn (GET …/context) already leaves them out.
        _, preview = await engine.turns.preview_context("chat:alice", ALICE)
        assert [m.role for m in preview.messages] == ["user", "user"]
        # A real model answers from now on (a key override picks it).
        await engine.sessions.set_overrides("chat:alice", ALICE, {"reply_model": "spare"})
        content, metadata = await reply_of(engine, "which numbers did I say?")
        assert content == "reply to: which numbers did I say?"
        assert "offline" not in metadata and "estimated" not in metadata["usage"]
        (sent,) = spare.requests
        assert said_by_stand_in(sent) == []
        assert [(m["role"], m["content"]) for m in sent] == [
            ("user", "remember the number 7"),
            ("user", "and the number 8"),
            ("user", "which numbers did I say?"),
        ]
        # Nothing changed in the store: every answer is still there, shown as it was.
        segment = await engine.store.latest_segment(REF)
        stored = await engine.store.list_messages(segment.session_id)
        assert [m.role.value for m in stored] == ["user", "assistant"] * 3
    finally:
        await engine.aclose()


async def test_a_stand_in_answer_is_never_recalled(tmp_path: Path) -> None:
    engine = engine_with(tmp_path, "offline", [])
    try:
        await collect(engine, "the otters are configured for the river")
        await collect(engine, "/new")
        fragments = await engine.sessions.recall(
            "chat:alice", ALICE, "otters configured model", "what was said about otters"
        )
    finally:
        await engine.aclose()
    # The user's words are found; the stand-in's answer (which quotes them) is not.
    assert [(f.role.value, f.content) for f in fragments] == [
        ("user", "the otters are configured for the river")
    ]


def test_the_openai_route_keeps_stand_in_answers_from_the_model(tmp_path: Path) -> None:
    """The reconciled list ([question, stand-in's answer, next question]) reaches the
    model without the answer, whether the gateway stored it (marked) or the client hands
    it over itself (a key the gateway never saw: known by its text); a stateless agent's
    one-shot list loses it too."""
    real = ScriptedModel("real", fail=DOWN)
    settings = gateway_settings(
        tmp_path,
        agents={
            "defaults": {"model": "real", "fallback_models": ["offline"]},
            "main": {},
            "titles": {"history": "none", "users": ["alice"]},
        },
    )
    with running_gateway(settings, {"real": real}) as gw:
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.keys["alice"], max_retries=0)
        asked: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello there"}]
        first = client.chat.completions.create(model="main", messages=asked)
        answer = first.choices[0].message.content or ""
        assert STAND_IN_SIGNATURE in answer
        assert first.usage is not None and (first.usage.model_extra or {})["estimated"] is True

        real.fail = None
        listed: list[ChatCompletionMessageParam] = [
            *asked,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "are you back?"},
        ]
        second = client.chat.completions.create(model="main", messages=listed)
        assert second.choices[0].message.content == "reply to: are you back?"
        assert second.usage is not None and "estimated" not in (second.usage.model_extra or {})
        assert said_by_stand_in(real.requests[-1]) == []
        assert [m["content"] for m in real.requests[-1]] == ["hello there", "are you back?"]

        # A conversation the gateway never stored, handed over whole on a new key.
        fresh = client.chat.completions.create(
            model="main", messages=listed, extra_headers={"X-Session-Key": "handed-over"}
        )
        assert fresh.choices[0].message.content == "reply to: are you back?"
        assert said_by_stand_in(real.requests[-1]) == []
        kept = httpx.get(
            f"{gw.url}/v1/sessions/handed-over", headers=gw.auth("alice"), timeout=10
        ).json()
        session_id = kept["latest"]["session_id"]
        stored = httpx.get(
            f"{gw.url}/v1/sessions/handed-over/segments/{session_id}/messages",
            headers=gw.auth("alice"),
            timeout=10,
        ).json()["messages"]
        assert [m["metadata"].get("offline") for m in stored] == [None, True, None, None]

        one_shot = client.chat.completions.create(model="titles", messages=listed)
        assert one_shot.choices[0].message.content == "reply to: are you back?"
        assert said_by_stand_in(real.requests[-1]) == []
        client.close()
