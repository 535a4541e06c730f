"""A real process killed (SIGKILL) between the user commit and the assistant commit.

The child (`tests/support/crash_child.py`) runs a few turns, then starts one whose model hangs
after its first token, and says so once that turn's user message is committed. We kill
it there and check what the next process finds on disk.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import MessageStatus, Role
from sessiongate.service.engine import build_engine
from sessiongate.store.sqlite.store import SQLiteStore
from tests.conftest import START, make_settings
from tests.support.helpers import ScriptedModel, collect
from tests.support.kill import kill_when_ready

CHILD = Path(__file__).parent / "support" / "crash_child.py"
KEY = "chat:alice"
REF = KeyRef("alice", KEY)
TURNS = 3


def run_child_and_kill(data_dir: Path) -> tuple[str, int]:
    """Start the child, wait for it to be mid-turn, SIGKILL it. Returns what it reported:
    the latest segment id and the seq of the last user message."""
    ready = data_dir / "ready"
    child = kill_when_ready(
        CHILD,
        [str(data_dir), str(ready), str(TURNS)],
        ready,
        "that the last user message was committed",
    )
    pid, session_id, seq = ready.read_text(encoding="utf-8").split()
    assert int(pid) == child
    return session_id, int(seq)


async def test_kill_between_user_and_assistant_commit(tmp_path: Path) -> None:
    session_id, last_seq = run_child_and_kill(tmp_path)
    db_path = tmp_path / "sessiongate.db"
    assert db_path.exists()

    # Raw SQLite first, as any tool would see the file (this also recovers the WAL).
    raw = sqlite3.connect(db_path)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        (pointer,) = raw.execute(
            "SELECT latest_session_id FROM session_keys WHERE key = ?", (REF.storage_id,)
        ).fetchone()
        assert pointer == session_id
        unarchived = raw.execute(
            "SELECT session_id FROM segments WHERE key = ? AND archived_at IS NULL",
            (REF.storage_id,),
        ).fetchall()
        assert unarchived == [(session_id,)]
        rows = raw.execute(
            "SELECT seq, role, content, status FROM messages WHERE segment_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        (count,) = raw.execute(
            "SELECT message_count FROM segments WHERE session_id = ?", (session_id,)
        ).fetchone()
    finally:
        raw.close()
    expected = []
    for index in range(TURNS):
        expected += [
            ("user", f"turn {index}", "complete"),
            ("assistant", f"reply to: turn {index}", "complete"),
        ]
    expected.append(("user", "final question", "complete"))  # and nothing after it
    assert [r[1:] for r in rows] == expected
    assert [r[0] for r in rows] == list(range(1, len(expected) + 1))
    assert count == last_seq == len(expected)

    # The store agrees.
    store = SQLiteStore.open(db_path)
    try:
        assert await store.integrity_check() == "ok"
        chain = await store.chain(REF)
        assert [s.session_id for s in chain] == [session_id]
        latest = await store.latest_segment(REF)
        assert latest.session_id == session_id and latest.message_count == last_seq
        messages = await store.list_messages(session_id)
        assert messages[-1].role is Role.USER and messages[-1].content == "final question"
        assert all(m.status is MessageStatus.COMPLETE for m in messages)
    finally:
        await store.close()

    # A new process on the same file carries on: the next turn works and sees the
    # surviving user message in its context.
    scripted = ScriptedModel()
    engine = build_engine(
        make_settings(tmp_path),
        clock=ManualClock(START + timedelta(minutes=1)),
        models={"scripted": scripted},
    )
    try:
        events = await collect(engine, "are you back?")
        assert events[-1].type == "end", events
        assert "rotation" not in [e.type for e in events]
        sent = [m["content"] for m in scripted.requests[-1]]
        assert sent[-2:] == ["final question", "are you back?"]
        after = await engine.store.list_messages(session_id, after_seq=last_seq)
        assert [(m.seq, m.role, m.content) for m in after] == [
            (last_seq + 1, Role.USER, "are you back?"),
            (last_seq + 2, Role.ASSISTANT, "reply to: are you back?"),
        ]
        assert isinstance(engine.store, SQLiteStore)
        assert await engine.store.integrity_check() == "ok"
    finally:
        await engine.aclose()
