"""Context windows discovered from the servers that say them (issue 21, DESIGN §12):
Ollama's `/api/show`, vLLM's `/v1/models` and llama.cpp's `/props`, each spoken by a
local HTTP server on loopback; the agent's budget follows; a configured window is never
asked about; a server that hangs or says nothing costs at most the timeout and changes
nothing; and through `sessiongate serve`, the discovered window is the budget pins are
checked against."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import Settings
from sessiongate.service import window_discovery as discovery_module
from sessiongate.service.agents import build_profiles
from sessiongate.service.window_discovery import (
    WindowDiscovery,
    llamacpp_window,
    ollama_window,
    server_root,
    vllm_window,
)
from tests.support.fake_providers import openai_events
from tests.support.served import served_gateway

#: Route → JSON answer (None: 404).
Routes = dict[tuple[str, str], Any]


@dataclass
class Stub:
    url: str
    seen: list[tuple[str, str]] = field(default_factory=list)


@contextmanager
def stub_server(routes: Routes, *, hang: float = 0.0) -> Iterator[Stub]:
    """A loopback server answering `routes` (method, path) with JSON, chat completions
    with a streamed `ok`, anything else 404; `hang` seconds before every answer."""
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def answer(self, method: str) -> None:
            length = int(self.headers.get("content-length", "0"))
            self.rfile.read(length)
            with lock:
                seen.append((method, self.path))
            if hang:
                time.sleep(hang)
            if self.path.endswith("/chat/completions"):
                payload = "".join(openai_events(["ok"])).encode()
                kind = "text/event-stream"
                status = 200
            elif (method, self.path) in routes:
                payload = json.dumps(routes[method, self.path]).encode()
                kind, status = "application/json", 200
            else:
                payload, kind, status = b'{"error": "not found"}', "application/json", 404
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self.answer("GET")

        def do_POST(self) -> None:
            self.answer("POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Stub(f"http://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()


OLLAMA: Routes = {
    ("POST", "/api/show"): {
        "parameters": 'stop "<|eot_id|>"\nnum_ctx 2048',
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    }
}
VLLM: Routes = {
    ("GET", "/v1/models"): {
        "object": "list",
        "data": [
            {"id": "other", "max_model_len": 32768},
            {"id": "stub", "object": "model", "max_model_len": 1024},
        ],
    }
}
LLAMACPP: Routes = {
    ("GET", "/props"): {"default_generation_settings": {"n_ctx": 1536}, "total_slots": 1},
    # llama.cpp answers /v1/models too, with the trained length only (not a window).
    ("GET", "/v1/models"): {"data": [{"id": "stub", "meta": {"n_ctx_train": 131072}}]},
}


def test_each_wire_format_is_read() -> None:
    assert ollama_window(OLLAMA["POST", "/api/show"]) == 2048
    # No num_ctx: what Ollama serves by default, not the trained length.
    assert ollama_window({"model_info": {"qwen2.context_length": 32768}}) == 4096
    assert ollama_window({"model_info": {"qwen2.context_length": 2048}}) == 2048
    assert vllm_window(VLLM["GET", "/v1/models"], "stub") == 1024
    assert vllm_window({"data": [{"id": "only", "max_model_len": 4096}]}, "stub") == 4096
    assert llamacpp_window(LLAMACPP["GET", "/props"]) == 1536
    assert vllm_window(LLAMACPP["GET", "/v1/models"], "stub") is None
    nonsenses: list[Any] = [None, [], "x", {"parameters": "num_ctx lots"}, {"n_ctx": True}]
    for nonsense in nonsenses:
        assert ollama_window(nonsense) is None and llamacpp_window(nonsense) is None
    assert llamacpp_window({"default_generation_settings": {"n_ctx": 10}}) is None  # < 512
    assert server_root("http://h:11434/v1/") == "http://h:11434"
    assert server_root("http://h/proxy/v1") == "http://h/proxy"


def settings(tmp_path: Path, models: dict[str, Any], model: str = "m") -> Settings:
    return Settings(
        data_dir=tmp_path,
        models=models,
        agents={"defaults": {"model": model}},
        lifecycle={"timezone": "UTC"},
    )


def openai_model(url: str, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "model": "stub", "base_url": url + "/v1", **extra}


@pytest.fixture(autouse=True)
def discovering(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(discovery_module.ENV, "1")


@pytest.mark.parametrize(("routes", "window"), [(OLLAMA, 2048), (VLLM, 1024), (LLAMACPP, 1536)])
async def test_a_window_is_discovered_and_the_budget_follows(
    tmp_path: Path, routes: Routes, window: int
) -> None:
    with stub_server(routes) as stub:
        config = settings(tmp_path, {"m": openai_model(stub.url)})
        agents = build_profiles(config)
        assert agents["main"].context_budget == 8192 - 2048  # the default, before
        discovery = WindowDiscovery(config, agents)
        discovery.start()
        await discovery.wait()
    assert discovery.windows == {"m": window}
    assert agents["main"].context_budget == window - window // 4
    assert agents["main"].summary_budget == window - window // 4


async def test_a_configured_window_or_a_switched_off_discovery_asks_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with stub_server(VLLM) as stub:
        config = settings(tmp_path, {"m": openai_model(stub.url, context_window=4096)})
        agents = build_profiles(config)
        discovery = WindowDiscovery(config, agents)
        discovery.start()
        await discovery.wait()
        monkeypatch.setenv(discovery_module.ENV, "0")
        other = settings(tmp_path, {"m": openai_model(stub.url)})
        off = WindowDiscovery(other, build_profiles(other))
        off.start()
        await off.wait()
        assert stub.seen == []
    assert discovery.windows == {} and agents["main"].context_budget == 4096 - 1024


@pytest.mark.parametrize("hang", [0.0, 5.0])
async def test_a_server_that_says_nothing_or_hangs_changes_nothing_within_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hang: float
) -> None:
    monkeypatch.setattr(discovery_module, "TIMEOUT_SECONDS", 0.5)
    with stub_server({}, hang=hang) as stub:
        config = settings(tmp_path, {"m": openai_model(stub.url)})
        agents = build_profiles(config)
        before = agents["main"]
        discovery = WindowDiscovery(config, agents)
        started = time.monotonic()
        discovery.start()
        await discovery.wait()
        took = time.monotonic() - started
    assert took < 2.0
    assert discovery.windows == {} and agents["main"] == before
    assert sorted(stub.seen) == [("GET", "/props"), ("GET", "/v1/models"), ("POST", "/api/show")]


def test_sessiongate_serve_checks_pins_against_the_discovered_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with stub_server(LLAMACPP) as stub:
        config = (
            f'[models.local]\nprovider = "openai"\nmodel = "stub"\nbase_url = "{stub.url}/v1"\n'
            'max_retries = 0\n[agents.defaults]\nmodel = "local"\n'
        )
        with (
            served_gateway(tmp_path, config, {"alice": ("--primary",)}) as served,
            served.client("alice") as alice,
        ):
            wait_until(lambda: ("GET", "/props") in stub.seen)
            # About 1,500 tokens: within the default window's budget (6,144), not within
            # the discovered one's (1,536 - 384 = 1,152).
            text = "word " * 1200
            sent = alice.post("/v1/sessions/c:d/messages", json={"content": text, "stream": False})
            assert sent.status_code == 200, sent.text
            session_id = alice.get("/v1/sessions/c:d/context").json()["session_id"]
            deadline = time.monotonic() + 10
            while True:
                pinned = alice.post(f"/v1/sessions/c:d/messages/{session_id}:1/pin")
                if pinned.status_code == 409 or time.monotonic() > deadline:
                    break
                alice.delete(f"/v1/sessions/c:d/messages/{session_id}:1/pin")
                time.sleep(0.1)
            assert pinned.status_code == 409, pinned.text
            assert pinned.json()["error"]["code"] == "pins_exceed_budget"
            assert " 1152 " in pinned.json()["error"]["message"]
        assert "context window 1536" in served.stderr()


def wait_until(check: Callable[[], bool], within: float = 10) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.05)
