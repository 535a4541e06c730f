"""The Responses API (DESIGN.md §14) through the official `openai` SDK against a gateway on
loopback: create (streamed and not), the stream helper, retrieve, delete, input_items,
`previous_response_id` (append, and an older one forks), a client's own conversation id
re-sending its whole input, function tools with `function_call_output`, structured
output, hosted tools left out and said, errors in OpenAI's shape, isolation between
users."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from sessiongate.models.base import (
    ReplyModel,
)
from tests.support.client_model import PERSON, ClientModel
from tests.support.gateway import Gateway, gateway_settings, parse_sse, running_gateway

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def model() -> ClientModel:
    return ClientModel("resp", images=False)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, model: ClientModel) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("responses"),
        agents={
            "defaults": {"model": "resp", "users": ["*"]},
            "main": {"system_prompt": "You are the gateway's agent."},
            "secret": {"users": ["bob"]},
        },
    )
    models: dict[str, ReplyModel] = {"resp": model}
    with running_gateway(settings, models) as gateway:
        yield gateway


def sdk(gw: Gateway, user: str = "alice") -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gw.url + "/v1", api_key=gw.keys[user], max_retries=0, timeout=TIMEOUT
    )


@pytest.fixture
def client(gw: Gateway) -> Iterator[openai.OpenAI]:
    with sdk(gw) as c:
        yield c


@pytest.fixture
def rest(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT, headers=gw.auth("alice")) as c:
        yield c


def stored(rest: httpx.Client, key: str) -> list[tuple[str, str]]:
    shown = rest.get(f"/v1/sessions/{key}")
    assert shown.status_code == 200, shown.text
    sid = shown.json()["latest"]["session_id"]
    page = rest.get(f"/v1/sessions/{key}/segments/{sid}/messages").json()["messages"]
    return [(m["role"], m["content"]) for m in page]


def key_of(client: openai.OpenAI, **kwargs: Any) -> tuple[Response, str]:
    raw = client.responses.with_raw_response.create(**kwargs)
    return raw.parse(), raw.headers["X-Session-Key"]


def test_create_answers_a_response_kept_on_its_own_key(
    client: openai.OpenAI, rest: httpx.Client, model: ClientModel
) -> None:
    response, key = key_of(client, model="main", input="hello", instructions="Be brief.")
    assert response.id.startswith("resp_") and response.status == "completed"
    assert response.output_text.startswith("answer ") and response.output_text.endswith("hello")
    assert response.usage is not None and response.usage.output_tokens == 5
    assert key.startswith("oai:resp:")
    assert stored(rest, key) == [("user", "hello"), ("assistant", response.output_text)]
    # The instructions reach the model after the agent's own system text.
    systems = [m["content"] for m in model.last if m["role"] == "system"]
    assert systems[0] == "You are the gateway's agent." and systems[-1] == "Be brief."


def test_previous_response_id_appends_and_instructions_are_not_carried(
    client: openai.OpenAI, rest: httpx.Client, model: ClientModel
) -> None:
    first, key = key_of(client, model="main", input="one", instructions="Only once.")
    second, key2 = key_of(client, model="main", input="two", previous_response_id=first.id)
    assert key2 == key
    assert [c for _, c in stored(rest, key)] == [
        "one",
        first.output_text,
        "two",
        second.output_text,
    ]
    sent = model.last
    assert all(m["content"] != "Only once." for m in sent)
    assert [m["content"] for m in sent if m["role"] != "system"][-3:] == [
        "one",
        first.output_text,
        "two",
    ]
    assert second.previous_response_id == first.id


def test_an_older_previous_response_id_forks(client: openai.OpenAI, rest: httpx.Client) -> None:
    first, key = key_of(client, model="main", input="alpha")
    second, _ = key_of(client, model="main", input="beta", previous_response_id=first.id)
    third, _ = key_of(client, model="main", input="gamma", previous_response_id=first.id)
    shown = rest.get(f"/v1/sessions/{key}").json()
    assert [r["reason"] for r in shown["rotations"]] == ["fork"]
    assert shown["latest"]["created_reason"] == "fork"
    assert [c for _, c in stored(rest, key)] == [
        "alpha",
        first.output_text,
        "gamma",
        third.output_text,
    ]
    # The branch that was left keeps its answer: continuing it appends there.
    assert second.output_text not in [c for _, c in stored(rest, key)]


def test_streamed_events_follow_openai_sequence(client: openai.OpenAI) -> None:
    events: list[ResponseStreamEvent] = list(
        client.responses.create(model="main", input="stream me", stream=True)
    )
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.output_text == text and text.endswith("stream me")


def test_stream_helper_and_retrieve(client: openai.OpenAI) -> None:
    with client.responses.stream(model="main", input="helper") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.output_text == "".join(deltas)
    again = client.responses.retrieve(final.id)
    assert again.output_text == final.output_text and again.status == "completed"


def test_function_tool_round_trip(client: openai.OpenAI, rest: httpx.Client) -> None:
    tools: Any = [
        {
            "type": "function",
            "name": "weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"type": "web_search"},
    ]
    raw = client.responses.with_raw_response.create(
        model="main", input="weather in Paris?", tools=tools
    )
    assert raw.headers["X-Hosted-Tools-Dropped"] == "web_search"
    first = raw.parse()
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "weather"
    assert json.loads(calls[0].arguments) == {"city": "Paris"}
    assert (first.metadata or {})["sessiongate_hosted_tools_dropped"] == "web_search"
    second = client.responses.create(
        model="main",
        previous_response_id=first.id,
        tools=tools,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}],
    )
    assert second.output_text == "It is sunny."
    key = raw.headers["X-Session-Key"]
    roles = [r for r, _ in stored(rest, key)]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_streamed_function_call(client: openai.OpenAI) -> None:
    tools: Any = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    with client.responses.stream(model="main", input="look it up", tools=tools) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    call = final.output[-1]
    assert call.type == "function_call" and call.name == "lookup"


def test_structured_output_passes_through(client: openai.OpenAI, model: ClientModel) -> None:
    response = client.responses.create(
        model="main",
        input="who?",
        text={
            "format": {
                "type": "json_schema",
                "name": "person",
                "schema": {"type": "object", "properties": {"name": {"type": "string"}}},
            }
        },
    )
    assert json.loads(response.output_text) == PERSON
    fmt = model.requests[-1][1].response_format
    assert fmt is not None and fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "person"


def test_client_conversation_id_reconciles_the_whole_input(gw: Gateway, rest: httpx.Client) -> None:
    """Codex CLI's way: `store: false`, its session id in headers, the whole conversation
    as `input` each time."""
    headers = {"session-id": "codex-session-1", "thread-id": "codex-session-1"}
    with sdk(gw) as client:
        history: list[Any] = [
            {"type": "message", "role": "developer", "content": "Act as a coding agent."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ]
        raw = client.responses.with_raw_response.create(
            model="main", input=history, store=False, extra_headers=headers
        )
        first = raw.parse()
        key = raw.headers["X-Session-Key"]
        assert raw.headers["X-Session-Identity"] == "client_id"
        history += [item.model_dump(exclude_none=True) for item in first.output]
        history.append({"type": "message", "role": "user", "content": "more"})
        raw2 = client.responses.with_raw_response.create(
            model="main", input=history, store=False, extra_headers=headers
        )
        assert raw2.headers["X-Session-Key"] == key
        second = raw2.parse()
        # store: false: not retrievable, not continuable.
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(first.id)
    assert [c for _, c in stored(rest, key)] == [
        "hi",
        first.output_text,
        "more",
        second.output_text,
    ]


def test_store_false_without_ids_keeps_nothing(client: openai.OpenAI, rest: httpx.Client) -> None:
    before = rest.get("/v1/sessions").json()
    response = client.responses.create(model="main", input="forget me", store=False)
    assert response.output_text.endswith("forget me")
    assert (response.model_extra or {})["store"] is False
    assert rest.get("/v1/sessions").json() == before
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="main", input="x", previous_response_id=response.id)
    assert refused.value.code == "previous_response_not_found"


def test_delete_and_input_items(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="main",
        input=[
            {"role": "user", "content": "first"},
            {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
        ],
    )
    items = client.responses.input_items.list(response.id, order="asc")
    texts = [
        getattr(item.content[0], "text", None) for item in items.data if item.type == "message"
    ]
    assert texts == ["first", "second"]
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(response.id)


def test_another_users_response_is_unknown(gw: Gateway, client: openai.OpenAI) -> None:
    mine = client.responses.create(model="main", input="private")
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT, headers=gw.auth("bob")) as bob:
        theirs = bob.get(f"/v1/responses/{mine.id}")
        unknown = bob.get("/v1/responses/resp_doesnotexist")
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.json()["error"].keys() == {"message", "type", "code", "param"}
        assert theirs.json()["error"]["message"].replace(mine.id, "X") == unknown.json()["error"][
            "message"
        ].replace("resp_doesnotexist", "X")
        for path in (f"/v1/responses/{mine.id}/input_items",):
            assert bob.get(path).status_code == 404
        assert bob.delete(f"/v1/responses/{mine.id}").status_code == 404
        continued = bob.post(
            "/v1/responses",
            json={"model": "main", "input": "x", "previous_response_id": mine.id},
        )
        assert continued.status_code == 400
        assert continued.json()["error"]["code"] == "previous_response_not_found"
    assert client.responses.retrieve(mine.id).id == mine.id


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "main"}, "input"),
        ({"model": "main", "input": []}, "input"),
        (
            {"model": "main", "input": [{"type": "message", "role": "robot", "content": "x"}]},
            "input",
        ),
        ({"model": "main", "input": [{"type": "function_call_output", "output": "x"}]}, "input"),
        ({"model": "main", "input": [{"type": "function_call_output", "call_id": "nope"}]}, None),
        ({"model": "main", "input": "x", "tools": [{"name": "f"}]}, "tools"),
        ({"model": "main", "input": "x", "text": {"format": {"type": "yaml"}}}, "text.format"),
        ({"model": "main", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": "main", "input": [1, 2]}, None),
        ({"model": "", "input": "x"}, "model"),
        ({"model": "main", "input": "x", "previous_response_id": "resp_x"}, "previous_response_id"),
    ],
)
def test_bad_input_is_a_4xx_in_openais_shape(
    rest: httpx.Client, body: dict[str, Any], param: str | None
) -> None:
    answer = rest.post("/v1/responses", json=body)
    assert 400 <= answer.status_code < 500, answer.text
    error = answer.json()["error"]
    assert error.keys() == {"message", "type", "code", "param"}
    if param is not None:
        assert error["param"] is not None and error["param"].startswith(param), error


@pytest.mark.parametrize("query", ["limit=abc", "limit=0", "limit=101", "order=sideways"])
def test_bad_list_parameters_are_400_in_openais_shape(
    client: openai.OpenAI, rest: httpx.Client, query: str
) -> None:
    made = client.responses.create(model="main", input="listed")
    answer = rest.get(f"/v1/responses/{made.id}/input_items?{query}")
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] in ("limit", "order")


def test_unknown_and_refused_agents_are_model_not_found(rest: httpx.Client) -> None:
    for name in ("nobody", "secret"):
        answer = rest.post("/v1/responses", json={"model": name, "input": "x"})
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "model_not_found"
    assert rest.post("/v1/responses", content=b"{not json").status_code == 400


def test_shapes_validate_against_the_sdks_types(rest: httpx.Client) -> None:
    """Every streamed event and the whole response, validated (not merely constructed)
    by the installed SDK's pydantic types."""
    events = TypeAdapter(ResponseStreamEvent)
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    for body in (
        {"model": "main", "input": "shapes"},
        {"model": "main", "input": "shapes", "tools": tools},
    ):
        answer = rest.post("/v1/responses", json={**body, "stream": True})
        assert answer.status_code == 200
        seen = []
        for kind, data in parse_sse(answer.text):
            event = events.validate_python(data)
            assert event.type == kind == data["type"]
            seen.append(event)
        last = seen[-1]
        assert last.type == "response.completed"
        Response.model_validate(last.response.model_dump())
        whole = rest.post("/v1/responses", json=body)
        Response.model_validate(whole.json())


