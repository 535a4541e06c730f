"""The model port's tools, images and JSON output, against local fake servers speaking each
provider's wire protocol (tests/fake_providers.py): what the request body carries, how
streamed tool calls are assembled, and the stream faults of tests/test_models_contract.py
again with tool calls in flight.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from sessiongate.errors import IncompleteStream
from sessiongate.models.anthropic.adapter import AnthropicModel, to_anthropic
from sessiongate.models.anthropic.wire import json_instruction
from sessiongate.models.anthropic.wire import tool_choice as anthropic_choice
from sessiongate.models.base import (
    TEXT_ONLY,
    ModelCapabilities,
    ModelOptions,
    ToolCallChunk,
    ToolSpec,
    WireMessage,
    capabilities_of,
)
from sessiongate.models.command import CommandModel
from sessiongate.models.offline import OfflineModel
from sessiongate.models.openai.adapter import OpenAIChatModel
from sessiongate.models.openai.wire import ToolCallPieces
from sessiongate.models.retry import BadChunk
from tests.support.fake_providers import (
    FakeCall,
    FakeServer,
    Reply,
    anthropic_error,
    anthropic_tool_events,
    consume_with,
    openai_chunk,
    openai_error,
    openai_events,
    openai_tool_chunk,
    openai_tool_events,
    split_arguments,
    sse,
)

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "find tom"}]
SEARCH = ToolSpec(
    "notes_search",
    "Search the user's notes.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
ADD = ToolSpec("notes_add", "Add a note.")
TOOLS = ModelOptions(tools=(SEARCH, ADD), tool_choice="auto")
ARGS_A = '{"query": "the cat called Tom", "limit": 5}'
ARGS_B = '{"content": "Tom likes fish"}'
CALL_A = split_arguments("call_a", "notes_search", ARGS_A, size=3)
CALL_B = split_arguments("call_b", "notes_add", ARGS_B, size=4)
PNG = "iVBORw0KGgo="  # not a real image: the adapters pass the base64 text through

Model = OpenAIChatModel | AnthropicModel


@dataclass(frozen=True)
class Provider:
    name: str
    adapter: type[Model]
    base_path: str
    upstream_model: str
    #: SSE frames of text then tool calls: `(tokens, calls, interleave, ended)`, where
    #: `ended=False` is a body that stops before the model's stop reason (and, for
    #: Anthropic, before the last block's content_block_stop).
    events: Callable[[list[str], list[FakeCall], bool, bool], list[str]]
    #: The stream's own end without the model's stop reason, after a partial tool call.
    framing_only: Callable[[list[str], list[FakeCall]], list[str]]
    error_frame: Callable[[str, str], str]
    #: A tool-argument piece whose `arguments` / `partial_json` is not a string.
    bad_piece: str


def _openai_events(tokens: list[str], calls: list[FakeCall], inter: bool, ended: bool) -> list[str]:
    if ended:
        return openai_tool_events(tokens, calls, interleave=inter)
    return openai_tool_events(tokens, calls, interleave=inter, finish=None, done=False)


def _anthropic_events(
    tokens: list[str], calls: list[FakeCall], inter: bool, ended: bool
) -> list[str]:
    # Anthropic streams blocks one after another: there is nothing to interleave.
    return anthropic_tool_events(
        tokens, calls, close_last=ended, stop_reason=ended, message_stop=ended
    )


OPENAI = Provider(
    name="openai",
    adapter=OpenAIChatModel,
    base_path="/v1",
    upstream_model="fake-model",
    events=_openai_events,
    framing_only=lambda tokens, calls: openai_tool_events(tokens, calls, finish=None),
    error_frame=lambda kind, message: sse(openai_error(message, kind)),
    bad_piece=sse(openai_tool_chunk([{"index": 0, "function": {"arguments": 42}}])),
)
ANTHROPIC = Provider(
    name="anthropic",
    adapter=AnthropicModel,
    base_path="",
    upstream_model="fake-claude",
    events=_anthropic_events,
    framing_only=lambda tokens, calls: anthropic_tool_events(
        tokens, calls, close_last=False, stop_reason=False, message_stop=True
    ),
    error_frame=lambda kind, message: sse(anthropic_error(kind, message), "error"),
    bad_piece=sse(
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta"}},
        "content_block_delta",
    ),
)


class Wire:
    def __init__(self, provider: Provider) -> None:
        self.p = provider
        self.opened: list[Model] = []

    def model(self, server: FakeServer, **overrides: Any) -> Model:
        options: dict[str, Any] = {
            "model": self.p.upstream_model,
            "base_url": server.url + self.p.base_path,
            "connect_timeout": 1.0,
            "read_timeout": 2.0,
            "max_retries": 2,
            "base_delay": 0.01,
        }
        model = self.p.adapter("fake", **(options | overrides))
        self.opened.append(model)
        return model

    def reply(self, tokens: list[str], calls: list[FakeCall], *, interleave: bool = False) -> Reply:
        return Reply(events=self.p.events(tokens, calls, interleave, True))

    def cut(self, tokens: list[str], calls: list[FakeCall], **reply: Any) -> Reply:
        """Text and calls, the last one's arguments only half sent, then the body ends."""
        *whole, last = calls
        half = FakeCall(last.call_id, last.name, last.pieces[: len(last.pieces) // 2])
        return Reply(events=self.p.events(tokens, [*whole, half], False, False), **reply)


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=lambda p: p.name)
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    made = Wire(request.param)
    yield made
    for model in made.opened:
        await model.aclose()


@pytest.fixture
async def models() -> AsyncIterator[list[Model]]:
    """Adapters a single-provider test made, closed at its end."""
    made: list[Model] = []
    yield made
    for model in made:
        await model.aclose()


def openai_model(server: FakeServer, made: list[Model]) -> OpenAIChatModel:
    model = OpenAIChatModel(
        "fake", model="fake-model", base_url=server.url + "/v1", max_retries=0, read_timeout=2.0
    )
    made.append(model)
    return model


def anthropic_model(server: FakeServer, made: list[Model]) -> AnthropicModel:
    model = AnthropicModel(
        "fake", model="fake-claude", base_url=server.url, max_retries=0, read_timeout=2.0
    )
    made.append(model)
    return model


# -- streamed tool calls, both providers ----------------------------------------------------


async def test_text_then_a_tool_call_whose_arguments_came_in_many_pieces(wire: Wire) -> None:
    assert len(CALL_A.pieces) > 10
    async with FakeServer(wire.reply(["Let me ", "look."], [CALL_A])) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.error is None and outcome.text == "Let me look."
    assert outcome.calls == [ToolCallChunk("call_a", "notes_search", ARGS_A)]
    assert outcome.order == ["text", "text", "call", "usage"]  # the call after the text
    assert json.loads(outcome.calls[0].arguments) == {"query": "the cat called Tom", "limit": 5}


async def test_two_parallel_calls_are_kept_apart(wire: Wire) -> None:
    async with FakeServer(wire.reply([], [CALL_A, CALL_B], interleave=True)) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.error is None and outcome.text == ""
    assert outcome.calls == [
        ToolCallChunk("call_a", "notes_search", ARGS_A),
        ToolCallChunk("call_b", "notes_add", ARGS_B),
    ]
    assert outcome.order == ["call", "call", "usage"]


async def test_a_call_without_arguments_has_an_empty_object(wire: Wire) -> None:
    async with FakeServer(wire.reply([], [FakeCall("call_x", "tasks_list", ())])) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.calls == [ToolCallChunk("call_x", "tasks_list", "{}")]


# -- faults with tool calls in flight ---------------------------------------------------------


async def test_a_connection_dropped_mid_tool_call_after_text_is_interrupted(wire: Wire) -> None:
    cut = wire.cut(["Looking"], [CALL_A], drop=True)
    async with FakeServer(cut, wire.reply([], [CALL_A])) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.text == "Looking" and outcome.calls == []  # half a call is no call
    assert outcome.error is not None and outcome.error.code == "model_stream_interrupted"
    assert len(server.requests) == 1


async def test_a_drop_mid_tool_call_before_anything_was_yielded_is_retried(wire: Wire) -> None:
    cut = wire.cut([], [CALL_A], drop=True)
    async with FakeServer(cut, wire.reply([], [CALL_A])) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.error is None
    assert outcome.calls == [ToolCallChunk("call_a", "notes_search", ARGS_A)]  # once
    assert len(server.requests) == 2


async def test_a_body_ending_after_a_partial_tool_call_is_incomplete(wire: Wire) -> None:
    async with FakeServer(wire.cut(["Looking"], [CALL_A]), wire.reply([], [CALL_A])) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.text == "Looking" and outcome.calls == []
    assert isinstance(outcome.error, IncompleteStream)
    assert outcome.error.code == "stream_incomplete" and outcome.usage is None
    assert len(server.requests) == 1


async def test_a_partial_tool_call_alone_is_retried_then_incomplete(wire: Wire) -> None:
    async with FakeServer(wire.cut([], [CALL_A])) as server:
        outcome = await consume_with(wire.model(server, max_retries=1), MESSAGES, TOOLS)
    assert outcome.calls == [] and outcome.text == ""
    assert isinstance(outcome.error, IncompleteStream)
    assert len(server.requests) == 2  # nothing had reached the caller


async def test_a_body_ending_in_the_second_of_two_calls(wire: Wire) -> None:
    async with FakeServer(wire.cut([], [CALL_A, CALL_B])) as server:
        outcome = await consume_with(wire.model(server, max_retries=1), MESSAGES, TOOLS)
    assert isinstance(outcome.error, IncompleteStream)
    if wire.p is ANTHROPIC:
        # The first block's content_block_stop made that call whole, and it was yielded:
        # the caller holds it, so no second attempt.
        assert outcome.calls == [ToolCallChunk("call_a", "notes_search", ARGS_A)]
        assert len(server.requests) == 1
    else:
        # OpenAI calls are whole only at the finish_reason, which never came: nothing was
        # yielded, so the request is tried again (and the retry's cut ends it).
        assert outcome.calls == []
        assert len(server.requests) == 2


async def test_the_streams_end_without_a_stop_reason_after_a_partial_call_is_incomplete(
    wire: Wire,
) -> None:
    half = FakeCall("call_a", "notes_search", CALL_A.pieces[:4])
    reply = Reply(events=wire.p.framing_only(["Hel"], [half]))
    async with FakeServer(reply) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.text == "Hel" and outcome.calls == []
    assert isinstance(outcome.error, IncompleteStream)


async def test_a_non_string_argument_piece_is_a_bad_response(wire: Wire) -> None:
    events = wire.cut(["Hi"], [CALL_A]).events
    async with FakeServer(Reply(events=[*events, wire.p.bad_piece])) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.text == "Hi" and outcome.calls == []
    assert outcome.error is not None and outcome.error.code == "model_bad_response"
    assert len(server.requests) == 1


async def test_no_retry_once_a_tool_call_was_yielded(wire: Wire) -> None:
    # No text at all: only the tool call reached the caller before the error.
    events = wire.p.events([], [CALL_A], False, True)
    if wire.p is OPENAI:  # the call is yielded at the finish chunk; cut after it
        events = events[: events.index(sse(openai_chunk(finish="tool_calls"))) + 1]
    else:  # the call is yielded at its content_block_stop; cut before the message_delta
        events = [e for e in events if "message_delta" not in e and "message_stop" not in e]
    flaky = Reply(events=[*events, wire.p.error_frame("overloaded_error", "busy")])
    async with FakeServer(flaky, wire.reply([], [CALL_A])) as server:
        outcome = await consume_with(wire.model(server), MESSAGES, TOOLS)
    assert outcome.calls == [ToolCallChunk("call_a", "notes_search", ARGS_A)]
    assert outcome.error is not None and outcome.error.code == "model_unavailable"
    assert len(server.requests) == 1  # a second attempt could ask for the call again


# -- OpenAI: the request body ------------------------------------------------------------------


async def test_openai_text_only_body_is_unchanged_byte_for_byte(models: list[Model]) -> None:
    async with FakeServer(Reply(events=openai_events(["Hi"]))) as server:
        outcome = await consume_with(openai_model(server, models), MESSAGES, ModelOptions())
    assert outcome.error is None
    expected = {
        "model": "fake-model",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert server.requests[0].raw == orjson.dumps(expected)


async def test_openai_body_carries_tools_choice_format_and_images(models: list[Model]) -> None:
    options = ModelOptions(
        tools=(SEARCH, ADD), tool_choice="notes_add", response_format={"type": "json_object"}
    )
    messages: list[WireMessage] = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image", "media_type": "image/png", "data": PNG},
            ],
        },
    ]
    async with FakeServer(Reply(events=openai_events(["A cat"]))) as server:
        outcome = await consume_with(openai_model(server, models), messages, options)
    assert outcome.error is None and outcome.text == "A cat"
    body = server.requests[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "notes_search",
                "description": "Search the user's notes.",
                "parameters": dict(SEARCH.parameters),
            },
        },
        {
            "type": "function",
            "function": {
                "name": "notes_add",
                "description": "Add a note.",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "notes_add"}}
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    }


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
async def test_openai_tool_choice_keywords_pass_as_they_are(
    models: list[Model], choice: str
) -> None:
    async with FakeServer(Reply(events=openai_events(["ok"]))) as server:
        await consume_with(
            openai_model(server, models), MESSAGES, ModelOptions(tools=(ADD,), tool_choice=choice)
        )
    assert server.requests[0].body["tool_choice"] == choice


