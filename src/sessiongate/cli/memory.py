"""`sessiongate memory list|add|forget|export|import --user NAME`: a user's memory items
from the operator's machine (docs/memory.md). The operator acts for the named user, who
must exist; what they do is what the user could do over /v1/memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from sessiongate.cli.common import ConfigOption, console, fail, print_table, with_engine
from sessiongate.errors import SessionGateError

if TYPE_CHECKING:
    from sessiongate.service.engine import Engine
    from sessiongate.service.memory import MemoryService

memory_app = typer.Typer(help="See, add and forget users' memory items.", no_args_is_help=True)

UserOption = Annotated[str, typer.Option("--user", "-u", help="Whose memory.")]


async def _memory_of(engine: Engine, user: str) -> MemoryService:
    if await engine.users.users.get_user(user) is None:
        raise SessionGateError(f"no user named {user!r} (add it: sessiongate users add)")
    assert engine.memory is not None
    return engine.memory


@memory_app.command("list")
def memory_list(
    user: UserOption,
    include_invalid: Annotated[
        bool, typer.Option("--all", help="Superseded and invalidated items too.")
    ] = False,
    scope: Annotated[str | None, typer.Option(help="Only items of this scope.")] = None,
    config: ConfigOption = None,
) -> None:
    """The user's memory items, newest first."""
    from sessiongate.core.memory import MAX_PAGE

    async def run(engine: Engine) -> list[tuple[str, ...]]:
        memory = await _memory_of(engine, user)
        items = await memory.list_items(
            user, include_invalid=include_invalid, scope=scope, limit=MAX_PAGE
        )
        return [
            (
                item.memory_id,
                item.text,
                item.scope,
                "yes" if item.pinned else "",
                item.created_by,
                item.created_at.isoformat(timespec="seconds"),
                "" if item.valid else f"invalid → {item.superseded_by or '-'}",
            )
            for item in items
        ]

    rows = with_engine(config, run)
    print_table(("id", "text", "scope", "pinned", "by", "created", "state"), rows)


@memory_app.command("add")
def memory_add(
    text: Annotated[str, typer.Argument(help="The statement to remember.")],
    user: UserOption,
    scope: Annotated[
        str | None, typer.Option(help='"user" (default), "agent:<name>" or "key:<key>".')
    ] = None,
    pinned: Annotated[bool, typer.Option("--pinned", help="Enter every turn.")] = False,
    config: ConfigOption = None,
) -> None:
    """Keep a new memory item for the user."""

    async def run(engine: Engine) -> str:
        memory = await _memory_of(engine, user)
        item = await memory.add(user, text, scope=scope, pinned=pinned, created_by="user")
        return item.memory_id

    console.print(f"added {with_engine(config, run)}", highlight=False)


@memory_app.command("forget")
def memory_forget(
    memory_id: Annotated[str, typer.Argument(help="The item's id (mem_…).")],
    user: UserOption,
    config: ConfigOption = None,
) -> None:
    """Forget an item: it, its earlier versions and their vectors are deleted."""

    async def run(engine: Engine) -> int:
        memory = await _memory_of(engine, user)
        return len(await memory.forget(user, memory_id))

    gone = with_engine(config, run)
    console.print(f"forgot {escape(memory_id)} ({gone} item(s) with its history)")


@memory_app.command("export")
def memory_export(user: UserOption, config: ConfigOption = None) -> None:
    """Write the user's memory items (history included) as JSON to standard output."""
    from sessiongate.core.memory_exchange import export_document

    async def run(engine: Engine) -> dict[str, object]:
        memory = await _memory_of(engine, user)
        items = await memory.export_items(user)
        return export_document(items, lambda t: t.isoformat().replace("+00:00", "Z"))

    sys.stdout.write(json.dumps(with_engine(config, run), ensure_ascii=False, indent=2) + "\n")


@memory_app.command("import")
def memory_import(
    file: Annotated[Path, typer.Argument(help="A memory export (JSON).")],
    user: UserOption,
    config: ConfigOption = None,
) -> None:
    """Read a memory export into the user's memory, all or nothing (new ids)."""
    from sessiongate.core.memory_exchange import parse_export

    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise fail(f"{escape(str(file))} cannot be read as JSON: {escape(str(exc))}") from None

    async def run(engine: Engine) -> int:
        memory = await _memory_of(engine, user)
        return len(await memory.import_items(user, parse_export(document)))

    console.print(f"imported {with_engine(config, run)} memory items for {escape(user)}")
