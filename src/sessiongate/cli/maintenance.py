"""`sessiongate gc`, `sessiongate backup PATH` and `sessiongate restore PATH`: the
operator's maintenance commands (docs/operations.md)."""

from __future__ import annotations

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
    with_engine,
)
from sessiongate.config import Settings

if TYPE_CHECKING:
    from sessiongate.service.engine import Engine
    from sessiongate.service.retention import RetentionReport
from sessiongate.store.sqlite.backup import BackupError, backup_database, restore_database

PG_DUMP_HINT = (
    "database.url is PostgreSQL: back it up with pg_dump (e.g. `pg_dump -Fc -f"
    " sessiongate.dump <url>`) and restore with pg_restore; see docs/operations.md"
)


def gc(
    config: ConfigOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list the keys it would archive or erase.")
    ] = False,
) -> None:
    """Apply the retention settings now: archive or erase the keys idle longer than
    retention.idle_after."""

    async def run(engine: Engine) -> RetentionReport:
        assert engine.retention is not None
        return await engine.retention.run(dry_run=dry_run)

    report = with_engine(config, run)
    if not report.ran:
        raise fail("another retention run holds the lock (the gateway's schedule?); try later")
    rows = [
        (
            item.outcome,
            item.owner,
            item.key,
            item.last_activity_at.isoformat(timespec="seconds"),
        )
        for item in report.items
    ]
    if rows:
        print_table(("outcome", "owner", "key", "last activity"), rows)
    counts = report.counts()
    done = ", ".join(f"{n} {what}" for what, n in sorted(counts.items())) or "nothing to do"
    cutoff = report.cutoff.isoformat(timespec="seconds")
    errors.print(
        f"{report.action.value}, idle since before {cutoff}: {done}"
        + ("; more idle keys remain for the next run" if report.more else ""),
        markup=False,
        highlight=False,
    )
    if counts["failed"]:
        raise typer.Exit(1)


def _sqlite_path(settings: Settings) -> Path:
    if settings.database.backend == "postgres":
        raise fail(PG_DUMP_HINT, 2)
    path = settings.sqlite_path
    if str(path) == ":memory:":
        raise fail("database.url is an in-memory SQLite database: there is nothing to copy", 2)
    return path


def backup(
    path: Annotated[Path, typer.Argument(help="The new file to write the copy to.")],
    config: ConfigOption = None,
) -> None:
    """Copy the SQLite database, consistently, while the gateway runs (SQLite's online
    backup); PostgreSQL: use pg_dump."""
    source = _sqlite_path(settings_or_exit(config))
    try:
        info = backup_database(source, path)
    except BackupError as exc:
        raise fail(exc.message) from None
    console.print(f"backed up {source} to {path}: {info.describe()}", markup=False)


def restore(
    path: Annotated[Path, typer.Argument(help="A file `sessiongate backup` wrote.")],
    config: ConfigOption = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Overwrite a database that holds data or is open (a running gateway)."
        ),
    ] = False,
) -> None:
    """Read a backup back into the configured SQLite database (stopped and empty, unless
    --force); PostgreSQL: use pg_restore."""
    target = _sqlite_path(settings_or_exit(config))
    try:
        info = restore_database(path, target, force=force)
    except BackupError as exc:
        raise fail(exc.message) from None
    console.print(f"restored {path} into {target}: {info.describe()}", markup=False)
    if force:
        console.print("restart the gateway if it was running", markup=False)
