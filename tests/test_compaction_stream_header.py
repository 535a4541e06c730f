"""`X-Context-Compacted` on streamed OpenAI-route answers (issue 21, DESIGN §12), through
`sessiongate serve`: a compaction the turn announces before its reply starts is named in
the stream's headers (they wait for the turn's context, never for the model), as well as
in the `sessiongate_compaction` chunk; a stream that announces none has no header."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.support.served import relay_model, served_gateway


def chunks(response: httpx.Response) -> list[dict[str, object]]:
    found = []
    for line in response.iter_lines():
        if line.startswith("data: ") and line != "data: [DONE]":
            found.append(json.loads(line.removeprefix("data: ")))
    return found


def test_a_streamed_answer_names_the_compaction_in_its_headers(tmp_path: Path) -> None:
    config = relay_model(tmp_path, "relay", context_window=4096)
    config += (
        '[agents.defaults]\nmodel = "relay"\n'
        "[agents.defaults.context]\nkeep_recent = 2\ncompact_at = 1.0\n"
    )
    with (
        served_gateway(tmp_path, config, {"alice": ("--primary",)}) as served,
        served.client("alice") as http,
    ):
        headers = {"X-Session-Key": "oa:stream"}
        history: list[dict[str, str]] = []
        for turn in range(4):
            history.append({"role": "user", "content": f"turn {turn}"})
            body = {"model": "main", "messages": history, "stream": True}
            with http.stream("POST", "/v1/chat/completions", headers=headers, json=body) as r:
                assert r.status_code == 200
                assert "X-Context-Compacted" not in r.headers
                text = "".join(
                    str(c["choices"][0]["delta"].get("content") or "")  # type: ignore[index]
                    for c in chunks(r)
                    if c.get("choices")
                )
            history.append({"role": "assistant", "content": text})
        made = http.post("/v1/sessions/oa:stream/compact", json={})
        assert made.status_code == 200, made.text
        compaction_id = made.json()["compaction"]["compaction_id"]
        # The preview says which messages the summary it sends stands for.
        context = http.get("/v1/sessions/oa:stream/context").json()
        assert context["summarised"] == {
            "compaction_id": compaction_id,
            "first_seq": 1,
            "last_seq": 6,
            "count": 6,
        }
        assert f"compaction:{compaction_id}" in [m["source"] for m in context["messages"]]
        history.append({"role": "user", "content": "and then?"})
        body = {"model": "main", "messages": history, "stream": True}
        with http.stream("POST", "/v1/chat/completions", headers=headers, json=body) as r:
            assert r.status_code == 200
            assert r.headers["X-Context-Compacted"] == compaction_id
            seen = chunks(r)
        announced = [c["sessiongate_compaction"] for c in seen if "sessiongate_compaction" in c]
        assert [a["compaction_id"] for a in announced] == [compaction_id]  # type: ignore[index]
        # Announced once: the next stream says nothing more.
        history.append({"role": "user", "content": "more"})
        body = {"model": "main", "messages": history, "stream": True}
        with http.stream("POST", "/v1/chat/completions", headers=headers, json=body) as r:
            assert "X-Context-Compacted" not in r.headers
