"""Conversation titles (core/titles.py): the first user message shortened on a word
boundary, or the title set with `PATCH /v1/sessions/{key}`; in `GET /v1/sessions` and
`GET /v1/sessions/{key}`; on keys written before the migration that added them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from sessiongate.core.keys import KeyRef
from sessiongate.core.titles import AUTO_TITLE_CHARS, auto_title, validate_title
from sessiongate.errors import InvalidInput
from sessiongate.store import migrations
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.sqlite.store import SQLiteStore
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel
from tests.support.pg import fresh_database

ELLIPSIS = "\u2026"


@pytest.mark.parametrize(
    ("text", "title"),
    [
        (None, None),
        ("", None),
        (" \n\t ", None),
        ("Hello there", "Hello there"),
        ("  two\n\nlines\tand   spaces ", "two lines and spaces"),
        ("x" * 60, "x" * 60),
        # 61 characters: cut before the last word, which does not fit with the ellipsis.
        ("Plan the garden beds for spring with tomatoes and basil nearby", None),
        # A word running past the limit is cut inside when it starts in the first half.
        (
            "see " + "https://example.org/" + "a" * 80,
            "see https://example.org/" + "a" * 35 + ELLIPSIS,
        ),
        ("Summarise this, please: " + "word " * 40, None),
    ],
)
def test_the_automatic_title_is_the_first_message_cut_on_a_word(
    text: str | None, title: str | None
) -> None:
    made = auto_title(text)
    if title is not None or text is None or not (text or "").split():
        assert made == title
        return
    # The long cases: at most 60 characters, whole words of the message, an ellipsis.
    assert made is not None and made.endswith(ELLIPSIS) and len(made) <= AUTO_TITLE_CHARS
    head = made.removesuffix(ELLIPSIS)
    flat = " ".join(text.split())
    assert flat.startswith(head) and flat[len(head)] in " ,", (head, flat)
    assert len(made) >= AUTO_TITLE_CHARS - 12  # not cut needlessly short
    assert not head.endswith((",", " "))


def test_a_title_a_user_sets_is_one_trimmed_line() -> None:
    assert validate_title(None) is None
    assert validate_title("  Trip to Lisbon ") == "Trip to Lisbon"
    assert validate_title("é" * 200) == "é" * 200
    for bad in ("", "   ", "a\nb", "tab\there", "x" * 201, "nul\x00", 5, ["x"]):
        with pytest.raises(InvalidInput) as info:
            validate_title(bad)
        assert info.value.code == "invalid_title"


# -- over HTTP ------------------------------------------------------------------------------


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    with running_gateway(gateway_settings(tmp_path), {"scripted": ScriptedModel()}) as gateway:
        yield gateway


def api(gw: Gateway, method: str, path: str, user: str = "alice", **kw: Any) -> httpx.Response:
    return httpx.request(method, gw.url + path, headers=gw.auth(user), timeout=10, **kw)


def titles(gw: Gateway) -> dict[str, Any]:
    listed = api(gw, "GET", "/v1/sessions").json()["sessions"]
    return {s["key"]: s["title"] for s in listed}


def test_titles_are_listed_shown_set_and_cleared(gw: Gateway) -> None:
    question = "What should I plant along the north fence, where it is shady all afternoon?"
    said = api(
        gw, "POST", "/v1/sessions/garden/messages", json={"content": question, "stream": False}
    )
    assert said.status_code == 200
    assert api(gw, "POST", "/v1/sessions/empty/new").status_code == 200
    auto = "What should I plant along the north fence, where it is" + ELLIPSIS
    assert titles(gw) == {"garden": auto, "empty": None}
    assert api(gw, "GET", "/v1/sessions/garden").json()["title"] == auto

    # A rotation does not change it: the title is the chain's first message.
    api(
        gw, "POST", "/v1/sessions/garden/messages", json={"content": "/new roses?", "stream": False}
    )
    assert titles(gw)["garden"] == auto

    renamed = api(gw, "PATCH", "/v1/sessions/garden", json={"title": " Shade garden "})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json() == {"key": "garden", "overrides": {}, "title": "Shade garden"}
    assert titles(gw)["garden"] == "Shade garden"
    assert api(gw, "GET", "/v1/sessions/garden").json()["title"] == "Shade garden"

    # With an override in the same body: both change.
    both = api(
        gw,
        "PATCH",
        "/v1/sessions/garden",
        json={"title": "Shade", "lifecycle": {"idle_window": "2h"}},
    )
    assert both.json() == {
        "key": "garden",
        "overrides": {"lifecycle": {"idle_window": "2h"}},
        "title": "Shade",
    }
    # An override alone leaves the title as it was.
    alone = api(gw, "PATCH", "/v1/sessions/garden", json={"lifecycle": {"idle_window": None}})
    assert alone.json()["title"] == "Shade"

    cleared = api(gw, "PATCH", "/v1/sessions/garden", json={"title": None})
    assert cleared.json()["title"] == auto and titles(gw)["garden"] == auto

    named_empty = api(gw, "PATCH", "/v1/sessions/empty", json={"title": "Later"})
    assert named_empty.json()["title"] == "Later"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"title": ""}, "invalid_title"),
        ({"title": "   "}, "invalid_title"),
        ({"title": "one\ntwo"}, "invalid_title"),
        ({"title": "x" * 201}, "invalid_title"),
        ({"title": 12}, "invalid_request"),
        # A bad title changes nothing else in the same body.
        ({"title": "", "reply_model": "scripted"}, "invalid_title"),
    ],
)
def test_a_bad_title_is_refused_and_nothing_changes(
    gw: Gateway, body: dict[str, Any], code: str
) -> None:
    api(gw, "POST", "/v1/sessions/k/messages", json={"content": "hello", "stream": False})
    refused = api(gw, "PATCH", "/v1/sessions/k", json=body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == code
    shown = api(gw, "GET", "/v1/sessions/k").json()
    assert shown["title"] == "hello" and shown["overrides"] == {}


def test_titles_are_the_owners_own(gw: Gateway) -> None:
    api(gw, "POST", "/v1/sessions/mine/messages", json={"content": "hello", "stream": False})
    missing = api(gw, "PATCH", "/v1/sessions/mine", user="bob", json={"title": "Bob's now"})
    assert missing.status_code == 404
    other = api(gw, "PATCH", "/v1/sessions/mine?owner=alice", user="bob", json={"title": "x"})
    assert other.status_code == 403
    assert titles(gw) == {"mine": "hello"}


# -- keys from before the migration --------------------------------------------------------


def _before_titles(dialect: str) -> list[migrations.Migration]:
    known = migrations.load_migrations(dialect)
    older = [m for m in known if m.name != "key_titles"]
    assert len(older) == len(known) - 1
    return older


#: alice's key `old`, written as the store wrote it before titles: a user message, a reply.
OLD_ROWS = [("user", "an old question about otters"), ("assistant", "yes")]
SID = "01890000-0000-7000-8000-000000000001"
T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)


async def test_keys_written_before_titles_have_their_automatic_title(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    with monkeypatch.context() as patch:
        older = _before_titles("sqlite")
        patch.setattr(migrations, "load_migrations", lambda _dialect: older)
        migrations.apply_sqlite_migrations(conn)
    at = int(T0.timestamp() * 1_000_000)
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO segments (session_id, key, created_at, context_started_at,"
        " last_activity_at) VALUES (?, 'alice/old', ?, ?, ?)",
        (SID, at, at, at),
    )
    conn.execute(
        "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
        " VALUES ('alice/old', 'alice', ?, ?)",
        (SID, at),
    )
    conn.execute("COMMIT")
    for seq, (role, content) in enumerate(OLD_ROWS, start=1):
        conn.execute(
            "INSERT INTO messages (segment_id, seq, role, content, status, created_at)"
            " VALUES (?, ?, ?, ?, 'complete', ?)",
            (SID, seq, role, content, at),
        )
    conn.close()
    store = SQLiteStore.open(path)  # every migration now, the titles one too
    try:
        [listed] = await store.list_keys("alice")
        assert listed.title == "an old question about otters"
        assert (await store.set_title(KeyRef("alice", "old"), "Otters")).title == "Otters"
    finally:
        await store.close()


async def test_postgres_keys_written_before_titles_have_their_automatic_title(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with fresh_database() as url:
        conn = await asyncpg.connect(url)
        try:
            with monkeypatch.context() as patch:
                older = _before_titles("postgres")
                patch.setattr(migrations, "load_migrations", lambda _dialect: older)
                await migrations.apply_postgres_migrations(conn)
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO segments (session_id, key, created_at, context_started_at,"
                    " last_activity_at) VALUES ($1, 'alice/old', $2, $2, $2)",
                    SID,
                    T0,
                )
                await conn.execute(
                    "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
                    " VALUES ('alice/old', 'alice', $1, $2)",
                    SID,
                    T0,
                )
            for seq, (role, content) in enumerate(OLD_ROWS, start=1):
                await conn.execute(
                    "INSERT INTO messages (segment_id, seq, role, content, status, created_at)"
                    " VALUES ($1, $2, $3, $4, 'complete', $5)",
                    SID,
                    seq,
                    role,
                    content,
                    T0,
                )
        finally:
            await conn.close()
        store = PostgresStore(url, pool_size=2)
        await store.start()  # every migration now, the titles one too
        try:
            [listed] = await store.list_keys("alice")
            assert listed.title == "an old question about otters"
            assert (await store.set_title(KeyRef("alice", "old"), "Otters")).title == "Otters"
        finally:
            await store.close()
