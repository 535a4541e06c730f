"""Memory extraction through the engine (issue 22, DESIGN.md §13): after a turn and before
a compaction the control model's ops are applied on both stores — add (with the key,
segment and messages as source), update (supersedes, never overwrites), delete
(invalidates), noop — a malformed answer changes nothing, the user's own edits win; each
change is a `memory` event announced by the next turn (SSE, WebSocket, the OpenAI
routes' header) and a `memory.changed` hook; a failing or hanging model never touches
the turn."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from sessiongate.config import Settings, load_settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.memory import MemoryItem, MemorySource
from sessiongate.core.memory_extraction import EXTRACTION_SYSTEM_PROMPT, SpanMessage
from sessiongate.errors import ConfigError, ModelError
from sessiongate.models.base import ReplyModel, WireMessage
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.memory import MemoryService
from sessiongate.service.memory_extraction import MemoryExtractor
from sessiongate.service.sessions import Caller
from tests.conftest import START
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel, collect
from tests.support.hook_receiver import Receiver
from tests.support.served import relay_model, served_gateway

ALICE = Caller("alice")
KEY = "chat:alice"
SECRET = "hook-secret-0123456789abcdef"
ITEM_LINE = re.compile(r"^(mem_[0-9a-f]{32}): (.*)$", re.MULTILINE)

#: An answer given the items the model was shown (text → id) and the conversation read.
Answer = Callable[[dict[str, str], str], str]


def ops(*items: dict[str, Any]) -> str:
    return json.dumps({"memory": list(items)})


class Control:
    """The control model: extraction requests get the next scripted answer (noop once
    they run out), every other request (a compaction's summary) a short summary."""

    def __init__(self, *answers: Answer | str) -> None:
        self.answers: list[Answer | str] = list(answers)
        self.model = ScriptedModel("control", self.reply)
        self.read: list[tuple[dict[str, str], str]] = []

    def reply(self, messages: Sequence[WireMessage]) -> str:
        if messages[0]["content"] != EXTRACTION_SYSTEM_PROMPT:
            return "a short summary"
        body = str(messages[1]["content"])
        shown = {text: memory_id for memory_id, text in ITEM_LINE.findall(body)}
        conversation = body.split("<conversation>", 1)[1]
        self.read.append((shown, conversation))
        if not self.answers:
            return ops({"op": "noop"})
        answer = self.answers.pop(0)
        return answer if isinstance(answer, str) else answer(shown, conversation)

    def then(self, *answers: Answer | str) -> None:
        self.answers.extend(answers)


def settings_for(
    tmp_path: Path, database_url: str, *, hooks: list[dict[str, Any]] | None = None, **agent: Any
) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC"},
        models={"scripted": {"provider": "offline", "context_window": 4096}},
        agents={
            "defaults": {"model": "scripted", "context": {"keep_recent": 2, "compact_at": 1.0}},
            "main": {"control_model": "control", "memory": {"extract": True}, **agent},
        },
        hooks=hooks or [],
    )


@asynccontextmanager
async def extracting(
    tmp_path: Path,
    database_url: str,
    control: Control,
    *,
    hooks: list[dict[str, Any]] | None = None,
    models: dict[str, ScriptedModel] | None = None,
    **agent: Any,
) -> AsyncIterator[Engine]:
    engine = build_engine(
        settings_for(tmp_path, database_url, hooks=hooks, **agent),
        clock=ManualClock(START),
        models={"scripted": ScriptedModel(), "control": control.model, **(models or {})},
    )
    await engine.start()
    if engine.hooks is not None:
        await engine.hooks.start()
    try:
        yield engine
    finally:
        await engine.aclose()


async def turn(engine: Engine, text: str, key: str = KEY) -> list[Any]:
    events = await collect(engine, text, key=key, caller=ALICE)
    await engine.turns.drain()  # what runs after the turn: the extraction
    assert engine.memory_extractor is not None
    await engine.memory_extractor.drain()
    return events


def memory_of(engine: Engine) -> MemoryService:
    assert engine.memory is not None
    return engine.memory


