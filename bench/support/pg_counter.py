"""A counting TCP relay in front of PostgreSQL, for bench/scale_soak.py's "database work
per turn": a gateway whose `database.url` points here has every byte passed on unchanged,
while the client-to-server half is read as PostgreSQL's frontend protocol and counted.

pg_stat_statements needs a superuser and a server restart; this needs neither. Counted,
over every connection:

* `statements`: Execute (`E`) and simple Query (`Q`) messages, the statements run
  (BEGIN and COMMIT included: each is a statement and a round trip);
* `round_trips`: Sync (`S`) and simple Query messages: each ends a batch the client then
  waits on (asyncpg sends Parse/Bind/Execute/Sync together), so each is one network round
  trip;
* `connections`: connections opened.

The counts are written as JSON to `<ready file>.counts` every 0.2 s. The first message on a
connection has no type byte (SSLRequest, then the StartupMessage); an SSL request is
refused by the server on the test cluster, so the rest stays readable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import struct
from pathlib import Path
from urllib.parse import urlsplit

from support.common import run_async
from support.procs import listening_socket, write_ready

SSL_REQUEST = 80877103
GSS_REQUEST = 80877104


class Counter:
    def __init__(self) -> None:
        self.statements = 0
        self.round_trips = 0
        self.connections = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "statements": self.statements,
            "round_trips": self.round_trips,
            "connections": self.connections,
        }


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _count_frontend(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, counts: Counter
) -> None:
    """Pass the client's bytes on, counting its messages."""
    try:
        # Untyped start-up messages: SSL/GSS requests (answered by one byte), then the
        # StartupMessage.
        while True:
            head = await reader.readexactly(8)
            length, code = struct.unpack("!ii", head)
            rest = await reader.readexactly(length - 8)
            writer.write(head + rest)
            await writer.drain()
            if code not in (SSL_REQUEST, GSS_REQUEST):
                break
        while True:
            head = await reader.readexactly(5)
            kind = head[:1]
            (length,) = struct.unpack("!i", head[1:])
            body = await reader.readexactly(length - 4)
            if kind in (b"E", b"Q"):
                counts.statements += 1
            if kind in (b"S", b"Q"):
                counts.round_trips += 1
            writer.write(head + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def serve_pg_counter(args: argparse.Namespace) -> None:
    target = urlsplit(args.postgres_url)
    host, port = target.hostname or "127.0.0.1", target.port or 5432
    counts = Counter()
    counts_path = Path(f"{args.ready_file}.counts")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_count_frontend(reader, up_writer, counts), _pipe(up_reader, writer))

    async def report(stop: asyncio.Event) -> None:
        while not stop.is_set():
            tmp = counts_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(counts.as_dict()), encoding="utf-8")
            os.replace(tmp, counts_path)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)

    async def main() -> None:
        sock = listening_socket()
        server = await asyncio.start_server(handle, sock=sock, backlog=2048)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        reporter = loop.create_task(report(stop))
        write_ready(args.ready_file, {"port": sock.getsockname()[1]})
        async with server:
            await stop.wait()
        await reporter

    run_async(main())


def read_counts(ready_file: Path) -> dict[str, int]:
    path = Path(f"{ready_file}.counts")
    try:
        found: dict[str, int] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"statements": 0, "round_trips": 0, "connections": 0}
    return found
