-- How many times a segment's pins changed (DESIGN.md §12): every pin and unpin that
-- changes something adds one, in the same transaction. A process that keeps a segment's
-- pins in memory asks for this number and the pins' count in one small query to know
-- whether another gateway pinned or unpinned since it read them (an unpin followed by
-- a pin leaves the count as it was; the version moves). Erased with its segment.

CREATE TABLE pin_versions (
    session_id TEXT COLLATE "C" PRIMARY KEY REFERENCES segments (session_id) ON DELETE CASCADE,
    version BIGINT NOT NULL
);
