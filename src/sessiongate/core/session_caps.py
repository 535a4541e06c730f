"""Per-user resource caps on session keys and segments (`[limits] max_keys_per_user`,
`max_segments_per_key`): the refusals and the pure rules behind them.

The stores count and refuse inside the transaction that would create the key or the
segment (store/caps.py), so a refused turn, rotation or import writes nothing; the one
rule that needs no store, an import file holding too many segments, is checked here
before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessiongate.errors import Conflict


@dataclass(frozen=True, slots=True)
class SessionCaps:
    """None: no cap (the stores' own tests, tools that restore whatever they are given)."""

    max_keys_per_user: int | None = None
    max_segments_per_key: int | None = None


class KeyLimitReached(Conflict):
    """The owner already has `max_keys_per_user` keys: one more is not created."""

    code = "key_limit_reached"

    def __init__(self, max_keys: int) -> None:
        super().__init__(
            f"you have {max_keys} session keys, the most one user may keep here"
            f" ([limits] max_keys_per_user = {max_keys}); erase a key you no longer need"
            " (DELETE /v1/sessions/{key}) or continue on an existing one; nothing was stored"
        )
        self.max_keys = max_keys


class SegmentLimitReached(Conflict):
    """The key already holds `max_segments_per_key` segments: no rotation adds one more."""

    code = "segment_limit_reached"

    def __init__(self, key: str, max_segments: int, *, importing: int | None = None) -> None:
        limit = f"([limits] max_segments_per_key = {max_segments}); nothing was stored"
        if importing is None:
            super().__init__(
                f"session key {key!r} has {max_segments} segments, the most one key may hold"
                f" {limit}. Export and erase the key, or continue on another key"
            )
        else:
            super().__init__(
                f"the file holds {importing} segments, more than one key may hold {limit}"
            )
        self.max_segments = max_segments


def at_cap(count: int, cap: int | None) -> bool:
    """Whether one more would pass the cap (`count` is what exists now)."""
    return cap is not None and count >= cap


def check_import_segments(key: str, segment_count: int, caps: SessionCaps) -> None:
    """An import brings its whole chain at once: more segments than a key may hold is
    refused before anything is written (the key cap is the store's to check)."""
    cap = caps.max_segments_per_key
    if cap is not None and segment_count > cap:
        raise SegmentLimitReached(key, cap, importing=segment_count)
