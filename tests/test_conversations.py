"""OpenAI-compatible conversations through the engine, on SQLite and on PostgreSQL: which
stored conversation a message list belongs to, and how the list is reconciled with it
(continuation, regenerate, edit → fork, tool results), DESIGN.md §11."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sessiongate.api.openai.messages import parse_request
from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.conversation import ClientMessage, Identity, Role, prefix_hashes
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import RotationReason
from sessiongate.core.users import Caller
from sessiongate.models.base import ModelCapabilities, WireMessage
from sessiongate.service.conversation.client_turn import ClientTurn
from sessiongate.service.conversation.locate import ConversationService
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.turn.pipeline import InboundTurn
from tests.conftest import BACKENDS
from tests.support.agent_models import Call, ToolModel
from tests.support.helpers import ScriptedModel

ALICE = Caller("alice")
Msg = dict[str, Any]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Counting(ScriptedModel):
    """Every answer differs (as a real model's do): `answer <n> to: <text>`."""

    capabilities = ModelCapabilities(tools=False, images=True, json_output=True)

    def __init__(self) -> None:
        counter = itertools.count(1)

        def reply(messages: Sequence[WireMessage]) -> str:
            content = messages[-1]["content"]
            text = content if isinstance(content, str) else "(parts)"
            return f"answer {next(counter)} to: {text}"

        super().__init__("scripted", reply)


@pytest.fixture
def model() -> Counting:
    return Counting()


@pytest.fixture
async def engine(
    tmp_path: Path, clock: ManualClock, model: Counting, database_url: str
) -> AsyncIterator[Engine]:
    settings = Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC"},
        agents={"defaults": {"model": "scripted"}, "main": {"system_prompt": "agent rules"}},
    )
    built = build_engine(settings, clock=clock, models={"scripted": model})
    await built.start()
    yield built
    await built.aclose()


def conversations(engine: Engine) -> ConversationService:
    assert engine.conversations is not None
    return engine.conversations


def u(text: str) -> Msg:
    return {"role": "user", "content": text}


def a(text: str) -> Msg:
    return {"role": "assistant", "content": text}


async def send(
    engine: Engine,
    messages: list[Msg],
    *,
    key: str | None = None,
    client_id: tuple[str, str] | None = None,
    caller: Caller = ALICE,
    tools: object = None,
) -> tuple[str, Identity, str]:
    """One request as the OpenAI route makes it: (key, how it was found, the reply)."""
    parsed = parse_request(
        messages,
        tools=tools,
        tool_choice=None,
        response_format=None,
        vision=True,
        max_attachments=1,
        max_attachment_bytes=1 << 20,
    )
    hashes = prefix_hashes(parsed.messages)
    found, identity = await conversations(engine).identify(
        caller, parsed.messages, hashes, session_key=key, client_id=client_id
    )
    turn = ClientTurn(parsed.messages, identity, parsed.system, parsed.options, hashes)
    inbound = InboundTurn(found, caller, parsed.content, client=turn)
    events = [e async for e in engine.turns.run_turn(inbound)]
    assert events[-1].type == "end", events[-1]
    reply = "".join(e.content for e in events if e.type == "token")
    return found, identity, reply


async def stored(engine: Engine, key: str, caller: Caller = ALICE) -> list[tuple[str, str]]:
    segment = await engine.sessions.latest(key, caller)
    messages = await engine.store.list_messages(segment.session_id, limit=1000)
    return [(m.role.value, m.content) for m in messages]


def seen(model: ScriptedModel) -> list[tuple[str, str]]:
    """What the model was sent last, system messages aside."""
    return [(m["role"], m["content"]) for m in model.requests[-1] if m["role"] != "system"]


async def test_a_full_history_client_continues_its_conversation(
    engine: Engine, model: Counting
) -> None:
    key, how, first = await send(engine, [u("my name is Ada")])
    assert how is Identity.NEW and key.startswith("oai:chat:")
    assert first == "answer 1 to: my name is Ada"
    again, how, _ = await send(engine, [u("my name is Ada"), a(first), u("who am I?")])
    assert (again, how) == (key, Identity.MATCHED)
    assert await stored(engine, key) == [
        ("user", "my name is Ada"),
        ("assistant", first),
        ("user", "who am I?"),
        ("assistant", "answer 2 to: who am I?"),
    ]
    assert seen(model) == [("user", "my name is Ada"), ("assistant", first), ("user", "who am I?")]


