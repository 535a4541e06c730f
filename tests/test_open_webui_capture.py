"""Open WebUI 0.12.4 as it really talks to a connection, replayed against the gateway.

`tests/data/open_webui_0.12.4_requests.jsonl` was captured on 2026-11-23 from a running
Open WebUI 0.12.4 (`pip install open-webui==0.12.4`, started with
`ENABLE_FORWARD_USER_INFO_HEADERS=true`, its chat page driven in Chromium): every request
it sent to an OpenAI connection, headers and body, in order. Only the API key was
replaced. The session: a chat that opens with "hi", a second question, "Try Again" on
the second answer, then a new chat that opens with "hi" again. Around each answer Open
WebUI asks the same model for a title, follow-up suggestions and tags (prompts beginning
with `### Task:`), carrying the chat id too; and every chat request offers its 36
built-in tools.

The same session was also run once by hand against a real `sessiongate serve` (Open WebUI
pointed at it): one key per chat, four messages in the first, the task prompts kept
nowhere. This test replays the capture so that check runs in CI without installing Open
WebUI (several GB).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.models.base import (
    NO_OPTIONS,
    ModelCapabilities,
    ModelChunk,
    ModelOptions,
    ReplyModel,
    TextDelta,
    Usage,
    WireMessage,
    text_of,
)
from tests.support.gateway import Gateway, gateway_settings, running_gateway

CAPTURE = Path(__file__).parent / "data" / "open_webui_0.12.4_requests.jsonl"
TASK_PREFIX = "### Task:"
TIMEOUT = 10.0


class RecordingModel:
    """Offers tools support (Open WebUI sends tools with every chat request) and answers
    with numbered text, recording each request and its options."""

    name = "recording"
    capabilities = ModelCapabilities(tools=True, images=True, json_output=True)

    def __init__(self) -> None:
        self.requests: list[tuple[list[dict[str, Any]], ModelOptions]] = []
        self.count = itertools.count(1)

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        self.requests.append(([dict(m) for m in messages], options))
        words = f"answer {next(self.count)} to: {text_of(messages[-1]['content'])[:40]}"
        for index, word in enumerate(words.split(" ")):
            yield TextDelta(word if index == 0 else " " + word)
        yield Usage(prompt_tokens=len(messages), completion_tokens=6)


def captured() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CAPTURE.read_text(encoding="utf-8").splitlines()]


def is_task(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith(TASK_PREFIX)


@pytest.fixture(scope="module")
def model() -> RecordingModel:
    return RecordingModel()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, model: RecordingModel) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("owui"),
        limits={"max_body_bytes": 1 << 20, "max_content_chars": 20000},
        agents={"defaults": {"model": "recording"}, "main": {}},
    )
    models: dict[str, ReplyModel] = {"recording": model}
    with running_gateway(settings, models) as gateway:
        yield gateway


def reply_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    if not response.headers["content-type"].startswith("text/event-stream"):
        return str(response.json()["choices"][0]["message"]["content"])
    text = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                text.append(choice["delta"].get("content") or "")
    return "".join(text)


def test_the_captured_open_webui_session(gw: Gateway, model: RecordingModel) -> None:
    requests = captured()
    assert len(requests) == 12
    # What Open WebUI answered in each chat, by position: its later requests carry them.
    answers: dict[str, list[str]] = {}
    keys: dict[str, set[str]] = {}
    tools_seen: list[int] = []
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT) as http:
        for request in requests:
            headers = {**request["headers"], "Authorization": f"Bearer {gw.keys['alice']}"}
            headers.pop("Accept-Encoding", None)  # httpx decodes whatever it asks for
            chat = headers["X-OpenWebUI-Chat-Id"]
            body = request["body"]
            task = is_task(body)
            if not task:
                # The assistant messages Open WebUI sends back are the gateway's answers.
                said = iter(answers.get(chat, []))
                for message in body["messages"]:
                    if message["role"] == "assistant":
                        message["content"] = next(said)
            before = len(model.requests)
            response = http.post(request["path"], content=json.dumps(body), headers=headers)
            text = reply_text(response)
            assert len(model.requests) == before + 1
            sent, options = model.requests[-1]
            if task:
                assert response.headers["x-session-identity"] == "none"
                assert [m["role"] for m in sent if m["role"] != "system"] == ["user"]
                continue
            assert response.headers["x-session-identity"] == "client_id"
            keys.setdefault(chat, set()).add(response.headers["x-session-key"])
            tools_seen.append(len(options.tools))
            assistant_turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
            answers.setdefault(chat, [])[assistant_turns:] = [text]
    first_chat, second_chat = list(keys)
    assert all(len(found) == 1 for found in keys.values())  # one key per chat
    assert keys[first_chat] != keys[second_chat]  # both open with "hi": still two chats
    # Every chat request offered Open WebUI's built-in tools, and the model got them.
    assert tools_seen == [36] * 4
    assert "get_current_timestamp" in {t.name for t in model.requests[0][1].tools}
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT, headers=gw.auth("alice")) as rest:
        first_key = next(iter(keys[first_chat]))
        context = rest.get(f"/v1/sessions/{first_key}/context").json()["messages"]
        talk = [(m["role"], m["content"]) for m in context if m["role"] != "system"]
        # "Try Again" replaced the second answer: the model sees only the new one.
        assert talk == [
            ("user", "hi"),
            ("assistant", answers[first_chat][0]),
            ("user", "what is 2+2?"),
            ("assistant", answers[first_chat][1]),
        ]
        stored = rest.get("/v1/sessions").json()["sessions"]
        # No title, tag or follow-up prompt became a conversation of its own.
        assert sorted(s["key"] for s in stored) == sorted(
            next(iter(found)) for found in keys.values()
        )
        second_key = next(iter(keys[second_chat]))
        second = rest.get(f"/v1/sessions/{second_key}/context").json()["messages"]
        assert [m["content"] for m in second if m["role"] != "system"] == [
            "hi",
            answers[second_chat][0],
        ]
