"""A key's chain as JSON Lines, out and in (docs/api.md, export and import): the export
read page by page, and an import file checked whole and aimed at its target key before
anything is written. `ChainExchange` is the session service's export and import
(service/sessions.py); the functions below it are what it calls under the key's lock.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from sessiongate.core.ids import IdGenerator
from sessiongate.core.keys import KeyRef, validate_session_key
from sessiongate.core.rotation import LifecyclePolicy
from sessiongate.core.segments import RotationRecord, Segment, SessionKeyRecord
from sessiongate.core.session_caps import SessionCaps, check_import_segments
from sessiongate.core.users import Caller, validate_user_name
from sessiongate.errors import ImportFormatError, SessionGateError, SessionNotFound
from sessiongate.service.overrides import OverrideTargets, validate_overrides
from sessiongate.service.thread_cache import ThreadCache
from sessiongate.store.base import Store

# The longest line an import may hold: the HTTP layer reads an import's body up to it.
from sessiongate.store.exchange import MAX_LINE_BYTES as MAX_LINE_BYTES
from sessiongate.store.exchange import ChainParser, ChainRecords, PinRecord, retarget
from sessiongate.store.export_format import (
    compaction_line,
    key_line,
    message_line,
    pin_line,
    rotation_line,
    segment_line,
)
from sessiongate.store.locks import KeyLocks

#: Messages read per query while an export streams.
EXPORT_PAGE = 500


class ChainExchange:
    """Export and import for `SessionService` (service/sessions.py), which owns these
    attributes."""

    store: Store
    locks: KeyLocks
    threads: ThreadCache
    ids: IdGenerator
    policy: LifecyclePolicy
    override_targets: OverrideTargets
    caps: SessionCaps
    max_content_chars: int

    if TYPE_CHECKING:

        async def existing(self, ref: KeyRef) -> SessionKeyRecord: ...

        def keys_changed(self) -> None: ...

    async def export(self, key: str, caller: Caller, *, owner: str | None = None) -> list[str]:
        """The whole export in memory (the CLI and tests); the API streams it."""
        return [line async for line in await self.export_stream(key, caller, owner=owner)]

    async def export_stream(
        self, key: str, caller: Caller, *, owner: str | None = None
    ) -> AsyncIterator[str]:
        """The key's chain as JSON Lines, read page by page: memory stays flat however
        long the conversation. Refusals (404, 403) are raised here, before the first line.

        The snapshot is the key row, its segments and its rotation log, read under the
        key's lock (no turn or rotation can fall between them); messages are append-only,
        so each segment's first `message_count` messages, read later, are exactly the ones
        the snapshot saw."""
        ref = caller.key(key, owner=owner)
        async with self.locks.hold(ref):
            record = await self.existing(ref)
            segments = await self.store.chain(ref)
            rotations = await self.store.rotations(ref)
        return export_lines(self.store, ref, record, segments, rotations)

    async def import_chain(
        self,
        lines: Iterable[str | bytes] | AsyncIterable[str | bytes],
        caller: Caller,
        *,
        key: str | None = None,
        owner: str | None = None,
        operator: bool = False,
    ) -> SessionKeyRecord:
        """Validate the whole file (read line by line: a request body as it arrives),
        then write it in one transaction, into the caller's namespace under the file's key
        name (or `key`). Segment ids already in use get fresh ones; into an empty
        database the ids are kept. The caps hold: a chain with more segments than a key
        may hold, or one key more than its owner may have, is refused (409).

        `operator` (the CLI, run by whoever runs the gateway) may restore into any user's
        namespace: `owner`, else the file's own owner. Over the API nobody writes into
        another user's namespace, admins included."""
        parsed = await read_chain(lines, max_content_chars=self.max_content_chars)
        records = aim_import(
            parsed,
            caller,
            key=key,
            owner=owner,
            operator=operator,
            policy=self.policy,
            override_targets=self.override_targets,
            caps=self.caps,
        )
        target = records.key.ref
        async with self.locks.hold(target):
            self.threads.drop(target)
            await self.store.import_chain(
                records, self.ids.new, max_keys=self.caps.max_keys_per_user
            )
            self.keys_changed()
        return await self.existing(target)


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
    async for line in working_set_lines(store, segments):
        yield line


async def working_set_lines(store: Store, segments: list[Segment]) -> AsyncIterator[str]:
    """The segments' compaction records and pins (docs/working_set.md), only those within
    the messages the snapshot saw (a compaction written since covers later ones)."""
    from sessiongate.service.compaction import compaction_store
    from sessiongate.service.pins import pin_store

    records, pins = compaction_store(store), pin_store(store)
    for segment in segments:
        if records is not None:
            for record in await records.for_segment(segment.session_id):
                if record.last_seq <= segment.message_count:
                    yield compaction_line(record)
    for segment in segments:
        if pins is not None:
            times = await pins.pin_times(segment.session_id)
            for seq in sorted(times):
                if seq <= segment.message_count:
                    yield pin_line(PinRecord(segment.session_id, seq, times[seq]))


async def read_chain(
    lines: Iterable[str | bytes] | AsyncIterable[str | bytes], *, max_content_chars: int
) -> ChainRecords:
    """An export file (its lines, or a request body's lines as they arrive) parsed and
    validated line by line; ImportFormatError names the first bad line."""
    parser = ChainParser(max_content_chars=max_content_chars)
    if isinstance(lines, AsyncIterable):
        async for raw in lines:
            parser.feed(raw)
    else:
        for raw in lines:
            parser.feed(raw)
    return parser.finish()


def aim_import(
    records: ChainRecords,
    caller: Caller,
    *,
    key: str | None,
    owner: str | None,
    operator: bool,
    policy: LifecyclePolicy,
    override_targets: OverrideTargets,
    caps: SessionCaps,
) -> ChainRecords:
    """The parsed file aimed at its target: the caller's namespace under the file's key
    name (or `key`). `operator` (the CLI) may aim at any user's namespace: `owner`, else
    the file's own owner. Raises before anything is written (a chain with more segments
    than a key may hold, too; whether the owner may have one more key is the store's to
    say, in the transaction that writes it)."""
    name = records.key.key if key is None else key
    if operator:
        target = KeyRef(validate_user_name(owner or records.key.owner), name)
        validate_session_key(name)
    else:
        target = caller.key(name, owner=owner, write=True)
    check_import_segments(name, len(records.segments), caps)
    try:
        overrides = validate_overrides(records.key.overrides, policy, override_targets)
    except SessionGateError as exc:
        raise ImportFormatError(exc.message, line=1) from None
    records = retarget(records, target)
    records.key = replace(records.key, overrides=overrides)
    return records
