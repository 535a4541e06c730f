"""Import of one key's whole chain from JSON Lines (the export side is
store/export_format.py).

Line 1 is the key header; then each segment (oldest first) followed by its messages; then
the rotation log; then the working set's compaction records and pins (older exports have
none). Parsing validates every line and the chain as a whole before anything is
written, and names the 1-based line of the first problem.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from sessiongate.core.ids import is_session_id
from sessiongate.core.keys import KeyRef, validate_session_key
from sessiongate.core.segments import (
    FIRST_SEGMENT,
    Message,
    MessageStatus,
    Role,
    RotationReason,
    RotationRecord,
    Segment,
    SegmentStatus,
    SessionKeyRecord,
)
from sessiongate.core.titles import validate_title
from sessiongate.core.users import validate_user_name
from sessiongate.core.working_set import CompactionRecord
from sessiongate.errors import ImportFormatError, SessionGateError

FORMAT_NAME = "sessiongate.chain"
FORMAT_VERSION = 1
#: A single export line larger than this is refused before JSON parsing.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: Roles the API writes. An export holding any other (`system`, say) did not come from
#: a gateway, and a thread with a stray one could break every later turn. `tool` results
#: are safe to take: context assembly pairs them with their calls and leaves out any that
#: answer none (core/tool_calls.py), so a hand-written one cannot break a model call.
IMPORTABLE_ROLES = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL})
#: Every number a store keeps fits a signed 64-bit integer.
MAX_STORED_INT = 2**63 - 1


@dataclass(slots=True)
class ChainRecords:
    key: SessionKeyRecord
    segments: list[Segment]
    messages: list[Message]
    rotations: list[RotationRecord] = field(default_factory=list)
    #: The working set's records and pins (docs/working_set.md), oldest first.
    compactions: list[CompactionRecord] = field(default_factory=list)
    pins: list[PinRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PinRecord:
    session_id: str
    seq: int
    created_at: datetime


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _KeyLine(_Strict):
    type: Literal["key"]
    format: Literal["sessiongate.chain"]
    version: Literal[1]
    key: str
    owner: str = Field(min_length=1, max_length=200)
    latest_session_id: str
    created_at: AwareDatetime
    overrides: dict[str, Any]
    last_semantic_rotation_at: AwareDatetime | None
    #: The title its user set (null: the automatic one); older exports have none.
    title: str | None = None


class _SegmentLine(_Strict):
    type: Literal["segment"]
    session_id: str
    created_at: AwareDatetime
    archived_at: AwareDatetime | None
    parent_ids: list[str]
    continues: list[str]
    cleared_after_seq: int = Field(ge=0, le=MAX_STORED_INT)
    context_started_at: AwareDatetime
    last_activity_at: AwareDatetime
    #: `first` (null in older exports) for the chain's first segment, which no rotation made.
    created_reason: RotationReason | Literal["first"] | None


class _MessageLine(_Strict):
    type: Literal["message"]
    session_id: str
    seq: int = Field(ge=1, le=MAX_STORED_INT)
    role: Role
    content: str
    status: MessageStatus
    metadata: dict[str, Any]
    created_at: AwareDatetime


class _RotationLine(_Strict):
    type: Literal["rotation"]
    from_session_id: str = Field(alias="from")
    to_session_id: str = Field(alias="to")
    reason: RotationReason
    at: AwareDatetime
    confidence: float | None = Field(allow_inf_nan=False, ge=0.0, le=1.0)
    deciding_model: str | None = Field(max_length=200)
    in_place: bool


class _CompactionLine(_Strict):
    type: Literal["compaction"]
    compaction_id: str = Field(min_length=1, max_length=200)
    session_id: str
    first_seq: int = Field(ge=1, le=MAX_STORED_INT)
    last_seq: int = Field(ge=1, le=MAX_STORED_INT)
    count: int = Field(ge=1, le=MAX_STORED_INT)
    summary: str
    model: str = Field(max_length=200)
    tokens_before: int = Field(ge=0, le=MAX_STORED_INT)
    tokens_after: int = Field(ge=0, le=MAX_STORED_INT)
    created_at: AwareDatetime
    previous_compaction_id: str | None = Field(max_length=200)
    instructions: str | None
    reverted: bool


class _PinLine(_Strict):
    type: Literal["pin"]
    session_id: str
    seq: int = Field(ge=1, le=MAX_STORED_INT)
    created_at: AwareDatetime


_AnyLine = _KeyLine | _SegmentLine | _MessageLine | _RotationLine | _CompactionLine | _PinLine
_Line = Annotated[_AnyLine, Field(discriminator="type")]
# JSON mode: strict types, but datetimes and enums may come as strings.
_LINE_ADAPTER: TypeAdapter[_Line] = TypeAdapter(_Line)


def parse_lines(lines: Iterable[str | bytes], *, max_content_chars: int) -> ChainRecords:
    """Validate a whole export; raise ImportFormatError naming the first bad line."""
    parser = ChainParser(max_content_chars=max_content_chars)
    for raw in lines:
        parser.feed(raw)
    return parser.finish()


class ChainParser:
    """An export read one line at a time, as a file is read or a request body arrives:
    each line is validated when fed (ImportFormatError names it), so only the parsed chain
    is kept, never the raw text; `finish` checks the chain as a whole."""

    def __init__(self, *, max_content_chars: int) -> None:
        self._builder = _ChainBuilder(max_content_chars)
        self._number = 0

    def feed(self, raw: str | bytes) -> None:
        self._number += 1
        number = self._number
        self._builder.line_number = number
        if isinstance(raw, bytes):
            if len(raw) > MAX_LINE_BYTES:
                raise ImportFormatError("line is too long", line=number)
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ImportFormatError("line is not valid UTF-8", line=number) from None
        elif len(raw) > MAX_LINE_BYTES:
            raise ImportFormatError("line is too long", line=number)
        if not raw.strip():
            return
        try:
            parsed = _LINE_ADAPTER.validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            detail = f"{where}: {first['msg']}" if where else first["msg"]
            raise ImportFormatError(detail, line=number) from None
        try:
            self._builder.add(parsed)
        except ImportFormatError:
            raise
        except SessionGateError as exc:
            raise ImportFormatError(exc.message, line=number) from None

    def finish(self) -> ChainRecords:
        return self._builder.finish()


class _ChainBuilder:
    def __init__(self, max_content_chars: int) -> None:
        self.max_content_chars = max_content_chars
        self.line_number = 0
        self.header: _KeyLine | None = None
        self.segments: list[Segment] = []
        self.segment_counts: dict[str, int] = {}
        self.messages: list[Message] = []
        self.rotations: list[RotationRecord] = []
        self.compactions: list[CompactionRecord] = []
        self.pins: list[PinRecord] = []

    def fail(self, message: str) -> ImportFormatError:
        return ImportFormatError(message, line=self.line_number)

    def add(self, line: _AnyLine) -> None:
        if isinstance(line, _KeyLine):
            if self.header is not None or self.segments:
                raise self.fail("the key header must be the first line, and only once")
            validate_session_key(line.key)
            validate_user_name(line.owner)
            validate_title(line.title)
            _check_finite(line.overrides, self.fail)
            self.header = line
            return
        if self.header is None:
            raise self.fail("the first line must be the key header")
        if isinstance(line, _SegmentLine):
            self._add_segment(line)
        elif isinstance(line, _MessageLine):
            self._add_message(line)
        elif isinstance(line, _RotationLine):
            self._add_rotation(line)
        elif isinstance(line, _CompactionLine):
            self._add_compaction(line)
        else:
            self._add_pin(line)

    def _after_messages(self, session_id: str, last_seq: int, what: str) -> None:
        """A working-set line names a segment already read and messages it holds."""
        if session_id not in self.segment_counts:
            raise self.fail(f"{what} refers to unknown segment {session_id}")
        if last_seq > self.segment_counts[session_id]:
            raise self.fail(f"{what} refers to message {last_seq}, past its segment's last")

    def _add_compaction(self, line: _CompactionLine) -> None:
        self._after_messages(line.session_id, line.last_seq, "compaction")
        if line.first_seq > line.last_seq:
            raise self.fail("a compaction's first_seq is after its last_seq")
        if any(c.compaction_id == line.compaction_id for c in self.compactions):
            raise self.fail(f"compaction {line.compaction_id} appears twice")
        for text in (line.summary, line.instructions or ""):
            if "\x00" in text or len(text) > self.max_content_chars:
                raise self.fail("a compaction's text is too long or holds a NUL character")
        self.compactions.append(
            CompactionRecord(
                compaction_id=line.compaction_id,
                session_id=line.session_id,
                first_seq=line.first_seq,
                last_seq=line.last_seq,
                count=line.count,
                summary=line.summary,
                model=line.model,
                tokens_before=line.tokens_before,
                tokens_after=line.tokens_after,
                created_at=line.created_at,
                previous_compaction_id=line.previous_compaction_id,
                instructions=line.instructions,
                reverted=line.reverted,
            )
        )

    def _add_pin(self, line: _PinLine) -> None:
        self._after_messages(line.session_id, line.seq, "pin")
        if any(p.session_id == line.session_id and p.seq == line.seq for p in self.pins):
            raise self.fail(f"message {line.session_id}:{line.seq} is pinned twice")
        self.pins.append(PinRecord(line.session_id, line.seq, line.created_at))

    def _add_segment(self, line: _SegmentLine) -> None:
        if self.rotations:
            raise self.fail("segments must come before the rotation log")
        if not is_session_id(line.session_id):
            raise self.fail(f"session_id {line.session_id!r} is not a UUIDv7")
        if line.session_id in self.segment_counts:
            raise self.fail(f"segment {line.session_id} appears twice")
        for parent in (*line.parent_ids, *line.continues):
            if parent not in self.segment_counts:
                raise self.fail(f"segment {line.session_id} links to unknown segment {parent}")
        if self.segments and self.segments[-1].archived_at is None:
            raise self.fail("only the last segment may be unarchived (latest)")
        reason = line.created_reason
        if reason == FIRST_SEGMENT:
            if self.segments:
                raise self.fail(
                    f"segment {line.session_id} says {FIRST_SEGMENT!r}, but only the chain's"
                    " first segment was made by no rotation"
                )
            reason = None
        assert self.header is not None
        self.segments.append(
            Segment(
                session_id=line.session_id,
                key=KeyRef(self.header.owner, self.header.key),
                status=SegmentStatus.ARCHIVED if line.archived_at else SegmentStatus.LATEST,
                created_at=line.created_at,
                archived_at=line.archived_at,
                parent_ids=tuple(line.parent_ids),
                continues=tuple(line.continues),
                cleared_after_seq=line.cleared_after_seq,
                context_started_at=line.context_started_at,
                message_count=0,
                last_activity_at=line.last_activity_at,
                created_reason=None if reason is None else RotationReason(reason),
            )
        )
        self.segment_counts[line.session_id] = 0

    def _add_message(self, line: _MessageLine) -> None:
        if not self.segments or self.segments[-1].session_id != line.session_id:
            raise self.fail("a message must follow its own segment's line")
        if line.role not in IMPORTABLE_ROLES:
            raise self.fail(f"role {line.role.value!r} is not one the gateway writes")
        if line.role is Role.TOOL and not isinstance(line.metadata.get("tool_call_id"), str):
            raise self.fail("a tool message needs metadata.tool_call_id (the call it answers)")
        _check_finite(line.metadata, self.fail)
        expected = self.segment_counts[line.session_id] + 1
        if line.seq != expected:
            raise self.fail(f"message seq {line.seq} out of order (expected {expected})")
        if len(line.content) > self.max_content_chars:
            raise self.fail(f"message content is longer than {self.max_content_chars} characters")
        try:
            line.content.encode("utf-8")
        except UnicodeEncodeError:
            raise self.fail("message content is not valid Unicode text") from None
        if "\x00" in line.content:
            # Refused on live writes too, and PostgreSQL text cannot hold it.
            raise self.fail("message content contains a NUL character")
        self.segment_counts[line.session_id] = expected
        self.messages.append(
            Message(
                session_id=line.session_id,
                seq=line.seq,
                role=line.role,
                content=line.content,
                status=line.status,
                created_at=line.created_at,
                metadata=line.metadata,
            )
        )

    def _add_rotation(self, line: _RotationLine) -> None:
        for ref in (line.from_session_id, line.to_session_id):
            if ref not in self.segment_counts:
                raise self.fail(f"rotation refers to unknown segment {ref}")
        assert self.header is not None
        self.rotations.append(
            RotationRecord(
                key=KeyRef(self.header.owner, self.header.key),
                from_session_id=line.from_session_id,
                to_session_id=line.to_session_id,
                reason=line.reason,
                at=line.at,
                confidence=line.confidence,
                deciding_model=line.deciding_model,
                in_place=line.in_place,
            )
        )

    def finish(self) -> ChainRecords:
        self.line_number += 1
        if self.header is None:
            raise self.fail("the file is empty: expected a key header")
        if not self.segments:
            raise self.fail("the chain has no segments")
        latest = self.segments[-1]
        if latest.archived_at is not None:
            raise self.fail("the last segment must be the latest (not archived)")
        if latest.session_id != self.header.latest_session_id:
            raise self.fail("latest_session_id does not name the last segment")
        for segment in self.segments:
            if segment.cleared_after_seq > self.segment_counts[segment.session_id]:
                raise self.fail(
                    f"segment {segment.session_id} is cleared after message"
                    f" {segment.cleared_after_seq}, past its last message"
                )
        segments = [_with_count(s, self.segment_counts[s.session_id]) for s in self.segments]
        h = self.header
        return ChainRecords(
            key=SessionKeyRecord(
                key=h.key,
                owner=h.owner,
                latest_session_id=h.latest_session_id,
                created_at=h.created_at,
                overrides=h.overrides,
                last_semantic_rotation_at=h.last_semantic_rotation_at,
                title=validate_title(h.title),
            ),
            segments=segments,
            messages=self.messages,
            rotations=self.rotations,
            compactions=self.compactions,
            pins=self.pins,
        )


def _with_count(segment: Segment, count: int) -> Segment:
    return replace(segment, message_count=count)


def _check_finite(value: Any, fail: Callable[[str], ImportFormatError]) -> None:
    """Refuse NaN and infinities anywhere in a JSON value: they are not JSON, and a store
    that writes them back out (or PostgreSQL's json type) would choke on them."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise fail("NaN and infinite numbers are not allowed")
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_STORED_INT:
            raise fail("a number is too large")
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


def retarget(records: ChainRecords, key: KeyRef) -> ChainRecords:
    """The same chain under another key (an import lands in the caller's namespace, or
    under the name the caller asked for)."""
    return ChainRecords(
        key=replace(records.key, key=key.name, owner=key.owner),
        segments=[replace(s, key=key) for s in records.segments],
        messages=records.messages,
        rotations=[replace(r, key=key) for r in records.rotations],
        compactions=records.compactions,
        pins=records.pins,
    )


def remap_session_ids(
    records: ChainRecords, taken: Collection[str], new_id: Callable[[], str]
) -> ChainRecords:
    """Give every segment whose id is `taken` a fresh one, rewriting every link to it
    (parents, continuations, messages, rotations, the latest pointer). Ids that are free
    are kept, so a round trip into an empty database changes nothing."""
    mapping = {s.session_id: new_id() for s in records.segments if s.session_id in taken}
    if not mapping:
        return records

    def fix(session_id: str) -> str:
        return mapping.get(session_id, session_id)

    return ChainRecords(
        key=replace(records.key, latest_session_id=fix(records.key.latest_session_id)),
        segments=[
            replace(
                s,
                session_id=fix(s.session_id),
                parent_ids=tuple(fix(p) for p in s.parent_ids),
                continues=tuple(fix(c) for c in s.continues),
            )
            for s in records.segments
        ],
        messages=[replace(m, session_id=fix(m.session_id)) for m in records.messages],
        rotations=[
            replace(r, from_session_id=fix(r.from_session_id), to_session_id=fix(r.to_session_id))
            for r in records.rotations
        ],
        compactions=[replace(c, session_id=fix(c.session_id)) for c in records.compactions],
        pins=[replace(p, session_id=fix(p.session_id)) for p in records.pins],
    )


def remap_compaction_ids(
    records: ChainRecords, taken: Collection[str], new_id: Callable[[], str]
) -> ChainRecords:
    """Give every compaction record whose id is `taken` a fresh one (and the records that
    fold it their new `previous_compaction_id`); free ids are kept."""
    mapping = {c.compaction_id: new_id() for c in records.compactions if c.compaction_id in taken}
    if not mapping:
        return records
    return replace(
        records,
        compactions=[
            replace(
                c,
                compaction_id=mapping.get(c.compaction_id, c.compaction_id),
                previous_compaction_id=None
                if c.previous_compaction_id is None
                else mapping.get(c.previous_compaction_id, c.previous_compaction_id),
            )
            for c in records.compactions
        ],
    )
