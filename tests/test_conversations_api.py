"""The Conversations API (DESIGN.md §14) through the official `openai` SDK against a
gateway on loopback: conversations created with items and metadata, read, updated and
deleted; items listed (after, limit, order), added, read and deleted — a deletion
rotates the key (reason `edit`) and the remaining items keep their ids; a response in a
conversation continues after its items; another user's ids answer as unknown ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from sessiongate.models.base import ReplyModel
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def model() -> ScriptedModel:
    return ScriptedModel("scripted")


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, model: ScriptedModel) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("conversations_api"),
        agents={"defaults": {"model": "scripted", "users": ["*"]}, "main": {}},
    )
    models: dict[str, ReplyModel] = {"scripted": model}
    with running_gateway(settings, models) as gateway:
        yield gateway


@pytest.fixture
def client(gw: Gateway) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=gw.url + "/v1", api_key=gw.keys["alice"], max_retries=0, timeout=TIMEOUT
    ) as sdk:
        yield sdk


@pytest.fixture
def rest(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT, headers=gw.auth("alice")) as c:
        yield c


def said(items: Any) -> list[str]:
    dumped = [item.model_dump() for item in items]
    return [str(d["content"][0]["text"]) for d in dumped if d["type"] == "message"]


def ids(items: Any) -> list[str]:
    return [str(item.model_dump()["id"]) for item in items]


def texts(client: openai.OpenAI, conversation_id: str) -> list[str]:
    return said(client.conversations.items.list(conversation_id, order="asc", limit=100).data)


def test_create_read_update_delete(client: openai.OpenAI) -> None:
    made = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "hello"}],
        metadata={"topic": "greetings"},
    )
    assert made.id.startswith("conv_") and made.metadata == {"topic": "greetings"}
    assert client.conversations.retrieve(made.id).id == made.id
    updated = client.conversations.update(made.id, metadata={"topic": "other"})
    assert updated.metadata == {"topic": "other"}
    assert texts(client, made.id) == ["hello"]
    deleted = client.conversations.delete(made.id)
    assert deleted.deleted and deleted.id == made.id
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(made.id)


def test_items_page_add_get(client: openai.OpenAI) -> None:
    made = client.conversations.create()
    items: Any = [{"type": "message", "role": "user", "content": f"m{i}"} for i in range(5)]
    added = client.conversations.items.create(made.id, items=items)
    assert len(added.data) == 5
    newest = client.conversations.items.list(made.id, limit=2)
    assert said(newest.data) == ["m4", "m3"]
    assert newest.has_more
    after = client.conversations.items.list(made.id, order="asc", after=ids(added.data)[1])
    assert said(after.data) == ["m2", "m3", "m4"]
    one = client.conversations.items.retrieve(ids(added.data)[2], conversation_id=made.id)
    assert ids([one]) == ids(added.data)[2:3]


def test_deleting_an_item_rotates_and_keeps_the_others_ids(
    client: openai.OpenAI, rest: httpx.Client
) -> None:
    made = client.conversations.create(
        items=[
            {"type": "message", "role": "user", "content": "keep one"},
            {"type": "message", "role": "assistant", "content": "drop me"},
            {"type": "message", "role": "user", "content": "keep two"},
        ]
    )
    before = ids(client.conversations.items.list(made.id, order="asc").data)
    client.conversations.items.delete(before[1], conversation_id=made.id)
    after = ids(client.conversations.items.list(made.id, order="asc").data)
    assert after == [before[0], before[2]]
    assert texts(client, made.id) == ["keep one", "keep two"]
    key = next(
        s["key"] for s in rest.get("/v1/sessions").json()["sessions"] if made.id[5:] in s["key"]
    )
    shown = rest.get(f"/v1/sessions/{key}").json()
    assert [r["reason"] for r in shown["rotations"]] == ["edit"]
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.delete(before[1], conversation_id=made.id)


def test_a_response_in_a_conversation_continues_after_its_items(
    client: openai.OpenAI, model: ScriptedModel
) -> None:
    made = client.conversations.create(
        items=[
            {"type": "message", "role": "user", "content": "my name is Ada"},
            {"type": "message", "role": "assistant", "content": "hello Ada"},
        ]
    )
    response = client.responses.create(model="main", input="what is my name?", conversation=made.id)
    assert response.output_text == "reply to: what is my name?"
    sent = [m["content"] for m in model.requests[-1] if m["role"] != "system"]
    assert sent == ["my name is Ada", "hello Ada", "what is my name?"]
    again = client.responses.create(
        model="main",
        conversation={"id": made.id},
        input=[
            {"type": "message", "role": "user", "content": "first"},
            {"type": "message", "role": "user", "content": "second"},
        ],
    )
    assert texts(client, made.id) == [
        "my name is Ada",
        "hello Ada",
        "what is my name?",
        response.output_text,
        "first",
        "second",
        again.output_text,
    ]
    # Deleting an item, then answering again: the edited segment is continued.
    items = ids(client.conversations.items.list(made.id, order="asc").data)
    client.conversations.items.delete(items[0], conversation_id=made.id)
    third = client.responses.create(model="main", input="third", conversation=made.id)
    assert texts(client, made.id)[0] == "hello Ada"
    assert texts(client, made.id)[-2:] == ["third", third.output_text]


def test_another_users_conversation_is_unknown(gw: Gateway, client: openai.OpenAI) -> None:
    made = client.conversations.create(items=[{"type": "message", "role": "user", "content": "x"}])
    item = ids(client.conversations.items.list(made.id).data)[0]
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT, headers=gw.auth("bob")) as bob:
        for method, path in (
            ("GET", f"/v1/conversations/{made.id}"),
            ("DELETE", f"/v1/conversations/{made.id}"),
            ("GET", f"/v1/conversations/{made.id}/items"),
            ("GET", f"/v1/conversations/{made.id}/items/{item}"),
            ("DELETE", f"/v1/conversations/{made.id}/items/{item}"),
        ):
            theirs = bob.request(method, path)
            unknown = bob.request(method, path.replace(made.id, "conv_nothing"))
            assert theirs.status_code == unknown.status_code == 404
            assert theirs.json()["error"].keys() == {"message", "type", "code", "param"}
        posted = bob.post(
            f"/v1/conversations/{made.id}/items",
            json={"items": [{"type": "message", "role": "user", "content": "intrude"}]},
        )
        assert posted.status_code == 404
        answered = bob.post(
            "/v1/responses", json={"model": "main", "input": "x", "conversation": made.id}
        )
        assert answered.status_code == 404
    assert texts(client, made.id) == ["x"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/conversations", {"items": "nope"}),
        ("POST", "/v1/conversations", {"items": [{"type": "message", "role": "x"}]}),
        ("POST", "/v1/conversations", {"metadata": {"a": 1}}),
        ("POST", "/v1/conversations/{id}/items", {"items": []}),
        ("POST", "/v1/conversations/{id}", {}),
        ("GET", "/v1/conversations/{id}/items?order=sideways", None),
        ("GET", "/v1/conversations/{id}/items?limit=0", None),
        ("GET", "/v1/conversations/{id}/items?limit=abc", None),
    ],
)
def test_bad_input_is_a_4xx_in_openais_shape(
    client: openai.OpenAI, rest: httpx.Client, method: str, path: str, body: Any
) -> None:
    made = client.conversations.create()
    answer = rest.request(method, path.replace("{id}", made.id), json=body)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"].keys() == {"message", "type", "code", "param"}
