"""Seed 004's safety gate: classify a request before the reply model sees it.

The agent's classifier model answers with exactly one marker (`---UNSAFE---`,
`---CHAT---`, `---AGENT---`), parsed strictly. When no model is set, or it fails, times
out or answers anything else, the deterministic keyword rules decide — and the verdict
says which (`deciding_model`, and `fallback` with the reason).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass

from sessiongate.config.routing import ClassifierConfig
from sessiongate.core.safety.gate import (
    Classification,
    Label,
    classifier_messages,
    keyword_classify,
    parse_marker,
)
from sessiongate.core.segments import Message
from sessiongate.errors import ModelError, SessionGateError
from sessiongate.models.base import ReplyModel, TextDelta

log = logging.getLogger(__name__)

#: Who decided when `on_failure = "refuse"` refused a turn the model did not classify.
REFUSING_JUDGE = "builtin:refuse"
#: A marker is a few tokens; anything much longer is not an answer we can parse.
MAX_CLASSIFIER_REPLY_CHARS = 200


class UnsafeRequest(SessionGateError):
    """UNSAFE: the reply model is never called and no assistant message is kept."""

    code = "unsafe_request"
    status = 400


def leave_out_unsafe(thread: list[Message]) -> list[Message]:
    """The thread without the user messages the gate classified UNSAFE."""
    return [m for m in thread if not _is_unsafe(m)]


def _is_unsafe(message: Message) -> bool:
    verdict = message.metadata.get("classification") if message.metadata else None
    return isinstance(verdict, dict) and verdict.get("label") == Label.UNSAFE.value


@dataclass(frozen=True, slots=True)
class Verdict:
    classification: Classification
    #: Why the rules decided although a model is configured (None: the model decided,
    #: or no model is configured).
    fallback: str | None = None

    @property
    def unsafe(self) -> bool:
        return self.classification.label is Label.UNSAFE

    def metadata(self) -> dict[str, object]:
        data: dict[str, object] = {
            "label": self.classification.label.value,
            "deciding_model": self.classification.deciding_model,
            "confidence": self.classification.confidence,
        }
        if self.fallback is not None:
            data["fallback"] = self.fallback
        return data


class SafetyGate:
    def __init__(self, models: Mapping[str, ReplyModel]) -> None:
        self.models = models

    async def classify(self, config: ClassifierConfig, text: str) -> Verdict:
        fallback = None
        if config.model is not None:
            try:
                async with asyncio.timeout(config.timeout.total_seconds()):
                    answer = await self._ask(config.model, text)
            except TimeoutError:
                fallback = "model_timeout"
            except ModelError as exc:
                fallback = f"model_failed:{exc.code}"
            else:
                label = parse_marker(answer)
                if label is not None:
                    return Verdict(Classification(label, 1.0, config.model))
                fallback = "model_unparseable"
            if config.on_failure == "refuse":
                log.warning("classifier %s did not decide (%s); refused", config.model, fallback)
                return Verdict(Classification(Label.UNSAFE, 1.0, REFUSING_JUDGE), fallback)
            log.warning(
                "classifier %s did not decide (%s); the keyword rules decide",
                config.model,
                fallback,
            )
        decided = keyword_classify(
            text, unsafe_terms=config.unsafe_terms, agent_terms=config.agent_terms
        )
        return Verdict(decided, fallback)

    async def _ask(self, name: str, text: str) -> str:
        model = self.models.get(name)
        if model is None:
            raise ModelError(f"model {name!r} is not configured", code="model_missing")
        parts: list[str] = []
        size = 0
        stream = model.stream(classifier_messages(text))
        try:
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    parts.append(chunk.text)
                    size += len(chunk.text)
                    if size > MAX_CLASSIFIER_REPLY_CHARS:
                        break  # already too long to be one marker: stop paying for tokens
        finally:
            if isinstance(stream, AsyncGenerator):
                await stream.aclose()  # close the upstream request now
        return "".join(parts)
