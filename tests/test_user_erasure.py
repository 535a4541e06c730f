"""Erasing a user end to end, on SQLite and on PostgreSQL: two users fill every kind of
data through the services and the real gateway (turns, a rotation, recall's index, the
OpenAI route's conversation index, idempotency records, seed 001's endpoint memory,
webhook deliveries, artifacts with their files, notes with vectors, tasks, modes
enabled and unlocked); one is erased by `DELETE /v1/users/{name}`; every table is then
read directly: nothing of theirs is left and the other user's rows are all still there.
Then the API's refusals, and `sessiongate users erase` on the command line."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from sessiongate.config import Settings
from sessiongate.service.engine import build_engine
from sessiongate.store.artifact_files import owner_directory
from tests.conftest import BACKENDS
from tests.support.gateway import Gateway, gateway_settings, run_sync, running_gateway
from tests.support.helpers import ScriptedModel
from tests.support.seed001 import phone

SESSIONGATE = [sys.executable, "-m", "sessiongate.cli.main"]
#: A word only each user's content holds, to ask the full-text indexes about.
WORDS = {"alice": "zebracorn", "bob": "quokkafish"}
#: The owner-scoped tables and the column naming the owner.
OWNER_COLUMNS = {
    "users": "name",
    "api_keys": "user_name",
    "session_keys": "owner",
    "artifacts": "owner",
    "tasks": "owner",
    "notes": "owner",
    "note_chunks": "owner",
    "notes_versions": "owner",
    "mode_unlocks": "user_name",
    "idempotency_keys": "owner",
    "endpoint_last_key": "owner",
    "conversation_nodes": "owner",
    "conversation_heads": "owner",
    "hook_deliveries": "owner",
}
HOOK = {
    "url": "http://127.0.0.1:9/never-answers",  # deliveries stay queued
    "secret": "s" * 32,
    "events": ["turn.completed", "session.rotated"],
    "include_text": True,
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # conftest.py runs only the modules it lists on both stores; this one always does.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


Query = Callable[[str, tuple[Any, ...]], Awaitable[list[tuple[Any, ...]]]]


def querier(settings: Settings, database_url: str) -> Query:
    """Read the database directly, bypassing the gateway: `?` placeholders on both."""

    async def sqlite_query(sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with sqlite3.connect(settings.sqlite_path) as db:
            return [tuple(r) for r in db.execute(sql, args).fetchall()]

    async def postgres_query(sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        parts = sql.split("?")
        numbered = parts[0] + "".join(f"${i}{p}" for i, p in enumerate(parts[1:], 1))
        conn = await asyncpg.connect(database_url)
        try:
            return [tuple(r) for r in await conn.fetch(numbered, *args)]
        finally:
            await conn.close()

    return postgres_query if database_url else sqlite_query


async def census(query: Query, user: str) -> dict[str, int]:
    """How many rows of each kind `user` has, read table by table."""
    counts = {}
    for table, column in OWNER_COLUMNS.items():
        sql = f"SELECT count(*) FROM {table} WHERE {column} = ?"
        counts[table] = (await query(sql, (user,)))[0][0]
    prefix = f"{user}/%"
    for table in ("segments", "rotations"):
        sql = f"SELECT count(*) FROM {table} WHERE key LIKE ?"
        counts[table] = (await query(sql, (prefix,)))[0][0]
    counts["messages"] = (
        await query(
            "SELECT count(*) FROM messages m JOIN segments s ON s.session_id = m.segment_id"
            " WHERE s.key LIKE ?",
            (prefix,),
        )
    )[0][0]
    return counts


async def search_rows(query: Query, word: str, postgres: bool) -> dict[str, int]:
    """Rows of the full-text indexes (recall's, the notes') that hold `word`."""
    if postgres:
        recall = "SELECT count(*) FROM message_search WHERE document @@ plainto_tsquery(?)"
        notes = "SELECT count(*) FROM note_chunks WHERE document @@ plainto_tsquery('english', ?)"
    else:
        recall = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"
        notes = "SELECT count(*) FROM note_chunks_fts WHERE note_chunks_fts MATCH ?"
    return {
        "recall": (await query(recall, (word,)))[0][0],
        "notes": (await query(notes, (word,)))[0][0],
    }


def erasure_settings(tmp_path: Path, database_url: str) -> Settings:
    return gateway_settings(
        tmp_path,
        database={"url": database_url, "pool_size": 4},
        modes={"private": {"unlock_ttl": "1h"}},
        hooks=[HOOK],
        notes={"embeddings": "builtin"},
    )


def prefill(settings: Settings) -> dict[str, str]:
    """Users, artifacts (with and without a key) and notes with vectors, through the
    services on an engine of their own; the users' API keys."""

    async def fill() -> dict[str, str]:
        engine = build_engine(settings, models={"scripted": ScriptedModel()})
        await engine.start()
        try:
            keys = {}
            for name, admin in (("root", True), ("alice", False), ("bob", False)):
                _, keys[name] = await engine.users.add(name, admin=admin)
            assert engine.artifacts is not None and engine.notes is not None
            for user, word in WORDS.items():
                await engine.artifacts.save(user, b"\x89PNG one", "image/png", key="diary")
                await engine.artifacts.save(user, b"\x89PNG two", "image/png")
                await engine.notes.add(user, f"The {word} sleeps in the garden.", title="pet")
            return keys
        finally:
            await engine.aclose()

    return run_sync(fill())