async def test_two_chats_that_open_alike_are_two_conversations(engine: Engine) -> None:
    one, _, first_one = await send(engine, [u("hi")])
    two, how, first_two = await send(engine, [u("hi")])
    assert one != two and how is Identity.NEW
    # Each continues its own: the answer each got tells them apart.
    assert (await send(engine, [u("hi"), a(first_two), u("q2")]))[0] == two
    assert (await send(engine, [u("hi"), a(first_one), u("q1")]))[0] == one
    assert [c for _, c in await stored(engine, one)][2] == "q1"
    assert [c for _, c in await stored(engine, two)][2] == "q2"


async def test_alike_conversations_of_a_deterministic_model_never_mix_their_content(
    engine: Engine, model: Counting
) -> None:
    """Both chats got the same first answer: whichever key each continues, every stored
    conversation is one the client really had."""
    model._reply = lambda messages: f"same to: {messages[-1]['content']}"
    one, _, _ = await send(engine, [u("hi")])
    two, _, _ = await send(engine, [u("hi")])
    k1, _, _ = await send(engine, [u("hi"), a("same to: hi"), u("q1")])
    k2, _, _ = await send(engine, [u("hi"), a("same to: hi"), u("q2")])
    assert {k1, k2} == {one, two}
    histories = {tuple(await stored(engine, k1)), tuple(await stored(engine, k2))}
    assert histories == {
        (("user", "hi"), ("assistant", "same to: hi"), ("user", q), ("assistant", f"same to: {q}"))
        for q in ("q1", "q2")
    }


async def test_a_regenerate_supersedes_the_last_answer_and_never_duplicates_the_question(
    engine: Engine, model: Counting
) -> None:
    key, _, a1 = await send(engine, [u("q1")])
    history = [u("q1"), a(a1), u("q2")]
    _, _, a2 = await send(engine, history)
    again, _, a3 = await send(engine, history)  # regenerate
    assert again == key and a3 != a2
    assert await stored(engine, key) == [
        ("user", "q1"),
        ("assistant", a1),
        ("user", "q2"),
        ("assistant", a2),
        ("assistant", a3),
    ]
    assert seen(model) == [("user", "q1"), ("assistant", a1), ("user", "q2")]
    segment = await engine.sessions.latest(key, ALICE)
    messages = await engine.store.list_messages(segment.session_id)
    assert messages[-1].metadata["supersedes"] == [messages[-2].message_id]
    # The old answer stays in the store, out of every later context.
    _, _, _ = await send(engine, [*history, a(a3), u("q3")])
    assert seen(model) == [
        ("user", "q1"),
        ("assistant", a1),
        ("user", "q2"),
        ("assistant", a3),
        ("user", "q3"),
    ]
    context = await engine.turns.preview_context(key, ALICE)
    assert a2 not in [m.content for m in context[1].messages]


async def test_an_edit_of_an_earlier_message_forks_into_a_new_segment(
    engine: Engine, model: Counting
) -> None:
    key, _, a1 = await send(engine, [u("q1")])
    _, _, a2 = await send(engine, [u("q1"), a(a1), u("q2")])
    before = await engine.sessions.latest(key, ALICE)
    forked, _, a2_edit = await send(engine, [u("q1"), a(a1), u("q2 edited")])
    assert forked == key
    chain = await engine.sessions.show(key, ALICE)
    assert chain.rotations[-1].reason is RotationReason.FORK
    assert chain.latest.created_reason is RotationReason.FORK
    assert chain.latest.parent_ids == (before.session_id,)
    # The shared part is copied (marked), the edited message follows; nothing rewritten.
    messages = await engine.store.list_messages(chain.latest.session_id)
    assert [(m.role.value, m.content) for m in messages] == [
        ("user", "q1"),
        ("assistant", a1),
        ("user", "q2 edited"),
        ("assistant", a2_edit),
    ]
    assert [m.metadata.get("copied_from") for m in messages[:2]] == [
        f"{before.session_id}:1",
        f"{before.session_id}:2",
    ]
    old = await engine.store.list_messages(before.session_id)
    assert [m.content for m in old] == ["q1", a1, "q2", a2]
    assert seen(model) == [("user", "q1"), ("assistant", a1), ("user", "q2 edited")]
    # The edited branch continues; going back to the old branch forks again.
    assert (await send(engine, [u("q1"), a(a1), u("q2 edited"), a(a2_edit), u("q3")]))[0] == key
    assert len((await engine.sessions.show(key, ALICE)).segments) == 2
    await send(engine, [u("q1"), a(a1), u("q2"), a(a2), u("q3 on the old branch")])
    chain = await engine.sessions.show(key, ALICE)
    assert len(chain.segments) == 3 and chain.latest.created_reason is RotationReason.FORK
    assert seen(model)[-3:] == [("user", "q2"), ("assistant", a2), ("user", "q3 on the old branch")]


