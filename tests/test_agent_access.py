"""Naming an agent or a model never reaches more than the caller's routes and endpoints
give them (issue 18, item 1): the pure rule, then a served gateway where a user without a
mode names the mode's agent, its model, and the desktop agent that runs scripts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from sessiongate.core.agent_access import (
    AccessPolicy,
    AgentGrant,
    Who,
    default_agent_for,
    granted,
    modes_that_open,
    routed_agents,
    users_allow,
)
from sessiongate.core.routing import DEFAULT_ROUTES, Route
from tests.support.served import Served, relay_model, served_gateway

ALICE = Who("alice")
OWNER = Who("owner", primary=True)
ROOT = Who("root", admin=True)


def policy(
    routes: tuple[Route, ...] = (),
    mode_agents: dict[str, str | None] | None = None,
    grants: dict[str, AgentGrant] | None = None,
    endpoints: frozenset[str] = frozenset(),
) -> AccessPolicy:
    return AccessPolicy(
        routes=routes,
        mode_agents=mode_agents or {},
        default_agent="main",
        endpoint_agents=endpoints,
        grants=grants or {"main": AgentGrant()},
    )


# -- the rule ---------------------------------------------------------------------------


def test_with_no_routes_everyone_runs_the_default_agent_and_nothing_else() -> None:
    rules = policy(grants={"main": AgentGrant(), "coder": AgentGrant()})
    assert routed_agents(rules, ALICE, ()) == {"main"}
    assert granted(rules, "main", ALICE) is True
    # Nothing routes to coder and nobody lists alice: only a mode could say otherwise,
    # and no mode gives it.
    assert granted(rules, "coder", ALICE) is None
    assert modes_that_open(rules, "coder", ALICE, ["private"]) == []


def test_a_mode_agent_opens_only_while_that_mode_is_active() -> None:
    rules = policy(
        mode_agents={"private": "lexi"}, grants={"main": AgentGrant(), "lexi": AgentGrant()}
    )
    assert granted(rules, "lexi", ALICE) is None  # undecided without the mode's state
    assert modes_that_open(rules, "lexi", ALICE, ["private"]) == ["private"]
    assert modes_that_open(rules, "lexi", ALICE, []) == []
    assert "lexi" in routed_agents(rules, ALICE, ("private",))


def test_routes_for_one_user_or_the_primary_do_not_open_their_agent_to_others() -> None:
    routes = (
        Route(agent="kids", key="kids:{user}", user="bob"),
        Route(agent="boss", key="agent:main:main", primary=True),
        Route(agent="main", key="chat:{user}"),
    )
    grants = {name: AgentGrant() for name in ("main", "kids", "boss")}
    rules = policy(routes=routes, grants=grants)
    assert routed_agents(rules, Who("bob"), ()) == {"kids"}
    assert routed_agents(rules, OWNER, ()) == {"boss"}
    assert routed_agents(rules, ALICE, ()) == {"main"}
    # Bob's route is the first match on every channel: main is not his.
    assert granted(rules, "main", Who("bob")) is None
    assert default_agent_for(rules, Who("bob"), "http") == "kids"
    assert default_agent_for(rules, ALICE, "http") == "main"


def test_a_route_for_one_channel_opens_its_agent_on_any() -> None:
    routes = (
        Route(agent="voice", key="voice:{user}", channel="voice"),
        *DEFAULT_ROUTES,
    )
    rules = policy(routes=routes, grants={"main": AgentGrant(), "voice": AgentGrant()})
    assert routed_agents(rules, ALICE, ()) == {"voice", "main"}


def test_users_lists_name_people_roles_and_everyone() -> None:
    assert users_allow(["*"], ALICE)
    assert users_allow(["alice"], ALICE) and not users_allow(["bob"], ALICE)
    assert users_allow(["primary"], OWNER) and not users_allow(["primary"], ALICE)
    assert users_allow(["admin"], ROOT) and not users_allow(["admin"], OWNER)
    rules = policy(grants={"main": AgentGrant(), "coder": AgentGrant(users=("alice",))})
    assert granted(rules, "coder", ALICE) is True
    assert granted(rules, "coder", Who("bob")) is None


def test_an_agent_that_runs_scripts_is_for_primary_and_admin_even_behind_an_endpoint() -> None:
    rules = policy(
        grants={"main": AgentGrant(), "desktop": AgentGrant(runs_actions=True)},
        endpoints=frozenset({"desktop"}),
    )
    assert granted(rules, "desktop", ALICE) is False
    assert granted(rules, "desktop", OWNER) is True
    assert granted(rules, "desktop", ROOT) is True
    opened = policy(
        grants={"main": AgentGrant(), "desktop": AgentGrant(users=("alice",), runs_actions=True)}
    )
    assert granted(opened, "desktop", ALICE) is True
    assert granted(opened, "desktop", OWNER) is False  # `users` says otherwise


def test_an_endpoint_opens_its_agent_to_every_user() -> None:
    rules = policy(
        grants={"main": AgentGrant(), "claude": AgentGrant()}, endpoints=frozenset({"claude"})
    )
    assert granted(rules, "claude", ALICE) is True


def test_an_agent_nobody_configured_is_refused_like_any_other() -> None:
    assert granted(policy(), "ghost", ROOT) is False


# -- a served gateway -------------------------------------------------------------------

MODES_AND_SANDBOX = """
[modes.private]
agent = "lexi"
[agents.defaults]
model = "plain"
[agents.main]
model = "plain"
[agents.lexi]
model = "lexi-model"
[agents.coder]
model = "plain"
users = ["carol"]
[agents.desktop]
model = "plain"
output_contract = "script_delimiter"
actions = "sandbox"
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("access")
    text = relay_model(directory, "plain") + relay_model(directory, "lexi-model")
    users: dict[str, tuple[str, ...]] = {
        "owner": ("--primary", "--admin"),
        "alice": (),
        "carol": (),
    }
    with served_gateway(directory, text + MODES_AND_SANDBOX, users) as gateway:
        yield gateway