async def test_openai_json_schema_format_passes_through_and_no_tools_means_no_choice(
    models: list[Model],
) -> None:
    schema_format = {
        "type": "json_schema",
        "json_schema": {"name": "plan", "schema": {"type": "object"}},
    }
    options = ModelOptions(tool_choice="required", response_format=schema_format)
    async with FakeServer(Reply(events=openai_events(["{}"]))) as server:
        await consume_with(openai_model(server, models), MESSAGES, options)
    body = server.requests[0].body
    assert body["response_format"] == schema_format
    assert "tools" not in body and "tool_choice" not in body


TOOL_ROUND: list[WireMessage] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "find tom and note he likes fish"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_a", "name": "notes_search", "arguments": ARGS_A},
            {"id": "call_b", "name": "notes_add", "arguments": "{not json"},
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_a",
        "name": "notes_search",
        "content": "Tom is a cat",
        "status": "ok",
    },
    {
        "role": "tool",
        "tool_call_id": "call_b",
        "name": "notes_add",
        "content": "invalid arguments",
        "status": "error",
    },
    {"role": "user", "content": "and?"},
]


async def test_openai_renders_a_tool_round_trip(models: list[Model]) -> None:
    async with FakeServer(Reply(events=openai_events(["Done."]))) as server:
        outcome = await consume_with(openai_model(server, models), TOOL_ROUND, TOOLS)
    assert outcome.error is None
    assert server.requests[0].body["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "notes_search", "arguments": ARGS_A},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "notes_add", "arguments": "{not json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "Tom is a cat"},
        {"role": "tool", "tool_call_id": "call_b", "content": "invalid arguments"},
        {"role": "user", "content": "and?"},
    ]


