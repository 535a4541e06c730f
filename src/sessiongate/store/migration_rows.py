"""`sessiongate migrate`'s pure rules: which SQLite tables and columns have a PostgreSQL
counterpart, what kind each column is (read from PostgreSQL's type), a SQLite value as
PostgreSQL stores it, both sides' rows in one representation for the checksums, and the
order tables are copied in (foreign keys first). No I/O.

The two normalisations are written apart on purpose: a SQLite value goes to PostgreSQL
through the store's own writers' conversions (`from_micros`, …) and comes back for the
checksum through the readers' (`to_micros`, …), so a conversion that loses anything
shows as a checksum that differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sessiongate.store.sqlite.rows import from_micros, to_micros

#: SQLite tables that hold only what SQLite derives (its triggers; recall_live, how far
#: recall_fts indexed each live segment); PostgreSQL derives its own.
SQLITE_DERIVED_TABLES = frozenset({"schema_migrations", "notes_totals", "recall_live"})
#: SQLite columns (table, column) PostgreSQL does not keep: notes_versions.chunks is a
#: count SQLite's triggers keep; PostgreSQL counts the chunks when asked.
SQLITE_DERIVED_COLUMNS = frozenset({("notes_versions", "chunks")})
#: The key chains: copied by replaying them (service/migrate_chain.py), so the guards hold.
CHAIN_TABLES = ("session_keys", "segments", "messages")
#: Rows per batch when copying and checksumming a table.
BATCH_ROWS = 5000
#: Tables of large rows (artifact chunks, up to 256 KiB each), handled a few rows at a
#: time so a migration never holds more than a few MB of them.
WIDE_TABLES = frozenset({"artifact_chunks"})
WIDE_BATCH_ROWS = 16


def batch_rows(table: str) -> int:
    """How many rows of `table` one batch of the copy or the checksum holds."""
    return WIDE_BATCH_ROWS if table in WIDE_TABLES else BATCH_ROWS


#: PostgreSQL type (pg_type.typname) → the kind of value a column holds.
_KINDS = {
    "timestamptz": "time",
    "date": "date",
    "bool": "bool",
    "json": "json",
    "jsonb": "jsonb",
    "_text": "text_array",
    "bytea": "bytes",
    "int2": "int",
    "int4": "int",
    "int8": "int",
    "float4": "float",
    "float8": "float",
    "text": "text",
    "varchar": "text",
}


class UnknownColumnType(ValueError):
    pass


def column_kind(table: str, column: str, pg_type: str) -> str:
    kind = _KINDS.get(pg_type)
    if kind is None:
        raise UnknownColumnType(
            f"{table}.{column} is of PostgreSQL type {pg_type}, which migrate cannot convert"
        )
    return kind


@dataclass(frozen=True, slots=True)
class TablePlan:
    """One table to copy: the columns both sides have (SQLite's order; PostgreSQL's
    generated columns left out), their kinds, and the primary key (the order of the copy
    and of the checksum; every column when there is none)."""

    name: str
    columns: tuple[str, ...]
    kinds: tuple[str, ...]
    order_by: tuple[str, ...]

    def kind_of(self, column: str) -> str:
        return self.kinds[self.columns.index(column)]


def plan_table(
    name: str,
    sqlite_columns: Sequence[str],
    sqlite_pk: Sequence[str],
    pg_columns: Mapping[str, str],
    pg_generated: Iterable[str] = (),
) -> TablePlan:
    """The copy of one table, or ValueError naming a SQLite column PostgreSQL lacks."""
    generated = set(pg_generated)
    missing = [
        c
        for c in sqlite_columns
        if (c not in pg_columns or c in generated) and (name, c) not in SQLITE_DERIVED_COLUMNS
    ]
    if missing:
        raise ValueError(
            f"table {name}: column(s) {', '.join(missing)} have no PostgreSQL counterpart"
        )
    columns = tuple(c for c in sqlite_columns if c in pg_columns and c not in generated)
    kinds = tuple(column_kind(name, c, pg_columns[c]) for c in columns)
    order = tuple(c for c in sqlite_pk if c in columns) or columns
    return TablePlan(name, columns, kinds, order)


def to_postgres(kind: str, value: Any) -> Any:
    """A SQLite value as the PostgreSQL column of `kind` takes it (asyncpg's types)."""
    if value is None:
        return None
    if kind == "time":
        return from_micros(int(value))
    if kind == "date":
        return date.fromisoformat(str(value))
    if kind == "bool":
        return bool(value)
    if kind == "text_array":
        return [str(v) for v in json.loads(value)]
    if kind == "bytes":
        return bytes(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    return value  # text, json and jsonb go as text


def _json_text(kind: str, value: str) -> str:
    if kind == "jsonb":  # PostgreSQL re-orders jsonb's keys: compare the parsed value
        return json.dumps(json.loads(value), sort_keys=True, ensure_ascii=False)
    return value  # json keeps its text exactly


def sqlite_canonical(kind: str, value: Any) -> Any:
    """A SQLite value in the checksums' representation."""
    if value is None:
        return None
    if kind == "time" or kind == "int":
        return int(value)
    if kind == "bool":
        return bool(value)
    if kind == "text_array":
        return list(json.loads(value))
    if kind == "bytes":
        return bytes(value).hex()
    if kind == "float":
        return float(value)
    if kind in ("json", "jsonb"):
        return _json_text(kind, str(value))
    return str(value)


def postgres_canonical(kind: str, value: Any) -> Any:
    """A value read from PostgreSQL (asyncpg's types) in the checksums' representation."""
    if value is None:
        return None
    if kind == "time":
        assert isinstance(value, datetime)
        return to_micros(value)
    if kind == "date":
        assert isinstance(value, date)
        return value.isoformat()
    if kind == "text_array":
        return list(value)
    if kind == "bytes":
        return bytes(value).hex()
    if kind == "float":
        return float(value)
    if kind in ("json", "jsonb"):
        return _json_text(kind, str(value))
    return value


class TableChecksum:
    """Rows fed in primary-key order, each as one line of its canonical values."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def add(self, canonical: Sequence[Any]) -> None:
        line = json.dumps(list(canonical), ensure_ascii=False, separators=(",", ":"))
        self._hash.update(line.encode("utf-8", "surrogatepass") + b"\n")
        self.rows += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def copy_order(tables: Sequence[str], references: Iterable[tuple[str, str, bool]]) -> list[str]:
    """`tables` with every table after the ones it references (child, parent, deferrable);
    the chain tables move as one block. Deferrable references are checked at commit and do
    not order anything. ValueError on a cycle of immediate references."""
    group = {t: ("<chain>" if t in CHAIN_TABLES else t) for t in tables}
    nodes = sorted(set(group.values()))
    needs: dict[str, set[str]] = {n: set() for n in nodes}
    for child, parent, deferrable in references:
        if deferrable or child not in group or parent not in group:
            continue
        if group[child] != group[parent]:
            needs[group[child]].add(group[parent])
    ordered: list[str] = []
    while needs:
        ready = sorted(n for n, deps in needs.items() if not deps)
        if not ready:
            raise ValueError(f"tables reference each other in a cycle: {sorted(needs)}")
        for node in ready:
            ordered.append(node)
            del needs[node]
        for deps in needs.values():
            deps.difference_update(ready)
    result: list[str] = []
    for node in ordered:
        if node == "<chain>":
            result.extend(t for t in CHAIN_TABLES if t in group)
        else:
            result.append(node)
    return result
