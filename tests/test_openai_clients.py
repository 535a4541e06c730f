"""Clients nobody here wrote, against a real gateway on loopback (DESIGN.md §11): the
official `openai` SDK sending whole conversations (continue, regenerate, edit, client
tools streamed and not, structured output), LangChain's ChatOpenAI, and Open WebUI's
requests as it really sends them (headers and body), replayed with httpx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from sessiongate.api.openai.messages import fit_client_tools, parse_request
from sessiongate.config.handoff import HandoffConfig
from sessiongate.models.base import (
    ReplyModel,
)
from tests.support.client_model import PERSON, ClientModel
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def model() -> ClientModel:
    return ClientModel()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, model: ClientModel) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("clients"),
        agents={
            # Every test user may name every agent here (core/agent_access.py).
            "defaults": {"model": "client", "users": ["*"]},
            "main": {"system_prompt": "You are the gateway's agent."},
            "titles": {"history": "none", "system_prompt": "Write titles."},
            "plain": {"model": "text-only"},
        },
    )
    models: dict[str, ReplyModel] = {"client": model, "text-only": ScriptedModel("text-only")}
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


def u(text: str) -> Any:
    return {"role": "user", "content": text}


def a(text: str) -> Any:
    return {"role": "assistant", "content": text}


def latest(rest: httpx.Client, key: str) -> list[dict[str, Any]]:
    shown = rest.get(f"/v1/sessions/{key}")
    assert shown.status_code == 200, shown.text
    sid = shown.json()["latest"]["session_id"]
    page = rest.get(f"/v1/sessions/{key}/segments/{sid}/messages")
    return list(page.json()["messages"])


def contents(rest: httpx.Client, key: str) -> list[str]:
    return [m["content"] for m in latest(rest, key)]


def create(client: openai.OpenAI, messages: list[Any], **kwargs: Any) -> tuple[str, str]:
    """(the key the gateway used, the reply)."""
    raw = client.chat.completions.with_raw_response.create(
        model="main", messages=messages, **kwargs
    )
    return raw.headers["x-session-key"], raw.parse().choices[0].message.content or ""


def stream(client: openai.OpenAI, messages: list[Any], **kwargs: Any) -> tuple[str, str]:
    with client.chat.completions.with_streaming_response.create(
        model="main", messages=messages, stream=True, **kwargs
    ) as response:
        key = response.headers["x-session-key"]
        text = "".join(c.choices[0].delta.content or "" for c in response.parse() if c.choices)
    return key, text


# -- the openai SDK, sending the whole conversation every time -----------------------------


def test_sdk_full_history_continues_one_conversation(
    client: openai.OpenAI, rest: httpx.Client, model: ClientModel
) -> None:
    system = {"role": "system", "content": "Answer in English."}
    key, first = create(client, [system, u("my name is Ada")])
    history = [system, u("my name is Ada"), a(first), u("what is my name?")]
    again, second = stream(client, history)
    assert again == key
    assert contents(rest, key) == ["my name is Ada", first, "what is my name?", second]
    # The client's system message reaches the model after the agent's own, once.
    assert [(m["role"], m["content"]) for m in model.last] == [
        ("system", "You are the gateway's agent."),
        ("system", "Answer in English."),
        ("user", "my name is Ada"),
        ("assistant", first),
        ("user", "what is my name?"),
    ]
    assert latest(rest, key)[0]["metadata"]["client_system"] == ["Answer in English."]


def test_sdk_two_chats_opening_with_hi_are_two_conversations(
    client: openai.OpenAI, rest: httpx.Client
) -> None:
    one, first_one = create(client, [u("hi")])
    two, first_two = create(client, [u("hi")])
    assert one != two
    assert create(client, [u("hi"), a(first_one), u("in chat one")])[0] == one
    assert create(client, [u("hi"), a(first_two), u("in chat two")])[0] == two
    assert contents(rest, one)[2] == "in chat one" and contents(rest, two)[2] == "in chat two"


def test_sdk_regenerate_supersedes_the_answer(
    client: openai.OpenAI, rest: httpx.Client, model: ClientModel
) -> None:
    key, first = create(client, [u("tell me a joke")])
    history = [u("tell me a joke"), a(first), u("another")]
    _, old = create(client, history)
    again, new = stream(client, history)
    assert again == key and new != old
    messages = latest(rest, key)
    assert [m["content"] for m in messages] == ["tell me a joke", first, "another", old, new]
    assert messages[-1]["metadata"]["supersedes"] == [messages[-2]["message_id"]]
    assert old not in [m["content"] for m in model.last]
    context = rest.get(f"/v1/sessions/{key}/context").json()["messages"]
    assert old not in [m["content"] for m in context] and new in [m["content"] for m in context]


def test_sdk_edit_forks_a_new_segment(client: openai.OpenAI, rest: httpx.Client) -> None:
    key, first = create(client, [u("plan a trip")])
    _, _ = create(client, [u("plan a trip"), a(first), u("to Rome")])
    forked, answer = create(client, [u("plan a trip"), a(first), u("to Lisbon")])
    assert forked == key
    shown = rest.get(f"/v1/sessions/{key}").json()
    assert [r["reason"] for r in shown["rotations"]] == ["fork"]
    assert shown["latest"]["created_reason"] == "fork"
    assert contents(rest, key) == ["plan a trip", first, "to Lisbon", answer]


def test_sdk_tools_non_streamed(
    client: openai.OpenAI, rest: httpx.Client, model: ClientModel
) -> None:
    tools: list[Any] = [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "The weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    question = [u("weather in Paris?")]
    raw = client.chat.completions.with_raw_response.create(
        model="main", messages=question, tools=tools, tool_choice="auto"
    )
    key, completion = raw.headers["x-session-key"], raw.parse()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert call.type == "function" and call.function.name == "weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    offered = model.requests[-1][1]
    assert [t.name for t in offered.tools] == ["weather"] and offered.tool_choice == "auto"
    follow = [
        *question,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    again, answer = create(client, follow, tools=tools)
    assert again == key and answer == "It is sunny."
    stored = latest(rest, key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1]["metadata"]["tool_calls"][0]["id"] == call.id
    assert stored[2]["content"] == "sunny"


def test_sdk_tools_streamed(client: openai.OpenAI, rest: httpx.Client) -> None:
    tools: list[Any] = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
    with client.chat.completions.stream(
        model="main", messages=[u("weather, streamed")], tools=tools
    ) as events:
        final = events.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    streamed = choice.message.tool_calls[0]
    assert streamed.function.name == "weather"
    assert json.loads(streamed.function.arguments) == {"city": "Paris"}
    chunks = list(
        client.chat.completions.create(
            model="main",
            messages=[
                u("weather, streamed"),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": streamed.id,
                            "type": "function",
                            "function": {
                                "name": "weather",
                                "arguments": streamed.function.arguments,
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": streamed.id, "content": "rainy"},
            ],
            tools=tools,
            stream=True,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "It is rainy."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


class Person(BaseModel):
    name: str
    age: int


def test_sdk_structured_output(client: openai.OpenAI, model: ClientModel) -> None:
    parsed = client.chat.completions.parse(
        model="main", messages=[u("who wrote the first program?")], response_format=Person
    )
    assert parsed.choices[0].message.parsed == Person(**PERSON)
    fmt = model.requests[-1][1].response_format
    assert fmt is not None and fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Person"


def test_sdk_n_above_one_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="main", messages=[u("twice?")], n=2)
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "n_not_supported"


def test_sdk_image_parts_reach_a_vision_model(client: openai.OpenAI, model: ClientModel) -> None:
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
        "AAAABJRU5ErkJggg=="
    )
    create(
        client,
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is"},
                    {"type": "text", "text": "in this picture?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
                ],
            }
        ],
    )
    parts = model.last[-1]["content"]
    assert parts[0] == {"type": "text", "text": "what is\nin this picture?"}
    assert {"type": "image", "media_type": "image/png", "data": png} in parts


def test_sdk_rotation_notice_is_the_first_content(client: openai.OpenAI) -> None:
    key, _ = create(client, [u("first")], extra_headers={"X-Session-Key": "oa:notice"})
    raw = client.chat.completions.with_raw_response.create(
        model="main", messages=[u("/new start over")], extra_headers={"X-Session-Key": key}
    )
    completion = raw.parse()
    text = completion.choices[0].message.content or ""
    assert text.startswith("(new conversation segment: manual)\n\n")
    assert text.endswith("to: start over")
    assert (completion.model_extra or {})["session"]["rotation"]["reason"] == "manual"
    chunks = list(
        client.chat.completions.create(
            model="main",
            messages=[u("/new")],
            stream=True,
            extra_headers={"X-Session-Key": key},
        )
    )
    extras = [c.model_extra or {} for c in chunks]
    assert any("sessiongate_rotation" in e for e in extras)
    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert deltas == ["(new conversation segment: manual)\n\n"]


def test_a_stateless_agent_keeps_nothing(
    client: openai.OpenAI, rest: httpx.Client, model: ClientModel
) -> None:
    before = rest.get("/v1/sessions").json()
    completion = client.chat.completions.create(
        model="titles", messages=[{"role": "system", "content": "short"}, u("name this chat")]
    )
    assert (completion.choices[0].message.content or "").endswith("to: name this chat")
    assert [(m["role"], m["content"]) for m in model.last] == [
        ("system", "Write titles."),
        ("system", "short"),
        ("user", "name this chat"),
    ]
    assert rest.get("/v1/sessions").json() == before


# -- LangChain's ChatOpenAI -----------------------------------------------------------------


def test_langchain_chat_openai(gw: Gateway, rest: httpx.Client, model: ClientModel) -> None:
    pytest.importorskip("langchain_openai")
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="main", base_url=gw.url + "/v1", api_key=gw.keys["alice"], max_retries=0)
    history: list[Any] = [SystemMessage("Be brief."), HumanMessage("hello from langchain")]
    first = llm.invoke(history)
    history += [AIMessage(first.content), HumanMessage("and again")]
    second = llm.invoke(history)
    assert str(second.content).endswith("to: and again")
    keys = [s["key"] for s in rest.get("/v1/sessions").json()["sessions"]]
    # Keys are listed by name, not recency: some hold an empty latest segment.
    owner = next(k for k in keys if contents(rest, k)[:1] == ["hello from langchain"])
    assert contents(rest, owner) == [
        "hello from langchain",
        first.content,
        "and again",
        second.content,
    ]
    # Streaming goes the same way.
    chunks = list(llm.stream([*history, AIMessage(second.content), HumanMessage("streamed")]))
    assert "".join(str(c.content) for c in chunks).endswith("to: streamed")
    assert contents(rest, owner)[-2] == "streamed"

    for method in ("json_schema", "function_calling"):
        structured = llm.with_structured_output(Person, method=method)
        assert structured.invoke("who wrote the first program?") == Person(**PERSON)
    options = model.requests[-1][1]
    assert [t.name for t in options.tools] == ["Person"] and options.tool_choice == "Person"


# -- Open WebUI, its requests as it sends them ------------------------------------------------

#: Open WebUI (0.6 and later) calls a connection with aiohttp: these are its headers, with
#: ENABLE_FORWARD_USER_INFO_HEADERS=true (routers/openai.py get_headers_and_cookies). The
#: body is the chat's whole message list; `metadata` (chat_id, message_id, …) is popped
#: from the payload before it is sent, so the chat id arrives only as a header.
OPEN_WEBUI_HEADERS = {
    "User-Agent": "Python/3.11 aiohttp/3.11.18",
    "Accept": "*/*",
    "Accept-Encoding": "gzip, deflate",
    "Content-Type": "application/json",
    "X-OpenWebUI-User-Name": "Alice Example",
    "X-OpenWebUI-User-Id": "7d3c6a2e-5b1f-4b7e-9a51-2f6e0c1d9a44",
    "X-OpenWebUI-User-Email": "alice@example.com",
    "X-OpenWebUI-User-Role": "user",
}
#: Open WebUI's default title prompt (DEFAULT_TITLE_GENERATION_PROMPT_TEMPLATE), filled in.
TITLE_PROMPT = "\n".join(
    [
        "### Task:",
        "Generate a concise, 3-5 word title with an emoji summarizing the chat history.",
        "### Guidelines:",
        "- The title should clearly represent the main theme or subject of the conversation.",
        "- Use emojis that enhance understanding of the topic, but avoid quotation marks"
        " or special formatting.",
        "- Write the title in the chat's primary language; default to English if multilingual.",
        "- Prioritize accuracy over excessive creativity; keep it clear and simple.",
        "- Your entire response must consist solely of the JSON object, without any"
        " introductory or concluding text.",
        "- The output must be a single, raw JSON object, without any markdown code"
        " fences or other encapsulating text.",
        "- Ensure no conversational text, affirmations, or explanations precede or"
        " follow the JSON output, as this will cause direct parsing failure.",
        "### Output:",
        'JSON format: { "title": "your concise title here" }',
        "### Examples:",
        '- { "title": "📉 Stock Market Trends" },',
        '- { "title": "🍪 Perfect Chocolate Chip Recipe" },',
        '- { "title": "Evolution of Music Streaming" },',
        '- { "title": "Remote Work Productivity Tips" },',
        '- { "title": "Artificial Intelligence in Healthcare" },',
        '- { "title": "🎮 Video Game Development Insights" }',
        "### Chat History:",
        "<chat_history>",
        "USER: {question}",
        "ASSISTANT: {answer}",
        "</chat_history>",
    ]
)


def open_webui(gw: Gateway, body: dict[str, Any], chat_id: str | None) -> httpx.Response:
    headers = {**OPEN_WEBUI_HEADERS, "Authorization": f"Bearer {gw.keys['alice']}"}
    if chat_id is not None:
        headers["X-OpenWebUI-Chat-Id"] = chat_id
    else:  # forwarding switched off: none of the X-OpenWebUI-* headers
        headers = {k: v for k, v in headers.items() if not k.startswith("X-OpenWebUI")}
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT) as raw:
        return raw.post("/v1/chat/completions", content=json.dumps(body), headers=headers)


def streamed_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    text = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                text.append(choice["delta"].get("content") or "")
    return "".join(text)


@pytest.mark.parametrize("forwarded", [True, False])
def test_open_webui_chats_and_title_generation(
    gw: Gateway, rest: httpx.Client, model: ClientModel, forwarded: bool
) -> None:
    chat_id = "3f6d2c1a-8b7e-4c5d-9e0f-1a2b3c4d5e6f" if forwarded else None
    other_chat = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d" if forwarded else None
    question = f"Why is the sky blue? ({forwarded})"
    first = streamed_text(
        open_webui(gw, {"stream": True, "model": "main", "messages": [u(question)]}, chat_id)
    )
    # The title request Open WebUI makes after the first answer: the task model (here the
    # chat's own model), not streamed, the chat id forwarded again.
    title_body = {
        "model": "main",
        "messages": [u(TITLE_PROMPT.replace("{question}", question).replace("{answer}", first))],
        "stream": False,
        "max_tokens": 1000,
    }
    titled = open_webui(gw, title_body, chat_id)
    assert titled.status_code == 200, titled.text
    assert titled.json()["choices"][0]["message"]["content"].startswith("answer")
    assert titled.headers["x-session-identity"] == "none"
    # A second chat opening with the same question is another conversation.
    other = streamed_text(
        open_webui(gw, {"stream": True, "model": "main", "messages": [u(question)]}, other_chat)
    )
    follow = {
        "stream": True,
        "model": "main",
        "messages": [u(question), a(first), u("And at sunset?")],
    }
    response = open_webui(gw, follow, chat_id)
    streamed_text(response)
    key = response.headers["x-session-key"]
    assert response.headers["x-session-identity"] == ("client_id" if forwarded else "matched")
    assert contents(rest, key)[:3] == [question, first, "And at sunset?"]
    assert len(contents(rest, key)) == 4  # the title request left no trace in the chat
    # Regenerate in Open WebUI: the same list again.
    again = open_webui(gw, follow, chat_id)
    streamed_text(again)
    assert again.headers["x-session-key"] == key
    assert [m["role"] for m in latest(rest, key)] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "assistant",
    ]
    second = open_webui(
        gw,
        {"stream": True, "model": "main", "messages": [u(question), a(other), u("x")]},
        other_chat,
    )
    streamed_text(second)
    assert second.headers["x-session-key"] != key


def test_open_webui_chat_id_in_the_body_names_the_same_chat(
    gw: Gateway, rest: httpx.Client
) -> None:
    """Open WebUI itself pops `metadata` before it calls a connection; a pipeline or proxy
    that passes `metadata.chat_id` (or a top-level `chat_id`) on names the same chat as
    the forwarded header does."""
    chat = "5b4a3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d"
    first = open_webui(gw, {"model": "main", "messages": [u("body ids")]}, chat)
    answer = first.json()["choices"][0]["message"]["content"]
    follow = [u("body ids"), a(answer), u("still the same chat")]
    for extra in ({"metadata": {"chat_id": chat}}, {"chat_id": chat}):
        again = open_webui(gw, {"model": "main", "messages": follow, **extra}, None)
        assert again.headers["x-session-key"] == first.headers["x-session-key"]
        assert again.headers["x-session-identity"] == "client_id"


# -- what a client may send, and what it gets for a bad request --------------------------------


def test_a_clients_own_conversation_id_names_its_key(
    gw: Gateway, client: openai.OpenAI, rest: httpx.Client
) -> None:
    by_body, first = create(client, [u("hi")], extra_body={"metadata": {"conversation_id": "t-1"}})
    by_header, _ = create(
        client, [u("hi"), a(first), u("again")], extra_headers={"X-Conversation-Id": "t-1"}
    )
    assert by_body == by_header and by_body.startswith("oai:conv:")
    assert contents(rest, by_body)[2] == "again"
    overrides = rest.get(f"/v1/sessions/{by_body}").json()["overrides"]
    assert overrides == {"lifecycle": {"idle_window": "off", "day_boundary": "off"}}


def test_one_shot_requests_stream_and_keep_nothing(
    gw: Gateway, client: openai.OpenAI, rest: httpx.Client, model: ClientModel
) -> None:
    before = rest.get("/v1/sessions").json()
    tool_choice = [
        {"role": "system", "content": "Available Tools: [weather]\nChoose a tool."},
        u("Query: History:\nUSER: weather?\nQuery: weather?"),
    ]
    chunks = list(client.chat.completions.create(model="main", messages=tool_choice, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.endswith("weather?")
    tagged = client.chat.completions.with_raw_response.create(
        model="main", messages=[u("tags please")], extra_headers={"X-OpenWebUI-Task": "tags"}
    )
    assert tagged.headers["x-session-identity"] == "none"
    assert rest.get("/v1/sessions").json() == before


BAD_REQUESTS: list[tuple[str, dict[str, Any], str]] = [
    ("assistant last", {"messages": [u("hi"), a("hello")]}, "invalid_messages"),
    ("no user message", {"messages": [{"role": "system", "content": "x"}]}, "invalid_messages"),
    ("unknown role", {"messages": [{"role": "function", "content": "x"}]}, "invalid_messages"),
    (
        "orphan tool result",
        {"messages": [u("hi"), {"role": "tool", "tool_call_id": "nope", "content": "x"}]},
        "invalid_messages",
    ),
    (
        "tool_calls not a list",
        {"messages": [u("hi"), {"role": "assistant", "tool_calls": "x"}, u("and")]},
        "invalid_messages",
    ),
    (
        "a part that is not an object",
        {"messages": [{"role": "user", "content": ["text"]}]},
        "invalid_request",
    ),
    (
        "bad tool name",
        {"messages": [u("hi")], "tools": [{"type": "function", "function": {"name": "a b"}}]},
        "invalid_tools",
    ),
    (
        "tool_choice names no tool",
        {
            "messages": [u("hi")],
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "tool_choice": {"type": "function", "function": {"name": "g"}},
        },
        "invalid_tools",
    ),
    (
        "bad response_format",
        {"messages": [u("hi")], "response_format": {"type": "yaml"}},
        "invalid_response_format",
    ),
    (
        "not an image",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}
                    ],
                }
            ]
        },
        "invalid_attachment",
    ),
    ("n above one", {"messages": [u("hi")], "n": 3}, "n_not_supported"),
]


@pytest.mark.parametrize(
    ("body", "code"), [(b, c) for _, b, c in BAD_REQUESTS], ids=[n for n, _, _ in BAD_REQUESTS]
)
def test_a_bad_request_is_a_400_naming_what_is_wrong(
    gw: Gateway, rest: httpx.Client, body: dict[str, Any], code: str
) -> None:
    before = rest.get("/v1/sessions").json()
    answer = rest.post("/v1/chat/completions", json={"model": "main", **body})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == code
    assert rest.get("/v1/sessions").json() == before


def test_tools_offered_to_a_model_that_cannot_call_them_are_dropped_and_said(
    rest: httpx.Client,
) -> None:
    """Open WebUI 0.12 offers its built-in tools with every chat request: a text-only
    agent still answers (and says the tools were dropped); requiring a tool is refused."""
    tools = [{"type": "function", "function": {"name": "f"}}]
    offered = rest.post(
        "/v1/chat/completions",
        json={"model": "plain", "messages": [u("hi")], "tools": tools, "tool_choice": "auto"},
    )
    assert offered.status_code == 200, offered.text
    assert offered.headers["x-client-tools"] == "dropped"
    assert offered.json()["choices"][0]["message"]["content"]
    for choice in ("required", {"type": "function", "function": {"name": "f"}}):
        answer = rest.post(
            "/v1/chat/completions",
            json={"model": "plain", "messages": [u("hi")], "tools": tools, "tool_choice": choice},
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "tools_not_supported"


def test_an_agent_with_a_handoff_gets_no_client_tools(gw: Gateway) -> None:
    """An agent with a hand-off declares its model tool-less, whatever its adapter says."""
    agent = gw.engine.turns.agent("main")
    parsed = parse_request(
        [u("draw me a cat")],
        tools=[{"type": "function", "function": {"name": "f"}}],
        tool_choice=None,
        response_format=None,
        vision=False,
        max_attachments=1,
        max_attachment_bytes=1024,
    )
    assert parsed.options is not None and parsed.options.tools
    kept, note = fit_client_tools(agent, True, parsed)
    assert kept is parsed and note == {}
    with_handoff = replace(agent, handoff=HandoffConfig.model_construct(enabled=True))
    fitted, note = fit_client_tools(with_handoff, True, parsed)
    assert fitted.options is not None and fitted.options.tools == ()
    assert note == {"X-Client-Tools": "dropped"}
    assert fitted.content == parsed.content
