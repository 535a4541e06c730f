"""Backup and restore of a SQLite gateway's database, with SQLite's online backup API
(`sqlite3.Connection.backup`), safe while the gateway runs.

Backup: the whole database is copied in one backup step, which reads inside one read
transaction: the copy is the database as it was at one instant, with every transaction
committed before it (WAL content included) and none half-way. In WAL mode readers never
block writers, so the gateway keeps serving while the copy is made. The copy is written
to a temporary file beside PATH (0600), switched to a self-contained rollback journal,
checked (`PRAGMA integrity_check`, the schema's migrations) and only then renamed to PATH.

Restore: the backup is checked first (a sessiongate database, at a migration this version
knows, passing the integrity check), then copied into the configured database through the
same API, in one transaction of the destination. A database in use (a running gateway
holds it open) or holding data is refused unless forced. Migrations the backup predates
are applied at the next start, as for any older database.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sessiongate.errors import MigrationError, SessionGateError
from sessiongate.store.migrations import load_migrations, pending_migrations
from sessiongate.store.private_files import OWNER_ONLY_FILE, prepare_private_database

#: Tables whose rows make a database "not empty" for restore.
CONTENT_TABLES = ("users", "session_keys", "notes", "tasks", "artifacts")


class BackupError(SessionGateError):
    code = "backup_failed"
    status = 400


class DatabaseInUse(BackupError):
    code = "database_in_use"


@dataclass(frozen=True, slots=True)
class DatabaseInfo:
    schema_version: int
    users: int
    keys: int
    messages: int

    def describe(self) -> str:
        return (
            f"schema version {self.schema_version}: {self.users} user(s),"
            f" {self.keys} session key(s), {self.messages} message(s)"
        )


def inspect_database(conn: sqlite3.Connection, *, integrity: bool = True) -> DatabaseInfo:
    """Check that `conn` is a sessiongate database at a migration this version knows (it
    may be older: migrations apply at the next start) and, with `integrity`, that it
    passes `PRAGMA integrity_check`. Raises BackupError saying what is wrong."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"not a SQLite database ({exc})") from None
    if "schema_migrations" not in tables or "session_keys" not in tables:
        raise BackupError("not a sessiongate database (no schema_migrations or session_keys)")
    rows = conn.execute("SELECT version, checksum FROM schema_migrations").fetchall()
    applied = {int(r[0]): str(r[1]) for r in rows}
    if not applied:
        raise BackupError("not a sessiongate database (no migration recorded)")
    try:
        pending_migrations(load_migrations("sqlite"), applied)
    except MigrationError as exc:
        raise BackupError(f"not a schema this version knows: {exc.message}") from None
    if integrity:
        problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise BackupError("the integrity check failed: " + "; ".join(problems[:5]))

    def count(table: str) -> int:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    return DatabaseInfo(
        max(applied),
        count("users") if "users" in tables else 0,
        count("session_keys"),
        count("messages"),
    )


def _connect(path: Path, *, timeout: float = 10.0) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None, timeout=timeout)


def _open_existing(path: Path, what: str) -> sqlite3.Connection:
    if not path.is_file():
        raise BackupError(f"{what} {path} does not exist")
    return _connect(path)


def backup_database(source: Path, target: Path) -> DatabaseInfo:
    """Copy the live database at `source` to the new file `target`; what it holds."""
    if target.exists() or target.is_symlink():
        raise BackupError(f"{target} exists; choose a new file name")
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent} is not a directory")
    src = _open_existing(source, "the database")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        inspect_database(src, integrity=False)
        fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_EXCL, OWNER_ONLY_FILE)
        os.close(fd)
        dst = _connect(partial)
        try:
            src.backup(dst)  # pages=-1: one step, one read transaction, one instant
            dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            info = inspect_database(dst)
        finally:
            dst.close()
        with open(partial, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(partial, target)
        return info
    finally:
        src.close()
        for leftover in (partial, Path(f"{partial}-journal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def restore_database(backup: Path, target: Path, *, force: bool = False) -> DatabaseInfo:
    """Copy the backup at `backup` into the database at `target` (created if missing);
    what it holds. Refuses a database in use or holding data unless `force`."""
    src = _open_existing(backup, "the backup")
    try:
        info = inspect_database(src)
        existed = target.exists()
        prepare_private_database(target)
        dst = _claim(target, existed=existed, force=force)
        try:
            src.backup(dst)  # one step: the destination changes in one transaction
            dst.execute("PRAGMA journal_mode = WAL")  # as the gateway keeps it
            problems = [str(r[0]) for r in dst.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                raise BackupError("the restored database failed its integrity check")
        finally:
            dst.close()
        return info
    finally:
        src.close()


def _claim(target: Path, *, existed: bool, force: bool) -> sqlite3.Connection:
    """A connection to write the restore through. Unforced: one that holds the database
    exclusively (no other connection may have it open: a running gateway does), after
    checking it holds no data."""
    if force:
        return _connect(target)
    dst = _connect(target, timeout=0)
    try:
        dst.execute("PRAGMA locking_mode = EXCLUSIVE")
        try:
            dst.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            raise DatabaseInUse(
                f"{target} is in use (is the gateway running?): stop it first, or pass"
                " --force to overwrite it anyway"
            ) from None
        if existed:
            held = _content_rows(dst)
            if held:
                raise BackupError(
                    f"{target} already holds data ({held}): pass --force to replace it"
                )
        dst.execute("COMMIT")  # the exclusive lock stays until the connection closes
        return dst
    except BaseException:
        dst.close()
        raise


def _content_rows(conn: sqlite3.Connection) -> str:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    held = []
    for table in CONTENT_TABLES:
        if table in tables:
            rows = int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            if rows:
                held.append(f"{rows} {table}")
    if not held and tables - {"sqlite_sequence"} and "schema_migrations" not in tables:
        return "tables of another application"  # not a sessiongate database at all
    return ", ".join(held)