async def fill_through_the_gateway(gw: Gateway, user: str) -> None:
    word = WORDS[user]
    auth = gw.auth(user)
    async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:

        async def ok(method: str, path: str, **kwargs: Any) -> httpx.Response:
            answer = await http.request(method, path, **kwargs)
            assert answer.status_code < 300, (path, answer.text)
            return answer

        turn = {"content": f"my {word} story", "stream": False}
        await ok(
            "POST",
            "/v1/sessions/diary/messages",
            json=turn,
            headers=auth | {"Idempotency-Key": "t-1"},
        )
        await ok("POST", "/v1/sessions/diary/new", headers=auth)  # archived: recall indexes it
        await ok("POST", "/v1/sessions/diary/messages", json=turn, headers=auth)
        await ok("POST", "/v1/tasks", json={"title": f"feed the {word}"}, headers=auth)
        await ok("POST", "/v1/notes", json={"content": f"{word} facts"}, headers=auth)
        completion = {"model": "main", "messages": [{"role": "user", "content": f"{word}?"}]}
        await ok("POST", "/v1/chat/completions", json=completion, headers=auth)
        root = gw.auth("root")
        await ok("PATCH", f"/v1/users/{user}", json={"modes_enabled": ["private"]}, headers=root)
        await ok("POST", "/v1/modes/private/unlock", headers=auth)
    async with phone(gw.ws_url, gw.keys[user], "claude") as app:
        assert (await app.turn(f"{word} from the phone")).end["type"] == "complete"


