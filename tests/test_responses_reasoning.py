"""The Responses API's `max_output_tokens` and reasoning items through `sessiongate serve`
(a subprocess) whose model is an `openai` provider pointed at a local chat-completions
server, on SQLite and on PostgreSQL: the limit goes upstream as `max_tokens` and a reply
the upstream stopped for length is `incomplete` (reason `max_output_tokens`), streamed
and not; bad limits answer 400 in OpenAI's shape; `reasoning_content` / `reasoning`
deltas become `reasoning` output items with a summary part (events as the official SDK's
types define them), kept with the turn, never sent back to a chat-completions upstream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.support.gateway import parse_sse
from tests.support.openai_wire_server import WireAnswer, WireServer, openai_wire_server
from tests.support.pg import fresh_database_sync
from tests.support.served import Served, served_gateway
from tests.support.served_fake_model import fake_model_config

EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)


def _answer(body: dict[str, Any]) -> WireAnswer:
    last = body["messages"][-1]["content"]
    if last == "long":
        return WireAnswer("cut here", finish="length")
    if last == "think":
        return WireAnswer("thought out", reasoning=("Let me", " think."))
    if last == "ponder":  # Ollama's field name
        return WireAnswer("pondered", reasoning=("Hmm.",), reasoning_field="reasoning")
    return WireAnswer(f"heard: {last}")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, WireServer]]:
    directory = tmp_path_factory.mktemp(f"reasoning-{request.param}")
    with openai_wire_server(_answer) as wire, _store_section(request.param) as db:
        config = fake_model_config(wire.url, "[agents.main]\n" + db)
        with served_gateway(directory, config, {"alice": ()}) as served:
            yield served, wire


@contextmanager
def _store_section(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        yield ""
        return
    with fresh_database_sync() as url:
        yield f"[database]\nurl = {json.dumps(url)}\n"


def _client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=served.url + "/v1", api_key=served.keys["alice"], max_retries=0, timeout=30
    )


def _streamed(served: Served, body: dict[str, Any]) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {served.keys['alice']}"}
    reply = httpx.post(
        served.url + "/v1/responses", json={**body, "stream": True}, headers=headers, timeout=30
    )
    assert reply.status_code == 200, reply.text
    events = [data for _, data in parse_sse(reply.text)]
    for event in events:  # every event as the SDK's own types define it
        EVENTS.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


def test_max_output_tokens_goes_upstream_and_a_length_stop_is_incomplete(
    gateway: tuple[Served, WireServer],
) -> None:
    served, wire = gateway
    with _client(served) as client:
        plain = client.responses.create(model="main", input="hello")
        assert plain.status == "completed" and plain.incomplete_details is None
        assert "max_tokens" not in wire.requests[-1]
        assert "max_completion_tokens" not in wire.requests[-1]

        cut = client.responses.create(model="main", input="long", max_output_tokens=64)
        assert wire.requests[-1]["max_tokens"] == 64
        assert "max_completion_tokens" not in wire.requests[-1]  # a compatible server
        assert cut.status == "incomplete"
        assert cut.incomplete_details is not None
        assert cut.incomplete_details.reason == "max_output_tokens"
        assert cut.max_output_tokens == 64
        assert cut.output_text == "cut here"
        assert cut.output[0].type == "message" and cut.output[0].status == "incomplete"
        kept = client.responses.retrieve(cut.id)
        assert kept.status == "incomplete" and kept.output_text == "cut here"

        # The SDK's stream helper: its final response is only a `response.completed`'s,
        # so an incomplete one is read from the last event, as OpenAI sends it.
        with client.responses.stream(model="main", input="long", max_output_tokens=16) as stream:
            last = list(stream)[-1]
        assert last.type == "response.incomplete"
        assert last.response.status == "incomplete" and last.response.output_text == "cut here"
        assert wire.requests[-1]["max_tokens"] == 16

    events = _streamed(served, {"model": "main", "input": "long", "max_output_tokens": 20})
    assert events[-1]["type"] == "response.incomplete"
    ended = Response.model_validate(events[-1]["response"])
    assert ended.incomplete_details is not None
    assert ended.incomplete_details.reason == "max_output_tokens"


@pytest.mark.parametrize("value", [0, 15, 1_000_001, "64", True, 12.5, -3], ids=lambda v: repr(v))
def test_bad_max_output_tokens_answer_400(
    gateway: tuple[Served, WireServer], value: object
) -> None:
    served, wire = gateway
    before = len(wire.requests)
    reply = httpx.post(
        served.url + "/v1/responses",
        json={"model": "main", "input": "x", "max_output_tokens": value},
        headers={"Authorization": f"Bearer {served.keys['alice']}"},
        timeout=30,
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "max_output_tokens"
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_value"
    assert len(wire.requests) == before  # nothing went upstream


def test_reasoning_becomes_reasoning_items_kept_and_not_sent_back(
    gateway: tuple[Served, WireServer],
) -> None:
    served, wire = gateway
    with _client(served) as client:
        first = client.responses.create(
            model="main", input="think", include=["reasoning.encrypted_content"]
        )
        assert [item.type for item in first.output] == ["reasoning", "message"]
        reasoning = first.output[0]
        assert reasoning.type == "reasoning"
        assert [s.text for s in reasoning.summary] == ["Let me think."]
        # A chat-completions upstream signs nothing: nothing is made up.
        assert reasoning.encrypted_content is None
        assert first.output_text == "thought out"

        again = client.responses.create(
            model="main", input="and then?", previous_response_id=first.id
        )
        sent = wire.requests[-1]["messages"]
        assert [m["content"] for m in sent if m["role"] != "system"] == [
            "think",
            "thought out",
            "and then?",
        ]
        assert all("reasoning" not in m and "reasoning_content" not in m for m in sent)
        assert again.output_text == "heard: and then?"
        assert client.responses.retrieve(first.id).output[0].type == "reasoning"

        pondered = client.responses.create(model="main", input="ponder")
        assert pondered.output[0].type == "reasoning"
        assert [s.text for s in pondered.output[0].summary] == ["Hmm."]

    # Kept with the turn: the answer's metadata holds the reasoning.
    raw = httpx.post(
        served.url + "/v1/responses",
        json={"model": "main", "input": "think"},
        headers={"Authorization": f"Bearer {served.keys['alice']}"},
        timeout=30,
    )
    key = raw.headers["X-Session-Key"]
    with httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.keys['alice']}"}
    ) as rest:
        sid = rest.get(f"/v1/sessions/{key}").json()["latest"]["session_id"]
        page = rest.get(f"/v1/sessions/{key}/segments/{sid}/messages").json()
    answer = page["messages"][-1]
    assert answer["content"] == "thought out"
    assert answer["metadata"]["reasoning"] == [{"text": "Let me think."}]

    events = _streamed(served, {"model": "main", "input": "think"})
    kinds = [e["type"] for e in events]
    assert kinds[:9] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
    ]
    assert events[2]["item"]["type"] == "reasoning" and events[2]["output_index"] == 0
    assert events[6]["text"] == "Let me think."
    message_added = events[9]
    assert message_added["type"] == "response.output_item.added"
    assert message_added["output_index"] == 1 and message_added["item"]["type"] == "message"
    final = Response.model_validate(events[-1]["response"])
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output_text == "thought out"
