"""What bounds a turn: a reply cut at `limits.max_reply_chars`, and a rejected turn that
leaves no trace (a bad recall on `/new hello` is refused before anything rotates)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.errors import InvalidInput
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.turn.pipeline import RecallRequest
from tests.conftest import ALICE
from tests.support.helpers import ScriptedModel, collect, types

REF = KeyRef("alice", "chat:alice")


async def stored(engine: Engine) -> list[tuple[str, str, str, dict[str, object]]]:
    segment = await engine.store.latest_segment(REF)
    return [
        (m.role.value, m.content, m.status.value, m.metadata)
        for m in await engine.store.list_messages(segment.session_id)
    ]


@pytest.mark.parametrize(
    ("query", "rationale", "limit"),
    [
        ("!!! ???", "find it", 5),  # nothing to search for: used to fail after rotating
        ("otters", "", 5),
        ("otters", "find it", 0),
        ("x" * 2001, "find it", 5),
    ],
)
async def test_a_bad_recall_on_new_with_text_is_refused_before_anything_rotates(
    engine: Engine, query: str, rationale: str, limit: int
) -> None:
    await collect(engine, "a first message about otters")
    before = await engine.store.chain(REF)
    with pytest.raises(InvalidInput) as refused:
        await collect(engine, "/new hello", recall=RecallRequest(query, rationale, limit))
    assert refused.value.status == 400 and refused.value.code == "invalid_recall"
    assert await engine.store.chain(REF) == before  # no rotation, no archived segment
    assert [row[1] for row in await stored(engine)] == [
        "a first message about otters",
        "reply to: a first message about otters",
    ]
    assert (await engine.sessions.show("chat:alice", ALICE)).rotations == []


async def test_a_reply_past_max_reply_chars_is_cut_kept_and_marked_truncated(
    tmp_path: Path, clock: ManualClock
) -> None:
    endless = ScriptedModel("endless", lambda m: " ".join(f"word{n}" for n in range(400)))
    engine = build_engine(
        Settings(
            data_dir=tmp_path,
            lifecycle={"timezone": "UTC"},
            agents={"defaults": {"model": "endless"}},
            limits={"max_reply_chars": 100},
        ),
        clock=clock,
        models={"endless": endless},
    )
    try:
        events = await collect(engine, "talk forever")
        sent = "".join(e.content for e in events if e.type == "token")
        later = await collect(engine, "and now?")
        rows = await stored(engine)
    finally:
        await engine.aclose()
    assert types(events)[-1] == "end" and events[-1].status == "truncated"
    assert len(sent) == 100 and sent.startswith("word0 word1")
    role, content, status, metadata = rows[1]
    # What the client saw is exactly what is kept, and it says it was cut.
    assert (role, content, status) == ("assistant", sent, "complete")
    assert metadata["truncated"] is True
    # The next turn sends the cut reply upstream, not 400 words.
    assert types(later)[-1] == "end"
    assert [m["content"] for m in endless.requests[-1]][-2] == sent