async def wait_for(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + 10
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_erasing_a_user_leaves_nothing_of_theirs_and_all_of_the_others(
    tmp_path: Path, database_url: str
) -> None:
    settings = erasure_settings(tmp_path, database_url)
    query = querier(settings, database_url)
    postgres = bool(database_url)
    keys = prefill(settings)
    with running_gateway(settings, {"scripted": ScriptedModel()}, keys=keys) as gw:
        for user in WORDS:
            await fill_through_the_gateway(gw, user)

        async def remembered() -> bool:
            rows = await query("SELECT owner FROM endpoint_last_key", ())
            return sorted(r[0] for r in rows) == ["alice", "bob"]

        await wait_for(remembered, "seed 001's endpoint memory")
        before = {user: await census(query, user) for user in WORDS}
        for user in WORDS:  # every kind is there to erase, for both users
            empty = [kind for kind, n in before[user].items() if n == 0]
            assert empty == [], f"{user} has no {empty}"
            assert all((await search_rows(query, WORDS[user], postgres)).values())
        bob_files = sorted((tmp_path / "artifacts" / owner_directory("bob")).iterdir())
        alice_dir = tmp_path / "artifacts" / owner_directory("alice")
        assert len(bob_files) == 2 and len(list(alice_dir.iterdir())) == 2

        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
            answer = await http.delete("/v1/users/alice", headers=gw.auth("root"))
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["erased"] == "alice"
        # `diary`, the OpenAI route's conversation and the phone's
        assert body["counts"]["session_keys"] == before["alice"]["session_keys"] == 3
        assert body["counts"]["artifacts"] == 2 and body["counts"]["users"] == 1

        after = {user: await census(query, user) for user in WORDS}
        assert after["alice"] == dict.fromkeys(after["alice"], 0)
        assert after["bob"] == before["bob"]
        assert await search_rows(query, WORDS["alice"], postgres) == {"recall": 0, "notes": 0}
        assert all((await search_rows(query, WORDS["bob"], postgres)).values())
        orphans = (
            "SELECT count(*) FROM messages"
            " WHERE segment_id NOT IN (SELECT session_id FROM segments)"
        )
        assert (await query(orphans, ()))[0][0] == 0
        assert not alice_dir.exists() or list(alice_dir.iterdir()) == []
        assert sorted((tmp_path / "artifacts" / owner_directory("bob")).iterdir()) == bob_files

        # The erased key no longer authenticates; the other user carries on.
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
            gone = await http.get("/v1/sessions", headers=gw.auth("alice"))
            assert gone.status_code == 401
            assert gone.json()["error"]["code"] == "invalid_api_key"
            tasks = (await http.get("/v1/tasks", headers=gw.auth("bob"))).json()
            assert [t["title"] for t in tasks["tasks"]] == [f"feed the {WORDS['bob']}"]
            listed = (await http.get("/v1/users", headers=gw.auth("root"))).json()
            assert [u["name"] for u in listed["users"]] == ["bob", "root"]


def test_the_api_refuses_non_admins_unknown_users_and_self_erasure(tmp_path: Path) -> None:
    with running_gateway(gateway_settings(tmp_path), {"scripted": ScriptedModel()}) as gw:

        def erase(name: str, by: str) -> tuple[int, str]:
            answer = httpx.delete(f"{gw.url}/v1/users/{name}", headers=gw.auth(by), timeout=10)
            return answer.status_code, answer.json()["error"]["code"]

        # 403 before any lookup: a non-admin learns nothing about who exists.
        assert erase("bob", "alice") == (403, "admin_required")
        assert erase("nobody", "alice") == (403, "admin_required")
        assert erase("nobody", "root") == (404, "user_not_found")
        assert erase("root", "root") == (409, "cannot_erase_self")
        assert erase("BAD NAME!", "root")[0] == 400
        no_key = httpx.delete(f"{gw.url}/v1/users/bob", timeout=10)
        assert no_key.status_code == 401
        # None of that erased anything.
        for user in ("alice", "bob", "root"):
            me = httpx.get(f"{gw.url}/v1/me", headers=gw.auth(user), timeout=10)
            assert me.status_code == 200, user


def test_the_cli_asks_for_yes_and_then_erases(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n', encoding="utf-8")
    settings = Settings(data_dir=tmp_path)
    keys = prefill(settings)
    env = {**os.environ, "COLUMNS": "200"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SESSIONGATE, "users", "erase", *args, "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    refused = cli("alice")
    assert refused.returncode == 2
    assert "--yes" in refused.stderr
    with sqlite3.connect(settings.sqlite_path) as db:
        assert db.execute("SELECT count(*) FROM notes WHERE owner = 'alice'").fetchone()[0] == 1

    done = cli("alice", "--yes")
    assert done.returncode == 0, done.stderr
    assert "erased alice" in done.stdout
    assert '"erased_user": "alice"' in done.stderr  # the audit line: who, whom, counts
    assert WORDS["alice"] not in done.stderr  # and never any content
    with sqlite3.connect(settings.sqlite_path) as db:
        for table, column in OWNER_COLUMNS.items():
            sql = f"SELECT count(*) FROM {table} WHERE {column} = ?"
            assert db.execute(sql, ("alice",)).fetchone()[0] == 0, table
        assert db.execute("SELECT count(*) FROM notes WHERE owner = 'bob'").fetchone()[0] == 1
    assert keys["alice"] != keys["bob"]
    unknown = cli("nobody", "--yes")
    assert unknown.returncode == 1 and "no user 'nobody'" in unknown.stderr
