"""Memory items on SQLite and PostgreSQL (DESIGN.md §13): /v1/memory through the real app
(another user's ids answer exactly as unknown ones, bad input is a 4xx, an edit keeps the
history, the cap), search, forgetting with tombstones, erasure with the user, export and
import, the memory tools in a turn, injection into turns (the items the model received,
the user message's metadata, GET .../context, a tight budget), and the same through
`sessiongate serve` and the CLI."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.api.app import create_app
from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.memory import MEMORY_HEADER, MemorySource
from sessiongate.core.segments import Role
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.memory import MemoryService
from sessiongate.service.user_erasure import user_erasure
from tests.conftest import BACKENDS, START
from tests.support.agent_models import Call, ToolModel
from tests.support.helpers import ScriptedModel, collect
from tests.support.served import served_gateway

SEGMENT = "019cadc6-9a80-7001-85e6-425bd031ea1f"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Every test here with a store runs on both.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


def settings_for(tmp_path: Path, database_url: str, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path,
        "database": {"url": database_url, "pool_size": 4},
        "lifecycle": {"timezone": "UTC"},
        "agents": {"defaults": {"model": "scripted"}},
    }
    values.update(extra)
    return Settings(**values)


class App:
    """The real app in process, with users alice, bob and root (an admin)."""

    def __init__(self, engine: Engine, keys: dict[str, str]) -> None:
        self.engine = engine
        self.keys = keys
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(engine, close_engine=False)),
            base_url="http://gateway",
        )

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}

    async def call(self, user: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return await self.client.request(method, path, headers=self.auth(user), **kwargs)

    @property
    def memory(self) -> MemoryService:
        assert self.engine.memory is not None
        return self.engine.memory


async def started(
    tmp_path: Path, database_url: str, models: dict[str, Any] | None = None, **extra: Any
) -> tuple[Engine, dict[str, str]]:
    engine = build_engine(
        settings_for(tmp_path, database_url, **extra),
        clock=ManualClock(START),
        models=models or {"scripted": ScriptedModel()},
    )
    await engine.start()
    keys = {}
    for name, admin in (("alice", False), ("bob", False), ("root", True)):
        _, keys[name] = await engine.users.add(name, admin=admin)
    return engine, keys


@pytest.fixture
async def app(tmp_path: Path, database_url: str) -> AsyncIterator[App]:
    engine, keys = await started(tmp_path, database_url, limits={"max_memory_items_per_user": 5})
    served = App(engine, keys)
    yield served
    await served.client.aclose()
    await engine.aclose()


ITEM_FIELDS = {
    "id",
    "text",
    "scope",
    "pinned",
    "source",
    "created_by",
    "created_at",
    "invalid_at",
    "superseded_by",
    "edited_at",
}


async def test_add_list_edit_history_and_forget(app: App) -> None:
    added = await app.call("alice", "POST", "/v1/memory", json={"text": " Lives in Lyon "})
    assert added.status_code == 201, added.text
    first = added.json()
    assert set(first) == ITEM_FIELDS
    assert (first["text"], first["scope"], first["pinned"], first["created_by"]) == (
        "Lives in Lyon",
        "user",
        False,
        "user",
    )
    assert first["id"].startswith("mem_") and first["source"] is None
    pinned = await app.call(
        "alice",
        "POST",
        "/v1/memory",
        json={"text": "Prefers tea", "pinned": True, "scope": "agent:main"},
    )
    assert pinned.status_code == 201 and pinned.json()["scope"] == "agent:main"

    # A new text never overwrites: a new item, the old one invalid and pointing at it.
    edited = await app.call(
        "alice", "PATCH", f"/v1/memory/{first['id']}", json={"text": "Lives in Nantes"}
    )
    assert edited.status_code == 200, edited.text
    second = edited.json()
    assert second["id"] != first["id"] and second["text"] == "Lives in Nantes"
    assert second["edited_at"] is not None
    old = (await app.call("alice", "GET", f"/v1/memory/{first['id']}")).json()
    assert old["text"] == "Lives in Lyon"
    assert old["invalid_at"] is not None and old["superseded_by"] == second["id"]
    again = await app.call("alice", "PATCH", f"/v1/memory/{first['id']}", json={"text": "x"})
    assert (again.status_code, again.json()["error"]["code"]) == (409, "memory_invalid")

    valid = (await app.call("alice", "GET", "/v1/memory")).json()
    assert [i["text"] for i in valid["items"]] == ["Lives in Nantes", "Prefers tea"]
    everything = (await app.call("alice", "GET", "/v1/memory?include_invalid=true")).json()
    assert [i["text"] for i in everything["items"]] == [
        "Lives in Nantes",
        "Prefers tea",
        "Lives in Lyon",
    ]
    scoped = (await app.call("alice", "GET", "/v1/memory?scope=agent:main")).json()
    assert [i["text"] for i in scoped["items"]] == ["Prefers tea"]
    page = (await app.call("alice", "GET", "/v1/memory?include_invalid=true&limit=2")).json()
    rest = await app.call(
        "alice", "GET", f"/v1/memory?include_invalid=true&before={page['next_before']}"
    )
    assert [i["text"] for i in rest.json()["items"]] == ["Lives in Lyon"]

    # A pin changes in place (not content): same id, stamped as the user's edit.
    unpinned = await app.call(
        "alice", "PATCH", f"/v1/memory/{pinned.json()['id']}", json={"pinned": False}
    )
    assert unpinned.json()["id"] == pinned.json()["id"] and unpinned.json()["pinned"] is False
    assert unpinned.json()["edited_at"] is not None

    hits = (await app.call("alice", "GET", "/v1/memory/search?q=where does she live")).json()
    assert [h["text"] for h in hits["items"]] == ["Lives in Nantes"]  # valid items only
    assert hits["items"][0]["score"] > 0 and hits["semantic"] is False

    # Forget: the item and the version it superseded are gone; a tombstone of each.
    gone = await app.call("alice", "DELETE", f"/v1/memory/{second['id']}")
    assert gone.status_code == 204
    for memory_id in (first["id"], second["id"]):
        missing = await app.call("alice", "GET", f"/v1/memory/{memory_id}")
        assert missing.status_code == 404
    assert await app.memory.was_forgotten_or_edited("alice", None, "lives in nantes.")
    assert await app.memory.was_forgotten_or_edited("alice", None, "Lives in Lyon")
    assert not await app.memory.was_forgotten_or_edited("alice", None, "Lives in Paris")
    assert not await app.memory.was_forgotten_or_edited("bob", None, "Lives in Lyon")
    empty = (await app.call("alice", "GET", "/v1/memory/search?q=Nantes")).json()
    assert empty["items"] == []


async def test_another_users_ids_answer_exactly_as_unknown_ones(app: App) -> None:
    mine = (await app.call("alice", "POST", "/v1/memory", json={"text": "secret"})).json()
    unknown = "mem_" + "0" * 32
    for method, body in (("GET", None), ("PATCH", {"pinned": True}), ("DELETE", None)):
        theirs = await app.call("bob", method, f"/v1/memory/{mine['id']}", json=body)
        never = await app.call("bob", method, f"/v1/memory/{unknown}", json=body)
        assert theirs.status_code == never.status_code == 404
        assert theirs.json()["error"]["code"] == never.json()["error"]["code"] == "memory_not_found"
        assert (
            theirs.json()["error"]["message"].replace(mine["id"], unknown)
            == never.json()["error"]["message"]
        )
        # An admin reads nobody's memory over the API either.
        admin = await app.call("root", method, f"/v1/memory/{mine['id']}", json=body)
        assert admin.status_code == 404
    assert (await app.call("bob", "GET", "/v1/memory")).json()["items"] == []
    assert (await app.call("bob", "GET", "/v1/memory/search?q=secret")).json()["items"] == []
    still = await app.call("alice", "GET", f"/v1/memory/{mine['id']}")
    assert still.status_code == 200 and still.json()["pinned"] is False


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/memory", {"text": ""}, 400, "invalid_text"),
        ("POST", "/v1/memory", {"text": "a\u0000b"}, 400, "invalid_text"),
        ("POST", "/v1/memory", {"text": "x" * 2001}, 413, "memory_too_large"),
        ("POST", "/v1/memory", {"text": "ok", "scope": "team:x"}, 400, "invalid_scope"),
        ("POST", "/v1/memory", {"text": "ok", "pinned": "yes"}, 400, "invalid_request"),
        ("POST", "/v1/memory", {"text": "ok", "owner": "bob"}, 400, "invalid_request"),
        ("POST", "/v1/memory", {"text": 5}, 400, "invalid_request"),
        ("GET", "/v1/memory/nope", None, 400, "invalid_memory_id"),
        ("DELETE", "/v1/memory/mem_XYZ", None, 400, "invalid_memory_id"),
        ("PATCH", "/v1/memory/" + "mem_" + "0" * 32, {}, 400, "invalid_request"),
        ("GET", "/v1/memory?limit=0", None, 400, "invalid_limit"),
        ("GET", "/v1/memory?limit=201", None, 400, "invalid_limit"),
        ("GET", "/v1/memory?scope=nope", None, 400, "invalid_scope"),
        ("GET", "/v1/memory/search", None, 400, "invalid_query"),
        ("GET", "/v1/memory/search?q=" + "x" * 2001, None, 400, "invalid_query"),
        ("GET", "/v1/memory/search?q=x&limit=51", None, 400, "invalid_limit"),
        ("POST", "/v1/memory/import", {"format": "x"}, 400, "invalid_memory_export"),
    ],
)
async def test_bad_input_is_a_clear_4xx(
    app: App, method: str, path: str, body: Any, status: int, code: str
) -> None:
    answer = await app.call("alice", method, path, json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code and answer.json()["error"]["message"]


async def test_full_text_syntax_in_a_query_is_plain_words(app: App) -> None:
    await app.call("alice", "POST", "/v1/memory", json={"text": "Drives a NEAR electric car"})
    for query in ('"', "NEAR(", "car*", "text:car", "a OR", "()", "'; DROP TABLE x"):
        answer = await app.call("alice", "GET", "/v1/memory/search", params={"q": query})
        assert answer.status_code == 200, (query, answer.text)
    hits = (await app.call("alice", "GET", "/v1/memory/search", params={"q": "car*"})).json()
    assert [h["text"] for h in hits["items"]] == ["Drives a NEAR electric car"]


async def test_the_cap_counts_valid_items_and_refuses_writing_nothing(app: App) -> None:
    ids = []
    for n in range(5):
        answer = await app.call("alice", "POST", "/v1/memory", json={"text": f"fact {n}"})
        assert answer.status_code == 201
        ids.append(answer.json()["id"])
    over = await app.call("alice", "POST", "/v1/memory", json={"text": "one too many"})
    assert (over.status_code, over.json()["error"]["code"]) == (409, "memory_limit_reached")
    assert "max_memory_items_per_user" in over.json()["error"]["message"]
    assert len((await app.call("alice", "GET", "/v1/memory")).json()["items"]) == 5
    # An edit supersedes (history does not count), a forget frees a place.
    assert (
        await app.call("alice", "PATCH", f"/v1/memory/{ids[0]}", json={"text": "fact zero"})
    ).status_code == 200
    assert (await app.call("alice", "DELETE", f"/v1/memory/{ids[1]}")).status_code == 204
    assert (await app.call("alice", "POST", "/v1/memory", json={"text": "now fits"})).is_success
    # Another user has a cap of their own.
    assert (await app.call("bob", "POST", "/v1/memory", json={"text": "mine"})).is_success


async def test_export_and_import_round_trip_the_history(app: App) -> None:
    first = (await app.call("alice", "POST", "/v1/memory", json={"text": "Lives in Lyon"})).json()
    await app.call("alice", "PATCH", f"/v1/memory/{first['id']}", json={"text": "Lives in Nantes"})
    await app.call(
        "alice",
        "POST",
        "/v1/memory",
        json={"text": "Prefers tea", "pinned": True, "scope": "key:chat:alice"},
    )
    exported = await app.call("alice", "GET", "/v1/memory/export")
    assert exported.status_code == 200
    document = exported.json()
    assert document["format"] == "sessiongate.memory" and len(document["items"]) == 3

    imported = await app.call("bob", "POST", "/v1/memory/import", json=document)
    assert imported.status_code == 201, imported.text
    assert imported.json()["imported"] == 3
    bobs = (await app.call("bob", "GET", "/v1/memory/export")).json()["items"]
    alices = document["items"]

    def shape(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        ids = {item["id"]: n for n, item in enumerate(items)}
        return [
            (
                i["text"],
                i["scope"],
                i["pinned"],
                i["created_at"],
                i["invalid_at"] is None,
                ids.get(i["superseded_by"]),
            )
            for i in items
        ]

    assert shape(bobs) == shape(alices)
    assert {i["id"] for i in bobs}.isdisjoint({i["id"] for i in alices})  # new ids
    assert {i["created_by"] for i in bobs} == {"import"}
    # Alice's items are untouched, and a broken document changes nothing.
    assert (await app.call("alice", "GET", "/v1/memory/export")).json() == document
    broken = {**document, "items": [*document["items"], {"id": "bad"}]}
    refused = await app.call("bob", "POST", "/v1/memory/import", json=broken)
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_memory_export")
    assert len((await app.call("bob", "GET", "/v1/memory/export")).json()["items"]) == 3
    # The cap holds for imports (5 here): 2 valid items more fit, 2 after those do not.
    assert (await app.call("bob", "POST", "/v1/memory/import", json=document)).is_success
    over = await app.call("bob", "POST", "/v1/memory/import", json=document)
    assert (over.status_code, over.json()["error"]["code"]) == (409, "memory_limit_reached")
    assert len((await app.call("bob", "GET", "/v1/memory")).json()["items"]) == 4


async def test_erasing_a_user_erases_their_memory_and_vectors(
    tmp_path: Path, database_url: str
) -> None:
    engine, _ = await started(tmp_path, database_url, notes={"embeddings": "builtin"})
    try:
        memory = engine.memory
        assert memory is not None and memory.embedder is not None
        kept = await memory.add("alice", "Has two cats", pinned=True)
        await memory.update_text("alice", kept.memory_id, "Has three cats", created_by="user")
        await memory.add("bob", "Has a dog")
        hits = await memory.searcher.search("alice", "pets at home")
        assert hits.semantic  # vectors took part
        report = await user_erasure(engine).erase("alice", by="root")
        assert report.counts["memory_items"] == 2
        assert report.counts["memory_vectors"] == 2
        assert report.counts["memory_tombstones"] == 1  # the edit's
        assert await memory.list_items("alice", include_invalid=True) == []
        assert await memory.store.tombstones("alice", "x") == []
        (bobs,) = await memory.list_items("bob")
        assert bobs.text == "Has a dog"
    finally:
        await engine.aclose()


# -- turns -------------------------------------------------------------------------------


def system_texts(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "system"]


async def test_pinned_items_enter_every_turn_and_are_recorded(
    tmp_path: Path, database_url: str
) -> None:
    model = ScriptedModel()
    engine, _ = await started(tmp_path, database_url, {"scripted": model})
    try:
        memory = engine.memory
        assert memory is not None
        tea = await memory.add("alice", "Prefers tea", pinned=True)
        await memory.add("alice", "Has two cats")  # not pinned: not injected by default
        await memory.add("alice", "Only for the other agent", pinned=True, scope="agent:x")
        await memory.add("alice", "Only for another key", pinned=True, scope="key:elsewhere")
        await memory.add("bob", "Bob's own", pinned=True)
        events = await collect(engine, "what should I drink?")
        assert events[-1].type == "end"
        (block,) = [t for t in system_texts(model.requests[-1]) if t.startswith(MEMORY_HEADER)]
        assert block.splitlines()[1:] == [f"- [{tea.memory_id}] Prefers tea"]
        latest = await engine.store.latest_segment(KeyRef("alice", "chat:alice"))
        (user, _) = await engine.store.list_messages(latest.session_id)
        assert user.role is Role.USER
        assert user.metadata["memory"] == [
            {"memory_id": tea.memory_id, "reason": "pinned", "score": None}
        ]
        # The preview of the next turn shows the block and its items.
        _, preview = await engine.turns.preview_context("chat:alice", _caller("alice"))
        assert [m.source for m in preview.messages].count("memory") == 1
        assert preview.memory == ({"memory_id": tea.memory_id, "reason": "pinned", "score": None},)
        # Forgotten: the next turn has no block and records nothing.
        await memory.forget("alice", tea.memory_id)
        await collect(engine, "and now?")
        assert not [t for t in system_texts(model.requests[-1]) if t.startswith(MEMORY_HEADER)]
    finally:
        await engine.aclose()


def _caller(name: str) -> Any:
    from sessiongate.core.users import Caller

    return Caller(name)


async def test_relevant_items_are_found_by_the_new_message_with_their_scores(
    tmp_path: Path, database_url: str
) -> None:
    model = ScriptedModel()
    engine, _ = await started(
        tmp_path,
        database_url,
        {"scripted": model},
        agents={
            "defaults": {"model": "scripted", "memory": {"inject": "relevant", "max_items": 1}}
        },
    )
    try:
        memory = engine.memory
        assert memory is not None
        await memory.add("alice", "Allergic to peanuts")
        cats = await memory.add("alice", "Has two cats named Miso and Tofu")
        await memory.add("alice", "Works as a nurse")
        await collect(engine, "what food should I buy for my cats?")
        (block,) = [t for t in system_texts(model.requests[-1]) if t.startswith(MEMORY_HEADER)]
        assert block.splitlines()[1:] == [f"- [{cats.memory_id}] {cats.text}"]
        latest = await engine.store.latest_segment(KeyRef("alice", "chat:alice"))
        (user, _) = await engine.store.list_messages(latest.session_id)
        (recorded,) = user.metadata["memory"]
        assert recorded["memory_id"] == cats.memory_id and recorded["reason"] == "relevant"
        assert recorded["score"] > 0
        await collect(engine, "hello there")  # matches nothing: no block at all
        assert not [t for t in system_texts(model.requests[-1]) if t.startswith(MEMORY_HEADER)]
    finally:
        await engine.aclose()


async def test_a_tight_budget_trims_memory_and_the_turn_goes_on(
    tmp_path: Path, database_url: str
) -> None:
    model = ScriptedModel()
    engine, _ = await started(
        tmp_path,
        database_url,
        {"scripted": model},
        agents={"defaults": {"model": "scripted", "token_budget": 300}},
    )
    try:
        memory = engine.memory
        assert memory is not None
        items = [
            await memory.add("alice", f"fact {n} " + "word " * 60, pinned=True) for n in range(6)
        ]
        events = await collect(engine, "hello " * 20)
        assert events[-1].type == "end"
        (block,) = [t for t in system_texts(model.requests[-1]) if t.startswith(MEMORY_HEADER)]
        shown = [line.split("]")[0][3:] for line in block.splitlines()[1:]]
        assert 0 < len(shown) < len(items)
        assert shown == [i.memory_id for i in items[: len(shown)]]  # oldest pinned kept
        sent = sum(len(str(m["content"])) for m in model.requests[-1])
        assert sent // 4 <= 300  # the whole context within the budget (estimated)
        assert model.requests[-1][-1]["content"] == "hello " * 20
    finally:
        await engine.aclose()


async def test_the_memory_tools_act_for_the_caller_with_the_turn_as_source(
    tmp_path: Path, database_url: str
) -> None:
    model = ToolModel(
        [Call("memory_save", {"text": "Birthday is 4 May", "scope": "key"}, "s1")],
        "Saved.",
        repeat_last=False,
    )
    engine, _ = await started(
        tmp_path,
        database_url,
        {model.name: model},
        agents={"main": {"model": model.name, "tools": ["memory_*"]}},
    )
    try:
        memory = engine.memory
        assert memory is not None
        events = await collect(engine, "remember my birthday is 4 May")
        assert events[-1].type == "end"
        (saved,) = await memory.list_items("alice")
        assert (saved.text, saved.scope, saved.created_by) == (
            "Birthday is 4 May",
            "key:chat:alice",
            "agent",
        )
        latest = await engine.store.latest_segment(KeyRef("alice", "chat:alice"))
        (user, *_) = await engine.store.list_messages(latest.session_id)
        assert saved.source == MemorySource("chat:alice", latest.session_id, (user.message_id,))
        assert [s.name for s in model.requests[0].options.tools] == [
            "memory_forget",
            "memory_save",
            "memory_search",
        ]
        # Search and forget through the tools; another user's id is not found.
        bobs = await memory.add("bob", "Bob's birthday")
        model.steps += [  # the steps are taken by request number
            [
                Call("memory_search", {"query": "birthday"}, "q1"),
                Call("memory_forget", {"id": bobs.memory_id}, "f1"),
            ],
            "ok",
        ]
        await collect(engine, "what do you know and forget bob's")
        *_, found, forgot = [m for m in model.requests[-1].messages if m["role"] == "tool"]
        assert f"[{saved.memory_id}] Birthday is 4 May" in str(found["content"])
        assert "Bob" not in str(found["content"])
        assert "no memory item" in str(forgot["content"])
        assert [i.text for i in await memory.list_items("bob")] == ["Bob's birthday"]
    finally:
        await engine.aclose()


# -- through `sessiongate serve` ---------------------------------------------------------

#: A reply model that answers with every system message it was given.
SYSTEM_RELAY = """\
import json, sys
body = json.load(sys.stdin)
systems = [m["content"] for m in body["messages"] if m["role"] == "system"]
sys.stdout.write("SYSTEM:" + " || ".join(systems))
"""


def test_served_memory_api_cli_and_a_turn_that_receives_the_pinned_item(tmp_path: Path) -> None:
    relay = tmp_path / "system_relay.py"
    relay.write_text(SYSTEM_RELAY, encoding="utf-8")
    command = json.dumps([__import__("sys").executable, str(relay)])
    config = (
        f'[models.relay]\nprovider = "command"\ncommand = {command}\n'
        '[agents.defaults]\nmodel = "relay"\n'
    )
    with served_gateway(tmp_path, config, {"alice": (), "bob": ()}) as served:
        with served.client("alice") as alice, served.client("bob") as bob:
            added = alice.post("/v1/memory", json={"text": "Prefers metric units", "pinned": True})
            assert added.status_code == 201, added.text
            item = added.json()
            assert bob.get(f"/v1/memory/{item['id']}").status_code == 404
            turn = alice.post("/v1/chat", json={"content": "how tall is Everest?", "stream": False})
            assert turn.status_code == 200, turn.text
            reply = turn.json()["reply"]
            assert MEMORY_HEADER in reply and f"[{item['id']}] Prefers metric units" in reply
            context = alice.get(f"/v1/sessions/{turn.json()['session_key']}/context").json()
            assert context["memory"] == [
                {"memory_id": item["id"], "reason": "pinned", "score": None}
            ]
        # The operator's CLI sees, adds and forgets the same items.
        listed = served.cli("memory", "list", "--user", "alice")
        assert listed.returncode == 0, listed.stderr
        assert item["id"] in listed.stdout and "Prefers metric units" in listed.stdout
        added_cli = served.cli("memory", "add", "Walks to work", "--user", "alice")
        assert added_cli.returncode == 0 and "added mem_" in added_cli.stdout
        forgot = served.cli("memory", "forget", item["id"], "--user", "alice")
        assert forgot.returncode == 0, forgot.stderr
        unknown = served.cli("memory", "list", "--user", "nobody")
        assert unknown.returncode == 1 and "no user named" in unknown.stderr
        with served.client("alice") as alice:
            texts = [i["text"] for i in alice.get("/v1/memory").json()["items"]]
            assert texts == ["Walks to work"]
            reply = alice.post("/v1/chat", json={"content": "again", "stream": False}).json()
            assert "Prefers metric units" not in reply["reply"]


async def test_a_failing_search_leaves_a_turn_its_pinned_items(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessiongate.config.memory import MemoryPolicy

    tea = await app.memory.add("alice", "Prefers tea", pinned=True)
    await app.memory.add("alice", "Has two cats")

    async def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the index is gone")

    monkeypatch.setattr(app.memory.searcher, "rank", broken)
    chosen = await app.memory.injection.items_for_turn(
        "alice", "main", MemoryPolicy(inject="relevant"), "chat:alice", "cats?"
    )
    assert [(c.item.memory_id, c.reason) for c in chosen] == [(tea.memory_id, "pinned")]


async def test_concurrent_adds_never_pass_the_cap(app: App) -> None:
    import asyncio

    answers = await asyncio.gather(
        *(app.call("alice", "POST", "/v1/memory", json={"text": f"fact {n}"}) for n in range(12))
    )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201] * 5 + [409] * 7
    assert len((await app.call("alice", "GET", "/v1/memory")).json()["items"]) == 5


async def test_one_patch_changes_text_pin_and_scope_together(app: App) -> None:
    first = (await app.call("alice", "POST", "/v1/memory", json={"text": "Likes jazz"})).json()
    changed = await app.call(
        "alice",
        "PATCH",
        f"/v1/memory/{first['id']}",
        json={"text": "Likes bebop", "pinned": True, "scope": "agent:main"},
    )
    assert changed.status_code == 200, changed.text
    new = changed.json()
    assert (new["text"], new["pinned"], new["scope"]) == ("Likes bebop", True, "agent:main")
    assert new["id"] != first["id"]
    old = (await app.call("alice", "GET", f"/v1/memory/{first['id']}")).json()
    assert (old["text"], old["superseded_by"]) == ("Likes jazz", new["id"])
    # A refused field changes nothing at all.
    refused = await app.call(
        "alice", "PATCH", f"/v1/memory/{new['id']}", json={"pinned": False, "text": ""}
    )
    assert refused.status_code == 400
    assert (await app.call("alice", "GET", f"/v1/memory/{new['id']}")).json()["pinned"] is True
