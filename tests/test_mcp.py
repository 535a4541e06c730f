"""MCP servers as a tool source, against real servers nobody here wrote:
`mcp-server-time` (PyPI, stdio), `@modelcontextprotocol/server-everything` (npm, streamable
HTTP) and `@modelcontextprotocol/server-memory` (npm, stdio), plus two small scripts
written below for what those cannot do on demand (die mid-call, hang, never answer,
change their tool list).

The npm servers are installed by scripts/mcp_servers.sh (scripts/test runs it and exports
SESSIONGATE_TEST_MCP_DIR). Without node or the packages, those tests fail under CI=true
and are skipped, with the reason, elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import mcp_types as types
import pytest
from typer.testing import CliRunner

from sessiongate.agents.mcp.source import McpToolSource, prefixed_name, tool_output
from sessiongate.agents.tools import ToolFailed
from sessiongate.cli.main import app
from sessiongate.config.tools import McpServerConfig

ROOT = Path(__file__).resolve().parent.parent
MCP_DIR = Path(os.environ.get("SESSIONGATE_TEST_MCP_DIR") or ROOT / ".mcp-servers")
TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]

# A small MCP server on the official SDK, for the failures real servers do not make on
# demand: it reports its pid, sleeps, exits mid-call, reads its environment, and grows a
# tool (announcing it with notifications/tools/list_changed).
TINY_SERVER = """
import os, sys
import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("tiny")
print("tiny server starting", file=sys.stderr, flush=True)


@server.tool()
def pid() -> str:
    return str(os.getpid())


@server.tool()
async def slow(seconds: float) -> str:
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def crash() -> str:
    os._exit(3)


@server.tool()
def env(name: str) -> str:
    return os.environ.get(name, "(unset)")


def extra() -> str:
    return "extra"


@server.tool()
async def grow(ctx: Context) -> str:
    server.add_tool(extra, name="extra", description="Added later.")
    await ctx.session.send_tool_list_changed()
    return "grown"


server.run()
"""
# Reads its stdin and never writes a byte: a server that hangs at the handshake.
SILENT_SERVER = "import sys\nsys.stdin.buffer.read()\n"


def children() -> list[int]:
    """This process's child processes, zombies included (a zombie is a child nobody
    reaped, which is a leak too)."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid …; comm may hold spaces, so split after its ")".
        if stat.rpartition(")")[2].split()[1] == me:
            found.append(int(entry.name))
    return found


def stdio(*argv: str, **fields: object) -> McpServerConfig:
    return McpServerConfig.model_validate({"command": argv[0], "args": list(argv[1:]), **fields})


@pytest.fixture
def tiny(tmp_path: Path) -> McpServerConfig:
    script = tmp_path / "tiny_server.py"
    script.write_text(TINY_SERVER)
    return stdio(sys.executable, str(script))


@pytest.fixture
async def no_leaks() -> AsyncIterator[None]:
    """Fails a test that leaves a child process behind (every source must be closed)."""
    before = set(children())
    yield
    # aclose() returns only once each server process has exited and been reaped.
    assert not set(children()) - before, "a server process outlived aclose()"


def npm_server(package: str) -> Path:
    entry = MCP_DIR / "node_modules" / "@modelcontextprotocol" / package / "dist" / "index.js"
    if shutil.which("node") and entry.is_file():
        return entry
    reason = f"needs node and {package} in {MCP_DIR} (run scripts/mcp_servers.sh)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpServer:
    """server-everything over streamable HTTP on a port of its own; `stop` and `start`
    again keep the port, as a restarted server would."""

    def __init__(self, entry: Path) -> None:
        self.entry = entry
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["node", str(self.entry), "streamableHttp"],
            env={**os.environ, "PORT": str(self.port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "server-everything exited at start-up"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("server-everything did not listen within 20 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@pytest.fixture
def everything_http() -> Iterator[HttpServer]:
    server = HttpServer(npm_server("server-everything"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- naming and results (no server) ------------------------------------------------


def test_tool_names_are_prefixed_and_unusable_ones_refused() -> None:
    assert prefixed_name("time", "get_current_time") == "time__get_current_time"
    assert prefixed_name("everything", "get-sum") == "everything__get-sum"
    assert prefixed_name("time", "has space") is None
    assert prefixed_name("time", "dotted.name") is None
    assert prefixed_name("s" * 32, "t" * 31) is None  # 65 characters


def test_results_keep_text_and_summarize_everything_else() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="file:///a.txt", mime_type="text/plain", text="inside"
                ),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///b.bin", mime_type="application/gzip", blob="AAAA"
                ),
            ),
            types.ResourceLink(
                type="resource_link", uri="file:///c.md", name="c", mime_type="text/markdown"
            ),
        ],
        is_error=True,
    )
    output = tool_output(result)
    assert output.is_error
    assert output.content.splitlines() == [
        "first",
        "[image: image/png, 5 bytes]",
        "[resource: file:///a.txt (text/plain)]",
        "inside",
        "[resource: file:///b.bin (application/gzip), 3 bytes]",
        "[resource link: file:///c.md (text/markdown) c]",
    ]
    assert "aGVsbG8=" not in output.content
    assert output.data["media"] == [{"kind": "image", "mime_type": "image/png", "data": "aGVsbG8="}]
    structured = tool_output(types.CallToolResult(content=[], structured_content={"n": 1}))
    assert json.loads(structured.content) == {"n": 1} and not structured.is_error


