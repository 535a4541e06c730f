"""The `offline` provider: what answers when no model is configured.

Deterministic and honest: it says plainly that no model is configured and echoes what it
was asked, so a fresh install works end to end without pretending to be an assistant.
Its answers are kept marked `offline` and no model ever reads them (core/context.py); its
usage is an estimate (`estimated`).
Standing in for configured models that failed (a fallback chain ending in `offline`), it
says instead that the model is unavailable (`standing_in`, used by service/turn/model_steps.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import ClassVar

from sessiongate.core.context import STAND_IN_SIGNATURE, estimate_tokens
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


class OfflineModel:
    #: No tools, images or JSON mode: it only echoes text back.
    capabilities: ClassVar[ModelCapabilities] = TEXT_ONLY

    def __init__(self, name: str = "offline", *, fallback: bool = False) -> None:
        self.name = name
        #: Answering because the configured models failed, not because there are none.
        self.fallback = fallback

    def standing_in(self) -> OfflineModel:
        """This model as the last of a fallback chain whose earlier models failed."""
        return OfflineModel(self.name, fallback=True)

    def reply_for(self, messages: Sequence[WireMessage]) -> str:
        last_user = next(
            (text_of(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"),
            "",
        )
        history = sum(1 for m in messages if m.get("role") in ("user", "assistant"))
        quoted = last_user if len(last_user) <= 200 else last_user[:197] + "..."
        if self.fallback:
            return (
                f"The model is unavailable right now, so {STAND_IN_SIGNATURE}."
                f" I received: \u201c{quoted}\u201d ({history} message(s) in context)."
                " Please try again later."
            )
        return (
            f"No model is configured, so {STAND_IN_SIGNATURE}. "
            f"I received: \u201c{quoted}\u201d ({history} message(s) in context). "
            "Configure a model under [models] in the config file to get real replies."
        )

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        # `options` is ignored: a text-only model is never offered tools (base.ReplyModel).
        text = self.reply_for(messages)
        for word in text.split(" "):
            yield TextDelta(word + " ")
        prompt = sum(estimate_tokens(text_of(m.get("content", ""))) for m in messages)
        yield Usage(prompt_tokens=prompt, completion_tokens=estimate_tokens(text), estimated=True)
