"""The Responses API through `sessiongate serve` as a subprocess, its model an `openai`
provider pointed at a local server speaking chat completions (DESIGN.md §14: the
upstream may speak only chat completions): the official SDK's create, stream helper,
retrieve and `previous_response_id`; Codex CLI's way of calling (headers, `store: false`,
the whole input each time) keeps one key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai

from tests.support.openai_wire_server import WireAnswer, openai_wire_server
from tests.support.served import served_gateway
from tests.support.served_fake_model import fake_model_config


def _answer(body: dict[str, Any]) -> WireAnswer:
    last = body["messages"][-1]["content"]
    text = last if isinstance(last, str) else " ".join(p.get("text", "") for p in last)
    return WireAnswer(f"upstream heard: {text}")


def test_served_responses_api_over_a_chat_completions_upstream(tmp_path: Path) -> None:
    with openai_wire_server(_answer) as wire:
        config = fake_model_config(wire.url, '[agents.main]\nsystem_prompt = "Be kind."\n')
        with served_gateway(tmp_path, config, {"alice": ()}) as served:
            key = served.keys["alice"]
            client = openai.OpenAI(
                base_url=served.url + "/v1", api_key=key, max_retries=0, timeout=30
            )
            first = client.responses.create(model="main", input="hello", instructions="Short.")
            assert first.output_text == "upstream heard: hello"
            sent = wire.requests[-1]["messages"]
            assert [m["role"] for m in sent] == ["system", "system", "user"]
            with client.responses.stream(
                model="main", input="again", previous_response_id=first.id
            ) as stream:
                final = stream.get_final_response()
            assert final.output_text == "upstream heard: again"
            texts = [m["content"] for m in wire.requests[-1]["messages"][1:]]
            assert texts == ["hello", "upstream heard: hello", "again"]
            assert client.responses.retrieve(final.id).output_text == final.output_text

            # Codex CLI: its session id in headers, store false, the whole input again.
            headers = {"session-id": "s-1", "thread-id": "s-1"}
            items: list[Any] = [
                {"type": "message", "role": "developer", "content": "You are Codex."},
                {"type": "message", "role": "user", "content": "one"},
            ]
            raw = client.responses.with_raw_response.create(
                model="main", input=items, store=False, stream=False, extra_headers=headers
            )
            session_key = raw.headers["X-Session-Key"]
            items += [i.model_dump(exclude_none=True) for i in raw.parse().output]
            items.append({"type": "message", "role": "user", "content": "two"})
            again = client.responses.with_raw_response.create(
                model="main", input=items, store=False, extra_headers=headers
            )
            assert again.headers["X-Session-Key"] == session_key
            with httpx.Client(base_url=served.url, headers=served.auth("alice")) as rest:
                shown = rest.get(f"/v1/sessions/{session_key}").json()
                sid = shown["latest"]["session_id"]
                page = rest.get(f"/v1/sessions/{session_key}/segments/{sid}/messages").json()
            contents = [m["content"] for m in page["messages"]]
            assert contents == ["one", "upstream heard: one", "two", "upstream heard: two"]
            client.close()
