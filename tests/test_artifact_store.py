"""`[artifacts] store = "database"` (DESIGN.md §15, issue 23): artifact bytes as chunk rows
in the database every gateway shares, written and read a chunk at a time.

In process on both stores: a 50 MB artifact kept and read back with the Python heap's
peak far below its size (tracemalloc), chunk rows of at most 256 KiB, a refused upload
leaving nothing, an artifact kept as a file before the switch still read, erasure of a
key and of a user taking the chunks. Served: an upload to one `sessiongate serve` on
PostgreSQL read back from another (and the gateways' peak RSS barely moving for 50 MB),
another user's id a 404, the erased user's chunks gone; and the same on a served SQLite.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.errors import ContentTooLarge, InvalidInput, NotFound
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.user_erasure import user_erasure
from sessiongate.store.artifact_bytes import CHUNK_BYTES, DATABASE_PREFIX
from tests.conftest import BACKENDS, START
from tests.support.helpers import ScriptedModel
from tests.support.pg import fresh_database_sync
from tests.support.served import (
    Served,
    relay_model,
    served_gateway,
)
from tests.support.served_cluster import served_cluster

MB = 1024 * 1024
BIG = 50 * MB
#: A piece of the big artifact: varied bytes, so a chunk out of place changes the digest.
PIECE = bytes(range(256)) * 256  # 64 KiB


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
async def db_engine(tmp_path: Path, database_url: str) -> AsyncIterator[Engine]:
    settings = Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC"},
        agents={"defaults": {"model": "scripted"}},
        models={},
        artifacts={"store": "database"},
        limits={"max_artifact_bytes": 64 * MB},
    )
    engine = build_engine(settings, clock=ManualClock(START), models={"scripted": ScriptedModel()})
    await engine.start()
    await engine.users.add("alice")
    await engine.users.add("bob")
    yield engine
    await engine.aclose()


async def pieces(total: int) -> AsyncIterator[bytes]:
    sent = 0
    while sent < total:
        piece = PIECE[: min(len(PIECE), total - sent)]
        sent += len(piece)
        yield piece


def expected_digest(total: int) -> str:
    digest = hashlib.sha256()
    for n in range(0, total, len(PIECE)):
        digest.update(PIECE[: min(len(PIECE), total - n)])
    return digest.hexdigest()


async def chunk_count(engine: Engine, artifact_id: str | None = None) -> int:
    """Chunk rows in the engine's database (of one artifact, or all)."""
    where, args = ("", ()) if artifact_id is None else (" WHERE artifact_id = $1", (artifact_id,))
    url = engine.settings.database.url
    if url.startswith("postgresql"):
        pg = await asyncpg.connect(url)
        try:
            return int(await pg.fetchval("SELECT count(*) FROM artifact_chunks" + where, *args))
        finally:
            await pg.close()
    with sqlite3.connect(engine.settings.sqlite_path) as lite:
        sql = "SELECT count(*) FROM artifact_chunks" + where.replace("$1", "?")
        return int(lite.execute(sql, args).fetchone()[0])


