"""`sessiongate` commands. Each opens the engine, does one thing and closes it."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from sessiongate.cli.common import (
    OPERATOR,
    ConfigOption,
    console,
    errors,
    fail,
    print_table,
    settings_or_exit,
    with_engine,
    with_users,
)
from sessiongate.cli.maintenance import backup, gc, restore
from sessiongate.cli.mcp import mcp_app
from sessiongate.cli.memory import memory_app
from sessiongate.cli.migrate import migrate
from sessiongate.cli.notes import notes_app
from sessiongate.config import Settings, cross_check
from sessiongate.config.database import redact_url
from sessiongate.core.users import User
from sessiongate.errors import ConfigError, InvalidInput, SessionNotFound

if TYPE_CHECKING:
    # The engine and the services are imported by the commands that use them, so
    # `sessiongate --help` and the user commands start at once.
    from sessiongate.core.segments import KeySummary
    from sessiongate.service.engine import Engine
    from sessiongate.service.sessions import ChainView
    from sessiongate.service.users import UserService
    from sessiongate.store.sqlite.serve_lock import ServeLock

app = typer.Typer(
    help="sessiongate: durable conversation sessions for AI assistants.",
    no_args_is_help=True,
    add_completion=False,
)
config_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)
sessions_app = typer.Typer(help="Inspect, export and import session keys.", no_args_is_help=True)
users_app = typer.Typer(help="Manage users and API keys.", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(users_app, name="users")
app.add_typer(sessions_app, name="sessions")
app.add_typer(mcp_app, name="mcp")
app.add_typer(notes_app, name="notes")
app.add_typer(memory_app, name="memory")


@app.command()
def serve(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(help="Overrides server.host.")] = None,
    port: Annotated[int | None, typer.Option(help="Overrides server.port.")] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, max=64, help="Overrides server.workers (more than 1: PostgreSQL)."),
    ] = None,
) -> None:
    """Run the gateway: REST + SSE, OpenAI-compatible API and WebSockets."""
    from sessiongate.logs import configure_logging
    from sessiongate.service.engine import build_engine
    from sessiongate.serving import serve as serve_gateway

    settings = settings_or_exit(config)
    if workers is not None:
        server = settings.server.model_copy(update={"workers": workers})
        settings = settings.model_copy(update={"server": server})
        problems = cross_check(settings)
        if problems:
            errors.print("[red]configuration error[/red]\n" + escape("\n".join(problems)))
            raise typer.Exit(2)
    configure_logging()
    try:
        engine = build_engine(settings, config_dir=config.parent if config else None)
    except ConfigError as exc:
        errors.print("[red]configuration error[/red]\n" + escape(str(exc)))
        raise typer.Exit(2) from None
    serve_lock = _claim_sqlite_serving(engine)
    try:
        bootstrap = asyncio.run(_bootstrap_admin(engine))
    except ConfigError as exc:  # e.g. the PostgreSQL server cannot be reached
        errors.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(1) from None
    if bootstrap:
        console.print(
            "No users yet, so a primary admin user [bold]admin[/bold] was created. "
            "Its API key (shown once, store it now):"
        )
        console.print(bootstrap, markup=False, highlight=False, soft_wrap=True)
    serve_gateway(settings, config, engine, host=host, port=port)
    if serve_lock is not None:
        serve_lock.release()


def _claim_sqlite_serving(engine: Engine) -> ServeLock | None:
    """One gateway per SQLite file (store/sqlite/serve_lock.py): exit 2 when another
    gateway process serves it."""
    from sessiongate.store.sqlite.serve_lock import claim_serving
    from sessiongate.store.sqlite.store import SQLiteStore

    if not isinstance(engine.store, SQLiteStore):
        return None
    try:
        return claim_serving(engine.store.path)
    except ConfigError as exc:
        errors.print("[red]configuration error[/red]\n" + escape(str(exc)))
        raise typer.Exit(2) from None


async def _bootstrap_admin(engine: Engine) -> str | None:
    await engine.start()
    try:
        if await engine.users.users.list_users():
            return None
        _, key = await engine.users.add("admin", primary=True, admin=True)
        return key
    finally:
        await engine.stop()  # this event loop ends here; the server's lifespan starts again


@app.command()
def demo(
    data_dir: Annotated[Path, typer.Option(help="Where to write demo.db.")] = Path("./data"),
) -> None:
    """Run a scripted conversation through the engine: rotations, chain, recall, revert."""
    from sessiongate.cli.demo import fresh_demo_database, run_demo

    asyncio.run(run_demo(fresh_demo_database(data_dir), console))


@users_app.command("add")
def users_add(
    name: str,
    primary: Annotated[bool, typer.Option("--primary", help="Routes to agent:main:main.")] = False,
    admin: Annotated[bool, typer.Option("--admin", help="May read every session.")] = False,
    config: ConfigOption = None,
) -> None:
    """Create a user and print its API key once, alone on the last line."""

    async def add(users: UserService) -> str:
        _, key = await users.add(name, primary=primary, admin=admin)
        return key

    key = with_users(config, add)
    roles = ", ".join(r for r, on in (("primary", primary), ("admin", admin)) if on) or "user"
    console.print(f"created {name} ({roles}); the key is shown only now:")
    print(key)


@users_app.command("modes")
def users_modes(
    name: str,
    enable: Annotated[
        list[str] | None, typer.Option("--enable", help="Enable this mode (repeatable).")
    ] = None,
    disable: Annotated[
        list[str] | None, typer.Option("--disable", help="Disable this mode (repeatable).")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Enable or disable modes for a user; print the modes enabled afterwards."""

    async def change(engine: Engine) -> tuple[str, ...]:
        if engine.modes is None:
            raise ConfigError("this gateway has no modes")
        if not enable and not disable:
            return await engine.modes.enabled(name)
        # Disabling ends the mode's running unlocks, recorded as locked by the operator.
        operator = User(OPERATOR.name, admin=True)
        user = await engine.modes.change_enabled(
            operator, name, enable=enable or (), disable=disable or ()
        )
        return user.modes

    modes = with_engine(config, change)
    console.print(f"{name}: modes enabled: {', '.join(modes) or '(none)'}", markup=False)


