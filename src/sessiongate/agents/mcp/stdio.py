"""The stdio transport of an MCP server: its process, in a process group of its own.

Not the SDK's `stdio_client`, because of how that one ends a server: its stdout reader,
shielded, drains to end of file before the process is stopped, and the process is
stopped only after the reader ends; a server that never answered `initialize` (and did
not exit on its own) held every close, `sessiongate mcp list` and the gateway's
shutdown forever, and outlived the gateway. Here:

- The server starts in a new session: its process group is the server and everything it
  spawned, and the group is killed with SIGKILL whenever the transport ends, however it
  ends (a synchronous `killpg` in a `finally`, which no cancellation skips).
- A healthy server is given a short grace first (stdin closed, then SIGTERM), as the MCP
  lifecycle asks; a server the gateway gave up on (a failed handshake, a hung call:
  `graceful = False`) is killed at once.
- Nothing is read unbounded. Stdout is read in chunks, and a message line longer than
  `MAX_MESSAGE_BYTES` is dropped (and logged) instead of buffered whole. Stderr is read
  in chunks too and each line logged cut to `STDERR_LINE_CHARS`, so a server writing a
  200 MB line costs a few KB.

The framing is MCP's: one JSON-RPC message per line, parsed by the SDK's own adapter.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress

import anyio
import mcp_types as types
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

log = logging.getLogger("sessiongate.mcp")

#: The longest message line a server may send; a longer one is dropped, not buffered.
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: One stderr line, as logged (the rest of the line is read and dropped).
STDERR_LINE_CHARS = 2000
#: How much is read from a pipe at a time.
_CHUNK = 64 * 1024
#: A healthy server's time to exit once its stdin closes, and again after SIGTERM.
GRACE_SECONDS = 1.0
#: How long the end of a killed process is waited for (only an unkillable one takes it).
_REAP_SECONDS = 2.0


class StdioProcess:
    """One server process and the tasks that carry its bytes. `graceful` is how the
    next end goes: with the grace period (True) or by SIGKILL at once (False)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.graceful = True
        self.pid: int | None = None

    @asynccontextmanager
    async def run(
        self, command: str, args: Sequence[str], env: Mapping[str, str]
    ) -> AsyncIterator[TransportStreams]:
        """Start the server and yield the session's streams; raises OSError when the
        command cannot be started."""
        process = await anyio.open_process(
            [command, *args], env=get_default_environment() | dict(env), start_new_session=True
        )
        self.pid = process.pid
        incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._read_messages, process, incoming_writer)
                tasks.start_soon(self._write_messages, process, outgoing_reader, incoming_writer)
                tasks.start_soon(self._log_stderr, process)
                try:
                    yield incoming, outgoing
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._end(process)
                    tasks.cancel_scope.cancel()  # the pipe readers need no end of file
        finally:
            _kill_group(process.pid)  # first, and synchronous: whatever interrupted us
            with anyio.move_on_after(_REAP_SECONDS, shield=True):
                await process.aclose()  # closes our pipe ends and reaps the process
            for stream in (incoming, incoming_writer, outgoing, outgoing_reader):
                stream.close()

    async def _end(self, process: Process) -> None:
        if self.graceful:
            if process.stdin is not None:
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    await process.stdin.aclose()
            if not await _exited(process, GRACE_SECONDS):
                _signal_group(process.pid, signal.SIGTERM)
                await _exited(process, GRACE_SECONDS)
        _kill_group(process.pid)  # the server is gone; so is anything left in its group
        await _exited(process, _REAP_SECONDS)

    async def _read_messages(
        self, process: Process, incoming: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert process.stdout is not None
        try:
            async with incoming:
                async for line in _lines(process.stdout, MAX_MESSAGE_BYTES, self._too_long):
                    if line.strip():
                        await incoming.send(_parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is gone, or our own end closed the pipe

    def _too_long(self, size: int) -> None:
        log.warning(
            "mcp_message_too_large",
            extra={"server": self.server, "bytes": size, "limit": MAX_MESSAGE_BYTES},
        )

    async def _write_messages(
        self,
        process: Process,
        outgoing: MemoryObjectReceiveStream[SessionMessage],
        incoming: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        assert process.stdin is not None
        try:
            async with outgoing:
                async for message in outgoing:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading: end the session's read side too, so a request
            # waiting for an answer learns the connection is gone.
            await incoming.aclose()

    async def _log_stderr(self, process: Process) -> None:
        # What a server prints for its operator belongs in the gateway's log, never to a
        # client; cut per line, so its size does not depend on the server.
        assert process.stderr is not None
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for line in _lines(process.stderr, STDERR_LINE_CHARS, None):
                text = line.decode("utf-8", "replace").rstrip()
                if text:
                    log.info("mcp_server_stderr", extra={"server": self.server, "line": text})


async def _lines(
    stream: ByteReceiveStream, limit: int, on_cut: Callable[[int], None] | None
) -> AsyncIterator[bytes]:
    """The stream's lines (without their newline), read in chunks. Of a line longer than
    `limit` bytes only the first `limit` are kept and yielded, or, when `on_cut` is given,
    the line is dropped and `on_cut` told its size. A last line without a newline is
    yielded too (a crashing server's last words)."""
    kept = bytearray()
    size = 0  # of the current line, with what was not kept
    while True:
        try:
            chunk = await stream.receive(_CHUNK)
        except anyio.EndOfStream:
            break
        pieces = chunk.split(b"\n")
        for index, piece in enumerate(pieces):
            if len(kept) < limit:
                kept += piece[: limit - len(kept)]
            size += len(piece)
            if index == len(pieces) - 1:
                break  # the line goes on in the next chunk
            if size > limit and on_cut is not None:
                on_cut(size)
            else:
                yield bytes(kept)
            kept.clear()
            size = 0
    if kept and (size <= limit or on_cut is None):
        yield bytes(kept)


def _parse(line: bytes) -> SessionMessage | Exception:
    """One line as the SDK parses it; a line that is not a message reaches the session
    as an Exception, which the session reports and skips."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _exited(process: Process, within: float) -> bool:
    """Whether the process ended within `within` seconds (anyio's `wait` is the exit
    itself, not the end of pipes a surviving child may hold open)."""
    with anyio.move_on_after(within):
        await process.wait()
    return process.returncode is not None


def _signal_group(pid: int, number: int) -> None:
    # The server leads its own group (start_new_session): its pid is the group's id.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, number)


def _kill_group(pid: int) -> None:
    _signal_group(pid, signal.SIGKILL)
