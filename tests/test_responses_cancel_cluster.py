"""`POST /v1/responses/{id}/cancel` reaches the process running a background response:
two `sessiongate serve` processes on one PostgreSQL database, the response started on
one and cancelled on the other (the cancel goes through the response's row, which the
running process polls). The model is a slow `command` relay, so the response is still
running when the cancel comes."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.served import Served
from tests.support.served_cluster import served_cluster

pytestmark = pytest.mark.postgres

#: Streams `slow N` as N words, 50 ms apart; anything else at once.
SLOW_RELAY = """\
import json, sys, time
body = json.load(sys.stdin)
content = str(body["messages"][-1].get("content", ""))
if content.startswith("slow "):
    for i in range(int(content.split()[1])):
        sys.stdout.write(f"w{i} ")
        sys.stdout.flush()
        time.sleep(0.05)
else:
    sys.stdout.write(f"quick answer to: {content}")
"""


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Served]]:
    directory = tmp_path_factory.mktemp("cancel-cluster")
    relay = directory / "relay.py"
    relay.write_text(SLOW_RELAY, encoding="utf-8")
    command = json.dumps([sys.executable, str(relay)])
    config = (
        f'[models.relay]\nprovider = "command"\ncommand = {command}\n'
        '[agents.defaults]\nmodel = "relay"\n'
    )
    with served_cluster(directory, config, {"alice": (), "bob": ()}) as found:
        yield found


def _wait_for(
    served: Served, response_id: str, statuses: set[str], within: float = 20
) -> dict[str, Any]:
    deadline = time.monotonic() + within
    with served.client("alice") as client:
        while True:
            body = client.get(f"/v1/responses/{response_id}").json()
            if body.get("status") in statuses or time.monotonic() > deadline:
                return dict(body)
            time.sleep(0.1)


def test_a_cancel_on_another_gateway_stops_the_running_response(
    gateways: list[Served],
) -> None:
    first, second = gateways
    with first.client("alice") as on_first, second.client("alice") as on_second:
        started = on_first.post(
            "/v1/responses", json={"model": "main", "input": "slow 400", "background": True}
        )
        assert started.status_code == 200, started.text
        response_id = started.json()["id"]
        assert started.json()["status"] == "in_progress"
        time.sleep(1.0)  # some words streamed; ~20 s of them still to come
        assert on_second.get(f"/v1/responses/{response_id}").json()["status"] == "in_progress"

        asked = time.monotonic()
        cancelled = on_second.post(f"/v1/responses/{response_id}/cancel")
        took = time.monotonic() - asked
        assert cancelled.status_code == 200, cancelled.text
        body = cancelled.json()
        assert body["status"] == "cancelled", body
        assert body["error"] is None and body["background"] is True
        assert "sessiongate_cancel_requested" not in body
        assert took < 5, took  # well before the reply would have ended (~20 s)

        # Both gateways read the same end; the key is free for the next response.
        assert on_first.get(f"/v1/responses/{response_id}").json()["status"] == "cancelled"
        again = on_second.post(
            "/v1/responses",
            json={"model": "main", "input": "after", "previous_response_id": response_id},
        )
        assert again.status_code == 200, again.text
        assert again.json()["output"][0]["content"][0]["text"] == "quick answer to: after"

        # Bob cancelling alice's response on either gateway: as an id that never existed.
        with second.client("bob") as bob:
            theirs = bob.post(f"/v1/responses/{response_id}/cancel")
            never = bob.post("/v1/responses/resp_doesnotexist/cancel")
        assert theirs.status_code == never.status_code == 404
        assert theirs.json()["error"]["code"] == never.json()["error"]["code"]


def test_a_cancel_of_an_ended_response_on_another_gateway_answers_it_as_it_is(
    gateways: list[Served],
) -> None:
    first, second = gateways
    with first.client("alice") as on_first, second.client("alice") as on_second:
        started = on_first.post(
            "/v1/responses", json={"model": "main", "input": "hello", "background": True}
        )
        response_id = started.json()["id"]
        ended = _wait_for(first, response_id, {"completed"})
        assert ended["status"] == "completed"
        answer = on_second.post(f"/v1/responses/{response_id}/cancel")
    assert answer.status_code == 200
    assert answer.json()["status"] == "completed"
    assert answer.json()["output"] == ended["output"]
