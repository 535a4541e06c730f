"""The `session.compacted` hook and the compaction metric (issue 21, DESIGN §12), through
`sessiongate serve`: a compaction asked for over REST and its revert each reach a real
receiver as signed deliveries with the record's fields (the summary only for a hook with
`include_text`), and `/metrics` counts them by status."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hook_receiver import Receiver
from tests.support.served import relay_model, served_gateway

SECRET = "hook-secret-0123456789abcdef"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver(SECRET.encode()).start()
    yield started
    started.stop()


def wait_for(receiver: Receiver, event: str, count: int, within: float = 20) -> None:
    deadline = time.monotonic() + within
    while len(receiver.events(event)) < count:
        assert time.monotonic() < deadline, f"{event}: {len(receiver.events(event))} arrived"
        time.sleep(0.05)


def test_compactions_are_hooks_and_metrics(tmp_path: Path, receiver: Receiver) -> None:
    config = relay_model(tmp_path, "relay", context_window=4096)
    config += (
        '[agents.defaults]\nmodel = "relay"\n'
        "[agents.defaults.context]\nkeep_recent = 2\ncompact_at = 1.0\n"
        f'[[hooks]]\nname = "plain"\nurl = "{receiver.url}"\nsecret = "{SECRET}"\n'
        'events = ["session.compacted"]\n'
        f'[[hooks]]\nname = "texts"\nurl = "{receiver.url}"\nsecret = "{SECRET}"\n'
        'events = ["session.compacted"]\ninclude_text = true\n'
    )
    with (
        served_gateway(tmp_path, config, {"alice": ("--primary", "--admin")}) as served,
        served.client("alice") as alice,
    ):
        for turn in range(4):
            sent = alice.post(
                "/v1/sessions/c:hook/messages",
                json={"content": f"turn {turn}: the launch", "stream": False},
            )
            assert sent.status_code == 200, sent.text
        made = alice.post("/v1/sessions/c:hook/compact", json={"instructions": "keep dates"})
        assert made.status_code == 200, made.text
        record = made.json()["compaction"]
        wait_for(receiver, "session.compacted", 2)
        done = receiver.events("session.compacted")
        assert all(r.signature_ok for r in done)
        data = [r.body["data"] for r in done]
        assert {d["compaction_id"] for d in data} == {record["compaction_id"]}
        for d in data:
            assert d["owner"] == "alice" and d["key"] == "c:hook"
            assert d["session_id"] == record["session_id"]
            assert d["covers"] == record["covers"]
            assert d["status"] == "done"
            assert d["tokens_before"] == record["tokens_before"]
            assert d["model"] == "relay"
        with_text = [d for d in data if "summary" in d]
        assert len(with_text) == 1
        assert with_text[0]["summary"] == record["summary"]
        assert with_text[0]["instructions"] == "keep dates"

        undone = alice.post(f"/v1/sessions/c:hook/compactions/{record['compaction_id']}/revert")
        assert undone.status_code == 200
        wait_for(receiver, "session.compacted", 4)
        statuses = sorted(r.body["data"]["status"] for r in receiver.events("session.compacted"))
        assert statuses == ["done", "done", "reverted", "reverted"]
        # Reverting again changes nothing and tells nobody.
        alice.post(f"/v1/sessions/c:hook/compactions/{record['compaction_id']}/revert")

        metrics = alice.get("/metrics")
        assert metrics.status_code == 200, metrics.text
        assert 'sessiongate_compactions_total{status="done"} 1.0' in metrics.text
        assert 'sessiongate_compactions_total{status="reverted"} 1.0' in metrics.text
        time.sleep(0.3)
        assert len(receiver.events("session.compacted")) == 4