def test_an_idempotency_key_answers_one_response(client: openai.OpenAI, rest: httpx.Client) -> None:
    headers = {"Idempotency-Key": "resp-once-1"}
    first = client.responses.with_raw_response.create(
        model="main", input="only once", extra_headers=headers
    )
    again = client.responses.create(model="main", input="only once", extra_headers=headers)
    assert again.id == first.parse().id and again.output_text == first.parse().output_text
    streamed = rest.post(
        "/v1/responses",
        json={"model": "main", "input": "only once", "stream": True},
        headers=headers,
    )
    events = [
        TypeAdapter(ResponseStreamEvent).validate_python(d) for _, d in parse_sse(streamed.text)
    ]
    last = events[-1]
    assert last.type == "response.completed" and last.response.id == again.id
    assert [c for _, c in stored(rest, first.headers["X-Session-Key"])] == [
        "only once",
        again.output_text,
    ]
    other = rest.post(
        "/v1/responses", json={"model": "main", "input": "something else"}, headers=headers
    )
    assert other.status_code == 422 or 400 <= other.status_code < 500
    assert other.json()["error"].keys() == {"message", "type", "code", "param"}


def test_custom_and_hosted_tool_items_are_left_out(client: openai.OpenAI) -> None:
    items: Any = [
        {"type": "message", "role": "user", "content": "patch it"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "done"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "user", "content": "now?"},
    ]
    tools: Any = [{"type": "custom", "name": "apply_patch"}]
    response = client.responses.create(model="main", input=items, tools=tools)
    assert response.output_text.endswith("now?")


