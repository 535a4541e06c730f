"""Per-user caps: `[notes] max_notes_per_user` and `[tasks] max_tasks_per_user`, on SQLite
and PostgreSQL. At the cap a create is refused with 409 (`note_limit_reached`,
`task_limit_reached`) and writes nothing; 50 creates racing at the cap from two gateway
engines sharing one database keep exactly the cap; other users are not affected."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.config import Settings
from sessiongate.errors import SessionGateError
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.notes import NoteService
from sessiongate.service.tasks import TaskService
from tests.conftest import BACKENDS
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

CAP = 10
RACERS = 50


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # conftest.py runs only the modules it lists on both stores; this one always does.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


def capped_settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC"},
        agents={"defaults": {"model": "scripted"}},
        notes={"max_notes_per_user": CAP},
        tasks={"max_tasks_per_user": CAP},
    )


@pytest.fixture
async def engines(tmp_path: Path, database_url: str) -> AsyncIterator[list[Engine]]:
    """Two engines on one database: two gateway processes, as far as the store can tell
    (SQLite: two connections to one file; PostgreSQL: two pools)."""
    built = []
    try:
        for _ in range(2):
            engine = build_engine(
                capped_settings(tmp_path, database_url), models={"scripted": ScriptedModel()}
            )
            await engine.start()
            built.append(engine)
        yield built
    finally:
        for engine in built:
            await engine.aclose()


def tasks_of(engine: Engine) -> TaskService:
    assert engine.tasks is not None
    return engine.tasks


def notes_of(engine: Engine) -> NoteService:
    assert engine.notes is not None
    return engine.notes


async def outcomes(calls: list[Awaitable[Any]]) -> tuple[int, list[tuple[str, int]]]:
    """How many calls succeeded, and the (code, status) of each refusal."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    refused = []
    for result in results:
        if isinstance(result, SessionGateError):
            refused.append((result.code, result.status))
        elif isinstance(result, BaseException):
            raise result
    return len(results) - len(refused), refused


async def test_tasks_stop_at_the_cap_and_another_user_is_not_affected(
    engines: list[Engine],
) -> None:
    tasks = tasks_of(engines[0])
    for n in range(CAP):
        await tasks.add("alice", f"task {n}")
    await tasks.complete("alice", (await tasks.list_tasks("alice"))[0].task_id)
    with pytest.raises(SessionGateError) as refused:
        await tasks.add("alice", "one too many")  # done tasks count too
    assert (refused.value.code, refused.value.status) == ("task_limit_reached", 409)
    assert str(CAP) in refused.value.message and "max_tasks_per_user" in refused.value.message
    assert len(await tasks.list_tasks("alice", limit=100)) == CAP  # nothing was written
    await tasks.add("bob", "bob's first")


async def test_notes_stop_at_the_cap_but_a_reimport_replacing_one_still_lands(
    engines: list[Engine],
) -> None:
    notes = notes_of(engines[0])
    for n in range(CAP - 1):
        await notes.add("alice", f"note {n}")
    await notes.import_note("alice", "first version", title="doc", source="doc.md")
    with pytest.raises(SessionGateError) as refused:
        await notes.add("alice", "one too many")
    assert (refused.value.code, refused.value.status) == ("note_limit_reached", 409)
    assert "max_notes_per_user" in refused.value.message
    # An import of a file seen before replaces its note: the count stays at the cap.
    _, replaced = await notes.import_note("alice", "second version", title="doc", source="doc.md")
    assert replaced == 1
    listed = await notes.list_notes("alice", limit=100)
    assert len(listed) == CAP
    assert "second version" in [n.content for n in listed]
    # A refused import of a new file leaves everything as it was.
    with pytest.raises(SessionGateError):
        await notes.import_note("alice", "new file", title="other", source="other.md")
    assert len(await notes.list_notes("alice", limit=100)) == CAP
    await notes.add("bob", "bob's first")


async def test_fifty_concurrent_creates_at_the_cap_keep_exactly_the_cap(
    engines: list[Engine],
) -> None:
    tasks = [tasks_of(e) for e in engines]
    notes = [notes_of(e) for e in engines]
    for n in range(CAP - 3):  # three places left
        await tasks[0].add("alice", f"before {n}")
        await notes[0].add("alice", f"before {n}")

    made, refused = await outcomes([tasks[i % 2].add("alice", f"racer {i}") for i in range(RACERS)])
    assert made == 3
    assert refused == [("task_limit_reached", 409)] * (RACERS - 3)
    assert len(await tasks[1].list_tasks("alice", limit=100)) == CAP

    made, refused = await outcomes([notes[i % 2].add("alice", f"racer {i}") for i in range(RACERS)])
    assert made == 3
    assert refused == [("note_limit_reached", 409)] * (RACERS - 3)
    assert len(await notes[1].list_notes("alice", limit=100)) == CAP


def test_the_api_answers_409_with_the_code_and_a_clear_message(tmp_path: Path) -> None:
    settings = gateway_settings(
        tmp_path, notes={"max_notes_per_user": 1}, tasks={"max_tasks_per_user": 1}
    )
    with running_gateway(settings, {"scripted": ScriptedModel()}) as gw:
        with httpx.Client(base_url=gw.url, headers=gw.auth("alice"), timeout=10) as http:
            assert http.post("/v1/tasks", json={"title": "one"}).status_code == 201
            assert http.post("/v1/notes", json={"content": "one"}).status_code == 201
            for path, body, code in (
                ("/v1/tasks", {"title": "two"}, "task_limit_reached"),
                ("/v1/notes", {"content": "two"}, "note_limit_reached"),
            ):
                answer = http.post(path, json=body)
                assert answer.status_code == 409, answer.text
                error = answer.json()["error"]
                assert error["code"] == code
                assert "1" in error["message"] and "per_user" in error["message"]
            assert len(http.get("/v1/tasks").json()["tasks"]) == 1
        bob = httpx.post(f"{gw.url}/v1/tasks", json={"title": "b"}, headers=gw.auth("bob"))
        assert bob.status_code == 201


def test_the_caps_are_validated_at_start_up() -> None:
    with pytest.raises(ValueError, match="max_notes_per_user"):
        Settings(notes={"max_notes_per_user": 0})
    with pytest.raises(ValueError, match="max_tasks_per_user"):
        Settings(tasks={"max_tasks_per_user": 0})
