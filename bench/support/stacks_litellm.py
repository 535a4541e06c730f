"""The LiteLLM proxy peer: installed at a pinned version into the bench's own virtual
environment and started the way its documentation starts it, `litellm --config FILE`.

LiteLLM is not a dependency of sessiongate, not even of its `bench` extra: its proxy pulls
in a large tree of its own (boto3, azure, polars, mcp, ...) that must not meet the
project's pins. So `ensure_litellm()` creates `bench/.venv-litellm` on first use (`-m venv`
from the interpreter running the bench) and pip-installs `litellm[proxy]==VERSION` there,
plus httptools, the HTTP parser uvicorn uses for the two other Python stacks. Nothing of it
is imported into the bench; the proxy is a separate process.

Pinned to 1.92.0. 1.82.7 and 1.82.8 were the March 2026 supply-chain compromise (a
credential stealer, since deleted from PyPI) and are refused outright; 1.81.16 up to 1.83.6
are in the range of the proxy's SQL-injection advisory CVE-2026-42208. 1.92.0 comes from
the rebuilt release pipeline, months old, and taken up by downstream projects as a stable
release.

The proxy runs offline and stateless: the model cost map is the copy shipped in the wheel
(`LITELLM_LOCAL_MODEL_COST_MAP=True`, so it never fetches one), telemetry is off, no
`DATABASE_URL` (LiteLLM then keeps no keys, spend or logs), one model that points at the
stub, and a master key checked on every request (as sessiongate checks its API key). One
worker process by default, like the sessiongate column (`--litellm-workers N`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

from support.common import BENCH_DIR
from support.procs import HOST, Child, free_port, spawn, stop_child
from support.stub import STUB_MODEL

LITELLM_VERSION = "1.92.0"
HTTPTOOLS = "httptools==0.9.0"  # the version in the project's .venv
VENV_DIR = BENCH_DIR / ".venv-litellm"
COMPROMISED = frozenset({"1.82.7", "1.82.8"})

# The environment the proxy runs with: offline, quiet, no database, no UI.
PROXY_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOG": "ERROR",
    "LITELLM_MODE": "PRODUCTION",  # do not read a .env file
    "DISABLE_ADMIN_UI": "True",
    "NO_DOCS": "True",
    "NO_REDOC": "True",
    "LITELLM_DONT_SHOW_FEEDBACK_BOX": "True",
}
# Inherited variables that would change what the proxy does or which code it runs.
DROPPED_ENV = ("DATABASE_URL", "DIRECT_URL", "PYTHONPATH", "VIRTUAL_ENV", "LITELLM_MASTER_KEY")


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed_version(venv: Path = VENV_DIR) -> str | None:
    python = _venv_python(venv)
    if not python.exists():
        return None
    probe = "import importlib.metadata as m; print(m.version('litellm'))"
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def _check_startup_hooks(venv: Path) -> None:
    """The compromised releases planted a `litellm_init.pth` that ran on every interpreter
    start. Refuse a venv holding any .pth file that names litellm."""
    for pth in venv.glob("lib/python*/site-packages/*.pth"):
        if "litellm" in pth.name.lower() or "litellm" in pth.read_text(errors="replace"):
            raise RuntimeError(f"{pth} looks like a startup hook planted by litellm; not running")


def requirements(version: str = LITELLM_VERSION) -> list[str]:
    # httptools: uvicorn's C HTTP parser, which it picks when importable. sessiongate and the
    # LangGraph stack run on it; `litellm[proxy]` alone would leave the proxy on h11.
    return [f"litellm[proxy]=={version}", HTTPTOOLS]


def ensure_litellm(version: str = LITELLM_VERSION, venv: Path = VENV_DIR) -> Path:
    """The `litellm` CLI in the bench's own venv, installing the pinned version if needed."""
    if version in COMPROMISED:
        raise RuntimeError(f"litellm {version} was a compromised release; refusing it")
    cli = venv / "bin" / "litellm"
    stamp = venv / ".bench-requirements"
    wanted = "\n".join(requirements(version)) + "\n"
    current = stamp.read_text(encoding="utf-8") if stamp.exists() else ""
    if current != wanted or installed_version(venv) != version or not cli.exists():
        began = time.perf_counter()
        print(f"  installing {' '.join(requirements(version))} into {venv}", flush=True)
        if not _venv_python(venv).exists():
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", str(venv)], check=True)
        pip = [str(_venv_python(venv)), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "--disable-pip-version-check", *requirements(version)], check=True)
        found = installed_version(venv)
        if found != version:
            raise RuntimeError(f"{venv} holds litellm {found}, not {version}")
        stamp.write_text(wanted, encoding="utf-8")
        print(f"  installed in {time.perf_counter() - began:.0f} s", flush=True)
    _check_startup_hooks(venv)
    return cli


def _write_config(workdir: Path, stub_url: str, master_key: str) -> Path:
    config = workdir / "litellm.yaml"
    # JSON is YAML: no YAML writer needed on this side.
    config.write_text(
        json.dumps(
            {
                "model_list": [
                    {
                        "model_name": STUB_MODEL,
                        "litellm_params": {
                            "model": f"openai/{STUB_MODEL}",
                            "api_base": f"{stub_url}/v1",
                            "api_key": "sk-stub-unused",
                        },
                    }
                ],
                "litellm_settings": {"request_timeout": 600, "set_verbose": False},
                "general_settings": {"master_key": master_key, "disable_spend_logs": True},
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return config


def _write_log_config(workdir: Path, access_log: bool) -> Path:
    """uvicorn's logging: warnings only, and no access-log line per request unless asked
    (the other servers run with the access log off too)."""
    handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
    access_level = "INFO" if access_log else "WARNING"
    path = workdir / "litellm-logging.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "disable_existing_loggers": False,
                "handlers": {"default": handler},
                "loggers": {
                    "uvicorn": {"handlers": ["default"], "level": "WARNING"},
                    "uvicorn.error": {"level": "WARNING"},
                    "uvicorn.access": {
                        "handlers": ["default"],
                        "level": access_level,
                        "propagate": False,
                    },
                },
            }
        ),
        encoding="utf-8",
    )
    return path


def start_litellm(
    stub_url: str, workdir: Path, *, workers: int = 1, access_log: bool = False
) -> Child:
    cli = ensure_litellm()
    port = free_port()
    master_key = "sk-bench-" + secrets.token_hex(16)
    command = [
        str(cli),
        "--config",
        str(_write_config(workdir, stub_url, master_key)),
        "--host",
        HOST,
        "--port",
        str(port),
        "--num_workers",
        str(workers),
        "--telemetry",
        "False",
        "--keepalive_timeout",
        "60",
        "--log_config",
        str(_write_log_config(workdir, access_log)),
    ]
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update(PROXY_ENV)
    log_path = workdir / "litellm.log"
    process = spawn(command, log_path, env=env)
    child = Child(
        "litellm",
        process,
        {"port": port, "api_key": master_key, "version": installed_version(), "workers": workers},
        log_path,
    )
    _wait_live(child)
    return child


def _wait_live(child: Child, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.process.poll() is not None:
            break
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{child.url}/health/liveliness", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    stop_child(child.process)
    tail = child.log_path.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"the LiteLLM proxy did not start:\n{tail}")
