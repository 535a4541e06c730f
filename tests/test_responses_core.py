"""The Responses API's pure translation (core/responses.py, core/response_events.py,
core/conversation_items.py) and the response journal's follow rule."""

from __future__ import annotations

import asyncio

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from sessiongate.api.openai.response_journal import JournalEntry, ResponseJournal
from sessiongate.core.conversation_items import page_of
from sessiongate.core.response_events import ResponseEvents, ResponseShell, replay
from sessiongate.core.responses import (
    InvalidResponseInput,
    input_messages,
    response_format_of,
    split_tools,
    tool_choice_of,
)

EVENTS = TypeAdapter(ResponseStreamEvent)


def test_items_become_chat_messages_with_calls_paired() -> None:
    messages = input_messages(
        [
            {"type": "message", "role": "developer", "content": "Rules."},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me look."}],
            },
            {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "found"},
        ],
        "Be brief.",
    )
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Rules."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]


@pytest.mark.parametrize(
    "raw",
    ["", [], [1], [{"type": "message", "role": "robot", "content": "x"}], [{"type": "nope"}]],
)
def test_bad_input_is_refused_with_its_param(raw: object) -> None:
    with pytest.raises(InvalidResponseInput) as refused:
        input_messages(raw)
    assert refused.value.param == "input"


def test_tools_format_and_choice() -> None:
    split = split_tools(
        [
            {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True},
            {"type": "web_search"},
            {"type": "web_search"},
            {"type": "file_search"},
        ]
    )
    assert split.functions == (
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "object"}, "strict": True},
        },
    )
    assert split.dropped == ("web_search", "file_search")
    schema = {"type": "json_schema", "name": "p", "schema": {"type": "object"}}
    assert response_format_of({"format": schema}) == {
        "type": "json_schema",
        "json_schema": {"name": "p", "schema": {"type": "object"}},
    }
    assert response_format_of({"format": {"type": "text"}}) == {"type": "text"}
    assert response_format_of({"verbosity": "low"}) is None
    assert tool_choice_of({"type": "function", "name": "f"}) == {
        "type": "function",
        "function": {"name": "f"},
    }


def test_events_and_their_replay_validate_and_number_from_zero() -> None:
    shell = ResponseShell("resp_1", 0, "main", tools=({"type": "web_search"},))
    numbered = ResponseEvents(shell)
    events = numbered.opening() + numbered.delta("Hel") + numbered.delta("lo")
    closing, response = numbered.end(
        [{"id": "c1", "name": "f", "arguments": "{}"}], {"prompt_tokens": 2}, "complete"
    )
    events += closing
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    for event in events:
        EVENTS.validate_python(event)
    Response.model_validate(response)
    again = replay(response)
    for event in again:
        EVENTS.validate_python(event)
    assert again[-1]["response"] == response
    kinds = [e["type"] for e in again]
    assert kinds.count("response.output_text.delta") == 1
    assert kinds.count("response.function_call_arguments.done") == 1


def test_reasoning_hosted_calls_and_text_take_output_indices_in_order() -> None:
    """Reasoning, a signed block (its signature shown only when asked), a hosted search,
    more reasoning after it, then the text: each item its own output index, in the order
    they opened, and the final output in that order; every event as the SDK types it."""
    shell = ResponseShell("resp_2", 0, "main", encrypted_reasoning=True, hosted=("web_search",))
    numbered = ResponseEvents(shell)
    events = numbered.opening()
    events += numbered.reasoning("Think")
    events += numbered.reasoning("ing.", signature="sig-1")
    events += numbered.hosted_start("call_1", "web_search", {"query": "tides"})
    events += numbered.hosted_start("call_2", "notes_search", {"query": "no item"})
    events += numbered.hosted_end("call_1", "ok")
    events += numbered.reasoning("Found it.")
    events += numbered.delta("High tide at 6.")
    closing, response = numbered.end([], {}, "complete")
    events += closing
    for event in events:
        EVENTS.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    added = [
        (e["output_index"], e["item"]["type"])
        for e in events
        if e["type"].endswith("added") and "item" in e
    ]
    assert added == [(0, "reasoning"), (1, "web_search_call"), (2, "reasoning"), (3, "message")]
    final = Response.model_validate(response)
    assert [item.type for item in final.output] == [
        "reasoning",
        "web_search_call",
        "reasoning",
        "message",
    ]
    first, search, second = final.output[0], final.output[1], final.output[2]
    assert first.type == "reasoning" and first.encrypted_content == "sig-1"
    assert [s.text for s in first.summary] == ["Thinking."]
    assert second.type == "reasoning" and second.encrypted_content is None
    assert search.type == "web_search_call" and search.status == "completed"
    assert search.action.type == "search" and search.action.query == "tides"
    # The kept response again: the same kinds of items, in the same order.
    again = replay(response)
    for event in again:
        EVENTS.validate_python(event)
    kinds = [e["item"]["type"] for e in again if e["type"] == "response.output_item.added"]
    assert kinds == ["reasoning", "web_search_call", "reasoning", "message"]


def test_pages_follow_openais_rules() -> None:
    items = [{"id": f"i{n}"} for n in range(5)]
    page = page_of(items, after=None, limit=2, order="desc")
    assert [i["id"] for i in page.data] == ["i4", "i3"] and page.has_more
    page = page_of(items, after="i1", limit=10, order="asc")
    assert [i["id"] for i in page.data] == ["i2", "i3", "i4"] and not page.has_more
    assert page_of(items, after="gone", limit=10, order="asc").data == []


async def test_a_journal_entry_is_followed_until_it_ends() -> None:
    journal = ResponseJournal(max_responses=2)
    entry = journal.open("alice", "resp_a")
    journal.open("alice", "resp_b")
    journal.open("alice", "resp_c")
    assert journal.get("alice", "resp_a") is None  # the oldest went first
    assert journal.get("bob", "resp_b") is None
    entry = JournalEntry()
    seen: list[int] = []

    async def follow() -> None:
        async for event in entry.follow(0):
            seen.append(event["sequence_number"])

    reader = asyncio.create_task(follow())
    entry.add({"type": "response.created", "sequence_number": 0})
    await asyncio.sleep(0)
    entry.add({"type": "response.in_progress", "sequence_number": 1})
    await asyncio.sleep(0)
    entry.add({"type": "response.completed", "sequence_number": 2})
    await asyncio.wait_for(reader, 1)
    assert seen == [1, 2]
