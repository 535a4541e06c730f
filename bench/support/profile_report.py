"""Where the gateway's CPU goes: the profile `gateway_load.py --profile` writes, printed by
package and by function (cProfile on a CPU clock, or pyinstrument's call tree)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
