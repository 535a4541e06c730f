"""Gateway load: added time-to-first-token and turns per second, sessiongate vs a LangGraph stack.

Four processes, all on 127.0.0.1 with ephemeral ports (this script re-runs itself with a
hidden `--role` for the three servers, so each has its own interpreter and GIL):

* the **stub model**: an OpenAI-compatible `POST /v1/chat/completions` server (raw asyncio
  HTTP/1.1 on uvloop, `stream: true` answered with `chat.completion.chunk` SSE events and
  `data: [DONE]`). *Paced* mode sends the first token after `--stub-ttft-ms` and the rest
  `--stub-interval-ms` apart; *instant* mode writes every token at once. The mode is switched
  between phases through `POST /_mode`.
* the **sessiongate gateway**: `create_app(build_engine(settings))` under uvicorn (the same
  server `sessiongate serve` runs: uvloop + httptools), SQLite in a temporary directory, one
  user created before start, the default agent's reply model pointing at the stub through
  the `openai` provider (`[models.stub] provider = "openai"`, falling back to injecting
  `OpenAIChatModel`, then to a small httpx adapter if neither is usable; the run says which).
* the **LangGraph baseline** (the seed-002 stack, reduced to one turn): FastAPI +
  `StateGraph(MessagesState)` with one async node that streams the same stub over httpx,
  pushes each token through `get_stream_writer()` and appends the `AIMessage`; compiled with
  `AsyncSqliteSaver`; `POST /chat {thread_id, content}` answers `event: token` SSE frames.
* the **client** (this process): one `httpx.AsyncClient` per session (one keep-alive
  connection each, like independent users; a single shared pool spends twice the CPU on
  httpcore's pool bookkeeping at 50 streams), one coroutine per session doing its turns back
  to back. It reads raw response bytes and only counts SSE markers, so its own cost is small
  and the same for all three targets; its CPU time per turn is printed with the rest.

Measured (every phase on fresh session keys, targets round-robin so drift hits all alike):

* TTFT = request sent -> the first token's bytes received, against the paced stub: the
  stub directly, through sessiongate, through the baseline. *Added TTFT* p50 (p99) is the
  p50 (p99) through a stack minus the p50 (p99) of the direct runs, which have the same
  client, the same concurrency and the same message history. Three loads: 50 sessions
  starting together (the targets are judged on this one; with equal turn lengths they stay
  in lockstep, so 50 requests arrive at once every turn), the same 50 with their starts
  spread over one paced reply ("staggered": evenly arriving requests), and one session
  alone (c=1, the per-turn overhead without queueing).
* Turns per second against the instant stub, 50 sessions: completed turns / wall time.
* CPU milliseconds per turn of every process (`/proc/<pid>/stat`, instant phases), which
  shows who the bottleneck is on a small machine.

    .venv/bin/python bench/gateway_load.py --quick      # under a minute
    .venv/bin/python bench/gateway_load.py              # full run, about four minutes
    .venv/bin/python bench/gateway_load.py --quick --profile   # + cProfile of the gateway
    PYTHONPATH=/tmp/pyinst .venv/bin/python bench/gateway_load.py --quick --profile pyinstrument
    .venv/bin/python bench/gateway_load.py --quick --gateway-model raw   # diagnostics:
    .venv/bin/python bench/gateway_load.py --quick --gateway-model inprocess  # see --help

The last line printed is always
`gateway_vs_langgraph_turns_ratio=<x> added_ttft_p50_ms=<y> added_ttft_p99_ms=<z>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import BaseModel

T = TypeVar("T")

HOST = "127.0.0.1"
STUB_MODEL = "stub-model"
GATEWAY_USER = "bench"

# -- targets (sessiongate) ----------------------------------------------------------------------
TARGET_ADDED_TTFT_P50_MS = 2.0
TARGET_ADDED_TTFT_P99_MS = 10.0
TARGET_TURNS_PER_S = 500.0
TARGET_RATIO_VS_BASELINE = 3.0

# -- what the client looks for in the response bytes ------------------------------------------
DIRECT_TOKEN = b'"content":"'  # only the stub's token chunks carry a content string
DIRECT_END = b"data: [DONE]"
SSE_TOKEN = b"event: token\n"
SSE_END = b"event: end\n"
SSE_ERROR = b"event: error\n"


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` on uvloop when it is installed (uvicorn picks it too)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def stub_tokens(count: int) -> list[str]:
    return [f"w{i} " for i in range(count)]


# =============================================================================================
# The stub model server (child process)
# =============================================================================================


def _sse_chunk(payload: dict[str, Any]) -> bytes:
    """One SSE event as one HTTP/1.1 chunk."""
    data = b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _raw_chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class StubModel:
    """OpenAI-compatible streaming chat completions over a minimal HTTP/1.1 server."""

    HEAD = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    def __init__(self, tokens: int, ttft: float, interval: float) -> None:
        self.mode = "paced"
        self.ttft = ttft
        self.interval = interval
        self.requests = 0
        self.texts = stub_tokens(tokens)
        base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0}
        base["model"] = STUB_MODEL
        self.chunks = [
            _sse_chunk(
                {
                    **base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": text}
                            if i == 0
                            else {"content": text},
                            "finish_reason": None,
                        }
                    ],
                }
            )
            for i, text in enumerate(self.texts)
        ]
        self.finish = _sse_chunk(
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        )
        self.base = base
        self.done = _raw_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    def usage_chunk(self, prompt_chars: int) -> bytes:
        usage = {
            "prompt_tokens": max(1, prompt_chars // 4),
            "completion_tokens": len(self.texts),
            "total_tokens": max(1, prompt_chars // 4) + len(self.texts),
        }
        return _sse_chunk({**self.base, "choices": [], "usage": usage})

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                request_line, _, header_block = head.partition(b"\r\n")
                method, path, _ = request_line.split(b" ", 2)
                length = 0
                for line in header_block.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                await self.route(method, path, body, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def route(
        self, method: bytes, path: bytes, body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        if method == b"POST" and path == b"/v1/chat/completions":
            await self.completions(json.loads(body), writer)
        elif method == b"POST" and path == b"/_mode":
            self.mode = json.loads(body)["mode"]
            self.json_response(writer, {"mode": self.mode})
        elif path == b"/_stats":
            self.json_response(writer, {"requests": self.requests, "mode": self.mode})
        elif path == b"/health":
            self.json_response(writer, {"status": "ok"})
        else:
            self.json_response(writer, {"error": {"message": "not found"}}, status=b"404 Not Found")

    @staticmethod
    def json_response(
        writer: asyncio.StreamWriter, payload: dict[str, Any], status: bytes = b"200 OK"
    ) -> None:
        data = json.dumps(payload).encode()
        writer.write(
            b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(data)).encode() + b"\r\n\r\n" + data
        )

    async def completions(self, request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        if not request.get("stream"):
            text = "".join(self.texts)
            usage = {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(self.texts)}
            self.json_response(
                writer,
                {
                    "id": "chatcmpl-stub",
                    "object": "chat.completion",
                    "created": 0,
                    "model": STUB_MODEL,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
            )
            return
        options = request.get("stream_options") or {}
        tail = self.finish
        if options.get("include_usage"):
            tail += self.usage_chunk(prompt_chars)
        tail += self.done
        if self.mode == "instant":
            writer.write(self.HEAD + b"".join(self.chunks) + tail)
            await writer.drain()
            return
        writer.write(self.HEAD)
        if self.ttft > 0:
            await asyncio.sleep(self.ttft)
        for i, chunk in enumerate(self.chunks):
            if i and self.interval > 0:
                await asyncio.sleep(self.interval)
            writer.write(chunk)
        writer.write(tail)
        await writer.drain()


def serve_stub(args: argparse.Namespace) -> None:
    stub = StubModel(args.tokens, args.stub_ttft_ms / 1000, args.stub_interval_ms / 1000)

    async def main() -> None:
        sock = listening_socket()
        server = await asyncio.start_server(stub.handle, sock=sock, backlog=2048)
        write_ready(args.ready_file, {"port": sock.getsockname()[1]})
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()

    run_async(main())


# =============================================================================================
# The sessiongate gateway (child process)
# =============================================================================================


class HttpxStubModel:
    """The fallback reply model: streams an OpenAI-compatible server with plain httpx."""

    def __init__(self, name: str, base_url: str, model: str) -> None:
        import httpx

        self.name = name
        self.model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(120, connect=10),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )

    async def stream(self, messages: Sequence[Any]) -> AsyncIterator[Any]:
        from sessiongate.models.base import TextDelta, Usage

        wire = [{"role": m["role"], "content": m["content"]} for m in messages]
        body = {
            "model": self.model,
            "messages": wire,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        usage = Usage()
        async with self._client.stream("POST", self._url, json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    continue  # read on to the end of the body, so the connection is reused
                chunk = json.loads(data)
                for choice in chunk.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        yield TextDelta(text)
                raw = chunk.get("usage")
                if raw:
                    usage = Usage(raw["prompt_tokens"], raw["completion_tokens"])
        yield usage


class RawHttpStubModel:
    """Diagnostic only (`--gateway-model raw`): the same upstream call over bare asyncio
    streams (HTTP/1.1 keep-alive, chunked SSE, a free list of connections), to show what a
    lean upstream client costs next to httpx's pool at 50 concurrent streams."""

    def __init__(self, name: str, base_url: str, model: str) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(base_url)
        self.name = name
        self.model = model
        self._host = parts.hostname or HOST
        self._port = parts.port or 80
        self._path = parts.path.rstrip("/") + "/chat/completions"
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def stream(self, messages: Sequence[Any]) -> AsyncIterator[Any]:
        from sessiongate.models.base import TextDelta, Usage

        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        if self._idle:
            reader, writer = self._idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self._host, self._port)
        reusable = False
        try:
            writer.write(
                f"POST {self._path} HTTP/1.1\r\nhost: {self._host}:{self._port}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"upstream answered {head[:40]!r}")
            usage = Usage()
            pending = b""
            while True:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                pending += (await reader.readexactly(size + 2))[:-2]
                *events, pending = pending.split(b"\n\n")
                for event in events:
                    data = event.removeprefix(b"data: ")
                    if data == b"[DONE]":
                        continue
                    chunk = json.loads(data)
                    for choice in chunk.get("choices") or []:
                        text = (choice.get("delta") or {}).get("content")
                        if text:
                            yield TextDelta(text)
                    raw = chunk.get("usage")
                    if raw:
                        usage = Usage(raw["prompt_tokens"], raw["completion_tokens"])
            reusable = True
            yield usage
        finally:
            if reusable:
                self._idle.append((reader, writer))
            else:
                writer.close()


class InProcessModel:
    """Diagnostic only (`--gateway-model inprocess`): the stub's reply with no I/O at all,
    every token at once, so turns/s and CPU/turn show the gateway's own cost per turn."""

    def __init__(self, name: str, tokens: int) -> None:
        self.name = name
        self.texts = stub_tokens(tokens)

    async def stream(self, messages: Sequence[Any]) -> AsyncIterator[Any]:
        from sessiongate.models.base import TextDelta, Usage

        for text in self.texts:
            yield TextDelta(text)
        yield Usage(sum(len(m["content"]) for m in messages) // 4, len(self.texts))


def build_gateway(args: argparse.Namespace) -> tuple[Any, str, str]:
    """(engine, api key, which model adapter is in use)."""
    from sessiongate.config import Settings
    from sessiongate.errors import ConfigError
    from sessiongate.service.engine import build_engine

    base_url = f"{args.stub_url}/v1"
    base: dict[str, Any] = {
        "data_dir": Path(args.data_dir),
        "lifecycle": {"timezone": "UTC"},
        "agents": {"defaults": {"model": "stub"}},
    }
    engine = None
    model_path = ""
    if args.gateway_model in ("auto", "config"):
        model_config = {"provider": "openai", "base_url": base_url, "model": STUB_MODEL}
        try:
            engine = build_engine(Settings(**base, models={"stub": model_config}))
            model_path = "config: [models.stub] provider=openai"
        except ConfigError as exc:
            if args.gateway_model == "config":
                raise
            print(f"provider=openai not usable from config yet: {exc}", file=sys.stderr)
    if engine is None and args.gateway_model in ("auto", "openai-class"):
        try:
            from sessiongate.models.openai import OpenAIChatModel

            model: Any = OpenAIChatModel("stub", model=STUB_MODEL, base_url=base_url)
            engine = build_engine(Settings(**base), models={"stub": model})
            model_path = "injected: sessiongate.models.openai.OpenAIChatModel"
        except ImportError as exc:
            if args.gateway_model == "openai-class":
                raise
            print(f"OpenAIChatModel not importable: {exc}", file=sys.stderr)
    if engine is None and args.gateway_model == "raw":
        model = RawHttpStubModel("stub", base_url, STUB_MODEL)
        engine = build_engine(Settings(**base), models={"stub": model})
        model_path = "DIAGNOSTIC: bare asyncio HTTP/1.1 ReplyModel (bench/gateway_load.py)"
    if engine is None and args.gateway_model == "inprocess":
        model = InProcessModel("stub", args.tokens)
        engine = build_engine(Settings(**base), models={"stub": model})
        model_path = "DIAGNOSTIC: in-process fake model, no upstream call (TTFT rows meaningless)"
    if engine is None:
        model = HttpxStubModel("stub", base_url, STUB_MODEL)
        engine = build_engine(Settings(**base), models={"stub": model})
        model_path = "fallback: in-process httpx ReplyModel (bench/gateway_load.py)"
    _, key = run_async(engine.users.add(GATEWAY_USER, primary=True))
    return engine, key, model_path


def serve_gateway(args: argparse.Namespace) -> None:
    import uvicorn

    from sessiongate.api.app import create_app
    from sessiongate.serving import freeze_heap

    engine, key, model_path = build_gateway(args)
    sock = listening_socket()
    config = uvicorn.Config(
        create_app(engine),
        log_level="warning",
        access_log=args.access_log,
        lifespan="on",
        backlog=2048,
        timeout_keep_alive=60,
    )
    server = uvicorn.Server(config)
    freeze_heap()  # as `sessiongate serve` does
    write_ready(
        args.ready_file,
        {"port": sock.getsockname()[1], "api_key": key, "model_path": model_path},
    )
    run_server(server, sock, args.profile_out)


def run_server(server: Any, sock: socket.socket, profile_out: str | None) -> None:
    """`server.run`, under a profiler when asked: `<path>.prof` (cProfile, dumped after a
    graceful SIGTERM stop) or `<path>.txt` (pyinstrument's call tree, wall-clock samples)."""
    # uvicorn re-raises the signal that stopped it once it is done; with the default
    # handler that would kill the process before the profile is written.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    if not profile_out:
        server.run(sockets=[sock])
    elif profile_out.endswith(".txt"):
        from pyinstrument import Profiler  # pip install --target /tmp/x; PYTHONPATH=/tmp/x

        sampler = Profiler(interval=0.0005, async_mode="disabled")
        sampler.start()
        try:
            server.run(sockets=[sock])
        finally:
            sampler.stop()
            Path(profile_out).write_text(
                sampler.output_text(unicode=False, color=False, show_all=False), encoding="utf-8"
            )
    else:
        import cProfile

        # CPU time, not wall time: on a 2-core box shared with the client and the stub,
        # wall time would charge whatever function was running when the process lost
        # its core.
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        try:
            server.run(sockets=[sock])
        finally:
            profiler.disable()
            profiler.dump_stats(profile_out)


# =============================================================================================
# The LangGraph baseline (child process)
# =============================================================================================


class BaselineChatIn(BaseModel):
    """The baseline's request body (module level, so FastAPI can resolve the annotation)."""

    thread_id: str
    content: str


def build_baseline_app(stub_url: str, db_path: str) -> Any:
    import httpx
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.config import get_stream_writer
    from langgraph.graph import END, START, MessagesState, StateGraph

    roles = {"human": "user", "ai": "assistant", "system": "system"}
    url = f"{stub_url}/v1/chat/completions"
    state: dict[str, Any] = {}

    async def call_model(graph_state: MessagesState) -> dict[str, Any]:
        writer = get_stream_writer()
        wire = [
            {"role": roles.get(m.type, "user"), "content": str(m.content)}
            for m in graph_state["messages"]
        ]
        body = {"model": STUB_MODEL, "messages": wire, "stream": True}
        parts: list[str] = []
        async with state["http"].stream("POST", url, json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    continue  # read on to the end of the body, so the connection is reused
                for choice in json.loads(data).get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        parts.append(text)
                        writer({"token": text})
        return {"messages": [AIMessage("".join(parts))]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", cast(Any, call_model))  # the overloads reject a plain async def
    builder.add_edge(START, "model")
    builder.add_edge("model", END)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            AsyncSqliteSaver.from_conn_string(db_path) as saver,
            httpx.AsyncClient(
                timeout=httpx.Timeout(120, connect=10),
                limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
            ) as http,
        ):
            await saver.setup()
            state["http"] = http
            state["graph"] = builder.compile(checkpointer=saver)
            yield

    app = FastAPI(lifespan=lifespan)

    def frame(kind: str, payload: dict[str, Any]) -> bytes:
        data = json.dumps({"type": kind, **payload}, separators=(",", ":"))
        return f"event: {kind}\ndata: {data}\n\n".encode()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/chat")
    async def chat(body: BaselineChatIn) -> StreamingResponse:
        config: Any = {"configurable": {"thread_id": body.thread_id}}
        graph = state["graph"]

        async def frames() -> AsyncIterator[bytes]:
            yield frame("start", {"thread_id": body.thread_id})
            count = 0
            try:
                async for chunk in graph.astream(
                    {"messages": [HumanMessage(body.content)]}, config, stream_mode="custom"
                ):
                    count += 1
                    yield frame("token", {"content": chunk["token"]})
            except Exception as exc:  # the stream must end with a frame, not hang
                yield frame("error", {"code": "internal_error", "message": repr(exc)})
                return
            yield frame("end", {"tokens": count})

        return StreamingResponse(frames(), media_type="text/event-stream")

    return app


def serve_baseline(args: argparse.Namespace) -> None:
    import uvicorn

    app = build_baseline_app(args.stub_url, str(Path(args.data_dir) / "langgraph.db"))
    sock = listening_socket()
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=args.access_log,
        lifespan="on",
        backlog=2048,
        timeout_keep_alive=60,
    )
    write_ready(args.ready_file, {"port": sock.getsockname()[1]})
    run_server(uvicorn.Server(config), sock, None)


# -- shared child helpers -----------------------------------------------------------------------


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    sock.listen(2048)
    return sock


def write_ready(path: str, payload: dict[str, Any]) -> None:
    payload = {**payload, "pid": os.getpid()}
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        os.fchmod(fh.fileno(), 0o600)
        json.dump(payload, fh)
    os.replace(tmp, path)


# =============================================================================================
# The orchestrator and client (this process)
# =============================================================================================


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    info: dict[str, Any]
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.info['port']}"

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.process.pid)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc; NaN where unavailable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM if this process dies, so nothing is left behind."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_child(name: str, role_args: list[str], workdir: Path, timeout: float = 60.0) -> Child:
    ready = workdir / f"{name}.ready.json"
    log_path = workdir / f"{name}.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--role", *role_args]
    command += ["--ready-file", str(ready)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            stop_child(process)
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{name} did not start (exit {process.returncode}):\n{tail}")
        time.sleep(0.02)
    return Child(name, process, json.loads(ready.read_text()), log_path)


def stop_child(process: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@dataclass
class TurnSample:
    turn: int
    ttft_ms: float
    total_ms: float
    tokens: int
    ok: bool
    error: str = ""


@dataclass
class PhaseResult:
    target: str
    mode: str
    sessions: int
    turns: int
    wall_s: float
    samples: list[TurnSample]
    cpu_s: dict[str, float]

    @property
    def ok_samples(self) -> list[TurnSample]:
        return [s for s in self.samples if s.ok]

    @property
    def errors(self) -> int:
        return len(self.samples) - len(self.ok_samples)

    @property
    def turns_per_s(self) -> float:
        return len(self.ok_samples) / self.wall_s if self.wall_s > 0 else math.nan


@dataclass
class Target:
    """How one stack is asked for a turn, and what marks a token and the end."""

    name: str
    url: str
    request: Callable[[str, int], tuple[str, bytes]]  # (session key, turn) → (path, body)
    headers: dict[str, str]
    token_mark: bytes
    end_mark: bytes
    error_mark: bytes | None
    after_turn: Callable[[str, str], None] = lambda key, content: None


def turn_text(key: str, turn: int) -> str:
    return f"turn {turn} on {key}: tell me something short about topic number {turn * 7 % 13}."


def direct_target(url: str, reply: str) -> Target:
    """The stub itself, sent the same history the gateway would send."""
    history: dict[str, list[dict[str, str]]] = {}

    def request(key: str, turn: int) -> tuple[str, bytes]:
        messages = history.setdefault(key, [])
        messages.append({"role": "user", "content": turn_text(key, turn)})
        body = {
            "model": STUB_MODEL,
            "messages": messages[-50:],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        return "/v1/chat/completions", json.dumps(body).encode()

    def after_turn(key: str, _content: str) -> None:
        history[key].append({"role": "assistant", "content": reply})

    return Target(
        "direct",
        url,
        request,
        {"content-type": "application/json"},
        DIRECT_TOKEN,
        DIRECT_END,
        None,
        after_turn,
    )


def gateway_target(url: str, api_key: str, name: str = "sessiongate") -> Target:
    def request(key: str, turn: int) -> tuple[str, bytes]:
        body = {"content": turn_text(key, turn), "stream": True}
        return f"/v1/sessions/{key}/messages", json.dumps(body).encode()

    headers = {"content-type": "application/json", "authorization": f"Bearer {api_key}"}
    return Target(name, url, request, headers, SSE_TOKEN, SSE_END, SSE_ERROR)


def baseline_target(url: str) -> Target:
    def request(key: str, turn: int) -> tuple[str, bytes]:
        return "/chat", json.dumps({"thread_id": key, "content": turn_text(key, turn)}).encode()

    headers = {"content-type": "application/json"}
    return Target("langgraph", url, request, headers, SSE_TOKEN, SSE_END, SSE_ERROR)


async def one_turn(client: Any, target: Target, key: str, turn: int, tokens: int) -> TurnSample:
    path, body = target.request(key, turn)
    keep = max(len(target.token_mark), len(target.end_mark), len(target.error_mark or b"")) - 1
    seen = 0
    first = math.nan
    ended = failed = False
    tail = b""
    started = time.perf_counter()
    try:
        async with client.stream(
            "POST", target.url + path, content=body, headers=target.headers
        ) as response:
            if response.status_code != 200:
                detail = (await response.aread())[:200].decode(errors="replace")
                return TurnSample(
                    turn, math.nan, math.nan, 0, False, f"HTTP {response.status_code}: {detail}"
                )
            async for chunk in response.aiter_raw():
                buf = tail + chunk
                found = buf.count(target.token_mark) - tail.count(target.token_mark)
                if found:
                    if not seen:
                        first = (time.perf_counter() - started) * 1000
                    seen += found
                ended = ended or target.end_mark in buf
                failed = failed or (target.error_mark is not None and target.error_mark in buf)
                tail = buf[-keep:]
    except Exception as exc:  # counted as a failed turn, never hangs the run
        return TurnSample(turn, math.nan, math.nan, seen, False, f"{type(exc).__name__}: {exc}")
    total = (time.perf_counter() - started) * 1000
    ok = ended and not failed and seen == tokens
    error = "" if ok else f"ended={ended} error_event={failed} tokens={seen}/{tokens}"
    if ok:
        target.after_turn(key, "")
    return TurnSample(turn, first, total, seen, ok, error)


async def run_phase(
    clients: Sequence[Any],
    target: Target,
    *,
    mode: str,
    label: str,
    sessions: int,
    turns: int,
    tokens: int,
    cpu: Callable[[], dict[str, float]],
    phase_timeout: float,
    stagger_s: float = 0.0,
) -> PhaseResult:
    """`stagger_s` spreads the sessions' first turns evenly over that many seconds (they
    otherwise all start at once and, with equal turn lengths, stay in lockstep)."""
    samples: list[TurnSample] = []

    async def session(index: int) -> None:
        key = f"{label}-s{index:03d}"
        if stagger_s:
            await asyncio.sleep(index * stagger_s / sessions)
        for turn in range(turns):
            samples.append(await one_turn(clients[index], target, key, turn, tokens))

    before = cpu()
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(session(i) for i in range(sessions))), phase_timeout)
    wall = time.perf_counter() - started
    after = cpu()
    used = {name: after[name] - before[name] for name in after}
    return PhaseResult(target.name, mode, sessions, turns, wall, samples, used)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    data = sorted(v for v in values if not math.isnan(v))
    if not data:
        return math.nan
    position = (len(data) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (position - low)


@dataclass
class Plan:
    sessions: int = 50
    tokens: int = 20
    paced_turns: int = 10
    instant_turns: int = 40
    rounds: int = 3
    warmup_turns: int = 2
    single_turns: int = 40  # the unloaded reference: one session, paced stub
    paced_turn_s: float = 0.2  # how long one paced reply streams (the stagger period)


@dataclass
class Summary:
    target: str
    ttft_p50_ms: float
    ttft_p99_ms: float
    ttft_samples: int
    turns_per_s: float
    instant_ttft_p50_ms: float
    instant_turns: int
    instant_wall_s: float
    errors: int
    single_ttft_p50_ms: float
    single_ttft_p99_ms: float
    staggered_ttft_p50_ms: float
    staggered_ttft_p99_ms: float
    cpu_ms_per_turn: dict[str, float] = field(default_factory=dict)
    cpu_share: dict[str, float] = field(default_factory=dict)


def summarise(name: str, phases: dict[str, list[PhaseResult]]) -> Summary:
    paced, instant, single = phases["paced"], phases["instant"], phases["single"]
    staggered = phases["staggered"]
    single_ttft = [s.ttft_ms for r in single for s in r.ok_samples]
    staggered_ttft = [s.ttft_ms for r in staggered for s in r.ok_samples]
    ttft = [s.ttft_ms for r in paced for s in r.ok_samples]
    inst_ttft = [s.ttft_ms for r in instant for s in r.ok_samples]
    done = sum(len(r.ok_samples) for r in instant)
    wall = sum(r.wall_s for r in instant)
    cpu_total: dict[str, float] = {}
    for r in instant:
        for proc, seconds in r.cpu_s.items():
            cpu_total[proc] = cpu_total.get(proc, 0.0) + seconds
    return Summary(
        target=name,
        ttft_p50_ms=percentile(ttft, 0.5),
        ttft_p99_ms=percentile(ttft, 0.99),
        ttft_samples=len(ttft),
        turns_per_s=done / wall if wall else math.nan,
        instant_ttft_p50_ms=percentile(inst_ttft, 0.5),
        instant_turns=done,
        instant_wall_s=wall,
        errors=sum(r.errors for r in paced + instant + single + staggered),
        staggered_ttft_p50_ms=percentile(staggered_ttft, 0.5),
        staggered_ttft_p99_ms=percentile(staggered_ttft, 0.99),
        single_ttft_p50_ms=percentile(single_ttft, 0.5),
        single_ttft_p99_ms=percentile(single_ttft, 0.99),
        cpu_ms_per_turn={p: s * 1000 / done for p, s in cpu_total.items()} if done else {},
        cpu_share={p: s / wall for p, s in cpu_total.items()} if wall else {},
    )


def fmt(value: float, digits: int = 2) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def print_table(direct: Summary, columns: Sequence[Summary], plan: Plan) -> None:
    rows: list[tuple[str, ...]] = []

    def row(label: str, getter: Callable[[Summary], str], direct_value: str | None = None) -> None:
        first = getter(direct) if direct_value is None else direct_value
        rows.append((label, first, *(getter(s) for s in columns)))

    c = plan.sessions
    row(f"TTFT p50, paced stub, c={c} (ms)", lambda s: fmt(s.ttft_p50_ms))
    row(f"TTFT p99, paced stub, c={c} (ms)", lambda s: fmt(s.ttft_p99_ms))
    row(f"added TTFT p50, c={c} (ms)", lambda s: fmt(s.ttft_p50_ms - direct.ttft_p50_ms), "-")
    row(f"added TTFT p99, c={c} (ms)", lambda s: fmt(s.ttft_p99_ms - direct.ttft_p99_ms), "-")
    row(f"TTFT samples, c={c}", lambda s: str(s.ttft_samples))
    row(
        f"added TTFT p50, c={c} staggered (ms)",
        lambda s: fmt(s.staggered_ttft_p50_ms - direct.staggered_ttft_p50_ms),
        "-",
    )
    row(
        f"added TTFT p99, c={c} staggered (ms)",
        lambda s: fmt(s.staggered_ttft_p99_ms - direct.staggered_ttft_p99_ms),
        "-",
    )
    row("TTFT p50, paced stub, c=1 (ms)", lambda s: fmt(s.single_ttft_p50_ms))
    row("TTFT p99, paced stub, c=1 (ms)", lambda s: fmt(s.single_ttft_p99_ms))
    row(
        "added TTFT p50, c=1 (ms)",
        lambda s: fmt(s.single_ttft_p50_ms - direct.single_ttft_p50_ms),
        "-",
    )
    row(
        "added TTFT p99, c=1 (ms)",
        lambda s: fmt(s.single_ttft_p99_ms - direct.single_ttft_p99_ms),
        "-",
    )
    row(f"turns/s, instant stub, c={plan.sessions}", lambda s: fmt(s.turns_per_s, 1))
    row("TTFT p50, instant stub (ms)", lambda s: fmt(s.instant_ttft_p50_ms))

    def cpu_ms(proc: str) -> Callable[[Summary], str]:
        return lambda s: fmt(s.cpu_ms_per_turn.get(proc, math.nan))

    def cpu_busy(proc: str) -> Callable[[Summary], str]:
        return lambda s: fmt(s.cpu_share.get(proc, math.nan))

    for proc in ("server", "stub", "client"):
        row(f"CPU ms/turn, {proc} (instant)", cpu_ms(proc))
    for proc in ("server", "stub", "client"):
        row(f"CPU busy, {proc} (instant, cores)", cpu_busy(proc))
    row("failed turns", lambda s: str(s.errors))
    header = ("", "direct stub", *(s.target for s in columns))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        cells = [
            f"{r[0]:<{widths[0]}}",
            *(f"{v:>{w}}" for v, w in zip(r[1:], widths[1:], strict=True)),
        ]
        print("  " + "  ".join(cells))


def version_of(package: str) -> str:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return "not installed"


def print_profile(path: Path, turns: int, limit: int = 30) -> None:
    if path.suffix == ".txt":
        lines = path.read_text(encoding="utf-8").splitlines()
        print(f"\ngateway pyinstrument call tree ({turns} gateway turns; wall-clock samples,")
        print("time in the event loop's select() is idle time); full tree in", path)
        for line in lines[:120]:
            print("  " + line)
        return
    import pstats

    stats = pstats.Stats(str(path))
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    print(
        f"\ngateway cProfile (CPU-time clock): {total:.2f} s, {turns} gateway turns "
        f"({total * 1000 / max(turns, 1):.3f} ms/turn under the profiler); file {path}"
    )
    groups: dict[str, float] = {}
    for (filename, _line, func), entry in raw.items():
        group = profile_group(filename, func)
        groups[group] = groups.get(group, 0.0) + entry[2]
    print("\n  own time by package (ms/turn, share):")
    for group, seconds in sorted(groups.items(), key=lambda kv: -kv[1])[:16]:
        print(f"    {seconds * 1000 / turns:8.3f}  {seconds / total:6.1%}  {group}")
    for sort, title in (("tottime", "own time"), ("cumtime", "cumulative")):
        print(
            f"\n  top {limit} by {title}:  ms/turn own | ms/turn cumulative | calls/turn"
            " (a coroutine counts a call per resumption)"
        )
        ranked = sorted(raw.items(), key=lambda kv: kv[1][2 if sort == "tottime" else 3])
        for (filename, line, func), (_cc, nc, tt, ct, _callers) in reversed(ranked[-limit:]):
            where = filename
            for marker in ("site-packages/", "src/", "lib/python3"):
                if marker in where:
                    where = where.split(marker, 1)[1]
                    break
            print(
                f"    {tt * 1000 / turns:8.4f} {ct * 1000 / turns:9.4f} {nc / turns:8.2f}  "
                f"{where}:{line}({func})"
            )


def profile_group(filename: str, func: str) -> str:
    """The package a profiled function belongs to (built-ins by the type they belong to)."""
    if filename == "~":
        if "sqlite3" in func:
            return "sqlite3 (C)"
        if "json" in func or "scanner" in func or "encode" in func:
            return "json (C)"
        return "other built-ins"
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if "/sessiongate/" in filename:
        parts = filename.split("/sessiongate/", 1)[1].split("/")
        return "sessiongate." + parts[0].removesuffix(".py")
    if "lib/python3" in filename:
        rest = filename.split("lib/python3", 1)[1].split("/", 2)
        return "stdlib " + (rest[1].removesuffix(".py") if len(rest) > 1 else filename)
    return Path(filename).name


async def drive(
    plan: Plan,
    stub: Child,
    gateway: Child,
    baseline: Child,
    phase_timeout: float,
    extra: Sequence[Any] = (),
) -> dict[str, dict[str, list[PhaseResult]]]:
    """Every phase's results, by target name and then mode (single, paced, instant)."""
    import httpx

    reply = "".join(stub_tokens(plan.tokens))
    targets = [
        direct_target(stub.url, reply),
        gateway_target(gateway.url, gateway.info["api_key"]),
        baseline_target(baseline.url),
        *(gateway_target(child.url, child.info["api_key"], child.name) for child in extra),
    ]
    servers: dict[str, Any] = {"direct": stub, "sessiongate": gateway, "langgraph": baseline}
    servers.update({child.name: child for child in extra})

    def cpu_for(name: str) -> Callable[[], dict[str, float]]:
        def snapshot() -> dict[str, float]:
            values = {"stub": stub.cpu_seconds(), "client": time.process_time()}
            values["server"] = math.nan if name == "direct" else servers[name].cpu_seconds()
            return values

        return snapshot

    # One client (one keep-alive connection) per session and target, like independent
    # users: one shared pool serving 50 streams spends most of the client's CPU in
    # httpcore's pool bookkeeping (1.6 vs 0.75 ms/turn measured on this machine).
    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    timeout = httpx.Timeout(60, connect=10)
    pools = {
        t.name: [httpx.AsyncClient(limits=limits, timeout=timeout) for _ in range(plan.sessions)]
        for t in targets
    }
    results: dict[str, dict[str, list[PhaseResult]]] = {
        t.name: {"single": [], "paced": [], "staggered": [], "instant": []} for t in targets
    }
    async with contextlib.AsyncExitStack() as stack:
        for pool in pools.values():
            for session_client in pool:
                await stack.enter_async_context(session_client)
        client = pools["direct"][0]

        async def set_mode(mode: str) -> None:
            response = await client.post(f"{stub.url}/_mode", json={"mode": mode})
            response.raise_for_status()

        async def phase(
            target: Target,
            mode: str,
            label: str,
            turns: int,
            *,
            quiet: bool = False,
            sessions: int = plan.sessions,
            stagger_s: float = 0.0,
        ) -> PhaseResult:
            result = await run_phase(
                pools[target.name],
                target,
                mode=mode,
                label=label,
                sessions=sessions,
                turns=turns,
                tokens=plan.tokens,
                cpu=cpu_for(target.name),
                phase_timeout=phase_timeout,
                stagger_s=stagger_s,
            )
            bad = [s.error for s in result.samples if not s.ok]
            if quiet and not bad:
                return result
            ttfts = [s.ttft_ms for s in result.ok_samples]
            shown = mode + ("~" if stagger_s else "")
            print(
                f"  {shown:<8} {target.name:<11} c={sessions:<3d} {len(result.ok_samples):5d} turns"
                f" in {result.wall_s:6.2f} s = {result.turns_per_s:7.1f}/s  TTFT p50 "
                f"{fmt(percentile(ttfts, 0.5))} p99 {fmt(percentile(ttfts, 0.99))} ms"
                + (f"  FAILED {len(bad)}: {bad[0]}" if bad else ""),
                flush=True,
            )
            return result

        # Warm-up: connection pools, lazy imports, SQLite pages. Not recorded.
        await set_mode("instant")
        for target in targets:
            await phase(target, "warm-up", f"warm-{target.name}", plan.warmup_turns)
        # Round-robin rounds, so drift on a shared machine hits every target alike; every
        # phase uses fresh session keys, so every phase sees the same history lengths.
        await set_mode("paced")
        # The unloaded reference: one session at a time, what a single user sees.
        for target in targets:
            await phase(target, "paced", f"rewarm-single-{target.name}", 1, quiet=True)
            results[target.name]["single"].append(
                await phase(target, "paced", f"single-{target.name}", plan.single_turns, sessions=1)
            )
        # Before each measured phase, one unrecorded turn per session re-warms that stack's
        # upstream keep-alive connections (httpx drops them after 5 s idle, and the other
        # targets' phases take longer than that): the figures are steady-state ones.
        for r in range(plan.rounds):
            for target in targets:
                await phase(target, "paced", f"rewarm-p{r}-{target.name}", 1, quiet=True)
                results[target.name]["paced"].append(
                    await phase(target, "paced", f"paced-r{r}-{target.name}", plan.paced_turns)
                )
                # The same load with the sessions' starts spread over one paced turn, so
                # requests arrive evenly instead of 50 at the same instant every turn.
                results[target.name]["staggered"].append(
                    await phase(
                        target,
                        "paced",
                        f"stag-r{r}-{target.name}",
                        plan.paced_turns,
                        stagger_s=plan.paced_turn_s,
                    )
                )
        await set_mode("instant")
        for r in range(plan.rounds):
            for target in targets:
                await phase(target, "instant", f"rewarm-i{r}-{target.name}", 1, quiet=True)
                results[target.name]["instant"].append(
                    await phase(target, "instant", f"inst-r{r}-{target.name}", plan.instant_turns)
                )
    return results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short run (about a minute)")
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions")
    parser.add_argument("--tokens", type=int, default=20, help="tokens per stub reply")
    parser.add_argument("--stub-ttft-ms", type=float, default=10.0, help="paced: first token")
    parser.add_argument("--stub-interval-ms", type=float, default=10.0, help="paced: gap")
    parser.add_argument("--paced-turns", type=int, help="turns per session, paced phases")
    parser.add_argument("--instant-turns", type=int, help="turns per session, instant phases")
    parser.add_argument("--rounds", type=int, help="round-robin rounds of every phase")
    parser.add_argument(
        "--gateway-model",
        choices=("auto", "config", "openai-class", "httpx", "raw", "inprocess"),
        default="auto",
        help="how the gateway reaches the stub: the openai provider from config, the "
        "OpenAIChatModel class injected, or the script's own httpx adapter (auto: first usable); "
        "raw = bare asyncio HTTP/1.1 client; inprocess = no upstream call at all (the last "
        "two are diagnostics that isolate the gateway's own cost)",
    )
    parser.add_argument(
        "--access-log", action="store_true", help="uvicorn access logs on (both servers)"
    )
    parser.add_argument(
        "--profile",
        nargs="?",
        const="cprofile",
        choices=("cprofile", "pyinstrument"),
        help="run the gateway under cProfile (default) or pyinstrument (must be importable, "
        "e.g. PYTHONPATH=/tmp/pyinst) and print where its time goes",
    )
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument(
        "--postgres-url",
        help="also run `sessiongate serve` with --workers processes on this PostgreSQL server"
        " (a fresh database is created and dropped; the role needs CREATEDB)",
    )
    parser.add_argument("--workers", type=int, default=2, help="workers for --postgres-url")
    # Hidden: how this script runs its own server processes.
    parser.add_argument("--role", choices=("stub", "gateway", "baseline"), help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", help=argparse.SUPPRESS)
    parser.add_argument("--stub-url", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    plan = Plan(sessions=args.sessions, tokens=args.tokens)
    plan.paced_turn_s = (args.stub_ttft_ms + (args.tokens - 1) * args.stub_interval_ms) / 1000
    if args.quick:
        plan.paced_turns, plan.instant_turns, plan.rounds, plan.single_turns = 6, 12, 1, 15
    plan.paced_turns = args.paced_turns or plan.paced_turns
    plan.instant_turns = args.instant_turns or plan.instant_turns
    plan.rounds = args.rounds or plan.rounds
    return plan


def orchestrate(args: argparse.Namespace) -> int:
    plan = make_plan(args)
    began = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="sessiongate-gwload-"))
    profile_path = None
    if args.profile:
        profile_path = workdir / (
            "gateway.txt" if args.profile == "pyinstrument" else "gateway.prof"
        )
    children: list[Child] = []
    extra: list[Any] = []
    succeeded = False
    common = ["--tokens", str(plan.tokens)]
    if args.access_log:
        common.append("--access-log")
    try:
        stub = start_child(
            "stub",
            [
                "stub",
                *common,
                "--stub-ttft-ms",
                str(args.stub_ttft_ms),
                "--stub-interval-ms",
                str(args.stub_interval_ms),
            ],
            workdir,
        )
        children.append(stub)
        gateway_dir = workdir / "gateway"
        gateway_args = ["gateway", *common, "--stub-url", stub.url, "--data-dir", str(gateway_dir)]
        gateway_args += ["--gateway-model", args.gateway_model]
        if profile_path:
            gateway_args += ["--profile-out", str(profile_path)]
        gateway = start_child("gateway", gateway_args, workdir)
        children.append(gateway)
        baseline_dir = workdir / "baseline"
        baseline_dir.mkdir()
        baseline = start_child(
            "baseline",
            ["baseline", *common, "--stub-url", stub.url, "--data-dir", str(baseline_dir)],
            workdir,
        )
        children.append(baseline)
        print(
            f"gateway_load: {'quick' if args.quick else 'full'} run, {plan.sessions} concurrent "
            f"sessions, {plan.tokens} tokens/reply, paced stub = first token after "
            f"{args.stub_ttft_ms:g} ms then every {args.stub_interval_ms:g} ms"
        )
        print(f"  gateway model adapter: {gateway.info['model_path']}")
        print(
            f"  machine: {os.cpu_count()} CPUs, {platform.platform()}, Python "
            f"{platform.python_version()}; servers: uvicorn {version_of('uvicorn')}, "
            f"langgraph {version_of('langgraph')}, langgraph-checkpoint-sqlite "
            f"{version_of('langgraph-checkpoint-sqlite')}"
        )
        print(
            f"  processes: stub pid {stub.process.pid}, gateway pid {gateway.process.pid}, "
            f"baseline pid {baseline.process.pid}, client pid {os.getpid()}"
        )
        if args.postgres_url:
            from gwload_workers import start_workers

            workers = start_workers(args.postgres_url, args.workers, stub.url, STUB_MODEL, workdir)
            extra.append(workers)
            print(
                f"  sessiongate-pg: `sessiongate serve` with {args.workers} workers on PostgreSQL"
                f" (pid {workers.process.pid}), openai provider from config"
            )
        results = run_async(drive(plan, stub, gateway, baseline, phase_timeout=240.0, extra=extra))
        succeeded = True
    finally:
        if extra:
            from gwload_workers import stop_workers

            for workers in extra:
                stop_workers(workers)
        for child in reversed(children):
            stop_child(child.process)
        if succeeded and not args.profile:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"server logs and data kept in {workdir}", file=sys.stderr)
    elapsed = time.perf_counter() - began

    direct = summarise("direct", results["direct"])
    sg = summarise("sessiongate", results["sessiongate"])
    lg = summarise("langgraph", results["langgraph"])
    added_p50 = sg.ttft_p50_ms - direct.ttft_p50_ms
    added_p99 = sg.ttft_p99_ms - direct.ttft_p99_ms
    ratio = sg.turns_per_s / lg.turns_per_s if lg.turns_per_s else math.nan

    print(
        f"\nResults ({elapsed:.0f} s; server = the gateway or baseline process; client = this "
        "process, httpx)"
    )
    columns = [sg, lg]
    if "sessiongate-pg" in results:
        columns.insert(1, summarise("sessiongate-pg", results["sessiongate-pg"]))
    print_table(direct, columns, plan)
    checks = [
        ("added TTFT p50 <= 2 ms", added_p50 <= TARGET_ADDED_TTFT_P50_MS, f"{fmt(added_p50)} ms"),
        ("added TTFT p99 <= 10 ms", added_p99 <= TARGET_ADDED_TTFT_P99_MS, f"{fmt(added_p99)} ms"),
        (
            f">= {TARGET_TURNS_PER_S:.0f} turns/s (instant stub, c={plan.sessions})",
            sg.turns_per_s >= TARGET_TURNS_PER_S,
            f"{fmt(sg.turns_per_s, 1)} turns/s",
        ),
        (
            f">= {TARGET_RATIO_VS_BASELINE:g}x the LangGraph baseline turns/s",
            ratio >= TARGET_RATIO_VS_BASELINE,
            f"{fmt(ratio)}x ({fmt(sg.turns_per_s, 1)} vs {fmt(lg.turns_per_s, 1)})",
        ),
        ("no failed turns", sg.errors == 0, f"{sg.errors} failed"),
    ]
    print("\nTargets (sessiongate)")
    for name, passed, detail in checks:
        print(f"  [{'PASS' if passed else 'FAIL'}] {name}: {detail}")
    if profile_path is not None and profile_path.exists():
        gw_turns = sum(len(r.samples) for rs in results["sessiongate"].values() for r in rs)
        gw_turns += plan.sessions * (plan.warmup_turns + 2 * plan.rounds) + 1
        print_profile(profile_path, gw_turns)
        print(
            "  (the profiler slows the gateway several-fold: use the figures above from a "
            "run without --profile)"
        )
    if args.json:
        payload = {
            "mode": "quick" if args.quick else "full",
            "elapsed_seconds": round(elapsed, 1),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
            },
            "plan": asdict(plan),
            "stub": {"ttft_ms": args.stub_ttft_ms, "interval_ms": args.stub_interval_ms},
            "gateway_model": gateway.info["model_path"],
            "summaries": [asdict(s) for s in (direct, *columns)],
            "added_ttft_p50_ms": added_p50,
            "added_ttft_p99_ms": added_p99,
            "turns_ratio": ratio,
            "targets": [{"name": n, "passed": p, "detail": d} for n, p, d in checks],
            "phases": {
                target: {
                    mode: [
                        {
                            "wall_s": r.wall_s,
                            "sessions": r.sessions,
                            "cpu_s": r.cpu_s,
                            "samples": [[x.turn, x.ttft_ms, x.total_ms, x.ok] for x in r.samples],
                        }
                        for r in phases
                    ]
                    for mode, phases in by_mode.items()
                }
                for target, by_mode in results.items()
            },
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nresults written to {args.json}")
    print(
        f"gateway_vs_langgraph_turns_ratio={ratio:.2f} "
        f"added_ttft_p50_ms={added_p50:.2f} added_ttft_p99_ms={added_p99:.2f}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    roles: dict[str, Callable[[argparse.Namespace], None]] = {
        "stub": serve_stub,
        "gateway": serve_gateway,
        "baseline": serve_baseline,
    }
    if args.role:
        roles[args.role](args)
        return 0
    try:
        return orchestrate(args)
    except Exception:  # the run failed: say why, and still end with the summary line
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        print("gateway_vs_langgraph_turns_ratio=nan added_ttft_p50_ms=nan added_ttft_p99_ms=nan")
        return 1


if __name__ == "__main__":
    sys.exit(main())
