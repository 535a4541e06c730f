from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller
from tests.support.helpers import ScriptedModel
from tests.support.pg import fresh_database

# The fake model servers the tests start answer every request from a script: a gateway
# asking them for their context window (service/window_discovery.py) would use up a
# reply. Only tests/test_window_discovery.py turns the discovery on.
os.environ.setdefault("SESSIONGATE_DISCOVER_WINDOWS", "0")

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ALICE = Caller("alice")
BACKENDS = ["sqlite", "postgres"]

# Modules whose tests that take `engine` or `database_url` run on both stores. Tests that
# open the SQLite file itself stay SQLite-only; their PostgreSQL twins are in
# tests/test_store_postgres.py.
_BOTH_BACKENDS = {"tests.test_lifecycle_cases", "tests.test_exchange", "tests.test_turns"}
_SQLITE_ONLY = {
    "test_history_segment_immutable",
    "test_broken_export_lines_name_the_line_and_write_nothing",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the PostgreSQL server `postgres`, so that
    `pytest -m "not postgres"` runs the rest on a machine without one."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        fixtures = getattr(item, "fixturenames", ())
        if "postgres" in params.values() or (
            isinstance(item, pytest.Function)
            and item.module is not None
            and item.module.__name__ == "tests.test_store_postgres"
            and any(f in fixtures for f in ("url", "store", "two_lock_pools"))
        ):
            item.add_marker(pytest.mark.postgres)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if (
        "database_url" in metafunc.fixturenames
        and metafunc.module.__name__ in _BOTH_BACKENDS
        and metafunc.function.__name__ not in _SQLITE_ONLY
    ):
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """Which store a test runs on: SQLite unless the test is parametrised over both."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
async def database_url(backend: str) -> AsyncIterator[str]:
    """`database.url` for the backend: empty (SQLite under data_dir) or a fresh PostgreSQL
    database of the test's own."""
    if backend == "sqlite":
        yield ""
        return
    async with fresh_database() as url:
        yield url


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def scripted() -> ScriptedModel:
    return ScriptedModel()


def make_settings(
    tmp_path: Path,
    agents: dict[str, object] | None = None,
    *,
    database_url: str = "",
    **lifecycle: object,
) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC", **lifecycle},
        agents=agents or {"defaults": {"model": "scripted"}},
        models={},
    )


@pytest.fixture
async def engine(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel, database_url: str
) -> AsyncIterator[Engine]:
    built = build_engine(
        make_settings(tmp_path, database_url=database_url),
        clock=clock,
        models={"scripted": scripted},
    )
    await built.start()
    yield built
    await built.aclose()
