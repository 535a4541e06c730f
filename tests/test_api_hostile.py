"""Hostile use of the v1 API, as found by the security and fault campaign: squatting on
another user's default key, probing for keys that exist, numbers past 64 bits, and export
files written by hand. Every case answers a clear 4xx and leaves nobody's data changed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("hostile")
    with running_gateway(gateway_settings(path), {"scripted": ScriptedModel()}) as gateway:
        yield gateway


@pytest.fixture
def client(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT) as c:
        yield c


def say(client: httpx.Client, gw: Gateway, who: str, key: str, content: str) -> str:
    response = client.post(
        f"/v1/sessions/{key}/messages",
        json={"content": content, "stream": False},
        headers=gw.auth(who),
    )
    assert response.status_code == 200, response.text
    return str(response.json()["reply"])


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    return str(error["code"])


def export_of(client: httpx.Client, gw: Gateway, who: str, key: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/sessions/{key}/export", headers=gw.auth(who))
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


# -- namespaces -----------------------------------------------------------------------------


def test_another_user_creating_the_primary_key_first_does_not_lock_the_primary_out(
    gw: Gateway, client: httpx.Client
) -> None:
    squat = client.post("/v1/sessions/agent:main:main/new", headers=gw.auth("alice"))
    assert squat.status_code == 200, squat.text
    say(client, gw, "alice", "agent:main:main", "alice squats here 777")
    say(client, gw, "bob", "chat:prime", "bob squats too")

    routed = client.post(
        "/v1/chat", json={"content": "hello, it is me", "stream": False}, headers=gw.auth("prime")
    )
    assert routed.status_code == 200, routed.text
    assert routed.json()["reply"] == "reply to: hello, it is me"
    shown = client.get("/v1/sessions/agent:main:main", headers=gw.auth("prime")).json()
    assert shown["owner"] == "prime"
    texts = [
        m["content"]
        for m in client.get(
            f"/v1/sessions/agent:main:main/segments/{shown['latest']['session_id']}/messages",
            headers=gw.auth("prime"),
        ).json()["messages"]
    ]
    assert texts == ["hello, it is me", "reply to: hello, it is me"]
    assert "777" not in routed.text


def test_an_admin_reads_any_users_key_with_owner_and_others_may_not(
    gw: Gateway, client: httpx.Client
) -> None:
    say(client, gw, "bob", "notes:bob", "bob's private note 31337")
    read = client.get("/v1/sessions/notes:bob?owner=bob", headers=gw.auth("root"))
    assert read.status_code == 200 and read.json()["owner"] == "bob"
    exported = client.get("/v1/sessions/notes:bob/export?owner=bob", headers=gw.auth("root"))
    assert "31337" in exported.text
    # A non-admin naming an owner is refused the same way whether or not the key exists.
    for key in ("notes:bob", "never:used"):
        refused = client.get(f"/v1/sessions/{key}?owner=bob", headers=gw.auth("alice"))
        assert error_of(refused, 403) == "owner_not_allowed"
    # Admins read and erase; they never write into someone else's conversation.
    write = client.post(
        "/v1/sessions/notes:bob/messages?owner=bob",
        json={"content": "admin was here", "stream": False},
        headers=gw.auth("root"),
    )
    assert error_of(write, 403) == "admin_read_only"
    assert error_of(client.get("/v1/sessions/x?owner=bad owner", headers=gw.auth("root")), 400)
    assert "admin was here" not in export_of(client, gw, "bob", "notes:bob").__repr__()


def test_import_goes_into_the_callers_namespace_with_fresh_ids_where_taken(
    gw: Gateway, client: httpx.Client
) -> None:
    say(client, gw, "bob", "travel:bob", "bob plans a trip to Lima")
    client.post("/v1/sessions/travel:bob/new", headers=gw.auth("bob"))
    say(client, gw, "bob", "travel:bob", "and then to Cusco")
    original = export_of(client, gw, "bob", "travel:bob")

    # Alice imports bob's file: no 409 that would say the ids or the key are bob's.
    imported = client.post("/v1/import", content=jsonl(original), headers=gw.auth("alice"))
    assert imported.status_code == 201, imported.text
    assert (imported.json()["owner"], imported.json()["key"]) == ("alice", "travel:bob")
    copy = export_of(client, gw, "alice", "travel:bob")
    ids = {r["session_id"] for r in original if r["type"] == "segment"}
    new_ids = {r["session_id"] for r in copy if r["type"] == "segment"}
    assert len(new_ids) == 2 and not ids & new_ids
    # The copy is the same conversation, relinked to its new ids.
    assert [r["type"] for r in copy] == [r["type"] for r in original]
    assert [r.get("content") for r in copy] == [r.get("content") for r in original]
    rotation = next(r for r in copy if r["type"] == "rotation")
    assert {rotation["from"], rotation["to"]} == new_ids
    # And bob's chain is untouched.
    assert export_of(client, gw, "bob", "travel:bob") == original

    # ?key= imports under another name; the same name twice is the caller's own conflict.
    renamed = client.post(
        "/v1/import?key=trip:copy", content=jsonl(original), headers=gw.auth("alice")
    )
    assert renamed.status_code == 201 and renamed.json()["key"] == "trip:copy"
    again = client.post("/v1/import", content=jsonl(original), headers=gw.auth("alice"))
    assert error_of(again, 409) == "session_key_exists"
    # Nobody imports into another user's namespace over the API, admins included.
    for who, code in (("alice", "owner_not_allowed"), ("root", "admin_read_only")):
        refused = client.post(
            "/v1/import?owner=bob&key=planted", content=jsonl(original), headers=gw.auth(who)
        )
        assert error_of(refused, 403) == code
    assert client.get("/v1/sessions/planted", headers=gw.auth("bob")).status_code == 404


# -- numbers past what a column holds --------------------------------------------------------


@pytest.mark.parametrize("after", ["9223372036854775808", str(10**26), "-1", "1e3", "NaN"])
def test_message_cursors_past_64_bits_are_400(
    gw: Gateway, client: httpx.Client, after: str
) -> None:
    say(client, gw, "alice", "cursor:a", "hello")
    sid = client.get("/v1/sessions/cursor:a", headers=gw.auth("alice")).json()["latest"][
        "session_id"
    ]
    response = client.get(
        f"/v1/sessions/cursor:a/segments/{sid}/messages?after={after}", headers=gw.auth("alice")
    )
    error_of(response, 400)


def test_the_largest_cursor_is_an_empty_page(gw: Gateway, client: httpx.Client) -> None:
    say(client, gw, "alice", "cursor:b", "hello")
    sid = client.get("/v1/sessions/cursor:b", headers=gw.auth("alice")).json()["latest"][
        "session_id"
    ]
    page = client.get(
        f"/v1/sessions/cursor:b/segments/{sid}/messages?after={2**63 - 1}",
        headers=gw.auth("alice"),
    )
    assert page.status_code == 200 and page.json()["messages"] == []


@pytest.mark.parametrize(
    "lifecycle",
    [
        {"idle_window": "999999999999999999d"},
        {"idle_window": "36501d"},
        {"idle_window": "1" * 100 + "s"},
        {"semantic_threshold": float("inf")},
    ],
    ids=["huge-days", "over-100-years", "long-text", "infinite-threshold"],
)
def test_lifecycle_overrides_out_of_range_are_400_and_change_nothing(
    gw: Gateway, client: httpx.Client, lifecycle: dict[str, Any]
) -> None:
    say(client, gw, "alice", "patch:x", "hello")
    body = json.dumps({"lifecycle": lifecycle}).replace("Infinity", "1e999")
    response = client.patch(
        "/v1/sessions/patch:x",
        content=body,
        headers={**gw.auth("alice"), "content-type": "application/json"},
    )
    error_of(response, 400)
    assert client.get("/v1/sessions/patch:x", headers=gw.auth("alice")).json()["overrides"] == {}
    say(client, gw, "alice", "patch:x", "still works")


# -- export files written by hand --------------------------------------------------------------


def _break_key(records: list[dict[str, Any]], **changes: Any) -> list[dict[str, Any]]:
    return [{**records[0], **changes}, *records[1:]]


def _break_first(kind: str, **changes: Any) -> Any:
    def breaker(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        index = next(i for i, r in enumerate(records) if r["type"] == kind)
        copy = list(records)
        copy[index] = {**copy[index], **changes}
        return copy

    return breaker


HAND_WRITTEN = {
    "reply_model-list": lambda rs: _break_key(rs, overrides={"reply_model": ["x"]}),
    "unknown-model": lambda rs: _break_key(rs, overrides={"reply_model": "no-such-model"}),
    "bad-idle-window": lambda rs: _break_key(
        rs, overrides={"lifecycle": {"idle_window": "999999999999999999d"}}
    ),
    "system-role": _break_first("message", role="system"),
    "tool-role-answering-nothing": _break_first("message", role="tool"),
    "cleared-past-int64": _break_first("segment", cleared_after_seq=2**63),
    "cleared-past-messages": _break_first("segment", cleared_after_seq=50),
    "seq-past-int64": _break_first("message", seq=2**63),
}


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_a_hand_written_export_is_refused_with_its_line_and_writes_nothing(
    gw: Gateway, client: httpx.Client, name: str
) -> None:
    key = f"import:{name}"
    say(client, gw, "alice", key, "an ordinary message")
    original = export_of(client, gw, "alice", key)
    broken = HAND_WRITTEN[name](original)
    response = client.post(
        f"/v1/import?key=hand:{name}", content=jsonl(broken), headers=gw.auth("alice")
    )
    assert error_of(response, 400) in ("invalid_import", "import_format")
    assert response.json()["error"]["message"].startswith("line ")
    assert client.get(f"/v1/sessions/hand:{name}", headers=gw.auth("alice")).status_code == 404
    # The route still answers turns afterwards (a bad override used to break every turn).
    say(client, gw, "alice", key, "still fine")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_in_an_export_are_refused(
    gw: Gateway, client: httpx.Client, literal: str
) -> None:
    key = f"nan:{literal.strip('-').lower()}"
    say(client, gw, "alice", key, "hello")
    lines = [json.dumps(r) for r in export_of(client, gw, "alice", key)]
    segment = next(i for i, line in enumerate(lines) if '"type": "segment"' in line)
    lines[segment] = lines[segment][:-1] + f', "confidence": {literal}}}'
    response = client.post(
        f"/v1/import?key={key}-copy",
        content="\n".join(lines).encode(),
        headers=gw.auth("alice"),
    )
    error_of(response, 400)
    assert client.get(f"/v1/sessions/{key}-copy", headers=gw.auth("alice")).status_code == 404
