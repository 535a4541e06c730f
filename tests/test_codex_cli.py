"""Codex CLI (`@openai/codex` 0.171 from npm, its Linux binary in the package) against
`sessiongate serve` with a custom model provider speaking the Responses API (DESIGN.md
§14, issue 25): `codex exec` completes a turn through the gateway against a stub
chat-completions model and prints its answer; the gateway keeps that session as one key;
`codex exec resume --last` continues the same key without repeating a message.

Needs the `codex` command: scripts/test installs it (scripts/clients.sh, into
.client-tools/) and points `SESSIONGATE_TEST_CODEX` at it; elsewhere put `codex` on PATH.
Skipped, and said, only where npm is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.openai_wire_server import WireAnswer, openai_wire_server
from tests.support.served import served_gateway
from tests.support.served_fake_model import fake_model_config

CODEX = os.environ.get("SESSIONGATE_TEST_CODEX") or shutil.which("codex")

pytestmark = pytest.mark.skipif(
    CODEX is None, reason="Codex CLI not installed (npm install @openai/codex@0.171)"
)


def _answer(body: dict[str, Any]) -> WireAnswer:
    return WireAnswer(f"Stub answer number {len(body['messages'])}.")


def _codex(home: Path, work: Path, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    assert CODEX is not None
    env = {**os.environ, "CODEX_HOME": str(home), "SESSIONGATE_API_KEY": key}
    return subprocess.run(
        [CODEX, "exec", "--skip-git-repo-check", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_codex_exec_and_resume_keep_one_key(tmp_path: Path) -> None:
    with openai_wire_server(_answer) as wire:
        config = fake_model_config(wire.url, "[agents.main]\n")
        with served_gateway(tmp_path, config, {"alice": ()}) as served:
            home, work = tmp_path / "codex-home", tmp_path / "work"
            home.mkdir()
            work.mkdir()
            # The lines docs/clients/responses-api.md shows.
            (home / "config.toml").write_text(
                'model = "main"\nmodel_provider = "sg"\n\n[model_providers.sg]\n'
                f'name = "sessiongate"\nbase_url = "{served.url}/v1"\n'
                'env_key = "SESSIONGATE_API_KEY"\nwire_api = "responses"\n',
                encoding="utf-8",
            )
            key = served.keys["alice"]
            first = _codex(home, work, key, "What is the answer?")
            assert first.returncode == 0, first.stderr[-2000:]
            said = first.stdout.strip()
            assert said.startswith("Stub answer number"), first.stdout
            resumed = _codex(home, work, key, "resume", "--last", "And again?")
            assert resumed.returncode == 0, resumed.stderr[-2000:]
            assert len(wire.requests) == 2
            with httpx.Client(base_url=served.url, headers=served.auth("alice")) as rest:
                sessions = rest.get("/v1/sessions").json()["sessions"]
                assert len(sessions) == 1 and sessions[0]["segment_count"] == 1
                name, sid = sessions[0]["key"], sessions[0]["latest_session_id"]
                page = rest.get(f"/v1/sessions/{name}/segments/{sid}/messages").json()
    stored = [(m["role"], m["content"]) for m in page["messages"]]
    users = [content for role, content in stored if role == "user"]
    assert users[-2:] == ["What is the answer?", "And again?"]
    assert [content for role, content in stored if role == "assistant"] == [
        said,
        resumed.stdout.strip(),
    ]
    # The resumed request re-sent the whole conversation; nothing was stored twice.
    assert len(users) == len(set(users))
