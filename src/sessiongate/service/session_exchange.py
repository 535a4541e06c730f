"""A key's chain as JSON Lines, out and in (docs/api.md, export and import): the export
read page by page, and an import file checked whole and aimed at its target key before
anything is written. The session service (service/sessions.py) takes the key's lock and
calls these.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import replace

from sessiongate.core.keys import KeyRef, validate_session_key
from sessiongate.core.rotation import LifecyclePolicy
from sessiongate.core.segments import RotationRecord, Segment, SessionKeyRecord
from sessiongate.core.users import Caller, validate_user_name
from sessiongate.errors import ImportFormatError, SessionGateError, SessionNotFound
from sessiongate.service.overrides import OverrideTargets, validate_overrides
from sessiongate.store.base import Store
from sessiongate.store.exchange import ChainRecords, parse_lines, retarget
from sessiongate.store.export_format import key_line, message_line, rotation_line, segment_line

#: Messages read per query while an export streams.
EXPORT_PAGE = 500


async def export_lines(
    store: Store,
    ref: KeyRef,
    record: SessionKeyRecord,
    segments: list[Segment],
    rotations: list[RotationRecord],
) -> AsyncIterator[str]:
    """The snapshot's lines, each segment's messages read page by page: memory stays flat
    however long the conversation. Messages are append-only, so each segment's first
    `message_count` messages, read now, are exactly the ones the snapshot saw."""
    yield key_line(record)
    for segment in segments:
        yield segment_line(segment)
        after = 0
        while after < segment.message_count:
            page = await store.list_messages(
                segment.session_id,
                after_seq=after,
                limit=min(EXPORT_PAGE, segment.message_count - after),
            )
            if not page:  # erased while the export ran: end it short, visibly
                raise SessionNotFound(f"{ref.name!r} was erased during the export")
            for message in page:
                yield message_line(message)
            after = page[-1].seq
    for rotation in rotations:
        yield rotation_line(rotation)


def import_records(
    lines: Iterable[str | bytes],
    caller: Caller,
    *,
    key: str | None,
    owner: str | None,
    operator: bool,
    policy: LifecyclePolicy,
    override_targets: OverrideTargets,
    max_content_chars: int,
) -> ChainRecords:
    """The whole file validated and aimed at its target: the caller's namespace under the
    file's key name (or `key`). `operator` (the CLI) may aim at any user's namespace:
    `owner`, else the file's own owner. Raises before anything is written."""
    records = parse_lines(lines, max_content_chars=max_content_chars)
    name = records.key.key if key is None else key
    if operator:
        target = KeyRef(validate_user_name(owner or records.key.owner), name)
        validate_session_key(name)
    else:
        target = caller.key(name, owner=owner, write=True)
    try:
        overrides = validate_overrides(records.key.overrides, policy, override_targets)
    except SessionGateError as exc:
        raise ImportFormatError(exc.message, line=1) from None
    records = retarget(records, target)
    records.key = replace(records.key, overrides=overrides)
    return records