@users_app.command("list")
def users_list(config: ConfigOption = None) -> None:
    """Every user: roles, modes enabled and how many live API keys it has."""
    found = with_users(config, lambda users: users.list_with_keys())
    rows = []
    for user, keys in found:
        roles = [r for r, on in (("primary", user.primary), ("admin", user.admin)) if on]
        rows.append((user.name, ", ".join(roles) or "user", ", ".join(user.modes), str(keys)))
    print_table(("name", "roles", "modes", "live keys"), rows)


@users_app.command("revoke")
def users_revoke(name: str, config: ConfigOption = None) -> None:
    """Revoke every API key of a user at once; its sessions, notes and tasks stay."""
    revoked = with_users(config, lambda users: users.revoke(name))
    console.print(
        f"revoked {revoked} key(s) of {name}; `users rotate-key {name}` issues a new one",
        markup=False,
        highlight=False,
    )


@users_app.command("erase")
def users_erase(
    name: str,
    yes: Annotated[
        bool, typer.Option("--yes", help="Erase without asking (needed when not on a terminal).")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Erase a user and everything derived from them: keys and chains, artifacts and their
    files, notes, tasks, mode unlocks, webhook deliveries, API keys. Cannot be undone."""
    from sessiongate.logs import configure_logging
    from sessiongate.service.user_erasure import OPERATOR as ERASER
    from sessiongate.service.user_erasure import user_erasure

    if not yes:
        if not sys.stdin.isatty():
            raise fail(f"not erasing {name} without --yes (there is no terminal to ask on)", 2)
        typer.confirm(
            f"Erase user {name} and everything of theirs? This cannot be undone", abort=True
        )
    configure_logging()  # the audit line goes to stderr, as `serve` logs it
    report = with_engine(config, lambda e: user_erasure(e).erase(name, by=ERASER))
    counts = ", ".join(f"{kind} {n}" for kind, n in sorted(report.counts.items()) if n)
    console.print(f"erased {name}: {counts or 'nothing but the user'}", markup=False)


@users_app.command("rotate-key")
def users_rotate_key(name: str, config: ConfigOption = None) -> None:
    """Issue a new API key for a user and revoke all its old ones at once; print the new
    key once, alone on the last line."""
    key, revoked = with_users(config, lambda users: users.rotate_key(name))
    console.print(
        f"revoked {revoked} old key(s) of {name}; the new key is shown only now:",
        markup=False,
        highlight=False,
    )
    print(key)


@app.command()
def chat(
    url: Annotated[str, typer.Option(help="The gateway's base URL.")] = "http://127.0.0.1:8080",
    key: Annotated[str | None, typer.Option(help="Session key (default: your route).")] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="SESSIONGATE_API_KEY", help="Your API key.")
    ] = None,
) -> None:
    """A terminal client: streams replies, shows rotations; `/new` starts a new segment,
    `/history`, `/sessions`, `/help`."""
    from sessiongate.cli.chat import run_chat

    if not api_key:
        errors.print("[red]error[/red]: pass --api-key or set SESSIONGATE_API_KEY")
        raise typer.Exit(2)
    raise typer.Exit(run_chat(url, api_key, key, console))


@config_app.command("check")
def config_check(config: ConfigOption = None) -> None:
    """Validate the configuration and print it resolved, secrets masked."""
    settings = settings_or_exit(config)
    console.print_json(json.dumps(settings.model_dump(mode="json"), default=str))
    console.print(
        f"database: {resolved_database(settings)}", markup=False, highlight=False, soft_wrap=True
    )
    console.print("[green]configuration is valid[/green]")


def resolved_database(settings: Settings) -> str:
    """The database the gateway would open, as a URL (password left out) and its kind."""
    if settings.database.backend == "postgres":
        return f"{redact_url(settings.database.url)} (PostgreSQL)"
    path = settings.sqlite_path
    shown = str(path) if str(path) == ":memory:" else str(path.expanduser().resolve())
    return f"sqlite:///{shown} (SQLite)"


ListOwnerOption = Annotated[
    str | None, typer.Option("--owner", help="Only this user's keys (default: every user's).")
]


@sessions_app.command("list")
def sessions_list(config: ConfigOption = None, owner: ListOwnerOption = None) -> None:
    """Every session key (read page by page, by owner then name): latest segment, segment
    and message counts, last activity, title."""

    async def every_key(engine: Engine) -> list[KeySummary]:
        return [k async for k in engine.sessions.every_key(OPERATOR, owner=owner)]

    keys = with_engine(config, every_key)
    columns = ("key", "owner", "latest session_id", "segments", "messages", "last activity")
    rows = [
        (
            k.key,
            k.owner,
            k.latest_session_id,
            str(k.segment_count),
            str(k.message_count),
            k.last_activity_at.isoformat(timespec="seconds"),
            k.title or "",
        )
        for k in keys
    ]
    print_table((*columns, "title"), rows)


OwnerOption = Annotated[
    str | None,
    typer.Option(
        "--owner",
        help="The user whose key it is (needed only when several users have a key of that name).",
    ),
]


async def _owner_of(engine: Engine, key: str, owner: str | None) -> str:
    """Keys live in their owners' namespaces: the operator names the owner, or the one
    user holding a key of that name is taken."""
    if owner is not None:
        return owner
    owners = sorted([k.owner async for k in engine.sessions.every_key(OPERATOR) if k.key == key])
    if len(owners) == 1:
        return owners[0]
    if not owners:
        raise SessionNotFound(f"no session with key {key!r}")
    raise InvalidInput(f"several users have a key {key!r} ({', '.join(owners)}): pass --owner")


@sessions_app.command("show")
def sessions_show(key: str, config: ConfigOption = None, owner: OwnerOption = None) -> None:
    """One key's chain with the reason for every rotation."""

    async def show(engine: Engine) -> ChainView:
        return await engine.sessions.show(key, OPERATOR, owner=await _owner_of(engine, key, owner))

    view = with_engine(config, show)
    console.print(
        f"[bold]{view.key.key}[/bold] owned by {view.key.owner}; latest {view.latest.session_id}",
        soft_wrap=True,
    )
    if view.title:
        console.print(f"title: {view.title}", soft_wrap=True, markup=False, highlight=False)
    rows = [
        (
            segment.session_id,
            segment.status.value,
            segment.created_at.isoformat(timespec="seconds"),
            segment.created_reason_name,
            str(segment.message_count),
        )
        for segment in view.segments
    ]
    print_table(("session_id", "status", "created", "reason", "messages"), rows)


@sessions_app.command("export")
def sessions_export(
    key: str,
    config: ConfigOption = None,
    output: Annotated[Path | None, typer.Option("--output", "-o")] = None,
    owner: OwnerOption = None,
) -> None:
    """Write the key's whole chain as JSON Lines (to stdout unless --output)."""

    async def export(engine: Engine) -> list[str]:
        chosen = await _owner_of(engine, key, owner)
        return list(await engine.sessions.export(key, OPERATOR, owner=chosen))

    lines = with_engine(config, export)
    text = "".join(line + "\n" for line in lines)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        errors.print(f"wrote {len(lines)} lines to {output}")


@sessions_app.command("import")
def sessions_import(
    file: Path,
    config: ConfigOption = None,
    owner: Annotated[
        str | None,
        typer.Option(help="Import into this user's namespace (default: the file's owner)."),
    ] = None,
    key: Annotated[
        str | None, typer.Option("--key", help="Import under this key name instead.")
    ] = None,
) -> None:
    """Read a JSON Lines export back; all or nothing. Segment ids already in use get
    fresh ones."""

    async def do_import(engine: Engine) -> str:
        with file.open("rb") as handle:
            record = await engine.sessions.import_chain(
                handle, OPERATOR, key=key, owner=owner, operator=True
            )
        return f"{record.key} (owner {record.owner})"

    key = with_engine(config, do_import)
    console.print(f"imported {key}")


# Maintenance (cli/maintenance.py): retention, backup and restore.
app.command("gc")(gc)
app.command("backup")(backup)
app.command("restore")(restore)
app.command("migrate")(migrate)


if __name__ == "__main__":
    app()
