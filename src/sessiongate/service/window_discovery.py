"""Context windows discovered from the servers that say them (DESIGN.md §12, Budget;
docs/working_set.md): for an OpenAI-compatible model (`provider = "openai"` with a
`base_url`) whose `context_window` is not configured, the server is asked once per model
and process, in the background after start-up, with a short timeout:

- Ollama: `POST /api/show {"model"}` — `num_ctx` in `parameters` (what it serves), else
  the smaller of `model_info.*.context_length` and Ollama's own default `num_ctx`;
- vLLM: `GET <base_url>/models` — the model's `max_model_len`;
- llama.cpp's server: `GET /props` — `default_generation_settings.n_ctx`.

A window found replaces the table of known names for that model, and every agent's budget
is computed again from it. Turns never wait for discovery: until it answers (or when it
fails, which is logged at debug level only) the table and the default apply.
`SESSIONGATE_DISCOVER_WINDOWS=0` turns it off."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from sessiongate.config import Settings
from sessiongate.config.agents import AgentConfig
from sessiongate.config.models import ModelConfig
from sessiongate.service.agents import DEFAULTS_SECTION, AgentProfile, merge_agent
from sessiongate.service.budgets import agent_budget, summary_budget

log = logging.getLogger(__name__)

ENV = "SESSIONGATE_DISCOVER_WINDOWS"
#: The longest one server may take to say its window (each probe).
TIMEOUT_SECONDS = 2.0
#: Ollama's `num_ctx` when a model's parameters set none: what it serves by default,
#: whatever the model was trained for.
OLLAMA_DEFAULT_NUM_CTX = 4096
#: The windows believed (as `[models.X] context_window` accepts).
MIN_WINDOW, MAX_WINDOW = 512, 100_000_000


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


def wants_discovery(config: ModelConfig) -> bool:
    return config.provider == "openai" and bool(config.base_url) and config.context_window is None


def server_root(base_url: str) -> str:
    """`http://host:11434/v1` → `http://host:11434` (where Ollama's and llama.cpp's own
    endpoints are)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path.removesuffix("/v1")
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _window(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    window = int(value)
    return window if MIN_WINDOW <= window <= MAX_WINDOW else None


def ollama_window(body: Any) -> int | None:
    """From `/api/show`'s answer: `num_ctx` of its parameters (a text of `name value`
    lines), else min(the model's trained `*.context_length`, Ollama's default num_ctx)."""
    if not isinstance(body, dict):
        return None
    parameters = body.get("parameters")
    if isinstance(parameters, str):
        for line in parameters.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == "num_ctx" and words[1].isdigit():
                return _window(int(words[1]))
    info = body.get("model_info")
    if isinstance(info, dict):
        for name, value in info.items():
            if isinstance(name, str) and name.endswith(".context_length"):
                trained = _window(value)
                if trained is not None:
                    return min(trained, OLLAMA_DEFAULT_NUM_CTX)
    return None


def vllm_window(body: Any, model: str) -> int | None:
    """From `/v1/models`: the `max_model_len` of the model named `model` (or of the only
    model served)."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model]
    chosen = named or (entries if len(entries) == 1 else [])
    return _window(chosen[0].get("max_model_len")) if chosen else None


def llamacpp_window(body: Any) -> int | None:
    """From `/props`: `default_generation_settings.n_ctx` (the slot's context size)."""
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    if isinstance(settings, dict) and (found := _window(settings.get("n_ctx"))) is not None:
        return found
    return _window(body.get("n_ctx"))


async def _json(request: Any) -> Any:
    try:
        response = await request
        if response.status_code != 200:
            return None
        return response.json()
    except (httpx.HTTPError, ValueError):
        return None


async def discover_window(
    client: httpx.AsyncClient, name: str, config: ModelConfig
) -> tuple[int, str] | None:
    """The window its server says, and which kind of server said it; None if none does."""
    assert config.base_url is not None
    model = config.model or name
    root = server_root(config.base_url)
    headers = {}
    if config.api_key_env and (key := os.environ.get(config.api_key_env)):
        headers["Authorization"] = f"Bearer {key}"
    show, models, props = await asyncio.gather(
        _json(client.post(f"{root}/api/show", json={"model": model}, headers=headers)),
        _json(client.get(f"{config.base_url.rstrip('/')}/models", headers=headers)),
        _json(client.get(f"{root}/props", headers=headers)),
    )
    for window, kind in (
        (ollama_window(show), "ollama"),
        (vllm_window(models, model), "vllm"),
        (llamacpp_window(props), "llama.cpp"),
    ):
        if window is not None:
            return window, kind
    return None


def rebudget(
    settings: Settings, agents: MutableMapping[str, AgentProfile], windows: Mapping[str, int]
) -> None:
    """Every agent's budgets computed again with the discovered windows."""
    models = {
        name: config.model_copy(update={"context_window": windows[name]})
        if name in windows
        else config
        for name, config in settings.models.items()
    }
    defaults = settings.agents.get(DEFAULTS_SECTION, AgentConfig())
    for name, profile in list(agents.items()):
        config = merge_agent(name, defaults, settings.agents.get(name, AgentConfig()))
        policy = profile.working_set
        budget = agent_budget(models, config, policy)
        agents[name] = replace(
            profile,
            context_budget=budget,
            summary_budget=summary_budget(models, config, policy, budget),
        )


class WindowDiscovery:
    def __init__(
        self,
        settings: Settings,
        agents: MutableMapping[str, AgentProfile],
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.agents = agents
        self.transport = transport
        #: What was discovered, per configured model name.
        self.windows: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Ask the servers in the background (once; nothing when turned off or nothing
        needs asking)."""
        if self._task is not None or not enabled():
            return
        if not any(wants_discovery(c) for c in self.settings.models.values()):
            return
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def wait(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)

    async def run(self) -> None:
        wanted = {n: c for n, c in self.settings.models.items() if wants_discovery(c)}
        timeout = httpx.Timeout(TIMEOUT_SECONDS)
        async with httpx.AsyncClient(timeout=timeout, transport=self.transport) as client:
            found = await asyncio.gather(
                *(discover_window(client, n, c) for n, c in wanted.items()),
                return_exceptions=True,
            )
        for name, result in zip(wanted, found, strict=True):
            if isinstance(result, BaseException) or result is None:
                log.debug("model %s: its server did not say its context window", name)
                continue
            window, kind = result
            self.windows[name] = window
            log.info("model %s: context window %d, as its %s server says", name, window, kind)
        if self.windows:
            rebudget(self.settings, self.agents, self.windows)

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