async def items(engine: Engine, *, include_invalid: bool = False) -> list[MemoryItem]:
    found = await memory_of(engine).list_items("alice", include_invalid=include_invalid)
    return sorted(found, key=lambda i: i.memory_id)


def announced(events: list[Any]) -> list[dict[str, Any]]:
    return [change for e in events if e.type == "memory" for change in e.changes]


# -- add, update, delete, noop ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_add_update_delete_and_noop_each_change_what_they_say(
    tmp_path: Path, database_url: str
) -> None:
    control = Control(
        ops({"op": "add", "text": "Lives in Lyon."}, {"op": "add", "text": "Has a cat."})
    )
    async with extracting(tmp_path, database_url, control) as engine:
        first = await turn(engine, "I live in Lyon with my cat")
        sid = first[0].session_id
        lyon, cat = sorted(await items(engine), key=lambda i: i.text, reverse=True)
        assert (lyon.text, cat.text) == ("Lives in Lyon.", "Has a cat.")
        for item in (lyon, cat):
            assert item.created_by == "extraction" and item.scope == "user"
            assert item.source is not None
            assert (item.source.key, item.source.session_id) == (KEY, sid)
            assert item.source.message_ids == (f"{sid}:1", f"{sid}:2")  # the exchange read
        shown, conversation = control.read[0]
        assert shown == {}  # nothing kept yet
        assert "I live in Lyon with my cat" in conversation
        assert "reply to: I live in Lyon" in conversation

        # The model sees the items by id and updates one, deletes the other.
        control.then(
            lambda shown, _: ops(
                {"op": "update", "id": shown["Lives in Lyon."], "text": "Lives in Berlin."},
                {"op": "delete", "id": shown["Has a cat."]},
                {"op": "noop"},
            )
        )
        second = await turn(engine, "I moved to Berlin; the cat stayed with my sister")
        assert set(control.read[1][0]) == {"Lives in Lyon.", "Has a cat."}
        # The next turn announces the changes of the one before (as a compaction).
        assert sorted(announced(second), key=lambda c: c["text"]) == [
            {"op": "add", "memory_id": cat.memory_id, "text": "Has a cat."},
            {"op": "add", "memory_id": lyon.memory_id, "text": "Lives in Lyon."},
        ]
        (berlin,) = await items(engine)
        assert berlin.text == "Lives in Berlin." and berlin.created_by == "extraction"
        history = {i.memory_id: i for i in await items(engine, include_invalid=True)}
        # An update never overwrites: the old item keeps its text, invalid, superseded.
        old = history[lyon.memory_id]
        assert old.text == "Lives in Lyon." and old.invalid_at is not None
        assert old.superseded_by == berlin.memory_id
        # A delete invalidates: kept in the history, with no successor.
        gone = history[cat.memory_id]
        assert gone.invalid_at is not None and gone.superseded_by is None

        third = await turn(engine, "thanks")  # noop: nothing changes
        assert announced(third) == [
            {
                "op": "update",
                "memory_id": berlin.memory_id,
                "text": "Lives in Berlin.",
                "supersedes": lyon.memory_id,
            },
            {"op": "delete", "memory_id": cat.memory_id, "text": "Has a cat."},
        ]
        assert [e.type for e in third].index("memory") < [e.type for e in third].index("token")
        fourth = await turn(engine, "bye")
        assert announced(fourth) == []  # the noop changed nothing: nothing to announce
        assert len(await items(engine, include_invalid=True)) == 3
        # The same fact again is a repeat, not a second item.
        control.then(ops({"op": "add", "text": "lives in berlin"}))
        await turn(engine, "as I said, Berlin")
        assert [i.text for i in await items(engine)] == ["Lives in Berlin."]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_a_malformed_answer_changes_nothing_and_is_logged(
    tmp_path: Path, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    control = Control()
    async with extracting(tmp_path, database_url, control) as engine:
        kept = await memory_of(engine).add("alice", "Prefers tea.")
        unknown = "mem_" + "0" * 32
        control.then(
            "Sure! The user likes coffee now.",
            lambda shown, _: ops(
                {"op": "delete", "id": shown["Prefers tea."]},
                {"op": "forget", "id": kept.memory_id},
            ),
            ops({"op": "update", "id": unknown, "text": "Prefers coffee."}),
            ops({"op": "add"}),
            ops({"op": "add", "text": "x" * 501}),
            ops(*[{"op": "add", "text": f"Fact {n}."} for n in range(13)]),
        )
        with caplog.at_level(logging.WARNING, logger="sessiongate.service.memory_extraction"):
            for n in range(6):
                events = await turn(engine, f"I drink coffee now ({n})")
                assert events[-1].type == "end"
                assert announced(events) == []
        assert control.answers == []  # all six were asked
        assert await items(engine, include_invalid=True) == [kept]
        assert caplog.text.count("the answer was malformed, nothing changed") == 6
        assert "coffee" not in caplog.text.lower()  # never the conversation nor the answer


# -- the user's own edits win --------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_what_the_user_edited_or_forgot_is_not_brought_back_from_the_same_source(
    tmp_path: Path, database_url: str
) -> None:
    control = Control(
        ops(
            {"op": "add", "text": "Lives in Lyon."},
            {"op": "add", "text": "Likes jazz."},
            {"op": "add", "text": "Works as a nurse."},
        )
    )
    async with extracting(tmp_path, database_url, control) as engine:
        first = await turn(engine, "I live in Lyon, love jazz and work as a nurse")
        sid = first[0].session_id
        by_text = {i.text: i for i in await items(engine)}
        memory = memory_of(engine)
        edited = await memory.patch(
            "alice", by_text["Lives in Lyon."].memory_id, text="Lives near Lyon."
        )
        await memory.forget("alice", by_text["Likes jazz."].memory_id)
        pinned = await memory.patch("alice", by_text["Works as a nurse."].memory_id, pinned=True)
        assert pinned.edited_at is not None

    # A new process (no memory of what it read) compacts the segment: the span it is about
    # to summarise holds the first exchange, read again before it leaves the context.
    async with extracting(tmp_path, database_url, control) as engine:
        for n in range(2):
            await turn(engine, f"more {n}")
        control.then(
            lambda shown, _: ops(
                {"op": "add", "text": "lives in Lyon"},  # edited away by the user
                {"op": "add", "text": "Likes jazz!"},  # forgotten by the user
                {"op": "update", "id": shown["Lives near Lyon."], "text": "Lives in Lyon."},
                {"op": "delete", "id": shown["Works as a nurse."]},  # the user pinned it
                {"op": "add", "text": "Plays the cello."},  # new: fine
            )
        )
        asked = len(control.read)
        events = await collect(engine, "/compact", key=KEY, caller=ALICE)
        assert [e.status for e in events if e.type == "compaction"] == ["done"]
        assert engine.memory_extractor is not None
        await engine.memory_extractor.drain()
        assert len(control.read) == asked + 1  # the span, read once before the summary
        assert "I live in Lyon, love jazz" in control.read[-1][1]
        texts = sorted(i.text for i in await items(engine))
        assert texts == ["Lives near Lyon.", "Plays the cello.", "Works as a nurse."]
        (cello,) = [i for i in await items(engine) if i.text == "Plays the cello."]
        assert cello.source is not None and cello.source.session_id == sid
        assert f"{sid}:1" in cello.source.message_ids
        current = {i.memory_id for i in await items(engine)}
        assert edited.memory_id in current and pinned.memory_id in current
        # From another exchange (another source) the user's edited item may change.
        control.then(
            lambda shown, _: ops(
                {"op": "update", "id": shown["Lives near Lyon."], "text": "Lives in Berlin."}
            )
        )
        await turn(engine, "I moved to Berlin")
        assert "Lives in Berlin." in {i.text for i in await items(engine)}