async def test_openai_pieces_without_index_are_whole_calls(models: list[Model]) -> None:
    # Some compatible servers send each call in one piece, without an index.
    whole = [
        {"id": "c1", "function": {"name": "notes_search", "arguments": ARGS_A}},
        {"id": "c2", "function": {"name": "notes_add", "arguments": ARGS_B}},
    ]
    events = openai_events([], finish=False, done=False)
    events += [sse(openai_tool_chunk([piece])) for piece in whole]
    events += [sse(openai_chunk(finish="tool_calls")), sse("[DONE]")]
    async with FakeServer(Reply(events=events)) as server:
        outcome = await consume_with(openai_model(server, models), MESSAGES, TOOLS)
    assert outcome.error is None
    assert [(c.call_id, c.name, c.arguments) for c in outcome.calls] == [
        ("c1", "notes_search", ARGS_A),
        ("c2", "notes_add", ARGS_B),
    ]
    assert outcome.usage is not None and outcome.usage.completion_tokens > 0  # estimated


def test_openai_pieces_that_contradict_their_call_are_bad_chunks() -> None:
    pieces = ToolCallPieces()
    pieces.add([{"index": 0, "id": "a", "function": {"name": "notes_add"}}])
    with pytest.raises(BadChunk, match="another call's id"):
        pieces.add([{"index": 0, "id": "b"}])
    with pytest.raises(BadChunk, match="index"):
        ToolCallPieces().add([{"index": "0", "id": "a"}])
    with pytest.raises(BadChunk, match="not a list"):
        ToolCallPieces().add({"index": 0})
    nameless = ToolCallPieces()
    nameless.add([{"index": 0, "id": "a", "function": {"arguments": "{}"}}])
    with pytest.raises(BadChunk, match="without a name"):
        nameless.finish()
    done = ToolCallPieces()
    done.finish()
    with pytest.raises(BadChunk, match="after the finish_reason"):
        done.add([])


