"""Memory items, the pure part (DESIGN.md §13): what an item holds, what may be kept, how
an update supersedes an item instead of overwriting it, which items a turn sees, and how
they fit the turn's token budget. No I/O here; service/memory.py does the rest.

An item is one short statement about a user ("prefers metric units"), kept per user with
a scope (everywhere, one agent, one session key), where it came from and who made it. An
edit of the text never changes a stored text: a new item is kept and the old one gets
`invalid_at` and `superseded_by`, so the history of what the assistant believed stays
readable (`GET /v1/memory?include_invalid=true`).

Injection: `pinned` items always enter a turn; with `relevant`, the best `max_items` of
the others by hybrid search against the new message join them. They enter as ONE system
message, which must fit what the budget leaves after the system text and the newest
message; when it does not, items go lowest score first, pinned ones last, and the turn
goes on (never failed for memory).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from sessiongate.core.ids import is_session_id
from sessiongate.core.keys import validate_session_key
from sessiongate.errors import ContentTooLarge, InvalidInput

#: Every memory id starts with this (the extraction prompt shows ids; a model may only
#: name ids that look like these).
MEMORY_ID_PREFIX = "mem_"
#: One item is one statement: a sentence or a short paragraph, not a document (notes are
#: for documents).
MAX_MEMORY_CHARS = 2000
#: The longest search query (GET /v1/memory/search?q=, memory_search).
MAX_MEMORY_QUERY_CHARS = 2000
#: Results a search may return, and items a listing page may hold.
MAX_SEARCH_LIMIT = 50
MAX_PAGE = 200
#: Relevant items a turn receives unless `[agents.<name>.memory] max_items` says otherwise.
DEFAULT_MAX_ITEMS = 8
#: Message ids a source may name.
MAX_SOURCE_MESSAGES = 100
#: An agent name in a scope (`agent:<name>`): a TOML key a person typed.
MAX_AGENT_NAME_CHARS = 200

Scope = str  # "user" | "agent:<name>" | "key:<key>"
CreatedBy = Literal["user", "agent", "extraction", "import"]
CREATED_BY: tuple[CreatedBy, ...] = ("user", "agent", "extraction", "import")
InjectPolicy = Literal["off", "pinned", "relevant"]
InjectReason = Literal["pinned", "relevant"]

USER_SCOPE = "user"
_ID_RE = re.compile(r"mem_[0-9a-f]{32}")
_AGENT_RE = re.compile(r"[A-Za-z0-9_.:@-]+")
# Tab, line feed and carriage return are text; every other control character is not.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")


class InvalidMemoryId(InvalidInput):
    code = "invalid_memory_id"


class InvalidScope(InvalidInput):
    code = "invalid_scope"


class MemoryTooLarge(ContentTooLarge):
    code = "memory_too_large"


@dataclass(frozen=True, slots=True)
class MemorySource:
    """Where an item came from: the key, segment and messages it was said in."""

    key: str
    session_id: str | None = None
    message_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "session_id": self.session_id,
            "message_ids": list(self.message_ids),
        }


@dataclass(frozen=True, slots=True)
class MemoryItem:
    memory_id: str
    user: str
    text: str
    scope: Scope
    pinned: bool
    source: MemorySource | None
    created_by: CreatedBy
    created_at: datetime
    #: When it stopped being true (superseded, or invalidated by extraction); None: valid.
    invalid_at: datetime | None = None
    #: The item that replaced it (an update); None for one invalidated without successor.
    superseded_by: str | None = None
    #: When the user last changed it in place (pin, scope): extraction leaves it alone.
    edited_at: datetime | None = None

    @property
    def valid(self) -> bool:
        return self.invalid_at is None


def new_memory_id(uuid: str) -> str:
    """A memory id from a fresh UUIDv7 of the gateway's id generator (so ids sort in
    creation order): `mem_` and its 32 hex digits."""
    return MEMORY_ID_PREFIX + uuid.replace("-", "")


def is_memory_id(value: object) -> bool:
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def validate_memory_id(value: object) -> str:
    if not is_memory_id(value):
        raise InvalidMemoryId("a memory id is mem_ followed by 32 lower-case hex digits")
    assert isinstance(value, str)
    return value


def validate_memory_text(text: object, max_chars: int = MAX_MEMORY_CHARS) -> str:
    """The item's text with its surrounding whitespace gone; a typed 4xx for anything a
    store should not keep (not a string, empty, too long, control characters)."""
    if not isinstance(text, str):
        raise InvalidInput("text must be a string", code="invalid_text")
    text = text.strip()
    if not text:
        raise InvalidInput("text must not be empty", code="invalid_text")
    if len(text) > max_chars:
        raise MemoryTooLarge(
            f"the memory item is {len(text)} characters; at most {max_chars} are kept"
            " (notes are for longer texts)"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            "text is not valid Unicode (lone surrogate)", code="invalid_text"
        ) from None
    if _CONTROL.search(text):
        raise InvalidInput("text must not contain control characters", code="invalid_text")
    return text


def validate_scope(scope: object) -> Scope:
    """`user`, `agent:<name>` or `key:<key>` (a valid session key); None means `user`."""
    if scope is None:
        return USER_SCOPE
    if not isinstance(scope, str):
        raise InvalidScope('scope must be "user", "agent:<name>" or "key:<key>"')
    if scope == USER_SCOPE:
        return scope
    kind, sep, name = scope.partition(":")
    if sep and kind == "agent" and name:
        if len(name) <= MAX_AGENT_NAME_CHARS and _AGENT_RE.fullmatch(name):
            return scope
        raise InvalidScope("agent:<name> names an agent: letters, digits and _ . : @ -")
    if sep and kind == "key" and name:
        try:
            validate_session_key(name)
        except InvalidInput as exc:
            raise InvalidScope(f"key:<key>: {exc.message}") from None
        return scope
    raise InvalidScope('scope must be "user", "agent:<name>" or "key:<key>"')


def is_message_id(value: object) -> bool:
    """A stored message's id: its segment's id, a colon, its position (`<uuid>:<seq>`)."""
    if not isinstance(value, str):
        return False
    session_id, sep, seq = value.rpartition(":")
    return bool(sep) and is_session_id(session_id) and seq.isascii() and seq.isdigit()


def validate_source(source: object) -> MemorySource | None:
    """A source as an API body or an import line gives it: None, or
    `{key, session_id?, message_ids?}`."""
    if source is None or isinstance(source, MemorySource):
        return source
    if not isinstance(source, Mapping):
        raise InvalidInput("source must be an object or null", code="invalid_source")
    unknown = set(source) - {"key", "session_id", "message_ids"}
    if unknown:
        raise InvalidInput(f"source: unknown fields {sorted(unknown)}", code="invalid_source")
    key = source.get("key")
    try:
        validate_session_key(key)
    except InvalidInput as exc:
        raise InvalidInput(f"source.key: {exc.message}", code="invalid_source") from None
    assert isinstance(key, str)
    session_id = source.get("session_id")
    if session_id is not None and not (isinstance(session_id, str) and is_session_id(session_id)):
        raise InvalidInput("source.session_id must be a segment id", code="invalid_source")
    ids = source.get("message_ids") or []
    if (
        not isinstance(ids, list)
        or len(ids) > MAX_SOURCE_MESSAGES
        or not all(is_message_id(i) for i in ids)
    ):
        raise InvalidInput(
            f"source.message_ids must be at most {MAX_SOURCE_MESSAGES} message ids",
            code="invalid_source",
        )
    return MemorySource(key, session_id, tuple(ids))


def validate_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("q must be a non-empty string", code="invalid_query")
    if len(query) > MAX_MEMORY_QUERY_CHARS:
        raise InvalidInput(
            f"q is longer than {MAX_MEMORY_QUERY_CHARS} characters", code="invalid_query"
        )
    if _CONTROL.search(query):
        raise InvalidInput("q must not contain control characters", code="invalid_query")
    return query


def validate_limit(limit: object, maximum: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise InvalidInput(
            f"limit must be a whole number from 1 to {maximum}", code="invalid_limit"
        )
    return limit


# -- updates never overwrite ----------------------------------------------------------


def supersede(
    old: MemoryItem, new_id: str, text: str, created_by: CreatedBy, now: datetime
) -> tuple[MemoryItem, MemoryItem]:
    """An update of `old`'s text: the new item (same user, scope and pin; the source is
    kept, since the statement still came from there) and `old` as it is stored from now
    on, invalid since `now` and naming its successor. Nothing else of `old` changes."""
    new = MemoryItem(
        memory_id=new_id,
        user=old.user,
        text=text,
        scope=old.scope,
        pinned=old.pinned,
        source=old.source,
        created_by=created_by,
        created_at=now,
    )
    return new, replace(old, invalid_at=now, superseded_by=new_id)


def text_fingerprint(text: str) -> str:
    """The hash a forgotten or edited text is remembered by (never the text itself):
    case, accents' composed form, surrounding punctuation and runs of spaces do not make
    two texts different."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _SPACES.sub(" ", folded).strip(" .!?;:,\"'")
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()


