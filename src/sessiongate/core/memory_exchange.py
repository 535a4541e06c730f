"""A user's memory items as a file, and back (`GET /v1/memory/export`,
`POST /v1/memory/import`, `sessiongate memory export|import`): one JSON object
`{format, version, items: [...]}`, each item as the API shows it (core/memory.py
`item_json`). Reading checks every item before anything is kept and names the first
problem by its index. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sessiongate.core.memory import (
    MemoryItem,
    MemorySource,
    Scope,
    is_memory_id,
    item_json,
    validate_memory_text,
    validate_scope,
    validate_source,
)
from sessiongate.errors import InvalidInput, SessionGateError

FORMAT_NAME = "sessiongate.memory"
FORMAT_VERSION = 1
#: Items one import may hold (a user keeps at most `[limits] max_memory_items_per_user`
#: valid ones; their history comes along).
MAX_IMPORT_ITEMS = 100_000


class InvalidMemoryExport(InvalidInput):
    code = "invalid_memory_export"


@dataclass(frozen=True, slots=True)
class ImportedItem:
    """One checked item of an export; the id is the file's, replaced when kept."""

    memory_id: str
    text: str
    scope: Scope
    pinned: bool
    source: MemorySource | None
    created_at: datetime
    invalid_at: datetime | None
    superseded_by: str | None
    edited_at: datetime | None


def export_document(items: list[MemoryItem], iso: Callable[[datetime], str]) -> dict[str, object]:
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "items": [item_json(item, iso) for item in items],
    }


def parse_export(document: object) -> list[ImportedItem]:
    """The items of an export document, checked; InvalidMemoryExport naming the first
    problem otherwise."""
    if not isinstance(document, Mapping):
        raise InvalidMemoryExport("a memory export is a JSON object")
    if document.get("format") != FORMAT_NAME or document.get("version") != FORMAT_VERSION:
        raise InvalidMemoryExport(
            f'not a memory export: expected "format": "{FORMAT_NAME}", "version": {FORMAT_VERSION}'
        )
    items = document.get("items")
    if not isinstance(items, list):
        raise InvalidMemoryExport("items must be a list")
    if len(items) > MAX_IMPORT_ITEMS:
        raise InvalidMemoryExport(f"an import holds at most {MAX_IMPORT_ITEMS} items")
    parsed: list[ImportedItem] = []
    seen: set[str] = set()
    for index, raw in enumerate(items):
        try:
            item = _item(raw)
        except SessionGateError as exc:
            raise InvalidMemoryExport(f"items[{index}]: {exc.message}") from None
        if item.memory_id in seen:
            raise InvalidMemoryExport(f"items[{index}]: id {item.memory_id} appears twice")
        seen.add(item.memory_id)
        parsed.append(item)
    return parsed


_FIELDS = {
    "id",
    "text",
    "scope",
    "pinned",
    "source",
    "created_by",
    "created_at",
    "invalid_at",
    "superseded_by",
    "edited_at",
    "score",
}


def _item(raw: Any) -> ImportedItem:
    if not isinstance(raw, Mapping):
        raise InvalidInput("an item is a JSON object")
    unknown = set(raw) - _FIELDS
    if unknown:
        raise InvalidInput(f"unknown fields {sorted(unknown)}")
    memory_id = raw.get("id")
    if not is_memory_id(memory_id):
        raise InvalidInput("id must be a memory id (mem_ and 32 hex digits)")
    assert isinstance(memory_id, str)
    pinned = raw.get("pinned", False)
    if not isinstance(pinned, bool):
        raise InvalidInput("pinned must be true or false")
    superseded_by = raw.get("superseded_by")
    if superseded_by is not None and not is_memory_id(superseded_by):
        raise InvalidInput("superseded_by must be a memory id or null")
    created_at = _time(raw.get("created_at"), "created_at")
    if created_at is None:
        raise InvalidInput("created_at is required")
    return ImportedItem(
        memory_id=memory_id,
        text=validate_memory_text(raw.get("text")),
        scope=validate_scope(raw.get("scope")),
        pinned=pinned,
        source=validate_source(raw.get("source")),
        created_at=created_at,
        invalid_at=_time(raw.get("invalid_at"), "invalid_at"),
        superseded_by=superseded_by,
        edited_at=_time(raw.get("edited_at"), "edited_at"),
    )


def _time(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be an ISO 8601 time")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name} must be an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise InvalidInput(f"{name} must name its time zone (Z or +hh:mm)")
    return parsed