def _until_settled(client: openai.OpenAI, response_id: str) -> Response:
    deadline = time.monotonic() + 10
    while True:
        found = client.responses.retrieve(response_id)
        if found.status not in ("queued", "in_progress") or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_background_response_runs_on_and_is_kept(client: openai.OpenAI) -> None:
    started = client.responses.create(model="main", input="in the background", background=True)
    assert started.status == "in_progress" and started.background is True
    done = _until_settled(client, started.id)
    assert done.status == "completed" and done.output_text.endswith("in the background")
    # An ended response is answered as it is by a cancel.
    assert client.responses.cancel(started.id).status == "completed"


def test_background_response_can_be_cancelled(client: openai.OpenAI, rest: httpx.Client) -> None:
    started = client.responses.create(model="main", input="slow", background=True)
    running = rest.post(
        "/v1/responses",
        json={"model": "main", "input": "x", "previous_response_id": started.id},
    )
    assert running.status_code == 400
    assert running.json()["error"]["code"] == "previous_response_in_progress"
    cancelled = client.responses.cancel(started.id)
    assert cancelled.status == "cancelled"
    assert client.responses.retrieve(started.id).status == "cancelled"
    # The key is free again: the next response on it runs (a running one is refused).
    after = client.responses.create(model="main", input="next", previous_response_id=started.id)
    assert after.status == "completed"
    plain = client.responses.create(model="main", input="not in the background")
    refused = rest.post(f"/v1/responses/{plain.id}/cancel")
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "response_id"
    assert rest.post("/v1/responses/resp_unknown/cancel").status_code == 404
    no_store = rest.post(
        "/v1/responses",
        json={"model": "main", "input": "x", "background": True, "store": False},
    )
    assert no_store.status_code == 400 and no_store.json()["error"]["param"] == "background"


