"""`sessiongate migrate`'s copy of the key chains (session_keys, segments, messages) into
PostgreSQL, replayed in the order the gateway wrote them, so the guard triggers that keep
archived segments immutable hold during the copy and never need switching off.

The triggers allow: a segment inserted unarchived; a key pointing at an unarchived
segment of its own; messages appended to a key's latest segment only; a latest segment
archived; the pointer moved on from an archived segment only. So the chains are copied
by generation: every key's first segment (n = 0), then every key's second, … For each
generation: its segments are inserted with `archived_at` left empty, the keys are
created (n = 0) or their pointers moved on to them, their messages are copied (each
segment is its key's latest at that moment), and the segments the source has archived
are stamped with their `archived_at`, which also fills PostgreSQL's recall index
(`message_search`) exactly as the gateway's own archiving does. A key's latest segment
is always its last generation; the others follow SQLite's insertion order (rowid), as
PostgreSQL's `pos` then does.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sessiongate.store.migration_rows import TablePlan, batch_rows, to_postgres

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection

Progress = Callable[[str, int], None]


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def converted(plan: TablePlan, row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(to_postgres(kind, value) for kind, value in zip(plan.kinds, row, strict=True))


async def copy_rows(
    src: sqlite3.Connection,
    pg: Connection,
    plan: TablePlan,
    where: str,
    params: Sequence[Any],
    progress: Progress,
) -> None:
    """Every row of `plan.name` matching `where`, in primary-key order, in batches."""
    cursor = src.execute(
        f"SELECT {', '.join(q(c) for c in plan.columns)} FROM {q(plan.name)}"
        f" {where} ORDER BY {', '.join(q(c) for c in plan.order_by)}",
        params,
    )
    while batch := cursor.fetchmany(batch_rows(plan.name)):
        await pg.copy_records_to_table(
            plan.name, records=[converted(plan, r) for r in batch], columns=list(plan.columns)
        )
        progress(plan.name, len(batch))


def generations(src: sqlite3.Connection) -> list[list[tuple[str, str]]]:
    """(segment, key) pairs by generation: the n-th segment of every key, its latest last."""
    rows = src.execute(
        "SELECT s.session_id, s.key, k.key IS NOT NULL,"
        " coalesce(k.latest_session_id = s.session_id, 0) AS is_latest"
        " FROM segments s LEFT JOIN session_keys k ON k.key = s.key"
        " ORDER BY s.key, is_latest, s.rowid"
    ).fetchall()
    orphans = sorted({str(r[1]) for r in rows if not r[2]})
    if orphans:
        raise ValueError(f"segments of key(s) without a key row: {', '.join(orphans[:5])}")
    found: list[list[tuple[str, str]]] = []
    previous_key: str | None = None
    n = 0
    for session_id, key, _, _ in rows:
        n = n + 1 if key == previous_key else 0
        previous_key = key
        if n == len(found):
            found.append([])
        found[n].append((str(session_id), str(key)))
    return found


async def copy_chains(
    src: sqlite3.Connection,
    pg: Connection,
    plans: dict[str, TablePlan],
    progress: Progress,
) -> None:
    keys_plan, segments_plan, messages_plan = (
        plans["session_keys"],
        plans["segments"],
        plans["messages"],
    )
    archived_at = segments_plan.columns.index("archived_at")
    session_id_at = segments_plan.columns.index("session_id")
    key_at = keys_plan.columns.index("key")
    latest_at = keys_plan.columns.index("latest_session_id")
    segment_ids = "WHERE session_id IN (SELECT value FROM json_each(?))"
    for n, pairs in enumerate(generations(src)):
        ids = json.dumps([session_id for session_id, _ in pairs])
        rows = src.execute(
            f"SELECT {', '.join(q(c) for c in segments_plan.columns)} FROM segments"
            f" {segment_ids} ORDER BY rowid",
            (ids,),
        ).fetchall()
        records = [converted(segments_plan, r) for r in rows]
        archive = [
            (r[archived_at], r[session_id_at]) for r in records if r[archived_at] is not None
        ]
        unarchived = [(*r[:archived_at], None, *r[archived_at + 1 :]) for r in records]
        await pg.copy_records_to_table(
            "segments", records=unarchived, columns=list(segments_plan.columns)
        )
        progress("segments", len(unarchived))
        first_of = {key: session_id for session_id, key in pairs}
        if n == 0:
            key_rows = src.execute(
                f"SELECT {', '.join(q(c) for c in keys_plan.columns)} FROM session_keys"
                " ORDER BY rowid"
            ).fetchall()
            key_records = [
                (*c[:latest_at], first_of[c[key_at]], *c[latest_at + 1 :])
                for c in (converted(keys_plan, r) for r in key_rows)
            ]
            await pg.copy_records_to_table(
                "session_keys", records=key_records, columns=list(keys_plan.columns)
            )
            progress("session_keys", len(key_records))
        else:
            await pg.executemany(
                "UPDATE session_keys SET latest_session_id = $1 WHERE key = $2",
                [(session_id, key) for session_id, key in pairs],
            )
        await copy_rows(
            src,
            pg,
            messages_plan,
            "WHERE segment_id IN (SELECT value FROM json_each(?))",
            (ids,),
            progress,
        )
        if archive:
            await pg.executemany(
                "UPDATE segments SET archived_at = $1 WHERE session_id = $2", archive
            )
