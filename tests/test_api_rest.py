"""REST + SSE against a real gateway on loopback, with httpx as the client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gateway import Gateway, gateway_settings, parse_sse, running_gateway
from tests.support.helpers import ScriptedModel


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("rest")
    with running_gateway(gateway_settings(path), {"scripted": ScriptedModel()}) as gateway:
        yield gateway


@pytest.fixture
def client(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=10) as c:
        yield c


def test_health_needs_no_key(client: httpx.Client) -> None:
    assert client.get("/health").json() == {"status": "ok"}


def test_chat_routes_primary_to_main_and_others_to_their_own(
    gw: Gateway, client: httpx.Client
) -> None:
    events = parse_sse(
        client.post("/v1/chat", json={"content": "hi"}, headers=gw.auth("prime")).text
    )
    assert events[0] == ("start", events[0][1])
    assert events[0][1]["session_key"] == "agent:main:main"
    reply = client.post(
        "/v1/chat", json={"content": "hi", "stream": False}, headers=gw.auth("bob")
    ).json()
    assert reply["session_key"] == "chat:bob"
    assert reply["reply"] == "reply to: hi"


def test_streamed_turn_event_sequence_and_shapes(gw: Gateway, client: httpx.Client) -> None:
    response = client.post(
        "/v1/sessions/sse:order/messages", json={"content": "one two"}, headers=gw.auth("alice")
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-1] == "end"
    assert set(names[1:-1]) == {"token"}
    for name, data in events:
        assert data["type"] == name
    start, end = events[0][1], events[-1][1]
    assert set(start) >= {"session_key", "session_id", "turn_id"}
    assert end["message_count"] == 2 and end["message_id"].startswith(start["session_id"])
    assert set(end["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert "".join(d["content"] for n, d in events if n == "token") == "reply to: one two"


def test_new_via_message_announces_rotation(gw: Gateway, client: httpx.Client) -> None:
    client.post(
        "/v1/sessions/sse:rot/messages",
        json={"content": "first", "stream": False},
        headers=gw.auth("alice"),
    )
    events = parse_sse(
        client.post(
            "/v1/sessions/sse:rot/messages",
            json={"content": "/new second"},
            headers=gw.auth("alice"),
        ).text
    )
    rotation = next(d for n, d in events if n == "rotation")
    assert rotation["reason"] == "manual" and rotation["from"] != rotation["to"]
    assert events[0][1]["session_id"] == rotation["to"]


def test_session_lifecycle_endpoints(gw: Gateway, client: httpx.Client) -> None:
    h = gw.auth("alice")
    key = "life:cycle"
    client.post(
        f"/v1/sessions/{key}/messages",
        json={"content": "the otter code is 7781", "stream": False},
        headers=h,
    )
    new = client.post(f"/v1/sessions/{key}/new", headers=h).json()
    assert new["previous_session_id"] and new["session_id"] != new["previous_session_id"]
    recall = client.post(
        f"/v1/sessions/{key}/recall",
        json={"query": "otter code", "rationale": "user asked"},
        headers=h,
    )
    fragments = recall.json()["fragments"]
    assert fragments[0]["session_id"] == new["previous_session_id"]
    assert "7781" in fragments[0]["content"] and fragments[0]["rationale"] == "user asked"

    turn = client.post(
        f"/v1/sessions/{key}/messages",
        json={
            "content": "what was the code?",
            "stream": False,
            "recall": {"query": "otter code", "rationale": "user asked"},
        },
        headers=h,
    ).json()
    assert turn["session_id"] == new["session_id"]

    shown = client.get(f"/v1/sessions/{key}", headers=h).json()
    assert [s["status"] for s in shown["segments"]] == ["archived", "latest"]
    assert shown["rotations"][0]["reason"] == "manual"
    page = client.get(
        f"/v1/sessions/{key}/segments/{new['session_id']}/messages", params={"limit": 1}, headers=h
    ).json()
    assert page["messages"][0]["metadata"]["recall"][0]["rationale"] == "user asked"
    assert page["next_after"] == 1
    context = client.get(f"/v1/sessions/{key}/context", headers=h).json()
    assert all(m["source"].startswith(new["session_id"]) for m in context["messages"])

    patched = client.patch(
        f"/v1/sessions/{key}",
        json={"control_model": "builtin:lexical", "lifecycle": {"idle_window": "5m"}},
        headers=h,
    )
    assert patched.json()["overrides"] == {
        "control_model": "builtin:lexical",
        "lifecycle": {"idle_window": "5m"},
    }
    cleared = client.patch(f"/v1/sessions/{key}", json={"control_model": None}, headers=h)
    assert "control_model" not in cleared.json()["overrides"]

    revert = client.post(f"/v1/sessions/{key}/revert", headers=h)
    assert revert.status_code == 409 and revert.json()["error"]["code"] == "nothing_to_revert"

    exported = client.get(f"/v1/sessions/{key}/export", headers=h)
    lines = exported.text.splitlines()
    assert json.loads(lines[0])["key"] == key
    assert client.delete(f"/v1/sessions/{key}", headers=h).status_code == 204
    assert client.get(f"/v1/sessions/{key}", headers=h).status_code == 404
    imported = client.post("/v1/import", content=exported.content, headers=h)
    assert imported.status_code == 201 and imported.json()["key"] == key
    assert client.get(f"/v1/sessions/{key}", headers=h).json()["segments"] == shown["segments"]


# -- the authorisation matrix --------------------------------------------------------

ENDPOINTS = [
    ("GET", "/v1/sessions/{key}", None),
    ("GET", "/v1/sessions/{key}/context", None),
    ("GET", "/v1/sessions/{key}/export", None),
    ("GET", "/v1/sessions/{key}/segments/{sid}/messages", None),
    ("POST", "/v1/sessions/{key}/recall", {"query": "secret", "rationale": "r"}),
    ("POST", "/v1/sessions/{key}/messages", {"content": "intrude", "stream": False}),
    ("POST", "/v1/sessions/{key}/new", None),
    ("POST", "/v1/sessions/{key}/revert", None),
    ("PATCH", "/v1/sessions/{key}", {"reply_model": "scripted"}),
    ("DELETE", "/v1/sessions/{key}", None),
]
# What an admin may do to another user's key: read it, and erase it.
ADMIN_MAY = {
    ("GET", "/v1/sessions/{key}"),
    ("GET", "/v1/sessions/{key}/context"),
    ("GET", "/v1/sessions/{key}/export"),
    ("GET", "/v1/sessions/{key}/segments/{sid}/messages"),
    ("POST", "/v1/sessions/{key}/recall"),
    ("DELETE", "/v1/sessions/{key}"),
}


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
@pytest.mark.parametrize(
    "who",
    ["owner", "other", "other naming owner", "admin", "admin naming owner", "no key", "bad key"],
)
def test_authorisation_matrix(
    gw: Gateway,
    client: httpx.Client,
    method: str,
    path: str,
    body: dict[str, object] | None,
    who: str,
) -> None:
    tag = f"{method.lower()}-{abs(hash(path)) % 10**6}-{who.replace(' ', '')}"
    key = f"matrix:{tag}"
    owner = gw.auth("alice")
    client.post(
        f"/v1/sessions/{key}/messages",
        json={"content": "secret one", "stream": False},
        headers=owner,
    )
    sid = client.get(f"/v1/sessions/{key}", headers=owner).json()["latest"]["session_id"]
    client.post(f"/v1/sessions/{key}/new", headers=owner)
    before = client.get(f"/v1/sessions/{key}", headers=owner).json()
    caller = {"owner": "alice", "other": "bob", "admin": "root"}.get(who.split()[0])
    headers = gw.auth(caller) if caller else {}
    if who == "bad key":
        headers = {"Authorization": "Bearer sg_AAAAAAAAAAAA_" + "x" * 43}
    url = path.format(key=key, sid=sid) + ("?owner=alice" if "naming" in who else "")
    response = client.request(method, url, json=body, headers=headers)
    status = response.status_code
    assert "secret" not in response.text or who in ("owner", "admin naming owner")
    if who in ("no key", "bad key"):
        assert status == 401
        assert response.json()["error"]["code"] in ("unauthorized", "invalid_api_key")
    elif who == "other naming owner":
        assert status == 403
        assert response.json()["error"]["code"] == "owner_not_allowed"
    elif who == "admin naming owner" and (method, path) not in ADMIN_MAY:
        assert status == 403
        assert response.json()["error"]["code"] == "admin_read_only"
    elif who in ("other", "admin"):
        # Their own namespace: exactly the answer for a key name nobody has used.
        unused = f"unused:{tag}"
        twin = client.request(method, path.format(key=unused, sid=sid), json=body, headers=headers)
        assert status == twin.status_code, (response.text, twin.text)
        if status >= 400:
            assert response.json()["error"]["code"] == twin.json()["error"]["code"]
    elif path.endswith("/revert"):
        assert status == 409  # the owner may, but there is no semantic rotation to undo
    else:
        assert status in (200, 204), response.text
    # Whatever happened, nobody but the owner wrote into the key.
    listed = client.get(f"/v1/sessions/{key}", headers=owner)
    if who in ("owner", "admin naming owner") and method == "DELETE":
        assert listed.status_code == 404
    elif who != "owner":
        assert listed.status_code == 200
        assert listed.json() == before


def test_list_shows_only_own_keys_unless_admin(gw: Gateway, client: httpx.Client) -> None:
    # Both keys are made here, so the test holds when run alone.
    for key in ("own:bob", "chat:bob"):
        client.post(
            f"/v1/sessions/{key}/messages",
            json={"content": "x", "stream": False},
            headers=gw.auth("bob"),
        )
    bob_keys = {
        s["key"] for s in client.get("/v1/sessions", headers=gw.auth("bob")).json()["sessions"]
    }
    assert "own:bob" in bob_keys
    listed = client.get("/v1/sessions", headers=gw.auth("bob")).json()["sessions"]
    assert {s["owner"] for s in listed} == {"bob"}
    assert "secret" not in json.dumps(listed)
    admin = {
        s["key"] for s in client.get("/v1/sessions", headers=gw.auth("root")).json()["sessions"]
    }
    assert {"own:bob", "chat:bob"} <= admin
    # One page holds them all: the listing says there is no next one.
    assert client.get("/v1/sessions", headers=gw.auth("bob")).json()["next_cursor"] is None
    one = client.get("/v1/sessions", params={"limit": 1}, headers=gw.auth("root")).json()
    assert len(one["sessions"]) == 1 and isinstance(one["next_cursor"], str)


# -- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "headers", "status", "code"),
    [
        (b"{not json", {"content-type": "application/json"}, 400, "invalid_json"),
        (b'{"content": 5}', {"content-type": "application/json"}, 400, "invalid_request"),
        (
            b'{"content": "x", "stream": "yes"}',
            {"content-type": "application/json"},
            400,
            "invalid_request",
        ),
        (
            b'{"content": "x", "surprise": 1}',
            {"content-type": "application/json"},
            400,
            "invalid_request",
        ),
        (b'{"content": "\xff\xfe"}', {"content-type": "application/json"}, 400, "invalid_json"),
        (b'{"content": ""}', {"content-type": "application/json"}, 400, "invalid_content"),
        (b'{"content": "\\ud800"}', {"content-type": "application/json"}, 400, "invalid_content"),
        (
            b'{"content": "' + b"x" * 30000 + b'"}',
            {"content-type": "application/json"},
            413,
            "content_too_large",
        ),
        (
            # Over the turn routes' limit: max_body_bytes plus room for one image.
            b'{"content": "' + b"x" * 8_000_000 + b'"}',
            {"content-type": "application/json"},
            413,
            "payload_too_large",
        ),
        (b"[]", {"content-type": "application/json"}, 400, "invalid_request"),
    ],
)
def test_bad_bodies_get_clear_4xx(
    gw: Gateway,
    client: httpx.Client,
    content: bytes,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    response = client.post(
        "/v1/sessions/bad:input/messages", content=content, headers={**headers, **gw.auth("alice")}
    )
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert client.get("/v1/sessions/bad:input", headers=gw.auth("alice")).status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/sessions/bad%20key", 400, "invalid_session_key"),
        ("GET", "/v1/sessions/" + "k" * 201, 400, "invalid_session_key"),
        ("GET", "/v1/sessions/unknown:key", 404, "session_not_found"),
        ("GET", "/v1/sessions/chat:alice/segments/nope/messages", 400, "invalid_session_id"),
        (
            "GET",
            "/v1/sessions/chat:alice/segments/01890000-0000-7000-8000-000000000000/messages",
            404,
            "segment_not_found",
        ),
        ("GET", "/v1/sessions/chat:alice/segments/x/messages?limit=0", 400, "invalid_request"),
        ("GET", "/v1/nowhere", 404, "not_found"),
        ("PUT", "/v1/sessions", 405, "method_not_allowed"),
    ],
)
def test_bad_ids_and_paths(
    gw: Gateway, client: httpx.Client, method: str, path: str, status: int, code: str
) -> None:
    client.post("/v1/chat", json={"content": "hi", "stream": False}, headers=gw.auth("alice"))
    response = client.request(method, path, headers=gw.auth("alice"))
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


def test_broken_import_names_the_line(gw: Gateway, client: httpx.Client) -> None:
    response = client.post("/v1/import", content=b'{"type":"key"}\n', headers=gw.auth("alice"))
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("line 1:")


def test_metrics_count_turns_and_rotations(gw: Gateway, client: httpx.Client) -> None:
    h = gw.auth("alice")
    client.post(
        "/v1/sessions/metrics:k/messages", json={"content": "a", "stream": False}, headers=h
    )
    client.post("/v1/sessions/metrics:k/new", headers=h)
    # Counts by agent and key say who is active: admins only (or the scraper's token).
    refused = client.get("/metrics", headers=h)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    text = client.get("/metrics", headers=gw.auth("root")).text
    assert 'sessiongate_turns_total{agent="main",outcome="complete"}' in text
    assert 'sessiongate_rotations_total{reason="manual"}' in text
    assert "sessiongate_model_first_token_seconds_bucket" in text
    assert client.get("/metrics").status_code == 401


def test_seed_health_and_status_shapes(gw: Gateway, client: httpx.Client) -> None:
    health = client.get("/api/health", headers=gw.auth("alice")).json()
    assert health["status"] == "ok"
    assert set(health["connections"]) == {"claude", "codex"}
    assert set(health["sessions"]) == {"total", "by_agent"} and health["sessions"]["total"] >= 1
    status = client.get("/api/status", headers=gw.auth("alice")).json()
    assert status["status"] == "running" and status["features"]["session_persistence"] is True
