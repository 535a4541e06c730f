-- The working set (DESIGN.md §12): a compaction record summarises seqs first_seq..last_seq
-- of one segment, beside its raw messages (which stay exactly as they were). A record
-- folds the one before it (previous_compaction_id). `reverted` puts its span back to raw.
-- Erased with its segment.

CREATE TABLE compactions (
    compaction_id TEXT COLLATE "C" PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES segments (session_id) ON DELETE CASCADE,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    count INTEGER NOT NULL,
    summary TEXT NOT NULL,
    model TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    previous_compaction_id TEXT,
    instructions TEXT,
    reverted BOOLEAN NOT NULL DEFAULT FALSE,
    CHECK (first_seq <= last_seq)
);

CREATE INDEX compactions_by_segment ON compactions (session_id, last_seq);
