"""Artifacts: kept for their owner only, owner-only on disk, capped in size, and erased
with the key that made them. Every test here runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

from sessiongate.core.keys import KeyRef
from sessiongate.core.users import Caller
from sessiongate.errors import ContentTooLarge, InvalidInput, NotFound, SessionNotFound
from sessiongate.service.artifacts import ArtifactService, artifacts_folder
from sessiongate.service.engine import Engine
from sessiongate.store.artifact_files import owner_directory
from tests.conftest import BACKENDS, START
from tests.support.helpers import collect

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"not really the rest of a png" * 4


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # conftest.py runs only the modules it lists on both stores; this one always does.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


def service(engine: Engine) -> ArtifactService:
    assert engine.artifacts is not None
    return engine.artifacts


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_saved_bytes_come_back_with_their_row_and_owner_only_files(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = service(engine)
    saved = await artifacts.save(
        "alice", PNG_BYTES, "image/png", key="chat:alice", turn_id="turn-1"
    )
    assert saved.owner == "alice" and saved.key == "chat:alice" and saved.turn_id == "turn-1"
    assert saved.size == len(PNG_BYTES)
    assert saved.sha256 == hashlib.sha256(PNG_BYTES).hexdigest()
    assert saved.created_at == START

    row, data = await artifacts.read("alice", saved.artifact_id)
    assert data == PNG_BYTES
    assert row == saved  # every column survives the round trip through the store

    root = artifacts_folder(engine.settings)
    assert root == tmp_path / "artifacts"
    file = root / owner_directory("alice") / saved.artifact_id
    assert file.read_bytes() == PNG_BYTES
    assert mode(file) == 0o600
    assert mode(file.parent) == 0o700
    assert mode(root) == 0o700
    # No temporary file is left beside it.
    assert sorted(p.name for p in file.parent.iterdir()) == [saved.artifact_id]


async def test_ids_sort_in_creation_order(engine: Engine) -> None:
    artifacts = service(engine)
    ids = [(await artifacts.save("alice", PNG_BYTES, "image/png")).artifact_id for _ in range(5)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 5


async def test_a_keys_artifacts_are_listed_newest_first_by_turn_and_type(engine: Engine) -> None:
    artifacts = service(engine)

    async def save(media_type: str, turn_id: str, key: str = "talk") -> str:
        saved = await artifacts.save("alice", PNG_BYTES, media_type, key=key, turn_id=turn_id)
        return saved.artifact_id

    first = await save("image/png", "turn-1")
    spoken = await save("audio/wav", "turn-2")
    second = await save("image/png", "turn-2")
    await save("image/png", "turn-1", key="elsewhere")
    listed = await artifacts.of_key("alice", "talk")
    assert [a.artifact_id for a in listed] == [second, spoken, first]
    by_turn = await artifacts.of_key("alice", "talk", turn_id="turn-2", media_type="image/png")
    assert [a.artifact_id for a in by_turn] == [second]
    assert [a.artifact_id for a in await artifacts.of_key("alice", "talk", limit=1)] == [second]
    assert await artifacts.of_key("bob", "talk") == []


async def test_another_users_artifact_is_not_found_like_an_unknown_id(engine: Engine) -> None:
    artifacts = service(engine)
    saved = await artifacts.save("alice", PNG_BYTES, "image/png")
    with pytest.raises(NotFound) as other:
        await artifacts.read("bob", saved.artifact_id)
    unknown_id = saved.artifact_id[:-4] + ("0000" if saved.artifact_id[-4:] != "0000" else "1111")
    with pytest.raises(NotFound) as unknown:
        await artifacts.read("bob", unknown_id)
    assert other.value.code == unknown.value.code == "artifact_not_found"
    assert other.value.status == 404
    # The same words either way, but for the id the caller already knows.
    assert other.value.message.replace(saved.artifact_id, "ID") == unknown.value.message.replace(
        unknown_id, "ID"
    )


@pytest.mark.parametrize(
    "bad_id",
    ["nope", "../../etc/passwd", "0190C2A4-1B2C-7D3E-8F40-123456789ABC", "x" * 300, ""],
)
async def test_a_malformed_id_is_invalid_input(engine: Engine, bad_id: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        await service(engine).read("alice", bad_id)
    assert raised.value.code == "invalid_artifact_id"
    assert raised.value.status == 400


async def test_the_size_cap_refuses_and_keeps_nothing(engine: Engine) -> None:
    artifacts = service(engine)
    assert artifacts.max_bytes == 25 * 1024 * 1024  # limits.max_artifact_bytes' default
    artifacts.max_bytes = 1024
    with pytest.raises(ContentTooLarge) as raised:
        await artifacts.save("alice", b"\x00" * 1025, "image/png", key="chat:alice")
    assert raised.value.code == "artifact_too_large"
    assert raised.value.status == 413
    assert await artifacts.store.artifacts_of_key("alice", "chat:alice") == []
    root = artifacts_folder(engine.settings)
    assert not root.exists() or not any(root.rglob("*-*"))
    # Exactly at the cap is fine.
    saved = await artifacts.save("alice", b"\x00" * 1024, "image/png", key="chat:alice")
    assert saved.size == 1024


@pytest.mark.parametrize(
    ("data", "media_type", "code"),
    [
        (b"x", "image/png; charset=x", "invalid_media_type"),
        (b"x", "text/html\r\nX-Injected: 1", "invalid_media_type"),
        (b"x", "", "invalid_media_type"),
        (b"", "image/png", "empty_artifact"),
    ],
)
async def test_bad_media_types_and_empty_files_are_refused(
    engine: Engine, data: bytes, media_type: str, code: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        await service(engine).save("alice", data, media_type)
    assert raised.value.code == code


async def test_a_failed_row_write_leaves_no_file(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    artifacts = service(engine)

    async def broken(artifact: object, copy: object = None) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(artifacts.store, "add_artifact", broken)
    with pytest.raises(RuntimeError):
        await artifacts.save("alice", PNG_BYTES, "image/png")
    folder = artifacts_folder(engine.settings) / owner_directory("alice")
    assert list(folder.iterdir()) == []


async def test_a_file_gone_missing_reads_as_not_found(engine: Engine) -> None:
    artifacts = service(engine)
    saved = await artifacts.save("alice", PNG_BYTES, "image/png")
    (artifacts_folder(engine.settings) / saved.file_name).unlink()
    with pytest.raises(NotFound) as raised:
        await artifacts.read("alice", saved.artifact_id)
    assert raised.value.code == "artifact_not_found"


async def test_erasing_a_key_removes_its_artifacts_and_only_those(engine: Engine) -> None:
    artifacts = service(engine)
    await collect(engine, "hi", key="chat:alice")
    await collect(engine, "hi", key="notes", caller=Caller("bob"))
    doomed = [
        await artifacts.save("alice", PNG_BYTES, "image/png", key="chat:alice") for _ in range(2)
    ]
    kept_other_key = await artifacts.save("alice", PNG_BYTES, "image/png", key="notes")
    kept_no_key = await artifacts.save("alice", PNG_BYTES, "image/png")
    kept_other_user = await artifacts.save("bob", PNG_BYTES, "image/png", key="chat:alice")
    root = artifacts_folder(engine.settings)

    await engine.sessions.delete("chat:alice", Caller("alice"))

    for gone in doomed:
        assert await artifacts.store.get_artifact("alice", gone.artifact_id) is None
        assert not (root / gone.file_name).exists()
        with pytest.raises(NotFound):
            await artifacts.read("alice", gone.artifact_id)
    for kept in (kept_other_key, kept_no_key):
        assert (await artifacts.read("alice", kept.artifact_id))[1] == PNG_BYTES
    assert (await artifacts.read("bob", kept_other_user.artifact_id))[1] == PNG_BYTES


async def test_an_admin_erasing_someone_elses_key_removes_its_artifacts(engine: Engine) -> None:
    artifacts = service(engine)
    await collect(engine, "hi", key="chat:alice")
    saved = await artifacts.save("alice", PNG_BYTES, "image/png", key="chat:alice")
    await engine.sessions.delete("chat:alice", Caller("root", admin=True), owner="alice")
    assert await artifacts.store.get_artifact("alice", saved.artifact_id) is None
    assert not (artifacts_folder(engine.settings) / saved.file_name).exists()


async def test_a_failed_erasure_keeps_the_artifacts(engine: Engine) -> None:
    artifacts = service(engine)
    saved = await artifacts.save("alice", PNG_BYTES, "image/png", key="never-made")
    with pytest.raises(SessionNotFound):
        await engine.sessions.delete("never-made", Caller("alice"))
    assert (await artifacts.read("alice", saved.artifact_id))[1] == PNG_BYTES
    assert await artifacts.delete_key(KeyRef("alice", "never-made")) == 1
    assert await artifacts.store.artifacts_of_key("alice", "never-made") == []