async def test_a_compaction_reads_only_what_no_turn_read(tmp_path: Path) -> None:
    control = Control()
    async with extracting(tmp_path, "", control) as engine:
        for n in range(4):
            await turn(engine, f"turn {n}")
        assert len(control.read) == 4
        await collect(engine, "/compact", key=KEY, caller=ALICE)
        assert engine.memory_extractor is not None
        await engine.memory_extractor.drain()
        assert len(control.read) == 4  # every message of the span was read after its turn


# -- failures never touch the turn ----------------------------------------------------------


async def test_a_failing_or_hanging_model_changes_nothing_and_never_delays_the_turn(
    tmp_path: Path,
) -> None:
    failing = ScriptedModel("control", fail=ModelError("down", code="model_unavailable"))
    control = Control()
    control.model = failing
    async with extracting(tmp_path / "failing", "", control) as engine:
        events = await turn(engine, "I live in Lyon")
        assert events[-1].type == "end" and await items(engine) == []
        assert len(failing.requests) == 1

    gate = asyncio.Event()  # never set: the extraction model hangs after its first word
    hanging = ScriptedModel(
        "slow", lambda _: ops({"op": "add", "text": "Lives in Lyon."}), gate=gate
    )
    control = Control()
    async with extracting(
        tmp_path / "hanging",
        "",
        control,
        models={"slow": hanging},
        memory={"extract": True, "extract_model": "slow"},
    ) as engine:
        assert engine.memory_extractor is not None
        engine.memory_extractor.timeout = timedelta(seconds=0.5)
        started = time.monotonic()
        events = await collect(engine, "I live in Lyon", key=KEY, caller=ALICE)
        assert time.monotonic() - started < 0.4  # the turn never waits for extraction
        assert events[-1].type == "end"
        await engine.turns.drain()
        assert await items(engine) == [] and len(hanging.requests) == 1


