"""The safety gate's verdict: the three labels, their markers and a classification.

Shared by the gate's protocol (`core/safety/gate.py`, which re-exports them) and the keyword
rules (`core/safety/rules.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

KEYWORD_JUDGE = "builtin:keywords"


class Label(StrEnum):
    UNSAFE = "unsafe"
    CHAT = "chat"
    AGENT = "agent"


MARKERS: dict[Label, str] = {
    Label.UNSAFE: "---UNSAFE---",
    Label.CHAT: "---CHAT---",
    Label.AGENT: "---AGENT---",
}


@dataclass(frozen=True, slots=True)
class Classification:
    """One verdict of the gate: the label, how sure the judge was and which judge it was
    (a configured control model's name, or `KEYWORD_JUDGE`)."""

    label: Label
    confidence: float
    deciding_model: str

    @property
    def marker(self) -> str:
        return MARKERS[self.label]

    def to_event_fields(self) -> dict[str, object]:
        """The fields of the `classification` event (DESIGN.md §8)."""
        return {
            "label": self.label.value,
            "marker": self.marker,
            "confidence": self.confidence,
            "deciding_model": self.deciding_model,
        }
