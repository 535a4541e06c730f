"""`sessiongate migrate --to postgresql://…`: the SQLite database (the configured one, or
a `sessiongate backup` file given with --from) copied into an empty PostgreSQL database,
checked table by table (docs/operations.md)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sessiongate.cli.common import (
    ConfigOption,
    console,
    errors,
    fail,
    print_table,
    settings_or_exit,
)

if TYPE_CHECKING:
    from sessiongate.service.migrate import MigrationReport, Progress

#: Exit codes: 1 the copy failed (nothing committed), 2 a usage or configuration
#: problem, 3 the target database is not empty.
TARGET_NOT_EMPTY = 3


def _source(config: Path | None, source: Path | None) -> Path:
    if source is not None:
        return source
    settings = settings_or_exit(config)
    if settings.database.backend == "postgres":
        raise fail("database.url is PostgreSQL already: there is no SQLite file to migrate", 2)
    path = settings.sqlite_path
    if str(path) == ":memory:":
        raise fail("database.url is an in-memory SQLite database: there is nothing to copy", 2)
    return path


def migrate(
    to: Annotated[str, typer.Option("--to", help="The empty PostgreSQL database: postgresql://…")],
    config: ConfigOption = None,
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A SQLite file to copy (a `sessiongate backup` copy) instead of the"
            " configured database.",
        ),
    ] = None,
) -> None:
    """Copy the SQLite database into an empty PostgreSQL database: every table, checked by
    row counts and per-table checksums; nothing is committed unless all agree."""
    from sessiongate.config.database import redact_url
    from sessiongate.errors import SessionGateError
    from sessiongate.service.migrate import TargetNotEmpty
    from sessiongate.service.migrate import migrate as run

    if not to.startswith(("postgresql://", "postgres://")):
        raise fail("--to must be a PostgreSQL URL (postgresql://user@host/database)", 2)
    path = _source(config, source)
    errors.print(
        f"migrating {path} to {redact_url(to)}", markup=False, highlight=False, soft_wrap=True
    )
    try:
        if console.is_terminal:
            report = _with_bar(lambda progress: asyncio.run(run(path, to, progress)))
        else:
            report = asyncio.run(run(path, to, _plain_lines))
    except TargetNotEmpty as exc:
        raise fail(exc.message, TARGET_NOT_EMPTY) from None
    except SessionGateError as exc:  # the migration's, or the migration runner's
        raise fail(exc.message) from None
    _print_report(report)


def _plain_lines(table: str, done: int, total: int) -> None:
    if done >= total:
        sys.stderr.write(f"copied {table}: {total} row(s)\n")
        sys.stderr.flush()


def _with_bar(work: Callable[[Progress], MigrationReport]) -> MigrationReport:
    from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn
    from rich.progress import Progress as Bar

    with Bar(
        TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(), console=errors
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def update(table: str, done: int, total: int) -> None:
            if table not in tasks:
                tasks[table] = bar.add_task(table, total=max(total, 1))
            bar.update(tasks[table], completed=done if total else 1)

        report: MigrationReport = work(update)
        return report


def _print_report(report: MigrationReport) -> None:
    print_table(
        ("table", "rows", "checksum (sha256)", "verified"),
        [
            (t.name, str(t.source_rows), t.source_checksum[:16], "yes" if t.matches else "NO")
            for t in report.tables
        ],
    )
    console.print(
        f"migrated {report.rows} row(s) in {len(report.tables)} table(s) in"
        f" {report.seconds:.1f}s; PostgreSQL schema version {report.schema_version}; every"
        " table's row count and checksum agree",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