def source_matches(tombstone: MemorySource | None, source: MemorySource | None) -> bool:
    """Whether `source` is the same source a tombstone was recorded for: both none, or
    the same key and (when both name messages) at least one message in common."""
    if tombstone is None or source is None:
        return tombstone is None and source is None
    if tombstone.key != source.key:
        return False
    if tombstone.message_ids and source.message_ids:
        return bool(set(tombstone.message_ids) & set(source.message_ids))
    return True


# -- which items a turn sees ---------------------------------------------------------


def applies_to(item: MemoryItem, agent: str, key: str) -> bool:
    """Whether a valid item's scope covers a turn of `agent` on `key`."""
    if not item.valid:
        return False
    if item.scope == USER_SCOPE:
        return True
    kind, _, name = item.scope.partition(":")
    return (kind == "agent" and name == agent) or (kind == "key" and name == key)


@dataclass(frozen=True, slots=True)
class Injected:
    """An item chosen for a turn, and why: pinned, or relevant with its search score."""

    item: MemoryItem
    reason: InjectReason
    score: float | None = None

    def metadata(self) -> dict[str, object]:
        return {"memory_id": self.item.memory_id, "reason": self.reason, "score": self.score}


def choose_items(
    items: Iterable[MemoryItem],
    policy: InjectPolicy,
    scores: Mapping[str, float],
    max_items: int = DEFAULT_MAX_ITEMS,
) -> list[Injected]:
    """The items a turn receives before any budget: with `off`, none; otherwise every
    pinned item (oldest first), then with `relevant` the best `max_items` of the unpinned
    ones that `scores` (memory id → search score, higher is better) ranks, best first.
    `items` must already be the valid items that apply to the turn."""
    if policy == "off":
        return []
    pool = list(items)
    chosen = [Injected(i, "pinned") for i in sorted(pool, key=_age) if i.pinned]
    if policy == "relevant" and max_items > 0:
        ranked = sorted(
            (i for i in pool if not i.pinned and i.memory_id in scores),
            key=lambda i: (-scores[i.memory_id], i.memory_id),
        )
        chosen.extend(Injected(i, "relevant", scores[i.memory_id]) for i in ranked[:max_items])
    return chosen


