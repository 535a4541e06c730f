"""Post-reply task extraction (DESIGN.md §9, seed 000): the control model's answer read
strictly, tasks added to the user's list with the turn as source (open titles not
repeated), only for users who are not primary unless `extract_tasks_for = "all"`, a
`tasks.extracted` hook event, and failures (malformed answers, a failing or hanging model)
that add nothing and never touch the reply."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import Settings, load_settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.task_extraction import (
    MAX_EXTRACTED_TASKS,
    ExtractedTask,
    ExtractionRefused,
    extraction_messages,
    parse_extraction,
)
from sessiongate.errors import ConfigError, ModelError
from sessiongate.models.base import WireMessage
from sessiongate.service import task_extraction
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller
from sessiongate.store.tasks import Task
from tests.conftest import START
from tests.support.helpers import ScriptedModel, collect
from tests.support.hook_receiver import Receiver

ALICE = Caller("alice")
PRIME = Caller("prime", primary=True)
SECRET = "hook-secret-0123456789abcdef"
TWO_TASKS = '{"tasks": [{"title": "Call the dentist", "due": "2026-03-05"}, {"title": "Buy milk"}]}'


def answering(text: str) -> Callable[[Sequence[WireMessage]], str]:
    return lambda messages: text


@asynccontextmanager
async def extracting_engine(
    tmp_path: Path,
    control: ScriptedModel,
    *,
    agent: dict[str, Any] | None = None,
    hooks: list[dict[str, Any]] | None = None,
    models: dict[str, ScriptedModel] | None = None,
) -> AsyncIterator[Engine]:
    settings = Settings(
        data_dir=tmp_path,
        lifecycle={"timezone": "UTC"},
        agents={
            "defaults": {"model": "scripted"},
            "main": {"control_model": "control", "extract_tasks": True, **(agent or {})},
        },
        hooks=hooks or [],
    )
    engine = build_engine(
        settings,
        clock=ManualClock(START),
        models={"scripted": ScriptedModel(), "control": control, **(models or {})},
    )
    await engine.start()
    if engine.hooks is not None:
        await engine.hooks.start()
    try:
        yield engine
    finally:
        await engine.aclose()


async def turn(engine: Engine, text: str, caller: Caller = ALICE) -> list[Any]:
    events = await collect(engine, text, key=f"chat:{caller.name}", caller=caller)
    await engine.turns.drain()  # what runs after the turn, too
    return events


async def tasks_of(engine: Engine, owner: str = "alice") -> list[Task]:
    assert engine.tasks is not None
    return await engine.tasks.list_tasks(owner)


# -- the answer, strictly -------------------------------------------------------------------


def test_a_well_formed_answer_is_read() -> None:
    assert parse_extraction(TWO_TASKS) == [
        ExtractedTask("Call the dentist", date(2026, 3, 5)),
        ExtractedTask("Buy milk"),
    ]
    assert parse_extraction('  {"tasks": []}\n') == []
    assert parse_extraction('{"tasks": [{"title": "x", "due": null}]}') == [ExtractedTask("x")]
    fenced = "```json\n" + TWO_TASKS + "\n```"
    assert len(parse_extraction(fenced)) == 2
    repeated = '{"tasks": [{"title": "Buy milk"}, {"title": "buy MILK"}]}'
    assert parse_extraction(repeated) == [ExtractedTask("Buy milk")]


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "Sure! Here are your tasks: Buy milk",
        'Here you go: {"tasks": []}',
        '{"tasks": []} and more',
        '{"tasks": [], "note": "none"}',
        '{"task": []}',
        '[{"title": "Buy milk"}]',
        '{"tasks": {"title": "Buy milk"}}',
        '{"tasks": ["Buy milk"]}',
        '{"tasks": [{"name": "Buy milk"}]}',
        '{"tasks": [{"title": "Buy milk", "priority": 1}]}',
        '{"tasks": [{"title": ""}]}',
        '{"tasks": [{"title": "line one\\nline two"}]}',
        '{"tasks": [{"title": 7}]}',
        '{"tasks": [{"title": "Buy milk", "due": "tomorrow"}]}',
        '{"tasks": [{"title": "Buy milk", "due": "2026-02-30"}]}',
        '{"tasks": [{"title": "Buy milk", "due": NaN}]}',
        '{"tasks": [' + ",".join(f'{{"title": "t{n}"}}' for n in range(11)) + "]}",
        '```\n{"tasks": []}\n``` trailing',
        '{"tasks": [' * 5000,
        "x" * 30_000,
    ],
)
def test_anything_else_is_refused_whole(answer: str) -> None:
    with pytest.raises(ExtractionRefused) as refused:
        parse_extraction(answer)
    assert "Buy milk" not in refused.value.reason  # the reason never repeats the answer
    assert MAX_EXTRACTED_TASKS == 10


def test_the_model_reads_the_exchange_as_data_with_todays_date() -> None:
    system, user = extraction_messages("remind me", "x" * 20_000, date(2026, 3, 2))
    assert system["role"] == "system" and "today is 2026-03-02" in system["content"]
    assert user["content"].startswith("<user>\nremind me\n</user>\n<assistant>\n")
    assert len(user["content"]) < 9000 and "[… cut]" in user["content"]


# -- through the engine ---------------------------------------------------------------------


async def test_tasks_are_extracted_after_the_reply_with_the_turn_as_source(
    tmp_path: Path,
) -> None:
    control = ScriptedModel("control", answering(TWO_TASKS))
    async with extracting_engine(tmp_path, control) as engine:
        events = await turn(engine, "I need to call the dentist on Thursday and buy milk")
        assert events[-1].type == "end"
        turn_id = events[0].turn_id
        found = await tasks_of(engine)
        assert [(t.title, t.due, t.status) for t in found] == [
            ("Call the dentist", date(2026, 3, 5), "open"),
            ("Buy milk", None, "open"),
        ]
        assert {(t.source_key, t.source_turn_id) for t in found} == {("chat:alice", turn_id)}
        (request,) = control.requests
        assert "call the dentist on Thursday" in request[1]["content"]
        assert "reply to: I need to call" in request[1]["content"]
        assert "today is 2026-03-02" in request[0]["content"]  # the engine's clock

        # The same tasks again: open titles are not repeated (ignoring case); a task
        # that was done may come back.
        assert engine.tasks is not None
        await engine.tasks.complete("alice", found[1].task_id)
        control._reply = answering(
            '{"tasks": [{"title": "CALL THE DENTIST"}, {"title": "Buy milk"}]}'
        )
        await turn(engine, "again")
        titles = [(t.title, t.status) for t in await tasks_of(engine)]
        assert titles == [
            ("Call the dentist", "open"),
            ("Buy milk", "done"),
            ("Buy milk", "open"),
        ]


async def test_primary_users_are_left_alone_unless_asked(tmp_path: Path) -> None:
    control = ScriptedModel("control", answering(TWO_TASKS))
    async with extracting_engine(tmp_path, control) as engine:
        await turn(engine, "I must buy milk", PRIME)
        assert await tasks_of(engine, "prime") == []
        assert control.requests == []  # not even asked
    control = ScriptedModel("control", answering(TWO_TASKS))
    async with extracting_engine(
        tmp_path / "all", control, agent={"extract_tasks_for": "all"}
    ) as engine:
        await turn(engine, "I must buy milk", PRIME)
        assert len(await tasks_of(engine, "prime")) == 2


async def test_a_reply_of_the_offline_stand_in_is_not_read(tmp_path: Path) -> None:
    """The stand-in only says the model is unavailable: nothing in the exchange was
    answered, so the control model is not even asked."""
    control = ScriptedModel("control", answering(TWO_TASKS))
    down = ScriptedModel("down", fail=ModelError("down", code="model_unavailable"))
    async with extracting_engine(
        tmp_path,
        control,
        agent={"model": "down", "fallback_models": ["offline"]},
        models={"down": down},
    ) as engine:
        events = await turn(engine, "I must buy milk")
        assert events[-1].type == "end"
        assert await tasks_of(engine) == []
        assert control.requests == []


async def test_a_malformed_answer_adds_nothing_and_leaves_the_reply(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    control = ScriptedModel("control", answering("Sure! You should buy milk."))
    async with extracting_engine(tmp_path, control) as engine:
        with caplog.at_level(logging.WARNING, logger="sessiongate.service.task_extraction"):
            events = await turn(engine, "buy milk")
        assert events[-1].type == "end"
        assert "".join(e.content for e in events if e.type == "token") == "reply to: buy milk"
        assert await tasks_of(engine) == []
        assert "answer refused: the answer is not JSON" in caplog.text
        assert "buy milk" not in caplog.text.lower()  # never the exchange in the log


async def test_a_failing_or_hanging_model_adds_nothing_and_the_next_one_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_extraction, "EXTRACTION_TIMEOUT", timedelta(seconds=1))
    failing = ScriptedModel("control", fail=ModelError("down", code="model_unavailable"))
    async with extracting_engine(tmp_path, failing) as engine:
        events = await turn(engine, "buy milk")
        assert events[-1].type == "end" and await tasks_of(engine) == []

    gate = asyncio.Event()  # never set: the control model hangs after its first word
    hanging = ScriptedModel("control", answering(TWO_TASKS), gate=gate)
    backup = ScriptedModel("backup", answering('{"tasks": [{"title": "Buy milk"}]}'))
    async with extracting_engine(
        tmp_path / "two",
        hanging,
        agent={"control_fallback_models": ["backup"]},
        models={"backup": backup},
    ) as engine:
        started = time.monotonic()
        events = await collect(engine, "buy milk", key="chat:alice", caller=ALICE)
        assert time.monotonic() - started < 0.5  # the turn never waits for extraction
        assert events[-1].type == "end"
        await engine.turns.drain()
        assert [t.title for t in await tasks_of(engine)] == ["Buy milk"]
        assert len(backup.requests) == 1


async def test_extracted_tasks_are_announced_to_hooks(tmp_path: Path) -> None:
    receiver = Receiver(SECRET.encode()).start()
    try:
        hooks: list[dict[str, Any]] = [
            {"url": receiver.url, "secret": SECRET, "name": "ids", "events": ["tasks.extracted"]},
            {
                "url": receiver.url + "?t",
                "secret": SECRET,
                "name": "titles",
                "events": ["tasks.extracted"],
                "include_text": True,
            },
        ]
        control = ScriptedModel("control", answering(TWO_TASKS))
        async with extracting_engine(tmp_path, control, hooks=hooks) as engine:
            events = await turn(engine, "dentist and milk")
            deadline = time.monotonic() + 5
            while len(receiver.received) < 2:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            made = await tasks_of(engine)
            control._reply = answering('{"tasks": [{"title": "buy milk"}]}')
            await turn(engine, "milk again")  # nothing new: no event
            await asyncio.sleep(0.2)
    finally:
        receiver.stop()
    assert len(receiver.received) == 2 and all(r.signature_ok for r in receiver.received)
    by_hook = {("titles" if "?t" in r.path else "ids"): r.body["data"] for r in receiver.received}
    expected = {
        "owner": "alice",
        "key": "chat:alice",
        "agent": "main",
        "turn_id": events[0].turn_id,
        "session_id": events[0].session_id,
    }
    assert by_hook["ids"] == {
        **expected,
        "tasks": [
            {"id": made[0].task_id, "due": "2026-03-05"},
            {"id": made[1].task_id, "due": None},
        ],
    }
    assert by_hook["titles"]["tasks"] == [
        {"id": made[0].task_id, "title": "Call the dentist", "due": "2026-03-05"},
        {"id": made[1].task_id, "title": "Buy milk", "due": None},
    ]
    assert "Buy milk" not in json.dumps(by_hook["ids"])


def test_extraction_needs_a_model(tmp_path: Path) -> None:
    config = tmp_path / "sessiongate.toml"
    config.write_text("[agents.main]\nextract_tasks = true\n")
    with pytest.raises(ConfigError, match="extract_tasks needs a control_model"):
        build_engine(load_settings(config).model_copy(update={"data_dir": tmp_path}))
    config.write_text('[agents.main]\nextract_tasks = true\nextract_tasks_model = "nope"\n')
    with pytest.raises(ConfigError, match="'nope' is not defined"):
        load_settings(config)
    config.write_text('[agents.main]\nextract_tasks = true\nextract_tasks_for = "some"\n')
    with pytest.raises(ConfigError, match="extract_tasks_for"):
        load_settings(config)
