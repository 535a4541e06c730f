"""Session operations other than running a turn: rotate, revert, recall, inspect, export.

Every operation that changes a key runs under that key's lock, so it never interleaves
with a turn on the same key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sessiongate.config import parse_day_boundary
from sessiongate.core.clock import Clock
from sessiongate.core.ids import IdGenerator, is_session_id
from sessiongate.core.keys import validate_session_key
from sessiongate.core.rotation import ActionKind, LifecycleAction, LifecyclePolicy, manual_action
from sessiongate.core.segments import (
    KeySummary,
    Message,
    MessageStatus,
    RecallFragment,
    Role,
    RotationReason,
    RotationRecord,
    Segment,
    SessionKeyRecord,
)
from sessiongate.durations import parse_optional_duration
from sessiongate.errors import (
    InvalidInput,
    InvalidSessionId,
    NothingToRevert,
    SegmentNotFound,
    SessionNotFound,
)
from sessiongate.service.locks import KeyLocks
from sessiongate.service.thread_cache import ThreadCache
from sessiongate.store.base import Store
from sessiongate.store.exchange import export_lines, parse_lines

RotationListener = Callable[[RotationRecord], None]
MAX_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking. Owners see their own keys; an admin may read every key."""

    name: str
    admin: bool = False


@dataclass(frozen=True, slots=True)
class ChainView:
    key: SessionKeyRecord
    latest: Segment
    segments: list[Segment]
    rotations: list[RotationRecord]


