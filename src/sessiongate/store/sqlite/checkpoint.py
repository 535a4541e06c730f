"""WAL checkpoints on a background thread, so the event loop never waits for them.

SQLite's automatic checkpoint runs inside whichever commit pushes the WAL past its
threshold: that commit copies the WAL's pages into the database file and fsyncs it, a
stall of several milliseconds for every session on the event loop, a few times a second
under load. Here the store's own connection has automatic checkpoints turned off and a
thread with a connection of its own runs a PASSIVE checkpoint (it never blocks writers or
readers) on a short period. The sqlite3 module releases the GIL while SQLite works, so
the copy and the fsync overlap with turns instead of stopping them.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading

#: Keep the WAL file at most this large after it has been checkpointed and restarted.
WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024


class WalCheckpointer:
    """`start()` once after the database exists; `stop()` before closing the store."""

    def __init__(self, path: str, *, interval: float = 0.5) -> None:
        if interval <= 0:
            raise ValueError("interval must be > 0")
        self.path = path
        self.interval = interval
        self.checkpoints = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name="sessiongate-wal-checkpoint", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def checkpoint_now(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.checkpoints += 1
        except sqlite3.Error:
            # A busy or locked database is retried on the next period; a checkpoint
            # that does not happen costs WAL size, never data.
            self.failures += 1

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=True)
        try:
            conn.execute("PRAGMA busy_timeout = 1000")
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
            while not self._stop.wait(self.interval):
                self.checkpoint_now(conn)
            self.checkpoint_now(conn)
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
