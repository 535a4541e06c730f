"""Token budgets per model: how much of a model's window a turn's context may fill. Pure.

The window of a model is, in order: `[models.<name>] context_window`; else the table of
known model names below (by the longest matching prefix of the upstream name); else
`DEFAULT_CONTEXT_WINDOW`. The reply keeps `reserve_tokens` (default
`min(4096, window // 4)`); the **budget** is what remains.

Tokens are estimated (core/context.py's `estimate_tokens`: about four characters per
token) and corrected per model by the ratio of the provider's reported `prompt_tokens`
to the estimate, a moving average bounded to 0.5 to 2 (`corrected_ratio`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The window assumed for a model nobody configured and the table does not know.
DEFAULT_CONTEXT_WINDOW = 8192
#: The most a default reserve for the reply takes.
MAX_DEFAULT_RESERVE = 4096
#: The correction ratio's bounds and the weight of the newest observation.
MIN_RATIO = 0.5
MAX_RATIO = 2.0
RATIO_WEIGHT = 0.3

#: Windows (tokens) of model families whose published window is certain, by the prefix of
#: the normalised name (`normalise_model_name`). The longest prefix wins, so
#: `llama3.1` beats `llama3` and `gpt-4o` beats `gpt-4`.
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "llama3": 8_192,
    "llama-3-": 8_192,
    "llama3.1": 131_072,
    "llama-3.1": 131_072,
    "llama3.2": 131_072,
    "llama-3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.3": 131_072,
    "llama2": 4_096,
    "llama-2": 4_096,
    "gemma2": 8_192,
    "gemma-2": 8_192,
}


def normalise_model_name(name: str) -> str:
    """Lower case, without a provider or organisation prefix (`openai/`,
    `meta-llama/`) and without a leading `meta-` (`meta-llama-3.1-8b` is `llama-3.1-8b`)."""
    base = name.strip().lower().rsplit("/", 1)[-1]
    return base.removeprefix("meta-")


def known_window(name: str | None) -> int | None:
    """The window of a known model family, or None."""
    if not name:
        return None
    base = normalise_model_name(name)
    best: tuple[int, int] | None = None
    for prefix, window in KNOWN_WINDOWS.items():
        if base.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), window)
    return None if best is None else best[1]


@dataclass(frozen=True, slots=True)
class Budget:
    """A model's window, the part kept for the reply, and where each came from
    (`configured`, `known`, `default`)."""

    window: int
    reserve: int
    source: str

    @property
    def tokens(self) -> int:
        """What a context may hold."""
        return self.window - self.reserve


def default_reserve(window: int) -> int:
    return min(MAX_DEFAULT_RESERVE, window // 4)


def resolve_budget(
    *,
    configured_window: int | None,
    upstream_name: str | None,
    reserve_tokens: int | None = None,
) -> Budget:
    """The budget of one model: configured, else known, else the default window; the
    reserve as configured (at most half the window), else `default_reserve`."""
    if configured_window is not None:
        window, source = configured_window, "configured"
    elif (found := known_window(upstream_name)) is not None:
        window, source = found, "known"
    else:
        window, source = DEFAULT_CONTEXT_WINDOW, "default"
    reserve = default_reserve(window) if reserve_tokens is None else reserve_tokens
    return Budget(window=window, reserve=min(reserve, window // 2), source=source)


def corrected_ratio(previous: float, *, estimated: int, reported: int) -> float:
    """The per-model correction after one turn: a moving average of
    `reported / estimated`, bounded to 0.5 to 2. A turn with nothing to compare keeps it."""
    if estimated <= 0 or reported <= 0:
        return previous
    observed = min(max(reported / estimated, MIN_RATIO), MAX_RATIO)
    ratio = previous * (1 - RATIO_WEIGHT) + observed * RATIO_WEIGHT
    return min(max(ratio, MIN_RATIO), MAX_RATIO)


def corrected(estimate: int, ratio: float) -> int:
    """An estimate scaled by a correction ratio, rounded up."""
    return math.ceil(estimate * ratio)


#: How providers say a request passed the model's window (lower case): OpenAI and vLLM
#: ("This model's maximum context length is …", code `context_length_exceeded`),
#: llama.cpp's server ("the request exceeds the available context size",
#: `exceed_context_size_error`), Anthropic ("prompt is too long").
OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "exceeds the available context size",
    "exceed_context_size",
    "prompt is too long",
)


def is_context_overflow(text: str) -> bool:
    """Whether a provider's error text says the request passed the model's window."""
    lowered = text.lower()
    return any(phrase in lowered for phrase in OVERFLOW_PHRASES)
