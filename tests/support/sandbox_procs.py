"""Host-side views the sandbox tests check against: processes by a marker in their
command line, and a TCP listener standing in for the gateway's own port."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


def processes_with(marker: str) -> list[int]:
    """Pids of every host process whose command line contains `marker` (but this one)."""
    found = []
    needle = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                if needle in cmdline.read():
                    found.append(int(name))
        except OSError:
            continue  # gone meanwhile, or a kernel thread
    return found


@dataclass
class Listener:
    port: int
    connections: list[str] = field(default_factory=list)


@asynccontextmanager
async def gateway_port() -> AsyncIterator[Listener]:
    """A TCP server on 127.0.0.1 that records every connection it accepts."""
    listener = Listener(port=0)

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        listener.connections.append(str(writer.get_extra_info("peername")))
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    listener.port = server.sockets[0].getsockname()[1]
    try:
        yield listener
    finally:
        server.close()
        await server.wait_closed()
