"""`sessiongate migrate`: a SQLite database copied into an empty PostgreSQL database, every
table the schema holds (discovered at run time, not listed here), in one PostgreSQL
transaction that also applies the PostgreSQL migrations and is committed only when every
table's row count and checksum agree on both sides. A failure leaves the target as empty
as it was.

The source is read inside one read transaction: a snapshot, so a gateway writing to the
file meanwhile changes nothing the copy sees (docs/operations.md migrates a
`sessiongate backup` copy instead, so the gateway keeps serving undisturbed).
Tables go in foreign-key order; the key chains by replaying them
(service/migrate_chain.py), so no trigger is switched off; identity columns' sequences
are moved past the highest copied value.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from sessiongate.errors import SessionGateError
from sessiongate.service.migrate_chain import copy_chains, copy_rows, q
from sessiongate.store.migration_rows import (
    CHAIN_TABLES,
    SQLITE_DERIVED_TABLES,
    TableChecksum,
    TablePlan,
    batch_rows,
    copy_order,
    plan_table,
    postgres_canonical,
    sqlite_canonical,
)

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection

#: (table, rows copied so far, the table's rows in the source)
Progress = Callable[[str, int, int], None]


class MigrateError(SessionGateError):
    code = "migrate_failed"
    status = 400


class TargetNotEmpty(MigrateError):
    code = "target_not_empty"


class ChecksumMismatch(MigrateError):
    code = "checksum_mismatch"


@dataclass(frozen=True, slots=True)
class TableReport:
    name: str
    source_rows: int
    target_rows: int
    source_checksum: str
    target_checksum: str

    @property
    def matches(self) -> bool:
        return (self.source_rows, self.source_checksum) == (
            self.target_rows,
            self.target_checksum,
        )


@dataclass(frozen=True, slots=True)
class MigrationReport:
    schema_version: int
    tables: tuple[TableReport, ...]
    seconds: float

    @property
    def rows(self) -> int:
        return sum(t.source_rows for t in self.tables)


def open_source(path: Path) -> sqlite3.Connection:
    """The SQLite file, read-only, checked to be a sessiongate database at this version's
    newest migration."""
    from sessiongate.store.migrations import load_migrations, pending_migrations
    from sessiongate.store.sqlite.backup import BackupError, inspect_database

    if not path.is_file():
        raise MigrateError(f"{path} does not exist")
    conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    conn.isolation_level = None
    try:
        inspect_database(conn, integrity=False)
        applied = {
            int(r[0]): str(r[1])
            for r in conn.execute("SELECT version, checksum FROM schema_migrations")
        }
        pending = pending_migrations(load_migrations("sqlite"), applied)
    except BackupError as exc:
        conn.close()
        raise MigrateError(f"{path}: {exc.message}") from None
    if pending:
        conn.close()
        raise MigrateError(
            f"{path} is at schema version {max(applied)}, older than this sessiongate's"
            f" ({pending[-1].version}): start the gateway on it once to bring it up to date"
        )
    return conn


def source_tables(src: sqlite3.Connection) -> dict[str, tuple[list[str], list[str]]]:
    """Each table to copy → (its columns, its primary key's columns), from the schema:
    not SQLite's own, not full-text indexes (virtual tables and their shadow tables), not
    the tables only SQLite's triggers fill."""
    rows = src.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = [str(n) for n, sql in rows if str(sql or "").upper().startswith("CREATE VIRTUAL")]
    found: dict[str, tuple[list[str], list[str]]] = {}
    for name, _ in rows:
        name = str(name)
        if (
            name.startswith("sqlite_")
            or name in virtual
            or any(name.startswith(f"{v}_") for v in virtual)
            or name in SQLITE_DERIVED_TABLES
        ):
            continue
        info = src.execute(f"PRAGMA table_info({q(name)})").fetchall()
        columns = [str(r[1]) for r in info]
        pk = [str(r[1]) for r in sorted((r for r in info if r[5]), key=lambda r: int(r[5]))]
        found[name] = (columns, pk)
    return found


async def refuse_non_empty(pg: Connection, tables: list[str]) -> None:
    held: list[str] = []
    for table in ["schema_migrations", *tables]:
        exists = await pg.fetchval("SELECT to_regclass($1) IS NOT NULL", q(table))
        if exists and await pg.fetchval(f"SELECT EXISTS (SELECT 1 FROM {q(table)})"):
            held.append(table)
    if held:
        raise TargetNotEmpty(
            "the target database is not empty (rows in " + ", ".join(held) + "): migrate"
            " copies into an empty database only; create a new one (createdb) and try again"
        )


async def target_plans(
    pg: Connection, tables: dict[str, tuple[list[str], list[str]]]
) -> tuple[dict[str, TablePlan], list[str]]:
    """Each table's plan against PostgreSQL's schema, and the order to copy them in."""
    columns: dict[str, dict[str, str]] = {}
    generated: dict[str, set[str]] = {}
    for r in await pg.fetch(
        "SELECT table_name, column_name, udt_name, is_generated FROM information_schema.columns"
        " WHERE table_schema = current_schema()"
    ):
        columns.setdefault(r[0], {})[r[1]] = r[2]
        if r[3] == "ALWAYS":
            generated.setdefault(r[0], set()).add(r[1])
    missing = sorted(t for t in tables if t not in columns)
    if missing:
        raise MigrateError(f"table(s) with no PostgreSQL counterpart: {', '.join(missing)}")
    try:
        plans = {
            name: plan_table(name, cols, pk, columns[name], generated.get(name, ()))
            for name, (cols, pk) in tables.items()
        }
    except ValueError as exc:
        raise MigrateError(str(exc)) from None
    references = [
        (str(r[0]), str(r[1]), bool(r[2]))
        for r in await pg.fetch(
            "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text, c.condeferrable"
            " FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
            " WHERE c.contype = 'f' AND n.nspname = current_schema()"
        )
    ]
    try:
        return plans, copy_order(sorted(plans), references)
    except ValueError as exc:
        raise MigrateError(str(exc)) from None


async def move_sequences(pg: Connection, tables: list[str]) -> None:
    """Identity columns continue past the highest value copied."""
    for r in await pg.fetch(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = ANY ($1::text[])"
        " AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')",
        tables,
    ):
        sequence = await pg.fetchval("SELECT pg_get_serial_sequence($1, $2)", q(r[0]), r[1])
        if sequence is not None:
            await pg.execute(
                f"SELECT setval($1, m) FROM (SELECT max({q(r[1])}) AS m FROM {q(r[0])}) t"
                " WHERE m IS NOT NULL",
                sequence,
            )


def sqlite_checksum(src: sqlite3.Connection, plan: TablePlan) -> TableChecksum:
    checksum = TableChecksum()
    order = ", ".join(q(c) for c in plan.order_by)
    cursor = src.execute(
        f"SELECT {', '.join(q(c) for c in plan.columns)} FROM {q(plan.name)} ORDER BY {order}"
    )
    while batch := cursor.fetchmany(batch_rows(plan.name)):
        for row in batch:
            checksum.add([sqlite_canonical(k, v) for k, v in zip(plan.kinds, row, strict=True)])
    return checksum


async def postgres_checksum(pg: Connection, plan: TablePlan) -> TableChecksum:
    """The same rows in the same order: text compared byte-wise (COLLATE "C"), as SQLite's
    BINARY collation does."""
    checksum = TableChecksum()
    order = ", ".join(
        q(c) + (' COLLATE "C"' if plan.kind_of(c) == "text" else "") for c in plan.order_by
    )
    query = f"SELECT {', '.join(q(c) for c in plan.columns)} FROM {q(plan.name)} ORDER BY {order}"
    async for row in pg.cursor(query, prefetch=batch_rows(plan.name)):
        checksum.add([postgres_canonical(k, v) for k, v in zip(plan.kinds, row, strict=True)])
    return checksum


async def migrate(source: Path, url: str, progress: Progress | None = None) -> MigrationReport:
    """Copy the SQLite database at `source` into the empty PostgreSQL database at `url`."""
    import asyncpg

    from sessiongate.store.migrations import apply_postgres_migrations
    from sessiongate.store.postgres.rows import CONNECT_TIMEOUT_SECONDS, translate

    started = time.monotonic()
    src = open_source(source)
    try:
        src.execute("BEGIN")  # one snapshot for the copy and the checksums alike
        tables = source_tables(src)
        totals = {t: int(src.execute(f"SELECT count(*) FROM {q(t)}").fetchone()[0]) for t in tables}
        done = dict.fromkeys(tables, 0)

        def advance(table: str, rows: int) -> None:
            done[table] += rows
            if progress is not None:
                progress(table, done[table], totals[table])

        try:
            pg = await asyncpg.connect(url, timeout=CONNECT_TIMEOUT_SECONDS)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise MigrateError(f"cannot connect to PostgreSQL: {exc}") from None
        current = "the target"
        try:
            await refuse_non_empty(pg, sorted(tables))
            current = "the schema"
            async with pg.transaction():
                version = await apply_postgres_migrations(pg)
                # A migration may have checked its rows with SET CONSTRAINTS ALL IMMEDIATE
                # (0002 does); in this one transaction the chain's references are checked
                # at commit again, as they are declared.
                await pg.execute("SET CONSTRAINTS ALL DEFERRED")
                plans, order = await target_plans(pg, tables)
                for table in order:
                    current = "the key chains" if table in CHAIN_TABLES else table
                    if table in CHAIN_TABLES:
                        if table == CHAIN_TABLES[0]:
                            await copy_chains(src, pg, plans, advance)
                    else:
                        await copy_rows(src, pg, plans[table], "", (), advance)
                    if progress is not None and totals[table] == 0:
                        progress(table, 0, 0)
                current = "the sequences"
                await move_sequences(pg, order)
                await pg.execute("SET CONSTRAINTS ALL IMMEDIATE")
                reports = []
                for table in order:
                    mine = sqlite_checksum(src, plans[table])
                    theirs = await postgres_checksum(pg, plans[table])
                    reports.append(
                        TableReport(
                            table, mine.rows, theirs.rows, mine.hexdigest(), theirs.hexdigest()
                        )
                    )
                wrong = [r.name for r in reports if not r.matches]
                if wrong:
                    raise ChecksumMismatch(
                        "the copy differs from the source in table(s) "
                        + ", ".join(wrong)
                        + ": nothing was committed"
                    )
        except asyncpg.PostgresError as exc:
            domain = translate(exc)
            detail = domain.args[0] if domain is not None else str(exc)
            raise MigrateError(f"PostgreSQL refused the copy of {current}: {detail}") from None
        except (ValueError, TypeError, asyncpg.InterfaceError) as exc:
            # A SQLite value its column's type cannot hold (SQLite stores any value anywhere).
            raise MigrateError(f"a value in {current} cannot be converted: {exc}") from None
        finally:
            await pg.close()
    finally:
        src.close()
    return MigrationReport(version, tuple(reports), time.monotonic() - started)
