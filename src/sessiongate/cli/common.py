"""What the `sessiongate` commands share: the consoles, the `--config` option, loading
the settings, running one action with an engine, and printing a table."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sessiongate.config import Settings, load_settings
from sessiongate.core.users import Caller
from sessiongate.errors import ConfigError, SessionGateError

if TYPE_CHECKING:
    # The engine (models, tools, MCP, hand-off patterns) is imported by the commands
    # that build one, so `sessiongate --help` and user commands start at once.
    from sessiongate.service.engine import Engine
    from sessiongate.service.users import UserService

console = Console()
errors = Console(stderr=True)
T = TypeVar("T")

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML config file (default: $SESSIONGATE_CONFIG)."),
]
# The CLI runs on the operator's machine with full access to the database file, so it
# acts as an administrator.
OPERATOR = Caller("operator", admin=True)


def settings_or_exit(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigError as exc:
        errors.print("[red]configuration error[/red]\n" + escape(str(exc)))
        raise typer.Exit(2) from None


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `message` as an error; the Exit to raise."""
    errors.print(f"[red]error[/red]: {message}", highlight=False)
    return typer.Exit(code)


def with_engine(config: Path | None, action: Callable[[Engine], Awaitable[T]]) -> T:
    from sessiongate.service.engine import build_engine

    settings = settings_or_exit(config)

    async def run() -> T:
        engine = build_engine(settings, config_dir=config.parent if config else None)
        try:
            await engine.start()
            return await action(engine)
        finally:
            await engine.aclose()

    return _run_or_fail(run())


def with_users(config: Path | None, action: Callable[[UserService], Awaitable[T]]) -> T:
    """Run `action` with the user service alone: the database opened, nothing else (no
    models, tools or MCP servers), for the commands that only read or write users."""
    from sessiongate.core.clock import SystemClock
    from sessiongate.service.storage import build_store, open_store
    from sessiongate.service.users import UserService

    settings = settings_or_exit(config)

    async def run() -> T:
        store, user_store, _ = build_store(settings)
        try:
            await open_store(store)
            return await action(UserService(user_store, SystemClock()))
        finally:
            await store.close()

    return _run_or_fail(run())


def _run_or_fail(work: Coroutine[object, object, T]) -> T:
    try:
        return asyncio.run(work)
    except (SessionGateError, ConfigError) as exc:
        message = exc.message if isinstance(exc, SessionGateError) else str(exc)
        raise fail(message) from None


def print_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on a terminal (cells fold, never cut); written to a pipe or a file,
    tab-separated lines under a header line, every value whole."""
    if not console.is_terminal:
        for line in (columns, *rows):
            sys.stdout.write("\t".join(_one_line(v) for v in line) + "\n")
        sys.stdout.flush()
        return
    table = Table()
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _one_line(value: str) -> str:
    return value.replace("\t", " ").replace("\n", " ")
