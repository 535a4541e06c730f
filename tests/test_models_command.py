"""The `command` provider: a relay program that reads the turn on stdin and streams stdout."""

from __future__ import annotations

import asyncio
import logging
import sys
import textwrap
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import cast

import pytest

from sessiongate.config import Settings
from sessiongate.config.models import ModelConfig
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role
from sessiongate.errors import ConfigError
from sessiongate.models.base import ModelChunk, TextDelta
from sessiongate.models.command import CommandModel
from sessiongate.service.engine import build_engine, build_reply_model
from tests.support.fake_providers import consume
from tests.support.helpers import collect, types

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo"}]

ECHO = """
import json, sys, time
turn = json.load(sys.stdin)
last = turn["messages"][-1]["content"]
for word in ["got", str(len(turn["messages"])), "messages:", last]:
    sys.stdout.write(word + " ")
    sys.stdout.flush()
    time.sleep(0.01)
# A multi-byte character split across writes must still come out whole.
for byte in "✓".encode():
    sys.stdout.buffer.write(bytes([byte]))
    sys.stdout.buffer.flush()
    time.sleep(0.01)
"""

FAIL = """
import sys
sys.stdout.write("partial ")
sys.stdout.flush()
sys.stderr.write("noise " * 200 + "FATAL: upstream down\\n")
sys.exit(3)
"""

# Prints its pid and a grandchild's pid, then streams forever.
FOREVER = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
sys.stdout.write(f"{os.getpid()} {child.pid} ")
sys.stdout.flush()
while True:
    time.sleep(0.05)
    sys.stdout.write("more ")
    sys.stdout.flush()
"""


def script(tmp_path: Path, source: str, name: str = "relay.py") -> list[str]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return [sys.executable, str(path)]


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a parent that may never reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_dead(*pids: int, within: float = 2.0) -> bool:
    for _ in range(int(within / 0.02)):
        if not any(alive(pid) for pid in pids):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_streams_stdout_as_tokens_and_gets_the_turn_on_stdin(tmp_path: Path) -> None:
    outcome = await consume(CommandModel("relay", script(tmp_path, ECHO)), MESSAGES)
    assert outcome.error is None
    assert outcome.text == "got 2 messages: héllo ✓"
    assert outcome.tokens >= 4  # streamed as written, not in one piece at exit
    assert outcome.usage is not None and outcome.usage.completion_tokens > 0
    assert outcome.usage.estimated is True  # a command reports no usage: it is counted here


async def test_a_non_zero_exit_is_command_failed_with_stderr_only_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="sessiongate.models")
    outcome = await consume(CommandModel("relay", script(tmp_path, FAIL)), MESSAGES)
    assert outcome.text == "partial "  # streamed before the failure, which still surfaces
    assert outcome.error is not None and outcome.error.code == "command_failed"
    assert outcome.error.message == "the model command exited with code 3"
    assert outcome.usage is None
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "'relay'" in record.__dict__["model"]
    assert record.__dict__["detail"].endswith("FATAL: upstream down")
    assert len(record.__dict__["detail"]) <= len("stderr: ") + 500


async def test_a_relay_that_runs_too_long_is_killed_with_its_process_group(
    tmp_path: Path,
) -> None:
    model = CommandModel("relay", script(tmp_path, FOREVER), timeout=0.5)
    async with asyncio.timeout(5):  # a relay that is never killed fails here, not hangs
        outcome = await consume(model, MESSAGES)
    assert outcome.error is not None and outcome.error.code == "model_timeout"
    assert 0.4 <= outcome.seconds < 2.0
    pid, grandchild = (int(p) for p in outcome.text.split()[:2])
    assert await wait_dead(pid, grandchild)


async def test_a_missing_executable_is_command_not_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="sessiongate.models")
    model = CommandModel("relay", [str(tmp_path / "no-such-relay"), "--token=s3cret"])
    outcome = await consume(model, MESSAGES)
    assert outcome.error is not None and outcome.error.code == "command_not_found"
    assert outcome.error.message == "the model command was not found"
    (record,) = caplog.records
    assert record.__dict__["program"].endswith("no-such-relay")
    assert "s3cret" not in str(vars(record))  # argv past the program may carry secrets


async def test_an_exit_with_code_0_is_a_complete_reply(tmp_path: Path) -> None:
    quiet = "import sys; sys.stdout.write('all of it')"
    outcome = await consume(CommandModel("relay", script(tmp_path, quiet)), MESSAGES)
    assert outcome.error is None and outcome.text == "all of it"
    assert outcome.usage is not None


async def test_a_consumer_that_stops_early_kills_the_relay(tmp_path: Path) -> None:
    model = CommandModel("relay", script(tmp_path, FOREVER), timeout=30)
    stream = cast(AsyncGenerator[ModelChunk, None], model.stream(MESSAGES))
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    pid, grandchild = (int(p) for p in first.text.split()[:2])
    assert alive(pid)
    async with asyncio.timeout(5):
        await stream.aclose()
    assert not alive(pid)  # reaped by the time aclose returns
    assert await wait_dead(grandchild)


async def test_a_cancelled_turn_kills_the_relay(tmp_path: Path) -> None:
    model = CommandModel("relay", script(tmp_path, FOREVER), timeout=30)
    pids: list[int] = []
    got_pids = asyncio.Event()

    async def read() -> None:
        stream = cast(AsyncGenerator[ModelChunk, None], model.stream(MESSAGES))
        try:
            async for chunk in stream:
                if isinstance(chunk, TextDelta) and not pids:
                    pids.extend(int(p) for p in chunk.text.split()[:2])
                    got_pids.set()
        finally:
            await stream.aclose()

    task = asyncio.create_task(read())
    await asyncio.wait_for(got_pids.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await task
    assert await wait_dead(*pids)


def test_config_needs_a_command() -> None:
    with pytest.raises(ConfigError, match=r"models\.relay\.command"):
        build_reply_model("relay", ModelConfig.model_validate({"provider": "command"}))


async def test_a_turn_through_the_engine(tmp_path: Path) -> None:
    engine = build_engine(
        Settings(
            data_dir=tmp_path,
            models={"relay": {"provider": "command", "command": script(tmp_path, ECHO)}},
            agents={"defaults": {"model": "relay", "fallback_models": ["offline"]}},
            lifecycle={"timezone": "UTC"},
        )
    )
    try:
        events = await collect(engine, "hi")
        segment = await engine.store.latest_segment(KeyRef("alice", "chat:alice"))
        messages = await engine.store.list_messages(segment.session_id)
    finally:
        await engine.aclose()
    assert types(events)[-1] == "end"
    (reply,) = [m for m in messages if m.role is Role.ASSISTANT]
    assert reply.content == "got 1 messages: hi ✓" and reply.metadata["model"] == "relay"