def test_openai_a_call_without_an_id_gets_a_unique_one() -> None:
    first, second = ToolCallPieces(), ToolCallPieces()
    for pieces in (first, second):
        pieces.add([{"index": 0, "function": {"name": "tasks_list", "arguments": "{}"}}])
    (a,), (b,) = first.finish(), second.finish()
    assert a.call_id.startswith("call_") and a.call_id != b.call_id


# -- Anthropic: the request body ---------------------------------------------------------------


async def test_anthropic_body_carries_tools_choice_images_and_the_json_instruction(
    models: list[Model],
) -> None:
    options = ModelOptions(
        tools=(SEARCH,), tool_choice="required", response_format={"type": "json_object"}
    )
    messages: list[WireMessage] = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "media_type": "image/jpeg", "data": PNG},
                {"type": "text", "text": "  "},  # empty text blocks are refused: dropped
            ],
        },
    ]
    async with FakeServer(Reply(events=anthropic_tool_events(["{}"], []))) as server:
        outcome = await consume_with(anthropic_model(server, models), messages, options)
    assert outcome.error is None
    body = server.requests[0].body
    assert body["tools"] == [
        {
            "name": "notes_search",
            "description": "Search the user's notes.",
            "input_schema": dict(SEARCH.parameters),
        }
    ]
    assert body["tool_choice"] == {"type": "any"}
    assert "response_format" not in body
    assert body["system"] == "Be brief.\n\n" + json_instruction({"type": "json_object"})
    assert "one JSON object only" in body["system"]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG},
                },
            ],
        }
    ]


