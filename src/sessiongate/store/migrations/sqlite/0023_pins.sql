-- Pins of the working set (DESIGN.md §12): a pinned message stays raw in every context
-- of its segment (never summarised away, never trimmed before unpinned ones). A pin names
-- a message by its segment and seq; the message itself is unchanged. Erased with its
-- segment. Times are microseconds since the epoch.

CREATE TABLE pins (
    session_id TEXT NOT NULL REFERENCES segments (session_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
);
