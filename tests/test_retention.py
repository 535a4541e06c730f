"""Retention (`[retention]`, `sessiongate gc`, the gateway's schedule): idle keys are
archived or erased with everything derived from them, on both stores, with an injected
clock; runs never overlap; a key used again in the meantime is left alone."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from sessiongate.cli.main import app
from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.retention import (
    RETENTION_DECIDER,
    RetentionAction,
    RetentionPolicy,
    Skip,
    decide,
)
from sessiongate.core.rotation import ActionKind, LifecycleMode, LifecyclePolicy
from sessiongate.core.segments import RotationReason, Segment, SegmentStatus
from sessiongate.errors import ConfigError
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller
from tests.support.gateway import gateway_settings, run_sync, running_gateway
from tests.support.helpers import ScriptedModel, collect

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
ALICE = Caller("alice")
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16

both_stores = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def retention_settings(
    tmp_path: Path, database_url: str = "", *, action: str = "erase", mode: str = "segmented"
) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC", "mode": mode, "idle_window": "off", "day_boundary": "off"},
        agents={"defaults": {"model": "scripted"}},
        retention={"idle_after": "30d", "action": action, "interval": "1h"},
    )


@pytest.fixture
async def engines(
    tmp_path: Path, database_url: str
) -> AsyncIterator[tuple[ManualClock, Engine, Engine, ScriptedModel]]:
    """An erasing and an archiving engine on one database, sharing one clock."""
    clock = ManualClock(START)
    scripted = ScriptedModel()
    erase = build_engine(
        retention_settings(tmp_path, database_url), clock=clock, models={"scripted": scripted}
    )
    archive = build_engine(
        retention_settings(tmp_path, database_url, action="archive"),
        clock=clock,
        models={"scripted": scripted},
    )
    await erase.start()
    await archive.start()
    yield clock, erase, archive, scripted
    await archive.aclose()
    await erase.aclose()


async def talk(engine: Engine, key: str, *texts: str) -> None:
    for text in texts:
        events = await collect(engine, text, key=key)
        assert events[-1].type == "end", events[-1]


async def message_count(engine: Engine) -> int:
    store: Any = engine.store
    if hasattr(store, "connection"):
        return int(store.connection.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    return int(await store.pool.fetchval("SELECT COUNT(*) FROM messages"))


async def search_rows(engine: Engine, word: str) -> int:
    """Rows of the recall index that hold `word` (FTS5 on SQLite, tsvector on PostgreSQL)."""
    store: Any = engine.store
    if hasattr(store, "connection"):
        rows = store.connection.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (word,)
        ).fetchall()
        return len(rows)
    return int(
        await store.pool.fetchval(
            "SELECT COUNT(*) FROM message_search WHERE document @@ to_tsquery('simple', $1)", word
        )
    )


# -- the pure rule ------------------------------------------------------------------------


def segment(
    *, last: datetime, messages: int = 2, cleared: int = 0, continues: tuple[str, ...] = ()
) -> Segment:
    return Segment(
        session_id="s1",
        key=KeyRef("alice", "k"),
        status=SegmentStatus.LATEST,
        created_at=START,
        archived_at=None,
        parent_ids=(),
        continues=continues,
        cleared_after_seq=cleared,
        context_started_at=START,
        message_count=messages,
        last_activity_at=last,
        created_reason=None,
    )


def test_the_rule_decides_by_the_latest_segment() -> None:
    now = START + timedelta(days=40)
    erase = RetentionPolicy(timedelta(days=30), RetentionAction.ERASE)
    archive = RetentionPolicy(timedelta(days=30), RetentionAction.ARCHIVE)
    lifecycle = LifecyclePolicy()
    legacy = LifecyclePolicy(mode=LifecycleMode.LEGACY)
    old, recent = segment(last=START), segment(last=now - timedelta(days=29))
    assert decide(recent, now, erase, lifecycle) is Skip.ACTIVE
    assert decide(segment(last=now - timedelta(days=30)), now, erase, lifecycle) is Skip.ACTIVE
    assert decide(old, now, erase, lifecycle) is RetentionAction.ERASE
    assert decide(segment(last=START, messages=0), now, erase, lifecycle) is RetentionAction.ERASE
    rotate = decide(old, now, archive, lifecycle)
    assert not isinstance(rotate, RetentionAction | Skip)
    assert rotate.kind is ActionKind.ROTATE and rotate.reason is RotationReason.IDLE
    assert rotate.deciding_model == RETENTION_DECIDER
    clear = decide(old, now, archive, legacy)
    assert not isinstance(clear, RetentionAction | Skip) and clear.kind is ActionKind.CLEAR_IN_PLACE
    assert decide(segment(last=START, messages=0), now, archive, lifecycle) is Skip.EMPTY
    assert decide(segment(last=START, messages=3, cleared=3), now, archive, lifecycle) is Skip.EMPTY
    # A revert continuation with no messages of its own still carries a context.
    continued = segment(last=START, messages=0, continues=("a", "b"))
    assert not isinstance(decide(continued, now, archive, lifecycle), Skip)


def test_config_refuses_a_short_idle_after_and_defaults_to_off(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path).retention.idle_after is None
    with pytest.raises(ValueError, match="at least 1h"):
        Settings(data_dir=tmp_path, retention={"idle_after": "30m"})
    off = Settings(data_dir=tmp_path, retention={"idle_after": "off", "action": "erase"})
    assert off.retention.idle_after is None
    with pytest.raises(ValueError, match="action"):
        Settings(data_dir=tmp_path, retention={"idle_after": "30d", "action": "delete"})


async def test_gc_with_retention_off_says_so(tmp_path: Path) -> None:
    engine = build_engine(
        Settings(data_dir=tmp_path, agents={"defaults": {"model": "scripted"}}),
        models={"scripted": ScriptedModel()},
    )
    try:
        assert engine.retention is not None
        with pytest.raises(ConfigError, match="retention is off"):
            await engine.retention.run()
        engine.retention.start_schedule()  # a no-op when off
        await engine.retention.stop_schedule()
    finally:
        await engine.aclose()


# -- both stores ------------------------------------------------------------------------


@both_stores
async def test_erase_removes_everything_derived_and_only_idle_keys(
    engines: tuple[ManualClock, Engine, Engine, ScriptedModel],
) -> None:
    clock, engine, _, _ = engines
    await talk(engine, "old", "the zanzibar plan", "/new", "quokka sightings")
    assert engine.artifacts is not None and engine.tasks is not None
    artifact = await engine.artifacts.save("alice", PNG, "image/png", key="old")
    kept_artifact = await engine.artifacts.save("alice", PNG, "image/png", key="fresh")
    task = await engine.tasks.add("alice", "water the plants", source_key="old")
    file = engine.artifacts.files.root / artifact.file_name
    assert file.exists() and await search_rows(engine, "zanzibar") == 2  # asked, answered
    clock.advance(timedelta(days=10))
    await talk(engine, "fresh", "still here")
    clock.advance(timedelta(days=25))  # "old" idle 35 days, "fresh" 25 days

    assert engine.retention is not None
    dry = await engine.retention.run(dry_run=True)
    assert [(i.key, i.outcome) for i in dry.items] == [("old", "would erase")]
    assert await engine.store.get_key(KeyRef("alice", "old")) is not None

    report = await engine.retention.run()
    assert [(i.owner, i.key, i.outcome) for i in report.items] == [("alice", "old", "erased")]
    assert report.ran and not report.more
    assert await engine.store.get_key(KeyRef("alice", "old")) is None
    assert await search_rows(engine, "zanzibar") == 0 and await search_rows(engine, "quokka") == 0
    assert await message_count(engine) == 2  # the fresh key's turn
    assert not file.exists()
    with pytest.raises(Exception, match="no artifact"):
        await engine.artifacts.describe("alice", artifact.artifact_id)
    assert (await engine.artifacts.describe("alice", kept_artifact.artifact_id)).key == "fresh"
    # Tasks are the user's, not the key's: they stay (docs/operations.md).
    assert [t.task_id for t in await engine.tasks.list_tasks("alice")] == [task.task_id]
    # Nothing left to do: a second run finds nothing.
    assert (await engine.retention.run()).items == []


@both_stores
async def test_archive_keeps_the_history_and_the_next_message_starts_fresh(
    engines: tuple[ManualClock, Engine, Engine, ScriptedModel],
) -> None:
    clock, _, engine, scripted = engines
    await talk(engine, "old", "the zanzibar plan", "more about it")
    before = await engine.store.latest_segment(KeyRef("alice", "old"))
    clock.advance(timedelta(days=31))
    assert engine.retention is not None
    report = await engine.retention.run()
    assert [(i.key, i.outcome) for i in report.items] == [("old", "archived")]

    view = await engine.sessions.show("old", ALICE)
    assert [s.status.value for s in view.segments] == ["archived", "latest"]
    assert view.segments[0].session_id == before.session_id
    assert view.segments[0].message_count == 4 and view.latest.message_count == 0
    (rotation,) = view.rotations
    assert rotation.reason is RotationReason.IDLE and rotation.deciding_model == "retention"
    fragments = await engine.sessions.recall("old", ALICE, "zanzibar", "what was the plan")
    assert {f.session_id for f in fragments} == {before.session_id}
    # Idempotent: the key now holds an empty latest segment and is not touched again.
    clock.advance(timedelta(days=31))
    assert (await engine.retention.run()).items == []
    assert len((await engine.sessions.show("old", ALICE)).segments) == 2

    await talk(engine, "old", "hello again")
    sent = scripted.requests[-1]
    assert [m["content"] for m in sent if m["role"] != "system"] == ["hello again"]


@both_stores
async def test_a_key_used_again_after_it_was_found_idle_is_left_alone(
    engines: tuple[ManualClock, Engine, Engine, ScriptedModel],
) -> None:
    clock, engine, _, _ = engines
    await talk(engine, "old", "first")
    clock.advance(timedelta(days=31))
    service = engine.retention
    assert service is not None
    found = service.store.idle_keys

    async def then_a_turn(cutoff: datetime, *, with_context: bool, limit: int) -> list[Any]:
        idle = await found(cutoff, with_context=with_context, limit=limit)
        await talk(engine, "old", "back again")  # between the query and the key's lock
        return idle

    service.store.idle_keys = then_a_turn  # type: ignore[method-assign]
    report = await service.run()
    assert [(i.key, i.outcome) for i in report.items] == [("old", "skipped: active")]
    assert (await engine.store.latest_segment(KeyRef("alice", "old"))).message_count == 4


@both_stores
async def test_runs_never_overlap_across_engines(
    engines: tuple[ManualClock, Engine, Engine, ScriptedModel],
) -> None:
    clock, erase, archive, _ = engines
    await talk(erase, "old", "first")
    clock.advance(timedelta(days=31))
    assert erase.retention is not None and archive.retention is not None
    async with archive.retention.store.exclusive_run() as held:
        assert held
        blocked = await erase.retention.run()
        assert not blocked.ran and blocked.items == []
    assert await erase.store.get_key(KeyRef("alice", "old")) is not None
    # Two runs at once: one does the work; the other stands aside or (SQLite answers
    # inline, so the first may be over before the second starts) finds nothing left.
    first, second = await asyncio.gather(erase.retention.run(), erase.retention.run())
    assert [i.outcome for r in (first, second) for i in r.items] == ["erased"]


@both_stores
async def test_the_schedule_runs_at_start_and_stops_cleanly(
    engines: tuple[ManualClock, Engine, Engine, ScriptedModel],
) -> None:
    clock, engine, _, _ = engines
    await talk(engine, "old", "first")
    clock.advance(timedelta(days=31))
    service = engine.retention
    assert service is not None
    service.start_schedule()
    service.start_schedule()  # idempotent
    for _ in range(1000):  # up to 10 s
        if service.runs:
            break
        await asyncio.sleep(0.01)
    assert service.runs == 1
    assert await engine.store.get_key(KeyRef("alice", "old")) is None
    started = time.monotonic()
    await service.stop_schedule()  # wakes the hour-long wait
    assert time.monotonic() - started < 2


# -- the gateway and the command line (SQLite) ------------------------------------------


def aged_database(tmp_path: Path, days: int) -> None:
    """A database whose alice:old key was last used `days` ago (real time)."""
    clock = ManualClock(datetime.now(UTC) - timedelta(days=days))

    async def fill() -> None:
        engine = build_engine(
            retention_settings(tmp_path), clock=clock, models={"scripted": ScriptedModel()}
        )
        try:
            await talk(engine, "old", "long ago")
        finally:
            await engine.aclose()

    run_sync(fill())


def test_the_gateway_erases_idle_keys_on_its_schedule(tmp_path: Path) -> None:
    aged_database(tmp_path, 40)
    settings = gateway_settings(
        tmp_path, retention={"idle_after": "30d", "action": "erase", "interval": "1h"}
    )
    with running_gateway(settings, {"scripted": ScriptedModel()}) as gw:
        deadline = time.monotonic() + 10
        while True:
            listed = httpx.get(f"{gw.url}/v1/sessions", headers=gw.auth("alice")).json()
            if not listed["sessions"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert listed["sessions"] == []


def test_sessiongate_gc_dry_run_then_run(tmp_path: Path) -> None:
    aged_database(tmp_path, 40)
    config = tmp_path / "sg.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n[retention]\nidle_after = "30d"\naction = "erase"\n',
        encoding="utf-8",
    )
    env = {**os.environ, "COLUMNS": "80"}
    command = [sys.executable, "-m", "sessiongate.cli.main", "gc", "--config", str(config)]
    dry = subprocess.run(
        [*command, "--dry-run"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0].split("\t") == ["outcome", "owner", "key", "last activity"]
    assert lines[1].split("\t")[:3] == ["would erase", "alice", "old"]
    runner = CliRunner()
    done = runner.invoke(app, ["gc", "--config", str(config)])
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[1].split("\t")[:3] == ["erased", "alice", "old"]
    assert "1 erased" in done.stderr
    again = runner.invoke(app, ["gc", "--config", str(config)])
    assert again.exit_code == 0 and again.stdout == "" and "nothing to do" in again.stderr
