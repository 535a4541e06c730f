"""Stage 1 of the hand-off by structure, run where it can match: an intent's word
(`handoff_lexicon.WORDS`) is found first, and its frames (`FRAMES_BEFORE`,
`FRAMES_AFTER`) are looked for only around each word.

Searching the whole reply with every frame pattern would cost a long reply milliseconds
(each pattern tries its alternations at every position); a reply holds few of an
intent's words, and a frame can only begin a bounded distance before its word, in the
sentence it is in or just after the end of the one before. The result is what the plain
patterns (`handoff_lexicon.STRUCTURAL_PATTERNS`) find: tests/test_handoff.py checks it
on every corpus reply.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cached_property

from sessiongate.core.handoff.intents import INTENTS, Intent
from sessiongate.core.handoff.lexicon import (
    FRAMES_AFTER,
    FRAMES_BEFORE,
    REACH_AFTER,
    REACH_BEFORE,
    WORD_CUES,
    WORDS,
    any_of,
)

#: `handoff_guards.guarded`: whether `text[start:end]` is framed as no promise.
Guard = Callable[[str, int, int], bool]

#: A frame before its word may end the sentence before it ("On it! A sketch …"), with
#: its punctuation: it begins at most this far before the word's own sentence.
_SENTENCE_SLACK = 48


class Structure:
    """One intent's word and frames. With `cues`, a reply holding none of them is
    skipped at once (every word holds one). The patterns are compiled when first used:
    compiling all of them costs most of a second, which a command that never runs a
    hand-off (`sessiongate --help`) should not pay."""

    def __init__(self, word: str, cues: Sequence[str] | None = None) -> None:
        self._word_source = word
        self._cue_source = tuple(cues) if cues else None

    @cached_property
    def _word(self) -> re.Pattern[str]:
        return re.compile(self._word_source)

    @cached_property
    def _word_starts(self) -> re.Pattern[str]:
        # Every place a word begins, overlapping ones too: "checking the internet for
        # the latest" is a word, and so is its "internet".
        return re.compile(f"(?={self._word_source})")

    @cached_property
    def _before(self) -> re.Pattern[str]:
        # The frames as one alternation each side: one pass over a window, not five.
        return re.compile("(?:" + "|".join(FRAMES_BEFORE) + ")" + self._word_source)

    @cached_property
    def _after(self) -> re.Pattern[str]:
        return re.compile(self._word_source + "(?:" + "|".join(FRAMES_AFTER) + ")")

    @cached_property
    def _cues(self) -> re.Pattern[str] | None:
        # One search for the cues: several times faster than `in` for each of 70.
        if not self._cue_source:
            return None
        return re.compile(any_of(tuple(map(re.escape, self._cue_source))))

    def found(self, text: str, guard: Guard | None = None) -> bool:
        """Whether a frame and a word make a promise in `text` (lowered) that `guard`
        does not take back."""
        if self._cues is not None and self._cues.search(text) is None:
            return False
        hits = []
        for place in self._word_starts.finditer(text):
            word = self._word.match(text, place.start())
            if word is not None:
                hits.append(word.span())
        if not hits:
            return False
        # Word first, as a search of the plain pattern would go: a guarded match is
        # passed over whole, the next word after it tried.
        resume = 0
        for start, _ in hits:
            if start < resume:
                continue
            found = self._after.match(text, start)
            if found is not None:
                if guard is None or not guard(text, start, found.end()):
                    return True
                resume = max(found.end(), start + 1)
        ends = {end for _, end in hits}
        for begin, end in _windows(text, hits):
            found = self._before.search(text, begin, end)
            while found is not None:
                # A match cut short by the window's end is not one: it must end where a
                # word of the whole reply ends.
                if found.end() in ends and (guard is None or not guard(text, *found.span())):
                    return True
                found = self._before.search(text, found.start() + 1, end)
        return False


def _windows(text: str, hits: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where the frames before the words can be: from shortly before each word's
    sentence (or `REACH_BEFORE` before the word, whichever is nearer) to just after the
    word, overlapping ones merged."""
    windows: list[tuple[int, int]] = []
    for start, end in hits:
        sentence = 1 + max(
            text.rfind(".", 0, start),
            text.rfind("!", 0, start),
            text.rfind("?", 0, start),
            text.rfind("\n", 0, start),
        )
        begin = max(0, sentence - _SENTENCE_SLACK, start - REACH_BEFORE)
        stop = min(len(text), end + REACH_AFTER)
        if windows and begin <= windows[-1][1]:
            windows[-1] = (min(begin, windows[-1][0]), max(stop, windows[-1][1]))
        else:
            windows.append((begin, stop))
    return windows


#: The built-in structures, behind their cue gate.
STRUCTURES: dict[Intent, Structure] = {
    intent: Structure(WORDS[intent], WORD_CUES[intent]) for intent in INTENTS
}
