"""The `command` provider: an external relay program as the reply model.

The configured argv runs without a shell. It gets the turn as one JSON object
`{"messages": [...]}` on stdin (then EOF), each message's `content` a string (the text of a
message made of parts; images are left out, as the relay is a text-only model), and writes
the reply to stdout, which is streamed as it arrives. A non-zero exit is a failure even
after some text, so a relay that dies half-way never looks like a finished answer. The child
runs in its own process group, so a timeout or a consumer that stops listening kills the
relay and anything it started.
An exit with code 0 after EOF on stdout is the end of a complete reply (the relay's only
end marker).

Error messages are fixed per category ("the model command exited with code 3"); the
relay's stderr, which may carry anything the relay printed, goes to the log only.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from sessiongate.config.models import ModelConfig
from sessiongate.core.context import estimate_tokens
from sessiongate.errors import ConfigError, ModelError
from sessiongate.models.base import (
    NO_OPTIONS,
    TEXT_ONLY,
    ModelCapabilities,
    ModelChunk,
    ModelOptions,
    TextDelta,
    Usage,
    WireMessage,
    text_of,
)

log = logging.getLogger("sessiongate.models")

_READ_SIZE = 4096
#: Bytes of stderr kept while the relay runs; the log shows the last few hundred.
_STDERR_KEEP = 8192


class CommandModel:
    #: The relay protocol carries text only.
    capabilities: ClassVar[ModelCapabilities] = TEXT_ONLY

    def __init__(
        self, name: str, argv: Sequence[str], *, timeout: float = 120.0, stderr_chars: int = 500
    ) -> None:
        if not argv:
            raise ValueError("a command model needs a non-empty argv")
        self.name = name
        self.argv = list(argv)
        self.timeout = timeout
        self.stderr_chars = stderr_chars
        # Only the program name: the rest of argv may carry secrets.
        self.label = f"model {name!r} (command {Path(self.argv[0]).name})"

    @classmethod
    def from_config(cls, name: str, config: ModelConfig) -> CommandModel:
        if not config.command or not config.command[0]:
            raise ConfigError(
                f"models.{name}.command: the command provider needs the program to run, "
                'as a list such as ["python3", "relay.py"]'
            )
        return cls(name, config.command, timeout=config.read_timeout.total_seconds())

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        # `options` is ignored: a text-only model is never offered tools (base.ReplyModel).
        payload = json.dumps({"messages": [_relay_message(m) for m in messages]}).encode()
        deadline = asyncio.get_running_loop().time() + self.timeout
        proc = await self._spawn()
        feeder = asyncio.create_task(_feed(proc, payload))
        stderr = asyncio.create_task(_tail(proc.stderr))
        assert proc.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        parts: list[str] = []
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        data = await proc.stdout.read(_READ_SIZE)
                except TimeoutError:
                    raise self._timeout() from None
                # A multi-byte character split across reads waits in the decoder.
                text = decoder.decode(data, final=not data)
                if text:
                    parts.append(text)
                    yield TextDelta(text)
                if not data:
                    break
            try:
                async with asyncio.timeout_at(deadline):
                    code = await proc.wait()
                    err = await stderr
            except TimeoutError:
                raise self._timeout() from None
            if code != 0:
                raise self._failed(code, err)
        finally:
            await _reap(proc, feeder, stderr)
        yield Usage(
            prompt_tokens=sum(estimate_tokens(text_of(m.get("content", ""))) for m in messages),
            completion_tokens=estimate_tokens("".join(parts)),
            estimated=True,  # a command reports no usage
        )

    async def _spawn(self) -> asyncio.subprocess.Process:
        try:
            return await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group, killed as a whole
            )
        except FileNotFoundError:
            raise self._error(
                "the model command was not found", "command_not_found", "program not found"
            ) from None
        except PermissionError:
            raise self._error(
                "the model command is not executable", "command_not_found", "not executable"
            ) from None
        except OSError as exc:
            raise self._error(
                "the model command could not be started",
                "command_failed",
                f"could not start: {exc.strerror or type(exc).__name__}",
            ) from None

    def _timeout(self) -> ModelError:
        return self._error(
            "the model command timed out and was killed",
            "model_timeout",
            f"no end within {self.timeout:g}s",
            retryable=True,
        )

    def _failed(self, code: int, stderr: str) -> ModelError:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        tail = " ".join(stderr.split())[-self.stderr_chars :]
        return self._error(
            f"the model command {how}",
            "command_failed",
            f"stderr: {tail}" if tail else "stderr was empty",
            retryable=True,
        )

    def _error(
        self, message: str, code: str, detail: str, *, retryable: bool = False
    ) -> ModelError:
        """The error for the caller, with a fixed message; the detail goes to the log."""
        log.warning(
            "model_failure",
            extra={"model": self.label, "code": code, "detail": detail, "program": self.argv[0]},
        )
        return ModelError(message, code=code, retryable=retryable)


def _relay_message(message: WireMessage) -> dict[str, Any]:
    """A message as the relay gets it: as it is, but with string content, which is what
    relays written for the text-only protocol expect."""
    relayed = dict(message)
    if not isinstance(relayed.get("content", ""), str):
        relayed["content"] = text_of(relayed["content"])
    return relayed


async def _feed(proc: asyncio.subprocess.Process, payload: bytes) -> None:
    """Write the request concurrently with reading, so a relay that answers before reading
    all of a large request cannot deadlock against us."""
    assert proc.stdin is not None
    # A relay may exit without reading its input; that is its business, not an error.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(payload)
        await proc.stdin.drain()
        proc.stdin.close()
        await proc.stdin.wait_closed()


async def _tail(stream: asyncio.StreamReader | None) -> str:
    """Drain stderr (a full pipe would block the relay), keeping only its end."""
    assert stream is not None
    kept = bytearray()
    while chunk := await stream.read(_READ_SIZE):
        kept += chunk
        del kept[:-_STDERR_KEEP]
    return kept.decode("utf-8", errors="replace")


async def _reap(proc: asyncio.subprocess.Process, *helpers: asyncio.Task[Any]) -> None:
    """Kill the process group if the relay is still running, and wait for it, so an
    abandoned or timed-out turn leaves neither a running relay nor a zombie."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
    for task in helpers:
        task.cancel()
    for task in helpers:
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await task