class SessionService:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        ids: IdGenerator,
        policy: LifecyclePolicy,
        locks: KeyLocks,
        max_content_chars: int = 100_000,
    ) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids
        self.policy = policy
        self.locks = locks
        self.max_content_chars = max_content_chars
        self.threads = ThreadCache()
        store.on_key_changed(self._key_changed_elsewhere)
        self._listeners: list[RotationListener] = []

    # -- hooks ------------------------------------------------------------------

    def on_rotation(self, listener: RotationListener) -> None:
        """Called after every rotation and in-place clear is committed."""
        self._listeners.append(listener)

    def _announce(self, record: RotationRecord) -> None:
        for listener in self._listeners:
            listener(record)

    # -- ownership --------------------------------------------------------------

    async def owned_key(self, key: str, caller: Caller, *, write: bool) -> SessionKeyRecord:
        """The key's record, or SessionNotFound when it is missing *or* not the caller's:
        another user's key is indistinguishable from a missing one."""
        validate_session_key(key)
        record = await self.store.get_key(key)
        if record is None or (record.owner != caller.name and not (caller.admin and not write)):
            raise SessionNotFound(f"no session with key {key!r}")
        return record

    async def check_writable(self, key: str, caller: Caller) -> None:
        """Fail early (before a stream starts) when `key` belongs to someone else."""
        validate_session_key(key)
        record = await self.store.get_key(key)
        if record is not None and record.owner != caller.name:
            raise SessionNotFound(f"no session with key {key!r}")

    def policy_for(self, record: SessionKeyRecord) -> LifecyclePolicy:
        """The global lifecycle policy with this key's overrides applied."""
        return apply_lifecycle_overrides(self.policy, record.overrides.get("lifecycle") or {})

    async def set_overrides(
        self, key: str, caller: Caller, changes: dict[str, Any]
    ) -> SessionKeyRecord:
        """Merge `changes` into the key's overrides; a None value removes that override."""
        async with self.locks.hold(key):
            record = await self.owned_key(key, caller, write=True)
            merged = dict(record.overrides)
            for name, value in changes.items():
                if value is None:
                    merged.pop(name, None)
                elif name == "lifecycle":
                    current = dict(merged.get("lifecycle") or {})
                    current.update(value)
                    lifecycle = {k: v for k, v in current.items() if v is not None}
                    apply_lifecycle_overrides(self.policy, lifecycle)  # validates
                    merged["lifecycle"] = lifecycle
                else:
                    merged[name] = value
            return await self.store.set_overrides(key, merged)

    def _key_changed_elsewhere(self, key: str | None) -> None:
        if key is None:
            self.threads.clear()
        else:
            self.threads.drop(key)

    async def thread_tail(
        self, key: str, segment: Segment, limit: int, *, remember: bool = True
    ) -> list[Message]:
        """The newest `limit` messages of the segment's thread, from the cache when the
        store's view of the segment still matches it. `remember=False` reads without
        replacing the cached window (a smaller read would shrink it)."""
        cached = self.threads.get(key, segment, limit)
        if cached is not None:
            return cached
        messages = await self.store.thread_tail(segment, limit)
        if remember:
            self.threads.put(key, segment, limit, messages)
        return messages

    async def append_message(
        self,
        key: str,
        session_id: str,
        *,
        role: Role,
        content: str,
        now: datetime,
        status: MessageStatus = MessageStatus.COMPLETE,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        message = await self.store.append_message(
            session_id, role=role, content=content, now=now, status=status, metadata=metadata
        )
        self.threads.appended(key, message)
        return message

    async def open_key(self, key: str, caller: Caller) -> tuple[SessionKeyRecord, Segment]:
        """Resolve a key for writing, creating it (with its first segment) when new."""
        validate_session_key(key)
        record = await self.store.get_key(key)
        if record is None:
            return await self.store.create_key(key, caller.name, self.ids.new(), self.clock.now())
        if record.owner != caller.name:
            raise SessionNotFound(f"no session with key {key!r}")
        return record, await self.store.latest_segment(key)

    # -- lifecycle --------------------------------------------------------------

    async def apply(
        self, key: str, segment: Segment, action: LifecycleAction, now: datetime
    ) -> tuple[Segment, RotationRecord]:
        """Commit a decided action (caller holds the key's lock) and announce it."""
        if action.kind is ActionKind.CLEAR_IN_PLACE:
            new_segment, record = await self.store.clear_in_place(
                key, expected_latest=segment.session_id, reason=action.reason, now=now
            )
        else:
            new_segment, record = await self.store.rotate(
                key,
                expected_latest=segment.session_id,
                new_session_id=self.ids.new(),
                reason=action.reason,
                now=now,
                confidence=action.confidence,
                deciding_model=action.deciding_model,
            )
        self._announce(record)
        return new_segment, record

    async def rotate_now(self, key: str, caller: Caller) -> tuple[Segment, RotationRecord | None]:
        """`/new` by API. A key seen for the first time is simply created."""
        async with self.locks.hold(key):
            record = await self.store.get_key(validate_session_key(key))
            if record is None:
                now = self.clock.now()
                _, segment = await self.store.create_key(key, caller.name, self.ids.new(), now)
                return segment, None
            if record.owner != caller.name:
                raise SessionNotFound(f"no session with key {key!r}")
            segment = await self.store.latest_segment(key)
            action = manual_action(self.policy_for(record))
            return await self.apply(key, segment, action, self.clock.now())

    async def revert(self, key: str, caller: Caller) -> tuple[Segment, RotationRecord]:
        """Undo the last semantic rotation: a continuation segment whose thread is the
        archived segment before the split followed by the one after it. Nothing is
        rewritten; nothing is lost."""
        async with self.locks.hold(key):
            await self.owned_key(key, caller, write=True)
            rotations = await self.store.rotations(key)
            latest = await self.store.latest_segment(key)
            last = rotations[-1] if rotations else None
            if (
                last is None
                or last.reason is not RotationReason.SEMANTIC
                or last.to_session_id != latest.session_id
            ):
                raise NothingToRevert(
                    f"the latest segment of {key!r} was not made by a semantic rotation"
                )
            new_segment, record = await self.store.rotate(
                key,
                expected_latest=latest.session_id,
                new_session_id=self.ids.new(),
                reason=RotationReason.REVERT,
                now=self.clock.now(),
                continues=(last.from_session_id, last.to_session_id),
                extra_parents=(last.from_session_id,),
            )
            self._announce(record)
            return new_segment, record

    # -- reads ------------------------------------------------------------------

    async def recall(
        self, key: str, caller: Caller, query: str, rationale: str, limit: int = 5
    ) -> list[RecallFragment]:
        """Explicit history recall. The rationale is mandatory: it is why the history is
        being looked at, and it travels with every fragment."""
        await self.owned_key(key, caller, write=False)
        validate_recall(query, rationale, limit)
        latest = await self.store.latest_segment(key)
        return await self.store.recall(
            key,
            query,
            rationale=rationale.strip(),
            limit=limit,
            exclude_session_ids=thread_segment_ids(latest),
        )

    async def list_keys(self, caller: Caller) -> list[KeySummary]:
        return await self.store.list_keys(None if caller.admin else caller.name)

    async def show(self, key: str, caller: Caller) -> ChainView:
        record = await self.owned_key(key, caller, write=False)
        segments = await self.store.chain(key)
        latest = next(s for s in segments if s.session_id == record.latest_session_id)
        return ChainView(record, latest, segments, await self.store.rotations(key))

    async def messages(
        self, key: str, caller: Caller, session_id: str, *, after: int = 0, limit: int = 100
    ) -> list[Message]:
        await self.owned_key(key, caller, write=False)
        if not is_session_id(session_id):
            raise InvalidSessionId(f"{session_id!r} is not a session id")
        segment = await self.store.get_segment(session_id)
        if segment is None or segment.key != key:
            raise SegmentNotFound(f"no segment {session_id} under {key!r}")
        if after < 0 or not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"after must be >= 0 and limit between 1 and {MAX_PAGE}")
        return await self.store.list_messages(session_id, after_seq=after, limit=limit)

    # -- exchange and erasure ---------------------------------------------------

    async def export(self, key: str, caller: Caller) -> Iterator[str]:
        await self.owned_key(key, caller, write=False)
        return export_lines(await self.store.export_chain(key))

    async def import_chain(
        self, lines: Iterable[str | bytes], caller: Caller, *, keep_owner: bool = False
    ) -> SessionKeyRecord:
        """Validate the whole file, then write it in one transaction. The importing caller
        becomes the owner unless an admin asks to keep the file's owner."""
        records = parse_lines(lines, max_content_chars=self.max_content_chars)
        if not (keep_owner and caller.admin):
            records.key = SessionKeyRecord(**{**_record_fields(records.key), "owner": caller.name})
        async with self.locks.hold(records.key.key):
            self.threads.drop(records.key.key)
            await self.store.import_chain(records)
        record = await self.store.get_key(records.key.key)
        assert record is not None
        return record

    async def delete(self, key: str, caller: Caller) -> None:
        async with self.locks.hold(key):
            record = await self.store.get_key(validate_session_key(key))
            if record is None or (record.owner != caller.name and not caller.admin):
                raise SessionNotFound(f"no session with key {key!r}")
            self.threads.drop(key)
            await self.store.delete_key(key)