def refused(response: httpx.Response, code: str) -> dict[str, Any]:
    assert response.status_code == 403, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


def test_served_a_user_without_the_mode_cannot_name_its_agent_anywhere(served: Served) -> None:
    with served.client("alice") as alice:
        message = alice.post(
            "/v1/sessions/x/messages", json={"content": "hi", "agent": "lexi", "stream": False}
        )
        lexi = refused(message, "agent_not_allowed")
        ghost = refused(
            alice.post(
                "/v1/sessions/x/messages",
                json={"content": "hi", "agent": "ghost", "stream": False},
            ),
            "agent_not_allowed",
        )
        # The refusal does not tell an agent that exists for someone else from none.
        assert lexi["message"].replace("lexi", "ghost") == ghost["message"]
        completion = alice.post(
            "/v1/chat/completions",
            json={"model": "lexi", "messages": [{"role": "user", "content": "hi"}]},
        )
        refused(completion, "agent_not_allowed")
        streamed = alice.post(
            "/v1/sessions/x/messages", json={"content": "hi", "agent": "lexi", "stream": True}
        )
        refused(streamed, "agent_not_allowed")
        refused(alice.get("/v1/tools", params={"agent": "lexi"}), "agent_not_allowed")
        refused(alice.get("/v1/sessions/x/context", params={"agent": "lexi"}), "agent_not_allowed")
        # Nothing was written for the refused turns: the key does not exist.
        assert alice.get("/v1/sessions/x").status_code == 404
        # The mode's model through a key's override: refused too.
        assert alice.post("/v1/chat", json={"content": "hello", "stream": False}).is_success
        patched = alice.patch("/v1/sessions/chat:alice", json={"reply_model": "lexi-model"})
        refused(patched, "model_not_allowed")
        assert alice.patch("/v1/sessions/chat:alice", json={"reply_model": "plain"}).is_success


def test_served_models_lists_only_what_the_caller_may_run(served: Served) -> None:
    def listed(user: str) -> list[str]:
        client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=served.keys[user])
        with client:
            return sorted(m.id for m in client.models.list())

    assert listed("alice") == ["main"]
    assert listed("carol") == ["coder", "main"]
    # The primary admin may run the desktop agent (its scripts run on this host).
    assert listed("owner") == ["desktop", "main"]


def test_served_the_desktop_agent_is_not_for_an_ordinary_user(served: Served) -> None:
    with served.client("alice") as alice:
        refused(
            alice.post(
                "/v1/sessions/d/messages",
                json={"content": "open notepad", "agent": "desktop", "stream": False},
            ),
            "agent_not_allowed",
        )
        refused(alice.get("/v1/tools", params={"agent": "desktop"}), "agent_not_allowed")
    with served.client("owner") as owner:
        assert owner.get("/v1/tools", params={"agent": "desktop"}).status_code == 200


def test_served_an_enabled_and_unlocked_mode_opens_its_agent_and_a_lock_closes_it(
    served: Served,
) -> None:
    enabled = served.cli("users", "modes", "carol", "--enable", "private")
    assert enabled.returncode == 0, enabled.stderr
    with served.client("carol") as carol:
        body = {"content": "secret", "agent": "lexi", "stream": False}
        # Enabled but locked: still refused.
        refused(carol.post("/v1/sessions/p/messages", json=body), "agent_not_allowed")
        assert carol.post("/v1/modes/private/unlock", json={}).is_success
        reply = carol.post("/v1/sessions/p/messages", json=body)
        assert reply.status_code == 200, reply.text
        assert reply.json()["reply"] == "reply from lexi-model to: secret"
        # While the mode is open its agent's model may be a key's override.
        assert carol.patch("/v1/sessions/p", json={"reply_model": "lexi-model"}).is_success
        assert carol.post("/v1/modes/private/lock").is_success
        refused(carol.post("/v1/sessions/p/messages", json=body), "agent_not_allowed")
        # The override stays stored, but a turn of main does not take a model main does
        # not list: main answers with its own.
        plain = carol.post("/v1/sessions/p/messages", json={"content": "hi", "stream": False})
        assert plain.json()["reply"] == "reply from plain to: hi"


def test_served_a_socket_naming_no_agent_runs_the_callers_default(served: Served) -> None:
    # /v1/ws takes no agent; its `ready` frame names the one the caller runs.
    import asyncio

    from websockets.asyncio.client import connect

    async def ready() -> dict[str, Any]:
        url = served.url.replace("http", "ws") + "/v1/ws?session_id=w"
        async with connect(url) as socket:
            await socket.send(served.keys["alice"])
            assert await socket.recv() == "authenticated"
            frame: dict[str, Any] = json.loads(await socket.recv())
            return frame

    assert asyncio.run(ready())["agent"] == "main"


def test_served_the_config_names_only_known_models_in_agent_models(tmp_path: Path) -> None:
    from tests.support.served import cli

    config = tmp_path / "bad.toml"
    config.write_text('[agents.main]\nmodels = ["nowhere"]\n', encoding="utf-8")
    checked = cli(config, "config", "check")
    assert checked.returncode != 0
    assert "model 'nowhere' is not defined in [models]" in checked.stderr + checked.stdout
