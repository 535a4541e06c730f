"""The Responses API's rows (store/responses.py) on both stores: found only by their
owner, deleted, erased with their key; conversation objects and the `edit` rotation
an item's deletion makes (DESIGN.md §14)."""

from __future__ import annotations

import pytest

from sessiongate.core.users import Caller
from sessiongate.service.conversation_objects import ConversationObjects
from sessiongate.service.engine import Engine
from sessiongate.service.responses import build_response_service
from sessiongate.service.turn.handle import InboundTurn
from sessiongate.store.responses import ResponseRecord
from tests.conftest import START

BOTH = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def record(response_id: str, owner: str, key: str) -> ResponseRecord:
    return ResponseRecord(
        response_id=response_id,
        owner=owner,
        key=key,
        tip_hash="abc",
        tip_position=2,
        body={"id": response_id, "object": "response", "output": []},
        input_items=[{"id": "item_1", "type": "message", "role": "user", "content": []}],
        created_at=START,
    )


@BOTH
async def test_rows_are_their_owners_and_go_with_their_key(engine: Engine) -> None:
    assert engine.conversations is not None
    service = build_response_service(engine.sessions, engine.conversations)
    alice, bob = Caller("alice"), Caller("bob")
    await service.store.add(record("resp_a", "alice", "k1"))
    await service.store.add(record("resp_b", "alice", "k2"))
    found = await service.get(alice, "resp_a")
    assert found == record("resp_a", "alice", "k1")
    assert await service.get(bob, "resp_a") is None
    assert not await service.delete(bob, "resp_a")
    assert await service.delete(alice, "resp_b")
    assert await service.get(alice, "resp_b") is None
    # A key's erasure takes its responses with it.
    await engine.turns.start_turn(InboundTurn("k1", alice, "hello")).wait()
    await engine.sessions.delete("k1", alice)
    assert await service.get(alice, "resp_a") is None


@BOTH
async def test_record_keeps_where_the_answer_ended(engine: Engine) -> None:
    assert engine.conversations is not None
    service = build_response_service(engine.sessions, engine.conversations)
    alice = Caller("alice")
    body = {"id": "resp_c", "object": "response", "output": []}
    await service.record(alice, "no-conversation", body, [])
    found = await service.get(alice, "resp_c")
    assert found is not None and (found.tip_hash, found.tip_position) == ("", 0)
    assert found.key == "no-conversation" and found.body == body
    # Kept again under the same id (a background response ending): the new body wins.
    ended = {**body, "status": "completed"}
    await service.record(alice, "no-conversation", ended, [])
    again = await service.get(alice, "resp_c")
    assert again is not None and again.body == ended


@BOTH
async def test_conversation_objects_and_an_edit_rotation(engine: Engine) -> None:
    assert engine.conversations is not None
    rows = build_response_service(engine.sessions, engine.conversations).store
    objects = ConversationObjects(rows, engine.sessions, engine.conversations)
    alice, bob = Caller("alice"), Caller("bob")
    made = await objects.create(
        alice,
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
        {"k": "v"},
    )
    assert await objects.get(bob, made.conversation_id) is None
    updated = await objects.update(alice, made.conversation_id, {"k": "w"})
    assert updated is not None and updated.metadata == {"k": "w"}
    items = await objects.items(made)
    assert await objects.delete_item(made, items[0].item_id)
    left = await objects.items(made)
    assert [i.item_id for i in left] == [items[1].item_id]
    rotations = await engine.sessions.store.rotations(alice.key(made.key))
    assert [r.reason.value for r in rotations] == ["edit"]
    assert await objects.delete(alice, made.conversation_id)
    assert await objects.get(alice, made.conversation_id) is None
    assert await engine.sessions.store.get_key(alice.key(made.key)) is None
