"""Which sentences of a spoken reply go out together as one `audio_part` (issue 10).

A reply of several sentences is announced part by part while the rest is still being
synthesised, so a player can start on the first part early. Part 0 is the first sentence
alone: it is the time to first audio. After it, sentences are grouped until a part holds
at least `MIN_PART_MS` of sound (a player gains nothing from a stream of fragments, and
each part costs an artifact and an event), and never into more than `MAX_PARTS` parts: a
very long reply puts more sentences in each part instead. Whatever is left when the reply
ends is the last part, however short. A reply of one sentence has no parts at all: its
final `audio` is already the first audio.

Pure: audio in, parts out, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessiongate.speech.wav import PcmAudio, concat

#: A part (after the first) closes once it holds this much sound.
MIN_PART_MS = 1000
#: At most this many parts per reply, the first included.
MAX_PARTS = 64


@dataclass(frozen=True, slots=True)
class ReadyPart:
    #: 0-based, in playing order.
    index: int
    audio: PcmAudio


class PartGrouper:
    """Fed each sentence's audio in order (`add`), answers the parts to send as they
    close; `finish` answers the last one. Sentences after the first arrive already led by
    the engine's pause, so the parts played back to back are exactly the whole reply."""

    def __init__(
        self, sentence_count: int, *, min_part_ms: int = MIN_PART_MS, max_parts: int = MAX_PARTS
    ) -> None:
        if max_parts < 2:
            raise ValueError("max_parts must leave room for the first part and the rest")
        self.enabled = sentence_count > 1
        self.min_part_ms = min_part_ms
        self.max_parts = max_parts
        # Each part after the first takes at least this many sentences, so however many
        # there are, the closed parts plus a shorter remainder stay within max_parts.
        rest = max(sentence_count - 1, 0)
        self.min_sentences = max(1, -(-rest // (max_parts - 1)))
        self.sent = 0
        self._pending: list[PcmAudio] = []

    def add(self, audio: PcmAudio) -> ReadyPart | None:
        """The part that this sentence closes, if it closes one."""
        if not self.enabled:
            return None
        self._pending.append(audio)
        if self.sent == 0:
            return self._close()
        if self.sent >= self.max_parts - 1:
            return None  # the last part allowed: everything left goes into it
        if len(self._pending) < self.min_sentences:
            return None
        if sum(piece.duration_ms for piece in self._pending) < self.min_part_ms:
            return None
        return self._close()

    def finish(self) -> ReadyPart | None:
        """The last part: whatever was added since the last one closed."""
        if not self.enabled or not self._pending:
            return None
        return self._close()

    def _close(self) -> ReadyPart:
        part = ReadyPart(self.sent, concat(self._pending))
        self._pending = []
        self.sent += 1
        return part
