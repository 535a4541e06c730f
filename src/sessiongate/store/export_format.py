"""Rendering a chain as JSON Lines, the format store/exchange.py reads back.

Line 1 is the key header; then each segment (oldest first) followed by its messages; then
the rotation log; then the working set's compaction records and pins. One renderer per
line type, so an export can be streamed page by page (service/session_exchange.py) as
well as built from a whole `ChainRecords`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from sessiongate.core.segments import Message, RotationRecord, Segment, SessionKeyRecord
from sessiongate.core.working_set import CompactionRecord
from sessiongate.store.exchange import FORMAT_NAME, FORMAT_VERSION, ChainRecords, PinRecord


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def export_lines(records: ChainRecords) -> Iterator[str]:
    """Render a chain as JSON Lines (each without its trailing newline)."""
    yield key_line(records.key)
    by_segment: dict[str, list[Message]] = {}
    for m in records.messages:
        by_segment.setdefault(m.session_id, []).append(m)
    for s in records.segments:
        yield segment_line(s)
        for m in by_segment.get(s.session_id, []):
            yield message_line(m)
    for r in records.rotations:
        yield rotation_line(r)
    for c in records.compactions:
        yield compaction_line(c)
    for p in records.pins:
        yield pin_line(p)


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def key_line(k: SessionKeyRecord) -> str:
    return _dump(
        {
            "type": "key",
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "key": k.key,
            "owner": k.owner,
            "latest_session_id": k.latest_session_id,
            "created_at": _iso(k.created_at),
            "overrides": k.overrides,
            "last_semantic_rotation_at": _iso(k.last_semantic_rotation_at),
            # The title its user set; null: the automatic one, made from the chain itself.
            "title": k.title,
        }
    )


def segment_line(s: Segment) -> str:
    return _dump(
        {
            "type": "segment",
            "session_id": s.session_id,
            "created_at": _iso(s.created_at),
            "archived_at": _iso(s.archived_at),
            "parent_ids": list(s.parent_ids),
            "continues": list(s.continues),
            "cleared_after_seq": s.cleared_after_seq,
            "context_started_at": _iso(s.context_started_at),
            "last_activity_at": _iso(s.last_activity_at),
            # `first` for the segment no rotation made, as `sessions show` and the API
            # say (older exports wrote null there; import reads both).
            "created_reason": s.created_reason_name,
        }
    )


def message_line(m: Message) -> str:
    return _dump(
        {
            "type": "message",
            "session_id": m.session_id,
            "seq": m.seq,
            "role": m.role.value,
            "content": m.content,
            "status": m.status.value,
            "metadata": m.metadata,
            "created_at": _iso(m.created_at),
        }
    )


def rotation_line(r: RotationRecord) -> str:
    return _dump(
        {
            "type": "rotation",
            "from": r.from_session_id,
            "to": r.to_session_id,
            "reason": r.reason.value,
            "at": _iso(r.at),
            "confidence": r.confidence,
            "deciding_model": r.deciding_model,
            "in_place": r.in_place,
        }
    )


def compaction_line(c: CompactionRecord) -> str:
    return _dump(
        {
            "type": "compaction",
            "compaction_id": c.compaction_id,
            "session_id": c.session_id,
            "first_seq": c.first_seq,
            "last_seq": c.last_seq,
            "count": c.count,
            "summary": c.summary,
            "model": c.model,
            "tokens_before": c.tokens_before,
            "tokens_after": c.tokens_after,
            "created_at": _iso(c.created_at),
            "previous_compaction_id": c.previous_compaction_id,
            "instructions": c.instructions,
            "reverted": c.reverted,
        }
    )


def pin_line(p: PinRecord) -> str:
    return _dump(
        {"type": "pin", "session_id": p.session_id, "seq": p.seq, "created_at": _iso(p.created_at)}
    )