async def test_a_reply_of_the_offline_stand_in_is_not_read(tmp_path: Path) -> None:
    """The stand-in only says the model is unavailable: nothing was said worth keeping,
    so the control model is not even asked."""
    control = Control(ops({"op": "add", "text": "Lives in Lyon."}))
    down = ScriptedModel("down", fail=ModelError("down", code="model_unavailable"))
    async with extracting(
        tmp_path, "", control, models={"down": down}, model="down", fallback_models=["offline"]
    ) as engine:
        events = await turn(engine, "I live in Lyon")
        assert events[-1].type == "end"
        assert control.read == [] and await items(engine) == []


def test_extraction_needs_a_model(tmp_path: Path) -> None:
    config = tmp_path / "sessiongate.toml"
    config.write_text("[agents.main.memory]\nextract = true\n")
    with pytest.raises(ConfigError, match="extract needs a control_model or extract_model"):
        build_engine(load_settings(config).model_copy(update={"data_dir": tmp_path}))


# -- the hook --------------------------------------------------------------------------------


async def test_changes_are_delivered_to_hooks_with_text_only_when_asked(tmp_path: Path) -> None:
    receiver = Receiver(SECRET.encode()).start()
    try:
        hooks: list[dict[str, Any]] = [
            {"url": receiver.url, "secret": SECRET, "name": "ids", "events": ["memory.changed"]},
            {
                "url": receiver.url + "?t",
                "secret": SECRET,
                "name": "texts",
                "events": ["memory.changed"],
                "include_text": True,
            },
        ]
        control = Control(ops({"op": "add", "text": "Lives in Lyon."}))
        async with extracting(tmp_path, "", control, hooks=hooks) as engine:
            events = await turn(engine, "I live in Lyon")
            deadline = time.monotonic() + 5
            while len(receiver.received) < 2:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            (item,) = await items(engine)
            await turn(engine, "ok")  # a noop: no delivery
            await asyncio.sleep(0.2)
    finally:
        receiver.stop()
    assert len(receiver.received) == 2 and all(r.signature_ok for r in receiver.received)
    assert {r.body["event"] for r in receiver.received} == {"memory.changed"}
    by_hook = {("texts" if "?t" in r.path else "ids"): r.body["data"] for r in receiver.received}
    sid = events[0].session_id
    expected = {
        "owner": "alice",
        "key": KEY,
        "agent": "main",
        "trigger": "turn",
        "turn_id": events[0].turn_id,
        "session_id": sid,
        "message_ids": [f"{sid}:1", f"{sid}:2"],
    }
    assert by_hook["ids"] == {**expected, "changes": [{"op": "add", "memory_id": item.memory_id}]}
    assert by_hook["texts"] == {
        **expected,
        "changes": [{"op": "add", "memory_id": item.memory_id, "text": "Lives in Lyon."}],
    }