async def test_a_50_mb_artifact_is_kept_and_read_a_chunk_at_a_time(db_engine: Engine) -> None:
    artifacts = db_engine.artifacts
    assert artifacts is not None
    tracemalloc.start()
    try:
        saved = await artifacts.save_stream("alice", pieces(BIG), "video/mp4", key="films")
        _, kept_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        artifact, stream = await artifacts.open("alice", saved.artifact_id)
        digest = hashlib.sha256()
        sizes = []
        async for chunk in stream:
            digest.update(chunk)
            sizes.append(len(chunk))
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert saved.size == artifact.size == BIG
    assert saved.sha256 == digest.hexdigest() == expected_digest(BIG)
    assert saved.file_name == DATABASE_PREFIX + saved.artifact_id
    assert sizes == [CHUNK_BYTES] * (BIG // CHUNK_BYTES)
    assert await chunk_count(db_engine, saved.artifact_id) == BIG // CHUNK_BYTES
    # Neither direction held the artifact: the peaks are a few chunks, not 50 MB.
    print(f"50 MB kept / read: tracemalloc peaks {kept_peak // 1024} / {read_peak // 1024} KiB")
    assert kept_peak < 4 * MB, kept_peak
    assert read_peak < 4 * MB, read_peak
    # No file was written under data_dir/artifacts.
    assert not any(artifacts.files.root.rglob("*")) if artifacts.files.root.exists() else True
    # Another user's id answers as an unknown one.
    with pytest.raises(NotFound):
        await artifacts.open("bob", saved.artifact_id)


async def test_refused_uploads_leave_no_chunks(db_engine: Engine) -> None:
    artifacts = db_engine.artifacts
    assert artifacts is not None
    with pytest.raises(ContentTooLarge):
        await artifacts.save_stream("alice", pieces(65 * MB), "application/octet-stream")
    with pytest.raises(InvalidInput) as empty:
        await artifacts.save_stream("alice", pieces(0), "application/octet-stream")
    assert empty.value.code == "empty_artifact"

    async def failing() -> AsyncIterator[bytes]:
        yield PIECE * 8  # two whole chunks written
        raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        await artifacts.save_stream("alice", failing(), "application/octet-stream")
    assert await chunk_count(db_engine) == 0
    assert await artifacts.store.artifacts_of_owner("alice") == []


async def test_a_file_kept_before_the_switch_is_still_read_and_erased(db_engine: Engine) -> None:
    artifacts = db_engine.artifacts
    assert artifacts is not None
    artifacts.files.database = False  # as a gateway before `store = "database"`
    old = await artifacts.save("alice", b"kept as a file", "text/plain", key="k")
    artifacts.files.database = True
    new = await artifacts.save("alice", b"kept in the database", "text/plain", key="k")
    assert not old.file_name.startswith(DATABASE_PREFIX)
    assert (artifacts.files.root / old.file_name).exists()
    assert (await artifacts.read("alice", old.artifact_id))[1] == b"kept as a file"
    assert (await artifacts.read("alice", new.artifact_id))[1] == b"kept in the database"
    assert await artifacts.delete_key(KeyRef("alice", "k")) == 2
    assert not (artifacts.files.root / old.file_name).exists()
    assert await chunk_count(db_engine) == 0


async def test_erasing_a_user_erases_their_chunks_only(db_engine: Engine) -> None:
    artifacts = db_engine.artifacts
    assert artifacts is not None
    await artifacts.save_stream("alice", pieces(3 * CHUNK_BYTES + 5), "application/octet-stream")
    kept = await artifacts.save("bob", b"bob's", "text/plain")
    # A chunk whose artifact row never came (a crash between the two): swept too.
    assert artifacts.files.chunks is not None
    await artifacts.files.chunks.put_chunk(str(uuid.uuid4()), 0, "alice", b"orphan")
    assert await chunk_count(db_engine) == 4 + 1 + 1
    report = await user_erasure(db_engine).erase("alice", by="root")
    assert report.counts.get("artifacts") == 1
    assert await chunk_count(db_engine) == 1
    assert (await artifacts.read("bob", kept.artifact_id))[1] == b"bob's"


# --- served ------------------------------------------------------------------------------


def _settings_text(directory: Path) -> str:
    text = relay_model(directory, "relay") + '[agents.defaults]\nmodel = "relay"\n'
    return text + '[artifacts]\nstore = "database"\n[limits]\nmax_artifact_bytes = 67108864\n'


def _peak_rss(served: Served) -> int:
    """The serving process's peak resident memory (VmHWM), in bytes."""
    status = Path(f"/proc/{served.proc.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _upload(served: Served, user: str, total: int, key: str | None = None) -> dict[str, Any]:
    def body() -> Iterator[bytes]:
        for n in range(0, total, len(PIECE)):
            yield PIECE[: min(len(PIECE), total - n)]

    with served.client(user, timeout=120) as client:
        answer = client.post(
            "/v1/artifacts",
            params={} if key is None else {"key": key},
            content=body(),
            headers={"Content-Type": "video/mp4"},
        )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def _download(served: Served, user: str, artifact_id: str) -> tuple[int, str, httpx.Headers]:
    digest = hashlib.sha256()
    size = 0
    with (
        served.client(user, timeout=120) as client,
        client.stream("GET", f"/v1/artifacts/{artifact_id}") as answer,
    ):
        assert answer.status_code == 200, answer.read()
        for chunk in answer.iter_bytes():
            digest.update(chunk)
            size += len(chunk)
        return size, digest.hexdigest(), answer.headers


@pytest.mark.postgres
def test_an_upload_to_one_gateway_is_read_from_another_and_erased(tmp_path: Path) -> None:
    users: dict[str, tuple[str, ...]] = {"alice": (), "bob": (), "root": ("--admin",)}
    with (
        fresh_database_sync() as url,
        served_cluster(tmp_path, _settings_text(tmp_path), users, database_url=url) as gateways,
    ):
        one, two = gateways
        before = [_peak_rss(g) for g in gateways]
        uploaded = _upload(one, "alice", BIG, key="films")
        assert uploaded["size"] == BIG and uploaded["sha256"] == expected_digest(BIG)
        size, digest, headers = _download(two, "alice", uploaded["artifact_id"])
        assert (size, digest) == (BIG, uploaded["sha256"])
        assert headers["content-type"] == "video/mp4"
        assert headers["content-length"] == str(BIG)
        # Neither gateway held the 50 MB: their peak RSS grew by far less.
        grown = [_peak_rss(g) - b for g, b in zip(gateways, before, strict=True)]
        print(f"50 MB through the gateways: peak RSS grew by {[g // 1024 for g in grown]} KiB")
        assert max(grown) < 25 * MB, grown
        # Another user's id is a 404 exactly like an unknown one, on either gateway.
        mine = uploaded["artifact_id"]
        never = mine[:-4] + ("0000" if not mine.endswith("0000") else "1111")
        with two.client("bob") as bob:
            theirs = bob.get(f"/v1/artifacts/{mine}")
            unknown = bob.get(f"/v1/artifacts/{never}")
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.json()["error"]["code"] == unknown.json()["error"]["code"]
        assert (
            theirs.json()["error"]["message"].replace(mine, never)
            == (unknown.json()["error"]["message"])
        )
        # Too large: refused by what it announces, nothing kept.
        with one.client("alice") as alice:
            big = alice.post(
                "/v1/artifacts",
                content=b"x" * (64 * MB + 1),
                headers={"Content-Type": "application/octet-stream"},
            )
        assert big.status_code == 413 and big.json()["error"]["code"] == "artifact_too_large"

        async def chunks() -> int:
            conn = await asyncpg.connect(url)
            try:
                return int(await conn.fetchval("SELECT count(*) FROM artifact_chunks"))
            finally:
                await conn.close()

        assert asyncio.run(chunks()) == BIG // CHUNK_BYTES
        with two.client("root") as root:
            assert root.delete("/v1/users/alice").status_code == 200
        assert asyncio.run(chunks()) == 0
        with one.client("bob") as bob:
            assert bob.get(f"/v1/artifacts/{uploaded['artifact_id']}").status_code == 404


def test_a_served_sqlite_gateway_keeps_uploads_in_its_database(tmp_path: Path) -> None:
    users: dict[str, tuple[str, ...]] = {"alice": (), "root": ("--admin",)}
    with served_gateway(tmp_path, _settings_text(tmp_path), users) as served:
        uploaded = _upload(served, "alice", 3 * CHUNK_BYTES + 17, key="notes")
        size, digest, _ = _download(served, "alice", uploaded["artifact_id"])
        assert (size, digest) == (3 * CHUNK_BYTES + 17, expected_digest(3 * CHUNK_BYTES + 17))
        database_file = served.config.parent / "data" / "sessiongate.db"
        with sqlite3.connect(database_file) as conn:
            assert conn.execute("SELECT count(*) FROM artifact_chunks").fetchone()[0] == 4
        with served.client("root") as root:
            assert root.delete("/v1/users/alice").status_code == 200
        with sqlite3.connect(database_file) as conn:
            assert conn.execute("SELECT count(*) FROM artifact_chunks").fetchone()[0] == 0
        assert not (served.config.parent / "data" / "artifacts").exists() or not any(
            (served.config.parent / "data" / "artifacts").rglob("*")
        )
