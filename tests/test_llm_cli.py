"""The `llm` command-line tool (PyPI `llm`) against a real gateway on loopback, as
docs/clients/llm.md sets it up: the gateway's agent registered in
`extra-openai-models.yaml`, its key in `keys.json`, both in a temporary `LLM_USER_PATH`.
`llm` runs as a subprocess; what it prints and what the gateway stored and sent to the
(scripted) model are both checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sessiongate.models.base import WireMessage
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

LLM = Path(sys.executable).parent / "llm"


def reply(messages: object) -> str:
    """The scripted model answers with the last user message, so each answer is known."""
    assert isinstance(messages, list)
    last: WireMessage = messages[-1]
    return f"echo {last['content']}"


@pytest.fixture(scope="module")
def model() -> ScriptedModel:
    return ScriptedModel(reply=reply)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, model: ScriptedModel) -> Iterator[Gateway]:
    if not LLM.exists():
        pytest.skip("the `llm` CLI is not installed (pip install -e '.[dev]')")
    settings = gateway_settings(tmp_path_factory.mktemp("llm-gateway"))
    with running_gateway(settings, {"scripted": model}) as gateway:
        yield gateway


@pytest.fixture
def llm_home(tmp_path: Path, gw: Gateway) -> Path:
    """`llm`'s configuration directory: the agent `main` as model `sg-main`, alice's key."""
    home = tmp_path / "llm"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        "- model_id: sg-main\n"
        "  model_name: main\n"
        f'  api_base: "{gw.url}/v1"\n'
        "  api_key_name: sessiongate\n",
        encoding="utf-8",
    )
    (home / "keys.json").write_text(json.dumps({"sessiongate": gw.keys["alice"]}))
    return home


def run_llm(home: Path, *args: str) -> str:
    environment = {**os.environ, "LLM_USER_PATH": str(home)}
    environment.pop("OPENAI_API_KEY", None)  # only keys.json may supply the key
    done = subprocess.run(
        [str(LLM), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def sessions_of(gw: Gateway) -> dict[str, int]:
    """Alice's keys on the gateway and how many messages each holds."""
    listed = httpx.get(f"{gw.url}/v1/sessions", headers=gw.auth("alice"), timeout=10).json()
    return {s["key"]: s["message_count"] for s in listed["sessions"]}


def test_a_prompt_streams_back_the_reply(gw: Gateway, llm_home: Path, model: ScriptedModel) -> None:
    before = len(model.requests)
    assert run_llm(llm_home, "-m", "sg-main", "hello from llm") == "echo hello from llm"
    assert len(model.requests) == before + 1
    assert model.requests[-1][-1] == {"role": "user", "content": "hello from llm"}


def test_continue_keeps_the_conversation_and_a_new_prompt_starts_another(
    gw: Gateway, llm_home: Path, model: ScriptedModel
) -> None:
    known = sessions_of(gw)
    assert run_llm(llm_home, "-m", "sg-main", "my cat is Tom") == "echo my cat is Tom"
    opened = set(sessions_of(gw)) - set(known)
    assert len(opened) == 1  # the first prompt: a conversation of its own
    (key,) = opened
    assert key.startswith("oai:chat:")

    assert run_llm(llm_home, "-c", "what is his name?") == "echo what is his name?"
    # The second turn's context holds the first exchange, as the gateway stored it.
    assert [(m["role"], m["content"]) for m in model.requests[-1] if m["role"] != "system"] == [
        ("user", "my cat is Tom"),
        ("assistant", "echo my cat is Tom"),
        ("user", "what is his name?"),
    ]
    after_continue = sessions_of(gw)
    assert set(after_continue) - set(known) == {key}  # no new key: the same conversation
    assert after_continue[key] == 4

    assert run_llm(llm_home, "-m", "sg-main", "an unrelated question") == (
        "echo an unrelated question"
    )
    fresh = set(sessions_of(gw)) - set(known) - {key}
    assert len(fresh) == 1  # a fresh prompt: a new conversation
    assert [m["content"] for m in model.requests[-1] if m["role"] != "system"] == [
        "an unrelated question"
    ]
    assert sessions_of(gw)[key] == 4  # the first conversation is untouched


def test_a_system_prompt_reaches_the_model(
    gw: Gateway, llm_home: Path, model: ScriptedModel
) -> None:
    said = run_llm(llm_home, "-m", "sg-main", "-s", "Answer like a pirate.", "ahoy")
    assert said == "echo ahoy"
    systems = [m["content"] for m in model.requests[-1] if m["role"] == "system"]
    assert any("Answer like a pirate." in content for content in systems), systems