# -- every transport -------------------------------------------------------------------------


def test_the_memory_event_on_sse_websocket_and_the_openai_routes(tmp_path: Path) -> None:
    counter = iter(range(100))
    control = Control(*[lambda *_: ops({"op": "add", "text": f"Fact {next(counter)}."})] * 10)
    settings = gateway_settings(
        tmp_path,
        agents={
            "defaults": {"model": "scripted"},
            "main": {"control_model": "control", "memory": {"extract": True}},
        },
    )
    models: dict[str, ReplyModel] = {"scripted": ScriptedModel(), "control": control.model}
    with (
        running_gateway(settings, models) as gw,
        httpx.Client(base_url=gw.url, headers=gw.auth("alice"), timeout=30) as http,
    ):

        def remembered(count: int) -> list[dict[str, Any]]:
            deadline = time.monotonic() + 10
            while True:
                listed = http.get("/v1/memory")
                assert listed.status_code == 200, listed.text
                found = listed.json()["items"]
                if len(found) >= count:
                    return list(found)
                assert time.monotonic() < deadline, found
                time.sleep(0.05)

        def sse_turn(content: str) -> list[tuple[str, dict[str, Any]]]:
            answer = http.post("/v1/sessions/k:1/messages", json={"content": content})
            assert answer.status_code == 200, answer.text
            events = []
            for block in answer.text.strip().split("\n\n"):
                fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
                events.append((fields["event"], json.loads(fields["data"])))
            return events

        sse_turn("I live in Lyon")
        (fact0,) = remembered(1)
        second = sse_turn("and I have a cat")
        memory_events = [data for kind, data in second if kind == "memory"]
        assert memory_events == [
            {
                "type": "memory",
                "changes": [{"op": "add", "memory_id": fact0["id"], "text": "Fact 0."}],
            }
        ]
        fact1 = next(i for i in remembered(2) if i["text"] == "Fact 1.")

        async def ws_turn() -> list[dict[str, Any]]:
            async with connect(gw.ws_url + "/v1/ws", open_timeout=5, proxy=None) as ws:
                await ws.send(gw.keys["alice"])
                assert await ws.recv() == "authenticated"
                frames = []
                await ws.recv()  # ready
                await ws.send(json.dumps({"content": "and a dog", "session_id": "k:1"}))
                while True:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    frames.append(frame)
                    if frame["type"] in ("complete", "error"):
                        return frames

        frames = asyncio.run(ws_turn())
        memory_frames = [f for f in frames if f["type"] == "memory"]
        assert len(memory_frames) == 1
        assert memory_frames[0]["changes"] == [
            {"op": "add", "memory_id": fact1["id"], "text": "Fact 1."}
        ]
        fact2 = next(i for i in remembered(3) if i["text"] == "Fact 2.")
        answer = http.post(
            "/v1/chat/completions",
            headers={"X-Session-Key": "k:1"},
            json={"model": "main", "messages": [{"role": "user", "content": "and a bird"}]},
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Memory-Changed"] == fact2["id"]
        fact3 = next(i for i in remembered(4) if i["text"] == "Fact 3.")
        streamed = http.post(
            "/v1/chat/completions",
            headers={"X-Session-Key": "k:1"},
            json={
                "model": "main",
                "stream": True,
                "messages": [{"role": "user", "content": "and a fish"}],
            },
        )
        chunks = [
            json.loads(line[6:])
            for line in streamed.text.splitlines()
            if line.startswith("data: {")
        ]
        assert streamed.headers["X-Memory-Changed"] == fact3["id"]
        marked = [c["sessiongate_memory"] for c in chunks if "sessiongate_memory" in c]
        assert marked == [{"changes": [{"op": "add", "memory_id": fact3["id"], "text": "Fact 3."}]}]


async def test_extract_reads_the_span_it_is_given(tmp_path: Path) -> None:
    """The extractor's own entry (what the compactor's hand-over ends in)."""
    control = Control(ops({"op": "add", "text": "Speaks Basque."}))
    async with extracting(tmp_path, "", control) as engine:
        extractor = engine.memory_extractor
        assert isinstance(extractor, MemoryExtractor)
        changes = await extractor.extract(
            KeyRef("alice", KEY),
            engine.turns.agent("main"),
            [SpanMessage("user", "Kaixo! I speak Basque")],
            MemorySource(KEY),
            trigger="compaction",
        )
        assert changes is not None and [c["text"] for c in changes] == ["Speaks Basque."]
        assert [e.changes for e in extractor.news(KeyRef("alice", KEY))] == [changes]
        assert extractor.news(KeyRef("alice", KEY)) == []  # announced once


# -- through `sessiongate serve` -----------------------------------------------------------

#: The control model as a `command` relay: extraction requests get the user's city once;
#: anything else (a summary) a short text.
CONTROL_RELAY = """\
import json, sys
messages = json.load(sys.stdin)["messages"]
if "durable facts about one user" not in messages[0]["content"]:
    sys.stdout.write("a short summary")
else:
    items, conversation = messages[1]["content"].split("<conversation>", 1)
    if "I live in Lyon" in conversation and "Lyon" not in items:
        sys.stdout.write(json.dumps({"memory": [{"op": "add", "text": "Lives in Lyon."}]}))
    else:
        sys.stdout.write(json.dumps({"memory": [{"op": "noop"}]}))
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_served_a_turn_leads_to_an_item_in_get_v1_memory(tmp_path: Path, database_url: str) -> None:
    script = tmp_path / "control_relay.py"
    script.write_text(CONTROL_RELAY, encoding="utf-8")
    command = json.dumps([sys.executable, str(script)])
    config = (
        f"[database]\nurl = {json.dumps(database_url)}\n"
        + relay_model(tmp_path, "echo")
        + f'[models.control]\nprovider = "command"\ncommand = {command}\n'
        + '[agents.main]\nmodel = "echo"\ncontrol_model = "control"\n'
        + "[agents.main.memory]\nextract = true\n"
    )
    users: dict[str, tuple[str, ...]] = {"alice": (), "bob": ()}
    with (
        served_gateway(tmp_path, config, users) as served,
        served.client("alice") as alice,
        served.client("bob") as bob,
    ):
        sent = alice.post(
            "/v1/sessions/home/messages", json={"content": "I live in Lyon", "stream": False}
        )
        assert sent.status_code == 200, sent.text
        assert sent.json()["reply"] == "reply from echo to: I live in Lyon"
        assert "memory" not in sent.json()
        session_id = sent.json()["session_id"]
        deadline = time.monotonic() + 30
        while not (found := alice.get("/v1/memory").json()["items"]):
            assert time.monotonic() < deadline, served.stderr()
            time.sleep(0.1)
        (item,) = found
        assert item["text"] == "Lives in Lyon." and item["created_by"] == "extraction"
        assert item["source"] == {
            "key": "home",
            "session_id": session_id,
            "message_ids": [f"{session_id}:1", f"{session_id}:2"],
        }
        assert item["invalid_at"] is None and item["pinned"] is False
        # The next turn announces it; another user neither sees nor reaches it.
        again = alice.post(
            "/v1/sessions/home/messages", json={"content": "thanks", "stream": False}
        )
        assert again.status_code == 200, again.text
        assert again.json()["memory"] == [
            {"op": "add", "memory_id": item["id"], "text": "Lives in Lyon."}
        ]
        assert bob.get("/v1/memory").json()["items"] == []
        other = bob.get(f"/v1/memory/{item['id']}")
        assert other.status_code == 404
        assert other.json()["error"]["code"] == "memory_not_found"