def _age(item: MemoryItem) -> tuple[datetime, str]:
    return (item.created_at, item.memory_id)


MEMORY_HEADER = (
    "What you remember about this user (their memory items; the user can see, edit and"
    " forget them):"
)


def render_memory(chosen: Sequence[Injected]) -> str:
    """The one system message the chosen items enter the context as."""
    lines = [MEMORY_HEADER]
    lines.extend(f"- [{c.item.memory_id}] {c.item.text}" for c in chosen)
    return "\n".join(lines)


def fit_memory(
    chosen: Sequence[Injected], allowance: int | None, cost: Callable[[str], int]
) -> list[Injected]:
    """`chosen` cut until its block costs at most `allowance` tokens (None: no limit):
    relevant items go first, lowest score first, then pinned ones, newest first. The
    order of the rest is kept. Empty when not even one item fits."""
    kept = list(chosen)
    if allowance is None:
        return kept
    # Drop order: relevant by ascending score, then pinned from the newest.
    relevant = sorted(
        (c for c in kept if c.reason == "relevant"),
        key=lambda c: (c.score or 0.0, c.item.memory_id),
    )
    pinned = sorted(
        (c for c in kept if c.reason == "pinned"), key=lambda c: _age(c.item), reverse=True
    )
    drop_order = [*relevant, *pinned]
    for candidate in drop_order:
        if not kept or cost(render_memory(kept)) <= allowance:
            break
        kept.remove(candidate)
    if kept and cost(render_memory(kept)) > allowance:
        return []
    return kept


def memory_allowance(budget: int | None, fixed_tokens: int) -> int | None:
    """What a turn's budget leaves the memory block once the system text, the recalled
    fragments and the newest message (`fixed_tokens`) are counted; None: no budget."""
    if budget is None:
        return None
    return max(budget - fixed_tokens, 0)


# -- export ------------------------------------------------------------------------


def item_json(item: MemoryItem, iso: Callable[[datetime], str]) -> dict[str, object]:
    """An item as the API, the tools and an export show it."""
    return {
        "id": item.memory_id,
        "text": item.text,
        "scope": item.scope,
        "pinned": item.pinned,
        "source": None if item.source is None else item.source.to_json(),
        "created_by": item.created_by,
        "created_at": iso(item.created_at),
        "invalid_at": None if item.invalid_at is None else iso(item.invalid_at),
        "superseded_by": item.superseded_by,
        "edited_at": None if item.edited_at is None else iso(item.edited_at),
    }
