"""One model call of a turn, with its fallback chain: stream it, pass its text to the
client, collect its tool calls.

The rule for switching models: a model that fails before anything reached the client is
replaced by the next one of the chain; once text (or a tool call) came, the turn never
switches model silently, and `StepCut` carries what came so the caller keeps it.

A reply says which model wrote it; one by the offline stand-in is marked `offline` (kept,
never a model's input again: core/context.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiongate.core.context import OFFLINE
from sessiongate.core.events import ReasoningEvent, TokenEvent
from sessiongate.errors import ModelError
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelOptions,
    ReasoningDelta,
    ReplyModel,
    StopReason,
    TextDelta,
    ToolCallChunk,
    Usage,
)
from sessiongate.models.offline import OfflineModel
from sessiongate.service.turn.handle import TurnHandle


class ReplyText:
    """The reply as it streams, cut at `limit` characters."""

    __slots__ = ("first", "full", "limit", "parts", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.first = False
        self.full = False

    def take(self, text: str) -> str:
        """The part of `text` that fits; sets `first` for the first non-empty piece and
        `full` once the limit is reached."""
        if not text or self.full:
            self.first = False
            return ""
        room = self.limit - self.size
        if len(text) >= room:
            text = text[:room]
            self.full = True
        self.first = not self.parts
        self.parts.append(text)
        self.size += len(text)
        return text

    def text(self) -> str:
        return "".join(self.parts)


class Reasoning:
    """The model's reasoning as it streams: blocks of text, each closed by a signature
    when the upstream signs them (Anthropic), kept with the reply (metadata `reasoning`)."""

    __slots__ = ("blocks",)

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []

    def add(self, delta: ReasoningDelta) -> None:
        if not self.blocks or self.blocks[-1]["signature"] is not None:
            self.blocks.append({"text": "", "signature": None})
        block = self.blocks[-1]
        block["text"] += delta.text
        if delta.signature is not None:
            block["signature"] = delta.signature

    def kept(self) -> list[dict[str, Any]]:
        """The blocks as metadata keeps them (no signature key when there is none)."""
        return [
            {"text": b["text"], **({"signature": b["signature"]} if b["signature"] else {})}
            for b in self.blocks
        ]


@dataclass(slots=True)
class StepResult:
    model: str
    reply: ReplyText
    usage: Usage
    calls: list[ToolCallChunk] = field(default_factory=list)
    #: The models of the chain that failed before `model` answered (a fallback).
    failed: tuple[str, ...] = ()
    #: The offline stand-in answered (models/offline.py), not a model.
    offline: bool = False
    #: What the model reasoned before answering (its blocks as metadata keeps them).
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    #: Why the model stopped when a client must hear it (`length`), else None.
    stop: str | None = None

    @property
    def text(self) -> str:
        return self.reply.text()

    def model_marks(self) -> dict[str, Any]:
        """What a kept reply's metadata says about who wrote it: a fallback model
        (`fallback`, `failed_models`), the offline stand-in (`offline`)."""
        marks: dict[str, Any] = {}
        if self.failed:
            marks.update(fallback=True, failed_models=list(self.failed))
        if self.offline:
            marks[OFFLINE] = True
        if self.reasoning:
            marks["reasoning"] = self.reasoning
        if self.stop is not None:
            marks["stop_reason"] = self.stop
        return marks


class StepCut(Exception):
    """The model failed (or the step was cancelled) after output reached the client."""

    def __init__(
        self,
        model: str,
        reply: ReplyText,
        cause: str,
        error: ModelError | None,
        *,
        offline: bool = False,
    ):
        super().__init__(cause)
        self.model = model
        self.reply = reply
        self.cause = cause
        self.error = error
        #: The offline stand-in was answering.
        self.offline = offline

    def kept_metadata(self, turn_id: str) -> dict[str, Any]:
        """What the text kept as `interrupted` records."""
        metadata: dict[str, Any] = {"turn_id": turn_id, "model": self.model}
        metadata["interrupted_by"] = self.cause
        if self.offline:
            metadata[OFFLINE] = True
        return metadata


async def stream_step(
    models: Mapping[str, ReplyModel],
    names: Sequence[str],
    wire: list[dict[str, Any]],
    handle: TurnHandle,
    *,
    max_reply_chars: int,
    options: ModelOptions = NO_OPTIONS,
    emit_tokens: bool = True,
) -> StepResult:
    """Stream one call through the first model of `names` that answers.

    Raises the last ModelError when every model failed before any output, and StepCut
    when output came and then the model failed or the step was cancelled (the
    CancelledError is chained as the StepCut's cause and must be re-raised by the caller
    once it kept the partial reply)."""
    last_error: ModelError | None = None
    failed: list[str] = []
    for name in dict.fromkeys(names):
        model = models.get(name)
        if model is None:
            last_error = ModelError(f"model {name!r} is not configured", code="model_missing")
            failed.append(name)
            continue
        offline = isinstance(model, OfflineModel)
        if failed and isinstance(model, OfflineModel):
            model = model.standing_in()  # "the model is unavailable", not "none configured"
        reply = ReplyText(max_reply_chars)
        usage = Usage()
        calls: list[ToolCallChunk] = []
        reasoning = Reasoning()
        stop: str | None = None
        handle.model = name
        handle.offline = offline
        asked = time.perf_counter()
        stream = model.stream(wire, options) if options is not NO_OPTIONS else model.stream(wire)
        try:
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    text = reply.take(chunk.text)
                    if text and emit_tokens:
                        first = reply.first
                        if first and handle.first_token_seconds is None:
                            handle.first_token_seconds = time.perf_counter() - asked
                        handle.emit(TokenEvent(text))
                        if first:
                            # Let the transport send the first token now, even when the
                            # rest of the reply is already buffered.
                            await asyncio.sleep(0)
                    if reply.full:
                        break
                elif isinstance(chunk, ToolCallChunk):
                    calls.append(chunk)
                elif isinstance(chunk, ReasoningDelta):
                    reasoning.add(chunk)
                    if emit_tokens and handle.reasoning_events:
                        handle.emit(ReasoningEvent(chunk.text, chunk.signature))
                elif isinstance(chunk, StopReason):
                    stop = chunk.reason
                else:
                    usage = chunk
            if isinstance(stream, AsyncGenerator):
                # Close the upstream stream now (a cut reply stops the model), not
                # whenever the generator is collected.
                await stream.aclose()
        except ModelError as exc:
            last_error = exc
            if reply.parts or calls:
                raise StepCut(name, reply, exc.code, exc, offline=offline) from exc
            failed.append(name)
            continue
        except asyncio.CancelledError as exc:
            if reply.parts:
                raise StepCut(name, reply, "cancelled", None, offline=offline) from exc
            raise
        return StepResult(name, reply, usage, calls, tuple(failed), offline, reasoning.kept(), stop)
    assert last_error is not None
    raise last_error
