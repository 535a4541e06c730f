"""A control-model judge backed by any reply model: asks it for a JSON verdict."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from sessiongate.errors import ModelError
from sessiongate.models.base import ReplyModel, TextDelta

_PROMPT = (
    "You decide whether a chat message starts a new, unrelated topic. Answer with JSON "
    'only: {"new_topic_confidence": <number from 0 to 1>}.'
)
_JSON_RE = re.compile(r"\{.*?\}", re.DOTALL)


class ModelTopicJudge:
    """Wraps a `ReplyModel` as a `TopicJudge`. A reply it cannot parse is a ModelError,
    so the caller falls through to the next link of the control chain."""

    def __init__(self, model: ReplyModel, recent_limit: int = 6) -> None:
        self.name = model.name
        self._model = model
        self._recent_limit = recent_limit

    async def judge_topic_shift(self, recent: Sequence[str], inbound: str) -> float:
        transcript = "\n".join(f"- {t[:500]}" for t in recent[-self._recent_limit :])
        messages = [
            {"role": "system", "content": _PROMPT},
            {
                "role": "user",
                "content": f"Recent conversation:\n{transcript}\n\nNew message:\n{inbound[:2000]}",
            },
        ]
        parts: list[str] = []
        async for chunk in self._model.stream(messages):
            if isinstance(chunk, TextDelta):
                parts.append(chunk.text)
        return parse_confidence("".join(parts), self.name)


def parse_confidence(text: str, model_name: str) -> float:
    match = _JSON_RE.search(text)
    try:
        value = json.loads(match.group(0))["new_topic_confidence"] if match else None
    except (ValueError, KeyError, TypeError):
        value = None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ModelError(
            f"control model {model_name} gave no usable confidence", code="control_model_error"
        )
    return float(value)