def apply_lifecycle_overrides(
    policy: LifecyclePolicy, overrides: dict[str, Any]
) -> LifecyclePolicy:
    """Per-key lifecycle overrides: idle_window, day_boundary, semantic_enabled,
    semantic_threshold. Raises InvalidInput naming the bad field."""
    try:
        result = policy
        if "idle_window" in overrides:
            result = replace(result, idle_window=parse_optional_duration(overrides["idle_window"]))
        if "day_boundary" in overrides:
            result = replace(result, day_boundary=parse_day_boundary(overrides["day_boundary"]))
        semantic = result.semantic
        if "semantic_enabled" in overrides:
            semantic = replace(semantic, enabled=bool(overrides["semantic_enabled"]))
        if "semantic_threshold" in overrides:
            semantic = replace(semantic, threshold=float(overrides["semantic_threshold"]))
        return replace(result, semantic=semantic)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"lifecycle override: {exc}", code="invalid_override") from None


def validate_recall(query: object, rationale: object, limit: object) -> None:
    if not isinstance(rationale, str) or not rationale.strip():
        raise InvalidInput("recall needs a rationale", code="invalid_recall")
    if not isinstance(query, str) or not query.strip() or len(query) > 2000:
        raise InvalidInput("recall query must be 1-2000 characters", code="invalid_recall")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 50:
        raise InvalidInput("recall limit must be between 1 and 50", code="invalid_recall")


def thread_segment_ids(segment: Segment) -> tuple[str, ...]:
    """The segments whose messages the context may read directly (not via recall)."""
    return (segment.session_id, *segment.continues)


def _record_fields(record: SessionKeyRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}
