"""PostgreSQL for the tests: the server scripts/postgres.sh runs, and a fresh database per
test so tests never see each other's rows."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

ENV = "SESSIONGATE_TEST_POSTGRES_URL"
_PREFIX = "sg_test_"


def server_url() -> str:
    """The test server's URL. Missing means the PostgreSQL tests cannot run: fail, loudly."""
    url = os.environ.get(ENV, "")
    if not url:
        pytest.fail(
            f"{ENV} is not set. Start the test server with `bash scripts/postgres.sh` and"
            f" export the URL it prints as {ENV} (`bash scripts/test` does both).",
            pytrace=False,
        )
    return url


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """An empty database of its own (dropped afterwards, connections and all); yields its
    URL."""
    url = server_url()
    name = f"{_PREFIX}{uuid.uuid4().hex[:16]}"
    await _create(url, name)
    try:
        yield with_database(url, name)
    finally:
        await _drop(url, name)


@contextmanager
def fresh_database_sync() -> Iterator[str]:
    """`fresh_database` for a synchronous test or fixture (such as one serving
    `sessiongate serve` subprocesses): made and dropped outside any event loop."""
    url = server_url()
    name = f"{_PREFIX}{uuid.uuid4().hex[:16]}"
    asyncio.run(_create(url, name))
    try:
        yield with_database(url, name)
    finally:
        asyncio.run(_drop(url, name))


async def _create(url: str, name: str) -> None:
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()


async def _drop(url: str, name: str) -> None:
    """Drop the database, its connections too. An autovacuum worker that has just
    started on it belongs to a role the tests' role may not signal (FORCE then fails
    with InsufficientPrivilegeError): it ends within moments, so try again briefly."""
    admin = await asyncpg.connect(url)
    try:
        for attempt in range(50):
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                return
            except asyncpg.InsufficientPrivilegeError:
                if attempt == 49:
                    raise
                await asyncio.sleep(0.1)
    finally:
        await admin.close()