# --- mcp-server-time (stdio, Python) -----------------------------------------------


async def test_time_server_tools_are_prefixed_and_answer(no_leaks: None) -> None:
    source = McpToolSource("time", stdio(*TIME_SERVER))
    try:
        before = children()
        await source.start()
        assert children() == before and source.connects == 0, "start() must spawn nothing"
        tools = {tool.spec.name: tool for tool in await source.tools()}
        assert {"time__get_current_time", "time__convert_time"} <= set(tools)
        spec = tools["time__convert_time"].spec
        assert spec.description and spec.parameters["type"] == "object"
        assert {"source_timezone", "time", "target_timezone"} <= set(spec.parameters["properties"])
        assert tools["time__get_current_time"].source == "mcp:time"

        now = await source.call_tool("get_current_time", {"timezone": "UTC"})
        assert not now.is_error
        assert json.loads(now.content)["timezone"] == "UTC"
        converted = await source.call_tool(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        answer = json.loads(converted.content)
        assert answer["target"]["datetime"].endswith("T21:00:00+09:00")
        assert answer["time_difference"] == "+9.0h"
        assert source.connects == 1
    finally:
        await source.aclose()


async def test_concurrent_first_uses_connect_once(no_leaks: None) -> None:
    source = McpToolSource("time", stdio(*TIME_SERVER))
    try:
        calls = [source.call_tool("get_current_time", {"timezone": "UTC"}) for _ in range(4)]
        outputs, tools = await asyncio.gather(asyncio.gather(*calls), source.tools())
        assert all(not o.is_error for o in outputs) and tools
        assert source.connects == 1
        assert len(children()) == 1
    finally:
        await source.aclose()


async def test_a_server_error_is_an_error_result_not_a_reconnect(no_leaks: None) -> None:
    source = McpToolSource("time", stdio(*TIME_SERVER))
    try:
        bad = await source.call_tool("get_current_time", {"timezone": "Not/AZone"})
        assert bad.is_error and "Not/AZone" in bad.content
        with pytest.raises(ToolFailed, match="'time'"):
            await source.call_tool("no_such_tool", {})
        assert source.connects == 1
    finally:
        await source.aclose()


# --- failures: crashes, hangs, timeouts, configuration -----------------------------


async def test_a_server_killed_mid_call_is_retried_on_a_fresh_process(
    tiny: McpServerConfig, no_leaks: None
) -> None:
    source = McpToolSource("tiny", tiny)
    try:
        first_pid = int((await source.call_tool("pid", {})).content)
        call = asyncio.create_task(source.call_tool("slow", {"seconds": 1.0}))
        await asyncio.sleep(0.4)
        os.kill(first_pid, signal.SIGKILL)
        output = await call
        assert output.content == "slept 1.0"
        assert source.connects == 2
        second_pid = int((await source.call_tool("pid", {})).content)
        assert second_pid != first_pid
        assert first_pid not in children()
    finally:
        await source.aclose()


async def test_a_server_killed_between_calls_is_restarted(no_leaks: None) -> None:
    source = McpToolSource("time", stdio(*TIME_SERVER))
    try:
        await source.call_tool("get_current_time", {"timezone": "UTC"})
        (pid,) = children()
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        output = await source.call_tool("get_current_time", {"timezone": "UTC"})
        assert json.loads(output.content)["timezone"] == "UTC"
        assert source.connects == 2 and pid not in children()
    finally:
        await source.aclose()


async def test_a_call_that_crashes_twice_fails_and_the_next_call_works(
    tiny: McpServerConfig, no_leaks: None
) -> None:
    source = McpToolSource("tiny", tiny)
    try:
        with pytest.raises(ToolFailed, match="failed again after a reconnect") as failed:
            await source.call_tool("crash", {})
        assert "'tiny'" in failed.value.message and "'crash'" in failed.value.message
        assert int((await source.call_tool("pid", {})).content) > 0
        assert source.connects == 3
    finally:
        await source.aclose()


async def test_a_hung_call_times_out_and_the_server_is_restarted(
    tiny: McpServerConfig, no_leaks: None
) -> None:
    source = McpToolSource("tiny", tiny.model_copy(update={"timeout": timedelta(seconds=1)}))
    try:
        pid = (await source.call_tool("pid", {})).content
        started = time.monotonic()
        with pytest.raises(ToolFailed, match="did not answer the call to 'slow'"):
            await source.call_tool("slow", {"seconds": 60})
        assert time.monotonic() - started < 4
        # A server that let a call hang is not pinged and waited on again: its process
        # is gone at once, and the next call runs on a new one, without delay.
        assert int(pid) not in children()
        started = time.monotonic()
        assert (await source.call_tool("pid", {})).content != pid
        assert time.monotonic() - started < 4
        assert source.connects == 2
    finally:
        await source.aclose()


async def test_a_server_that_never_answers_fails_within_the_connect_timeout(
    tmp_path: Path, no_leaks: None
) -> None:
    script = tmp_path / "silent.py"
    script.write_text(SILENT_SERVER)
    config = stdio(sys.executable, str(script), connect_timeout="1s")
    source = McpToolSource("silent", config)
    try:
        started = time.monotonic()
        with pytest.raises(ToolFailed, match="'silent' is unavailable: no answer to the handshake"):
            await source.tools()
        assert time.monotonic() - started < 5
        # Within the back-off, listing fails at once; a call still tries (and times out).
        started = time.monotonic()
        with pytest.raises(ToolFailed, match="unavailable"):
            await source.tools()
        assert time.monotonic() - started < 0.5
        with pytest.raises(ToolFailed, match="no answer to the handshake"):
            await source.call_tool("anything", {})
        assert source.connects == 0
    finally:
        await source.aclose()


async def test_a_caller_giving_up_while_connecting_leaves_nothing(
    tmp_path: Path, no_leaks: None
) -> None:
    script = tmp_path / "silent.py"
    script.write_text(SILENT_SERVER)
    source = McpToolSource("silent", stdio(sys.executable, str(script), connect_timeout="30s"))
    listing = asyncio.create_task(source.tools())
    await asyncio.sleep(0.5)
    assert children(), "the server should be starting"
    started = time.monotonic()
    listing.cancel()  # what a turn's tool timeout does to a call that is still connecting
    with pytest.raises(asyncio.CancelledError):
        await listing
    assert time.monotonic() - started < 8
    await source.aclose()


async def test_a_missing_command_is_a_clear_error(no_leaks: None) -> None:
    source = McpToolSource("gone", stdio("/nonexistent/mcp-server"))
    with pytest.raises(ToolFailed, match="cannot start '/nonexistent/mcp-server'"):
        await source.tools()
    await source.aclose()


async def test_env_references_are_read_at_connect_time(
    tiny: McpServerConfig, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    monkeypatch.delenv("SG_TEST_MCP_UNSET", raising=False)
    missing = McpToolSource("tiny", tiny.model_copy(update={"env": {"T": "${SG_TEST_MCP_UNSET}"}}))
    with pytest.raises(
        ToolFailed, match=r"env 'T' refers to \$\{SG_TEST_MCP_UNSET\}, which is not"
    ):
        await missing.tools()
    assert children() == []
    await missing.aclose()

    config = tiny.model_copy(update={"env": {"GREETING": "hello ${SG_TEST_MCP_NAME}"}})
    source = McpToolSource("tiny", config)
    monkeypatch.setenv("SG_TEST_MCP_NAME", "world")  # after the config: read at connect
    try:
        assert (await source.call_tool("env", {"name": "GREETING"})).content == "hello world"
    finally:
        await source.aclose()


async def test_list_changed_refreshes_the_tools(tiny: McpServerConfig, no_leaks: None) -> None:
    source = McpToolSource("tiny", tiny)
    try:
        names = {tool.spec.name for tool in await source.tools()}
        assert "tiny__pid" in names and "tiny__extra" not in names
        assert (await source.call_tool("grow", {})).content == "grown"
        deadline = time.monotonic() + 5
        while "tiny__extra" not in names and time.monotonic() < deadline:
            names = {tool.spec.name for tool in await source.tools()}
            await asyncio.sleep(0.05)
        assert "tiny__extra" in names
        extra = next(t for t in await source.tools() if t.spec.name == "tiny__extra")
        assert extra.spec.description == "Added later."
        assert source.connects == 1
    finally:
        await source.aclose()


async def test_server_stderr_goes_to_the_log(
    tiny: McpServerConfig, caplog: pytest.LogCaptureFixture, no_leaks: None
) -> None:
    caplog.set_level(logging.INFO, logger="sessiongate.mcp")
    source = McpToolSource("tiny", tiny)
    try:
        await source.tools()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            lines = [getattr(r, "line", "") for r in caplog.records if r.msg == "mcp_server_stderr"]
            if "tiny server starting" in lines:
                break
            await asyncio.sleep(0.05)
        assert "tiny server starting" in lines
    finally:
        await source.aclose()


async def test_a_closed_source_refuses_and_leaves_nothing(tiny: McpServerConfig) -> None:
    sources = [McpToolSource("tiny", tiny), McpToolSource("time", stdio(*TIME_SERVER))]
    await asyncio.gather(*(s.tools() for s in sources))
    assert len(children()) == 2
    await asyncio.gather(*(s.aclose() for s in sources))
    assert children() == []
    with pytest.raises(ToolFailed, match="shut down"):
        await sources[0].call_tool("pid", {})


# --- npm servers: server-everything (streamable HTTP), server-memory (stdio) --------


async def test_everything_over_streamable_http(everything_http: HttpServer) -> None:
    source = McpToolSource("everything", McpServerConfig(url=everything_http.url))
    try:
        names = {tool.spec.name for tool in await source.tools()}
        assert {"everything__echo", "everything__get-sum", "everything__get-tiny-image"} <= names
        assert (await source.call_tool("echo", {"message": "hi there"})).content == (
            "Echo: hi there"
        )
        assert "5" in (await source.call_tool("get-sum", {"a": 2, "b": 3})).content
        image = await source.call_tool("get-tiny-image", {})
        assert "[image: image/png" in image.content
        (media,) = image.data["media"]
        assert media["mime_type"] == "image/png" and media["data"] not in image.content
        assert source.connects == 1
    finally:
        await source.aclose()


async def test_http_server_restarted_is_reconnected(everything_http: HttpServer) -> None:
    source = McpToolSource("everything", McpServerConfig(url=everything_http.url))
    try:
        assert (await source.call_tool("echo", {"message": "one"})).content == "Echo: one"
        # Restarted between calls: the new process does not know our session. It says so
        # with a 400 and error -32000 (the spec's answer is a 404), an answer like any
        # other: the call is not sent again (it could have run), the session is let go.
        everything_http.stop()
        everything_http.start()
        with pytest.raises(ToolFailed, match="refused the call to 'echo'"):
            await source.call_tool("echo", {"message": "two"})
        assert (await source.call_tool("echo", {"message": "two"})).content == "Echo: two"
        assert source.connects == 2
        # Down during a call: a clear error, quickly; back up: the next call works.
        everything_http.stop()
        started = time.monotonic()
        with pytest.raises(ToolFailed, match="'everything'"):
            await source.call_tool("echo", {"message": "three"})
        assert time.monotonic() - started < 10
        everything_http.start()
        assert (await source.call_tool("echo", {"message": "four"})).content == "Echo: four"
    finally:
        await source.aclose()


async def test_memory_keeps_state_in_one_session(tmp_path: Path, no_leaks: None) -> None:
    entry = npm_server("server-memory")
    config = stdio("node", str(entry), env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")})
    source = McpToolSource("memory", config)
    try:
        names = {tool.spec.name for tool in await source.tools()}
        assert {"memory__create_entities", "memory__read_graph"} <= names
        entity = {"name": "Ada", "entityType": "person", "observations": ["writes programs"]}
        created = await source.call_tool("create_entities", {"entities": [entity]})
        assert not created.is_error
        graph = await source.call_tool("read_graph", {})
        assert "Ada" in graph.content and "writes programs" in graph.content
        assert source.connects == 1
    finally:
        await source.aclose()


# --- sessiongate mcp list -----------------------------------------------------------


def test_mcp_list_shows_state_and_tools(tmp_path: Path) -> None:
    config = tmp_path / "sessiongate.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(tmp_path / 'data'))}\n"
        "[mcp.time]\n"
        f"command = {json.dumps(TIME_SERVER[0])}\n"
        f"args = {json.dumps(TIME_SERVER[1:])}\n"
        "[mcp.broken]\n"
        'command = "/nonexistent/mcp-server"\n'
    )
    result = CliRunner().invoke(
        app, ["mcp", "list", "--config", str(config)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 1, result.output
    assert "time" in result.output and "ok, 2 tools" in result.output
    assert "time__get_current_time" in result.output and "time__convert_time" in result.output
    assert "broken" in result.output and "error" in result.output
    assert "cannot start '/nonexistent/mcp-server'" in result.output
    assert children() == []
