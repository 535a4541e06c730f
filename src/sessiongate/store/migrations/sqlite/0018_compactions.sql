-- The working set (DESIGN.md §12): a compaction record summarises seqs first_seq..last_seq
-- of one segment, beside its raw messages (which stay exactly as they were). A record
-- folds the one before it (previous_compaction_id). `reverted` puts its span back to raw.
-- Erased with its segment. Times are microseconds since the epoch.

CREATE TABLE compactions (
    compaction_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES segments (session_id) ON DELETE CASCADE,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    count INTEGER NOT NULL,
    summary TEXT NOT NULL,
    model TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    previous_compaction_id TEXT,
    instructions TEXT,
    reverted INTEGER NOT NULL DEFAULT 0,
    CHECK (first_seq <= last_seq)
);

CREATE INDEX compactions_by_segment ON compactions (session_id, last_seq);
