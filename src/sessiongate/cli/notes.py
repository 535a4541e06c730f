"""`sessiongate notes import DIR --user NAME`: a folder of Markdown notes (seed 002's
notes folder) into a user's notes.

Every `*.md` under DIR, recursively, in path order. A note's source is its path relative
to DIR and is its identity: importing a file again replaces its note (the old one and its
chunks go in the same transaction), so re-running an import never duplicates. The title
is the file's first heading, else its name. A file that cannot be read, is not UTF-8
text, is empty or is over `[notes] max_note_chars` is skipped with a message; the others
are imported all the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from sessiongate.config import load_settings
from sessiongate.errors import ConfigError, SessionGateError

if TYPE_CHECKING:
    from sessiongate.service.engine import Engine
    from sessiongate.service.notes import NoteService

notes_app = typer.Typer(help="Manage users' notes.", no_args_is_help=True)
console = Console()
errors = Console(stderr=True)


@dataclass
class ImportReport:
    added: int = 0
    replaced: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source, why)


def markdown_files(folder: Path) -> Iterator[Path]:
    """Every regular `*.md` file under `folder`, in path order. Symbolic links are not
    followed: an import reads what is inside the folder, not what a link points at."""
    for path in sorted(folder.rglob("*.md")):
        if path.is_symlink() or not path.is_file():
            continue
        inside = path.relative_to(folder).parents
        if any((folder / part).is_symlink() for part in inside if part != Path()):
            continue
        yield path


def read_note(path: Path) -> tuple[str | None, str]:
    """(text, "") or (None, why it is skipped)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or type(exc).__name__})"
    if b"\x00" in raw:
        return None, "is binary, not text"
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark is not part of the note
    except UnicodeDecodeError:
        return None, "is not UTF-8 text"
    if not text.strip():
        return None, "is empty"
    return text, ""


async def import_folder(notes: NoteService, folder: Path, user: str) -> ImportReport:
    from sessiongate.core.notes import markdown_title

    report = ImportReport()
    for path in markdown_files(folder):
        source = path.relative_to(folder).as_posix()
        text, why = read_note(path)
        if text is None:
            report.skipped.append((source, why))
            continue
        title = markdown_title(text) or path.stem
        try:
            _, replaced = await notes.import_note(user, text, title=title, source=source)
        except SessionGateError as exc:
            report.skipped.append((source, exc.message))
            continue
        report.added += 1
        report.replaced += replaced
    return report


@notes_app.command("import")
def notes_import(
    # Named `dir` (shadowing the builtin here only) so the command shows and documents
    # its argument as DIR.
    dir: Annotated[Path, typer.Argument(help="A folder of Markdown (*.md) files.")],
    user: Annotated[str, typer.Option("--user", "-u", help="Whose notes these become.")],
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML config file (default: $SESSIONGATE_CONFIG)."),
    ] = None,
) -> None:
    """Import every *.md file under DIR as USER's notes; a file imported before is
    replaced, never duplicated."""
    folder = dir
    if not folder.is_dir():
        errors.print(f"[red]error[/red]: {escape(str(folder))} is not a folder")
        raise typer.Exit(1)
    try:
        settings = load_settings(config)
    except ConfigError as exc:
        errors.print("[red]configuration error[/red]\n" + escape(str(exc)))
        raise typer.Exit(2) from None

    from sessiongate.service.engine import build_engine

    async def run() -> ImportReport:
        engine: Engine = build_engine(settings, config_dir=config.parent if config else None)
        try:
            await engine.start()
            if await engine.users.users.get_user(user) is None:
                raise SessionGateError(f"no user named {user!r} (add it: sessiongate users add)")
            assert engine.notes is not None
            return await import_folder(engine.notes, folder.resolve(), user)
        finally:
            await engine.aclose()

    try:
        report = asyncio.run(run())
    except (SessionGateError, ConfigError) as exc:
        message = exc.message if isinstance(exc, SessionGateError) else str(exc)
        errors.print(f"[red]error[/red]: {escape(message)}")
        raise typer.Exit(1) from None
    for source, why in report.skipped:
        console.print(f"skipped {escape(source)}: {escape(why)}")
    console.print(
        f"imported {report.added} notes for {escape(user)}"
        f" ({report.replaced} replaced an earlier import), skipped {len(report.skipped)}"
    )
