"""A fallback to `offline` says the model is unavailable (not that none is configured),
and a reply a fallback model wrote is marked so, visibly in the API's message listing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from sessiongate.config import Settings
from sessiongate.core.keys import KeyRef
from sessiongate.errors import ModelError
from sessiongate.service.engine import Engine, build_engine
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel, collect

DOWN = ModelError("the model server answered 503", code="model_unavailable")


def engine_with(tmp_path: Path, model: str, fallbacks: list[str]) -> Engine:
    return build_engine(
        Settings(
            data_dir=tmp_path,
            lifecycle={"timezone": "UTC"},
            agents={"defaults": {"model": model, "fallback_models": fallbacks}},
        ),
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
