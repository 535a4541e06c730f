"""Stage 1's learned backstop: a small classifier that reads a reply the patterns found
nothing in and says whether it still promised an image, a video or a search.

The patterns (`patterns.py`) know the words and frames someone listed; replies
written by someone who never saw them use others ("whipping up a mood board", "⏳
Generating…"). The backstop is a multinomial logistic regression over four classes
(`LABELS`: none and the intents) on the n-grams of the lowered reply — its words, word
pairs and character 4-grams — trained by `bench/handoff_train.py` on
tests/data/handoff_*.jsonl and shipped as `learned.json` beside this module (the
kept n-grams, their weights, the bias, the threshold chosen by cross-validation, and the
feature spec it was trained with). Pure: the weights are read once, on first use.

A reply longer than the replies it learned from (`CHUNK_CHARS`) is read in windows of
whole sentences, each scored on its own: one promise at the end of a long answer would
otherwise be diluted by everything before it. Only its first and last windows are read
(where a reply says what it is about to do; stage 2 reads the same head and tail), so a
long reply costs about two short ones.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sessiongate.core.handoff.intents import INTENTS, Intent

#: The version of `grams` below; a weights file trained with another one is refused.
FEATURES = "words-1-2+chars-4+l2/v1"
LABELS: tuple[str, ...] = ("none", *INTENTS)
WEIGHTS_FILE = Path(__file__).with_name("learned.json")
#: The longest piece of a reply scored at once: about the longest reply trained on.
CHUNK_CHARS = 360
CHAR_SIZES = (4,)

# Words and the symbols between them ("⏳", "…") are tokens; the prefixes keep a word
# apart from a character n-gram that happens to spell it.
_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = "\x01"
_PAIR = "\x02"
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

Weights = npt.NDArray[np.float32]


def grams(lowered: str) -> set[str]:
    """The features of a lowered reply: its words, adjacent word pairs and character
    4-grams (whitespace collapsed, a space at either end)."""
    text = " " + " ".join(lowered.translate(_QUOTES).split()) + " "
    words = _TOKEN.findall(text)
    found = {_WORD + word for word in words}
    found.update([_PAIR + first + " " + second for first, second in pairwise(words)])
    for size in CHAR_SIZES:
        found.update([text[i : i + size] for i in range(len(text) - size + 1)])
    return found


def chunks(lowered: str, limit: int = CHUNK_CHARS) -> list[str]:
    """The reply as pieces of at most about `limit` characters, cut between sentences
    (a sentence longer than `limit` is a piece of its own)."""
    if len(lowered) <= limit:
        return [lowered]
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(lowered):
        if current and len(current) + 1 + len(sentence) > limit:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        pieces.append(current)
    return pieces


def softmax(scores: Sequence[float]) -> tuple[float, ...]:
    # Four numbers: plain floats are several times faster than numpy's calls.
    top = max(scores)
    shifted = [math.exp(score - top) for score in scores]
    total = sum(shifted)
    return tuple(value / total for value in shifted)


@dataclass(frozen=True, slots=True)
class LearnedModel:
    """The trained classifier: `weights[index[gram]]` is a gram's row (one column per
    label); a reply's features are its grams, each `1 / sqrt(len(grams))`."""

    version: str
    threshold: float
    index: dict[str, int]
    weights: Weights
    bias: Weights

    def probabilities(self, lowered: str) -> tuple[float, ...]:
        """P(label) for each of `LABELS`, of the piece of the reply that promises most."""
        best: tuple[float, ...] = ()
        pieces = chunks(lowered)
        for piece in pieces if len(pieces) <= 2 else (pieces[0], pieces[-1]):
            found = self._probabilities(piece)
            if not best or max(found[1:]) > max(best[1:]):
                best = found
        return best

    def _probabilities(self, lowered: str) -> tuple[float, ...]:
        found = grams(lowered)
        get = self.index.get
        rows = [row for row in map(get, found) if row is not None]
        if not rows:
            return softmax(self.bias.tolist())
        sums = self.weights[rows].sum(axis=0).tolist()
        scale = 1.0 / math.sqrt(len(found))
        return softmax([b + w * scale for b, w in zip(self.bias.tolist(), sums, strict=True)])

    def intent(self, lowered: str, intents: Iterable[Intent]) -> Intent | None:
        """The most probable of `intents` when its probability reaches the threshold."""
        allowed = tuple(intents)
        if not allowed or not lowered.strip():
            return None
        probabilities = self.probabilities(lowered)
        best = max(allowed, key=lambda intent: probabilities[LABELS.index(intent)])
        return best if probabilities[LABELS.index(best)] >= self.threshold else None


def encode(matrix: npt.NDArray[Any]) -> str:
    """A float32 matrix as base64 (little-endian), how the weights file stores it."""
    return base64.b64encode(np.ascontiguousarray(matrix, dtype="<f4").tobytes()).decode()


def decode(text: str, shape: Sequence[int]) -> Weights:
    flat = np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)
    return flat.reshape(tuple(shape))


def from_document(document: dict[str, Any]) -> LearnedModel:
    """The model a weights file describes; `ValueError` when it was trained with other
    features or labels, or its arrays do not fit."""
    if document.get("features") != FEATURES or tuple(document.get("labels", ())) != LABELS:
        raise ValueError(
            f"the weights were trained with features {document.get('features')!r} and labels"
            f" {document.get('labels')!r}; this code reads {FEATURES!r} and {LABELS!r}"
        )
    kept: list[str] = list(document["grams"])
    weights = decode(document["weights"], (len(kept), len(LABELS)))
    bias = decode(document["bias"], (len(LABELS),))
    threshold = float(document["threshold"])
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold {threshold} is not in (0, 1]")
    index = {gram: row for row, gram in enumerate(kept)}
    return LearnedModel(str(document["version"]), threshold, index, weights, bias)


@cache
def shipped() -> LearnedModel:
    """The model shipped with the package, read once."""
    return from_document(json.loads(WEIGHTS_FILE.read_text(encoding="utf-8")))