async def test_anthropic_text_only_body_has_no_tool_fields(models: list[Model]) -> None:
    async with FakeServer(Reply(events=anthropic_tool_events(["Hi"], []))) as server:
        await consume_with(anthropic_model(server, models), MESSAGES, ModelOptions())
    body = server.requests[0].body
    assert set(body) == {"model", "max_tokens", "system", "messages", "stream"}
    assert body["messages"] == [{"role": "user", "content": "find tom"}]


def test_anthropic_tool_choice_and_json_schema_instruction() -> None:
    assert anthropic_choice("auto") == {"type": "auto"}
    assert anthropic_choice("required") == {"type": "any"}
    assert anthropic_choice("none") == {"type": "none"}
    assert anthropic_choice("notes_add") == {"type": "tool", "name": "notes_add"}
    schema = {"type": "object", "required": ["plan"]}
    text = json_instruction({"type": "json_schema", "json_schema": {"schema": schema}})
    assert text.endswith('{"type":"object","required":["plan"]}')
    assert json_instruction(None) == "" and json_instruction({"type": "text"}) == ""


def test_anthropic_tool_round_trip_alternates_and_merges() -> None:
    system, turns = to_anthropic(TOOL_ROUND)
    assert system == "Be brief."
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"] == [
        {
            "type": "tool_use",
            "id": "call_a",
            "name": "notes_search",
            "input": {"query": "the cat called Tom", "limit": 5},
        },
        # The arguments were not JSON: answered with an error, replayed as an empty object.
        {"type": "tool_use", "id": "call_b", "name": "notes_add", "input": {}},
    ]
    # Both results and the user's next message are one user turn, results first.
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_a", "content": "Tom is a cat"},
        {
            "type": "tool_result",
            "tool_use_id": "call_b",
            "content": "invalid arguments",
            "is_error": True,
        },
        {"type": "text", "text": "and?"},
    ]


