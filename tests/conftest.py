from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller
from tests.helpers import ScriptedModel

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ALICE = Caller("alice")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def scripted() -> ScriptedModel:
    return ScriptedModel()


def make_settings(
    tmp_path: Path, agents: dict[str, object] | None = None, **lifecycle: object
) -> Settings:
    return Settings(
        data_dir=tmp_path,
        lifecycle={"timezone": "UTC", **lifecycle},
        agents=agents or {"defaults": {"model": "scripted"}},
        models={},
    )


@pytest.fixture
async def engine(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel
) -> AsyncIterator[Engine]:
    built = build_engine(make_settings(tmp_path), clock=clock, models={"scripted": scripted})
    yield built
    await built.aclose()
