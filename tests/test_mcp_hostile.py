"""MCP servers and tool schemas that misbehave on purpose (a hostile test campaign's
findings, each kept here as a test): a server that never answers the handshake, one that
answers a call with error -32000, one that lets a call hang, one that floods stderr or
stdout, a server named like the gateway's own tools, and tool schemas that fetch URLs,
backtrack catastrophically or do not compile. The last tests run `sessiongate serve` as a
subprocess, as an operator would.

The misbehaving servers are in tests/support/mcp_hostile.py; every timeout here is short,
so each test takes a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.agents.builtin import images, notes, tasks, video, weather
from sessiongate.agents.mcp import stdio as mcp_stdio
from sessiongate.agents.mcp.source import McpToolSource
from sessiongate.agents.registry import ToolRegistry
from sessiongate.agents.tools import FunctionTool, StaticToolSource, ToolContext, ToolFailed
from sessiongate.config import load_settings
from sessiongate.config.tools import RESERVED_SERVER_NAMES, McpServerConfig
from sessiongate.core.keys import KeyRef
from sessiongate.core.pattern_cost import pattern_limit
from sessiongate.core.plans import InvalidPlan, parse_plan
from sessiongate.core.tool_schema import check_arguments
from sessiongate.errors import ConfigError
from sessiongate.models.base import ToolSpec
from tests.support.gateway import parse_sse
from tests.support.mcp_hostile import Hostile, alive, tool_calling_model, trap_port, write_hostile

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from sessiongate.cli.main import app; app()"]


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    return write_hostile(tmp_path)


def server(hostile: Hostile, mode: str, **fields: object) -> McpServerConfig:
    return McpServerConfig.model_validate(
        {"command": sys.executable, "args": hostile.argv(mode), **fields}
    )


def wait_for(condition: Any, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


# --- a server that never answers the handshake ---------------------------------------


async def test_a_silent_server_costs_one_connect_timeout_and_leaves_nothing(
    hostile: Hostile,
) -> None:
    # It ignores SIGTERM and its stdin, and keeps a child in its process group.
    source = McpToolSource("silent", server(hostile, "silent", connect_timeout="1s"))
    try:
        started = time.monotonic()
        async with asyncio.timeout(15):  # the old close waited for it forever
            outcomes = await asyncio.gather(
                *(source.tools() for _ in range(5)), return_exceptions=True
            )
        assert time.monotonic() - started < 3
        assert all(isinstance(o, ToolFailed) for o in outcomes)
        assert "no answer to the handshake within 1 s" in str(outcomes[0])
        # Five turns at once shared one attempt: one process was started, and it and its
        # child are gone as soon as the attempt failed.
        assert hostile.lines()[0].startswith("started") and len(hostile.pids()) == 2
        assert wait_for(lambda: not any(alive(p) for p in hostile.pids()), within=1)
        # Until the back-off ends, later turns pay nothing.
        started = time.monotonic()
        with pytest.raises(ToolFailed, match="no answer to the handshake"):
            await source.tools()
        assert time.monotonic() - started < 0.1
        assert len(hostile.pids()) == 2
    finally:
        await source.aclose()


async def test_closing_while_a_silent_server_connects_kills_it_at_once(hostile: Hostile) -> None:
    source = McpToolSource("silent", server(hostile, "silent", connect_timeout="30s"))
    listing = asyncio.create_task(source.tools())
    assert await asyncio.to_thread(wait_for, lambda: len(hostile.pids()) == 2)
    started = time.monotonic()
    listing.cancel()  # what a turn that ends does to a listing still connecting
    with pytest.raises(asyncio.CancelledError):
        await listing
    await source.aclose()
    assert time.monotonic() - started < 3
    assert await asyncio.to_thread(wait_for, lambda: not any(alive(p) for p in hostile.pids()), 1)


def test_mcp_list_gives_up_on_a_silent_server_within_its_connect_timeout(
    tmp_path: Path, hostile: Hostile
) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(tmp_path / 'data'))}\n"
        "[mcp.silent]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps(hostile.argv('silent'))}\n"
        'connect_timeout = "1s"\n'
    )
    started = time.monotonic()
    result = subprocess.run(
        [*CLI, "mcp", "list", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert time.monotonic() - started < 10
    assert result.returncode == 1, result.stderr
    assert "no answer to the handshake within 1 s" in result.stdout
    assert hostile.pids() and not any(alive(p) for p in hostile.pids())


# --- answers are never a reason to send a call again ---------------------------------


async def test_an_error_answer_of_minus_32000_is_reported_not_resent(hostile: Hostile) -> None:
    source = McpToolSource("hostile", server(hostile, "polite"))
    try:
        with pytest.raises(ToolFailed, match="refused the call to 'count': Connection closed"):
            await source.call_tool("count", {})
        assert hostile.calls("count") == 1  # ran once: not restarted and sent again
        assert source.connects == 1
        assert "ran in" in (await source.call_tool("pid", {})).content  # the session lives on
        assert source.connects == 1
    finally:
        await source.aclose()


HTTP_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("counter")


@server.tool()
def count() -> str:
    with open(sys.argv[2], "a") as notes:
        notes.write("call count\\n")
    return "counted"


server.run("streamable-http", port=int(sys.argv[1]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_counter(script: Path, port: int, notes: Path) -> Iterator[None]:
    process = subprocess.Popen(
        [sys.executable, str(script), str(port), str(notes)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if not wait_for(lambda: _listening(port), within=20):
            raise AssertionError("the HTTP MCP server did not listen")
        yield
    finally:
        process.terminate()
        process.wait(10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


async def test_a_404_for_a_forgotten_session_is_the_one_answer_sent_again(tmp_path: Path) -> None:
    """The spec's way of saying "I do not know this session": the request was not
    processed, so it goes once more on a new session, and runs once in all."""
    script, notes_file, port = tmp_path / "counter.py", tmp_path / "notes.txt", free_port()
    script.write_text(HTTP_SERVER)
    source = McpToolSource("counter", McpServerConfig(url=f"http://127.0.0.1:{port}/mcp"))
    try:
        with http_counter(script, port, notes_file):
            assert (await source.call_tool("count", {})).content == "counted"
        with http_counter(script, port, notes_file):  # restarted: our session is unknown
            assert (await source.call_tool("count", {})).content == "counted"
        assert notes_file.read_text().count("call count") == 2
        assert source.connects == 2
    finally:
        await source.aclose()


# --- a call that hangs ------------------------------------------------------------------


async def test_a_hung_call_ends_a_stubborn_server_and_the_next_call_does_not_wait(
    hostile: Hostile,
) -> None:
    # A 30 s list_timeout: the old health ping spent it (or tool_timeout) on every call.
    config = server(hostile, "stubborn", timeout="1s", list_timeout="30s")
    source = McpToolSource("stubborn", config)
    try:
        (first,) = [
            int(w) for w in (await source.call_tool("pid", {})).content.split() if w.isdigit()
        ]
        with pytest.raises(ToolFailed, match="did not answer the call to 'hang'"):
            await source.call_tool("hang", {})
        assert not alive(first)  # SIGTERM is ignored: it was killed without a grace period
        started = time.monotonic()
        assert str(first) not in (await source.call_tool("pid", {})).content
        assert time.monotonic() - started < 2
        assert source.connects == 2 and hostile.calls("hang") == 1
    finally:
        await source.aclose()


# --- output that is too big --------------------------------------------------------------


async def test_a_huge_stderr_line_is_read_in_bounded_memory(
    hostile: Hostile, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="sessiongate.mcp")
    monkeypatch.setenv("FLOOD_BYTES", "20000000")
    source = McpToolSource("flood", server(hostile, "stderr_flood"))
    tracemalloc.start()
    try:
        await source.tools()
        assert await asyncio.to_thread(
            wait_for, lambda: "after the flood" in _stderr_lines(caplog), 10
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await source.aclose()
    assert peak < 5_000_000, f"{peak} bytes at peak for a 20 MB line"
    lines = _stderr_lines(caplog)
    assert len(lines[0]) == mcp_stdio.STDERR_LINE_CHARS and set(lines[0]) == {"x"}


def _stderr_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [getattr(r, "line", "") for r in caplog.records if r.msg == "mcp_server_stderr"]


async def test_an_oversized_message_is_dropped_not_buffered(
    hostile: Hostile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_stdio, "MAX_MESSAGE_BYTES", 1_000_000)
    source = McpToolSource("big", server(hostile, "polite", timeout="1s"))
    tracemalloc.start()
    try:
        with pytest.raises(ToolFailed, match="did not answer the call to 'big'"):
            await source.call_tool("big", {})  # a 3 MB answer line
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await source.aclose()
    assert peak < 2_500_000
    assert hostile.calls("big") == 1


# --- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["agent", "notes", "Tasks"])
def test_reserved_server_names_are_refused_at_start_up(tmp_path: Path, name: str) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(f'[mcp.{name}]\ncommand = "true"\n')
    with pytest.raises(ConfigError, match=rf"mcp\.{name}: '{name}' is reserved"):
        load_settings(config)


def test_every_built_in_tool_family_is_reserved() -> None:
    built_in = [images.NAME, notes.SEARCH, notes.ADD, tasks.ADD, tasks.LIST, tasks.COMPLETE]
    for name in [*built_in, video.NAME, weather.NAME, "agent__main"]:
        assert name.split("_")[0] in RESERVED_SERVER_NAMES, name


# --- schemas --------------------------------------------------------------------------------

OBJECT_WITH = "{'type': 'object', 'properties': {'q': %s}, 'required': ['q']}"


def test_a_remote_ref_is_never_fetched() -> None:
    with trap_port() as trap:
        schema = {"type": "object", "properties": {"q": {"$ref": trap.url}}, "required": ["q"]}
        check = check_arguments(schema, {"q": 1})
        assert check.mismatch is None and check.limited is not None
        assert "nothing is fetched" in check.limited
        missing = check_arguments(schema, {})
        assert (
            missing.mismatch is not None
            and "'q' is a required property" in missing.mismatch.message
        )
        # Local references still resolve, and count.
        local = {"$defs": {"s": {"type": "string"}}, "properties": {"q": {"$ref": "#/$defs/s"}}}
        wrong = check_arguments(local, {"q": 3}).mismatch
        assert wrong is not None and wrong.where == "q"
        time.sleep(0.2)
    assert trap.connections == []


def test_a_catastrophic_pattern_is_not_run_and_the_rest_is_still_checked() -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}, "n": {"type": "integer"}},
        "required": ["q"],
    }
    started = time.monotonic()
    passing = check_arguments(schema, {"q": "a" * 40 + "!"})
    assert time.monotonic() - started < 0.5
    assert passing.mismatch is None and "backtrack exponentially" in str(passing.limited)
    typed = check_arguments(schema, {"q": "a", "n": "seven"}).mismatch
    assert typed is not None and typed.where == "n" and "not of type 'integer'" in typed.message


@pytest.mark.parametrize(
    ("pattern", "unit"),
    [(r"\d+x", "1"), (r"\d*\d*\d*\d*x", "1"), (r"^[a-z]+@[a-z]+\.[a-z]+$", "a"), (r"(a|b)+c", "a")],
)
def test_a_pattern_runs_only_on_strings_it_can_finish_quickly(pattern: str, unit: str) -> None:
    limit = pattern_limit(pattern).max_subject
    assert 10 <= limit < 10_000_000
    worst = unit * (limit - 1) + "!"  # its worst case at the longest string allowed
    started = time.monotonic()
    re.search(pattern, worst)
    assert time.monotonic() - started < 0.2
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": pattern}}}
    assert check_arguments(schema, {"q": worst}).limited is None
    too_long = check_arguments(schema, {"q": unit + worst})
    assert too_long.mismatch is None and "too long for the schema's patterns" in str(
        too_long.limited
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"q": {"type": "string", "pattern": "(unclosed"}}, "required": ["q"]},
        {"properties": {"q": {"type": "string", "pattern": r"\p{L}+"}}, "required": ["q"]},
        {"properties": {"q": {"type": 5}}, "required": ["q"]},
        {"allOf": [{"$ref": "#"}], "required": ["q"]},
        {"properties": {"q": {"minLength": "x"}}, "required": ["q"]},
    ],
)
def test_a_broken_schema_is_never_fatal(schema: dict[str, Any]) -> None:
    check = check_arguments({"type": "object", **schema}, {"q": "text"})
    assert check.mismatch is None and check.limited is not None
    missing = check_arguments({"type": "object", **schema}, {}).mismatch
    assert missing is not None and "'q' is a required property" in missing.message


async def test_the_registry_checks_arguments_off_the_loop_and_in_bounded_time() -> None:
    async def echo(arguments: dict[str, Any], context: ToolContext) -> str:
        return "called"

    schemas = {
        "redos": {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}}},
        "bad": {"type": "object", "properties": {"q": {"type": "string", "pattern": "(x"}}},
    }
    tools = {
        name: FunctionTool(ToolSpec(name, "", schema), echo, source="mcp:x")
        for name, schema in schemas.items()
    }
    registry = ToolRegistry([StaticToolSource("x", list(tools.values()))])
    context = ToolContext("alice", True, KeyRef("alice", "k"), "main", "t1")
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    try:
        arguments = json.dumps({"q": "a" * 27 + "!"})  # seconds of backtracking, if run
        results = [
            await registry.call(tools, f"c{n}", name, arguments, context, limit_seconds=10)
            for n, name in enumerate(tools)
        ]
    finally:
        ticker.cancel()
    assert time.monotonic() - started < 1
    assert [r.status for r in results] == ["ok", "ok"] and results[0].content == "called"
    assert max(gaps, default=0.0) < 0.2


def test_plans_check_tool_input_with_the_same_safe_checker() -> None:
    with trap_port() as trap:
        specs = {
            "remote": ToolSpec(
                "remote", "", {"type": "object", "properties": {"q": {"$ref": trap.url}}}
            ),
            "redos": ToolSpec(
                "redos",
                "",
                {"type": "object", "properties": {"q": {"pattern": "^(a+)+$"}}, "required": ["q"]},
            ),
        }
        plan = json.dumps(
            {
                "plan": [
                    {"step": 1, "tool": "remote", "tool_input": {"q": 1}},
                    {"step": 2, "tool": "redos", "tool_input": {"q": "a" * 40 + "!"}},
                ]
            }
        )
        started = time.monotonic()
        assert len(parse_plan(plan, specs, max_steps=4)) == 2
        assert time.monotonic() - started < 0.5
        bad = json.dumps({"plan": [{"step": 1, "tool": "redos", "tool_input": {}}]})
        with pytest.raises(InvalidPlan, match="'q' is a required property"):
            parse_plan(bad, specs, max_steps=4)
    assert trap.connections == []


# --- through `sessiongate serve` ---------------------------------------------------------


def served_config(
    directory: Path, port: int, model_url: str, hostile: Hostile, mode: str, **mcp: str
) -> Path:
    fields = "".join(f"{k} = {json.dumps(v)}\n" for k, v in mcp.items())
    config = directory / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(directory / 'data'))}\n"
        f"[server]\nport = {port}\n"
        '[lifecycle]\ntimezone = "UTC"\n'
        "[models.fake]\n"
        f'provider = "openai"\nmodel = "m"\nbase_url = {json.dumps(model_url)}\n'
        "max_retries = 0\n"
        '[agents.defaults]\nmodel = "fake"\ntools = ["hostile__*"]\ntool_timeout = "5s"\n'
        "[mcp.hostile]\n"
        f"command = {json.dumps(sys.executable)}\nargs = {json.dumps(hostile.argv(mode))}\n"
        f"{fields}",
        encoding="utf-8",
    )
    return config


@contextmanager
def serving(
    config: Path, log: Path, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str, str]]:
    """`sessiongate serve`, healthy, with a user's key: (process, base URL, key)."""
    added = subprocess.run(
        [*CLI, "users", "add", "alice", "--primary", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip().splitlines()[-1]
    port = load_settings(config).server.port
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*CLI, "serve", "--config", str(config)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_for(lambda: _healthy(url, process), within=60):
            pytest.fail(f"serve did not start: {log.read_text(errors='replace')}")
        yield process, url, key
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def _healthy(url: str, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        return True  # exited: the caller's failure message shows why
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def chat(url: str, key: str, content: str) -> list[tuple[str, dict[str, Any]]]:
    answer = httpx.post(
        f"{url}/v1/chat",
        json={"content": content},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return parse_sse(answer.text)


def log_events(log: Path, event: str) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{event}"' in line:
            found.append(json.loads(line))
    return found


@contextmanager
def health_watched(url: str) -> Iterator[list[float]]:
    """/health asked every 50 ms while the block runs: how long each answer took."""
    latencies: list[float] = []
    done = threading.Event()

    def watch() -> None:
        with httpx.Client(timeout=30) as client:
            while True:  # at least once, however short the block
                started = time.monotonic()
                client.get(f"{url}/health")
                latencies.append(time.monotonic() - started)
                if done.wait(0.05):
                    break

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield latencies
    finally:
        done.set()
        watcher.join(30)


def test_a_served_gateway_offers_and_calls_its_mcp_tools(tmp_path: Path, hostile: Hostile) -> None:
    log = tmp_path / "serve.log"
    with tool_calling_model() as model_url:
        config = served_config(tmp_path, free_port(), model_url, hostile, "polite")
        with serving(config, log) as (_, url, key):
            offered = httpx.get(
                f"{url}/v1/tools",
                params={"agent": "main"},
                headers={"Authorization": f"Bearer {key}"},
                timeout=30,
            ).json()["tools"]
            assert {"hostile__pid", "hostile__count"} <= {t["name"] for t in offered}
            assert {t["source"] for t in offered} == {"mcp:hostile"}
            events = chat(url, key, "call hostile__pid {}")
    (end,) = [data for kind, data in events if kind == "tool_end"]
    assert end["status"] == "ok" and "pid ran in" in end["output"], end
    assert "shut down" not in log.read_text(errors="replace")


def test_a_served_gateway_with_a_silent_server_answers_and_stops_promptly(
    tmp_path: Path, hostile: Hostile
) -> None:
    log = tmp_path / "serve.log"
    with tool_calling_model() as model_url:
        config = served_config(
            tmp_path,
            free_port(),
            model_url,
            hostile,
            "silent",
            connect_timeout="1s",
            retry_backoff="2s",
        )
        with serving(config, log) as (process, url, key):
            headers = {"Authorization": f"Bearer {key}"}
            started = time.monotonic()
            listed = httpx.get(
                f"{url}/v1/tools", params={"agent": "main"}, headers=headers, timeout=30
            )
            assert listed.status_code == 200 and listed.json()["tools"] == []
            assert time.monotonic() - started < 5
            started = time.monotonic()
            events = chat(url, key, "hello")  # within the back-off: costs nothing
            assert time.monotonic() - started < 2
            assert events[-1][0] == "end"
            assert len(hostile.pids()) == 2  # one attempt, for both requests
            # A turn that is waiting on a new connect when the gateway is told to stop.
            time.sleep(2)  # the back-off ends
            waiting = threading.Thread(target=_ask_tools, args=(url, headers), daemon=True)
            waiting.start()
            assert wait_for(lambda: len(hostile.pids()) == 4, within=5)
            started = time.monotonic()
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=20)
            assert time.monotonic() - started < 8
            waiting.join(10)
    assert not any(alive(p) for p in hostile.pids())
    (first, *_) = log_events(log, "tool_source_unavailable")
    assert "no answer to the handshake within 1 s" in first["reason"]


def _ask_tools(url: str, headers: dict[str, str]) -> None:
    with suppress(httpx.TransportError):  # the gateway stops under it: the point
        httpx.get(f"{url}/v1/tools", params={"agent": "main"}, headers=headers, timeout=30)


def test_a_served_gateway_survives_hostile_schemas(tmp_path: Path, hostile: Hostile) -> None:
    log = tmp_path / "serve.log"
    with tool_calling_model() as model_url, trap_port() as trap:
        config = served_config(tmp_path, free_port(), model_url, hostile, "polite")
        with serving(config, log, env={"TRAP_URL": trap.url}) as (_, url, key):
            redos = json.dumps({"q": "a" * 30 + "!"})
            for content in (
                'call hostile__remote_ref {"q": 1}',
                f"call hostile__redos {redos}",
                'call hostile__bad_pattern {"q": "text"}',
                "call hostile__bad_pattern {}",
            ):
                with health_watched(url) as health:
                    started = time.monotonic()
                    events = chat(url, key, content)
                    assert time.monotonic() - started < 5
                assert health and max(health) < 1
                (end,) = [data for kind, data in events if kind == "tool_end"]
                if content.endswith("{}"):
                    assert end["status"] == "error", end
                    assert "'q' is a required property" in end["output"]
                else:
                    assert end["status"] == "ok" and "ran in" in end["output"], end
    assert trap.connections == []
    limited = log_events(log, "tool_schema_checked_in_part")
    assert {e["tool"] for e in limited} == {
        "hostile__remote_ref",
        "hostile__redos",
        "hostile__bad_pattern",
    }
