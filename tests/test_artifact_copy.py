"""The WebDAV copy of artifacts (`[artifacts] webdav_url`), against a real WebDAV server on
loopback (wsgidav, tests/support/webdav_server.py): the copy has the artifact's bytes, in
folders made as needed; the turn never waits for it and never fails with it; refused
credentials fail at once and say so; a server that is down is retried until it is up, by
this engine or by the next one on the same data; erasing a key (or a user) deletes the
copies, even while an upload is in flight. The tests that take `database_url` run on
SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from sessiongate.agents.tools import FunctionTool, StaticToolSource, ToolContext, ToolOutput
from sessiongate.config import Settings
from sessiongate.config.artifacts import ArtifactsConfig
from sessiongate.core.artifacts import Artifact, ArtifactCopy
from sessiongate.core.users import Caller
from sessiongate.errors import ConfigError
from sessiongate.models.base import ModelOptions, ToolSpec, WireMessage
from sessiongate.service.artifact_copy import key_digest, remote_path, retry_delay
from sessiongate.service.engine import Engine, build_engine
from sessiongate.store.artifact_files import owner_directory
from tests.conftest import BACKENDS, START
from tests.support.agent_models import Call, ToolModel
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel, collect, types
from tests.support.webdav_server import PASSWORD, USER, DavServer, free_port

T = TypeVar("T")
KEY = "chat:alice"
#: Every byte value, so an upload that re-encodes anything shows.
DATA = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16
PNG_1X1 = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
    b"\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00"
    b"\x00\x00IEND\xaeB`\x82"
)
USER_ENV = "TEST_WEBDAV_USER"
PASSWORD_ENV = "TEST_WEBDAV_PASSWORD"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(USER_ENV, USER)
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)


@pytest.fixture
def dav(tmp_path: Path) -> Iterator[DavServer]:
    server = DavServer(tmp_path / "dav").start()
    yield server
    server.stop()


def copy_settings(tmp_path: Path, url: str, database_url: str = "", **artifacts: Any) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC"},
        agents={"main": {"model": "toolmodel", "tools": ["keep_file"]}},
        models={},
        artifacts={
            "webdav_url": url,
            "username_env": USER_ENV,
            "password_env": PASSWORD_ENV,
            "timeout": "2s",
            "retry_backoff": "100ms",
            "max_attempts": 30,
            **artifacts,
        },
    )


def keeper(engine: Engine) -> StaticToolSource:
    """`keep_file`: a tool that keeps DATA as an artifact of the caller's key."""

    async def keep(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        assert engine.artifacts is not None
        artifact = await engine.artifacts.save(
            context.user, DATA, "image/png", key=context.key.name, turn_id=context.turn_id
        )
        return ToolOutput(
            f"kept /v1/artifacts/{artifact.artifact_id}", artifact_ids=(artifact.artifact_id,)
        )

    return StaticToolSource("keeper", [FunctionTool(ToolSpec("keep_file", "Keep a file."), keep)])


def each_turn_keeps_a_file(messages: Sequence[WireMessage], options: ModelOptions) -> Any:
    if messages[-1]["role"] == "user":
        return [Call("keep_file")]
    return "Kept the file."


@asynccontextmanager
async def copying(settings: Settings) -> AsyncIterator[Engine]:
    """An engine whose agent keeps a file each turn, with its copy sender running."""
    engine = build_engine(settings, models={"toolmodel": ToolModel(each_turn_keeps_a_file)})
    engine.tools.add_source(keeper(engine))
    await engine.start()
    assert engine.artifacts is not None and engine.artifacts.copies is not None
    await engine.artifacts.copies.start()
    try:
        yield engine
    finally:
        await engine.aclose()


async def turn_keeping_a_file(engine: Engine, key: str = KEY, user: str = "alice") -> Artifact:
    """One turn through the engine; it must end well, whatever the copy does."""
    assert engine.artifacts is not None
    before = {a.artifact_id for a in await engine.artifacts.store.artifacts_of_key(user, key)}
    events = await collect(engine, "keep a file", key=key, caller=Caller(user))
    assert types(events)[-1] == "end", types(events)
    assert events[-1].status == "complete"
    text = "".join(e.content for e in events if e.type == "token")
    assert "Kept the file." in text
    made = [
        a
        for a in await engine.artifacts.store.artifacts_of_key(user, key)
        if a.artifact_id not in before
    ]
    assert len(made) == 1
    return made[0]


async def eventually(check: Callable[[], Awaitable[T | None]], seconds: float = 10.0) -> T:
    deadline = time.monotonic() + seconds
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s (last: {found!r})")
        await asyncio.sleep(0.02)


def copy_in(engine: Engine, artifact: Artifact, *states: str) -> Callable[[], Awaitable[Any]]:
    async def check() -> ArtifactCopy | None:
        assert engine.artifacts is not None and engine.artifacts.copies is not None
        copy = await engine.artifacts.copies.status(artifact.owner, artifact.artifact_id)
        return copy if copy is not None and copy.state in states else None

    return check


def default_path(artifact: Artifact) -> str:
    assert artifact.key is not None
    owner = hashlib.sha256(artifact.owner.encode()).hexdigest()[:32]
    key = hashlib.sha256(f"{artifact.owner}/{artifact.key}".encode()).hexdigest()[:32]
    return f"{owner}/{key}/{artifact.artifact_id}.png"


# -- copies --------------------------------------------------------------------------------


async def test_a_kept_file_is_copied_with_its_bytes_in_folders_made_for_it(
    tmp_path: Path, dav: DavServer, database_url: str
) -> None:
    async with copying(copy_settings(tmp_path, dav.url(), database_url)) as engine:
        artifact = await turn_keeping_a_file(engine)
        copy = await eventually(copy_in(engine, artifact, "copied"))
        second = await turn_keeping_a_file(engine)
        await eventually(copy_in(engine, second, "copied"))
    assert copy.attempts == 1 and copy.last_error is None
    # Names are digests by default: the server learns neither the user nor the key.
    assert copy.remote_path == default_path(artifact)
    assert "alice" not in copy.remote_path and "chat" not in copy.remote_path
    assert dav.file(copy.remote_path).read_bytes() == DATA
    assert dav.file(default_path(second)).read_bytes() == DATA
    # The base folder, the owner's and the key's did not exist: each was made once, and
    # the second file in the same folder was one PUT.
    mkcols = [path for method, path in dav.requests if method == "MKCOL"]
    assert len(mkcols) == 3 and mkcols[0] == "/sessiongate/"
    assert [m for m, _ in dav.requests].count("PUT") == 2


async def test_plain_names_and_a_deeper_layout(tmp_path: Path, dav: DavServer) -> None:
    (dav.root / "files" / "gw").mkdir(parents=True)  # as Nextcloud's files/<user>/ is there
    settings = copy_settings(
        tmp_path,
        dav.url("files/gw/assistant/"),
        hash_names=False,
        layout="by-user/{owner}/{date}/{key}/{artifact_id}.{ext}",
    )
    async with copying(settings) as engine:
        artifact = await turn_keeping_a_file(engine)
        copy = await eventually(copy_in(engine, artifact, "copied"))
    day = artifact.created_at.date().isoformat()
    # `:` is no folder name a Windows sync client takes: it becomes `_`.
    assert copy.remote_path == f"by-user/alice/{day}/chat_alice/{artifact.artifact_id}.png"
    assert dav.file(copy.remote_path, "files/gw/assistant").read_bytes() == DATA


async def test_refused_credentials_fail_at_once_and_the_turn_still_succeeds(
    tmp_path: Path, dav: DavServer, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    settings = copy_settings(tmp_path, dav.url(), database_url)
    async with copying(settings) as engine:
        artifact = await turn_keeping_a_file(engine)
        failed = await eventually(copy_in(engine, artifact, "failed"))
        assert engine.artifacts is not None
        _, data = await engine.artifacts.read("alice", artifact.artifact_id)
        assert data == DATA  # the artifact itself is unharmed
    # No retry can change a 401, so there was one attempt, and the owner can read why.
    assert failed.attempts == 1
    assert failed.last_error == "the WebDAV server refused the credentials (HTTP 401)"
    assert not (dav.root / "sessiongate").exists()

    # The password is fixed and the gateway restarted: failed copies get another round.
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    async with copying(settings) as engine:
        copied = await eventually(copy_in(engine, artifact, "copied"))
    assert copied.attempts == 1
    assert dav.file(copied.remote_path).read_bytes() == DATA


async def test_a_server_that_is_down_is_retried_until_it_is_up(tmp_path: Path) -> None:
    server = DavServer(tmp_path / "dav", port=free_port())
    async with copying(copy_settings(tmp_path, server.url())) as engine:
        started = time.monotonic()
        artifact = await turn_keeping_a_file(engine)
        assert time.monotonic() - started < 1.5  # the turn did not wait for the copy

        async def retried() -> ArtifactCopy | None:
            copy = await copy_in(engine, artifact, "pending")()
            return copy if copy is not None and copy.attempts >= 2 else None

        pending = await eventually(retried)
        assert pending.last_error == "the WebDAV server could not be reached"
        server.start()
        try:
            copied = await eventually(copy_in(engine, artifact, "copied"))
        finally:
            server.stop()
    # (A claimed try counts at once: `pending` may have shown the one that then worked.)
    assert copied.attempts >= max(pending.attempts, 2) and copied.last_error is None
    assert server.file(copied.remote_path).read_bytes() == DATA


async def test_a_restart_copies_what_was_pending(tmp_path: Path, database_url: str) -> None:
    server = DavServer(tmp_path / "dav", port=free_port())
    settings = copy_settings(tmp_path, server.url(), database_url, retry_backoff="1h")
    async with copying(settings) as engine:
        artifact = await turn_keeping_a_file(engine)
        # The first attempt failed; the next is an hour away.
        pending = await eventually(
            lambda: _with_error(engine, artifact, "the WebDAV server could not be reached")
        )
    assert pending.attempts == 1
    server.start()
    try:
        # The same data, a new engine: its sender finds the pending copy. (Its retry time
        # is still ahead, so it is made due here, as time passing would.)
        async with copying(settings) as engine:
            assert engine.artifacts is not None and engine.artifacts.copies is not None
            await _due_now(engine, artifact)
            engine.artifacts.copies.wake()
            copied = await eventually(copy_in(engine, artifact, "copied"))
    finally:
        server.stop()
    assert copied.attempts == 2
    assert server.file(copied.remote_path).read_bytes() == DATA


async def _with_error(engine: Engine, artifact: Artifact, error: str) -> ArtifactCopy | None:
    copy = await copy_in(engine, artifact, "pending")()
    return copy if copy is not None and copy.last_error == error else None


async def _due_now(engine: Engine, artifact: Artifact) -> None:
    """Move a copy's next attempt to now, in whichever store the engine has."""
    from sessiongate.store.sqlite.store import SQLiteStore

    store = engine.store
    if isinstance(store, SQLiteStore):
        with store.transaction() as db:
            db.execute(
                "UPDATE artifact_copies SET next_attempt_at = 0 WHERE artifact_id = ?",
                (artifact.artifact_id,),
            )
        return
    from sessiongate.store.postgres.store import PostgresStore

    assert isinstance(store, PostgresStore)
    await store.pool.execute(
        "UPDATE artifact_copies SET next_attempt_at = now() - interval '1 second'"
        " WHERE artifact_id = $1",
        artifact.artifact_id,
    )


# -- erasure -------------------------------------------------------------------------------


async def test_erasing_a_key_deletes_its_copies_and_only_those(
    tmp_path: Path, dav: DavServer, database_url: str
) -> None:
    async with copying(copy_settings(tmp_path, dav.url(), database_url)) as engine:
        doomed = [await turn_keeping_a_file(engine) for _ in range(2)]
        kept = await turn_keeping_a_file(engine, key="notes")
        for artifact in [*doomed, kept]:
            await eventually(copy_in(engine, artifact, "copied"))
        files = [dav.file(default_path(a)) for a in doomed]
        assert all(f.read_bytes() == DATA for f in files)

        await engine.sessions.delete(KEY, Caller("alice"))

        async def gone() -> bool:
            assert engine.artifacts is not None and engine.artifacts.copies is not None
            status = engine.artifacts.copies.status
            # The files, and the queue's rows: it forgets a deleted copy.
            return not any(f.exists() for f in files) and not [
                a for a in doomed if await status("alice", a.artifact_id) is not None
            ]

        await eventually(gone)
    assert dav.file(default_path(kept)).read_bytes() == DATA
    assert [m for m, _ in dav.requests].count("DELETE") == 2


async def test_an_erasure_during_the_upload_deletes_the_copy_once_it_is_done(
    tmp_path: Path, dav: DavServer, database_url: str
) -> None:
    dav.put_open.clear()  # the server holds every PUT
    async with copying(copy_settings(tmp_path, dav.url(), database_url)) as engine:
        artifact = await turn_keeping_a_file(engine)  # returns while the PUT is held
        assert await asyncio.to_thread(dav.put_waiting.wait, 10)
        await engine.sessions.delete(KEY, Caller("alice"))
        erased = time.monotonic()
        dav.put_open.set()
        remote = dav.file(default_path(artifact))

        async def deleted() -> bool:
            assert engine.artifacts is not None and engine.artifacts.copies is not None
            request = ("DELETE", f"/sessiongate/{default_path(artifact)}")
            forgotten = await engine.artifacts.copies.status("alice", artifact.artifact_id)
            return request in dav.requests and forgotten is None

        await eventually(deleted)
        # At once, not after the upload's lease (which is tens of seconds here).
        assert time.monotonic() - erased < 5
    assert not remote.exists()
    methods = [m for m, _ in dav.requests]
    assert methods.index("PUT") < methods.index("DELETE")


async def test_erasing_a_user_deletes_their_copies(tmp_path: Path, dav: DavServer) -> None:
    async with copying(copy_settings(tmp_path, dav.url())) as engine:
        mine = [await turn_keeping_a_file(engine, key=k) for k in ("a", "b")]
        theirs = await turn_keeping_a_file(engine, key="a", user="bob")
        for artifact in [*mine, theirs]:
            await eventually(copy_in(engine, artifact, "copied"))
        assert engine.artifacts is not None
        assert await engine.artifacts.erase_user("alice") == 2

        async def gone() -> bool:
            return not any(dav.file(default_path(a)).exists() for a in mine)

        await eventually(gone)
    assert dav.file(default_path(theirs)).read_bytes() == DATA


async def test_delete_remote_false_keeps_the_copies(tmp_path: Path, dav: DavServer) -> None:
    settings = copy_settings(tmp_path, dav.url(), delete_remote=False)
    async with copying(settings) as engine:
        artifact = await turn_keeping_a_file(engine)
        await eventually(copy_in(engine, artifact, "copied"))
        await engine.sessions.delete(KEY, Caller("alice"))
        assert engine.artifacts is not None and engine.artifacts.copies is not None
        assert await engine.artifacts.copies.status("alice", artifact.artifact_id) is None
        await asyncio.sleep(0.3)
    assert dav.file(default_path(artifact)).read_bytes() == DATA
    assert "DELETE" not in [m for m, _ in dav.requests]


# -- reporting: GET /v1/artifacts/{id}/meta -------------------------------------------------


def test_the_owner_reads_the_copy_status_over_http(tmp_path: Path, dav: DavServer) -> None:
    settings = gateway_settings(
        tmp_path,
        artifacts={
            "webdav_url": dav.url(),
            "username_env": USER_ENV,
            "password_env": PASSWORD_ENV,
            "timeout": "2s",
        },
        limits={"max_body_bytes": 65536, "max_content_chars": 20000, "max_attachments": 1},
    )
    with (
        running_gateway(settings, {"scripted": ScriptedModel()}) as gw,
        httpx.Client(base_url=gw.url, timeout=30) as client,
    ):
        image = {
            "type": "image",
            "media_type": "image/png",
            "data": base64.b64encode(PNG_1X1).decode(),
        }
        answer = client.post(
            "/v1/sessions/shots/messages",
            json={"content": "look", "stream": False, "attachments": [image]},
            headers=gw.auth("alice"),
        )
        assert answer.status_code == 200, answer.text
        segment = answer.json()["session_id"]
        page = client.get(
            f"/v1/sessions/shots/segments/{segment}/messages", headers=gw.auth("alice")
        ).json()
        user = next(m for m in page["messages"] if m["role"] == "user")
        artifact_id = user["metadata"]["attachments"][0]["artifact_id"]
        meta: dict[str, Any] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            meta = client.get(f"/v1/artifacts/{artifact_id}/meta", headers=gw.auth("alice")).json()
            if meta["copy"]["status"] == "copied":
                break
            time.sleep(0.05)
        theirs = client.get(f"/v1/artifacts/{artifact_id}/meta", headers=gw.auth("bob"))
        admin = client.get(f"/v1/artifacts/{artifact_id}/meta?owner=alice", headers=gw.auth("root"))
    assert meta["artifact_id"] == artifact_id
    assert meta["url"] == f"/v1/artifacts/{artifact_id}"
    assert meta["media_type"] == "image/png" and meta["size"] == len(PNG_1X1)
    assert meta["sha256"] == hashlib.sha256(PNG_1X1).hexdigest()
    assert meta["key"] == "shots"
    assert meta["copy"]["status"] == "copied" and meta["copy"]["attempts"] == 1
    assert meta["copy"]["last_error"] is None
    assert re.fullmatch(
        r"[0-9a-f]{32}/[0-9a-f]{32}/" + artifact_id + r"\.png", meta["copy"]["path"]
    )
    assert dav.file(meta["copy"]["path"]).read_bytes() == PNG_1X1
    assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "artifact_not_found"
    assert admin.status_code == 200 and admin.json() == meta


async def test_without_webdav_an_artifact_has_no_copy(tmp_path: Path) -> None:
    settings = copy_settings(tmp_path, "")
    assert settings.artifacts.webdav_url is None
    async with copying(settings) as engine:
        artifact = await turn_keeping_a_file(engine)
        assert engine.artifacts is not None and engine.artifacts.copies is not None
        assert not engine.artifacts.copies.running
        assert await engine.artifacts.copy_of(artifact) is None


# -- configuration --------------------------------------------------------------------------


async def test_a_missing_credential_variable_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PASSWORD_ENV)
    settings = copy_settings(tmp_path, "https://cloud.example.org/remote.php/dav/files/gw/sg")
    with pytest.raises(ConfigError) as raised:
        build_engine(settings)
    assert PASSWORD_ENV in raised.value.message
    assert "artifacts.password_env" in raised.value.message
    # Unset URL: no copies, so no credentials needed.
    await build_engine(copy_settings(tmp_path, "")).aclose()


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("webdav_url", "ftp://cloud.example.org/dav/", "http:// or https://"),
        ("webdav_url", "https://gw:secret@cloud.example.org/dav/", "must not hold credentials"),
        ("layout", "{owner}/{key}.{ext}", "must contain {artifact_id}"),
        ("layout", "{owner}/{user}/{artifact_id}", "{user} is not one of"),
        ("layout", "{owner}//{artifact_id}", "no empty"),
        ("layout", "../{artifact_id}", "`..`"),
        ("layout", "{owner}/{artifact_id!r}", "is not one of"),
        ("layout", "a b/{artifact_id}", "literal text"),
        ("username_env", "", "set both"),
        ("password_env", "NOT A NAME", "not an environment variable name"),
        ("timeout", "0s", "more than 0"),
        ("max_attempts", 0, "greater than or equal to 1"),
    ],
)
def test_bad_artifact_settings_are_refused(field: str, value: Any, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        ArtifactsConfig(**{field: value})


def test_the_url_is_a_folder_and_paths_follow_the_layout() -> None:
    config = ArtifactsConfig(webdav_url="https://cloud.example.org/remote.php/dav/files/gw/sg")
    assert config.webdav_url == "https://cloud.example.org/remote.php/dav/files/gw/sg/"
    assert ArtifactsConfig(webdav_url="  ").webdav_url is None
    artifact = Artifact(
        artifact_id="0190c2a4-1b2c-7d3e-8f40-123456789abc",
        owner="..",
        key=None,
        turn_id=None,
        media_type="audio/mpeg",
        size=1,
        sha256="0" * 64,
        created_at=START,
        file_name="x",
    )
    assert remote_path(config, artifact) == (
        f"{owner_directory('..')}/unkeyed/0190c2a4-1b2c-7d3e-8f40-123456789abc.mp3"
    )
    plain = ArtifactsConfig(hash_names=False, layout="{owner}/{date}/{artifact_id}.{ext}")
    odd = Artifact(**{**_fields(artifact), "media_type": "application/x-thing"})
    assert remote_path(plain, odd) == "_../2026-03-02/0190c2a4-1b2c-7d3e-8f40-123456789abc.bin"
    assert key_digest("alice", "notes") != key_digest("bob", "notes")


def _fields(artifact: Artifact) -> dict[str, Any]:
    return {name: getattr(artifact, name) for name in Artifact.__dataclass_fields__}


def test_retries_back_off_doubling_up_to_an_hour() -> None:
    from datetime import timedelta

    backoff = timedelta(seconds=30)
    assert [retry_delay(n, backoff).total_seconds() for n in (1, 2, 3, 4)] == [30, 60, 120, 240]
    assert retry_delay(8, backoff) == timedelta(hours=1)
    assert retry_delay(1000, backoff) == timedelta(hours=1)