async def test_an_edit_of_the_first_message_forks_with_nothing_shared(engine: Engine) -> None:
    key, _, _ = await send(engine, [u("first")], client_id=("owui", "chat-1"))
    again, how, _ = await send(engine, [u("first, edited")], client_id=("owui", "chat-1"))
    assert (again, how) == (key, Identity.CLIENT_ID)
    chain = await engine.sessions.show(key, ALICE)
    assert chain.latest.created_reason is RotationReason.FORK
    assert (await stored(engine, key))[0][1] == "first, edited"


async def test_a_client_id_names_the_conversation_and_its_first_answer_can_be_regenerated(
    engine: Engine,
) -> None:
    one, how, first = await send(engine, [u("hi")], client_id=("owui", "chat-a"))
    two, _, _ = await send(engine, [u("hi")], client_id=("owui", "chat-b"))
    assert how is Identity.CLIENT_ID and one != two and one.startswith("oai:owui:")
    _, _, again = await send(engine, [u("hi")], client_id=("owui", "chat-a"))
    assert again != first
    assert await stored(engine, one) == [("user", "hi"), ("assistant", first), ("assistant", again)]


async def test_with_a_session_key_a_single_message_is_always_new(engine: Engine) -> None:
    await send(engine, [u("hi")], key="mine")
    await send(engine, [u("hi")], key="mine")
    assert [c for _, c in await stored(engine, "mine")][::2] == ["hi", "hi"]


async def test_a_key_used_elsewhere_takes_the_clients_history_as_its_own(
    engine: Engine, model: Counting
) -> None:
    """Written by another transport, then continued by an OpenAI client sending its
    whole list: only the new message is added."""
    events = [
        e async for e in engine.turns.run_turn(InboundTurn("shared", ALICE, "from the socket"))
    ]
    reply = "".join(e.content for e in events if e.type == "token")
    history = [u("from the socket"), a(reply), u("from the sdk")]
    await send(engine, history, key="shared")
    _, _, answer = await send(engine, history, key="shared")  # and a regenerate of it
    assert [c for _, c in await stored(engine, "shared")] == [
        "from the socket",
        reply,
        "from the sdk",
        "answer 2 to: from the sdk",
        answer,
    ]


async def test_client_keys_follow_the_clients_boundaries(
    engine: Engine, clock: ManualClock
) -> None:
    """No idle or day-boundary rotation on keys made for OpenAI clients; an explicit
    key keeps the gateway's lifecycle."""
    key, _, first = await send(engine, [u("hi")], client_id=("conv", "c-1"))
    explicit, _, other = await send(engine, [u("hi")], key="explicit")
    clock.advance(timedelta(days=2))
    await send(engine, [u("hi"), a(first), u("two days later")], client_id=("conv", "c-1"))
    await send(engine, [u("hi"), a(other), u("two days later")], key="explicit")
    assert len((await engine.sessions.show(key, ALICE)).segments) == 1
    assert (await engine.sessions.show(key, ALICE)).key.overrides == {
        "lifecycle": {"idle_window": "off", "day_boundary": "off"}
    }
    assert len((await engine.sessions.show(explicit, ALICE)).segments) == 2


