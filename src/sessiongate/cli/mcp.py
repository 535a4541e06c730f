"""`sessiongate mcp list`: connect to every configured MCP server, show its state and
its tools as models see them."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sessiongate.config import load_settings
from sessiongate.config.tools import McpServerConfig
from sessiongate.errors import ConfigError

if TYPE_CHECKING:
    from sessiongate.agents.tools import Tool

mcp_app = typer.Typer(help="Inspect the configured MCP servers.", no_args_is_help=True)
console = Console()
errors = Console(stderr=True)


async def _probe(name: str, config: McpServerConfig) -> tuple[list[Tool], str | None]:
    """The server's tools, or the reason it has none; the server is closed afterwards."""
    # The MCP SDK is imported here, by the one command that talks to servers, so every
    # other command starts without it.
    from sessiongate.agents.mcp.source import McpToolSource
    from sessiongate.agents.tools import ToolFailed

    source = McpToolSource(name, config)
    try:
        return list(await source.tools()), None
    except ToolFailed as exc:
        return [], exc.message
    except Exception as exc:  # an operator's diagnostic: show whatever went wrong
        return [], f"{type(exc).__name__}: {exc}"
    finally:
        await source.aclose()


def _transport(config: McpServerConfig) -> str:
    if config.command is not None:
        return "stdio: " + " ".join([config.command, *config.args])
    return f"http: {config.url}"


@mcp_app.command("list")
def mcp_list(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML config file (default: $SESSIONGATE_CONFIG)."),
    ] = None,
) -> None:
    """Connect to each configured MCP server; print its state and its tools. Exits 1 when
    any server is unavailable."""
    try:
        settings = load_settings(config)
    except ConfigError as exc:
        errors.print(f"[red]configuration error[/red]\n{exc}")
        raise typer.Exit(2) from None
    servers = settings.mcp
    # Each failure is printed below; without this, Python's last-resort handler would
    # also print the bare log event names (mcp_connect_failed) to stderr.
    for logger in ("sessiongate.mcp", "mcp"):
        logging.getLogger(logger).addHandler(logging.NullHandler())
    if not servers:
        console.print("no MCP servers configured (add an [mcp.<name>] table)", markup=False)
        return

    async def probe_all() -> list[tuple[list[Tool], str | None]]:
        # Concurrently: one slow server must not make the others wait for its timeout.
        return await asyncio.gather(*(_probe(n, c) for n, c in servers.items()))

    failed = False
    for (name, server), (tools, error) in zip(
        servers.items(), asyncio.run(probe_all()), strict=True
    ):
        heading = f"[bold]{escape(name)}[/bold] ({escape(_transport(server))})"
        if error is not None:
            failed = True
            console.print(f"{heading}: [red]error[/red]: {escape(error)}")
            continue
        console.print(f"{heading}: [green]ok[/green], {len(tools)} tools")
        if tools:
            table = Table()
            table.add_column("tool")
            table.add_column("description")
            for tool in tools:
                first_line = tool.spec.description.strip().splitlines()[:1]
                table.add_row(tool.spec.name, first_line[0] if first_line else "")
            console.print(table)
    if failed:
        raise typer.Exit(1)
