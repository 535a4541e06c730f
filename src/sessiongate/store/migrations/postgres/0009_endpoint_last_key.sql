-- Seed 001's phone app reconnects to /api/claude/ws or /api/codex/ws without naming a key
-- and expects the conversation it last used there (DESIGN.md §11, docs/clients/seed001.md).
-- One row per user and endpoint: the key of the newest turn that endpoint ran for them.
-- Erasing the key (by anyone, by any path) erases the row, so a reconnect never points at
-- a key that is gone.

CREATE TABLE endpoint_last_key (
    owner TEXT COLLATE "C" NOT NULL,
    endpoint TEXT COLLATE "C" NOT NULL CHECK (endpoint IN ('claude', 'codex')),
    key TEXT COLLATE "C" NOT NULL REFERENCES session_keys (key) ON DELETE CASCADE,
    at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner, endpoint)
);

-- An erasure finds the rows naming its key through this index, not by a scan.
CREATE INDEX endpoint_last_key_by_key ON endpoint_last_key (key);
