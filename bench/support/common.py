"""Helpers shared by the bench scripts and the other support modules: paths, package
versions, the machine's load and CPU clocks, the `bench` extra, percentiles and tables.
Standard library only, so any module can import it first."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import platform
import subprocess
import sys
from collections.abc import Coroutine, Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: bench/, where the scripts live (this module is in bench/support/).
BENCH_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = BENCH_DIR.parent
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# -- environment --------------------------------------------------------------------------------


def version_of(dist: str) -> str:
    try:
        return importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return float("nan")


def machine_line() -> str:
    return (
        f"{os.cpu_count()} CPUs, {platform.machine()}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def machine_info() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": load_average(),
    }


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def ensure_bench_extras(modules: Sequence[str]) -> None:
    """The peers the benches compare against come from the project's `bench` extra
    (pyproject.toml). When one of `modules` is missing from this interpreter, install the
    extra into it (`pip install -e "<repo>[bench]"`) rather than fail half-way through."""
    missing = [m for m in modules if not _importable(m)]
    if not missing:
        return
    print(
        f"bench: {', '.join(missing)} missing from {sys.prefix}; installing the project's "
        '`bench` extra (pip install -e ".[bench]")',
        flush=True,
    )
    command = [sys.executable, "-m", "pip", "install", "-q", "-e", f"{REPO_DIR}[bench]"]
    subprocess.run(command, check=True)
    importlib.invalidate_caches()


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` on uvloop when it is installed (uvicorn picks it too)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


# -- processes ----------------------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc; NaN where unavailable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of a process and of all its descendants that are still running."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        pending.extend(int(c) for c in children)
    return total


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine have spent busy since boot (/proc/stat:
    everything but idle and iowait, summed over CPUs); NaN where unavailable."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return math.nan
    ticks = [int(f) for f in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _CLOCK_TICKS


# -- statistics and formatting ------------------------------------------------------------------


def nearest_rank(sorted_values: Sequence[int], fraction: float) -> int:
    """Nearest-rank percentile of an already sorted, non-empty sequence."""
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaNs are ignored."""
    data = sorted(v for v in values if not math.isnan(v))
    if not data:
        return math.nan
    position = (len(data) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (position - low)


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def render_table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    """A Markdown table, padded so it also reads as plain text."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        parts = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ]
        return "| " + " | ".join(parts) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])
