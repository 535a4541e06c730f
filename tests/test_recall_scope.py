"""Explicit recall with `scope: "key" | "all"` (DESIGN.md §13, "Recall across keys"), on
both stores: another key's archived fragment is found with scope "all" and not with "key",
another user's never, a message the safety gate classified UNSAFE never; the fragment
carries its key, segment, score and the rationale, into the turn's metadata too; with an
embedder, a message that shares no word with the query is found by its vector, and the
vectors are written after a rotation. One test runs through `sessiongate serve`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.notes import Vectors
from sessiongate.core.segments import RecallFragment, Role
from sessiongate.errors import InvalidInput
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.recall import RecallSearch, build_recall_index
from sessiongate.service.sessions import Caller
from sessiongate.service.turn.pipeline import InboundTurn, RecallRequest
from sessiongate.store.recall import RecallScope
from tests.conftest import make_settings
from tests.support.helpers import ScriptedModel, collect
from tests.support.served import relay_model, served_gateway

BOTH = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
ALICE = Caller("alice")
BOB = Caller("bob")
WHY = "the user asks for a number given in another conversation"


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


def said(found: Sequence[RecallFragment]) -> list[str]:
    """What the user said among the fragments (the scripted model echoes it too)."""
    return [f.content for f in found if f.role is Role.USER]


async def archive(engine: Engine, key: str, caller: Caller, *texts: str) -> None:
    """Say `texts` in `key`, then start a new segment, so they are archived."""
    for text in texts:
        await collect(engine, text, key=key, caller=caller)
    await collect(engine, "/new", key=key, caller=caller)


@BOTH
async def test_scope_all_finds_another_keys_archived_fragment_never_another_users(
    gated: Engine, scripted: ScriptedModel
) -> None:
    await archive(gated, "travel", ALICE, "my passport number is P7781 for the trip")
    await archive(gated, "travel", BOB, "my passport number is B0042")
    await collect(gated, "hello", key="chat", caller=ALICE)

    only_key = await gated.sessions.recall("chat", ALICE, "passport number", WHY)
    assert only_key == []
    found = await gated.sessions.recall("chat", ALICE, "passport number", WHY, scope="all")
    assert said(found) == ["my passport number is P7781 for the trip"]
    assert all("P7781" in f.content for f in found)
    travel = await gated.store.latest_segment(ALICE.key("travel"))
    fragment = next(f for f in found if f.role is Role.USER)
    assert fragment.key == "travel" and fragment.role is Role.USER
    assert fragment.session_id in travel.parent_ids and fragment.seq == 1
    assert fragment.score > 0 and fragment.rationale == WHY

    # Bob's own recall sees his, never Alice's.
    bobs = await gated.sessions.recall("travel", BOB, "passport number", WHY, scope="all")
    assert said(bobs) == ["my passport number is B0042"]
    assert all("B0042" in f.content for f in bobs)

    # In a turn: the fragment reaches the model and the user message records it.
    events = await collect(
        gated,
        "what was my passport number?",
        key="chat",
        recall=RecallRequest("passport number", WHY, 5, "all"),
    )
    assert events[-1].type == "end"
    sent = " ".join(m["content"] for m in scripted.requests[-1] if m["role"] == "system")
    assert "P7781" in sent and "key travel" in sent and "B0042" not in sent
    chat = await gated.store.latest_segment(ALICE.key("chat"))
    user = [m for m in await gated.store.list_messages(chat.session_id) if m.role is Role.USER]
    recorded = user[-1].metadata["recall"]
    assert {
        "key": "travel",
        "session_id": fragment.session_id,
        "message_id": fragment.message_id,
        "score": fragment.score,
        "rationale": WHY,
    } in recorded
    assert {r["key"] for r in recorded} == {"travel"}


@BOTH
async def test_the_current_keys_own_thread_is_left_out_and_older_segments_found(
    gated: Engine,
) -> None:
    await archive(gated, "chat", ALICE, "the locker code is 4812")
    await collect(gated, "the locker is on floor two", key="chat")
    found = await gated.sessions.recall("chat", ALICE, "locker", WHY, scope="all")
    # The latest segment's own message is in the context already: only the archived one.
    assert said(found) == ["the locker code is 4812"]
    assert all("floor two" not in f.content for f in found)


@BOTH
async def test_a_message_the_gate_classified_unsafe_is_never_recalled(gated: Engine) -> None:
    refused = await collect(gated, "zorblax the neighbour's garden gnome", key="notes")
    assert refused[-1].type == "error"
    await archive(gated, "notes", ALICE, "the garden gnome is blue")
    segments = await gated.store.chain(ALICE.key("notes"))
    stored = [m for s in segments for m in await gated.store.list_messages(s.session_id)]
    assert any(m.metadata.get("classification", {}).get("label") == "unsafe" for m in stored)

    for scope in ("key", "all"):
        found = await gated.sessions.recall("notes", ALICE, "garden gnome", WHY, scope=scope)
        assert said(found) == ["the garden gnome is blue"], scope
        found = await gated.sessions.recall("other", ALICE, "zorblax", WHY, scope="all")
        assert found == []
    # The store's own one-key recall leaves it out too.
    notes = ALICE.key("notes")
    assert await gated.store.recall(notes, "zorblax", rationale=WHY) == []
    gnome = await gated.store.recall(notes, "gnome", rationale=WHY)
    assert said(gnome) == ["the garden gnome is blue"]


async def test_a_bad_scope_is_refused_before_anything_changes(gated: Engine) -> None:
    with pytest.raises(InvalidInput) as refused:
        await gated.sessions.recall("chat", ALICE, "x", WHY, scope="everyone")
    assert refused.value.code == "invalid_recall"
    with pytest.raises(InvalidInput):
        gated.turns.start_turn(
            InboundTurn("chat", ALICE, "hi", recall=RecallRequest("x", WHY, 5, "others"))
        )
    assert await gated.store.get_key(ALICE.key("chat")) is None


class ConceptEmbedder:
    """Texts about pets point one way, about money another: a word-free similarity."""

    name = "concepts:3"
    dimensions = 3
    CONCEPTS = (("kitten", "feline", "cat"), ("salary", "pay", "money"))

    def __init__(self) -> None:
        self.embedded: list[str] = []

    async def start(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        rows = []
        for text in texts:
            lowered = text.lower()
            row = [float(any(w in lowered for w in words)) for words in self.CONCEPTS]
            rows.append([*row, 0.1])
        matrix = np.asarray(rows, dtype=np.float32)
        unit: Vectors = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        return unit

    async def aclose(self) -> None:
        return None


@BOTH
async def test_embeddings_find_a_fragment_without_a_shared_word_and_embed_after_rotation(
    gated: Engine,
) -> None:
    embedder = ConceptEmbedder()
    search = RecallSearch(build_recall_index(gated.store), embedder)
    gated.sessions.recall_search = search
    gated.sessions.on_rotation(search.rotated)
    await archive(gated, "pets", ALICE, "we adopted a feline called Miso")
    await archive(gated, "work", ALICE, "my salary goes up in March")
    wanted = {"we adopted a feline called Miso", "my salary goes up in March"}
    for _ in range(100):  # the background task embeds after each rotation
        if wanted <= set(embedder.embedded):
            break
        await asyncio.sleep(0.02)
    assert wanted <= set(embedder.embedded)
    assert len(embedder.embedded) == len(set(embedder.embedded)) == 4  # with the replies
    before = len(embedder.embedded)

    found = await gated.sessions.recall("chat", ALICE, "kitten name", WHY, scope="all")
    assert said(found)[:1] == ["we adopted a feline called Miso"]
    assert found[0].key == "pets"
    # Nothing was embedded twice: only the query.
    assert embedder.embedded[before:] == ["kitten name"]
    keyword_only = await search.search(
        ALICE.key("chat"), "kitten name", rationale=WHY, limit=5, scope="all", semantic=False
    )
    assert keyword_only == []


@BOTH
async def test_recall_embeds_what_no_rotation_embedded_and_bob_stays_apart(
    gated: Engine,
) -> None:
    await archive(gated, "pets", ALICE, "we adopted a feline called Miso")
    await archive(gated, "pets", BOB, "my cat is called Pepper")
    embedder = ConceptEmbedder()
    gated.sessions.recall_search = RecallSearch(build_recall_index(gated.store), embedder)
    found = await gated.sessions.recall("chat", ALICE, "kitten", WHY, scope="all")
    assert said(found) == ["we adopted a feline called Miso"]
    assert "my cat is called Pepper" not in embedder.embedded


def test_served_recall_scope_all_over_http(tmp_path: Path) -> None:
    # With the builtin embedder: the served gateway embeds on rotation and fuses.
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
            said = client.post(
                "/v1/sessions/travel/messages",
                json={"content": f"my passport number is {code}", "stream": False},
            )
            assert said.status_code == 200, said.text
            assert client.post("/v1/sessions/travel/new").status_code == 200
            hello = client.post(
                "/v1/sessions/chat/messages", json={"content": "hi", "stream": False}
            )
            assert hello.status_code == 200, hello.text

        body = {"query": "passport number", "rationale": WHY}
        same_key = alice.post("/v1/sessions/chat/recall", json=body)
        assert same_key.status_code == 200 and same_key.json()["fragments"] == []
        everywhere = alice.post("/v1/sessions/chat/recall", json={**body, "scope": "all"})
        assert everywhere.status_code == 200, everywhere.text
        fragments = everywhere.json()["fragments"]
        assert fragments and all("P7781" in f["content"] for f in fragments)
        user = next(f for f in fragments if f["role"] == "user")
        assert user["content"] == "my passport number is P7781"
        assert user["key"] == "travel" and user["rationale"] == WHY
        assert user["score"] > 0 and user["session_id"]
        # Bob's scope "all" never reaches Alice's keys.
        bobs = bob.post("/v1/sessions/chat/recall", json={**body, "scope": "all"})
        assert bobs.status_code == 200, bobs.text
        assert bobs.json()["fragments"]
        assert all("B0042" in f["content"] for f in bobs.json()["fragments"])

        bad = alice.post("/v1/sessions/chat/recall", json={**body, "scope": "everyone"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
        assert "scope" in bad.json()["error"]["message"]

        turn = alice.post(
            "/v1/sessions/chat/messages",
            json={"content": "what was it?", "stream": False, "recall": {**body, "scope": "all"}},
        )
        assert turn.status_code == 200, turn.text
        latest = alice.get("/v1/sessions/chat").json()["latest"]["session_id"]
        page = alice.get(f"/v1/sessions/chat/segments/{latest}/messages").json()["messages"]
        recorded = [m["metadata"]["recall"] for m in page if "recall" in m["metadata"]]
        assert {
            "key": "travel",
            "session_id": user["session_id"],
            "message_id": user["message_id"],
            "score": user["score"],
            "rationale": WHY,
        } in recorded[-1]


@BOTH
async def test_an_erased_key_leaves_recall_and_its_vectors_go(gated: Engine) -> None:
    embedder = ConceptEmbedder()
    gated.sessions.recall_search = RecallSearch(build_recall_index(gated.store), embedder)
    await archive(gated, "pets", ALICE, "the kitten is called Miso")
    await archive(gated, "work", ALICE, "the kitten calendar is on my desk")
    assert len(await gated.sessions.recall("chat", ALICE, "kitten", WHY, scope="all")) == 4
    await gated.sessions.delete("pets", ALICE)
    found = await gated.sessions.recall("chat", ALICE, "kitten", WHY, scope="all")
    assert {f.key for f in found} == {"work"} and len(found) == 2
    index = gated.sessions.recall_search.index
    vectors = await index.vectors(RecallScope("alice", None), embedder.name, embedder.dimensions)
    assert len(vectors.ids) == 2


async def test_the_sqlite_keyword_index_stays_whole_through_erasure(gated: Engine) -> None:
    await archive(gated, "pets", ALICE, "the kitten is called Miso")
    await archive(gated, "pets", BOB, "my kitten is Pepper")
    await gated.sessions.delete("pets", ALICE)
    db = gated.store.connection  # type: ignore[attr-defined]
    db.execute("INSERT INTO recall_fts (recall_fts) VALUES ('integrity-check')")
    bobs = await gated.sessions.recall("x", BOB, "kitten", WHY, scope="all")
    assert said(bobs) == ["my kitten is Pepper"]
    assert await gated.sessions.recall("x", ALICE, "kitten", WHY, scope="all") == []
