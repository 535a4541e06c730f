-- Seed 001's phone app reconnects to /api/claude/ws or /api/codex/ws without naming a key
-- and expects the conversation it last used there (DESIGN.md §11, docs/clients/seed001.md).
-- One row per user and endpoint: the key of the newest turn that endpoint ran for them.
-- Erasing the key deletes the row (an erase hook), and a row whose key is gone is never
-- read (the lookup joins session_keys). No foreign key, as in the PostgreSQL schema.
-- Times are microseconds since the epoch, as everywhere in this schema.

CREATE TABLE endpoint_last_key (
    owner TEXT NOT NULL,
    endpoint TEXT NOT NULL CHECK (endpoint IN ('claude', 'codex')),
    key TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (owner, endpoint)
);

-- An erasure deletes the rows naming its key through this index, not by a scan.
CREATE INDEX endpoint_last_key_by_key ON endpoint_last_key (key);
