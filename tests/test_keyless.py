"""The seed clients that send no API key (seed 002's page, seed 004's desktop client):
who is let in as `compat.lifehub_user` / `compat.desktop_user` (api/compat/loopback.py),
and seed 002's `provider` with and without a `compat.providers` table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.api.compat.loopback import host_name, keyless_allowed
from sessiongate.models.base import ReplyModel
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

PAGE = "http://localhost:3000"


def allowed(**facts: Any) -> bool:
    request: dict[str, Any] = {
        "peer": "127.0.0.1",
        "host": "127.0.0.1:8080",
        "origin": None,
        "fetch_site": None,
        "allowed_origins": [PAGE],
    }
    request.update(facts)
    return keyless_allowed(**request)


def test_a_program_on_this_machine_is_let_in() -> None:
    assert allowed()
    assert allowed(peer="::1", host="[::1]:8080")
    assert allowed(host="localhost:8080", fetch_site="none")  # typed in the address bar
    assert allowed(origin=PAGE, fetch_site="same-site")  # the listed page, through CORS


@pytest.mark.parametrize(
    "facts",
    [
        {"peer": "192.168.1.20"},  # another machine
        {"peer": None},
        {"host": "evil.test:8080"},  # a page whose name was made to resolve to 127.0.0.1
        {"host": None},
        {"origin": "http://evil.test"},  # another site's page, through the user's browser
        {"origin": "null"},  # a sandboxed frame or a file:// page
        {"fetch_site": "cross-site"},  # a plain link or <img> on another site
        {"fetch_site": "same-site"},  # a page of another port of this machine, unlisted
    ],
)
def test_anything_else_needs_a_key(facts: dict[str, Any]) -> None:
    assert not allowed(**facts)


def test_host_names() -> None:
    assert host_name("LocalHost:8080") == "localhost"
    assert host_name("[::1]:80") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"
    assert host_name("[::1") is None and host_name("") is None and host_name(None) is None


def data_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_lifehub_page_without_a_key_runs_as_lifehub_user_from_here_only(tmp_path: Path) -> None:
    model = ScriptedModel()
    settings = gateway_settings(
        tmp_path,
        agents={"defaults": {"model": model.name}},
        compat={"lifehub_user": "alice"},
        server={"cors_origins": [PAGE]},
    )
    body = {"messages": [{"role": "user", "content": "hello"}]}
    with (
        running_gateway(settings, {model.name: model}) as gw,
        httpx.Client(base_url=gw.url, timeout=30) as client,
    ):
        keyless = client.post("/chat", json=body)
        from_page = client.post("/chat", json=body, headers={"Origin": PAGE})
        rebound = client.post("/chat", json=body, headers={"Host": "evil.test"})
        linked = client.post("/chat", json=body, headers={"Sec-Fetch-Site": "cross-site"})
        foreign = client.post("/chat", json=body, headers={"Origin": "http://evil.test"})
        wrong_key = client.post("/chat", json=body, headers={"Authorization": "Bearer nope"})
        bob = client.post("/chat", json=body, headers=gw.auth("bob"))
        elsewhere = client.get("/v1/sessions")  # only /chat (and /ai) are keyless
        no_desktop = client.get("/ai", params={"user_input": "hi"})  # desktop_user unset
    assert keyless.status_code == 200 and keyless.headers["x-session-key"] == "lifehub:alice"
    assert from_page.status_code == 200
    assert from_page.headers["access-control-allow-origin"] == PAGE
    for refused in (rebound, linked, foreign, wrong_key, elsewhere, no_desktop):
        assert refused.status_code == 401, refused.text
    assert "access-control-allow-origin" not in foreign.headers
    assert bob.headers["x-session-key"] == "lifehub:bob"  # a key names its own user


def test_a_keyless_user_that_does_not_exist_is_named(tmp_path: Path) -> None:
    model = ScriptedModel()
    settings = gateway_settings(
        tmp_path, agents={"defaults": {"model": model.name}}, compat={"lifehub_user": "ghost"}
    )
    with running_gateway(settings, {model.name: model}) as gw:
        answer = httpx.post(
            f"{gw.url}/chat", json={"messages": [{"role": "user", "content": "hi"}]}, timeout=30
        )
    assert answer.status_code == 401
    assert "compat.lifehub_user 'ghost'" in answer.json()["error"]["message"]


def test_provider_with_and_without_a_providers_table(tmp_path: Path) -> None:
    main, other = ScriptedModel("main-model"), ScriptedModel("other-model")
    models: dict[str, ReplyModel] = {main.name: main, other.name: other}
    body = {"messages": [{"role": "user", "content": "which model?"}], "provider": "ollama"}
    agents = {"defaults": {"model": main.name, "models": [other.name]}}
    with running_gateway(gateway_settings(tmp_path / "a", agents=agents), models) as gw:
        untabled = httpx.post(f"{gw.url}/chat", json=body, headers=gw.auth("alice"), timeout=30)
    # Without a table, whatever `provider` says, the agent's own model answers.
    assert len(main.requests) == 1 and other.requests == []
    tabled_settings = gateway_settings(
        tmp_path / "b", agents=agents, compat={"providers": {"ollama": other.name}}
    )
    with running_gateway(tabled_settings, models) as gw:
        tabled = httpx.post(f"{gw.url}/chat", json=body, headers=gw.auth("alice"), timeout=30)
        unknown = httpx.post(
            f"{gw.url}/chat", json={**body, "provider": "gpt"}, headers=gw.auth("alice")
        )
    start = data_lines(untabled.text)[0]
    assert start["provider"] == {"requested": "ollama", "model": main.name, "source": "agent"}
    start = data_lines(tabled.text)[0]
    assert start["provider"] == {
        "requested": "ollama",
        "model": other.name,
        "source": "compat.providers",
    }
    assert len(other.requests) == 1  # the table's model answered this one
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_provider"
