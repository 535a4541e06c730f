"""Asking a control model for one small JSON answer (hand-off classification, task
extraction): JSON output where the model offers it, and the text read only as far as an
answer could reach."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from sessiongate.models.base import (
    NO_OPTIONS,
    ModelOptions,
    ReplyModel,
    TextDelta,
    WireMessage,
    capabilities_of,
)

JSON_ANSWER = ModelOptions(response_format={"type": "json_object"})


def answer_options(model: ReplyModel) -> ModelOptions:
    """`json_object` output for a model that offers it, plain text for one that does not."""
    return JSON_ANSWER if capabilities_of(model).json_output else NO_OPTIONS


async def read_answer(
    model: ReplyModel,
    messages: Sequence[WireMessage],
    options: ModelOptions,
    limit: int,
    parts: list[str] | None = None,
) -> str:
    """The model's text, read until it ends or grows past `limit` characters (too long to
    be the answer asked for: the upstream request is closed then, not paid to the end).
    With `parts`, each piece goes there as it comes, so a caller whose time ran out still
    has what arrived (bench/handoff_stage2.py)."""
    pieces = [] if parts is None else parts
    size = 0
    stream = model.stream(messages, options)
    try:
        async for chunk in stream:
            if isinstance(chunk, TextDelta):
                pieces.append(chunk.text)
                size += len(chunk.text)
                if size > limit:
                    break
    finally:
        if isinstance(stream, AsyncGenerator):
            await stream.aclose()
    return "".join(pieces)