def test_a_stream_is_read_again_after_a_sequence_number(rest: httpx.Client) -> None:
    streamed = rest.post(
        "/v1/responses", json={"model": "main", "input": "resume me", "stream": True}
    )
    original = [data for _, data in parse_sse(streamed.text)]
    response_id = original[0]["response"]["id"]
    again = rest.get(f"/v1/responses/{response_id}?stream=true&starting_after=3")
    assert [data for _, data in parse_sse(again.text)] == original[4:]
    bad = rest.get(f"/v1/responses/{response_id}?stream=true&starting_after=x")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "starting_after"


def test_a_background_response_is_followed_as_a_stream(client: openai.OpenAI) -> None:
    started = client.responses.create(model="main", input="follow me", background=True)
    events = list(client.responses.retrieve(started.id, stream=True, starting_after=-1))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    last = events[-1]
    assert last.type == "response.completed"
    assert last.response.output_text.endswith("follow me")
    # The SDK's own helper for it.
    resumed = list(client.responses.retrieve(started.id, stream=True, starting_after=2))
    assert [e.sequence_number for e in resumed] == list(range(3, len(events)))


def test_a_streamed_background_response_runs_on_when_the_stream_is_dropped(
    client: openai.OpenAI,
) -> None:
    with client.responses.create(
        model="main", input="slow", background=True, stream=True
    ) as stream:
        first = next(iter(stream))
    assert first.type == "response.created"
    response_id = first.response.id
    assert client.responses.retrieve(response_id).status == "in_progress"
    assert client.responses.cancel(response_id).status == "cancelled"