def test_anthropic_interrupted_results_are_errors_and_assistant_text_leads() -> None:
    _, turns = to_anthropic(
        [
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [{"id": "t1", "name": "weather_current", "arguments": "[1]"}],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "", "status": "interrupted"},
        ]
    )
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]  # placeholder first
    assert turns[1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "t1", "name": "weather_current", "input": {}},
    ]
    assert turns[2]["content"] == [{"type": "tool_result", "tool_use_id": "t1", "is_error": True}]


async def test_anthropic_sends_the_round_trip_as_rendered(models: list[Model]) -> None:
    async with FakeServer(Reply(events=anthropic_tool_events(["Done."], []))) as server:
        outcome = await consume_with(anthropic_model(server, models), TOOL_ROUND, TOOLS)
    assert outcome.error is None and outcome.text == "Done."
    body = server.requests[0].body
    assert body["messages"] == to_anthropic(TOOL_ROUND)[1]
    assert body["tool_choice"] == {"type": "auto"}
    assert [t["name"] for t in body["tools"]] == ["notes_search", "notes_add"]


async def test_anthropic_tool_use_stop_reason_is_a_normal_end(models: list[Model]) -> None:
    events = anthropic_tool_events(["Sure."], [CALL_B], message_stop=False)
    assert any('"stop_reason": "tool_use"' in e for e in events)
    async with FakeServer(Reply(events=events)) as server:
        outcome = await consume_with(anthropic_model(server, models), MESSAGES, TOOLS)
    assert outcome.error is None
    assert outcome.calls == [ToolCallChunk("call_b", "notes_add", ARGS_B)]
    assert outcome.usage is not None and outcome.usage.completion_tokens == 5


# -- capabilities and the text-only models ------------------------------------------------------

PARTS_MESSAGES: list[WireMessage] = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "media_type": "image/png", "data": PNG},
            {"type": "text", "text": "there"},
        ],
    },
]


def test_capabilities_declared_by_each_adapter() -> None:
    full = ModelCapabilities(tools=True, images=True, json_output=True)
    assert OpenAIChatModel.capabilities == full and AnthropicModel.capabilities == full
    assert capabilities_of(OfflineModel()) == TEXT_ONLY
    assert capabilities_of(CommandModel("c", ["true"])) == TEXT_ONLY


async def test_offline_accepts_options_and_content_parts() -> None:
    outcome = await consume_with(OfflineModel(), PARTS_MESSAGES, TOOLS)
    assert outcome.error is None and outcome.calls == []
    assert "\u201chello\nthere\u201d" in outcome.text
    assert outcome.usage is not None and outcome.usage.prompt_tokens > 3


RELAY = """
import json, sys
turn = json.load(sys.stdin)
content = turn["messages"][-1]["content"]
sys.stdout.write(type(content).__name__ + ":" + content)
"""


async def test_command_accepts_options_and_relays_parts_as_text() -> None:
    model = CommandModel("c", [sys.executable, "-c", RELAY], timeout=10.0)
    outcome = await consume_with(model, PARTS_MESSAGES, TOOLS)
    assert outcome.error is None and outcome.calls == []
    assert outcome.text == "str:hello\nthere"
    assert outcome.usage is not None and outcome.usage.prompt_tokens > 3
