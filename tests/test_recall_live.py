"""Explicit recall with scope "all" reads the live (newest) segments of the caller's other
keys too (DESIGN.md §13, "Recall across keys"; docs/memory.md), on both stores: another
key's live message is found with scope "all" and never with "key"; the asking key's own
live thread never; another user's never; a message the safety gate classified UNSAFE
never. Live messages are indexed lazily, at the recall (not on append): they are found
once after their segment is archived too, leave the index when their key is erased, and
are embedded by the recall that indexed them. One test runs through `sessiongate serve`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.segments import Role
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.recall import RecallSearch, build_recall_index
from sessiongate.service.turn.pipeline import RecallRequest
from sessiongate.store.recall import RecallScope
from tests.conftest import make_settings
from tests.support.helpers import ScriptedModel, collect
from tests.support.served import relay_model, served_gateway
from tests.test_recall_scope import ALICE, BOB, WHY, ConceptEmbedder, said

BOTH = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
async def gated(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel, database_url: str
) -> AsyncIterator[Engine]:
    """An engine whose safety gate refuses any request that says "zorblax"."""
    settings = make_settings(
        tmp_path,
        {"defaults": {"model": "scripted", "classifier": {"unsafe_terms": ["zorblax"]}}},
        database_url=database_url,
    )
    built = build_engine(settings, clock=clock, models={"scripted": scripted})
    await built.start()
    yield built
    await built.aclose()


@BOTH
async def test_scope_all_finds_another_keys_live_segment_never_the_askers_own(
    gated: Engine, scripted: ScriptedModel
) -> None:
    # Never rotated: "travel" holds its message in its live segment.
    await collect(gated, "my passport number is P7781", key="travel")
    await collect(gated, "my passport number is B0042", key="travel", caller=BOB)
    await collect(gated, "the passport photo is due friday", key="chat")

    assert await gated.sessions.recall("chat", ALICE, "passport number", WHY) == []
    found = await gated.sessions.recall("chat", ALICE, "passport number", WHY, scope="all")
    # Travel's live message, never chat's own live thread, never Bob's.
    assert said(found) == ["my passport number is P7781"]
    assert {f.key for f in found} == {"travel"}
    travel = await gated.store.latest_segment(ALICE.key("travel"))
    assert all(f.session_id == travel.session_id for f in found)
    user = next(f for f in found if f.role is Role.USER)
    assert user.seq == 1 and user.rationale == WHY and user.score > 0

    # Asked from travel, its own live thread is in its context: chat's is found instead.
    mirror = await gated.sessions.recall("travel", ALICE, "passport", WHY, scope="all")
    assert said(mirror) == ["the passport photo is due friday"]
    bobs = await gated.sessions.recall("chat", BOB, "passport number", WHY, scope="all")
    assert said(bobs) == ["my passport number is B0042"]

    # A message said after the first recall is indexed by the next one.
    await collect(gated, "the visa number is V3310", key="travel")
    later = await gated.sessions.recall("chat", ALICE, "visa", WHY, scope="all")
    assert said(later) == ["the visa number is V3310"]

    # In a turn: the model reads the other key's live fragment, never the asker's own.
    await collect(
        gated,
        "what was my passport number?",
        key="chat",
        recall=RecallRequest("passport number", WHY, 5, "all"),
    )
    sent = " ".join(m["content"] for m in scripted.requests[-1] if m["role"] == "system")
    assert "P7781" in sent and "key travel" in sent and "B0042" not in sent


@BOTH
async def test_an_unsafe_message_in_another_keys_live_segment_is_never_recalled(
    gated: Engine,
) -> None:
    refused = await collect(gated, "zorblax the garden gnome", key="notes")
    assert refused[-1].type == "error"
    await collect(gated, "the garden gnome is blue", key="notes")
    notes = await gated.store.latest_segment(ALICE.key("notes"))
    stored = await gated.store.list_messages(notes.session_id)
    assert any(m.metadata.get("classification", {}).get("label") == "unsafe" for m in stored)

    assert await gated.sessions.recall("chat", ALICE, "zorblax", WHY, scope="all") == []
    found = await gated.sessions.recall("chat", ALICE, "garden gnome", WHY, scope="all")
    assert said(found) == ["the garden gnome is blue"]


@BOTH
async def test_a_live_message_indexed_early_is_found_once_after_archiving_and_erased(
    gated: Engine,
) -> None:
    await collect(gated, "the locker code is 4812", key="gym")
    await collect(gated, "the locker code at work is 7730", key="work")
    first = await gated.sessions.recall("chat", ALICE, "locker code", WHY, scope="all")
    assert sorted(said(first)) == ["the locker code at work is 7730", "the locker code is 4812"]

    # Rotating archives what was indexed live, plus what came after: each message once.
    await collect(gated, "the locker is next to the sauna", key="gym")
    await collect(gated, "/new", key="gym")
    found = await gated.sessions.recall("chat", ALICE, "locker", WHY, scope="all", limit=50)
    assert sorted(said(found)) == [
        "the locker code at work is 7730",
        "the locker code is 4812",
        "the locker is next to the sauna",
    ]
    assert len({f.message_id for f in found}) == len(found)

    # Erasing a key whose live segment was indexed takes its messages out of the index.
    await gated.sessions.delete("work", ALICE)
    found = await gated.sessions.recall("chat", ALICE, "locker code", WHY, scope="all")
    assert {f.key for f in found} == {"gym"}
    assert "the locker code at work is 7730" not in said(found)
    await collect(gated, "the locker code at work is now 9901", key="work")
    again = await gated.sessions.recall("chat", ALICE, "work locker", WHY, scope="all")
    assert "the locker code at work is now 9901" in said(again)


@BOTH
async def test_a_live_message_is_embedded_by_the_recall_that_indexes_it(gated: Engine) -> None:
    embedder = ConceptEmbedder()
    search = RecallSearch(build_recall_index(gated.store), embedder)
    gated.sessions.recall_search = search
    await collect(gated, "hello", key="chat")
    # A first recall: nothing of pets yet; the search now trusts "nothing left to embed".
    assert await gated.sessions.recall("chat", ALICE, "kitten", WHY, scope="all") == []
    await collect(gated, "we adopted a feline called Miso", key="pets")
    await collect(gated, "my cat is called Pepper", key="pets", caller=BOB)

    found = await gated.sessions.recall("chat", ALICE, "kitten", WHY, scope="all")
    assert said(found)[:1] == ["we adopted a feline called Miso"]
    assert found[0].key == "pets"
    assert "my cat is called Pepper" not in embedder.embedded
    # The asking key's own live thread has vectors (another key may ask), never recalled.
    index = search.index
    chat = ALICE.key("chat")
    mine = await index.vectors(
        RecallScope("alice", None, live=True, asker=chat.storage_id),
        embedder.name,
        embedder.dimensions,
    )
    every = await index.vectors(RecallScope("alice", None, live=True), embedder.name, 3)
    assert len(mine.ids) == 2 and len(every.ids) == 4
    # Scope "key" never reads a live segment.
    archived = await index.vectors(RecallScope("alice", None), embedder.name, 3)
    assert len(archived.ids) == 0


def test_served_recall_scope_all_reads_another_keys_live_segment(tmp_path: Path) -> None:
    config = (
        relay_model(tmp_path, "echo")
        + '[agents.defaults]\nmodel = "echo"\n[notes]\nembeddings = "builtin"\n'
    )
    with (
        served_gateway(tmp_path, config, {"alice": (), "bob": ()}) as served,
        served.client("alice") as alice,
        served.client("bob") as bob,
    ):
        for client, code in ((alice, "P7781"), (bob, "B0042")):
            said_it = client.post(
                "/v1/sessions/travel/messages",
                json={"content": f"my passport number is {code}", "stream": False},
            )
            assert said_it.status_code == 200, said_it.text
        body = {"query": "passport number", "rationale": WHY}

        everywhere = alice.post("/v1/sessions/chat/recall", json={**body, "scope": "all"})
        assert everywhere.status_code == 200, everywhere.text
        fragments = everywhere.json()["fragments"]
        assert fragments and all("P7781" in f["content"] for f in fragments)
        user = next(f for f in fragments if f["role"] == "user")
        assert user["content"] == "my passport number is P7781" and user["key"] == "travel"
        latest = alice.get("/v1/sessions/travel").json()["latest"]["session_id"]
        assert user["session_id"] == latest

        # The asking key's own live thread is never recalled; scope "key" reads no live one.
        own = alice.post("/v1/sessions/travel/recall", json={**body, "scope": "all"})
        assert own.status_code == 200 and own.json()["fragments"] == []
        key_only = alice.post("/v1/sessions/travel/recall", json=body)
        assert key_only.status_code == 200 and key_only.json()["fragments"] == []
        bobs = bob.post("/v1/sessions/chat/recall", json={**body, "scope": "all"})
        assert bobs.status_code == 200, bobs.text
        assert bobs.json()["fragments"]
        assert all("B0042" in f["content"] for f in bobs.json()["fragments"])


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_sqlites_live_index_bookkeeping_is_derived_and_not_migrated(gated: Engine) -> None:
    from sessiongate.service.migrate import source_tables
    from sessiongate.store.sqlite.store import SQLiteStore

    assert isinstance(gated.store, SQLiteStore)
    await collect(gated, "the locker code is 4812", key="gym")
    assert await gated.sessions.recall("chat", ALICE, "locker", WHY, scope="all")
    db = gated.store.connection
    (through,) = db.execute("SELECT through_seq FROM recall_live").fetchone()
    assert through == 2  # the user message and the reply
    # `sessiongate migrate` copies what PostgreSQL keeps; it derives its own live index.
    assert "recall_live" not in source_tables(db) and "messages" in source_tables(db)
    await collect(gated, "/new", key="gym")
    assert db.execute("SELECT count(*) FROM recall_live").fetchone() == (0,)