async def test_new_still_rotates_a_client_conversation(engine: Engine) -> None:
    """`/new` rotates; the client's list, with the command and its notice, goes on
    naming the same conversation."""
    key, _, first = await send(engine, [u("hi")])
    history = [u("hi"), a(first), u("/new")]
    again, _, notice = await send(engine, history)
    assert again == key and notice == ""  # the notice is the transport's to show
    shown = await engine.sessions.show(key, ALICE)
    assert shown.rotations[-1].reason is RotationReason.MANUAL
    rendered = "(new conversation segment: manual)\n\n"
    later, how, _ = await send(engine, [*history, a(rendered), u("fresh start")])
    assert (later, how) == (key, Identity.MATCHED)
    assert [c for _, c in await stored(engine, key)] == [
        "fresh start",
        "answer 2 to: fresh start",
    ]


async def test_a_matched_conversation_is_the_callers_own(engine: Engine) -> None:
    key, _, first = await send(engine, [u("secret")])
    other, how, _ = await send(engine, [u("secret"), a(first), u("more")], caller=Caller("bob"))
    assert how is Identity.NEW and other != key


async def test_erasing_a_key_forgets_its_conversation(engine: Engine) -> None:
    key, _, first = await send(engine, [u("hi")])
    await engine.sessions.delete(key, ALICE)
    again, how, _ = await send(engine, [u("hi"), a(first), u("more")])
    assert how is Identity.NEW and again != key
    assert await conversations(engine).index.head(KeyRef("alice", key)) is None


async def test_client_tools_are_the_clients_and_their_results_reach_the_model(
    tmp_path: Path, clock: ManualClock, database_url: str
) -> None:
    model = ToolModel(
        lambda messages, options: (
            [Call("weather", {"city": "Paris"}, "call_w")]
            if messages[-1]["role"] == "user"
            else f"It is {messages[-1]['content']}."
        )
    )
    settings = Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC"},
        agents={"defaults": {"model": model.name}},
    )
    engine = build_engine(settings, clock=clock, models={model.name: model})
    await engine.start()
    try:
        tools = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
        question = [u("weather in Paris?")]
        key, _, text = await send(engine, question, tools=tools)
        assert text == "" and [t.name for t in model.requests[-1].options.tools] == ["weather"]
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        }
        result = {"role": "tool", "tool_call_id": "call_w", "content": "sunny"}
        again, how, answer = await send(engine, [*question, call, result], tools=tools)
        assert (again, how) == (key, Identity.MATCHED)
        assert answer.strip() == "It is sunny."
        assert model.requests[-1].messages[-2:] == [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "call_w", "name": "weather", "arguments": '{"city": "Paris"}'}
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_w",
                "name": "weather",
                "content": "sunny",
                "status": "ok",
            },
        ]
        segment = await engine.sessions.latest(key, ALICE)
        messages = await engine.store.list_messages(segment.session_id)
        assert [m.role.value for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[1].metadata["client_tools"] is True
        assert messages[2].metadata["tool_call_id"] == "call_w"
    finally:
        await engine.aclose()


def test_messages_are_compared_as_the_client_shows_them() -> None:
    """Blanks around a text, `\\r\\n`, and re-encoded tool arguments do not make a
    message another one."""
    call = (
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"b":1, "a":2}'}},
    )
    spaced = (
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 2, "b": 1}'}},
    )

    def hashes(messages: list[Msg]) -> tuple[str, ...]:
        parsed = parse_request(
            messages,
            tools=None,
            tool_choice=None,
            response_format=None,
            vision=True,
            max_attachments=1,
            max_attachment_bytes=1024,
        )
        return prefix_hashes(parsed.messages)

    assert hashes([u("hi"), a("  hello\r\nthere "), u("x")]) == hashes(
        [u("hi "), a("hello\nthere"), u("x")]
    )
    one = hashes([u("hi"), {"role": "assistant", "tool_calls": list(call)}, u("x")])
    two = hashes([u("hi"), {"role": "assistant", "tool_calls": list(spaced)}, u("x")])
    assert one == two
    assert hashes([u("a"), a("b"), u("c")]) != hashes([u("a"), a("b"), u("d")])
    assert (
        ClientMessage(Role.USER, "x").fingerprint() != ClientMessage(Role.TOOL, "x").fingerprint()
    )
