"""The reply-model port: a model streams text deltas and, at the end, its usage."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


ModelChunk = TextDelta | Usage
WireMessage = Mapping[str, str]


class ReplyModel(Protocol):
    """A named model that writes the assistant's answer.

    `stream` raises `sessiongate.errors.ModelError` on failure; `retryable=True` tells the
    caller that trying again (or trying the next fallback) is reasonable.
    """

    name: str

    def stream(self, messages: Sequence[WireMessage]) -> AsyncIterator[ModelChunk]: ...
