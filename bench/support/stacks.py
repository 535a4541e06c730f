"""How each stack under test is started, all against the same stub on 127.0.0.1:

* **sessiongate**: `create_app(build_engine(settings))` under uvicorn (uvloop + httptools,
  as `sessiongate serve`), SQLite in a temporary directory, one user created before start,
  the default agent's reply model pointing at the stub through the `openai` provider
  (`[models.stub] provider = "openai"`; `--gateway-model` picks another adapter). Runs as
  `gateway_load.py --role gateway`.
* **langgraph**: the FastAPI + LangGraph stack of stacks_langgraph.py under uvicorn, as
  `gateway_load.py --role baseline`.
* **litellm**: the LiteLLM proxy from its own venv, `litellm --config FILE`
  (stacks_litellm.py).
* **floor**: a bare pass-through proxy (stacks_floor.py): raw ASGI under the same
  uvicorn settings, the stub's bytes relayed as they come; what doing nothing costs.
* **sessiongate-pg** (with `--postgres-url`): `sessiongate serve` with several workers on
  PostgreSQL, started as an operator would (gwload_workers.py).

Both uvicorn servers run with `log_level="warning"`, the access log off unless
`--access-log`, keep-alive 60 s, and a 2048-connection backlog.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.common import run_async
from support.gateway_models import HttpxStubModel, InProcessModel, RawHttpStubModel
from support.procs import Child, listening_socket, run_server, start_child, stop_child, write_ready
from support.stub import STUB_MODEL

GATEWAY_USER = "bench"


# -- sessiongate (child process) ----------------------------------------------------------------


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
            from sessiongate.models.openai.adapter import OpenAIChatModel

            model: Any = OpenAIChatModel("stub", model=STUB_MODEL, base_url=base_url)
            engine = build_engine(Settings(**base), models={"stub": model})
            model_path = "injected: sessiongate.models.openai.adapter.OpenAIChatModel"
        except ImportError as exc:
            if args.gateway_model == "openai-class":
                raise
            print(f"OpenAIChatModel not importable: {exc}", file=sys.stderr)
    if engine is None and args.gateway_model == "raw":
        model = RawHttpStubModel("stub", base_url, STUB_MODEL)
        engine = build_engine(Settings(**base), models={"stub": model})
        model_path = (
            "DIAGNOSTIC: bare asyncio HTTP/1.1 ReplyModel (bench/support/gateway_models.py)"
        )
    if engine is None and args.gateway_model == "inprocess":
        model = InProcessModel("stub", args.tokens)
        engine = build_engine(Settings(**base), models={"stub": model})
        model_path = "DIAGNOSTIC: in-process fake model, no upstream call (TTFT rows meaningless)"
    if engine is None:
        model = HttpxStubModel("stub", base_url, STUB_MODEL)
        engine = build_engine(Settings(**base), models={"stub": model})
        model_path = "fallback: in-process httpx ReplyModel (bench/support/gateway_models.py)"
    _, key = run_async(engine.users.add(GATEWAY_USER, primary=True))
    return engine, key, model_path


def _uvicorn_config(app: Any, access_log: bool) -> Any:
    import uvicorn

    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=access_log,
        lifespan="on",
        backlog=2048,
        timeout_keep_alive=60,
    )


def serve_gateway(args: argparse.Namespace) -> None:
    import uvicorn

    from sessiongate.api.app import create_app
    from sessiongate.serving import freeze_heap

    engine, key, model_path = build_gateway(args)
    sock = listening_socket()
    server = uvicorn.Server(_uvicorn_config(create_app(engine), args.access_log))
    freeze_heap()  # as `sessiongate serve` does
    write_ready(
        args.ready_file,
        {"port": sock.getsockname()[1], "api_key": key, "model_path": model_path},
    )
    run_server(server, sock, args.profile_out)


# -- the LangGraph stack (child process) --------------------------------------------------------


def serve_baseline(args: argparse.Namespace) -> None:
    import uvicorn

    from support.stacks_langgraph import build_baseline_app

    app = build_baseline_app(args.stub_url, str(Path(args.data_dir) / "langgraph.db"))
    sock = listening_socket()
    write_ready(args.ready_file, {"port": sock.getsockname()[1]})
    run_server(uvicorn.Server(_uvicorn_config(app, args.access_log)), sock, None)


# -- the floor: a pass-through proxy (child process) -----------------------------------------


def serve_floor(args: argparse.Namespace) -> None:
    import uvicorn

    from support.stacks_floor import build_fastapi_floor_app, build_floor_app

    sock = listening_socket()
    write_ready(args.ready_file, {"port": sock.getsockname()[1]})
    durable = str(Path(args.data_dir) / "floor.db") if args.data_dir else None
    if args.floor_kind == "fastapi":
        app: Any = build_fastapi_floor_app(args.stub_url)
    else:
        app = build_floor_app(args.stub_url, durable)
    run_server(uvicorn.Server(_uvicorn_config(app, args.access_log)), sock, None)


# -- starting them all (orchestrator) -----------------------------------------------------------


@dataclass
class Stacks:
    """Every running server; `stop()` ends them in reverse order of start."""

    stub: Child
    servers: list[Any] = field(default_factory=list)  # Child, or gwload_workers.WorkersChild

    def by_name(self) -> dict[str, Any]:
        return {s.name: s for s in self.servers}

    def stop(self) -> None:
        for server in reversed(self.servers):
            if server.name == "sessiongate-pg":
                from support.gwload_workers import stop_workers

                stop_workers(server)
            else:
                stop_child(server.process)
        stop_child(self.stub.process)


def start_stacks(args: argparse.Namespace, workdir: Path, profile_path: Path | None) -> Stacks:
    common = ["--tokens", str(args.tokens)] + (["--access-log"] if args.access_log else [])
    stub_args = ["--stub-ttft-ms", str(args.stub_ttft_ms)]
    stub_args += ["--stub-interval-ms", str(args.stub_interval_ms)]
    stacks = Stacks(start_child("stub", ["stub", *common, *stub_args], workdir))
    url = stacks.stub.url
    try:
        gateway_args = ["gateway", *common, "--stub-url", url, "--data-dir", str(workdir / "sg")]
        gateway_args += ["--gateway-model", args.gateway_model]
        if profile_path:
            gateway_args += ["--profile-out", str(profile_path)]
        stacks.servers.append(start_child("sessiongate", gateway_args, workdir))
        floor_args = ["floor", *common, "--stub-url", url]
        stacks.servers.append(start_child("floor", floor_args, workdir))
        (workdir / "floor-durable").mkdir()
        durable_args = [*floor_args, "--data-dir", str(workdir / "floor-durable")]
        stacks.servers.append(start_child("floor-durable", durable_args, workdir))
        fastapi_args = [*floor_args, "--floor-kind", "fastapi"]
        stacks.servers.append(start_child("floor-fastapi", fastapi_args, workdir))
        if args.postgres_url:
            from support.gwload_workers import start_workers

            workers = start_workers(args.postgres_url, args.workers, url, STUB_MODEL, workdir)
            stacks.servers.append(workers)
        (workdir / "langgraph").mkdir()
        baseline_args = ["baseline", *common, "--stub-url", url]
        baseline_args += ["--data-dir", str(workdir / "langgraph")]
        stacks.servers.append(start_child("langgraph", baseline_args, workdir))
        if not args.no_litellm:
            from support.stacks_litellm import start_litellm

            stacks.servers.append(
                start_litellm(
                    url, workdir, workers=args.litellm_workers, access_log=args.access_log
                )
            )
    except BaseException:
        stacks.stop()
        raise
    return stacks
